"""Tests of powerlab.site.scenario: YAML scenarios, validation errors naming the key."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from powerlab.exceptions import ScenarioError
from powerlab.site.scenario import Scenario, parse_scenario, read_scenario

ROOT = Path(__file__).parents[2]
SCEN = ROOT / "data" / "scenarios"


def _doc():
    return yaml.safe_load((SCEN / "small.yaml").read_text())


@pytest.mark.parametrize("name", ["small.yaml", "llama3_16k_h100.yaml"])
def test_example_scenarios_load(name):
    sc = read_scenario(SCEN / name)
    assert isinstance(sc, Scenario)
    assert sc.jobs and all(j.start_utc.tzinfo is not None for j in sc.jobs)
    assert sc.end_utc > sc.start_utc
    assert sc.hardware.cluster_gpus >= sum(j.gpus for j in sc.jobs)


def test_small_scenario_values_and_defaults():
    sc = read_scenario(SCEN / "small.yaml")
    pre, fin = sc.jobs
    assert pre.checkpoint_interval_s == 1200 and pre.checkpoint_duration_s == 60
    assert fin.compute_w == 600 and fin.eval_w == 400
    assert pre.compute_w == sc.hardware.gpu_compute_w  # hardware default
    assert pre.startup_w == sc.hardware.gpu_idle_w
    assert sc.start_utc == pd.Timestamp("2025-06-02T12:00:00Z")
    assert sc.hardware.nodes == 128


@pytest.mark.parametrize("mutate, key, words", [
    (lambda d: d["jobs"][1].__setitem__("checkpoint", {"interval_s": -5}),
     "jobs[1].checkpoint.interval_s", ">= 0"),
    (lambda d: d["jobs"][0]["checkpoint"].__setitem__("interval_s", 1.0),
     "jobs[0].checkpoint.interval_s", "shorter than one step"),
    (lambda d: d["jobs"][0].__setitem__("start_utc", "2025-06-02 12:05:00"),
     "jobs[0].start_utc", "no time zone"),
    (lambda d: d["jobs"][0].__setitem__("start_utc", "yesterday"),
     "jobs[0].start_utc", "ISO 8601"),
    (lambda d: d["jobs"][0].__setitem__("step_tme_s", 3), "jobs[0].step_tme_s",
     "did you mean 'step_time_s'"),
    (lambda d: d["jobs"][0].pop("gpus"), "jobs[0].gpus", "required"),
    (lambda d: d["jobs"][0].__setitem__("gpus", 2.5), "jobs[0].gpus", "integer"),
    (lambda d: d["jobs"][1].__setitem__("compute_fraction", 1.5),
     "jobs[1].compute_fraction", "<= 1"),
    (lambda d: d["hardware"].__setitem__("cluster_gpus", 10), "hardware.cluster_gpus",
     "cannot hold"),
    (lambda d: d["site"].__setitem__("pue", 1.3), "site.pue", "not both"),
    (lambda d: d["site"].__setitem__("tz", "Mars/Olympus"), "site.tz", "time zone"),
    (lambda d: d["mitigations"].__setitem__("battery", {"power_megawatts": 5}),
     "mitigations.battery.energy_megawatt_hours", "required"),
    (lambda d: d["limits"].__setitem__("boundary", "rack"), "limits.boundary", "'facility'"),
    (lambda d: d.__setitem__("jobs", []), "jobs", "non-empty"),
    (lambda d: d["jobs"][1].__setitem__("name", "pretrain"), "jobs[1].name", "duplicate"),
    (lambda d: d["jobs"][0].__setitem__("duration_s", 100), "jobs[0].duration_s",
     "no training time"),
    (lambda d: d["horizon"].__setitem__("end_utc", "2025-06-02T11:00:00Z"),
     "horizon.end_utc", "not after"),
    # a jitter of days would make the engine's offset kernel millions of ticks wide
    (lambda d: d["jobs"][0].__setitem__("jitter_s", 86400), "jobs[0].jitter_s",
     "more than one step"),
])
def test_errors_name_the_key(mutate, key, words):
    d = _doc()
    mutate(d)
    with pytest.raises(ScenarioError) as ei:
        parse_scenario(d)
    assert ei.value.key == key
    assert key in str(ei.value) and words in str(ei.value)


def test_bad_yaml_names_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\njobs: [\n  {gpus: 8\n")
    with pytest.raises(ScenarioError, match=r"line \d+") as ei:
        read_scenario(p)
    assert str(p) in str(ei.value)


def test_missing_file(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read"):
        read_scenario(tmp_path / "nope.yaml")


def test_cooling_pue_rises_with_ambient_temperature():
    sc = read_scenario(SCEN / "small.yaml")
    tz = sc.site.tz
    # 15:00 local is the daily peak, 03:00 the trough
    t = pd.DatetimeIndex([pd.Timestamp("2025-06-02 03:00", tz=tz),
                          pd.Timestamp("2025-06-02 15:00", tz=tz)]).tz_convert("UTC")
    temp = sc.site.cooling.ambient_temp_c(t, tz)
    pue = sc.site.pue_at(t)
    assert temp[1] - temp[0] == pytest.approx(2 * sc.site.cooling.ambient_amplitude_c)
    assert pue[1] > pue[0] >= sc.site.cooling.pue_at_reference
    expected = 1.15 + 0.01 * (24 + 6 - 18)
    assert pue[1] == pytest.approx(expected)


def test_hash_identifies_content():
    a = parse_scenario(_doc())
    b = parse_scenario(_doc())
    d = _doc()
    d["jobs"][0]["gpus"] = 512
    c = parse_scenario(d)
    assert a.hash() == b.hash() and len(a.hash()) == 64
    assert a.hash() != c.hash()


@pytest.mark.bad_input("scenario")
@pytest.mark.parametrize("mutate, key, words", [
    (lambda d: d["jobs"][0].__setitem__("gpus", 10**12), "jobs[0].gpus", "must be <="),
    (lambda d: d["hardware"].__setitem__("cluster_gpus", 10**12), "hardware.cluster_gpus",
     "must be <="),
    (lambda d: d["jobs"][0].__setitem__("duration_s", 1e9), "jobs[0].duration_s",
     "must be <="),
    (lambda d: d["jobs"][0].__setitem__("start_utc", "9999-06-02T12:00:00Z"),
     "jobs[0].start_utc", "year must be between"),
    (lambda d: d["jobs"][0].__setitem__("start_utc", "1066-10-14T09:00:00Z"),
     "jobs[0].start_utc", "year must be between"),
    (lambda d: d.__setitem__("horizon", {"start_utc": "2025-01-01T00:00:00Z",
                                         "end_utc": "2031-01-01T00:00:00Z"}),
     "horizon", "days"),
    (lambda d: d["site"].__setitem__("electrical_loss_fraction", 0.3), "site.electrical_loss",
     "do not fit in a PUE"),
    (lambda d: d["hardware"].__setitem__("gpu_rise_time_constant_s", -0.1),
     "hardware.gpu_rise_time_constant_s", ">="),
    # unit slips (x1000) on numbers that had no upper bound
    (lambda d: d["site"].__setitem__("base_load_w", 1.5e12), "site.base_load_w", "must be <="),
    (lambda d: d["hardware"].__setitem__("node_overhead_w", 2.5e6),
     "hardware.node_overhead_w", "must be <="),
    (lambda d: d["hardware"].__setitem__("gpus_per_node", 8000), "hardware.gpus_per_node",
     "must be <="),
    (lambda d: d["hardware"].__setitem__("gpu_tdp_w", 700_000), "hardware.gpu_tdp_w",
     "must be <="),
    (lambda d: d.setdefault("mitigations", {}).__setitem__("gpu_ramp_limit_w_per_s", 1e9),
     "mitigations.gpu_ramp_limit_w_per_s", "must be <="),
    (lambda d: d.setdefault("mitigations", {}).__setitem__("stagger_starts_s", 1e9),
     "mitigations.stagger_starts_s", "must be <="),
    (lambda d: d.setdefault("mitigations", {}).__setitem__(
        "battery", {"power_megawatts": 2e7, "energy_megawatt_hours": 10}),
     "mitigations.battery.power_megawatts", "must be <="),
    (lambda d: d.setdefault("limits", {}).__setitem__("ramp_up_megawatts_per_s", 5e6),
     "limits.ramp_up_megawatts_per_s", "must be <="),
])
def test_absurd_sizes_are_refused_naming_the_key(mutate, key, words):
    d = _doc()
    mutate(d)
    with pytest.raises(ScenarioError, match=words) as ei:
        parse_scenario(d)
    assert key in str(ei.value)


@pytest.mark.bad_input("scenario")
def test_forecast_memory_is_estimated_and_refused_before_allocation():
    from powerlab.site.engine import forecast
    from powerlab.site.memory import memory_estimate_bytes

    sc = read_scenario(SCEN / "small.yaml")
    est = memory_estimate_bytes(sc, 100_000, 0.1)
    assert 100_000 * 72_000 * 8 * 5 <= est < 1.01 * 100_000 * 72_000 * 8 * 5
    with pytest.raises(ScenarioError, match=r"about 26[0-9],?[0-9]*\.[0-9] GiB") as ei:
        forecast(sc, draws=100_000)
    assert "100,000 draws x 72,000 ticks" in str(ei.value) and "draws" in str(ei.value)
    with pytest.raises(ScenarioError, match="GiB allowed"):
        forecast(sc, draws=2, memory_limit_bytes=1000)
    # null: a forecast under the limit runs
    assert forecast(sc, draws=1, memory_limit_bytes=est).draws == 1


def test_electrical_losses_default_within_the_pue():
    d = _doc()
    d["site"] = {"pue": 1.0}
    assert parse_scenario(d).site.electrical_loss_fraction == 0.0   # IT only
    d["site"] = {"pue": 1.3}
    sc = parse_scenario(d)
    assert sc.site.electrical_loss_fraction == 0.04
    assert sc.site.cooling_time_constant_s == 300.0


def test_an_empty_key_reads_as_absent():
    """``cooling:`` or ``failures:`` left empty is the same as leaving the key out (it was
    refused as an "unknown key")."""
    d = _doc()
    d["site"].pop("cooling", None)
    plain = parse_scenario(d)
    d["site"]["cooling"] = None
    assert parse_scenario(d).site == plain.site
    d = _doc()
    d["site"].pop("pue", None)
    d["site"]["cooling"] = {"pue_at_reference": 1.2}
    with_cooling = parse_scenario(d)
    d["site"]["pue"] = None
    assert parse_scenario(d).site == with_cooling.site
    d = _doc()
    d["interruptions"] = {"model": "llama3"}
    for j in d["jobs"]:
        j.pop("failures", None)
    site_level = parse_scenario(d)
    d["jobs"][0]["failures"] = None
    assert parse_scenario(d).jobs[0] == site_level.jobs[0]
    # a misspelt key is still refused
    d["jobs"][0]["failurs"] = None
    with pytest.raises(ScenarioError, match="unknown key"):
        parse_scenario(d)
