"""Fleet-scale aggregation of telemetry: the same answers from pandas and Dask.

Every function here accepts

* a :class:`pandas.DataFrame` in the canonical schema (a laptop, one node's data),
* a :class:`dask.dataframe.DataFrame` in the canonical schema, or
* the path of a store (:mod:`powerlab.telemetry.store`) with an optional time range and host list;
  the store is then read lazily, one Dask partition per group of ``date=/host=`` folders,
  pruned by date and host and projected to the columns the aggregation needs,

and returns the same numbers, dtypes and row order whichever way it was called (the
Dask paths run the very same per-partition kernels as the pandas path, on partitions
arranged so that every (device, time bin) lies in exactly one partition; sums across
devices are compensated sums that add the device means in (host, scope, gpu_index) order
on every path, :func:`powerlab.telemetry.binning.kahan_add`).  :func:`power_sums` of a
store never builds the full frame: it streams folder by folder from Arrow
(:func:`powerlab.telemetry.engines.store_power_sums`), on pandas or Dask.

Conventions
-----------
* Time bins are left-closed and left-labelled, in UTC, and ``freq`` must divide a day
  (``"1s"``, ``"1min"``, ``"15min"``, ``"1h"``...), so no bin straddles a UTC midnight
  and hence a date partition of the store.
* A *device* is one ``(host, scope, gpu_index)``.  Duplicate samples (same device and
  timestamp) are counted once: the first in input order (for a store, file-name order)
  is kept.
* Power sums add the per-device bin means (a device missing from a bin adds nothing;
  ``n_gpus`` says how many devices contributed).
* Results are tidy frames with a fresh RangeIndex, sorted by their key columns.

With ``compute=False`` a Dask input returns a lazy Dask DataFrame; pass it to
:func:`collect` to compute it into the canonical pandas result.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .._options import choice
from ..exceptions import PowerlabError, SchemaError, Violation
from .binning import (
    DEVICE_KEY,
    bin_width_ns,
    energy_fix,
    energy_tail,
    kahan_add,
    merge_tail,
    resample_kernel,
)
from .engines import resolve_engine, store_frame, store_power_sums, warn_if_empty
from .partitions import (
    ID_COLUMNS,
    StoreGroup,
    StoreSource,
    check_columns,
    columns_for,
    filter_frame,
    is_dask,
    open_store,
    read_files,
    store_groups,
)
from .schema import empty_frame
from .timeutil import time_bound as _utc

__all__ = [
    "collect",
    "hour_of_day",
    "open_store",
    "peer_stats",
    "power_sums",
    "quality_masks",
    "resample_gpu",
]

#: Columns averaged per device and bin when present.
MEAN_COLUMNS = ("power_w", "clock_sm_mhz", "clock_mem_mhz", "temp_gpu_c", "temp_mem_c",
                "util_gpu_pct", "power_limit_w", "power_avg_w", "util_mem_pct",
                "memory_used_bytes", "fan_speed_pct")
#: Columns of peer (straggler) statistics by default.
PEER_COLUMNS = ("clock_sm_mhz", "temp_gpu_c", "power_w")
# key columns of results, in sort priority
_SORT_PRIORITY = ("host", "rack", "job_id", "scope", "gpu_index", "timestamp", "hour")
_RESULT_DTYPES = {
    "timestamp": "datetime64[ns, UTC]", "host": "string", "rack": "string",
    "job_id": "string", "scope": "string", "gpu_index": "Int16", "gpu_uuid": "string",
    "n_samples": "int64", "n_gpus": "int64", "throttle_reasons": "UInt64", "hour": "int64",
    "count": "int64",
}


# ----------------------------------------------------------------------- computations

def _pick_means(columns: Iterable[str], want: Sequence[str] | None) -> list[str]:
    if want is None:
        return [c for c in MEAN_COLUMNS if c in set(columns)]
    bad = [c for c in want if c not in MEAN_COLUMNS]
    if bad:
        raise SchemaError([Violation(c, f"cannot be averaged; averaged columns are "
                                        f"{list(MEAN_COLUMNS)}") for c in bad])
    return list(want)


def _resampled(data, bin_ns: int, means: Sequence[str] | None, energy: bool | None,
               throttle: bool | None, start, end, hosts, partition_rows: int,
               scope: str | None = None, uuid: bool = True, engine: str = "auto"):
    """(kind, frame) of per-device bins: kind 'pandas' or 'dask'."""
    if isinstance(data, (str, os.PathLike)):
        from .schema import CORE_COLUMNS

        if means is None:
            means = [c for c in MEAN_COLUMNS if c in set(CORE_COLUMNS)]
        energy = True if energy is None else energy
        throttle = True if throttle is None else throttle
        cols = columns_for([*means, *(["energy_j"] if energy else []),
                             *(["throttle_reasons"] if throttle else [])])
        if resolve_engine(engine, duckdb=False) == "pandas":
            # read in this process, then the in-memory path below: the same kernels
            data = store_frame(data, cols, start, end, hosts)
        else:
            if not uuid:
                cols.remove("gpu_uuid")
            src = store_groups(data, start, end, hosts, partition_rows)
            return "dask", _resample_store(src, cols, bin_ns, means, energy, throttle,
                                           scope)
    if is_dask(data):
        check_columns(data.columns, ID_COLUMNS, "dask input")
        means = _pick_means(data.columns, means)
        energy = ("energy_j" in data.columns) if energy is None else energy
        throttle = ("throttle_reasons" in data.columns) if throttle is None else throttle
        check_columns(data.columns, [*means, *(["energy_j"] if energy else []),
                                      *(["throttle_reasons"] if throttle else [])],
                       "dask input")
        cols = list(dict.fromkeys([*ID_COLUMNS, *means, *(["energy_j"] if energy else []),
                                   *(["throttle_reasons"] if throttle else [])]))
        if not uuid:
            cols.remove("gpu_uuid")
        ddf = data[cols]
        start_u, end_u = _utc(start), _utc(end)
        if start_u is not None or end_u is not None or hosts is not None:
            ddf = ddf.map_partitions(filter_frame, start_u, end_u, hosts, meta=ddf._meta)
        if scope is not None:
            ddf = ddf[ddf["scope"] == scope]
        ddf = ddf.shuffle(on="host")   # whole hosts per partition: no carry needed
        meta = resample_kernel(empty_frame(cols), bin_ns, means, energy, throttle)
        out = ddf.map_partitions(_resample_whole, bin_ns, means, energy, throttle,
                                 meta=energy_fix(meta, None), enforce_metadata=False)
        return "dask", out
    if not isinstance(data, pd.DataFrame):
        raise PowerlabError(f"expected a pandas or Dask DataFrame or a store path, got "
                            f"{type(data).__name__}")
    check_columns(data.columns, ID_COLUMNS, "input frame")
    means = _pick_means(data.columns, means)
    energy = ("energy_j" in data.columns) if energy is None else energy
    throttle = ("throttle_reasons" in data.columns) if throttle is None else throttle
    check_columns(data.columns, [*means, *(["energy_j"] if energy else []),
                                  *(["throttle_reasons"] if throttle else [])], "input frame")
    df = filter_frame(data, start, end, hosts)
    if scope is not None:
        df = df[(df["scope"] == scope).fillna(False).to_numpy(dtype=bool)]
    if not uuid:
        df = df.drop(columns=["gpu_uuid"])
    return "pandas", _resample_whole(df, bin_ns, means, energy, throttle)


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


# ----------------------------------------------------------------------------- results

def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    for c, dt in _RESULT_DTYPES.items():
        if c in df.columns and str(df[c].dtype) != dt:
            df[c] = df[c].astype(dt)
    keys = [c for c in _SORT_PRIORITY if c in df.columns]
    if keys:
        df = df.sort_values(keys, kind="stable", na_position="first")
    return df.reset_index(drop=True)


def collect(result, *, client=None) -> pd.DataFrame:
    """Compute a lazy result (``compute=False``) into the canonical pandas frame.

    Parameters
    ----------
    result : pandas.DataFrame or dask.dataframe.DataFrame
        What an aggregation returned.
    client : distributed.Client, optional
        Compute on this cluster (default: Dask's current scheduler).
    """
    if is_dask(result):
        # gather the partitions here rather than concatenating them on one worker
        parts = result.to_delayed()
        if client is not None:
            parts = client.gather(client.compute(parts))
        else:
            import dask

            parts = list(dask.compute(*parts))
        result = pd.concat(parts, ignore_index=True) if parts else result._meta
    return _canonical(result.copy())


def result_frame(kind: str, frame, compute: bool):
    """What an aggregation returns: a Dask frame kept lazy when ``compute`` is False,
    otherwise a pandas frame (:func:`collect`).  Shared with :mod:`.jobs`."""
    if kind == "dask" and not compute:
        return frame
    return collect(frame)


def resample_gpu(data, freq: str = "1min", *, columns: Sequence[str] | None = None,
                 energy: bool | None = None, start=None, end=None,
                 hosts: Sequence[str] | None = None, compute: bool = True,
                 partition_rows: int = 2_000_000) -> pd.DataFrame:
    """Resample telemetry per device (GPU or node) to fixed time bins.

    Parameters
    ----------
    data : pandas.DataFrame, dask.dataframe.DataFrame or path-like
        Telemetry in the canonical schema, or a store folder.
    freq : str, default "1min"
        Bin width; must divide a day [time span].
    columns : sequence of str, optional
        Columns to average (default: every column of :data:`MEAN_COLUMNS` present).
    energy : bool, optional
        Also compute ``energy_j`` (last counter reading in the bin [J]) and
        ``energy_delta_j`` (energy in the bin [J]); default: when ``energy_j`` is present.
    start, end : datetime-like, optional
        Keep samples with ``start <= timestamp < end`` (tz-aware).
    hosts : sequence of str, optional
        Keep these hosts only.
    compute : bool, default True
        Return a pandas frame; ``False`` returns a lazy Dask frame for Dask inputs (pass
        it to :func:`collect`).
    partition_rows : int, default 2,000,000
        Store input: rows per partition (whole folders of one date) [rows].

    Returns
    -------
    pandas.DataFrame
        One row per device and bin: ``timestamp`` (bin start, UTC), ``host``, ``scope``,
        ``gpu_index``, ``gpu_uuid`` (of the bin's last sample), ``n_samples``, the mean
        of each averaged column (NaN readings skipped; NaN when none), ``throttle_reasons``
        (bitwise OR over the bin), ``energy_j`` and ``energy_delta_j``.

    Notes
    -----
    ``energy_delta_j`` is the counter increase from the device's previous valid reading
    (possibly in an earlier bin or day) to its last reading in the bin, so the deltas of
    consecutive bins add up to the counter's total increase.  Across a counter reset
    (a decrease, see :func:`powerlab.telemetry.quality.counter_resets`) the energy between the
    reading before the reset and the one after it is unknown and counted as zero.
    """
    bin_ns = bin_width_ns(freq)
    kind, frame = _resampled(data, bin_ns, columns, energy, None, start, end, hosts,
                             partition_rows)
    return result_frame(kind, frame, compute)


# --- sums by time bin (cluster / host / rack / job)

def _rack_map(racks) -> pd.Series:
    if isinstance(racks, pd.DataFrame):
        check_columns(racks.columns, ["host", "rack"], "rack mapping")
        s = pd.Series(racks["rack"].to_numpy(), index=racks["host"].astype(str).to_numpy())
    elif isinstance(racks, pd.Series):
        s = racks.copy()
    elif isinstance(racks, Mapping):
        s = pd.Series(dict(racks))
    else:
        raise PowerlabError("racks must be a mapping host -> rack, a Series or a frame "
                            "with columns 'host' and 'rack'")
    s.index = s.index.astype(str)
    if s.index.duplicated().any():
        raise SchemaError([Violation("host", "host listed twice in the rack mapping",
                                     tuple(s.index[s.index.duplicated()]))],
                          source="rack mapping")
    return s.astype("string")


def _add_rack(part: pd.DataFrame, racks: pd.Series) -> pd.DataFrame:
    part = part.copy()
    rack = part["host"].astype(str).map(racks)
    missing = part.loc[rack.isna().to_numpy(), "host"].unique()
    if len(missing):
        raise SchemaError([Violation("host", f"no rack for host(s) {sorted(map(str, missing))}"
                                             " in the rack mapping")], source="rack mapping")
    part["rack"] = rack.astype("string")
    return part


def _sum_kernel(part: pd.DataFrame, keys: Sequence[str], value: str) -> pd.DataFrame:
    """Sum ``value`` over devices per (timestamp, keys), adding in a fixed order."""
    order = ["timestamp", *keys, *[k for k in ("host", "scope", "gpu_index")
                                   if k not in keys]]
    part = part.sort_values(order, kind="stable", na_position="first")
    g = part.groupby(["timestamp", *keys], sort=True, observed=True, dropna=False)
    # compensated sums in device order (binning.kahan_add): the store paths add the same
    # values in the same order, so every path gives the same bits
    n = g.ngroups
    s, c, k = np.zeros(n), np.zeros(n), np.zeros(n, np.int64)
    kahan_add(s, c, k, g.ngroup().to_numpy(dtype=np.int64),
              part[value].to_numpy(dtype=np.float64, na_value=np.nan))
    out = pd.DataFrame({value: np.where(k >= 1, s, np.nan), "n_gpus": k},
                       index=g.size().index).reset_index()
    out = out[[*keys, "timestamp", value, "n_gpus"]] if keys else out
    for c in keys:
        out[c] = out[c].astype("string")
    return out


def sum_by(kind: str, frame, keys: Sequence[str], value: str, racks=None):
    """Sum of ``value`` per timestamp and ``keys`` on a pandas (``kind="pandas"``) or Dask
    frame (``rack`` keys mapped from ``racks``).  Shared with :mod:`.jobs`."""
    if racks is not None and "rack" in keys:
        rk = _rack_map(racks)
        frame = (frame.map_partitions(_add_rack, rk, meta=_add_rack(frame._meta, rk))
                 if kind == "dask" else _add_rack(frame, rk))
    if kind == "pandas":
        return _sum_kernel(frame, keys, value)
    meta = _sum_kernel(frame._meta, keys, value)
    shuffled = frame.shuffle(on="timestamp", npartitions=max(1, frame.npartitions // 4),
                             shuffle_method="tasks")
    return shuffled.map_partitions(_sum_kernel, keys, value, meta=meta,
                                   enforce_metadata=False)


def power_sums(data, freq: str = "1min", *, by: str = "cluster", racks=None,
               scope: str = "gpu", start=None, end=None, hosts: Sequence[str] | None = None,
               compute: bool = True, partition_rows: int = 2_000_000,
               engine: str = "auto", progress=None) -> pd.DataFrame:
    """Power of the cluster, each host or each rack per time bin.

    Parameters
    ----------
    data : pandas.DataFrame, dask.dataframe.DataFrame or path-like
        Telemetry in the canonical schema, or a store folder.
    freq : str, default "1min"
        Bin width; must divide a day [time span].
    by : {"cluster", "host", "rack"}
        Grouping.
    racks : mapping, Series or DataFrame, optional
        Host -> rack (needed for ``by="rack"``); every host must be mapped.
    scope : {"gpu", "node", "all"}, default "gpu"
        Which rows to add: GPU board power, node AC power (what a facility meters; the
        MLPerf power logs and node meters give only this), or both, summed separately
        with a ``scope`` column (never added together: node power includes its GPUs).
    start, end, hosts, compute, partition_rows
        As in :func:`resample_gpu`.
    engine : {"auto", "duckdb", "dask", "pandas"}, default "auto"
        Where a store is aggregated (:mod:`powerlab.telemetry.engines`; ``auto``:
        DuckDB); frames given in memory run where they are.
    progress : powerlab._progress.Progress, optional
        Updated with the fraction done while DuckDB aggregates a store (total: rows).

    Returns
    -------
    pandas.DataFrame
        ``[host|rack,] [scope,] timestamp, power_w, n_gpus``: the sum over devices of
        each device's mean power in the bin [W] and the number of devices with a reading
        (``n_gpus`` counts nodes for node rows).

    Warns
    -----
    EmptyResultWarning
        When the computed result has no rows, saying what the input holds instead.
    """
    keys = {"cluster": [], "host": ["host"], "rack": ["rack"]}.get(by)
    if keys is None:
        raise PowerlabError(f"by={by!r}: expected 'cluster', 'host' or 'rack' "
                            "(per-job power: job_power)")
    if by == "rack" and racks is None:
        raise PowerlabError("by='rack' needs a host -> rack mapping (racks=...)")
    choice(scope, "scope", ("gpu", "node", "all"))
    bin_ns = bin_width_ns(freq)
    if isinstance(data, (str, os.PathLike)):
        # a store: streamed folder by folder, straight from Arrow (the same sums)
        kind, res = store_power_sums(data, bin_ns, by=by, scope=scope, start=start,
                                     end=end, hosts=hosts, engine=engine,
                                     racks=_rack_map(racks) if by == "rack" else None,
                                     partition_rows=partition_rows, progress=progress)
        out = result_frame(kind, res, compute)
    else:
        kind, frame = _resampled(data, bin_ns, ["power_w"], False, False, start, end,
                                 hosts, partition_rows,
                                 scope=None if scope == "all" else scope, uuid=False,
                                 engine=engine)
        keys = [*keys, "scope"] if scope == "all" else keys
        out = result_frame(kind, sum_by(kind, frame, keys, "power_w", racks), compute)
    if compute:
        warn_if_empty(out, "power_sums", data, scope=scope, start=start, end=end,
                      hosts=hosts)
    return out


# --- hour of day

def hour_of_day(data, site_tz: str, freq: str = "1min", *, by: str = "cluster", racks=None,
                scope: str = "gpu", start=None, end=None,
                hosts: Sequence[str] | None = None,
                partition_rows: int = 2_000_000) -> pd.DataFrame:
    """Statistics of power by local hour of day at the site.

    The cluster (host, rack) power of each ``freq`` bin (see :func:`power_sums`) is
    labelled with the local hour of its start in ``site_tz``; on a daylight-saving day the
    skipped hour simply has fewer bins and the repeated hour has more.

    Parameters
    ----------
    site_tz : str
        IANA time zone of the site (e.g. ``"America/New_York"``); required, never guessed.
    freq : str, default "1min"
        Bin width of the power series; must divide an hour [time span].
    by, racks, scope, start, end, hosts, partition_rows
        As in :func:`power_sums`.

    Returns
    -------
    pandas.DataFrame
        ``[host|rack,] hour, count, mean_w, std_w, min_w, median_w, max_w`` with ``hour``
        0..23 local time and ``count`` the number of bins [W].
    """
    try:
        import zoneinfo

        zoneinfo.ZoneInfo(site_tz)
    except Exception as exc:
        raise PowerlabError(f"site_tz {site_tz!r} is not an IANA time zone "
                            "(e.g. 'Europe/Paris')") from exc
    if 3_600 * 10**9 % bin_width_ns(freq):
        raise PowerlabError(f"freq {freq!r} must divide an hour for hour-of-day statistics")
    p = power_sums(data, freq, by=by, racks=racks, scope=scope, start=start, end=end,
                   hosts=hosts, partition_rows=partition_rows)
    keys = {"cluster": [], "host": ["host"], "rack": ["rack"]}[by]
    p = p[p["power_w"].notna()]
    hour = p["timestamp"].dt.tz_convert(site_tz).dt.hour.astype("int64")
    g = p.assign(hour=hour).groupby([*keys, "hour"], sort=True, observed=True)["power_w"]
    out = pd.DataFrame({"count": g.count().astype("int64"), "mean_w": g.mean(),
                        "std_w": g.std(), "min_w": g.min(), "median_w": g.median(),
                        "max_w": g.max()}).reset_index()
    return _canonical(out)


# --- straggler peer statistics

def _peer_kernel(part: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    g = part.groupby("timestamp", sort=True)
    out = {"n_gpus": g.size().astype("int64")}
    for c in columns:
        med = g[c].median()
        dev = (part[c] - part["timestamp"].map(med)).abs()
        out[f"{c}_median"] = med
        out[f"{c}_mad"] = dev.groupby(part["timestamp"], sort=True).median()
        out[f"{c}_count"] = g[c].count().astype("int64")
    return pd.DataFrame(out).rename_axis("timestamp").reset_index()


def peer_stats(data, freq: str = "1min", *, columns: Sequence[str] = PEER_COLUMNS,
               start=None, end=None, hosts: Sequence[str] | None = None,
               compute: bool = True, partition_rows: int = 2_000_000) -> pd.DataFrame:
    """Peer statistics across GPUs per time bin: median and MAD of each GPU's bin mean.

    The robust centre and spread against which a straggler (a GPU clocking lower, running
    hotter or drawing less power than its peers) stands out; see
    :mod:`powerlab.throughput.stragglers` for the flags.

    Parameters
    ----------
    columns : sequence of str, default ("clock_sm_mhz", "temp_gpu_c", "power_w")
        Columns whose peer statistics are computed.
    freq, start, end, hosts, compute, partition_rows
        As in :func:`resample_gpu`.

    Returns
    -------
    pandas.DataFrame
        ``timestamp, n_gpus`` and, per column, ``<col>_median``, ``<col>_mad`` (median
        absolute deviation from the median, unscaled) and ``<col>_count`` (GPUs with a
        reading).

    References
    ----------
    .. [1] Leys, C., Ley, C., Klein, O., Bernard, P., Licata, L. (2013). Detecting outliers:
       Do not use standard deviation around the mean, use absolute deviation around the
       median. Journal of Experimental Social Psychology 49(4), 764-766.
    """
    bin_ns = bin_width_ns(freq)
    columns = list(columns)
    kind, frame = _resampled(data, bin_ns, columns, False, False, start, end, hosts,
                             partition_rows, scope="gpu", uuid=False)
    if kind == "pandas":
        res = _peer_kernel(frame, columns)
    else:
        meta = _peer_kernel(frame._meta, columns)
        res = frame.shuffle(on="timestamp", npartitions=max(1, frame.npartitions // 4),
                            shuffle_method="tasks") \
            .map_partitions(_peer_kernel, columns, meta=meta, enforce_metadata=False)
    return result_frame(kind, res, compute)


# --- quality masks

def _mask_kernel(df: pd.DataFrame, max_gap_s: float, stale_columns: Sequence[str],
                 stale_min_run: int, energy: bool,
                 before: pd.DataFrame | None = None,
                 after: pd.DataFrame | None = None) -> pd.DataFrame:
    from . import quality

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


def quality_masks(data, max_gap_s: float, *, stale_columns: Sequence[str] = ("power_w",
                                                                             "temp_gpu_c"),
                  stale_min_run: int = 10, start=None, end=None,
                  hosts: Sequence[str] | None = None, compute: bool = True,
                  partition_rows: int = 2_000_000) -> pd.DataFrame:
    """Quality masks of :mod:`powerlab.telemetry.quality` for every sample, at any scale.

    Runs :func:`powerlab.telemetry.quality.gaps`, :func:`~powerlab.telemetry.quality.stale` and
    :func:`~powerlab.telemetry.quality.counter_resets` on partitions that hold whole device-days,
    each extended by the neighbouring samples of the same devices from earlier and later
    days, so masks that look across midnight match the whole-frame result.

    Parameters
    ----------
    max_gap_s : float
        Largest normal spacing between samples of one device [s].
    stale_columns : sequence of str
        Columns checked for stuck readings.
    stale_min_run : int, default 10
        Shortest stale run [samples].
    start, end, hosts, compute, partition_rows
        As in :func:`resample_gpu`.

    Returns
    -------
    pandas.DataFrame
        ``timestamp, host, scope, gpu_index``, ``gap``, ``stale_<col>`` and (when
        ``energy_j`` is read) ``reset_energy_j``, one row per sample, sorted by device and
        time (duplicate samples kept, in input order).
    """
    stale_columns = list(stale_columns)
    k = max(int(stale_min_run) - 1, 1)
    if isinstance(data, (str, os.PathLike)):
        import dask
        import dask.dataframe as dd

        src = store_groups(data, start, end, hosts, partition_rows)
        cols = columns_for([*stale_columns, "energy_j"])
        energy = True
        meta = _mask_kernel(empty_frame(cols), max_gap_s, stale_columns, stale_min_run, energy)
        if not src.groups:
            return result_frame("dask", dd.from_pandas(meta, npartitions=1), compute)
        rb = dask.delayed(_read_boundary, pure=True)
        mb = dask.delayed(_merge_bound, pure=True)
        rm = dask.delayed(_read_mask, pure=True)
        dates = sorted({g.date for g in src.groups})
        bounds = {d: [rb(g, cols, src.start, src.end, k, energy)
                      for g in src.groups if g.date == d] for d in dates}
        before, after = {}, {}
        carry = None
        for d in dates:
            before[d] = carry
            carry = mb(carry, bounds[d], "tail", k, energy)
        carry = None
        for d in reversed(dates):
            after[d] = carry
            carry = mb(carry, bounds[d], "head", k, energy)
        parts = [rm(g, cols, src.start, src.end, max_gap_s, stale_columns, stale_min_run,
                    energy, before[g.date], after[g.date]) for g in src.groups]
        return result_frame("dask", dd.from_delayed(parts, meta=meta, verify_meta=False), compute)
    if is_dask(data):
        energy = "energy_j" in data.columns
        cols = list(dict.fromkeys([*ID_COLUMNS, *stale_columns, *(["energy_j"] if energy else [])]))
        check_columns(data.columns, cols, "dask input")
        ddf = data[cols]
        ddf = ddf.map_partitions(filter_frame, _utc(start), _utc(end), hosts, meta=ddf._meta)
        meta = _mask_kernel(empty_frame(cols), max_gap_s, stale_columns, stale_min_run, energy)
        res = ddf.shuffle(on="host").map_partitions(
            _mask_kernel, max_gap_s, stale_columns, stale_min_run, energy, meta=meta,
            enforce_metadata=False)
        return result_frame("dask", res, compute)
    if not isinstance(data, pd.DataFrame):
        raise PowerlabError(f"expected a pandas or Dask DataFrame or a store path, got "
                            f"{type(data).__name__}")
    energy = "energy_j" in data.columns
    df = filter_frame(data, start, end, hosts)
    return collect(_mask_kernel(df, max_gap_s, stale_columns, stale_min_run, energy))
