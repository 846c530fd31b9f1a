"""Tests of powerlab.grid.export and the ``powerlab forecast`` command."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from powerlab.cli import main
from powerlab.exceptions import ParseError, PowerlabError
from powerlab.grid.export import (
    FACILITIES_COLUMNS,
    facilities_frame,
    read_facilities_csv,
    sanitize_cell,
    write_facilities_csv,
)
from powerlab.grid.forecast import forecast
from powerlab.grid.scenario import parse_scenario, read_scenario

SCEN = Path(__file__).parents[1] / "data" / "scenarios"


@pytest.fixture(scope="module")
def result():
    return forecast(read_scenario(SCEN / "small.yaml"), draws=3, seed=0)


def test_csv_columns_times_and_exact_round_trip(result, tmp_path):
    csv, side = write_facilities_csv(result, tmp_path / "fc.csv", "15min")
    lines = csv.read_text().splitlines()
    assert lines[0].split(",") == list(FACILITIES_COLUMNS)
    first = lines[1].split(",")
    assert first[0] == "2025-06-02T12:00:00Z" and first[1] == "2025-06-02T12:15:00Z"
    back = read_facilities_csv(csv)
    expect = facilities_frame(result, "15min")
    assert len(back) == len(expect) == 2 * 8
    for c in FACILITIES_COLUMNS[3:10]:
        np.testing.assert_array_equal(back[c].to_numpy(), expect[c].to_numpy())
    assert (back["interval_start_utc"] == expect["interval_start_utc"]).all()
    assert (back["events"].fillna("") == expect["events"].fillna("")).all()
    assert str(back["interval_end_utc"].dtype) == "datetime64[ns, UTC]"
    # megawatts: the mean facility power of a ~1,000-GPU site is ~1 MW
    assert 0.3 < back["power_megawatts_mean"].max() < 3
    meta = json.loads(side.read_text())
    for k in ("units", "assumptions", "scenario_hash_sha256", "powerlab_version",
              "generated_utc"):
        assert meta[k]
    assert meta["scenario_hash_sha256"] == result.scenario.hash()
    assert meta["generated_utc"].endswith("Z")
    assert set(meta["units"]) == set(FACILITIES_COLUMNS)
    # atomic write: no temporary files left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fc.csv", "fc.json"]


def test_1s_resolution_rows(result, tmp_path):
    csv, _ = write_facilities_csv(result, tmp_path / "s.csv", "1s")
    back = read_facilities_csv(csv)
    assert len(back) == 2 * 7200
    assert (back["power_megawatts_min"] <= back["power_megawatts_max"]).all()


@pytest.mark.parametrize("text", ["=HYPERLINK(\"x\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx"])
def test_formula_injection_is_neutralised(text, tmp_path):
    assert sanitize_cell(text) == "'" + text
    assert sanitize_cell("job:start") == "job:start"
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["jobs"][0]["name"] = text.replace("\r", "=")  # a job name becomes an events cell
    d["horizon"]["end_utc"] = "2025-06-02T12:30:00Z"
    res = forecast(parse_scenario(d), draws=1)
    res.events["job"] = res.events["job"].replace(d["jobs"][0]["name"], text)
    csv, _ = write_facilities_csv(res, tmp_path / "x.csv", "15min")
    raw = pd.read_csv(csv, dtype=str, keep_default_na=False)
    cells = [c for c in raw["events"] if c]
    assert cells and all(not c.startswith(("=", "+", "-", "@", "\t", "\r")) for c in cells)
    back = read_facilities_csv(csv)
    assert back["events"].str.startswith(text).any()


def test_write_errors_and_broken_csv(result, tmp_path):
    with pytest.raises(PowerlabError, match="does not exist"):
        write_facilities_csv(result, tmp_path / "no" / "fc.csv")
    csv, _ = write_facilities_csv(result, tmp_path / "fc.csv")
    lines = csv.read_text().splitlines()
    lines[3] = lines[3].replace(lines[3].split(",")[4], "lots", 1)
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines))
    with pytest.raises(ParseError) as ei:
        read_facilities_csv(bad)
    assert ei.value.line == 4 and ei.value.column == "power_megawatts_min"
    (tmp_path / "cols.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ParseError, match="missing column"):
        read_facilities_csv(tmp_path / "cols.csv")


def test_cli_forecast_end_to_end(tmp_path, capsys):
    out = tmp_path / "forecast.csv"
    rc = main(["forecast", str(SCEN / "small.yaml"), "--out", str(out), "--resolution",
               "1min", "--draws", "2", "--seed", "3"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "Power-swing forecast" in text and "wrote" in text
    back = read_facilities_csv(out)
    assert len(back) == 2 * 120
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["draws"] == 2 and meta["seed"] == 3 and meta["resolution_s"] == 60.0
    # a broken scenario: one-line error naming the key, exit 2
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["jobs"][0]["gpus"] = -1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(d))
    rc = main(["forecast", str(bad), "--out", str(tmp_path / "b.csv")])
    assert rc == 2
    assert "jobs[0].gpus" in capsys.readouterr().err
    assert not (tmp_path / "b.csv").exists()


@pytest.mark.parametrize("text", ["'=cmd", "''+1", "'plain", "it's", "''"])
def test_formula_guard_round_trips_texts_starting_with_an_apostrophe(text, tmp_path):
    # a text that already starts with the guard must be guarded again, else the reader
    # strips the author's own apostrophe and the CSV does not re-read to the same text
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["jobs"][0]["name"] = text
    d["horizon"]["end_utc"] = "2025-06-02T12:30:00Z"
    res = forecast(parse_scenario(d), draws=1)
    csv, _ = write_facilities_csv(res, tmp_path / "q.csv", "15min")
    back = read_facilities_csv(csv)
    expect = facilities_frame(res, "15min")
    assert (back["events"] == expect["events"].fillna("")).all()
    assert back["events"].str.contains(text + ":start", regex=False).any()


def test_csv_named_json_is_refused_not_overwritten_by_its_sidecar(result, tmp_path):
    with pytest.raises(PowerlabError, match="sidecar"):
        write_facilities_csv(result, tmp_path / "forecast.json")
    assert not list(tmp_path.iterdir())
