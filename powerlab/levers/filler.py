"""The filler-workload mitigation: GPUs kept busy during the communication waits of a
training step, so that their power holds at the compute level instead of dropping to the
communication level (the swing a utility sees shrinks to the failures, checkpoints and
starts).

The filler costs throughput (the work it displaces and its interference: about 5 %,
Choukse et al. 2025, the cost model's ``filler_throughput_loss_pct``) and burns energy
(the extra power, counted by the search as extra grid energy).  The search's fast path
runs the engine once more per job with the filler on (:meth:`Filler.filled`), and the
option then picks that run.

References
----------
.. [1] E. Choukse et al., "Power Stabilization for AI Training Datacenters", 2025,
   arXiv:2508.14318.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .lever import Mitigation
from .registry import register_lever

__all__ = ["Filler"]


@register_lever
class Filler(Mitigation):
    """A filler workload that holds GPU power at the compute level during communication
    waits (option field ``filler``)."""

    name = "filler"
    search_order = 20
    fields = ("filler",)
    job_stage = 3

    def is_on(self, opt) -> bool:
        return bool(opt.filler)

    def label(self, opt) -> str:
        return "filler"

    @staticmethod
    def filled(job):
        """The job as the engine runs it with the filler: communication power raised to
        the compute power."""
        return dataclasses.replace(job, comm_w=max(job.comm_w, job.compute_w))

    def job_power(self, opt, power_w: np.ndarray, job) -> tuple[np.ndarray, float]:
        """The power is the filled run's (picked by the search); the throughput lost is
        the cost model's filler loss."""
        return power_w, (job.filler_loss_pct / 100 if self.is_on(opt) else 0.0)
