"""The curtailment plan: per-job levers that meet a target trajectory at least lost
training, down and back up within the site's ramp requirements, simulated with the
forecast engine over every Monte Carlo draw.

Search (:func:`plan_curtailment`, fast, no simulation)
    1. The *planned site power* ``P(t)`` [W, IT] is the highest trajectory that stays
       under every cap (less ``margin_fraction``) from the target's start (from its
       start less three cooling time constants for caps at the facility boundary) and changes no
       faster than the allowed ramp rates: a cap reached by going down at ``r_down``
       from the latest moment the target is known (``notice_utc``; default: the whole
       trajectory is known), and back up at ``r_up`` after it.  It is the lower envelope
       of cones ``cap_k + r (t_k - t)`` (two cumulative minima over the tick grid), then
       limited in its descent from each notice time, so a late notice gives a late
       response rather than a too-fast ramp (the passes are repeated under the caps
       relaxed to what is reached, so after an unreached cap's end the power rises from
       where it got to instead of falling on towards the cap).  No cap is planned below
       the site's floor (every job paused): a cap within the margin of it is planned at
       the floor, reported per target (``planned_at_floor``).
    2. The allowed ramp rates are the spec's ramp limits (``kind: ramp``) less the
       baseline's own largest ramp of the same window means (the site already uses that
       much), at least ``min_ramp_share`` of the limit, converted to IT power with the
       highest PUE; with no spec, the levers' own response.
    3. The shed ``P_full - P(t)`` is split over the levers in merit order, the rule
       being marginal lost training per MW shed (:mod:`powerlab.flex.merit`): shifted
       job starts and the site battery first (no step rate lost), then per-job power
       caps or clock locks in 5-W notches ranked by lost step rate per watt (each
       job's power-throughput curve), pauses where capping cannot reach the shed or
       costs more.  The throttling lever of a target is a power cap when the time from
       its notice to ``start + response_s`` allows ``power_cap_response_s``, a clock
       lock otherwise; the descent starts no earlier than the notice plus that lever's
       response.  Job power under a limit is planned with the lower band of the curve's
       rate (more compute time per step, more power: the safe side).

Simulation (every draw)
    The forecast of the scenario with the shifted starts (the plan's base) and forecasts
    of it with each job capped at a grid of limits (every 50 W) and paused, all with the
    same seed (the same failures and timing offsets), are combined tick by tick:
    ``P_d(t) = B_d(t) + sum_j D_j(L_j(t))_d(t) - B_d(t)``, linearly interpolated between
    the two grid limits around ``L_j(t)``.  Facility power follows from
    :func:`powerlab.site.facility.facility_power`; the battery's planned output is
    subtracted from it and from the power at the targets' boundary (at the IT boundary
    the battery is read as carrying that much of the IT load).  With the ``storage``
    lever the battery is the plan's: every forecast runs without the engine's own
    smoothing dispatch of it (one controller per battery).
    A target is met in a draw when the trailing ``averaging_s`` mean of the power in the
    target's boundary (``it`` or ``facility``) is at or under the cap at every tick from ``start + response_s`` to
    its end; its response time is the time from the start after which that holds (the
    plan reaches each cap ``averaging_s - response_s`` before the start, so that the
    judged means hold no pre-start power).  A ramp requirement is violated by the plan
    in a draw where a ramp of window means of the planned power exceeds both the limit
    and the largest ramp the baseline itself makes in that draw (a site already over a
    limit is not made worse; a site within it stays within it).

Approximations stated: a lever setting is simulated as the whole job under that setting
in the same draw, so checkpoints under a cap fall at the capped job's own times; a clock
lock is simulated at the operating point of the equivalent cap; the battery is planned
on the nominal shed (not per draw) and not recharged within the horizon.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from .._options import renamed_attribute
from .._summary import Summary
from ..exceptions import PowerlabError
from ..outputs import output_folder
from ..site.engine import forecast
from ..site.facility import facility_power
from ..site.scenario import Scenario
from .levers import (
    LEVERS,
    LeverAssumptions,
    capped_scenario,
    job_curves,
    job_rate_frame,
    paused_scenario,
)
from .merit import LeverSchedule, Merit, allocate
from .planramps import allowed_rates, lever_ramps, ramp_results
from .targets import Targets

__all__ = ["CurtailmentPlan", "PlanMargins", "plan_curtailment"]

SIM_GRID_W = 50.0


def _trailing_mean(x: np.ndarray, w: int) -> np.ndarray:
    """Mean over the last ``w`` ticks (fewer at the start), along the last axis."""
    c = np.cumsum(x, axis=-1)
    out = c.copy()
    out[..., w:] = c[..., w:] - c[..., :-w]
    n = np.minimum(np.arange(1, x.shape[-1] + 1), w)
    return out / n


class CurtailmentPlan:
    """A curtailment plan and its simulation (results object).

    Attributes
    ----------
    schedule : pandas.DataFrame
        Per tick: ``timestamp``, ``planned_it_power_megawatts``,
        ``planned_facility_power_megawatts`` (from the GPUs' planned IT power, less the
        battery at the point of connection), ``pue_steady_w_per_w`` (the steady-state
        PUE it is computed with; caps at the facility boundary are planned at its
        highest), ``storage_discharge_megawatts`` (at the targets' boundary),
        ``storage_soc_fraction``, ``shed_megawatts[LEVER]`` (planned, IT), then per job
        ``lever[JOB]`` (``power_cap``, ``clock_lock``, ``pause``, ``shift_start`` or
        empty), its setting ``power_limit_w[JOB]`` (a cap) or ``clock_sm_mhz[JOB]`` (a
        clock lock), NaN otherwise, and ``paused[JOB]``.
    targets : pandas.DataFrame
        Per target: ``start_utc, end_utc, cap_megawatts``, ``met_share`` (of draws),
        ``met`` (in every draw), ``worst_overshoot_megawatts``, ``response_time_s`` (worst
        draw), ``lost_gpu_hours``, ``delayed_gpu_hours``, ``throttle_lever`` (``none``
        where no cap or lock sheds), the mean planned shed per lever ``shed_megawatts[LEVER]`` and ``storage_soc_fraction``
        at the target's end.
    levers : pandas.DataFrame
        Per lever (:meth:`lever_frame`).
    ramps : pandas.DataFrame
        Per ramp requirement and direction: limit, allowed plan rate, plan-caused
        violations (windows, all draws) and the worst such ramp.
    boundary : str
        ``"it"`` or ``"facility"``: the targets' boundary, where the plan is judged
        (``scope`` is its deprecated name).
    """

    scope = renamed_attribute("boundary")     # the old name, for one release

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @property
    def share_met(self) -> float:
        """Share of targets met in every draw [-]."""
        return float(self.targets["met"].mean()) if len(self.targets) else 1.0

    @property
    def ramp_violations(self) -> int:
        return int(self.ramps["violations"].sum()) if len(self.ramps) else 0

    @property
    def all_met(self) -> bool:
        """Every target met in every draw and no ramp requirement violated by the plan."""
        return bool(self.share_met == 1.0 and self.ramp_violations == 0)

    def summary_frame(self) -> pd.DataFrame:
        """Per-target results (see :attr:`targets`)."""
        return self.targets.copy()

    def lever_frame(self) -> pd.DataFrame:
        """Per lever: ``lever, jobs, peak_shed_megawatts, shed_megawatt_hours,
        lost_gpu_hours, delayed_gpu_hours, restart_gpu_hours, min_power_limit_w`` (the
        lowest power limit of a cap), ``min_clock_sm_mhz`` (the lowest clock of a lock),
        ``storage_soc_fraction`` (the lowest state of charge),
        ``storage_discharge_megawatt_hours`` (at the targets' boundary; the shed columns
        are IT power) and ``storage_recharge_megawatt_hours`` (grid energy to restore the
        battery)."""
        return self.levers.copy()

    def summary(self) -> Summary:
        """Targets met, overshoot, lost training, levers, ramp requirements, verdict."""
        t = self.targets
        lines = [
            (f"Curtailment plan: {len(t)} targets ({self.boundary} power), {self.draws} draws, "
            f"response {self.response_s:g} s, trailing {self.averaging_s:g}-s means; "
            f"levers {', '.join(self.levers_allowed)}"),
            (f"Targets met in every draw: {t['met'].sum()} of {len(t)} "
            f"({100 * self.share_met:.1f} %); target-draw pairs met: "
            f"{100 * t['met_share'].mean():.2f} %"),
            (f"Worst overshoot: {t['worst_overshoot_megawatts'].max():.3f} MW; worst "
            f"response time: {t['response_time_s'].max():.0f} s"),
            (f"Lost training: {self.lost_gpu_hours:.0f} GPU-h (curve band "
            f"{self.lost_gpu_hours_lower:.0f}-{self.lost_gpu_hours_upper:.0f}), of which "
            f"{self.restart_gpu_hours:.0f} GPU-h restarting paused jobs; delayed (shifted "
            f"starts, not lost): {self.delayed_gpu_hours:.0f} GPU-h"),
            (f"Planned ramp rates (IT): down {self.rate_down_w_per_s * 60 / 1e6:.2f} MW/min, "
            f"up {self.rate_up_w_per_s * 60 / 1e6:.2f} MW/min"),
            (f"Planned facility power (plan_schedule.csv) with the steady-state PUE "
            f"{self.schedule['pue_steady_w_per_w'].min():.3f}-"
            f"{self.schedule['pue_steady_w_per_w'].max():.3f}"
            + (" (facility caps planned at the highest)" if self.boundary == "facility"
               else "")),
        ]
        if "planned_at_floor" in t and t["planned_at_floor"].any():
            lines.append(
                f"{int(t['planned_at_floor'].sum())} target(s) within the planning margin "
                "of the site's floor (every job paused): planned at the floor, no margin "
                "kept (planned_it_level_megawatts, planned_at_floor)")
        s = Summary(float_format="{:.3f}")
        s.add_text(lines)
        s.add_df(self.levers[["lever", "jobs", "peak_shed_megawatts", "shed_megawatt_hours",
                              "lost_gpu_hours", "delayed_gpu_hours"]],
                 "Levers in merit order (planned shed, IT):", index=False)
        if len(self.ramps):
            s.add_df(self.ramps, "Ramp requirements (plan-caused violations over all "
                     "draws):", index=False)
        fast = (self.ramps[self.ramps["lever_ramp_over_plan_rate"]]
                if "lever_ramp_over_plan_rate" in self.ramps else self.ramps.iloc[:0])
        for q in fast.itertuples():
            s.add_text(
                f"Warning: the levers' own planned power ramps {q.direction} "
                f"{q.worst_lever_ramp_it_megawatts_per_min:.2f} MW/min (IT, "
                f"{q.window_s:g}-s means, at {q.worst_lever_ramp_utc}), faster than the "
                f"allowed {q.plan_rate_it_megawatts_per_min:.2f} MW/min of "
                f"{q.requirement} (a pause's step to idle); the draws found "
                f"{q.violations} violation(s), a step coinciding with the baseline's own "
                "ramp would make one")
        s.add_text("Verdict: " + ("every target met, no ramp violated" if self.all_met
                                  else "NOT all targets met or a ramp violated")
                   + (" in the draws; the levers' planned steps exceed the allowed ramp "
                      "rate (plan_ramps.csv: lever_ramp_over_plan_rate)" if len(fast)
                      else ""))
        return s

    def __str__(self) -> str:
        return str(self.summary())

    def _repr_html_(self) -> str:
        return self.summary().as_html()

    def timeline(self, every_s: float = 10.0) -> pd.DataFrame:
        """Tidy frame for a chart: ``timestamp, series, power_megawatts`` (baseline mean,
        planned mean and 90th percentile over draws, the cap) every ``every_s``."""
        k = max(1, round(every_s / self.tick_s))
        ts = self.times[::k]
        parts = {"baseline mean": self.baseline_w.mean(axis=0)[::k],
                 "plan mean": self.plan_w.mean(axis=0)[::k],
                 "plan p90": np.quantile(self.plan_w[:, ::k], 0.9, axis=0),
                 "cap": self.cap_w[::k]}
        return pd.concat([pd.DataFrame({"timestamp": ts, "series": name,
                                        "power_megawatts": v / 1e6})
                          for name, v in parts.items()], ignore_index=True)

    def write(self, out_dir) -> list[Path]:
        """Write ``plan_targets.csv``, ``plan_schedule.csv`` (every 10 s),
        ``plan_levers.csv``, ``plan_ramps.csv`` and ``plan_summary.txt``; returns the
        paths."""
        out = output_folder(out_dir)
        k = max(1, round(10.0 / self.tick_s))
        paths = [out / "plan_targets.csv", out / "plan_schedule.csv",
                 out / "plan_levers.csv", out / "plan_ramps.csv", out / "plan_summary.txt"]
        self.targets.to_csv(paths[0], index=False, float_format="%.6g")
        self.schedule.iloc[::k].to_csv(paths[1], index=False, float_format="%.6g")
        self.levers.to_csv(paths[2], index=False, float_format="%.6g")
        self.ramps.to_csv(paths[3], index=False, float_format="%.6g")
        paths[4].write_text(str(self.summary()) + "\n", encoding="utf-8")
        return paths


def _ramp_reqs(spec):
    if spec is None:
        return []
    return [r for r in spec.requirements if r.kind == "ramp"]


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


class _Ticks(NamedTuple):
    """The plan's tick grid: start, number of ticks, tick, times and PUE per tick."""

    t0: pd.Timestamp
    n: int
    tick_s: float
    times: pd.DatetimeIndex
    pue: np.ndarray
    pue_max: float

    def index(self, t: pd.Timestamp, rounding) -> int:
        return rounding((t - self.t0).total_seconds() / self.tick_s)


def plan_curtailment(scenario: Scenario, targets: Targets, *, spec=None, curves=None,
                     response_s: float = 30.0, averaging_s: float = 60.0,
                     margins: PlanMargins | None = None, draws: int = 20, seed: int = 0,
                     tick_s: float = 1.0, simulate: bool = True,
                     assumptions: LeverAssumptions | None = None) -> CurtailmentPlan:
    """Plan per-job levers for a target trajectory and simulate the plan.

    The steps (functions of this module and :mod:`powerlab.flex.planramps`): the tick
    grid, the allowed ramp rates (:func:`~powerlab.flex.planramps.allowed_rates`), the
    planned site power and each target's throttling lever (``_planned_power``), its split over the levers in merit order
    (:func:`powerlab.flex.merit.allocate`), the schedule and the lost and delayed
    training, then, when ``simulate``, the simulated power of every draw
    (``_simulated_it``, less the battery) judged per target (``_target_results``) and
    per ramp requirement (:func:`powerlab.flex.planramps.ramp_results`).

    Parameters
    ----------
    scenario : Scenario
    targets : Targets
        From :func:`~powerlab.flex.targets.read_targets` (already checked).
    spec : RequirementSpec, optional
        Interconnection requirements; its ramp limits bound the plan's ramps.
    curves : PowerThroughputCurve or mapping, optional
        Power-throughput curves (default: the GPU model's prior).
    response_s : float
        Stated response time: each cap must hold from ``start + response_s`` [s].
    averaging_s : float
        Trailing mean the caps are judged on [s].
    margins : PlanMargins, optional
        Planning margin under each cap and smallest allowed plan ramp (default
        ``PlanMargins()``: 1 % and 10 % of the ramp limit).
    draws, seed : int
        Monte Carlo draws and seed.
    tick_s : float
        Engine and plan tick [s].
    simulate : bool
        False: the search only (the plan and its schedule, no per-target results).
    assumptions : LeverAssumptions, optional
        Lever response times, the longest hold of a shifted start and the levers the
        plan may use (default ``LeverAssumptions()``: all of
        :data:`~powerlab.flex.levers.LEVERS`).

    Returns
    -------
    CurtailmentPlan
    """
    if not isinstance(targets, Targets):
        raise PowerlabError("targets must be a Targets object (powerlab.flex.read_targets)")
    a = assumptions or LeverAssumptions()
    lv = _check_levers(a.levers)
    if not response_s >= 0:
        raise PowerlabError(f"response_s must be >= 0, got {response_s}")
    m = margins or PlanMargins()
    bat = scenario.mitigations.battery if "storage" in lv else None
    if bat is not None:          # the plan dispatches the battery, the engine does not
        scenario = scenario.replace(mitigations=dataclasses.replace(
            scenario.mitigations, battery=None))
    cv = job_curves(scenario, curves)
    g = _tick_grid(scenario, tick_s, draws, simulate)
    _check_in_horizon(targets.frame, scenario)
    base = forecast(scenario, draws=draws, seed=seed, tick_s=tick_s)
    share = base.throughput.groupby("job")["effective_training_time"].mean()
    merit = Merit(scenario, cv, share)
    reqs = _ramp_reqs(spec)
    spec_boundary = getattr(spec, "boundary", "facility")
    b_spec = base.power_w(spec_boundary) if reqs else None
    conv_spec = g.pue_max if spec_boundary == "facility" else 1.0
    thr_resp = (a.power_cap_response_s if "power_cap" in lv else a.clock_lock_response_s)
    r_down, r_up = allowed_rates(merit, reqs, b_spec, conv_spec, tick_s,
                                 (merit.full_w - merit.cap_floor_w) / max(thr_resp, tick_s),
                                 m.min_ramp_share)
    p, cap_w, clock, per_target = _planned_power(
        targets, scenario.site, g, merit, (r_down, r_up), m.margin_fraction,
        averaging_s - response_s, response_s, a, lv)
    conv = g.pue_max if targets.boundary == "facility" else 1.0
    ls = allocate(merit, merit.full_w - p, g.times, tick_s, clock=clock,
                  r_up_w_per_s=r_up, levers=lv, battery=bat, conv=conv,
                  r_down_w_per_s=r_down, max_hold_s=a.shift_max_hold_s)
    sched = _schedule(g.times, p, merit, ls)
    _add_planned_facility(sched, p, ls, scenario.site, g)
    cost = _lost_training(merit, ls, share, tick_s)
    out = {"scenario": scenario, "schedule": sched, "times": g.times, "tick_s": tick_s,
           "boundary": targets.boundary, "response_s": response_s, "averaging_s": averaging_s,
           "draws": draws, "lost_gpu_hours": cost["lost"][0],
           "lost_gpu_hours_lower": cost["lost"][1], "lost_gpu_hours_upper": cost["lost"][2],
           "restart_gpu_hours": cost["restart"], "delayed_gpu_hours": cost["delayed"],
           "rate_down_w_per_s": r_down, "rate_up_w_per_s": r_up, "cap_w": cap_w,
           "curves": cv, "targets_in": targets.frame, "lever_schedule": ls,
           "levers_allowed": lv, "assumptions": a,
           "levers": _lever_frame(merit, ls, cost, tick_s, bat)}
    if not simulate:
        out.update(targets=pd.DataFrame(), ramps=pd.DataFrame(), baseline_w=None,
                   plan_w=None)
        return CurtailmentPlan(**out)
    sim_sc, sim_base = scenario, base
    if ls.starts_utc:            # the shifted starts, in the same horizon
        sim_sc = scenario.replace(
            horizon_start_utc=scenario.start_utc, horizon_end_utc=scenario.end_utc,
            jobs=tuple(dataclasses.replace(j, start_utc=ls.starts_utc.get(j.name,
                                                                          j.start_utc))
                       for j in scenario.jobs))
        sim_base = forecast(sim_sc, draws=draws, seed=seed, tick_s=tick_s)
    it = _simulated_it(sim_sc, sim_base, merit, cv, ls.limits_w, ls.paused, draws, seed,
                       tick_s)
    site = scenario.site
    fac = facility_power(it, tick_s, g.pue,
                         electrical_loss_fraction=site.electrical_loss_fraction,
                         cooling_time_constant_s=site.cooling_time_constant_s,
                         base_load_w=site.base_load_w, parts=False).facility_w
    fac = fac - ls.storage_w                  # the battery at the point of connection
    it_seen = it - ls.storage_w if targets.boundary == "it" else it
    plan_w = fac if targets.boundary == "facility" else it_seen
    rows = _target_results(targets.frame, g, plan_w, merit, ls, per_target, cost,
                           response_s, averaging_s)
    ramps = ramp_results(reqs, fac if spec_boundary == "facility" else it - ls.storage_w,
                         b_spec, tick_s, r_down, r_up)
    lever_ramps(ramps, reqs, merit, ls, g.times, tick_s)
    out.update(targets=pd.DataFrame(rows), ramps=pd.DataFrame(ramps),
               baseline_w=base.power_w(targets.boundary), plan_w=plan_w)
    return CurtailmentPlan(**out)


def _check_levers(levers) -> tuple[str, ...]:
    if levers is None:
        return LEVERS
    if isinstance(levers, str):
        levers = [levers]
    bad = [x for x in levers if x not in LEVERS]
    if bad:
        raise PowerlabError(f"unknown lever {bad[0]!r}; levers are {', '.join(LEVERS)}")
    return tuple(x for x in LEVERS if x in set(levers))


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


def _tick_grid(scenario: Scenario, tick_s: float, draws: int, simulate: bool) -> _Ticks:
    """The tick grid over the scenario's horizon (refused when the simulation would not
    fit in memory)."""
    t0 = scenario.start_utc
    n = round((scenario.end_utc - t0).total_seconds() / tick_s)
    if simulate and draws * n > 60_000_000:
        raise PowerlabError(
            f"simulating {draws} draws x {n:,} ticks of {tick_s:g} s holds about "
            f"{draws * n * 8 * 6 / 2**30:.0f} GiB; use fewer draws, a coarser tick_s or a "
            "shorter horizon (or simulate=False for the plan alone)")
    times = pd.date_range(t0, periods=n, freq=pd.Timedelta(seconds=tick_s))
    pue = np.asarray(scenario.site.pue_at(times), float) * np.ones(n)
    return _Ticks(t0, n, tick_s, times, pue, float(pue.max()))


def _throttle_of(row, response_s: float, a: LeverAssumptions, lv: tuple) -> str:
    """The throttling lever of a target: a power cap when the time from its notice to
    ``start + response_s`` allows the cap's response (always for a target known in
    advance), else a clock lock; one of them when the other is not allowed."""
    if "power_cap" not in lv:
        return "clock_lock"
    if "clock_lock" not in lv or pd.isna(row.notice_utc):
        return "power_cap"
    avail = (row.start_utc - row.notice_utc).total_seconds() + response_s
    return "power_cap" if avail >= a.power_cap_response_s else "clock_lock"


def _planned_power(targets: Targets, site, g: _Ticks, alloc: Merit,
                   rates: tuple[float, float], margin_fraction: float,
                   judged_early_s: float, response_s: float, a: LeverAssumptions,
                   lv: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
    """The planned site power ``P(t)`` [IT W] (lower envelope of the caps' cones, limited
    in its rise and fall), the caps at the targets' boundary per tick [W], per tick
    whether the throttling lever is a clock lock, and per target its throttling lever
    and the IT level it is planned at (cap less the margin, at least the site's floor)
    [W]."""
    r_down, r_up = rates
    n, tick_s = g.n, g.tick_s
    lead = 3 * site.cooling_time_constant_s if targets.boundary == "facility" else 0.0
    env = np.full(n, alloc.full_w)
    cap_w = np.full(n, np.inf)
    locked, planned = [], []
    floor_w = alloc.const + float(alloc.job_idle_w.sum())
    levers_of = [_throttle_of(r, response_s, a, lv) for r in targets.frame.itertuples()]
    for r, thr in zip(targets.frame.itertuples(), levers_of):
        i0, i1 = g.index(r.start_utc, math.floor), g.index(r.end_utc, math.ceil)
        i0c, i1c = max(i0, 0), min(i1, n)
        if i1c <= i0c:
            planned.append((np.nan, False))
            continue
        cap_w[i0c:i1c] = np.minimum(cap_w[i0c:i1c], r.cap_w)
        c = r.cap_w * (1 - margin_fraction)
        if targets.boundary == "facility":
            c = (c - site.base_load_w) / g.pue_max
        # never below what the levers can reach (every job paused: the site's floor); a
        # cap within the margin of the floor is planned at the floor, margin not kept
        planned.append((max(c, floor_w), bool(c < floor_w)))
        c = max(c, floor_w)
        # at the cap early enough that the trailing mean judged from start + response
        # holds no pre-start power (and, for facility caps, the cooling has followed)
        early = lead + max(0.0, judged_early_s)
        nt = r.notice_utc
        if thr == "clock_lock":
            locked.append((i0c, i1c))
        delay = a.power_cap_response_s if thr == "power_cap" else a.clock_lock_response_s
        # never acted on before it is known, and the lever takes its response to act
        ni = 0 if pd.isna(nt) else max(0, math.ceil(
            ((nt - g.t0).total_seconds() + delay) / tick_s))
        j0 = min(max(0, i0 - round(early / tick_s), ni), i1c)
        env[j0:i1c] = np.minimum(env[j0:i1c], c)
        k_span = math.ceil(max(alloc.full_w - c, 0) / (r_down * tick_s)) + 1
        a0 = max(ni, j0 - k_span, 0)
        if a0 < j0:
            k = np.arange(a0, j0)
            env[a0:j0] = np.minimum(env[a0:j0], c + r_down * tick_s * (j0 - k))
    # down-ramp allowed only from each notice: before a target's notice its cone is absent
    # (handled above); forward passes: rise at most r_up, fall at most r_down
    k = np.arange(n, dtype=float)
    up, dn = r_up * tick_s, r_down * tick_s

    def passes(e):
        q = up * k + np.minimum.accumulate(e - up * k)       # under e, rising <= r_up
        return np.maximum(q, -dn * k + np.maximum.accumulate(q + dn * k))  # falls <= r_down

    p = passes(env)
    # where a late notice leaves a cap unreached the fall limit lifts p over env; the
    # rise cone from the unreached cap would still pull p down after the target's end.
    # Relaxing the caps to what is reached (env2 = max(env, p), p itself is feasible
    # under it) gives p2 >= p, equal where caps are unreached, under every cap where p
    # was, and never falling after a target's end for that target.
    p = passes(np.maximum(env, p))
    p = np.minimum(p, alloc.full_w)
    # a stretch of shed (down, hold, back up) is clock-locked when a target in it is
    clock = np.zeros(n, bool)
    if locked:
        below = np.concatenate([[0], (p < alloc.full_w - 1e-6).astype(np.int8), [0]])
        d = np.diff(below)
        for s, e in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
            if any(i0 < e and s < i1 for i0, i1 in locked):
                clock[s:e] = True
    return p, cap_w, clock, (levers_of, planned)


def _schedule(times, p: np.ndarray, merit: Merit, ls: LeverSchedule) -> pd.DataFrame:
    """Per tick: planned IT power, the battery, the planned shed per lever, and per job
    its lever and setting (NaN: none) and pause flag."""
    sched = pd.DataFrame({"timestamp": times, "planned_it_power_megawatts": p / 1e6,
                          "storage_discharge_megawatts": ls.storage_w / 1e6,
                          "storage_soc_fraction": ls.soc_fraction})
    for lever in LEVERS:
        sched[f"shed_megawatts[{lever}]"] = ls.shed_w[lever] / 1e6
    for ji, j in enumerate(merit.jobs):
        c = merit.curves[j.name]
        top = merit.tables[ji].limits_w[0]
        thr = ls.limits_w[ji] < top
        run = ls.alive[ji] & ~ls.paused[ji]
        lever = np.full(len(p), "", object)
        lever[run & thr] = ls.throttle[run & thr]
        lever[ls.paused[ji] & ls.alive[ji]] = "pause"
        lever[ls.held[ji]] = "shift_start"
        lim = np.where(lever == "power_cap", ls.limits_w[ji], np.nan)
        clk = np.where(lever == "clock_lock",
                       c.clock_at_power(np.minimum(j.compute_w,
                                                   c.power_at_limit(ls.limits_w[ji]))),
                       np.nan)
        sched[f"lever[{j.name}]"] = lever
        sched[f"power_limit_w[{j.name}]"] = lim
        sched[f"clock_sm_mhz[{j.name}]"] = clk
        sched[f"paused[{j.name}]"] = ls.paused[ji]
    return sched


def _add_planned_facility(sched: pd.DataFrame, p: np.ndarray, ls: LeverSchedule, site,
                          g: _Ticks) -> None:
    """Add the planned facility power (at the point of connection: the battery's output
    subtracted) from the GPUs' planned IT power (the planned power plus what the battery
    carries), and the steady-state PUE it is computed with, to the schedule."""
    fac = facility_power((p + ls.shed_w["storage"])[None, :], g.tick_s, g.pue,
                         electrical_loss_fraction=site.electrical_loss_fraction,
                         cooling_time_constant_s=site.cooling_time_constant_s,
                         base_load_w=site.base_load_w, parts=False).facility_w[0]
    sched.insert(2, "planned_facility_power_megawatts", (fac - ls.storage_w) / 1e6)
    sched.insert(3, "pue_steady_w_per_w", g.pue)


def _lost_training(merit: Merit, ls: LeverSchedule, share: pd.Series,
                   tick_s: float) -> dict:
    """Planned lost training [GPU-h] (curve mean, upper and lower band; each throttled
    job weighted by its share of time training over the draws), of it restarts of paused
    jobs, per lever and per tick, and the delayed training of shifted starts [GPU-h]."""
    n = ls.limits_w.shape[1]
    lost = np.zeros(3)
    restart_gh = 0.0
    per_tick = {x: np.zeros(n) for x in LEVERS}
    for ji, j in enumerate(merit.jobs):
        c = merit.curves[j.name]
        lim = ls.limits_w[ji]
        act = ~ls.paused[ji] & (lim < merit.tables[ji].limits_w[0]) & ls.alive[ji]
        sh = float(share.get(j.name, 1.0))
        if act.any():
            rr = job_rate_frame(c, j, lim[act])
            for q, col in enumerate(("rate_mean", "rate_upper", "rate_lower")):
                lost[q] += j.gpus * sh * float((1 - rr[col]).sum()) * tick_s / 3600
            loss = np.zeros(n)
            loss[act] = j.gpus * sh * (1 - rr["rate_mean"].to_numpy()) * tick_s / 3600
            for x in ("power_cap", "clock_lock"):
                per_tick[x] += np.where(ls.throttle == x, loss, 0.0)
        pz = ls.paused[ji] & ls.alive[ji]
        lost += j.gpus * pz.sum() * tick_s / 3600
        per_tick["pause"] += j.gpus * pz * tick_s / 3600
        starts = np.flatnonzero(np.diff(np.concatenate([[0],
                                                        ls.paused[ji].astype(int)])) == 1)
        rs = j.gpus * (j.startup_s + j.checkpoint_duration_s) / 3600
        restart_gh += len(starts) * rs
        per_tick["pause"][starts] += rs
    delayed = (ls.held * np.array([j.gpus for j in merit.jobs])[:, None]).sum(axis=0) \
        * tick_s / 3600 if len(merit.jobs) else np.zeros(n)
    return {"lost": lost + restart_gh, "restart": restart_gh, "per_tick": per_tick,
            "delayed_per_tick": delayed, "delayed": float(delayed.sum())}


def _lever_frame(merit: Merit, ls: LeverSchedule, cost: dict, tick_s: float,
                 battery) -> pd.DataFrame:
    """One row per lever (merit order): jobs using it, peak and energy of its planned
    shed, lost and delayed training, its lowest setting, and the battery's state."""
    rows = []
    for lever in ("shift_start", "storage", "power_cap", "clock_lock", "pause"):
        sh = ls.shed_w[lever]
        used = sh > 1e-6
        if lever == "shift_start":
            jobs = [j.name for j in merit.jobs if j.name in ls.starts_utc]
        elif lever == "storage":
            jobs = []
        elif lever == "pause":
            jobs = [j.name for ji, j in enumerate(merit.jobs)
                    if (ls.paused[ji] & ls.alive[ji]).any()]
        else:
            jobs = [j.name for ji, j in enumerate(merit.jobs)
                    if ((ls.limits_w[ji] < merit.tables[ji].limits_w[0]) & ls.alive[ji]
                        & ~ls.paused[ji] & (ls.throttle == lever)).any()]
        lim_min, clk_min = np.nan, np.nan
        if lever in ("power_cap", "clock_lock") and jobs:
            lims = [ls.limits_w[ji][(ls.throttle == lever) & ls.alive[ji]].min()
                    for ji, j in enumerate(merit.jobs) if j.name in jobs]
            if lever == "power_cap":
                lim_min = float(min(lims))
            else:
                clk = [float(merit.curves[j.name].clock_at_power(
                    min(j.compute_w, float(merit.curves[j.name].power_at_limit(lm)))))
                    for j, lm in zip([j for j in merit.jobs if j.name in jobs], lims)]
                clk_min = float(np.nanmin(clk)) if clk else np.nan
        row = {"lever": lever, "jobs": " ".join(jobs),
               "peak_shed_megawatts": float(sh.max()) / 1e6 if len(sh) else 0.0,
               "shed_megawatt_hours": float(sh.sum()) * tick_s / 3.6e9,
               "lost_gpu_hours": float(cost["per_tick"][lever].sum()),
               "delayed_gpu_hours": cost["delayed"] if lever == "shift_start" else 0.0,
               "restart_gpu_hours": cost["restart"] if lever == "pause" else 0.0,
               "min_power_limit_w": lim_min, "min_clock_sm_mhz": clk_min,
               "storage_soc_fraction": np.nan, "storage_discharge_megawatt_hours": np.nan,
               "storage_recharge_megawatt_hours": np.nan, "used": bool(used.any())}
        if lever == "storage" and battery is not None:
            row["storage_soc_fraction"] = float(np.nanmin(ls.soc_fraction))
            row["storage_discharge_megawatt_hours"] = float(ls.storage_w.sum()) * tick_s / 3.6e9
            row["storage_recharge_megawatt_hours"] = (
                float(ls.storage_w.sum()) * tick_s / 3.6e9 / battery.round_trip_efficiency)
        rows.append(row)
    return pd.DataFrame(rows)


def _simulated_it(scenario: Scenario, base, merit: Merit, cv: dict,
                  limits: np.ndarray, paused: np.ndarray, draws: int, seed: int,
                  tick_s: float) -> np.ndarray:
    """IT power of every draw under the plan [W]: the base plus each job's change
    under its limit (interpolated between forecasts at a 50-W grid of limits) or paused,
    all on the same seed."""
    it = base.it_w.copy()
    for ji, j in enumerate(merit.jobs):
        lims_tab = merit.tables[ji].limits_w
        lo_lim, hi_lim = lims_tab[-1], lims_tab[0]
        grid = np.unique(np.r_[np.arange(hi_lim, lo_lim, -SIM_GRID_W), lo_lim])[::-1]
        lim = np.where(paused[ji], hi_lim, limits[ji])
        pos = np.interp(lim, grid[::-1], np.arange(len(grid))[::-1])  # grid descending
        for g in range(1, len(grid)):
            wgt = np.clip(1.0 - np.abs(pos - g), 0.0, 1.0)
            wgt[paused[ji]] = 0.0
            if not wgt.any():
                continue
            sc = capped_scenario(scenario, {j.name: float(grid[g])}, cv)
            dlt = forecast(sc, draws=draws, seed=seed, tick_s=tick_s).it_w - base.it_w
            it += wgt * dlt
        if paused[ji].any():
            dlt = forecast(paused_scenario(scenario, {j.name}), draws=draws, seed=seed,
                           tick_s=tick_s).it_w - base.it_w
            it += paused[ji] * dlt
    return it


def _target_results(f: pd.DataFrame, g: _Ticks, plan_w: np.ndarray, merit: Merit,
                    ls: LeverSchedule, per_target: tuple, cost: dict, response_s: float,
                    averaging_s: float) -> list[dict]:
    """Per target: met share and met, worst overshoot, worst response time, lost and
    delayed training, the throttling lever (``per_target``: the levers and the planned
    IT levels of :func:`_planned_power`), the mean planned shed per lever, the battery's
    state of charge at its end and the IT level planned, judged on the trailing ``averaging_s`` mean
    of the simulated power.  Lost and delayed training are the plan's per-tick costs
    (:func:`_lost_training`: training-share weighted, restarts included) summed over the
    target's ticks, so the ramps before and after a target count toward the plan's
    total only."""
    tick_s = g.tick_s
    tm = _trailing_mean(plan_w, max(1, round(averaging_s / tick_s)))
    rows = []
    for r, thr, (lvl, at_floor) in zip(f.itertuples(), *per_target):
        i0 = max(0, g.index(r.start_utc, math.floor))
        i1 = min(g.n, g.index(r.end_utc, math.ceil))
        seg = tm[:, i0:i1] - r.cap_w
        ir = min(math.ceil(response_s / tick_s), i1 - i0 - 1)
        over = seg > 1e-6
        met = ~over[:, ir:].any(axis=1)
        last_over = np.where(over.any(axis=1),
                             over.shape[1] - np.argmax(over[:, ::-1], axis=1), 0)
        resp = last_over * tick_s
        lost_t = float(sum(cost["per_tick"][x][i0:i1].sum() for x in LEVERS))
        delayed = float(cost["delayed_per_tick"][i0:i1].sum())
        row = {"start_utc": r.start_utc, "end_utc": r.end_utc,
               "cap_megawatts": r.cap_w / 1e6, "source": r.source,
               "met_share": float(met.mean()), "met": bool(met.all()),
               "worst_overshoot_megawatts": float(seg[:, ir:].max()) / 1e6,
               "response_time_s": float(resp.max()), "lost_gpu_hours": lost_t,
               "delayed_gpu_hours": delayed,
               # the lever the target would throttle with, "none" where none throttles
               "throttle_lever": thr if float(ls.shed_w[thr][i0:i1].max(initial=0.0))
               > 1e-6 else "none"}
        for lever in LEVERS:
            row[f"shed_megawatts[{lever}]"] = float(ls.shed_w[lever][i0:i1].mean()) / 1e6
        row["storage_soc_fraction"] = float(ls.soc_fraction[i1 - 1])
        # the IT level the target is planned at, and whether that is the site's floor
        row["planned_it_level_megawatts"] = lvl / 1e6
        row["planned_at_floor"] = at_floor
        rows.append(row)
    return rows
