"""Node hazard fits (powerlab.reliability.faultfit, .repair) on the InfiniteHBD trace and
against ground truth (powerlab.reliability.faultsim), the null case included."""

import warnings

import numpy as np
import pandas as pd
import pytest

from powerlab.data import bundled_path
from powerlab.exceptions import DataQualityWarning
from powerlab.iotools.faults import read_infinitehbd
from powerlab.reliability.faultfit import fit_faults
from powerlab.reliability.faultsim import simulate_fault_records
from powerlab.reliability.repair import fit_repair

T0 = pd.Timestamp("2024-01-01", tz="UTC")
T1 = T0 + pd.Timedelta(days=349)


@pytest.fixture(scope="module")
def hbd():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        f, m = read_infinitehbd(bundled_path("infinitehbd-fault-trace",
                                             "fault_trace.json.gz"))
    return fit_faults(f, n_nodes=m["n_nodes"], start=m["start"], end=m["end"],
                      source="infinitehbd")


def _fit(theta, seed, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        f = simulate_fault_records(theta=theta, seed=seed, **kw)
        return fit_faults(f, n_nodes=400, start=T0, end=T1)


def test_infinitehbd_fit(hbd):
    # issue 36's first look: 4.18 faults per 1,000 node-days over all 584 faults and
    # 400 x 349 node-days; here 578 unexpected over node-days in service (outages out)
    p = hbd.params()
    assert p["faults"] == 578 and p["planned_faults"] == 6
    assert 584 / (400 * 349) * 1e3 == pytest.approx(4.18, abs=0.005)
    assert p["rate_per_node_day"] * 1e3 == pytest.approx(578 / hbd.exposure_node_days * 1e3)
    assert p["rate_lower"] < p["rate_per_node_day"] < p["rate_upper"]
    # lemon nodes: 33 of 231 faulty nodes failed >= 5 times (issue 36; 32 unexpected-only)
    lem = hbd.lemons
    assert lem.loc[5, "observed"] == 32 and lem.loc[1, "observed"] == 231
    # homogeneous Poisson cannot make them; the gamma frailty fit does
    assert lem.loc[5, "expected_poisson"] < 10 and lem.loc[5, "expected_frailty"] > 25
    assert hbd.frailty["lr_p_value"].iloc[0] < 1e-10 and hbd.theta > 0.5
    # repair: median 0.85 d, mean 5.5 d (issue 36); the heavy tail picks a shape < 1
    best = hbd.repair.iloc[0]
    assert best["model"] in ("weibull", "lognormal")
    assert best["median_lower_d"] <= 0.85 <= best["median_upper_d"]
    assert best["mean_lower_d"] <= 5.535 <= best["mean_upper_d"]
    assert "not estimable" in hbd.trend["note"].iloc[0]
    # time from a repair to the next fault: shape 0.30 [0.27, 0.33], far below what the
    # fitted frailty alone gives a pooled fleet (0.84 on a theta 1.2 twin, below)
    assert hbd.trend["post_repair_shape_upper"].iloc[0] < 0.5
    assert "theta" in str(hbd.summary())


def test_null_fleet_shows_no_frailty_and_covers_the_rate():
    # ground truth: homogeneous Poisson at 4.2e-3 per node-day (theta 0)
    for seed in range(3):
        r = _fit(0.0, seed)
        assert r.frailty["lr_p_value"].iloc[0] > 0.01
        row = r.class_rates.loc["unexpected"]
        assert row["lower"] <= 4.2e-3 <= row["upper"]


def test_frailty_fleet_is_detected_and_theta_recovered():
    r = _fit(1.2, 0)
    fr = r.frailty.iloc[0]
    assert fr["lr_p_value"] < 1e-6
    assert abs(fr["theta"] - 1.2) < 2.5 * fr["theta_se"]


@pytest.mark.slow
def test_frailty_test_size_power_and_coverage_over_seeds():
    # 12 null fleets: the LR test (half chi-square) rejects at 5 % in at most 2;
    # 12 frailty fleets (theta 1.2): all rejected; theta's 95 % interval covers >= 10
    null = [_fit(0.0, 100 + s).frailty["lr_p_value"].iloc[0] for s in range(12)]
    assert sum(p < 0.05 for p in null) <= 2
    alt = [_fit(1.2, 200 + s).frailty.iloc[0] for s in range(12)]
    assert all(a["lr_p_value"] < 0.01 for a in alt)
    cover = sum(abs(a["theta"] - 1.2) <= 1.96 * a["theta_se"] for a in alt)
    assert cover >= 10


def test_repair_fit_recovers_lognormal_with_censoring():
    # truth: lognormal, median 0.85 d, sigma 1.8 -> mean 0.85 exp(1.62) = 4.30 d
    rng = np.random.default_rng(3)
    t = rng.lognormal(np.log(0.85), 1.8, 800)
    c = np.minimum(t, rng.uniform(2, 60, 800))      # censoring times
    out = fit_repair(c, c == t)
    best = out.iloc[0]
    assert best["model"] == "lognormal" and best["n_censored"] > 20
    assert best["median_lower_d"] <= 0.85 <= best["median_upper_d"]
    assert best["mean_lower_d"] <= 4.30 <= best["mean_upper_d"]
    # a knob: the bootstrap size does not move the complete-data intervals much
    a = fit_repair(t, n_boot=200).iloc[0]
    b = fit_repair(t, n_boot=800).iloc[0]
    assert a["median_lower_d"] == pytest.approx(b["median_lower_d"], rel=0.1)


def test_trend_finds_a_rising_rate_and_not_a_flat_one():
    flat = _fit(0.0, 7).trend.iloc[0]
    assert flat["lower"] <= 1.0 <= flat["upper"]
    # exponential nodes, no frailty: the post-repair Weibull shape's interval holds 1
    assert flat["post_repair_shape_lower"] <= 1.0 <= flat["post_repair_shape_upper"]
    frail = _fit(1.2, 1).trend.iloc[0]
    assert 0.6 < frail["post_repair_shape"] < 0.95       # frailty alone: mildly below 1
    # rising fleet: second half at 3x the first half's rate
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        a = simulate_fault_records(days=174.5, rate_per_node_day=2e-3, seed=8)
        b = simulate_fault_records(days=174.5, rate_per_node_day=6e-3, seed=9,
                                   origin=str((T0 + pd.Timedelta(days=174.5)).date()))
        b["start"] += pd.Timedelta(hours=12)
        b["end"] += pd.Timedelta(hours=12)
        a["end"] = a["end"].where(a["end"] < T0 + pd.Timedelta(days=174.5), pd.NaT)
        a = a[a["end"].notna()]
        r = fit_faults(pd.concat([a, b]), n_nodes=400, start=T0, end=T1)
    tr = r.trend.iloc[0]
    assert tr["lower"] > 1.0 and tr["laplace_p_value"] < 0.01
