"""``powerlab aggregate``: power of the cluster, hosts, racks or jobs from a store (DuckDB,
pandas or Dask)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "aggregate",
        help="aggregate a telemetry store to cluster/host/rack/job power per time bin",
        description="Read a powerlab store (pruned by date and host) and write the power of "
                    "the cluster, each host, rack or job per time bin: the sum over devices "
                    "of each device's mean power in the bin. --scope node adds node AC "
                    "power (what facilities meter; MLPerf logs hold only this). Runs on "
                    "DuckDB (default) or pandas in this process, or on Dask (the dask "
                    "extra): local threads, a local cluster of --workers processes, or a "
                    "running cluster (--scheduler).",
    )
    p.add_argument("store", type=Path, help="store folder (date=YYYY-MM-DD/host=H/...)")
    p.add_argument("--freq", default="1min", help="bin width dividing a day (default 1min)")
    p.add_argument("--by", choices=["cluster", "host", "rack", "job"], default="cluster",
                   help="grouping (default cluster)")
    p.add_argument("--scope", choices=["gpu", "node", "all"], default="gpu",
                   help="GPU board power, node AC power, or both as separate rows "
                        "(default gpu)")
    p.add_argument("--jobs", type=Path, help="CSV GPU->job map: host,gpu_index,job_id,"
                   "start,end (ISO times with zone); for --by job")
    p.add_argument("--sacct", type=Path, help="Slurm accounting for --by job: saved "
                   "output of sacct --parsable2 (with --tz) or sacct --json")
    p.add_argument("--tz", help="IANA time zone sacct --parsable2 printed its times in")
    p.add_argument("--gpus-per-node", type=int, default=8,
                   help="GPUs per node, to map Slurm jobs to GPUs (default 8)")
    p.add_argument("--racks", type=Path, help="CSV host->rack map: host,rack; needed for "
                   "--by rack")
    p.add_argument("--start", help="first time, ISO 8601 with zone (e.g. 2024-05-17T00:00Z)")
    p.add_argument("--end", help="end time (exclusive), ISO 8601 with zone")
    p.add_argument("--out", type=Path, required=True,
                   help="output file, .parquet or .csv (times as YYYY-MM-DD HH:MM:SS in UTC, "
                        "columns named *_utc: what spreadsheets read as dates)")
    p.add_argument("--engine", choices=["auto", "duckdb", "dask", "pandas"], default="auto",
                   help="where to compute (default auto: DuckDB, the fastest on one "
                        "machine; dask for a cluster; pandas needs neither)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="address of a running Dask scheduler (tcp://host:8786)")
    g.add_argument("--workers", type=int, metavar="N",
                   help="start a local cluster of N single-threaded worker processes")
    p.add_argument("--memory-limit", default="2GiB",
                   help="memory limit per local worker (with --workers; default 2GiB)")
    p.add_argument("--timeout-s", type=float, default=20.0,
                   help="seconds to wait for the scheduler to answer (default 20)")
    p.add_argument("--quiet", "--no-progress", dest="no_progress", action="store_true",
                   help="no size, estimate or progress (on a terminal: done/total, rate "
                        "and time left; in logs: a line per phase)")
    p.add_argument("--force", action="store_true",
                   help="overwrite an existing --out file (never an input)")
    p.set_defaults(func=run)


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
    from ..telemetry.timeutil import to_utc

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
            vals.append(to_utc(v, what="time", error=lambda msg, i=i, c=c: ParseError(
                msg, path=path, line=i + 2, column=c)))
        out[c] = pd.to_datetime(pd.Series(vals, dtype=object), utc=True)
    return out


def probe_scheduler(address: str, timeout_s: float) -> str:
    """Check that a Dask scheduler answers at ``address`` before Dask connects.

    A Dask scheduler speaks first: on a new TCP connection it sends its handshake, a
    frame count as an 8-byte little-endian integer.  A port that accepts but stays
    silent, or answers with something else (an HTTP server), is refused here with a
    clear error instead of a hang or a multi-exabyte allocation inside Dask.

    Returns the address in ``tcp://host:port`` form.
    """
    import socket
    import struct

    from ..exceptions import PowerlabError

    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme == "inproc":  # a scheduler in this very process (notebooks, tests)
        return address
    if scheme not in ("tcp", "tls"):
        raise PowerlabError(f"--scheduler {address!r}: expected tcp://HOST:PORT (or "
                            "tls://HOST:PORT)")
    host, colon, port = rest.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PowerlabError(f"--scheduler {address!r}: expected HOST:PORT with a port "
                            "number 1-65535")
    if scheme == "tls":
        return address
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            head = b""
            while len(head) < 8:
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
    except TimeoutError:
        raise PowerlabError(f"--scheduler {address}: nothing answered within "
                            f"{timeout_s:g} s (is it a Dask scheduler? --timeout-s)") \
            from None
    except OSError as exc:
        raise PowerlabError(f"cannot reach the Dask scheduler at {address}: "
                            f"{exc.strerror or exc}") from None
    if len(head) < 8 or not 0 < struct.unpack("<Q", head)[0] < 1024:
        raise PowerlabError(f"--scheduler {address}: the server there does not speak the "
                            f"Dask protocol (it sent {head[:16]!r})")
    return f"tcp://{host}:{port}"


def _check_args(args):
    from ..exceptions import PowerlabError
    from ..telemetry.engines import dask_available

    out = args.out
    if out.suffix not in (".parquet", ".csv"):
        raise PowerlabError(f"--out {out}: expected a .parquet or .csv file name")
    if out.is_dir():
        raise PowerlabError(f"--out {out}: is a folder; give a file name")
    from ..telemetry.binning import bin_width_ns
    from ..telemetry.timeutil import to_utc

    bin_width_ns(args.freq)        # a bad or too narrow --freq: before any work is announced
    start, end = (to_utc(args.start, what="--start", optional=True),
                  to_utc(args.end, what="--end", optional=True))
    if start is not None and end is not None and start >= end:
        raise PowerlabError(f"--start {args.start} is not before --end {args.end}")
    if args.by == "job" and (args.jobs is None) == (args.sacct is None):
        raise PowerlabError("--by job needs either --jobs MAP.csv "
                            "(host,gpu_index,job_id,start,end) or --sacct FILE")
    if args.by == "job" and args.scope == "all":
        raise PowerlabError("--by job takes --scope gpu or node")
    if args.by == "rack" and args.racks is None:
        raise PowerlabError("--by rack needs --racks MAP.csv (host,rack)")
    if args.workers is not None and args.workers < 1:
        raise PowerlabError("--workers must be at least 1")
    if not args.timeout_s > 0:
        raise PowerlabError(f"--timeout-s must be positive, got {args.timeout_s:g}")
    if not 1 <= args.gpus_per_node <= 1024:
        raise PowerlabError(f"--gpus-per-node must be 1 to 1024, got {args.gpus_per_node}")
    if args.workers is not None and args.workers > 256:
        raise PowerlabError(f"--workers must be at most 256, got {args.workers}")
    distributed = args.scheduler or args.workers
    if (distributed or args.engine == "dask") and not dask_available():
        raise PowerlabError("--scheduler, --workers and --engine dask need the Dask extra: "
                            "pip install 'powerlab[dask]'")
    if distributed and args.engine in ("pandas", "duckdb"):
        raise PowerlabError(f"--engine {args.engine} runs in this process; drop "
                            "--scheduler/--workers")
    if args.workers:
        from dask.utils import parse_bytes

        try:
            parse_bytes(args.memory_limit)
        except (ValueError, TypeError):
            raise PowerlabError(f"--memory-limit {args.memory_limit!r}: expected a size "
                                "such as 2GiB or 500MB") from None
    if not args.store.is_dir():
        raise PowerlabError(f"store {args.store}: no such folder")
    from ..outputs import guard_outputs

    guard_outputs([out], [args.store, args.jobs, args.sacct, args.racks], force=args.force)
    try:
        inside = out.resolve().is_relative_to(args.store.resolve())
    except (OSError, RuntimeError):
        inside = False
    if inside:
        raise PowerlabError(f"--out {out} is inside the store {args.store}; a file there "
                            "would be read as a foreign file of the store")
    return start, end


#: Rough rows per second of the in-process engines, for the up-front estimate
#: (benchmarks/bench_aggregate.py on a 2-core machine, taken low so it errs long).
_ROWS_PER_S = {"duckdb": 1e7, "pandas": 5e6}


def _progress(args, engine: str, start, end):
    """The size, an estimate and the progress of an in-process aggregation (Dask shows
    its own)."""
    from .._progress import Progress
    from ..telemetry.engines import estimate_rows, store_files

    quiet = args.no_progress or engine == "dask"
    files = [] if quiet else store_files(args.store, start, end)[0]
    rows = estimate_rows(files)
    bar = Progress(rows, "aggregate", "row", enabled=not quiet)
    bar.announce(f"{len(files):,} files, about {rows:,} rows; --by {args.by}, "
                 f"--freq {args.freq}, --scope {args.scope}",
                 estimate_s=rows / _ROWS_PER_S.get(engine, 5e6))
    return bar


def _job_map(args):
    from ..iotools.slurm import read_sacct
    from ..telemetry.jobs import gpu_job_map

    if args.jobs is not None:
        return _jobs(args.jobs)
    return gpu_job_map(read_sacct(args.sacct, tz=args.tz), args.gpus_per_node)


def run(args) -> int:
    import warnings

    from ..telemetry.engines import EmptyResultWarning, resolve_engine

    start, end = _check_args(args)
    address = probe_scheduler(args.scheduler, args.timeout_s) if args.scheduler else None
    engine = "dask" if (args.scheduler or args.workers) else resolve_engine(args.engine)
    compute = engine in ("pandas", "duckdb")
    lazy = _aggregate(args, engine, compute, start, end)
    result = lazy if compute else _compute(args, lazy, address)
    if len(result) == 0 and not compute:
        from ..telemetry.engines import explain_empty

        warnings.warn(explain_empty(f"aggregate --by {args.by}", args.store,
                                    scope=args.scope, start=start, end=end),
                      EmptyResultWarning, stacklevel=1)
    _write(args, result)
    return 0


def _aggregate(args, engine: str, compute: bool, start, end):
    """The power sums (or per-job power) of the store: computed on DuckDB or pandas, a
    lazy Dask frame on Dask."""
    from ..telemetry import aggregate as ag
    from ..telemetry import jobs as jb

    jobs = _job_map(args) if args.by == "job" else None
    racks = None
    if args.racks is not None:
        racks = _read_csv(args.racks, ["host", "rack"], "host->rack map")
    with _progress(args, engine, start, end) as bar:
        bar.phase(f"aggregating on {engine}")
        if args.by == "job":
            lazy = jb.job_power(args.store, jobs, args.freq, start=start, end=end,
                                compute=compute, engine=engine, scope=args.scope,
                                progress=bar)
        else:
            lazy = ag.power_sums(args.store, args.freq, by=args.by, racks=racks, start=start,
                                 end=end, compute=compute, engine=engine, scope=args.scope,
                                 progress=bar)
        if compute:
            bar.set_fraction(1.0)
    return lazy


def _compute(args, lazy, address):
    """A lazy Dask result computed: on a running cluster (``--scheduler``), a local one
    (``--workers``) or Dask's threads, with Dask's own progress."""
    import contextlib

    from ..telemetry import aggregate as ag

    with contextlib.ExitStack() as stack:
        if args.scheduler or args.workers:
            import pandas as pd
            from distributed import progress

            client = _client(args, address, stack)
            futs = client.compute(lazy.to_delayed())
            if not args.no_progress:
                progress(futs)
                print()
            return ag.collect(pd.concat(client.gather(futs), ignore_index=True))
        from dask.diagnostics import ProgressBar

        if not args.no_progress:
            stack.enter_context(ProgressBar())
        return ag.collect(lazy)


def _client(args, address, stack):
    """A Dask client of the running scheduler at ``address``, or of a local cluster of
    ``--workers`` processes (closed with ``stack``)."""
    from distributed import Client, LocalCluster

    if address:
        try:
            return stack.enter_context(Client(address, timeout=f"{args.timeout_s}s"))
        except (OSError, TimeoutError) as exc:
            from ..exceptions import PowerlabError

            raise PowerlabError(f"cannot connect to the Dask scheduler at "
                                f"{address}: {exc}") from None
    cluster = stack.enter_context(LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True,
        memory_limit=args.memory_limit, dashboard_address=None))
    return stack.enter_context(Client(cluster))


def _write(args, result) -> None:
    """The result to ``--out`` (CSV for spreadsheets, or Parquet), and for ``--by job``
    the per-job figures on stdout."""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.suffix == ".csv":
        spreadsheet_csv(result).to_csv(args.out, index=False)
    else:
        result.to_parquet(args.out, index=False)
    print(f"wrote {len(result)} rows to {args.out}")
    if args.by == "job" and len(result):
        import pandas as pd

        from ..telemetry import jobs as jb

        with pd.option_context("display.width", 120, "display.max_columns", 10):
            print(jb.job_energy(result, args.freq).to_string(index=False))


def spreadsheet_csv(frame):
    """The frame as a CSV for people writes it: each tz-aware time column as
    ``YYYY-MM-DD HH:MM:SS[.ffffff]`` in UTC (what Excel and LibreOffice read as a
    date-time, as in the facilities CSV, docs/facilities_csv.md), its name ending in
    ``_utc`` (``timestamp`` -> ``timestamp_utc``); no column name holds a ``/``."""
    import pandas as pd

    from .._format import spreadsheet_times

    out = frame.copy()
    names = {}
    for c in out.columns:
        if isinstance(out[c].dtype, pd.DatetimeTZDtype):
            out[c] = spreadsheet_times(out[c])
            names[c] = c if str(c).endswith("_utc") else f"{c}_utc"
    out.columns = [str(names.get(c, c)).replace("/", "__") for c in out.columns]
    return out
