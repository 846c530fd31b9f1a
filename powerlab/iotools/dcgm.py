"""Read NVIDIA DCGM output: ``dcgmi dmon`` text and dcgm-exporter Prometheus exposition.

``dcgmi dmon -e <field ids>`` prints a header (``#Entity`` and the fields' short names),
a units line (``ID`` ...), then one row per entity and sample (``GPU 0  72.449 ...``),
repeating the header every few samples; missing values print as ``N/A``.  The rows carry
no time: give ``start=`` and ``delay_ms=`` (the ``-d`` option), or prefix each line with
a timestamp (e.g. ``dcgmi dmon ... | ts '%Y-%m-%d %H:%M:%.S'``).

dcgm-exporter serves the Prometheus text format: one line per metric and GPU,
``DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-...",Hostname="node1",...} 72.4 [ts_ms]``.
It is parsed by ``prometheus_client.parser`` (the ``prometheus`` extra), which handles
label escapes, ``HELP``/``TYPE`` lines and ``NaN``/``+Inf`` values as Prometheus does.

References
----------
.. [1] NVIDIA, "dcgmi dmon", DCGM documentation.
.. [2] NVIDIA, "Field Identifiers", DCGM documentation (units of DCGM_FI_* fields).
.. [3] NVIDIA dcgm-exporter, ``etc/dcp-metrics-included.csv`` (metric names and units).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..exceptions import ParseError, PowerlabError
from ..telemetry import schema
from ..telemetry.timeutil import to_utc
from . import _dmon_fast
from ._common import (
    TIME_MS_RANGE,
    available_workers,
    check_gpu_indices,
    check_tz,
    decode_utf8,
    localize,
    mask_impossible,
    read_bytes,
    read_text,
    split_cut_last_line,
    warn_quality,
)
from .registry import ReaderEntrypoint, head_lines, head_text, register_reader

__all__ = [
    "DMON_VARIABLE_MAP",
    "PROMETHEUS_VARIABLE_MAP",
    "parse_dcgm_dmon",
    "parse_dcgm_prometheus",
    "read_dcgm_dmon",
    "read_dcgm_prometheus",
]

#: ``dcgmi dmon`` short column name -> (canonical column, DCGM unit, factor to canonical).
#: Largest GPU id read (the canonical ``gpu_index`` is an Int16).
MAX_GPU_ID = 32767
DMON_VARIABLE_MAP: dict[str, tuple[str, str, float]] = {
    "POWER": ("power_w", "W", 1.0),                 # 155 power_usage
    "TOTEC": ("energy_j", "mJ", 1e-3),              # 156 total_energy_consumption
    "SMCLK": ("clock_sm_mhz", "MHz", 1.0),          # 100 sm_clock
    "MMCLK": ("clock_mem_mhz", "MHz", 1.0),         # 101 memory_clock
    "TMPTR": ("temp_gpu_c", "C", 1.0),              # 150 gpu_temp
    "MMTMP": ("temp_mem_c", "C", 1.0),              # 140 memory_temp
    "GPUTL": ("util_gpu_pct", "%", 1.0),            # 203 gpu_utilization
    "MCUTL": ("util_mem_pct", "%", 1.0),            # 204 mem_copy_utilization
    "EPLMT": ("power_limit_w", "W", 1.0),           # 164 enforced_power_limit
    "PMLMT": ("power_limit_w", "W", 1.0),           # 160 power_management_limit
    "DVCCTR": ("throttle_reasons", "bitmask", 1.0),  # 112 current_clock_throttle_reasons
    "FBUSD": ("memory_used_bytes", "MiB", 1024.0 * 1024.0),  # 252 fb_used
    "FANSP": ("fan_speed_pct", "%", 1.0),           # 191 fan_speed
}

#: dcgm-exporter metric -> (canonical column, unit, factor to canonical).
PROMETHEUS_VARIABLE_MAP: dict[str, tuple[str, str, float]] = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", "W", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", "mJ", 1e-3),
    "DCGM_FI_DEV_SM_CLOCK": ("clock_sm_mhz", "MHz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("clock_mem_mhz", "MHz", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_gpu_c", "C", 1.0),
    "DCGM_FI_DEV_MEMORY_TEMP": ("temp_mem_c", "C", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("util_gpu_pct", "%", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("util_mem_pct", "%", 1.0),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", "W", 1.0),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", "W", 1.0),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_reasons", "bitmask", 1.0),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_reasons", "bitmask", 1.0),
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", "MiB", 1024.0 * 1024.0),
    "DCGM_FI_DEV_FAN_SPEED": ("fan_speed_pct", "%", 1.0),
}

_PRIO = {m: i for i, m in enumerate(PROMETHEUS_VARIABLE_MAP)}

# DCGM "blank" values (not found / not supported / no permission ...): int64 values from
# 0x7ffffffffffffff0 up and FP64 values from 2**47 up (dcgm_structs.h).
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
_FP64_BLANK = 140737488355328.0

_TS_PREFIX = re.compile(r"^(\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?"
                        r"(?:Z|[+-]\d\d:?\d\d)?)\s+(.*)$")


def _blank_to_nan(v: float) -> float:
    """DCGM's blank values -> NaN (int64 blanks round to 2**63 as floats).

    A larger value is no blank (a counter of -1 read as unsigned is 2**64 - 1): it stays,
    for :func:`mask_impossible` to mask and count."""
    if v >= _FP64_BLANK and (v < _FP64_BLANK + 16 or float(_INT64_BLANK) <= v <= 2.0 ** 63):
        return np.nan
    return v


def read_dcgm_dmon(path, *, tz=None, host: str | None = None, start=None,
                   delay_ms: float | None = None) -> pd.DataFrame:
    """Read ``dcgmi dmon`` text output.

    Parameters
    ----------
    path : str or path-like
        The captured output.
    tz : str or tzinfo, optional
        Time zone of line timestamps without an offset (and of a naive ``start``).
    host : str, optional
        Host name for every row.  Default ``"localhost"``.
    start : datetime-like, optional
        Time of the first sample, for output without line timestamps.
    delay_ms : float, optional
        Sampling interval (``dcgmi dmon -d``) [ms], with ``start``.

    Returns
    -------
    pandas.DataFrame
        Canonical telemetry; energy converted from mJ to [J], ``FBUSD`` from MiB to
        ``memory_used_bytes`` [B].  Rows of other entities (``GPU-I``, ``Switch``) are
        skipped and counted in a :class:`~powerlab.exceptions.DataQualityWarning`.
    """
    raw, _ = read_bytes(Path(path))
    return parse_dcgm_dmon(raw, tz=tz, host=host, start=start, delay_ms=delay_ms,
                           path=path)


def parse_dcgm_dmon(text_or_buffer, *, tz=None, host: str | None = None, start=None,
                    delay_ms: float | None = None, path=None) -> pd.DataFrame:
    """Parse ``dcgmi dmon`` output given as text or a buffer (see :func:`read_dcgm_dmon`)."""
    # (bytes: ASCII output, the usual case, is read by the fast path without a decode)
    raw, name = read_bytes(text_or_buffer)
    path = path if path is not None else name
    check_tz(tz, path)
    host = "localhost" if host is None else str(host)
    raw, cut = _cut_last_line(raw)
    if cut:
        warn_quality(f"{path or 'dcgmi dmon output'}: dropped 1 truncated last line (no "
                     "newline at the end: its values may be cut short)")
    fast = _dmon_fast.fast_rows(raw, DMON_VARIABLE_MAP, _blank_to_nan,
                                workers=available_workers(4))
    if fast is not None:  # plain output read in one CSV pass (same values)
        gpus, data, sample = fast
        _need_start(start, delay_ms, path)
        ts = _sample_times(sample, start, delay_ms, tz, path)
        # sorted here by GPU and time (the order conform() would give): a stable sort of
        # the GPU ids alone, the rows of each GPU being in time order already
        order = _gpu_time_order(gpus, ts.asi8)
        return _frame(ts[order], host, gpus[order], None,
                      {c: v[order] for c, v in data.items()},
                      path or "dcgmi dmon output", presorted=True)
    recs = _general_rows(decode_utf8(raw, path), path)
    data = _values(recs, path)
    gpus = np.array([r[2] for r in recs], dtype=np.int64)
    ts = _row_times(recs, gpus, start, delay_ms, tz, path)
    return _frame(ts, host, gpus, None, data, path or "dcgmi dmon output")


def _cut_last_line(raw: bytes) -> tuple[bytes, int]:
    """:func:`split_cut_last_line` of UTF-8 bytes (the same line cut off)."""
    if not raw or raw.endswith((b"\n", b"\r")):
        return raw, 0
    cut = max(raw.rfind(b"\n"), raw.rfind(b"\r"))
    if not raw[cut + 1:].decode("utf-8").strip():
        return raw, 0
    return raw[:cut + 1], 1


def _general_rows(text: str, path) -> list[tuple]:
    """``(line, timestamp text or None, GPU id, value cells, header columns)`` of each
    GPU row, line by line (any header, entity or timestamp prefix dcgmi prints); rows
    of other entities are skipped and counted in a warning."""
    columns: list[str] | None = None
    recs: list[tuple] = []  # (line, ts string or None, entity id, values)
    skipped_entities = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        body = line.strip()
        if not body or body.startswith("dmon was stopped"):
            continue
        stamp = None
        m = _TS_PREFIX.match(body)
        if m:
            stamp, body = m.group(1), m.group(2).strip()
        if body.startswith("#Entity"):
            columns = body.split()[1:]
            continue
        if body.startswith("ID"):
            continue
        if columns is None:
            raise ParseError("data before the '#Entity' header line", path=path, line=lineno)
        tok = body.split()
        if tok[0] != "GPU":
            if tok[0] in ("GPU-I", "GPU-CI", "vGPU", "Switch", "Link", "CPU", "Core"):
                skipped_entities += 1
                continue
            raise ParseError(f"expected a row starting with an entity such as 'GPU 0', got "
                             f"{body[:40]!r}", path=path, line=lineno)
        if len(tok) != len(columns) + 2:
            raise ParseError(f"{len(tok) - 2} value(s) where the header names "
                             f"{len(columns)}", path=path, line=lineno)
        try:
            gpu = int(tok[1]) if len(tok[1]) <= 12 else -1
        except ValueError:
            raise ParseError(f"expected a GPU id, got {tok[1]!r}", path=path, line=lineno,
                             column="#Entity") from None
        if not 0 <= gpu <= MAX_GPU_ID:      # a 23-digit id overflowed int64 (issue 38)
            raise ParseError(f"GPU id {tok[1][:30]} is outside 0 to {MAX_GPU_ID} (the "
                             "canonical gpu_index is a 16-bit integer)", path=path,
                             line=lineno, column="#Entity")
        recs.append((lineno, stamp, gpu, tok[2:], tuple(columns)))
    if columns is None:
        raise ParseError("no '#Entity' header line: not dcgmi dmon output", path=path)
    if skipped_entities:
        warn_quality(f"{path or 'dcgmi dmon output'}: skipped {skipped_entities} row(s) of "
                     "non-GPU entities (GPU instances, switches ...)", stacklevel=4)
    return recs


def _values(recs: list[tuple], path) -> dict[str, np.ndarray]:
    """Canonical column -> values of the rows (NaN where missing or blank), converted
    to the canonical unit."""
    n = len(recs)
    data: dict[str, np.ndarray] = {}
    for i, (lineno, _, _, vals, cols) in enumerate(recs):
        for short, v in zip(cols, vals):
            spec = DMON_VARIABLE_MAP.get(short)
            if spec is None:
                continue
            canon, unit, factor = spec
            arr = data.get(canon)
            if arr is None:  # (setdefault would build an n-row array for every cell)
                arr = data[canon] = np.full(n, np.nan)
            if v == "N/A" or v.startswith("["):
                continue
            try:
                x = float(v)
            except ValueError:
                raise ParseError(f"cannot read {v!r} as a number in {unit}", path=path,
                                 line=lineno, column=short) from None
            arr[i] = _blank_to_nan(x) * factor if canon != "throttle_reasons" else \
                _blank_to_nan(x)
    return data


def _row_times(recs: list[tuple], gpus: np.ndarray, start, delay_ms, tz,
               path) -> pd.DatetimeIndex:
    """UTC time of each row: its timestamp prefix, else its sample number (a new sample
    starts whenever a GPU id repeats) ``delay_ms`` apart from ``start``."""
    n = len(recs)
    stamps = [r[1] for r in recs]
    if n and all(s is not None for s in stamps):
        return _stamps_to_utc(stamps, tz, path, [r[0] for r in recs])
    if n and any(s is not None for s in stamps):
        bad = next(r[0] for r in recs if r[1] is None)
        raise ParseError("some rows have a timestamp prefix and some do not", path=path,
                         line=bad)
    _need_start(start, delay_ms, path)
    sample = np.zeros(n, dtype=np.int64)
    seen: set[int] = set()
    k = 0
    for i, g in enumerate(gpus):
        if g in seen:
            k += 1
            seen = set()
        seen.add(int(g))
        sample[i] = k
    return _sample_times(sample, start, delay_ms, tz, path)


def _need_start(start, delay_ms, path) -> None:
    if start is None or delay_ms is None:
        raise ParseError("dcgmi dmon rows carry no time: pass start= (time of the first "
                         "sample) and delay_ms= (the -d interval), or prefix each line "
                         "with a timestamp", path=path)


def _sample_times(sample: np.ndarray, start, delay_ms, tz, path) -> pd.DatetimeIndex:
    """UTC times of sample numbers ``sample``, ``delay_ms`` apart from ``start``."""
    t0 = to_utc(start, tz=tz, what="start=", hint="pass tz= as well",
                error=lambda msg: ParseError(msg, path=path))
    return pd.DatetimeIndex(t0 + pd.to_timedelta(sample * float(delay_ms), unit="ms"))


def _stamps_to_utc(stamps, tz, path, lines) -> pd.DatetimeIndex:
    s = pd.Series(stamps, dtype=object).str.replace("/", "-", regex=False)
    zoned = s.str.contains(r"(?:Z|[+-]\d\d:?\d\d)$", regex=True)
    if zoned.all():
        return pd.DatetimeIndex(pd.to_datetime(s, utc=True, format="ISO8601"))
    if zoned.any():
        raise ParseError("some timestamps carry a time zone and some do not", path=path,
                         line=lines[int(np.flatnonzero(~zoned.to_numpy())[0])])
    if tz is None:
        raise ParseError("line timestamps have no time zone; pass tz=", path=path)
    naive = pd.DatetimeIndex(pd.to_datetime(s, format="ISO8601"))
    utc, n_amb, n_nonex = localize(naive, tz)
    if n_amb or n_nonex:
        warn_quality(f"{path}: {n_amb} ambiguous and {n_nonex} nonexistent local time(s) "
                     "(DST) resolved by file order / shifted forward")
    return utc


def _repeat(value: str, n: int) -> pd.Series:
    """A ``string`` Series of ``value`` n times (pyarrow.repeat, no Python list)."""
    return pd.Series(pd.arrays.ArrowStringArray(pa.repeat(pa.scalar(value, pa.large_string()),
                                                          n)))


def _gpu_time_order(gpus: np.ndarray, t_ns: np.ndarray) -> np.ndarray:
    """The stable order of rows by GPU id and time: a stable sort of the ids alone
    where that leaves every GPU's times non-decreasing (numpy sorts 16-bit integers by
    radix sort), else the sort by both keys."""
    small = len(gpus) and 0 <= gpus.min() and gpus.max() <= np.iinfo(np.int16).max
    order = np.argsort(gpus.astype(np.int16) if small else gpus, kind="stable")
    g, t = gpus[order], t_ns[order]
    if ((g[1:] == g[:-1]) & (t[1:] < t[:-1])).any():
        order = np.lexsort((t_ns, gpus))
    return order


def _frame(ts, host, gpus, uuids, data, source, presorted: bool = False) -> pd.DataFrame:
    """The canonical frame, sorted by conform() unless ``presorted`` (rows already in
    GPU and time order, one host), and validated."""
    n = len(gpus)
    mask_impossible(data, path=source)
    gpus = np.asarray(gpus)
    small = (n and gpus.dtype.kind in "iu" and 0 <= gpus.min()
             and gpus.max() <= np.iinfo(np.int16).max)
    small or check_gpu_indices(gpus, source)   # an id beyond Int16: a ParseError
    df = pd.DataFrame({
        "timestamp": pd.Series(ts, dtype="datetime64[ns, UTC]").reset_index(drop=True),
        "host": _repeat(host, n) if isinstance(host, str) else pd.Series(host, dtype="string"),
        "scope": _repeat("gpu", n),
        "gpu_index": pd.Series(pd.array(gpus.astype(np.int16), dtype="Int16") if small
                               else pd.Series(gpus, dtype="Int16")),
        "gpu_uuid": pd.Series(uuids, dtype="string") if uuids is not None
        else pd.Series(pd.arrays.ArrowStringArray(pa.nulls(n, pa.large_string()))),
    })
    for canon, arr in data.items():
        if canon == "throttle_reasons":
            mask = np.isnan(arr)
            vals = np.where(mask, 0, arr).astype(np.uint64)
            df[canon] = pd.arrays.IntegerArray(vals, mask)
        else:
            df[canon] = arr
    df = schema.conform(df, sort=not presorted)
    # presorted rows of one host: the GPU id alone tells the devices apart, ascending
    codes = gpus.astype(np.int64) if presorted and small and isinstance(host, str) else None
    return schema.validate(df, source=str(source), device_codes=codes)


def read_dcgm_prometheus(path, *, timestamp=None, host: str | None = None) -> pd.DataFrame:
    """Read a dcgm-exporter scrape (Prometheus text exposition format).

    Parameters
    ----------
    path : str or path-like
        One scrape, or several concatenated scrapes whose samples carry timestamps.
    timestamp : datetime-like, optional
        Scrape time, for samples without a timestamp (a naive value is taken as UTC).
    host : str, optional
        Host for samples without a ``Hostname`` label.  Default ``"localhost"``.

    Returns
    -------
    pandas.DataFrame
        Canonical telemetry, one row per GPU and sample time; energy converted from mJ to
        [J], framebuffer use from MiB to [B].  DCGM blank values become NaN.  MIG
        instance series (``GPU_I_ID`` label) are skipped and counted in a
        :class:`~powerlab.exceptions.DataQualityWarning`.
    """
    text, _ = read_text(Path(path))
    return parse_dcgm_prometheus(text, timestamp=timestamp, host=host, path=path)


def _prometheus_parser():
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise PowerlabError("reading dcgm-exporter text needs prometheus-client "
                            "(pip install 'powerlab[prometheus]')") from exc
    return text_string_to_metric_families


def _samples(text: str, path):
    """``(line, metric name, labels, value, timestamp [ms] or None)`` for every sample, in
    file order, parsed by ``prometheus_client.parser``.

    The parser yields samples in the order of their lines, so the n-th sample comes from
    the n-th line that is neither blank nor a comment.  A counter whose name lacks
    ``_total`` gets that suffix from the parser; it is taken off again here.
    """
    parse = _prometheus_parser()
    lines = text.split("\n")
    sample_lines = [i for i, ln in enumerate(lines, start=1)
                    if (st := ln.strip()) and not st.startswith("#")]
    try:
        families = list(parse(text))
    except (ValueError, IndexError, KeyError, TypeError, OverflowError):  # 400 digits
        _locate_error(lines, parse, path)
        raise  # pragma: no cover - _locate_error always raises
    k = 0
    for fam in families:
        for smp in fam.samples:
            name = smp.name
            if (fam.type == "counter" and name not in PROMETHEUS_VARIABLE_MAP
                    and name == fam.name + "_total"):
                name = fam.name
            ts = None if smp.timestamp is None else float(smp.timestamp) * 1000.0
            yield sample_lines[k], name, smp.labels, smp.value, ts
            k += 1


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _locate_error(lines: list[str], parse, path):
    """Raise a ParseError naming the first line ``prometheus_client`` cannot parse."""
    for lineno, line in enumerate(lines, start=1):
        try:
            list(parse(line + "\n"))
        except (ValueError, IndexError, KeyError, TypeError, OverflowError):
            st = line.strip()
            head = st.split("{", 1)[0].split()
            metric = head[0] if head and not st.startswith("#") else None
            spec = PROMETHEUS_VARIABLE_MAP.get(metric or "")
            value = (st.rsplit("}", 1)[-1] if "{" in st else st[len(metric or ""):]).split()
            if spec is not None and value and not _is_number(value[0]):
                raise ParseError(f"cannot read {value[0]!r} as a number in {spec[1]}",
                                 path=path, line=lineno, column=metric) from None
            raise ParseError("not a Prometheus sample line (expected 'NAME{labels} value "
                             "[timestamp_ms]')", path=path, line=lineno) from None
    raise ParseError("not Prometheus text exposition format", path=path)


def parse_dcgm_prometheus(text_or_buffer, *, timestamp=None, host: str | None = None,
                          path=None) -> pd.DataFrame:
    """Parse dcgm-exporter text given as a string or buffer (see :func:`read_dcgm_prometheus`)."""
    text, name = read_text(text_or_buffer)
    path = path if path is not None else name
    default_host = "localhost" if host is None else str(host)
    text, cut = split_cut_last_line(text)
    if cut:
        warn_quality(f"{path or 'dcgm-exporter output'}: dropped 1 truncated last line (no "
                     "newline at the end: its value may be cut short)")
    rows = _exposition_rows(text, path, default_host)
    raw = pd.DataFrame(rows, columns=["ts", "host", "gpu", "uuid", "col", "value", "line",
                                      "metric", "prio"])
    if raw["ts"].isna().any():
        if raw["ts"].notna().any():
            bad = int(raw.loc[raw["ts"].isna(), "line"].iloc[0])
            raise ParseError("some samples carry a timestamp and some do not", path=path,
                             line=bad)
        if timestamp is None:
            raise ParseError("samples carry no timestamp: pass timestamp= (the scrape time)",
                             path=path)
        t0 = to_utc(timestamp, tz="UTC", what="timestamp=",    # naive: UTC, as documented
                    error=lambda msg: ParseError(msg, path=path))
        raw["ts"] = t0.as_unit("ns").value // 1_000_000
    raw["ts"] = raw["ts"].astype("int64")
    # where two metrics map to one column, the one listed first in the map wins
    # (enforced over requested power limit); a metric repeated for one GPU and time is
    # an error, not something to choose from silently
    rep = raw.duplicated(["ts", "host", "gpu", "metric"], keep="first")
    if rep.any():
        bad = raw[rep].iloc[0]
        raise ParseError(f"{bad['metric']} appears twice for host {bad['host']}, GPU "
                         f"{bad['gpu']} at one time", path=path, line=int(bad["line"]))
    raw = raw.sort_values("prio", kind="stable")
    raw = raw[~raw.duplicated(["ts", "host", "gpu", "col"], keep="first")]
    wide = raw.pivot_table(index=["ts", "host", "gpu"], columns="col", values="value",
                           aggfunc="first", dropna=False)
    uu = raw.dropna(subset=["uuid"]).groupby(["host", "gpu"])["uuid"].first()
    wide = wide.reset_index()
    ts = pd.DatetimeIndex(pd.to_datetime(wide["ts"].to_numpy(), unit="ms", utc=True))
    uuids = [uu.get((h, g)) for h, g in zip(wide["host"], wide["gpu"])]
    data = {c: wide[c].to_numpy(dtype="float64") for c in wide.columns
            if c not in ("ts", "host", "gpu")}
    return _frame(ts, wide["host"].tolist(), wide["gpu"].to_numpy(), uuids, data,
                  path or "dcgm-exporter output")


def _exposition_rows(text: str, path, default_host: str) -> list[tuple]:
    """``(ts_ms or None, host, gpu, uuid, column, value, line, metric, priority)`` of each
    sample of a mapped metric; MIG instance samples and samples whose timestamp is no
    time between 2000 and 2100 are left out and counted in warnings."""
    rows = []
    mig = 0
    bad_time = 0
    for lineno, metric, labels, value, ts_ms in _samples(text, path):
        spec = PROMETHEUS_VARIABLE_MAP.get(metric)
        if spec is None:
            continue
        if labels.get("GPU_I_ID", "") != "":
            mig += 1
            continue
        if "gpu" not in labels:
            raise ParseError(f"sample of {metric} has no 'gpu' label", path=path, line=lineno)
        try:
            gpu = int(labels["gpu"])
        except ValueError:
            raise ParseError(f"label gpu={labels['gpu']!r} is not a GPU index", path=path,
                             line=lineno, column="gpu") from None
        if ts_ms is not None:
            if not TIME_MS_RANGE[0] <= ts_ms < TIME_MS_RANGE[1]:  # also False for NaN
                bad_time += 1
                continue
            ts_ms = round(ts_ms)
        rows.append((ts_ms, labels.get("Hostname") or default_host, gpu, labels.get("UUID"),
                     spec[0], _blank_to_nan(float(value)) * (
                         spec[2] if spec[0] != "throttle_reasons" else 1.0),
                     lineno, metric, _PRIO[metric]))
    if bad_time:
        warn_quality(f"{path or 'dcgm-exporter output'}: dropped {bad_time} sample(s) whose "
                     "timestamp is not a time between 2000 and 2100 (Unix ms)", stacklevel=4)
    if mig:
        warn_quality(f"{path or 'dcgm-exporter output'}: skipped {mig} MIG instance "
                     "sample(s) (not part of the per-GPU canonical schema)", stacklevel=4)
    if not rows:
        raise ParseError("no DCGM_FI_* samples that map to canonical columns", path=path)
    return rows


@register_reader
class DcgmDmonReader(ReaderEntrypoint):
    """``dcgmi dmon`` text: a ``#Entity`` header line among the first 50 lines."""

    name = "dcgm-dmon"
    kind = "telemetry"
    description = "dcgmi dmon"
    priority = 40
    open = staticmethod(read_dcgm_dmon)

    def guess_can_open(self, path, head_bytes) -> bool:
        return any(ln.lstrip().startswith("#Entity") for ln in head_lines(head_bytes)[:50])


@register_reader
class DcgmPrometheusReader(ReaderEntrypoint):
    """dcgm-exporter text: ``DCGM_FI_*`` samples (asked after the XID-only text)."""

    name = "dcgm-prom"
    kind = "telemetry"
    description = "dcgm-exporter"
    priority = 60
    open = staticmethod(read_dcgm_prometheus)

    def guess_can_open(self, path, head_bytes) -> bool:
        return "DCGM_FI_" in head_text(head_bytes)
