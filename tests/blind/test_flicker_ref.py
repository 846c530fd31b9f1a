"""Self-test of the blind reference flickermeter against IEC 61000-4-15 test points.

Table 5 of IEC 61000-4-15 (rectangular voltage changes giving Pst = 1.00 +- 5 %),
dV/V in % (peak-to-peak relative change; cpm = changes per minute, two changes per
period), as tabulated in M. Sira's verification script (qwtb/qwtb,
qwtb/alg_flicker_sim/verify_flicker_sim.m, "IEC table 5"):

    cpm                 1      2      7      39     110    1620   4000/4800
    230 V 50 Hz  (a)  2.724  2.211  1.459  0.906  0.725  0.402  2.40  (4000)
                 (b)  2.715  2.191  1.450  0.894  0.722  0.407  2.343 (4000)
    120 V 60 Hz  (a)  3.166  2.568  1.695  1.044  0.841  0.547  4.834 (4800)
                 (b)  3.181  2.564  1.694  1.040  0.844  0.548  4.837 (4800)
    120 V 50 Hz  (b)  3.178  2.561  1.694  1.045  0.844  0.545  3.426 (4000)
    230 V 60 Hz  (b)  2.719  2.194  1.450  0.895  0.723  0.409  3.263 (4800)

(a) the script's "ed. 1 + A1 (2003)" column, (b) its "ed. 2 (2010)" column; the
qwtb example (alg_example.m) cites 39 cpm 0.894 % as "EN 61000-4-15/A1", so the
edition labels are uncertain; both columns are within 1.3 % of each other and
both are checked. Table 1 reference: 8.8 Hz sinusoidal, 0.250 % (230 V) or
0.321 % (120 V) gives max Pinst = 1.
"""

import numpy as np
import pytest

from tests.blind import flicker_ref as F

CPM = [1, 2, 7, 39, 110, 1620]
TABLE5 = {
    (230, 50): {"a": [2.724, 2.211, 1.459, 0.906, 0.725, 0.402], "b": [2.715, 2.191, 1.450, 0.894, 0.722, 0.407]},
    (120, 60): {"a": [3.166, 2.568, 1.695, 1.044, 0.841, 0.547], "b": [3.181, 2.564, 1.694, 1.040, 0.844, 0.548]},
    (120, 50): {"b": [3.178, 2.561, 1.694, 1.045, 0.844, 0.545]},
    (230, 60): {"b": [2.719, 2.194, 1.450, 0.895, 0.723, 0.409]},
}
HIGH_CPM = [  # (lamp, mains, cpm, dV/V %), waveform input only
    (230, 50, 4000, 2.40), (230, 50, 4000, 2.343), (120, 60, 4800, 4.834),
    (120, 50, 4000, 3.426), (230, 60, 4800, 3.263),
]
DURATION = 620.0  # 20 s settling + one 10-min interval


@pytest.mark.parametrize("lamp,mains,col", [(k[0], k[1], c) for k, v in TABLE5.items() for c in v])
def test_table5_rms_series(lamp, mains, col):
    fs = 400.0
    for cpm, dvv in zip(CPM, TABLE5[(lamp, mains)][col]):
        x = F.rectangular_test_signal(cpm, dvv, fs, DURATION, f_mains=mains, v_rms=lamp, kind="rms")
        assert F.pst(x, fs, mains, lamp) == pytest.approx(1.0, abs=0.05), (cpm, dvv)


@pytest.mark.parametrize("cpm,dvv", list(zip(CPM, TABLE5[(230, 50)]["a"]))[::2])
def test_table5_waveform_230(cpm, dvv):
    fs = 2000.0
    x = F.rectangular_test_signal(cpm, dvv, fs, DURATION, 50, 230.0, kind="waveform")
    assert F.pst(x, fs, 50, 230) == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("lamp,mains,cpm,dvv", HIGH_CPM)
def test_table5_high_rate_waveform(lamp, mains, cpm, dvv):
    # 4 kHz: at 2 kHz the sampled square-wave edges of a 40 Hz modulation alias
    # enough to move Pst by 7-9 % (the test signal, not the meter)
    fs = 4000.0
    x = F.rectangular_test_signal(cpm, dvv, fs, DURATION, mains, float(lamp), kind="waveform")
    assert F.pst(x, fs, mains, lamp) == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("lamp,mains,dvv", [(230, 50, 0.250), (120, 60, 0.321)])
def test_table1_reference_sinusoid(lamp, mains, dvv):
    fs = 2000.0
    t = np.arange(int(40 * fs)) / fs
    v = lamp * np.sqrt(2) * (1 + dvv / 200 * np.sin(2 * np.pi * 8.8 * t)) * np.sin(2 * np.pi * mains * t)
    p = F.instantaneous_flicker(v, fs, mains, lamp)
    assert p[len(p) // 2:].max() == pytest.approx(1.0, abs=0.02)


def test_relative_and_auto_inputs_agree():
    fs = 400.0
    rel = F.rectangular_test_signal(39, 0.906, fs, DURATION, kind="relative")
    rms = F.rectangular_test_signal(39, 0.906, fs, DURATION, kind="rms")
    assert F.pst(rel, fs) == pytest.approx(F.pst(rms, fs), rel=1e-6)
    assert F.pst(rel, fs, kind="relative") == pytest.approx(F.pst(rel, fs), rel=1e-12)


def test_steady_voltage_has_no_flicker():
    fs = 400.0
    assert F.pst(np.full(int(DURATION * fs), 230.0), fs) < 1e-3


def test_pst_scales_linearly_with_fluctuation():
    fs = 400.0
    a = F.pst(F.rectangular_test_signal(110, 0.725, fs, DURATION, kind="rms"), fs)
    b = F.pst(F.rectangular_test_signal(110, 1.45, fs, DURATION, kind="rms"), fs)
    assert b / a == pytest.approx(2.0, rel=0.03)


def test_plt():
    assert F.plt([1.0] * 12) == pytest.approx(1.0)
    assert F.plt([0.0] * 11 + [12 ** (1 / 3)]) == pytest.approx(1.0)
    assert F.plt(np.r_[np.full(12, 5.0), np.full(12, 2.0)]) == pytest.approx(2.0)
