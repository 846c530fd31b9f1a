"""Spectral lines flagged by significance, materiality and attribution (issue 34.5)."""

import numpy as np
import pytest
from scipy import signal

from powerlab.interconnect import ShortWindow, study_package
from powerlab.interconnect.lines import (
    LineOptions,
    Rhythm,
    attribute,
    flag_lines,
    material_amplitude_w,
    significance_ratio,
    welch_dof,
)
from powerlab.limits import read_requirements
from powerlab.site.scenario import read_scenario

TICK, WINDOW, SEG = 0.01, 240.0, 60.0
N, NPER = round(WINDOW / TICK), round(SEG / TICK)


def _welch(x):
    return signal.welch(x, fs=1 / TICK, nperseg=NPER, detrend="constant")


def synthetic_site(seed, line_w=0.0, line_hz=14.7, groups=64, peak_w=20e6):
    """A 20-MW site of ``groups`` GPU groups stepping every 6 s (80 % compute at full
    power, 20 % waiting at 35 %), each group's step offset by N(0, 0.05 s), plus a
    little noise and, optionally, an injected sinusoid of amplitude ``line_w``."""
    rng = np.random.default_rng(seed)
    t = np.arange(N) * TICK
    p = np.zeros(N)
    for _ in range(groups):
        phase = (t + rng.normal(0, 0.05)) % 6.0
        p += np.where(phase < 4.8, 1.0, 0.35)
    p *= peak_w / groups
    p += rng.normal(0, 2e3, N)
    return p + line_w * np.sin(2 * np.pi * line_hz * t + rng.uniform(0, 6.3))


RHYTHMS = [Rhythm("step of train", 6.0)]


def _lines(seed, **kw):
    ps = [_welch(synthetic_site(seed * 10 + d, **kw)) for d in range(3)]
    f = ps[0][0]
    return flag_lines(f, np.array([p for _, p in ps]), dof=welch_dof(N, NPER),
                      site_peak_w=20e6, rhythms=RHYTHMS, f0_hz=60)


def test_welch_dof_matches_percival_walden():
    # Percival & Walden 1993 eq. (292b): Hann, 50 % overlap, K blocks: 36 K^2 / (19 K - 1)
    k = (N - NPER) // (NPER // 2) + 1
    assert welch_dof(N, NPER) == pytest.approx(36 * k * k / (19 * k - 1), rel=0.01)


def test_false_flag_rate_on_spectra_without_a_line():
    # stated rate 1 % a spectrum: 100 coloured-noise spectra flag at most 4
    # (P(X >= 5 | n = 100, p = 0.01) = 0.34 %)
    dof = welch_dof(N, NPER)
    hits = 0
    for seed in range(100):
        x = signal.lfilter([1.0], [1.0, -0.8], np.random.default_rng(seed).normal(0, 1e4, N))
        f, p = _welch(x)
        lines, terms = flag_lines(f, p[None], dof=dof, site_peak_w=1e6)
        hits += len(lines) > 0
    assert terms["false_flag_rate"] == 0.01
    assert hits <= 4


def test_no_flag_on_a_synthetic_site_without_an_injected_line():
    lines, _ = _lines(1)
    assert len(lines) > 5                               # its step harmonics are real lines
    assert not lines["flagged"].any()
    assert (lines["attribution"] != "unexplained").all()
    assert lines["attribution"].iloc[0] == "harmonic 1 of step of train (6 s)"


def test_injected_line_found_down_to_the_material_amplitude():
    # materiality without a spec: 0.1 % of the 20-MW peak = 20 kW; a 30-kW line at
    # 14.7 Hz is flagged with its amplitude, a 10-kW one is significant but not material
    lines, _ = _lines(2, line_w=30e3)
    hit = lines[lines["flagged"]]
    assert len(hit) == 1
    assert hit["frequency_hz"].iloc[0] == pytest.approx(14.7, abs=0.02)
    assert hit["amplitude_megawatts"].iloc[0] == pytest.approx(0.030, rel=0.15)
    assert hit["material_basis"].iloc[0].startswith("0.1% of the site's peak")
    small, _ = _lines(3, line_w=10e3)
    near = small[(small["frequency_hz"] - 14.7).abs() < 0.02]
    assert len(near) == 1 and near["significant"].all() and not near["flagged"].any()


def test_each_line_is_listed_at_its_alias_for_every_reporting_rate():
    # (23.0 Hz itself is harmonic 138 of the 6-s step: attributed, not flagged)
    lines, _ = _lines(4, line_w=50e3, line_hz=23.3)
    row = lines[lines["flagged"]].iloc[0]
    assert row["alias_hz_at_30fps"] == pytest.approx(6.7, abs=0.02)
    assert row["alias_hz_at_60fps"] == pytest.approx(23.3, abs=0.02)
    assert row["alias_hz_at_10fps"] == pytest.approx(3.3, abs=0.02)
    assert {c for c in lines if c.startswith("alias_hz_at_")} == {
        f"alias_hz_at_{r}fps" for r in (10, 12, 15, 20, 30, 60, 120)}


def test_materiality_from_the_spec():
    spec = read_requirements("data/requirements/small_site_example.yaml")
    # 0.1-2 Hz: grid mode 0.02 MW vs a quarter of the 0.05-MW RMS limit as an amplitude
    amp, why = material_amplitude_w(1.0, spec, 1e6)
    assert amp == pytest.approx(0.25 * 0.05e6 * np.sqrt(2)) and "oscillation_0p1_2hz_rms" in why
    amp, why = material_amplitude_w(10.0, spec, 1e6)       # grid mode high_3_30hz: 5 kW
    assert amp == pytest.approx(5e3) and "high_3_30hz" in why
    amp, why = material_amplitude_w(2.5, spec, 1e6)        # nothing covers 2-3 Hz
    assert amp == pytest.approx(1e3) and "site's peak" in why
    assert material_amplitude_w(2.5, spec, 1e6, LineOptions(site_share=0.01))[0] == 1e4


def test_attribution_and_threshold_terms():
    df = 1 / 64
    assert attribute(3.0, [Rhythm("step", 6.0)], df) == "harmonic 18 of step (6 s)"
    assert attribute(3.0 + df, [Rhythm("step", 6.0)], df) == "unexplained"
    # a cycle whose harmonics crowd closer than 4 bins explains nothing
    assert attribute(3.0, [Rhythm("checkpoint", 1260.0)], df) == "unexplained"
    # more draws, lower threshold; a stricter rate, higher threshold
    assert significance_ratio(13.4, 5, 1900) < significance_ratio(13.4, 1, 1900)
    assert significance_ratio(13.4, 3, 1900, 0.001) > significance_ratio(13.4, 3, 1900)


@pytest.mark.parametrize("scenario,spec", [
    ("small.yaml", "small_site_example.yaml"),
    pytest.param("llama3_16k_h100.yaml", "choukse2025_forms.yaml", marks=pytest.mark.slow),
])
def test_no_flag_on_the_bundled_scenarios(scenario, spec):
    pkg = study_package(read_scenario(f"data/scenarios/{scenario}"),
                        f"data/requirements/{spec}", draws=2, seed=0,
                        short=ShortWindow(window_s=240))
    lines = pkg.lines
    assert len(lines) > 10                        # the step rhythm's harmonics are found
    assert not lines["flagged"].any()
    assert (lines["attribution"] != "unexplained").mean() > 0.9
    assert any("false-flag rate 1%" in n for n in pkg.notes)
