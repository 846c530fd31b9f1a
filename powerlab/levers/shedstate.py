"""The state of a planned shed's split over the levers, and its result.

:class:`Allocation` is the split in progress that each lever's step
(:meth:`~powerlab.levers.lever.CurtailmentLever.allocate`) reads and writes;
:class:`LeverSchedule` the levers chosen per tick once every step ran; :class:`ShedContext`
what the steps are given.  The split itself, over the registered levers in merit order, is
:func:`powerlab.levers.allocation.allocate`.  These types know no registry, so the lever
interface (:mod:`powerlab.levers.lever`) can name them without a cycle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .operating import Merit

__all__ = ["Allocation", "LeverSchedule", "ShedContext"]


@dataclass
class LeverSchedule:
    """The levers chosen per tick.

    Attributes
    ----------
    limits_w : ndarray
        (jobs, ticks) per-GPU power limit (the job's top: not throttled) [W].
    throttle : ndarray
        (ticks,) the throttling lever's name (``"power_cap"`` or ``"clock_lock"``): which
        lever applies the limits.
    paused, held, alive : ndarray
        (jobs, ticks) bool: paused; waiting for its shifted start; holding its GPUs.
    starts_utc : dict
        Shifted jobs' new start (job name -> timestamp).
    storage_w : ndarray
        (ticks,) battery output at the targets' boundary (positive: discharge) [W].
    soc_fraction : ndarray
        (ticks,) battery state of charge after each tick [-] (NaN: no battery).
    shed_w : dict
        Planned shed per registered lever (its name), (ticks,) [IT W].
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


@dataclass(frozen=True)
class ShedContext:
    """What the levers' steps know besides the shed.

    Attributes
    ----------
    times : pandas.DatetimeIndex
        The ticks.
    tick_s : float
        [s]
    throttle : ndarray
        Per tick, the throttling lever's name (object array).
    rate_up_w_per_s : float
        Allowed up rate (staggering held starts; the glide out of a pause) [IT W/s].
    rate_down_w_per_s : float or None
        Allowed down rate (the glide into a pause; None: ``rate_up_w_per_s``) [IT W/s].
    conv : float
        Boundary watts per IT watt of shed (the highest PUE at the facility boundary) [-].
    max_hold_s : float
        Longest hold of a shifted start [s].
    equipment : mapping
        What levers dispatch themselves, by lever name (the site battery:
        :meth:`~powerlab.levers.lever.CurtailmentLever.prepare`).
    """

    times: pd.DatetimeIndex
    tick_s: float
    throttle: np.ndarray
    rate_up_w_per_s: float
    rate_down_w_per_s: float | None = None
    conv: float = 1.0
    max_hold_s: float = math.inf
    equipment: Mapping = field(default_factory=dict)


class Allocation:
    """The split in progress, which the levers' steps read and write.

    Attributes
    ----------
    merit : Merit
    context : ShedContext
    shed_w : ndarray
        The planned shed [IT W].
    n : int
        Ticks.
    idx, starts : ndarray
        Each job's start tick as planned, and after the shifted-start step.
    alive, held, paused : ndarray
        (jobs, ticks) bool (see :class:`LeverSchedule`).
    step_w : ndarray
        Each job's training power above idle [W].
    need : ndarray
        Shed still needed per tick [IT W]: the planned shed less what the jobs not
        holding their GPUs shed by themselves and what the steps so far took.
    throttling : bool
        Whether a throttling lever may act (a pause weighs the caps' cost).
    shed : dict
        Shed per lever so far [IT W].
    limits, storage_w, soc_fraction : ndarray or None
        Set by the throttling and storage steps.
    """

    def __init__(self, merit: Merit, shed_w: np.ndarray, context: ShedContext,
                 levers: tuple):
        self.merit, self.context, self.shed_w = merit, context, shed_w
        self.n = n = len(shed_w)
        jobs = merit.jobs
        t0, tick_s = context.times[0], context.tick_s
        self.idx = np.array([math.floor((j.start_utc - t0).total_seconds() / tick_s)
                             for j in jobs], np.int64)
        self.dur = np.array([math.ceil(j.duration_s / tick_s) for j in jobs], np.int64)
        self.step_w = merit.job_full_w - merit.job_idle_w
        self.paused = np.zeros((len(jobs), n), bool)
        self.throttling = any(lv.throttles for lv in levers)
        self.shed: dict[str, np.ndarray] = {}
        self.limits = self.storage_w = self.soc_fraction = None
        self.set_starts(self.idx)

    def set_starts(self, starts: np.ndarray) -> None:
        """Start the jobs at ``starts`` [ticks]: who holds its GPUs, who waits, and the
        shed still needed once the jobs not holding their GPUs idle (less what the steps
        so far took)."""
        k = np.arange(self.n)
        jobs = len(self.merit.jobs)
        self.starts = starts
        self.alive = np.array([(k >= s) & (k < s + d) for s, d in zip(starts, self.dur)]
                              ).reshape(jobs, self.n)
        self.held = np.array([(k >= s0) & (k < s) for s0, s in zip(self.idx, starts)]
                             ).reshape(jobs, self.n)
        idle_shed = ((~self.alive) * self.step_w[:, None]).sum(axis=0)
        self.need = np.maximum(self.shed_w - idle_shed - sum(self.shed.values()), 0.0)

    def schedule(self, levers) -> LeverSchedule:
        """The split as a :class:`LeverSchedule`, with a shed for each of ``levers``
        (names; zero for a lever that took no step)."""
        n, jobs, t0 = self.n, self.merit.jobs, self.context.times[0]
        limits = self.limits
        if limits is None:                      # no throttling: every job at its top
            limits = self.merit.limits(np.zeros(n), np.zeros(n, np.int64))
        new = {jobs[j].name: t0 + pd.Timedelta(seconds=float(self.starts[j])
                                               * self.context.tick_s)
               for j in range(len(jobs)) if self.starts[j] != self.idx[j]}
        return LeverSchedule(
            limits, self.context.throttle, self.paused, self.held, self.alive, new,
            self.storage_w if self.storage_w is not None else np.zeros(n),
            self.soc_fraction if self.soc_fraction is not None else np.full(n, np.nan),
            {name: self.shed.get(name, np.zeros(n)) for name in levers})
