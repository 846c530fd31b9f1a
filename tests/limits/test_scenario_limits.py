"""A scenario's ``limits:`` block is read as a requirement spec (issue 26 section 1).

``site.swings.check_limits`` (violation episodes) and the requirement-spec path
(``interconnect.compliance.comply`` on ``limits.scenario_limits.limits_spec``) are one
evaluation (``limits.evaluation.evaluate_power``): on the bundled scenarios they give the
same verdicts and the same numbers, draw by draw.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from powerlab.data import bundled_path
from powerlab.interconnect.compliance import comply
from powerlab.limits.scenario_limits import SCENARIO_LIMITS, Limits, limits_spec
from powerlab.site.engine import forecast
from powerlab.site.scenario import read_scenario
from powerlab.site.swings import check_limits


def _agree(res, limits=None):
    """check_limits against comply on the limits read as a spec; returns both."""
    lim = limits if limits is not None else res.scenario.limits
    spec = limits_spec(lim)
    viol = check_limits(res, limits)
    c = comply(res, spec, draws=res.draws)
    frame = c.summary_frame().set_index("requirement")
    assert len(spec.requirements) > 0
    for r in spec.requirements:
        rows = viol[viol["limit"] == r.name]
        assert (rows["limit_value"] == r.limit).all()
        # verdict: the limit has rows exactly when comply fails it
        assert (frame.loc[r.name, "verdict"] == "fail") == (len(rows) > 0), r.name
        if not frame.loc[r.name, "assessed"]:   # cannot be shown to hold: no value
            assert sorted(rows["draw"]) == list(range(res.draws))
            assert rows["worst"].isna().all()
            continue
        for d in range(res.draws):
            v = float(c.draw_values[r.name].iloc[d])
            got = rows[rows["draw"] == d]
            assert not math.isnan(v)
            if v > r.limit:   # the same number: the largest episode is the draw's value
                assert got["worst"].max() == pytest.approx(v, rel=1e-12), (r.name, d)
            else:
                assert not len(got), (r.name, d)
        if frame.loc[r.name, "verdict"] == "fail" and frame.loc[r.name, "assessed"]:
            assert viol.loc[viol["limit"] == r.name, "worst"].max() == pytest.approx(
                frame.loc[r.name, "value"], rel=1e-12)
    return viol, c


def test_limits_spec_maps_every_key_and_skips_zero():
    lim = Limits(boundary="it", ramp_up_megawatts_per_s=2.0, swing_10s_megawatts=0.3,
                 band_0p1_2hz_megawatts=0.1)
    spec = limits_spec(lim)
    assert spec.boundary == "it" and spec.deviation_rule == "separate_limit"
    assert [r.name for r in spec.requirements] == ["ramp_up", "swing_10s", "band_0p1_2hz"]
    up, sw, band = spec.requirements
    assert (up.kind, up.unit, up.window_s, up.direction, up.limit) == (
        "ramp", "MW/s", 1.0, "up", 2.0)
    assert (sw.kind, sw.unit, sw.window_s) == ("deviation", "MW", 10.0)
    assert (band.kind, band.band_hz, band.measure, band.window_s) == (
        "oscillation", (0.1, 2.0), "rms", 60.0)
    assert all(r.illustrative for r in spec.requirements)
    # every field of Limits but the boundary is a requirement
    fields = {f.name for f in dataclasses.fields(Limits)} - {"boundary"}
    assert fields == set(SCENARIO_LIMITS)
    assert limits_spec(Limits()).requirements == ()


def test_small_scenario_check_limits_equals_requirement_path():
    """small.yaml: 1 MW/s ramps and a 0.3 MW 10-s swing limit; the 10-s swing fails
    (0.54 MW at each job start) in every draw, the ramps hold."""
    res = forecast(read_scenario(bundled_path("scenarios", "small.yaml")), draws=2, seed=0)
    viol, c = _agree(res)
    assert set(c.failed) == {"swing_10s"}
    assert set(viol["limit"]) == {"swing_10s"}


def test_16k_scenario_check_limits_equals_requirement_path():
    """llama3_16k_h100.yaml over its first hour (the job starts at 00:19): 5 MW/s ramps,
    5 MW 1-s swing and 1 MW RMS in 0.1-2 Hz all fail (about 9 MW/s, 9.5 MW, 2.1 MW)."""
    scen = read_scenario(bundled_path("scenarios", "llama3_16k_h100.yaml"))
    scen = dataclasses.replace(scen, horizon_end_utc=scen.horizon_start_utc
                               + pd.Timedelta(hours=1))
    res = forecast(scen, draws=2, seed=0)
    viol, c = _agree(res)
    assert set(c.failed) == {"ramp_up", "ramp_down", "swing_1s", "band_0p1_2hz"}
    # the former check_limits' ramp and swing, by brute force: adjacent 1-s means at every
    # tick boundary, max minus min over every window of 1 s + 1 tick
    w = round(1.0 / res.tick_s)
    for d in range(res.draws):
        x = res.facility_w[d] / 1e6
        means = np.lib.stride_tricks.sliding_window_view(x, w).mean(axis=1)
        ramp = means[w:] - means[:-w]
        win = np.lib.stride_tricks.sliding_window_view(x, w + 1)
        swing = (win.max(axis=1) - win.min(axis=1)).max()
        got = viol[viol["draw"] == d].groupby("limit")["worst"].max()
        assert got["ramp_up"] == pytest.approx(ramp.max(), rel=1e-9)
        assert got["ramp_down"] == pytest.approx(-ramp.min(), rel=1e-9)
        assert got["swing_1s"] == pytest.approx(swing, rel=1e-12)
    band = viol[viol["limit"] == "band_0p1_2hz"]
    # windows, not the whole record: no episode before the job starts
    assert (band["start_utc"] > pd.Timestamp("2025-07-01T00:15Z")).all()
    assert 1.5 < band["worst"].max() < 3.0


def test_limits_the_forecast_cannot_assess_fail_with_no_value():
    """A 2-20 Hz band at a 0.1-s tick is resolved only to 5 Hz: when that part is under
    the limit the band cannot be shown to hold (comply: fail, value NaN; check_limits:
    one row per draw with worst NaN); a 0.3-s tick does not divide the 1-s ramp window."""
    scen = read_scenario(bundled_path("scenarios", "small.yaml"))
    res = forecast(scen, draws=1, seed=0)
    lim = Limits(band_2_20hz_megawatts=1e3, ramp_up_megawatts_per_s=1e3)
    viol, c = _agree(res, lim)
    assert c.failed == ["band_2_20hz"] and c.not_assessed == ["band_2_20hz"]
    assert viol["limit"].tolist() == ["band_2_20hz"] and viol["worst"].isna().all()
    res3 = forecast(dataclasses.replace(scen, tick_s=0.3), draws=1, seed=0)
    viol3, c3 = _agree(res3, Limits(ramp_up_megawatts_per_s=1e3,
                                    swing_60s_megawatts=1e3))
    assert c3.not_assessed == ["ramp_up"] and viol3["limit"].tolist() == ["ramp_up"]
    assert np.isnan(viol3["worst"].iloc[0])


def test_comply_cli_reads_a_scenarios_limits_as_its_spec(tmp_path, capsys):
    """``powerlab comply SCENARIO`` without ``--requirements`` checks the scenario's own
    ``limits:``: the same rows, values and verdicts as check_limits (exit 1: a fail)."""
    from powerlab.cli import main

    small = bundled_path("scenarios", "small.yaml")
    rc = main(["comply", str(small), "--out", str(tmp_path), "--draws", "2", "--quiet"])
    assert rc == 1
    table = pd.read_csv(tmp_path / "compliance.csv").set_index("requirement")
    assert list(table.index) == ["ramp_up", "ramp_down", "swing_10s"]
    assert list(table["verdict"]) == ["pass", "pass", "fail"]
    viol = check_limits(forecast(read_scenario(small), draws=2, seed=0))
    assert table.loc["swing_10s", "value"] == pytest.approx(viol["worst"].max(), rel=1e-5)
