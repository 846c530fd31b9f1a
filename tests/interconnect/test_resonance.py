"""Resonance screening against waveforms of known harmonics (built here with numpy), the null
case, the forecast engine's jobs, the suggested fixes re-screened, and real MLPerf power
checked against the step times of the run's own training log."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import PowerlabError
from powerlab.interconnect.powertrace import PowerTrace, trace_from_telemetry
from powerlab.interconnect.resonance import (
    harmonic_amplitudes,
    periodic_components,
    screen_resonance,
)
from powerlab.limits.requirements import parse_requirements

REPO = Path(__file__).resolve().parents[2]
T0 = pd.Timestamp("2025-06-01T00:00:00Z")
MW = 1e6


def square(period_s, duty, swing_w, tick=0.05, total_s=1800.0, offset_s=0.0):
    t = np.arange(0, total_s, tick)
    return swing_w * (((t - offset_s) % period_s) < duty * period_s)


def expected_amplitude(k, duty, swing_w):
    """Fourier amplitude of harmonic k of a rectangular wave of height swing_w."""
    return 2 * swing_w / (k * np.pi) * np.abs(np.sin(k * np.pi * duty))


def trace(x, tick=0.05):
    return PowerTrace(0, tick, T0, x, x)


def spec(modes):
    return parse_requirements({
        "name": "modes",
        "requirements": [{"name": "s", "kind": "step", "limit": 100, "unit": "MW",
                          "source": "t", "illustrative": True}],
        "grid_modes": [{"name": n, "band_hz": list(b), "min_amplitude_megawatts": a,
                        "source": "t", "illustrative": True} for n, b, a in modes]})


def test_fundamental_and_harmonic_amplitudes_of_a_rectangular_wave():
    rng = np.random.default_rng(0)
    x = 10 * MW + square(6.0, 0.8, 5 * MW) + 0.05 * MW * rng.standard_normal(36000)
    comps = periodic_components(x, 0.05)
    assert len(comps) == 1
    assert comps.loc[0, "period_s"] == pytest.approx(6.0, rel=1e-3)
    h = harmonic_amplitudes(x, 0.05, comps.loc[0, "fundamental_hz"]).set_index("harmonic")
    for k in (1, 2, 3, 4, 6, 7):
        assert h.loc[k, "amplitude_w"] == pytest.approx(expected_amplitude(k, 0.8, 5 * MW),
                                                        rel=0.03)
    assert h.loc[5, "amplitude_w"] < 0.03 * h.loc[1, "amplitude_w"]    # sin(5 pi 0.8) = 0
    # another tick and segment: the same answer
    x2 = 10 * MW + square(6.0, 0.8, 5 * MW, tick=0.1)
    c2 = periodic_components(x2, 0.1, segment_s=200.0)
    assert c2.loc[0, "period_s"] == pytest.approx(6.0, rel=1e-3)


@pytest.mark.parametrize("phi", [0.0, 0.995])
def test_noise_has_no_periodic_component(phi):
    """White and strongly correlated (AR(1)) noise: no fundamental is invented."""
    rng = np.random.default_rng(11)
    e = rng.standard_normal(36000)
    x = np.empty_like(e)
    x[0] = e[0]
    for i in range(1, len(e)):
        x[i] = phi * x[i - 1] + e[i]
    comps = periodic_components(20 * MW + 0.3 * MW * x, 0.05)
    assert comps.empty
    res = screen_resonance(trace(20 * MW + 0.3 * MW * x), spec([("a", (0.1, 2), 0.0)]))
    assert res.hits.empty and "No periodic component" in str(res.summary())


def test_two_jobs_with_their_own_step_periods():
    x = 5 * MW + square(6.0, 0.8, 3 * MW) + square(2.5, 0.7, 1 * MW, offset_s=0.4)
    comps = periodic_components(x, 0.05)
    assert sorted(comps["period_s"].round(3)) == [2.5, 6.0]


def test_hits_follow_the_band_and_the_threshold():
    x = 10 * MW + square(6.0, 0.8, 5 * MW)      # harmonics at k/6 Hz
    res = screen_resonance(trace(x), spec([("low", (0.1, 0.6), 1.0), ("mid", (0.9, 1.6), 2.0)]))
    got = sorted(res.hits["harmonic"])
    a = expected_amplitude(np.arange(1, 11), 0.8, 5 * MW) / MW
    want = [k for k in range(1, 11)
            if (0.1 <= k / 6 <= 0.6 and a[k - 1] >= 1.0) or (0.9 <= k / 6 <= 1.6
                                                           and a[k - 1] >= 2.0)]
    assert got == want == [1, 2, 3]            # 4 (0.47 MW) and all mid ones are too small
    assert res.hits["resolved"].all()


def _rescreen(res, period, s, stagger=None):
    if stagger:
        n = stagger
        x = sum(square(period, 0.8, 5 * MW / n, offset_s=j * period / n) for j in range(n))
    else:
        x = square(period, 0.8, 5 * MW)
    return screen_resonance(trace(10 * MW + x), s)


def test_suggested_periods_and_stagger_clear_the_bands_when_rescreened():
    s = spec([("band", (0.25, 0.45), 0.5)])   # only harmonic 2 of a 6-s step (0.333 Hz)
    res = screen_resonance(trace(10 * MW + square(6.0, 0.8, 5 * MW)), s)
    assert list(res.hits["harmonic"]) == [2]
    o = res.options.iloc[0]
    # harmonic 2 leaves [0.25, 0.45] Hz below 4.444 s or above 8 s; harmonic 1 and 3 must
    # not enter it either: 3 / P in band for P in [6.67, 12] -> the next clear period is 12 s
    assert o["shorter_period_s"] == pytest.approx(2 / 0.45, rel=1e-4)
    assert o["longer_period_s"] == pytest.approx(12.0, rel=1e-4)
    for p in (o["shorter_period_s"] * 0.995, o["longer_period_s"] * 1.005):
        assert _rescreen(res, p, s).hits.empty, p
    assert not _rescreen(res, 7.0, s).hits.empty        # inside the forbidden range
    # 3 equal groups staggered by 2 s cancel harmonic 2 (2 is not a multiple of 3)
    assert o["stagger_groups"] == 3 and o["stagger_offset_s"] == pytest.approx(2.0, rel=1e-4)
    assert _rescreen(res, 6.0, s, stagger=3).hits.empty
    assert not _rescreen(res, 6.0, s, stagger=2).hits.empty   # 2 groups keep harmonic 2


def test_unresolved_harmonics_are_flagged_not_solved():
    x = 10 * MW + square(6.0, 0.8, 5 * MW, tick=0.5)        # resolves up to 1 Hz only
    res = screen_resonance(trace(x, tick=0.5), spec([("high", (3, 30), 0.05)]))
    assert res.resolvable_hz == 1.0
    assert len(res.hits) and not res.hits["resolved"].any()
    assert res.options.loc[0, "hits"] == 0 and res.options.loc[0, "unresolved_hits"] > 0
    assert "do not resolve" in str(res.summary())


def test_scenario_jobs_are_found_by_their_step_periods():
    res = screen_resonance(REPO / "data/scenarios/small.yaml",
                           REPO / "data/requirements/small_site_example.yaml")
    assert sorted(res.components["period_s"].round(2)) == [2.5, 6.0]   # the two jobs
    assert "low_0p1_2hz" in set(res.hits["mode"])
    assert "<table" in res._repr_html_()


@pytest.mark.bad_input("requirements")
def test_a_spec_without_grid_modes_cannot_screen():
    s = parse_requirements({"name": "x", "requirements": [
        {"name": "s", "kind": "step", "limit": 1, "unit": "MW", "source": "t",
         "illustrative": True}]})
    with pytest.raises(PowerlabError, match="no grid_modes"):
        screen_resonance(trace(np.ones(1000)), s)


def test_mlperf_power_period_matches_the_training_log():
    """64-node GPT-3 run, 8 nodes' AC power read every ~2 s.  The log's steps are 10.77 s
    apart (median) inside blocks that repeat every ~142.5 s (12 steps + an evaluation),
    so the power's lines sit on the comb n / 142.5 s around 1 / 10.77 s: the estimated
    fundamental must lie on that comb, within one comb spacing of the step rate."""
    import powerlab.iotools as io

    base = REPO / "data/mlperf-gpt3-64node"
    df = pd.concat([io.read_mlperf_power(base / "power" / f"node_{i}.txt.gz")
                    for i in range(1, 9)], ignore_index=True)
    log = io.read_mllog(base / "result_5848-240517221859825376616_2.txt.gz")
    steps = log.steps["timestamp"].drop_duplicates().diff().dt.total_seconds()
    step_s = float(steps[steps > 10].median())
    cycle_s = float(log.blocks["start"].diff().dt.total_seconds().median())
    assert 10.7 < step_s < 10.9 and 140 < cycle_s < 145
    tr = trace_from_telemetry(df)
    assert tr.native_interval_s == pytest.approx(2.0, abs=0.02)
    comps = periodic_components(tr.it_w, tr.tick_s, max_frequency_hz=0.5 / 2.0)
    f0 = comps.loc[0, "fundamental_hz"]
    assert abs(f0 - 1 / step_s) < 1 / cycle_s
    n = f0 * cycle_s
    assert abs(n - round(n)) < 0.15
    assert comps.loc[0, "power_share"] > 0.5
    assert math.isfinite(comps.loc[0, "period_s"])
