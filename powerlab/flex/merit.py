"""The merit order of the curtailment levers: a planned site shed split over shifted job
starts, the site battery, per-job power caps or clock locks, and pauses, at least lost
training.

The planned shed ``S(t) = P_full - P(t)`` [IT W] (:mod:`powerlab.flex.plan`) is covered
in this order, the rule being *marginal lost training per MW shed* (levers costing no
step rate first):

1. ``shift_start`` (no step rate lost; the wait is reported as *delayed* GPU-hours,
   apart from lost ones): a job whose start falls inside a *shed stretch* (a run of
   ticks with ``S > 0``: a target with its ramp down and back up) is held until the
   stretch ends, if that wait is at most ``shift_max_hold_s`` (1 h; a scheduler holds
   a job through a grid event, it does not re-plan the day: a longer wait is no shift,
   the job starts on time and is capped).  Several held jobs start in file order, each
   ``ceil(step_j / r_up)`` after the previous one, ``step_j`` its training power above
   idle and ``r_up`` the allowed up rate (a stagger, so that held starts do not pile up
   into one step).
   A held job, like a job not yet started or already ended, draws idle power: its
   training power above idle sheds by itself.
2. ``storage`` (no step rate lost): the battery (``mitigations.battery``) covers the
   highest part of what remains, by *water filling*:
   ``B(t) = min(P_max, max(N(t) - g, 0))`` at the lowest level ``g`` whose energy fits
   the energy above the battery's minimum state of charge, ``(initial_soc_fraction -
   soc_min_fraction) x energy``.  For a cost convex in the shed this is the least lost
   training for the energy; with energy enough ``g = 0``: the battery carries the
   whole shed, down and back up, and no GPU slows (the grid still sees the allowed
   ramps, the GPUs return to full power at once).  The state of charge is tracked tick
   by tick and falls by exactly the energy discharged (the engine's convention:
   ``round_trip_efficiency`` applies to charging; the plan does not recharge, the
   energy to restore is reported as ``discharged / efficiency``).
3. ``power_cap`` or ``clock_lock``: the rest is split over the running jobs in 5-W
   notches of their power limit, each ranked by lost step rate per watt (the job's
   power-throughput curve: the marginal cost).  A clock lock reaches the same operating
   point (the curve's SM clock at the capped power, ``clock_at_power``) with a faster
   response; the lever is chosen per target by its response: the time from the moment
   the target is known to ``start + response_s`` (unbounded for a target known in
   advance: the plan goes down before the start).  ``power_cap`` where that time is at
   least ``power_cap_response_s`` (a cap bounds the power, a lock only the clock),
   otherwise ``clock_lock`` (``clock_lock_response_s``; when even that does not fit the
   plan still uses it, and the late response is reported).
4. ``pause`` (after an on-demand checkpoint: 100 % of the job's step rate, plus its
   start-up and checkpoint when it restarts): for each run of ticks needing GPU shed,
   every subset of the running jobs (greedy prefixes by pause cost per watt beyond 6
   jobs) is tried as paused, over the whole run or over the span where capping alone
   falls short (from a checkpoint before); the feasible choice of least lost training
   wins, so a pause is used where capping cannot reach the shed, or where it is cheaper
   (a long hold on a small job).  Into and out of a pause the job's limit glides
   between its top and its minimum at the allowed ramp rates, so that the pause is only
   the step from the minimum limit's power to idle (that glide's cost is counted in the
   lost training, not in the choice).  That step is not small for a large job (2.05 MW
   of IT power for the bundled 16,384-GPU job, 200 W to idle per GPU) and can exceed the
   allowed ramp rate: the plan reports it (:mod:`powerlab.flex.planramps`,
   ``lever_ramp_over_plan_rate``) and does not hide it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError
from ..site.scenario import Scenario
from .levers import job_power_w, job_rate, site_constant_w

__all__ = ["LeverSchedule", "Merit", "shift_starts", "storage_dispatch"]

NOTCH_W = 5.0
EXHAUSTIVE_JOBS = 6


class JobTable(NamedTuple):
    """One job's operating points, from its top limit down in 5-W notches."""

    limits_w: np.ndarray      # [W] per GPU, descending
    power_w: np.ndarray       # the job's power (all GPUs) [W]
    rate: np.ndarray          # gpus x relative step rate x share training [GPUs]


class Allocator:
    """Shed -> power limits of the member jobs at least lost step rate (5-W notches)."""

    def __init__(self, tables: list[JobTable], members: tuple[int, ...]):
        notches = []
        for ji in members:
            _, p, r = tables[ji]
            dp, dr = -np.diff(p), -np.diff(r)
            ratio = np.where(dp > 0, dr / np.maximum(dp, 1e-9), np.inf)
            # a notch is taken only after the job's earlier notches: keep order by a
            # running maximum of the ratio (convex hull in the greedy sense)
            ratio = np.maximum.accumulate(ratio)
            notches += [(ratio[i], ji, i + 1, dp[i], dr[i]) for i in range(len(dp))]
        notches.sort(key=lambda t: (t[0], t[1], t[2]))
        self.n_jobs = len(tables)
        self.tops = np.array([t.limits_w[0] for t in tables])
        self.tables = tables
        self.cum = np.concatenate([[0.0], np.cumsum([n[3] for n in notches])])
        self.cost = np.concatenate([[0.0], np.cumsum([n[4] for n in notches])])
        self.max_w = float(self.cum[-1])
        idx = np.zeros((len(notches) + 1, len(tables)), np.int64)
        for k, (_, ji, i, _, _) in enumerate(notches):
            idx[k + 1] = idx[k]
            idx[k + 1, ji] = i
        self.idx = idx

    def _k(self, shed_w: np.ndarray) -> np.ndarray:
        k = np.searchsorted(self.cum, np.asarray(shed_w) - 1e-6, side="left")
        return np.minimum(k, len(self.cum) - 1)

    def cost_at(self, shed_w: np.ndarray) -> np.ndarray:
        """GPUs' worth of step rate lost for each shed [GPUs]."""
        return self.cost[self._k(shed_w)]

    def limits(self, shed_w: np.ndarray) -> np.ndarray:
        """Per-job limit for each shed (non-members at their top) [W]."""
        k = self._k(shed_w)
        out = np.repeat(self.tops[:, None], len(k), axis=1)
        for ji, t in enumerate(self.tables):
            out[ji] = t.limits_w[self.idx[k, ji]]
        return out


class Merit:
    """The jobs' operating-point tables and allocators over subsets of them."""

    def __init__(self, scenario: Scenario, curves: dict, share=None):
        self.jobs = list(scenario.jobs)
        if len(self.jobs) > 60:
            raise PowerlabError(f"the planner handles up to 60 jobs, the scenario has "
                                f"{len(self.jobs)}")
        self.curves = curves
        self.const = site_constant_w(scenario)
        self.idle_w = float(scenario.hardware.gpu_idle_w)
        self.tables = []
        for j in self.jobs:
            c = curves[j.name]
            top = min(c.max_limit_w, max(c.min_limit_w, math.ceil(
                c.binding_limit_w * j.compute_w / c.p_ref_w)))
            lims = np.arange(top, c.min_limit_w - 1e-9, -NOTCH_W)
            # the step rate lost counts while the job trains: weighted by its share of
            # time training (as the plan's lost GPU-hours are)
            sh = 1.0 if share is None else float(share.get(j.name, 1.0))
            self.tables.append(JobTable(lims, job_power_w(j, c, lims) * j.gpus,
                                        job_rate(c, j, lims) * j.gpus * sh))
        self.job_full_w = np.array([t.power_w[0] for t in self.tables])
        self.job_idle_w = np.array([j.gpus * self.idle_w for j in self.jobs])
        self.full_w = self.const + float(self.job_full_w.sum())
        self.cap_floor_w = self.const + sum(t.power_w[-1] for t in self.tables)
        self._alloc: dict[int, Allocator] = {}

    def alloc(self, mask: int) -> Allocator:
        """The allocator over the jobs whose bit is set in ``mask`` (cached)."""
        a = self._alloc.get(mask)
        if a is None:
            members = tuple(i for i in range(len(self.jobs)) if mask >> i & 1)
            a = self._alloc[mask] = Allocator(self.tables, members)
        return a

    def caps(self, need_w: np.ndarray, masks: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
        """Per tick: whether the member jobs' caps reach ``need_w``, and the GPUs' worth
        of step rate they lose doing it."""
        feas = np.empty(len(need_w), bool)
        cost = np.empty(len(need_w))
        for mk in np.unique(masks):
            sel = masks == mk
            a = self.alloc(int(mk))
            feas[sel] = need_w[sel] <= a.max_w + 1e-6
            cost[sel] = a.cost_at(need_w[sel])
        return feas, cost

    def limits(self, need_w: np.ndarray, masks: np.ndarray) -> np.ndarray:
        out = np.repeat(np.array([t.limits_w[0] for t in self.tables])[:, None],
                        len(need_w), axis=1)
        for mk in np.unique(masks):
            sel = masks == mk
            if mk:
                out[:, sel] = self.alloc(int(mk)).limits(need_w[sel])
        return out


@dataclass
class LeverSchedule:
    """The levers chosen per tick.

    Attributes
    ----------
    limits_w : ndarray
        (jobs, ticks) per-GPU power limit (the job's top: not throttled) [W].
    throttle : ndarray
        (ticks,) ``"power_cap"`` or ``"clock_lock"``: which lever applies the limits.
    paused, held, alive : ndarray
        (jobs, ticks) bool: paused; waiting for its shifted start; holding its GPUs.
    starts_utc : dict
        Shifted jobs' new start (job name -> timestamp).
    storage_w : ndarray
        (ticks,) battery output at the targets' boundary (positive: discharge) [W].
    soc_fraction : ndarray
        (ticks,) battery state of charge after each tick [-] (NaN: no battery).
    shed_w : dict
        Planned shed per lever (``shift_start, storage, power_cap, clock_lock, pause``),
        (ticks,) [IT W].
    """

    limits_w: np.ndarray
    throttle: np.ndarray
    paused: np.ndarray
    held: np.ndarray
    alive: np.ndarray
    starts_utc: dict = field(default_factory=dict)
    storage_w: np.ndarray | None = None
    soc_fraction: np.ndarray | None = None
    shed_w: dict = field(default_factory=dict)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` of the runs of True."""
    d = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    s = np.flatnonzero(d == 1)
    return list(zip(s, np.flatnonzero(d == -1)))


def shift_starts(start_idx: np.ndarray, shed_w: np.ndarray, step_w: np.ndarray,
                 r_up_w_per_s: float, tick_s: float, max_hold_s: float = math.inf
                 ) -> np.ndarray:
    """New start tick of each job (its own when not shifted).

    A job whose start tick falls in a run of ``shed_w > 0`` starts when the run ends;
    jobs held to the same moment start in order, each ``ceil(step_j / (r_up tick))``
    ticks after the previous (``step_j``: its training power above idle [W]); a start
    pushed into a later run waits for that one too.  A job whose wait would exceed
    ``max_hold_s`` [s] is not held (it starts on time).
    """
    n = len(shed_w)
    run_end = np.full(n, -1, np.int64)
    for a, b in _runs(shed_w > 1e-6):
        run_end[a:b] = b
    out = np.array(start_idx, np.int64)
    taken: list[tuple[int, int]] = []     # (start, gap) of held jobs already placed
    for j, s in enumerate(start_idx):
        if not 0 <= s < n or run_end[s] < 0:
            continue
        t = int(run_end[s])
        moved = True
        while moved:
            moved = False
            if t < n and run_end[t] >= 0:
                t, moved = int(run_end[t]), True
            for s0, gap in taken:
                if s0 <= t < s0 + gap:
                    t, moved = s0 + gap, True
        if (t - s) * tick_s > max_hold_s:
            continue
        out[j] = t
        taken.append((t, max(1, math.ceil(step_w[j] / max(r_up_w_per_s * tick_s, 1e-9)))))
    return out


def storage_dispatch(need_w: np.ndarray, tick_s: float, battery
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Battery output covering the top of ``need_w`` (water filling) and its state of
    charge.

    Parameters
    ----------
    need_w : ndarray
        Shed still needed per tick, at the battery's boundary [W].
    tick_s : float
        Tick [s].
    battery : powerlab.site.scenario.Battery

    Returns
    -------
    storage_w : ndarray
        ``min(P_max, max(need - g, 0))`` at the least level ``g`` whose energy fits
        ``(initial_soc_fraction - soc_min_fraction) x energy`` [W].
    soc_j : ndarray
        State of charge after each tick: the initial one less the energy discharged
        so far [J]; never below the minimum.
    """
    need = np.maximum(np.asarray(need_w, float), 0.0)
    p_max = battery.power_megawatts * 1e6
    cap_j = battery.energy_megawatt_hours * 3.6e9
    soc0 = battery.initial_soc_fraction * cap_j
    avail = max(soc0 - getattr(battery, "soc_min_fraction", 0.0) * cap_j, 0.0)

    def energy(g: float) -> float:
        return float(np.minimum(p_max, np.maximum(need - g, 0.0)).sum()) * tick_s

    g = 0.0
    if energy(0.0) > avail:
        lo, hi = 0.0, float(need.max())
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if energy(mid) > avail else (lo, mid)
        g = hi
    out = np.minimum(p_max, np.maximum(need - g, 0.0))
    soc = soc0 - np.cumsum(out) * tick_s
    # never below the minimum: the level's bisection keeps the energy within it, so
    # this only removes rounding (1e-15 of the capacity)
    return out, np.maximum(soc, soc0 - avail)


def _pause_choice(merit: Merit, need: np.ndarray, alive: np.ndarray, a: int, b: int,
                  lead: int, restart_gpu_ticks: np.ndarray, capping: bool = True):
    """The least-cost pause set and span for the run ``[a, b)`` of needed GPU shed:
    ``(jobs, (s0, s1))`` or ``((), None)`` for caps alone."""
    jobs_n = alive.shape[0]
    bits = (alive[:, a:b] * (1 << np.arange(jobs_n))[:, None]).sum(axis=0)
    if not capping:
        bits = np.zeros_like(bits)
    seg = need[a:b]
    feas0, cost0 = merit.caps(seg, bits)
    best = (float(cost0.sum()), (), None) if feas0.all() else (math.inf, (), None)
    present = [j for j in range(jobs_n) if alive[j, a:b].any()]
    pause_w = merit.job_full_w - merit.job_idle_w
    if len(present) <= EXHAUSTIVE_JOBS:
        subsets = [c for k in range(1, len(present) + 1)
                   for c in itertools.combinations(present, k)]
    else:
        order = sorted(present, key=lambda j: merit.jobs[j].gpus / max(pause_w[j], 1e-9))
        subsets = [tuple(order[:k]) for k in range(1, len(order) + 1)]
    spans = [(a, b)]
    if not feas0.all():
        bad = np.flatnonzero(~feas0)
        spans.append((max(0, a + int(bad[0]) - lead), a + int(bad[-1]) + 1))
    for q in subsets:
        qmask = sum(1 << j for j in q)
        for s0, s1 in spans:
            lo, hi = s0 - a, s1 - a          # may start before the run (lead)
            in_q = np.zeros(b - a, bool)
            in_q[max(lo, 0):hi] = True
            pw = sum(pause_w[j] * alive[j, a:b] for j in q)
            nd = np.where(in_q, np.maximum(seg - pw, 0.0), seg)
            mk = np.where(in_q, bits & ~qmask, bits)
            feas, cost = merit.caps(nd, mk)
            if not feas.all():
                continue
            c = float(cost.sum())
            for j in q:
                c += merit.jobs[j].gpus * float(alive[j, max(s0, 0):s1].sum())
                c += restart_gpu_ticks[j]
            if c < best[0] - 1e-9:
                best = (c, q, (s0, s1))
    if math.isinf(best[0]):               # nothing reaches it: pause all, best effort
        return tuple(present), (max(0, a - lead), b)
    return best[1], best[2]


def _glide(merit: Merit, limits: np.ndarray, paused: np.ndarray, tick_s: float,
           r_down: float, r_up: float) -> None:
    """Into and out of each pause, the job's limit glides between its top and its
    minimum at the allowed rates (in place), so that the pause itself is a step of only
    ``gpus x (power at the minimum limit - idle)`` down and back up."""
    n = limits.shape[1]
    for ji, t in enumerate(merit.tables):
        top, lo = t.limits_w[0], t.limits_w[-1]
        span_w = t.power_w[0] - t.power_w[-1]
        kd = max(1, math.ceil(span_w / max(r_down * tick_s, 1e-9)))
        ku = max(1, math.ceil(span_w / max(r_up * tick_s, 1e-9)))
        for s0, s1 in _runs(paused[ji]):
            a0 = max(0, s0 - kd)
            k = np.arange(a0, s0)
            gl = top - (top - lo) * (k - (s0 - kd) + 1) / kd
            limits[ji, a0:s0] = np.minimum(limits[ji, a0:s0], np.round(gl))
            b1 = min(n, s1 + ku)
            k = np.arange(s1, b1)
            gl = lo + (top - lo) * (k - s1) / ku
            limits[ji, s1:b1] = np.minimum(limits[ji, s1:b1], np.round(gl))


def allocate(merit: Merit, shed_w: np.ndarray, times: pd.DatetimeIndex, tick_s: float,
             *, clock: np.ndarray, r_up_w_per_s: float, levers: tuple[str, ...],
             battery=None, conv: float = 1.0, r_down_w_per_s: float | None = None,
             max_hold_s: float = math.inf) -> LeverSchedule:
    """Split a planned site shed over the levers in merit order (module docstring).

    Parameters
    ----------
    merit : Merit
    shed_w : ndarray
        Planned shed ``P_full - P(t)`` per tick [IT W].
    times : pandas.DatetimeIndex
        The ticks.
    tick_s : float
        [s]
    clock : ndarray
        Per tick, True where the throttling lever must be a clock lock.
    r_up_w_per_s, r_down_w_per_s : float
        Allowed up and down rates (staggering held starts; the glide of a paused job's
        limit into and out of its pause) [IT W/s]; ``r_down`` defaults to ``r_up``.
    levers : tuple of str
        The levers allowed (of :data:`~powerlab.flex.levers.LEVERS`).
    battery : Battery, optional
        The site battery (``storage``).
    conv : float
        Boundary watts per IT watt of shed (the highest PUE at the facility boundary) [-].
    max_hold_s : float
        Longest hold of a shifted start [s].
    """
    jobs = merit.jobs
    n = len(shed_w)
    t0 = times[0]
    idx = np.array([math.floor((j.start_utc - t0).total_seconds() / tick_s) for j in jobs],
                   np.int64)
    dur = np.array([math.ceil(j.duration_s / tick_s) for j in jobs], np.int64)
    k = np.arange(n)
    starts = (shift_starts(idx, shed_w, merit.job_full_w - merit.job_idle_w,
                           r_up_w_per_s, tick_s, max_hold_s) if "shift_start" in levers and jobs
              else idx)
    alive = np.array([(k >= s) & (k < s + d) for s, d in zip(starts, dur)]).reshape(
        len(jobs), n)
    held = np.array([(k >= s0) & (k < s) for s0, s in zip(idx, starts)]).reshape(
        len(jobs), n)
    step_w = merit.job_full_w - merit.job_idle_w
    idle_shed = ((~alive) * step_w[:, None]).sum(axis=0)
    need = np.maximum(shed_w - idle_shed, 0.0)
    # storage: the top of what remains
    storage_w = soc = None
    if battery is not None and "storage" in levers:
        storage_w, soc_j = storage_dispatch(need * conv, tick_s, battery)
        need = np.maximum(need - storage_w / conv, 0.0)
        soc = soc_j / (battery.energy_megawatt_hours * 3.6e9)
    # pauses per run of GPU shed, then caps (or clock locks) on the running jobs
    paused = np.zeros((len(jobs), n), bool)
    throttling = "power_cap" in levers or "clock_lock" in levers
    bitw = (1 << np.arange(len(jobs)))[:, None]
    if "pause" in levers:
        lead = round(max((j.checkpoint_duration_s for j in jobs), default=0.0) / tick_s)
        restart = np.array([j.gpus * (j.startup_s + j.checkpoint_duration_s) / tick_s
                            for j in jobs])
        for a, b in _runs(need > 1e-6):
            q, span = _pause_choice(merit, need, alive, a, b, lead, restart, throttling)
            if span is not None:
                for j in q:
                    paused[j, span[0]:span[1]] = True
    run = alive & ~paused
    pause_shed = ((paused & alive) * step_w[:, None]).sum(axis=0)
    cap_need = np.maximum(need - pause_shed, 0.0)
    masks = ((run if throttling else np.zeros_like(run)) * bitw).sum(axis=0)
    limits = merit.limits(np.where(masks > 0, cap_need, 0.0), masks)
    if throttling and paused.any():
        _glide(merit, limits, paused, tick_s, r_down_w_per_s or r_up_w_per_s,
               r_up_w_per_s)
    tops = np.array([t.limits_w[0] for t in merit.tables])
    # planned shed per lever [IT W]
    cap_shed = np.zeros(n)
    for ji, t in enumerate(merit.tables):
        pj = np.interp(-limits[ji], -t.limits_w, t.power_w)
        cap_shed += np.where(run[ji] & (limits[ji] < tops[ji]), t.power_w[0] - pj, 0.0)
    allowed = [x for x in ("power_cap", "clock_lock") if x in levers]
    if allowed == ["power_cap"]:
        thr = np.full(n, "power_cap", object)
    elif allowed == ["clock_lock"]:
        thr = np.full(n, "clock_lock", object)
    else:
        thr = np.where(clock, "clock_lock", "power_cap").astype(object)
    shed = {"shift_start": (held * step_w[:, None]).sum(axis=0),
            "storage": np.zeros(n) if storage_w is None else storage_w / conv,
            "power_cap": np.where(thr == "power_cap", cap_shed, 0.0),
            "clock_lock": np.where(thr == "clock_lock", cap_shed, 0.0),
            "pause": pause_shed}
    new = {jobs[j].name: t0 + pd.Timedelta(seconds=float(starts[j]) * tick_s)
           for j in range(len(jobs)) if starts[j] != idx[j]}
    return LeverSchedule(limits, thr, paused, held, alive, new,
                         storage_w if storage_w is not None else np.zeros(n),
                         soc if soc is not None else np.full(n, np.nan), shed)
