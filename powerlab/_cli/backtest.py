"""``powerlab backtest``: fit on part of a recording, forecast the rest through the
recording's meters, and score the forecast."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "backtest",
        help="calibrate on part of a recording, forecast the rest, score it",
        description="Two modes. Time split: calibrate on the recording up to --split (a "
                    "fraction of the run) with the events known by then, forecast the rest. "
                    "Run to run: calibrate on --train-runs, forecast each of --test-runs "
                    "from its own start events. Without run events the run is found "
                    "from the readings (powerlab.calibration.runfind.find_run) and only it is "
                    "calibrated and scored. The forecast is read through the "
                    "recording's own meters; writes backtest.csv (run, metric, measured, "
                    "forecast, error, error_pct, unit, note: the summary's notes, one a "
                    "row), backtest_series.csv, a chart "
                    "(backtest.svg, with the charts extra) and summary.txt.",
    )
    p.add_argument("power", nargs="*", type=Path,
                   help="power telemetry of one run (time split): files, folders, a store")
    p.add_argument("--events", type=Path, help="MLPerf training log of that run")
    p.add_argument("--split", type=float, default=None,
                   help="time split: fraction of the run calibrated on (default: the "
                        "middle of the run, moved to the training block after the second "
                        "evaluation when the run has three or more and fewer than two end "
                        "before the middle; see powerlab.calibration.backtest.split_rule)")
    p.add_argument("--train-runs", nargs="+", metavar="POWER[=LOG]",
                   help="run to run: power folders of the runs to calibrate on; the "
                        "training log is LOG or found beside an MLPerf power/result_N folder")
    p.add_argument("--test-runs", nargs="+", metavar="POWER[=LOG]",
                   help="run to run: runs to forecast from their own start events")
    p.add_argument("--gpus-per-node", type=int, default=8,
                   help="GPUs per node (default 8)")
    p.add_argument("--tz", help="time zone of zone-less timestamps in the sources")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.set_defaults(func=run)


def _run(spec: str, tz):
    from ..exceptions import PowerlabError
    from ._recording import mlperf_log_for, read_events, read_power

    power, _, log = spec.partition("=")
    log = Path(log) if log else mlperf_log_for(Path(power))
    if log is None:
        raise PowerlabError(f"{power}: no training log given (POWER=LOG) or found beside it")
    return power, read_power([Path(power)], tz=tz), read_events(log)


def run(args) -> int:
    from ..calibration.backtest import backtest_runs, backtest_split
    from ..exceptions import PowerlabError
    from ..outputs import output_folder
    from ._recording import read_events, read_power

    runs_mode = bool(args.train_runs or args.test_runs)
    if runs_mode and (args.power or args.events):
        raise PowerlabError("give either POWER (time split) or --train-runs and "
                            "--test-runs (run to run), not both")
    if runs_mode and not (args.train_runs and args.test_runs):
        raise PowerlabError("run to run needs both --train-runs and --test-runs")
    if not runs_mode and not args.power:
        raise PowerlabError("give the recording (POWER) or --train-runs/--test-runs")
    output_folder(args.out, create=False, what="--out")
    from .._progress import CommandProgress
    from ._estimates import reading

    inputs = args.power or [s.split(":")[0] for s in args.train_runs + args.test_runs]
    with CommandProgress("backtest", *reading("calibrate and forecast", inputs),
                         outputs=[args.out]) as bar:
        bar.phase("reading, calibrating, forecasting the held-out part")
        if runs_mode:
            res = backtest_runs([_run(s, args.tz) for s in args.train_runs],
                                [_run(s, args.tz) for s in args.test_runs],
                                gpus_per_node=args.gpus_per_node)
        else:
            power = read_power(args.power, tz=args.tz)
            events = read_events(args.events) if args.events else None
            res = backtest_split(power, events, split=args.split,
                                 gpus_per_node=args.gpus_per_node,
                                 source=", ".join(str(p) for p in args.power),
                                 events_source=str(args.events) if args.events else None)
    args.out.mkdir(parents=True, exist_ok=True)
    notes = res.notes()  # one note a row, in a last column, from the first row
    table = res.metrics.assign(note=(notes + [""] * len(res.metrics))[:len(res.metrics)])
    table.to_csv(args.out / "backtest.csv", index=False, float_format="%.6g")
    import pandas as pd

    pd.concat([s.assign(run=k) for k, s in res.series.items()]).to_csv(
        args.out / "backtest_series.csv", float_format="%.6g")
    text = str(res.summary())
    (args.out / "summary.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    chart = _chart(res, args.out)
    print(f"wrote {args.out / 'backtest.csv'}, backtest_series.csv, summary.txt"
          + (f", {chart.name}" if chart else " (no chart: pip install 'powerlab[charts]')"))
    return 0


def _chart(res, out: Path):
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("altair", "vl_convert")):
        return None
    from ..viz.backtest_chart import backtest_chart
    from ..viz.render import to_svg

    name, s = next(iter(res.series.items()))
    path = out / "backtest.svg"
    path.write_text(to_svg(backtest_chart(s, title=f"Backtest ({name})")), encoding="utf-8")
    return path
