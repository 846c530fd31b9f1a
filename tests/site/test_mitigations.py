"""Tests of powerlab.site.mitigations: what-ifs report reductions and costs on one horizon."""

from pathlib import Path

import pytest
import yaml

from powerlab.exceptions import PowerlabError
from powerlab.site.mitigations import compare_mitigations
from powerlab.site.scenario import Battery, Mitigations, parse_scenario

SCEN = Path(__file__).parents[2] / "data" / "scenarios"


def _tiny():
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["horizon"]["end_utc"] = "2025-06-02T12:30:00Z"
    for j in d["jobs"]:
        j["jitter_s"] = 0
        j["failures"] = {}
    return parse_scenario(d)


def test_mitigation_whatifs_report_reduction_and_cost():
    sc = _tiny()
    variants = {
        "floor": Mitigations(gpu_power_floor_pct_tdp=60),
        "ramp": Mitigations(gpu_ramp_limit_w_per_s=500),
        "stagger": Mitigations(stagger_starts_s=120),
        "battery": Mitigations(battery=Battery(power_megawatts=0.5,
                                               energy_megawatt_hours=0.2)),
    }
    t = compare_mitigations(sc, variants, draws=1, seed=0, tick_s=0.1)
    assert list(t.index) == ["baseline", "floor", "ramp", "stagger", "battery"]
    base = t.loc["baseline"]
    assert base["throughput_loss_pct"] == 0 and base["extra_energy_megawatt_hours"] == 0
    # floor: smaller swings, costs energy, no throughput
    assert t.loc["floor", "swing_1s_reduction_pct"] > 10
    assert t.loc["floor", "extra_energy_megawatt_hours"] > 0
    assert t.loc["floor", "throughput_loss_pct"] == pytest.approx(0.0, abs=1e-9)
    # ramp limit: slower ramps, costs throughput.  The table's ramps are over 1-s means
    # (ramp_up_megawatts_per_s_1s): a step stretched into a ramp of T < 1 s keeps
    # 1 - T / 4 s of its 1-s-means ramp, so the reduction is modest (a tick-to-tick
    # figure would show > 50 %)
    assert t.loc["ramp", "ramp_up_reduction_pct"] > 10
    assert t.loc["ramp", "throughput_loss_pct"] > 0
    # stagger: the second job trains less
    assert t.loc["stagger", "throughput_loss_pct"] > 0
    # battery: shaves the swing, costs its losses, no throughput
    assert t.loc["battery", "swing_1s_reduction_pct"] > 10
    assert t.loc["battery", "extra_energy_megawatt_hours"] > 0  # round-trip losses
    assert t.loc["battery", "throughput_loss_pct"] == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(PowerlabError, match="no mitigations"):
        compare_mitigations(sc)


def test_whatifs_share_one_horizon_stagger_of_unaligned_jobs_costs_nothing():
    # no horizon in the file: staggering lengthens the default horizon; the what-if must
    # not bill the energy of that extra idle tail to the mitigation
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d.pop("horizon")
    for j in d["jobs"]:
        j["jitter_s"] = 0
        j["failures"] = {}
        j["duration_s"] = 900
    d["jobs"][1]["start_utc"] = "2025-06-02T12:07:00Z"  # nothing starts together
    sc = parse_scenario(d)
    t = compare_mitigations(sc, {"stagger": Mitigations(stagger_starts_s=300)}, draws=1,
                            boundary="it")
    assert t.loc["stagger", "extra_energy_megawatt_hours"] == pytest.approx(0.0, abs=1e-12)
    assert t.loc["stagger", "throughput_loss_pct"] == pytest.approx(0.0, abs=1e-12)
    assert t.loc["stagger", "swing_60s_megawatts"] == t.loc["baseline", "swing_60s_megawatts"]
    # jobs that do start together: the second starts 300 s later and ends as planned, so
    # it trains (and draws) less: a throughput cost, not an energy cost
    d["jobs"][1]["start_utc"] = d["jobs"][0]["start_utc"]
    t = compare_mitigations(parse_scenario(d), {"stagger": Mitigations(stagger_starts_s=300)},
                            draws=1, boundary="it")
    assert t.loc["stagger", "extra_energy_megawatt_hours"] < 0
    assert t.loc["stagger", "throughput_loss_pct"] > 0
