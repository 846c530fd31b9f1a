"""Storage: the site battery as a curtailment lever, and storage of a technology class as
a mitigation, with their dispatch (:class:`Storage`).

As a lever (the flexibility offer and the curtailment plan) the site's battery
(``mitigations.battery``) covers the highest part of the shed that remains after shifted
starts, by *water filling* (:func:`storage_dispatch`): ``B(t) = min(P_max, max(N(t) - g,
0))`` at the lowest level ``g`` whose energy fits the energy above the battery's minimum
state of charge, ``(initial_soc_fraction - soc_min_fraction) x energy``.  For a cost
convex in the shed this is the least lost training for the energy; with energy enough
``g = 0``: the battery carries the whole shed, down and back up, and no GPU slows.  The
state of charge falls by exactly the energy discharged (the engine's convention:
``round_trip_efficiency`` applies to charging; the plan does not recharge, the energy to
restore is reported as ``discharged / efficiency``).  The plan dispatches the battery
itself: its forecasts run without the engine's smoothing dispatch of it (one controller
per battery).

As a mitigation (the mitigation search) storage is a technology class
(:class:`StorageTechnology`) sized by power [MW] and energy [MWh], holding the grid to a
trailing moving average (:func:`powerlab.site.battery.battery_dispatch`, the engine's
dispatch).

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

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..exceptions import PowerlabError
from ..site.battery import battery_dispatch
from ..site.scenario import Battery
from .lever import CurtailmentLever, LeverAssumptions, Mitigation, OfferContext, OfferRow
from .registry import register_lever

__all__ = [
    "STORAGE",
    "TECHNOLOGIES",
    "Storage",
    "StorageTechnology",
    "available_storage",
    "clamp_duration_h",
    "storage_battery",
    "storage_dispatch",
    "storage_grid_energy",
    "technology",
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
    grid, recharge = STORAGE.grid_power(opt, fac, tick_s)
    return grid, float(grid.sum() * tick_s + recharge)


def storage_dispatch(need_w: np.ndarray, tick_s: float, battery
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Battery output covering the top of ``need_w`` (water filling) and its state of
    charge.

    Parameters
    ----------
    need_w : ndarray
        Shed still needed per tick, at the battery's boundary [W].
    tick_s : float
        Tick [s].
    battery : powerlab.site.scenario.Battery

    Returns
    -------
    storage_w : ndarray
        ``min(P_max, max(need - g, 0))`` at the least level ``g`` whose energy fits
        ``(initial_soc_fraction - soc_min_fraction) x energy`` [W].
    soc_j : ndarray
        State of charge after each tick: the initial one less the energy discharged
        so far [J]; never below the minimum.
    """
    need = np.maximum(np.asarray(need_w, float), 0.0)
    p_max = battery.power_megawatts * 1e6
    cap_j = battery.energy_megawatt_hours * 3.6e9
    soc0 = battery.initial_soc_fraction * cap_j
    avail = max(soc0 - getattr(battery, "soc_min_fraction", 0.0) * cap_j, 0.0)

    def energy(g: float) -> float:
        return float(np.minimum(p_max, np.maximum(need - g, 0.0)).sum()) * tick_s

    g = 0.0
    if energy(0.0) > avail:
        lo, hi = 0.0, float(need.max())
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if energy(mid) > avail else (lo, mid)
        g = hi
    out = np.minimum(p_max, np.maximum(need - g, 0.0))
    soc = soc0 - np.cumsum(out) * tick_s
    # never below the minimum: the level's bisection keeps the energy within it, so
    # this only removes rounding (1e-15 of the capacity)
    return out, np.maximum(soc, soc0 - avail)


class Storage(CurtailmentLever, Mitigation):
    """Storage: the site battery as a lever, a technology class as a mitigation."""

    name = "storage"
    offer_order = 50
    search_order = 40
    merit_order = 2
    plan_phase = 2
    reduces_it = False
    fields = ("storage_technology", "battery_power_megawatts",
              "battery_energy_megawatt_hours", "battery_round_trip_efficiency",
              "battery_window_s")

    # -- the lever -----------------------------------------------------------------------
    def response_s(self, assumptions: LeverAssumptions) -> float:
        """Battery inverter response [s]."""
        return assumptions.storage_response_s

    def offer_rows(self, offer: OfferContext, members: tuple) -> list[OfferRow]:
        """The site battery discharging over the hold window (none: 0 MW)."""
        bat = offer.scenario.mitigations.battery
        if bat is not None:
            p = min(bat.power_megawatts, bat.energy_megawatt_hours * bat.initial_soc_fraction
                    * 3600.0 / offer.hold_s)
            hmax = bat.energy_megawatt_hours * bat.initial_soc_fraction * 3600.0 \
                / bat.power_megawatts
            note = "site battery discharging over the hold window"
        else:
            p, hmax, note = 0.0, 0.0, "no storage in the scenario"
        return [OfferRow.of(self.name, (p, p, p),
                            ramp_time_s=self.response_s(offer.assumptions), hold_max_s=hmax,
                            note=note)]

    def prepare(self, scenario) -> tuple[object, object]:
        """The plan dispatches the site battery, the engine does not: the scenario
        without it, and the battery."""
        bat = scenario.mitigations.battery
        if bat is None:
            return scenario, None
        return scenario.replace(mitigations=dataclasses.replace(
            scenario.mitigations, battery=None)), bat

    def allocate(self, state, members: tuple) -> None:
        """The battery covers the top of what remains (:func:`storage_dispatch`)."""
        bat = state.context.equipment.get(self.name)
        if bat is None:
            return
        conv = state.context.conv
        storage_w, soc_j = storage_dispatch(state.need * conv, state.context.tick_s, bat)
        state.need = np.maximum(state.need - storage_w / conv, 0.0)
        state.storage_w = storage_w
        state.soc_fraction = soc_j / (bat.energy_megawatt_hours * 3.6e9)
        state.shed[self.name] = storage_w / conv

    def site_columns(self, ls) -> dict:
        """The battery's output at the targets' boundary [MW] and its state of charge."""
        return {"storage_discharge_megawatts": ls.storage_w / 1e6,
                "storage_soc_fraction": ls.soc_fraction}

    def target_columns(self, ls, i0: int, i1: int) -> dict:
        """The state of charge at the target's end [-]."""
        return {"storage_soc_fraction": float(ls.soc_fraction[i1 - 1])}

    def lever_row(self, merit, ls, equipment, tick_s: float) -> dict:
        """The lowest state of charge, the energy discharged (at the targets' boundary)
        and the grid energy to restore it [MWh]."""
        battery = equipment.get(self.name)
        if battery is None:
            return {}
        out_mwh = float(ls.storage_w.sum()) * tick_s / 3.6e9
        return {"storage_soc_fraction": float(np.nanmin(ls.soc_fraction)),
                "storage_discharge_megawatt_hours": out_mwh,
                "storage_recharge_megawatt_hours": out_mwh / battery.round_trip_efficiency}

    def site_offset_w(self, ls) -> np.ndarray:
        """The battery's output, at the point of connection [W]."""
        return ls.storage_w

    # -- the mitigation --------------------------------------------------------------------
    def is_on(self, opt) -> bool:
        return opt.battery_power_megawatts > 0 and opt.battery_energy_megawatt_hours > 0

    def label(self, opt) -> str:
        return (f"{opt.storage_technology or 'li-ion'} storage "
                f"{opt.battery_power_megawatts:g} MW / "
                f"{opt.battery_energy_megawatt_hours:g} MWh, {opt.battery_window_s:g}-s window")

    def requires(self, opt) -> str:
        t = TECHNOLOGIES.get(opt.storage_technology or "li-ion")
        return f"{t.requires_gpu} racks ({t.name} storage)" if t is not None \
            and t.requires_gpu else ""

    def grid_power(self, opt, facility_w: np.ndarray, tick_s: float
                   ) -> tuple[np.ndarray, float]:
        """The storage holding the grid to its window's moving average, and the grid
        energy that brings it back to its initial state of charge [J]."""
        if not self.is_on(opt):
            return facility_w, 0.0
        bat = storage_battery(opt)
        b, soc = battery_dispatch(facility_w, tick_s, bat)
        drain = bat.initial_soc_fraction * bat.energy_megawatt_hours * 3.6e9 - soc[-1]
        return facility_w - b, max(drain, 0.0) / bat.round_trip_efficiency + min(drain, 0.0)

    def capital_usd_per_day(self, opt) -> float:
        """From its technology class [$/d]."""
        if not self.is_on(opt):
            return 0.0
        t = TECHNOLOGIES[opt.storage_technology or "li-ion"]
        return (opt.battery_energy_megawatt_hours * t.usd_per_megawatt_hour_day
                + opt.battery_power_megawatts * t.usd_per_megawatt_day)

    def storage_size(self, opt) -> tuple[float, float]:
        if not self.is_on(opt):
            return 0.0, 0.0
        return opt.battery_power_megawatts, opt.battery_energy_megawatt_hours

    def tidy_row(self, opt, row: dict) -> None:
        """Without storage its columns read 0 MW, 0 MWh, no class; with it, the class's
        round-trip efficiency."""
        if not self.is_on(opt):
            row["battery_energy_megawatt_hours"] = row["battery_power_megawatts"] = 0.0
            row["battery_round_trip_efficiency"] = row["battery_window_s"] = math.nan
            row["storage_technology"] = ""
        else:
            row["battery_round_trip_efficiency"] = storage_battery(opt).round_trip_efficiency

    def restore_fields(self, kw: dict) -> None:
        if not kw["battery_power_megawatts"] > 0:
            kw.update(battery_round_trip_efficiency=0.9, battery_window_s=60.0,
                      storage_technology="")


#: The one storage object (a lever and a mitigation).
STORAGE = register_lever(Storage())
