"""``powerlab size-mitigation``: search GPU power smoothing, a filler workload, staggered
starts and storage for the cheapest options that make a scenario meet a requirement spec;
exit 0 when a passing option exists, 1 when none does, 2 on bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._args import add_seed


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "size-mitigation",
        help="size the cheapest mitigation that meets interconnection requirements",
        description="Forecast a scenario (one engine run per job and filler setting), then "
                    "search NVML-style GPU power smoothing (floor %% of TDP, ramp-up and "
                    "ramp-down W/s, ramp-down hysteresis ms), a filler workload, staggered "
                    "starts and a battery/supercapacitor by applying them to the forecast's "
                    "per-draw job power arrays. Writes DIR/mitigation_options.csv (the "
                    "Pareto set of passing options, cheapest first) and "
                    "DIR/mitigation_summary.txt. Exit code 0: a passing option exists; "
                    "1: none; 2: bad input.",
    )
    p.add_argument("scenario", type=Path, help="scenario YAML")
    p.add_argument("--requirements", type=Path, required=True, help="requirement spec YAML")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--draws", type=int, default=3, help="Monte Carlo draws (default 3)")
    add_seed(p)
    p.add_argument("--tick-s", type=float, default=None, help="engine tick [s]")
    p.add_argument("--sags", type=Path, default=None,
                   help="CSV of voltage sags (timestamp, duration_s, residual_voltage_pu) "
                        "within the horizon, for the ride-through requirements")
    p.add_argument("--quiet", action="store_true", help="do not print the summary")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..exceptions import PowerlabError
    from ..grid.scenario import read_scenario
    from ..interconnect.requirements import read_requirements
    from .comply import check_draws_out_sags, read_sags

    check_draws_out_sags(args)
    if args.tick_s is not None and not args.tick_s > 0:
        raise PowerlabError(f"--tick-s must be > 0, got {args.tick_s}")
    spec = read_requirements(args.requirements)
    scenario = read_scenario(args.scenario)
    sags = read_sags(args.sags) if args.sags is not None else None
    from ..interconnect.compliance import Compliance  # scipy: only once the inputs are read
    from ..interconnect.sizing import size_mitigation

    res = size_mitigation(scenario, Compliance(spec, sags=sags), draws=args.draws,
                          seed=args.seed, tick_s=args.tick_s)
    csv, txt = res.write(args.out)
    if not args.quiet:
        print(res.summary())
    print(f"engine runs: {res.engine_runs}; option evaluations: {res.evaluations}")
    print(f"wrote {csv}, {txt}")
    return 0 if res.found else 1
