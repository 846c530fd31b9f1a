"""``powerlab demo``: runs on the bundled data alone and writes the CSV, sidecar and an
HTML report that renders offline in a real headless Chromium.

The demo runs once (through the CLI, shortened with --hours/--draws to keep CI fast; the
chart kinds and steps are the same as the default run).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from powerlab import cli
from powerlab.site.export import facilities_columns
from powerlab.site.export_reader import read_facilities_csv

from ..viz.test_report_browser import Browser, _find_chromium, assert_rendered, open_report

HOURS, DRAWS = 2, 3


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "new" / "nested" / "out"  # created with parents
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        rc = cli.main(["demo", "--out", str(out), "--hours", str(HOURS),
                       "--draws", str(DRAWS)])
    assert rc == 0, stderr.getvalue()
    return out, stdout.getvalue(), stderr.getvalue()


@pytest.mark.slow
def test_outputs_and_progress(demo):
    out, stdout, stderr = demo
    names = sorted(p.name for p in out.iterdir())
    assert names == ["facilities_forecast.csv", "facilities_forecast.json",
                     "powerlab_demo_report.html", "study_package"]
    steps = re.findall(r"^\[(\d)/9\] .* \d+\.\d s$", stderr, flags=re.MULTILINE)
    assert steps == [str(i) for i in range(1, 10)], stderr
    assert "report" in stdout and str(out / "powerlab_demo_report.html") in stdout


@pytest.mark.slow
def test_facilities_csv_and_sidecar(demo):
    out, stdout, _ = demo
    df = read_facilities_csv(out / "facilities_forecast.csv")
    side = json.loads((out / "facilities_forecast.json").read_text())
    assert list(df.columns) == facilities_columns(side["time_zone"])
    assert len(df) == 60 * HOURS
    fac = df.rename(columns=lambda c: c.replace("facility_power", "power"))
    assert fac["interval_start_utc"].iloc[0] == pd.Timestamp("2025-07-01T00:00:00Z")
    assert (fac["interval_end_utc"].iloc[-1] - fac["interval_start_utc"].iloc[0]
            == pd.Timedelta(hours=HOURS))
    assert (fac["power_megawatts_min"] <= fac["power_megawatts_mean"] + 1e-9).all()
    assert (fac["power_megawatts_mean"] <= fac["power_megawatts_max"] + 1e-9).all()
    # 16,384 GPUs: above all-idle (75 W each), below everything at TDP with PUE 2
    assert 16_384 * 75 / 1e6 < fac["power_megawatts_mean"].min()
    assert fac["power_megawatts_max"].max() < 16_384 * 700 * 2 / 1e6
    peak = float(re.search(r"peak facility power\s+([\d.]+) MW", stdout).group(1))
    assert fac["power_megawatts_mean"].max() - 0.05 <= peak <= fac["power_megawatts_max"].max() + 0.05
    assert side["columns"] == facilities_columns(side["time_zone"])
    assert side["draws"] == DRAWS and side["resolution_s"] == 60.0
    job = side["scenario"]["jobs"][0]
    assert job["gpus"] == 16_384 and "calibrated" in side["scenario_name"]
    # the calibrated step time agrees with the real training log's step timings
    # (train_step_timing 10.37-10.67 s in the MLPerf log, README of data/)
    assert 10.2 < job["step_time_s"] < 11.0


@pytest.fixture(scope="module")
def measured_node_power(mlperf_gpt3):
    """Node power of the MLPerf GPT-3 run, computed here without fit_profile: the mean of
    each node's readings while training (from 15 s after an evaluation to 3 s before the
    next), and the median of its readings above that mean (computing), averaged over
    nodes [W]."""
    power, log = mlperf_gpt3
    ev = log.evals
    t = power["timestamp"]
    train = (t > log.run_start + pd.Timedelta(seconds=15)) & (t < log.run_stop)
    for a, d in zip(ev["start"], ev["duration_s"]):
        b = a + pd.Timedelta(seconds=float(d))
        train &= ~((t > a - pd.Timedelta(seconds=3)) & (t < b + pd.Timedelta(seconds=15)))
    p = power[train]
    mean = p.groupby("host")["power_w"].mean()
    high = p[p["power_w"] > p["host"].map(mean)].groupby("host")["power_w"].median()
    return {"nodes": len(mean), "train_mean_w": mean.mean(), "compute_w": high.mean()}


@pytest.mark.slow
def test_scenario_reproduces_the_measured_node_power(demo, measured_node_power):
    out, _, _ = demo
    meas = measured_node_power
    assert meas["nodes"] == 64 and 6800 < meas["train_mean_w"] < 7000  # ~6.9 kW
    side = json.loads((out / "facilities_forecast.json").read_text())
    hw, job = side["scenario"]["hardware"], side["scenario"]["jobs"][0]
    node = lambda gpu_w: hw["node_overhead_w"] + hw["gpus_per_node"] * gpu_w
    compute, dip = node(job["compute_w"]), node(job["comm_w"])
    mean = job["compute_fraction"] * compute + (1 - job["compute_fraction"]) * dip
    assert compute == pytest.approx(meas["compute_w"], rel=0.03)
    assert mean == pytest.approx(meas["train_mean_w"], rel=0.03)
    # the split is the stated prior, inside what the data allow
    assert hw["node_overhead_w"] == 2500.0 and hw["gpus_per_node"] == 8
    # end to end: the forecast's IT power per node in a training minute, and with every
    # GPU computing, is the measured node power (the headline peak comes from it)
    df = read_facilities_csv(out / "facilities_forecast.csv")
    nodes = 16_384 // 8
    assert df["it_power_megawatts_mean"].max() * 1e6 / nodes == pytest.approx(
        meas["train_mean_w"], rel=0.03)
    assert df["it_power_megawatts_max"].max() * 1e6 / nodes == pytest.approx(
        meas["compute_w"], rel=0.03)


@pytest.mark.slow
def test_report_is_self_contained(demo):
    out, _, _ = demo
    html = (out / "powerlab_demo_report.html").read_text(encoding="utf-8")
    n = html.count('class="pl-chart"')
    assert n >= 8
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']?https?:", html)
    assert "Apache License" in html and "MIT licence" in html
    # calibration: node levels with their intervals, the split as a stated prior
    assert "node power, computing" in html and "besides the GPUs (prior)" in html
    assert "lower bound" in html
    assert "window.vegaEmbed" in html


@pytest.mark.slow
def test_report_has_the_interconnection_section(demo):
    """Issue 13 item 7: which limits the 16k site fails, the cheapest fix and its cost,
    the resonance table."""
    out, _, stderr = demo
    html = (out / "powerlab_demo_report.html").read_text(encoding="utf-8")
    assert "3b. Interconnection requirements" in html
    assert "choukse2025-forms-illustrative" in html
    for name in ("ramp_up_1s", "dynamic_range_10s", "oscillation_0p1_2hz", "largest_step"):
        assert name in html, name
    assert "requirements fail" in html
    assert "cheapest passing mitigation" in html and "/day" in html
    assert "engine runs / option evaluations" in html
    assert "Resonance screening" in html
    t = re.search(r"^\[\d/9\] checking interconnection.* (\d+\.\d) s$", stderr,
                  flags=re.MULTILINE)
    assert t is not None, stderr


@pytest.mark.slow
def test_study_package_of_the_16k_scenario(demo):
    """Issue 20 section 2: the demo writes the large-load study package of the bundled
    16k-GPU scenario: figures with definitions and exceedance probabilities, the playback
    files (PSCAD, PowerFactory, COMTRADE) and the printable page."""
    out, _, _ = demo
    pkg = out / "study_package"
    figs = pd.read_csv(pkg / "figures.csv")
    assert {"figure", "value", "unit", "exceed_probability", "definition",
            "source"} <= set(figs.columns)
    peak = figs[figs["figure"] == "peak_power_megawatts"]["value"].max()
    assert 15 < peak < 30          # 16,384 H100s with their nodes and cooling: ~22 MW
    for name in ("playback_short_pscad.txt", "playback_short_powerfactory.txt",
                 "playback_short_comtrade.cfg", "playback_short_comtrade.dat",
                 "ride_through.csv", "energisation_schedule.csv", "pmu.csv"):
        assert (pkg / name).stat().st_size > 0, name
    page = (pkg / "study_package.html").read_text(encoding="utf-8")
    assert "llama3-like-16k-h100" in page and "@media print" in page


@pytest.mark.slow
def test_report_renders_offline_in_chromium(demo, tmp_path):
    exe = _find_chromium()
    if exe is None:
        pytest.skip("no Chromium executable found (install Debian's 'chromium' package or "
                    "set POWERLAB_CHROMIUM)")
    out, _, _ = demo
    path = out / "powerlab_demo_report.html"
    n = path.read_text(encoding="utf-8").count('class="pl-chart"')
    browser = Browser(exe, tmp_path / "profile")
    try:
        result = open_report(browser, path)
    finally:
        browser.close()
    assert_rendered(result, n)


def test_cli_rejects_bad_options(capsys, tmp_path):
    assert cli.main(["demo", "--out", str(tmp_path), "--hours", "0"]) == 2
    assert "argument --hours: 0 is outside more than 0 to 8784 h" in capsys.readouterr().err
    assert not any(Path(tmp_path).iterdir())


def _demo_error(out: Path, capsys) -> str:
    rc = cli.main(["demo", "--out", str(out), "--hours", "1", "--draws", "1"])
    captured = capsys.readouterr()
    assert rc == 2, captured
    assert not re.search(r"\[1/\d+\]", captured.err)  # refused before any work
    assert "Traceback" not in captured.err
    return captured.err


def test_out_is_a_file_gives_a_clear_error(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    err = _demo_error(afile, capsys)
    assert f"output folder {afile} is a file, not a folder" in err
    err = _demo_error(afile / "sub", capsys)  # a file where a parent folder should be
    assert "cannot write to the output folder" in err and str(afile / "sub") in err
    assert afile.read_text() == "x"


def test_read_only_out_gives_a_clear_error(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        try:
            (ro / "probe").write_text("x")
        except PermissionError:
            enforced = True
        else:
            enforced = False
        if not enforced:
            # root ignores folder modes; /sys refuses new entries even to root on Linux
            ro = Path("/sys/powerlab-demo-test-out")
            try:
                ro.mkdir()
            except OSError:
                pass
            else:  # pragma: no cover - a writable /sys
                ro.rmdir()
                pytest.skip("no read-only folder available to this user (root)")
            err = _demo_error(ro, capsys)
            assert f"cannot write to the output folder {ro}" in err
            return
        err = _demo_error(ro, capsys)
        assert "cannot write to the output folder" in err and "Permission denied" in err
        err = _demo_error(ro / "new" / "nested", capsys)
        assert "cannot write to the output folder" in err
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_existing_folder_is_reused(tmp_path):
    from powerlab.demo.chain import _writable_folder

    (tmp_path / "keep.txt").write_text("mine")
    assert _writable_folder(tmp_path) == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]  # no probe left


def test_the_demo_imports_without_the_chart_extra():
    """The demo's modules import what they use at their top, but altair only on use (the
    viz wing resolves its charts lazily): ``from powerlab.demo import demo_scenario``
    works without ``powerlab[charts]``, and ``powerlab demo`` says what to install."""
    import subprocess
    import sys

    code = ("import sys\nimport powerlab.demo\n"
            "print(sorted({'altair', 'vl_convert'} & set(sys.modules)))\n"
            "print(powerlab.demo.run_demo.__module__, powerlab.demo.demo_scenario.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == "powerlab.demo.chain powerlab.demo.forecast"
