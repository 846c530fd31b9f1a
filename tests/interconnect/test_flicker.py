"""The IEC 61000-4-15 flickermeter against the standard's test points."""

import math

import numpy as np
import pytest

from powerlab.exceptions import AnalysisError
from powerlab.interconnect import flicker as fl

# IEC 61000-4-15:2010 Table 5, "Test specifications for flickermeter classifier"
# (as reproduced in the Siemens SICAM P850/P855 manual E50417-H1040-C482-A9, Table 6-4):
# rectangular voltage changes per minute -> dV/V [%] that gives Pst = 1.00 +- 5 %,
# columns 120-V lamp 50-Hz system, 120-V lamp 60-Hz, 230-V lamp 50-Hz, 230-V lamp 60-Hz.
TABLE5 = {
    1: (3.178, 3.181, 2.715, 2.719),
    2: (2.561, 2.564, 2.191, 2.194),
    7: (1.694, 1.694, 1.450, 1.450),
    39: (1.045, 1.040, 0.894, 0.895),
    110: (0.844, 0.844, 0.722, 0.723),
    1620: (0.545, 0.548, 0.407, 0.409),
}
# the same table's last rows: 4000 changes/min on 50-Hz systems, 4800 on 60-Hz systems
TABLE5_FAST = [(4000, "120V", 50, 3.426), (4000, "230V", 50, 2.343),
               (4800, "120V", 60, 4.837), (4800, "230V", 60, 3.263)]
COLUMNS = [("120V", 50), ("120V", 60), ("230V", 50), ("230V", 60)]


def rectangular(cpm, dv_pct, rate_hz, duration_s=600.0, first_change_s=2.0):
    """Relative RMS voltage with rectangular changes (50 % duty), the first change
    within 5 s of the start (Table 5, note 2)."""
    t = np.arange(round(duration_s * rate_hz)) / rate_hz
    half = 60.0 / cpm
    high = np.floor((t - first_change_s) / half).astype(int) % 2 == 0
    return t, 1.0 + dv_pct / 200.0 * np.where(high, 1.0, -1.0)


@pytest.mark.parametrize("cpm", sorted(TABLE5))
@pytest.mark.parametrize("col", range(4))
def test_table5_rectangular_envelope_gives_pst_one(cpm, col):
    lamp, f0 = COLUMNS[col]
    _, r = rectangular(cpm, TABLE5[cpm][col], 800.0)
    p, rate = fl.pinst_from_envelope(r, 800.0, lamp=lamp, f0_hz=f0)
    got = fl.pst(p, rate)
    assert len(got) == 1
    assert got[0] == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("cpm,lamp,f0,dv", [(c, COLUMNS[i][0], COLUMNS[i][1], TABLE5[c][i])
                                            for c in (1, 39, 1620) for i in (0, 3)]
                         + TABLE5_FAST)
def test_table5_rectangular_waveform_gives_pst_one(cpm, lamp, f0, dv):
    # the full chain on the voltage waveform (block 2 squares the instantaneous voltage)
    rate = 3200.0 if f0 == 50 else 3840.0
    t, r = rectangular(cpm, dv, rate)
    u = 230.0 * math.sqrt(2) * r * np.sin(2 * np.pi * f0 * t)
    p = fl.pinst_from_waveform(u, rate, lamp=lamp, f0_hz=f0)
    assert fl.pst(p, rate)[0] == pytest.approx(1.0, abs=0.05)


def test_reference_sinusoid_gives_unit_pinst():
    # IEC 61000-4-15:2010 Table 1: 8.8 Hz sinusoidal, dV/V = 0.250 % (230-V lamp, 50 Hz)
    # -> Pinst,max = 1.00 (the table allows +- 8 %)
    rate = 800.0
    t = np.arange(round(60 * rate)) / rate
    r = 1 + 0.0025 / 2 * np.sin(2 * np.pi * 8.8 * t)
    p, _ = fl.pinst_from_envelope(r, rate, lamp="230V", f0_hz=50)
    assert p[round(20 * rate):].max() == pytest.approx(1.0, abs=0.01)


def test_pst_scales_with_the_fluctuation_and_is_zero_without_one():
    rate = 800.0
    _, r1 = rectangular(110, 0.5, rate)
    _, r2 = rectangular(110, 1.0, rate)
    p1 = fl.pst(fl.pinst_from_envelope(r1, rate)[0], rate)[0]
    p2 = fl.pst(fl.pinst_from_envelope(r2, rate)[0], rate)[0]
    assert p2 / p1 == pytest.approx(2.0, rel=0.02)       # Pst is linear in dV/V
    flat = fl.pst(fl.pinst_from_envelope(np.ones(round(600 * rate)), rate)[0], rate)[0]
    assert flat < 0.02


@pytest.mark.parametrize("tick_s", [0.01, 0.005, 0.0025])
def test_pst_stable_under_the_input_sampling_interval(tick_s):
    # 5 Hz sinusoidal fluctuation of 0.4 %: the same Pst from 100, 200 and 400 Hz series
    # (band-limited resampling to the chain's rate)
    def run(ts):
        t = np.arange(round(600 / ts)) * ts
        r = 1 + 0.004 / 2 * np.sin(2 * np.pi * 5.0 * t)
        p, rate = fl.pinst_from_envelope(r, 1 / ts)
        return fl.pst(p, rate)[0]
    assert run(tick_s) == pytest.approx(run(1 / 1600), rel=0.01)


def test_plt_is_the_cubic_mean_of_twelve_pst():
    assert fl.plt_from_pst([0.8] * 12) == pytest.approx(0.8)
    v = [1.0] * 6 + [0.0] * 6
    assert fl.plt_from_pst(v) == pytest.approx(0.5 ** (1 / 3))
    with pytest.raises(AnalysisError, match="12 consecutive"):
        fl.plt_from_pst([1.0] * 11)


def test_bad_inputs_are_refused():
    with pytest.raises(AnalysisError, match="800 Hz or faster"):
        fl.pinst_from_waveform(np.ones(100), 100.0)
    with pytest.raises(AnalysisError, match="10 minutes|600 s"):
        fl.pst(np.ones(1000), 800.0)
    with pytest.raises(AnalysisError, match="lamp"):
        fl.FlickerOptions(lamp="100V")
