"""The levers of the curtailment plan in merit order (powerlab.levers.allocation): shifted job
starts, the site battery, caps or clock locks by response, pauses; known answers derived
by hand from the definitions in the module docstring and docs/flexibility.md."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import PowerlabError
from powerlab.flex import plan_curtailment
from powerlab.levers import LeverAssumptions, site_power_range_w
from powerlab.limits import read_requirements
from powerlab.site import read_scenario
from powerlab.site.scenario import Battery
from tests.conftest import make_targets as _targets

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sc():
    return read_scenario(REPO / "data/scenarios/llama3_16k_h100.yaml")


@pytest.fixture(scope="module")
def ercot():
    return read_requirements(REPO / "data/requirements/ercot_large_load_illustrative.yaml")


def _only(*levers):
    return LeverAssumptions(levers=levers)


def _with_battery(sc, **kw):
    return sc.replace(mitigations=dataclasses.replace(sc.mitigations, battery=Battery(**kw)))


def test_battery_covers_a_small_target_without_lost_training(sc, ercot):
    """A battery larger than the target's shed carries all of it: 0 GPU-hours lost, no
    GPU throttled, and its state of charge falls by exactly the planned shed's energy.
    By hand (docs/flexibility.md, plan step 2): the planned IT power holds
    ``c = 0.99 cap`` from ``start - (averaging_s - response_s)`` to the end, going down
    at ``r_down`` before and back up at ``r_up`` after, so the energy is
    ``(P_full - c) (duration + 30 s) + (P_full - c)^2 / (2 r_down) + (P_full - c)^2 /
    (2 r_up)``.  Simulated (every draw), IT power less the battery stays under the cap
    and no ramp requirement is violated, down or back up."""
    _, full, _ = site_power_range_w(sc)
    scb = _with_battery(sc, power_megawatts=5.0, energy_megawatt_hours=4.0,
                        initial_soc_fraction=0.8)
    tg = _targets([("2025-07-01T06:00Z", "2025-07-01T06:10Z", 0.9 * full, None)])
    plan = plan_curtailment(scb, tg, spec=ercot, draws=4)
    assert plan.all_met and plan.lost_gpu_hours == 0 and plan.delayed_gpu_hours == 0
    s = plan.schedule
    lever_cols = [c for c in s.columns if c.startswith("lever[")]
    assert (s[lever_cols] == "").all().all()               # no GPU slowed
    dis_j = s["storage_discharge_megawatts"].sum() * 1e6 * plan.tick_s
    soc_drop = 0.8 - s["storage_soc_fraction"].iloc[-1]
    assert soc_drop == pytest.approx(dis_j / 4.0 / 3.6e9, rel=1e-9)
    d = full - 0.99 * 0.9 * full
    hand_j = d * 630 + d ** 2 / (2 * plan.rate_down_w_per_s) + d ** 2 / (2 * plan.rate_up_w_per_s)
    assert dis_j == pytest.approx(hand_j, rel=0.01)
    lv = plan.lever_frame().set_index("lever")
    assert lv.loc["storage", "used"] and not lv.loc["power_cap", "used"]
    assert lv.loc["storage", "shed_megawatt_hours"] == pytest.approx(dis_j / 3.6e9)
    assert lv.loc["storage", "storage_discharge_megawatt_hours"] == pytest.approx(
        dis_j / 3.6e9)                                     # IT boundary: the same
    assert lv.loc["storage", "storage_recharge_megawatt_hours"] == pytest.approx(
        dis_j / 3.6e9 / 0.9)                               # round-trip efficiency 0.9
    t = plan.targets.iloc[0]
    assert t["shed_megawatts[storage]"] > 0 and t["shed_megawatts[power_cap]"] == 0
    assert plan.ramp_violations == 0


def test_small_battery_runs_empty_then_caps_take_the_rest(sc, ercot):
    """A battery with less energy than the shed: discharge never above P_max, the state
    of charge reaches its minimum (0.1) and never goes below; lost training lies
    strictly between none and the plan without storage."""
    _, full, _ = site_power_range_w(sc)
    scb = _with_battery(sc, power_megawatts=1.0, energy_megawatt_hours=0.1,
                        initial_soc_fraction=0.9, soc_min_fraction=0.1)
    tg = _targets([("2025-07-01T06:00Z", "2025-07-01T06:10Z", 0.8 * full, None)])
    with_b = plan_curtailment(scb, tg, spec=ercot, draws=3)
    without = plan_curtailment(scb, tg, spec=ercot, draws=3,
                               assumptions=_only("power_cap", "clock_lock", "pause",
                                                 "shift_start"))
    s = with_b.schedule
    assert s["storage_discharge_megawatts"].max() <= 1.0 + 1e-12
    assert s["storage_soc_fraction"].min() >= 0.1 - 1e-12
    assert s["storage_soc_fraction"].iloc[-1] == pytest.approx(0.1, abs=1e-9)
    assert 0 < with_b.lost_gpu_hours < without.lost_gpu_hours
    assert with_b.all_met and without.all_met
    assert without.schedule["storage_discharge_megawatts"].eq(0).all()


def test_job_starting_in_the_window_starts_when_it_ends():
    """small.yaml: both jobs start at 12:05, inside a 12:03-12:10 cap at 70 % of full
    IT power.  Definition: a job held by ``shift_start`` starts when the planned power is
    back at full (the target's end plus the way back up at ``r_up``: ``(P_full - c) /
    r_up``), the second one ``ceil(step_pretrain / r_up)`` later; no training is lost
    (the wait is delayed GPU-hours: GPUs x hold) and the simulated site, with the
    shifted starts, meets the cap without a ramp violation."""
    small = read_scenario(REPO / "data/scenarios/small.yaml")
    spec = read_requirements(REPO / "data/requirements/small_site_example.yaml")
    _, full, _ = site_power_range_w(small)
    tg = _targets([("2025-06-02T12:03Z", "2025-06-02T12:10Z", 0.7 * full, None)])
    plan = plan_curtailment(small, tg, spec=spec, draws=3)
    assert plan.all_met and plan.lost_gpu_hours == 0
    st = plan.lever_schedule.starts_utc
    back = pd.Timestamp("2025-06-02T12:10Z") + pd.Timedelta(
        seconds=(full - 0.99 * 0.7 * full) / plan.rate_up_w_per_s)
    assert abs((st["pretrain"] - back).total_seconds()) <= 1.0
    pre = small.jobs[0]
    step = pre.gpus * (pre.compute_fraction * pre.compute_w
                       + (1 - pre.compute_fraction) * pre.comm_w - small.hardware.gpu_idle_w)
    gap = (st["finetune"] - st["pretrain"]).total_seconds()
    assert gap == np.ceil(step / plan.rate_up_w_per_s)
    hold = {"pretrain": (st["pretrain"] - pre.start_utc).total_seconds(),
            "finetune": (st["finetune"] - small.jobs[1].start_utc).total_seconds()}
    hand = (768 * hold["pretrain"] + 256 * hold["finetune"]) / 3600
    assert plan.delayed_gpu_hours == pytest.approx(hand, rel=1e-9)
    s = plan.schedule.set_index("timestamp")
    held = s.loc["2025-06-02T12:05Z":st["pretrain"] - pd.Timedelta(seconds=1),
                 "lever[pretrain]"]
    assert len(held) > 480 and (held == "shift_start").all()
    assert s.loc[st["pretrain"], "lever[pretrain]"] == ""
    # the simulated scenario has the shifted starts: the site draws idle GPUs until then
    i = (plan.times >= "2025-06-02T12:06Z") & (plan.times < "2025-06-02T12:10Z")
    assert (plan.plan_w[:, i].max(axis=1) < 0.7 * full).all()
    # without the lever the same cap costs training
    caps_only = plan_curtailment(small, tg, spec=spec, draws=2, assumptions=_only("power_cap"))
    assert caps_only.lost_gpu_hours > 0 and caps_only.delayed_gpu_hours == 0


def test_response_shorter_than_a_cap_gives_clock_locks(sc, ercot):
    """A target known only at its start (notice = start): a 3-s response is shorter than
    the cap's 5 s but not the clock lock's 2 s, so the plan locks clocks (setting
    ``clock_sm_mhz`` = the curve's clock at the capped power, no power limit) and starts
    down 2 s after the notice; with 30 s it caps (starting down after 5 s); known in
    advance, a 3-s response still caps (the plan goes down before the start)."""
    _, full, _ = site_power_range_w(sc)
    start = "2025-07-01T06:00Z"
    late = _targets([(start, "2025-07-01T06:10Z", 0.8 * full, start)])
    first_down = {}
    for resp, lever in ((3.0, "clock_lock"), (30.0, "power_cap")):
        plan = plan_curtailment(sc, late, spec=ercot, response_s=resp, draws=2)
        s = plan.schedule
        col = next(c for c in s.columns if c.startswith("lever["))
        name = col[len("lever["):-1]
        used = s[col] != ""
        assert set(s.loc[used, col]) == {lever}
        assert plan.targets["throttle_lever"].iloc[0] == lever
        if lever == "clock_lock":
            clk = s.loc[used, f"clock_sm_mhz[{name}]"]
            assert clk.notna().all() and s.loc[used, f"power_limit_w[{name}]"].isna().all()
            assert (clk < 1980).all() and (clk >= 1980 * (200 / 650) ** (1 / 3) - 1e-6).all()
        else:
            assert s.loc[used, f"power_limit_w[{name}]"].notna().all()
            assert s[f"clock_sm_mhz[{name}]"].isna().all()
        below = s["planned_it_power_megawatts"] < full / 1e6 - 1e-9
        first_down[lever] = (s.loc[below, "timestamp"].iloc[0]
                             - pd.Timestamp(start)).total_seconds()
    assert first_down == {"clock_lock": 2.0, "power_cap": 5.0}
    ahead = _targets([(start, "2025-07-01T06:10Z", 0.8 * full, None)])
    plan = plan_curtailment(sc, ahead, spec=ercot, response_s=3.0, draws=2, simulate=False)
    used = plan.lever_frame().set_index("lever")["used"]
    assert used["power_cap"] and not used["clock_lock"]


def test_null_case_targets_above_the_site_use_no_lever(sc, ercot):
    """Caps above the site's full IT power: no lever used, nothing lost or delayed, the
    battery untouched (its state of charge stays at the initial 0.5)."""
    _, full, _ = site_power_range_w(sc)
    scb = _with_battery(sc, power_megawatts=5.0, energy_megawatt_hours=4.0)
    tg = _targets([("2025-07-01T06:00Z", "2025-07-01T06:10Z", 1.02 * full, None),
                   ("2025-07-01T09:00Z", "2025-07-01T09:30Z", 1.1 * full, None)])
    plan = plan_curtailment(scb, tg, spec=ercot, draws=2)
    assert plan.all_met and plan.lost_gpu_hours == 0 and plan.delayed_gpu_hours == 0
    lv = plan.lever_frame()
    assert not lv["used"].any() and (lv["peak_shed_megawatts"] == 0).all()
    assert (plan.schedule["storage_soc_fraction"] == 0.5).all()
    assert (plan.targets["lost_gpu_hours"] == 0).all()


def test_unknown_lever_is_one_line_error(sc):
    _, full, _ = site_power_range_w(sc)
    tg = _targets([("2025-07-01T06:00Z", "2025-07-01T06:10Z", 0.8 * full, None)])
    with pytest.raises(PowerlabError, match="unknown lever 'battery'") as e:
        plan_curtailment(sc, tg, assumptions=_only("power_cap", "battery"), simulate=False)
    assert "\n" not in str(e.value)


def test_cli_plan_writes_the_levers(tmp_path):
    from powerlab.cli import main

    t = tmp_path / "t.csv"
    t.write_text("start_utc,end_utc,cap_megawatts\n2025-06-02T12:03Z,2025-06-02T12:10Z,0.6\n")
    assert main(["flex", "plan", str(REPO / "data/scenarios/small.yaml"), "--target", str(t),
                 "--requirements", str(REPO / "data/requirements/small_site_example.yaml"),
                 "--out", str(tmp_path / "p"), "--draws", "2", "--quiet"]) == 0
    lv = pd.read_csv(tmp_path / "p/plan_levers.csv")
    assert list(lv["lever"]) == ["shift_start", "storage", "power_cap", "clock_lock", "pause"]
    assert {"peak_shed_megawatts", "lost_gpu_hours", "delayed_gpu_hours",
            "storage_soc_fraction"} <= set(lv.columns)
    assert lv.set_index("lever").loc["shift_start", "delayed_gpu_hours"] > 0
    sched = pd.read_csv(tmp_path / "p/plan_schedule.csv")
    assert {"storage_soc_fraction", "shed_megawatts[shift_start]",
            "lever[pretrain]"} <= set(sched.columns)
    for f in ("plan_levers.csv", "plan_schedule.csv", "plan_targets.csv"):
        cols = pd.read_csv(tmp_path / "p" / f, nrows=0).columns
        assert not any(c.endswith("_mw") or "_mw[" in c for c in cols)
    assert main(["flex", "plan", str(REPO / "data/scenarios/small.yaml"), "--target", str(t),
                 "--requirements", str(REPO / "data/requirements/small_site_example.yaml"),
                 "--out", str(tmp_path / "q"), "--levers", "power_cap,nope"]) == 2


def test_pause_when_cheaper_than_capping_for_a_long_hold():
    """Merit order, step 4: a pause is chosen where it loses less than capping.  With a
    steep curve (``r = y^3``: capping is dear) a 30-min cap at 88 % of small.yaml's IT
    power is met at least cost by pausing the small finetune job (256 GPUs) and capping
    the pretrain job a little, not by capping alone; with the stated H100 prior
    (``r = y^0.3``, a cap sheds a watt for about a quarter of a pause's cost) nothing is
    paused.  Into and out of the pause the finetune's limit glides at the allowed ramp
    rates: no ramp requirement is violated (a bare pause step breaks the 1-s limit).
    Margin 3 %: at a 1-s tick the engine's pretrain draws about 1.4 % above its nominal
    step mean (its 1.2-s communication phase on 1-s ticks), more than the default 1 %
    once the job is barely capped."""
    import numpy as np

    from powerlab.flex import PlanMargins
    from powerlab.levers import prior_curve

    small = read_scenario(REPO / "data/scenarios/small.yaml")
    spec = read_requirements(REPO / "data/requirements/small_site_example.yaml")
    _, full, _ = site_power_range_w(small)
    tg = _targets([("2025-06-02T12:20Z", "2025-06-02T12:50Z", 0.88 * full, None)])
    steep = dataclasses.replace(prior_curve("H100-SXM", 650.0), b=np.array([3.0, 0.0]))
    m = PlanMargins(margin_fraction=0.03)
    best = plan_curtailment(small, tg, spec=spec, curves=steep, draws=2, margins=m)
    caps = plan_curtailment(small, tg, spec=spec, curves=steep, draws=2, margins=m,
                            assumptions=_only("power_cap", "clock_lock"))
    lv = best.lever_frame().set_index("lever")
    assert lv.loc["pause", "jobs"] == "finetune" and lv.loc["pause", "restart_gpu_hours"] > 0
    assert best.lost_gpu_hours < caps.lost_gpu_hours
    assert best.all_met and caps.all_met and best.ramp_violations == 0
    s = best.schedule.set_index("timestamp")
    first = s.index[s["paused[finetune]"]][0]
    glide = s.loc[:first - pd.Timedelta(seconds=1), "power_limit_w[finetune]"].dropna()
    assert len(glide) > 10 and glide.is_monotonic_decreasing
    prior = plan_curtailment(small, tg, spec=spec, draws=2, simulate=False)
    assert not prior.lever_frame().set_index("lever").loc["pause", "used"]


def test_no_shift_when_the_wait_exceeds_the_longest_hold(sc, ercot):
    """The 16k job starts at 00:10 inside caps that run from 00:05 to 02:00: holding it
    would take nearly 2 h, more than ``shift_max_hold_s`` (1 h), so it starts on time
    and is capped; with a 3-h hold allowed it waits, losing no training."""
    _, full, _ = site_power_range_w(sc)
    tg = _targets([("2025-07-01T00:05Z", "2025-07-01T01:00Z", 0.8 * full, None),
                   ("2025-07-01T01:00Z", "2025-07-01T02:00Z", 0.9 * full, None)])
    plan = plan_curtailment(sc, tg, spec=ercot, draws=2, simulate=False)
    assert plan.lever_schedule.starts_utc == {} and plan.delayed_gpu_hours == 0
    assert plan.lost_gpu_hours > 0
    long = plan_curtailment(sc, tg, spec=ercot, draws=2, simulate=False,
                            assumptions=LeverAssumptions(shift_max_hold_s=3 * 3600.0))
    assert long.lost_gpu_hours == 0 and long.delayed_gpu_hours > 16384 * 1.8
