"""Step 3 of the demo, mitigations: a power floor, a GPU ramp limit and a battery compared
on the demo scenario (:func:`powerlab.site.mitigations.compare_mitigations`): what each
removes of the swings and ramps, and at what cost."""

from __future__ import annotations

import pandas as pd

from ..site.mitigations import compare_mitigations
from ..site.scenario import Battery, Mitigations

__all__ = ["DEMO_MITIGATIONS", "mitigation_table"]

#: The mitigations the demo compares, by the name its report shows.
DEMO_MITIGATIONS = {
    "power floor 60% TDP": Mitigations(gpu_power_floor_pct_tdp=60.0),
    "GPU ramp limit 2 kW/s": Mitigations(gpu_ramp_limit_w_per_s=2000.0),
    "battery 15 MW / 5 MWh": Mitigations(battery=Battery(
        power_megawatts=15.0, energy_megawatt_hours=5.0, window_s=120.0)),
}


def mitigation_table(scen, seed: int) -> pd.DataFrame:
    """Power floor, GPU ramp limit and battery compared on three draws."""
    return compare_mitigations(scen, dict(DEMO_MITIGATIONS), draws=3, seed=seed)
