"""Quality masks at any scale: gaps, stale readings and counter resets of every sample.

The masks of :mod:`powerlab.telemetry.quality` look along each device's series, across
midnight too.  :func:`mask_frame` computes them with one entry per kind of input
(:mod:`powerlab.telemetry.sources`): a pandas frame or a Parquet file whole; a Dask frame
per whole host (after a shuffle); a store on partitions that hold whole device-days, each
extended by the neighbouring samples of the same devices from earlier and later days
(the first and last ``stale_min_run - 1`` samples of each device and its last valid
counter reading, carried along chains of per-date boundaries), so masks that look across
midnight match the whole-frame result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from . import quality
from .binning import DEVICE_KEY
from .engines import AggregationOptions
from .partitions import (
    ID_COLUMNS,
    StoreGroup,
    check_columns,
    columns_for,
    filter_frame,
    read_files,
    store_groups,
)
from .schema import empty_frame
from .sources import TelemetrySource
from .timeutil import time_bound as _utc

__all__ = ["MaskSpec", "mask_frame"]


@dataclass(frozen=True)
class MaskSpec:
    """Which masks :func:`mask_frame` computes.

    Attributes
    ----------
    max_gap_s : float
        Largest normal spacing between samples of one device [s].
    stale_columns : tuple of str
        Columns checked for stuck readings.
    stale_min_run : int
        Shortest stale run [samples].
    """

    max_gap_s: float
    stale_columns: tuple[str, ...]
    stale_min_run: int

    @property
    def k(self) -> int:
        """Neighbouring samples each partition needs from the days around it."""
        return max(int(self.stale_min_run) - 1, 1)


def mask_frame(source: TelemetrySource, spec: MaskSpec,
               options: AggregationOptions) -> tuple[str, object]:
    """``(kind, frame)`` of the masks of every sample of ``source``: kind ``"pandas"``
    (computed) or ``"dask"`` (lazy), not yet canonical."""
    return _ENTRIES[source.kind](source, spec, options)


# ------------------------------------------------------------------ one entry per kind

def _masks_of_frame(source: TelemetrySource, spec: MaskSpec, opts: AggregationOptions):
    data = source.frame()
    energy = "energy_j" in data.columns
    df = filter_frame(data, opts.start, opts.end, opts.hosts)
    return "pandas", _mask_kernel(df, spec.max_gap_s, spec.stale_columns,
                                  spec.stale_min_run, energy)


def _masks_of_dask(source: TelemetrySource, spec: MaskSpec, opts: AggregationOptions):
    data = source.data
    energy = "energy_j" in data.columns
    cols = list(dict.fromkeys([*ID_COLUMNS, *spec.stale_columns,
                               *(["energy_j"] if energy else [])]))
    check_columns(data.columns, cols, "dask input")
    ddf = data[cols]
    ddf = ddf.map_partitions(filter_frame, _utc(opts.start), _utc(opts.end), opts.hosts,
                             meta=ddf._meta)
    meta = _mask_kernel(empty_frame(cols), spec.max_gap_s, spec.stale_columns,
                        spec.stale_min_run, energy)
    res = ddf.shuffle(on="host").map_partitions(
        _mask_kernel, spec.max_gap_s, spec.stale_columns, spec.stale_min_run, energy,
        meta=meta, enforce_metadata=False)
    return "dask", res


def _masks_of_store(source: TelemetrySource, spec: MaskSpec, opts: AggregationOptions):
    import dask
    import dask.dataframe as dd

    src = store_groups(source.data, opts.start, opts.end, opts.hosts, opts.partition_rows)
    cols = columns_for([*spec.stale_columns, "energy_j"])
    energy, k = True, spec.k
    meta = _mask_kernel(empty_frame(cols), spec.max_gap_s, spec.stale_columns,
                        spec.stale_min_run, energy)
    if not src.groups:
        return "dask", dd.from_pandas(meta, npartitions=1)
    rb = dask.delayed(_read_boundary, pure=True)
    bounds = {}
    for g in src.groups:
        bounds.setdefault(g.date, []).append(rb(g, cols, src.start, src.end, k, energy))
    before, after = _neighbours(sorted(bounds), bounds, k, energy)
    rm = dask.delayed(_read_mask, pure=True)
    parts = [rm(g, cols, src.start, src.end, spec.max_gap_s, spec.stale_columns,
                spec.stale_min_run, energy, before[g.date], after[g.date])
             for g in src.groups]
    return "dask", dd.from_delayed(parts, meta=meta, verify_meta=False)


def _neighbours(dates: list[str], bounds: dict, k: int, energy: bool) -> tuple[dict, dict]:
    """For each date, the (lazy) samples of the days before and after it that its masks
    need: chains of merged boundaries, forward (tails) and backward (heads)."""
    import dask

    mb = dask.delayed(_merge_bound, pure=True)
    before, after = {}, {}
    carry = None
    for d in dates:
        before[d] = carry
        carry = mb(carry, bounds[d], "tail", k, energy)
    carry = None
    for d in reversed(dates):
        after[d] = carry
        carry = mb(carry, bounds[d], "head", k, energy)
    return before, after


_ENTRIES = {"frame": _masks_of_frame, "parquet": _masks_of_frame, "dask": _masks_of_dask,
            "store": _masks_of_store}


# ------------------------------------------------------------------------- kernels

def _mask_kernel(df: pd.DataFrame, max_gap_s: float, stale_columns: Sequence[str],
                 stale_min_run: int, energy: bool,
                 before: pd.DataFrame | None = None,
                 after: pd.DataFrame | None = None) -> pd.DataFrame:
    own = df.reset_index(drop=True).assign(_own=True)
    parts = [p.assign(_own=False) for p in (before, after) if p is not None and len(p)]
    win = pd.concat([own, *parts], ignore_index=True) if parts else own
    out = win[["timestamp", "host", "scope", "gpu_index"]].copy()
    out["gap"] = quality.gaps(win, max_gap_s)
    for c in stale_columns:
        out[f"stale_{c}"] = quality.stale(win, c, stale_min_run)
    if energy:
        out["reset_energy_j"] = quality.counter_resets(win)
    return out[win["_own"].to_numpy(dtype=bool)]


def _boundary(df: pd.DataFrame, k: int, energy: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """First and last ``k`` rows of each device (and its last valid counter reading)."""
    s = df.sort_values([*DEVICE_KEY, "timestamp"], kind="stable", na_position="first")
    g = s.groupby(DEVICE_KEY, dropna=False, observed=True, sort=False)
    head, tail = g.head(k), g.tail(k)
    if energy:
        ev = s[s["energy_j"].notna()]
        tail = pd.concat([tail, ev.groupby(DEVICE_KEY, dropna=False, observed=True,
                                           sort=False).tail(1)]).drop_duplicates()
    return head, tail


def _read_boundary(group: StoreGroup, cols, start, end, k, energy):
    return _boundary(read_files(group.files, cols, start, end), k, energy)


def _merge_bound(carry, bounds, which: str, k: int, energy: bool):
    frames = [carry] if carry is not None else []
    frames += [b[0] if which == "head" else b[1] for b in bounds]
    frames = [f for f in frames if len(f)]
    if not frames:
        return None
    c = pd.concat(frames, ignore_index=True)
    h, t = _boundary(c, k, energy)
    return h if which == "head" else t


def _read_mask(group: StoreGroup, cols, start, end, max_gap_s, stale_columns, stale_min_run,
               energy, before, after):
    df = read_files(group.files, cols, start, end)
    return _mask_kernel(df, max_gap_s, stale_columns, stale_min_run, energy, before, after)
