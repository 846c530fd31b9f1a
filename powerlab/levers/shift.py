"""The shifted-start lever: a job that would start during a curtailment waits until it
ends.

A job whose start falls inside a *shed stretch* (a run of ticks with planned shed: a
target with its ramp down and back up) is held until the stretch ends, if that wait is
at most ``shift_max_hold_s`` (1 h; a scheduler holds a job through a grid event, it does
not re-plan the day: a longer wait is no shift, the job starts on time and is capped).
Several held jobs start in file order, each ``ceil(step_j / r_up)`` after the previous
one, ``step_j`` its training power above idle and ``r_up`` the allowed up rate (a
stagger, so that held starts do not pile up into one step).  A held job, like a job not
yet started or already ended, draws idle power: its training power above idle sheds by
itself.  No step rate is lost: the wait is reported as *delayed* GPU-hours, apart from
lost ones.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .jobs import paused_scenario
from .lever import CurtailmentLever, LeverCost, OfferContext, OfferRow
from .operating import runs
from .registry import register_lever

__all__ = ["ShiftStart", "shift_starts"]


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
    for a, b in runs(shed_w > 1e-6):
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


@register_lever
class ShiftStart(CurtailmentLever):
    """Shifted start: a job that would start in a curtailment starts after it."""

    name = "shift_start"
    offer_order = 40
    merit_order = 1
    plan_phase = 1
    hardware = "a scheduler that can hold a job's start"

    def offer_rows(self, offer: OfferContext, members: tuple) -> list[OfferRow]:
        """The jobs that would start inside the hold window wait until it ends."""
        w0, w1 = offer.window
        starting = [j for j in offer.scenario.jobs if w0 <= j.start_utc < w1]
        shed = (offer.shed_of(paused_scenario(offer.scenario, {j.name for j in starting}))
                if starting else (0.0, 0.0, 0.0))
        return [OfferRow.of(
            self.name, shed, ramp_time_s=0.0, hold_max_s=(w1 - w0).total_seconds(),
            lost_gpu_hours_per_hour=float(sum(j.gpus for j in starting)),
            note=(f"{len(starting)} job(s) start in the window and wait until it ends"
                  if starting else "no job starts in the window"))]

    def allocate(self, state, members: tuple) -> None:
        """Hold the starts that fall in a shed stretch (:func:`shift_starts`)."""
        ctx = state.context
        if state.merit.jobs:
            state.set_starts(shift_starts(state.idx, state.shed_w, state.step_w,
                                          ctx.rate_up_w_per_s, ctx.tick_s, ctx.max_hold_s))
        state.shed[self.name] = (state.held * state.step_w[:, None]).sum(axis=0)

    def job_ticks(self, merit, ls, ji: int) -> np.ndarray:
        return ls.held[ji]

    def cost(self, merit, ls, share, tick_s: float) -> LeverCost:
        """No training lost; the held GPUs' time is delayed [GPU-h]."""
        n = ls.limits_w.shape[1]
        delayed = (ls.held * np.array([j.gpus for j in merit.jobs])[:, None]).sum(axis=0) \
            * tick_s / 3600 if len(merit.jobs) else np.zeros(n)
        return LeverCost(np.zeros(n), np.zeros(3), 0.0, delayed)

    def simulated_scenario(self, scenario, ls):
        """The scenario with the shifted starts, in the same horizon."""
        if not ls.starts_utc:
            return scenario
        return scenario.replace(
            horizon_start_utc=scenario.start_utc, horizon_end_utc=scenario.end_utc,
            jobs=tuple(dataclasses.replace(j, start_utc=ls.starts_utc.get(j.name,
                                                                          j.start_utc))
                       for j in scenario.jobs))
