"""An energisation schedule: how a large load is brought from zero to its peak in blocks
without exceeding the utility's ramp and step limits.

The schedule is a staircase: blocks of ``h`` MW switched on every ``dt`` seconds.  Its
ramps follow from the definitions of :mod:`powerlab.limits.ramps` (ramps between adjacent
window means, every alignment):

- a single step of ``h`` seen by means over windows ``w <= dt`` gives a ramp of ``h / w``
  (the step at the boundary of two windows), so ``h <= R_w * w`` for every ramp limit
  ``R_w`` over ``w``-means with ``w <= dt``;
- steps every ``dt = w / m`` (``m`` a whole number of steps per window) raise every
  window's mean by exactly ``m h`` over the next window, a ramp of ``h / dt``; with ``dt``
  not dividing ``w`` the worst alignment holds ``ceil(w / dt)`` steps.  So ``m`` is the
  largest whole number with ``m h <= R_w w``;
- a step limit ``S`` (largest change within ``within_s``) caps ``h <= S`` when ``dt`` is
  at least ``within_s``.

:func:`energisation_schedule` picks the largest block the limits allow (at most
``max_block_w``), the shortest spacing they allow, and returns the staircase; the last
block is the remainder.  It is checked against the limits by recomputing them on the
staircase (:func:`schedule_power`), never assumed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError

__all__ = ["energisation_schedule", "schedule_power"]


def energisation_schedule(peak_w: float, *, ramp_limits_w_per_s: dict | None = None,
                          step_limit_w: float | None = None, step_within_s: float = 1.0,
                          max_block_w: float | None = None) -> pd.DataFrame:
    """Blocks of load to switch on, and when, to reach ``peak_w`` within the limits.

    Parameters
    ----------
    peak_w : float
        Power to reach [W].
    ramp_limits_w_per_s : dict, optional
        Averaging window [s] to the ramp limit over adjacent means of that window [W/s]
        (e.g. ``{1.0: 2e6, 60.0: 10e6 / 60}`` for 2 MW/s over 1-s means and 10 MW/min
        over 1-min means).
    step_limit_w : float, optional
        Largest step allowed within ``step_within_s`` [W].
    step_within_s : float, default 1
        [s].
    max_block_w : float, optional
        Largest block the site can switch at once (e.g. one hall) [W]; default
        ``peak_w / 10``.

    Returns
    -------
    DataFrame
        One row per block: ``block``, ``time_s`` (from the first block),
        ``block_megawatts``, ``power_megawatts`` (after the block), with
        ``attrs["block_spacing_s"]`` and ``attrs["binding"]`` (which limit set the block
        and the spacing).
    """
    if not (math.isfinite(peak_w) and peak_w > 0):
        raise PowerlabError(f"peak power must be a positive number of W, got {peak_w!r}")
    ramps = {float(w): float(r) for w, r in (ramp_limits_w_per_s or {}).items()}
    for w, r in ramps.items():
        if not (w > 0 and r > 0 and math.isfinite(r)):
            raise PowerlabError(f"ramp limit over {w:g}-s means must be > 0, got {r!r}")
    h = float(max_block_w) if max_block_w is not None else peak_w / 10.0
    binding = "block size"
    if step_limit_w is not None and step_limit_w < h:
        h, binding = float(step_limit_w), f"step limit within {step_within_s:g} s"
    for w, r in sorted(ramps.items()):
        if r * w < h:
            h, binding = r * w, f"ramp limit over {w:g}-s means"
    h = min(h, peak_w)
    # spacing: every window w allows m = floor(R_w w / h) steps; dt = w / m
    dt, why = max(step_within_s, 0.0), f"step limit within {step_within_s:g} s"
    if step_limit_w is None:
        dt, why = 0.0, "no step limit"
    for w, r in sorted(ramps.items()):
        m = math.floor(r * w / h * (1 + 1e-12))
        need = w / m if m >= 1 else math.inf
        if need > dt:
            dt, why = need, f"ramp limit over {w:g}-s means"
    if dt <= 0:
        dt, why = 1.0, "no ramp limit (1 s assumed between blocks)"
    n = math.ceil(peak_w / h - 1e-9)
    blocks = np.full(n, h)
    blocks[-1] = peak_w - h * (n - 1)
    out = pd.DataFrame({"block": np.arange(1, n + 1), "time_s": np.arange(n) * dt,
                        "block_megawatts": blocks / 1e6,
                        "power_megawatts": np.cumsum(blocks) / 1e6})
    out.attrs.update(block_spacing_s=dt, binding=f"block: {binding}; spacing: {why}")
    return out


def schedule_power(schedule: pd.DataFrame, tick_s: float, *, hold_s: float = 120.0
                   ) -> np.ndarray:
    """The staircase of a schedule on a regular grid, starting one ``hold_s`` at zero
    before the first block and holding the peak ``hold_s`` after the last [W]."""
    t_end = float(schedule["time_s"].iloc[-1]) + 2 * hold_s
    n = round(t_end / tick_s) + 1
    x = np.zeros(n)
    for t, b in zip(schedule["time_s"], schedule["block_megawatts"]):
        x[round((t + hold_s) / tick_s):] += b * 1e6
    return x
