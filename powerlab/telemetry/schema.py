"""The canonical telemetry schema: one tidy, long frame of GPU (or node) samples.

One row is one sample of one GPU (``scope == "gpu"``) or of one whole node
(``scope == "node"``, for sources that only record node power, such as MLPerf power logs;
then ``gpu_index`` and ``gpu_uuid`` are missing).

:data:`GLOSSARY` names every column with its unit, dtype, meaning and valid range.  It
drives :func:`validate`, :func:`conform` and the documentation (:func:`glossary_frame`).

Timestamps are always tz-aware UTC.  Local time appears only inside time-of-day analysis,
from an explicit ``site_tz``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import SchemaError, Violation
from .timeutil import to_epoch_ns

__all__ = [
    "CORE_COLUMNS",
    "GLOSSARY",
    "IDENTITY_COLUMNS",
    "MEASUREMENT_COLUMNS",
    "SCOPES",
    "THROTTLE_REASONS",
    "Column",
    "conform",
    "device_codes",
    "empty_frame",
    "glossary_frame",
    "na_array",
    "validate",
]

SCOPES = ("gpu", "node")

#: NVML clock-event ("throttle") reason bits, name -> bit value.  Values from ``nvml.h``
#: (``nvmlClocksEventReason*`` / ``nvmlClocksThrottleReason*``), identical in
#: ``pynvml`` (nvidia-ml-py 12.x): GpuIdle 0x1, ApplicationsClocksSetting 0x2,
#: SwPowerCap 0x4, HwSlowdown 0x8, SyncBoost 0x10, SwThermalSlowdown 0x20,
#: HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80, DisplayClockSetting 0x100.
THROTTLE_REASONS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


@dataclass(frozen=True)
class Column:
    """Definition of one canonical column.

    Attributes
    ----------
    name : str
        Column name; measurements carry their SI unit in the name.
    unit : str
        Unit, ``""`` for identifiers.
    dtype : str
        pandas dtype name of the column in a conformed frame.
    description : str
        Meaning of the column.
    valid_range : tuple of float or None
        Inclusive physical range for GPU-scope rows; ``None`` when not numeric.
    node_range : tuple of float or None
        Inclusive range for node-scope rows where it differs (node power).
    core : bool
        Present in every conformed frame (missing values as NA).
    """

    name: str
    unit: str
    dtype: str
    description: str
    valid_range: tuple[float, float] | None = None
    node_range: tuple[float, float] | None = None
    core: bool = True


_COLS = [
    Column("timestamp", "", "datetime64[ns, UTC]",
           "Wall-clock time of the sample, tz-aware UTC."),
    Column("host", "", "string", "Host (node) name."),
    Column("scope", "", "string",
           "What the row measures: 'gpu' (one GPU) or 'node' (a whole node)."),
    Column("gpu_index", "", "Int16", "NVML ordinal of the GPU on its host; NA for node rows.",
           (0, 1023)),
    Column("gpu_uuid", "", "string", "Stable GPU UUID (GPU-...); NA when the source lacks it."),
    Column("power_w", "W", "float64",
           "Power draw: instantaneous GPU power (NVML) or node AC power for node rows.",
           (0.0, 2000.0), (0.0, 50000.0)),
    Column("energy_j", "J", "float64",
           "Cumulative energy counter since driver load (NVML total energy consumption).",
           (0.0, 1e15)),
    Column("clock_sm_mhz", "MHz", "float64", "Streaming-multiprocessor (graphics) clock.",
           (0.0, 5000.0)),
    Column("clock_mem_mhz", "MHz", "float64", "Memory clock.", (0.0, 20000.0)),
    Column("temp_gpu_c", "degC", "float64", "GPU die temperature.", (-40.0, 150.0)),
    Column("temp_mem_c", "degC", "float64", "Memory (HBM) temperature.", (-40.0, 150.0)),
    Column("util_gpu_pct", "%", "float64",
           "GPU utilisation: share of the last sample period a kernel was running.",
           (0.0, 100.0)),
    Column("power_limit_w", "W", "float64", "Enforced power limit.", (0.0, 2000.0),
           (0.0, 50000.0)),
    Column("throttle_reasons", "bitmask", "UInt64",
           "Raw NVML clock-event (throttle) reasons bitmask; unknown bits preserved."),
    # optional columns: validated when present, not added by conform()
    Column("power_avg_w", "W", "float64", "NVML average power over its ~1 s window.",
           (0.0, 2000.0), (0.0, 50000.0), core=False),
    Column("util_mem_pct", "%", "float64", "Memory-controller utilisation.", (0.0, 100.0),
           core=False),
    Column("memory_used_bytes", "B", "float64", "Frame-buffer memory in use.",
           (0.0, 1e13), core=False),
    Column("fan_speed_pct", "%", "float64", "Fan speed.", (0.0, 100.0), core=False),
    Column("monotonic_s", "s", "float64",
           "Monotonic clock of the collecting host at the sample (for rates and jitter).",
           core=False),
    Column("job_id", "", "string", "Job the GPU belonged to at the sample.", core=False),
    # NVML's own per-field timestamps, kept by powerlab.collect.collector (NaT: individual call)
    Column("nvml_time_power", "", "datetime64[ns, UTC]",
           "NVML timestamp of the instantaneous power field value.", core=False),
    Column("nvml_time_power_avg", "", "datetime64[ns, UTC]",
           "NVML timestamp of the average power field value.", core=False),
    Column("nvml_time_energy", "", "datetime64[ns, UTC]",
           "NVML timestamp of the total energy counter field value.", core=False),
    Column("nvml_time_temp_mem", "", "datetime64[ns, UTC]",
           "NVML timestamp of the memory temperature field value.", core=False),
]

GLOSSARY: dict[str, Column] = {c.name: c for c in _COLS}
CORE_COLUMNS: tuple[str, ...] = tuple(c.name for c in _COLS if c.core)
IDENTITY_COLUMNS: tuple[str, ...] = ("timestamp", "host", "scope", "gpu_index", "gpu_uuid")
MEASUREMENT_COLUMNS: tuple[str, ...] = tuple(
    c.name for c in _COLS if c.name not in IDENTITY_COLUMNS
)


def glossary_frame() -> pd.DataFrame:
    """The glossary as a table (name, unit, dtype, range, meaning) for documentation."""
    rows = []
    for c in _COLS:
        rows.append({
            "name": c.name,
            "unit": c.unit,
            "dtype": c.dtype,
            "valid_range": "" if c.valid_range is None else f"{c.valid_range[0]:g} .. {c.valid_range[1]:g}",
            "node_range": "" if c.node_range is None else f"{c.node_range[0]:g} .. {c.node_range[1]:g}",
            "core": c.core,
            "description": c.description,
        })
    return pd.DataFrame(rows)


def empty_frame(columns=None) -> pd.DataFrame:
    """An empty frame with the given glossary columns (default: every core column), each
    in its canonical dtype."""
    return pd.DataFrame({name: pd.Series([], dtype=GLOSSARY[name].dtype)
                         for name in (CORE_COLUMNS if columns is None else columns)})


def na_array(dtype: str, n: int):
    """``n`` missing values of a canonical dtype (``GLOSSARY[name].dtype``), built without
    a per-row loop."""
    if dtype == "float64":
        return np.full(n, np.nan)
    if dtype == "datetime64[ns, UTC]":
        return pd.array(np.full(n, np.datetime64("NaT"), dtype="datetime64[ns]")
                        ).tz_localize("UTC")
    if dtype in ("Int16", "Int32", "Int64", "UInt64"):
        np_dtype = dtype.lower()
        return pd.array(np.zeros(n, dtype=np_dtype), dtype=dtype).copy() \
            if n == 0 else pd.arrays.IntegerArray(np.zeros(n, dtype=np_dtype),
                                                  np.ones(n, dtype=bool))
    return pd.array(np.full(n, None, dtype=object), dtype=dtype)


def conform(df: pd.DataFrame, *, sort: bool = True, add_missing: bool = True) -> pd.DataFrame:
    """Return ``df`` with every core column present, in canonical order and dtype.

    Missing measurement columns are added as NA (unless ``add_missing`` is false: then
    only the columns ``df`` has are cast and ordered); ``scope`` defaults to ``"gpu"``.
    Extra columns are kept after the core ones (glossary optionals first).  The frame is
    sorted by host, scope, GPU and time when ``sort`` is true, and gets a fresh
    RangeIndex.  No value is changed, only types: a conversion that would lose
    information raises :class:`~powerlab.exceptions.SchemaError`.
    """
    out = df.copy(deep=False)  # columns are replaced, never modified in place
    n = len(out)
    if "scope" not in out.columns:
        out["scope"] = "gpu"
    violations = []
    for name in CORE_COLUMNS:
        col = GLOSSARY[name]
        if name not in out.columns:
            if not add_missing:
                continue
            out[name] = pd.Series(na_array(col.dtype, n), index=out.index)
            continue
        try:
            _set_cast(out, name, col.dtype)
        except (TypeError, ValueError) as exc:
            violations.append(Violation(name, f"cannot convert to {col.dtype}: {exc}"))
    for name in out.columns:
        if name in GLOSSARY and not GLOSSARY[name].core:
            try:
                _set_cast(out, name, GLOSSARY[name].dtype)
            except (TypeError, ValueError) as exc:
                violations.append(Violation(name, f"cannot convert to "
                                                  f"{GLOSSARY[name].dtype}: {exc}"))
    if violations:
        raise SchemaError(violations)
    extras_known = [c.name for c in _COLS if not c.core and c.name in out.columns]
    extras_other = [c for c in out.columns if c not in GLOSSARY]
    order = [c for c in CORE_COLUMNS if c in out.columns] + extras_known + extras_other
    if list(out.columns) != order:
        out = out[order]
    if sort:
        out = out.sort_values(["host", "scope", "gpu_index", "timestamp"], kind="stable",
                              na_position="first")
    return out.reset_index(drop=True)


#: The time zone object of ``datetime64[ns, UTC]`` (what ``tz_convert("UTC")`` gives).
_UTC_DTYPE = pd.DatetimeTZDtype("ns", "UTC")


def _set_cast(out: pd.DataFrame, name: str, dtype: str) -> None:
    """Cast column ``name`` of ``out`` to ``dtype``, replacing it only if it changed."""
    s = out[name]
    new = _cast(s, dtype)
    if new is not s:
        out[name] = new


def _cast(s: pd.Series, dtype: str) -> pd.Series:
    if dtype == "datetime64[ns, UTC]":
        if (isinstance(s.dtype, pd.DatetimeTZDtype) and s.dtype.unit == "ns"
                and s.dtype.tz is _UTC_DTYPE.tz):
            return s  # already what tz_convert("UTC").astype(dtype) would give
        if isinstance(s.dtype, pd.DatetimeTZDtype):
            return s.dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
        raise TypeError(f"timestamps must be tz-aware (got dtype {s.dtype}); "
                        "localize them with an explicit time zone first")
    if str(s.dtype) == dtype:
        return s
    if dtype in ("Int16", "UInt64"):
        vals = pd.to_numeric(s, errors="raise")
        if dtype == "UInt64" and vals.dtype == np.uint64:
            return vals.astype("UInt64")
        f = vals.astype("float64")
        if ((f.dropna() % 1) != 0).any():
            raise ValueError("non-integer values")
        if dtype == "UInt64" and (f.dropna() < 0).any():
            raise ValueError("negative values in a bitmask")
        return vals.astype(dtype)
    if dtype == "float64":
        return pd.to_numeric(s, errors="raise").astype("float64")
    return s.astype(dtype)


def device_codes(df: pd.DataFrame) -> np.ndarray:
    """An integer code per row identifying its device: (host, scope, gpu_index).

    Missing values form their own category.  Used to group rows by device quickly.
    """
    return _device_codes(df)


def _device_codes(df, factorized: dict | None = None) -> np.ndarray:
    """:func:`device_codes` of a frame (or a dict of its columns), reusing
    ``factorized[column] = _factorize(df[column])`` where given."""
    factorized = factorized or {}
    code = np.zeros(len(df["host"]), dtype=np.int64)
    for c in ("host", "scope", "gpu_index"):
        k, uniq = factorized[c] if c in factorized else _factorize(df[c])
        code *= len(uniq) + 1  # in place: code * (len(uniq) + 1) + k + 1
        code += k
        code += 1
    return code


def _factorize(s: pd.Series) -> tuple[np.ndarray, list]:
    """``pandas.factorize(s)`` codes (first-appearance order, -1 for NA) and uniques.

    Text backed by pyarrow is encoded by pyarrow directly, which is several times faster
    than the generic path and gives the same codes.
    """
    arr = s.array
    if isinstance(arr, pd.arrays.ArrowStringArray):
        values = pa.chunked_array(pa.array(arr)).combine_chunks()
        if (len(values) and not values.null_count
                and pc.all(pc.equal(values, values[0])).as_py()):
            return np.zeros(len(values), dtype=np.intp), [values[0].as_py()]  # constant
        enc = values.dictionary_encode()
        codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)
        return codes.astype(np.intp, copy=False), enc.dictionary.to_pylist()
    codes, uniq = pd.factorize(s, use_na_sentinel=True)
    return codes, list(uniq)


def validate(df: pd.DataFrame, *, source: str | None = None, strict_optional: bool = True,
             device_codes: np.ndarray | None = None) -> pd.DataFrame:
    """Check a telemetry frame against the schema and report every violation at once.

    Checks: missing core columns, wrong dtypes, naive (or non-UTC) timestamps, unknown
    ``scope`` values, values outside each column's valid range (a GPU power in
    milliwatts, a temperature in kelvin), duplicate samples (same host, scope, GPU and
    timestamp) and time going backwards within one GPU's (or node's) rows.

    Parameters
    ----------
    df : pandas.DataFrame
        Telemetry in the canonical schema (see :func:`conform`).
    source : str, optional
        Where the frame came from, named in the error message.
    strict_optional : bool, default True
        Also check dtypes and ranges of optional glossary columns that are present.
    device_codes : numpy.ndarray, optional
        An integer per row, equal exactly for the rows of one device (host, scope,
        ``gpu_index``), where the caller already has them (a reader that built the
        frame); the duplicate and time-order checks then group rows by these codes
        instead of computing :func:`device_codes` from the columns (same result, less
        work).  Every check is still made.

    Returns
    -------
    pandas.DataFrame
        ``df`` itself, unchanged, when it is valid (so calls can be chained).

    Raises
    ------
    powerlab.exceptions.SchemaError
        Listing each violation with its column and the offending rows.
    """
    v: list[Violation] = []
    missing = [c for c in CORE_COLUMNS if c not in df.columns]
    for c in missing:
        v.append(Violation(c, f"missing column (expected {GLOSSARY[c].dtype}, "
                              f"unit '{GLOSSARY[c].unit}')"))
    names = [c for c in df.columns if c in GLOSSARY
             and (GLOSSARY[c].core or strict_optional)]
    series = {c: df[c] for c in names}  # each df[c] builds a new Series: do it once
    typed_ok = _check_dtypes(series, v)
    scopes = _check_rows(df.index, series, typed_ok, v)
    _check_ranges(df.index, series, typed_ok, scopes[2], v)
    if {"timestamp", "host", "scope", "gpu_index"} <= typed_ok and len(df):
        _check_order(df.index, series, scopes, v, device_codes)
    if v:
        raise SchemaError(v, source=source)
    return df


def _check_dtypes(series: dict, v: list) -> set:
    """Dtype violations (timestamps tz-aware UTC) into ``v``; the columns typed right."""
    typed_ok = set()
    for c, s in series.items():
        col = GLOSSARY[c]
        actual = s.dtype
        if c == "timestamp":
            if not isinstance(actual, pd.DatetimeTZDtype):
                v.append(Violation(c, f"timestamps must be tz-aware UTC, got {actual} "
                                      "(naive timestamps need an explicit time zone)"))
            elif str(actual.tz) != "UTC":
                v.append(Violation(c, f"timestamps must be in UTC, got time zone {actual.tz}"))
            else:
                typed_ok.add(c)
            continue
        if col.dtype == "string" and isinstance(actual, pd.StringDtype):
            pass  # pandas' "str" and "string" flavours both hold text
        elif str(actual) != col.dtype:
            v.append(Violation(c, f"dtype {actual}, expected {col.dtype}"))
            continue
        typed_ok.add(c)
    return typed_ok


def _check_rows(idx: pd.Index, series: dict, typed_ok: set, v: list):
    """Missing timestamps, unknown scopes and GPU rows without a GPU index into ``v``;
    returns the scope codes, their values and the node-row mask."""
    if "timestamp" in typed_ok:
        bad = idx[series["timestamp"].isna().to_numpy()]
        if len(bad):
            v.append(Violation("timestamp", "missing timestamps", tuple(bad)))
    if "scope" not in typed_ok:
        return None, None, np.zeros(len(idx), dtype=bool)
    sc_codes, sc_uniq = _factorize(series["scope"])
    # a lookup table per code, NA (code -1, the last entry) unknown too
    known = np.array([u in SCOPES for u in sc_uniq] + [False])
    bad = idx[~known[sc_codes]]
    if len(bad):
        v.append(Violation("scope", f"unknown scope, expected one of {SCOPES}", tuple(bad)))
    is_node = (sc_codes == sc_uniq.index("node") if "node" in sc_uniq
               else np.zeros(len(idx), dtype=bool))
    if "gpu_index" in typed_ok:
        bad = idx[(~is_node) & series["gpu_index"].isna().to_numpy()]
        if len(bad):
            v.append(Violation("gpu_index", "GPU rows need a gpu_index", tuple(bad)))
    return sc_codes, sc_uniq, is_node


def _check_ranges(idx: pd.Index, series: dict, typed_ok: set, is_node: np.ndarray,
                  v: list) -> None:
    """Values outside each column's valid range (node rows: its node range) into ``v``,
    with a hint when they look like milliwatts or kelvin."""
    any_node = bool(is_node.any())
    for c in typed_ok:
        col = GLOSSARY[c]
        if col.valid_range is None or c == "timestamp":
            continue
        vals = series[c]
        vals = (vals.to_numpy() if vals.dtype == np.float64
                else vals.astype("float64").to_numpy())
        lo, hi = col.valid_range
        nlo, nhi = col.node_range or col.valid_range
        if not any_node and len(vals) and not (np.fmin.reduce(vals) < lo
                                               or np.fmax.reduce(vals) > hi):
            continue  # the smallest and largest values are inside (NaN never is outside)
        if any_node:
            lo_arr, hi_arr = np.where(is_node, nlo, lo), np.where(is_node, nhi, hi)
        else:
            lo_arr, hi_arr = lo, hi
        with np.errstate(invalid="ignore"):
            out = (vals < lo_arr) | (vals > hi_arr)
        if out.any():
            bad = idx[out]
            worst = np.nanmax(np.abs(vals[out]))
            hint = ""
            if col.unit == "W" and worst > 1000 * (nhi if is_node[out].all() else hi) / 100:
                hint = " (values look like milliwatts; convert to watts)"
            elif col.unit == "degC" and worst > 200:
                hint = " (values look like kelvin or millidegrees)"
            rng = f"[{lo:g}, {hi:g}] {col.unit}"
            if col.node_range:
                rng += f" for GPU rows, [{nlo:g}, {nhi:g}] {col.unit} for node rows"
            v.append(Violation(c, f"{out.sum()} value(s) outside {rng}, largest |value| "
                                  f"{worst:g}{hint}", tuple(bad)))


def _check_order(idx: pd.Index, series: dict, scopes: tuple, v: list,
                 codes: np.ndarray | None = None) -> None:
    """Duplicate samples (same device and timestamp; all but the first) and time going
    backwards in row order within one device, into ``v`` (rows grouped by ``codes``
    where given, else by :func:`device_codes`)."""
    sc_codes, sc_uniq, _ = scopes
    if codes is None:
        codes = _device_codes(series, {"scope": (sc_codes, sc_uniq)})
    elif len(codes) != len(idx):
        raise ValueError(f"device_codes has {len(codes)} values for {len(idx)} rows")
    ts = to_epoch_ns(series["timestamp"])
    # rows already grouped by device (in code order) and in time order within each
    # device are their own stable sort order below: skip the sorts
    same_dev = codes[1:] == codes[:-1]
    grouped = bool((codes[1:] >= codes[:-1]).all())
    in_order = grouped and not (same_dev & (ts[1:] < ts[:-1])).any()
    # duplicates: identical (device, timestamp) pairs; flag all but the first
    dup = np.zeros(len(ts), dtype=bool)
    if in_order:
        dup[1:] = same_dev & (ts[1:] == ts[:-1])
    else:
        order = np.lexsort((ts, codes))
        c_s, t_s = codes[order], ts[order]
        dup[order[1:][(c_s[1:] == c_s[:-1]) & (t_s[1:] == t_s[:-1])]] = True
    if dup.any():
        v.append(Violation("timestamp", "duplicate samples (same host, scope, gpu_index "
                                        "and timestamp)", tuple(idx[dup])))
    # time going backwards in row order within one device
    back = np.zeros(len(ts), dtype=bool)
    if grouped:
        back[1:] = same_dev & (ts[1:] < ts[:-1])
    else:
        order = np.argsort(codes, kind="stable")
        c_s, t_s = codes[order], ts[order]
        back[order[1:][(c_s[1:] == c_s[:-1]) & (t_s[1:] < t_s[:-1])]] = True
    if back.any():
        v.append(Violation("timestamp", "time goes backwards within one GPU's rows "
                                        "(expected non-decreasing per host/scope/gpu)",
                           tuple(idx[back])))
