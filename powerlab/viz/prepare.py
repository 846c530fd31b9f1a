"""Tidy-frame preparation for charts: column checks, units and labels, downsampling.

Pure pandas (no altair): charts only draw, and the few reductions they need (binning a
long series to a few thousand points while keeping each bin's extremes, picking the level
of detail that fits the row budget) live here, testable without a renderer.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .._options import choice
from ..exceptions import SchemaError, Violation
from ..telemetry.schema import GLOSSARY
from ..telemetry.timeutil import series_to_utc, to_epoch_ns

__all__ = ["as_utc", "axis_label", "chart_frames", "chart_times", "choose_level", "downsample",
           "is_node", "number_format", "require_columns", "series_label", "time_label",
           "time_text", "unit_of"]



def require_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} expects a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c is not None and c not in df.columns]
    if missing:
        raise SchemaError([Violation(c, f"missing column needed by {what}") for c in missing])


#: A ramp figure's name: ``ramp[_up|_down]_megawatts_per_<s|min>_<window>`` (the windows
#: of :data:`powerlab.limits.ramps.RAMP_DEFINITIONS`).
_RAMP_NAME = re.compile(r"^(?P<name>.*)_megawatts_per_(?P<per>s|min)_(?P<win>1s|100ms|1min|tick)$")


def unit_of(column: str) -> str:
    col = GLOSSARY.get(column)
    if col is not None and col.unit:
        return "°C" if col.unit == "degC" else col.unit
    m = _RAMP_NAME.match(column)
    if m:
        return f"MW/{m['per']}"
    for suffix, unit in (("_megawatts_per_s", "MW/s"), ("_megawatts", "MW"), ("_w", "W"),
                         ("_mhz", "MHz"), ("_c", "°C"), ("_pct", "%"), ("_hz", "Hz"),
                         ("_s", "s"), ("_j", "J")):
        if column.endswith(suffix):
            return unit
    return ""


def axis_label(column: str) -> str:
    """Axis title with the unit in brackets: ``power_w`` -> ``power [W]``."""
    names = {"power_w": "power", "clock_sm_mhz": "SM clock", "clock_mem_mhz": "memory clock",
             "temp_gpu_c": "GPU temperature", "temp_mem_c": "HBM temperature",
             "util_gpu_pct": "GPU utilisation", "power_limit_w": "power limit",
             "energy_j": "energy", "power_avg_w": "average power"}
    unit = unit_of(column)
    name = names.get(column)
    m = _RAMP_NAME.match(column)
    if name is None and m:
        win = {"1s": "1-s means", "100ms": "100-ms means", "1min": "1-min means",
               "tick": "tick to tick"}[m["win"]]
        name = f"{m['name'].replace('_', ' ')}, {win}"
    if name is None:
        name = column
        for suffix in ("_megawatts_per_s", "_megawatts", "_mhz", "_pct", "_hz", "_w", "_c",
                       "_s", "_j"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        name = name.replace("_", " ")
    return f"{name} [{unit}]" if unit else name


def number_format(unit: str) -> str:
    return ",.3~f" if unit in ("MW", "MW/s") else ",.1f"


def as_utc(ts: pd.Series) -> pd.Series:
    """A chart's time column in UTC (tz-aware only: a chart never guesses a zone), by
    :func:`~powerlab.telemetry.series_to_utc`; a :class:`SchemaError` otherwise."""
    name = str(ts.name or "timestamp")
    return series_to_utc(ts, what=name,
                         error=lambda msg: SchemaError([Violation(
                             name, msg.removeprefix(f"{name}: "))]))


def time_text(ts: pd.Series) -> pd.Series:
    """Timestamps as text for tooltips (vega would show them in the viewer's time zone)."""
    return ts.dt.strftime("%Y-%m-%d %H:%M:%S UTC").astype(object)


def downsample(df: pd.DataFrame, value: str | Sequence[str], *, time: str = "timestamp",
               by: Sequence[str] = (), max_points: int = 1000) -> pd.DataFrame:
    """Reduce each series to at most ``max_points`` time bins, keeping mean, min and max.

    Bins are of equal width over the whole frame's time range, so every series shares the
    same bin edges.  Series shorter than ``max_points`` keep every sample (bins that hold
    one sample have min == mean == max).

    Parameters
    ----------
    df : pandas.DataFrame
        Tidy frame with a tz-aware ``time`` column and the ``value`` column(s).
    value : str or sequence of str
        Column(s) to reduce.
    time : str, default "timestamp"
        The time column (tz-aware).
    by : sequence of str
        Columns identifying one series (for example ``["host", "gpu_index"]``).
    max_points : int, default 1000
        Largest number of bins per series.

    Returns
    -------
    pandas.DataFrame
        ``by`` columns, ``time`` (the mean time of the samples in the bin),
        ``<value>`` (mean), ``<value>_min``, ``<value>_max`` and ``n_samples``.
    """
    values = [value] if isinstance(value, str) else list(value)
    by = list(by)
    require_columns(df, [time, *values, *by], "downsample")
    if max_points < 1:
        raise ValueError("max_points must be at least 1")
    t = to_epoch_ns(as_utc(df[time]))
    work = df[by + values].copy()
    for v in values:
        work[v] = pd.to_numeric(work[v], errors="coerce").astype("float64")
    t0 = int(t.min()) if len(t) else 0
    work["_t"] = (t - t0).astype("float64")  # relative: float64 keeps ns precision
    if len(df) == 0:
        out = work.rename(columns={"_t": time}).iloc[:0]
        for v in values:
            out[f"{v}_min"] = out[v]
            out[f"{v}_max"] = out[v]
        out[time] = pd.Series([], dtype="datetime64[ns, UTC]")
        out["n_samples"] = pd.Series([], dtype="int64")
        return out
    width = max((int(t.max()) - t0) / max_points, 1.0)
    work["_bin"] = np.minimum(((t - t0) / width).astype(np.int64), max_points - 1)
    keys = by + ["_bin"]
    g = work.groupby(keys, sort=True, dropna=False, observed=True)
    out = g.agg(**{"_t": ("_t", "mean"), "n_samples": ("_t", "size"),
                   **{v: (v, "mean") for v in values},
                   **{f"{v}_min": (v, "min") for v in values},
                   **{f"{v}_max": (v, "max") for v in values}}).reset_index()
    out[time] = pd.to_datetime(out["_t"].round().astype("int64") + t0, utc=True,
                               unit="ns").astype("datetime64[ns, UTC]")
    cols = by + [time] + values + [f"{v}_min" for v in values] + [f"{v}_max" for v in values]
    return out[cols + ["n_samples"]]


def is_node(df: pd.DataFrame) -> pd.Series:
    """Rows of node scope (``scope == "node"``, or no GPU index where there is a column)."""
    out = pd.Series(False, index=df.index)
    if "gpu_index" in df.columns:
        out = out | df["gpu_index"].isna()
    if "scope" in df.columns:
        out = out | (df["scope"].astype("string") == "node").fillna(False)
    return out.astype(bool)


def series_label(df: pd.DataFrame, level: str) -> pd.Series:
    host = df["host"].astype("string").fillna("?")
    node = is_node(df)
    # never average node readings (a whole node) with GPU readings into one line
    mixed = bool(node.any()) and not bool(node.all())
    if level == "fleet":
        lab = pd.Series("fleet", index=df.index, dtype=object)
        return lab.where(~node, "fleet (node)") if mixed else lab
    if level == "host" or "gpu_index" not in df.columns:
        return (host.where(~node, host + " (node)") if mixed else host).astype(object)
    gpu = df["gpu_index"].astype("Int64")
    lab = host + "/gpu" + gpu.astype("string").fillna("")
    return lab.where(~node, host + " (node)").astype(object)


def choose_level(df: pd.DataFrame, by: str, max_rows: int, min_points: int) -> str:
    if by != "auto":
        choice(by, "by", ("auto", "gpu", "host", "fleet"))
        return by
    n_gpu = len(df.drop_duplicates([c for c in ("host", "gpu_index") if c in df.columns]))
    if n_gpu * min_points <= max_rows and n_gpu <= 32:
        return "gpu"
    n_host = df["host"].nunique(dropna=False)
    if n_host * min_points <= max_rows and n_host <= 32:
        return "host"
    return "fleet"


def chart_times(ts: pd.Series, site_tz: str | None = None) -> np.ndarray:
    """Timestamps as epoch milliseconds for a chart's UTC time scale.

    With ``site_tz`` the values are the site's *local wall-clock* times (daylight saving
    applied), so a chart on a UTC scale labels them in the site's time zone whatever the
    viewer's zone is.  Around the autumn change the repeated local hour draws over itself.

    Parameters
    ----------
    ts : pandas.Series
        tz-aware timestamps.
    site_tz : str, optional
        IANA time zone of the site (default: UTC).

    Returns
    -------
    numpy.ndarray
        int64 milliseconds.
    """
    t = as_utc(ts)
    if site_tz is not None:
        t = t.dt.tz_convert(site_tz).dt.tz_localize(None)
    else:
        t = t.dt.tz_localize(None)
    return to_epoch_ns(t) // 1_000_000


def time_label(site_tz: str | None = None) -> str:
    """Axis title of a chart's time axis: ``time (UTC)`` or ``time (America/Chicago)``."""
    return f"time ({site_tz})" if site_tz and site_tz != "UTC" else "time (UTC)"


def chart_frames(chart) -> list[pd.DataFrame]:
    """The data tables a chart (or its Vega-Lite dict) carries, as DataFrames.

    Reads altair's named ``datasets`` (JSON records, or CSV text as
    :func:`powerlab.viz.render.inline_table` makes them) and inline CSV values.
    """
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    out = [pd.read_csv(io.StringIO(v)) if isinstance(v, str) else pd.DataFrame(v)
           for v in spec.get("datasets", {}).values()]
    stack = [spec]
    while stack:
        d = stack.pop()
        if isinstance(d, dict):
            data = d.get("data")
            if isinstance(data, dict) and isinstance(data.get("values"), str) and \
                    data.get("format", {}).get("type") == "csv":
                out.append(pd.read_csv(io.StringIO(data["values"])))
            stack.extend(v for v in d.values() if isinstance(v, (dict, list)))
        elif isinstance(d, list):
            stack.extend(v for v in d if isinstance(v, (dict, list)))
    return out
