"""The collector's ``/metrics`` endpoint: the latest samples under dcgm-exporter's names."""

from __future__ import annotations

import math

from ..exceptions import PowerlabError

__all__ = ["serve_metrics"]

# DCGM field names used by dcgm-exporter, the column they come from and a scale.
DCGM_FIELDS = (
    ("DCGM_FI_DEV_POWER_USAGE", "power_avg_w", 1.0, "Power draw (in W)."),
    ("DCGM_FI_DEV_POWER_USAGE_INSTANT", "power_w", 1.0, "Current power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_j", 1000.0,
     "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_SM_CLOCK", "clock_sm_mhz", 1.0, "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "clock_mem_mhz", 1.0, "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "temp_gpu_c", 1.0, "GPU temperature (in C)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "temp_mem_c", 1.0, "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_UTIL", "util_gpu_pct", 1.0, "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "util_mem_pct", 1.0, "Memory utilization (in %)."),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w", 1.0, "Power management limit (in W)."),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "throttle_reasons", 1.0,
     "Current clock event (throttle) reasons bitmask."),
)


def serve_metrics(latest, host: str, port: int, addr: str):
    """Serve the latest samples at ``/metrics`` under dcgm-exporter's names.

    Parameters
    ----------
    latest : callable
        Called at every scrape; returns ``(gpu_index, uuid, model_name, values)`` per GPU
        that is up, ``values`` mapping canonical column names to their latest reading.
    host : str
        Value of the ``Hostname`` label.
    port : int
        TCP port (0: any free port).
    addr : str
        Address to bind.

    Returns
    -------
    http.server.HTTPServer
        The running server (``shutdown()`` and ``server_close()`` stop it).
    """
    try:
        from prometheus_client import CollectorRegistry, start_http_server
        from prometheus_client.core import GaugeMetricFamily
    except ImportError as exc:  # pragma: no cover
        raise PowerlabError("--prometheus-port needs prometheus-client "
                            "(pip install 'powerlab[nvml]')") from exc
    class _Metrics:
        def collect(self):
            gpus = latest()
            labels = ["gpu", "UUID", "modelName", "Hostname"]
            for name, col, scale, doc in DCGM_FIELDS:
                fam = GaugeMetricFamily(name, doc, labels=labels)
                for idx, uuid_, model, values in gpus:
                    v = values.get(col)
                    if v is None or (isinstance(v, float) and math.isnan(v)):
                        continue
                    fam.add_metric([str(idx), str(uuid_), model, host],
                                   float(v) * scale)
                yield fam

    registry = CollectorRegistry()
    registry.register(_Metrics())
    try:
        httpd, _ = start_http_server(int(port), addr=addr, registry=registry)
    except OSError as exc:
        raise PowerlabError(f"cannot serve /metrics on port {port}: "
                            f"{exc.strerror or exc}") from exc
    return httpd
