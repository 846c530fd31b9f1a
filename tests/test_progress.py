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
    from powerlab.site.engine import forecast
    from powerlab.site.scenario import read_scenario

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


# ----------------------------------------------------------------- size-mitigation
def _sizing_site():
    from .interconnect.test_sizing import SMALL_GRID, scenario, spec

    return scenario(0.02), spec(), SMALL_GRID


def test_size_mitigation_prints_its_size_each_step_and_options_done(capsys):
    """The search announces engine runs x draws x ticks and its most options, then shows
    options done out of that bound, a line per search step, and ends at what it did."""
    from powerlab.interconnect.searchsize import max_option_evaluations
    from powerlab.interconnect.sizing import size_mitigation

    sc, sp, grid = _sizing_site()
    most = max_option_evaluations(sc, grid)
    res = size_mitigation(sc, sp, draws=1, grid=grid, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"size-mitigation: 2 engine runs x 1 draws x 24,000 ticks of "
                             f"0.1 s, then at most {most:,} options x 1 draws x 24,000 "
                             f"ticks = {most * 24_000:,} option-tick evaluations; about ")
    assert "size-mitigation  2/2 engine draws  100%" in "\n".join(err)
    steps = [ln.split(": ", 1)[1].split(". ")[0] for ln in err
             if ln.startswith("size-mitigation: ") and ". " in ln.split(": ", 1)[1][:4]]
    assert steps == ["1", "2", "2b", "3", "4"]
    n = len(res.evaluated)
    assert 1 < n <= most                       # the bound holds and the search ran
    assert err[-1].startswith(f"size-mitigation  {n:,}/{n:,} options  100%")
    # the bar's count is the options evaluated, one update per new (uncached) option
    counts = [int(ln.split()[1].split("/")[0]) for ln in err if "/" in ln and " options " in ln]
    assert counts == sorted(counts) and counts[-1] == n
    size_mitigation(sc, sp, draws=1, grid=grid, progress=False)
    assert capsys.readouterr().err == ""


def test_ctrl_c_in_the_search_writes_the_best_so_far_and_exits_130(tmp_path, capsys,
                                                                 monkeypatch):
    """Ctrl-C (a KeyboardInterrupt raised at the 40th option evaluation, deterministic)
    ends ``powerlab size-mitigation`` with exit code 130, no traceback, the options
    evaluated so far written and the cheapest passing one of them printed."""
    import pandas as pd
    import yaml

    from powerlab import cli
    from powerlab.exceptions import Interrupted
    from powerlab.interconnect.sitemodel import SiteModel
    from powerlab.interconnect.sizing import size_mitigation

    from .interconnect.test_sizing import SCENARIO

    real, calls = SiteModel.trace, []

    def trace(self, *a, **k):
        calls.append(1)
        if len(calls) == 40:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(SiteModel, "trace", trace)
    sc, sp, grid = _sizing_site()
    with pytest.raises(Interrupted) as info:
        size_mitigation(sc, sp, draws=1, grid=grid, progress=False)
    part = info.value.partial
    assert isinstance(info.value, KeyboardInterrupt) and part.interrupted
    assert len(part.evaluated) == 39 and part.found
    passing = part.evaluated[part.evaluated["passes"]]
    assert part.cheapest["cost_usd_per_day"] == passing["cost_usd_per_day"].min()
    assert "INTERRUPTED (Ctrl-C) after 39 options" in str(part.summary())

    calls.clear()
    scn, req = tmp_path / "s.yaml", tmp_path / "r.yaml"
    scn.write_text(SCENARIO.replace("JITTER", "0.02"))
    req.write_text(yaml.safe_dump({"name": "t", "requirements": [
        {"name": "step_1s", "kind": "step", "within_s": 1, "limit": 0.15, "unit": "MW",
         "source": "test", "illustrative": True}]}))
    rc = cli.main(["size-mitigation", str(scn), "--requirements", str(req), "--out",
                   str(tmp_path / "o"), "--draws", "1"])
    cap = capsys.readouterr()
    assert rc == 130
    assert "Traceback" not in cap.err and "Traceback" not in cap.out
    assert "size-mitigation: interrupted after 39/" in cap.err
    assert "INTERRUPTED" in cap.out and "Cheapest passing option" in cap.out
    assert "status: interrupted, options_found; engine runs: 2" in cap.out
    opts = pd.read_csv(tmp_path / "o" / "mitigation_options.csv")
    assert len(opts) >= 1 and opts["requirements_passed"].eq("step_1s").all()
    assert "INTERRUPTED" in (tmp_path / "o" / "mitigation_summary.txt").read_text()


@pytest.mark.slow
def test_a_real_sigint_stops_the_command_cleanly(tmp_path):
    """A real SIGINT to a running ``powerlab size-mitigation`` process, sent once its log
    says the search's step 2 began (a 4-h horizon: the search has tens of seconds left
    then): exit code 130, no traceback, the partial results written."""
    import signal
    import subprocess
    import sys

    import yaml

    from .conftest import REPO
    from .interconnect.test_sizing import SCENARIO

    scn, req = tmp_path / "s.yaml", tmp_path / "r.yaml"
    scn.write_text(SCENARIO.replace("JITTER", "0.02")
                   .replace('end_utc: "2025-06-02T12:40:00Z"', 'end_utc: "2025-06-02T16:00:00Z"'))
    req.write_text(yaml.safe_dump({"name": "t", "requirements": [
        {"name": "step_1s", "kind": "step", "within_s": 1, "limit": 0.15, "unit": "MW",
         "source": "test", "illustrative": True}]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "powerlab.cli", "size-mitigation", str(scn),
         "--requirements", str(req), "--out", str(tmp_path / "o"), "--draws", "2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("size-mitigation: 2. per-GPU options"):
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=300)
    err = "".join(seen) + err
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "size-mitigation: interrupted after " in err
    assert "INTERRUPTED" in out
    assert (tmp_path / "o" / "mitigation_options.csv").exists()


def test_per_draw_checks_show_the_forecast_and_the_draws_done(capsys):
    """``for_each_draw`` (what ``comply`` and the study package run): the forecast's size
    and draws, then the draws ``fn`` has done; nothing with progress=False or within
    ``quiet()`` (what ``powerlab comply --quiet`` wraps around ``comply``)."""
    from powerlab._progress import quiet
    from powerlab.interconnect.compliance import comply
    from powerlab.interconnect.powertrace import for_each_draw

    sc, sp, _ = _sizing_site()

    def fn(dp):
        return {"peak_w": float(dp.facility_w.max())}

    shown = for_each_draw(sc, fn, draws=2, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("forecast: 24,000 ticks of 0.1 s x 2 draws")
    assert err[-1].startswith("per-draw checks  2/2 draws  100%")
    import pandas as pd

    pd.testing.assert_frame_equal(for_each_draw(sc, fn, draws=2), shown)
    with quiet():
        for_each_draw(sc, fn, draws=2, progress=True)
        comply(sc, sp, draws=2)
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_in_a_jupyter_kernel_the_progress_is_one_output_updated_in_place(tmp_path):
    """A real kernel (nbclient, as tests/system/test_notebooks.py runs them): the progress is one
    display output (an HTML progress bar) that update_display messages rewrite, ending at
    the last status, with the announcement and phases in it; nothing on stderr.  Outside
    a kernel (this test process) it is text."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from .conftest import REPO

    code = (f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
            "from powerlab._progress import Progress, in_jupyter_kernel\n"
            "print(in_jupyter_kernel())\n"
            "with Progress(40, 'demo', 'step', min_interval_s=0) as bar:\n"
            "    bar.announce('40 steps of a test')\n"
            "    bar.phase('second half')\n"
            "    for _ in range(40):\n"
            "        bar.update()\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                            record_timing=False).execute()
    outs = nb.cells[0].outputs
    assert [o.get("text") for o in outs if o.output_type == "stream"] == ["True\n"]
    shown = [o for o in outs if o.output_type == "display_data"]
    assert len(shown) == 1                       # one output, redrawn 40 times in place
    html_text = shown[0]["data"]["text/html"]
    plain = shown[0]["data"]["text/plain"].splitlines()
    assert plain[:2] == ["demo: 40 steps of a test", "demo: second half"]
    assert plain[-1].startswith("demo  40/40 steps  100%") and "in all" in plain[-1]
    assert "40 steps of a test" in html_text and "<progress" not in html_text  # closed
    from powerlab._progress import in_jupyter_kernel

    assert not in_jupyter_kernel() and Progress(3, "x").notebook is False


def test_notebook_mode_draws_a_bar_and_redraws_it(monkeypatch):
    """The notebook output without a kernel: IPython's display functions recorded."""
    pytest.importorskip("IPython")
    import IPython.display as ipd

    calls = []

    class Handle:
        display_id = "abc"

    monkeypatch.setattr(ipd, "display", lambda data, **kw: calls.append(("new", data))
                        or Handle())
    monkeypatch.setattr(ipd, "update_display",
                        lambda data, **kw: calls.append(("update", data, kw["display_id"])))
    clock = Clock()
    with Progress(4, "search", "option", notebook=True, clock=clock,
                  min_interval_s=1.0) as bar:
        bar.announce("4 options")
        for _ in range(4):
            clock.t += 0.6
            bar.update()
    assert calls[0][0] == "new" and all(c[0] == "update" and c[2] == "abc"
                                        for c in calls[1:])
    assert '<progress value="0" max="4"' in calls[0][1]["text/html"]
    # 0.6 s apart at most every 1 s: options 1 (first), 3 and 4 (the last) redraw
    bars = [c[1]["text/html"] for c in calls if "<progress" in c[1]["text/html"]]
    assert [b.split('value="')[1].split('"')[0] for b in bars] == ["0", "1", "3", "4"]
    assert calls[-1][1]["text/plain"].splitlines()[-1].startswith("search  4/4 options")


def test_facilities_table_shows_its_steps_or_nothing(capsys):
    """The facilities table of a forecast (a minute or more for 54 days x 20 draws):
    its size, a line per boundary and the steps done; quiet by default."""
    from powerlab.site.engine import forecast
    from powerlab.site.export import facilities_frame
    from powerlab.site.scenario import read_scenario

    from .conftest import REPO

    res = forecast(read_scenario(REPO / "data" / "scenarios" / "small.yaml"), draws=2)
    quiet = facilities_frame(res, "15min")
    assert capsys.readouterr().err == ""
    shown = facilities_frame(res, "15min", progress=True)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("facilities table: 72,000 ticks x 2 draws x 2 boundaries: 12 steps")
    assert [ln for ln in err if ln.endswith(" power")] == [
        "facilities table: facility power", "facilities table: it power"]
    assert err[-1].startswith("facilities table  12/12 steps  100%")
    import pandas as pd

    pd.testing.assert_frame_equal(quiet, shown)     # progress changes nothing computed


def test_forecast_metrics_show_progress_when_asked(capsys):
    """``ForecastResult.metrics`` (swings and spectra of every draw, what ``summary()``
    needs: 15 min for 54 days x 20 draws): its size and draws done, or nothing."""
    from powerlab.site.engine import forecast
    from powerlab.site.scenario import read_scenario

    from .conftest import REPO

    sc = read_scenario(REPO / "data" / "scenarios" / "small.yaml")
    res = forecast(sc, draws=2)
    res.metrics_progress = True
    shown = res.metrics
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("forecast metrics: swings and spectra of 72,000 ticks x 2 "
                             "draws x 2 boundaries; about ")
    assert err[-1].startswith("forecast metrics  4/4 draws  100%")
    quiet = forecast(sc, draws=2)          # the estimate is well under 2 s: quiet
    import pandas as pd

    pd.testing.assert_frame_equal(quiet.metrics, shown)
    assert capsys.readouterr().err == ""
