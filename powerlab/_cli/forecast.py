"""``powerlab forecast``: forecast a site's power swings and write the facilities CSV."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..outputs import add_force, guard_outputs
from ._args import add_seed


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "forecast",
        help="forecast facility power swings of a scenario and write a facilities CSV",
        description="Run the power-swing forecast of a scenario YAML (site, hardware, jobs, "
                    "mitigations) and write a spreadsheet-safe CSV of interval statistics "
                    "(megawatts, ramps, events) plus a JSON sidecar with units, "
                    "assumptions and the scenario hash. Prints the summary.",
    )
    p.add_argument("scenario", type=Path, help="scenario YAML file")
    p.add_argument("--out", type=Path, required=True,
                   help="file to write: a .csv (with its .json sidecar) or, with --format "
                        "xlsx, an Excel workbook")
    p.add_argument("--format", choices=["csv", "xlsx"], default="csv",
                   help="csv (default; spreadsheet-safe text, docs/facilities_csv.md) or "
                        "xlsx (date cells, a units row and an 'about' sheet; needs "
                        "openpyxl)")
    p.add_argument("--resolution", choices=["1s", "1min", "5min", "15min", "30min", "1h"],
                   default="15min",
                   help="interval of the CSV rows (default 15min)")
    p.add_argument("--draws", type=int, default=20, help="Monte Carlo draws (default 20)")
    add_seed(p)
    p.add_argument("--quiet", action="store_true",
                   help="print neither the summary nor the size, estimate and progress "
                        "(shown on standard error when the run may take 2 s or more)")
    add_force(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..exceptions import PowerlabError, ScenarioError
    from ..site.engine import forecast
    from ..site.export import write_facilities_csv
    from ..site.export_workbook import write_facilities_xlsx
    from ..site.scenario import read_scenario

    if args.draws < 1:
        raise ScenarioError(f"--draws must be >= 1, got {args.draws}", key="--draws")
    if args.format == "csv" and args.out.suffix.lower() != ".csv":
        raise PowerlabError(f"--out {args.out}: the facilities export is a CSV file; name "
                            "it '*.csv' (or --format xlsx for an Excel workbook)")
    if args.format == "xlsx" and args.out.suffix.lower() != ".xlsx":
        raise PowerlabError(f"--out {args.out}: --format xlsx writes an Excel workbook; "
                            "name it '*.xlsx'")
    if not args.out.parent.is_dir():
        raise PowerlabError(f"--out {args.out}: folder {args.out.parent} does not exist")
    if args.out.is_dir() or args.out.with_suffix(".json").is_dir():
        raise PowerlabError(f"--out {args.out}: it or its sidecar path is a folder")
    guard_outputs([args.out, args.out.with_suffix(".json")], [args.scenario],
                  force=args.force)
    scen = read_scenario(args.scenario)
    trip_line = ""
    if any(getattr(d, "from_model", False) for d in scen.disturbances):
        # a sag that states no effect takes the site's equipment model's (the model of
        # comply --sags, size-mitigation and the study package's ride-through table)
        from ..interconnect.equipment import equipment_from_scenario
        from ..interconnect.eventresponse import scenario_with_sags, supply_trip_assumption

        scen = scenario_with_sags(scen, None)
        trip_line = ("Voltage sags that state no effect: simulated through the equipment "
                     "model; " + supply_trip_assumption(equipment_from_scenario(scen)))
    res = forecast(scen, draws=args.draws, seed=args.seed,
                   progress=False if args.quiet else None)
    from .._progress import Progress
    from ..site.engine import TICK_DRAWS_PER_S

    big = res.n_ticks * res.draws / TICK_DRAWS_PER_S >= 2.0
    Progress(0, "forecast", enabled=big and not args.quiet).phase(
        f"writing {args.out} ({args.resolution} rows)")
    if args.format == "xlsx":
        written = str(write_facilities_xlsx(res, args.out, args.resolution,
                                            progress=False if args.quiet else None))
    else:
        written = " and ".join(map(str, write_facilities_csv(
            res, args.out, args.resolution, progress=False if args.quiet else None)))
    if not args.quiet:
        print(res.summary())
        if trip_line:
            print(trip_line)
    print(f"wrote {written}")
    return 0
