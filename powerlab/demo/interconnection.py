"""Step 5 of the demo, the interconnection study: the forecast checked against a
requirement spec, the cheapest mitigation sized on the requirements its tick can assess,
resonance screened; and the large-load study package of the bundled 16k-GPU scenario
(issue 20 section 2).  The section of the report only draws what this computes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..data import bundled_path
from ..interconnect.compliance import Compliance, comply
from ..interconnect.resonance import screen_resonance
from ..interconnect.sizing import SearchGrid, size_mitigation
from ..interconnect.studypackage import RideThrough, study_package
from ..limits.requirements import read_requirements
from ..site.scenario import read_scenario

__all__ = ["REQUIREMENTS", "InterconnectionStudy", "interconnection_study",
           "study_package_figures", "study_package_step"]

#: Requirement spec of the demo's interconnection section.
REQUIREMENTS = "choukse2025_forms.yaml"


@dataclass
class InterconnectionStudy:
    """Compliance, cheapest mitigation and resonance of one forecast (demo section)."""

    compliance: Any
    sizing: Any
    resonance: Any
    note: str
    figures: dict[str, float]


def interconnection_study(res, *, spec=None, seed: int = 1, draws: int = 3,
                          sizing_draws: int = 1) -> InterconnectionStudy:
    """Check a forecast against a requirement spec, size the cheapest mitigation on the
    requirements its tick can assess (a small search grid), and screen resonance.

    Parameters
    ----------
    res : ForecastResult
        The forecast (its first ``draws`` draws are checked; no engine rerun).
    spec : RequirementSpec or path-like, optional
        Default: the bundled ``data/requirements/choukse2025_forms.yaml``.
    seed, draws, sizing_draws : int
        Seed and draws of the mitigation search, draws checked [-].
    """
    if spec is None:
        spec = bundled_path("requirements", REQUIREMENTS)
    if not hasattr(spec, "requirements"):
        spec = read_requirements(spec)
    chk = comply(res, spec, draws=draws)
    tick = float(res.tick_s)
    sub, dropped = Compliance(spec).assessable(tick, tick, res.n_ticks * tick)
    keep = sub.requirements
    grid = SearchGrid(floor_pct_tdp=(0, 90), ramp_w_per_s=(0, 60, 15, 8, 4),
                      hysteresis_ms=(0,), filler=(False,), stagger_s=(0,),
                      battery_power_fraction=(0.4, 0.8, 1.0), battery_duration_h=(0.05,),
                      battery_window_s=(60,))
    sz = size_mitigation(res.scenario, sub, draws=sizing_draws, seed=seed, grid=grid)
    note = ""
    if dropped:
        note = (f"The mitigation search here covers the {len(keep)} requirements a "
                f"{tick:g}-s forecast can assess; {', '.join(dropped)} cannot be shown met "
                f"at this tick: run powerlab size-mitigation with --tick-s 0.01. Small "
                "search grid (floor 0/90 %, ramp 60-4 W/s, storage 40-100 % of peak), "
                f"{sizing_draws} draw(s).")
    rz = screen_resonance(chk.trace, spec) if spec.grid_modes else None
    figs = {"requirements_failed": float(len(chk.failed)),
            "requirements_total": float(len(spec.requirements))}
    if sz.found:
        c = sz.cheapest
        figs.update(mitigation_cost_usd_per_day=float(c["cost_usd_per_day"]),
                    mitigation_extra_energy_megawatt_hours_per_day=float(
                        c["extra_energy_megawatt_hours_per_day"]),
                    mitigation_throughput_loss_pct=float(c["throughput_loss_pct"]),
                    mitigation_storage_megawatt_hours=float(c["storage_megawatt_hours"]))
    return InterconnectionStudy(chk, sz, rz, note, figs)


def study_package_step(out: Path, *, hours: float, draws: int, seed: int):
    """The large-load study package of the bundled 16k-GPU scenario
    (``data/scenarios/llama3_16k_h100.yaml``, its first ``hours``) against the bundled
    requirement spec, written into ``out`` (issue 20 section 2)."""
    scen = read_scenario(bundled_path("scenarios", "llama3_16k_h100.yaml"))
    scen = scen.replace(horizon_end_utc=scen.start_utc + pd.Timedelta(hours=hours))
    pkg = study_package(scen, bundled_path("requirements", REQUIREMENTS), draws=draws,
                        seed=seed, ride_through=RideThrough(draws=2))
    return pkg, pkg.write(out)


def study_package_figures(pkg) -> dict[str, float]:
    """The study package's peak [MW] and the number of sags on which load is lost."""
    return {"study_peak_megawatts": float(pkg.per_draw["peak_power_megawatts"].max()),
            "study_ride_through_sags_losing_load": float(
                (pkg.ride_through["load_lost_megawatts_during_sag_max"] > 0).sum())}
