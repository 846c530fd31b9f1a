"""Per-device time bins of telemetry of any kind: the first step of every aggregation.

:func:`device_bins` reduces telemetry to one row per device (``host, scope,
gpu_index``) and time bin: the sample count, the mean of each averaged column, the
bitwise OR of the throttle reasons, the last energy-counter reading and the energy in the
bin.  It has one entry per kind of input (:mod:`powerlab.telemetry.sources`): a pandas
frame and a Parquet file are binned here, a Dask frame per whole host (after a shuffle),
and a store per group of whole date/host folders, read lazily and projected to the
columns needed (on Dask, the energy of each device-day's first bin carried along a chain
of per-date tails; with ``engine="pandas"``, read into this process first).  Every path
runs the same kernels (:mod:`powerlab.telemetry.binning`) and gives the same numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from ..exceptions import SchemaError, Violation
from .binning import energy_fix, energy_tail, merge_tail, resample_kernel
from .engines import AggregationOptions, resolve_engine, store_frame
from .partitions import (
    ID_COLUMNS,
    StoreGroup,
    StoreSource,
    check_columns,
    columns_for,
    filter_frame,
    read_files,
    store_groups,
)
from .schema import CORE_COLUMNS, empty_frame
from .sources import TelemetrySource
from .timeutil import time_bound as _utc

__all__ = ["MEAN_COLUMNS", "Binning", "device_bins"]

#: Columns averaged per device and bin when present.
MEAN_COLUMNS = ("power_w", "clock_sm_mhz", "clock_mem_mhz", "temp_gpu_c", "temp_mem_c",
                "util_gpu_pct", "power_limit_w", "power_avg_w", "util_mem_pct",
                "memory_used_bytes", "fan_speed_pct")


@dataclass(frozen=True)
class Binning:
    """What :func:`device_bins` computes per device and bin.

    Attributes
    ----------
    bin_ns : int
        Bin width [ns].
    means : sequence of str, optional
        Columns averaged (default: every column of :data:`MEAN_COLUMNS` present).
    energy, throttle : bool, optional
        Compute the energy columns / the throttle OR (default: when the column is
        present; for a store: yes).
    scope : str, optional
        Keep the rows of this scope only.
    uuid : bool, default True
        Keep ``gpu_uuid`` (of each bin's last sample).
    """

    bin_ns: int
    means: Sequence[str] | None = None
    energy: bool | None = None
    throttle: bool | None = None
    scope: str | None = None
    uuid: bool = True

    def columns(self) -> list[str]:
        """The value columns read besides the identity columns."""
        return [*self.means, *(["energy_j"] if self.energy else []),
                *(["throttle_reasons"] if self.throttle else [])]

    def resolved(self, have: Iterable[str]) -> Binning:
        """The defaults made explicit for an input holding the columns ``have``."""
        have = set(have)
        return dataclasses.replace(
            self, means=_pick_means(have, self.means),
            energy=("energy_j" in have) if self.energy is None else self.energy,
            throttle=("throttle_reasons" in have) if self.throttle is None
            else self.throttle)


def device_bins(source: TelemetrySource, binning: Binning,
                options: AggregationOptions) -> tuple[str, object]:
    """``(kind, frame)`` of per-device bins of ``source``: kind ``"pandas"`` (a pandas
    frame) or ``"dask"`` (a lazy Dask frame), not yet canonical."""
    return _ENTRIES[source.kind](source, binning, options)


def _pick_means(columns: Iterable[str], want: Sequence[str] | None) -> list[str]:
    if want is None:
        return [c for c in MEAN_COLUMNS if c in set(columns)]
    bad = [c for c in want if c not in MEAN_COLUMNS]
    if bad:
        raise SchemaError([Violation(c, f"cannot be averaged; averaged columns are "
                                        f"{list(MEAN_COLUMNS)}") for c in bad])
    return list(want)


# ------------------------------------------------------------------ one entry per kind

def _bins_of_frame(source: TelemetrySource, binning: Binning, opts: AggregationOptions):
    return _bins_in_memory(source.frame(), binning, opts)


def _bins_in_memory(data: pd.DataFrame, binning: Binning, opts: AggregationOptions):
    check_columns(data.columns, ID_COLUMNS, "input frame")
    b = binning.resolved(data.columns)
    check_columns(data.columns, b.columns(), "input frame")
    df = filter_frame(data, opts.start, opts.end, opts.hosts)
    if b.scope is not None:
        df = df[(df["scope"] == b.scope).fillna(False).to_numpy(dtype=bool)]
    if not b.uuid:
        df = df.drop(columns=["gpu_uuid"])
    return "pandas", _resample_whole(df, b.bin_ns, b.means, b.energy, b.throttle)


def _bins_of_dask(source: TelemetrySource, binning: Binning, opts: AggregationOptions):
    data = source.data
    check_columns(data.columns, ID_COLUMNS, "dask input")
    b = binning.resolved(data.columns)
    check_columns(data.columns, b.columns(), "dask input")
    cols = list(dict.fromkeys([*ID_COLUMNS, *b.columns()]))
    if not b.uuid:
        cols.remove("gpu_uuid")
    ddf = data[cols]
    start_u, end_u = _utc(opts.start), _utc(opts.end)
    if start_u is not None or end_u is not None or opts.hosts is not None:
        ddf = ddf.map_partitions(filter_frame, start_u, end_u, opts.hosts, meta=ddf._meta)
    if b.scope is not None:
        ddf = ddf[ddf["scope"] == b.scope]
    ddf = ddf.shuffle(on="host")   # whole hosts per partition: no carry needed
    meta = resample_kernel(empty_frame(cols), b.bin_ns, b.means, b.energy, b.throttle)
    out = ddf.map_partitions(_resample_whole, b.bin_ns, b.means, b.energy, b.throttle,
                             meta=energy_fix(meta, None), enforce_metadata=False)
    return "dask", out


def _bins_of_store(source: TelemetrySource, binning: Binning, opts: AggregationOptions):
    b = dataclasses.replace(
        binning, means=binning.means if binning.means is not None
        else [c for c in MEAN_COLUMNS if c in set(CORE_COLUMNS)],
        energy=True if binning.energy is None else binning.energy,
        throttle=True if binning.throttle is None else binning.throttle)
    cols = columns_for(b.columns())
    if resolve_engine(opts.engine, duckdb=False) == "pandas":
        # read in this process, then the in-memory path: the same kernels
        frame = store_frame(source.data, cols, opts.start, opts.end, opts.hosts)
        return _bins_in_memory(frame, b, opts)
    if not b.uuid:
        cols.remove("gpu_uuid")
    src = store_groups(source.data, opts.start, opts.end, opts.hosts, opts.partition_rows)
    return "dask", _resample_store(src, cols, b.bin_ns, b.means, b.energy, b.throttle,
                                   b.scope)


_ENTRIES = {"frame": _bins_of_frame, "parquet": _bins_of_frame, "dask": _bins_of_dask,
            "store": _bins_of_store}


# ------------------------------------------------------------------------- kernels

def _resample_whole(df, bin_ns, means, energy, throttle) -> pd.DataFrame:
    return energy_fix(resample_kernel(df, bin_ns, means, energy, throttle), None)


def _read_resample(group: StoreGroup, cols, start, end, bin_ns, means, energy, throttle, scope):
    df = read_files(group.files, cols, start, end, categorical=True)
    if scope is not None:
        df = df[(df["scope"] == scope).fillna(False).to_numpy(dtype=bool)]
    return resample_kernel(df, bin_ns, means, energy, throttle)


def _resample_store(src: StoreSource, cols, bin_ns, means, energy, throttle, scope):
    import dask
    import dask.dataframe as dd

    meta = resample_kernel(empty_frame(cols), bin_ns, means, energy, throttle)
    final_meta = energy_fix(meta, None)
    if not src.groups:
        return dd.from_pandas(final_meta, npartitions=1)
    if not energy:
        return dd.from_map(_read_resample, list(src.groups), args=[
            cols, src.start, src.end, bin_ns, means, energy, throttle, scope],
            meta=final_meta, enforce_metadata=False, label="resample")
    # energy: the first bin of each device-day needs the last reading of earlier days,
    # carried along a (cheap) chain of per-date tails.
    read = dask.delayed(_read_resample, pure=True)
    tail = dask.delayed(energy_tail, pure=True)
    merge = dask.delayed(merge_tail, pure=True)
    fix = dask.delayed(energy_fix, pure=True)
    parts, carry, date_tails, cur_date = [], None, [], None
    for grp in src.groups:  # sorted by date
        if grp.date != cur_date:
            if date_tails:
                carry = merge(carry, *date_tails)
            date_tails, cur_date = [], grp.date
        a = read(grp, cols, src.start, src.end, bin_ns, means, energy, throttle, scope)
        date_tails.append(tail(a))
        parts.append(fix(a, carry))
    return dd.from_delayed(parts, meta=final_meta, verify_meta=False)
