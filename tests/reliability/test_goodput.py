"""Jobs from node hazards (powerlab.reliability.jobscale), goodput planning
(powerlab.reliability.goodput) and the transfer table, against closed forms."""

import math

import numpy as np
import pytest

from powerlab.reliability.goodput import (
    GoodputPlan,
    ettr_first_order,
    plan_goodput,
    simulate_goodput,
)
from powerlab.reliability.interruptions import daly_interval_s
from powerlab.reliability.jobscale import job_interruptions, spare_pool
from powerlab.reliability.transfer import transfer_table

# a homogeneous fleet: 1,000 faults over 250,000 node-days -> 4e-3 per node-day
HOMOG = {"faults": 1000, "exposure_node_days": 250_000.0, "rate_per_node_day": 4e-3,
         "rate_lower": 3.76e-3, "rate_upper": 4.25e-3, "theta": 0.0,
         "planned_rate_per_node_day": 0.0, "repair_model": "exponential",
         "repair_shape": float("nan"), "repair_scale_d": 1.0, "repair_mean_d": 1.0,
         "repair_median_d": math.log(2)}


def test_job_interruptions_scale_linearly_with_nodes():
    t = job_interruptions(HOMOG, [1024, 16_384], 54.0)
    assert t["nodes"].tolist() == [128, 2048]
    assert t["expected_interruptions"].iloc[1] == pytest.approx(2048 * 4e-3 * 54)
    assert t["mttf_h"].iloc[0] == pytest.approx(24 / (128 * 4e-3))
    assert t["mttf_h"].iloc[0] / t["mttf_h"].iloc[1] == pytest.approx(16)
    big = t.iloc[1]
    # Poisson with a well-known rate: 90 % predictive interval ~ mean +- 1.645 sqrt(mean)
    half = 1.645 * math.sqrt(big["expected_interruptions"])
    assert big["predictive_upper"] - big["predictive_lower"] == pytest.approx(2 * half,
                                                                              rel=0.2)


def test_frailty_widens_small_jobs_not_their_mean():
    lemon = {**HOMOG, "theta": 1.2}
    a = job_interruptions(HOMOG, 16, 365.0).iloc[0]
    b = job_interruptions(lemon, 16, 365.0).iloc[0]
    assert a["expected_interruptions"] == b["expected_interruptions"]
    assert (b["predictive_upper"] - b["predictive_lower"]) > \
        1.2 * (a["predictive_upper"] - a["predictive_lower"])


def test_spare_pool_matches_the_binomial_closed_form():
    # theta 0: each node down with u = x/(1+x), x = lambda * mean repair
    x = 4e-3 * 1.0
    u = x / (1 + x)
    out = spare_pool(HOMOG, 2048, prob=0.99, draws=2000)
    from scipy.stats import binom
    s = out["spares"]
    assert binom.cdf(s, 2048 + s, u) >= 0.985
    assert binom.cdf(s - 1, 2048 + s - 1, u) < 0.995
    assert out["unavailability"] == pytest.approx(u)


def test_simulation_agrees_with_first_order_without_lemons():
    # M = 24/(512 * 4e-3) = 11.7 h; C 60 s; R 600 s; plenty of spares, fast repairs
    plan = GoodputPlan(gpus=4096, days=30, checkpoint_s=60, restart_s=600, draws=12,
                       spares=50)
    m = 24 / (512 * 4e-3) * 3600
    tau = daly_interval_s(60, m)
    sim = simulate_goodput(HOMOG, plan, interval_s=tau, spares=50)
    first = float(ettr_first_order(tau, 60, 600, m))
    # faults strike running nodes only, so the simulation loses a little less than the
    # first-order formula (which counts failures per wall-clock second)
    assert first - 0.002 <= sim["ettr"].mean() <= first + 0.01
    assert sim["interruptions"].mean() == pytest.approx(30 * 512 * 4e-3, rel=0.1)


def test_plan_goodput_table_and_knob_stability():
    a = plan_goodput(HOMOG, gpus=2048, days=20, checkpoint_s=30, restart_s=300, draws=8)
    b = plan_goodput(HOMOG, gpus=2048, days=20, checkpoint_s=30, restart_s=300, draws=16,
                     seed=5)
    for m in ("ettr_simulated", "checkpoints_per_day"):
        assert a.value(m) == pytest.approx(b.value(m), rel=0.02)
    t = a.table.set_index("metric")
    for m in ("expected_interruptions", "mttf_h", "ettr_first_order", "ettr_simulated",
              "best_checkpoint_interval_s", "checkpoints_per_day", "restarts_per_day"):
        assert np.isfinite(t.loc[m, "value"])
    assert t.loc["ettr_simulated", "lower"] <= t.loc["ettr_simulated", "value"] <= \
        t.loc["ettr_simulated", "upper"]
    # a checkpoint per (interval + write) of running time
    per_day = 86400 * a.value("ettr_simulated") / a.value("checkpoint_interval_s")
    assert a.value("checkpoints_per_day") == pytest.approx(per_day, rel=0.05)
    assert a.value("restarts_per_day") == pytest.approx(256 * 4e-3, rel=0.35)


def test_lemons_and_scarce_spares_cost_goodput():
    lemon = {**HOMOG, "theta": 2.0, "repair_scale_d": 10.0, "repair_mean_d": 10.0}
    plan = GoodputPlan(gpus=1024, days=20, checkpoint_s=30, restart_s=300, draws=10)
    none = simulate_goodput(lemon, plan, interval_s=600, spares=0)
    many = simulate_goodput(lemon, plan, interval_s=600, spares=20)
    assert none["waited_for_spare_s"].mean() > 0 and many["waited_for_spare_s"].sum() == 0
    assert none["ettr"].mean() < many["ettr"].mean() - 0.05


def test_transfer_table_says_what_is_fitted_and_assumed():
    t = transfer_table({**HOMOG, "source": "x"}, GoodputPlan()).set_index("parameter")
    assert t.loc["rate_per_node_day", "status"] == "fitted"
    assert t.loc["gpus_per_node", "status"] == "assumed"
    assert t.loc["checkpoint_s", "status"] == "given"


def test_retiring_nodes_shrinks_the_pool_and_swapping_sheds_lemons():
    fast = {**HOMOG, "rate_per_node_day": 4e-2, "exposure_node_days": 25_000.0}
    plan = GoodputPlan(gpus=256, days=20, checkpoint_s=30, restart_s=300, draws=6)
    keep = simulate_goodput(fast, plan, interval_s=600, spares=2)
    gone = simulate_goodput(fast, GoodputPlan.from_kwargs(plan, retire_after=1),
                            interval_s=600, spares=2)
    # every failed node retired, 2 spares: the third fault ends the allocation
    assert (gone["interruptions"] <= 3).all() and gone["ettr"].mean() < 0.5 * keep["ettr"].mean()
    # with lemons, swapping failed nodes for spares lowers the job's rate below n * lambda
    lemon = {**fast, "theta": 3.0}
    big = GoodputPlan(gpus=1024, days=30, checkpoint_s=30, restart_s=300, draws=6)
    sim = simulate_goodput(lemon, big, interval_s=600, spares=40)
    assert sim["interruptions"].mean() < 0.8 * 128 * 4e-2 * 30
