"""The flexibility offer and the curtailment plan on the bundled 16k-GPU scenario
(powerlab.flex.offer, powerlab.flex.plan), simulated with the forecast engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.flex import flex_offer, plan_curtailment, random_targets
from powerlab.flex.targets import Targets
from powerlab.levers import site_power_range_w
from powerlab.limits import read_requirements
from powerlab.site import read_scenario
from tests.conftest import make_targets as _targets

REPO = Path(__file__).resolve().parents[2]
SC16K = REPO / "data/scenarios/llama3_16k_h100.yaml"


@pytest.fixture(scope="module")
def sc():
    return read_scenario(SC16K)


@pytest.fixture(scope="module")
def ercot():
    return read_requirements(REPO / "data/requirements/ercot_large_load_illustrative.yaml")


def test_offer_25pct_within_30s_for_3h_with_cost_and_band(sc):
    """Target of issue 23: >= 25 % of IT power within 30 s, held >= 3 h, with its
    throughput cost and uncertainty."""
    off = flex_offer(sc, levels_w=[500, 300, 200], draws=4)
    b = off.best(30.0, 3 * 3600.0, 25.0)
    assert b is not None and b["lever"] in ("power_cap", "clock_lock")
    assert b["shed_pct_of_it"] >= 25 and b["hold_max_s"] >= 3 * 3600
    assert b["shed_megawatts_p05"] <= b["shed_megawatts"] <= b["shed_megawatts_p95"]
    assert b["step_rate_loss_pct_lower"] < b["step_rate_loss_pct"] < b["step_rate_loss_pct_upper"]
    rows = off.summary_frame()
    pause = rows[rows["lever"] == "pause"].iloc[0]
    assert pause["ramp_time_s"] == 60 + 10             # checkpoint + drain
    assert pause["shed_megawatts"] > b["shed_megawatts"]
    assert 0 < pause["restart_risk_probability"] < 1
    assert rows.loc[rows["lever"] == "storage", "shed_megawatts"].iloc[0] == 0  # no battery
    # a second implementation from the definition: shed = GPUs x (job power - capped
    # power) while training, scaled by the share of time training in the window
    _, _full, _ = site_power_range_w(sc)
    job = sc.jobs[0]
    rate = 1 - b["step_rate_loss_pct"] / 100
    cf = 1 - (1 - job.compute_fraction) * rate
    lim = b["power_limit_w"]
    capped = cf * min(job.compute_w, lim) + (1 - cf) * min(job.comm_w, lim)
    full_job = job.compute_fraction * job.compute_w + (1 - job.compute_fraction) * job.comm_w
    hand = job.gpus * (full_job - capped) / 1e6
    assert 0.75 * hand <= b["shed_megawatts"] <= 1.02 * hand
    assert {"shed_megawatts", "ramp_time_s", "hold_max_s"} <= set(rows.columns)
    assert not any(c.endswith("_mw") for c in rows.columns)
    rf = off.response_frame()
    assert rf.loc[rf["response_s"] == 1, "shed_megawatts"].max() == 0   # nothing in 1 s
    assert "25 %" in off.summary()


def test_plan_meets_200_random_targets_without_ramp_violations(sc, ercot):
    """Target of issue 23: >= 99 % of 200 random 5-min targets between 60 % and 100 % of
    IT power met, no ramp requirement violated on the way down or up."""
    _, full, _ = site_power_range_w(sc)
    tg = random_targets(sc.start_utc + pd.Timedelta(minutes=30),
                        sc.end_utc - pd.Timedelta(minutes=10), full, n=200, seed=7)
    plan = plan_curtailment(sc, tg, spec=ercot, draws=8)
    assert len(plan.targets) == 200                     # none dropped
    assert plan.share_met >= 0.99
    assert plan.ramp_violations == 0
    assert set(plan.ramps["direction"]) == {"up", "down"}
    assert plan.lost_gpu_hours_lower < plan.lost_gpu_hours < plan.lost_gpu_hours_upper
    assert plan.targets["response_time_s"].max() <= 30


def test_one_target_known_answer_and_null_case(sc, ercot):
    """Definition (docs/flexibility.md): a target is met in a draw when the trailing 60-s
    mean of IT power is at or under the cap from start + 30 s to the end.  Checked here
    independently on the simulated power (the window mean under the cap in every draw),
    and a cap above the site's power costs nothing (the null case)."""
    _, full, _ = site_power_range_w(sc)
    tg = _targets([("2025-07-01T06:00Z", "2025-07-01T06:30Z", 0.8 * full, None),
                   ("2025-07-01T12:00Z", "2025-07-01T12:05Z", 1.05 * full, None)])
    plan = plan_curtailment(sc, tg, spec=ercot, draws=4)
    t = plan.targets
    assert t["met"].all()
    # mean simulated IT power in the first target is under its cap in every draw, and
    # the plan did not shed far more than asked (at least lost training)
    i = (plan.times >= "2025-07-01T06:01Z") & (plan.times < "2025-07-01T06:30Z")
    m = plan.plan_w[:, i].mean(axis=1)
    base = plan.baseline_w[:, i].mean(axis=1)
    up = base > 0.95 * full                              # draws where the job trains
    assert (m <= 0.8 * full).all() and (m[up] > 0.75 * full).all()
    assert t["lost_gpu_hours"].iloc[0] > 0
    assert t["lost_gpu_hours"].iloc[1] == 0              # a cap above the site: no cost
    col = next(c for c in plan.schedule.columns if c.startswith("power_limit_w["))
    during = plan.schedule.loc[i, col]
    assert during.notna().all() and (during < 650).all()


def test_late_notice_is_a_late_response_not_a_silent_pass(sc, ercot):
    _, full, _ = site_power_range_w(sc)
    tg = _targets([("2025-07-01T06:00Z", "2025-07-01T06:10Z", 0.65 * full,
                    "2025-07-01T06:00Z")])
    plan = plan_curtailment(sc, tg, spec=ercot, draws=3)
    r = plan.targets.iloc[0]
    assert not r["met"] and r["response_time_s"] > 30 and r["worst_overshoot_megawatts"] > 0
    assert not plan.all_met and "NOT" in plan.summary()


def test_target_below_the_capping_floor_pauses_the_job(sc, ercot):
    _floor, full, _ = site_power_range_w(sc)
    tg = _targets([("2025-07-01T08:00Z", "2025-07-01T08:20Z", 0.5 * full, None)])
    plan = plan_curtailment(sc, tg, spec=ercot, draws=3)
    paused = next(c for c in plan.schedule.columns if c.startswith("paused["))
    assert plan.schedule[paused].any()
    assert plan.targets["met"].all() and plan.restart_gpu_hours > 0
    assert plan.ramp_violations == 0


def test_plan_is_stable_when_the_tick_changes(sc, ercot):
    _, full, _ = site_power_range_w(sc)
    tg = _targets([("2025-07-01T06:00Z", "2025-07-01T06:30Z", 0.7 * full, None)])
    a = plan_curtailment(sc, tg, spec=ercot, draws=3, tick_s=1.0)
    b = plan_curtailment(sc, tg, spec=ercot, draws=3, tick_s=2.0)
    assert a.targets["met"].all() and b.targets["met"].all()
    assert np.isclose(a.lost_gpu_hours, b.lost_gpu_hours, rtol=0.03)


def test_demo_reports_the_flexibility_offer():
    from powerlab.demo import demo_scenario, flex_figures

    f = flex_figures(demo_scenario(hours=2), draws=2)
    assert f["flex_hold_s"] == 5400 and f["flex_shed_pct_of_it"] >= 25
    assert 0 < f["flex_step_rate_loss_pct"] < 50 and f["flex_power_limit_w"] <= 300


def test_facility_boundary_caps_account_for_losses_and_cooling(sc, ercot):
    """Facility caps: IT power x PUE plus the base load, the cooling lagging by minutes;
    the plan starts three cooling time constants early and is judged on facility power."""
    tg = _targets([("2025-07-01T15:00Z", "2025-07-01T15:10Z", 13e6, None)])
    tg = Targets(tg.frame, "facility")
    plan = plan_curtailment(sc, tg, spec=ercot, draws=3)
    assert plan.boundary == "facility" and plan.targets["met"].all()
    i = (plan.times >= "2025-07-01T15:01Z") & (plan.times < "2025-07-01T15:10Z")
    assert (plan.plan_w[:, i].mean(axis=1) <= 13e6).all()
    assert (plan.baseline_w[:, i].mean(axis=1) > 13e6).any()     # the cap did bind


@pytest.mark.xfail(strict=True, reason=(
    "found with the sweep-based prior (issue 33 item 7), not fixed: the second target "
    "(0.85 x full, pretrain alone) is planned at a 645-W limit, 7.5 kW under the cap, but "
    "simulates 128 W over it in every draw (met 0/3); near the top the new prior costs "
    "almost nothing (rate 0.9995 at 645 W), so the plan takes the shallowest notch and "
    "the plan/simulation mismatch, hidden by the old prior's larger stretch, shows"))
def test_two_jobs_share_the_shed_and_only_pay_while_they_run():
    """small.yaml: two jobs (768 and 256 GPUs) from 12:05; the finetune ends at 13:05.
    The shed is split over both (5-W notches by lost step rate per watt); a target after
    the finetune has ended costs it nothing."""
    from powerlab.limits import read_requirements as rr

    small = read_scenario(REPO / "data/scenarios/small.yaml")
    spec = rr(REPO / "data/requirements/small_site_example.yaml")
    _, full, _ = site_power_range_w(small)
    tg = _targets([("2025-06-02T12:30Z", "2025-06-02T12:40Z", 0.75 * full, None),
                   ("2025-06-02T13:20Z", "2025-06-02T13:30Z", 0.85 * full, None)])
    plan = plan_curtailment(small, tg, spec=spec, draws=3)
    assert plan.targets["met"].all() and plan.ramp_violations == 0
    s = plan.schedule.set_index("timestamp")
    during = s.loc["2025-06-02T12:31Z":"2025-06-02T12:39Z"]
    assert during["power_limit_w[pretrain]"].notna().all()
    assert during["power_limit_w[finetune]"].notna().all()
    # the second target's lost GPU-hours come from the pretrain job alone
    t2 = plan.targets.iloc[1]
    lim = s.loc["2025-06-02T13:20Z":"2025-06-02T13:29:59Z", "power_limit_w[pretrain]"]
    assert lim.notna().all() and 0 < t2["lost_gpu_hours"] <= 768 * 10 / 60


def test_plan_with_a_battery_meets_200_random_targets_and_spends_its_energy(sc, ercot):
    """The issue's target with every lever engaged: the 16k site with a 5 MW / 5 MWh
    battery (full at the start) meets >= 99 % of 200 random 5-min targets in every draw
    without a ramp violation down or up; the battery spends exactly its energy (water
    filling over the whole trajectory: its state of charge ends at 0, never below) and
    the plan loses less training than without it."""
    import dataclasses

    from powerlab.site.scenario import Battery

    _, full, _ = site_power_range_w(sc)
    scb = sc.replace(mitigations=dataclasses.replace(sc.mitigations, battery=Battery(
        power_megawatts=5.0, energy_megawatt_hours=5.0, initial_soc_fraction=1.0)))
    tg = random_targets(sc.start_utc + pd.Timedelta(minutes=30),
                        sc.end_utc - pd.Timedelta(minutes=10), full, n=200, seed=7)
    plan = plan_curtailment(scb, tg, spec=ercot, draws=4)
    assert len(plan.targets) == 200 and plan.share_met >= 0.99
    assert plan.ramp_violations == 0
    lv = plan.lever_frame().set_index("lever")
    assert lv.loc["storage", "shed_megawatt_hours"] == pytest.approx(5.0, rel=1e-6)
    soc = plan.schedule["storage_soc_fraction"]
    assert soc.min() >= 0 and soc.iloc[-1] == pytest.approx(0.0, abs=1e-9)
    assert plan.schedule["storage_discharge_megawatts"].max() <= 5.0
    without = plan_curtailment(sc, tg, spec=ercot, draws=4, simulate=False)
    assert plan.lost_gpu_hours < without.lost_gpu_hours


def test_battery_plan_is_stable_when_the_tick_changes(sc, ercot):
    """Battery energy, lost training and the verdict at 1-s and 0.5-s ticks.  (Not 2 s:
    there the engine samples the job's 0.9-s communication phase instead of averaging
    it, and its 60-s means run ~6 % above the 1-s ones on this site, caps or not.)"""
    import dataclasses

    from powerlab.site.scenario import Battery

    _, full, _ = site_power_range_w(sc)
    scb = sc.replace(mitigations=dataclasses.replace(sc.mitigations, battery=Battery(
        power_megawatts=1.0, energy_megawatt_hours=0.2, initial_soc_fraction=1.0)))
    tg = _targets([("2025-07-01T06:00Z", "2025-07-01T06:30Z", 0.75 * full, None)])
    a = plan_curtailment(scb, tg, spec=ercot, draws=2, tick_s=1.0)
    b = plan_curtailment(scb, tg, spec=ercot, draws=2, tick_s=0.5)
    assert a.all_met and b.all_met
    la, lb = a.lever_frame().set_index("lever"), b.lever_frame().set_index("lever")
    assert la.loc["storage", "shed_megawatt_hours"] == pytest.approx(
        lb.loc["storage", "shed_megawatt_hours"], rel=1e-3)
    assert np.isclose(a.lost_gpu_hours, b.lost_gpu_hours, rtol=0.03)


def test_lost_training_adds_up_over_levers_and_targets():
    """The plan's lost GPU-hours are one account: the levers' rows add to the total, and
    the targets' rows (the same per-tick cost over each target's span, training-share
    weighted, restarts included) add to the total less what the ramps into and out of
    the targets cost, which is not negative."""
    from powerlab.limits import read_requirements as rr

    small = read_scenario(REPO / "data/scenarios/small.yaml")
    spec = rr(REPO / "data/requirements/small_site_example.yaml")
    floor, full, _ = site_power_range_w(small)
    tg = _targets([("2025-06-02T12:30Z", "2025-06-02T12:40Z", 0.75 * full, None),
                   ("2025-06-02T13:20Z", "2025-06-02T13:30Z", 0.85 * full, None),
                   ("2025-06-02T12:55Z", "2025-06-02T13:00Z", floor + 0.02 * full, None)])
    plan = plan_curtailment(small, tg, spec=spec, draws=2)
    total = plan.lost_gpu_hours
    assert total > 0
    assert plan.levers["lost_gpu_hours"].sum() == pytest.approx(total, rel=1e-9)
    per_target = plan.targets["lost_gpu_hours"]
    assert (per_target > 0).all()
    assert per_target.sum() <= total * (1 + 1e-9)
    # what no target holds is spent outside the targets: the ramps, and a pause's
    # checkpoint lead and restart
    assert plan.restart_gpu_hours > 0


def test_a_target_outside_the_horizon_is_refused_not_dropped():
    """A hand-built Targets may hold a target after the scenario's horizon: one clear
    error naming it, never an empty result row or a traceback."""
    from powerlab.exceptions import PowerlabError

    small = read_scenario(REPO / "data/scenarios/small.yaml")
    _, full, _ = site_power_range_w(small)
    tg = _targets([("2025-06-02T12:30Z", "2025-06-02T12:40Z", 0.75 * full, None),
                   ("2025-06-02T14:00Z", "2025-06-02T14:10Z", 0.75 * full, None)])
    with pytest.raises(PowerlabError, match="t1 .*not inside the scenario's horizon"):
        plan_curtailment(small, tg, draws=1)


def test_offer_flags_costs_extrapolated_below_the_fitted_limits(sc):
    """A curve fitted on 700-250 W (the twin's campaign) extrapolates below 250 W by its
    stated rule: the offer's rows at a 200-W limit say so in their note, the 300-W rows
    (inside the fitted range) do not.  The prior (issue 33) flags the 200-W rows too: a
    650-W job at 200 W lies below the lowest relative power its sweeps reached (36.6 %);
    at 300 W it does not."""
    from powerlab.flex import fit_curve, twin_capping_campaign

    tel, st = twin_capping_campaign([700, 600, 500, 400, 300, 250], hours_each=0.5,
                                    rounds=1, seed=0)
    curve = fit_curve(tel, st, gpu_model="H100-SXM")
    f = flex_offer(sc, curve, levels_w=[300, 200], draws=2).summary_frame()
    capped = f[f["lever"].isin(["power_cap", "clock_lock"])]
    flagged = capped["note"].str.contains("extrapolated below the lowest limit")
    assert flagged.tolist() == (capped["power_limit_w"] == 200).tolist()
    g = flex_offer(sc, None, levels_w=[300, 200], draws=2).summary_frame()
    g = g[g["lever"].isin(["power_cap", "clock_lock"])]
    assert (g["note"].str.contains("extrapolated").tolist()
            == (g["power_limit_w"] == 200).tolist())


def test_plan_options_as_an_object_or_as_keywords(sc, ercot):
    """plan_curtailment's options are one PlanOptions; its fields also work as keywords
    (the calls that predate it), replacing the object's; an unknown one is refused with
    the fields' names."""
    from powerlab.flex import PlanOptions

    _, full, _ = site_power_range_w(sc)
    tg = _targets([("2025-07-01T06:00Z", "2025-07-01T06:10Z", 0.8 * full, None)])
    o = PlanOptions(draws=2, simulate=False, response_s=10.0)
    a = plan_curtailment(sc, tg, o, spec=ercot)
    b = plan_curtailment(sc, tg, spec=ercot, draws=2, simulate=False, response_s=10.0)
    c = plan_curtailment(sc, tg, PlanOptions(draws=5, simulate=False), spec=ercot, draws=2,
                         response_s=10.0)
    pd.testing.assert_frame_equal(a.schedule, b.schedule)
    pd.testing.assert_frame_equal(a.schedule, c.schedule)
    assert a.response_s == 10.0 and c.draws == 2 and a.targets.empty
    with pytest.raises(TypeError, match="unknown PlanOptions option.*'averaging_s'"):
        plan_curtailment(sc, tg, spec=ercot, averaging=30.0)


def test_a_plan_not_simulated_is_not_called_met_and_its_summary_says_so():
    """simulate=False plans the levers but judges nothing: its summary (also its repr in
    JupyterLab) renders, says so, and the plan claims no target met (it said 100 % and
    raised KeyError 'met' in summary() before)."""
    from powerlab.levers import site_power_range_w
    from powerlab.limits import read_requirements
    from powerlab.site import read_scenario

    small = read_scenario(REPO / "data/scenarios/small.yaml")
    spec = read_requirements(REPO / "data/requirements/small_site_example.yaml")
    _, full, _ = site_power_range_w(small)
    tg = _targets([("2025-06-02T12:20Z", "2025-06-02T12:50Z", 0.88 * full, None)])
    plan = plan_curtailment(small, tg, spec=spec, draws=2, simulate=False)
    assert not plan.simulated and np.isnan(plan.share_met) and not plan.all_met
    text = str(plan.summary())
    assert "Not simulated (simulate=False)" in text and "Verdict: none (not simulated)" in text
    assert "Targets met" not in text and repr(plan) == text
    assert plan.lost_gpu_hours > 0                      # the plan itself is there
    done = plan_curtailment(small, tg, spec=spec, draws=2)
    assert done.simulated and done.share_met == 1.0
    assert "Targets met in every draw: 1 of 1" in str(done) and "not simulated" not in str(done)
