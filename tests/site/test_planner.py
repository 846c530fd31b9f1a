"""Planner figures (powerlab.site.planner) on traces with known answers."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from powerlab.site.planner import clock_edges, demand_peak_w, planner_figures, planner_summary


def _result(x, tick_s=1.0, start="2025-07-01T00:00:00Z"):
    x = np.atleast_2d(np.asarray(x, dtype=float))
    return SimpleNamespace(power_w=lambda boundary="facility": x, tick_s=tick_s,
                           start_utc=pd.Timestamp(start))


def test_step_trace_gives_the_hand_computed_figures():
    x = np.r_[np.full(1800, 10e6), np.full(1800, 20e6)]  # 1 h: 10 MW then 20 MW
    f = planner_figures(_result(x)).iloc[0]
    assert f["peak_demand_megawatts_15min"] == pytest.approx(20.0)
    assert f["energy_megawatt_hours"] == pytest.approx(15.0)
    assert f["load_factor"] == pytest.approx(0.75)
    assert f["ramp_megawatts_per_min_1min"] == pytest.approx(10.0)  # 10 MW between minutes
    assert f["ramp_megawatts_per_s_1s"] == pytest.approx(10.0)


def test_a_linear_ramp_is_rate_times_window_independent_of_the_tick():
    for tick in (1.0, 0.5, 0.1):
        t = np.arange(0, 1800, tick)
        x = 1e6 * np.clip((t - 600) / 600, 0, 1) * 12  # 0 -> 12 MW over 10 minutes
        f = planner_figures(_result(x, tick)).iloc[0]
        assert f["ramp_megawatts_per_min_1min"] == pytest.approx(1.2, rel=1e-6)
        assert f["ramp_megawatts_per_s_1s"] == pytest.approx(0.02, rel=1e-6)


def test_demand_uses_complete_clock_aligned_intervals_only():
    # starts at 00:05: the 00:05-00:15 part is not a complete demand interval
    x = np.r_[np.full(600, 30e6), np.full(1800, 10e6)]
    assert demand_peak_w(x, 1.0, "2025-07-01T00:05:00Z")[0] == pytest.approx(10e6)
    # the same trace starting on a boundary: the first interval is complete
    assert demand_peak_w(x, 1.0, "2025-07-01T00:00:00Z")[0] == pytest.approx(
        (600 * 30e6 + 300 * 10e6) / 900)
    assert list(clock_edges("2025-07-01T00:05:00Z", 2400, 1.0, 900.0)) == [0, 600, 1500]


def test_summary_over_draws_worst_is_the_bad_side():
    x = np.vstack([np.full(3600, 10e6), np.r_[np.full(1800, 10e6), np.full(1800, 30e6)]])
    s = planner_summary(_result(x))
    assert s.loc["15-min peak demand [MW]", "worst"] == pytest.approx(30.0)
    assert s.loc["load factor [-]", "worst"] == pytest.approx(20.0 / 30.0)
    assert s.loc["load factor [-]", "median"] == pytest.approx((1.0 + 2 / 3) / 2)


def test_too_short_for_a_window_is_nan_not_a_number():
    f = planner_figures(_result(np.full(100, 5e6))).iloc[0]
    assert np.isnan(f["peak_demand_megawatts_15min"]) and np.isnan(f["load_factor"])
    assert np.isnan(f["ramp_megawatts_per_min_1min"])
    assert f["energy_megawatt_hours"] == pytest.approx(5 * 100 / 3600)


def test_each_ramp_figure_has_one_name_and_definition_in_csv_report_and_summary():
    """Issue 20, item 10: a figure is "the largest change between adjacent 1-s means"
    (ramp_up_w_per_s_1s in the metrics, ramp_up_megawatts_per_s_1s in figures,
    facility_ramp_up_megawatts_per_s_1s_max in the facilities CSV) or "between adjacent
    ticks" (ramp_up_w_per_s_tick), never an unnamed "ramp".  A 5 MW step with 0.1-s
    ticks is 5 MW/s over 1-s means and 50 MW/s tick to tick: the two figures carry
    different names and both reconcile with their definition, and the CSV's worst
    interval equals the worst draw of the metric of the same name."""
    from powerlab.limits.ramps import RAMP_DEFINITIONS, ramp_label
    from powerlab.site.engine import forecast
    from powerlab.site.export import facilities_frame
    from powerlab.site.scenario import read_scenario
    from powerlab.site.swings import swing_metrics
    from powerlab.viz.prepare import axis_label

    x = np.r_[np.full(3000, 20e6), np.full(3000, 25e6)]
    m = swing_metrics(x, 0.1)
    assert m["ramp_up_w_per_s_1s"] == pytest.approx(5e6)
    assert m["ramp_up_w_per_s_tick"] == pytest.approx(50e6)
    assert "ramp_up_w_per_s" not in m                      # no unnamed figure
    assert set(RAMP_DEFINITIONS) == {"1s", "100ms", "1min", "tick"}
    assert ramp_label("ramp_up_megawatts_per_s_1s") == (
        "ramp_up_megawatts_per_s_1s (largest rise between adjacent 1-s means, every "
        "alignment on the tick grid)")
    assert "adjacent ticks" in ramp_label("ramp_up_w_per_s_tick")
    assert axis_label("ramp_megawatts_per_s_1s") == "ramp, 1-s means [MW/s]"
    res = forecast(read_scenario("data/scenarios/small.yaml"), draws=2, seed=1)
    fac = res.metrics[res.metrics["boundary"] == "facility"]
    csv = facilities_frame(res, "1min")
    for d in ("up", "down"):
        worst = fac[f"ramp_{d}_w_per_s_1s"].max() / 1e6
        assert csv[f"facility_ramp_{d}_megawatts_per_s_1s_max"].max() == pytest.approx(
            worst, rel=1e-9)
        assert worst < fac[f"ramp_{d}_w_per_s_tick"].max() / 1e6   # named apart
    text = str(res.summary())
    assert "ramp_up_w_per_s_1s (largest rise between adjacent 1-s means" in text
    assert "ramp_up_w_per_s_tick (largest rise between adjacent ticks" in text
    assert "ramp_megawatts_per_s_1s (largest change between adjacent 1-s means)" in text
