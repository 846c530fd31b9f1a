"""Tests of powerlab.site.export, export_reader and export_workbook (the facilities CSV,
its reader and the workbook) and the ``powerlab forecast`` command."""

import csv as stdcsv
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from powerlab.cli import main
from powerlab.exceptions import ParseError, PowerlabError
from powerlab.site.engine import forecast
from powerlab.site.export import (
    DECIMALS,
    facilities_columns,
    facilities_frame,
    sanitize_cell,
    write_facilities_csv,
)
from powerlab.site.export_reader import read_facilities_csv
from powerlab.site.scenario import parse_scenario, read_scenario

SCEN = Path(__file__).parents[2] / "data" / "scenarios"
TZ = "America/New_York"  # small.yaml's site
LOCAL = "interval_start_local_America__New_York"   # no '/' in a column name


@pytest.fixture(scope="module")
def result():
    return forecast(read_scenario(SCEN / "small.yaml"), draws=3, seed=0)


def _small(**horizon):
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["horizon"].update(horizon)
    return d


def test_columns_times_and_round_trip_at_the_stated_resolution(result, tmp_path):
    csv, side = write_facilities_csv(result, tmp_path / "fc.csv", "15min")
    lines = csv.read_text().splitlines()
    assert lines[0].split(",") == facilities_columns(TZ)
    first = lines[1].split(",")
    # spreadsheet-native times; 12:00 UTC is 08:00 in New York in June (EDT)
    assert first[:4] == ["2025-06-02 12:00:00", "2025-06-02 12:15:00",
                         "2025-06-02 08:00:00", "UTC-04:00"]
    back = read_facilities_csv(csv)
    expect = facilities_frame(result, "15min")
    assert len(back) == len(expect) == 8
    for c in facilities_columns(TZ)[4:-1]:
        dec = DECIMALS["energy" if "energy" in c else "ramp" if "ramp" in c else "power"]
        np.testing.assert_allclose(back[c].to_numpy(), expect[c].to_numpy(),
                                   atol=0.5 * 10 ** -dec + 1e-12, equal_nan=True)
    assert (back["interval_start_utc"] == expect["interval_start_utc"]).all()
    assert (back[LOCAL] == expect[LOCAL]).all()
    assert str(back[LOCAL].dt.tz) == TZ
    # no 17-digit floats, no exponents
    body = "\n".join(lines[1:])
    assert "e+" not in body and "e-" not in body
    for cell in first[4:-1]:
        assert cell == "" or len(cell.split(".")[1]) in (3, 6)
    meta = json.loads(side.read_text())
    assert meta["format_version"] == 3 and meta["time_zone"] == TZ
    assert meta["columns"] == facilities_columns(TZ)
    assert set(meta["units"]) == set(facilities_columns(TZ))
    assert meta["scenario_hash_sha256"] == result.scenario.hash()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fc.csv", "fc.json"]


def test_facility_and_it_side_by_side_energy_and_ramps_against_brute_force(result, tmp_path):
    df = facilities_frame(result, "1min")
    assert len(df) == 120  # one row per interval, not one per scope
    for s in ("facility", "it"):
        x = result.power_w(s)
        # energy per interval adds up to the horizon's energy (mean over draws)
        total = x.sum(axis=1).mean() * result.tick_s / 3.6e9
        assert df[f"{s}_energy_megawatt_hours"].sum() == pytest.approx(total, rel=1e-9)
        assert (df[f"{s}_power_megawatts_min"] <= df[f"{s}_power_megawatts_p10"] + 1e-9).all()
        assert (df[f"{s}_power_megawatts_p10"] <= df[f"{s}_power_megawatts_p90"]).all()
        # 1-s ramp: brute force over every alignment of 1-s blocks (10 ticks)
        best_up = best_down = 0.0
        for d in range(x.shape[0]):
            for off in range(10):
                m = x[d, off:off + (len(x[d]) - off) // 10 * 10].reshape(-1, 10).mean(axis=1)
                dm = np.diff(m) / 1.0
                best_up, best_down = max(best_up, dm.max()), max(best_down, -dm.min())
        assert df[f"{s}_ramp_up_megawatts_per_s_1s_max"].max() == pytest.approx(best_up / 1e6)
        assert df[f"{s}_ramp_down_megawatts_per_s_1s_max"].max() == pytest.approx(
            best_down / 1e6)
    # facility above IT, by at least the base load
    assert (df["facility_power_megawatts_mean"] - df["it_power_megawatts_mean"]
            >= 0.15 - 1e-9).all()


@pytest.mark.parametrize("res,rows", [("1s", 7200), ("5min", 24), ("30min", 4), ("1h", 2)])
def test_all_resolutions(result, tmp_path, res, rows):
    csv, _ = write_facilities_csv(result, tmp_path / "r.csv", res)
    back = read_facilities_csv(csv)
    assert len(back) == rows
    if res == "1s":  # a 1-min ramp is defined at 1-s rows too (its block boundary)
        assert back["facility_ramp_up_megawatts_per_min_1min_max"].notna().mean() > 0.95


def test_clock_alignment_partial_first_row_and_dst(tmp_path):
    # starts at 05:07 UTC on the night New York falls back (06:00 UTC: 02:00 EDT -> 01:00 EST)
    d = _small(start_utc="2025-11-02T05:07:00Z", end_utc="2025-11-02T06:30:00Z")
    d["jobs"] = [dict(d["jobs"][1], start_utc="2025-11-02T05:10:00Z", duration_s=3600)]
    res = forecast(parse_scenario(d), draws=1)
    df = facilities_frame(res, "15min")
    assert list(df["interval_start_utc"].dt.strftime("%H:%M")) == [
        "05:07", "05:15", "05:30", "05:45", "06:00", "06:15"]
    assert (df["interval_end_utc"] - df["interval_start_utc"]).iloc[0] == pd.Timedelta("8min")
    csv, _ = write_facilities_csv(res, tmp_path / "dst.csv", "15min")
    with open(csv, newline="") as fh:
        rows = list(stdcsv.DictReader(fh))
    local = [(r[LOCAL][11:16], r["utc_offset_local"]) for r in rows]
    # 01:15 local appears twice, told apart by the offset
    assert ("01:15", "UTC-04:00") in local and ("01:15", "UTC-05:00") in local


def test_read_by_pandas_without_options_and_by_the_csv_module(result, tmp_path):
    csv, _ = write_facilities_csv(result, tmp_path / "p.csv", "15min")
    df = pd.read_csv(csv)
    for c in facilities_columns(TZ)[4:-1]:
        assert df[c].dtype == np.float64, c
    assert pd.to_datetime(df["interval_start_utc"]).notna().all()
    with open(csv, newline="", encoding="utf-8") as fh:
        rows = list(stdcsv.reader(fh))
    assert rows[0] == facilities_columns(TZ)
    assert all(len(r) == len(rows[0]) for r in rows)
    float(rows[1][4])
    # a sum of a power column does not double count: one row per interval
    assert len(rows) - 1 == len(df) == 8


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("soffice") is None,
                    reason="LibreOffice (Debian package libreoffice-calc) is not installed")
def test_libreoffice_reads_dates_as_dates_and_numbers_as_numbers(result, tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    csv, _ = write_facilities_csv(result, tmp_path / "site.csv", "15min")
    env = dict(os.environ, HOME=str(tmp_path))  # a private LibreOffice profile
    # the import options a user ticks in Calc's Text Import dialog: comma, UTF-8, English
    # (US) number format, "Detect special numbers" (docs/facilities_csv.md)
    subprocess.run(["soffice", "--headless", "--norestore",
                    "--infilter=CSV:44,34,76,1,,1033,false,true", "--convert-to", "xlsx",
                    "--outdir", str(tmp_path), str(csv)], check=True, env=env,
                   capture_output=True, timeout=180)
    ws = openpyxl.load_workbook(tmp_path / "site.xlsx").active
    header = [c.value for c in ws[1]]
    assert header == facilities_columns(TZ)
    row = [c.value for c in ws[2]]
    import datetime as dt
    assert isinstance(row[0], dt.datetime) and row[0] == dt.datetime(2025, 6, 2, 12, 0)
    assert isinstance(row[2], dt.datetime) and row[2] == dt.datetime(2025, 6, 2, 8, 0)
    # the offset stays text (format 2's "-04:00" became a duration of -4 h in Calc)
    assert row[3] == "UTC-04:00"
    assert not any("/" in h for h in header)
    for i, name in enumerate(header):
        if "megawatt" in name and row[i] is not None:
            assert isinstance(row[i], (int, float)), name
    back = read_facilities_csv(csv)
    assert row[header.index("facility_power_megawatts_mean")] == pytest.approx(
        back["facility_power_megawatts_mean"].iloc[0])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("soffice") is None,
                    reason="LibreOffice (Debian package libreoffice-calc) is not installed")
def test_aggregate_and_export_grid_csv_times_read_as_dates_in_libreoffice(tmp_path, capsys):
    """``powerlab aggregate`` and ``powerlab export-grid`` CSVs use the facilities CSV's
    time form: LibreOffice (headless, the Text Import options of docs/facilities_csv.md)
    reads their ``*_utc`` cells as date-times, a fraction of a second included (the
    export-grid rows are stamped at block midpoints, 29.95 s into each minute); no
    column name holds a ``/``."""
    import datetime as dt

    openpyxl = pytest.importorskip("openpyxl")
    from powerlab.telemetry.store import write_store

    from ..conftest import make_telemetry

    tel = make_telemetry()
    write_store(tel, tmp_path / "store", fsync=False)
    agg = tmp_path / "agg.csv"
    assert main(["aggregate", str(tmp_path / "store"), "--freq", "1s", "--out", str(agg),
                 "--quiet"]) == 0
    grid = tmp_path / "grid.csv"
    assert main(["export-grid", str(SCEN / "small.yaml"), "--format", "csv", "--out",
                 str(grid), "--step-s", "60"]) == 0
    capsys.readouterr()
    env = dict(os.environ, HOME=str(tmp_path))  # a private LibreOffice profile
    subprocess.run(["soffice", "--headless", "--norestore",
                    "--infilter=CSV:44,34,76,1,,1033,false,true", "--convert-to", "xlsx",
                    "--outdir", str(tmp_path), str(agg), str(grid)], check=True, env=env,
                   capture_output=True, timeout=180)
    ws = openpyxl.load_workbook(tmp_path / "agg.xlsx").active
    header = [c.value for c in ws[1]]
    assert "timestamp_utc" in header and not any("/" in h for h in header)
    col = header.index("timestamp_utc")
    first = pd.Timestamp(tel["timestamp"].min()).floor("1s").tz_localize(None)
    cells = [r[col] for r in ws.iter_rows(min_row=2, values_only=True)]
    assert all(isinstance(c, dt.datetime) for c in cells), cells[:3]
    assert cells[0] == first.to_pydatetime()
    assert isinstance(ws.cell(2, header.index("power_w") + 1).value, (int, float))
    ws = openpyxl.load_workbook(tmp_path / "grid.xlsx").active
    rows = list(ws.iter_rows(values_only=True))
    assert rows[0][0].startswith("# represents")      # the band comment line
    assert list(rows[1][:3]) == ["time_s", "timestamp_utc", "power_megawatts"]
    assert "reactive_power_megavars" in rows[1]       # a scenario's playback carries Q
    start = read_scenario(SCEN / "small.yaml").start_utc.tz_localize(None)
    assert rows[2][1] == (start + pd.Timedelta(seconds=29.95)).to_pydatetime()
    assert all(isinstance(r[1], dt.datetime) for r in rows[2:])


@pytest.mark.parametrize("text", ["=HYPERLINK(\"x\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx",
                                  "\n=1+1", " \n@SUM(A1)", "\nx"])
def test_formula_injection_is_neutralised(text, tmp_path):
    assert sanitize_cell(text) == "'" + text
    assert sanitize_cell("job:start") == "job:start"
    d = _small(end_utc="2025-06-02T12:30:00Z")
    d["jobs"][0]["name"] = "JOBNAME"  # a job name becomes an events cell (control
    res = forecast(parse_scenario(d), draws=1)   # characters are refused in a scenario)
    res.events["job"] = res.events["job"].replace("JOBNAME", text)
    csv, _ = write_facilities_csv(res, tmp_path / "x.csv", "15min")
    raw = pd.read_csv(csv, dtype=str, keep_default_na=False)
    cells = [c for c in raw["events"] if c]
    assert cells and all(not c.lstrip(" \n").startswith(("=", "+", "-", "@", "\t", "\r", "\n"))
                         for c in cells)
    back = read_facilities_csv(csv)
    assert back["events"].str.startswith(text).any()


@pytest.mark.parametrize("text", ["'=cmd", "''+1", "'plain", "it's", "''"])
def test_formula_guard_round_trips_texts_starting_with_an_apostrophe(text, tmp_path):
    d = _small(end_utc="2025-06-02T12:30:00Z")
    d["jobs"][0]["name"] = text
    res = forecast(parse_scenario(d), draws=1)
    csv, _ = write_facilities_csv(res, tmp_path / "q.csv", "15min")
    back = read_facilities_csv(csv)
    expect = facilities_frame(res, "15min")
    assert (back["events"] == expect["events"].fillna("")).all()
    assert back["events"].str.contains(text + ":start", regex=False).any()


@pytest.mark.bad_input("export")
@pytest.mark.parametrize("name", ["f.xlsx", "forecast.json", "forecast", "f.CSV.txt"])
def test_an_output_name_that_is_not_csv_is_refused(result, tmp_path, name):
    with pytest.raises(PowerlabError, match=r"CSV file"):
        write_facilities_csv(result, tmp_path / name)
    assert not list(tmp_path.iterdir())


@pytest.mark.bad_input("export")
def test_bad_resolution_folder_and_sidecar_folder_fail_before_writing(result, tmp_path):
    with pytest.raises(PowerlabError, match="resolution must be one of"):
        write_facilities_csv(result, tmp_path / "a.csv", "10min")
    with pytest.raises(PowerlabError, match="does not exist"):
        write_facilities_csv(result, tmp_path / "no" / "fc.csv")
    (tmp_path / "b.json").mkdir()
    with pytest.raises(PowerlabError, match="is a folder"):
        write_facilities_csv(result, tmp_path / "b.csv")
    assert not (tmp_path / "b.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


@pytest.mark.bad_input("export")
def test_reader_checks_the_pair_and_names_line_and_column(result, tmp_path):
    csv, side = write_facilities_csv(result, tmp_path / "fc.csv")
    text = csv.read_text()
    lines = text.splitlines()
    cell = lines[3].split(",")[5]
    lines[3] = lines[3].replace(cell, "lots", 1)
    csv.write_text("\r\n".join(lines) + "\r\n")
    with pytest.raises(ParseError, match="does not match its sidecar"):
        read_facilities_csv(csv)
    with pytest.raises(ParseError) as ei:
        read_facilities_csv(csv, verify=False)
    assert ei.value.line == 4 and ei.value.column == "facility_power_megawatts_min"
    side.unlink()
    with pytest.raises(ParseError, match="sidecar .* is missing"):
        read_facilities_csv(csv)
    (tmp_path / "cols.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ParseError, match="interval_start_local_"):
        read_facilities_csv(tmp_path / "cols.csv", verify=False)


def test_sidecar_holds_no_absolute_paths(result, tmp_path):
    _, side = write_facilities_csv(result, tmp_path / "fc.csv")
    text = side.read_text()
    assert str(SCEN) not in text and str(tmp_path) not in text
    assert json.loads(text)["scenario_file"] == "small.yaml"


_WRITER = """
import sys
from pathlib import Path
import yaml
from powerlab.site.export import write_facilities_csv
from powerlab.site.engine import forecast
from powerlab.site.scenario import parse_scenario
d = yaml.safe_load(Path(sys.argv[1]).read_text())
d["horizon"]["end_utc"] = "2025-06-02T12:20:00Z"
res = [forecast(parse_scenario(d), draws=1, seed=s) for s in range(3)]
i = 0
while True:
    write_facilities_csv(res[i % 3], Path(sys.argv[2]), "1s")
    if i == 0:
        print("wrote", flush=True)
    i += 1
"""


@pytest.mark.slow
def test_a_killed_writer_never_leaves_a_new_csv_beside_an_old_sidecar(tmp_path):
    out = tmp_path / "pair.csv"
    rng = random.Random(7)
    outcomes = {"pair": 0, "csv only": 0}
    for _ in range(6):
        p = subprocess.Popen([sys.executable, "-c", _WRITER, str(SCEN / "small.yaml"),
                              str(out)], stdout=subprocess.PIPE, text=True)
        # a first pair exists; the kill lands at a random moment of later writes
        assert p.stdout.readline().strip() == "wrote"
        time.sleep(rng.uniform(0.0, 1.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
        if out.with_suffix(".json").exists():
            read_facilities_csv(out)  # checksum matches: a consistent pair
            outcomes["pair"] += 1
        elif out.exists():
            with pytest.raises(ParseError, match="missing"):
                read_facilities_csv(out)
            outcomes["csv only"] += 1
    assert outcomes["pair"] + outcomes["csv only"] == 6


def test_cli_forecast_end_to_end(tmp_path, capsys):
    out = tmp_path / "forecast.csv"
    rc = main(["forecast", str(SCEN / "small.yaml"), "--out", str(out), "--resolution",
               "5min", "--draws", "2", "--seed", "3"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "Power-swing forecast" in text and "wrote" in text
    assert "15-min peak demand [MW]" in text and "load factor" in text
    back = read_facilities_csv(out)
    assert len(back) == 24
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["draws"] == 2 and meta["seed"] == 3 and meta["resolution_s"] == 300.0
    rc = main(["forecast", str(SCEN / "small.yaml"), "--out", str(tmp_path / "f.xlsx")])
    assert rc == 2 and "CSV file" in capsys.readouterr().err
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["jobs"][0]["gpus"] = -1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(d))
    rc = main(["forecast", str(bad), "--out", str(tmp_path / "b.csv")])
    assert rc == 2
    assert "jobs[0].gpus" in capsys.readouterr().err
    assert not (tmp_path / "b.csv").exists()


def test_xlsx_has_date_cells_a_units_row_and_an_about_sheet(result, tmp_path):
    """Read back with openpyxl: the same table as the CSV, times as date-time cells."""
    import datetime as dt

    openpyxl = pytest.importorskip("openpyxl")
    from powerlab.site.export_workbook import write_facilities_xlsx

    path = write_facilities_xlsx(result, tmp_path / "site.xlsx", "15min",
                                 generated_utc=pd.Timestamp("2026-01-02T03:04:05Z"))
    wb = openpyxl.load_workbook(path)
    assert wb.sheetnames == ["facilities", "about"]
    ws = wb["facilities"]
    rows = [[c.value for c in r] for r in ws.iter_rows()]
    assert rows[0] == facilities_columns(TZ) and not any("/" in h for h in rows[0])
    units = dict(zip(rows[0], rows[1]))
    assert units["interval_start_utc"] == "UTC" and units[LOCAL] == TZ
    assert units["facility_power_megawatts_mean"] == "MW"
    assert units["it_energy_megawatt_hours"] == "MWh"
    assert units["facility_ramp_up_megawatts_per_min_1min_max"] == "MW/min"
    csv, _ = write_facilities_csv(result, tmp_path / "site.csv", "15min")
    back = read_facilities_csv(csv)
    assert len(rows) - 2 == len(back)
    first = rows[2]
    assert first[0] == dt.datetime(2025, 6, 2, 12, 0) and first[2] == dt.datetime(2025, 6, 2, 8)
    assert ws["A3"].is_date and ws["C3"].is_date and ws["A3"].number_format.startswith("yyyy")
    assert first[3] == "UTC-04:00"
    for j, name in enumerate(rows[0][4:-1], start=4):
        col = [r[j] for r in rows[2:]]
        want = back[name].to_numpy()
        got = np.array([np.nan if v is None else v for v in col], dtype=float)
        np.testing.assert_array_equal(got, want, err_msg=name)   # the CSV's rounding
    about = {r[0].value: r[1].value for r in wb["about"].iter_rows(min_row=2)
             if r[0].value and not r[0].value.startswith(("assumption", "unit of", "job "))}
    meta = json.loads(csv.with_suffix(".json").read_text())
    for key in ("format_version", "time_zone", "draws", "seed", "scenario_hash_sha256",
                "powerlab_version"):
        assert about[key] == meta[key], key
    assert about["generated_utc"] == "2026-01-02T03:04:05Z"
    units_about = {r[0].value[len("unit of "):]: r[1].value
                   for r in wb["about"].iter_rows(min_row=2)
                   if r[0].value and r[0].value.startswith("unit of ")}
    assert units_about == meta["units"]


def test_cli_forecast_format_xlsx(tmp_path, capsys):
    pytest.importorskip("openpyxl")
    from powerlab.cli import main

    out = tmp_path / "f.xlsx"
    assert main(["forecast", str(SCEN / "small.yaml"), "--out", str(out), "--format", "xlsx",
                 "--resolution", "1h", "--quiet"]) == 0
    assert out.is_file() and "wrote" in capsys.readouterr().out
    assert main(["forecast", str(SCEN / "small.yaml"), "--out", str(tmp_path / "f.csv"),
                 "--format", "xlsx"]) == 2
    assert "name it '*.xlsx'" in capsys.readouterr().err


def test_format_2_column_names_still_read(result, tmp_path):
    """A format-2 CSV named the zone with its slash; the reader still takes it."""
    csv, _ = write_facilities_csv(result, tmp_path / "v2.csv", "15min")
    text = csv.read_text().replace(LOCAL, "interval_start_local_America/New_York", 1)
    csv.write_text(text)
    back = read_facilities_csv(csv, verify=False)
    assert str(back["interval_start_local_America/New_York"].dt.tz) == TZ


@pytest.mark.bad_input("export")
def test_the_sidecar_s_own_fields_are_covered_by_its_checksum(result, tmp_path):
    """Issue 24: editing the units or the time zone of the sidecar is caught, not only a
    changed CSV."""
    import json

    csv, side = write_facilities_csv(result, tmp_path / "s.csv", "15min")
    doc = json.loads(side.read_text())
    assert doc["format_version"] == 3 and len(doc["sidecar_sha256"]) == 64
    read_facilities_csv(csv)
    for key, value in (("time_zone", "Europe/Paris"), ("units", {"x": "kW"})):
        edited = dict(doc, **{key: value})
        side.write_text(json.dumps(edited, indent=2))
        with pytest.raises(ParseError, match="own fields"):
            read_facilities_csv(csv)
    side.write_text("[" * 100_000)
    with pytest.raises(ParseError, match="cannot read the sidecar"):
        read_facilities_csv(csv)
    # an older (format 2) sidecar has no checksum of its own: read, with a counted warning
    old = {k: v for k, v in doc.items() if k != "sidecar_sha256"}
    side.write_text(json.dumps(dict(old, format_version=2), indent=2))
    from powerlab.exceptions import DataQualityWarning

    with pytest.warns(DataQualityWarning, match="no checksum"):
        assert len(read_facilities_csv(csv)) > 0


@pytest.mark.bad_input("scenario")
@pytest.mark.parametrize("name", ["a\x1b[31mb", "x\ny", "t\tab", "x" * 201])
def test_job_names_with_control_characters_are_refused(name):
    from powerlab.exceptions import ScenarioError

    d = _small()
    d["jobs"][0]["name"] = name
    with pytest.raises(ScenarioError, match="printable") as e:
        parse_scenario(d)
    assert e.value.key == "jobs[0].name"
