"""Ride-through parameters fitted to a record (powerlab.interconnect.ridethroughfit),
scored on records built from the equipment model with a known answer (no measured
disturbance record is bundled)."""

import math

import numpy as np
import pytest

from powerlab.exceptions import AnalysisError
from powerlab.interconnect.equipment import SiteEquipment
from powerlab.interconnect.eventresponse import event_response
from powerlab.interconnect.ridethroughfit import fit_sag_record


def _record(resp, eq, tick, p0=20e6, noise=0.0, seed=0, pre=5.0, follow=40.0):
    """Power through the sag as the model says: p_during during, p_after just after,
    the UPS share back after its delay over its walk-in, the tripped share absent."""
    n_pre, n_sag = round(pre / tick), round(resp.duration_s / tick)
    t_after = np.arange(round(follow / tick)) * tick
    back = resp.ramp_back_pu_per_s * np.clip(t_after - resp.return_delay_s, 0.0,
                                             resp.return_s if resp.return_s else 0.0)
    y = np.concatenate([np.ones(n_pre), np.full(n_sag, resp.p_during_pu),
                        resp.p_after_pu + back])
    rng = np.random.default_rng(seed)
    return p0 * y * (1 + noise * rng.standard_normal(len(y))), n_pre


@pytest.mark.parametrize("tick", [0.01, 0.1])
def test_fit_recovers_the_models_answer(tick):
    eq = SiteEquipment()
    r = event_response(eq, residual_voltage_pu=0.7, duration_s=1.0, it_share=0.75)
    x, a = _record(r, eq, tick)
    f = fit_sag_record(x, tick, a, 1.0)
    assert f.p_before_w == pytest.approx(20e6)
    assert f.p_during_pu == pytest.approx(r.p_during_pu, abs=1e-9)
    assert f.tripped_pu == pytest.approx(r.tripped_pu, abs=1e-9)
    assert f.ceased_pu == pytest.approx(r.ceased_pu, abs=1e-9)
    assert f.return_delay_s == pytest.approx(eq.ups.return_delay_s, abs=2 * tick + 0.1)
    assert f.return_s == pytest.approx(eq.ups.walk_in_s, abs=2 * tick + 0.2)
    assert f.rms_pu < 0.1 * f.flat_rms_pu


def test_fit_with_noise_and_a_trip():
    eq = SiteEquipment()
    r = event_response(eq, residual_voltage_pu=0.5, duration_s=1.0, it_share=0.75)
    assert r.tripped_pu > 0                       # the cooling drives drop out
    x, a = _record(r, eq, 0.05, noise=0.01, seed=3)
    f = fit_sag_record(x, 0.05, a, 1.0)
    assert f.tripped_pu == pytest.approx(r.tripped_pu, abs=0.01)
    assert f.return_s == pytest.approx(eq.ups.walk_in_s, rel=0.1)


def test_null_record_fits_nothing():
    rng = np.random.default_rng(1)
    x = 20e6 * (1 + 0.002 * rng.standard_normal(4000))
    f = fit_sag_record(x, 0.01, 1000, 0.5)
    assert abs(f.p_during_pu - 1) < 0.01 and f.tripped_pu < 0.01 and f.ceased_pu < 0.01
    with pytest.raises(AnalysisError, match="before the sag"):
        fit_sag_record(x, 0.01, 10, 0.5)
    assert math.isfinite(f.rms_pu)


def test_comply_prints_the_fit_for_measured_sags(tmp_path, capsys):
    import pandas as pd

    from powerlab import cli
    from powerlab.telemetry.schema import conform

    t0 = pd.Timestamp("2025-06-01T00:00:00Z")
    t = np.arange(0, 120, 0.1)
    # a measured node: 40 kW, a 1-s sag at 60 s takes 75 % off, back after 1 s over 10 s
    p = 40e3 * np.where(t < 60, 1.0, np.where(t < 61, 0.25, 0.25 + 0.75 * np.clip(
        (t - 62) / 10, 0, 1)))
    frame = conform(pd.DataFrame({"timestamp": t0 + pd.to_timedelta(t, unit="s"),
                                  "host": "n0", "scope": "node", "power_w": p}))
    pq = tmp_path / "m.parquet"
    frame.to_parquet(pq)
    sags = tmp_path / "s.csv"
    sags.write_text(f"timestamp,duration_s,residual_voltage_pu\n"
                    f"{(t0 + pd.Timedelta(seconds=60)).isoformat()},1.0,0.7\n")
    spec = tmp_path / "rt.yaml"
    spec.write_text("name: rt\nboundary: it\nrequirements:\n  - {name: rt, kind: ride_through,"
                    " residual_voltage_pu: 0.5, sag_duration_s: 2, observe_s: 1, limit: 100,"
                    " unit: kW, source: t, illustrative: true}\n")
    cli.main(["comply", str(pq), "--requirements", str(spec), "--out", str(tmp_path / "o"),
              "--sags", str(sags)])
    out = capsys.readouterr().out
    assert "fitted to the measured record" in out and "during 0.25" in out
    assert "return after 1 s over 10 s" in out or "over 10" in out
    assert "second before the sag" in out          # the baseline is named
