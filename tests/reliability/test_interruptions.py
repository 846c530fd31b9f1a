"""Tests of powerlab.reliability.interruptions and the engine's interruption rules."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import optimize, stats

from powerlab.exceptions import ScenarioError
from powerlab.reliability.interruption_draws import interruption_marks
from powerlab.reliability.interruptions import (
    PLANNED,
    checkpoint_report,
    checkpoint_waste_fraction,
    daly_interval_s,
    llama3_model,
    young_interval_s,
)
from powerlab.site.engine import forecast
from powerlab.site.interruption_sim import simulate_interruptions
from powerlab.site.jobplan import job_plan
from powerlab.site.scenario import parse_scenario, read_scenario
from powerlab.telemetry.events import ROOT_CAUSES

from ..support.reference_sim import simulate

SCEN = Path(__file__).parents[2] / "data" / "scenarios"


def _small(interruptions=None, failures=None, site=None):
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["horizon"] = {"start_utc": "2025-06-02T12:00:00Z", "end_utc": "2025-06-02T12:40:00Z"}
    d["hardware"]["cluster_gpus"] = 40
    a, b = d["jobs"]
    a.update(gpus=24, duration_s=1800, startup_s=30, shutdown_s=20, jitter_s=0.1)
    a["checkpoint"] = {"interval_s": 300, "duration_s": 20}
    a.pop("failures", None)
    b.pop("failures", None)
    if interruptions is not None:
        a["interruptions"] = interruptions
    if failures is not None:
        a["failures"] = failures
    if site is not None:
        d["interruptions"] = site
    b.update(gpus=12, duration_s=1500, jitter_s=0.05)
    return d


# --------------------------------------------------------------------------- the 54 days


def test_llama3_54_days_reproduces_466_interruptions_and_90pct_effective_time():
    sc = read_scenario(SCEN / "llama3_54d_16k_h100.yaml")
    job = sc.jobs[0]
    assert job.duration_s == 54 * 86400
    df = simulate_interruptions(job, draws=12, seed=0, tick_s=1.0)
    n = len(df)
    # Poisson means 466 and 419 (the paper's counts); 4 standard errors
    assert abs(df["interruptions"].mean() - 466) < 4 * math.sqrt(466 / n)
    assert abs(df["unexpected_interruptions"].mean() - 419) < 4 * math.sqrt(419 / n)
    assert abs(df["planned_interruptions"].mean() - 47) < 4 * math.sqrt(47 / n)
    assert (df["effective_training_time"] > 0.90).all()
    assert df["effective_training_time"].median() < 0.95   # not vacuous: real losses
    # null: the same job without interruptions loses nothing and only checkpoints cost
    quiet = job.__class__(**{**job.__dict__, "failure_rate_per_gpu_h": 0.0,
                             "interruptions": None})
    q = simulate_interruptions(quiet, draws=1, tick_s=1.0)
    assert q["interruptions"].iloc[0] == 0
    ck = job.checkpoint_duration_s / (job.checkpoint_interval_s + job.checkpoint_duration_s)
    assert q["effective_training_time"].iloc[0] == pytest.approx(
        1 - ck - (job.startup_s + job.shutdown_s) / job.duration_s, abs=2e-3)
    # the first-order waste model agrees with the simulated loss
    rep = checkpoint_report(sc).iloc[0]
    assert 1 - df["effective_training_time"].mean() == pytest.approx(
        rep["waste_chosen"], abs=0.01)


def test_causes_follow_table5_counts():
    m = llama3_model()
    assert m.causes == tuple(rc.name for rc in ROOT_CAUSES)
    gpu_h = 54 * 24 * 16384
    assert m.rates_per_gpu_h[0] == pytest.approx(148 / gpu_h)
    assert m.unexpected_rate_per_gpu_h == pytest.approx(419 / gpu_h)
    assert m.total_rate_per_gpu_h == pytest.approx(466 / gpu_h)
    marks = interruption_marks(m, 0, 0, 0, 200_000)
    counts = np.bincount(marks, minlength=len(m.all_causes))
    expected = np.array([rc.llama3_count for rc in ROOT_CAUSES] + [47]) / 466 * len(marks)
    assert stats.chisquare(counts, expected).pvalue > 1e-3
    # null: a model with one cause marks everything with it; no model: cause 0
    assert (interruption_marks(None, 0, 0, 0, 5) == 0).all()


# --------------------------------------------------------------------------- the rules


def test_failure_during_downtime_extends_it_and_is_counted():
    sc = parse_scenario(_small(failures={"rate_per_gpu_h": 0.01, "restart_s": 120}))
    job = sc.jobs[0]
    tick = 1.0
    n_su = 30
    plan = job_plan(job, tick, 0, 1800, np.array([400, 450]))
    fails = [e for e in plan.events if e[1] == "failure"]
    assert [f[0] for f in fails] == [400, 450]
    # down from 400 until a full restart after the second failure: 450 + 120
    down = [(s_, ln) for st, s_, ln in zip(plan.states, plan.starts, plan.lengths)
            if st == 6]
    assert down == [(400, 170)]
    restart = [e[0] for e in plan.events if e[1] == "restart"]
    assert restart == [570]
    # null: a lone failure gives exactly restart_s of downtime
    one = job_plan(job, tick, 0, 1800, np.array([400]))
    down1 = [(s_, ln) for st, s_, ln in zip(one.states, one.starts, one.lengths) if st == 6]
    assert down1 == [(400, 120)]
    # a failure during start-up aborts it: a new downtime starts there
    su = job_plan(job, tick, 0, 1800, np.array([400, 530]))
    assert [e[0] for e in su.events if e[1] == "failure"] == [400, 530]
    runs = [(int(st), int(s_), int(ln)) for st, s_, ln in zip(su.states, su.starts,
                                                              su.lengths)]
    assert (1, 520, 10) in runs and (6, 530, 120) in runs   # start-up cut at 530
    assert 530 < 520 + n_su


def test_planned_interruption_saves_work_with_on_demand_checkpoint():
    d = _small(interruptions={"rates_per_gpu_h": {"faulty_gpu": 1e-3},
                              "planned_rate_per_gpu_h": 1e-3,
                              "restart": {"detection_s": 60, "drain_s": 30,
                                          "reschedule_s": 90}})
    job = parse_scenario(d).jobs[0]
    assert job.restart_s == 180 and job.interruptions.planned_restart_s == 120
    f = np.array([200])
    pl = job_plan(job, 1.0, 0, 1800, f, planned=np.array([True]))
    un = job_plan(job, 1.0, 0, 1800, f, planned=np.array([False]))
    assert pl.lost_ticks == 0 and un.lost_ticks > 0
    # planned: checkpoint (20 s) then 120 s down; unexpected: 180 s down
    runs = {int(s_): (int(st), int(ln)) for st, s_, ln in zip(pl.states, pl.starts,
                                                               pl.lengths)}
    assert runs[200] == (4, 20) and runs[220] == (6, 120)
    assert next(e for e in pl.events if e[1] == "planned_interruption")[2] == 140
    runs_u = {int(s_): (int(st), int(ln)) for st, s_, ln in zip(un.states, un.starts,
                                                                 un.lengths)}
    assert runs_u[200] == (6, 180)


def test_engine_matches_reference_when_failures_overlap_downtime():
    # high rate, long restart: failures fall during downtime in every draw
    d = _small(failures={"rate_per_gpu_h": 0.3, "restart_s": 200})
    sc = parse_scenario(d)
    res = forecast(sc, draws=3, seed=4)
    ref = simulate(sc, draws=3, seed=4)
    np.testing.assert_allclose(res.it_w, ref["it_w"], rtol=1e-6, atol=0)
    tp = res.throughput.set_index(["draw", "job"])
    for key, v in ref["lost_s"].items():
        assert tp.loc[key, "lost_to_failures_s"] == pytest.approx(v)
    fails = res.events[res.events["event"] == "failure"]
    assert (fails["duration_s"] == 0).any()   # some arrived while down


def test_forecast_frames_summary_and_sidecar(tmp_path):
    d = _small(interruptions={"model": "llama3", "scale": 10000.0})
    sc = parse_scenario(d)
    res = forecast(sc, draws=3, seed=1)
    tp = res.throughput
    for col in ("interruptions", "planned_interruptions", "downtime_s",
                "effective_training_time"):
        assert col in tp.columns
    assert tp.query("job == 'pretrain'")["interruptions"].sum() > 0
    eff = tp["effective_training_time"]
    assert ((eff > 0) & (eff < 1)).all()
    ir = res.interruptions
    assert set(ir["cause"]) <= set(sc.jobs[0].interruptions.all_causes)
    ev = res.events
    n_ev = ev["event"].isin(["failure", "planned_interruption"]).groupby(ev["draw"]).sum()
    assert n_ev.tolist() == tp.query("job == 'pretrain'")["interruptions"].tolist()
    assert (ir.groupby("draw").size().reindex(range(3), fill_value=0) == n_ev).all()
    text = str(res.summary())
    assert "effective_training_time (median)" in text and "daly_interval_s" in text
    split = res.summary().interruptions.loc["pretrain"]
    assert [split[f"restart: {k}"] for k in ("detection_s", "drain_s", "reschedule_s",
                                              "startup_s")] == [60, 30, 120, 30]
    from powerlab.site.export import write_facilities_csv

    _, jpath = write_facilities_csv(res, tmp_path / "f.csv", "15min")
    side = json.loads(jpath.read_text())
    assert side["jobs"]["pretrain"]["interruptions"] == float(
        tp.query("job == 'pretrain'")["interruptions"].median())
    assert side["jobs"]["finetune"]["interruptions"] == 0.0
    assert 0 < side["jobs"]["pretrain"]["effective_training_time"] < 1


def test_site_level_interruptions_apply_to_jobs_without_their_own():
    sc = parse_scenario(_small(site={"model": "llama3"}))
    assert all(j.interruptions is not None for j in sc.jobs)
    assert sc.jobs[1].failure_rate_per_gpu_h == pytest.approx(466 / (54 * 24 * 16384))
    # a job's own failures section wins
    d = _small(site={"model": "llama3"}, failures={"rate_per_gpu_h": 0.01})
    sc2 = parse_scenario(d)
    assert sc2.jobs[0].interruptions is None and sc2.jobs[0].failure_rate_per_gpu_h == 0.01
    # null: no interruptions anywhere, no rate
    sc3 = parse_scenario(_small())
    assert sc3.jobs[0].failure_rate_per_gpu_h == 0 and sc3.jobs[0].interruptions is None


# --------------------------------------------------------------------------- checkpoints


def test_young_and_daly_intervals():
    assert young_interval_s(10, 10_000) == pytest.approx(math.sqrt(200_000))
    c, m = 10.0, 10_000.0
    x = c / (2 * m)
    assert daly_interval_s(c, m) == pytest.approx(
        math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c)
    assert daly_interval_s(500, 100) == 100    # C >= 2M: checkpoint every MTBF
    # the interval minimising the first-order waste is close to Young's
    best = optimize.minimize_scalar(lambda t: checkpoint_waste_fraction(t, c, m),
                                    bounds=(1, 10_000), method="bounded").x
    assert best == pytest.approx(young_interval_s(c, m), rel=0.03)
    # the cost of the chosen interval is zero at Daly's and grows away from it
    sc = read_scenario(SCEN / "llama3_54d_16k_h100.yaml")
    rep = checkpoint_report(sc).iloc[0]
    assert 0 <= rep["throughput_cost"] < 1e-3
    assert rep["checkpoint_swing_w"] > 5e6
    far = sc.replace(jobs=(sc.jobs[0].__class__(**{**sc.jobs[0].__dict__,
                                                   "checkpoint_interval_s": 4000}),))
    assert checkpoint_report(far).iloc[0]["throughput_cost"] > 0.05


# --------------------------------------------------------------------------- bad input


@pytest.mark.bad_input("scenario")
@pytest.mark.parametrize("bad, key, words", [
    ({"model": "llama3", "rates_per_gpu_h": {"faulty_gpuu": 1e-6}},
     "jobs[0].interruptions.rates_per_gpu_h.faulty_gpuu", "did you mean 'faulty_gpu'"),
    ({"model": "llama4"}, "jobs[0].interruptions.model", "expected 'llama3'"),
    ({"rates_per_gpu_h": {"disk": -1}}, "jobs[0].interruptions.rates_per_gpu_h.disk",
     ">= 0"),
    ({"rates_per_gpu_h": {"Bad Name": 1e-6}},
     "jobs[0].interruptions.rates_per_gpu_h.Bad Name", "lower-case"),
    ({"rates_per_gpu_h": {PLANNED: 1e-6}},
     "jobs[0].interruptions.rates_per_gpu_h.planned", "planned_rate_per_gpu_h"),
    ({}, "jobs[0].interruptions.rates_per_gpu_h", "at least one rate"),
    ({"model": "llama3", "restart": {"detection_s": "1 min"}},
     "jobs[0].interruptions.restart.detection_s", "expected a number"),
    ({"model": "llama3", "restrat": {}}, "jobs[0].interruptions.restrat", "restart"),
])
def test_bad_interruptions_name_the_key(bad, key, words):
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(_small(interruptions=bad))
    assert ei.value.key == key
    assert words in str(ei.value)


@pytest.mark.bad_input("scenario")
def test_failures_and_interruptions_together_refused():
    d = _small(interruptions={"model": "llama3"}, failures={"rate_per_gpu_h": 1e-5})
    with pytest.raises(ScenarioError, match="not both") as ei:
        parse_scenario(d)
    assert ei.value.key == "jobs[0].failures"
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(_small(site={"model": "nope"}))
    assert ei.value.key == "interruptions.model"


def test_simulate_interruptions_is_what_the_engine_does():
    d = _small(interruptions={"model": "llama3", "scale": 10000.0})
    d["horizon"]["start_utc"] = d["jobs"][0]["start_utc"]
    sc = parse_scenario(d)
    assert sc.jobs[0].start_utc == sc.start_utc   # job 0 starts at tick 0
    res = forecast(sc, draws=4, seed=9)
    alone = simulate_interruptions(sc.jobs[0], draws=4, seed=9, tick_s=res.tick_s)
    tp = res.throughput.query("job == 'pretrain'").reset_index(drop=True)
    for col in ("interruptions", "planned_interruptions", "train_s", "lost_to_failures_s",
                "effective_training_time"):
        np.testing.assert_allclose(tp[col].to_numpy(), alone[col].to_numpy())
    assert tp["interruptions"].sum() > 0
