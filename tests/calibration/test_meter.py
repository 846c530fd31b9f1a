"""Tests of powerlab.calibration.meter: interval-averaging meters applied to per-tick power.

The reference readings are computed here by brute force (power sampled every 0.1 ms and
averaged over each meter interval), not with the module's cumulative-energy formula.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powerlab.calibration.meter import Meter, meter_forecast, meter_readings, sum_meters, tick_power
from powerlab.exceptions import PowerlabError
from powerlab.site.engine import forecast
from powerlab.site.scenario import parse_scenario

T0 = pd.Timestamp("2025-03-01T00:00:00Z")


def _square(t, period=10.0, dip_s=1.0, hi=7000.0, lo=6000.0, shift=0.0):
    """Step power at times ``t`` [s]: ``hi`` except a ``dip_s`` dip ending each period."""
    return np.where(np.mod(t - shift, period) >= period - dip_s, lo, hi)


def _brute_reading(fun, t_end, interval_s, fine=1e-4):
    """Mean of ``fun`` over ``(t_end - interval_s, t_end]`` from samples every ``fine`` s."""
    s = np.arange(t_end - interval_s + fine / 2, t_end, fine)
    return float(np.mean(fun(s)))


def test_readings_match_brute_force_average_at_any_instant():
    tick = 0.01
    t = np.arange(0, 60, tick)
    x = _square(t, shift=0.37)
    rng = np.random.default_rng(1)
    inst = np.sort(rng.uniform(2.5, 59.0, 40))
    r = meter_readings(x, tick_s=tick, start_utc=T0,
                       times=T0 + pd.to_timedelta(inst, unit="s"))
    # the series is piecewise constant on ticks: the brute force samples that series
    def fun(s):
        return x[np.floor(s / tick + 1e-9).astype(int)]

    ref = [_brute_reading(fun, ti, 2.0) for ti in inst]
    np.testing.assert_allclose(r.to_numpy(), ref, rtol=0, atol=0.2)  # 0.1-ms samples of 1-kW steps
    # a 1-s dip of 1 kW through a 2-s meter never reads below hi - 500 W, and does reach it
    regular = meter_readings(x, tick_s=tick, start_utc=T0, interval_s=2.0, phase_s=0.0)
    assert regular.min() >= 6500.0 - 1e-6
    full = meter_readings(x, tick_s=tick, start_utc=T0, interval_s=2.0, phase_s=0.37)
    assert full.min() == pytest.approx(6500.0)
    assert full.max() == pytest.approx(7000.0)


def test_energy_is_kept_and_labels_are_window_ends():
    tick = 0.05
    t = np.arange(0, 120, tick)
    x = 5000 + 1000 * np.sin(2 * np.pi * t / 7.3) + 30 * t
    r = meter_readings(x, tick_s=tick, start_utc=T0, interval_s=4.0)
    assert len(r) == 30 and r.index[0] == T0 + pd.Timedelta(seconds=4)
    # readings cover the horizon exactly: their mean is the mean power
    assert r.mean() == pytest.approx(x.mean(), rel=1e-12)
    # a linear ramp reads as its value at the middle of the window before the instant
    ramp = 100.0 * t
    rr = meter_readings(ramp, tick_s=tick, start_utc=T0, interval_s=2.0, phase_s=0.5)
    secs = (rr.index - T0).total_seconds().to_numpy()
    assert secs[0] == pytest.approx(2.5)
    np.testing.assert_allclose(rr.to_numpy(), 100.0 * (secs - 1.0 - tick / 2), atol=1e-6)


def test_phase_is_absolute_and_readings_do_not_depend_on_the_tick():
    m = Meter(interval_s=2.0, phase_s=0.75)
    start = pd.Timestamp("2025-03-01T00:00:00.300Z")
    times = m.reading_times(start, start + pd.Timedelta(seconds=10))
    frac = ((times - T0).total_seconds().to_numpy()) % 2.0
    np.testing.assert_allclose(frac, 0.75, atol=1e-6)
    assert times[0] - start >= pd.Timedelta(seconds=2)  # whole interval inside
    # the same waveform on 10 ms and 1 ms ticks (edges on the coarse grid) reads the same
    a = meter_readings(_square(np.arange(0, 40, 0.01)), tick_s=0.01, start_utc=T0,
                       phase_s=0.25)
    b = meter_readings(_square(np.arange(0, 40, 0.001)), tick_s=0.001, start_utc=T0,
                       phase_s=0.25)
    pd.testing.assert_series_equal(a, b, rtol=1e-9)


def test_series_input_holds_each_sample_until_the_next():
    idx = T0 + pd.to_timedelta([0.0, 1.0, 1.5, 4.0], unit="s")
    s = pd.Series([100.0, 300.0, 200.0, 50.0], index=idx)
    r = meter_readings(s, interval_s=2.0, times=[T0 + pd.Timedelta(seconds=2),
                                                 T0 + pd.Timedelta(seconds=4),
                                                 T0 + pd.Timedelta(seconds=9)])
    assert r.iloc[0] == pytest.approx((100 * 1 + 300 * 0.5 + 200 * 0.5) / 2)
    assert r.iloc[1] == pytest.approx(200.0)
    assert np.isnan(r.iloc[2])  # beyond the series (last sample holds ~ median spacing)


def test_constant_power_reads_constant():
    r = meter_readings(np.full(5000, 1234.5), tick_s=0.01, start_utc=T0, interval_s=0.7,
                       phase_s=0.33)
    assert len(r) > 60
    np.testing.assert_allclose(r.to_numpy(), 1234.5, rtol=1e-12)


def _scenario():
    return parse_scenario({
        "name": "meter-test",
        "horizon": {"start_utc": "2025-03-01T00:00:00Z", "end_utc": "2025-03-01T00:03:00Z"},
        "simulation": {"tick_s": 0.05},
        "site": {"pue": 1.3, "base_load_w": 1000.0},
        "hardware": {"gpus_per_node": 8, "node_overhead_w": 2000.0},
        "jobs": [{"name": "j", "gpus": 64, "start_utc": "2025-03-01T00:00:10Z",
                  "duration_s": 150, "step_time_s": 6.0, "compute_fraction": 0.8,
                  "jitter_s": 0.2, "failures": {"rate_per_gpu_h": 0.0}}],
    })


def test_meter_on_a_forecast_result_per_draw():
    res = forecast(_scenario(), draws=2, seed=4)
    m = Meter(interval_s=2.0, phase_s=1.0)
    df = meter_forecast(res, m, boundary="facility")
    assert list(df.columns) == ["draw", "timestamp", "power_w"]
    assert sorted(df["draw"].unique()) == [0, 1]
    for d in (0, 1):
        x, tick, t0 = tick_power(res, boundary="facility", draw=d)
        np.testing.assert_array_equal(x, res.facility_w[d])
        mine = df[df["draw"] == d].set_index("timestamp")["power_w"]
        pd.testing.assert_series_equal(mine, m.read(x, tick_s=tick, start_utc=t0),
                                       check_names=False)
        # back-to-back intervals: the readings' mean is the mean power over them
        a = round(((mine.index[0] - t0).total_seconds() - 2.0) / tick)
        b = round((mine.index[-1] - t0).total_seconds() / tick)
        assert (a, b) == (20, 3580)  # readings at odd seconds, phase 1 s
        assert mine.mean() == pytest.approx(x[a:b].mean(), rel=1e-9)
    # one node's meter: 1/8 of the IT power when the 8 nodes run in step
    one = meter_forecast(res, m, boundary="it", draws=[1], share=1 / 8)
    assert one["power_w"].mean() == pytest.approx(res.it_w[1][20:3580].mean() / 8, rel=1e-9)
    # the meter removes what is faster than its interval
    assert one["power_w"].std() < (res.it_w[1] / 8).std()


def test_meter_on_one_draw_as_handed_to_on_draw():
    res = forecast(_scenario(), draws=1, seed=0)

    class DrawPower:  # the shape of the engine's per-draw callback argument
        draw, tick_s, start_utc = 0, res.tick_s, res.start_utc
        it_w, facility_w = res.it_w[0], res.facility_w[0]

    a = meter_forecast(DrawPower(), Meter(2.0), boundary="it")
    b = meter_forecast(res, Meter(2.0), boundary="it")
    pd.testing.assert_frame_equal(a, b)


def test_sum_meters_holds_each_meters_last_reading():
    rd = pd.DataFrame({
        "timestamp": T0 + pd.to_timedelta([0.5, 2.5, 4.5, 1.2, 3.2, 5.2], unit="s"),
        "host": ["a", "a", "a", "b", "b", "b"],
        "power_w": [10.0, 20.0, 30.0, 1.0, 2.0, 3.0]})
    s = sum_meters(rd, every_s=1.0, start=T0 + pd.Timedelta(seconds=1),
                   end=T0 + pd.Timedelta(seconds=6))
    assert list((s.index - T0).total_seconds()) == [1, 2, 3, 4, 5]
    assert np.isnan(s.iloc[0])  # meter b has not reported at 1 s
    np.testing.assert_allclose(s.iloc[1:], [11.0, 21.0, 22.0, 32.0])
    # default grid: from the moment every meter has reported
    d = sum_meters(rd, every_s=1.0)
    assert d.index[0] == T0 + pd.Timedelta(seconds=1.2) and d.iloc[0] == 11.0
    aged = sum_meters(rd, every_s=1.0, start=T0 + pd.Timedelta(seconds=2),
                      end=T0 + pd.Timedelta(seconds=8), max_age_s=2.0)
    np.testing.assert_allclose(aged.iloc[:5], [11.0, 21.0, 22.0, 32.0, 33.0])
    assert np.isnan(aged.iloc[5])  # at 7 s, meter a's reading from 4.5 s is too old


@pytest.mark.parametrize("call, match", [
    (lambda: Meter(interval_s=0.0), "interval_s"),
    (lambda: Meter(interval_s=2.0, phase_s=float("nan")), "phase_s"),
    (lambda: meter_readings(np.ones(10), tick_s=0.1), "start_utc"),
    (lambda: meter_readings(np.ones(10), tick_s=0.1, start_utc="2025-01-01"), "time zone"),
    (lambda: meter_readings(np.r_[1.0, np.nan, 1.0], tick_s=0.1, start_utc=T0), "NaN"),
    (lambda: meter_readings(np.ones((2, 5)), tick_s=0.1, start_utc=T0), "one series"),
    (lambda: meter_readings(pd.Series([1.0, 2.0]), interval_s=1.0), "DatetimeIndex"),
    (lambda: meter_readings(np.ones(10), tick_s=0.1, start_utc=T0, times=["x"]), "times"),
    (lambda: tick_power(object()), "cannot read per-tick power"),
    (lambda: tick_power(forecast(_scenario(), draws=1), boundary="grid"), "boundary"),
    (lambda: tick_power(forecast(_scenario(), draws=1), draw=3), "draw 3"),
    (lambda: sum_meters(pd.DataFrame({"x": [1]})), "columns"),
    (lambda: meter_forecast(forecast(_scenario(), draws=1), share=0.0), "share"),
])
def test_bad_input_gives_one_clear_error(call, match):
    with pytest.raises(PowerlabError, match=match):
        call()
