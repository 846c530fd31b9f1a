"""The curtailment plan's planned site power: the highest trajectory under every cap that
changes no faster than the allowed ramp rates, and each target's throttling lever.

The *planned site power* ``P(t)`` [W, IT] stays under every cap (less the margin) from
the target's start (from its start less three cooling time constants for caps at the
facility boundary) and changes no faster than the allowed rates: a cap reached by going
down at ``r_down`` from the latest moment the target is known (``notice_utc``, plus the
throttling lever's response), and back up at ``r_up`` after it.  It is the lower
envelope of cones ``cap_k + r (t_k - t)`` (two cumulative minima over the tick grid),
limited in its descent from each notice time, so a late notice gives a late response
rather than a too-fast ramp (the passes are repeated under the caps relaxed to what is
reached, so after an unreached cap's end the power rises from where it got to instead of
falling on towards the cap).  No cap is planned below the site's floor (every job
paused): a cap within the margin of it is planned at the floor.

Each target's throttling lever is chosen by its response
(:func:`powerlab.levers.throttle.pick_throttle`: a power cap when the notice leaves time
for it, a clock lock otherwise); a stretch of shed (down, hold, back up) takes the lever
of the targets in it that need the faster one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError
from ..levers.lever import LeverAssumptions
from ..levers.operating import Merit
from ..levers.registry import LEVERS
from ..levers.throttle import pick_throttle
from ..site.scenario import Scenario
from .targets import Targets

__all__ = ["Envelope", "PlanTicks", "PlannedPower", "planned_power", "plan_throttles",
           "tick_grid"]


class PlanTicks(NamedTuple):
    """The plan's tick grid: start, number of ticks, tick, times and PUE per tick."""

    t0: pd.Timestamp
    n: int
    tick_s: float
    times: pd.DatetimeIndex
    pue: np.ndarray
    pue_max: float

    def index(self, t: pd.Timestamp, rounding) -> int:
        """Tick of time ``t`` (``rounding``: :func:`math.floor` or :func:`math.ceil`)."""
        return rounding((t - self.t0).total_seconds() / self.tick_s)


def tick_grid(scenario: Scenario, tick_s: float, draws: int, simulate: bool) -> PlanTicks:
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
    return PlanTicks(t0, n, tick_s, times, pue, float(pue.max()))


def plan_throttles(allowed: tuple) -> tuple[tuple, tuple]:
    """``(allowed, registered)`` throttling levers, in preference (registry) order."""
    registered = tuple(lv for lv in LEVERS.objects() if lv.throttles)
    return tuple(lv for lv in allowed if lv.throttles), registered


@dataclass(frozen=True)
class Envelope:
    """The rules the planned power follows.

    Attributes
    ----------
    rate_down_w_per_s, rate_up_w_per_s : float
        Allowed ramp rates [IT W/s].
    margin_fraction : float
        Planning margin under each cap [-].
    judged_early_s : float
        How long before a target's start its cap must be reached (``averaging_s -
        response_s``: the judged trailing means hold no pre-start power) [s].
    response_s : float
        Stated response: each cap holds from ``start + response_s`` [s].
    assumptions : LeverAssumptions
    allowed : tuple
        The levers the plan may use (objects).
    """

    rate_down_w_per_s: float
    rate_up_w_per_s: float
    margin_fraction: float
    judged_early_s: float
    response_s: float
    assumptions: LeverAssumptions
    allowed: tuple


class PlannedPower(NamedTuple):
    """What :func:`planned_power` plans.

    Attributes
    ----------
    power_w : ndarray
        ``P(t)`` [IT W].
    cap_w : ndarray
        The caps at the targets' boundary per tick [W] (inf: none).
    throttle : ndarray
        The throttling lever's name per tick (object array).
    levers : list of str
        Each target's throttling lever.
    levels : list of tuple
        Each target's planned IT level [W] and whether it is the site's floor.
    """

    power_w: np.ndarray
    cap_w: np.ndarray
    throttle: np.ndarray
    levers: list
    levels: list


def _available_s(row, response_s: float) -> float | None:
    """From a target's notice to ``start + response_s`` [s] (None: known in advance)."""
    if pd.isna(row.notice_utc):
        return None
    return (row.start_utc - row.notice_utc).total_seconds() + response_s


def _passes(env: np.ndarray, up: float, dn: float) -> np.ndarray:
    """Under ``env``, rising at most ``up`` and falling at most ``dn`` per tick."""
    k = np.arange(len(env), dtype=float)
    q = up * k + np.minimum.accumulate(env - up * k)       # under env, rising <= r_up
    return np.maximum(q, -dn * k + np.maximum.accumulate(q + dn * k))  # falls <= r_down


def planned_power(targets: Targets, site, g: PlanTicks, merit: Merit, rules: Envelope
                  ) -> PlannedPower:
    """The planned site power ``P(t)`` (module docstring), the caps per tick, the
    throttling lever per tick and per target, and each target's planned IT level (cap
    less the margin, at least the site's floor) [W]."""
    allowed, registered = plan_throttles(rules.allowed)
    levers = [pick_throttle(allowed, registered, _available_s(r, rules.response_s),
                            rules.assumptions) if registered else None
              for r in targets.frame.itertuples()]
    env = np.full(g.n, merit.full_w)
    cap_w = np.full(g.n, np.inf)
    default = (allowed or registered or (None,))[0]
    marked, levels = [], []
    for r, thr in zip(targets.frame.itertuples(), levers):
        span = _cone(env, cap_w, r, thr, targets.boundary, site, g, merit, rules)
        levels.append(span[2])
        if span[0] is not None and thr is not default:
            marked.append((span[0], span[1], thr))
    # down-ramp allowed only from each notice: before a target's notice its cone is absent
    # (handled above); forward passes: rise at most r_up, fall at most r_down
    up, dn = rules.rate_up_w_per_s * g.tick_s, rules.rate_down_w_per_s * g.tick_s
    p = _passes(env, up, dn)
    # where a late notice leaves a cap unreached the fall limit lifts p over env; the
    # rise cone from the unreached cap would still pull p down after the target's end.
    # Relaxing the caps to what is reached (env2 = max(env, p), p itself is feasible
    # under it) gives p2 >= p, equal where caps are unreached, under every cap where p
    # was, and never falling after a target's end for that target.
    p = _passes(np.maximum(env, p), up, dn)
    p = np.minimum(p, merit.full_w)
    thr_tick = _throttle_per_tick(p, merit.full_w, default, marked, registered)
    return PlannedPower(p, cap_w, thr_tick, [lv.name if lv else "none" for lv in levers],
                        levels)


def _cone(env: np.ndarray, cap_w: np.ndarray, r, thr, boundary: str, site, g: PlanTicks,
          merit: Merit, rules: Envelope) -> tuple:
    """Lower ``env`` (in place) to one target's cap and the cone down to it from its
    notice, and record the cap in ``cap_w``; returns ``(i0, i1, (level, at_floor))``, the
    target's ticks in the horizon (None: none) and its planned IT level [W]."""
    i0, i1 = g.index(r.start_utc, math.floor), g.index(r.end_utc, math.ceil)
    i0c, i1c = max(i0, 0), min(i1, g.n)
    if i1c <= i0c:
        return None, None, (np.nan, False)
    cap_w[i0c:i1c] = np.minimum(cap_w[i0c:i1c], r.cap_w)
    floor_w = merit.const + float(merit.job_idle_w.sum())
    c = r.cap_w * (1 - rules.margin_fraction)
    if boundary == "facility":
        c = (c - site.base_load_w) / g.pue_max
    # never below what the levers can reach (every job paused: the site's floor); a
    # cap within the margin of the floor is planned at the floor, margin not kept
    level = (max(c, floor_w), bool(c < floor_w))
    c = max(c, floor_w)
    # at the cap early enough that the trailing mean judged from start + response
    # holds no pre-start power (and, for facility caps, the cooling has followed)
    lead = 3 * site.cooling_time_constant_s if boundary == "facility" else 0.0
    early = lead + max(0.0, rules.judged_early_s)
    tick_s, r_down = g.tick_s, rules.rate_down_w_per_s
    delay = thr.response_s(rules.assumptions) if thr is not None else 0.0
    # never acted on before it is known, and the lever takes its response to act
    ni = 0 if pd.isna(r.notice_utc) else max(0, math.ceil(
        ((r.notice_utc - g.t0).total_seconds() + delay) / tick_s))
    j0 = min(max(0, i0 - round(early / tick_s), ni), i1c)
    env[j0:i1c] = np.minimum(env[j0:i1c], c)
    k_span = math.ceil(max(merit.full_w - c, 0) / (r_down * tick_s)) + 1
    a0 = max(ni, j0 - k_span, 0)
    if a0 < j0:
        k = np.arange(a0, j0)
        env[a0:j0] = np.minimum(env[a0:j0], c + r_down * tick_s * (j0 - k))
    return i0c, i1c, level


def _throttle_per_tick(p: np.ndarray, full_w: float, default, marked: list,
                       registered: tuple) -> np.ndarray:
    """The throttling lever per tick: ``default``, except in a stretch of shed (down,
    hold, back up) holding a target of another lever (of several, the latest in
    preference order: the fastest)."""
    thr = np.full(len(p), default.name if default is not None else "", object)
    if marked:
        below = np.concatenate([[0], (p < full_w - 1e-6).astype(np.int8), [0]])
        d = np.diff(below)
        for s, e in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
            hit = [lv for i0, i1, lv in marked if i0 < e and s < i1]
            if hit:
                thr[s:e] = max(hit, key=registered.index).name
    return thr
