"""No command writes over one of its inputs, nor over an existing file without --force
(issue 24): one shared check, powerlab.outputs.guard_outputs, made before any work."""

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


@pytest.mark.parametrize("args, words", [
    (["forecast", str(SMALL), "--out", "X/f.csv", "--seed", "-1"], "outside 0 to 2**63"),
    (["export-grid", str(SMALL), "--format", "csv", "--out", "X/g.csv", "--seed", "-1"],
     "outside 0"),
    (["comply", str(SMALL), "--requirements", str(REQ), "--out", "X", "--seed", "2e3"],
     "not a whole number"),
    (["import", "X/a.csv", "--out", "X/st", "--host", "h" * 300], "300 characters"),
    (["import", "X/a.csv", "--out", "X/st", "--host", "a\x1b[2Jb"], "control characters"),
])
def test_cli_numbers_and_names_are_bounded(tmp_path, capsys, args, words):
    args = [a.replace("X", str(tmp_path)) if a.startswith("X") else a for a in args]
    rc = main(args)                      # a usage error: returned as exit code 2
    err = capsys.readouterr().err.strip()
    assert rc == 2 and words in err, err
    assert len(err.splitlines()) == 1


def test_demo_hours_bound(tmp_path, capsys):
    pytest.importorskip("altair")
    pytest.importorskip("vl_convert")
    # refused while parsing (issue 38): a usage error, exit code 2
    assert main(["demo", "--hours", "1e9", "--out", str(tmp_path / "d")]) == 2
    assert "more than 0 to 8784 h" in _err(capsys)


def test_utf16_scenario_and_fifo_input_are_one_line(tmp_path, capsys):
    u16 = tmp_path / "u16.yaml"
    u16.write_text(SMALL.read_text(), encoding="utf-16")
    assert main(["forecast", str(u16), "--out", str(tmp_path / "f.csv")]) == 2
    assert "UTF-16 text; save it as UTF-8" in _err(capsys)
    fifo = tmp_path / "in.yaml"
    os.mkfifo(fifo)                        # reading it would block for ever
    assert main(["forecast", str(fifo), "--out", str(tmp_path / "f.csv")]) == 2
    assert "not a regular file" in _err(capsys)
    from powerlab.exceptions import ScenarioError
    from powerlab.site.scenario import read_scenario

    with pytest.raises(ScenarioError, match="not a regular file"):
        read_scenario(fifo)


@pytest.mark.parametrize("errno_, words", [(28, "No space left"), (30, "Read-only")])
def test_full_or_read_only_output_folder_is_one_line_and_leaves_nothing(
        tmp_path, capsys, monkeypatch, errno_, words):
    """The disk refuses the write (ENOSPC, EROFS; as root a chmod cannot show it)."""
    import pathlib

    real = pathlib.Path.write_bytes

    def refuse(self, data):
        if self.parent == tmp_path:
            raise OSError(errno_, os.strerror(errno_), str(self))
        return real(self, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", refuse)
    rc = main(["forecast", str(SMALL), "--out", str(tmp_path / "f.csv"), "--quiet",
               "--draws", "1"])
    assert rc == 2 and words in _err(capsys)
    assert [p.name for p in tmp_path.iterdir()] == []
