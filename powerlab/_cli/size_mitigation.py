"""``powerlab size-mitigation``: search NVML power smoothing (Blackwell or newer), a filler
workload, staggered starts and storage for the cheapest options that make a scenario meet
a requirement spec.  Checks first that a forecast at the tick can assess the spec; exit 0
when a passing option exists (or none is needed), 1 when none passes, 2 on bad input, 3
when the spec cannot be assessed (the search is not run; the summary gives the command
that can assess it), 130 on Ctrl-C (the options evaluated so far are written and the best
of them printed)."""

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
                    "DIR/mitigation_summary.txt. Before any engine run it checks that a "
                    "forecast at the tick can assess every requirement; if not it stops "
                    "with the reason and the command that can. Exit code 0: a passing "
                    "option exists or none is needed; 1: none passes; 2: bad input; 3: "
                    "not assessable (search not run); 130: interrupted (Ctrl-C; the "
                    "options evaluated so far are written and the best printed).",
    )
    p.add_argument("scenario", type=Path, help="scenario YAML")
    p.add_argument("--requirements", type=Path, required=True, help="requirement spec YAML")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--draws", type=int, default=3, help="Monte Carlo draws (default 3)")
    add_seed(p)
    p.add_argument("--tick-s", default=None,
                   help="engine tick [s], or 'auto': the largest tick at which the spec can "
                        "be assessed (e.g. 0.01 s for a 3-30 Hz band)")
    p.add_argument("--hours", type=float, default=None,
                   help="search over the first HOURS of the horizon only [h]")
    p.add_argument("--sags", type=Path, default=None,
                   help="CSV of voltage sags (timestamp, duration_s, residual_voltage_pu) "
                        "within the horizon, for the ride-through requirements, each "
                        "simulated through the site's equipment model (as comply --sags)")
    p.add_argument("--quiet", action="store_true",
                   help="print neither the summary nor the size, estimate and progress "
                        "(shown on standard error when the run may take 2 s or more)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..exceptions import PowerlabError
    from ..limits.requirements import read_requirements
    from ..site.scenario import read_scenario
    from .comply import check_draws_out_sags, read_sags, sags_for

    check_draws_out_sags(args)
    tick = args.tick_s
    if tick is not None and tick != "auto":
        try:
            tick = float(tick)
        except ValueError:
            raise PowerlabError(f"--tick-s must be a number of seconds or 'auto', got "
                                f"{args.tick_s!r}") from None
        if not tick > 0:
            raise PowerlabError(f"--tick-s must be > 0, got {args.tick_s}")
    if args.hours is not None and not args.hours > 0:
        raise PowerlabError(f"--hours must be > 0, got {args.hours}")
    spec = read_requirements(args.requirements)
    scenario = read_scenario(args.scenario)
    sags = read_sags(args.sags) if args.sags is not None else None
    if sags is not None:    # simulated through the equipment model, as comply does
        from ..interconnect.sources import resolve
        src = resolve(scenario)
        sags, src, sag_line = sags_for(src, sags)
        scenario = src.scenario
    else:
        sag_line = ""
    from ..exceptions import Interrupted
    from ..interconnect.compliance import Compliance  # scipy: only once the inputs are read
    from ..interconnect.sizing import size_mitigation

    try:
        res = size_mitigation(scenario, Compliance(spec, sags=sags), draws=args.draws,
                              seed=args.seed, tick_s=tick, hours=args.hours,
                              progress=False if args.quiet else None)
    except Interrupted as exc:          # Ctrl-C in the search: what was done so far
        res = exc.partial
    paths = {"scenario": args.scenario, "requirements": args.requirements, "out": args.out}
    csv, txt = res.write(args.out, **paths)
    if not args.quiet or res.status == "not_assessable" or res.interrupted:
        print(res.summary(**paths))
    if sag_line:
        print(sag_line)
    print(f"status: {'interrupted, ' if res.interrupted else ''}{res.status}; engine runs: "
          f"{res.engine_runs}; option evaluations: {res.evaluations}")
    print(f"wrote {csv}, {txt}")
    if res.interrupted:
        return 130
    return {"no_mitigation_needed": 0, "options_found": 0, "none_passes": 1,
            "not_assessable": 3}[res.status]
