"""The canonical telemetry frame and what every analysis builds on: its schema, the
Parquet store, quality masks, and fleet-scale aggregation.

Modules
-------
:mod:`~powerlab.telemetry.schema`        columns, units, dtypes and validation (the glossary)
:mod:`~powerlab.telemetry.sources`       kinds of telemetry input: frame, Dask, store, Parquet
:mod:`~powerlab.telemetry.store`         crash-safe Parquet store partitioned by date and host
:mod:`~powerlab.telemetry.store_tables`  store files read as checked Arrow tables
:mod:`~powerlab.telemetry.store_order`   a store's tables as one frame in store order
:mod:`~powerlab.telemetry.storefiles`    the store's layout: folders, names, CRC-32, locks
:mod:`~powerlab.telemetry.store_upgrade` format-1 stores converted in place
:mod:`~powerlab.telemetry.quality`       boolean masks: gaps, stale readings, counter resets
:mod:`~powerlab.telemetry.events`        GPU error events (XID) and interruption root causes
:mod:`~powerlab.telemetry.event_store`   those events kept in a store (``_events/``)
:mod:`~powerlab.telemetry.aggregate`     resampling, power sums, peer stats, quality masks
:mod:`~powerlab.telemetry.resample`      per-device time bins, one entry per kind of input
:mod:`~powerlab.telemetry.sums`          sums over devices per bin: cluster, host, rack, job
:mod:`~powerlab.telemetry.masks`         quality masks at scale (partitions of whole device-days)
:mod:`~powerlab.telemetry.jobs`          power and energy per job (Slurm GPU -> job maps)
:mod:`~powerlab.telemetry.engines`       where aggregations run (DuckDB, pandas, Dask)
:mod:`~powerlab.telemetry.duck`          the power sums of a store as DuckDB queries
:mod:`~powerlab.telemetry.partitions`    reading a store for aggregation (pruning, Dask inputs)
:mod:`~powerlab.telemetry.binning`       per-device time-binning kernels (pandas and Dask alike)
:mod:`~powerlab.telemetry.timeutil`      the one rule for reading times (``to_utc``)

This wing imports no other wing: readers and collectors write into it, analyses read from it.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "events": (
        "EVENT_COLUMNS", "ROOT_CAUSES", "XID_CATALOGUE", "classify_xid", "empty_events",
    ),
    "schema": (
        "CORE_COLUMNS", "GLOSSARY", "THROTTLE_REASONS", "conform", "empty_frame",
        "glossary_frame", "validate",
    ),
    "event_store": (
        "read_events", "write_events",
    ),
    "store": (
        "atomic_write_bytes", "list_files", "read_store", "store_summary", "write_store",
    ),
    "quality": (
        "counter_resets", "gaps", "quality_report", "stale",
    ),
    "aggregate": (
        "collect", "hour_of_day", "peer_stats", "power_sums", "quality_masks",
        "resample_gpu",
    ),
    "jobs": (
        "gpu_job_map", "job_energy", "job_power",
    ),
    "engines": (
        "AggregationOptions", "EmptyResultWarning",
    ),
    "sources": (
        "TelemetrySource", "read_parquet_telemetry", "telemetry_source",
    ),
    "partitions": (
        "open_store",
    ),
    "timeutil": (
        "series_to_utc", "time_bound", "to_epoch_ns", "to_utc",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
