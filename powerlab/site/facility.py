"""The facility: the site a scenario describes (:class:`Site`, read from its ``site:``
section by :func:`parse_site`) and its power model, IT power -> electrical losses ->
cooling -> base load.

Layout of the section (all optional)::

    site: {tz, pue | cooling{pue_at_reference, reference_temp_c, pue_per_c, ambient_mean_c,
           ambient_amplitude_c, ambient_peak_hour_local}, base_load_w,
           electrical_loss_fraction, cooling_time_constant_s}

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
import pandas as pd
from scipy import signal

from ..limits.yamlspec import Section

__all__ = ["CoolingModel", "FacilityPower", "Site", "cooling_response", "facility_power",
           "parse_site"]

#: Bound of a site's power that catches typos (a unit slip of 1000x): 10 GW, the largest
#: announced AI campuses are ~1-5 GW [W].
MAX_SITE_W = 10e9


# --------------------------------------------------------------------------- the site

@dataclass(frozen=True)
class CoolingModel:
    """PUE that rises with the outdoor (ambient) temperature.

    ``pue(T) = pue_at_reference + pue_per_c * max(0, T - reference_temp_c)`` with a daily
    cosine ambient temperature peaking at ``ambient_peak_hour_local`` (site local time).

    Attributes
    ----------
    pue_at_reference : float
        PUE at or below the reference temperature [-].
    reference_temp_c : float
        Ambient temperature above which free cooling stops being enough [degC].
    pue_per_c : float
        PUE increase per degree above the reference [1/degC].
    ambient_mean_c : float
        Daily mean ambient temperature [degC].
    ambient_amplitude_c : float
        Half the daily peak-to-trough swing of the ambient temperature [degC].
    ambient_peak_hour_local : float
        Local hour of the daily maximum [h].
    """

    pue_at_reference: float = 1.15
    reference_temp_c: float = 18.0
    pue_per_c: float = 0.01
    ambient_mean_c: float = 20.0
    ambient_amplitude_c: float = 5.0
    ambient_peak_hour_local: float = 15.0

    def ambient_temp_c(self, timestamps: pd.DatetimeIndex, tz: str) -> np.ndarray:
        """Ambient temperature at ``timestamps`` (tz-aware) [degC]."""
        local = timestamps.tz_convert(tz)
        hour = np.asarray(local.hour + local.minute / 60.0 + local.second / 3600.0, float)
        return self.ambient_mean_c + self.ambient_amplitude_c * np.cos(
            2 * np.pi * (hour - self.ambient_peak_hour_local) / 24.0)

    def pue(self, timestamps: pd.DatetimeIndex, tz: str) -> np.ndarray:
        """PUE at ``timestamps`` [-]."""
        temp = self.ambient_temp_c(timestamps, tz)
        return self.pue_at_reference + self.pue_per_c * np.maximum(
            0.0, temp - self.reference_temp_c)


@dataclass(frozen=True)
class Site:
    """The datacenter: time zone, cooling overhead and non-IT base load.

    Attributes
    ----------
    tz : str
        IANA time zone of the site (for the cooling model's daily cycle).
    pue : float or None
        Constant power usage effectiveness [-]; ``None`` when ``cooling`` is given.
    cooling : CoolingModel or None
        Temperature-dependent PUE.
    base_load_w : float
        Non-IT load that does not scale with IT power (offices, lighting, UPS idle) [W].
    electrical_loss_fraction : float
        UPS, transformer and distribution losses as a fraction of IT power, following
        it instantly [-]; part of the PUE.
    cooling_time_constant_s : float
        First-order time constant of the cooling plant's power following the heat load
        (chillers, pumps, CRAH fans: minutes) [s].

    The PUE (``pue`` or ``cooling``) is the *steady-state* ratio at a constant IT load;
    the facility model (:mod:`powerlab.site.facility`) splits it into instantaneous
    electrical losses and a cooling power that lags the heat, and reports the realised
    PUE as an output.
    """

    tz: str = "UTC"
    pue: float | None = 1.2
    cooling: CoolingModel | None = None
    base_load_w: float = 0.0
    electrical_loss_fraction: float = 0.04
    cooling_time_constant_s: float = 300.0

    def pue_at(self, timestamps: pd.DatetimeIndex) -> np.ndarray:
        """PUE at each timestamp [-]."""
        if self.cooling is not None:
            return self.cooling.pue(timestamps, self.tz)
        return np.full(len(timestamps), float(self.pue))


def parse_site(s: Section) -> Site:
    """Read a scenario's ``site:`` section (a constant ``pue`` or a ``cooling`` model,
    not both); errors name the key path (``site.cooling.pue_per_c``)."""
    tz = s.string("tz", "UTC")
    try:
        pd.Timestamp("2024-01-01", tz=tz)
    except Exception:  # noqa: BLE001 - pandas raises several types for bad zones
        raise s.error("tz", f"unknown time zone {tz!r}; use an IANA name such as "
                      "'America/New_York'") from None
    cooling = None
    pue = None
    if s.has("cooling"):
        if s.has("pue"):
            raise s.error("pue", "give either a constant 'pue' or a 'cooling' model, "
                          "not both")
        c = s.section("cooling")
        cooling = CoolingModel(
            pue_at_reference=c.number("pue_at_reference", 1.15, lo=1.0),
            reference_temp_c=c.number("reference_temp_c", 18.0, lo=-50.0, hi=60.0),
            pue_per_c=c.number("pue_per_c", 0.01, lo=0.0, hi=1.0),
            ambient_mean_c=c.number("ambient_mean_c", 20.0, lo=-60.0, hi=60.0),
            ambient_amplitude_c=c.number("ambient_amplitude_c", 5.0, lo=0.0, hi=40.0),
            ambient_peak_hour_local=c.number("ambient_peak_hour_local", 15.0, lo=0.0,
                                             hi=24.0),
        )
        c.finish()
    else:
        pue = s.number("pue", 1.2, lo=1.0, hi=5.0)
    lowest = cooling.pue_at_reference if cooling is not None else pue
    # default 0.04, but never more than the PUE's overhead (pue: 1.0 means IT only)
    loss = s.number("electrical_loss_fraction", min(0.04, lowest - 1.0), lo=0.0, hi=0.5)
    if lowest < 1.0 + loss - 1e-12:
        raise s.error("electrical_loss_fraction",
                      f"electrical losses of {loss:g} x IT do not fit in a PUE of "
                      f"{lowest:g}; set site.electrical_loss_fraction <= {lowest - 1:g}")
    site = Site(tz=tz, pue=pue, cooling=cooling,
                base_load_w=s.number("base_load_w", 0.0, hi=MAX_SITE_W),
                electrical_loss_fraction=loss,
                cooling_time_constant_s=s.number("cooling_time_constant_s", 300.0,
                                                 lo=0.0, hi=86400.0))
    s.finish()
    return site


# --------------------------------------------------------------------------- facility power




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
