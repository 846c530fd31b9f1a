"""Power and energy per job: a GPU -> job mapping (from the scheduler) applied to telemetry.

:func:`job_power` attributes each GPU sample to the job that held the GPU at that instant
and sums per job and time bin, with the same kernels on pandas and Dask as
:mod:`powerlab.telemetry.aggregate`; :func:`job_energy` turns that into the per-job
figures facilities and finance ask for (MWh, mean and peak MW).  The mapping comes from
:func:`powerlab.iotools.read_sacct` via :func:`gpu_job_map`, or from any table with the
columns ``host, gpu_index, job_id, start, end``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._options import choice
from ..exceptions import DataQualityWarning, PowerlabError, SchemaError, Violation
from .aggregate import result_frame
from .binning import SortedDevices, bin_width_ns, utc_series
from .duck import duckdb_job_power
from .engines import (
    AggregationOptions,
    resolve_engine,
    store_files,
    store_frame,
    warn_if_empty,
)
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
from .sources import TelemetrySource, telemetry_source
from .sums import sum_by
from .timeutil import time_bound as _utc
from .timeutil import to_epoch_ns, to_utc

__all__ = ["gpu_job_map", "job_energy", "job_power"]


def _job_table(jobs: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(jobs, pd.DataFrame):
        raise PowerlabError("jobs must be a DataFrame with columns host, gpu_index, job_id, "
                            "start, end")
    need = ["host", "gpu_index", "job_id", "start", "end"]
    missing = [c for c in need if c not in jobs.columns]
    if missing:
        raise SchemaError([Violation(c, "missing column of the GPU -> job mapping") for c in
                           missing], source="job mapping")
    j = jobs[need].copy()
    v = []
    for c in ("start", "end"):
        if not isinstance(j[c].dtype, pd.DatetimeTZDtype):
            v.append(Violation(c, f"job times must be tz-aware, got {j[c].dtype}"))
    if v:
        raise SchemaError(v, source="job mapping")
    j["start"] = j["start"].dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
    j["end"] = j["end"].dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
    j["host"] = j["host"].astype("string")
    j["gpu_index"] = pd.to_numeric(j["gpu_index"]).astype("Int16")
    j["job_id"] = j["job_id"].astype("string")
    bad = j.index[(j["end"] <= j["start"]).to_numpy() | j[need].isna().any(axis=1).to_numpy()]
    if len(bad):
        raise SchemaError([Violation("end", "each job needs host, gpu_index, job_id and "
                                            "start < end", tuple(bad))], source="job mapping")
    j = j.sort_values(["host", "gpu_index", "start"], kind="stable").reset_index(drop=True)
    same = (j["host"].to_numpy()[1:] == j["host"].to_numpy()[:-1]) & \
           (j["gpu_index"].to_numpy()[1:] == j["gpu_index"].to_numpy()[:-1])
    over = same & (j["start"].to_numpy()[1:] < j["end"].to_numpy()[:-1])
    if over.any():
        raise SchemaError([Violation("start", "jobs overlap on the same GPU (host, gpu_index)",
                                     tuple(np.flatnonzero(over) + 1))], source="job mapping")
    return j


def _job_kernel(df: pd.DataFrame, jobs: pd.DataFrame, bin_ns: int) -> pd.DataFrame:
    """Per (device, bin, job): the job's share of the device's bin-mean power [W]."""
    srt = SortedDevices(df)
    code, ts = srt.code, srt.ts
    df = srt.df.take(srt.pos).reset_index(drop=True)
    n = len(srt)
    b = ts // bin_ns
    job = np.full(n, -1, dtype=np.int64)
    if n and len(jobs):
        key = pd.MultiIndex.from_arrays([df["host"].astype("string"),
                                         df["gpu_index"].astype("Int16")])
        jstart = to_epoch_ns(jobs["start"])
        jend = to_epoch_ns(jobs["end"])
        dkey = pd.MultiIndex.from_arrays([jobs["host"], jobs["gpu_index"]])
        jdev, uniq = dkey.factorize()            # jobs are sorted by device, start
        jdev = jdev.astype(np.int64)
        dev_idx = uniq.get_indexer(key)          # each sample's job-device number or -1
        has = dev_idx >= 0
        first_job = np.searchsorted(jdev, np.arange(len(uniq)), side="left")
        last_job = np.searchsorted(jdev, np.arange(len(uniq)), side="right")
        pos = np.flatnonzero(has)
        for d in np.unique(dev_idx[has]):
            sel = pos[dev_idx[pos] == d]
            lo, hi = first_job[d], last_job[d]
            k = np.searchsorted(jstart[lo:hi], ts[sel], side="right") - 1
            ok = (k >= 0)
            kk = np.where(ok, k, 0) + lo
            ok &= ts[sel] < jend[kk]
            job[sel[ok]] = kk[ok]
    p = srt.values("power_w")
    valid = ~np.isnan(p)
    # valid-sample count per (device, bin)
    new_db = np.ones(n, dtype=bool)
    if n:
        new_db[1:] = (code[1:] != code[:-1]) | (b[1:] != b[:-1])
    gid = np.cumsum(new_db) - 1
    nvalid = np.bincount(gid, weights=valid, minlength=gid[-1] + 1 if n else 0)
    sel = np.flatnonzero(valid & (job >= 0))
    cols = {"timestamp": [], "job_id": [], "host": [], "scope": [], "gpu_index": [],
            "power_w": []}
    if len(sel):
        c2, b2, j2, p2 = code[sel], b[sel], job[sel], p[sel]
        order = np.lexsort((j2, b2, c2))  # stable: (device, bin, job), time order kept
        c2, b2, j2, p2, s2 = c2[order], b2[order], j2[order], p2[order], sel[order]
        new = np.ones(len(sel), dtype=bool)
        new[1:] = (c2[1:] != c2[:-1]) | (b2[1:] != b2[:-1]) | (j2[1:] != j2[:-1])
        starts = np.flatnonzero(new)
        sums = np.add.reduceat(p2, starts)
        rows = s2[starts]
        cols = {"timestamp": utc_series(b2[starts] * bin_ns),
                "job_id": jobs["job_id"].take(j2[starts]).reset_index(drop=True)}
        cols.update(srt.keys(rows))
        cols["power_w"] = pd.Series(sums / nvalid[gid[rows]], dtype="float64")
        return pd.DataFrame(cols)
    return pd.DataFrame({
        "timestamp": pd.Series([], dtype="datetime64[ns, UTC]"),
        "job_id": pd.Series([], dtype="string"), "host": pd.Series([], dtype="string"),
        "scope": pd.Series([], dtype="string"), "gpu_index": pd.Series([], dtype="Int16"),
        "power_w": pd.Series([], dtype="float64")})


def _scoped(df: pd.DataFrame, scope: str) -> pd.DataFrame:
    """The rows of one scope; node rows are keyed as device 0 of their host."""
    df = df[(df["scope"] == scope).fillna(False).to_numpy(dtype=bool)]
    if scope == "node":
        df = df.assign(gpu_index=pd.Series(0, index=df.index, dtype="Int16"))
    return df


def _node_jobs(jt: pd.DataFrame) -> pd.DataFrame:
    """A GPU -> job table as a node -> job table (device 0 of each host)."""
    j = jt.drop_duplicates(["host", "job_id", "start", "end"]).copy()
    j["gpu_index"] = pd.Series(0, index=j.index, dtype="Int16")
    return _job_table(j)


def _read_job(group: StoreGroup, cols, start, end, jobs, bin_ns, scope="gpu"):
    df = read_files(group.files, cols, start, end, categorical=True)
    return _job_kernel(_scoped(df, scope), jobs, bin_ns)


def job_power(data, jobs: pd.DataFrame, freq: str = "1min", *, scope: str = "gpu",
              options: AggregationOptions | None = None, **option_kw) -> pd.DataFrame:
    """Power of each job per time bin, from a GPU -> job mapping.

    Parameters
    ----------
    data : pandas.DataFrame, dask.dataframe.DataFrame or path-like
        Telemetry in the canonical schema, a store folder or a canonical ``.parquet``
        file (:func:`~powerlab.telemetry.sources.telemetry_source`; GPU rows are used).
    jobs : pandas.DataFrame
        Columns ``host``, ``gpu_index``, ``job_id``, ``start``, ``end`` (tz-aware): the
        GPU belonged to the job for ``start <= timestamp < end``; jobs on one GPU must
        not overlap.
    freq
        As in :func:`powerlab.telemetry.aggregate.power_sums`.
    scope : {"gpu", "node"}, default "gpu"
        Attribute GPU board power per GPU, or node AC power per node (a node's power
        goes to the jobs holding GPUs on it, split by time; for node-exclusive jobs,
        which is what node meters can attribute).
    options : AggregationOptions, optional
        ``start``, ``end``, ``hosts``, ``compute``, ``partition_rows``, ``engine``,
        ``progress``: as in :func:`powerlab.telemetry.aggregate.power_sums`.
    **option_kw
        Fields of :class:`~powerlab.telemetry.engines.AggregationOptions` as keywords,
        replacing those of ``options``.

    Returns
    -------
    pandas.DataFrame
        ``job_id, timestamp, power_w, n_gpus``.  Each sample is attributed to the job of
        its GPU at that instant; a GPU's bin-mean power is split among its jobs in
        proportion to their samples, so jobs plus unassigned GPUs add up to the cluster
        power of :func:`power_sums` [W].  ``n_gpus`` counts GPUs with samples of the job.
    """
    opts = AggregationOptions.from_kwargs(options, **option_kw)
    bin_ns = bin_width_ns(freq)
    choice(scope, "scope", ("gpu", "node"))
    jt = _job_table(jobs)
    if scope == "node":
        jt = _node_jobs(jt)
    source = telemetry_source(data)
    out, held = _ENTRIES[source.kind](source, jt, bin_ns, scope, opts)
    if opts.compute:
        warn_if_empty(out, "job_power", held, scope=scope, start=opts.start, end=opts.end,
                      hosts=opts.hosts)
    return out


# ------------------------------------------------------------------ one entry per kind
# Each returns the result and the telemetry whose rows explain an empty one.

def _job_power_of_frame(source: TelemetrySource, jt, bin_ns: int, scope: str,
                        opts: AggregationOptions):
    return _job_power_in_memory(source.frame(), jt, bin_ns, scope, opts)


def _job_power_in_memory(data: pd.DataFrame, jt, bin_ns: int, scope: str,
                         opts: AggregationOptions):
    check_columns(data.columns, [*ID_COLUMNS, "power_w"], "input frame")
    df = filter_frame(data, opts.start, opts.end, opts.hosts)
    frame = _job_kernel(_scoped(df, scope), jt, bin_ns)
    return result_frame("pandas", sum_by("pandas", frame, ["job_id"], "power_w"),
                        opts.compute), data


def _job_power_of_dask(source: TelemetrySource, jt, bin_ns: int, scope: str,
                       opts: AggregationOptions):
    data = source.data
    check_columns(data.columns, [*ID_COLUMNS, "power_w"], "dask input")
    ddf = data[ID_COLUMNS + ["power_w"]]
    s_u, e_u = _utc(opts.start), _utc(opts.end)
    ddf = ddf.map_partitions(filter_frame, s_u, e_u, opts.hosts, meta=ddf._meta)
    ddf = ddf.map_partitions(_scoped, scope, meta=_scoped(ddf._meta, scope))
    ddf = ddf.shuffle(on="host")
    meta = _job_kernel(empty_frame(ID_COLUMNS + ["power_w"]), jt, bin_ns)
    frame = ddf.map_partitions(_job_kernel, jt, bin_ns, meta=meta, enforce_metadata=False)
    return result_frame("dask", sum_by("dask", frame, ["job_id"], "power_w"),
                        opts.compute), data


def _job_power_of_store(source: TelemetrySource, jt, bin_ns: int, scope: str,
                        opts: AggregationOptions):
    eng = resolve_engine(opts.engine)
    root = source.data
    if eng == "duckdb":
        files, s_u, e_u = store_files(root, opts.start, opts.end, opts.hosts)
        progress = opts.progress
        return result_frame("pandas", duckdb_job_power(
            files, jt, bin_ns, scope=scope, start=s_u, end=e_u,
            on_progress=getattr(progress, "set_fraction", None) if progress else None),
            opts.compute), root
    if eng == "pandas":
        frame = store_frame(root, columns_for(["power_w"]), opts.start, opts.end,
                            opts.hosts)
        return _job_power_in_memory(frame, jt, bin_ns, scope, opts)
    import dask.dataframe as dd

    src = store_groups(root, opts.start, opts.end, opts.hosts, opts.partition_rows)
    cols = [c for c in columns_for(["power_w"]) if c != "gpu_uuid"]
    meta = _job_kernel(empty_frame(cols), jt, bin_ns)
    if not src.groups:
        frame = dd.from_pandas(meta, npartitions=1)
    else:
        frame = dd.from_map(_read_job, list(src.groups),
                            args=[cols, src.start, src.end, jt, bin_ns, scope],
                            meta=meta, enforce_metadata=False, label="job-power")
    return result_frame("dask", sum_by("dask", frame, ["job_id"], "power_w"),
                        opts.compute), root


_ENTRIES = {"frame": _job_power_of_frame, "parquet": _job_power_of_frame,
            "dask": _job_power_of_dask, "store": _job_power_of_store}


def gpu_job_map(jobs: pd.DataFrame, gpus_per_node, *, until=None) -> pd.DataFrame:
    """The GPU -> job table :func:`job_power` takes, from a Slurm job table.

    Parameters
    ----------
    jobs : DataFrame
        :func:`powerlab.iotools.read_sacct` output; job allocations are used (steps run
        inside their allocation's GPUs), pending jobs (no start) are left out.
    gpus_per_node : int or mapping
        GPUs of each node (one number, or host -> number).
    until : Timestamp, optional
        End of jobs still running (default: now, UTC).

    Returns
    -------
    DataFrame
        ``host, gpu_index, job_id, start, end``.  A job that holds every GPU of its nodes
        gets all of them; one that holds fewer gets the GPU indices Slurm recorded
        (``sacct --json`` ``gres_detail``); a job sharing nodes without recorded indices
        is left out with a :class:`~powerlab.exceptions.DataQualityWarning` naming it —
        which GPUs it held is not in the data.
    """
    need = ("job_id", "step", "start", "end", "hosts", "gpus")
    missing = [c for c in need if c not in jobs.columns]
    if missing:
        raise SchemaError([Violation(c, "missing column of the job table (read_sacct)")
                           for c in missing], source="job table")
    until = pd.Timestamp.now(tz="UTC") if until is None else to_utc(until, what="until")
    per = (lambda h: int(gpus_per_node[h])) if hasattr(gpus_per_node, "__getitem__") \
        else (lambda h: int(gpus_per_node))
    alloc = jobs[jobs["step"].isna() & jobs["start"].notna()]
    rows, skipped, no_gpu = [], [], []
    for r in alloc.itertuples(index=False):
        hosts = list(r.hosts)
        end = r.end if pd.notna(r.end) else until
        if not hosts or end <= r.start:
            continue
        idx = getattr(r, "gpu_indices", None)
        total = r.gpus if pd.notna(r.gpus) else None
        if not total:
            no_gpu.append(str(r.job_id))
            continue
        try:
            node_gpus = [per(h) for h in hosts]
        except KeyError as exc:
            raise PowerlabError(f"gpus_per_node has no entry for host {exc}") from None
        if isinstance(idx, dict) and all(h in idx for h in hosts):
            take = {h: list(idx[h]) for h in hosts}
        elif total == sum(node_gpus):
            take = {h: list(range(n)) for h, n in zip(hosts, node_gpus)}
        else:
            skipped.append(str(r.job_id))
            continue
        for h in hosts:
            rows += [(h, g, str(r.job_id), r.start, end) for g in take[h]]
    if skipped:
        warnings.warn(f"{len(skipped)} job(s) hold only part of their nodes' GPUs and the "
                      f"accounting does not say which ({', '.join(skipped[:8])}"
                      f"{' ...' if len(skipped) > 8 else ''}); left out. sacct --json "
                      "records the indices (gres_detail)", DataQualityWarning, stacklevel=2)
    out = pd.DataFrame(rows, columns=["host", "gpu_index", "job_id", "start", "end"])
    out["host"] = out["host"].astype("string")
    out["gpu_index"] = out["gpu_index"].astype("Int16")
    out["job_id"] = out["job_id"].astype("string")
    for c in ("start", "end"):
        out[c] = pd.to_datetime(out[c], utc=True).astype("datetime64[ns, UTC]")
    return out


def job_energy(power: pd.DataFrame, freq: str = "1min") -> pd.DataFrame:
    """Per-job figures from :func:`job_power` output: energy and power in planner units.

    Parameters
    ----------
    power : DataFrame
        ``job_id, timestamp, power_w, n_gpus`` per bin, as :func:`job_power` returns.
    freq : str
        The bin width ``job_power`` was called with.

    Returns
    -------
    DataFrame
        One row per job: ``job_id, first_bin_utc, last_bin_end_utc,
        energy_megawatt_hours`` (sum of bin power x bin width), ``mean_power_megawatts``
        (energy over the covered span), ``peak_power_megawatts`` (largest bin mean),
        ``gpus_max`` (most devices with samples in one bin).
    """
    bin_s = bin_width_ns(freq) / 1e9
    need = ["job_id", "timestamp", "power_w", "n_gpus"]
    check_columns(power.columns, need, "job power")
    g = power.dropna(subset=["power_w"]).groupby("job_id", sort=True, observed=True)
    e = g["power_w"].sum() * bin_s / 3.6e9
    first = g["timestamp"].min()
    last = g["timestamp"].max() + pd.Timedelta(seconds=bin_s)
    hours = (last - first).dt.total_seconds() / 3600
    out = pd.DataFrame({"first_bin_utc": first, "last_bin_end_utc": last,
                        "energy_megawatt_hours": e, "mean_power_megawatts": e / hours,
                        "peak_power_megawatts": g["power_w"].max() / 1e6,
                        "gpus_max": g["n_gpus"].max().astype("int64")})
    return out.reset_index()
