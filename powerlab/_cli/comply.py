"""``powerlab comply``: check a scenario's forecast or a measured trace against a utility's
requirement spec; exit 0 when every requirement passes, 1 when one fails (a requirement the
data cannot show met fails), 2 on bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._args import add_seed


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "comply",
        help="check a forecast or measured power against interconnection requirements",
        description="Evaluate the power of a scenario (every Monte Carlo draw of its "
                    "forecast) or of measured telemetry (a store folder or a canonical "
                    "Parquet file) against a requirement spec YAML (ramps, short-term "
                    "deviation, band oscillation, load steps, ride-through). Writes "
                    "DIR/compliance.csv, DIR/compliance_summary.txt and, when the spec "
                    "names grid modes, DIR/resonance.csv. Exit code 0: every requirement "
                    "passes; 1: one fails (one the data cannot show met fails, value NaN, "
                    "reason in the summary); 2: bad input.",
    )
    p.add_argument("source", type=Path,
                   help="scenario YAML, telemetry store folder or canonical .parquet file")
    p.add_argument("--requirements", type=Path, default=None,
                   help="requirement spec YAML (default for a scenario: its own limits: "
                        "block, read as a requirement spec)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--draws", type=int, default=20, help="Monte Carlo draws (default 20)")
    add_seed(p)
    p.add_argument("--tick-s", type=float, default=None,
                   help="engine tick, or the grid measured telemetry is resampled to [s]")
    p.add_argument("--pue", type=float, default=None,
                   help="telemetry only: facility power = IT power x PUE + base load")
    p.add_argument("--base-load-w", type=float, default=0.0,
                   help="telemetry only: non-IT load added to facility power [W]")
    p.add_argument("--sags", type=Path, default=None,
                   help="CSV of voltage sags (timestamp, duration_s, residual_voltage_pu) "
                        "for the ride-through requirements; on a scenario each is simulated "
                        "through the site's equipment model (the study package's ride-"
                        "through model), on measured data the load lost is read against "
                        "the second before the sag")
    p.add_argument("--interval-means", action="store_true",
                   help="telemetry only: each reading is the mean over the interval before "
                        "it (e.g. from energy counters); default: instantaneous readings, "
                        "as NVML reports power, whose faster content folds into the bands "
                        "(the summary names the aliasing)")
    p.add_argument("--start", default=None, help="telemetry only: first time (ISO 8601 UTC)")
    p.add_argument("--end", default=None, help="telemetry only: end time (ISO 8601 UTC)")
    p.add_argument("--quiet", action="store_true", help="do not print the summaries")
    p.set_defaults(func=run)


def read_sags(path: Path):
    """Voltage sags from a CSV file (``timestamp, duration_s, residual_voltage_pu``)."""
    import pandas as pd

    from ..exceptions import ParseError

    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise ParseError("no such file", path=path) from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ParseError(f"cannot read as CSV: {exc}", path=path) from None


def sags_for(source, sags):
    """The sags ``comply`` and ``size-mitigation`` check, the source they check and the
    line printed with the ride-through figure: on a scenario the sags become its own
    disturbances, simulated through the equipment model (the same model as the study
    package's ride-through table); on measured data they stay measurements, read against
    the second before each sag."""
    if sags is None:
        return None, source, ""
    from ..interconnect.sources import resolve

    if source.is_forecast:
        from ..interconnect.equipment import equipment_from_scenario
        from ..interconnect.eventresponse import scenario_with_sags, supply_trip_assumption

        try:
            scen = scenario_with_sags(source.scenario, sags)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            from ..exceptions import PowerlabError
            raise PowerlabError(f"--sags: expected columns timestamp, duration_s, "
                                f"residual_voltage_pu ({exc})") from None
        line = ("Ride-through (--sags on a forecast): each sag simulated by the engine "
                "with and without it on the same draws; "
                + supply_trip_assumption(equipment_from_scenario(source.scenario)))
        return None, resolve(scen), line
    from ..site.disturbances import BASELINE_MEASURED
    return sags, source, ("Ride-through (--sags on measured data): load lost against the "
                          f"{BASELINE_MEASURED}; no supply-trip model applies (what the "
                          "site did is in the data)")


def check_draws_out_sags(args) -> None:
    """The checks ``comply`` and ``size-mitigation`` share: --draws, --out, --sags."""
    from ..exceptions import PowerlabError
    from ..outputs import guard_outputs, output_folder

    if args.draws < 1:
        raise PowerlabError(f"--draws must be >= 1, got {args.draws}")
    output_folder(args.out, create=False, what="--out")
    if args.sags is not None and not args.sags.is_file():
        raise PowerlabError(f"--sags {args.sags}: no such file")
    # the fixed names inside the output folder are the command's own (rewritten on a
    # re-run); none may be one of the inputs
    names = ["compliance.csv", "compliance_summary.txt", "resonance.csv",
             "mitigation_options.csv", "mitigation_summary.txt"]
    src = getattr(args, "source", None) or getattr(args, "scenario", None)
    for name in names:
        guard_outputs([args.out / name], [src, args.requirements, args.sags], force=True)


def run(args) -> int:
    from ..exceptions import PowerlabError
    from ..interconnect.sources import resolve
    from ..limits.requirements import read_requirements
    from ..telemetry.timeutil import to_utc

    check_draws_out_sags(args)
    spec = read_requirements(args.requirements) if args.requirements is not None else None
    source = resolve(args.source)      # a scenario YAML is read; telemetry when used
    if spec is None:
        if source.kind != "scenario":
            raise PowerlabError("--requirements is required for measured telemetry (a "
                                "scenario without it is checked against its limits: block)")
        from ..limits.scenario_limits import limits_spec

        scen = source.scenario
        spec = limits_spec(scen.limits, name=f"limits of scenario {scen.name!r}")
        if not spec.requirements:
            raise PowerlabError(f"scenario {scen.name!r} sets no limits (every limits: "
                                "value is 0); give --requirements SPEC.yaml")
    sags = read_sags(args.sags) if args.sags is not None else None
    sags, source, sag_line = sags_for(source, sags)
    start, end = (to_utc(args.start, what="--start", optional=True),
                  to_utc(args.end, what="--end", optional=True))
    if source.is_forecast and (args.pue is not None or args.base_load_w
                               or start is not None or end is not None
                               or args.interval_means):
        raise PowerlabError("--pue, --base-load-w, --start, --end and --interval-means "
                            "apply to measured telemetry; a scenario sets its own PUE, base "
                            "load and horizon, and its ticks are interval means")
    from .._progress import quiet
    from ..interconnect.compliance import comply  # scipy: only once the inputs are read
    from ..interconnect.resonance import screen_resonance
    from ..outputs import atomic_write

    with quiet(args.quiet):     # no size or progress either
        res = comply(source, spec, draws=args.draws, seed=args.seed, tick_s=args.tick_s,
                     pue=args.pue, base_load_w=args.base_load_w, sags=sags, start=start,
                     end=end,
                     sampling="interval_mean" if args.interval_means else "instantaneous")
    csv, txt = res.write(args.out)
    written = [csv, txt]
    summaries = [str(res.summary())]
    if spec.grid_modes:
        try:
            rz = screen_resonance(res.trace, spec)
        except PowerlabError as exc:
            summaries.append(f"Resonance screening not done: {exc}")
        else:
            text = rz.harmonics.to_csv(index=False, float_format="%.6g")
            written.append(atomic_write(args.out / "resonance.csv",
                                        lambda tmp: Path(tmp).write_text(text)))
            summaries.append(str(rz.summary()))
    if sag_line:
        summaries.append(sag_line)
    if not args.quiet:
        print("\n\n".join(summaries))
    print("wrote " + ", ".join(str(p) for p in written))
    return 0 if res.passed else 1
