"""The facility model: IT power -> electrical losses -> cooling -> base load.

Facility (grid) power is built from IT power in three physical parts:

1. **Electrical losses** (UPS, transformers, distribution) are instantaneous and
   proportional to the load: ``losses = electrical_loss_fraction * IT``.
2. **Cooling** removes the heat (``IT + losses``: every watt ends as heat) through a plant
   whose power follows the heat with a first-order lag of ``cooling_time_constant_s``
   (chilled water loops, pumps and CRAH fans respond over minutes, not within a
   training step).  Its steady-state target is set by the site's steady-state PUE at the
   current ambient temperature: ``target = (PUE(T) - 1 - electrical_loss_fraction) * IT``,
   so that at a constant IT load the facility draws exactly ``IT * PUE(T) + base``.
3. **Base load** (offices, lighting, network core, UPS idle) is constant.

``facility = IT + losses + cooling + base_load``; the realised PUE,
``(facility - base) / IT`` over the horizon, is an output.

The cooling lag is discretised exactly for a demand held over each tick:
``c[k] = a c[k-1] + (1 - a) u[k]`` with ``a = exp(-tick / tau)``, starting in steady
state (``c[-1] = u[0]``).  A 1-s IT step ``dP`` therefore moves facility power by
``(1 + loss) dP`` plus at most ``(PUE - 1 - loss) dP (1 - exp(-1 s / tau))`` of cooling
within the second, and the cooling settles to within ``exp(-t / tau)`` of its new level
after ``t``.

Parameter defaults (``site.electrical_loss_fraction = 0.04``,
``site.cooling_time_constant_s = 300``) are assumptions: a double-conversion UPS at
96-97 % efficiency plus 1-2 % in transformers and busways gives 4-6 % of IT power
(The Green Grid, WP#49 "PUE: a comprehensive examination of the metric", 2012, on the
components of PUE); chilled-water plants respond to a load change over several minutes
(ASHRAE TC 9.9 "Thermal Guidelines for Data Processing Environments", 5th ed., 2021).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import signal

__all__ = ["FacilityPower", "cooling_response", "facility_power"]


@dataclass(frozen=True)
class FacilityPower:
    """Facility power and its parts, each the shape of the IT power [W].

    Attributes
    ----------
    facility_w, losses_w, cooling_w : ndarray
        Facility power, electrical losses, cooling power [W].
    base_load_w : float
        Constant non-IT load [W].
    """

    facility_w: np.ndarray
    losses_w: np.ndarray
    cooling_w: np.ndarray
    base_load_w: float


def cooling_filter(tick_s: float, time_constant_s: float) -> tuple[list, list]:
    """``(b, a)`` of the cooling plant's first-order lag sampled at ``tick_s``, for
    :func:`scipy.signal.lfilter` (``time_constant_s > 0``)."""
    a = math.exp(-tick_s / time_constant_s)
    return [1.0 - a], [1.0, -a]


def cooling_response(target_w: np.ndarray, tick_s: float, time_constant_s: float
                     ) -> np.ndarray:
    """First-order response of the cooling power to its target, along the last axis [W].

    Parameters
    ----------
    target_w : ndarray
        Steady-state cooling power at each tick, shape ``(..., ticks)`` [W].
    tick_s : float
        Tick [s].
    time_constant_s : float
        Time constant (0: cooling follows the target instantly) [s].

    Returns
    -------
    ndarray
        Cooling power, starting in steady state at the first target [W].
    """
    u = np.asarray(target_w, float)
    if time_constant_s <= 0:
        return u.copy()
    b, den = cooling_filter(tick_s, time_constant_s)
    zi = signal.lfilter_zi(b, den)  # steady state for a unit input
    zi = zi * u[..., :1]
    y, _ = signal.lfilter(b, den, u, axis=-1, zi=zi)
    return y


def facility_power(it_w: np.ndarray, tick_s: float, pue_steady: np.ndarray, *,
                   electrical_loss_fraction: float, cooling_time_constant_s: float,
                   base_load_w: float, parts: bool = True) -> FacilityPower:
    """Facility power from IT power (losses, lagging cooling, base load).

    Parameters
    ----------
    it_w : ndarray
        IT power, shape ``(..., ticks)`` [W].
    tick_s : float
        Tick [s].
    pue_steady : ndarray or float
        Steady-state PUE at each tick (from the ambient temperature) [-].
    electrical_loss_fraction : float
        Instantaneous losses per watt of IT [-].
    cooling_time_constant_s : float
        Cooling lag [s].
    base_load_w : float
        Constant non-IT load [W].
    parts : bool, default True
        Also return the losses and cooling (False: ``None``, less memory).

    Returns
    -------
    FacilityPower
    """
    it = np.asarray(it_w, float)
    share = np.maximum(np.asarray(pue_steady, float) - 1.0 - electrical_loss_fraction, 0.0)
    target = it * share
    cooling = cooling_response(target, tick_s, cooling_time_constant_s)
    del target
    fac = it * (1.0 + electrical_loss_fraction)
    fac += cooling
    fac += base_load_w
    if not parts:
        return FacilityPower(fac, None, None, float(base_load_w))
    return FacilityPower(fac, electrical_loss_fraction * it, cooling, float(base_load_w))
