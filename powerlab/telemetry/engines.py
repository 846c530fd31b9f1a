"""Where a fleet aggregation runs: DuckDB or pandas in this process, or Dask.

The power aggregations of a store (:func:`powerlab.telemetry.aggregate.power_sums`,
:func:`powerlab.telemetry.jobs.job_power`, and so ``powerlab aggregate``) take
``engine="auto" | "duckdb" | "dask" | "pandas"``: ``auto`` is DuckDB
(:mod:`powerlab.telemetry.duck`, one SQL query over the store's Parquet files; a core
dependency), the fastest on one machine; Dask (an extra, ``pip install 'powerlab[dask]'``)
spreads the work over a cluster's workers; pandas needs neither.  Pandas and Dask run the
same kernels and give the same bits; DuckDB gives the same keys, bins, counts and order
and the same power to 1e-12 relative (another order of floating-point additions).
On pandas and Dask, :func:`store_power_sums` streams a store folder by folder (only the
columns needed, straight from Arrow, memory bounded by one folder and the result); on
Dask the partitions are reduced in parallel and each date's partial sums are folded in a
chain of small tasks, without a shuffle.  The other aggregations of a store path
(``resample_gpu``, ``peer_stats``, ``quality_masks``) still need Dask; give them a frame
to stay in pandas.
An aggregation that finds nothing to aggregate says why (:class:`EmptyResultWarning`)
instead of returning an empty table in silence.

What part of the telemetry an aggregation reads (``start``, ``end``, ``hosts``) and how it
runs (``engine``, ``compute``, ``partition_rows``, ``progress``) is one parameter object,
:class:`AggregationOptions`, shared by the aggregations that take all of them
(:func:`~powerlab.telemetry.aggregate.power_sums`,
:func:`~powerlab.telemetry.aggregate.hour_of_day`,
:func:`~powerlab.telemetry.jobs.job_power`): ``options=`` or its fields as keywords.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._options import Options, choice
from ..exceptions import DataQualityWarning, PowerlabError, SchemaError, StoreError, Violation
from .binning import BinSums, DeviceMeans
from .duck import duckdb_power_sums
from .partitions import filter_frame, read_files, store_groups
from .sources import telemetry_source
from .store import list_files
from .store_tables import read_tables
from .storefiles import partition_of
from .timeutil import time_bound as _utc

__all__ = ["ENGINES", "AggregationOptions", "EmptyResultWarning", "dask_available",
           "duckdb_available", "estimate_rows", "explain_empty", "resolve_engine",
           "store_files", "store_frame", "store_power_sums"]

ENGINES = ("auto", "duckdb", "dask", "pandas")


@dataclass(frozen=True)
class AggregationOptions(Options):
    """What part of the telemetry an aggregation reads, and how it runs.

    Parameters
    ----------
    start, end : datetime-like, optional
        Keep samples with ``start <= timestamp < end`` (tz-aware).
    hosts : sequence of str, optional
        Keep these hosts only.
    compute : bool, default True
        Return a pandas frame; ``False`` returns a lazy Dask frame for Dask inputs (pass
        it to :func:`powerlab.telemetry.aggregate.collect`).
    partition_rows : int, default 2,000,000
        Store input on Dask: rows per partition (whole folders of one date) [rows].
    engine : {"auto", "duckdb", "dask", "pandas"}, default "auto"
        Where a store is aggregated (``auto``: DuckDB where the aggregation has a DuckDB
        form); frames given in memory run where they are.
    progress : powerlab._progress.Progress, optional
        Updated with the fraction done while DuckDB aggregates a store (total: rows).
    """

    start: object = None
    end: object = None
    hosts: Sequence[str] | None = None
    compute: bool = True
    partition_rows: int = 2_000_000
    engine: str = "auto"
    progress: object = None


class EmptyResultWarning(DataQualityWarning):
    """An aggregation produced no rows; the message says why and what to change."""


def duckdb_available() -> bool:
    """Whether DuckDB (a core dependency) can be imported."""
    try:
        return importlib.util.find_spec("duckdb") is not None
    except (ImportError, ValueError):
        return False


def dask_available() -> bool:
    """Whether the Dask extra (dask.dataframe) is installed."""
    try:
        return importlib.util.find_spec("dask.dataframe") is not None
    except (ImportError, ValueError):
        return False


def resolve_engine(engine: str, *, duckdb: bool = True) -> str:
    """``'duckdb'``, ``'dask'`` or ``'pandas'`` for ``engine`` in :data:`ENGINES`.

    ``auto`` is DuckDB where the aggregation has a DuckDB form (``duckdb=True``: the power
    sums of a store), else Dask when installed, else pandas.

    Raises
    ------
    PowerlabError
        An unknown engine, ``'dask'`` without the Dask extra, ``'duckdb'`` without
        DuckDB or for an aggregation without a DuckDB form.
    """
    choice(engine, "engine", ENGINES)
    if engine == "auto":
        if duckdb and duckdb_available():
            return "duckdb"
        return "dask" if dask_available() else "pandas"
    if engine == "dask" and not dask_available():
        raise PowerlabError("engine='dask' needs the Dask extra: pip install "
                            "'powerlab[dask]' (or use engine='pandas')")
    if engine == "duckdb":
        if not duckdb:
            raise PowerlabError("engine='duckdb' runs the power sums of a store "
                                "(power_sums, job_power); use 'pandas' or 'dask' here")
        if not duckdb_available():
            raise PowerlabError("engine='duckdb' needs DuckDB: pip install duckdb "
                                "(or use engine='pandas')")
    return engine


def store_frame(root, columns: Sequence[str], start=None, end=None,
                hosts: Sequence[str] | None = None) -> pd.DataFrame:
    """A store's rows in ``[start, end)`` for ``hosts``, projected to ``columns``, in
    memory (the pandas engine's input; file order kept as the Dask path keeps it)."""
    src = store_groups(root, start, end, hosts, 2**62)
    files = [f for g in src.groups for f in g.files]
    return read_files(files, list(columns), src.start, src.end, categorical=True)


def _scope_counts(data, start, end, hosts) -> dict[str, int]:
    src = telemetry_source(data)
    if src.kind == "store":
        df = store_frame(src.data, ["timestamp", "host", "scope"], start, end, hosts)
    elif src.kind in ("frame", "parquet"):
        frame = src.frame()
        df = filter_frame(frame, start, end, hosts) if "timestamp" in frame.columns else frame
    else:
        return {}
    if "scope" not in df.columns:
        return {}
    return {str(k): int(v) for k, v in df["scope"].astype("string").value_counts().items()}


def explain_empty(what: str, data, *, scope: str | None, start=None, end=None,
                  hosts: Sequence[str] | None = None) -> str:
    """Why an aggregation of ``data`` (telemetry of any kind, see
    :func:`~powerlab.telemetry.sources.telemetry_source`) found no rows: what the input
    holds instead."""
    counts = _scope_counts(data, start, end, hosts)
    where = []
    if start is not None or end is not None:
        where.append(f"between {start} and {end}")
    if hosts is not None:
        where.append(f"for hosts {list(hosts)}")
    place = (" " + " ".join(where)) if where else ""
    if not counts:
        return f"{what}: no telemetry rows{place}; the result is empty"
    held = ", ".join(f"{n:,} '{k}' rows" for k, n in sorted(counts.items()))
    msg = f"{what}: no rows of scope '{scope}'{place}; the input holds {held}"
    others = [k for k in counts if k != scope]
    if scope is not None and others:
        msg += f"; use scope '{others[0]}' (--scope {others[0]}) or 'all'"
    return msg


def warn_if_empty(result, what: str, data, *, scope, start=None, end=None,
                  hosts=None) -> None:
    """Warn with :func:`explain_empty` when a computed result has no rows."""
    if isinstance(result, pd.DataFrame) and len(result) == 0:
        warnings.warn(explain_empty(what, data, scope=scope, start=start, end=end,
                                    hosts=hosts), EmptyResultWarning, stacklevel=3)


# ------------------------------------------- power sums of a store, streamed by folder

#: Columns the streaming power sums read from each store file.
_SUM_COLUMNS = ["timestamp", "host", "scope", "gpu_index", "power_w"]


def _folders(files) -> list[tuple[str, tuple[str, ...]]]:
    """(host, files) runs of consecutive files of one date/host folder."""
    runs: list[tuple[str, list[str]]] = []
    for f in files:
        host = partition_of(f)[1]
        if runs and runs[-1][0] == host:
            runs[-1][1].append(f)
        else:
            runs.append((host, [f]))
    return [(h, tuple(fs)) for h, fs in runs]


def _iter_means(files, start, end, bin_ns: int, scope: str | None):
    """(host, DeviceMeans) of each folder among ``files`` (hosts in store order), one
    folder read at a time."""
    for host, fs in _folders(files):
        tables = read_tables(fs, columns=_SUM_COLUMNS, start=start, end=end,
                             read_dictionary=["host", "scope"])
        try:
            m = DeviceMeans(tables, bin_ns, "power_w", scope)
        except StoreError as exc:
            raise StoreError(f"{exc} (in {os.path.dirname(fs[0])})") from exc
        if len(m):
            yield host, m


def _group_means(files, start, end, bin_ns: int, scope: str | None):
    """[(host, DeviceMeans)] of one partition's folders (a Dask task)."""
    return list(_iter_means(files, start, end, bin_ns, scope))


class _SumSpec:
    """How devices map to result keys: by cluster, host or rack, with or without scope."""

    def __init__(self, by: str, racks: pd.Series | None, with_scope: bool):
        self.by, self.racks, self.with_scope = by, racks, with_scope
        self.key_names = [*({"cluster": [], "host": ["host"], "rack": ["rack"]}[by]),
                          *(["scope"] if with_scope else [])]

    def fold(self, acc, group):
        """Add one partition's device means to ``acc`` (a BinSums) in device order."""
        acc = acc if acc is not None else (BinSums(), set())
        sums, missing = acc
        for host, m in group:
            head: tuple = ()
            if self.by == "host":
                head = (host,)
            elif self.by == "rack":
                rack = self.racks.get(host, pd.NA) if self.racks is not None else pd.NA
                if pd.isna(rack):
                    missing.add(host)
                    continue
                head = (str(rack),)
            if not self.with_scope or len(set(m.dev_scope.tolist())) == 1:
                key = (*head, m.scopes[m.dev_scope[0]]) if self.with_scope else head
                sums.add(key, m.bins, m.means)     # devices in order: one call
                continue
            for d in range(len(m)):
                a, b = m.dev_bounds[d], m.dev_bounds[d + 1]
                sums.add((*head, m.scopes[m.dev_scope[d]]), m.bins[a:b], m.means[a:b])
        return acc

    def fold_copy(self, acc, group):
        """:meth:`fold` into a copy (a Dask task never changes its inputs)."""
        if acc is not None:
            acc = (acc[0].copy(), set(acc[1]))
        return self.fold(acc, group)

    def frame(self, acc, bin_ns: int) -> pd.DataFrame:
        sums, missing = acc if acc is not None else (BinSums(), set())
        if missing:
            raise SchemaError([Violation("host", f"no rack for host(s) {sorted(missing)}"
                                                 " in the rack mapping")],
                              source="rack mapping")
        return sums.frame(self.key_names, bin_ns)


def _store_parts(root, start, end, hosts, partition_rows: int):
    """``(start, end, [(date, files), ...])``: whole date/host folders, hosts in order, cut
    into partitions of about ``partition_rows`` rows within a date.

    Rows are estimated from file sizes (one footer gives the bytes per row), so planning
    costs a directory listing, not a footer read per file.
    """
    if partition_rows < 1:
        raise PowerlabError("partition_rows must be at least 1 [rows]")
    start, end = _utc(start), _utc(end)
    by_folder: dict[tuple[str, str], list] = {}
    for f in list_files(root, start=start, end=end, hosts=hosts):
        by_folder.setdefault(partition_of(f), []).append(f)
    folders = sorted(by_folder.items())
    per_byte = None
    parts: list[tuple[str, list]] = []
    size = 0.0
    for (date, _host), fs in folders:
        if partition_rows < 2**62:
            nbytes = sum(os.path.getsize(f) for f in fs)
            if per_byte is None:
                try:
                    per_byte = (pq.read_metadata(fs[0]).num_rows
                                / max(os.path.getsize(fs[0]), 1))
                except (OSError, ValueError, pa.ArrowException):
                    per_byte = 0.0     # a damaged file: the reader names it later
            rows = nbytes * per_byte
        else:
            rows = 0.0
        if not parts or parts[-1][0] != date or (size + rows > partition_rows
                                                  and parts[-1][1]):
            parts.append((date, []))
            size = 0.0
        parts[-1][1].extend(str(f) for f in fs)
        size += rows
    return start, end, [(d, tuple(fs)) for d, fs in parts]


def _fraction_of(progress):
    """The ``set_fraction`` of an enabled :class:`powerlab._progress.Progress`, else None
    (a quiet run starts no progress poller)."""
    if not progress or not getattr(progress, "enabled", True):
        return None
    return getattr(progress, "set_fraction", None)


def store_files(root, start=None, end=None, hosts=None) -> tuple[list[str], object, object]:
    """``(files, start, end)``: a store's files in ``[start, end)`` for ``hosts`` (whole
    date/host folders, in store order) and the range as UTC timestamps."""
    start, end, parts = _store_parts(root, start, end, hosts, 2**62)
    return [f for _d, fs in parts for f in fs], start, end


def estimate_rows(files) -> int:
    """Rows of ``files`` estimated from their sizes (one footer gives the rows per byte)."""
    files = list(files)
    if not files:
        return 0
    try:
        per_byte = pq.read_metadata(files[0]).num_rows / max(os.path.getsize(files[0]), 1)
    except (OSError, ValueError, pa.ArrowException):
        return 0                              # a damaged file: the reader names it later
    return int(sum(os.path.getsize(f) for f in files) * per_byte)


def store_power_sums(root, bin_ns: int, *, by: str, racks: pd.Series | None, scope: str,
                     options: AggregationOptions | None = None, **option_kw):
    """Per-bin power sums of a store, streamed folder by folder (no full frame in memory).

    Each date/host folder is read with only the columns needed, reduced to per (device,
    bin) means (:class:`~powerlab.telemetry.binning.DeviceMeans`) and added into the bins
    of its date (:class:`~powerlab.telemetry.binning.BinSums`) in (host, scope, gpu_index)
    order, which gives bit for bit the pandas path's sums.  ``engine="pandas"`` runs it
    here, holding one folder and the result; ``"dask"`` reads and reduces the partitions
    in parallel and folds each date's partitions in a chain of small tasks (no shuffle);
    ``"duckdb"`` runs one query (:mod:`powerlab.telemetry.duck`).  ``options`` (or its
    fields as keywords): :class:`AggregationOptions` (``compute`` is not used here).

    Returns ``("pandas", frame)`` or ``("dask", lazy frame)``, not yet canonical.
    """
    opts = AggregationOptions.from_kwargs(options, **option_kw)
    spec = _SumSpec(by, racks, scope == "all")
    if resolve_engine(opts.engine) == "duckdb":
        files, start, end = store_files(root, opts.start, opts.end, opts.hosts)
        return "pandas", duckdb_power_sums(files, bin_ns, by=by, racks=racks, scope=scope,
                                           start=start, end=end,
                                           on_progress=_fraction_of(opts.progress))
    pandas = resolve_engine(opts.engine) == "pandas"
    start, end, parts = _store_parts(root, opts.start, opts.end, opts.hosts,
                                     2**62 if pandas else opts.partition_rows)
    window = (start, end, bin_ns, None if scope == "all" else scope)
    if pandas:
        return "pandas", _streamed_sums(spec, parts, window)
    return "dask", _dask_sums(spec, parts, window)


def _by_date(parts) -> dict:
    """A store's partitions grouped by date, each date's in store order."""
    by_date: dict = {}
    for d, files in parts:
        by_date.setdefault(d, []).append(files)
    return by_date


def _streamed_sums(spec: _SumSpec, parts, window) -> pd.DataFrame:
    """The sums here, one folder in memory at a time (``window``: start, end, bin width
    [ns] and the scope kept)."""
    start, end, bin_ns, scope = window
    frames = []
    for date_parts in _by_date(parts).values():   # one folder in memory at a time
        acc = None
        for files in date_parts:
            for item in _iter_means(files, start, end, bin_ns, scope):
                acc = spec.fold(acc, [item])
        frames.append(spec.frame(acc, bin_ns))
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else spec.frame(None, bin_ns)


def _dask_sums(spec: _SumSpec, parts, window):
    """The sums as a lazy Dask frame: partitions reduced in parallel, each date's folded
    in a chain of small tasks (by host: no chain, a host's bins lie in one partition)."""
    import dask
    import dask.dataframe as dd

    start, end, bin_ns, scope = window
    meta = spec.frame(None, bin_ns)
    if not parts:
        return dd.from_pandas(meta, npartitions=1)
    means = dask.delayed(_group_means, pure=True)
    fold = dask.delayed(spec.fold_copy, pure=True)
    final = dask.delayed(spec.frame, pure=True)
    out = []
    if spec.by == "host":               # a host's bins lie in one partition: no chain
        for _d, files in parts:
            out.append(final(fold(None, means(files, start, end, bin_ns, scope)), bin_ns))
        return dd.from_delayed(out, meta=meta, verify_meta=False)
    for date_parts in _by_date(parts).values():   # dates are independent, parts in order
        acc = None
        for files in date_parts:
            acc = fold(acc, means(files, start, end, bin_ns, scope))
        out.append(final(acc, bin_ns))
    return dd.from_delayed(out, meta=meta, verify_meta=False)
