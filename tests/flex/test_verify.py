"""Measurement and verification (powerlab.flex.verify) on site power with a known
curtailment, and the ``powerlab flex`` command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.cli import main
from powerlab.exceptions import AnalysisError
from powerlab.flex import verify_event

REPO = Path(__file__).resolve().parents[2]
EV = pd.DataFrame({"start_utc": [pd.Timestamp("2025-07-15T14:00Z")],
                   "end_utc": [pd.Timestamp("2025-07-15T17:00Z")], "cap_w": [11e6]})


def _site(seed: int, days: int = 15) -> pd.Series:
    """Site power [W] per minute: a daily cycle, a level per day and minute noise."""
    rng = np.random.default_rng(seed)
    idx = pd.date_range("2025-07-01", periods=days * 1440, freq="1min", tz="UTC")
    h = idx.hour + idx.minute / 60
    return pd.Series(14e6 + 1e6 * np.sin(2 * np.pi * h / 24)
                     + np.repeat(rng.normal(0, 2e5, days), 1440)
                     + rng.normal(0, 2e5, len(idx)), index=idx)


def _curtail(p: pd.Series, shed_w: float) -> pd.Series:
    q = p.copy()
    m = (q.index >= EV["start_utc"][0]) & (q.index < EV["end_utc"][0])
    q[m] -= shed_w
    return q


@pytest.mark.parametrize("shed_w", [3e6, 0.0])
def test_high_10_of_10_band_covers_the_true_credit(shed_w):
    """Credited MW = baseline - measured; the true credit is the uncurtailed site's mean
    over the window minus the measured mean.  The 90 % prediction band of the 10-in-10
    baseline covers it in most of 20 independent sites, with a curtailment (3 MW) and
    without one (the null case: 0 MW credited)."""
    cover = 0
    for seed in range(20):
        p = _site(seed)
        m = (p.index >= EV["start_utc"][0]) & (p.index < EV["end_utc"][0])
        true = p[m].mean() / 1e6 - _curtail(p, shed_w)[m].mean() / 1e6
        assert np.isclose(true, shed_w / 1e6)
        v = verify_event(_curtail(p, shed_w), EV, methods=["high_10_of_10"]).frame.iloc[0]
        cover += v["credited_megawatts_lower"] <= true <= v["credited_megawatts_upper"]
        assert v["days"].count(" ") == 9                  # ten similar days
    assert cover >= 16


def test_methods_and_similar_day_rules():
    p = _curtail(_site(1), 3e6)
    v = verify_event(p, EV, methods=["high_10_of_10", "high_4_of_5", "pre_event_mean"])
    f = v.frame
    assert list(f["method"]) == ["high_10_of_10", "high_4_of_5", "pre_event_mean"]
    assert (abs(f["credited_megawatts"] - 3.0) < 1.0).all()
    assert f["cap_met"].all()
    # 2025-07-15 is a Tuesday: its similar days are weekdays only
    days = pd.to_datetime(f["days"].iloc[0].split())
    assert (days.day_of_week < 5).all() and len(days) == 10
    with pytest.raises(AnalysisError, match="similar days"):
        verify_event(p[p.index >= "2025-07-09"], EV, methods=["high_10_of_10"])
    assert "high 10" not in v.summary() and "high_10_of_10" in v.summary()


def test_cli_verify_offer_plan(tmp_path, capsys):
    p = _curtail(_site(2), 3e6)
    meter = tmp_path / "meter.csv"
    pd.DataFrame({"timestamp": p.index.strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "power_megawatts": p.to_numpy() / 1e6}).to_csv(meter, index=False)
    ev = tmp_path / "ev.csv"
    ev.write_text("start_utc,end_utc,cap_megawatts\n2025-07-15T14:00Z,2025-07-15T17:00Z,11\n")
    assert main(["flex", "verify", str(meter), "--event", str(ev), "--out",
                 str(tmp_path / "v")]) == 0
    out = pd.read_csv(tmp_path / "v/verification.csv")
    assert set(out["method"]) == {"high_10_of_10", "pre_event_mean"}
    sc = str(REPO / "data/scenarios/llama3_16k_h100.yaml")
    req = str(REPO / "data/requirements/ercot_large_load_illustrative.yaml")
    tg = tmp_path / "t.json"
    tg.write_text(json.dumps({
        "programID": "p", "eventName": "e",
        "payloadDescriptors": [{"payloadType": "IMPORT_CAPACITY_LIMIT", "units": "MW"}],
        "intervalPeriod": {"start": "2025-07-01T06:00:00Z", "duration": "PT5M"},
        "intervals": [{"id": 0, "payloads": [{"type": "IMPORT_CAPACITY_LIMIT",
                                              "values": [11.0]}]}]}))
    assert main(["flex", "plan", sc, "--target", str(tg), "--requirements", req, "--out",
                 str(tmp_path / "p"), "--draws", "2", "--quiet"]) == 0
    t = pd.read_csv(tmp_path / "p/plan_targets.csv")
    assert len(t) == 1 and bool(t["met"].iloc[0])
    late = tmp_path / "late.csv"
    late.write_text("start_utc,end_utc,cap_megawatts,notice_utc\n"
                    "2025-07-01T06:00Z,2025-07-01T06:10Z,9.5,2025-07-01T06:00Z\n")
    assert main(["flex", "plan", sc, "--target", str(late), "--requirements", req,
                 "--out", str(tmp_path / "p2"), "--draws", "2", "--quiet"]) == 1
    capsys.readouterr()
    bad = tmp_path / "bad.csv"           # below every job paused: cannot be planned
    bad.write_text("start_utc,end_utc,cap_megawatts\n2025-07-01T06:00Z,2025-07-01T06:10Z,1\n")
    assert main(["flex", "plan", sc, "--target", str(bad), "--requirements", req,
                 "--out", str(tmp_path / "p3")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "below the site's floor" in err
    assert main(["flex", "offer", sc, "--out", str(tmp_path / "o"), "--draws", "2",
                 "--quiet"]) == 0
    off = pd.read_csv(tmp_path / "o/flex_offer.csv")
    assert {"shed_megawatts", "ramp_time_s", "hold_max_s", "lever"} <= set(off.columns)
    assert (tmp_path / "o/flex_offer_response.csv").exists()


def test_charts_draw_the_flex_frames():
    pytest.importorskip("altair")
    from powerlab.levers import prior_curve
    from powerlab.viz import flex_curve_chart, flex_offer_chart

    c = prior_curve("H100-SXM", 650.0)
    d = flex_curve_chart(c.summary_frame()).to_dict()
    assert d["layer"][0]["mark"]["type"] == "area"
    rf = pd.DataFrame({"response_s": [5, 30], "duration_s": [3600, 3600],
                       "shed_megawatts": [3.0, 4.0], "shed_pct_of_it": [20.0, 27.0],
                       "lever": ["power_cap"] * 2, "step_rate_loss_pct": [10.0, 20.0]})
    d = flex_offer_chart(rf).to_dict()
    assert d["encoding"]["x"]["scale"]["type"] == "log"


def test_site_power_from_a_telemetry_store(tmp_path):
    """A store's site power is the sum over GPUs of each GPU's mean power per minute."""
    from powerlab.flex import twin_capping_campaign
    from powerlab.flex.verify import read_site_power
    from powerlab.telemetry import write_store

    tel, _ = twin_capping_campaign([700, 400], hours_each=0.5, rounds=1, seed=5)
    write_store(tel, tmp_path / "store")
    s = read_site_power(tmp_path / "store")
    ref = tel.set_index("timestamp").groupby("gpu_uuid")["power_w"].resample("1min").mean() \
        .groupby(level=1).sum()
    common = s.index.intersection(ref.index)
    assert len(common) > 50
    assert np.allclose(s[common], ref[common], rtol=1e-9)


def test_forecast_counterfactual_credits_a_known_shed():
    """The forecast counterfactual (the engine's draws without the event) credits a site
    whose measured power is another realisation of the same scenario (another seed) less
    a known 0.2 MW over the event: the credit's band covers 0.2 MW."""
    from powerlab.site import read_scenario
    from powerlab.site.engine import forecast

    sc = read_scenario(REPO / "data/scenarios/small.yaml")
    ev = pd.DataFrame({"start_utc": [pd.Timestamp("2025-06-02T12:30Z")],
                       "end_utc": [pd.Timestamp("2025-06-02T13:00Z")], "cap_w": [1e6]})
    other = forecast(sc, draws=1, seed=99, tick_s=1.0)
    meas = pd.Series(other.it_w[0], index=other.times)
    m = (meas.index >= ev["start_utc"][0]) & (meas.index < ev["end_utc"][0])
    meas[m] -= 0.2e6
    v = verify_event(meas.resample("1min").mean(), ev, methods=["forecast_counterfactual"],
                     scenario=sc, draws=20).frame.iloc[0]
    assert v["credited_megawatts_lower"] <= 0.2 <= v["credited_megawatts_upper"]
    assert abs(v["credited_megawatts"] - 0.2) < 0.1
    with pytest.raises(AnalysisError, match="scenario"):
        verify_event(meas.resample("1min").mean(), ev, methods=["forecast_counterfactual"])
    # a meter at the point of interconnection is compared with the forecast facility
    # power (forecast_boundary); against the IT power the same shed would read about
    # -0.13 MW (the losses, cooling and base load counted as load)
    fac = pd.Series(other.power_w("facility")[0], index=other.times)
    fac[m] -= 0.2e6
    credit = {b: verify_event(fac.resample("1min").mean(), ev,
                              methods=["forecast_counterfactual"], scenario=sc, draws=20,
                              forecast_boundary=b).frame.iloc[0]["credited_megawatts"]
              for b in ("facility", "it")}
    assert credit["facility"] == pytest.approx(0.2, abs=0.05)
    assert credit["it"] < 0.0
