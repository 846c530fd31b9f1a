"""The size of the mitigation search, for its announcement and estimate.

:func:`max_option_evaluations` counts the most options
:func:`~powerlab.interconnect.sizing.size_mitigation` can evaluate with a search grid:
each step of the search (see :mod:`powerlab.interconnect.sizing`) bisects ordered chains
of options, and a bisection over ``L`` options evaluates at most ``1 + ceil(log2 L)``.
``powerlab size-mitigation`` prints it (options x draws x ticks) with an estimate before
the engine runs, and its progress counts options done out of it.
"""

from __future__ import annotations

import math

from ..levers.smoothing import smoothing_support
from ..levers.storage import available_storage
from ..site.engine import TICK_DRAWS_PER_S as _ENGINE_TICK_DRAWS_PER_S  # engine speed

__all__ = ["max_option_evaluations", "search_estimate_s"]


#: Rough speed of option evaluation [option-draw ticks per second] for the up-front
#: estimate (tests/interconnect/test_sizing.py's failing site, 77 options x 2 draws x 24,000 ticks in
#: 1.3 s on a 2-core machine, i.e. ~3e6; taken lower so the estimate errs long).
_OPTION_TICK_DRAWS_PER_S = 2e6


def _bisections(length: int) -> int:
    """Most evaluations a bisection (``OptionSearch.first_passing``) makes on ``length``
    options."""
    return 0 if length < 1 else 1 + math.ceil(math.log2(length))


def max_option_evaluations(scenario, grid, *, refine_rates: int = 5,
                           hybrid_storage: int = 2) -> int:
    """The most options :func:`~powerlab.interconnect.sizing.size_mitigation` can evaluate
    on a scenario with a :class:`~powerlab.interconnect.searchspace.SearchGrid` (every
    bisection at its longest, no option shared between steps) [-]; the search usually
    evaluates fewer (cached options, chains cut by cost)."""
    jobs = scenario.jobs
    together = len({j.start_utc for j in jobs}) < len(jobs)
    ok = smoothing_support(scenario.hardware.gpu_model)[0]
    floors = len(set(grid.floor_pct_tdp)) if ok else 1
    hysts = len(set(grid.hysteresis_ms)) if ok else 1
    rates = len({r for r in grid.ramp_w_per_s if r > 0}) if ok else 0
    bases = floors * hysts * len(set(grid.filler)) * (
        len(set(grid.stagger_s)) if together else 1)
    n = 1 + bases * _bisections(1 + rates)
    n += min(refine_rates, bases) * 2 * _bisections(1 + rates)
    techs = [t for t in grid.storage if t in available_storage(
        scenario.hardware.gpu_model)[0]]
    powers = len(set(grid.battery_power_fraction))
    n += sum(len(grid.durations_h(t)) for t in techs) * len(set(grid.battery_window_s)) \
        * _bisections(powers)
    if ok and techs:
        weak = len([f for f in grid.floor_pct_tdp if f > 0]) + rates
        n += weak * (1 + hybrid_storage * _bisections(powers))
    return n


def search_estimate_s(runs: int, draws: int, ticks: int, options: int) -> float:
    """Rough time of a search: ``runs`` engine runs and ``options`` option evaluations,
    each of ``draws`` draws x ``ticks`` ticks (errs long) [s]."""
    return draws * ticks * (runs / _ENGINE_TICK_DRAWS_PER_S
                            + options / _OPTION_TICK_DRAWS_PER_S)
