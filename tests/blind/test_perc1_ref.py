"""Self-test of the blind PERC1 mapping: physical properties only."""

import math

import pytest

from tests.blind.perc1_ref import perc1_parameters, terminal_power

BASE = dict(
    p_mw=100.0, power_factor=0.98, psu_holdup_s=0.02, psu_undervoltage_cutout_pu=0.75,
    psu_restart_delay_s=120.0, psu_restart_ramp_s=60.0, ups_share=0.6, ups_transfer_pu=0.85,
    frequency_low_trip_hz=57.0, frequency_high_trip_hz=63.0, f0_hz=60.0,
)


def test_power_and_q():
    p = perc1_parameters(BASE)
    assert p["MWinit"] == 100.0
    assert p["QPRatio"] == pytest.approx(math.tan(math.acos(0.98)))
    assert p["Mvarinit"] == pytest.approx(100.0 * p["QPRatio"])
    assert sum(x["MW"] for x in p["paths"].values()) == pytest.approx(100.0)
    lead = perc1_parameters({**BASE, "power_factor_leading": True})
    assert lead["Mvarinit"] == pytest.approx(-p["Mvarinit"])
    assert perc1_parameters({**BASE, "power_factor": 1.0})["Mvarinit"] == 0.0


def test_all_behind_ups_no_load_loss():
    p = perc1_parameters({**BASE, "ups_share": 1.0})
    assert p["final_fraction"] == 1.0
    for v in (0.0, 0.5, 0.8):
        for sag in (0.05, 1.0, 60.0):  # within the 300 s autonomy
            assert terminal_power(p, v, sag, 1000.0) == pytest.approx(100.0)
            assert terminal_power(p, v, sag, -0.01) == 0.0  # battery carries it


def test_zero_volt_zero_power():
    for share in (0.0, 0.5, 1.0):
        p = perc1_parameters({**BASE, "ups_share": share})
        assert terminal_power(p, 0.0, 1.0, -0.5) == 0.0
        assert terminal_power(p, 0.0, 0.01, -0.005) == 0.0


def test_holdup_ride_through_and_trip():
    p = perc1_parameters({**BASE, "ups_share": 0.0})
    assert terminal_power(p, 0.0, 0.015, 0.0) == pytest.approx(100.0)  # within 20 ms hold-up
    assert terminal_power(p, 0.0, 0.1, 10.0) == 0.0  # tripped, still booting
    assert terminal_power(p, 0.0, 0.1, 150.0) == pytest.approx(50.0)  # half-way up the ramp
    assert terminal_power(p, 0.0, 0.1, 500.0) == pytest.approx(100.0)
    assert terminal_power(p, 0.9, 10.0, 0.0) == pytest.approx(100.0)  # above cut-out: no effect


def test_restart_fraction_and_mixed():
    p = perc1_parameters({**BASE, "psu_restart_fraction": 0.5})
    assert p["final_fraction"] == pytest.approx(1 - 0.4 * 0.5)
    assert terminal_power(p, 0.0, 1.0, 1e4) == pytest.approx(80.0)
    # shallow sag between the PSU cut-out and the UPS transfer: only UPS path leaves
    assert terminal_power(p, 0.8, 1.0, -0.1) == pytest.approx(40.0)
    assert terminal_power(p, 0.8, 1.0, 1e4) == pytest.approx(100.0)


def test_frequency_trip():
    p = perc1_parameters(BASE)
    d = p["paths"]["direct"]
    assert d["Fl"] == pytest.approx(0.95) and d["Fh"] == pytest.approx(1.05)
    assert terminal_power(p, 1.0, 1.0, -0.5, f_pu=0.94) == 0.0
    assert terminal_power(p, 1.0, 1.0, -0.5, f_pu=0.97) == pytest.approx(100.0)


def test_validation():
    with pytest.raises(KeyError):
        perc1_parameters({k: v for k, v in BASE.items() if k != "ups_share"})
    with pytest.raises(ValueError):
        perc1_parameters({**BASE, "power_factor": 1.2})
    with pytest.raises(ValueError):
        perc1_parameters({**BASE, "frequency_low_trip_hz": 61.0})
