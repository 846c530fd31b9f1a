"""The clock-lock lever: every GPU of a job with its SM clock locked
(``nvmlDeviceSetGpuLockedClocks``) at the curve's clock for the capped power.

Physics shared with the power cap: :mod:`powerlab.levers.throttle`; the plan simulates a
lock at the operating point of the equivalent cap.  No controller loop: it responds
faster than a cap (the plan's choice where the notice is short,
:func:`~powerlab.levers.throttle.pick_throttle`), but it bounds only the clock.

References
----------
.. [1] NVIDIA, "NVML API Reference Guide": ``nvmlDeviceSetGpuLockedClocks``.
"""

from __future__ import annotations

import numpy as np

from .lever import LeverAssumptions
from .registry import register_lever
from .throttle import Throttle

__all__ = ["ClockLock"]


@register_lever
class ClockLock(Throttle):
    """Clock lock: the job's GPUs at the curve's SM clock for the capped power [MHz]
    (``clock_sm_mhz``)."""

    name = "clock_lock"
    offer_order = 20
    merit_order = 4
    hardware = "GPUs whose clocks can be locked (NVML, administrator rights)"
    offer_note = "SM clock locked at the curve's clock for that power"

    def response_s(self, assumptions: LeverAssumptions) -> float:
        return assumptions.clock_lock_response_s

    def response_text(self, assumptions: LeverAssumptions) -> str:
        return f"clock lock {assumptions.clock_lock_response_s:g} s"

    def offer_clock_mhz(self, op) -> float:
        """The jobs' mean curve clock at the offered limit [MHz]."""
        return float(np.nanmean(op.clocks))

    def schedule_columns(self, merit, ls, ji: int, lever_col: np.ndarray) -> dict:
        """``clock_sm_mhz[JOB]``: the locked clock where the job is locked (else NaN)."""
        j = merit.jobs[ji]
        c = merit.curves[j.name]
        clk = c.clock_at_power(np.minimum(j.compute_w, c.power_at_limit(ls.limits_w[ji])))
        return {f"clock_sm_mhz[{j.name}]": np.where(lever_col == self.name, clk, np.nan)}

    def lever_row(self, merit, ls, equipment, tick_s: float) -> dict:
        """``min_clock_sm_mhz``: the lowest locked clock [MHz]."""
        clk = [float(merit.curves[j.name].clock_at_power(
            min(j.compute_w, float(merit.curves[j.name].power_at_limit(lm)))))
            for j, lm in self.lowest_limits(merit, ls)]
        return {"min_clock_sm_mhz": float(np.nanmin(clk))} if clk else {}
