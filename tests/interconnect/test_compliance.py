"""Compliance: metrics against analytic ground truth, a passing and a failing trace for
every kind of requirement, Monte Carlo verdicts, measured telemetry resampled honestly, the
forecast adapter, and the comply command's exit codes.

Traces here are built directly with numpy (ramps, steps, sinusoids, sags), never by the
forecast engine, except where the engine itself is what is tested (the adapter)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab import cli
from powerlab.exceptions import AnalysisError, PowerlabError
from powerlab.interconnect.compliance import Compliance, comply
from powerlab.interconnect.powertrace import PowerTrace, for_each_draw, trace_from_telemetry
from powerlab.interconnect.verdicts import COMPLIANCE_COLUMNS
from powerlab.limits import loadmetrics as lm
from powerlab.limits.requirements import parse_requirements
from powerlab.site.scenario import parse_scenario
from powerlab.telemetry.schema import conform

REPO = Path(__file__).resolve().parents[2]
T0 = pd.Timestamp("2025-06-01T00:00:00Z")
MW = 1e6


def trace(x, tick=0.1, events=None, native=math.nan):
    x = np.asarray(x, float)
    kw = {} if events is None else {"events": events}
    return PowerTrace(0, tick, T0, x, x, native_interval_s=native, **kw)


def ramp_trace(rise_mw, over_s, tick=0.1, total_s=600.0, base_mw=20.0):
    t = np.arange(0, total_s, tick)
    return base_mw * MW + rise_mw * MW * np.clip((t - 100.0) / over_s, 0, 1)


def spec_of(req: dict, **top):
    req = {"name": "r", "source": "test", "illustrative": True, **req}
    return parse_requirements({"name": "t", "requirements": [req], **top})


# --------------------------------------------------------------------------- metrics


def test_ramp_of_means_matches_the_slope_and_is_tick_independent():
    for tick in (0.1, 0.05, 0.5):
        x = ramp_trace(10, 10, tick)                     # 1 MW/s for 10 s
        assert lm.ramp_of_means(x, tick, 1.0, "up") == pytest.approx(1e6, rel=1e-9)
        assert lm.ramp_of_means(x, tick, 1.0, "down") == pytest.approx(0, abs=1e-6)
        # 1-min means: the worst boundary between the two minutes sits mid-ramp, where
        # the difference of the means is H (1 - T / (4 W)) for a rise H over T in windows W
        assert lm.ramp_of_means(x, tick, 60.0) == pytest.approx(
            10e6 * (1 - 10 / 240) / 60, rel=1e-9)
    x = ramp_trace(-6, 2)                                # a fall of 3 MW/s
    assert lm.ramp_of_means(x, 0.1, 1.0, "down") == pytest.approx(3e6, rel=1e-9)
    assert lm.ramp_of_means(x, 0.1, 1.0) == pytest.approx(3e6, rel=1e-9)


def test_ideal_step_gives_its_height_in_every_metric():
    x = np.full(6000, 10 * MW)
    x[3000:] += 4 * MW                                   # 4 MW up at t = 300 s
    assert lm.largest_step(x, 0.1, 1.0, "up") == 4 * MW
    assert lm.largest_step(x, 0.1, 1.0, "down") == 0.0
    assert lm.largest_deviation(x, 0.1, 10.0) == 4 * MW
    # worst alignment of two adjacent 1-s means straddles the step: the full 4 MW per s
    assert lm.ramp_of_means(x, 0.1, 1.0) == pytest.approx(4 * MW)


def test_band_oscillation_of_sinusoids_in_and_out_of_band():
    tick = 0.05
    t = np.arange(0, 600, tick)
    a = 0.8 * MW
    inside = 20 * MW + a * np.sin(2 * np.pi * 0.73 * t)
    outside = 20 * MW + a * np.sin(2 * np.pi * 5.0 * t)
    rms = lm.band_oscillation(inside, tick, (0.1, 2.0), "rms")
    pp = lm.band_oscillation(inside, tick, (0.1, 2.0), "peak_to_peak")
    assert rms == pytest.approx(a / math.sqrt(2), rel=0.01)
    assert pp == pytest.approx(2 * a, rel=0.01)
    assert lm.band_oscillation(outside, tick, (0.1, 2.0), "rms") < 0.01 * a
    assert lm.band_oscillation(outside, tick, (0.1, 2.0), "peak_to_peak") < 0.02 * a
    assert lm.band_oscillation(outside, tick, (3.0, 30.0), "rms") == pytest.approx(
        a / math.sqrt(2), rel=0.01)                     # cut at 10 Hz, line inside
    assert lm.band_oscillation(inside, tick, (12.0, 30.0)) == 0.0   # above Nyquist
    # the same signal at another tick gives the same RMS
    t2 = np.arange(0, 600, 0.1)
    assert lm.band_oscillation(20 * MW + a * np.sin(2 * np.pi * 0.73 * t2), 0.1,
                               (0.1, 2.0)) == pytest.approx(rms, rel=0.005)


def test_metrics_refuse_what_they_cannot_measure():
    with pytest.raises(AnalysisError, match="whole number of ticks"):
        lm.ramp_of_means(np.ones(100), 0.3, 1.0)
    with pytest.raises(AnalysisError, match="shorter than two"):
        lm.ramp_of_means(np.ones(100), 0.1, 60.0)
    with pytest.raises(AnalysisError, match="two periods"):
        lm.band_oscillation(np.ones(100), 0.1, (0.1, 2.0))
    with pytest.raises(AnalysisError, match="NaN"):
        lm.largest_step(np.array([1.0, np.nan, 2.0]), 0.1, 0.1)


# --------------------------------------------------------------------------- each kind


def _sag_trace(loss_mw):
    x = np.full(3000, 30 * MW)
    x[1000:1030] -= loss_mw * MW                       # load lost for 3 s from t = 100 s
    sags = pd.DataFrame({"timestamp": [T0 + pd.Timedelta(seconds=100)], "duration_s": [0.3],
                         "residual_voltage_pu": [0.75]})
    return trace(x).with_sags(sags)


def _sine(amp_mw, f=0.73):
    t = np.arange(0, 300, 0.1)
    return trace(20 * MW + amp_mw * MW * np.sin(2 * np.pi * f * t))


def _steps(height_mw):
    x = np.full(3000, 20 * MW)
    x[1000:2000] += height_mw * MW
    return trace(x)


KINDS = {   # requirement, passing trace, failing trace, expected values (pass, fail)
    "ramp_1s": ({"kind": "ramp", "window_s": 1, "limit": 2, "unit": "MW/s"},
                trace(ramp_trace(10, 10)), trace(ramp_trace(10, 2)), (1.0, 5.0)),
    "ramp_1min": ({"kind": "ramp", "window_s": 60, "limit": 1, "unit": "MW/min"},
                  trace(ramp_trace(10, 1200, 1.0, 3600.0), 1.0),
                  trace(ramp_trace(10, 120, 1.0, 3600.0), 1.0), (0.5, 5.0)),
    "deviation": ({"kind": "deviation", "window_s": 10, "limit": 3, "unit": "MW"},
                  _steps(2), _steps(4), (2.0, 4.0)),
    "oscillation_rms": ({"kind": "oscillation", "band_hz": [0.1, 2], "measure": "rms",
                         "limit": 0.5, "unit": "MW"}, _sine(0.5), _sine(1.0),
                        (0.5 / math.sqrt(2), 1 / math.sqrt(2))),
    "oscillation_pp": ({"kind": "oscillation", "band_hz": [0.1, 2],
                        "measure": "peak_to_peak", "limit": 1500, "unit": "kW"},
                       _sine(0.5), _sine(1.0), (1000.0, 2000.0)),
    "step": ({"kind": "step", "within_s": 1, "limit": 5, "unit": "MW"},
             _steps(3), _steps(6), (3.0, 6.0)),
    "ride_through": ({"kind": "ride_through", "residual_voltage_pu": 0.7,
                      "sag_duration_s": 0.5, "observe_s": 3, "limit": 1, "unit": "MW"},
                     _sag_trace(0.5), _sag_trace(20), (0.5, 20.0)),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_passing_and_a_failing_trace_for_each_kind(kind):
    req, good, bad, (v_good, v_bad) = KINDS[kind]
    top = {"deviation_rule": "separate_limit"} if kind == "deviation" else {}
    check = Compliance(spec_of(req, **top))
    for tr, verdict, value in ((good, "pass", v_good), (bad, "fail", v_bad)):
        res = comply(tr, check)
        row = res.summary_frame().iloc[0]
        assert row["verdict"] == verdict, (kind, row.to_dict())
        assert row["value"] == pytest.approx(value, rel=0.02)
        assert row["exceed_probability"] == (1.0 if verdict == "fail" else 0.0)
        assert res.passed is (verdict == "pass")


def test_ride_through_covers_only_sags_within_its_envelope():
    req = KINDS["ride_through"][0]
    spec = spec_of(req)
    deeper = _sag_trace(20).events.assign(residual_voltage_pu=0.5)   # deeper than 0.7 pu
    tr = trace(_sag_trace(20).it_w, events=deeper)
    row = comply(tr, spec).summary_frame().iloc[0]
    assert row["verdict"] == "fail" and math.isnan(row["value"]) and not row["assessed"]
    assert "no voltage sag" in row["note"] and "cannot be shown" in row["note"]
    assert math.isnan(row["exceed_probability"])
    # sags given to comply() count like the trace's own
    plain = trace(_sag_trace(20).it_w)
    sags = _sag_trace(20).events[["timestamp", "duration_s", "residual_voltage_pu"]]
    assert comply(plain, spec, sags=sags).verdicts["r"] == "fail"


# --------------------------------------------------------------------------- verdicts


def test_exceed_probability_value_and_verdict_agree_over_draws():
    rng = np.random.default_rng(3)
    for p_max in (0.0, 0.1, 0.25):
        spec = spec_of({"kind": "step", "within_s": 1, "limit": 5, "unit": "MW"},
                       max_exceed_probability=p_max)
        check = Compliance(spec)
        for _ in range(12):
            n = int(rng.integers(1, 25))
            vals = pd.DataFrame({"r": rng.uniform(3, 7, n)})
            row = check.result(vals, tick_s=0.1, native_interval_s=0.1,
                               duration_s=100).summary_frame().iloc[0]
            k = int((vals["r"] > 5).sum())
            assert row["exceed_probability"] == pytest.approx(k / n)
            assert (row["verdict"] == "fail") == (k / n > p_max)
            assert (row["value"] > 5) == (row["verdict"] == "fail")
            assert row["exceed_probability_upper95"] >= k / n


def test_not_assessable_requirements_are_not_passed():
    spec = parse_requirements((REPO / "data/requirements/choukse2025_forms.yaml").read_text())
    x = 20 * MW + 0.1 * MW * np.sin(2 * np.pi * 0.3 * np.arange(0, 600, 1.0))
    res = comply(trace(x, tick=1.0, native=2.0), spec)
    v = res.verdicts
    assert set(v) <= {"pass", "fail"}                      # two verdicts, nothing else
    sf = res.summary_frame().set_index("requirement")
    for name in ("ramp_up_1s",              # 2-s readings, 1-s means
                 "oscillation_3_30hz",      # above 0.25 Hz Nyquist
                 "oscillation_0p1_2hz"):    # cut at 0.25 Hz, under the limit
        assert v[name] == "fail" and math.isnan(sf.loc[name, "value"]), name
        assert not sf.loc[name, "assessed"] and "cannot be shown" in sf.loc[name, "note"]
    # the 10-s deviation is the allowance before the 1-s ramp limits (Choukse et al.):
    # with those unassessable it cannot be shown met either; as a limit of its own it can
    assert v["dynamic_range_10s"] == "fail" and not sf.loc["dynamic_range_10s", "assessed"]
    assert "allowance before the ramp limits" in sf.loc["dynamic_range_10s", "note"]
    strict = comply(trace(x, tick=1.0, native=2.0),
                    dataclasses.replace(spec, deviation_rule="separate_limit"))
    assert strict.verdicts["dynamic_range_10s"] == "pass"
    assert not res.passed and "ramp_up_1s" in res.not_assessed
    text = str(res.summary())
    assert "FAIL" in text and "cannot be shown to comply" in text and "Nyquist" in text
    # a search's per-series check agrees: what cannot be assessed does not pass
    assert not Compliance(spec).passes(trace(x, tick=1.0, native=2.0))
    # a cut band whose resolved part already exceeds the limit fails
    big = 20 * MW + 2 * MW * np.sin(2 * np.pi * 0.2 * np.arange(0, 600, 1.0))
    res = comply(trace(big, tick=1.0, native=2.0), spec)
    assert res.verdicts["oscillation_0p1_2hz"] == "fail"
    assert res.summary_frame().set_index("requirement").loc["oscillation_0p1_2hz", "value"] > 0.5
    assert "can only be larger" in res.summary_frame().set_index("requirement").loc[
        "oscillation_0p1_2hz", "note"]


def test_compliance_csv_and_summary(tmp_path):
    req, _, bad, _ = KINDS["step"]
    res = comply(bad, spec_of(req))
    csv, txt = res.write(tmp_path / "out")
    back = pd.read_csv(csv)
    assert tuple(back.columns) == COMPLIANCE_COLUMNS
    assert back.loc[0, "verdict"] == "fail" and back.loc[0, "value"] == pytest.approx(6.0)
    assert "FAIL: 1 of 1" in txt.read_text()
    assert "<table" in res._repr_html_()


# --------------------------------------------------------------------------- telemetry


def _node_frame(times_by_host, fn, scope="node"):
    rows = []
    for host, t in times_by_host.items():
        rows.append(pd.DataFrame({"timestamp": T0 + pd.to_timedelta(t, unit="s"),
                                  "host": host, "scope": scope, "power_w": fn(t)}))
    return conform(pd.concat(rows, ignore_index=True))


def truth(t):
    return 5000.0 + 800.0 * np.sin(2 * np.pi * t / 120.0)


def test_irregular_telemetry_is_interpolated_per_device_and_summed():
    rng = np.random.default_rng(7)
    # readings about every 0.9 s, each +-0.3 s off its slot, different per node
    times = {f"n{i}": np.arange(0, 1200, 0.9) + rng.uniform(-0.3, 0.3, 1334)
             for i in range(4)}
    tr = trace_from_telemetry(_node_frame(times, truth), tick_s=0.5)
    assert 0.8 < tr.native_interval_s < 1.0 and tr.tick_s == 0.5
    t_grid = (tr.times() - T0).total_seconds().to_numpy()
    assert t_grid[0] >= max(t.min() for t in times.values())       # no extrapolation
    assert t_grid[-1] <= min(t.max() for t in times.values())
    np.testing.assert_allclose(tr.it_w, 4 * truth(t_grid), rtol=2e-3)
    assert tr.facility_w is None and "linearly interpolated" in tr.description
    tr2 = trace_from_telemetry(_node_frame(times, truth), tick_s=0.5, pue=1.3,
                               base_load_w=1e4)
    np.testing.assert_allclose(tr2.facility_w, tr2.it_w * 1.3 + 1e4)


def test_node_rows_are_preferred_over_gpu_rows():
    t = np.arange(0, 300, 1.0)
    node = _node_frame({"n0": t}, lambda t: np.full(len(t), 6000.0))
    gpu = _node_frame({"n0": t}, lambda t: np.full(len(t), 600.0), scope="gpu")
    gpu["gpu_index"] = pd.array([0] * len(gpu), dtype="Int16")
    tr = trace_from_telemetry(pd.concat([node, gpu], ignore_index=True))
    assert np.allclose(tr.it_w, 6000.0)
    assert np.allclose(trace_from_telemetry(gpu).it_w, 600.0)


@pytest.mark.bad_input("requirements")
def test_a_gap_in_one_device_is_refused_not_read_as_a_load_drop():
    t = np.arange(0, 600, 1.0)
    times = {"n0": t, "n1": np.concatenate([t[:200], t[260:]])}
    with pytest.raises(AnalysisError, match=r"n1.*no reading for 61 s"):
        trace_from_telemetry(_node_frame(times, truth))
    ok = trace_from_telemetry(_node_frame(times, truth), end=T0 + pd.Timedelta(seconds=190))
    assert ok.duration_s >= 180


@pytest.mark.bad_input("requirements")
def test_facility_spec_on_it_telemetry_needs_a_pue():
    t = np.arange(0, 600, 1.0)
    spec = spec_of({"kind": "step", "within_s": 1, "limit": 5, "unit": "MW"})
    with pytest.raises(PowerlabError, match="needs a PUE"):
        comply(_node_frame({"n0": t}, truth), spec)
    assert comply(_node_frame({"n0": t}, truth), spec, pue=1.2).passed


# --------------------------------------------------------------------------- scenario


SCENARIO = """
name: failures
horizon: {start_utc: "2025-06-02T12:10:00Z", end_utc: "2025-06-02T12:20:00Z"}
site: {pue: 1.2, cooling_time_constant_s: 0, electrical_loss_fraction: 0}  # facility = IT x PUE at every tick
hardware: {gpu_idle_w: 75, gpu_compute_w: 650, gpu_comm_w: 250, gpu_tdp_w: 700,
           node_overhead_w: 0, gpu_rise_time_constant_s: 0, gpu_fall_time_constant_s: 0}
jobs:
  - name: j
    gpus: 64
    start_utc: "2025-06-02T12:00:00Z"
    duration_s: 7200
    step_time_s: 2.0
    compute_fraction: 0.5
    failures: {rate_per_gpu_h: 0.065, restart_s: 60}
"""


def test_monte_carlo_exceedance_is_the_share_of_draws_with_a_failure():
    """Stepping swings 400 W/GPU; a failure drops a GPU from 650 W to idle (575 W): a
    10-s deviation limit between the two fails exactly the draws with a failure."""
    scen = parse_scenario(SCENARIO)
    limit_mw = 64 * 500 * 1.2 / 1e6
    spec = spec_of({"kind": "deviation", "window_s": 10, "limit": limit_mw, "unit": "MW"},
                   deviation_rule="separate_limit")
    res = comply(scen, spec, draws=12, seed=1)
    from powerlab.site.engine import forecast

    fc = forecast(scen, draws=12, seed=1)
    failed = set(fc.events.loc[fc.events["event"] == "failure", "draw"])
    assert 0 < len(failed) < 12                         # both cases occur
    vals = res.draw_values["r"].to_numpy()
    expect = np.where(np.isin(np.arange(12), list(failed)), 64 * 575 * 1.2,
                      64 * 400 * 1.2) / 1e6
    np.testing.assert_allclose(vals, expect, rtol=1e-9)
    row = res.summary_frame().iloc[0]
    assert row["exceed_probability"] == pytest.approx(len(failed) / 12)
    assert row["verdict"] == "fail" and res.trace.draw == 0


def test_for_each_draw_hands_out_each_draws_series():
    scen = parse_scenario(SCENARIO)
    from powerlab.site.engine import forecast

    fc = forecast(scen, draws=3, seed=2)
    seen = []

    def fn(dp):
        seen.append(dp.draw)
        assert not dp.it_w.flags.writeable
        np.testing.assert_array_equal(dp.facility_w, fc.power_w("facility")[dp.draw])
        np.testing.assert_array_equal(dp.it_w, fc.it_w[dp.draw])
        assert dp.start_utc == fc.start_utc and dp.tick_s == fc.tick_s
        assert set(dp.events["draw"]) <= {dp.draw}
        return {"peak": float(dp.facility_w.max())}

    out = for_each_draw(scen, fn, draws=3, seed=2)
    assert seen == [0, 1, 2] and list(out.index) == [0, 1, 2]
    np.testing.assert_allclose(out["peak"], fc.power_w("facility").max(axis=1))


# --------------------------------------------------------------------------- command


def test_comply_cli_exit_codes(tmp_path, capsys):
    t = np.arange(0, 900, 1.0)
    frame = _node_frame({"n0": t, "n1": t + 0.3}, truth)
    pq = tmp_path / "t.parquet"
    frame.to_parquet(pq)
    loose = tmp_path / "loose.yaml"
    loose.write_text("name: l\nboundary: it\nrequirements:\n  - {name: s, kind: step, "
                     "within_s: 1, limit: 1, unit: MW, source: t, illustrative: true}\n")
    tight = tmp_path / "tight.yaml"
    tight.write_text(loose.read_text().replace("limit: 1,", "limit: 0.00001,"))
    assert cli.main(["comply", str(pq), "--requirements", str(loose), "--out",
                     str(tmp_path / "a"), "--quiet"]) == 0
    assert cli.main(["comply", str(pq), "--requirements", str(tight), "--out",
                     str(tmp_path / "b"), "--quiet"]) == 1
    assert pd.read_csv(tmp_path / "b" / "compliance.csv").loc[0, "verdict"] == "fail"
    # the real process: exit status 1 and no error output
    r = subprocess.run([sys.executable, "-m", "powerlab.cli", "comply", str(pq),
                        "--requirements", str(tight), "--out", str(tmp_path / "c"),
                        "--quiet"], check=False, capture_output=True, text=True,
                       cwd=REPO)
    assert r.returncode == 1 and r.stderr == "" and "compliance.csv" in r.stdout


@pytest.mark.parametrize("argv,words", [
    pytest.param(["--draws", "0"], "--draws: 0 is outside 1 to 10000",
                 marks=pytest.mark.bad_input("cli")),
    pytest.param(["--pue", "1.2"], "apply to measured telemetry",
                 marks=pytest.mark.bad_input("cli")),
    pytest.param(["--sags", "/nonexistent/sags.csv"], "no such file",
                 marks=pytest.mark.bad_input("cli")),
])
def test_comply_cli_bad_options(argv, words, tmp_path, capsys):
    rc = cli.main(["comply", str(REPO / "data/scenarios/small.yaml"), "--requirements",
                   str(REPO / "data/requirements/small_site_example.yaml"), "--out",
                   str(tmp_path / "o"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1


def test_a_store_folder_is_read_like_a_frame(tmp_path):
    from powerlab.telemetry.store import write_store

    t = np.arange(0, 600, 1.0)
    frame = _node_frame({"n0": t, "n1": t + 0.5}, truth)
    write_store(frame, tmp_path / "store", fsync=False)
    spec = spec_of({"kind": "deviation", "window_s": 10, "limit": 1, "unit": "MW"},
                   boundary="it", deviation_rule="separate_limit")
    a = comply(tmp_path / "store", spec)
    b = comply(frame, spec)
    assert a.draw_values.equals(b.draw_values) and a.passed
    assert "2 node-scope devices" in a.description


@pytest.mark.parametrize("case", [
    pytest.param("naive", marks=pytest.mark.bad_input("requirements")),
    pytest.param("naive_start", marks=pytest.mark.bad_input("requirements")),
    pytest.param("out_under_file", marks=pytest.mark.bad_input("requirements")),
])
def test_bad_telemetry_and_outputs_are_refused_cleanly(case, tmp_path):
    t = np.arange(0, 600, 1.0)
    frame = _node_frame({"n0": t}, truth)
    spec = spec_of({"kind": "step", "within_s": 1, "limit": 5, "unit": "MW"}, boundary="it")
    if case == "naive":
        frame["timestamp"] = frame["timestamp"].dt.tz_localize(None)
        with pytest.raises(PowerlabError, match="tz-aware"):
            comply(frame, spec)
    elif case == "naive_start":
        with pytest.raises(PowerlabError, match="no time zone"):
            comply(frame, spec, start="2025-06-01T00:01:00")
    else:
        (tmp_path / "f").write_text("x")
        with pytest.raises(PowerlabError, match="cannot create the output folder"):
            comply(frame, spec).write(tmp_path / "f" / "out")


def test_each_band_reads_its_own_line_through_its_own_filter():
    t = np.arange(0, 900, 0.02)
    x = 20 * MW + 0.6 * MW * np.sin(2 * np.pi * 0.73 * t) + 0.2 * MW * np.sin(
        2 * np.pi * 4.1 * t)
    spec = parse_requirements({"name": "b", "requirements": [
        {"name": n, "kind": "oscillation", "band_hz": b, "measure": "rms", "limit": 1,
         "unit": "MW", "source": "t", "illustrative": True}
        for n, b in (("low", [0.1, 2]), ("high", [3, 30]))]})
    vals = Compliance(spec).evaluate(trace(x, tick=0.02))
    assert vals["low"] == pytest.approx(0.6 / math.sqrt(2), rel=0.01)
    assert vals["high"] == pytest.approx(0.2 / math.sqrt(2), rel=0.01)
    assert vals["high"] == pytest.approx(lm.band_oscillation(x, 0.02, (3, 30)) / MW,
                                         rel=1e-12)


def test_comply_cli_reads_measured_sags(tmp_path, capsys):
    t = np.arange(0, 600, 0.5)
    frame = _node_frame({"n0": t}, lambda t: np.where((t >= 300) & (t < 303), 1e3, 4e4))
    pq = tmp_path / "t.parquet"
    frame.to_parquet(pq)
    sags = tmp_path / "sags.csv"
    sags.write_text("timestamp,duration_s,residual_voltage_pu\n"
                    f"{(T0 + pd.Timedelta(seconds=300)).isoformat()},0.3,0.8\n")
    spec = tmp_path / "rt.yaml"
    spec.write_text("name: rt\nboundary: it\nrequirements:\n  - {name: rt, kind: ride_through, "
                    "residual_voltage_pu: 0.7, sag_duration_s: 0.5, observe_s: 2, limit: 10,"
                    " unit: kW, source: t, illustrative: true}\n")
    args = ["comply", str(pq), "--requirements", str(spec), "--quiet"]
    assert cli.main([*args, "--out", str(tmp_path / "a"), "--sags", str(sags)]) == 1
    row = pd.read_csv(tmp_path / "a" / "compliance.csv").iloc[0]
    assert row["verdict"] == "fail" and row["value"] == pytest.approx(39.0)   # 40 -> 1 kW
    assert cli.main([*args, "--out", str(tmp_path / "b")]) == 1               # no sag given
    row = pd.read_csv(tmp_path / "b" / "compliance.csv").iloc[0]
    assert row["verdict"] == "fail" and math.isnan(row["value"])


def test_a_forecast_already_run_gives_the_same_check_as_its_scenario():
    from powerlab.site.engine import forecast
    from powerlab.site.scenario import read_scenario

    sc = read_scenario(REPO / "data/scenarios/small.yaml")
    spec = parse_requirements((REPO / "data/requirements/small_site_example.yaml").read_text())
    a = comply(sc, spec, draws=2, seed=4)
    b = comply(forecast(sc, draws=3, seed=4), spec, draws=2)     # first 2 of 3 draws
    pd.testing.assert_frame_equal(a.draw_values, b.draw_values)
    assert a.verdicts.equals(b.verdicts) and b.draws == 2
