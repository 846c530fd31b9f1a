"""The PMU view reads an oscillation at the reference filter's analytic gain (issue 34.6)."""

import math

import numpy as np
import pytest

from powerlab.exceptions import PowerlabError
from powerlab.interconnect.pmu import (
    M_CLASS_60HZ,
    modulation_gain,
    pmu_power,
    reported_frequency_hz,
)


def _amplitude_at(frame_t, y, f):
    a = np.column_stack([np.ones_like(frame_t), np.cos(2 * np.pi * f * frame_t),
                         np.sin(2 * np.pi * f * frame_t)])
    c = np.linalg.lstsq(a, y, rcond=None)[0]
    return math.hypot(c[1], c[2])


def _reported(fm, tick_s, klass, fps, f0=60.0, amp=0.1, seconds=6.0):
    t = np.arange(0, seconds, tick_s)
    x = 20e6 * (1 + amp * np.sin(2 * np.pi * fm * t + 0.3))
    f = pmu_power(x, tick_s, classes=(klass,), f0_hz=f0, reporting_rate_fps=fps)
    y = f[f"power_megawatts_pmu_{klass.lower()}_class"].to_numpy()
    alias = reported_frequency_hz(fm, fps)[0]
    return _amplitude_at(f["time_s"].to_numpy(), y, alias) / (20 * amp)


def _triangle_gain(f, f0=60.0):
    # C37.118.1-2011 Annex C, P class: W(k) = 1 - 2|k|/(N+2), N = 2 (Fsamples/f0 - 1),
    # Fsamples = 16 f0; gain = sum W(k) cos(2 pi f k / Fsamples) / sum W(k)
    fsmp = 16 * f0
    n = 2 * (16 - 1)
    num = den = 0.0
    for k in range(-n // 2, n // 2 + 1):
        w = 1 - 2 * abs(k) / (n + 2)
        num += w * math.cos(2 * math.pi * f * k / fsmp)
        den += w
    return num / den


def test_the_issues_test_points_no_longer_read_low():
    # issue 34: at the 0.01-s tick the P class read 0.527 at 23 Hz and 0.774 at 14.7 Hz
    # (linear interpolation onto the 960-Hz grid); the Annex C triangle's gain there is
    # 0.602 and 0.818, and that is what the view now reports (within 1 %)
    for fm, low in ((23.0, 0.527), (14.7, 0.774)):
        want = _triangle_gain(fm)
        assert modulation_gain(fm, "P")[0] == pytest.approx(want, rel=1e-12)
        got = _reported(fm, 0.01, "P", 60)
        assert got == pytest.approx(want, rel=0.01)
        assert got > low * 1.05
    assert _triangle_gain(23.0) == pytest.approx(0.602, abs=5e-4)
    assert _triangle_gain(14.7) == pytest.approx(0.818, abs=5e-4)


@pytest.mark.parametrize("klass,fps", [("P", 60), ("P", 30), ("M", 60), ("M", 30), ("M", 10)])
def test_magnitude_response_matches_the_analytic_filter_up_to_the_reporting_nyquist(klass, fps):
    # IEEE C37.118.1-2011 Annex C / IEC/IEEE 60255-118-1:2018 Annex D: a modulation at fm
    # is reported multiplied by |sum W(k) exp(-j 2 pi fm k / Fsamples)| / sum W(k); within
    # 1 % (of the modulation) from 0.5 Hz to just below Fs / 2, on a 0.01-s series
    fs = np.linspace(0.5, 0.96 * fps / 2, 7)
    for fm in fs:
        got = _reported(fm, 0.01, klass, fps, seconds=8.0 if fps > 10 else 14.0)
        want = modulation_gain(fm, klass, reporting_rate_fps=fps)[0]
        assert got == pytest.approx(want, abs=0.01 * max(want, 0.1)), (fm, got, want)


@pytest.mark.parametrize("tick_s", [0.01, 0.004, 1 / 960])
def test_reported_gain_does_not_depend_on_the_input_tick(tick_s):
    assert _reported(23.0, tick_s, "P", 60) == pytest.approx(
        modulation_gain(23.0, "P")[0], rel=0.005)


def test_fifty_hz_m_class_at_50_fps():
    # IEC/IEEE 60255-118-1:2018 Table D.1: 50 Hz, 50 frames/s, Ffr 7.75 Hz, N 142
    for fm in (2.0, 7.0, 20.0):
        got = _reported(fm, 0.01, "M", 50, f0=50.0)
        want = modulation_gain(fm, "M", f0_hz=50, reporting_rate_fps=50)[0]
        assert got == pytest.approx(want, abs=0.01 * max(want, 0.1))


def test_alias_at_the_reporting_rate():
    # at 30 frames/s a P-class PMU shows a 23-Hz oscillation at 7 Hz (issue 34)
    assert reported_frequency_hz(23.0, 30)[0] == pytest.approx(7.0)
    assert reported_frequency_hz([14.7, 23.0], 60).tolist() == pytest.approx([14.7, 23.0])
    assert reported_frequency_hz(14.7, 10)[0] == pytest.approx(4.7)
    t = np.arange(0, 6.0, 0.01)
    f = pmu_power(20e6 * (1 + 0.1 * np.sin(2 * np.pi * 23 * t)), 0.01, classes=("P",),
                  reporting_rate_fps=30)
    y, ft = f["power_megawatts_pmu_p_class"].to_numpy(), f["time_s"].to_numpy()
    g = modulation_gain(23.0, "P", reporting_rate_fps=30)[0]
    assert _amplitude_at(ft, y, 7.0) == pytest.approx(2.0 * g, rel=0.01)
    assert _amplitude_at(ft, y, 5.0) < 0.01 * 2.0 * g


def test_single_phase_view_keeps_the_image_the_positive_sequence_cancels():
    # one phase's phasor leaks the 2 f0 +- fm image through the triangle (|W(97 Hz)| ~ 3 %)
    t = np.arange(0, 6.0, 0.01)
    x = 20e6 * (1 + 0.1 * np.sin(2 * np.pi * 23 * t))
    one = pmu_power(x, 0.01, classes=("P",), sequence="single")
    pos = pmu_power(x, 0.01, classes=("P",))
    d = np.abs(one["power_megawatts_pmu_p_class"] - pos["power_megawatts_pmu_p_class"])
    assert 0.01 < d.max() < 0.1
    with pytest.raises(PowerlabError, match="sequence"):
        pmu_power(x, 0.01, sequence="negative")


def test_m_class_table_is_the_standards():
    # C37.118.1a-2014 Table C.1: 60 Hz, 30 frames/s: Ffr 5.02 Hz, N 306
    assert M_CLASS_60HZ[30] == (5.02, 306)
