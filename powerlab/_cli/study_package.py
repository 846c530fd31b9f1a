"""``powerlab study-package``: the large-load study package of a scenario's forecast or of
measured telemetry (figures with definitions, sources and exceedance probabilities, an
energisation schedule, the oscillation spectrum and its lines, the PMU view, a
ride-through table, PSCAD/PowerFactory/COMTRADE playback files and a printable page)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "study-package",
        help="write what an interconnection study asks of a large load",
        description="Build the large-load study package of a scenario (every Monte Carlo "
                    "draw of its forecast, plus a short window at --short-tick-s for the "
                    "spectrum and the PMU view, and a ride-through table from the "
                    "disturbance model) or of measured telemetry (a store folder or a "
                    "canonical .parquet file). Writes CSV tables, PSCAD, PowerFactory and "
                    "COMTRADE playback files, summary.txt and study_package.html into "
                    "--out. Exit code 0 on success, 2 on bad input.",
    )
    p.add_argument("source", type=Path,
                   help="scenario YAML, telemetry store folder or canonical .parquet file")
    p.add_argument("--requirements", type=Path, required=True, help="requirement spec YAML")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--draws", type=int, default=20, help="Monte Carlo draws (default 20)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--tick-s", type=float, default=None,
                   help="tick of the whole-horizon forecast (default: the scenario's) [s]")
    p.add_argument("--short-tick-s", type=float, default=0.01,
                   help="tick of the short window (spectrum, PMU view; default 0.01) [s]")
    p.add_argument("--short-window-s", type=float, default=300.0,
                   help="length of the short window (default 300) [s]")
    p.add_argument("--ride-through-draws", type=int, default=3,
                   help="draws per sag of the ride-through table (default 3; 0: no table)")
    p.add_argument("--f0-hz", type=float, default=60.0, choices=[50.0, 60.0],
                   help="nominal grid frequency for the PMU view (default 60) [Hz]")
    p.add_argument("--reporting-rate", type=int, default=None,
                   help="PMU reporting rate (default one frame a nominal cycle: 60 at "
                        "60 Hz, 50 at 50 Hz; the M class has 10, 12, 15, 20, 30, 60 and "
                        "120 at 60 Hz, 10, 25, 50 and 100 at 50 Hz) [frames/s]")
    p.add_argument("--pue", type=float, default=None,
                   help="telemetry only: facility power = IT power x PUE + base load")
    p.add_argument("--base-load-w", type=float, default=0.0,
                   help="telemetry only: non-IT load added to facility power [W]")
    p.add_argument("--start", default=None, help="telemetry only: first time (ISO 8601 UTC)")
    p.add_argument("--end", default=None, help="telemetry only: end time (ISO 8601 UTC)")
    p.add_argument("--quiet", action="store_true",
                   help="print neither the summary nor the size, estimate and progress")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..exceptions import PowerlabError
    from ..interconnect.sources import resolve
    from ..limits.requirements import read_requirements
    from ..outputs import output_folder
    from ..telemetry.timeutil import to_utc

    if args.draws < 1:
        raise PowerlabError(f"--draws must be >= 1, got {args.draws}")
    if args.ride_through_draws < 0:
        raise PowerlabError(f"--ride-through-draws must be >= 0, got {args.ride_through_draws}")
    if not (args.short_tick_s > 0 and args.short_window_s > 0):
        raise PowerlabError("--short-tick-s and --short-window-s must be positive")
    output_folder(args.out, create=False, what="--out")
    spec = read_requirements(args.requirements)
    source = resolve(args.source)      # a scenario YAML is read; telemetry when used
    start, end = (to_utc(args.start, what="--start", optional=True),
                  to_utc(args.end, what="--end", optional=True))
    if source.is_forecast and (args.pue is not None or args.base_load_w
                               or start is not None or end is not None):
        raise PowerlabError("--pue, --base-load-w, --start and --end apply to measured "
                            "telemetry; a scenario sets its own PUE, base load and horizon")
    from .._progress import CommandProgress
    from ..interconnect.sources import MeasuredOptions
    from ..interconnect.studypackage import PmuSettings, RideThrough, ShortWindow, study_package
    from . import _estimates

    with CommandProgress("study-package", *_estimates.study_package(source, args),
                         enabled=not args.quiet, outputs=[args.out]) as bar:
        bar.phase("forecast, short window, PMU view, ride-through table")
        pkg = study_package(
            source, spec, draws=args.draws, seed=args.seed, tick_s=args.tick_s,
            short=ShortWindow(tick_s=args.short_tick_s, window_s=args.short_window_s),
            ride_through=(RideThrough(draws=args.ride_through_draws)
                          if args.ride_through_draws > 0 else False),
            pmu=PmuSettings(f0_hz=args.f0_hz, reporting_rate_fps=args.reporting_rate),
            measured=MeasuredOptions(pue=args.pue, base_load_w=args.base_load_w,
                                     start=start, end=end))
        bar.phase(f"writing the package into {args.out}")
        files = pkg.write(args.out)
    if not args.quiet:
        print(pkg.summary())
    print(f"wrote {len(files)} files into {args.out} (open {files['page'].name})")
    return 0
