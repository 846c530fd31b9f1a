"""The jobs' operating points under a GPU power limit, and the least-cost split of a shed
over them: the plan's model of the site's jobs under its levers.

Each job's operating points run from its top limit (the lowest limit that does not bind)
down to the GPU's lowest in 5-W notches (:data:`NOTCH_W`), with the job's power and its
GPUs' worth of step rate at each (:class:`JobTable`, from the job's power-throughput
curve, :mod:`powerlab.levers.jobs`).  :class:`Allocator` splits a shed over a set of
running jobs notch by notch, cheapest lost step rate per watt first (each job's notches
in order: a convex hull in the greedy sense); :class:`Merit` holds the tables and an
allocator per subset of jobs, and the site's figures every lever reads (full, idle and
floor power).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..exceptions import PowerlabError
from ..site.scenario import Scenario
from .jobs import job_power_w, job_rate, site_constant_w

__all__ = ["NOTCH_W", "Allocator", "JobTable", "Merit", "runs"]

#: Step of a job's power limit in the plan [W].
NOTCH_W = 5.0


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
            free = max(c.min_limit_w, math.ceil(c.binding_limit_w * j.compute_w / c.p_ref_w))
            top = min(c.max_limit_w, free)
            lims = np.arange(top, c.min_limit_w - 1e-9, -NOTCH_W)
            if free > top:
                # the job draws more than the GPU's highest settable limit lets it (a
                # scenario level above the driver's range, e.g. node power not split
                # from GPU power): the first row is the job unconstrained, as the
                # forecast runs it, so the plan's baseline is the forecast's (issue 33)
                lims = np.concatenate([[float(free)], lims])
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
        """Per job and tick, the limit at which the jobs of each tick's mask shed
        ``need_w`` (jobs outside the mask, and every job where the mask is 0, at their
        top) [W]."""
        out = np.repeat(np.array([t.limits_w[0] for t in self.tables])[:, None],
                        len(need_w), axis=1)
        for mk in np.unique(masks):
            sel = masks == mk
            if mk:
                out[:, sel] = self.alloc(int(mk)).limits(need_w[sel])
        return out


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` of the runs of True."""
    d = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    s = np.flatnonzero(d == 1)
    return list(zip(s, np.flatnonzero(d == -1)))
