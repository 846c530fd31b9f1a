"""Live recording through NVML: the collector and its store side tables.

Modules
-------
:mod:`~powerlab.collect.nvml`        the NVML boundary (the only module importing pynvml)
:mod:`~powerlab.collect.collector`   the running collector: sampling loop, writer, retries
:mod:`~powerlab.collect.sidetables`  status events and static GPU facts beside the telemetry
:mod:`~powerlab.collect.metrics`     the ``/metrics`` endpoint under dcgm-exporter's names
:mod:`~powerlab.collect.slots`       per-GPU state of a running collector, frames and tables
:mod:`~powerlab.collect.run_report`  what a run achieved (rates, jitter, energy both ways)
:mod:`~powerlab.collect.fake`        a simulated NVML library (C, built on demand) for demos and tests

This wing imports only :mod:`powerlab.telemetry` (and :mod:`powerlab.exceptions`).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "collector": (
        "Collector",
    ),
    "run_report": (
        "CollectorReport",
    ),
    "sidetables": (
        "DEVICE_COLUMNS", "EVENT_COLUMNS", "read_devices", "read_events",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
