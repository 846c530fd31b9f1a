"""Storage technologies a mitigation search may offer, and their dispatch on a forecast.

A storage option is a technology class (:class:`StorageTechnology`) sized by power [MW]
and energy [MWh].  The class bounds what can be built and how it is run:

- the C-rate ``power / energy`` [1/h] is at most ``max_c_rate_per_h`` (equivalently the
  duration ``energy / power`` is at least ``min_duration_h``) and the duration at most
  ``max_duration_h``;
- the state of charge stays within ``[soc_min_fraction, soc_max_fraction]`` of the
  energy (:func:`powerlab.site.battery.battery_dispatch` enforces it on every tick);
- the power converter follows a new command with a first-order lag of
  ``converter_response_s``;
- ``round_trip_efficiency`` and the illustrative capital costs per MWh and per MW.

:func:`storage_battery` turns an option into the engine's
:class:`~powerlab.site.scenario.Battery` and **refuses** an option outside its class
(a 20 C, 3-minute "Li-ion" battery is not a product: issue 20, item 8).

The numbers of :data:`TECHNOLOGIES` are illustrative assumptions stated with their
reasons; the ranges follow the sources below, the exact values are powerlab's.

References
----------
.. [1] V. Viswanathan et al., "2022 Grid Energy Storage Technology Cost and Performance
   Assessment", PNNL-33283, Pacific Northwest National Laboratory, 2022 (Li-ion systems
   of 2-10 h; round-trip efficiency in the mid 80 %s; state of charge kept off the
   extremes for cycle life).
.. [2] P. Simon, Y. Gogotsi, "Materials for electrochemical capacitors", Nature
   Materials 7, 845-854, 2008 (discharge in seconds; stored energy ~ V^2, so a
   converter that works down to half the rated voltage reaches 25 % of the energy).
.. [3] NVIDIA Technical Blog, "How New GB300 NVL72 Features Provide Steady Power for AI",
   2025 (energy storage in the rack power supplies together with power smoothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..exceptions import PowerlabError

__all__ = [
    "TECHNOLOGIES",
    "StorageTechnology",
    "available_storage",
    "storage_battery",
    "storage_grid_energy",
]


@dataclass(frozen=True)
class StorageTechnology:
    """A storage technology class (see the module docstring).

    Attributes
    ----------
    name : str
    min_duration_h, max_duration_h : float
        Energy over power the class can be built with [h]; ``1 / min_duration_h`` is the
        largest C-rate [1/h].
    soc_min_fraction, soc_max_fraction : float
        State-of-charge bounds of the dispatch [-].
    round_trip_efficiency : float
        [-].
    converter_response_s : float
        First-order time constant of the converter [s].
    usd_per_megawatt_hour_day, usd_per_megawatt_day : float
        Capital cost per day of life, per MWh and per MW (illustrative) [$/(MWh d)],
        [$/(MW d)].
    durations_h : tuple of float
        Durations a search tries by default [h].
    requires_gpu : str
        Hardware the class needs (``""``: any site); e.g. rack power-supply storage
        ships with GB300 racks.
    note : str
        Where the numbers come from.
    """

    name: str
    min_duration_h: float
    max_duration_h: float
    soc_min_fraction: float
    soc_max_fraction: float
    round_trip_efficiency: float
    converter_response_s: float
    usd_per_megawatt_hour_day: float
    usd_per_megawatt_day: float
    durations_h: tuple[float, ...]
    requires_gpu: str = ""
    note: str = ""

    @property
    def max_c_rate_per_h(self) -> float:
        """Largest power over energy [1/h]."""
        return 1.0 / self.min_duration_h


#: The classes a search offers (illustrative numbers; see the module docstring).
TECHNOLOGIES: dict[str, StorageTechnology] = {t.name: t for t in (
    StorageTechnology(
        "li-ion", min_duration_h=0.25, max_duration_h=10.0, soc_min_fraction=0.1,
        soc_max_fraction=0.9, round_trip_efficiency=0.86, converter_response_s=0.05,
        usd_per_megawatt_hour_day=82.0, usd_per_megawatt_day=41.0,
        durations_h=(0.25, 1.0),
        note="grid Li-ion (PNNL 2022: 2-10 h systems, RTE mid-80s %); 4 C (15 min) is "
             "taken as the most power-dense grid product (assumption); SOC 10-90 %; "
             "inverter response 50 ms (about three 60-Hz cycles of a load-following "
             "control loop: assumption); $300k/MWh + $150k/MW over 10 years"),
    StorageTechnology(
        "supercapacitor", min_duration_h=2 / 3600, max_duration_h=60 / 3600,
        soc_min_fraction=0.25, soc_max_fraction=1.0, round_trip_efficiency=0.95,
        converter_response_s=0.01, usd_per_megawatt_hour_day=2740.0,
        usd_per_megawatt_day=27.0, durations_h=(10 / 3600, 30 / 3600),
        note="seconds of energy (Simon & Gogotsi 2008); energy ~ V^2, converter down to "
             "half voltage -> 25 % SOC floor; 10 ms converter; $10M/MWh + $100k/MW "
             "over 10 years (assumption)"),
    StorageTechnology(
        "rack-psu", min_duration_h=0.5 / 3600, max_duration_h=10 / 3600,
        soc_min_fraction=0.2, soc_max_fraction=1.0, round_trip_efficiency=0.97,
        converter_response_s=0.001, usd_per_megawatt_hour_day=2740.0,
        usd_per_megawatt_day=14.0, durations_h=(2 / 3600, 5 / 3600),
        requires_gpu="GB300",
        note="energy storage in the rack power supplies of GB300 NVL72 (NVIDIA 2025); "
             "seconds of energy, sub-ms response; modelled at the facility meter; "
             "costs are assumptions"),
)}


def available_storage(gpu_model: str) -> tuple[list[str], list[str]]:
    """(technology names the site's hardware can have, notes on those it cannot)."""
    ok, notes = [], []
    model = (gpu_model or "").upper()
    for t in TECHNOLOGIES.values():
        if t.requires_gpu and t.requires_gpu.upper() not in model:
            notes.append(f"{t.name} storage not offered: it needs {t.requires_gpu} "
                         f"hardware, the scenario has {gpu_model or 'no gpu_model'}")
        else:
            ok.append(t.name)
    return ok, notes


def technology(name: str) -> StorageTechnology:
    """The class called ``name`` (one clear error otherwise)."""
    try:
        return TECHNOLOGIES[name]
    except KeyError:
        raise PowerlabError(f"unknown storage technology {name!r}; one of "
                            f"{', '.join(TECHNOLOGIES)}") from None


def clamp_duration_h(name: str, duration_h: float) -> float:
    """``duration_h`` moved into the class's buildable range [h]."""
    t = technology(name)
    return min(max(duration_h, t.min_duration_h), t.max_duration_h)


def storage_battery(opt):
    """The :class:`~powerlab.site.scenario.Battery` of a mitigation option's storage,
    checked against its technology class (C-rate, duration)."""
    from ..site.scenario import Battery

    t = technology(opt.storage_technology or "li-ion")
    p, e = opt.battery_power_megawatts, opt.battery_energy_megawatt_hours
    dur = e / p if p > 0 else math.inf
    if dur < t.min_duration_h * (1 - 1e-6) or dur > t.max_duration_h * (1 + 1e-6):
        raise PowerlabError(
            f"{t.name} storage of {p:g} MW / {e:g} MWh is {p / e:.3g} C ({dur * 60:.3g} "
            f"min): the class is built with {t.min_duration_h * 60:.3g}-"
            f"{t.max_duration_h * 60:.3g} min (at most {t.max_c_rate_per_h:.3g} C)")
    return Battery(power_megawatts=p, energy_megawatt_hours=e,
                   round_trip_efficiency=t.round_trip_efficiency,
                   window_s=opt.battery_window_s,
                   initial_soc_fraction=0.5 * (t.soc_min_fraction + t.soc_max_fraction),
                   soc_min_fraction=t.soc_min_fraction, soc_max_fraction=t.soc_max_fraction,
                   converter_response_s=t.converter_response_s)


def storage_grid_energy(fac: np.ndarray, tick_s: float, opt) -> tuple[np.ndarray, float]:
    """(grid power [W], grid energy with the storage brought back to its initial state of
    charge [J]) of facility power ``fac`` with the option's storage."""
    if not opt.battery:
        return fac, float(fac.sum() * tick_s)
    from ..site.battery import battery_dispatch

    bat = storage_battery(opt)
    b, soc = battery_dispatch(fac, tick_s, bat)
    drain = bat.initial_soc_fraction * bat.energy_megawatt_hours * 3.6e9 - soc[-1]
    recharge = max(drain, 0.0) / bat.round_trip_efficiency + min(drain, 0.0)
    grid = fac - b
    return grid, float(grid.sum() * tick_s + recharge)
