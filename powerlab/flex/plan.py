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
       response rather than a too-fast ramp.
    2. The allowed ramp rates are the spec's ramp limits (``kind: ramp``) less the
       baseline's own largest ramp of the same window means (the site already uses that
       much), at least ``min_ramp_share`` of the limit, converted to IT power with the
       highest PUE; with no spec, the levers' own response.
    3. The shed ``P_full - P(t)`` is split over the jobs at least marginal cost: each
       job's power limit in 5-W notches, every notch ranked by lost step rate per watt
       (GPU-hours per W, from each job's power-throughput curve); when capping every job
       to its minimum limit is not enough, jobs are paused (largest shed first) for the
       whole stretch that needs it.  Job power under a limit is planned with the lower
       band of the curve's rate (more compute time per step, more power: the safe side).

Simulation (every draw)
    The baseline forecast and forecasts of the scenario with each job capped at a grid of
    limits (every 50 W) and paused, all with the same seed (the same failures and timing
    offsets), are combined tick by tick: ``P_d(t) = B_d(t) + sum_j D_j(L_j(t))_d(t) -
    B_d(t)``, linearly interpolated between the two grid limits around ``L_j(t)``.
    Facility power follows from :func:`powerlab.grid.facility.facility_power`.
    A target is met in a draw when the trailing ``averaging_s`` mean of the power in the
    target's boundary (``it`` or ``facility``) is at or under the cap at every tick from ``start + response_s`` to
    its end; its response time is the time from the start after which that holds (the
    plan reaches each cap ``averaging_s - response_s`` before the start, so that the
    judged means hold no pre-start power).  A ramp requirement is violated by the plan
    in a draw where a ramp of window means of the planned power exceeds both the limit
    and the largest ramp the baseline itself makes in that draw (a site already over a
    limit is not made worse; a site within it stays within it).

Approximation stated: a lever setting is simulated as the whole job under that setting
in the same draw, so checkpoints under a cap fall at the capped job's own times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from .._options import renamed_attribute
from .._summary import Summary
from ..exceptions import PowerlabError
from ..grid.facility import facility_power
from ..grid.forecast import forecast
from ..grid.ramps import whole_ticks
from ..grid.scenario import Scenario
from ..outputs import output_folder
from .levers import (
    LeverAssumptions,
    capped_scenario,
    job_curves,
    job_power_w,
    job_rate,
    paused_scenario,
    site_constant_w,
)
from .targets import Targets

__all__ = ["CurtailmentPlan", "PlanMargins", "plan_curtailment"]

NOTCH_W = 5.0
SIM_GRID_W = 50.0


def _trailing_mean(x: np.ndarray, w: int) -> np.ndarray:
    """Mean over the last ``w`` ticks (fewer at the start), along the last axis."""
    c = np.cumsum(x, axis=-1)
    out = c.copy()
    out[..., w:] = c[..., w:] - c[..., :-w]
    n = np.minimum(np.arange(1, x.shape[-1] + 1), w)
    return out / n


def _ramp_series(x: np.ndarray, w: int, window_s: float) -> np.ndarray:
    """Ramp between adjacent ``w``-tick means for every start tick [W/s]."""
    c = np.concatenate([[0.0], np.cumsum(x - x[0])])
    m = (c[w:] - c[:-w]) / w
    return (m[w:] - m[:-w]) / window_s


class _Allocator:
    """Site shed -> per-job power limits at least lost step rate (5-W notches)."""

    def __init__(self, scenario: Scenario, curves: dict):
        self.jobs = list(scenario.jobs)
        self.const = site_constant_w(scenario)
        notches = []
        self.tables = []
        for ji, j in enumerate(self.jobs):
            c = curves[j.name]
            top = min(c.max_limit_w, max(c.min_limit_w, math.ceil(j.compute_w / c.kappa)))
            lims = np.arange(top, c.min_limit_w - 1e-9, -NOTCH_W)
            p = job_power_w(j, c, lims) * j.gpus
            r = job_rate(c, j, lims) * j.gpus
            self.tables.append((lims, p, r))
            dp, dr = -np.diff(p), -np.diff(r)
            ratio = np.where(dp > 0, dr / np.maximum(dp, 1e-9), np.inf)
            # a notch is taken only after the job's earlier notches: keep order by a
            # running maximum of the ratio (convex hull in the greedy sense)
            ratio = np.maximum.accumulate(ratio)
            notches += [(ratio[i], ji, i + 1, dp[i]) for i in range(len(dp))]
        notches.sort(key=lambda t: (t[0], t[1], t[2]))
        self.order = notches
        self.cum = np.concatenate([[0.0], np.cumsum([n[3] for n in notches])])
        self.full_w = self.const + sum(t[1][0] for t in self.tables)
        self.cap_floor_w = self.const + sum(t[1][-1] for t in self.tables)
        # per prefix of notches, each job's notch index
        idx = np.zeros((len(notches) + 1, len(self.jobs)), np.int64)
        for k, (_, ji, i, _) in enumerate(notches):
            idx[k + 1] = idx[k]
            idx[k + 1, ji] = i
        self.idx = idx

    def limits(self, shed_w: np.ndarray, active: list[bool]) -> np.ndarray:
        """Per-job limit per tick for a required shed (jobs not ``active``: paused)."""
        k = np.searchsorted(self.cum, shed_w - 1e-6, side="left")
        k = np.minimum(k, len(self.cum) - 1)
        out = np.empty((len(self.jobs), len(shed_w)))
        for ji, (lims, _, _) in enumerate(self.tables):
            out[ji] = lims[self.idx[k, ji]]
        return out


class CurtailmentPlan:
    """A curtailment plan and its simulation (results object).

    Attributes
    ----------
    schedule : pandas.DataFrame
        Per tick: ``timestamp``, ``planned_it_power_megawatts``, then per job
        ``power_limit_w[JOB]`` (NaN: not capped) and ``paused[JOB]``.
    targets : pandas.DataFrame
        Per target: ``start_utc, end_utc, cap_megawatts``, ``met_share`` (of draws),
        ``met`` (in every draw), ``worst_overshoot_megawatts``, ``response_time_s`` (worst
        draw), ``lost_gpu_hours``.
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

    def summary(self) -> Summary:
        """Targets met, overshoot, lost training, ramp requirements and the verdict."""
        t = self.targets
        lines = [
            (f"Curtailment plan: {len(t)} targets ({self.boundary} power), {self.draws} draws, "
            f"response {self.response_s:g} s, trailing {self.averaging_s:g}-s means"),
            (f"Targets met in every draw: {t['met'].sum()} of {len(t)} "
            f"({100 * self.share_met:.1f} %); target-draw pairs met: "
            f"{100 * t['met_share'].mean():.2f} %"),
            (f"Worst overshoot: {t['worst_overshoot_megawatts'].max():.3f} MW; worst "
            f"response time: {t['response_time_s'].max():.0f} s"),
            (f"Lost training: {self.lost_gpu_hours:.0f} GPU-h (curve band "
            f"{self.lost_gpu_hours_lower:.0f}-{self.lost_gpu_hours_upper:.0f}), of which "
            f"{self.restart_gpu_hours:.0f} GPU-h restarting paused jobs"),
            (f"Planned ramp rates (IT): down {self.rate_down_w_per_s * 60 / 1e6:.2f} MW/min, "
            f"up {self.rate_up_w_per_s * 60 / 1e6:.2f} MW/min"),
        ]
        s = Summary(float_format="{:.3f}")
        s.add_text(lines)
        if len(self.ramps):
            s.add_df(self.ramps, "Ramp requirements (plan-caused violations over all "
                     "draws):", index=False)
        s.add_text("Verdict: " + ("every target met, no ramp violated" if self.all_met
                                  else "NOT all targets met or a ramp violated"))
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
        """Write ``plan_targets.csv``, ``plan_schedule.csv`` (every 10 s), ``plan_ramps.csv``
        and ``plan_summary.txt``; returns the paths."""
        out = output_folder(out_dir)
        k = max(1, round(10.0 / self.tick_s))
        paths = [out / "plan_targets.csv", out / "plan_schedule.csv", out / "plan_ramps.csv",
                 out / "plan_summary.txt"]
        self.targets.to_csv(paths[0], index=False, float_format="%.6g")
        self.schedule.iloc[::k].to_csv(paths[1], index=False, float_format="%.6g")
        self.ramps.to_csv(paths[2], index=False, float_format="%.6g")
        paths[3].write_text(str(self.summary()) + "\n", encoding="utf-8")
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

    The steps (each a function of this module): the tick grid, the allowed ramp rates
    (``_allowed_rates``), the planned site power (``_planned_power``), its split
    into per-job limits and pauses (``_allocate``), the schedule and the lost
    training, then, when ``simulate``, the simulated IT power of every draw
    (``_simulated_it``) judged per target (``_target_results``) and per ramp
    requirement (``_ramp_results``).

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
        Lever response times (default ``LeverAssumptions()``).

    Returns
    -------
    CurtailmentPlan
    """
    if not isinstance(targets, Targets):
        raise PowerlabError("targets must be a Targets object (powerlab.flex.read_targets)")
    a = assumptions or LeverAssumptions()
    m = margins or PlanMargins()
    cv = job_curves(scenario, curves)
    g = _tick_grid(scenario, tick_s, draws, simulate)
    alloc = _Allocator(scenario, cv)
    base = forecast(scenario, draws=draws, seed=seed, tick_s=tick_s)
    reqs = _ramp_reqs(spec)
    spec_boundary = getattr(spec, "boundary", "facility")
    b_spec = base.power_w(spec_boundary) if reqs else None
    conv = g.pue_max if spec_boundary == "facility" else 1.0
    r_down, r_up = _allowed_rates(alloc, reqs, b_spec, conv, tick_s,
                                  (alloc.full_w - alloc.cap_floor_w) / a.power_cap_response_s,
                                  m.min_ramp_share)
    p, cap_w = _planned_power(targets, scenario.site, g, alloc, (r_down, r_up),
                                  m.margin_fraction, averaging_s - response_s)
    paused, limits = _allocate(p, alloc, scenario, tick_s)
    sched = _schedule(g.times, p, alloc, limits, paused)
    # a lever costs training only while its job holds its GPUs
    alive = np.array([(g.times >= j.start_utc) & (g.times < j.end_utc) for j in alloc.jobs])
    share = base.throughput.groupby("job")["effective_training_time"].mean()
    lost, restart_gh = _lost_training(alloc, cv, limits, paused, alive, share, tick_s)
    out = {"scenario": scenario, "schedule": sched, "times": g.times, "tick_s": tick_s,
           "boundary": targets.boundary, "response_s": response_s, "averaging_s": averaging_s,
           "draws": draws, "lost_gpu_hours": lost[0], "lost_gpu_hours_lower": lost[1],
           "lost_gpu_hours_upper": lost[2], "restart_gpu_hours": restart_gh,
           "rate_down_w_per_s": r_down, "rate_up_w_per_s": r_up, "cap_w": cap_w,
           "curves": cv, "targets_in": targets.frame}
    if not simulate:
        out.update(targets=pd.DataFrame(), ramps=pd.DataFrame(), baseline_w=None,
                   plan_w=None)
        return CurtailmentPlan(**out)
    it = _simulated_it(scenario, base, alloc, cv, limits, paused, draws, seed, tick_s)
    site = scenario.site
    fac = facility_power(it, tick_s, g.pue,
                         electrical_loss_fraction=site.electrical_loss_fraction,
                         cooling_time_constant_s=site.cooling_time_constant_s,
                         base_load_w=site.base_load_w, parts=False).facility_w
    plan_w = fac if targets.boundary == "facility" else it
    rows = _target_results(targets.frame, g, plan_w, alloc, cv, limits, paused, alive,
                           response_s, averaging_s)
    ramps = _ramp_results(reqs, fac if spec_boundary == "facility" else it, b_spec,
                          tick_s, r_down, r_up)
    out.update(targets=pd.DataFrame(rows), ramps=pd.DataFrame(ramps),
               baseline_w=base.power_w(targets.boundary), plan_w=plan_w)
    return CurtailmentPlan(**out)


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


def _allowed_rates(alloc: _Allocator, reqs: list, b_spec, conv: float, tick_s: float,
                   fast: float, min_ramp_share: float) -> tuple[float, float]:
    """Allowed plan ramp rates down and up [IT W/s]: each ramp limit less the baseline's
    own largest ramp of that window (at least ``min_ramp_share`` of the limit), in IT
    power (``conv``: the highest PUE for limits at the facility boundary); ``fast`` without one."""
    r_down = r_up = fast
    for rq in reqs:
        w = whole_ticks(rq.window_s, tick_s)
        worst_up = worst_dn = 0.0
        for d in range(len(b_spec)):
            rr = _ramp_series(b_spec[d], w, rq.window_s)
            worst_up, worst_dn = max(worst_up, rr.max()), max(worst_dn, -rr.min())
        lim = rq.limit_si
        if rq.direction in ("down", "both"):
            r_down = min(r_down, max(lim - worst_dn, min_ramp_share * lim) / conv)
        if rq.direction in ("up", "both"):
            r_up = min(r_up, max(lim - worst_up, min_ramp_share * lim) / conv)
    return r_down, r_up


def _planned_power(targets: Targets, site, g: _Ticks, alloc: _Allocator,
                   rates: tuple[float, float], margin_fraction: float,
                   judged_early_s: float) -> tuple[np.ndarray, np.ndarray]:
    """The planned site power ``P(t)`` [IT W] (lower envelope of the caps' cones, limited
    in its rise and fall) and the caps at the targets' boundary per tick [W]."""
    r_down, r_up = rates
    n, tick_s = g.n, g.tick_s
    lead = 3 * site.cooling_time_constant_s if targets.boundary == "facility" else 0.0
    env = np.full(n, alloc.full_w)
    cap_w = np.full(n, np.inf)
    for r in targets.frame.itertuples():
        i0, i1 = g.index(r.start_utc, math.floor), g.index(r.end_utc, math.ceil)
        i0c, i1c = max(i0, 0), min(i1, n)
        if i1c <= i0c:
            continue
        cap_w[i0c:i1c] = np.minimum(cap_w[i0c:i1c], r.cap_w)
        c = r.cap_w * (1 - margin_fraction)
        if targets.boundary == "facility":
            c = (c - site.base_load_w) / g.pue_max
        # at the cap early enough that the trailing mean judged from start + response
        # holds no pre-start power (and, for facility caps, the cooling has followed)
        early = lead + max(0.0, judged_early_s)
        nt = r.notice_utc
        ni = 0 if pd.isna(nt) else max(0, int((nt - g.t0).total_seconds() // tick_s))
        # never acted on before it is known
        j0 = max(0, i0 - round(early / tick_s), min(ni, i0c))
        env[j0:i1c] = np.minimum(env[j0:i1c], c)
        k_span = math.ceil(max(alloc.full_w - c, 0) / (r_down * tick_s)) + 1
        a0 = max(ni, j0 - k_span, 0)
        if a0 < j0:
            k = np.arange(a0, j0)
            env[a0:j0] = np.minimum(env[a0:j0], c + r_down * tick_s * (j0 - k))
    # down-ramp allowed only from each notice: before a target's notice its cone is absent
    # (handled above); forward passes: rise at most r_up, fall at most r_down
    k = np.arange(n, dtype=float)
    up = r_up * tick_s
    p = up * k + np.minimum.accumulate(env - up * k)
    dn = r_down * tick_s
    p = np.maximum(p, -dn * k + np.maximum.accumulate(p + dn * k))
    return np.minimum(p, alloc.full_w), cap_w


def _allocate(p: np.ndarray, alloc: _Allocator, scenario: Scenario,
              tick_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-job pauses (where capping every job is not enough: largest shed first, from a
    checkpoint before) and power limits per tick for the planned power ``p``."""
    need_pause = p < alloc.cap_floor_w - 1e-6
    paused = np.zeros((len(alloc.jobs), len(p)), bool)
    shed = alloc.full_w - p
    if need_pause.any():
        idle_w = scenario.hardware.gpu_idle_w
        order = np.argsort([-(t[1][0] - j.gpus * idle_w)
                            for j, t in zip(alloc.jobs, alloc.tables)])
        runs = np.flatnonzero(np.diff(np.concatenate([[0], need_pause.astype(int), [0]])))
        for s, e in zip(runs[::2], runs[1::2]):
            s0 = max(0, s - round(max(j.checkpoint_duration_s for j in alloc.jobs)
                                      / tick_s))
            got = 0.0
            need = float((alloc.cap_floor_w - p[s:e]).max())
            for ji in order:
                if got >= need:
                    break
                j = alloc.jobs[ji]
                paused[ji, s0:e] = True
                got += alloc.tables[ji][1][-1] - j.gpus * idle_w
            shed[s0:e] = np.maximum(shed[s0:e] - got, 0.0)
    return paused, alloc.limits(shed, [True] * len(alloc.jobs))


def _schedule(times, p: np.ndarray, alloc: _Allocator, limits: np.ndarray,
              paused: np.ndarray) -> pd.DataFrame:
    """Per tick: planned IT power, each job's limit (NaN: not capped) and pause flag."""
    sched = pd.DataFrame({"timestamp": times, "planned_it_power_megawatts": p / 1e6})
    for ji, j in enumerate(alloc.jobs):
        top = alloc.tables[ji][0][0]
        lim = np.where(limits[ji] < top, limits[ji], np.nan)
        sched[f"power_limit_w[{j.name}]"] = np.where(paused[ji], np.nan, lim)
        sched[f"paused[{j.name}]"] = paused[ji]
    return sched


def _lost_training(alloc: _Allocator, cv: dict, limits: np.ndarray, paused: np.ndarray,
                   alive: np.ndarray, share: pd.Series,
                   tick_s: float) -> tuple[np.ndarray, float]:
    """Planned lost training [GPU-h] (curve mean, upper and lower band; each job weighted
    by its share of time training over the draws) and, of it, restarts of paused jobs."""
    lost = np.zeros(3)
    restart_gh = 0.0
    for ji, j in enumerate(alloc.jobs):
        c = cv[j.name]
        lim = limits[ji]
        act = ~paused[ji] & (lim < alloc.tables[ji][0][0]) & alive[ji]
        sh = float(share.get(j.name, 1.0))
        if act.any():
            rr = c.relative_rate(np.minimum(j.compute_w, c.power_at_limit(lim[act])))
            for q, col in enumerate(("rate_mean", "rate_upper", "rate_lower")):
                lost[q] += j.gpus * sh * float((1 - rr[col]).sum()) * tick_s / 3600
        lost += j.gpus * (paused[ji] & alive[ji]).sum() * tick_s / 3600
        starts = np.flatnonzero(np.diff(np.concatenate([[0], paused[ji].astype(int)])) == 1)
        restart_gh += len(starts) * j.gpus * (j.startup_s + j.checkpoint_duration_s) / 3600
    return lost + restart_gh, restart_gh


def _simulated_it(scenario: Scenario, base, alloc: _Allocator, cv: dict,
                  limits: np.ndarray, paused: np.ndarray, draws: int, seed: int,
                  tick_s: float) -> np.ndarray:
    """IT power of every draw under the plan [W]: the baseline plus each job's change
    under its limit (interpolated between forecasts at a 50-W grid of limits) or paused,
    all on the same seed."""
    it = base.it_w.copy()
    for ji, j in enumerate(alloc.jobs):
        lims_tab = alloc.tables[ji][0]
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


def _target_results(f: pd.DataFrame, g: _Ticks, plan_w: np.ndarray,
                    alloc: _Allocator, cv: dict, limits: np.ndarray, paused: np.ndarray,
                    alive: np.ndarray, response_s: float, averaging_s: float) -> list[dict]:
    """Per target: met share and met, worst overshoot, worst response time, lost
    training, judged on the trailing ``averaging_s`` mean of the simulated power."""
    tick_s = g.tick_s
    tm = _trailing_mean(plan_w, max(1, round(averaging_s / tick_s)))
    rows = []
    for r in f.itertuples():
        i0 = max(0, g.index(r.start_utc, math.floor))
        i1 = min(g.n, g.index(r.end_utc, math.ceil))
        seg = tm[:, i0:i1] - r.cap_w
        ir = min(math.ceil(response_s / tick_s), i1 - i0 - 1)
        over = seg > 1e-6
        met = ~over[:, ir:].any(axis=1)
        last_over = np.where(over.any(axis=1),
                             over.shape[1] - np.argmax(over[:, ::-1], axis=1), 0)
        resp = last_over * tick_s
        lost_t = 0.0
        for ji, jb in enumerate(alloc.jobs):
            rr = job_rate(cv[jb.name], jb, limits[ji, i0:i1])
            lost_t += jb.gpus * float(((1 - np.where(paused[ji, i0:i1], 0.0, rr))
                                       * alive[ji, i0:i1]).sum()) * tick_s / 3600
        rows.append({"start_utc": r.start_utc, "end_utc": r.end_utc,
                     "cap_megawatts": r.cap_w / 1e6, "source": r.source,
                     "met_share": float(met.mean()), "met": bool(met.all()),
                     "worst_overshoot_megawatts": float(seg[:, ir:].max()) / 1e6,
                     "response_time_s": float(resp.max()), "lost_gpu_hours": lost_t})
    return rows


def _ramp_results(reqs: list, plan_w: np.ndarray, b_spec, tick_s: float,
                  r_down: float, r_up: float) -> list[dict]:
    """Per ramp requirement and direction: the plan's violations over all draws (a ramp
    over the limit and over the baseline's own largest ramp in that draw) and the worst
    plan and baseline ramps."""
    ramps = []
    for rq in reqs:
        w = whole_ticks(rq.window_s, tick_s)
        for direction in (("up", "down") if rq.direction == "both" else (rq.direction,)):
            sgn = 1.0 if direction == "up" else -1.0
            viol, worst, worst_b = 0, 0.0, 0.0
            for d in range(len(plan_w)):
                rp = sgn * _ramp_series(plan_w[d], w, rq.window_s)
                rb = sgn * _ramp_series(b_spec[d], w, rq.window_s)
                # the plan violates where its ramp exceeds the limit and everything the
                # site does anyway in that draw (a site over the limit already is not
                # made worse)
                allowed = max(rq.limit_si, float(rb.max())) * (1 + 1e-9)
                bad = rp > allowed
                viol += int(bad.sum())
                worst = max(worst, float(rp.max()))
                worst_b = max(worst_b, float(rb.max()))
            ramps.append({"requirement": rq.name, "direction": direction,
                          "window_s": rq.window_s, "limit": rq.limit, "unit": rq.unit,
                          "plan_rate_it_megawatts_per_min":
                              (r_up if direction == "up" else r_down) * 60 / 1e6,
                          "violations": viol,
                          "worst_plan_ramp": worst / rq.unit_factor,
                          "worst_baseline_ramp": worst_b / rq.unit_factor})
    return ramps
