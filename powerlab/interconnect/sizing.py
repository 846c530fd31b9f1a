"""Size the cheapest mitigation that makes a site meet a utility's requirements.

:func:`size_mitigation` searches the mitigation space of issue 13 — NVML power smoothing
(:mod:`powerlab.levers.smoothing`, NVML's profile parameters under their names and
units; offered only on Blackwell or newer GPUs, by the scenario's ``gpu_model``), a filler
workload that holds GPU power during communication waits, staggered starts of jobs that
start together, and storage of a technology class (:mod:`powerlab.levers.storage`:
Li-ion, supercapacitor, rack power-supply storage, each with its C-rate and duration
range, state-of-charge bounds and converter response; MW, MWh, control window) — and
returns a :class:`SizingResult` whose ``options`` frame is the Pareto set of passing
options, cheapest first (``mitigation_options.csv``).

Assessability first
-------------------
Before any engine run, :func:`~powerlab.interconnect.assessability.assess` checks that a
forecast at the tick and horizon can show every requirement met (a band below the tick's
Nyquist frequency, whole-tick windows, a voltage sag in the scenario for a ride-through
requirement).  If not, the result's status is ``not_assessable``, with no engine run and
no evaluation, and it says why and which command can assess the spec (``--tick-s 0.01``,
``--hours``, a sag to add); ``tick_s='auto'`` runs at the largest tick that can.  The
status tells ``no_mitigation_needed`` (the site passes as it is) from ``options_found``
and ``none_passes``.

How an option is evaluated (fast path)
--------------------------------------
The engine is run once per job and filler setting (:func:`~powerlab.site.engine.forecast`,
public API, no mitigation switched on; :class:`~powerlab.interconnect.sitemodel.SiteModel`),
and once more without the scenario's voltage sags when it has any (the ride-through
counterfactual, :mod:`powerlab.interconnect.ridethrough`): job ``j`` alone on the cluster gives its per-GPU
mean power ``g_j = (IT_j - constant_j) / gpus_j`` per draw, with ``constant_j`` the
power of the GPUs in no job and of the nodes.  An option is then array arithmetic per
draw: each mitigation the option switches on acts on ``g_j`` in turn
(:meth:`~powerlab.levers.lever.Mitigation.job_power`:
:func:`~powerlab.levers.smoothing.smooth_power` while the job holds its GPUs, a shift by
the job's stagger delay), ``IT = constant + sum_j gpus_j g_j``,
facility power from IT through the engine's public facility model
(:func:`~powerlab.site.facility.facility_power`: losses, lagging cooling, base load), then
the storage (:meth:`~powerlab.levers.lever.Mitigation.grid_power`:
:func:`~powerlab.site.battery.battery_dispatch`), then
:meth:`~powerlab.interconnect.compliance.Compliance.evaluate`.  Smoothing the *mean* of a job's
GPUs instead of each GPU is exact without timing jitter and an approximation with it
(the per-GPU offsets spread each edge over a few ticks); ``tests/interconnect/test_sizing.py``
compares it with the engine's own per-GPU floor and ramp limit.

The search (structured, monotone; :mod:`powerlab.interconnect.optionsearch`)
---------------------------------------------------------------------------
1. The option with nothing switched on; when it passes it is the answer (cost 0).
2. Per-GPU options: for every (floor, hysteresis, filler, stagger) of the grid, the
   fastest ramp rate (same up and down; the cheapest in delayed work) that passes,
   found by bisection over the sorted rates, assuming a slower ramp never hurts.
   For the five cheapest of these, ramp-up and ramp-down apart: the fastest ramp-up that
   passes with the ramp-down kept (the ramp-up limit delays work), then the fastest
   ramp-down with that ramp-up (the ramp-down limit burns energy).
3. Storage: for every technology the site can have, and every (duration within the
   class's range, control window) of the grid, the smallest power that passes, by
   bisection over the sorted powers.
4. Smoothing with storage: each weak smoothing setting (a floor alone, a ramp-down limit
   alone; Blackwell or newer only) that fails on its own and costs less than the cheapest passing option so far,
   with the smallest storage that then passes, for the two cheapest storage shapes of
   step 3.  Storage that would make the pair dearer than the cheapest option so far is
   not tried, so the Pareto set is complete near the cheapest option, not far from it.
Every evaluated option that passes is priced; the Pareto set over (extra energy,
throughput loss, storage MWh) is kept and ordered by :class:`CostModel` cost.

Costs
-----
``extra_energy_megawatt_hours_per_day``: grid energy over the unmitigated site's,
battery recharge included (mean over draws, per day of horizon).
``throughput_loss_pct``: filler (``filler_throughput_loss_pct``, 5 % after Choukse et
al. 2025) on the jobs it runs with, plus the stagger delay as a share of each job's
allocation, plus work delayed by the ramp-up limit (power withheld below the demand as a
share of the job's power above idle) — GPU-hours weighted.
Storage capital per day comes from its technology class
(:data:`~powerlab.levers.storage.TECHNOLOGIES`).  The option space, the grid and the
costs: :mod:`powerlab.interconnect.searchspace`; the result:
:mod:`powerlab.interconnect.sizingresult`.
The dollar weights of :class:`CostModel` are illustrative assumptions, not prices.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from .._lazy import lazy_exports
from .._progress import Progress
from ..exceptions import Interrupted, PowerlabError
from ..site.scenario import Scenario, read_scenario
from ..site.timebase import to_ticks
from .assessability import assess, needed_tick_s
from .compliance import Compliance
from .optionsearch import OptionSearch, run_search
from .searchsize import max_option_evaluations, search_estimate_s
from .searchspace import CostModel, MitigationOption, SearchGrid
from .sitemodel import SiteModel
from .sizingresult import SizingResult, with_shortfalls

__all__ = [
    "CostModel",
    "MitigationOption",
    "SearchGrid",
    "SiteModel",
    "SizingResult",
    "size_mitigation",
]


def size_mitigation(scenario, spec, *, draws: int = 5, seed: int = 0,
                    tick_s: float | str | None = None, grid: SearchGrid | None = None,
                    cost: CostModel | None = None, hours: float | None = None,
                    progress=None) -> SizingResult:
    """Search the mitigation space for the cheapest options that meet a requirement spec.

    First, without running the engine, whether a forecast at the tick can show every
    requirement met (:func:`~powerlab.interconnect.assessability.assess`); when it cannot,
    the result has status ``not_assessable``, no engine run and no evaluation, and says
    why and which command can assess it.

    Parameters
    ----------
    scenario : Scenario or path-like
        The site (its own ``mitigations`` are ignored: the search sets them).
    spec : RequirementSpec, Compliance or path-like
    draws : int, default 5
        Monte Carlo draws every option is evaluated on; an option passes when the spec's
        ``max_exceed_probability`` holds over them [-].
    seed : int, default 0
    tick_s : float or 'auto', optional
        Engine tick (default the scenario's); ``'auto'``: the largest tick at which the
        spec can be assessed [s].
    grid : SearchGrid, optional
    cost : CostModel, optional
    hours : float, optional
        Search over the first ``hours`` of the scenario's horizon only [h].
    progress : bool or None, default None
        Print the size (engine runs x draws x ticks, then at most how many options x
        draws x ticks), an estimate, and then engine draws and options evaluated, rate and
        time left on standard error (:mod:`powerlab._progress`; a line per search step in
        a log): ``True`` always, ``None`` when the estimate is 2 s or more, ``False``
        never.

    Returns
    -------
    SizingResult

    Raises
    ------
    powerlab.exceptions.Interrupted
        On Ctrl-C during the search (a ``KeyboardInterrupt``): its ``partial`` is the
        result of the options evaluated so far (``interrupted`` True; its description,
        in the summary, says so).  Ctrl-C before the first option is evaluated (the
        engine runs) raises the plain ``KeyboardInterrupt``.
    """
    if isinstance(scenario, (str, Path)):
        scenario = read_scenario(scenario)
    if not isinstance(scenario, Scenario):
        raise PowerlabError("size_mitigation needs a scenario (a forecast to mitigate)")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise PowerlabError(f"draws must be an integer >= 1, got {draws!r}")
    scenario = _first_hours(scenario, hours)
    check = spec if isinstance(spec, Compliance) else Compliance(spec)
    grid = grid or SearchGrid()
    cost = cost or CostModel()
    tick_s = _search_tick_s(tick_s, check, scenario)
    found = assess(scenario, check, tick_s)
    desc = (f"forecast of scenario {scenario.name!r}, {draws} draws, seed {seed}, tick "
            f"{found.tick_s:g} s")
    if not found.ok:
        return SizingResult(check.spec, None, engine_runs=0, evaluations=0,
                            draws=int(draws), seed=seed, description=desc, cost=cost,
                            assessability=found)
    return _run(scenario, check, grid, cost, found, desc, int(draws), seed, tick_s,
                progress)


def _first_hours(scenario: Scenario, hours: float | None) -> Scenario:
    """The scenario over its first ``hours`` (None: all of it)."""
    if hours is None:
        return scenario
    if not (isinstance(hours, (int, float)) and math.isfinite(hours) and hours > 0):
        raise PowerlabError(f"hours must be a positive number, got {hours!r}")
    end = min(pd.Timestamp(scenario.end_utc),
              pd.Timestamp(scenario.start_utc) + pd.Timedelta(hours=hours))
    return scenario.replace(horizon_start_utc=scenario.start_utc, horizon_end_utc=end)


def _search_tick_s(tick_s, check: Compliance, scenario: Scenario):
    """The tick asked (``'auto'``: the largest at which the spec can be assessed)."""
    if not isinstance(tick_s, str):
        return tick_s
    if tick_s != "auto":
        raise PowerlabError(f"tick_s must be a number of seconds or 'auto', got "
                            f"{tick_s!r}")
    dur = (pd.Timestamp(scenario.end_utc) - pd.Timestamp(scenario.start_utc)
           ).total_seconds()
    return needed_tick_s(check, dur, scenario.tick_s) or scenario.tick_s


def _run(scenario, check, grid, cost, found, desc, draws, seed, tick_s, progress
         ) -> SizingResult:
    """The engine runs and the search of :func:`size_mitigation`, with their size,
    estimate and progress, and a partial result on Ctrl-C."""
    n = to_ticks((pd.Timestamp(scenario.end_utc) - pd.Timestamp(scenario.start_utc)
                  ).total_seconds(), found.tick_s)
    runs = SiteModel.runs_needed(scenario, True in grid.filler)
    most = max_option_evaluations(scenario, grid)    # for the size and estimate
    est_s = search_estimate_s(runs, int(draws), n, most)
    on = (est_s >= 2.0) if progress is None else bool(progress)
    with Progress(runs * int(draws), "size-mitigation", "engine draw", enabled=on) as eng:
        eng.announce(f"{runs} engine runs x {draws} draws x {n:,} ticks of "
                     f"{found.tick_s:g} s, then at most {most:,} options x {draws} draws x "
                     f"{n:,} ticks = {most * draws * n:,} option-tick evaluations",
                     estimate_s=est_s)
        model = SiteModel.build(scenario, draws=int(draws), seed=seed, tick_s=tick_s,
                                filler=True in grid.filler, progress=eng)
    s = OptionSearch(model, check, cost)

    def result(interrupted: bool = False) -> SizingResult:
        ev = with_shortfalls(pd.DataFrame([{k: v for k, v in r.items() if k != "_values"}
                                           for r in s.rows.values()]),
                             [r["_values"] for r in s.rows.values()], check.spec)
        said = desc if not interrupted else (
            f"{desc}; INTERRUPTED (Ctrl-C) after {len(ev)} options: the best of these, "
            "not of the whole searched space")
        return SizingResult(check.spec, ev, engine_runs=model.engine_runs,
                            evaluations=model.evaluations, draws=int(draws), seed=seed,
                            description=said, cost=cost, model=model,
                            assessability=found, interrupted=interrupted)

    try:
        with Progress(most, "size-mitigation", "option", enabled=on) as bar:
            s.progress = bar
            bar.phase("1. the site as it is")
            if not s.passes(MitigationOption()):
                run_search(s, model, grid, phase=bar.phase)
            bar.total = bar.done       # the search ended: it evaluated this many
    except KeyboardInterrupt:
        if not s.rows:                 # not even the site as it is: nothing to report
            raise
        raise Interrupted(f"size_mitigation interrupted after {len(s.rows)} options",
                          result(interrupted=True)) from None
    return result()


#: a name of 0.1 that moved with the option space to :mod:`powerlab.interconnect.searchspace`
#: (0.2.0): it still resolves here, with a deprecation warning, until 0.3.0
_, __getattr__, _ = lazy_exports(__name__, {}, moved={
    "powerlab.interconnect.searchspace": ("pareto_front",)})
