"""No command writes over one of its inputs, nor over an existing file without --force
(issue 24): one shared check, powerlab._cli._outputs.guard_outputs, made before any work."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from powerlab.cli import main

REPO = Path(__file__).resolve().parents[1]
SMALL = REPO / "data" / "scenarios" / "small.yaml"
REQ = REPO / "data" / "requirements" / "small_site_example.yaml"

pytestmark = pytest.mark.bad_input("cli")


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_forecast_sidecar_never_lands_on_the_scenario(tmp_path, capsys):
    """``forecast sc.json --out sc.csv``: the sidecar sc.json would be the scenario."""
    sc = tmp_path / "sc.json"
    import json

    import yaml

    sc.write_text(json.dumps(yaml.safe_load(SMALL.read_text())))
    before = sc.read_bytes()
    assert main(["forecast", str(sc), "--out", str(tmp_path / "sc.csv")]) == 2
    assert "is the input" in _err(capsys)
    assert sc.read_bytes() == before
    assert not (tmp_path / "sc.csv").exists()


def test_export_grid_out_equal_to_the_scenario_is_refused_even_with_force(tmp_path, capsys):
    sc = tmp_path / "sc.yaml"
    shutil.copy(SMALL, sc)
    before = sc.read_bytes()
    for extra in ([], ["--force"]):
        rc = main(["export-grid", str(sc), "--format", "csv", "--out", str(sc), *extra])
        assert rc == 2
        assert "is the input" in _err(capsys)
    assert sc.read_bytes() == before


def test_a_hard_link_to_the_input_is_the_input(tmp_path, capsys):
    sc = tmp_path / "sc.yaml"
    shutil.copy(SMALL, sc)
    os.link(sc, tmp_path / "other.csv")
    rc = main(["export-grid", str(sc), "--format", "csv", "--out", str(tmp_path / "other.csv"),
               "--force"])
    assert rc == 2 and "is the input" in _err(capsys)


def test_an_existing_file_needs_force(tmp_path, capsys):
    out = tmp_path / "mine.csv"
    out.write_text("precious\n")
    rc = main(["forecast", str(SMALL), "--out", str(out), "--quiet"])
    assert rc == 2 and "--force" in _err(capsys)
    assert out.read_text() == "precious\n"
    side = tmp_path / "f.json"
    side.write_text("{}")
    rc = main(["forecast", str(SMALL), "--out", str(tmp_path / "f.csv"), "--quiet"])
    assert rc == 2 and "f.json exists" in _err(capsys)
    assert side.read_text() == "{}"


@pytest.mark.slow
def test_force_overwrites_an_output_that_is_not_an_input(tmp_path, capsys):
    out = tmp_path / "f.csv"
    out.write_text("old\n")
    assert main(["forecast", str(SMALL), "--out", str(out), "--quiet", "--draws", "2",
                 "--force"]) == 0
    assert out.read_text().startswith("interval_start_utc")


def test_aggregate_out_equal_to_the_sacct_file_or_inside_the_store(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    sacct = tmp_path / "sacct.csv"
    sacct.write_text("JobID|Start\n")
    rc = main(["aggregate", str(store), "--by", "job", "--sacct", str(sacct), "--tz", "UTC",
               "--out", str(sacct.with_suffix(".csv"))])
    assert rc == 2 and "is the input" in _err(capsys)
    rc = main(["aggregate", str(store), "--out", str(store / "a.csv")])
    assert rc == 2 and "inside the store" in _err(capsys)


def test_comply_never_writes_its_report_over_an_input(tmp_path, capsys):
    """An input named like one of the fixed outputs inside the output folder."""
    req = tmp_path / "compliance.csv"
    shutil.copy(REQ, req)
    before = req.read_bytes()
    rc = main(["comply", str(SMALL), "--requirements", str(req), "--out", str(tmp_path)])
    assert rc == 2 and "is the input" in _err(capsys)
    assert req.read_bytes() == before
