"""The pause lever: a job checkpoints on demand, then its GPUs idle; it restarts after.

A pause sheds the job's whole training power above idle (100 % of its step rate), plus,
when it restarts, its start-up and the checkpoint (:func:`~powerlab.levers.jobs.restart_risk`:
the chance it fails while starting).  In the plan it is the last lever in merit order
but decides before the caps: for each run of ticks needing GPU shed, every subset of the
running jobs (greedy prefixes by pause cost per watt beyond :data:`EXHAUSTIVE_JOBS`) is
tried as paused, over the whole run or over the span where capping alone falls short
(from a checkpoint before); the feasible choice of least lost training wins
(:func:`pause_choice`), so a pause is used where capping cannot reach the shed, or where
it is cheaper (a long hold on a small job).  Into and out of a pause the job's limit
glides between its top and its minimum (:func:`powerlab.levers.throttle.glide`), so that
the pause is only the step from the minimum limit's power to idle.  That step is not
small for a large job (2.05 MW of IT power for the bundled 16,384-GPU job, 200 W to idle
per GPU) and can exceed the allowed ramp rate: the plan reports it
(:mod:`powerlab.flex.planramps`, ``lever_ramp_over_plan_rate``) and does not hide it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..site.engine import forecast
from .jobs import paused_scenario, restart_risk
from .lever import CurtailmentLever, LeverAssumptions, LeverCost, OfferContext, OfferRow
from .operating import Merit, runs
from .registry import register_lever

__all__ = ["EXHAUSTIVE_JOBS", "Pause", "pause_choice"]

#: Up to this many running jobs every subset is tried as paused; beyond, greedy prefixes.
EXHAUSTIVE_JOBS = 6


def pause_choice(merit: Merit, need: np.ndarray, alive: np.ndarray, a: int, b: int,
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


@register_lever
class Pause(CurtailmentLever):
    """Pause: the job checkpoints on demand, then idles (``paused[JOB]``)."""

    name = "pause"
    offer_order = 30
    merit_order = 5
    plan_phase = 3
    hardware = "jobs that checkpoint on demand (a scheduler that can suspend them)"

    def response_s(self, assumptions: LeverAssumptions) -> float:
        """After the on-demand checkpoint, until the GPUs idle [s]."""
        return assumptions.pause_drain_s

    def response_text(self, assumptions: LeverAssumptions) -> str:
        return f"pause = on-demand checkpoint + {assumptions.pause_drain_s:g} s"

    def offer_rows(self, offer: OfferContext, members: tuple) -> list[OfferRow]:
        """Every job checkpoints on demand, then idles."""
        sc = offer.scenario
        ck = max(j.checkpoint_duration_s for j in sc.jobs)
        return [OfferRow.of(
            self.name, offer.shed_of(paused_scenario(sc)),
            ramp_time_s=ck + self.response_s(offer.assumptions),
            hold_max_s=offer.hold_max_s, step_rate_loss_pct=100.0,
            step_rate_loss_pct_lower=100.0, step_rate_loss_pct_upper=100.0,
            lost_gpu_hours_per_hour=float(sum(j.gpus for j in sc.jobs)),
            restart_gpu_hours=float(sum(j.gpus * (j.startup_s + j.checkpoint_duration_s)
                                        for j in sc.jobs) / 3600.0),
            extra_checkpoint_writes=len(sc.jobs),
            restart_risk_probability=float(1 - np.prod([1 - restart_risk(j)
                                                        for j in sc.jobs])),
            note="every job checkpoints on demand, then idles; restart costs start-up")]

    def allocate(self, state, members: tuple) -> None:
        """Pause where capping cannot reach the shed or costs more (module docstring)."""
        merit, tick_s = state.merit, state.context.tick_s
        jobs = merit.jobs
        lead = round(max((j.checkpoint_duration_s for j in jobs), default=0.0) / tick_s)
        restart = np.array([j.gpus * (j.startup_s + j.checkpoint_duration_s) / tick_s
                            for j in jobs])
        for a, b in runs(state.need > 1e-6):
            q, span = pause_choice(merit, state.need, state.alive, a, b, lead, restart,
                                   state.throttling)
            if span is not None:
                for j in q:
                    state.paused[j, span[0]:span[1]] = True
        pause_shed = ((state.paused & state.alive) * state.step_w[:, None]).sum(axis=0)
        state.shed[self.name] = pause_shed
        state.need = np.maximum(state.need - pause_shed, 0.0)

    def job_ticks(self, merit, ls, ji: int) -> np.ndarray:
        return ls.paused[ji] & ls.alive[ji]

    def schedule_columns(self, merit, ls, ji: int, lever_col: np.ndarray) -> dict:
        """``paused[JOB]``: whether the job is paused (bool)."""
        return {f"paused[{merit.jobs[ji].name}]": ls.paused[ji]}

    def cost(self, merit, ls, share, tick_s: float) -> LeverCost:
        """The whole step rate while paused, and each restart's start-up and checkpoint
        [GPU-h]."""
        n = ls.limits_w.shape[1]
        band = np.zeros(3)
        per_tick = np.zeros(n)
        restart_gh = 0.0
        for ji, j in enumerate(merit.jobs):
            pz = ls.paused[ji] & ls.alive[ji]
            band += j.gpus * pz.sum() * tick_s / 3600
            per_tick += j.gpus * pz * tick_s / 3600
            starts = np.flatnonzero(np.diff(np.concatenate([[0],
                                                            ls.paused[ji].astype(int)])) == 1)
            rs = j.gpus * (j.startup_s + j.checkpoint_duration_s) / 3600
            restart_gh += len(starts) * rs
            per_tick[starts] += rs
        return LeverCost(per_tick, band, restart_gh)

    def simulate(self, sim, ji: int, it: np.ndarray) -> None:
        """Add job ``ji``'s change while paused (its GPUs idle) to ``it``."""
        paused = sim.schedule.paused[ji]
        if paused.any():
            sc = paused_scenario(sim.scenario, {sim.merit.jobs[ji].name})
            dlt = forecast(sc, draws=sim.draws, seed=sim.seed, tick_s=sim.tick_s).it_w \
                - sim.base.it_w
            it += paused * dlt
