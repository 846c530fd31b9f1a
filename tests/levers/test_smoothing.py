"""NVML power smoothing (powerlab.levers.smoothing): the model tick by tick against its
definition, the hysteresis, NVML's parameter names and units, the floors."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from powerlab.interconnect import MitigationOption
from powerlab.levers.smoothing import SmoothingOptions, SmoothingProfile, smooth_power


def _brute(x, tick, floor, up, down, hyst_s, active):
    """The smoothing model tick by tick (the definition in levers/smoothing.py)."""
    hold = math.floor(hyst_s / tick + 0.5 + 1e-9)
    y = None
    below = 0
    out = np.empty(len(x))
    for k, v in enumerate(x):
        t = max(v, floor) if (floor > 0 and active[k]) else v
        if y is None:
            y = t
        elif t >= y:
            below = 0
            y = t if up <= 0 else min(t, y + up * tick)
        else:
            below += 1
            if below > hold:
                y = t if down <= 0 else max(t, y - down * tick)
        out[k] = y
    return out


@pytest.mark.parametrize("params", [(0, 0, 0, 0), (400, 0, 0, 0), (0, 300, 0, 0),
                                    (0, 0, 200, 0), (0, 500, 100, 0.5), (420, 50, 80, 1.2),
                                    (630, 0, 0, 3.0)])
def test_smoothing_matches_its_definition_tick_by_tick(params):
    rng = np.random.default_rng(7)
    lv = rng.choice([75.0, 250.0, 650.0, 110.0], size=60)
    x = np.repeat(lv, rng.integers(1, 40, size=60))
    active = np.ones(len(x), bool)
    active[:30] = False
    floor, up, down, hyst = params
    got = smooth_power(x, 0.1, floor_w=floor, ramp_up_w_per_s=up, ramp_down_w_per_s=down,
                       hysteresis_s=hyst, active=active)
    want = _brute(x, 0.1, floor, up, down, hyst, active)
    np.testing.assert_allclose(got, want, atol=1e-6)
    if up or down:
        d = np.diff(got)
        assert d.max() <= (up or np.inf) * 0.1 + 1e-6
        assert -d.min() <= (down or np.inf) * 0.1 + 1e-6


def test_hysteresis_holds_power_through_a_short_dip():
    x = np.r_[np.full(50, 650.0), np.full(9, 250.0), np.full(50, 650.0)]   # 0.9-s dip
    y = smooth_power(x, 0.1, hysteresis_s=1.0)
    assert (y == 650.0).all()                               # held: the grid sees nothing
    y = smooth_power(x, 0.1, hysteresis_s=0.5)
    assert y.min() == 250.0 and (y[50:55] == 650.0).all()   # held 0.5 s, then drops


def test_nvml_profile_parameters_under_nvml_names_and_units():
    """Issue 20, item 7: "model every documented parameter under NVML's names and
    units".  NVML API reference, Power Smoothing Information: NUM_PROFILE_PARAMS 8;
    PERCENT_TMP_FLOOR 0, RAMP_UP_RATE 1, RAMP_DOWN_RATE 2, RAMP_DOWN_HYSTERESIS 3,
    SECONDARY_POWER_FLOOR 4 ("in Watts"), PRIMARY_FLOOR_ACT_WIN_MULT 5,
    PRIMARY_FLOOR_TAR_WIN_MULT 6, PRIMARY_FLOOR_ACT_OFFSET 7 ("in Watts");
    nvmlDevicePowerSmoothingUpdatePresetProfileParam: floor "as a percentage from
    00.00-100.00%", ramp rates "in W/s", hysteresis "in ms"."""
    from powerlab.levers.smoothing import NVML_PROFILE_PARAMS, SmoothingProfile

    want = {"PERCENT_TMP_FLOOR": (0, "% of TMP"), "RAMP_UP_RATE": (1, "W/s"),
            "RAMP_DOWN_RATE": (2, "W/s"), "RAMP_DOWN_HYSTERESIS": (3, "ms"),
            "SECONDARY_POWER_FLOOR": (4, "W"), "PRIMARY_FLOOR_ACT_WIN_MULT": (5, "-"),
            "PRIMARY_FLOOR_TAR_WIN_MULT": (6, "-"), "PRIMARY_FLOOR_ACT_OFFSET": (7, "W")}
    got = {m.removeprefix("NVML_POWER_SMOOTHING_PROFILE_PARAM_"): (i, u)
           for m, i, u, _ in NVML_PROFILE_PARAMS.values()}
    assert got == want
    assert [f.name for f in dataclasses.fields(SmoothingProfile)] == list(NVML_PROFILE_PARAMS)
    assert set(NVML_PROFILE_PARAMS) <= {f.name for f in dataclasses.fields(MitigationOption)}
    for _, idx, _, needs in NVML_PROFILE_PARAMS.values():
        assert needs.startswith("Blackwell or newer")
        assert ("4 profile params" in needs) == (idx < 4)


def test_secondary_floor_and_floor_windows_known_answer():
    """The floor model of levers/smoothing.py (module docstring): while a job holds
    the GPU the primary floor (PERCENT_TMP_FLOOR x TMP) applies once engaged, the
    SECONDARY_POWER_FLOOR otherwise; the primary floor engages once the mean over the
    ACT window (ACT_WIN_MULT x 1 s) reaches floor + ACT_OFFSET, and with multipliers 0
    it is engaged whenever the job holds the GPU."""
    from powerlab.levers.smoothing import SmoothingProfile

    x = np.r_[np.full(20, 100.0), np.full(20, 600.0), np.full(20, 100.0)]
    act = np.r_[np.zeros(5, bool), np.ones(55, bool)]
    p = SmoothingProfile(percent_tmp_floor=50, secondary_power_floor_w=200,
                         primary_floor_act_win_mult=0.5, primary_floor_act_offset_w=100)
    y = p.apply(x, 0.1, 700.0, active=act)
    np.testing.assert_array_equal(y[:5], 100.0)             # no job: no floor at all
    np.testing.assert_array_equal(y[5:20], 200.0)           # secondary floor
    # 5-tick means reach 450 W (350 W floor + 100 W offset) at tick 24: 3 of 5 at 600 W
    np.testing.assert_array_equal(y[20:40], 600.0)
    np.testing.assert_array_equal(y[40:], 350.0)            # engaged until the job ends
    plain = SmoothingProfile(percent_tmp_floor=50).apply(x, 0.1, 700.0, active=act)
    np.testing.assert_array_equal(plain, np.where(act, np.maximum(x, 350.0), x))


def test_smoothing_options_as_an_object_or_as_keywords():
    """smooth_power's settings are one SmoothingOptions; its fields also work as
    keywords (the calls that predate it), replacing the object's."""
    x = np.r_[np.full(20, 100.0), np.full(20, 600.0), np.full(20, 100.0)]
    o = SmoothingOptions(floor_w=300.0, ramp_up_w_per_s=500.0, hysteresis_s=0.5)
    by_kw = smooth_power(x, 0.1, floor_w=300.0, ramp_up_w_per_s=500.0, hysteresis_s=0.5)
    np.testing.assert_array_equal(smooth_power(x, 0.1, o), by_kw)
    np.testing.assert_array_equal(smooth_power(x, 0.1, o, floor_w=0.0),
                                  smooth_power(x, 0.1, ramp_up_w_per_s=500.0,
                                               hysteresis_s=0.5))
    assert by_kw[0] == 300.0 and np.diff(by_kw).max() <= 50.0 + 1e-9    # floor; 500 W/s
    with pytest.raises(TypeError, match="unknown SmoothingOptions option"):
        smooth_power(x, 0.1, floor=300.0)


def test_a_profile_in_si_units():
    """NVML's units to smooth_power's: % of TMP to W, ms to s, window multipliers times
    the 1-s base window (an assumption)."""
    p = SmoothingProfile(percent_tmp_floor=40, ramp_up_rate_w_per_s=250,
                         ramp_down_hysteresis_ms=1500, primary_floor_act_win_mult=3,
                         primary_floor_act_offset_w=20)
    assert p.options(700.0) == SmoothingOptions(
        floor_w=280.0, ramp_up_w_per_s=250.0, hysteresis_s=1.5, act_window_s=3.0,
        act_offset_w=20.0)
    assert p.options(700.0, window_base_s=2.0).act_window_s == 6.0
