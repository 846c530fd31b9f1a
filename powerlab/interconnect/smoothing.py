"""GPU power smoothing as NVIDIA documents it for GB200/GB300 (NVML power smoothing).

A pure function on one power series: :func:`smooth_power`.  The mitigation search
(:mod:`powerlab.interconnect.sizing`) applies it to the per-GPU mean power of each job of a
forecast draw, so that trying a smoothing profile costs array arithmetic rather than an
engine run.

Model
-----
NVML exposes a power-smoothing profile with four parameters (NVML API reference,
"Power Smoothing Information"; units from ``nvmlDevicePowerSmoothingUpdatePresetProfileParam``):
a power floor in percent of the total module power (TMP), a ramp-up rate [W/s], a
ramp-down rate [W/s] and a ramp-down hysteresis [ms].  Choukse et al. (2025) describe the
floor as settable between 20 % and 90 % of TDP on GB200/GB300.  Modelled here, per tick:

- the target is the workload's power, raised to the floor while a job holds the GPU;
- when the target is above the current power, power rises toward it at most at the
  ramp-up rate (0: unlimited);
- when the target falls below the current power, power is held for the hysteresis time,
  then falls toward the target at most at the ramp-down rate (0: unlimited); a target
  back at or above the current power restarts the hysteresis.

Power held above the workload's demand is burnt (extra energy); power withheld below the
demand by the ramp-up limit is work delayed (throughput).  The firmware's internal
controller (activation windows and offsets) is not public and is not modelled.

References
----------
.. [1] NVIDIA, NVML API Reference, "Power Smoothing Information",
   https://docs.nvidia.com/deploy/nvml-api/group__nvmlPowerSmoothing.html
.. [2] NVIDIA cuda-python, ``cuda.bindings.nvml.device_power_smoothing_update_preset_profile_param``
   (floor 0-100 %, ramp rates W/s, hysteresis ms).
.. [3] E. Choukse et al., "Power Stabilization for AI Training Datacenters", 2025,
   arXiv:2508.14318.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["smooth_power"]


def smooth_power(power_w: np.ndarray, tick_s: float, *, floor_w: float = 0.0,
                 ramp_up_w_per_s: float = 0.0, ramp_down_w_per_s: float = 0.0,
                 hysteresis_s: float = 0.0, active: np.ndarray | None = None
                 ) -> np.ndarray:
    """Power of a GPU under NVML-style power smoothing.

    Parameters
    ----------
    power_w : ndarray
        Power the workload draws without smoothing, one value per tick [W].
    tick_s : float
        Tick [s].
    floor_w : float, default 0
        Power floor while ``active`` (0: off) [W].
    ramp_up_w_per_s, ramp_down_w_per_s : float, default 0
        Largest rise and fall rates (0: unlimited) [W/s].
    hysteresis_s : float, default 0
        How long power is held after the target falls before ramping down [s].
    active : ndarray of bool, optional
        Ticks at which the floor applies (a job holds the GPU); default every tick.

    Returns
    -------
    ndarray
        Smoothed power per tick [W].

    Notes
    -----
    The loop runs over runs of constant target (run-length encoding), not over ticks;
    the series is painted with array arithmetic, so a day at 0.1 s costs milliseconds
    for a piecewise-constant training load.
    """
    x = np.asarray(power_w, dtype=float)
    n = len(x)
    if n == 0:
        return x.copy()
    t = x
    if floor_w > 0:
        t = np.maximum(x, floor_w) if active is None else np.where(active, np.maximum(
            x, floor_w), x)
    if ramp_up_w_per_s <= 0 and ramp_down_w_per_s <= 0 and hysteresis_s <= 0:
        return np.array(t, dtype=float)
    big = math.inf
    su = ramp_up_w_per_s * tick_s if ramp_up_w_per_s > 0 else big
    sd = ramp_down_w_per_s * tick_s if ramp_down_w_per_s > 0 else big
    hold = math.floor(hysteresis_s / tick_s + 0.5 + 1e-9)
    tr = np.round(t, 6)
    starts = np.flatnonzero(np.concatenate([[True], tr[1:] != tr[:-1]]))
    lens = np.diff(np.append(starts, n))
    vals = tr[starts]
    m = len(starts)
    y0 = np.empty(m)
    hold0 = np.zeros(m, dtype=np.int64)
    rate = np.empty(m)
    up = np.empty(m, dtype=bool)
    y = float(vals[0])
    below = 0
    vl, ll = vals.tolist(), lens.tolist()
    for i in range(m):
        v, L = vl[i], ll[i]
        y0[i] = y
        if v >= y:
            below = 0
            up[i] = True
            rate[i] = su
            y = v if su == big else min(v, y + su * L)
        else:
            up[i] = False
            rate[i] = sd
            h = max(0, hold - below)
            hold0[i] = h
            # tick (1-based) of the run at which power reaches the target; once there,
            # the target is no longer below the power and the hysteresis restarts
            reach = h + (1 if sd == big else math.ceil((y - v) / sd - 1e-12))
            below = 0 if reach < L else below + L
            if L > h:
                y = v if sd == big else max(v, y - sd * (L - h))
    j = np.arange(n) - np.repeat(starts, lens) + 1            # 1..L within a run
    ramp = np.maximum(j - np.repeat(hold0, lens), 0).astype(float)
    r = np.repeat(rate, lens)
    v = np.repeat(vals, lens)
    base = np.repeat(y0, lens)
    uu = np.repeat(up, lens)
    with np.errstate(invalid="ignore"):
        step = np.where(ramp > 0, r * ramp, 0.0)                # inf * 0 avoided
    out = np.where(uu, np.minimum(base + step, v), np.maximum(base - step, v))
    return out
