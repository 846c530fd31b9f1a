"""What a long command will do and about how long it may take, said before it starts
(issue 37: every command that can take more than 2 s says so within 2 s; see
:class:`powerlab._progress.CommandProgress`).

The estimates are sizes times rates measured on the 2-core development machine
(``benchmarks/``), taken on the slow side: a forecast-like pass of a scenario costs
about ``draws x ticks / TICK_DRAWS_PER_S`` (:data:`powerlab.site.engine.TICK_DRAWS_PER_S`),
a command reading telemetry about its bytes / :data:`READ_BYTES_PER_S`.  Only the
estimate decides whether the command announces itself (at 2 s or more), so a small
input prints nothing whatever the machine's load.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..site.engine import TICK_DRAWS_PER_S

#: Telemetry read, checked and worked through by a command [bytes/s] (the readers parse
#: about 100 MB/s of nvidia-smi text here: benchmarks/bench_readers.py; a command
#: does more with what it read)
READ_BYTES_PER_S = 20e6
#: Fixed cost of a command that forecasts or fits (imports, first compilation) [s]
BASE_S = 0.5


def input_bytes(paths) -> int:
    """Bytes of the files (folders walked) named by ``paths``; 0 for what is missing."""
    total = 0
    for p in paths if isinstance(paths, (list, tuple)) else [paths]:
        p = Path(p)
        try:
            if p.is_dir():
                total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
            elif p.is_file():
                total += p.stat().st_size
        except OSError:
            pass
    return total


def reading(what: str, paths) -> tuple[str, float]:
    """``(plan, estimate_s)`` of a command that reads telemetry files."""
    n = input_bytes(paths)
    k = len(paths) if isinstance(paths, (list, tuple)) else 1
    return f"{what} {n / 2**20:,.1f} MiB in {k} source(s)", BASE_S + n / READ_BYTES_PER_S


def scenario_ticks(scenario, tick_s: float | None = None) -> tuple[int, float]:
    """``(ticks, tick)`` of a scenario's whole horizon."""
    tick = float(tick_s or scenario.tick_s)
    span = (scenario.end_utc - scenario.start_utc).total_seconds()
    return max(1, int(span / tick)), tick


def forecasting(scenario, draws: int, passes: float, what: str,
                tick_s: float | None = None, extra_tick_draws: float = 0.0) -> tuple[str, float]:
    """``(plan, estimate_s)`` of a command that runs about ``passes`` forecasts of the
    scenario (each ``draws`` draws of its ticks) plus ``extra_tick_draws``."""
    n, tick = scenario_ticks(scenario, tick_s)
    work = passes * draws * n + extra_tick_draws
    plan = f"{what}: {draws:,} draws x {n:,} ticks of {tick:g} s"
    if passes != 1:
        plan += f", about {passes:g} such passes"
    return plan, BASE_S + work / TICK_DRAWS_PER_S


def study_package(source, args) -> tuple[str, float]:
    """The study package: the whole-horizon forecast, the short window at its fine
    tick, the ride-through table's draws (or the measured telemetry's bytes)."""
    if not source.is_forecast:
        path = getattr(args, "source", None)
        return reading("the package of", [path] if path is not None else [])
    # (measured: data/scenarios/small.yaml, 20 draws, the defaults: 3.8 s of CPU)
    short = args.draws * args.short_window_s / args.short_tick_s
    ride = 12 * args.ride_through_draws * args.short_window_s / args.short_tick_s
    return forecasting(source.scenario, args.draws, 4, "the package", args.tick_s,
                       extra_tick_draws=8 * short + ride)


def files_under(path) -> int:
    """Files under a folder (1 for a file)."""
    p = os.fspath(path)
    if os.path.isdir(p):
        return sum(len(fs) for _, _, fs in os.walk(p))
    return 1


#: Bytes checksummed per second by ``store verify`` (SHA-256 and the Parquet footers)
VERIFY_BYTES_PER_S = 200e6


def verify_rate(store) -> float:
    """Estimate [s] of ``store verify``: every byte checksummed."""
    return 0.2 + input_bytes([store]) / VERIFY_BYTES_PER_S
