"""PERC1 parameters from the equipment model and the filled data list
(powerlab.interconnect.perc1, powerlab.interconnect.datalist)."""

import numpy as np
import pandas as pd
import pytest

from powerlab.interconnect.datalist import AREAS, ITEMS, data_list
from powerlab.interconnect.equipment import SiteEquipment, parse_equipment
from powerlab.interconnect.perc1 import (
    MAPPING,
    equipment_parameters,
    perc1_from_parameters,
    perc1_parameters,
    write_perc1_dyd,
)


def test_perc1_mapping_known_answers():
    # PowerWorld PERC1 (V24): after reconnecting a path returns to
    # 1 - Fcease + Frecon * Fcease; with all ceased load reconnecting that is 1.
    eq = parse_equipment({"ups": {"topology": "double_conversion", "it_share": 1.0,
                                  "transfer_threshold_pu": 0.8, "walk_in_s": 20.0,
                                  "return_delay_s": 2.0, "input_power_factor": 1.0}})
    r = perc1_from_parameters(equipment_parameters(eq, 0.75, 40.0))
    u = r["ups"]
    assert u["Vcease"] == 0.8 and u["Vrecon"] == 0.8 and u["Trecon"] == 2.0
    assert u["Trmp"] == 20.0 and u["Fcease"] == 1.0 and u["Tvalid"] == 300.0
    assert 1 - u["Fcease"] + u["Frecon"] * u["Fcease"] == 1.0
    assert u["QPRatio"] == pytest.approx(0.0)          # unity-PF rectifier
    assert u["MWinit"] == pytest.approx(30.0) and r["direct"]["MWinit"] == 0.0
    # no UPS: the PSUs' constant-power limit ceases the load after their hold-up at
    # their loading (CRPS 10 ms at rated load -> 20 ms at half load)
    bare = parse_equipment({"ups": {"topology": "none"},
                            "psu": {"holdup_s": 0.01, "loading": 0.5,
                                    "current_limit_pu": 1.25,
                                    "power_factor_curve": [[0, 0.8], [1, 0.8]],
                                    "reactive_sign": 1}})
    d = perc1_from_parameters(equipment_parameters(bare))["direct"]
    assert d["fraction"] == 1.0 and d["Vcease"] == pytest.approx(0.8)
    assert d["Tcease"] == pytest.approx(0.02) and d["Trecon"] == 300.0
    assert d["QPRatio"] == pytest.approx(0.75)            # tan(acos(0.8))
    # frequencies in pu of nominal: the relays (57.0 / 61.8 Hz at 60 Hz) bound the
    # PSUs' 47-63 Hz
    assert d["Fl"] == pytest.approx(0.95) and d["Fh"] == pytest.approx(1.03)


def test_perc1_table_documents_every_parameter(tmp_path):
    t = perc1_parameters(SiteEquipment(), 0.8, 20.0)
    assert set(t.loc[t["path"] == "ups", "parameter"]) == set(MAPPING)
    assert set(t["path"]) == {"ups", "direct"}
    assert t["from"].str.len().min() >= 1 and t["assumption"].str.len().min() > 0
    ups = t[t["path"] == "ups"].set_index("parameter")
    assert ups.loc["Fcease", "name_confirmed"] and not ups.loc["Vcease", "name_confirmed"]
    text = write_perc1_dyd(t, tmp_path / "p.dyd", bus=101).read_text()
    rec = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert rec[0].startswith('perc1 101 "DCLOAD" 138.00 "U " : #9')
    assert all(ln.endswith(" /") for ln in rec[:-1]) and not rec[-1].endswith("/")
    assert '"qpratio"' in text and "check names and order" in text
    assert '"D "' not in text               # the direct path carries no load here


@pytest.mark.parametrize("seed", range(5))
def test_perc1_stable_under_random_equipment(seed):
    # every value finite (Tvalid of the direct path: inf), voltages in (0, 1], times >= 0
    rng = np.random.default_rng(seed)
    eq = parse_equipment({
        "psu": {"holdup_s": float(rng.uniform(0.005, 0.03)),
                "loading": float(rng.uniform(0.2, 1.0))},
        "ups": {"topology": str(rng.choice(["double_conversion", "line_interactive",
                                            "standby", "none"])),
                "it_share": float(rng.uniform(0, 1))}})
    r = perc1_from_parameters(equipment_parameters(eq, float(rng.uniform(0.5, 1)), 10.0))
    for path, rec in r.items():
        vals = {k: v for k, v in rec.items() if k != "Tvalid"}
        assert all(np.isfinite(v) for v in vals.values())
        assert 0 < rec["Vcease"] <= 1 and 0 < rec["Vrecon"] <= 1 and rec["Tcease"] >= 0
    assert r["ups"]["fraction"] + r["direct"]["fraction"] == pytest.approx(1.0)


def test_data_list_order_values_and_needs():
    eq = parse_equipment({"psu": {"holdup_s": 0.016},
                          "poi": {"short_circuit_mva": 2500.0, "x_over_r": 12.0}})
    dl = data_list(eq, {"peak_megawatts": "24.6 MW"})
    assert list(dl["item"]) == [i[1] for i in ITEMS] and len(dl) == len(ITEMS)
    # the areas in the order of the alert's title
    order = [AREAS.index(a) for a in dl["area"]]
    assert order == sorted(order) and set(dl["area"]) == set(AREAS)
    row = dl.set_index("item")
    assert row.loc["Server PSU hold-up time", "status"] == "given"
    assert "0.016" in row.loc["Server PSU hold-up time", "value"]
    assert row.loc["Short-circuit level and X/R at the point of interconnection",
                   "status"] == "given"
    ups = row.loc["UPS topology, transfer threshold and transfer time", "value"]
    assert ups.startswith("needs: equipment.ups.topology") and "model assumes" in ups
    assert row.loc["Facility peak active power [MW]", "value"] == "24.6 MW"
    assert row.loc["Dynamic model: PERC1 parameter set (minimum model)",
                   "value"].startswith("needs:")
    assert (dl["value"].str.len() > 0).all()
    assert isinstance(dl, pd.DataFrame)
