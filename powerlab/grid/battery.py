"""Battery (or supercapacitor) dispatch at the point of interconnection."""

from __future__ import annotations

import numpy as np

from .scenario import Battery
from .timebase import to_ticks

__all__ = ["battery_dispatch"]


def battery_dispatch(power_w: np.ndarray, tick_s: float, battery: Battery
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Battery power that holds the grid near a trailing moving average.

    The battery delivers ``b = clip(P - target, -P_max, P_max)`` (positive: discharge)
    where ``target`` is the mean of the last ``window_s`` of facility power, within its
    state-of-charge limits; charging stores ``efficiency`` of the energy taken.

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
        State of charge after each tick [J].
    """
    p_max = battery.power_megawatts * 1e6
    cap = battery.energy_megawatt_hours * 3.6e9
    eff = battery.round_trip_efficiency
    n_w = max(1, to_ticks(battery.window_s, tick_s))
    cs = np.concatenate([[0.0], np.cumsum(power_w)])
    k = np.arange(len(power_w))
    lo = np.maximum(0, k - n_w)
    target = (cs[k] - cs[lo]) / np.maximum(k - lo, 1)
    target[0] = power_w[0]
    b = np.clip(power_w - target, -p_max, p_max)
    de = np.where(b > 0, b, b * eff) * tick_s
    soc = battery.initial_soc_fraction * cap - np.cumsum(de)
    if len(soc) and (soc.min() < 0 or soc.max() > cap):
        # SoC limits bind: exact sequential dispatch (slower, O(ticks) in Python)
        s = battery.initial_soc_fraction * cap
        bl = b.tolist()
        out = np.empty_like(b)
        socs = np.empty_like(b)
        for i, bi in enumerate(bl):
            if bi > 0:
                bi = min(bi, s / tick_s)
                s -= bi * tick_s
            else:
                bi = max(bi, -(cap - s) / (eff * tick_s))
                s -= bi * eff * tick_s
            out[i] = bi
            socs[i] = s
        return out, socs
    return b, soc
