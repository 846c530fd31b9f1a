"""The throttling levers: a job slowed through its GPUs' power limit (a power cap, a
clock lock), the family's shared physics.

A power cap and a clock lock reach the same operating points of the job's
power-throughput curve (:mod:`powerlab.levers.curve`): the cap through the GPU's power
controller, the lock through the SM clock at the curve's clock for that power.  They
differ in their response (:class:`~powerlab.levers.lever.LeverAssumptions`), in the
setting they report and in what they bound (a cap bounds the power, a lock only the
clock).  What they share runs once for the family:

- the offer: one forecast per power limit (every job at it), a row per member with the
  step rate the curve loses there (GPU-weighted; mean and band);
- the plan's split of the shed: what remains after shifts, the battery and pauses is
  split over the running jobs in 5-W notches of their power limit, cheapest lost step
  rate per watt first (:class:`~powerlab.levers.operating.Allocator`); into and out of a
  pause the job's limit glides between its top and its minimum at the allowed rates
  (:func:`glide`); each tick's shed goes to that tick's throttling lever;
- the simulation: each job's change under its limit, interpolated between forecasts at
  a 50-W grid of limits (:data:`SIM_GRID_W`), on the baseline's seed.

Lost training is the curve's rate lost while a job runs throttled, weighted by its share
of time training; job power under a limit is planned with the curve's lower rate band
(more compute time per step, more power: the safe side).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, NamedTuple

import numpy as np

from ..site.engine import forecast
from .jobs import capped_scenario, job_rate_frame
from .lever import CurtailmentLever, LeverAssumptions, LeverCost, OfferContext, OfferRow
from .operating import Merit, runs

__all__ = ["SIM_GRID_W", "Throttle", "glide", "pick_throttle"]

#: Grid of power limits the plan's simulation forecasts each job at [W].
SIM_GRID_W = 50.0
#: Offer levels without ``levels_w``: from the GPU's highest limit down in these [W].
OFFER_STEP_W = 50.0


class _OperatingPoint(NamedTuple):
    """Every job at one power limit: step-rate loss [%] (mean, lower, upper; GPU
    weighted), GPUs' worth of rate lost, the curves' SM clocks, extrapolated or not."""

    loss: np.ndarray
    lost: float
    clocks: list
    extrapolated: bool


def _operating_point(scenario, curves, lim: float) -> _OperatingPoint:
    gpus = sum(j.gpus for j in scenario.jobs)
    loss = np.zeros(3)
    lost = 0.0
    clocks = []
    extrapolated = False
    for j in scenario.jobs:
        c = curves[j.name]
        rr = job_rate_frame(c, j, lim).iloc[0]
        p = float(rr["power_w"])
        extrapolated = extrapolated or bool(rr["extrapolated"])
        ls = 100 * (1 - np.array([rr["rate_mean"], rr["rate_upper"], rr["rate_lower"]]))
        loss += ls * j.gpus / gpus
        lost += j.gpus * ls[0] / 100.0
        clocks.append(float(c.clock_at_power(p)))
    return _OperatingPoint(loss, lost, clocks, extrapolated)


def glide(merit: Merit, limits: np.ndarray, paused: np.ndarray, tick_s: float,
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
        for s0, s1 in runs(paused[ji]):
            a0 = max(0, s0 - kd)
            k = np.arange(a0, s0)
            gl = top - (top - lo) * (k - (s0 - kd) + 1) / kd
            limits[ji, a0:s0] = np.minimum(limits[ji, a0:s0], np.round(gl))
            b1 = min(n, s1 + ku)
            k = np.arange(s1, b1)
            gl = lo + (top - lo) * (k - s1) / ku
            limits[ji, s1:b1] = np.minimum(limits[ji, s1:b1], np.round(gl))


def pick_throttle(allowed: Sequence[Throttle], registered: Sequence[Throttle],
                  available_s: float | None, assumptions: LeverAssumptions) -> Throttle:
    """The throttling lever of a target: of the allowed ones in preference (registry)
    order, the first whose response fits the time from the target's notice to ``start +
    response_s`` (``available_s``; None, a target known in advance: the first), else
    the last allowed (the fastest); with none allowed, the last registered one, whose
    timing the plan's descent then follows."""
    if not allowed:
        return registered[-1]
    if available_s is None:
        return allowed[0]
    return next((lv for lv in allowed if available_s >= lv.response_s(assumptions)),
                allowed[-1])


class Throttle(CurtailmentLever):
    """Base of the levers that act through the job's power limit (see the module)."""

    family: ClassVar[str] = "throttle"
    throttles: ClassVar[bool] = True
    plan_phase: ClassVar[float] = 4
    #: The offer's note on its rows.
    offer_note: ClassVar[str] = ""

    # -- the offer ---------------------------------------------------------------------
    def offer_clock_mhz(self, op: _OperatingPoint) -> float:
        """The ``clock_sm_mhz`` of its offer rows (NaN: not a clock setting)."""
        return np.nan

    def offer_rows(self, offer: OfferContext, members: tuple) -> list[OfferRow]:
        """Per power limit (every job at it), a row per member."""
        sc, levels = offer.scenario, offer.levels_w
        if levels is None:
            first = next(iter(offer.curves.values()))
            levels = np.arange(first.max_limit_w, first.min_limit_w - 1e-9, -OFFER_STEP_W)
        rows = []
        for lim in levels:
            shed = offer.shed_of(capped_scenario(sc, {j.name: float(lim) for j in sc.jobs},
                                                 offer.curves))
            op = _operating_point(sc, offer.curves, float(lim))
            note = ("; cost extrapolated below the lowest limit a curve was fitted on "
                    "(a prior: below the lowest power its published sweeps reached)"
                    if op.extrapolated else "")
            rows += [OfferRow.of(m.name, shed, power_limit_w=float(lim),
                                 clock_sm_mhz=m.offer_clock_mhz(op),
                                 ramp_time_s=m.response_s(offer.assumptions),
                                 hold_max_s=offer.hold_max_s, step_rate_loss_pct=op.loss[0],
                                 step_rate_loss_pct_lower=op.loss[1],
                                 step_rate_loss_pct_upper=op.loss[2],
                                 lost_gpu_hours_per_hour=op.lost, note=m.offer_note + note)
                     for m in members]
        return rows

    # -- the plan ----------------------------------------------------------------------
    def allocate(self, state, members: tuple) -> None:
        """Split what remains over the running jobs' limits; each tick's shed goes to
        that tick's throttling lever."""
        merit, ctx = state.merit, state.context
        run = state.alive & ~state.paused
        bitw = (1 << np.arange(len(merit.jobs)))[:, None]
        masks = (run * bitw).sum(axis=0)
        limits = merit.limits(np.where(masks > 0, state.need, 0.0), masks)
        if state.paused.any():
            glide(merit, limits, state.paused, ctx.tick_s,
                  ctx.rate_down_w_per_s or ctx.rate_up_w_per_s, ctx.rate_up_w_per_s)
        tops = np.array([t.limits_w[0] for t in merit.tables])
        cap_shed = np.zeros(state.n)
        for ji, t in enumerate(merit.tables):
            pj = np.interp(-limits[ji], -t.limits_w, t.power_w)
            cap_shed += np.where(run[ji] & (limits[ji] < tops[ji]), t.power_w[0] - pj, 0.0)
        state.limits = limits
        for m in members:
            state.shed[m.name] = np.where(ctx.throttle == m.name, cap_shed, 0.0)

    def job_ticks(self, merit, ls, ji: int) -> np.ndarray:
        """Running, below its top limit, at ticks whose throttling lever is this one."""
        top = merit.tables[ji].limits_w[0]
        return (ls.alive[ji] & ~ls.paused[ji] & (ls.limits_w[ji] < top)
                & (ls.throttle == self.name))

    def cost(self, merit, ls, share, tick_s: float) -> LeverCost:
        """The curve's step rate lost while throttled (mean and band), weighted by each
        job's share of time training [GPU-h]."""
        n = ls.limits_w.shape[1]
        band = np.zeros(3)
        per_tick = np.zeros(n)
        for ji, j in enumerate(merit.jobs):
            act = self.job_ticks(merit, ls, ji)
            if not act.any():
                continue
            sh = float(share.get(j.name, 1.0))
            rr = job_rate_frame(merit.curves[j.name], j, ls.limits_w[ji][act])
            for q, col in enumerate(("rate_mean", "rate_upper", "rate_lower")):
                band[q] += j.gpus * sh * float((1 - rr[col]).sum()) * tick_s / 3600
            loss = np.zeros(n)
            loss[act] = j.gpus * sh * (1 - rr["rate_mean"].to_numpy()) * tick_s / 3600
            per_tick += loss
        return LeverCost(per_tick, band)

    def lowest_limits(self, merit, ls) -> list[tuple]:
        """``(job, its lowest limit at this lever's ticks)`` of the jobs it throttles [W]."""
        using = set(self.jobs_using(merit, ls))
        return [(j, ls.limits_w[ji][(ls.throttle == self.name) & ls.alive[ji]].min())
                for ji, j in enumerate(merit.jobs) if j.name in using]

    def simulate(self, sim, ji: int, it: np.ndarray) -> None:
        """Add job ``ji``'s change under its limits to ``it`` (every draw): linear
        between forecasts of the job capped at the two grid limits around its limit."""
        merit, ls, j = sim.merit, sim.schedule, sim.merit.jobs[ji]
        lims_tab = merit.tables[ji].limits_w
        lo_lim, hi_lim = lims_tab[-1], lims_tab[0]
        grid = np.unique(np.r_[np.arange(hi_lim, lo_lim, -SIM_GRID_W), lo_lim])[::-1]
        paused = ls.paused[ji]
        lim = np.where(paused, hi_lim, ls.limits_w[ji])
        pos = np.interp(lim, grid[::-1], np.arange(len(grid))[::-1])  # grid descending
        for g in range(1, len(grid)):
            wgt = np.clip(1.0 - np.abs(pos - g), 0.0, 1.0)
            wgt[paused] = 0.0
            if not wgt.any():
                continue
            sc = capped_scenario(sim.scenario, {j.name: float(grid[g])}, sim.curves)
            dlt = forecast(sc, draws=sim.draws, seed=sim.seed, tick_s=sim.tick_s).it_w \
                - sim.base.it_w
            it += wgt * dlt

