"""Data-quality masks for telemetry (in the manner of pvanalytics ``quality``).

Each function returns a boolean :class:`pandas.Series` aligned to the input frame's index,
``True`` where the flagged condition holds, so masks can be combined (``|``, ``&``) and
counted.  Series are evaluated per device: per (host, scope, gpu_index), in time order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..exceptions import SchemaError, Violation
from .schema import device_codes

__all__ = ["counter_resets", "gaps", "quality_report", "stale"]

_KEY = ["host", "scope", "gpu_index"]


def _device_order(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Row positions sorted by device then time, and the device code of each sorted row."""
    missing = [c for c in [*_KEY, "timestamp"] if c not in df.columns]
    if missing:
        raise SchemaError([Violation(c, "missing column needed for quality checks")
                           for c in missing])
    codes = device_codes(df)
    ts = df["timestamp"].astype("int64").to_numpy()
    order = np.lexsort((ts, codes))
    return order, codes[order]


def gaps(df: pd.DataFrame, max_gap_s: float) -> pd.Series:
    """Flag samples that follow a gap longer than ``max_gap_s`` in their device's series.

    Parameters
    ----------
    df : pandas.DataFrame
        Telemetry in the canonical schema.
    max_gap_s : float
        Largest normal spacing between consecutive samples of one device [s].

    Returns
    -------
    pandas.Series of bool
        ``True`` on the first sample after each gap.
    """
    if not max_gap_s > 0:  # also refuses NaN
        raise ValueError("max_gap_s must be positive [s]")
    order, codes = _device_order(df)
    ts = df["timestamp"].astype("int64").to_numpy()[order]
    flag = np.zeros(len(df), dtype=bool)
    if len(df) > 1:
        same = codes[1:] == codes[:-1]
        dt_s = (ts[1:] - ts[:-1]) / 1e9
        flag[order[1:][same & (dt_s > max_gap_s)]] = True
    return pd.Series(flag, index=df.index, name="gap")


def stale(df: pd.DataFrame, column: str, min_run: int = 10, *, atol: float = 0.0) -> pd.Series:
    """Flag readings stuck at the same value for at least ``min_run`` consecutive samples.

    Parameters
    ----------
    df : pandas.DataFrame
        Telemetry in the canonical schema.
    column : str
        Measurement column to check (e.g. ``"power_w"``).
    min_run : int, default 10
        Shortest run of identical consecutive readings that counts as stale [samples].
    atol : float, default 0
        Readings closer than this are treated as identical [unit of the column].

    Returns
    -------
    pandas.Series of bool
        ``True`` on every sample of each stale run (NaN readings are never stale).
    """
    if column not in df.columns:
        raise SchemaError([Violation(column, "missing column for the stale check")])
    if min_run < 2:
        raise ValueError("min_run must be at least 2 [samples]")
    order, codes = _device_order(df)
    vals = df[column].astype("float64").to_numpy()[order]
    n = len(vals)
    flag_sorted = np.zeros(n, dtype=bool)
    if n:
        with np.errstate(invalid="ignore"):
            same = np.zeros(n, dtype=bool)
            same[1:] = (codes[1:] == codes[:-1]) & (np.abs(vals[1:] - vals[:-1]) <= atol)
        # run ids: a new run starts wherever `same` is False
        run_id = np.cumsum(~same)
        run_len = np.bincount(run_id)[run_id]
        flag_sorted = (run_len >= min_run) & ~np.isnan(vals)
    flag = np.zeros(n, dtype=bool)
    flag[order] = flag_sorted
    return pd.Series(flag, index=df.index, name=f"stale_{column}")


def counter_resets(df: pd.DataFrame, column: str = "energy_j") -> pd.Series:
    """Flag samples where a cumulative counter (``energy_j``) went down.

    A decrease means the counter was reset (driver reload, GPU reset) or wrapped; energy
    computed by differencing must not span these samples.

    Returns
    -------
    pandas.Series of bool
        ``True`` on the first sample after each reset.
    """
    if column not in df.columns:
        raise SchemaError([Violation(column, "missing column for the counter-reset check")])
    order, codes = _device_order(df)
    vals = df[column].astype("float64").to_numpy()[order]
    flag = np.zeros(len(df), dtype=bool)
    if len(df) > 1:
        # compare against the last valid (non-NaN) reading of the same device
        s = pd.Series(vals)
        valid_prev = s.groupby(codes).ffill().groupby(codes).shift(1).to_numpy()
        with np.errstate(invalid="ignore"):
            dec = vals < valid_prev
        flag[order[dec]] = True
    return pd.Series(flag, index=df.index, name=f"reset_{column}")


def quality_report(df: pd.DataFrame, *, max_gap_s: float, stale_min_run: int = 10,
                   stale_columns=("power_w", "temp_gpu_c")) -> pd.DataFrame:
    """Count flagged samples per device: gaps, stale readings and counter resets."""
    masks = {"gap": gaps(df, max_gap_s)}
    for c in stale_columns:
        if c in df.columns:
            masks[f"stale_{c}"] = stale(df, c, stale_min_run)
    if "energy_j" in df.columns:
        masks["reset_energy_j"] = counter_resets(df)
    m = pd.DataFrame(masks)
    m[_KEY] = df[_KEY]
    out = m.groupby(_KEY, observed=True, dropna=False).sum()
    out["samples"] = m.groupby(_KEY, observed=True, dropna=False).size()
    return out.reset_index()
