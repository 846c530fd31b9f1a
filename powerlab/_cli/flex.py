"""``powerlab flex``: the site's flexibility offer, a curtailment plan for a target
trajectory, and the measurement and verification of an event.

* ``powerlab flex offer SCENARIO --out DIR``: ``flex_offer.csv`` (one row per lever and
  level) and ``flex_offer_response.csv`` (MW against response time and hold duration).
* ``powerlab flex plan SCENARIO --target TARGET --requirements REQ --out DIR``: exit 0
  when every target is met in every draw and no ramp requirement is violated, 1 when
  not, 2 on bad input.
* ``powerlab flex verify STORE --event EVENT --out DIR``: credited MW by named baselines.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._args import add_renamed_flag


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("flex", help="flexibility: offer, curtailment plan, verification",
                       description="How many MW the site can shed, how fast, for how "
                                   "long and at what training cost; a curtailment plan "
                                   "for a target trajectory; the credited MW of an event.")
    fs = p.add_subparsers(dest="flex_command", metavar="SUBCOMMAND")
    fs.required = True
    o = fs.add_parser("offer", help="MW sheddable per lever, response time and duration",
                      description="Forecast the scenario under each lever and level (every "
                                  "Monte Carlo draw) and write DIR/flex_offer.csv and "
                                  "DIR/flex_offer_response.csv.")
    o.add_argument("scenario", type=Path, help="scenario YAML")
    o.add_argument("--out", type=Path, required=True, help="output folder")
    o.add_argument("--hold-s", type=float, default=3 * 3600.0,
                   help="window the sheds are measured over [s] (default 10800)")
    o.add_argument("--start", default=None, help="start of that window (ISO 8601 UTC)")
    _common(o)
    o.set_defaults(func=run_offer)
    q = fs.add_parser("plan", help="curtailment plan for a target trajectory",
                      description="Plan per-job levers meeting every cap of "
                                  "TARGET (CSV or OpenADR 3 event JSON) within the response "
                                  "time, down and back up within the ramp requirements of "
                                  "REQ, with shifted job starts, the site battery, power "
                                  "caps or clock locks and pauses in merit order; simulate "
                                  "it over every draw. Writes plan_targets.csv, "
                                  "plan_schedule.csv, plan_levers.csv, plan_ramps.csv. "
                                  "Exit 0: every target met and no ramp violated; 1: not; "
                                  "2: bad input.")
    q.add_argument("scenario", type=Path, help="scenario YAML")
    q.add_argument("--target", type=Path, required=True,
                   help="target CSV (start_utc,end_utc,cap_megawatts or timestamp,"
                        "cap_megawatts) or OpenADR 3 event JSON")
    q.add_argument("--requirements", type=Path, required=True, help="requirement spec YAML")
    q.add_argument("--out", type=Path, required=True, help="output folder")
    add_renamed_flag(q, "--boundary", "--scope", choices=("it", "facility"), default="it",
                     help="which power the caps apply to: IT (default) or facility (the "
                          "point of interconnection)")
    q.add_argument("--response-s", type=float, default=30.0,
                   help="each cap must hold from its start plus this [s] (default 30)")
    q.add_argument("--averaging-s", type=float, default=60.0,
                   help="caps are judged on trailing means of this length [s] (default 60)")
    q.add_argument("--tz", default=None, help="IANA zone of target times written without one")
    q.add_argument("--levers", default=None,
                   help="comma-separated levers the plan may use (default all: power_cap,"
                        "clock_lock,pause,shift_start,storage)")
    _common(q)
    q.set_defaults(func=run_plan)
    v = fs.add_parser("verify", help="credited MW of an event by named baselines",
                      description="Credited MW = baseline - measured over each event "
                                  "interval, for each baseline method, with the baseline's "
                                  "band. Writes DIR/verification.csv and a summary.")
    v.add_argument("store", type=Path,
                   help="telemetry store folder, canonical .parquet or meter CSV "
                        "(timestamp, power_w or power_megawatts)")
    v.add_argument("--event", type=Path, required=True,
                   help="event: target CSV or OpenADR 3 event JSON")
    v.add_argument("--out", type=Path, required=True, help="output folder")
    v.add_argument("--method", action="append", default=None,
                   help="baseline method (repeatable; default high_10_of_10 and "
                        "pre_event_mean; also high_4_of_5, forecast_counterfactual)")
    v.add_argument("--site-tz", default="UTC", help="site time zone for similar days")
    v.add_argument("--tz", default=None, help="IANA zone of event times written without one")
    v.add_argument("--scenario", type=Path, default=None,
                   help="scenario YAML for the forecast_counterfactual baseline")
    v.add_argument("--scope", choices=("gpu", "node"), default="gpu",
                   help="telemetry rows summed into site power (default gpu)")
    add_renamed_flag(v, "--forecast-boundary", "--forecast-scope", choices=("it", "facility"),
                     default="it", help="forecast power the measurement is compared with: "
                                        "IT (default) or facility")
    v.set_defaults(func=run_verify)


def _common(p) -> None:
    p.add_argument("--draws", type=int, default=20, help="Monte Carlo draws (default 20)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--quiet", action="store_true", help="do not print the summary")


def _check(args) -> None:
    from ..exceptions import PowerlabError
    from ..outputs import output_folder

    if getattr(args, "draws", 1) < 1:
        raise PowerlabError(f"--draws must be >= 1, got {args.draws}")
    output_folder(args.out, create=False, what="--out")


def run_offer(args) -> int:
    from ..site.scenario import read_scenario

    _check(args)
    sc = read_scenario(args.scenario)
    start = None
    if args.start is not None:
        from ..telemetry.timeutil import to_utc

        start = to_utc(args.start, what="--start")
    from .._progress import CommandProgress
    from ..flex.offer import flex_offer
    from ._estimates import forecasting

    with CommandProgress("flex offer", *forecasting(sc, args.draws, 8, "every lever and level"),
                         enabled=not args.quiet, outputs=[args.out]):
        off = flex_offer(sc, hold_s=args.hold_s, start=start, draws=args.draws,
                         seed=args.seed)
    path = off.write(args.out)
    resp = args.out / "flex_offer_response.csv"
    off.response_frame().to_csv(resp, index=False, float_format="%.6g")
    if not args.quiet:
        print(off.summary())
    print(f"wrote {path}, {resp}")
    return 0


def _site_bounds(sc, boundary: str):
    import numpy as np
    import pandas as pd

    from ..levers.jobs import site_power_range_w

    floor, _, top = site_power_range_w(sc)
    if boundary == "it":
        return floor, top
    times = pd.date_range(sc.start_utc, sc.end_utc, freq="15min")
    pue = np.asarray(sc.site.pue_at(times), float)
    return floor * float(pue.min()) + sc.site.base_load_w, top * float(pue.max()) + \
        sc.site.base_load_w


def run_plan(args) -> int:
    from ..limits.requirements import read_requirements
    from ..site.scenario import read_scenario

    _check(args)
    sc = read_scenario(args.scenario)
    spec = read_requirements(args.requirements)
    from ..flex.plan import plan_curtailment
    from ..flex.targets import read_targets

    floor, top = _site_bounds(sc, args.boundary)
    tg = read_targets(args.target, floor_w=floor, max_w=top, now=sc.start_utc,
                      horizon_end=sc.end_utc, tz=args.tz, boundary=args.boundary)
    from ..levers.lever import LeverAssumptions

    levers = None if args.levers is None else tuple(
        x.strip() for x in args.levers.split(",") if x.strip())
    from .._progress import CommandProgress
    from ._estimates import forecasting

    with CommandProgress("flex plan", *forecasting(sc, args.draws, 4, "plan and simulate"),
                         enabled=not args.quiet, outputs=[args.out]):
        plan = plan_curtailment(sc, tg, spec=spec, response_s=args.response_s,
                                averaging_s=args.averaging_s, draws=args.draws,
                                seed=args.seed, assumptions=LeverAssumptions(levers=levers))
    paths = plan.write(args.out)
    if not args.quiet:
        print(plan.summary())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if plan.all_met else 1


def run_verify(args) -> int:
    import pandas as pd

    _check(args)
    from ..flex.targets import read_targets
    from ..flex.verify import read_site_power, verify_event

    ev = read_targets(args.event, floor_w=0.0, max_w=float("inf"),
                      now=pd.Timestamp("1970-01-01", tz="UTC"), tz=args.tz)
    sc = None
    if args.scenario is not None:
        from ..site.scenario import read_scenario

        sc = read_scenario(args.scenario)
    from .._progress import CommandProgress
    from ._estimates import reading

    with CommandProgress("flex verify", *reading("baselines of", [args.store]),
                         outputs=[args.out]):
        power = read_site_power(args.store, scope=args.scope)
        methods = args.method or ["high_10_of_10", "pre_event_mean"]
        res = verify_event(power, ev.frame, methods=methods, site_tz=args.site_tz,
                           scenario=sc, forecast_boundary=args.forecast_boundary)
    paths = res.write(args.out)
    print(res.summary())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
