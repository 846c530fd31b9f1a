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

import http.client
import json
import math
import socket
import threading
import time
import urllib.parse
import warnings
from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd

from ..exceptions import DataQualityWarning, ParseError, PowerlabError
from ..telemetry import schema
from ..telemetry.timeutil import to_utc
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


#: Largest answer read from one request [bytes] (``max_response_bytes``).
MAX_RESPONSE_BYTES = 256 * 2**20
#: Largest plausible power of one GPU [W]: values above (1e308, +Inf) are masked, counted.
MAX_GPU_POWER_W = 5_000.0
_MAX_REDIRECTS = 3


def _fetch(full: str, timeout_s: float, max_bytes: int) -> bytes:
    """GET ``full`` within one deadline for the whole exchange (a server dripping a byte
    at a time cannot hold it), at most ``max_bytes``, following at most
    :data:`_MAX_REDIRECTS` redirects and only to the same scheme."""
    deadline = time.monotonic() + timeout_s
    for _ in range(_MAX_REDIRECTS + 1):
        parts = urllib.parse.urlsplit(full)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PowerlabError(f"cannot reach Prometheus at {full[:200]}: only http:// "
                                "and https:// URLs are read")
        left = deadline - time.monotonic()
        if left <= 0:
            raise PowerlabError(f"Prometheus at {parts.netloc} did not answer within "
                                f"{timeout_s:g} s (timeout_s)")
        body, redirect = _exchange(full, parts, left, timeout_s, max_bytes)
        if redirect is None:
            return body
        full = redirect
    raise PowerlabError(f"Prometheus at {full[:200]}: more than {_MAX_REDIRECTS} redirects")


def _exchange(full: str, parts, left: float, timeout_s: float,
              max_bytes: int) -> tuple[bytes | None, str | None]:
    """One GET of ``full`` (split into ``parts``) that a timer cuts off after ``left``
    seconds: ``(body, None)``, or ``(None, URL)`` for a redirect to the same scheme."""
    cls = http.client.HTTPSConnection if parts.scheme == "https" \
        else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=left)
    fired = threading.Event()
    held: list = []   # the socket (http.client drops conn.sock once the reply owns it)

    def kill(conn=conn, fired=fired, held=held):
        fired.set()
        sock = conn.sock or (held[0] if held else None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(left, kill)
    timer.daemon = True
    timer.start()
    try:
        target = parts.path or "/"
        conn.connect()
        held.append(conn.sock)
        conn.request("GET", target + (f"?{parts.query}" if parts.query else ""),
                     headers={"Accept-Encoding": "identity", "Accept": "application/json"})
        resp = conn.getresponse()
        if 300 <= resp.status < 400 and resp.getheader("Location"):
            nxt = urllib.parse.urljoin(full, resp.getheader("Location"))
            if urllib.parse.urlsplit(nxt).scheme != parts.scheme:
                raise PowerlabError(f"Prometheus at {parts.netloc} redirected to "
                                    f"{nxt[:200]!r}, another scheme; refused")
            return None, nxt
        body = _read_body(resp, parts.netloc, max_bytes)
        if fired.is_set():         # the deadline cut the answer short
            raise OSError("deadline")
        if resp.status >= 400:
            try:
                detail = str(json.loads(body).get("error", ""))[:300]
            except (ValueError, AttributeError, RecursionError):
                detail = ""
            raise PowerlabError(f"Prometheus at {parts.netloc} answered HTTP "
                                f"{resp.status}" + (f": {detail}" if detail else ""))
        return body, None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if fired.is_set():
            raise PowerlabError(f"Prometheus at {parts.netloc} did not answer within "
                                f"{timeout_s:g} s (timeout_s)") from None
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
        raise PowerlabError(f"cannot reach Prometheus at {parts.netloc}: {reason}") \
            from None
    finally:
        timer.cancel()
        conn.close()


def _read_body(resp, netloc: str, max_bytes: int) -> bytes:
    """The answer's body, refused (PowerlabError) as soon as it says or proves to be
    longer than ``max_bytes``."""
    length = resp.getheader("Content-Length")
    if length and length.isdigit() and int(length) > max_bytes:
        raise PowerlabError(f"Prometheus at {netloc} answers {int(length):,} "
                            f"bytes; at most {max_bytes:,} (max_response_bytes): "
                            "narrow the range, step or selector")
    chunks, n = [], 0
    while True:
        chunk = resp.read(1 << 16)
        if not chunk:
            break
        n += len(chunk)
        if n > max_bytes:
            raise PowerlabError(f"Prometheus at {netloc} answered more than "
                                f"{max_bytes:,} bytes (max_response_bytes): narrow "
                                "the range, step or selector")
        chunks.append(chunk)
    return b"".join(chunks)


def _get(url: str, params: dict, timeout_s: float,
         max_bytes: int = MAX_RESPONSE_BYTES) -> dict:
    full = f"{url}/api/v1/query_range?{urllib.parse.urlencode(params)}"
    body = _fetch(full, timeout_s, max_bytes)
    try:
        doc = json.loads(body)
        if doc["status"] != "success":
            raise PowerlabError(f"Prometheus at {url}: "
                                f"{str(doc.get('error', doc['status']))[:300]}")
        data = doc["data"]
        if data["resultType"] != "matrix" or not isinstance(data["result"], list):
            raise KeyError("resultType")
        return data
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ParseError(f"{url}/api/v1/query_range: expected Prometheus' JSON answer "
                         f"(status, data.resultType 'matrix', data.result), got "
                         f"{body[:80]!r}") from exc


def _series(series) -> tuple[dict, np.ndarray]:
    """One series of a matrix answer: its labels and an (n, 2) array of (time, value);
    ValueError/TypeError/AttributeError when it is not Prometheus' shape."""
    lab = series.get("metric", {})
    if not isinstance(lab, dict):
        raise TypeError("metric is not an object")
    vals = series.get("values", [])
    if not isinstance(vals, list):
        raise TypeError("values is not a list")
    arr = np.array([(_number(t), _number(v)) for t, v in vals],
                   dtype="float64").reshape(-1, 2)
    if len(arr) and not np.isfinite(arr[:, 0]).all():
        raise ValueError("a time is not finite")
    if len(arr) and not (np.abs(arr[:, 0]) < 2**33).all():
        raise ValueError("a time is not a Unix time")
    return lab, arr


def _number(x) -> float:
    """A time or value of a series: a JSON number or a string of one (Prometheus sends
    values as strings); never a boolean (``true`` was read as 1, 1970-01-01)."""
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        raise TypeError(f"{x!r} is not a number")
    return float(x)       # OverflowError for an integer of hundreds of digits


def read_prometheus(url: str, start, end, step="15s", *, selector: str = "",
                    metrics: Iterable[str] | None = None, max_points: int = PROMETHEUS_MAX_POINTS,
                    timeout_s: float = 60.0,
                    max_response_bytes: int = MAX_RESPONSE_BYTES) -> pd.DataFrame:
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
        Deadline of each HTTP request, the whole exchange (connect, headers, body) [s].
    max_response_bytes : int, default 256 MiB
        Largest answer read from one request [bytes]; redirects are followed only to the
        same scheme (at most 3).

    Returns
    -------
    pandas.DataFrame
        Canonical telemetry (``scope = "gpu"``), one row per GPU and evaluation time,
        sorted by host, GPU and time.  A ``DataQualityWarning`` counts what was left
        out: non-finite values, power below 0 or above :data:`MAX_GPU_POWER_W` (masked to
        NaN), series without a ``gpu`` label, and a second series for one GPU and metric
        (the first one is kept).

    Raises
    ------
    powerlab.exceptions.PowerlabError
        Bad arguments, or the server cannot be reached or refuses a query.
    powerlab.exceptions.ParseError
        The server's answer is not Prometheus' JSON.
    """
    t0, t1 = to_utc(start, what="start"), to_utc(end, what="end")
    if t1 < t0:
        raise PowerlabError(f"end {t1.isoformat()} is before start {t0.isoformat()}")
    dt = _step_s(step)
    _check_request_limits(max_points, timeout_s, max_response_bytes)
    names = _metric_names(metrics)
    url = str(url).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise PowerlabError(f"url: expected http://host:port, got {url!r}")
    s0, s1 = t0.value / 1e9, t1.value / 1e9
    n_steps = math.floor((s1 - s0) / dt + 1e-9)
    if n_steps + 1 > 10_000_000:
        raise PowerlabError(f"{n_steps + 1:,} steps of {dt:g} s from start to end; at most "
                            "10,000,000 per series: raise step or shorten the range")
    left_out = {"masked": 0, "no_gpu": 0, "dup": 0, "bad_series": 0, "outside": 0}
    frames = []
    for name in names:
        query = f"{name}{{{selector}}}"
        for a, b in _request_ranges(s0, n_steps, dt, int(max_points)):
            data = _get(url, {"query": query, "start": f"{a:.3f}", "end": f"{b:.3f}",
                              "step": f"{dt:g}"}, timeout_s, int(max_response_bytes))
            frames += _series_frames(data["result"], name, left_out, (s0, s1))
    _warn_left_out(url, left_out)
    if not frames:
        return schema.conform(schema.empty_frame())
    return _canonical(pd.concat(frames, ignore_index=True))


def _check_request_limits(max_points, timeout_s, max_response_bytes) -> None:
    if int(max_points) < 2:
        raise PowerlabError(f"max_points must be at least 2, got {max_points}")
    if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= 3600):
        raise PowerlabError(f"timeout_s must be in (0, 3600] s, got {timeout_s!r}")
    if int(max_response_bytes) < 1:
        raise PowerlabError(f"max_response_bytes must be positive, got {max_response_bytes}")


def _metric_names(metrics: Iterable[str] | None) -> list[str]:
    """The metrics to read: every key of :data:`PROMETHEUS_QUERY_MAP` by default."""
    names = list(PROMETHEUS_QUERY_MAP) if metrics is None else list(metrics)
    unknown = [m for m in names if m not in PROMETHEUS_QUERY_MAP]
    if unknown:
        raise PowerlabError(f"metrics: unknown {unknown}; expected some of "
                            f"{list(PROMETHEUS_QUERY_MAP)}")
    return names


def _request_ranges(s0: float, n_steps: int, dt: float,
                    max_points: int) -> Iterator[tuple[float, float]]:
    """``(first, last)`` evaluation time [Unix s] of each request: at most
    ``max_points`` evaluation times each, ``dt`` apart from ``s0`` to step ``n_steps``."""
    for k in range(0, n_steps + 1, max_points):
        yield s0 + k * dt, s0 + min(k + max_points - 1, n_steps) * dt


def _series_frames(result: list, name: str, left_out: dict,
                   span: tuple[float, float] = (-math.inf, math.inf)) -> list[pd.DataFrame]:
    """Long frames (``t, host, gpu, uuid, col, metric, value``) of one answer's series
    of metric ``name``; what is left out or masked is counted into ``left_out``: samples
    timed outside ``span`` (the request, Unix seconds), values outside the column's
    valid range (:data:`powerlab.telemetry.schema.GLOSSARY`)."""
    col, _unit, factor = PROMETHEUS_QUERY_MAP[name]
    glossary = schema.GLOSSARY.get(col)
    valid = glossary.valid_range if glossary is not None else None
    frames = []
    seen = set()
    for series in result:
        try:
            lab, arr = _series(series)
        except (ValueError, TypeError, AttributeError, OverflowError):
            left_out["bad_series"] += 1
            continue
        inside = (arr[:, 0] >= span[0] - 1e-3) & (arr[:, 0] <= span[1] + 1e-3)
        if not inside.all():                # a time of -500 or 'true' is not asked for
            left_out["outside"] += int((~inside).sum())
            arr = arr[inside]
        if not len(arr):
            continue
        gpu = str(lab.get("gpu", ""))
        if not (gpu.isdigit() and len(gpu) <= 4):
            left_out["no_gpu"] += 1
            continue
        host = str(lab.get("Hostname") or lab.get("instance", ""))
        if (host, int(gpu)) in seen:
            left_out["dup"] += 1
            continue
        seen.add((host, int(gpu)))
        v = arr[:, 1] * factor
        bad = ~np.isfinite(v)
        if col in ("power_w", "power_avg_w"):
            bad |= (v < 0) | (v > MAX_GPU_POWER_W)
        if valid is not None:               # utilisation -1 %, a clock below 0
            with np.errstate(invalid="ignore"):
                bad |= (v < valid[0]) | (v > valid[1])
        left_out["masked"] += int(bad.sum())
        v[bad] = np.nan
        uuid = lab.get("UUID")
        frames.append(pd.DataFrame({
            "t": arr[:, 0], "host": host, "gpu": int(gpu),
            "uuid": None if uuid is None else str(uuid), "col": col,
            "metric": name, "value": v}))
    return frames


def _warn_left_out(url: str, left_out: dict) -> None:
    """One ``DataQualityWarning`` counting what was masked or left out (none: silent)."""
    what = [f"{n} {w}" for n, w in (
        (left_out["masked"], ("value(s) not finite or outside their column's valid "
                              f"range (power: 0 to {MAX_GPU_POWER_W:g} W; utilisation: 0 "
                              "to 100 %) (masked to NaN)")),
        (left_out["outside"], "sample(s) timed outside the requested range (left out)"),
        (left_out["no_gpu"], "series without a numeric 'gpu' label (left out)"),
        (left_out["dup"], ("second series for one host, GPU and metric (left out; narrow "
                           "the selector, e.g. by job or instance)")),
        (left_out["bad_series"], "series not in Prometheus' matrix shape (left out)")) if n]
    if what:
        # stacklevel 3: the warning points at read_prometheus' caller
        warnings.warn(f"Prometheus at {url}: " + "; ".join(what), DataQualityWarning,
                      stacklevel=3)


def _canonical(long: pd.DataFrame) -> pd.DataFrame:
    """The long frame as canonical telemetry: one row per GPU and time, ``power_w`` from
    the instantaneous series, else from dcgm-exporter's ``POWER_USAGE``."""
    long["uuid"] = long["uuid"].fillna("")
    # power_w: the instantaneous series, else dcgm-exporter's POWER_USAGE
    avg = long[long["col"] == "power_avg_w"]
    inst_keys = set(map(tuple, long.loc[long["col"] == "power_w", ["host", "gpu"]]
                        .drop_duplicates().to_numpy().tolist()))
    fallback = avg[[(h, g) not in inst_keys for h, g in zip(avg["host"], avg["gpu"])]]
    long = pd.concat([long, fallback.assign(col="power_w")], ignore_index=True)
    keys = ["t", "host", "gpu", "uuid", "col"]
    # one value per key (the last); a masked (NaN) value keeps its row
    wide = (long.drop_duplicates(keys, keep="last").set_index(keys)["value"]
            .unstack("col").reset_index())
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
