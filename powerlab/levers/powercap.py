"""The power-cap lever: every GPU of a job under a power limit
(``nvmlDeviceSetPowerManagementLimit``), reached through the GPU's power controller.

Physics shared with the clock lock: :mod:`powerlab.levers.throttle`.  A cap bounds the
GPU's power (a lock only its clock), so it is the plan's first choice for a target whose
notice leaves time for its response (:func:`~powerlab.levers.throttle.pick_throttle`).

References
----------
.. [1] NVIDIA, "NVML API Reference Guide": ``nvmlDeviceSetPowerManagementLimit``.
"""

from __future__ import annotations

import numpy as np

from .lever import LeverAssumptions
from .registry import register_lever
from .throttle import Throttle

__all__ = ["PowerCap"]


@register_lever
class PowerCap(Throttle):
    """Power cap: the job's GPUs under a power limit [W] (``power_limit_w``)."""

    name = "power_cap"
    offer_order = 10
    merit_order = 3
    hardware = "GPUs whose power limit can be set (NVML, administrator rights)"
    offer_note = "GPU power limit on every GPU of every job"

    def response_s(self, assumptions: LeverAssumptions) -> float:
        return assumptions.power_cap_response_s

    def response_text(self, assumptions: LeverAssumptions) -> str:
        return f"power cap {assumptions.power_cap_response_s:g} s"

    def schedule_columns(self, merit, ls, ji: int, lever_col: np.ndarray) -> dict:
        """``power_limit_w[JOB]``: the limit where the job is capped (else NaN) [W]."""
        return {f"power_limit_w[{merit.jobs[ji].name}]":
                np.where(lever_col == self.name, ls.limits_w[ji], np.nan)}

    def lever_row(self, merit, ls, equipment, tick_s: float) -> dict:
        """``min_power_limit_w``: the lowest limit of a cap [W]."""
        lims = [lm for _, lm in self.lowest_limits(merit, ls)]
        return {"min_power_limit_w": float(min(lims))} if lims else {}
