"""Tests of powerlab.site.swings: metrics on series with known answers, limits, what-ifs."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from powerlab.exceptions import PowerlabError
from powerlab.limits.loadmetrics import band_windows
from powerlab.limits.scenario_limits import Limits
from powerlab.site.engine import forecast
from powerlab.site.scenario import parse_scenario
from powerlab.site.swings import (
    band_rms,
    check_limits,
    events_table,
    largest_swing,
    ramp_rates,
    spectrum,
    swing_metrics,
)

SCEN = Path(__file__).parents[2] / "data" / "scenarios"
TICK = 0.1


def _square(period_s=20.0, hi=3e6, lo=1e6, n=6000):
    t = np.arange(n) * TICK
    return np.where((t % period_s) < period_s / 2, hi, lo)


def test_largest_swing_and_ramps_known_square_wave():
    x = _square()
    assert largest_swing(x, TICK, 1.0) == pytest.approx(2e6)
    up, down = ramp_rates(x, TICK)
    assert up == pytest.approx(2e6 / TICK) and down == pytest.approx(2e6 / TICK)
    # null: a constant series has no swing and no ramp
    c = np.full(1000, 5e6)
    assert largest_swing(c, TICK, 60.0) == 0.0
    assert ramp_rates(c, TICK) == (0.0, 0.0)
    # a slow ramp: 1 MW over 100 s -> 10 kW/s, 1-s swing 10 kW, 10-s swing 100 kW
    r = np.linspace(0, 1e6, 1001)
    assert ramp_rates(r, TICK)[0] == pytest.approx(1e4)
    assert largest_swing(r, TICK, 1.0) == pytest.approx(1e4)
    assert largest_swing(r, TICK, 10.0) == pytest.approx(1e5)


def test_spectrum_dominant_frequency_and_bands():
    t = np.arange(20000) * 0.01  # 100 Hz sampling
    amp = 2e6
    x = 50e6 + amp * np.sin(2 * np.pi * 0.5 * t)
    m = swing_metrics(x, 0.01)
    assert m["dominant_frequency_hz"] == pytest.approx(0.5, abs=0.02)
    assert m["band_0p1_2hz_rms_w"] == pytest.approx(amp / np.sqrt(2), rel=0.05)
    assert m["band_2_20hz_rms_w"] < 0.01 * amp  # null band
    y = 50e6 + amp * np.sin(2 * np.pi * 7.0 * t)
    spec = spectrum(y, 0.01)
    assert band_rms(spec, 2, 20) == pytest.approx(amp / np.sqrt(2), rel=0.05)
    assert band_rms(spec, 0.1, 2) < 0.01 * amp
    with pytest.raises(PowerlabError):
        swing_metrics([1.0, np.nan, 2.0], 0.1)


def _tiny():
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["horizon"]["end_utc"] = "2025-06-02T12:30:00Z"
    for j in d["jobs"]:
        j["jitter_s"] = 0
        j["failures"] = {}
    return parse_scenario(d)


def test_check_limits_lists_every_violation():
    res = forecast(_tiny(), draws=2, seed=0)
    x = res.facility_w[0]
    # the ramp over adjacent 1-s means (10 ticks), computed here by brute force
    k = round(1.0 / res.tick_s)
    c = np.concatenate([[0.0], np.cumsum(x)])
    means = (c[k:] - c[:-k]) / k                    # mean of x[i:i+k]
    dx = np.full(len(x) - 1, np.nan)
    dx[k - 1:len(x) - k] = means[k:] - means[:-k]   # into tick i+1 = the boundary
    dx = np.nan_to_num(dx)
    lim_up = 0.5 * dx.max() / 1e6
    v = check_limits(res, Limits(ramp_up_megawatts_per_s=lim_up, swing_10s_megawatts=0.2))
    v0 = v[(v["draw"] == 0) & (v["limit"] == "ramp_up")]
    # every tick above the limit is inside exactly one listed episode
    above = np.flatnonzero(dx / 1e6 > lim_up)
    runs = np.split(above, np.flatnonzero(np.diff(above) > 1) + 1)
    assert len(v0) == len(runs) > 5
    assert (v0["worst"] > lim_up).all()
    assert v0["worst"].max() == pytest.approx(dx.max() / 1e6)
    assert (v["start_utc"] < v["end_utc"]).all()
    assert (v["limit"] == "swing_10s").any()
    # null: generous limits, no violation
    ok = check_limits(res, Limits(ramp_up_megawatts_per_s=1e3, ramp_down_megawatts_per_s=1e3,
                                  swing_60s_megawatts=1e3, band_0p1_2hz_megawatts=1e3))
    assert ok.empty
    # band limit below the actual amplitude: the limit is the requirement spec's
    # oscillation metric (issue 26: RMS of the band-passed power in every 60-s window);
    # one row per run of windows over it, the worst row is the worst window
    bw = band_windows(x, res.tick_s, (0.1, 2.0), 60.0, "rms")
    lim_b = 0.5 * bw.worst_w / 1e6
    b = check_limits(res, Limits(band_0p1_2hz_megawatts=lim_b))
    assert set(b["draw"]) == {0, 1} and (b["unit"] == "MW rms").all()
    b0 = b[b["draw"] == 0]
    assert b0["worst"].max() == pytest.approx(bw.worst_w / 1e6, rel=1e-12)
    over = np.flatnonzero(bw.value_w / 1e6 > lim_b)
    runs = np.split(over, np.flatnonzero(np.diff(over) > 1) + 1)
    assert len(b0) == len(runs) >= 1
    first = res.times[0] + pd.Timedelta(seconds=float(bw.start_s[runs[0][0]]))
    assert b0["start_utc"].iloc[0] == first


def test_events_table():
    res = forecast(_tiny(), draws=2, seed=0)
    ev = events_table(res, draw=1)
    assert set(ev["draw"]) == {1}
    assert {"start", "checkpoint", "eval"} <= set(ev["event"])
    assert ev["timestamp"].is_monotonic_increasing


def test_dominant_frequency_is_the_step_rhythm_even_between_bins():
    """An 85 %-duty square wave at 1/6 Hz (6 s training steps) has first and second
    harmonics of nearly equal amplitude (|sin(pi d)| = 0.454 vs |sin(2 pi d)| / 2 = 0.405);
    1/6 Hz falls between Welch bins, 1/3 Hz nearly on one. The step rhythm must win."""
    from powerlab.site.swings import swing_metrics

    tick = 0.1
    t = np.arange(int(3600 / tick)) * tick
    x = np.where((t % 6.0) < 0.85 * 6.0, 650.0, 300.0) * 16384
    m = swing_metrics(x, tick)
    assert m["dominant_frequency_hz"] == pytest.approx(1 / 6, abs=0.01)
    # a pure tone between bins is located to well within one bin (0.0195 Hz)
    y = np.sin(2 * np.pi * 0.1667 * t)
    assert swing_metrics(y, tick)["dominant_frequency_hz"] == pytest.approx(0.1667, abs=0.005)


def test_one_band_rms_rule_half_open_bands_never_share_a_bin():
    """Band RMS exists once (issue 26): ``band_rms`` on a spectrum frame and
    ``psd_band_rms`` on arrays are the same rule, and two bands sharing an edge split a
    spectrum's variance without counting the edge bin twice."""
    from powerlab.site.swings import psd_band_rms

    rng = np.random.default_rng(3)
    tick = 0.1
    x = rng.normal(0.0, 1e5, 36000)
    spec = spectrum(x, tick)
    f, p = spec["frequency_hz"].to_numpy(), spec["psd_w2_per_hz"].to_numpy()
    assert band_rms(spec, 0.1, 2.0) == psd_band_rms(f, p, (0.1, 2.0))
    edge = f[np.argmin(np.abs(f - 2.0))]
    lo, hi = psd_band_rms(f, p, (0.1, edge)), psd_band_rms(f, p, (edge, 4.0))
    both = psd_band_rms(f, p, (0.1, 4.0))
    assert lo**2 + hi**2 == pytest.approx(both**2, rel=1e-12)
