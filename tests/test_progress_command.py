"""powerlab._progress.CommandProgress: a long command says what it will do and about how
long within 2 s, then its phases and the time against the estimate; a short one says
nothing; --quiet silences it; Ctrl-C says what was kept (issue 37)."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import pytest

from powerlab._progress import ANNOUNCE_S, CommandProgress, quiet


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_a_long_command_announces_itself_then_phases_then_done():
    out, clock = io.StringIO(), _Clock()
    with CommandProgress("calibrate", "fit a job to 12.0 MiB in 3 source(s)", 40.0,
                         stream=out, clock=clock) as bar:
        bar.phase("reading")
        clock.t = 12.0
    lines = out.getvalue().splitlines()
    assert lines[0] == "calibrate: fit a job to 12.0 MiB in 3 source(s); about 40 s"
    assert lines[1] == "calibrate: reading"
    assert lines[-1] == "calibrate: done in 12 s"


@pytest.mark.parametrize("estimate", [None, 0.1, ANNOUNCE_S - 0.01])
def test_a_short_command_says_nothing(estimate):
    out = io.StringIO()
    with CommandProgress("import", "import 0.1 MiB", estimate, stream=out) as bar:
        bar.phase("1/1: x.csv")
    assert out.getvalue() == ""


def test_quiet_says_nothing_even_when_interrupted(tmp_path):
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt), CommandProgress(
            "flex plan", "plan", 99.0, enabled=False, stream=out):
        raise KeyboardInterrupt
    with quiet(), CommandProgress("flex plan", "plan", 99.0, stream=out):
        pass
    assert out.getvalue() == ""


def test_ctrl_c_says_which_outputs_were_kept(tmp_path):
    out = io.StringIO()
    old = tmp_path / "old.csv"
    old.write_text("x")
    import os
    os.utime(old, (time.time() - 3600, time.time() - 3600))  # there before the command
    with pytest.raises(KeyboardInterrupt), CommandProgress(
            "study-package", "the package", 0.5, stream=out, outputs=[tmp_path]):
        (tmp_path / "peak.csv").write_text("1")
        raise KeyboardInterrupt
    last = out.getvalue().splitlines()[-1]
    assert "interrupted after" in last and "kept the 1 file(s) written before it: peak.csv" \
        in last
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt), CommandProgress(
            "calibrate", "fit", 0.5, stream=out, outputs=[tmp_path / "job.yaml"]):
        raise KeyboardInterrupt
    assert out.getvalue().rstrip().endswith("nothing was written")


def test_heartbeat_lines_while_a_phase_runs():
    """A phase longer than its share of the estimate prints the time elapsed against the
    estimate (counted lines, not timed: the beat is driven by waiting on its event)."""
    out = io.StringIO()
    bar = CommandProgress("flex offer", "offer", 2.0, stream=out)
    bar._stop.wait = lambda timeout: bar._beats.pop() if bar._beats else True  # type: ignore
    bar._beats = [False, False]
    with bar:
        bar._beat.join(5)
    beats = [ln for ln in out.getvalue().splitlines() if "elapsed" in ln]
    assert len(beats) == 2 and all(ln.startswith("flex offer: ") for ln in beats)


def test_study_package_announces_within_two_seconds(tmp_path):
    """The command line: the first stderr line (what it will do, an estimate) comes
    before the work, not at its end; --quiet prints none of it."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "powerlab.cli", "study-package",
           str(repo / "data" / "scenarios" / "small.yaml"), "--requirements",
           str(repo / "data" / "requirements" / "small_site_example.yaml"),
           "--out", str(tmp_path), "--draws", "40"]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    first = p.stderr.readline()
    files_at_first_line = list(tmp_path.iterdir())
    p.kill()
    p.wait()
    assert first.startswith("study-package: the package: 40 draws x 72,000 ticks"), first
    assert "; about " in first and files_at_first_line == []
