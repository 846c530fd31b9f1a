"""``powerlab export-grid``: write a site's power playback for PSCAD, PowerFactory or as a
plain CSV, from one forecast draw or a measured trace."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..outputs import add_force, guard_outputs
from ._args import add_renamed_flag, add_seed


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-grid",
        help="write facility power playback for PSCAD, PowerFactory or as CSV",
        description="Write the power at the point of interconnection of one forecast draw "
                    "of a scenario (or of measured telemetry: a store folder or a canonical "
                    ".parquet file) as a playback file: PSCAD File Read (comment line, time "
                    "[s] then P [MW]), PowerFactory measurement file (ElmFile: first line "
                    "the number of variables, then time [s] and P [MW]) or a plain CSV with "
                    "units in its header. For a scenario the files also carry the reactive "
                    "power Q [Mvar] at the point of interconnection and, when the scenario's "
                    "equipment: block states poi.short_circuit_mva, the voltage V [pu] "
                    "there (powerlab.interconnect.equipment); --p-only writes P alone. By "
                    "default every tick of the series is written; "
                    "with --step-s the power is averaged over each step and stamped at the "
                    "block midpoint, and the header says which band the file represents.",
    )
    p.add_argument("source", type=Path,
                   help="scenario YAML, telemetry store folder or canonical .parquet file")
    p.add_argument("--format", required=True, choices=["pscad", "powerfactory", "csv"],
                   dest="fmt", help="file layout")
    p.add_argument("--out", type=Path, required=True, help="file to write")
    p.add_argument("--step-s", type=float, default=None,
                   help="playback step, a whole number of ticks, e.g. 1 (default: the tick, "
                        "no resampling) [s]")
    add_renamed_flag(p, "--boundary", "--scope", choices=["facility", "it"],
                     default="facility",
                     help="facility (point of interconnection, default) or IT power")
    p.add_argument("--draw", type=int, default=0, help="forecast draw to export (default 0)")
    add_seed(p)
    p.add_argument("--tick-s", type=float, default=None,
                   help="engine tick, or the grid measured telemetry is resampled to [s]")
    p.add_argument("--pue", type=float, default=None,
                   help="telemetry only: facility power = IT power x PUE + base load")
    p.add_argument("--base-load-w", type=float, default=0.0,
                   help="telemetry only: non-IT load added to facility power [W]")
    p.add_argument("--p-only", action="store_true",
                   help="write active power only (no Q and V columns)")
    add_force(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..exceptions import PowerlabError
    from ..interconnect.gridstudy import represented_band, step_ticks, write_grid_playback
    from ..interconnect.sources import MeasuredOptions, resolve

    if args.draw < 0:
        raise PowerlabError(f"--draw must be >= 0, got {args.draw}")
    guard_outputs([args.out], [args.source], force=args.force)
    source = resolve(args.source)      # a scenario YAML is read; telemetry when used
    if source.is_forecast:
        if args.pue is not None or args.base_load_w:
            raise PowerlabError("--pue and --base-load-w apply to measured telemetry; a "
                                "scenario sets its own")
        if args.step_s is not None:     # before the forecast runs
            step_ticks(args.step_s, args.tick_s or source.scenario.tick_s)
    elif args.draw:
        raise PowerlabError("--draw applies to a scenario's forecast; measured "
                            "telemetry is one trace")
    trace = source.trace(draw=args.draw, seed=args.seed, tick_s=args.tick_s,
                         measured=MeasuredOptions(pue=args.pue, base_load_w=args.base_load_w))
    eq = None
    if source.is_forecast and not args.p_only and args.boundary == "facility":
        from ..interconnect.equipment import equipment_from_scenario
        eq = equipment_from_scenario(source.scenario)
    path = write_grid_playback(trace, args.out, args.fmt, step_s=args.step_s,
                               boundary=args.boundary, equipment=eq)
    step = trace.tick_s if args.step_s is None else args.step_s
    what = "P" if eq is None else ("P, Q, V" if eq.poi.short_circuit_mva else "P, Q")
    print(f"wrote {path} ({args.fmt}, {args.boundary} power: {what}, {step:g}-s steps; "
          f"{represented_band(step, trace.tick_s)[2]})")
    return 0
