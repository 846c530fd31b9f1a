"""``powerlab aggregate``: power of the cluster, hosts, racks or jobs from a store, on Dask."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "aggregate",
        help="aggregate a telemetry store to cluster/host/rack/job power per time bin (Dask)",
        description="Read a powerlab store lazily with Dask (pruned by date and host) and "
                    "write the power of the cluster, each host, rack or job per time bin: "
                    "the sum over GPUs of each GPU's mean power in the bin. Runs on local "
                    "threads, on a local cluster of --workers processes, or on an existing "
                    "Dask cluster (--scheduler).",
    )
    p.add_argument("store", type=Path, help="store folder (date=YYYY-MM-DD/host=H/...)")
    p.add_argument("--freq", default="1min", help="bin width dividing a day (default 1min)")
    p.add_argument("--by", choices=["cluster", "host", "rack", "job"], default="cluster",
                   help="grouping (default cluster)")
    p.add_argument("--jobs", type=Path, help="CSV GPU->job map: host,gpu_index,job_id,"
                   "start,end (ISO times with zone); needed for --by job")
    p.add_argument("--racks", type=Path, help="CSV host->rack map: host,rack; needed for "
                   "--by rack")
    p.add_argument("--start", help="first time, ISO 8601 with zone (e.g. 2024-05-17T00:00Z)")
    p.add_argument("--end", help="end time (exclusive), ISO 8601 with zone")
    p.add_argument("--out", type=Path, required=True, help="output file, .parquet or .csv")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="address of a running Dask scheduler (tcp://host:8786)")
    g.add_argument("--workers", type=int, metavar="N",
                   help="start a local cluster of N single-threaded worker processes")
    p.add_argument("--memory-limit", default="2GiB",
                   help="memory limit per local worker (with --workers; default 2GiB)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _time(value, name):
    import pandas as pd

    from ..exceptions import PowerlabError

    if value is None:
        return None
    try:
        t = pd.Timestamp(value)
    except ValueError as exc:
        raise PowerlabError(f"--{name} {value!r} is not an ISO 8601 time") from exc
    if t.tzinfo is None:
        raise PowerlabError(f"--{name} {value!r} has no time zone; add one, e.g. 'Z'")
    return t


def _read_csv(path: Path, need: list[str], what: str):
    import pandas as pd

    from ..exceptions import ParseError

    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise ParseError(f"cannot read the {what}: {exc}", path=path) from exc
    for c in need:
        if c not in df.columns:
            raise ParseError(f"missing column '{c}' in the {what} (expected columns "
                             f"{', '.join(need)})", path=path, line=1, column=c)
    return df


def _jobs(path: Path):
    import pandas as pd

    from ..exceptions import ParseError

    df = _read_csv(path, ["host", "gpu_index", "job_id", "start", "end"], "GPU->job map")
    out = df[["host", "job_id"]].copy()
    gi = pd.to_numeric(df["gpu_index"], errors="coerce")
    bad = gi.isna() | (gi % 1 != 0)
    if bad.any():
        i = int(bad.to_numpy().argmax())
        raise ParseError(f"gpu_index {df['gpu_index'].iloc[i]!r} is not an integer",
                         path=path, line=i + 2, column="gpu_index")
    out["gpu_index"] = gi.astype("Int16")
    for c in ("start", "end"):
        vals = []
        for i, v in enumerate(df[c]):
            try:
                t = pd.Timestamp(v)
            except ValueError:
                t = None
            if t is None or t is pd.NaT or t.tzinfo is None:
                raise ParseError(f"{v!r} is not an ISO 8601 time with a zone", path=path,
                                 line=i + 2, column=c)
            vals.append(t.tz_convert("UTC"))
        out[c] = pd.to_datetime(pd.Series(vals, dtype=object), utc=True)
    return out


def run(args) -> int:
    import contextlib

    from ..exceptions import PowerlabError
    from ..telemetry import aggregate as ag

    out = args.out
    if out.suffix not in (".parquet", ".csv"):
        raise PowerlabError(f"--out {out}: expected a .parquet or .csv file name")
    start, end = _time(args.start, "start"), _time(args.end, "end")
    if args.by == "job" and args.jobs is None:
        raise PowerlabError("--by job needs --jobs MAP.csv (host,gpu_index,job_id,start,end)")
    if args.by == "rack" and args.racks is None:
        raise PowerlabError("--by rack needs --racks MAP.csv (host,rack)")
    if args.workers is not None and args.workers < 1:
        raise PowerlabError("--workers must be at least 1")
    if args.by == "job":
        lazy = ag.job_power(args.store, _jobs(args.jobs), args.freq, start=start, end=end,
                            compute=False)
    else:
        racks = None
        if args.racks is not None:
            racks = _read_csv(args.racks, ["host", "rack"], "host->rack map")
        lazy = ag.power_sums(args.store, args.freq, by=args.by, racks=racks, start=start,
                             end=end, compute=False)

    with contextlib.ExitStack() as stack:
        client = None
        if args.scheduler or args.workers:
            from distributed import Client, LocalCluster, progress

            if args.scheduler:
                try:
                    client = stack.enter_context(Client(args.scheduler, timeout="20s"))
                except OSError as exc:
                    raise PowerlabError(f"cannot reach the Dask scheduler at "
                                        f"{args.scheduler}: {exc}") from exc
            else:
                cluster = stack.enter_context(LocalCluster(
                    n_workers=args.workers, threads_per_worker=1, processes=True,
                    memory_limit=args.memory_limit, dashboard_address=None))
                client = stack.enter_context(Client(cluster))
            futs = client.compute(lazy.to_delayed())
            if not args.no_progress:
                progress(futs)
                print()
            import pandas as pd

            result = ag.collect(pd.concat(client.gather(futs), ignore_index=True))
        else:
            from dask.diagnostics import ProgressBar

            if not args.no_progress:
                stack.enter_context(ProgressBar())
            result = ag.collect(lazy)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".csv":
        result.to_csv(out, index=False, date_format="%Y-%m-%dT%H:%M:%S.%fZ")
    else:
        result.to_parquet(out, index=False)
    print(f"wrote {len(result)} rows to {out}")
    return 0
