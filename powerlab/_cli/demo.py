"""``powerlab demo``: the main job on the bundled data, with an offline HTML report."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from ..exceptions import PowerlabError

#: Longest demo horizon [h] (the scenario's bound on a forecast span: a year).
MAX_HOURS = 366 * 24.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="calibrate, forecast a 16,384-GPU site, analyse time of day; write CSV + report",
        description="Run the main job on the bundled data, no input needed: calibrate a job "
                    "power profile on the real MLPerf GPT-3 power logs, forecast a "
                    "16,384-GPU site with checkpoints and a synchronized start, compare "
                    "mitigations, run the time-of-day analysis on the synthetic twin driven "
                    "by real weather, and write the facilities CSV with its JSON sidecar "
                    "and a self-contained HTML report that opens offline.",
    )
    p.add_argument("--out", type=Path, default=Path("powerlab-demo"),
                   help="output folder (default: ./powerlab-demo)")
    p.add_argument("--hours", type=float, default=6.0,
                   help="forecast horizon in hours (default: 6)")
    p.add_argument("--draws", type=int, default=10,
                   help="Monte Carlo draws of the forecast (default: 10)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    missing = [m for m in ("altair", "vl_convert") if importlib.util.find_spec(m) is None]
    if missing:
        raise PowerlabError(f"the demo's charts and report need {', '.join(missing)}: "
                            "pip install 'powerlab[charts]'")
    from ..demo import run_demo  # here, not at the top: keeps `powerlab --help` light

    if not 0 < args.hours <= MAX_HOURS:
        raise PowerlabError(f"--hours must be positive and at most {MAX_HOURS:g} (a year), "
                            f"got {args.hours:g}")
    if args.draws < 1:
        raise PowerlabError(f"--draws must be at least 1, got {args.draws}")
    res = run_demo(args.out, progress=None if args.quiet else sys.stderr, hours=args.hours,
                   draws=args.draws)
    f = res.figures
    print(f"peak facility power     {f['peak_megawatts']:.1f} MW")
    print(f"largest swing in 1 s    {f['swing_1s_megawatts']:.1f} MW")
    print(f"ramp_up/down_megawatts_per_s_1s  {f['ramp_up_megawatts_per_s_1s']:.1f} / "
          f"{f['ramp_down_megawatts_per_s_1s']:.1f} MW/s (adjacent 1-s means)")
    print(f"15-min peak demand      {f['peak_demand_megawatts_15min']:.1f} MW")
    print(f"energy                  {f['energy_megawatt_hours']:,.0f} MWh")
    print(f"ramp_megawatts_per_min_1min      {f['ramp_megawatts_per_min_1min']:.1f} MW/min "
          "(adjacent 1-min means)")
    print(f"load factor             {f['load_factor']:.2f}")
    print(f"time-of-day amplitude   {f['tod_amplitude_pct']:.2f} % "
          f"[{f['tod_amplitude_ci_low_pct']:.2f}, {f['tod_amplitude_ci_high_pct']:.2f}]")
    print(f"report                  {res.report}")
    print(f"facilities CSV          {res.csv}")
    return 0
