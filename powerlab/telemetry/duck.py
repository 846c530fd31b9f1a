"""Power sums of a store on DuckDB, the default embedded engine.

:func:`duckdb_power_sums` runs :func:`powerlab.telemetry.aggregate.power_sums` of a store
(and hence ``powerlab aggregate``) as one SQL query over the store's Parquet files, and
:func:`duckdb_job_power` the per-job sums of :func:`powerlab.telemetry.jobs.job_power`.
The files are the ones the pandas and Dask engines read (pruned by date and host folder);
the query follows their conventions exactly:

* each device ``(host, scope, gpu_index)`` is averaged per bin (left-closed, labelled by
  its start, ``epoch_ns(timestamp) // bin``), NaN and null readings skipped;
* a (device, timestamp) held twice counts once, the first in file-name order: when two
  files of one date/host folder overlap in time (their Parquet footers say so), the query
  first keeps the first sample of every (device, timestamp)
  (``arg_min_null(power_w, (file, row))``); a store written by :func:`write_store` or the
  collector never repeats a sample inside one file (``validate`` refuses duplicates), so
  files that do not overlap skip that step;
* device means are added per (key, bin) in (host, scope, gpu_index) order with DuckDB's
  compensated sum (``fsum``), so the result does not depend on the thread count.

The answers equal the pandas and Dask engines' in every key, bin, ``n_gpus`` and row
order; ``power_w`` agrees to the last few units in the last place (DuckDB adds in another
order than ``numpy.add.reduceat`` and :func:`~powerlab.telemetry.binning.kahan_add`;
tested to 1e-12 relative).

References
----------
.. [1] Raasveldt, M., Muehleisen, H. (2019). DuckDB: an embeddable analytical database.
   SIGMOD '19, 1981-1984. https://duckdb.org/docs/stable/sql/functions/aggregates
"""

from __future__ import annotations

import itertools
import os
import threading

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import SchemaError, StoreError, Violation
from .binning import BinSums, utc_series
from .storefiles import partition_of
from .timeutil import to_epoch_ns

__all__ = ["duckdb_job_power", "duckdb_power_sums"]

#: DuckDB threads: all cores unless ``POWERLAB_DUCKDB_THREADS`` says otherwise.
_THREADS_ENV = "POWERLAB_DUCKDB_THREADS"


def _connect():
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    threads = os.environ.get(_THREADS_ENV)
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    return con


def _overlapping(files: list[str]) -> bool:
    """Whether two files of one date/host folder may hold the same timestamps."""
    by_folder: dict = {}
    for f in files:
        by_folder.setdefault(partition_of(f), []).append(f)
    for fs in by_folder.values():
        if len(fs) < 2:
            continue
        spans = []
        for f in fs:
            try:
                md = pq.read_metadata(f)
            except (OSError, pa.ArrowException) as exc:
                raise StoreError(f"cannot read the Parquet footer of {f}: {exc}") from exc
            col = md.schema.names.index("timestamp") if "timestamp" in md.schema.names else -1
            lo = hi = None
            for g in range(md.num_row_groups):
                st = md.row_group(g).column(col).statistics if col >= 0 else None
                if st is None or not st.has_min_max:
                    return True                 # unknown span: assume the worst
                lo = st.min if lo is None else min(lo, st.min)
                hi = st.max if hi is None else max(hi, st.max)
            if lo is not None:
                spans.append((lo, hi))
        spans.sort()
        if any(b[0] <= a[1] for a, b in itertools.pairwise(spans)):
            return True
    return False


def _source(files: list[str], start, end, scope: str | None, dedup: bool,
            value: str = "power_w", union: bool = False) -> tuple[str, list]:
    """SQL of the samples ``timestamp, host, scope, gpu_index, <value>`` and its parameters
    (``union``: the files' columns differ, so match them by name)."""
    where, params = [], [files]
    if scope is not None:
        where.append("scope = ?")
        params.append(scope)
    if start is not None:
        where.append("timestamp >= ?::TIMESTAMPTZ_NS")
        params.append(pd.Timestamp(start).isoformat())
    if end is not None:
        where.append("timestamp < ?::TIMESTAMPTZ_NS")
        params.append(pd.Timestamp(end).isoformat())
    cond = f"WHERE {' AND '.join(where)}" if where else ""
    by_name = ", union_by_name = true" if union else ""
    if not dedup:
        return (f"SELECT timestamp, host, scope, gpu_index, {value} FROM read_parquet(?"
                f"{by_name}) {cond}"), params
    # the first sample of each (device, timestamp) in file-name order
    return (f"SELECT timestamp, host, scope, gpu_index, "
            f"arg_min_null({value}, {{'f': filename, 'r': file_row_number}}) AS {value} "
            f"FROM read_parquet(?{by_name}, filename = true, "
            f"file_row_number = true) {cond} GROUP BY timestamp, host, scope, gpu_index"), \
        params


def _empty(keys) -> pd.DataFrame:
    return BinSums().frame(keys, 1)


def _no_null_times(con, files, df: pd.DataFrame) -> None:
    """A null bin means a sample without a timestamp: name its file, as the other engines do."""
    if not df["bin"].isna().any():
        return
    bad = con.execute("SELECT filename FROM read_parquet(?, filename = true, "
                      "union_by_name = true) WHERE timestamp IS NULL LIMIT 1",
                      [files]).fetchall()
    where = f" (in {os.path.dirname(bad[0][0])})" if bad else ""
    raise StoreError(f"a store file holds rows without a timestamp{where}")


def _result(df: pd.DataFrame, keys, bin_ns: int) -> pd.DataFrame:
    out = {k: pd.array(df[k].to_numpy(dtype=object), dtype="string") for k in keys}
    out["timestamp"] = utc_series(df["bin"].to_numpy(dtype=np.int64) * bin_ns)
    out["power_w"] = pd.Series(df["power_w"].to_numpy(dtype=np.float64, na_value=np.nan))
    out["n_gpus"] = pd.Series(df["n_gpus"].to_numpy(dtype=np.int64))
    return pd.DataFrame({k: (v if isinstance(v, pd.Series) else pd.Series(v))
                         for k, v in out.items()})


def _watch(con, on_progress):
    """Report DuckDB's progress of the running query (0..1) every 0.2 s in a thread;
    returns the stop event."""
    stop = threading.Event()
    if on_progress is None:
        return stop

    def poll():
        while not stop.wait(0.2):
            try:
                pct = con.query_progress()
            except Exception:  # noqa: BLE001  (the query ended meanwhile: nothing to report)
                return
            if pct >= 0:
                on_progress(pct / 100.0)

    try:
        threading.Thread(target=poll, daemon=True, name="powerlab-duckdb-progress").start()
    except RuntimeError:    # no thread to be had (a capped address space): no progress,
        pass                # the query itself runs as before
    return stop


def _run(con, build, on_progress=None) -> pd.DataFrame:
    """Run ``build(union) -> (sql, params)``: first reading the files with the first
    file's columns (the fast path; a store's files normally share them), then, when a
    file lacks a column or types differ, matching columns by name.  ``on_progress``
    receives DuckDB's progress (0..1) while it runs."""
    stop = _watch(con, on_progress)
    try:
        try:
            return con.execute(*build(False)).df()
        except duckdb.Error:
            pass
        try:
            return con.execute(*build(True)).df()
        except duckdb.Error as exc:
            raise StoreError(f"DuckDB could not aggregate the store: {exc}") from exc
    finally:
        stop.set()


def duckdb_power_sums(files, bin_ns: int, *, by: str, racks: pd.Series | None, scope: str,
                      start=None, end=None, on_progress=None) -> pd.DataFrame:
    """Per-bin power sums of a store on DuckDB, as the pandas engine computes them.

    Parameters
    ----------
    files : list of str
        The store's files to read, in store order (pruned by date and host folder, as
        :func:`powerlab.telemetry.engines.store_files` lists them).
    bin_ns : int
        Bin width [ns].
    by : {"cluster", "host", "rack"}
    racks : pandas.Series, optional
        Host -> rack (``by="rack"``).
    scope : {"gpu", "node", "all"}
    start, end : pandas.Timestamp, optional
        Keep ``start <= timestamp < end`` (UTC).
    on_progress : callable, optional
        Called with the fraction done (0..1) while the query runs.

    Returns
    -------
    pandas.DataFrame
        ``[host|rack,] [scope,] timestamp, power_w, n_gpus``, not yet in canonical order.
    """
    keys = [*({"cluster": [], "host": ["host"], "rack": ["rack"]}[by]),
            *(["scope"] if scope == "all" else [])]
    files = list(files)
    if not files:
        return _empty(keys)
    dedup = _overlapping(files)
    order = "host NULLS FIRST, scope NULLS FIRST, gpu_index NULLS FIRST"
    sel_keys = "".join(f"{k}, " for k in keys)
    con = _connect()

    def dev(union: bool) -> tuple[str, list]:
        src, params = _source(files, start, end, None if scope == "all" else scope, dedup,
                              union=union)
        # NaN = NaN in DuckDB, so nullif turns NaN readings into nulls avg() skips
        return (f"SELECT host, scope, gpu_index, epoch_ns(timestamp) // {int(bin_ns)} AS bin, "
                f"avg(nullif(power_w, 'NaN'::DOUBLE)) AS p FROM ({src}) "
                f"GROUP BY host, scope, gpu_index, bin"), params

    def sums(inner: str) -> str:
        return (f"SELECT {sel_keys}bin, fsum(p ORDER BY {order}) AS power_w, "
                f"count(p) AS n_gpus FROM ({inner}) GROUP BY {sel_keys}bin")

    try:
        if by != "rack":
            out = _run(con, lambda u: (sums(dev(u)[0]), dev(u)[1]), on_progress)
            _no_null_times(con, files, out)
            return _result(out, keys, bin_ns)
        con.register("_racks", pd.DataFrame({"host": racks.index.astype(str),
                                             "rack": racks.astype(str).to_numpy()}))
        _run(con, lambda u: ((f"CREATE OR REPLACE TEMP TABLE _dev AS SELECT d.*, r.rack "
                              f"FROM ({dev(u)[0]}) d LEFT JOIN _racks r USING (host)"),
                             dev(u)[1]), on_progress)
        missing = con.execute("SELECT DISTINCT host FROM _dev WHERE rack IS NULL "
                              "ORDER BY host").fetchall()
        if missing:
            raise SchemaError([Violation("host", f"no rack for host(s) "
                                                 f"{[m[0] for m in missing]} in the rack "
                                                 "mapping")], source="rack mapping")
        out = con.execute(sums("SELECT * FROM _dev")).df()
        _no_null_times(con, files, out)
        return _result(out, keys, bin_ns)
    finally:
        con.close()


def duckdb_job_power(files, jobs: pd.DataFrame, bin_ns: int, *, scope: str = "gpu",
                     start=None, end=None, on_progress=None) -> pd.DataFrame:
    """Per (job, bin) power of a store on DuckDB, as :func:`~powerlab.telemetry.jobs.job_power`
    computes it: each sample goes to the job holding its device at that instant
    (``start <= timestamp < end``), a device's bin mean is split among its jobs in
    proportion to their valid samples, and the shares are added per (job, bin) in device
    order.

    ``files`` as in :func:`duckdb_power_sums`; ``jobs`` is the checked job table
    (``host, gpu_index, job_id, start, end``; for ``scope="node"`` keyed as device 0 of
    each host).  Returns ``job_id, timestamp,
    power_w, n_gpus``, not yet in canonical order.
    """
    keys = ["job_id"]
    files = list(files)
    if not files or not len(jobs):
        return _empty(keys)
    dedup = _overlapping(files)
    gpu = "gpu_index" if scope == "gpu" else "0::SMALLINT"
    con = _connect()
    try:
        con.register("_jobs", pd.DataFrame({
            "host": jobs["host"].astype(str).to_numpy(),
            "gpu_index": jobs["gpu_index"].to_numpy(dtype=np.int16),
            "job_id": jobs["job_id"].astype(str).to_numpy(),
            "j_start": to_epoch_ns(jobs["start"]),
            "j_end": to_epoch_ns(jobs["end"])}))
        # valid samples per (device, bin) and, of those, per job: share = sum / all valid
        def build(union: bool) -> tuple[str, list]:
            src, params = _source(files, start, end, scope, dedup, union=union)
            return f"""
            WITH s AS (
                SELECT host, scope, {gpu} AS gpu_index, epoch_ns(timestamp) AS t,
                       epoch_ns(timestamp) // {int(bin_ns)} AS bin, power_w
                FROM ({src}) WHERE power_w IS NOT NULL AND NOT isnan(power_w)),
            nvalid AS (
                SELECT host, scope, gpu_index, bin, count(*) AS n FROM s
                GROUP BY host, scope, gpu_index, bin),
            shares AS (
                SELECT s.host, s.scope, s.gpu_index, s.bin, j.job_id, sum(s.power_w) AS ps
                FROM s JOIN _jobs j ON s.host = j.host AND s.gpu_index = j.gpu_index
                     AND s.t >= j.j_start AND s.t < j.j_end
                GROUP BY s.host, s.scope, s.gpu_index, s.bin, j.job_id)
            SELECT job_id, bin,
                   fsum(ps / n ORDER BY host NULLS FIRST, scope NULLS FIRST,
                        gpu_index NULLS FIRST) AS power_w,
                   count(*) AS n_gpus
            FROM shares JOIN nvalid USING (host, scope, gpu_index, bin)
            GROUP BY job_id, bin""", params

        out = _run(con, build, on_progress)
        _no_null_times(con, files, out)
        return _result(out, keys, bin_ns)
    finally:
        con.close()

