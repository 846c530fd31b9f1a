"""P, Q and V in the playback files (issue 34 item 9): PSCAD, PowerFactory, CSV and
COMTRADE, COMTRADE at the stated nominal frequency with its description in the header."""

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import PowerlabError
from powerlab.interconnect.comtrade import write_comtrade, write_trace_comtrade
from powerlab.interconnect.equipment import parse_equipment, trace_pq, voltage_at_poi_pu
from powerlab.interconnect.gridstudy import playback_frame, write_grid_playback
from powerlab.interconnect.powertrace import PowerTrace

START = pd.Timestamp("2025-07-01T00:00:00Z")
EQ = parse_equipment({"poi": {"short_circuit_mva": 1000.0, "x_over_r": 8.0}})


def _trace(n=200, tick=0.1):
    t = np.arange(n) * tick
    it = 15e6 + 2e6 * np.sin(2 * np.pi * 0.2 * t)
    return PowerTrace(draw=0, tick_s=tick, start_utc=START, it_w=it, facility_w=it * 1.25,
                      description="forecast of scenario 'x, y', draw 0")


def test_pscad_and_powerfactory_carry_p_q_v(tmp_path):
    tr = _trace()
    p, q = trace_pq(tr, EQ)
    v = voltage_at_poi_pu(p, q, EQ.poi)
    ps = write_grid_playback(tr, tmp_path / "a.txt", "pscad", equipment=EQ).read_text()
    head, rows = ps.splitlines()[0], np.loadtxt(tmp_path / "a.txt", comments="!")
    assert "time [s], P [MW], Q [Mvar], V [pu]" in head
    np.testing.assert_allclose(rows[:, 1], p / 1e6, rtol=1e-7)
    np.testing.assert_allclose(rows[:, 2], q / 1e6, rtol=1e-7)
    np.testing.assert_allclose(rows[:, 3], v, rtol=1e-7)
    pf = write_grid_playback(tr, tmp_path / "b.txt", "powerfactory", equipment=EQ)
    lines = pf.read_text().splitlines()
    assert lines[0] == "3" and len(lines[1].split()) == 4       # 3 variables after time
    # without equipment: P only, as before
    assert write_grid_playback(tr, tmp_path / "c.txt", "powerfactory").read_text(
    ).splitlines()[0] == "1"


def test_block_means_of_q_and_v_are_means_of_the_ticks():
    tr = _trace()
    f = playback_frame(tr, step_s=1.0, equipment=EQ)
    p, q = trace_pq(tr, EQ)
    assert f["reactive_power_megavars"].iloc[0] == pytest.approx(q[:10].mean() / 1e6)
    assert {"power_megawatts", "reactive_power_megavars", "voltage_pu"} <= set(f.columns)
    assert "reactive_power_megavars" not in playback_frame(tr, boundary="it",
                                                           equipment=EQ).columns


@pytest.mark.parametrize("f0", [50.0, 60.0])
def test_comtrade_at_the_stated_f0_with_p_q_v(tmp_path, f0):
    # IEEE C37.111-1999 clause 6: the cfg's line after the channels is lf, the nominal
    # line frequency; `--f0-hz 50` must write 50
    r = write_trace_comtrade(_trace(), tmp_path / "r", line_frequency_hz=f0, equipment=EQ)
    cfg = r["cfg"].read_text().splitlines()
    assert cfg[0] == "powerlab,forecast draw 0,1999"     # no description cut into the id
    assert cfg[1] == "4,4A,0D"
    assert [ln.split(",")[1] for ln in cfg[2:6]] == ["P_facility", "Q_facility", "V_POI",
                                                     "P_IT"]
    assert [ln.split(",")[4] for ln in cfg[2:6]] == ["MW", "Mvar", "pu", "MW"]
    assert cfg[6] == f"{f0:g}"
    hdr = r["hdr"].read_text()
    assert "scenario 'x, y', draw 0" in hdr and f"{f0:g} Hz" in hdr   # commas kept there


def test_comtrade_refuses_fields_it_would_have_to_cut(tmp_path):
    with pytest.raises(PowerlabError, match="at most 64"):
        write_comtrade(tmp_path / "r", {"P": [1.0, 2.0]}, 0.1, START, rec_dev_id="x" * 65)
    with pytest.raises(PowerlabError, match="without commas"):
        write_comtrade(tmp_path / "r", {"P": [1.0, 2.0]}, 0.1, START, station_name="a,b")


def test_study_package_writes_f0_into_comtrade(tmp_path):
    from powerlab import cli
    out = tmp_path / "pkg"
    assert cli.main(["study-package", "data/scenarios/small.yaml", "--requirements",
                     "data/requirements/small_site_example.yaml", "--out", str(out),
                     "--draws", "2", "--short-window-s", "30", "--ride-through-draws",
                     "1", "--f0-hz", "50", "--quiet"]) == 0
    cfg = (out / "playback_short_comtrade.cfg").read_text().splitlines()
    n = int(cfg[1].split(",")[0])
    assert cfg[2 + n] == "50"
    assert "Q_facility" in "".join(cfg)
    assert (out / "perc1.dyd").is_file() and (out / "data_list.csv").is_file()
    assert (out / "frequency_ride_through.csv").is_file()
    page = (out / "study_package.html").read_text()
    assert "Voltage ride-through" in page and "PERC1 parameters" in page
