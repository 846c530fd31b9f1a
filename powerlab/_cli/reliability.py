"""``powerlab reliability``: fit node hazards to fault records (``fit``) and plan a job's
goodput from them (``plan``); see docs/reliability_analytics.md."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import _args

FAULT_FORMATS = ("auto", "infinitehbd", "csv", "store", "sacct")


def _positive(kind):
    def parse(text: str):
        try:
            val = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        if not 0 < val < 1e9:
            raise argparse.ArgumentTypeError(f"{text[:40]} is not in (0, 1e9)")
        return val
    return parse


def _non_negative(text: str) -> float:
    try:
        val = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not 0 <= val < 1e9:
        raise argparse.ArgumentTypeError(f"{text[:40]} is not in [0, 1e9)")
    return val


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reliability",
        help="fit node hazards to fault records; plan a job's goodput from them",
        description="'fit FAULTS --out DIR' fits fault rates by class with a lemon-node "
                    "(gamma frailty) mixture and its test, repair-time distributions and "
                    "the time trend to fault records (the InfiniteHBD JSON trace, a CSV "
                    "node,start,end,fault_class, a store's XID events, or sacct "
                    "NODE_FAIL jobs). 'plan --gpus N --days D --checkpoint-s C "
                    "--restart-s R [--fit DIR] --out DIR' writes goodput.csv (expected "
                    "interruptions, MTTF, ETTR with intervals, best checkpoint interval, "
                    "checkpoint and restart events per day), job_scaling.csv and "
                    "transfer.csv (what the fit carries over, what is assumed).")
    ssub = p.add_subparsers(dest="action", metavar="ACTION")
    ssub.required = True
    f = ssub.add_parser("fit", help="fit node hazards, frailty, repair and trend",
                        description="Fit node hazards to fault records and write "
                                    "class_rates.csv, frailty.csv, lemons.csv, "
                                    "repair.csv, trend.csv, repair_durations.csv, "
                                    "comparisons.csv and fit.json into --out.")
    f.add_argument("faults", type=Path, metavar="FAULTS",
                   help="fault records: InfiniteHBD .json(.gz), CSV, store folder, sacct")
    f.add_argument("--out", required=True, type=Path, metavar="DIR")
    f.add_argument("--format", default="auto", choices=FAULT_FORMATS)
    f.add_argument("--nodes", type=_positive(int),
                   help="nodes observed, faulty or not (InfiniteHBD: 400; required for "
                        "the other formats)")
    f.add_argument("--tz", help="time zone of zone-less times (CSV, sacct)")
    f.add_argument("--errors", default="raise", choices=("raise", "warn"),
                   help="bad records: stop (default) or leave out with a counted warning")
    _args.add_seed(f)
    f.set_defaults(func=run_fit)
    pl = ssub.add_parser("plan", help="goodput of a planned job from a fit",
                         description="Plan a job's goodput from a fit (--fit DIR written "
                                     "by 'fit'; default: the bundled InfiniteHBD trace).")
    pl.add_argument("--gpus", required=True, type=_positive(int))
    pl.add_argument("--days", required=True, type=_positive(float))
    pl.add_argument("--checkpoint-s", required=True, type=_non_negative, dest="checkpoint_s")
    pl.add_argument("--restart-s", required=True, type=_non_negative, dest="restart_s")
    pl.add_argument("--interval-s", type=_positive(float), dest="interval_s",
                    help="training between checkpoints [s] (default: Daly's optimum)")
    pl.add_argument("--gpus-per-node", type=_positive(int), default=8, dest="gpus_per_node")
    pl.add_argument("--spares", type=int, help="spare nodes (default: P 0.99 pool)")
    pl.add_argument("--repair-crews", type=_positive(int), dest="repair_crews")
    pl.add_argument("--retire-after", type=_positive(int), dest="retire_after",
                    help="retire a node after this many faults in the allocation (lemon "
                         "removal) instead of repairing it")
    pl.add_argument("--draws", type=_positive(int), default=40)
    for name, what in (("train", "training"), ("checkpoint", "writing a checkpoint"),
                       ("idle", "down between a failure and the restart")):
        pl.add_argument(f"--{name}-w", type=_positive(float), dest=f"{name}_w",
                        help=f"per-GPU power while {what} [W]: the plan then states the "
                             "power step of each checkpoint and restart [MW]")
    pl.add_argument("--fit", type=Path, metavar="DIR")
    pl.add_argument("--out", required=True, type=Path, metavar="DIR")
    _args.add_seed(pl)
    pl.set_defaults(func=run_plan)


def _read_faults(args):
    from ..exceptions import ParseError
    from ..iotools.faults import (
        INFINITEHBD_NODES,
        faults_from_events,
        faults_from_sacct,
        read_fault_csv,
        read_infinitehbd,
    )

    src, fmt = args.faults, args.format
    if fmt == "auto":
        name = src.name.lower()
        fmt = ("store" if src.is_dir() else "infinitehbd" if ".json" in name
               else "csv" if ".csv" in name else None)
        if fmt is None:
            raise ParseError("cannot tell the format from the name; give --format "
                             f"({', '.join(FAULT_FORMATS[1:])})", path=src)
    if fmt == "infinitehbd":
        faults, meta = read_infinitehbd(src, n_nodes=args.nodes or INFINITEHBD_NODES,
                                        errors=args.errors)
        return faults, meta["n_nodes"], meta["start"], meta["end"]
    if args.nodes is None:
        raise ParseError(f"--nodes is required for {fmt} records (nodes observed, "
                         "faulty or not)", path=src)
    if fmt == "csv":
        faults = read_fault_csv(src, tz=args.tz, errors=args.errors)
    elif fmt == "store":
        from ..telemetry.event_store import read_events
        faults = faults_from_events(read_events(src))
    else:
        from ..iotools.slurm import read_sacct
        faults = faults_from_sacct(read_sacct(src, tz=args.tz))
    return faults, args.nodes, None, None


def run_fit(args) -> int:
    from ..exceptions import PowerlabError
    from ..reliability.faultfit import fit_faults
    from ..reliability.published import compare_published

    if args.out.resolve() == args.faults.resolve():
        raise PowerlabError(f"--out {args.out} is the input; give another folder")
    faults, n_nodes, start, end = _read_faults(args)
    fit = fit_faults(faults, n_nodes=n_nodes, start=start, end=end, seed=args.seed,
                     source=str(args.faults))
    files = fit.write(args.out)
    comp = compare_published(fit.params())
    comp.to_csv(args.out / "comparisons.csv", index=False)
    print(fit.summary())
    print(f"wrote {len(files) + 1} files to {args.out}")
    return 0


def _load_fit(path):
    import json

    import pandas as pd

    from ..exceptions import ParseError

    f = path / "fit.json"
    if not f.is_file():
        raise ParseError("no fit.json here; write one with 'powerlab reliability fit'",
                         path=path)
    try:
        params = json.loads(f.read_text())
        need = {"faults", "exposure_node_days", "rate_per_node_day", "rate_lower",
                "rate_upper", "theta", "repair_model", "repair_mean_d"}
        missing = sorted(need - set(params))
    except (json.JSONDecodeError, TypeError) as exc:
        raise ParseError(f"not a fit.json ({exc})", path=f) from None
    if missing:
        raise ParseError(f"fit.json lacks {missing}", path=f)
    d = path / "repair_durations.csv"
    durations = pd.read_csv(d)["repair_d"].to_numpy(float) if d.is_file() else None
    return params, durations


def run_plan(args) -> int:
    from ..data import bundled_path
    from ..exceptions import PowerlabError
    from ..iotools.faults import read_infinitehbd
    from ..reliability.faultfit import fit_faults
    from ..reliability.goodput import GoodputPlan, plan_goodput
    from ..reliability.jobscale import job_interruptions
    from ..reliability.transfer import transfer_table

    if args.fit is not None:
        if args.out.resolve() == args.fit.resolve():
            raise PowerlabError("--out is the --fit folder; give another folder")
        params, durations = _load_fit(args.fit)
    else:
        faults, meta = read_infinitehbd(bundled_path("infinitehbd-fault-trace",
                                                     "fault_trace.json.gz"))
        fit = fit_faults(faults, n_nodes=meta["n_nodes"], start=meta["start"],
                         end=meta["end"], source="InfiniteHBD trace (bundled)")
        params, durations = fit.params(), fit.repair_durations_d
    if not params["repair_mean_d"] == params["repair_mean_d"]:      # NaN
        raise PowerlabError("the fit has no repair times (its records have no ends: XID "
                            "or sacct); a plan needs them: fit records with ends")
    plan = GoodputPlan(gpus=args.gpus, days=args.days, checkpoint_s=args.checkpoint_s,
                       restart_s=args.restart_s, interval_s=args.interval_s,
                       gpus_per_node=args.gpus_per_node, spares=args.spares,
                       repair_crews=args.repair_crews, draws=args.draws, seed=args.seed,
                       retire_after=args.retire_after,
                       train_w=args.train_w, checkpoint_w=args.checkpoint_w,
                       idle_w=args.idle_w)
    res = plan_goodput(params, plan, durations_d=durations)
    args.out.mkdir(parents=True, exist_ok=True)
    res.table.to_csv(args.out / "goodput.csv", index=False)
    res.intervals.to_csv(args.out / "checkpoint_intervals.csv", index=False)
    sizes = sorted({args.gpus, 1024, 4096, 16_384, 65_536, 131_072})
    job_interruptions(params, sizes, args.days, gpus_per_node=args.gpus_per_node,
                      seed=args.seed).to_csv(args.out / "job_scaling.csv", index=False)
    transfer_table(params, plan).to_csv(args.out / "transfer.csv", index=False)
    print(res.summary())
    print(f"wrote goodput.csv, checkpoint_intervals.csv, job_scaling.csv, transfer.csv "
          f"to {args.out}")
    return 0
