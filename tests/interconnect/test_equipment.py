"""The site's electrical front end (powerlab.interconnect.equipment)."""

import math

import numpy as np
import pytest
import yaml

from powerlab.exceptions import ScenarioError
from powerlab.interconnect.equipment import (
    PowerSupplies,
    SiteEquipment,
    equipment_from_scenario,
    parse_equipment,
    pq_at_poi,
    voltage_at_poi_pu,
)
from powerlab.site.scenario import read_scenario


def test_holdup_energy_balance():
    # Intel CRPS spec: hold-up 10 ms at 100 % load.  At 50 % load the bulk capacitor's
    # energy lasts twice as long with no input (E = P_rated * t_holdup).
    psu = PowerSupplies(holdup_s=0.010, loading=0.5, current_limit_pu=1.4)
    assert psu.dropout_s(0.0) == pytest.approx(0.020)
    # with input at half the constant-power voltage the grid carries half: twice as long
    assert psu.dropout_s(0.5 / 1.4) == pytest.approx(0.040)
    assert math.isinf(psu.dropout_s(0.72))      # above 1/1.4 pu: constant power


def test_pq_unity_paths_and_sign():
    eq = parse_equipment({"ups": {"topology": "none"},
                          "psu": {"power_factor_curve": [[0.0, 0.8], [1.0, 0.8]],
                                  "reactive_sign": 1},
                          "auxiliaries": {"power_factor": 1.0}})
    p, q = pq_at_poi(np.array([10e6]), np.array([8e6]), eq)
    # pf 0.8 -> Q/P = 0.75 on the 8 MW of IT; aux at unity adds nothing
    assert p[0] == 10e6 and q[0] == pytest.approx(0.75 * 8e6)
    eq2 = parse_equipment({"ups": {"topology": "double_conversion", "it_share": 1.0,
                                   "input_power_factor": 1.0},
                           "auxiliaries": {"power_factor": 1.0}})
    assert pq_at_poi(np.array([10e6]), np.array([8e6]), eq2)[1][0] == pytest.approx(0.0)


def test_voltage_drop_pure_reactance():
    # X/R -> infinity: dV = Q X / V^2 = Q / S_sc (per unit); 20 Mvar on 2000 MVA -> 1 %
    eq = parse_equipment({"poi": {"short_circuit_mva": 2000.0, "x_over_r": 1e9}})
    v = voltage_at_poi_pu(np.array([0.0]), np.array([20e6]), eq.poi)
    assert v[0] == pytest.approx(0.99, abs=1e-9)
    with pytest.raises(ScenarioError, match="short_circuit_mva"):
        voltage_at_poi_pu([0.0], [0.0], SiteEquipment().poi)


def test_yaml_override_and_errors():
    eq = parse_equipment({"psu": {"holdup_s": 0.02}})
    assert eq.psu.holdup_s == 0.02 and eq.overridden == ("equipment.psu.holdup_s",)
    assert eq.ups == SiteEquipment().ups
    with pytest.raises(ScenarioError, match="did you mean 'topology'"):
        parse_equipment({"ups": {"topolgy": "none"}})
    with pytest.raises(ScenarioError, match="equipment.ups"):
        parse_equipment({"ups": {"topology": "flywheel"}})
    with pytest.raises(ScenarioError, match="x increasing"):
        parse_equipment({"psu": {"power_factor_curve": [[0.5, 0.9], [0.2, 0.9]]}})


def test_scenario_carries_equipment(tmp_path):
    src = "data/scenarios/llama3_16k_h100.yaml"
    d = yaml.safe_load(open(src))
    d["equipment"] = {"ups": {"it_share": 0.5}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    scen = read_scenario(p)
    assert equipment_from_scenario(scen).ups.it_share == 0.5
    assert equipment_from_scenario(read_scenario(src)) == SiteEquipment()
    hash(scen)      # the raw mapping does not make the scenario unhashable
