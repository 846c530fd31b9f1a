"""Fleet-scale aggregation of telemetry: the same answers from pandas, Dask and a store.

Every function here accepts telemetry of any kind
(:func:`powerlab.telemetry.sources.telemetry_source`):

* a :class:`pandas.DataFrame` in the canonical schema (a laptop, one node's data),
* a :class:`dask.dataframe.DataFrame` in the canonical schema,
* the path of a store (:mod:`powerlab.telemetry.store`) with an optional time range and
  host list; the store is then read lazily, one Dask partition per group of
  ``date=/host=`` folders, pruned by date and host and projected to the columns the
  aggregation needs, or
* the path of one canonical telemetry Parquet file (read into memory: as a frame),

and returns the same numbers, dtypes and row order whichever way it was called (the
Dask paths run the very same per-partition kernels as the pandas path, on partitions
arranged so that every (device, time bin) lies in exactly one partition; sums across
devices are compensated sums that add the device means in (host, scope, gpu_index) order
on every path, :func:`powerlab.telemetry.binning.kahan_add`).  :func:`power_sums` of a
store never builds the full frame: it streams folder by folder from Arrow
(:func:`powerlab.telemetry.engines.store_power_sums`), on pandas or Dask, or runs one
DuckDB query.  Each function resolves its input once and has one entry per kind:
per-device bins in :mod:`powerlab.telemetry.resample`, sums over devices in
:mod:`powerlab.telemetry.sums`, quality masks in :mod:`powerlab.telemetry.masks`.

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
* What part of the telemetry is read and how the aggregation runs (``start``, ``end``,
  ``hosts``, ``compute``, ``partition_rows``, ``engine``, ``progress``) is one
  :class:`~powerlab.telemetry.engines.AggregationOptions` (``options=``, or its fields
  as keywords) where a function takes all of them.

With ``compute=False`` a Dask input returns a lazy Dask DataFrame; pass it to
:func:`collect` to compute it into the canonical pandas result.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Sequence

import pandas as pd

from .._options import choice
from ..exceptions import PowerlabError
from .binning import bin_width_ns
from .engines import AggregationOptions, store_power_sums, warn_if_empty
from .masks import MaskSpec, mask_frame
from .partitions import is_dask, open_store
from .resample import MEAN_COLUMNS, Binning, device_bins
from .sources import TelemetrySource, telemetry_source
from .sums import SUM_KEYS, rack_map, sum_by

__all__ = [
    "MEAN_COLUMNS",
    "collect",
    "hour_of_day",
    "open_store",
    "peer_stats",
    "power_sums",
    "quality_masks",
    "resample_gpu",
]

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


# ----------------------------------------------------------------- the aggregations

def resample_gpu(data, freq: str = "1min", *, columns: Sequence[str] | None = None,
                 energy: bool | None = None, start=None, end=None,
                 hosts: Sequence[str] | None = None, compute: bool = True,
                 partition_rows: int = 2_000_000) -> pd.DataFrame:
    """Resample telemetry per device (GPU or node) to fixed time bins.

    Parameters
    ----------
    data : pandas.DataFrame, dask.dataframe.DataFrame or path-like
        Telemetry in the canonical schema, a store folder or a canonical ``.parquet``
        file (:func:`~powerlab.telemetry.sources.telemetry_source`).
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
    opts = AggregationOptions(start=start, end=end, hosts=hosts, compute=compute,
                              partition_rows=partition_rows)
    kind, frame = device_bins(telemetry_source(data), Binning(bin_ns, columns, energy),
                              opts)
    return result_frame(kind, frame, compute)


# --- sums by time bin (cluster / host / rack)

def power_sums(data, freq: str = "1min", *, by: str = "cluster", racks=None,
               scope: str = "gpu", options: AggregationOptions | None = None,
               **option_kw) -> pd.DataFrame:
    """Power of the cluster, each host or each rack per time bin.

    Parameters
    ----------
    data : pandas.DataFrame, dask.dataframe.DataFrame or path-like
        Telemetry in the canonical schema, a store folder or a canonical ``.parquet``
        file (:func:`~powerlab.telemetry.sources.telemetry_source`).
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
    options : AggregationOptions, optional
        What to read and how to run: ``start``, ``end``, ``hosts``, ``compute``,
        ``partition_rows`` (as in :func:`resample_gpu`), ``engine`` (``"auto"``,
        ``"duckdb"``, ``"dask"`` or ``"pandas"``: where a store is aggregated,
        :mod:`powerlab.telemetry.engines`; ``auto``: DuckDB; frames given in memory run
        where they are) and ``progress`` (a :class:`powerlab._progress.Progress`
        updated with the fraction done while DuckDB aggregates a store).
    **option_kw
        Fields of :class:`~powerlab.telemetry.engines.AggregationOptions` as keywords
        (``start=``, ``engine=``, ...), replacing those of ``options``.

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
    opts = AggregationOptions.from_kwargs(options, **option_kw)
    keys = _sum_keys(by, racks)
    choice(scope, "scope", ("gpu", "node", "all"))
    bin_ns = bin_width_ns(freq)
    source = telemetry_source(data)
    if source.kind == "store":
        out = _store_sums(source, bin_ns, by, racks, scope, opts)
    else:
        out = _sums_of_bins(source, bin_ns, keys, racks, scope, opts)
    if opts.compute:
        warn_if_empty(out, "power_sums", source.data, scope=scope, start=opts.start,
                      end=opts.end, hosts=opts.hosts)
    return out


def _sum_keys(by: str, racks) -> list[str]:
    keys = SUM_KEYS.get(by)
    if keys is None:
        raise PowerlabError(f"by={by!r}: expected 'cluster', 'host' or 'rack' "
                            "(per-job power: job_power)")
    if by == "rack" and racks is None:
        raise PowerlabError("by='rack' needs a host -> rack mapping (racks=...)")
    return list(keys)


def _store_sums(source: TelemetrySource, bin_ns: int, by: str, racks, scope: str,
                opts: AggregationOptions):
    """A store: streamed folder by folder, straight from Arrow, or one DuckDB query
    (the same sums)."""
    kind, res = store_power_sums(source.data, bin_ns, by=by, scope=scope,
                                 racks=rack_map(racks) if by == "rack" else None,
                                 options=opts)
    return result_frame(kind, res, opts.compute)


def _sums_of_bins(source: TelemetrySource, bin_ns: int, keys: list[str], racks,
                  scope: str, opts: AggregationOptions):
    """A frame, a Parquet file or a Dask frame: the sums of the per-device bin means."""
    binning = Binning(bin_ns, ["power_w"], False, False,
                      scope=None if scope == "all" else scope, uuid=False)
    kind, frame = device_bins(source, binning, opts)
    keys = [*keys, "scope"] if scope == "all" else keys
    return result_frame(kind, sum_by(kind, frame, keys, "power_w", racks), opts.compute)


# --- hour of day

def hour_of_day(data, site_tz: str, freq: str = "1min", *, by: str = "cluster", racks=None,
                scope: str = "gpu", options: AggregationOptions | None = None,
                **option_kw) -> pd.DataFrame:
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
    by, racks, scope, options, **option_kw
        As in :func:`power_sums` (``start``, ``end``, ``hosts``, ``partition_rows``,
        ``engine``, ``progress``); the statistics are always computed
        (``compute=False`` is refused).

    Returns
    -------
    pandas.DataFrame
        ``[host|rack,] hour, count, mean_w, std_w, min_w, median_w, max_w`` with ``hour``
        0..23 local time and ``count`` the number of bins [W].
    """
    opts = AggregationOptions.from_kwargs(options, **option_kw)
    try:
        zoneinfo.ZoneInfo(site_tz)
    except Exception as exc:
        raise PowerlabError(f"site_tz {site_tz!r} is not an IANA time zone "
                            "(e.g. 'Europe/Paris')") from exc
    if 3_600 * 10**9 % bin_width_ns(freq):
        raise PowerlabError(f"freq {freq!r} must divide an hour for hour-of-day statistics")
    if not opts.compute:
        raise PowerlabError("hour_of_day computes its statistics; compute=False is not "
                            "an option here")
    p = power_sums(data, freq, by=by, racks=racks, scope=scope, options=opts)
    keys = SUM_KEYS[by]
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
    data, freq, start, end, hosts, compute, partition_rows
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
    opts = AggregationOptions(start=start, end=end, hosts=hosts, compute=compute,
                              partition_rows=partition_rows)
    kind, frame = device_bins(telemetry_source(data),
                              Binning(bin_ns, columns, False, False, scope="gpu", uuid=False),
                              opts)
    if kind == "pandas":
        res = _peer_kernel(frame, columns)
    else:
        meta = _peer_kernel(frame._meta, columns)
        res = frame.shuffle(on="timestamp", npartitions=max(1, frame.npartitions // 4),
                            shuffle_method="tasks") \
            .map_partitions(_peer_kernel, columns, meta=meta, enforce_metadata=False)
    return result_frame(kind, res, compute)


# --- quality masks

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
    data : pandas.DataFrame, dask.dataframe.DataFrame or path-like
        As in :func:`resample_gpu` (a store needs the Dask extra).
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
    spec = MaskSpec(max_gap_s, tuple(stale_columns), stale_min_run)
    opts = AggregationOptions(start=start, end=end, hosts=hosts, compute=compute,
                              partition_rows=partition_rows)
    kind, frame = mask_frame(telemetry_source(data), spec, opts)
    return result_frame(kind, frame, compute)
