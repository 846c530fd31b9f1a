"""Read GPU telemetry that Prometheus scraped from dcgm-exporter (or ``powerlab collect``).

:func:`read_prometheus` asks a Prometheus server's HTTP API (``/api/v1/query_range``)
for each dcgm-exporter metric over ``[start, end]`` at ``step``, splits long ranges into
requests of at most ``max_points`` points (Prometheus refuses a range query of more than
11,000 points per series), and maps the series to the canonical telemetry frame through
:data:`PROMETHEUS_QUERY_MAP`: W stay W, the energy counter goes from mJ to J, °C, MHz,
the clock-event (throttle) bitmask as an unsigned integer.

Identity comes from dcgm-exporter's labels: ``Hostname`` (else the scrape ``instance``),
``gpu`` (the NVML index) and ``UUID``.

Prometheus evaluates a range query at ``start, start + step, ...``: each value is the
latest sample scraped at or before that time (within its 5-minute lookback).  The
result therefore has the scrape resolution at best; a ``step`` shorter than the scrape
interval repeats samples.

Prometheus stores float64: bitmask bits beyond 2**53 are not kept exactly by Prometheus
itself (NVML's clock-event reasons use the low bits).

Bring a range into a store::

    from powerlab.iotools import read_prometheus
    from powerlab.telemetry import write_store
    tel = read_prometheus("http://prometheus:9090", "2026-12-01T00:00Z", "2026-12-02T00:00Z",
                          step="15s", selector='Hostname=~"node0[1-4]"')
    write_store(tel, "telemetry/")

References
----------
.. [1] Prometheus, "HTTP API", range queries.
   https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries
.. [2] NVIDIA, dcgm-exporter, default counters. https://github.com/NVIDIA/dcgm-exporter
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..exceptions import ParseError, PowerlabError
from .dcgm import PROMETHEUS_VARIABLE_MAP

__all__ = ["PROMETHEUS_QUERY_MAP", "read_prometheus"]

#: dcgm-exporter metric -> (canonical column, unit in Prometheus, factor to canonical).
#: ``power_w`` comes from ``DCGM_FI_DEV_POWER_USAGE_INSTANT`` where a GPU has that series,
#: otherwise from ``DCGM_FI_DEV_POWER_USAGE`` (dcgm-exporter's default power metric).
PROMETHEUS_QUERY_MAP: dict[str, tuple[str, str, float]] = {
    # the exposition reader's table, with the two power series told apart
    **{k: v for k, v in PROMETHEUS_VARIABLE_MAP.items()
       if k not in ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_FAN_SPEED")},
    "DCGM_FI_DEV_POWER_USAGE_INSTANT": ("power_w", "W", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_avg_w", "W", 1.0),
}

#: Prometheus' limit on the points of one range-query series.
PROMETHEUS_MAX_POINTS = 11_000


def _utc(t, name: str) -> pd.Timestamp:
    try:
        ts = pd.Timestamp(t)
    except (ValueError, TypeError) as exc:
        raise PowerlabError(f"{name}: expected a time such as 2026-12-01T00:00Z, "
                            f"got {t!r}") from exc
    if ts is pd.NaT:
        raise PowerlabError(f"{name}: expected a time, got {t!r}")
    if ts.tzinfo is None:
        raise PowerlabError(f"{name} {t!r} has no time zone; give a tz-aware (UTC) time")
    return ts.tz_convert("UTC")


def _step_s(step) -> float:
    try:
        s = (float(step) if isinstance(step, (int, float))
             else pd.Timedelta(step).total_seconds())
    except (ValueError, TypeError) as exc:
        raise PowerlabError(f"step: expected seconds or a duration such as '15s', "
                            f"got {step!r}") from exc
    if not 0.001 <= s < math.inf:
        raise PowerlabError(f"step must be at least 1 ms and finite, got {step!r}")
    return s


def _get(url: str, params: dict, timeout_s: float) -> dict:
    import urllib.error
    import urllib.parse
    import urllib.request

    full = f"{url}/api/v1/query_range?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(full, timeout=timeout_s) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("error", "")
        except (ValueError, OSError):
            detail = ""
        raise PowerlabError(f"Prometheus at {url} answered HTTP {exc.code} to "
                            f"query_range {params['query']!r}"
                            + (f": {detail}" if detail else "")) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PowerlabError(f"cannot reach Prometheus at {url}: {reason}") from exc
    try:
        doc = json.loads(body)
        if doc["status"] != "success":
            raise PowerlabError(f"Prometheus at {url}: {doc.get('error', doc['status'])}")
        data = doc["data"]
        if data["resultType"] != "matrix":
            raise KeyError("resultType")
        return data
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"{url}/api/v1/query_range: expected Prometheus' JSON answer "
                         f"(status, data.resultType 'matrix', data.result), got "
                         f"{body[:80]!r}") from exc


def read_prometheus(url: str, start, end, step="15s", *, selector: str = "",
                    metrics: Iterable[str] | None = None, max_points: int = PROMETHEUS_MAX_POINTS,
                    timeout_s: float = 60.0) -> pd.DataFrame:
    """Read dcgm-exporter metrics from a Prometheus server into canonical telemetry.

    Parameters
    ----------
    url : str
        The server, e.g. ``http://prometheus:9090`` (a path prefix is kept).
    start, end : datetime-like
        The range, tz-aware (both ends included).
    step : float or str, default "15s"
        Resolution of the range query [s], or a duration such as ``"15s"``.  Use the
        scrape interval: shorter steps repeat samples.
    selector : str, optional
        Extra label matchers for every query, e.g. ``'Hostname=~"node0[1-4]"'``.
    metrics : iterable of str, optional
        dcgm-exporter metric names to read; default every key of
        :data:`PROMETHEUS_QUERY_MAP`.
    max_points : int, default 11000
        Most points per series in one request; longer ranges are split.
    timeout_s : float, default 60
        Timeout of each HTTP request [s].

    Returns
    -------
    pandas.DataFrame
        Canonical telemetry (``scope = "gpu"``), one row per GPU and evaluation time,
        sorted by host, GPU and time.

    Raises
    ------
    powerlab.exceptions.PowerlabError
        Bad arguments, or the server cannot be reached or refuses a query.
    powerlab.exceptions.ParseError
        The server's answer is not Prometheus' JSON.
    """
    from ..telemetry import schema

    t0, t1 = _utc(start, "start"), _utc(end, "end")
    if t1 < t0:
        raise PowerlabError(f"end {t1.isoformat()} is before start {t0.isoformat()}")
    dt = _step_s(step)
    if int(max_points) < 2:
        raise PowerlabError(f"max_points must be at least 2, got {max_points}")
    names = list(PROMETHEUS_QUERY_MAP) if metrics is None else list(metrics)
    unknown = [m for m in names if m not in PROMETHEUS_QUERY_MAP]
    if unknown:
        raise PowerlabError(f"metrics: unknown {unknown}; expected some of "
                            f"{list(PROMETHEUS_QUERY_MAP)}")
    url = str(url).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise PowerlabError(f"url: expected http://host:port, got {url!r}")
    s0, s1 = t0.value / 1e9, t1.value / 1e9
    n_steps = math.floor((s1 - s0) / dt + 1e-9)
    per_req = int(max_points) - 1  # steps per request
    frames = []
    for name in names:
        col, _unit, factor = PROMETHEUS_QUERY_MAP[name]
        query = f"{name}{{{selector}}}"
        for k in range(0, n_steps + 1, per_req + 1):
            a = s0 + k * dt
            b = s0 + min(k + per_req, n_steps) * dt
            data = _get(url, {"query": query, "start": f"{a:.3f}", "end": f"{b:.3f}",
                              "step": f"{dt:g}"}, timeout_s)
            for series in data["result"]:
                lab = series.get("metric", {})
                vals = series.get("values", [])
                if not vals or "gpu" not in lab:
                    continue
                arr = np.array([(float(t), float(v)) for t, v in vals], dtype="float64")
                frames.append(pd.DataFrame({
                    "t": arr[:, 0], "host": lab.get("Hostname") or lab.get("instance", ""),
                    "gpu": int(lab["gpu"]), "uuid": lab.get("UUID"), "col": col,
                    "metric": name, "value": arr[:, 1] * factor}))
    if not frames:
        return schema.conform(schema.empty_frame())
    long = pd.concat(frames, ignore_index=True)
    long["uuid"] = long["uuid"].fillna("")
    # power_w: the instantaneous series, else dcgm-exporter's POWER_USAGE
    avg = long[long["col"] == "power_avg_w"]
    inst_keys = set(map(tuple, long.loc[long["col"] == "power_w", ["host", "gpu"]]
                        .drop_duplicates().to_numpy().tolist()))
    fallback = avg[[(h, g) not in inst_keys for h, g in zip(avg["host"], avg["gpu"])]]
    long = pd.concat([long, fallback.assign(col="power_w")], ignore_index=True)
    wide = long.pivot_table(index=["t", "host", "gpu", "uuid"], columns="col",
                            values="value", aggfunc="last").reset_index()
    out = pd.DataFrame({
        "timestamp": pd.to_datetime(np.round(wide["t"].to_numpy() * 1e3).astype("int64"),
                                    unit="ms", utc=True),
        "host": wide["host"].astype("string"),
        "scope": "gpu",
        "gpu_index": wide["gpu"].astype("Int16"),
        "gpu_uuid": wide["uuid"].replace("", pd.NA).astype("string"),
    })
    for col in sorted(set(long["col"])):
        v = wide[col].to_numpy(dtype="float64")
        if col == "throttle_reasons":
            ok = np.isfinite(v) & (v >= 0)
            arr = pd.array(np.where(ok, v, 0).astype("uint64"), dtype="UInt64")
            arr[~ok] = pd.NA
            out[col] = arr
        else:
            out[col] = v
    return schema.conform(out)
