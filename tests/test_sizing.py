"""Mitigation sizing: the NVML-style smoothing model, the fast per-draw evaluation against
the engine, and the search (a failing site gets a passing option, a passing site the
zero-cost option, the Pareto property, stability under a refined grid, the CLI)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from powerlab import cli
from powerlab.exceptions import PowerlabError
from powerlab.grid.compliance import Compliance, comply
from powerlab.grid.forecast import forecast
from powerlab.grid.requirements import parse_requirements
from powerlab.grid.scenario import Battery, Mitigations, parse_scenario
from powerlab.grid.sizing import (
    COST_AXES,
    MitigationOption,
    SearchGrid,
    SiteModel,
    pareto_front,
    size_mitigation,
)
from powerlab.grid.smoothing import smooth_power

SCENARIO = """
name: sizing-test
horizon: {start_utc: "2025-06-02T12:00:00Z", end_utc: "2025-06-02T12:40:00Z"}
simulation: {tick_s: 0.1}
site: {tz: UTC, base_load_w: 100000, pue: 1.2}
hardware:
  gpu_idle_w: 75
  gpu_compute_w: 650
  gpu_comm_w: 250
  gpu_tdp_w: 700
  gpus_per_node: 8
  node_overhead_w: 2500
  cluster_gpus: 512
jobs:
  - name: pretrain
    gpus: 512
    start_utc: "2025-06-02T12:02:00Z"
    duration_s: 2100
    startup_s: 60
    shutdown_s: 30
    step_time_s: 6.0
    compute_fraction: 0.8
    jitter_s: JITTER
    checkpoint: {interval_s: 600, duration_s: 30}
"""


def scenario(jitter=0.0, **changes):
    return parse_scenario(SCENARIO.replace("JITTER", str(jitter))).replace(**changes)


def spec(**limits):
    lim = {"ramp": 0.1, "dev": 0.2, "step": 0.15, **limits}
    return parse_requirements({"name": "t", "requirements": [
        {"name": "ramp_1s", "kind": "ramp", "window_s": 1, "limit": lim["ramp"],
         "unit": "MW/s", "source": "test", "illustrative": True},
        {"name": "dev_10s", "kind": "deviation", "window_s": 10, "limit": lim["dev"],
         "unit": "MW", "source": "test", "illustrative": True},
        {"name": "step_1s", "kind": "step", "within_s": 1, "limit": lim["step"],
         "unit": "MW", "source": "test", "illustrative": True}]})


SMALL_GRID = SearchGrid(floor_pct_tdp=(0, 60, 90), ramp_w_per_s=(0, 500, 125, 30, 8),
                        hysteresis_ms=(0, 2000), filler=(False, True), stagger_s=(0,),
                        battery_power_fraction=(0.1, 0.3, 0.6), battery_duration_h=(0.1,),
                        battery_window_s=(60,))


# --------------------------------------------------------------------------- smoothing


def _brute(x, tick, floor, up, down, hyst_s, active):
    """The smoothing model tick by tick (the definition in grid/smoothing.py)."""
    hold = math.floor(hyst_s / tick + 0.5 + 1e-9)
    y = None
    below = 0
    out = np.empty(len(x))
    for k, v in enumerate(x):
        t = max(v, floor) if (floor > 0 and active[k]) else v
        if y is None:
            y = t
        elif t >= y:
            below = 0
            y = t if up <= 0 else min(t, y + up * tick)
        else:
            below += 1
            if below > hold:
                y = t if down <= 0 else max(t, y - down * tick)
        out[k] = y
    return out


@pytest.mark.parametrize("params", [(0, 0, 0, 0), (400, 0, 0, 0), (0, 300, 0, 0),
                                    (0, 0, 200, 0), (0, 500, 100, 0.5), (420, 50, 80, 1.2),
                                    (630, 0, 0, 3.0)])
def test_smoothing_matches_its_definition_tick_by_tick(params):
    rng = np.random.default_rng(7)
    lv = rng.choice([75.0, 250.0, 650.0, 110.0], size=60)
    x = np.repeat(lv, rng.integers(1, 40, size=60))
    active = np.ones(len(x), bool)
    active[:30] = False
    floor, up, down, hyst = params
    got = smooth_power(x, 0.1, floor_w=floor, ramp_up_w_per_s=up, ramp_down_w_per_s=down,
                       hysteresis_s=hyst, active=active)
    want = _brute(x, 0.1, floor, up, down, hyst, active)
    np.testing.assert_allclose(got, want, atol=1e-6)
    if up or down:
        d = np.diff(got)
        assert d.max() <= (up or np.inf) * 0.1 + 1e-6
        assert -d.min() <= (down or np.inf) * 0.1 + 1e-6


def test_hysteresis_holds_power_through_a_short_dip():
    x = np.r_[np.full(50, 650.0), np.full(9, 250.0), np.full(50, 650.0)]   # 0.9-s dip
    y = smooth_power(x, 0.1, hysteresis_s=1.0)
    assert (y == 650.0).all()                               # held: the grid sees nothing
    y = smooth_power(x, 0.1, hysteresis_s=0.5)
    assert y.min() == 250.0 and (y[50:55] == 650.0).all()   # held 0.5 s, then drops


# --------------------------------------------------------------------------- fast path


def test_fast_path_reproduces_the_engine_without_jitter():
    """With no timing jitter every GPU of a job draws the job's mean, so smoothing the mean
    is exact: the fast path equals the engine's own floor and ramp limit."""
    sc = scenario(0.0)
    m = SiteModel.build(sc, draws=2, seed=0, tick_s=None, filler=False)
    from powerlab.grid.forecast import forecast

    for opt, mit in [(MitigationOption(), Mitigations()),
                     (MitigationOption(gpu_power_floor_pct_tdp=60, ramp_up_w_per_s=200,
                                       ramp_down_w_per_s=200),
                      Mitigations(gpu_power_floor_pct_tdp=60, gpu_ramp_limit_w_per_s=200))]:
        res = forecast(sc.replace(mitigations=mit), draws=2, seed=0)
        for d in range(2):
            fac, it, _ = m.facility(opt, d, 5.0)
            np.testing.assert_allclose(it, res.it_w[d], rtol=1e-9, atol=1.0)
            np.testing.assert_allclose(fac, res.facility_w[d], rtol=1e-9, atol=1.0)


def test_fast_path_is_close_to_the_engine_with_jitter():
    """With jitter the mean of smoothed GPUs differs from the smoothed mean near edges;
    the requirement values agree within 5 %."""
    from powerlab.grid.forecast import forecast

    sc = scenario(0.05)
    check = Compliance(spec())
    m = SiteModel.build(sc, draws=1, seed=0, tick_s=None, filler=False)
    opt = MitigationOption(gpu_power_floor_pct_tdp=60, ramp_up_w_per_s=100,
                           ramp_down_w_per_s=100)
    fac, it, _ = m.facility(opt, 0, 5.0)
    from powerlab.grid.powertrace import PowerTrace

    fast = check.evaluate(PowerTrace(0, m.tick_s, m.start_utc, it, fac))
    res = forecast(sc.replace(mitigations=Mitigations(gpu_power_floor_pct_tdp=60,
                                                      gpu_ramp_limit_w_per_s=100)),
                   draws=1, seed=0)
    eng = check.evaluate(PowerTrace(0, res.tick_s, res.start_utc, res.it_w[0],
                                    res.facility_w[0]))
    for k in fast:
        assert fast[k] == pytest.approx(eng[k], rel=0.05), k


# --------------------------------------------------------------------------- the search


@pytest.fixture(scope="module")
def failing():
    sc = scenario(0.02)
    return sc, size_mitigation(sc, spec(), draws=2, seed=0, grid=SMALL_GRID)


def test_a_site_that_fails_a_ramp_limit_gets_a_passing_option(failing):
    sc, res = failing
    base = res.evaluated.iloc[0]
    assert base["option"] == "none" and not base["passes"]
    assert "ramp_1s" in base["requirements_failed"]
    assert res.found and res.engine_runs == 2            # one job x filler off/on
    assert res.evaluations == 2 * len(res.evaluated)
    top = res.cheapest
    assert top["requirements_passed"] == "ramp_1s;dev_10s;step_1s"
    assert top["cost_usd_per_day"] > 0
    # independent check: the engine itself, with the same settings, passes comply
    for _, row in res.options.iterrows():
        if row["ramp_down_hysteresis_ms"] or row["filler"] or (
                row["ramp_up_w_per_s"] != row["ramp_down_w_per_s"]):
            continue                                     # not expressible in the engine
        bat = None
        if row["battery_power_megawatts"] > 0:
            bat = Battery(row["battery_power_megawatts"], row["battery_energy_megawatt_hours"],
                          row["battery_round_trip_efficiency"], row["battery_window_s"])
        mit = Mitigations(gpu_power_floor_pct_tdp=row["gpu_power_floor_pct_tdp"],
                          gpu_ramp_limit_w_per_s=row["ramp_up_w_per_s"], battery=bat)
        chk = comply(sc.replace(mitigations=mit), spec(), draws=2, seed=0)
        assert chk.passed, (row["option"], chk.summary_frame()[["requirement", "value"]])


def test_the_mitigated_trace_of_an_option_passes_comply(failing):
    _, res = failing
    for i in range(len(res.options)):
        tr = res.trace(i, draw=1)
        assert comply(tr, spec()).passed, res.options.loc[i, "option"]
    assert res.option(0).label() == res.options.loc[0, "option"]
    assert not comply(res.trace(MitigationOption(), draw=0), spec()).passed
    with pytest.raises(PowerlabError, match="draw"):
        res.trace(0, draw=5)


def test_the_options_are_a_pareto_set_cheapest_first(failing):
    _, res = failing
    opts = res.options
    assert len(opts) >= 2
    assert opts["cost_usd_per_day"].is_monotonic_increasing
    v = opts[list(COST_AXES)].to_numpy()
    for i in range(len(v)):
        for j in range(len(v)):
            if i != j:                                    # nobody dominates anybody
                assert not ((v[j] <= v[i]).all() and (v[j] < v[i]).any())
    # every passing option evaluated is matched or beaten by one in the set
    ok = res.evaluated[res.evaluated["passes"]][list(COST_AXES)].to_numpy()
    for row in ok:
        assert ((v <= row + 1e-9).all(axis=1)).any()
    # and the mask itself on a known case
    f = pd.DataFrame({a: x for a, x in zip(COST_AXES, ([1, 2, 1, 3], [1, 0, 2, 3],
                                                         [0, 0, 0, 0]))})
    assert pareto_front(f).tolist() == [True, True, False, False]


def test_a_passing_site_gets_the_zero_cost_option_first():
    sc = scenario(0.02)
    res = size_mitigation(sc, spec(ramp=100, dev=100, step=100), draws=1, grid=SMALL_GRID)
    assert res.found and len(res.evaluated) == 1 and len(res.options) == 1
    top = res.cheapest
    assert top["option"] == "none" and top["cost_usd_per_day"] == 0
    assert top["extra_energy_megawatt_hours_per_day"] == 0


@pytest.mark.slow
def test_the_answer_is_stable_when_the_grid_is_refined(failing):
    sc, coarse = failing
    fine = size_mitigation(sc, spec(), draws=2, seed=0, grid=SMALL_GRID.refined())
    c, f = coarse.cheapest["cost_usd_per_day"], fine.cheapest["cost_usd_per_day"]
    assert f <= c * (1 + 1e-9)                  # the refined grid holds the coarse one
    assert f >= 0.5 * c                         # and the answer does not jump
    assert len(fine.evaluated) > len(coarse.evaluated)


def test_no_option_when_a_requirement_cannot_be_shown_met(tmp_path):
    """A ride-through requirement without a sag in the forecast cannot pass: exit 1."""
    d = {"name": "rt", "requirements": [{
        "name": "rt", "kind": "ride_through", "residual_voltage_pu": 0.7,
        "sag_duration_s": 0.5, "observe_s": 1, "limit": 1, "unit": "MW", "source": "t",
        "illustrative": True}]}
    import yaml

    req = tmp_path / "rt.yaml"
    req.write_text(yaml.safe_dump(d))
    scn = tmp_path / "s.yaml"
    scn.write_text(SCENARIO.replace("JITTER", "0.02").replace("12:40:00", "12:10:00"))
    rc = cli.main(["size-mitigation", str(scn), "--requirements", str(req), "--out",
                   str(tmp_path / "o"), "--draws", "1", "--quiet"])
    assert rc == 1
    assert pd.read_csv(tmp_path / "o" / "mitigation_options.csv").empty
    text = (tmp_path / "o" / "mitigation_summary.txt").read_text()
    assert "NO passing option" in text and "rt: cannot be shown met" in text


@pytest.mark.slow
def test_cli_writes_the_options_and_exits_0(tmp_path, capsys):
    import yaml

    scn = tmp_path / "s.yaml"
    scn.write_text(SCENARIO.replace("JITTER", "0.02"))
    req = tmp_path / "r.yaml"
    req.write_text(yaml.safe_dump({"name": "t", "requirements": [
        {"name": "step_1s", "kind": "step", "within_s": 1, "limit": 0.15, "unit": "MW",
         "source": "test", "illustrative": True}]}))
    rc = cli.main(["size-mitigation", str(scn), "--requirements", str(req), "--out",
                   str(tmp_path / "o"), "--draws", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and "engine runs: 2" in out and "Cheapest passing option" in out
    opts = pd.read_csv(tmp_path / "o" / "mitigation_options.csv")
    for col in ("gpu_power_floor_pct_tdp", "ramp_up_w_per_s", "ramp_down_w_per_s",
                "ramp_down_hysteresis_ms", "filler", "stagger_starts_s",
                "battery_power_megawatts", "battery_energy_megawatt_hours",
                "extra_energy_megawatt_hours_per_day", "throughput_loss_pct",
                "storage_megawatt_hours", "requirements_passed"):
        assert col in opts.columns, col
    assert (opts["requirements_passed"] == "step_1s").all()


@pytest.mark.bad_input("requirements")
def test_bad_arguments_are_refused():
    with pytest.raises(PowerlabError, match="draws"):
        size_mitigation(scenario(), spec(), draws=0)
    with pytest.raises(PowerlabError, match="scenario"):
        size_mitigation(42, spec())


def test_options_are_hashable_values():
    a = MitigationOption(gpu_power_floor_pct_tdp=60)
    assert a == dataclasses.replace(MitigationOption(), gpu_power_floor_pct_tdp=60)
    assert "floor 60 % TDP" in a.label() and MitigationOption().label() == "none"


# ------------------------------------------------- rates apart; smoothing with storage

SLOW_STARTS_GRID = SearchGrid(floor_pct_tdp=(0, 30, 60, 90), ramp_w_per_s=(0, 500, 125, 30, 8),
                              hysteresis_ms=(0,), filler=(False,), stagger_s=(0,),
                              battery_power_fraction=(0.025, 0.05, 0.1, 0.2, 0.4),
                              battery_duration_h=(0.01,), battery_window_s=(10, 60))


@pytest.fixture(scope="module")
def slow_starts():
    """Jobs ramp up and down over 15 min, so only the 6-s step oscillation fails: a floor
    halves it and a small short storage cancels the rest."""
    sc = parse_scenario(SCENARIO.replace("startup_s: 60", "startup_s: 900")
                        .replace("shutdown_s: 30", "shutdown_s: 900").replace("JITTER", "0.02"))
    return sc, size_mitigation(sc, spec(), draws=2, seed=0, grid=SLOW_STARTS_GRID)


def _kind(ev):
    smooth = (ev["gpu_power_floor_pct_tdp"] > 0) | (ev["ramp_up_w_per_s"] > 0) | (
        ev["ramp_down_w_per_s"] > 0)
    store = ev["battery_power_megawatts"] > 0
    return smooth & ~store, store & ~smooth, smooth & store


def test_smoothing_with_storage_beats_either_alone_where_it_should(slow_starts):
    sc, res = slow_starts
    ev = res.evaluated
    smooth, store, both = _kind(ev)
    ok = ev["passes"]
    best_hybrid = ev[both & ok]["cost_usd_per_day"].min()
    assert best_hybrid < ev[smooth & ok]["cost_usd_per_day"].min()
    assert not (store & ok).any() or best_hybrid < ev[store & ok]["cost_usd_per_day"].min()
    top = res.cheapest
    assert top["gpu_power_floor_pct_tdp"] > 0 and top["battery_power_megawatts"] > 0
    assert top["cost_usd_per_day"] == pytest.approx(best_hybrid)
    # its floor alone fails, and so does its storage alone
    opt = res.option(0)
    for part in (dataclasses.replace(opt, battery_power_megawatts=0.0,
                                     battery_energy_megawatt_hours=0.0),
                 dataclasses.replace(opt, gpu_power_floor_pct_tdp=0.0)):
        assert not comply(res.trace(part, draw=0), spec()).passed, part.label()
    # the engine itself, floor and battery switched on in the scenario, passes comply
    bat = Battery(top["battery_power_megawatts"], top["battery_energy_megawatt_hours"],
                  top["battery_round_trip_efficiency"], top["battery_window_s"])
    mit = Mitigations(gpu_power_floor_pct_tdp=top["gpu_power_floor_pct_tdp"], battery=bat)
    chk = comply(sc.replace(mitigations=mit), spec(), draws=2, seed=0)
    assert chk.passed, chk.summary_frame()[["requirement", "value"]]


def test_hybrids_are_not_tried_where_they_cannot_be_cheapest(failing):
    """On the fast-start site storage alone is cheapest (~$18/day): every smoothing setting
    costs more on its own, so no pair is evaluated."""
    _, res = failing
    both = _kind(res.evaluated)[2]
    assert res.cheapest["option"].startswith("storage")
    assert not both.any()


def test_ramp_up_and_ramp_down_are_searched_apart(failing, slow_starts):
    for _, res in (failing, slow_starts):
        ev = res.evaluated
        smooth = ev[(ev["ramp_up_w_per_s"] > 0) | (ev["ramp_down_w_per_s"] > 0)]
        up, down = smooth["ramp_up_w_per_s"], smooth["ramp_down_w_per_s"]
        assert ((up > 0) & (up != down)).any()   # a ramp-up rate with another ramp-down
        # the ramp-up-off variant of a passing symmetric option is always tried
        sym = smooth[(smooth["ramp_up_w_per_s"] == smooth["ramp_down_w_per_s"])
                     & smooth["passes"] & (smooth["battery_power_megawatts"] == 0)]
        cheap = sym.nsmallest(5, "cost_usd_per_day")
        for _, row in cheap.iterrows():
            same = ev[(ev["gpu_power_floor_pct_tdp"] == row["gpu_power_floor_pct_tdp"])
                      & (ev["ramp_down_hysteresis_ms"] == row["ramp_down_hysteresis_ms"])
                      & (ev["filler"] == row["filler"])
                      & (ev["stagger_starts_s"] == row["stagger_starts_s"])
                      & (ev["battery_power_megawatts"] == 0)]
            assert (same["ramp_up_w_per_s"] == 0).any() or (
                same["ramp_up_w_per_s"] > row["ramp_up_w_per_s"]).any()


# ------------------------------------------------------------ voltage sags in the search

SAG = """
disturbances:
  - {name: sag1, at_utc: "2025-06-02T12:20:00Z", residual_voltage_pu: 0.5, duration_s: 0.3,
     trip_fraction: 0.05, outage_s: 120, ups_fraction: 0.5}
"""


def ride_through(limit_mw):
    return parse_requirements({"name": "rt", "requirements": [{
        "name": "rt", "kind": "ride_through", "residual_voltage_pu": 0.5,
        "sag_duration_s": 0.5, "observe_s": 10, "limit": limit_mw, "unit": "MW",
        "source": "test", "illustrative": True}]})


def test_scenario_sags_reach_the_search_as_the_engine_has_them():
    """One job, a sag that trips 5 % of the nodes and moves half the load to UPS: the
    search's unmitigated site is the engine's forecast to the watt, sag rows included, so
    a ride-through requirement is assessed from the scenario without --sags."""
    sc = parse_scenario(SCENARIO.replace("JITTER", "0.02") + SAG)
    eng = forecast(sc, draws=2, seed=0)
    model = SiteModel.build(sc, draws=2, seed=0, tick_s=None, filler=False)
    assert not model.notes
    for d in range(2):
        tr = model.trace(MitigationOption(), d, 5.0)[0]
        np.testing.assert_array_equal(tr.it_w, eng.it_w[d])
        np.testing.assert_array_equal(tr.facility_w, eng.facility_w[d])
        assert tr.events["event"].tolist() == ["voltage_sag"]
    unmitigated = comply(eng, ride_through(0.15))
    assert not unmitigated.passed and 0.15 < unmitigated.summary_frame()["value"].iloc[0]
    res = size_mitigation(sc, ride_through(0.15), draws=2, seed=0, grid=SMALL_GRID)
    assert "rt" not in res.evaluated.iloc[0]["requirements_not_shown"]
    assert res.found and res.cheapest["battery_power_megawatts"] > 0
    for d in range(2):
        assert comply(res.trace(0, draw=d), ride_through(0.15)).passed


def test_several_jobs_with_tripping_sags_carry_a_note():
    sc = parse_scenario(SCENARIO.replace("JITTER", "0.02") + SAG)
    two = sc.replace(jobs=(dataclasses.replace(sc.jobs[0], gpus=256),
                           dataclasses.replace(sc.jobs[0], name="second", gpus=256)))
    model = SiteModel.build(two, draws=1, seed=0, tick_s=None, filler=False)
    assert model.notes and "approximate" in model.notes[0]
