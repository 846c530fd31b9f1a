"""The one ride-through model: the equipment's response to voltage and frequency events
(powerlab.interconnect.eventresponse), its tables, and the same load loss from the
ride-through table, ``comply --sags`` and ``size-mitigation --sags`` (issue 33 item 5)."""

import math

import numpy as np
import pandas as pd
import pytest
import yaml

from powerlab import cli
from powerlab.interconnect.equipment import SiteEquipment, parse_equipment, with_overrides
from powerlab.interconnect.eventresponse import (
    engine_sag,
    event_response,
    nominal_it_share,
    scenario_with_sags,
)
from powerlab.interconnect.ridethrough import ride_through_table
from powerlab.interconnect.ridethroughtables import frequency_ride_through, voltage_ride_through
from powerlab.site.engine import forecast
from powerlab.site.scenario import read_scenario

SMALL = "data/scenarios/small.yaml"
AT = pd.Timestamp("2025-06-02T12:40:00Z")


@pytest.fixture(scope="module")
def small():
    return read_scenario(SMALL)


@pytest.mark.parametrize("d", [0.001, 0.02, 0.5, 3.0, 30.0])
@pytest.mark.parametrize("ups", ["double_conversion", "standby", "none"])
def test_zero_volts_gives_zero_power_by_construction(d, ups):
    # Physics: P = V * I * cos(phi); at V = 0 no load draws power from the bus, whatever
    # it does inside (supplies on hold-up, UPS on battery, tripped): 0 MW at the POI.
    eq = with_overrides(SiteEquipment(), ups={"topology": ups})
    r = event_response(eq, residual_voltage_pu=0.0, duration_s=d, it_share=0.75)
    assert r.p_during_pu == 0.0 and r.q_during_pu == 0.0
    assert r.ceased_pu + r.tripped_pu == pytest.approx(1.0)


def test_zero_volts_in_the_engine_is_zero_megawatts(small):
    eq = SiteEquipment()
    share = nominal_it_share(small)
    sag = engine_sag(event_response(eq, residual_voltage_pu=0.0, duration_s=0.5,
                                    it_share=share), AT, eq=eq, it_share=share)
    sc = small.replace(horizon_start_utc=AT - pd.Timedelta(seconds=60),
                       horizon_end_utc=AT + pd.Timedelta(seconds=60), disturbances=(sag,))
    res = forecast(sc, draws=2, seed=1)
    a = round(60 / res.tick_s)
    fac = res.power_w("facility")
    assert (fac[:, a:a + 5] == 0.0).all()            # exactly 0 W during the sag
    assert (fac[:, a - 1] > 0).all()


def test_psu_holdup_against_itic_20ms():
    # ITIC curve (ITI 2000): 0 V for 20 ms is in the no-interruption region.  Intel CRPS:
    # hold-up >= 10 ms at 100 % load; at 50 % load the capacitor lasts 2x: 20 ms.
    eq = parse_equipment({"ups": {"topology": "none"},
                          "psu": {"holdup_s": 0.010, "loading": 0.5}})
    assert event_response(eq, residual_voltage_pu=0.0, duration_s=0.020,
                          it_share=1.0).tripped_pu == 0.0
    r = event_response(eq, residual_voltage_pu=0.0, duration_s=0.021, it_share=1.0)
    assert r.tripped_pu == 1.0 and r.restart_s == pytest.approx(0.021 + 300.0)
    # SEMI F47: 50 % for 200 ms.  PSUs at constant power need 1/1.4 = 0.714 pu; at 0.5 pu
    # the capacitor covers 1 - 0.5/0.714 = 30 % of the power: 20 ms / 0.3 = 66.7 ms.
    assert eq.psu.dropout_s(0.5) == pytest.approx(0.020 / 0.3)


def test_ups_break_longer_than_holdup_trips_and_vfi_does_not():
    # IEC 62040-3: VFI (double conversion) transfers without a break; a VFD (standby) UPS
    # breaks for its transfer time; a break longer than the PSU hold-up drops the servers.
    vfd = parse_equipment({"ups": {"topology": "standby", "transfer_time_s": 0.03}})
    vfi = parse_equipment({"ups": {"topology": "double_conversion"}})
    assert event_response(vfd, residual_voltage_pu=0.6, duration_s=0.2,
                          it_share=1.0).it_tripped == 1.0
    r = event_response(vfi, residual_voltage_pu=0.6, duration_s=0.2, it_share=1.0)
    assert r.it_tripped == 0.0 and r.ups_on_battery == 1.0
    assert r.ramp_back_pu_per_s == pytest.approx(1.0 / vfi.ups.walk_in_s)


def test_protection_and_frequency():
    eq = SiteEquipment()
    r = event_response(eq, residual_voltage_pu=0.3, duration_s=3.0, it_share=0.8)
    assert r.protection_trip and "27 undervoltage" in r.reasons[0]
    f = event_response(eq, frequency_deviation_hz=-3.5, duration_s=1.0, it_share=0.8)
    assert f.protection_trip and "81U" in f.reasons[0]
    ok = event_response(eq, frequency_deviation_hz=-1.5, duration_s=600.0, it_share=0.8)
    assert ok.tripped_pu == 0.0 and ok.p_during_pu == 1.0
    # no relay, no UPS: PSUs accept 47-63 Hz (CRPS); 46 Hz shuts them down
    bare = parse_equipment({"ups": {"topology": "none"},
                            "protection": {"underfrequency_hz": 0.0}})
    assert event_response(bare, frequency_deviation_hz=-14.0, duration_s=0.1,
                          it_share=1.0).it_tripped == 1.0


def test_tables_shape_and_sign():
    v = voltage_ride_through(SiteEquipment(), 20e6, 0.8)
    assert len(v) == 36 and (v.loc[v["residual_voltage_pu"] == 0, "p_during_megawatts"]
                             == 0).all()
    tot = v["ceased_megawatts"] + v["tripped_megawatts"] + v["p_during_megawatts"]
    assert np.allclose(tot, 20.0)
    f = frequency_ride_through(SiteEquipment(), 20e6, 0.8)
    assert set(f["frequency_hz"]) == {56.5, 57.5, 58.5, 59.5, 60.5, 61.5, 62.5}
    assert f.loc[f["frequency_hz"] == 59.5, "rides_through"].all()


def test_no_effect_reads_zero_exactly_with_the_equipment_model(small):
    rt = ride_through_table(small, AT, residual_voltages_pu=(0.95,), durations_s=(1.0,),
                            draws=2, follow_s=200.0)
    row = rt.iloc[0]
    assert rt.attrs["model"] == "equipment"
    assert row["load_lost_megawatts_during_sag_max"] == 0.0
    assert row["load_lost_megawatts_after_sag_max"] == 0.0 and row["recovery_s_max"] == 0.0


def _window_scenario(tmp_path, follow_s):
    d = yaml.safe_load(open(SMALL))
    d["horizon"] = {"start_utc": (AT - pd.Timedelta(seconds=120)).isoformat(),
                    "end_utc": (AT + pd.Timedelta(seconds=1.0 + follow_s + 60)).isoformat()}
    p = tmp_path / "w.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


@pytest.mark.parametrize("v", [0.0, 0.6])
def test_same_sag_same_loss_in_table_and_comply(tmp_path, small, v):
    follow = 200.0
    rt = ride_through_table(small, AT, residual_voltages_pu=(v,), durations_s=(1.0,),
                            draws=2, seed=0, follow_s=follow).iloc[0]
    table_mw = max(rt["load_lost_megawatts_during_sag_max"],
                   rt["load_lost_megawatts_after_sag_max"])
    scen = _window_scenario(tmp_path, follow)
    sags = tmp_path / "sags.csv"
    sags.write_text(f"timestamp,duration_s,residual_voltage_pu\n{AT.isoformat()},1.0,{v}\n")
    spec = tmp_path / "rt.yaml"
    spec.write_text("name: rt\nboundary: facility\nrequirements:\n  - {name: rt, kind: "
                    "ride_through, residual_voltage_pu: 0.0, sag_duration_s: 2.0, observe_s: "
                    "1, limit: 0.001, unit: MW, source: t, illustrative: true}\n")
    out = tmp_path / "c"
    assert cli.main(["comply", str(scen), "--requirements", str(spec), "--draws", "2",
                     "--out", str(out), "--sags", str(sags), "--quiet"]) == 1
    row = pd.read_csv(out / "compliance.csv").iloc[0]
    assert row["value"] == pytest.approx(table_mw, rel=1e-5)   # CSV: 6 digits
    # the scenario's own sags give the same (scenario_with_sags is what --sags does)
    sc2 = scenario_with_sags(read_scenario(scen), pd.read_csv(sags))
    assert len(sc2.disturbances) == 1 and sc2.disturbances[0].residual_voltage_pu == v
    assert not math.isnan(table_mw) and table_mw > 0.1


def test_comply_prints_the_supply_trip_assumption(tmp_path, capsys):
    scen = _window_scenario(tmp_path, 200.0)
    sags = tmp_path / "sags.csv"
    sags.write_text(f"timestamp,duration_s,residual_voltage_pu\n{AT.isoformat()},0.5,0.5\n")
    spec = tmp_path / "rt.yaml"
    spec.write_text("name: rt\nboundary: facility\nrequirements:\n  - {name: rt, kind: "
                    "ride_through, residual_voltage_pu: 0.0, sag_duration_s: 2.0, observe_s: "
                    "1, limit: 100, unit: MW, source: t, illustrative: true}\n")
    cli.main(["comply", str(scen), "--requirements", str(spec), "--draws", "1",
              "--out", str(tmp_path / "o"), "--sags", str(sags)])
    text = capsys.readouterr().out
    assert "supplies trip per the equipment model" in text and "hold-up 12 ms" in text


@pytest.mark.parametrize("v", [0.0, 0.6])
def test_size_mitigation_sees_the_same_loss_as_comply(tmp_path, v):
    # size-mitigation evaluates options on per-job series (SiteModel); the unmitigated
    # site must show the load loss comply shows for the same simulated sag
    from powerlab.interconnect.compliance import Compliance, comply
    from powerlab.interconnect.searchspace import MitigationOption
    from powerlab.interconnect.sitemodel import SiteModel
    from powerlab.limits.requirements import parse_requirements

    sc = scenario_with_sags(read_scenario(SMALL), pd.DataFrame(
        {"timestamp": [AT], "duration_s": [1.0], "residual_voltage_pu": [v]}))
    spec = parse_requirements({"name": "rt", "boundary": "facility", "requirements": [
        {"name": "rt", "kind": "ride_through", "residual_voltage_pu": 0.0,
         "sag_duration_s": 2.0, "observe_s": 1, "limit": 0.001, "unit": "MW",
         "source": "t", "illustrative": True}]})
    ref = comply(sc, spec, draws=2, seed=0).draw_values["rt"].to_numpy()
    model = SiteModel.build(sc, draws=2, seed=0, tick_s=None, filler=False)
    got = [Compliance(spec).evaluate(model.trace(MitigationOption(), d, 0.0)[0])["rt"]
           for d in range(2)]
    assert np.allclose(got, ref, rtol=1e-6) and (ref > 0.1).all()


def test_frequency_settings_follow_the_nominal_frequency():
    # 81U/81O defaults 0.95 and 1.03 of nominal: 57.0/61.8 Hz at 60 Hz (PRC-024's no-trip
    # edges), 47.5/51.5 Hz at 50 Hz; the table's deviations scale by 50/60
    eq50 = parse_equipment({"poi": {"frequency_hz": 50.0}})
    assert eq50.protection.frequency_band_hz(50.0) == pytest.approx((47.5, 51.5))
    f = frequency_ride_through(eq50, 20e6, 0.8)
    assert f["frequency_hz"].min() == pytest.approx(50 - 3.5 * 50 / 60)
    mild = f[f["deviation_hz"].abs() < 1.5]
    assert mild["rides_through"].all()
