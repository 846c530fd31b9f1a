"""Storage (powerlab.levers.storage): the site battery's water filling in a curtailment
plan, and the technology classes of the mitigation search; known answers by hand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from powerlab.exceptions import PowerlabError
from powerlab.interconnect import MitigationOption
from powerlab.levers.storage import storage_dispatch
from powerlab.site.scenario import Battery


def test_storage_water_filling_known_answer():
    """Definition: ``B(t) = min(P_max, max(N(t) - g, 0))`` at the least level ``g`` whose
    energy fits ``(initial_soc_fraction - soc_min_fraction) x energy``; the state of
    charge falls by exactly the energy discharged.  By hand, N = [0, 2, 4, 2, 0] MW over
    1-s ticks and 3 MJ available: ``(2 - g) 2 + (4 - g) = 3 MJ`` gives ``g = 5/3`` MW,
    B = [0, 1/3, 7/3, 1/3, 0] MW; with energy to spare, P_max = 3 MW clips the peak."""
    need = np.array([0.0, 2.0, 4.0, 2.0, 0.0]) * 1e6
    cap_mwh = 6e6 / 3.6e9                                 # 6 MJ
    bat = Battery(power_megawatts=3.0, energy_megawatt_hours=cap_mwh,
                  initial_soc_fraction=0.75, soc_min_fraction=0.25)
    b, soc = storage_dispatch(need, 1.0, bat)
    assert np.allclose(b / 1e6, [0, 1 / 3, 7 / 3, 1 / 3, 0], atol=1e-6)
    assert soc[-1] == pytest.approx(0.25 * 6e6, abs=1.0)   # 4.5 MJ - 3 MJ, at the minimum
    assert soc.min() >= 0.25 * 6e6 - 1e-6
    big = Battery(power_megawatts=3.0, energy_megawatt_hours=1.0, initial_soc_fraction=1.0)
    b2, soc2 = storage_dispatch(need, 1.0, big)
    assert np.allclose(b2 / 1e6, [0, 2, 3, 2, 0])
    assert 3.6e9 - soc2[-1] == pytest.approx(7e6)          # exactly the energy out


def test_a_20c_three_minute_li_ion_battery_is_refused():
    """Issue 20, item 8: "the cheapest option was 20 C (3-min duration) priced as ordinary
    Li-ion".  Grid Li-ion systems are built for hours (PNNL-33283, 2022: 2-10 h); powerlab
    takes 4 C (15 min) as the most power-dense Li-ion class.  The same 20 C shape is a
    product only as a supercapacitor (seconds to a minute), which it exceeds too."""
    from powerlab.levers.storage import TECHNOLOGIES, storage_battery

    li = TECHNOLOGIES["li-ion"]
    assert li.max_c_rate_per_h == 4.0 and (li.soc_min_fraction, li.soc_max_fraction) == (
        0.1, 0.9)
    bad = MitigationOption(storage_technology="li-ion", battery_power_megawatts=20.0,
                           battery_energy_megawatt_hours=1.0)
    with pytest.raises(PowerlabError, match="20 C .3 min.: the class is built with 15-600"):
        storage_battery(bad)
    with pytest.raises(PowerlabError, match="supercapacitor"):
        storage_battery(dataclasses.replace(bad, storage_technology="supercapacitor"))
    ok = storage_battery(dataclasses.replace(bad, battery_energy_megawatt_hours=5.0))
    assert (ok.soc_min_fraction, ok.soc_max_fraction, ok.initial_soc_fraction,
            ok.converter_response_s) == (0.1, 0.9, 0.5, 0.05)
