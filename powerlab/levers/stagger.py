"""The staggered-starts mitigation: jobs that would start together start apart, in file
order, so that their start-up steps do not add into one.

The delays are the engine's own rule (:func:`powerlab.site.stagger.stagger_delay_ticks`:
rounded to whole ticks, capped so that a job's start-up and shutdown still fit its
allocation), so the search prices exactly the stagger the engine would run.  A delayed
job holds its GPUs idle until it starts; the delay is lost throughput, as a share of the
job's allocation.
"""

from __future__ import annotations

import numpy as np

from ..site.stagger import stagger_delay_ticks
from .lever import Mitigation
from .registry import register_lever

__all__ = ["Stagger"]


@register_lever
class Stagger(Mitigation):
    """Staggered starts: jobs starting together start ``stagger_starts_s`` apart [s]."""

    name = "stagger"
    search_order = 30
    fields = ("stagger_starts_s",)
    job_stage = 2

    def is_on(self, opt) -> bool:
        return bool(opt.stagger_starts_s)

    def label(self, opt) -> str:
        return f"stagger {opt.stagger_starts_s:g} s"

    @staticmethod
    def delays_s(scenario, start_utc, tick_s: float, stagger_s: float) -> list[float]:
        """Start delay of each job of ``scenario`` under a stagger of ``stagger_s`` [s]:
        the engine's rule, capped as the engine caps it."""
        return [k * tick_s for k in stagger_delay_ticks(scenario, start_utc, tick_s,
                                                        stagger_s)]

    def job_power(self, opt, power_w: np.ndarray, job) -> tuple[np.ndarray, float]:
        """The job's power shifted by its delay (idle before); the delay is lost, as a
        share of the job's allocation."""
        if not self.is_on(opt):
            return power_w, 0.0
        delay = self.delays_s(job.scenario, job.start_utc, job.tick_s,
                              opt.stagger_starts_s)[job.index]
        k = round(delay / job.tick_s)
        if k > 0:
            power_w = np.concatenate([np.full(min(k, len(power_w)), job.hardware.gpu_idle_w),
                                      power_w[:len(power_w) - k]])
        alloc_s = job.job.duration_s
        return power_w, min(delay, alloc_s) / alloc_s
