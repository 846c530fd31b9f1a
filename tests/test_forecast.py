"""Tests of powerlab.grid.forecast: brute-force agreement, energy conservation, statistics."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from powerlab.exceptions import PowerlabError, ScenarioError
from powerlab.grid.forecast import ForecastResult, forecast, jitter_probabilities, job_randomness
from powerlab.grid.scenario import parse_scenario, read_scenario

from .reference_sim import simulate

SCEN = Path(__file__).parents[1] / "data" / "scenarios"


def _small(mitigations=None, jitter=(0.15, 0.05), rates=(0.05, 0.1), restart=(60, 0)):
    """A 40-GPU, 40-minute cluster: failures, jitter, checkpoints and evaluations."""
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["horizon"] = {"start_utc": "2025-06-02T12:00:00Z", "end_utc": "2025-06-02T12:40:00Z"}
    d["hardware"]["cluster_gpus"] = 40
    a, b = d["jobs"]
    a.update(gpus=24, duration_s=1800, startup_s=30, shutdown_s=20, jitter_s=jitter[0])
    a["checkpoint"] = {"interval_s": 300, "duration_s": 20}
    a["failures"] = {"rate_per_gpu_h": rates[0], "restart_s": restart[0]}
    b.update(gpus=12, duration_s=1500, jitter_s=jitter[1])
    b["eval"] = {"interval_s": 200, "duration_s": 15}
    b["checkpoint"] = {"interval_s": 200, "duration_s": 10}
    b["failures"] = {"rate_per_gpu_h": rates[1], "restart_s": restart[1]}
    d["mitigations"] = mitigations or {}
    return parse_scenario(d)


MITIGATED = {"gpu_power_floor_pct_tdp": 40, "gpu_ramp_limit_w_per_s": 2000,
             "stagger_starts_s": 45,
             "battery": {"power_megawatts": 0.005, "energy_megawatt_hours": 0.0002,
                         "window_s": 20}}


@pytest.mark.parametrize("mit", [None, MITIGATED], ids=["plain", "all-mitigations"])
def test_engine_matches_brute_force_reference(mit):
    sc = _small(mit)
    res = forecast(sc, draws=3, seed=7)
    ref = simulate(sc, draws=3, seed=7)
    np.testing.assert_allclose(res.it_w, ref["it_w"], rtol=1e-6, atol=0)
    np.testing.assert_allclose(res.facility_w, ref["facility_w"], rtol=1e-6, atol=0)
    tp = res.throughput.set_index(["draw", "job"])
    for key, v in ref["train_s"].items():
        assert tp.loc[key, "train_s"] == pytest.approx(v)
        assert tp.loc[key, "lost_to_failures_s"] == pytest.approx(ref["lost_s"][key])
    # the comparison is not vacuous: failures happened and draws differ
    assert (res.events["event"] == "failure").sum() >= 3
    assert not np.allclose(res.it_w[0], res.it_w[1])


def test_reference_agreement_edge_cases_zero_restart_and_no_jitter():
    sc = _small(jitter=(0.0, 0.0), rates=(0.2, 0.3), restart=(0, 0))
    res = forecast(sc, draws=2, seed=3)
    ref = simulate(sc, draws=2, seed=3)
    np.testing.assert_allclose(res.it_w, ref["it_w"], rtol=1e-6, atol=0)


def test_energy_conserved_between_resolutions():
    sc = read_scenario(SCEN / "small.yaml")
    res = forecast(sc, draws=2, seed=1)
    e_tick = res.energy_j("facility").mean()
    for resol, secs in (("1s", 1.0), ("1min", 60.0), ("15min", 900.0)):
        sf = res.summary_frame(resol, scope="facility")
        dur = (sf["interval_end_utc"] - sf["interval_start_utc"]).dt.total_seconds()
        assert (sf["power_w_mean"] * dur).sum() == pytest.approx(e_tick, rel=1e-9)
        assert dur.iloc[0] == secs
    # engine ticks of 100 ms and 1 s give the same 1-min means when every time of the
    # scenario is a whole second and GPUs are synchronous
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    for j in d["jobs"]:
        j["jitter_s"] = 0
        j["compute_fraction"] = 0.5
    d["jobs"][1]["step_time_s"] = 4.0
    sc2 = parse_scenario(d)
    fine = forecast(sc2, draws=1, seed=2, tick_s=0.1).summary_frame("1min", "it")
    coarse = forecast(sc2, draws=1, seed=2, tick_s=1.0).summary_frame("1min", "it")
    np.testing.assert_allclose(fine["power_w_mean"], coarse["power_w_mean"], rtol=1e-12)
    # with jitter the discretisation differs but the energy does not
    a = forecast(sc, draws=1, seed=2, tick_s=0.05)
    b = forecast(sc, draws=1, seed=2, tick_s=0.1)
    assert a.energy_j("it")[0] == pytest.approx(b.energy_j("it")[0], rel=1e-3)


def test_large_job_is_n_times_expected_gpu_plus_small_noise():
    # 1M GPUs: the offset histogram is N times the jitter distribution to ~1e-3
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["jobs"] = [d["jobs"][0]]
    d["jobs"][0].update(gpus=1_000_000, jitter_s=0.3, failures={})
    d["hardware"]["cluster_gpus"] = 1_000_000
    sc = parse_scenario(d)
    _, p = jitter_probabilities(0.3, 0.1)
    counts = job_randomness(sc.jobs[0], 0.1, 0, 0, 0).offset_counts
    assert counts.sum() == 1_000_000
    np.testing.assert_allclose(counts / 1e6, p, atol=3e-3)
    # null: no jitter -> every GPU at offset 0, the job edge is a one-tick step
    assert jitter_probabilities(0.0, 0.1)[1].tolist() == [1.0]
    res = forecast(sc, draws=1, seed=0)
    x = res.it_w[0]
    jumps = np.abs(np.diff(x))
    d0 = d.copy()
    d0["jobs"][0]["jitter_s"] = 0
    x0 = forecast(parse_scenario(d0), draws=1, seed=0).it_w[0]
    # jitter spreads the step edges over several ticks: the largest jump is smaller
    assert jumps.max() < 0.7 * np.abs(np.diff(x0)).max()
    assert x.sum() == pytest.approx(x0.sum(), rel=1e-3)


def test_failure_counts_follow_poisson_rate():
    sc = _small()
    job = sc.jobs[0]
    lam = job.gpus * job.failure_rate_per_gpu_h * job.duration_s / 3600
    n = np.array([len(job_randomness(job, 0.1, 11, d, 0).failure_ticks)
                  for d in range(3000)])
    assert abs(n.mean() - lam) < 4 * np.sqrt(lam / len(n))
    assert abs(n.var() - lam) < 0.15 * lam  # Poisson: variance = mean
    # null: no failure rate, no failures
    sc0 = _small(jitter=(0.0, 0.0), rates=(0.0, 0.0))
    res = forecast(sc0, draws=4, seed=1)
    assert not (res.events["event"] == "failure").any()
    np.testing.assert_allclose(res.it_w[0], res.it_w[3], rtol=0, atol=1e-6 * res.it_w.max())


def test_failure_drops_job_to_idle_and_loses_work():
    sc = _small(jitter=(0.0, 0.0), rates=(0.2, 0.0), restart=(60, 0))
    res = forecast(sc, draws=1, seed=5)
    ev = res.events[(res.events["job"] == "pretrain")]
    fail = ev[ev["event"] == "failure"]
    assert len(fail) >= 1
    tick = int(fail["tick"].iloc[0])
    hw = sc.hardware
    # during the restart the 24 GPUs of the job draw idle power
    idle_it = 40 * hw.gpu_idle_w + hw.nodes * hw.node_overhead_w
    fin = sc.jobs[1]
    others = res.it_w[0][tick + 5] - idle_it
    assert 0 <= others <= 12 * (max(fin.compute_w, fin.eval_w) - hw.gpu_idle_w) + 1e-6
    assert res.throughput.query("job == 'pretrain'")["lost_to_failures_s"].iloc[0] > 0


def test_results_object_frames_and_summary():
    res = forecast(read_scenario(SCEN / "small.yaml"), draws=3, seed=0)
    assert isinstance(res, ForecastResult)
    tl = res.timeline
    assert list(tl.columns) == ["timestamp", "scope", "power_w_mean", "power_w_p10",
                                "power_w_p50", "power_w_p90"]
    assert str(tl["timestamp"].dtype) == "datetime64[ns, UTC]"
    assert len(tl) == 2 * res.n_ticks
    assert (tl["power_w_p10"] <= tl["power_w_p90"]).all()
    sf = res.summary_frame("15min")
    assert set(sf["scope"]) == {"facility", "it"}
    assert (sf["power_w_min"] <= sf["power_w_mean"] + 1e-6).all()
    assert (sf["power_w_mean"] <= sf["power_w_max"] + 1e-6).all()
    assert sf["events"].str.contains("pretrain:checkpoint").any()
    text = str(res.summary())
    for word in ("largest swing in 1 s", "max ramp up", "dominant frequency",
                 "0.1-2 Hz", "checkpoint"):
        assert word in text
    assert "<table" in res._repr_html_()
    # facility = IT x PUE + base load
    np.testing.assert_allclose(res.facility_w, res.it_w * res.pue
                               + res.scenario.site.base_load_w)


def test_bad_arguments():
    sc = read_scenario(SCEN / "small.yaml")
    with pytest.raises(ScenarioError, match="draws"):
        forecast(sc, draws=0)
    with pytest.raises(PowerlabError):
        forecast("not a scenario")
    res = forecast(sc, draws=1)
    with pytest.raises(PowerlabError, match="whole number of"):
        res.summary_frame(0.25)
    with pytest.raises(PowerlabError, match="scope"):
        res.power_w("rack")


def test_llama3_like_scenario_swings_tens_of_megawatts():
    sc = read_scenario(SCEN / "llama3_16k_h100.yaml")
    res = forecast(sc, draws=2, seed=0)
    m = res.metrics.query("scope == 'facility'")
    hw = sc.hardware
    job = sc.jobs[0]
    # the largest physically possible 1-minute swing: every GPU compute <-> idle
    bound = job.gpus * (job.compute_w - hw.gpu_idle_w) * 1.5
    assert (m["swing_60s_w"] > 10e6).all()
    assert (m["swing_60s_w"] < bound).all()
    ev = res.events
    assert (ev["event"] == "checkpoint").sum() >= 2 * 30
    assert pd.Series(m["dominant_frequency_hz"]).notna().all()
