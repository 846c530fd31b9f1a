"""The mitigation space the search walks: an option (:class:`MitigationOption`: every
mitigation's settings under their own names), the settings tried (:class:`SearchGrid`),
the dollar weights that order passing options (:class:`CostModel`) and the Pareto set.

What each mitigation does and costs is its own class (:data:`powerlab.levers.registry.MITIGATIONS`:
NVML power smoothing, a filler workload, staggered starts, storage); an option's
description, hardware and capital cost come from the mitigations it switches on.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..levers.registry import MITIGATIONS
from ..levers.smoothing import SmoothingProfile
from ..levers.storage import STORAGE, clamp_duration_h, technology

__all__ = ["COST_AXES", "OPTION_COLUMNS", "CostModel", "MitigationOption",
           "SearchGrid", "capital_usd_per_day", "option_from_row", "pareto_front"]

OPTION_COLUMNS = ("percent_tmp_floor", "ramp_up_rate_w_per_s", "ramp_down_rate_w_per_s",
                  "ramp_down_hysteresis_ms", "secondary_power_floor_w",
                  "primary_floor_act_win_mult", "primary_floor_tar_win_mult",
                  "primary_floor_act_offset_w", "filler", "stagger_starts_s",
                  "storage_technology", "battery_power_megawatts",
                  "battery_energy_megawatt_hours", "battery_round_trip_efficiency",
                  "battery_window_s")
COST_AXES = ("extra_energy_megawatt_hours_per_day", "throughput_loss_pct",
             "storage_megawatt_hours")


@dataclass(frozen=True)
class MitigationOption:
    """One point of the mitigation space (0 / False: off).

    Attributes
    ----------
    percent_tmp_floor, ramp_up_rate_w_per_s, ramp_down_rate_w_per_s,
    ramp_down_hysteresis_ms, secondary_power_floor_w, primary_floor_act_win_mult,
    primary_floor_tar_win_mult, primary_floor_act_offset_w : float
        The NVML power-smoothing profile, NVML's names and units
        (:class:`~powerlab.levers.smoothing.SmoothingProfile`; the total module
        power is taken as the GPU's TDP): floor [% of TMP], ramp rates [W/s], ramp-down
        hysteresis [ms], secondary floor [W], floor window multipliers [-], activation
        offset [W].  Blackwell or newer only.
    filler : bool
        A filler workload holds GPU power at the compute level during communication waits.
    stagger_starts_s : float
        Jobs that start together start this far apart, in file order [s].
    storage_technology : str
        Class of the storage (:data:`~powerlab.levers.storage.TECHNOLOGIES`:
        C-rate, state-of-charge bounds, converter response); ``""`` without storage.
    battery_power_megawatts, battery_energy_megawatt_hours : float
        Storage at the point of interconnection [MW], [MWh] (0: none).
    battery_round_trip_efficiency : float
        The class's [-].
    battery_window_s : float
        Trailing moving average the storage holds the grid to [s].
    """

    percent_tmp_floor: float = 0.0
    ramp_up_rate_w_per_s: float = 0.0
    ramp_down_rate_w_per_s: float = 0.0
    ramp_down_hysteresis_ms: float = 0.0
    secondary_power_floor_w: float = 0.0
    primary_floor_act_win_mult: float = 0.0
    primary_floor_tar_win_mult: float = 0.0
    primary_floor_act_offset_w: float = 0.0
    filler: bool = False
    stagger_starts_s: float = 0.0
    storage_technology: str = ""
    battery_power_megawatts: float = 0.0
    battery_energy_megawatt_hours: float = 0.0
    battery_round_trip_efficiency: float = 0.9
    battery_window_s: float = 60.0

    @property
    def smoothing(self) -> bool:
        """Whether GPU power smoothing is on."""
        return MITIGATIONS.get("smoothing").is_on(self)

    @property
    def profile(self) -> SmoothingProfile:
        """The NVML power-smoothing profile of the option."""
        # the option's columns carry the profile's NVML names: one list, the profile's
        return SmoothingProfile(**{f.name: getattr(self, f.name)
                                   for f in dataclasses.fields(SmoothingProfile)})

    @property
    def battery(self) -> bool:
        """Whether storage is on."""
        return STORAGE.is_on(self)

    def mitigations(self) -> tuple:
        """The mitigations the option switches on, in the order of its description
        (:data:`~powerlab.levers.registry.MITIGATIONS`)."""
        return tuple(m for m in MITIGATIONS.objects() if m.is_on(self))

    def requires(self) -> str:
        """The hardware the option needs (``""``: any site)."""
        return "; ".join(r for m in self.mitigations() if (r := m.requires(self)))

    def label(self) -> str:
        """Short human description."""
        return " + ".join(m.label(self) for m in self.mitigations()) or "none"


@dataclass(frozen=True)
class CostModel:
    """Dollar weights that order the options (illustrative assumptions).

    Attributes
    ----------
    energy_usd_per_megawatt_hour : float
        Price of extra grid energy [$/MWh].
    gpu_hour_usd : float
        Value of one GPU-hour of training [$/GPU-h]; throughput loss is priced as the
        GPU-hours it wastes.
    filler_throughput_loss_pct : float
        Throughput the filler workload costs (about 5 %, Choukse et al. 2025) [%].
    """

    energy_usd_per_megawatt_hour: float = 80.0
    gpu_hour_usd: float = 2.0
    filler_throughput_loss_pct: float = 5.0


@dataclass(frozen=True)
class SearchGrid:
    """The settings the structured search tries (see the module docstring)."""

    floor_pct_tdp: tuple[float, ...] = (0, 20, 40, 60, 80, 90)
    ramp_w_per_s: tuple[float, ...] = (0, 2000, 1000, 500, 250, 125, 60, 30, 15, 8, 4)
    hysteresis_ms: tuple[float, ...] = (0, 1000, 4000)
    filler: tuple[bool, ...] = (False, True)
    stagger_s: tuple[float, ...] = (0, 30, 120, 600)
    battery_power_fraction: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4, 0.8)
    #: durations tried per technology (None: each class's own ``durations_h``); a
    #: duration outside a class's buildable range is moved to its nearest end
    battery_duration_h: tuple[float, ...] | None = None
    battery_window_s: tuple[float, ...] = (10, 60)
    storage: tuple[str, ...] = ("li-ion", "supercapacitor", "rack-psu")

    def durations_h(self, tech: str) -> list[float]:
        """Durations tried for one storage class [h]."""
        ds = self.battery_duration_h or technology(tech).durations_h
        return sorted({clamp_duration_h(tech, d) for d in ds})

    def refined(self) -> SearchGrid:
        """A grid with a midpoint between neighbouring settings (for stability checks)."""
        def mid(vals, geometric=False):
            v = sorted(set(vals))
            out = set(v)
            for a, b in itertools.pairwise(v):
                out.add(math.sqrt(a * b) if geometric and a > 0 else (a + b) / 2)
            return tuple(sorted(out))
        rates = sorted(set(self.ramp_w_per_s) - {0})
        return dataclasses.replace(
            self, floor_pct_tdp=mid(self.floor_pct_tdp),
            ramp_w_per_s=(0, *sorted(mid(rates, True), reverse=True)),
            hysteresis_ms=mid(self.hysteresis_ms),
            battery_power_fraction=mid(self.battery_power_fraction, True))


def capital_usd_per_day(opt: MitigationOption) -> float:
    """Capital cost per day of an option's hardware (its storage, from the technology
    class) [$/d]: the mitigations' own (:meth:`~powerlab.levers.lever.Mitigation.capital_usd_per_day`)."""
    return sum(m.capital_usd_per_day(opt) for m in MITIGATIONS.objects())


def option_from_row(row) -> MitigationOption:
    """The :class:`MitigationOption` of an evaluated option's row (the mitigations undo
    their tidied columns; each field takes its default's type)."""
    kw = {f.name: row[f.name] for f in dataclasses.fields(MitigationOption)}
    for m in MITIGATIONS.objects():
        m.restore_fields(kw)
    return MitigationOption(**{f.name: type(f.default)(kw[f.name])
                               for f in dataclasses.fields(MitigationOption)})


def pareto_front(frame: pd.DataFrame, axes=COST_AXES) -> np.ndarray:
    """Boolean mask of the rows no other row dominates (<= on every axis, < on one)."""
    v = frame[list(axes)].to_numpy(float)
    v = np.round(v, 9)
    keep = np.ones(len(v), dtype=bool)
    for i in range(len(v)):
        le = (v <= v[i]).all(axis=1)
        lt = (v < v[i]).any(axis=1)
        if (le & lt).any():
            keep[i] = False
    # among identical cost vectors keep the first
    _, first = np.unique(v, axis=0, return_index=True)
    dup = np.zeros(len(v), dtype=bool)
    dup[first] = True
    return keep & dup
