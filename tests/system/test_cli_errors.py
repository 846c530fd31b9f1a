"""User mistakes at the command line end with exit code 2 and exactly one line on stderr,
never a traceback.  A table of bad invocations of every subcommand (the owners of each
subcommand test their deeper cases in their own test modules)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from powerlab import cli

REPO = Path(__file__).resolve().parents[2]
SMALL = str(REPO / "data" / "scenarios" / "small.yaml")
REQ = str(REPO / "data" / "requirements" / "small_site_example.yaml")


def run_cli(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "powerlab.cli", *args], check=False, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(proc: subprocess.CompletedProcess, *, contains: str = "") -> None:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(err.splitlines()) == 1, err
    assert err.startswith("powerlab"), err
    assert contains in err, err


def _cases(tmp: str) -> list:
    bad_yaml = f"{tmp}/bad.yaml"
    return [
        ([], "required: COMMAND"),
        (["nosuchcommand"], "invalid choice"),
        (["summary", "--nonsense"], "unrecognized arguments"),
        (["forecast"], "required"),
        (["forecast", SMALL], "--out"),
        (["forecast", "/nonexistent/s.yaml", "--out", f"{tmp}/f.csv"], "cannot read"),
        (["forecast", bad_yaml, "--out", f"{tmp}/f.csv"], "not valid YAML"),
        (["forecast", SMALL, "--out", tmp], "CSV file"),
        (["forecast", SMALL, "--out", f"{tmp}/f.xlsx"], "CSV file"),
        (["forecast", SMALL, "--out", f"{tmp}/dir.csv"], "folder"),
        (["forecast", SMALL, "--out", "/nonexistent/dir/f.csv"], "does not exist"),
        (["forecast", SMALL, "--out", f"{tmp}/f.csv", "--draws", "abc"], "invalid int"),
        (["forecast", SMALL, "--out", f"{tmp}/f.csv", "--draws", "-1"], "draws"),
        (["forecast", SMALL, "--out", f"{tmp}/f.csv", "--resolution", "7s"], "resolution"),
        (["summary", "/nonexistent/path"], "no such file"),
        (["summary", str(REPO / "README.md")], "cannot tell the format"),
        (["demo", "--out", "/proc/powerlab-demo"], "output folder"),
        (["demo", "--bogus"], "unrecognized arguments"),
        # (--out beside the store T, not inside it: an output inside a store is refused)
        (["aggregate"], "required"),
        (["aggregate", "/nonexistent/store", "--out", f"{tmp}/a.csv"], "no such folder"),
        (["aggregate", tmp, "--out", f"{tmp}-a.csv", "--scheduler", "garbage://x"],
         "expected tcp://"),
        (["aggregate", tmp, "--out", f"{tmp}-a.csv", "--scheduler", "host:notaport"],
         "port number"),
        (["aggregate", tmp, "--out", f"{tmp}/a.csv", "--workers", "2", "--memory-limit",
          "lots"], "--memory-limit"),
        (["aggregate", tmp, "--out", f"{tmp}/dir.csv"], "is a folder"),
        (["aggregate", tmp, "--out", f"{tmp}/a.csv", "--start", "2025-07-02T00:00Z",
          "--end", "2025-07-01T00:00Z"], "not before"),
        (["aggregate", tmp, "--out", f"{tmp}/a.csv", "--by", "job"], "--sacct"),
        (["aggregate", tmp, "--out", f"{tmp}-a.csv", "--by", "job", "--sacct",
          f"{tmp}/bad.yaml"], "pass tz="),
        (["aggregate", tmp, "--out", f"{tmp}/a.csv", "--timeout-s", "0"], "--timeout-s"),
        (["import"], "required"),
        (["import", "/nonexistent/log.csv", "--out", f"{tmp}/store"], ""),
        (["collect", "--interval-s", "abc", "--out", f"{tmp}/store"], "interval"),
        (["comply"], "required"),
        (["comply", SMALL, "--requirements", "/nonexistent/req.yaml", "--out", tmp], ""),
        (["comply", SMALL, "--requirements", bad_yaml, "--out", tmp], "not valid YAML"),
        (["comply", str(REPO / "data" / "scenarios" / "llama3_54d_16k_h100.yaml"), "--out",
          tmp], "sets no limits"),
        (["export-grid"], "required"),
        (["export-grid", SMALL, "--format", "excel", "--out", f"{tmp}/g.txt"], "format"),
        (["export-grid", "/nonexistent/s.yaml", "--format", "csv", "--out", f"{tmp}/g.csv"],
         ""),
        (["calibrate"], "required"),
        (["calibrate", "/nonexistent/power", "--out", f"{tmp}/j.yaml"], "/nonexistent/power"),
        (["calibrate", str(REPO / "data" / "mlperf-gpt3-64node" / "power"), "--out",
          f"{tmp}/j.txt"], "YAML"),
        (["calibrate", str(REPO / "data" / "mlperf-gpt3-64node" / "power"), "--out",
          f"{tmp}/j.yaml", "--start", "2024-05-17T15:40:00"], "time zone"),
        (["scale", SMALL, "--out", f"{tmp}/s.yaml"], "--gpus"),
        (["scale", SMALL, "--gpus", "0", "--out", f"{tmp}/s.yaml"], "gpus"),
        (["scale", SMALL, "--gpus", "64", "--sag", "deep", "--out", f"{tmp}/s.yaml"],
         "PU:SECONDS@HOURS"),
        (["scale", "/nonexistent/job.yaml", "--gpus", "64", "--out", f"{tmp}/s.yaml"],
         "/nonexistent/job.yaml"),
        (["backtest", "--out", f"{tmp}/bt"], "POWER"),
        (["backtest", "/nonexistent/power", "--out", f"{tmp}/bt"], "/nonexistent/power"),
        (["backtest", "--train-runs", "/nonexistent/p", "--out", f"{tmp}/bt"],
         "--test-runs"),
        (["store"], "required"),
        (["store", "upgrade"], "required"),
        (["store", "upgrade", "/nonexistent/store"], "no store"),
        (["store", "upgrade", str(REPO / "docs")], "holds no powerlab store"),
        (["size-mitigation"], "required"),
        (["size-mitigation", SMALL, "--out", tmp], "--requirements"),
        (["size-mitigation", SMALL, "--requirements", "/nonexistent/req.yaml", "--out", tmp],
         ""),
        (["size-mitigation", SMALL, "--requirements", bad_yaml, "--out", tmp],
         "not valid YAML"),
        (["size-mitigation", "/nonexistent/s.yaml", "--requirements", REQ, "--out", tmp], ""),
        (["size-mitigation", SMALL, "--requirements", REQ, "--out", tmp, "--draws", "0"],
         "draws"),
        (["size-mitigation", SMALL, "--requirements", REQ, "--out", f"{tmp}/bad.yaml"],
         "not a folder"),
        (["flex"], "required"),
        (["flex", "plan", SMALL, "--requirements", REQ, "--out", tmp], "--target"),
        (["flex", "plan", SMALL, "--target", "/nonexistent/t.csv", "--requirements", REQ,
          "--out", tmp], "no such file"),
        (["flex", "plan", SMALL, "--target", bad_yaml, "--requirements", REQ, "--out", tmp],
         "expected a .csv"),
        (["flex", "plan", SMALL, "--target", f"{tmp}/dir.csv", "--requirements", REQ,
          "--out", tmp], "cannot read"),
        (["flex", "offer", SMALL, "--out", tmp, "--draws", "0"], "draws"),
        (["flex", "verify", "/nonexistent/store", "--event", "/nonexistent/e.csv", "--out",
          tmp], "no such file"),
        (["study-package"], "required"),
        (["study-package", SMALL, "--requirements", bad_yaml, "--out", tmp],
         "not valid YAML"),
        (["study-package", SMALL, "--requirements", REQ, "--out", tmp, "--draws", "0"],
         "draws"),
        (["study-package", SMALL, "--requirements", REQ, "--out", f"{tmp}/bad.yaml"],
         "not a folder"),
        (["reliability"], "required"),
        (["reliability", "fit", "/nonexistent/faults.csv", "--nodes", "4", "--out", tmp],
         "no such file"),
        (["reliability", "plan", "--gpus", "0", "--days", "1", "--checkpoint-s", "1",
          "--restart-s", "1", "--out", tmp], "not in (0"),
    ]


CASE_IDS = [" ".join(a) or "(no arguments)" for a, _ in _cases("T")]


@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(i, id=name, marks=pytest.mark.bad_input("cli"))
                                  for i, name in enumerate(CASE_IDS)])
def test_bad_invocation_is_one_clean_line(case, tmp_path):
    (tmp_path / "bad.yaml").write_text("jobs: [1, 2\n")
    (tmp_path / "dir.csv").mkdir()
    args, contains = _cases(str(tmp_path))[case]
    assert_one_line_error(run_cli(args, tmp_path), contains=contains)


def test_every_subcommand_is_in_the_table():
    names = {m.rstrip("_").replace("_", "-") for m in cli.COMMAND_MODULES}
    covered = {a[0] for a, _ in _cases("T") if a and not a[0].startswith("-")}
    assert names <= covered, sorted(names - covered)


def test_the_check_rejects_a_traceback():
    proc = subprocess.CompletedProcess([], 2, "", "Traceback (most recent call last):\n  x\n")
    with pytest.raises(AssertionError):
        assert_one_line_error(proc)
