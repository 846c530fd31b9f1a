"""Straggler detection validated against the twin's injected stragglers."""

from __future__ import annotations

import numpy as np
import pytest

from powerlab.exceptions import AnalysisError, SchemaError
from powerlab.throughput.stragglers import find_stragglers
from powerlab.throughput.synth import simulate_training

KW = {"days": 2, "n_hosts": 4, "gpus_per_host": 8, "step_time_s": 60,
      "telemetry_interval_s": 300, "amplitude_pct": 1.5}


def test_recall_of_injected_stragglers():
    found = injected = 0
    for seed in range(20):
        run = simulate_training(seed=100 + seed, stragglers=3, **KW)
        res = find_stragglers(run.telemetry)
        truth = run.truth.stragglers
        want = set(zip(truth["host"], truth["gpu_index"]))
        got = set(zip(res.flags["host"], res.flags["gpu_index"]))
        found += len(want & got)
        injected += len(want)
        # every flag carries the evidence of its fault
        flags = res.flags.set_index(["host", "gpu_index"])
        for _, t in truth.iterrows():
            key = (t["host"], t["gpu_index"])
            if key not in flags.index:
                continue
            f = flags.loc[key]
            if t["kind"] == "thermal":
                assert "hot" in f["reasons"] and f["temp_gpu_c_z"] > 4
            elif t["kind"] == "power":
                assert f["power_w_z"] < -4 and f["top_throttle_reason"] == "sw_power_cap"
            else:
                assert "clock low" in f["reasons"] and f["top_throttle_reason"] == "hw_slowdown"
    assert injected == 60
    assert found / injected >= 0.95


def test_clean_fleet_gives_no_flags():
    clean = 0
    for seed in range(40):
        run = simulate_training(seed=500 + seed, stragglers=0, **{**KW, "days": 1})
        res = find_stragglers(run.telemetry)
        clean += res.flags.empty
        assert res.cost_step_pct_total == 0.0
    assert clean / 40 >= 0.95


def test_cost_of_a_clock_straggler():
    run = simulate_training(seed=3, stragglers=[(10, "clock")], **KW)
    res = find_stragglers(run.telemetry, compute_fraction=run.truth.params.compute_fraction)
    assert len(res.flags) == 1
    f = res.flags.iloc[0]
    truth = run.truth.stragglers.iloc[0]
    assert (f["host"], f["gpu_index"], f["gpu_uuid"]) == (
        truth["host"], truth["gpu_index"], truth["gpu_uuid"])
    # the job pays the straggler's excess over the next slowest GPU, a little less than
    # its excess over the median GPU
    assert 0.6 * truth["slowdown_pct"] < f["cost_step_pct"] <= 1.05 * truth["slowdown_pct"]
    assert res.cost_step_pct_total == pytest.approx(f["cost_step_pct"])
    assert f["clock_deficit_mhz"] > 150
    # the job's measured slowdown agrees: compare with the same run without the fault
    base = simulate_training(seed=3, stragglers=0, **KW)

    def med(r):
        st = r.steps
        return st.loc[st["phase"] == "train", "duration_s"].median()

    measured = 100 * (med(run) / med(base) - 1)
    assert f["cost_step_pct"] == pytest.approx(measured, abs=1.5)


def test_masked_stragglers_share_the_total_cost():
    # the slower GPU masks the other: alone each costs little, together more
    run = simulate_training(seed=4, stragglers=[(1, "clock"), (20, "power")], **KW)
    res = find_stragglers(run.telemetry)
    assert len(res.flags) == 2
    assert res.cost_step_pct_total >= res.flags["cost_step_pct"].max()
    text = res.summary()
    assert "2 of 32 flagged" in text and "cost" in text
    assert "<table" in res._repr_html_()
    assert len(res.scores) == 32 and res.scores["flagged"].sum() == 2


def test_bad_input():
    run = simulate_training(seed=0, stragglers=0, **{**KW, "days": 0.5, "n_hosts": 1})
    tel = run.telemetry
    with pytest.raises(SchemaError, match="clock_sm_mhz"):
        find_stragglers(tel.drop(columns="clock_sm_mhz"))
    with pytest.raises(SchemaError, match="tz-aware"):
        find_stragglers(tel.assign(timestamp=tel["timestamp"].dt.tz_localize(None)))
    with pytest.raises(AnalysisError, match="GPUs"):
        find_stragglers(tel[tel["gpu_index"] < 3])
    with pytest.raises(AnalysisError, match="metric"):
        find_stragglers(tel, metrics=("fan_speed_pct",))
    idle = tel.assign(util_gpu_pct=0.0)
    with pytest.raises(AnalysisError, match="busy"):
        find_stragglers(idle)
    # a single hot GPU in a small fleet is still found
    hot = tel.copy()
    sel = hot["gpu_index"] == 2
    hot.loc[sel, "temp_gpu_c"] += 15
    res = find_stragglers(hot)
    assert list(res.flags["gpu_index"]) == [2] and "hot" in res.flags["reasons"][0]
    assert np.isfinite(res.flags["temp_gpu_c_z"][0])
