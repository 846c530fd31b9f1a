"""The notebooks run top to bottom from a fresh kernel, on data in data/, and are stored
with their outputs stripped.

All notebooks are executed once per session, in parallel subprocesses (nbclient, kernel
``python3``: the venv's own interpreter), and each is then checked on its own.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from powerlab.viz.render import VEGA_MIME

REPO = Path(__file__).resolve().parents[2]
NB_DIR = REPO / "notebooks"
NOTEBOOKS = ["01_collect_and_explore.ipynb", "02_time_of_day_dvfs.ipynb",
             "03_power_swing_forecast.ipynb", "04_facilities_export.ipynb",
             "05_interconnection_planner.ipynb", "06_reliability.ipynb",
             "08_calibrate_backtest_b200.ipynb", "09_flexibility.ipynb",
             "10_journey.ipynb"]
# 07 runs a real Prometheus server and the collector on the fake NVML library (built
# with a C compiler); .ci/run installs the server
PROMETHEUS_NB = "07_prometheus_jobs.ipynb"
PROMETHEUS_OK = bool(shutil.which("prometheus") and (shutil.which("cc") or shutil.which("gcc")))
ALL_NOTEBOOKS = [*NOTEBOOKS, PROMETHEUS_NB]
if PROMETHEUS_OK:
    NOTEBOOKS = ALL_NOTEBOOKS

_RUNNER = textwrap.dedent("""
    import json, sys, tempfile, time
    from pathlib import Path
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    src, dst, meta = sys.argv[1:4]
    nb = nbformat.read(src, as_version=4)
    # probe: which interpreter runs the kernel
    nb.cells.append(nbformat.v4.new_code_cell(
        "import sys, os, powerlab; print('KERNEL', sys.executable); "
        "print('POWERLAB', os.path.dirname(powerlab.__file__))"))
    t0 = time.perf_counter()
    error = None
    try:
        # kernels talk over private IPC sockets, not TCP ports: notebooks run in parallel
        # and 07 starts servers of its own, so TCP ports picked by bind-and-release race
        ipc = Path(tempfile.mkdtemp(prefix="nb-kernel-")) / "kernel"
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(ipc))
        NotebookClient(nb, km=km, kernel_name="python3", timeout=240,
                       resources={"metadata": {"path": sys.argv[4]}}).execute()
    except CellExecutionError as exc:
        error = str(exc)[-4000:]
    nbformat.write(nb, dst)
    with open(meta, "w") as fh:
        json.dump({"seconds": time.perf_counter() - t0, "error": error}, fh)
""")


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> dict[str, tuple[nbformat.NotebookNode, dict]]:
    tmp = tmp_path_factory.mktemp("notebooks")
    # the kernels import the powerlab of this checkout, whatever else is installed (a
    # worktree beside an editable install of another checkout ran that one's code)
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    procs = {}
    t0 = time.perf_counter()
    for name in NOTEBOOKS:
        dst, meta = tmp / name, tmp / f"{name}.json"
        procs[name] = (subprocess.Popen(
            [sys.executable, "-c", _RUNNER, str(NB_DIR / name), str(dst), str(meta),
             str(NB_DIR)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=env),
            dst, meta)
    out = {}
    for name, (proc, dst, meta) in procs.items():
        log, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{name}: runner failed\n{log[-3000:]}"
        out[name] = (nbformat.read(dst, as_version=4), json.loads(meta.read_text()))
    wall = time.perf_counter() - t0
    each = ", ".join(f"{n[:2]} {m['seconds']:.1f} s {len(nbformat.writes(nb)) / 1e6:.2f} MB"
                     for n, (nb, m) in out.items())
    print(f"\nnotebook execution (parallel, wall {wall:.1f} s): {each}")
    return out


def _stdout(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.get("name") == "stdout")


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(executed, name):
    nb, meta = executed[name]
    assert meta["error"] is None, meta["error"]
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    errors = [o for c in code for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    outputs = [o for c in code for o in c.get("outputs", [])
               if o.output_type in ("display_data", "execute_result")]
    charts = [o for o in outputs if VEGA_MIME in o.data]
    assert charts, "a notebook shows at least one chart"
    # every chart: a Vega spec JupyterLab draws natively (trusted or not) and a PNG that
    # static viewers show; no JavaScript in any output, nothing from a CDN (issue 33)
    for o in charts:
        assert o.data[VEGA_MIME]["$schema"].startswith("https://vega.github.io/schema/vega/")
        assert base64.b64decode(o.data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not any("<script" in str(o.data.get("text/html", "")) for o in outputs)
    assert not any("cdn.jsdelivr" in json.dumps(o.data) for o in outputs)
    # an executed notebook stays small: a chart output is its Vega spec (the data it
    # draws) and a PNG of it, 0.1-0.6 MB together (the timeline of 03: 0.57 MB); issue 25
    # found 1.2-5 MB when every output carried the 0.9 MB JavaScript bundle
    for o in charts:
        one = len(o.data[VEGA_MIME].__repr__()) + len(o.data["image/png"])
        assert one < 700_000, f"{name}: one chart output is {one / 1e6:.2f} MB"
    size = len(nbformat.writes(nb).encode())
    budget = 350_000 + 300_000 * len(charts)
    assert size < budget, f"{name}: executed notebook is {size / 1e6:.2f} MB"
    # the kernel was this venv's interpreter, importing this checkout's powerlab
    assert f"KERNEL {sys.executable}" in _stdout(nb)
    assert f"POWERLAB {REPO / 'powerlab'}" in _stdout(nb)


def test_notebooks_read_like_reports():
    for name in ALL_NOTEBOOKS:
        nb = nbformat.read(NB_DIR / name, as_version=4)
        first = nb.cells[0]
        assert first.cell_type == "markdown"
        assert "**Question.**" in first.source and "**Method.**" in first.source
        assert "**Answer.**" in nb.cells[-1].source


def test_prometheus_notebook_runs_where_its_server_is():
    if not PROMETHEUS_OK:
        pytest.skip("notebook 07 needs the prometheus server (Debian package prometheus; "
                    ".ci/run installs it) and a C compiler for the simulated NVML library")
    assert PROMETHEUS_NB in NOTEBOOKS


def test_notebooks_are_stored_without_outputs():
    for name in ALL_NOTEBOOKS:
        nb = nbformat.read(NB_DIR / name, as_version=4)
        nbformat.validate(nb)
        for c in nb.cells:
            if c.cell_type == "code":
                assert c.outputs == [] and c.execution_count is None, name
        assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.slow
def test_numbers_answer_the_questions(executed):
    """Each notebook prints the number that answers its question; spot-check them."""
    out1 = _stdout(executed["01_collect_and_explore.ipynb"][0])
    assert "read back identical" in out1 and "gaps longer than 5 s: 0" in out1
    # the integrated node energy matches the submission's own meter (415.22 kWh)
    pct = float(out1.split("kWh metered (")[1].split(" %")[0])
    assert abs(pct) < 1.0
    out4 = _stdout(executed["04_facilities_export.ipynb"][0])
    assert "within rounding: True; times identical: True" in out4
    out5 = _stdout(executed["05_interconnection_planner.ipynb"][0])
    assert "FAIL: 6 of 6 requirements fail" in out5 and "Cheapest passing option" in out5
    assert "cheapest option passes on draw 1: True" in out5
    assert "Large-load study package" in out5 and "COMTRADE read back" in out5
    if PROMETHEUS_OK:
        out7 = _stdout(executed[PROMETHEUS_NB][0])
        # both routes agree with the collectors' 100-ms records within the bounds the run
        # derives from its own scrape and tick gaps (no wall-clock assumption)
        assert "both within their sampling bounds: True" in out7, out7
    out8 = _stdout(executed["08_calibrate_backtest_b200.ipynb"][0])
    assert "within the targets (2 %, 2 %, 3 %): True" in out8, out8
    out6 = _stdout(executed["06_reliability.ipynb"][0])
    assert "for 3 of 4 GPU causes with failures" in out6
    assert "inside its 95 % interval in 39 of 40 fleets" in out6
    assert "a 16,384-GPU job: interrupted every 2.98 h" in out6
    assert "443 interruptions per draw (range 398-465), effective training time 92.2%" in out6


@pytest.mark.slow
def test_flexibility_notebook_answers(executed):
    """Notebook 08 prints the figures of issue 23."""
    out8 = _stdout(executed["09_flexibility.ipynb"][0])
    # the curve's cost on held-out limits is within 10 % of the twin's truth
    assert float(out8.split("held-out cost error: at most ")[1].split(" %")[0]) <= 10.0
    assert "Cheapest >= 25 % within 30 s for 3 h: power_cap" in out8
    assert "Targets met in every draw: 200 of 200" in out8
    assert out8.count("Verdict: every target met, no ramp violated") == 2


def test_notebooks_import_nothing_from_the_tests():
    """What a notebook needs ships in the package (e.g. the simulated NVML library in
    powerlab.collect.fake), so it runs from an installed powerlab without this checkout's
    tests/ folder."""
    import tomllib

    for name in ALL_NOTEBOOKS:
        nb = nbformat.read(NB_DIR / name, as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "from tests" not in code and "import tests" not in code, name
    from powerlab.collect import fake

    assert fake.SOURCE.is_file() and fake.SOURCE.parent == REPO / "powerlab" / "collect"
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "collect/fake_nvml.c" in data["package-data"]["powerlab"]


def _lab_server(root: Path, tmp: Path):
    """A JupyterLab server on loopback serving ``root``, with a fresh trust database (so
    every notebook opens untrusted) and cells rendered whether in view or not."""
    import os
    import secrets
    import socket
    import urllib.request

    settings = tmp / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
               JUPYTER_DATA_DIR=str(tmp / "data"), JUPYTER_CONFIG_DIR=str(tmp / "config"),
               JUPYTER_NO_CONFIG="1")
    log = open(tmp / "server.log", "w+")  # noqa: SIM115 - closed by the caller
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         f"--LabApp.user_settings_dir={tmp / 'settings'}",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--ServerApp.allow_remote_access=False", "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            req = urllib.request.Request(f"{base}/api/status",
                                         headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status == 200:
                    return proc, log, base, token
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.3)
    proc.kill()
    log.seek(0)
    pytest.fail("JupyterLab did not start:\n" + log.read()[-3000:])


_LAB_CHARTS = """JSON.stringify({
  cells: document.querySelectorAll('.jp-Notebook .jp-Cell').length,
  vega: Array.from(document.querySelectorAll('.jp-RenderedVegaCommon5')).map(function (d) {
    var s = d.querySelector('svg');
    return s ? s.querySelectorAll('path, rect, line, text, circle').length : 0; }),
  img: document.querySelectorAll('.jp-RenderedImage img').length,
  trusted_script_ran: window.__powerlabUntrustedProbe === 1})"""


@pytest.mark.slow
def test_executed_notebooks_show_every_chart_untrusted_in_jupyterlab(executed, tmp_path):
    """Issue 33: executed notebooks opened *untrusted* in JupyterLab showed blank charts
    (HTML with inline JavaScript is not run there).  Each executed notebook is opened in
    a real JupyterLab in headless Chromium, with a fresh trust database; every chart
    output must draw as a Vega SVG with marks.  A probe output with a script proves the
    notebook really is untrusted (its script must not run)."""
    from tests.viz.test_report_browser import Browser, _find_chromium

    exe = _find_chromium()
    if exe is None:
        pytest.skip("no Chromium executable found (install Debian's 'chromium' package)")
    root = tmp_path / "root"
    root.mkdir()
    expected = {}
    for name, (nb, _) in executed.items():
        nb = nbformat.reads(nbformat.writes(nb), as_version=4)  # a copy
        nb.cells.append(nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output(
            "display_data", data={"text/html": "<b>probe</b><script>"
                                  "window.__powerlabUntrustedProbe = 1</script>"})]))
        nbformat.write(nb, root / name)
        # every chart output, whatever its representation, says what it is in text/plain
        expected[name] = sum(str(o.get("data", {}).get("text/plain", "")).startswith(
            "<powerlab chart") for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []))
        assert expected[name] > 0, name
    proc, log, base, token = _lab_server(root, tmp_path)
    browser = Browser(exe, tmp_path / "profile", allow_loopback=True)
    try:
        for name, n in expected.items():
            cdp = browser.page()
            try:
                cdp.call("Page.enable")
                cdp.call("Page.navigate", url=f"{base}/lab/tree/{name}?token={token}")
                seen = {}
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    seen = json.loads(cdp.evaluate(_LAB_CHARTS))
                    if len(seen["vega"]) >= n and all(m > 10 for m in seen["vega"]):
                        break
                    time.sleep(0.5)
            finally:
                cdp.close()
            assert seen.get("trusted_script_ran") is False, (name, seen)
            # at least one drawn rendering per chart output, and every rendering drawn (a
            # blank chart draws none: the old renderer gave 0); notebook 03 showed 7
            # renderings for its 4 chart outputs, why is not known (not investigated)
            assert len(seen["vega"]) >= n and all(m > 10 for m in seen["vega"]), (name, seen)
    finally:
        browser.close()
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
