"""The one input resolver (powerlab.interconnect.sources, issue 31 item 4): each kind of
source goes through it and gives the numbers the lower-level functions give; anything else
is one clean error naming the kinds, the same from every entry point."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import OptionError, PowerlabError
from powerlab.flex.verify import read_site_power, verify_event
from powerlab.interconnect.compliance import Compliance, comply
from powerlab.interconnect.powertrace import PowerTrace, forecast_trace, trace_from_telemetry
from powerlab.interconnect.resonance import screen_resonance
from powerlab.interconnect.sources import (
    ACCEPTED,
    KINDS,
    MeasuredOptions,
    PowerSource,
    resolve,
)
from powerlab.interconnect.studypackage import ShortWindow, study_package
from powerlab.limits.requirements import read_requirements
from powerlab.site.engine import forecast
from powerlab.site.scenario import read_scenario
from powerlab.telemetry import power_sums
from powerlab.telemetry.schema import conform
from powerlab.telemetry.store import write_store

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "data/scenarios/small.yaml"
SPEC = REPO / "data/requirements/small_site_example.yaml"
MODES = REPO / "data/requirements/choukse2025_forms.yaml"     # has grid modes
T0 = pd.Timestamp("2025-06-01T00:00:00Z")


@pytest.fixture(scope="module")
def small():
    return read_scenario(SMALL)


@pytest.fixture(scope="module")
def frame():
    """Two nodes read every second (one 0.5 s later), a slow sine on a base."""
    t = np.arange(0, 600, 1.0)
    rows = [pd.DataFrame({"timestamp": T0 + pd.to_timedelta(t + off, unit="s"),
                          "host": h, "scope": "node",
                          "power_w": 5000.0 + 800.0 * np.sin(2 * np.pi * (t + off) / 120)})
            for h, off in (("n0", 0.0), ("n1", 0.5))]
    return conform(pd.concat(rows, ignore_index=True))


def test_each_kind_has_its_entry_and_resolve_picks_it(small, frame, tmp_path):
    res = forecast(small, draws=2, seed=0)
    tr = PowerTrace(0, 1.0, T0, np.ones(10), None)
    write_store(frame, tmp_path / "store", fsync=False)
    frame.to_parquet(tmp_path / "t.parquet")
    cases = {"forecast": (res, PowerSource.from_forecast),
             "scenario": (small, PowerSource.from_scenario),
             "trace": (tr, PowerSource.from_trace),
             "telemetry": (frame, PowerSource.from_telemetry),
             "store": (tmp_path / "store", PowerSource.from_store)}
    assert tuple(cases) == KINDS
    for kind, (data, entry) in cases.items():
        src = resolve(data)
        assert src.kind == kind == entry(data).kind
        assert resolve(src) is src                      # a PowerSource passes through
        assert src.is_forecast == (kind in ("forecast", "scenario"))
    assert resolve(tmp_path / "t.parquet").kind == "store"
    assert resolve(str(SMALL)).kind == "scenario"      # a scenario YAML is read
    assert resolve(SMALL).scenario.name == small.name
    assert resolve(res).scenario is res.scenario


def test_a_scenario_gives_the_forecast_engines_numbers(small):
    src = resolve(SMALL)
    a = src.trace(draw=1, seed=3, tick_s=1.0)
    b = forecast_trace(small, draw=1, seed=3, tick_s=1.0)
    np.testing.assert_array_equal(a.facility_w, b.facility_w)
    res = forecast(small, draws=2, seed=3, tick_s=1.0)
    run = src.run(lambda dp: {"peak": dp.facility_w.max()}, draws=2, seed=3, tick_s=1.0)
    np.testing.assert_array_equal(run.values["peak"], res.facility_w.max(axis=1))
    assert run.description == f"forecast of scenario {small.name!r}, 2 draws, seed 3"
    np.testing.assert_array_equal(src.forecast(draws=2, seed=3, tick_s=1.0).it_w, res.it_w)


def test_a_forecast_result_is_read_not_run_again(small):
    res = forecast(small, draws=3, seed=5)
    src = resolve(res)
    tr = src.trace(draw=2)
    np.testing.assert_array_equal(tr.it_w, res.it_w[2])
    np.testing.assert_array_equal(tr.facility_w, res.facility_w[2])
    run = src.run(lambda dp: {"d": dp.draw, "peak": dp.it_w.max()}, draws=2, seed=99)
    assert run.values["d"].tolist() == [0, 1] and run.seed == 5 and run.draws == 2
    np.testing.assert_array_equal(run.values["peak"], res.it_w[:2].max(axis=1))
    assert src.forecast() is res
    with pytest.raises(PowerlabError, match="draw must be from 0 to 2"):
        src.trace(draw=3)
    # comply on it: each draw's values are Compliance.evaluate of that draw
    spec = read_requirements(SPEC)
    chk = comply(res, spec, draws=3)
    one = Compliance(spec).evaluate(src.trace(draw=1))
    assert chk.draw_values.iloc[1].to_dict() == pytest.approx(one, nan_ok=True)


def test_measured_kinds_give_trace_from_telemetrys_numbers(frame, tmp_path):
    ref = trace_from_telemetry(frame, pue=1.2, base_load_w=1e3)
    write_store(frame, tmp_path / "store", fsync=False)
    frame.to_parquet(tmp_path / "t.parquet")
    opts = MeasuredOptions(pue=1.2, base_load_w=1e3)
    for data in (frame, tmp_path / "store", tmp_path / "t.parquet"):
        tr = resolve(data).trace(measured=opts)
        np.testing.assert_array_equal(tr.facility_w, ref.facility_w)
        assert tr.start_utc == ref.start_utc and tr.description == ref.description
    run = resolve(frame).run(lambda dp: {"n": dp.n_ticks}, measured=opts)
    assert run.draws == 1 and run.seed is None and run.values["n"].tolist() == [ref.n_ticks]
    # the same time range however the telemetry is given
    kw = {"start": T0 + pd.Timedelta(seconds=100), "end": T0 + pd.Timedelta(seconds=300)}
    a = resolve(tmp_path / "store").trace(measured=MeasuredOptions(**kw))
    b = trace_from_telemetry(frame, **kw)
    np.testing.assert_array_equal(a.it_w, b.it_w)
    with pytest.raises(PowerlabError, match="a forecast needs a scenario"):
        resolve(frame).forecast()


def test_site_power_is_power_sums_of_the_telemetry(frame, tmp_path):
    write_store(frame, tmp_path / "store", fsync=False)
    ref = power_sums(frame, "1min", by="cluster", scope="node", engine="pandas")
    for data in (frame, tmp_path / "store"):
        s = resolve(data).site_power("1min", scope="node")
        np.testing.assert_allclose(s.to_numpy(), ref["power_w"].to_numpy())
    # through flex.verify: the same, binned
    s = read_site_power(tmp_path / "store", scope="node")
    np.testing.assert_allclose(s.to_numpy(), ref["power_w"].to_numpy())
    with pytest.raises(PowerlabError, match="site power is measured"):
        resolve(SMALL).site_power()


def test_a_path_that_is_not_a_source_is_refused_by_name(tmp_path):
    with pytest.raises(PowerlabError, match="no such file or folder"):
        resolve(tmp_path / "nothing.parquet")
    (tmp_path / "x.csv").write_text("a\n1\n")
    with pytest.raises(PowerlabError, match=r"expected a scenario \(\.yaml\), a store folder"):
        resolve(tmp_path / "x.csv")
    with pytest.raises(OptionError, match="expected a ForecastResult, got Scenario"):
        PowerSource.from_forecast(read_scenario(SMALL))
    with pytest.raises(OptionError, match="kind must be one of"):
        PowerSource("meter", None)


@pytest.mark.parametrize("bad", [42, None, [1.0, 2.0], np.ones(10), {"power_w": 1.0}])
def test_every_entry_point_refuses_another_kind_with_the_same_error(bad):
    """The four entry points call the one resolver: each refuses what it cannot take with
    one OptionError whose text names the kinds accepted, the same text everywhere."""
    want = f"source must be {ACCEPTED}; got {type(bad).__name__}"
    events = pd.DataFrame({"start_utc": [T0], "end_utc": [T0 + pd.Timedelta(minutes=5)],
                           "cap_w": [1e6]})
    calls = {"comply": lambda: comply(bad, SPEC),
             "screen_resonance": lambda: screen_resonance(bad, MODES),
             "study_package": lambda: study_package(bad, SPEC),
             "verify_event": lambda: verify_event(bad, events),
             "resolve": lambda: resolve(bad)}
    for name, call in calls.items():
        with pytest.raises(OptionError) as err:
            call()
        assert str(err.value) == want, name


def test_resonance_and_study_package_take_a_forecast_already_run(small):
    """New kinds for two entry points: a forecast result screens and packages as its
    scenario does with the same draws and seed (its draws are read, not run again)."""
    res = forecast(small, draws=2, seed=1)
    spec = read_requirements(MODES)
    a = screen_resonance(res, spec, draw=1)
    b = screen_resonance(small, spec, draw=1, seed=1)
    pd.testing.assert_frame_equal(a.harmonics, b.harmonics)
    kw = {"short": ShortWindow(tick_s=0.1, window_s=60), "ride_through": False}
    p = study_package(res, SPEC, draws=2, **kw)
    q = study_package(small, SPEC, draws=2, seed=1, **kw)
    pd.testing.assert_frame_equal(p.figures, q.figures)
    pd.testing.assert_frame_equal(p.lines, q.lines)
    assert p.source == q.source and p.seed == 1


def test_commands_resolve_their_source(tmp_path, capsys):
    """export-grid, comply and study-package read a path through the resolver: a missing
    one and a file of another kind are one-line errors (exit 2)."""
    from powerlab import cli

    (tmp_path / "x.csv").write_text("a\n1\n")
    for argv in (["export-grid", str(tmp_path / "none.parquet"), "--format", "csv",
                  "--out", str(tmp_path / "o.csv")],
                 ["comply", str(tmp_path / "x.csv"), "--requirements", str(SPEC),
                  "--out", str(tmp_path / "c")],
                 ["study-package", str(tmp_path / "x.csv"), "--requirements", str(SPEC),
                  "--out", str(tmp_path / "s")]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1
        assert "no such file or folder" in err or "expected a scenario (.yaml)" in err
