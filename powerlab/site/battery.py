"""Battery (or supercapacitor) dispatch at the point of interconnection."""

from __future__ import annotations

import math

import numpy as np
from scipy.signal import lfilter

from .scenario import Battery
from .timebase import to_ticks

__all__ = ["battery_dispatch"]


def battery_dispatch(power_w: np.ndarray, tick_s: float, battery: Battery
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Battery power that holds the grid near a trailing moving average.

    The command is ``c = P - target`` (positive: discharge) where ``target`` is the mean
    of the last ``window_s`` of facility power.  The converter follows the command with a
    first-order lag of time constant ``converter_response_s`` (exact discretisation
    ``a = exp(-tick / tau)``; 0: at once), its output is clipped to ``+-P_max`` and to
    what keeps the state of charge within ``[soc_min_fraction, soc_max_fraction]`` of the
    capacity; charging stores ``efficiency`` of the energy taken.

    Parameters
    ----------
    power_w : ndarray
        Facility power before the battery, one value per tick [W].
    tick_s : float
        Tick [s].
    battery : Battery

    Returns
    -------
    battery_w : ndarray
        Battery output (positive discharges into the site) [W].
    soc_j : ndarray
        State of charge after each tick [J]; always within the bounds when the initial
        state of charge is.
    """
    p_max = battery.power_megawatts * 1e6
    cap = battery.energy_megawatt_hours * 3.6e9
    eff = battery.round_trip_efficiency
    lo_j = getattr(battery, "soc_min_fraction", 0.0) * cap
    hi_j = getattr(battery, "soc_max_fraction", 1.0) * cap
    tau = getattr(battery, "converter_response_s", 0.0)
    x = np.asarray(power_w, dtype=float)
    n_w = max(1, to_ticks(battery.window_s, tick_s))
    cs = np.concatenate([[0.0], np.cumsum(x)])
    k = np.arange(len(x))
    lo = np.maximum(0, k - n_w)
    target = (cs[k] - cs[lo]) / np.maximum(k - lo, 1)
    if len(target):
        target[0] = x[0]
    cmd = x - target
    if tau > 0 and len(cmd):
        a = math.exp(-tick_s / tau)
        cmd = lfilter([1.0 - a], [1.0, -a], cmd)
    b = np.clip(cmd, -p_max, p_max)
    de = np.where(b > 0, b, b * eff) * tick_s
    s0 = battery.initial_soc_fraction * cap
    soc = s0 - np.cumsum(de)
    tol = 1e-9 * max(cap, 1.0)
    if len(soc) and (soc.min() < lo_j - tol or soc.max() > hi_j + tol):
        # SoC limits bind: exact sequential dispatch (O(ticks) in Python)
        s = s0
        out = np.empty_like(b)
        socs = np.empty_like(b)
        for i, bi in enumerate(b.tolist()):
            if bi > 0:
                bi = min(bi, max(s - lo_j, 0.0) / tick_s)
                s -= bi * tick_s
            else:
                bi = max(bi, -max(hi_j - s, 0.0) / (eff * tick_s))
                s -= bi * eff * tick_s
            s = min(max(s, lo_j), hi_j)        # rounding only
            out[i] = bi
            socs[i] = s
        return out, socs
    return b, soc
