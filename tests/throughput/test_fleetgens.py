"""Straggler detection on three fleet generators written independently of the detector
(issue 22; tests/fleetgens/README.md says who wrote them and how).

The detector was tuned on tests/support/fleet_sim.py and generator A; B and C are held out.
Quick tests: one seed per case on the smallest shape (64 GPUs, 24 h of 1-min samples);
the 20-seed sweep of every case and shape is ``benchmarks/validate_fleetgens.py``, whose
numbers docs/throughput_methods.md reports (misses included).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.throughput.stragglers import find_stragglers

sys.path.insert(0, str(Path(__file__).parents[1] / "fleetgens"))

# A (the tuning generator) in the default suite; the held-out B and C as slow tests
GENS = ["A", pytest.param("B", marks=pytest.mark.slow),
        pytest.param("C", marks=pytest.mark.slow)]
SMALL = {"interval_s": 60.0, "hours": 24.0, "n_hosts": 8, "gpus_per_host": 8}


def _run(gen, case, seed=0, **kw):
    import importlib

    mod = importlib.import_module(f"fleetgen_{gen}")
    tel, truth = mod.generate(seed, case, **{**SMALL, **kw})
    return tel, truth, find_stragglers(tel)


def _flagged(res):
    return set(res.flags["gpu_uuid"].astype(str))


def _hosts(res):
    return set(res.hosts.loc[res.hosts["flagged"], "group"])


@pytest.mark.parametrize("gen", GENS)
@pytest.mark.parametrize("case", ["gpu_thermal", "gpu_throttle_bits", "gpu_power_limit"])
def test_gpu_two_pct_slow_with_one_kind_of_evidence(gen, case):
    """SPEC.md: one GPU 2 % slower with heat + thermal bits, a HW slowdown / power-brake
    bit share, or a lower enforced power limit: flagged, explained by the right cause,
    and no other GPU or host flagged.  Issue 22's case: the thermal GPU's clock is low
    throughout (B), so the bit share counts on its own, not only with a clock drop."""
    _tel, truth, res = _run(gen, case)
    slow = set(truth["slow_gpus"])
    assert _flagged(res) == slow, res.summary()
    assert not _hosts(res)
    f = res.flags.iloc[0]
    want = {"gpu_thermal": "thermal", "gpu_throttle_bits": "hardware slowdown",
            "gpu_power_limit": "power cap"}[case]
    assert f["cause"] == want
    assert f["expected_false_alarms"] < 0.05
    lost = res.lost.set_index("cause")
    assert lost.loc[want, "gpus"] == 1 and lost.loc["all", "gpu_hours_own"] > 0


@pytest.mark.parametrize("gen", GENS)
def test_host_one_pct_slow_is_flagged_as_a_host(gen):
    """A whole host 1 % slower (all three generators model a host power cap) is found
    as a host, against the fleet, and its GPUs are not flagged one by one."""
    _tel, truth, res = _run(gen, "host_slow")
    assert _hosts(res) == set(truth["slow_hosts"]), res.hosts.to_string()
    assert not (_flagged(res) - set(truth["slow_gpus"]))
    h = res.hosts.set_index("group").loc[truth["slow_hosts"][0]]
    assert h["cause"] == "power cap" and h["clock_residual_pct"] < -0.5
    # its GPUs' lower enforced limits are also each GPU's evidence (power cap)
    assert set(res.lost["cause"]) & {"host", "power cap"}


@pytest.mark.parametrize("gen", GENS)
def test_clean_fleet_with_a_hot_host_gives_no_flags(gen):
    """A host with 5-8 degC hotter inlet is explained by its temperature: no GPU and no
    host flagged; its clock deficit is what the fleet's temperature slope predicts.  On C
    the hot host's hottest GPU throttles with its die held below the slowdown threshold:
    its thermal bits are explained by its host's heat (issue 22)."""
    _tel, _truth, res = _run(gen, "clean_hot_host")
    assert res.flags.empty, res.summary()
    assert not _hosts(res)
    hot = res.hosts.sort_values("temp_offset_c").iloc[-1]
    assert hot["temp_offset_c"] > 2.0
    assert hot["clock_explained_pct"] <= 0


@pytest.mark.parametrize("gen", GENS)
def test_intermittent_episodes_with_onset_and_end(gen):
    """One GPU 1.5 % slow in ~1 h episodes for ~30 % of the record: flagged, with
    episodes that cover most of the true episode time and are mostly true."""
    _tel, truth, res = _run(gen, "intermittent")
    g = truth["slow_gpus"][0]
    assert g in _flagged(res)
    assert not (_flagged(res) - {g})
    sc = res.scores.set_index(res.scores["gpu_uuid"].astype(str)).loc[g]
    ep = res.episodes[(res.episodes["host"] == sc["host"])
                      & (res.episodes["gpu_index"] == sc["gpu_index"])]
    true = [(pd.Timestamp(a), pd.Timestamp(b)) for _, a, b in truth["episodes"]]
    inter = sum(max(0.0, (min(b, d) - max(a, c)).total_seconds())
                for a, b in true for c, d in zip(ep["onset"], ep["end"]))
    t_true = sum((b - a).total_seconds() for a, b in true)
    t_found = float(ep["duration_s"].sum())
    assert inter / t_true > 0.6 and inter / t_found > 0.6
    assert (ep["shift_pct"] < -1.0).all()


@pytest.mark.parametrize("gen", GENS)
def test_silent_slow_from_the_start_is_reported_not_identifiable(gen):
    """SPEC.md "silent_from_start": a GPU slowed into the normal clock spread has no
    evidence within one record; the result says so (its silent limit, z_threshold x the
    clock spread, exceeds the slowdown) instead of a miss, and flags nothing else."""
    _tel, truth, res = _run(gen, "silent_from_start")
    assert not truth["identifiable_without_baseline"]
    assert res.flags.empty or set(res.flags["gpu_uuid"]) <= set(truth["slow_gpus"])
    assert res.params["silent_limit_pct"] > truth["slowdown_pct"]
    assert "not identifiable without a baseline" in res.summary()


@pytest.mark.parametrize("gen", GENS)
@pytest.mark.parametrize("case", ["gpu_low_clock", "silent_from_start"])
def test_a_clock_lower_than_its_own_baseline_is_found(gen, case):
    """Issue 22: "GPU 2 % slow with ... lower clock than its own baseline: recall >= 0.9".
    SPEC.md "Baseline records": the generator's healthy record of the same fleet (same
    chips, an earlier week, its own noise and weather); the slowdown appeared after it.
    With that record as :func:`straggler_baseline`, the slow GPU is flagged by the change
    of its clock and nothing else is flagged -- also the silent one, which one record
    alone cannot tell from a slow chip."""
    import importlib

    from powerlab.throughput.stragglers import straggler_baseline

    mod = importlib.import_module(f"fleetgen_{gen}")
    tel, truth = mod.generate(0, case, **SMALL)
    base, base_truth = mod.generate(0, case, **SMALL, baseline=True)
    assert base_truth["slow_gpus"] == [] and not base_truth["baseline_shows_fault"]
    assert base["timestamp"].max() < tel["timestamp"].min() - pd.Timedelta(days=1)
    res = find_stragglers(tel, baseline=straggler_baseline(base))
    assert _flagged(res) == set(truth["slow_gpus"]), res.summary()
    assert not _hosts(res)
    assert res.flags.iloc[0]["clock_change_pct"] < -1.0


def test_host_level_is_stable_across_sampling():
    """The same slow host found at 1-min and 5-min samples (generator A, 72 h at 5 min)."""
    for kw in ({}, {"interval_s": 300.0, "hours": 72.0}):
        _tel, truth, res = _run("A", "host_slow", seed=1, **kw)
        assert _hosts(res) == set(truth["slow_hosts"])


def test_step_cost_and_gpu_hours_lost_by_cause():
    """GPU-hours lost: the slow GPU's own share (deficit x busy time) and the job's
    (every GPU waits for it): a 2 % power-capped GPU of 64 over 24 h loses about
    0.02 x 24 = 0.48 GPU-h of its own."""
    _tel, _truth, res = _run("A", "gpu_power_limit")
    lost = res.lost.set_index("cause")
    assert 0.2 < lost.loc["power cap", "gpu_hours_own"] < 1.0
    # the job can lose at most phi x deficit of its step time, on all 64 GPUs
    assert 0 <= lost.loc["power cap", "step_cost_pct"] <= 0.8 * 3.0
    assert lost.loc["all", "job_gpu_hours"] <= 64 * 24 * 0.03
    assert np.isfinite(lost[["gpu_hours_own", "step_cost_pct", "job_gpu_hours"]]
                       .to_numpy(float)).all()


def test_racks_against_the_site():
    """With a ``rack`` column, racks are scored like hosts: racks of one host each give
    the same verdict as the hosts; racks of two hosts on a clean fleet with a hot host
    flag nothing."""
    import fleetgen_A

    tel, truth = fleetgen_A.generate(2, "host_slow", **SMALL)
    res = find_stragglers(tel.assign(rack=tel["host"].astype(str).str.replace("node",
                                                                                "rack")))
    assert set(res.racks.loc[res.racks["flagged"], "group"]) == {
        h.replace("node", "rack") for h in truth["slow_hosts"]}
    assert "slow rack" in res.summary()
    tel, _ = fleetgen_A.generate(2, "clean_hot_host", **SMALL)
    hosts = sorted(tel["host"].astype(str).unique())
    rack_of = {h: f"rack{i // 2}" for i, h in enumerate(hosts)}
    res = find_stragglers(tel.assign(rack=tel["host"].astype(str).map(rack_of)))
    assert len(res.racks) == 4 and not res.racks["flagged"].any()
