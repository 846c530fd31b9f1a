"""The curtailment plan: per-job levers that meet a target trajectory at least lost
training, down and back up within the site's ramp requirements, simulated with the
forecast engine over every Monte Carlo draw.

:func:`plan_curtailment` is a chain of named steps, each a function of its own module:

1. *setup* (:func:`plan_setup`): the levers the plan may use
   (:data:`powerlab.levers.registry.LEVERS`, ``LeverAssumptions.levers``) prepare the
   scenario (the storage lever takes the site battery off the engine: one controller
   per battery), the curves per job, the tick grid, the baseline forecast, the jobs'
   operating points (:class:`powerlab.levers.operating.Merit`);
2. *rates* (:func:`powerlab.flex.planramps.allowed_rates`): the spec's ramp limits
   (``kind: ramp``) less the baseline's own largest ramp of the same window means (the
   site already uses that much), at least ``min_ramp_share`` of the limit, converted to
   IT power with the highest PUE; with no spec, the throttling lever's own response;
3. *planned power* (:func:`powerlab.flex.planpower.planned_power`): the highest
   trajectory under every cap, within the rates, from each target's notice plus its
   throttling lever's response, and each target's throttling lever;
4. *split* (:func:`powerlab.levers.allocation.allocate`): the shed ``P_full - P(t)``
   over the levers in merit order, the rule being marginal lost training per MW shed
   (shifted starts and the battery first, then pauses where capping cannot reach the
   shed or costs more, then power caps or clock locks in 5-W notches); job power under a
   limit is planned with the lower band of the curve's rate (the safe side);
5. *schedule and cost* (:mod:`powerlab.flex.planschedule`): the schedule per tick, the
   planned facility power, lost and delayed training, the table of levers;
6. *simulation* (:mod:`powerlab.flex.plansim`, when ``simulate``): every draw under the
   plan, judged per target (met when the trailing ``averaging_s`` mean at the targets'
   boundary is at or under the cap from ``start + response_s``; the plan reaches each cap
   ``averaging_s - response_s`` before the start) and per ramp requirement
   (:func:`powerlab.flex.planramps.ramp_results`: violated in a draw where a ramp of
   window means exceeds both the limit and the largest ramp the baseline itself makes).

Approximations stated: a lever setting is simulated as the whole job under that setting
in the same draw, so checkpoints under a cap fall at the capped job's own times; a clock
lock is simulated at the operating point of the equivalent cap; the battery is planned
on the nominal shed (not per draw) and not recharged within the horizon.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .._options import Options
from ..exceptions import PowerlabError
from ..levers.allocation import allocate
from ..levers.jobs import job_curves
from ..levers.lever import LeverAssumptions
from ..levers.operating import Merit
from ..levers.registry import LEVERS
from ..levers.shedstate import ShedContext
from ..site.engine import forecast
from ..site.scenario import Scenario
from .planpower import Envelope, PlanTicks, plan_throttles, planned_power, tick_grid
from .planramps import allowed_rates, lever_ramps, ramp_results
from .planresult import CurtailmentPlan
from .planschedule import add_planned_facility, lever_frame, plan_cost, schedule_frame
from .plansim import simulate_plan, target_results
from .targets import Targets

__all__ = ["CurtailmentPlan", "PlanMargins", "PlanOptions", "PlanSetup",
           "plan_curtailment", "plan_setup"]


@dataclass(frozen=True)
class PlanMargins:
    """Planning margins of :func:`plan_curtailment`.

    Attributes
    ----------
    margin_fraction : float
        Planning margin under each cap [-].
    min_ramp_share : float
        Smallest allowed plan ramp as a share of the ramp limit [-].
    """

    margin_fraction: float = 0.01
    min_ramp_share: float = 0.1


@dataclass(frozen=True)
class PlanOptions(Options):
    """Options of :func:`plan_curtailment` (each also a keyword of it).

    Attributes
    ----------
    response_s : float
        Stated response time: each cap must hold from ``start + response_s`` [s].
    averaging_s : float
        Trailing mean the caps are judged on [s].
    margins : PlanMargins or None
        Planning margin under each cap and smallest allowed plan ramp (None:
        ``PlanMargins()``, 1 % and 10 % of the ramp limit).
    draws, seed : int
        Monte Carlo draws and seed.
    tick_s : float
        Engine and plan tick [s].
    simulate : bool
        False: the search only (the plan and its schedule, no per-target results).
    """

    response_s: float = 30.0
    averaging_s: float = 60.0
    margins: PlanMargins | None = None
    draws: int = 20
    seed: int = 0
    tick_s: float = 1.0
    simulate: bool = True


@dataclass
class PlanSetup:
    """What every step of the plan reads: the levers allowed, the scenario forecast
    (as they prepared it), their equipment, the curves, the ticks, the baseline, each
    job's share of time training and the jobs' operating points."""

    assumptions: LeverAssumptions
    levers: tuple
    scenario: Scenario
    equipment: dict
    curves: dict
    ticks: PlanTicks
    base: object
    share: pd.Series
    merit: Merit


def plan_curtailment(scenario: Scenario, targets: Targets, options: PlanOptions | None = None,
                     *, spec=None, curves=None, assumptions: LeverAssumptions | None = None,
                     **option_kw) -> CurtailmentPlan:
    """Plan per-job levers for a target trajectory and simulate the plan.

    The steps: :func:`plan_setup`, the allowed ramp rates, the planned power, its split
    over the levers, the schedule and its cost, and, when ``simulate``, every draw
    under the plan judged per target and ramp requirement (module docstring).

    Parameters
    ----------
    scenario : Scenario
    targets : Targets
        From :func:`~powerlab.flex.targets.read_targets` (already checked).
    options : PlanOptions, optional
        ``response_s``, ``averaging_s``, ``margins``, ``draws``, ``seed``, ``tick_s``,
        ``simulate`` (default: the defaults).
    spec : RequirementSpec, optional
        Interconnection requirements; its ramp limits bound the plan's ramps.
    curves : PowerThroughputCurve or mapping, optional
        Power-throughput curves (default: the GPU model's prior).
    assumptions : LeverAssumptions, optional
        Lever response times, the longest hold of a shifted start and the levers the
        plan may use (default ``LeverAssumptions()``: every registered lever).
    **option_kw
        Fields of :class:`PlanOptions` replacing those of ``options``
        (``plan_curtailment(sc, tg, draws=4, response_s=10.0)``).

    Returns
    -------
    CurtailmentPlan
    """
    o = PlanOptions.from_kwargs(options, **option_kw)
    s = plan_setup(scenario, targets, o, curves, assumptions)
    m = o.margins or PlanMargins()
    reqs = [r for r in spec.requirements if r.kind == "ramp"] if spec is not None else []
    spec_boundary = getattr(spec, "boundary", "facility")
    b_spec = s.base.power_w(spec_boundary) if reqs else None
    rates = _rates(s, reqs, b_spec, spec_boundary, m.min_ramp_share)
    planned = planned_power(targets, s.scenario.site, s.ticks, s.merit, Envelope(
        *rates, m.margin_fraction, o.averaging_s - o.response_s, o.response_s,
        s.assumptions, s.levers))
    ls = allocate(s.merit, s.merit.full_w - planned.power_w, ShedContext(
        s.ticks.times, o.tick_s, planned.throttle, rates[1], rates[0],
        s.ticks.pue_max if targets.boundary == "facility" else 1.0,
        s.assumptions.shift_max_hold_s, s.equipment), tuple(lv.name for lv in s.levers))
    out = _plan_outputs(s, targets, o, planned, ls, rates)
    if not o.simulate:
        out.update(targets=pd.DataFrame(), ramps=pd.DataFrame(), baseline_w=None,
                   plan_w=None)
        return CurtailmentPlan(**out)
    sim = simulate_plan(s.scenario, s.base, s.merit, s.curves, ls, s.ticks, o.draws, o.seed)
    plan_w = sim.facility_w if targets.boundary == "facility" else sim.it_seen_w
    rows = target_results(targets.frame, s.ticks, plan_w, ls, planned, out["cost"],
                          o.response_s, o.averaging_s)
    ramps = ramp_results(reqs, sim.facility_w if spec_boundary == "facility"
                         else sim.it_seen_w, b_spec, o.tick_s, *rates)
    lever_ramps(ramps, reqs, s.merit, ls, s.ticks.times, o.tick_s)
    out.update(targets=pd.DataFrame(rows), ramps=pd.DataFrame(ramps),
               baseline_w=s.base.power_w(targets.boundary), plan_w=plan_w)
    return CurtailmentPlan(**out)


def plan_setup(scenario: Scenario, targets: Targets, options: PlanOptions, curves=None,
               assumptions: LeverAssumptions | None = None) -> PlanSetup:
    """Check the inputs; the levers allowed prepare the scenario; the curves, the tick
    grid, the baseline forecast and the jobs' operating points."""
    if not isinstance(targets, Targets):
        raise PowerlabError("targets must be a Targets object (powerlab.flex.read_targets)")
    a = assumptions or LeverAssumptions()
    levers = LEVERS.select(a.levers)
    if not options.response_s >= 0:
        raise PowerlabError(f"response_s must be >= 0, got {options.response_s}")
    equipment = {}
    for lv in levers:
        scenario, held = lv.prepare(scenario)
        if held is not None:
            equipment[lv.name] = held
    cv = job_curves(scenario, curves)
    g = tick_grid(scenario, options.tick_s, options.draws, options.simulate)
    _check_in_horizon(targets.frame, scenario)
    base = forecast(scenario, draws=options.draws, seed=options.seed, tick_s=options.tick_s)
    share = base.throughput.groupby("job")["effective_training_time"].mean()
    return PlanSetup(a, levers, scenario, equipment, cv, g, base, share,
                     Merit(scenario, cv, share))


def _rates(s: PlanSetup, reqs: list, b_spec, spec_boundary: str, min_ramp_share: float
           ) -> tuple[float, float]:
    """The allowed plan ramp rates down and up [IT W/s]; without a ramp limit, the site's
    full throttling span over the throttling lever's response."""
    allowed, registered = plan_throttles(s.levers)
    lead = (allowed or registered[-1:] or (None,))[0]
    thr_resp = lead.response_s(s.assumptions) if lead is not None else 0.0
    tick_s = s.ticks.tick_s
    return allowed_rates(s.merit, reqs, b_spec,
                         s.ticks.pue_max if spec_boundary == "facility" else 1.0, tick_s,
                         (s.merit.full_w - s.merit.cap_floor_w) / max(thr_resp, tick_s),
                         min_ramp_share)


def _plan_outputs(s: PlanSetup, targets: Targets, o: PlanOptions, planned, ls,
                  rates: tuple[float, float]) -> dict:
    """The plan's schedule, cost and table of levers, as :class:`CurtailmentPlan`'s
    fields (the cost kept under ``cost`` for the simulation's per-target results)."""
    sched = schedule_frame(s.ticks.times, planned.power_w, s.merit, ls)
    add_planned_facility(sched, planned.power_w, ls, s.scenario.site, s.ticks)
    cost = plan_cost(s.merit, ls, s.share, o.tick_s)
    return {"scenario": s.scenario, "schedule": sched, "times": s.ticks.times,
            "tick_s": o.tick_s, "boundary": targets.boundary, "response_s": o.response_s,
            "averaging_s": o.averaging_s, "draws": o.draws, "lost_gpu_hours": cost.lost[0],
            "lost_gpu_hours_lower": cost.lost[1], "lost_gpu_hours_upper": cost.lost[2],
            "restart_gpu_hours": cost.restart, "delayed_gpu_hours": cost.delayed,
            "rate_down_w_per_s": rates[0], "rate_up_w_per_s": rates[1],
            "cap_w": planned.cap_w, "curves": s.curves, "targets_in": targets.frame,
            "lever_schedule": ls, "levers_allowed": tuple(lv.name for lv in s.levers),
            "assumptions": s.assumptions, "cost": cost,
            "levers": lever_frame(s.merit, ls, cost, o.tick_s, s.equipment)}


def _check_in_horizon(f: pd.DataFrame, scenario: Scenario) -> None:
    """Refuse a target no part of which lies in the scenario's horizon, or one ending
    before it starts: the time rules :func:`~powerlab.flex.targets.check_targets` applies
    to targets read from a file (with ``now`` the horizon's start), for a hand-built
    :class:`Targets`.  A target overlapping the horizon in part is planned over that
    part, as one read from a file."""
    for r in f.itertuples():
        if not (r.end_utc > r.start_utc and r.end_utc > scenario.start_utc
                and r.start_utc < scenario.end_utc):
            raise PowerlabError(
                f"target {r.source!s} ({r.start_utc} .. {r.end_utc}) is not inside the "
                f"scenario's horizon {scenario.start_utc} .. {scenario.end_utc} (no part "
                "of it overlaps); a plan never drops a target: move the horizon or the "
                "target")
