"""Grid-study playback files, checked against the rules each tool documents.

PSCAD File Read ("Data File Format" page of the PSCAD help): first line blank or a
comment; whitespace-separated columns; in pre-defined time step mode the first column is
time in seconds and the first row is t = 0; at most 11 columns in all.
PowerFactory measurement file (ElmFile technical reference): first line the number of
variables without time; first column time; blanks, tabs or commas between columns; '.'
as decimal separator; no empty lines; at most 1024 characters a line.
The validators below are written from those rules, not from the writers' code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab import cli
from powerlab.exceptions import PowerlabError
from powerlab.interconnect.gridstudy import playback_frame, write_grid_playback
from powerlab.interconnect.powertrace import PowerTrace
from powerlab.telemetry.schema import conform

REPO = Path(__file__).resolve().parents[2]
T0 = pd.Timestamp("2025-06-01T00:00:00Z")
_NUM = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def check_pscad(text: str, step_s: float) -> np.ndarray:
    lines = text.splitlines()
    assert lines[0].strip() == "" or lines[0].lstrip().startswith("!")
    rows = []
    for ln in lines[1:]:
        assert ln.strip() and not ln.lstrip().startswith("!"), "one header line only"
        fields = ln.split()
        assert all(_NUM.match(f) for f in fields), ln
        rows.append([float(f) for f in fields])
    data = np.array(rows)
    assert 2 <= data.shape[1] <= 11
    assert data[0, 0] == 0.0                                   # TIMEZERO
    dt = np.diff(data[:, 0])
    assert (dt > 0).all() and np.allclose(dt, step_s, rtol=1e-6)
    return data


def check_elmfile(text: str) -> np.ndarray:
    lines = text.split("\n")
    if lines[-1] == "":
        lines = lines[:-1]
    n_var = int(lines[0].strip())
    rows = []
    for ln in lines[1:]:
        assert ln.strip(), "no empty lines"
        assert len(ln) <= 1024
        fields = [f for f in re.split(r"[ \t,]+", ln.strip())]
        assert len(fields) == n_var + 1
        assert all(_NUM.match(f) for f in fields), ln     # '.' decimal, no grouping
        rows.append([float(f) for f in fields])
    data = np.array(rows)
    assert (np.diff(data[:, 0]) > 0).all()
    return data


@pytest.fixture
def ramp_trace():
    t = np.arange(0, 600, 0.1)
    x = 20e6 + 5e6 * np.sin(2 * np.pi * t / 60.0) + 1e4 * t
    return PowerTrace(0, 0.1, T0, x * 0.8, x, description="test\nwith a newline")


@pytest.mark.parametrize("step_s", [0.1, 1.0])
def test_pscad_file_read_format(ramp_trace, tmp_path, step_s):
    p = write_grid_playback(ramp_trace, tmp_path / "p.txt", "pscad", step_s=step_s)
    data = check_pscad(p.read_text(), step_s)
    k = round(step_s / 0.1)
    means = ramp_trace.facility_w.reshape(-1, k).mean(axis=1) / 1e6
    np.testing.assert_allclose(data[:, 1], means, rtol=1e-7)
    assert len(data) == 6000 // k


def test_powerfactory_elmfile_format(ramp_trace, tmp_path):
    p = write_grid_playback(ramp_trace, tmp_path / "pf.txt", "powerfactory", step_s=1.0,
                            boundary="it")
    data = check_elmfile(p.read_text())
    np.testing.assert_allclose(data[:, 1], ramp_trace.it_w.reshape(-1, 10).mean(axis=1)
                               / 1e6, atol=1e-6)
    assert data[0, 0] == 0.0 and np.allclose(np.diff(data[:, 0]), 1.0)


def test_csv_names_units_and_reads_back(ramp_trace, tmp_path):
    p = write_grid_playback(ramp_trace, tmp_path / "p.csv", "csv", step_s=1.0)
    assert p.read_text().startswith("# represents 0-0.5 Hz (Nyquist frequency of 1-s steps)")
    df = pd.read_csv(p, comment="#")
    assert list(df.columns) == ["time_s", "timestamp_utc", "power_megawatts"]
    ts = pd.to_datetime(df["timestamp_utc"], utc=True)
    # stamped at the midpoint of each block's ten samples (0.0 ... 0.9 s -> 0.45 s)
    assert ts.iloc[0] == T0 + pd.Timedelta(seconds=0.45)
    assert (ts.diff().dropna() == pd.Timedelta(seconds=1)).all()
    # the facilities CSV's spreadsheet form (a spreadsheet reads "...T...Z" as text)
    assert df["timestamp_utc"].iloc[0] == "2025-06-01 00:00:00.450000"
    np.testing.assert_allclose(df["power_megawatts"],
                               playback_frame(ramp_trace, step_s=1.0)["power_megawatts"],
                               atol=1e-6)


@pytest.mark.parametrize("step_s,words", [
    pytest.param(0.05, "finer than", marks=pytest.mark.bad_input("requirements")),
    pytest.param(0.25, "whole number of ticks", marks=pytest.mark.bad_input("requirements")),
    pytest.param(400.0, "fewer than two", marks=pytest.mark.bad_input("requirements")),
])
def test_playback_refuses_steps_it_cannot_make(ramp_trace, tmp_path, step_s, words):
    with pytest.raises(PowerlabError, match=words):
        write_grid_playback(ramp_trace, tmp_path / "x.txt", "pscad", step_s=step_s)
    assert not (tmp_path / "x.txt").exists()


@pytest.mark.bad_input("requirements")
def test_it_only_trace_cannot_give_facility_power(tmp_path):
    tr = PowerTrace(0, 1.0, T0, np.ones(100), None)
    with pytest.raises(PowerlabError, match="PUE"):
        write_grid_playback(tr, tmp_path / "x.csv", "csv")
    assert write_grid_playback(tr, tmp_path / "x.csv", "csv", boundary="it").exists()


def test_export_grid_command_from_scenario_and_from_telemetry(tmp_path, capsys):
    scen = REPO / "data/scenarios/small.yaml"
    out = tmp_path / "s.txt"
    assert cli.main(["export-grid", str(scen), "--format", "pscad", "--out", str(out),
                     "--step-s", "1"]) == 0
    data = check_pscad(out.read_text(), 1.0)
    assert len(data) == 7200                       # the two-hour horizon at 1 s
    t = np.arange(0, 600, 2.0)
    frame = conform(pd.concat([pd.DataFrame({
        "timestamp": T0 + pd.to_timedelta(t + 0.1 * h, unit="s"), "host": f"n{h}",
        "scope": "node", "power_w": 5000.0 + 100 * h}) for h in range(3)],
        ignore_index=True))
    pq = tmp_path / "t.parquet"
    frame.to_parquet(pq)
    pf = tmp_path / "m.txt"
    assert cli.main(["export-grid", str(pq), "--format", "powerfactory", "--out", str(pf),
                     "--pue", "1.5", "--step-s", "2"]) == 0
    data = check_elmfile(pf.read_text())
    np.testing.assert_allclose(data[:, 1], (5000 + 5100 + 5200) * 1.5 / 1e6)


@pytest.mark.bad_input("cli")
def test_export_grid_bad_step_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "powerlab.cli", "export-grid",
                        str(REPO / "data/scenarios/small.yaml"), "--format", "csv",
                        "--out", str(tmp_path / "x.csv"), "--step-s", "0.05"],
                       check=False, capture_output=True, text=True,
                       cwd=REPO)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "finer than" in r.stderr
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("argv,words", [
    pytest.param(["--draw", "-1"], "--draw: -1 is outside 0 to 9999",
                 marks=pytest.mark.bad_input("cli")),
    pytest.param(["--pue", "1.2"], "apply to measured telemetry",
                 marks=pytest.mark.bad_input("cli")),
])
def test_export_grid_bad_options(argv, words, tmp_path, capsys):
    rc = cli.main(["export-grid", str(REPO / "data/scenarios/small.yaml"), "--format", "csv",
                   "--out", str(tmp_path / "x.csv"), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1


@pytest.mark.bad_input("cli")
def test_export_grid_unknown_source_kind(tmp_path, capsys):
    src = tmp_path / "power.csv"
    src.write_text("a,b\n1,2\n")
    rc = cli.main(["export-grid", str(src), "--format", "csv", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "powerlab import" in err and len(err.strip().splitlines()) == 1


def _fit(t, y, f_hz):
    """Amplitude and phase of a sine at f_hz fitted by least squares [-], [rad]."""
    a = np.column_stack([np.sin(2 * np.pi * f_hz * t), np.cos(2 * np.pi * f_hz * t),
                         np.ones_like(t)])
    c = np.linalg.lstsq(a, y, rcond=None)[0]
    return float(np.hypot(c[0], c[1])), float(np.arctan2(c[1], c[0]))


def test_exports_keep_1_and_2_hz_and_do_not_lag(tmp_path):
    """Issue 20, item 5: "Grid-study exports default to 1-s block means stamped at the
    block start: 1 and 2 Hz content exports as 0, 0.25-0.5 Hz peak-to-peak x 0.64, 0.5 s
    lag.  Default to the forecast tick; when asked to resample, stamp block midpoints and
    write the band the file can represent into its header."  Known answers: at the
    default step a 1 Hz and a 2 Hz sine of 1 MW each come back at 1 MW and in phase;
    resampled to 1 s, a 0.25 Hz sine comes back with the amplitude of a 10-tick mean,
    sin(pi f K dt) / (K sin(pi f dt)) = 0.9012, and no lag at the midpoint stamps."""
    t = np.arange(0, 120, 0.1)
    x = 20e6 + 1e6 * np.sin(2 * np.pi * 1.0 * t) + 1e6 * np.sin(2 * np.pi * 2.0 * t + 0.3)
    tr = PowerTrace(0, 0.1, T0, x, x)
    p = write_grid_playback(tr, tmp_path / "d.csv", "csv")
    assert "represents 0-5 Hz" in p.read_text().splitlines()[0]
    df = pd.read_csv(p, comment="#")
    ts = (pd.to_datetime(df["timestamp_utc"], utc=True) - T0).dt.total_seconds().to_numpy()
    y = df["power_megawatts"].to_numpy() * 1e6
    for f, ph in ((1.0, 0.0), (2.0, 0.3)):
        amp, phase = _fit(ts, y - 1e6 * np.sin(2 * np.pi * (3 - f) * ts + (0.3 - ph)), f)
        assert amp == pytest.approx(1e6, rel=1e-3) and phase == pytest.approx(ph, abs=1e-3)
    data = check_pscad(write_grid_playback(tr, tmp_path / "d.txt", "pscad").read_text(), 0.1)
    assert len(data) == len(t)                      # every tick, nothing averaged
    # resampled: the 0.25 Hz content keeps the 10-tick mean's gain, with no lag
    slow = 20e6 + 1e6 * np.sin(2 * np.pi * 0.25 * t)
    df = playback_frame(PowerTrace(0, 0.1, T0, slow, slow), step_s=1.0)
    ts = (df["timestamp_utc"] - T0).dt.total_seconds().to_numpy()
    amp, phase = _fit(ts, df["power_megawatts"].to_numpy() * 1e6, 0.25)
    gain = np.sin(np.pi * 0.25 * 1.0) / (10 * np.sin(np.pi * 0.25 * 0.1))
    assert gain == pytest.approx(0.9012, abs=1e-4)
    assert amp == pytest.approx(1e6 * gain, rel=1e-6) and abs(phase) < 1e-6
    head = write_grid_playback(PowerTrace(0, 0.1, T0, slow, slow), tmp_path / "s.txt",
                               "pscad", step_s=1.0).read_text().splitlines()[0]
    assert "represents 0-0.5 Hz" in head and "0.64 of the amplitude at 0.5 Hz" in head
    assert "t = 0 at 2025-06-01T00:00:00.450000+00:00" in head
