"""Progress of long work (powerlab._progress): what a log and a terminal show, with a
clock the test drives (no timing assumption anywhere), and its use by ``forecast`` and
``powerlab aggregate``."""

from __future__ import annotations

import io

import pytest

from powerlab._progress import Progress, format_duration


class Clock:
    """A monotonic clock the test advances by hand [s]."""

    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _lines(buf: io.StringIO) -> list[str]:
    return buf.getvalue().splitlines()


def test_log_gets_the_size_a_line_per_phase_and_per_tenth_only():
    buf, clock = io.StringIO(), Clock()
    with Progress(1000, "search", "evaluation", stream=buf, tty=False, clock=clock) as bar:
        bar.announce("1,000 evaluations of 50 options x 20 draws", estimate_s=200.0)
        bar.phase("pilot")
        for _ in range(1000):
            clock.t += 0.25
            bar.update()
        bar.phase("refining")
    lines = _lines(buf)
    assert lines[0] == "search: 1,000 evaluations of 50 options x 20 draws; about 3 min 20 s"
    assert lines[1] == "search: pilot"
    # nine tenths, the phase, and the last line: a log stays short whatever the total
    tenths = [ln for ln in lines if "/1,000 evaluations" in ln]
    assert [t.split()[1] for t in tenths] == [f"{k * 100:,}/1,000" for k in range(1, 11)]
    assert "4 evaluation/s" in tenths[0] and "~3 min 45 s left" in tenths[0]
    assert lines[-2] == "search: refining"
    assert lines[-1] == "search  1,000/1,000 evaluations  100%  4 evaluation/s  4 min 10 s in all"
    assert "\r" not in buf.getvalue()


def test_terminal_redraws_one_line_at_most_every_interval():
    buf, clock = io.StringIO(), Clock()
    bar = Progress(20, "forecast", "draw", stream=buf, tty=True, min_interval_s=1.0,
                   clock=clock)
    for _ in range(20):
        clock.t += 0.5
        bar.update()
    bar.close()
    text = buf.getvalue()
    redraws = text.split("\r")[1:]
    # the first draw, then every other draw (1 s apart), then the last: 11 redraws
    assert [r.split()[1] for r in redraws if r.startswith("forecast ")] == [
        f"{k}/20" for k in (1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 20)]
    assert "forecast  3/20 draws  15%  2 draw/s  1.5 s elapsed  ~8.5 s left" in text
    assert text.endswith("\r\033[Kforecast  20/20 draws  100%  2 draw/s  10 s in all\n")


def test_quiet_prints_nothing_and_interrupt_says_how_far_it_got():
    buf = io.StringIO()
    with Progress(10, "forecast", "draw", stream=buf, enabled=False) as bar:
        bar.announce("x")
        bar.update(3)
    assert buf.getvalue() == ""
    buf, clock = io.StringIO(), Clock()
    with pytest.raises(KeyboardInterrupt), \
            Progress(10, "forecast", "draw", stream=buf, tty=False, clock=clock) as bar:
        bar.update(3)
        raise KeyboardInterrupt
    assert _lines(buf)[-1] == "forecast: interrupted after 3/10 draws"


def test_format_duration():
    assert [format_duration(s) for s in (2.25, 45, 200, 7_500)] == [
        "2.2 s", "45 s", "3 min 20 s", "2 h 05 min"]


def test_forecast_prints_size_and_progress_or_nothing(capsys):
    from powerlab.grid.forecast import forecast
    from powerlab.grid.scenario import read_scenario

    from .conftest import REPO

    sc = read_scenario(REPO / "data" / "scenarios" / "small.yaml")
    forecast(sc, draws=4, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("forecast: 72,000 ticks of 0.1 s x 4 draws = 288,000 tick-draws")
    assert err[-1].startswith("forecast  4/4 draws  100%")
    forecast(sc, draws=4)                   # quiet by default (loops of forecasts)
    forecast(sc, draws=4, progress=None)    # estimated well under 2 s: quiet
    assert capsys.readouterr().err == ""
    mine = Progress(4, "size-mitigation", "draw", stream=io.StringIO(), tty=False)
    forecast(sc, draws=4, progress=mine)   # a caller's bar is updated, left open
    assert mine.done == 4 and not mine.closed


def test_cli_aggregate_announces_and_phases_unless_quiet(tmp_path, capsys):
    from powerlab.cli import main as cli_main
    from powerlab.telemetry.store import write_store

    from .conftest import make_telemetry

    write_store(make_telemetry(), tmp_path / "s", fsync=False)
    out = tmp_path / "o.csv"
    assert cli_main(["aggregate", str(tmp_path / "s"), "--out", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("aggregate: 4 files, about ") and "rows; --by cluster" in err[0]
    assert err[1] == "aggregate: aggregating on duckdb"
    assert err[-1].startswith("aggregate  ") and "100%" in err[-1]
    assert cli_main(["aggregate", str(tmp_path / "s"), "--out", str(out), "--quiet",
                     "--force"]) == 0
    assert capsys.readouterr().err == ""
