"""Voltage change at the point of interconnection: dV/V = -(R dP + X dQ) / V^2."""

import math

import numpy as np
import pytest

from powerlab.exceptions import AnalysisError
from powerlab.interconnect.voltagechange import (
    GridStrength,
    flicker_at_poi,
    reactive_power_w,
    relative_voltage,
    voltage_steps,
)


def test_relative_voltage_change_known_answer():
    # IEC/TR 61000-3-7:2008 6.3: dV/V = (R dP + X dQ) / V^2 = (dP cos psi + dQ sin psi)/S_sc.
    # 1000 MVA, X/R = 10, a 20 MW step at unity power factor: 20 cos(atan 10)/1000
    g = GridStrength(short_circuit_megavolt_amperes=1000, x_over_r=10, power_factor=1.0)
    p = np.r_[np.full(10, 50e6), np.full(10, 70e6)]
    v = relative_voltage(p, g)
    assert (1 - v[-1]) * 100 == pytest.approx(2.0 / math.sqrt(101), rel=1e-9)  # 0.199 %
    # with 10 Mvar more: + 10 sin(atan 10) / 1000
    v = relative_voltage(p, g, reactive_var=np.r_[np.zeros(10), np.full(10, 10e6)])
    assert (1 - v[-1]) * 100 == pytest.approx((20 + 100) / math.sqrt(101) / 10, rel=1e-9)


def test_reactive_power_from_power_factor():
    assert reactive_power_w([10e6], 0.8)[0] == pytest.approx(7.5e6)
    assert reactive_power_w([10e6], 1.0)[0] == 0.0


def test_steps_merge_a_ramp_and_sort_by_size():
    v = np.r_[np.ones(5), 0.999, 0.998, 0.997, np.full(5, 0.997), np.full(5, 0.9985)]
    s = voltage_steps(v, 0.1)
    assert list(s["dv_pct"].round(6)) == [-0.3, 0.15]
    assert s["duration_s"].iloc[0] == pytest.approx(0.3)


def test_flicker_at_poi_refuses_pst_on_a_short_record_and_says_so():
    p = np.r_[np.full(500, 10e6), np.full(500, 30e6)]
    res = flicker_at_poi(p, 0.01, GridStrength(500, 8))
    assert len(res.pst) == 0 and math.isnan(res.plt)
    assert any("10 minutes" in n for n in res.notes)
    assert res.max_dv_pct < 0                      # load up, voltage down
    assert "500 MVA" in res.summary_frame()["source"].iloc[0]
    assert "Voltage change" in str(res.summary())


def test_flicker_at_poi_of_a_stepping_site_scales_with_grid_strength():
    # a 6-s step pattern of 20 MW at a 0.05-s tick for 10 min: Pst halves when the
    # short-circuit power doubles (first-order dV/V is inversely proportional to S_sc)
    t = np.arange(round(600 / 0.05)) * 0.05
    p = 40e6 + 20e6 * (np.floor(t / 3.0) % 2)
    a = flicker_at_poi(p, 0.05, GridStrength(2000, 10))
    b = flicker_at_poi(p, 0.05, GridStrength(4000, 10))
    assert len(a.pst) == 1
    assert b.pst[0] / a.pst[0] == pytest.approx(0.5, rel=0.02)
    assert any("resolves fluctuations only up to 10 Hz" in n for n in a.notes)


def test_bad_grid_is_refused():
    with pytest.raises(AnalysisError, match="short_circuit"):
        GridStrength(short_circuit_megavolt_amperes=0)
    with pytest.raises(AnalysisError, match="as long as"):
        relative_voltage(np.ones(5), GridStrength(), reactive_var=np.ones(4))
