"""A real JupyterLab server on loopback lists and serves the project's notebooks."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = ["01_collect_and_explore.ipynb", "02_time_of_day_dvfs.ipynb",
             "03_power_swing_forecast.ipynb", "04_facilities_export.ipynb"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str | None, timeout: float = 10.0):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"token {token}")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jupyter")
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
               JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTER_NO_CONFIG="1")
    log = open(tmp / "server.log", "w+")  # noqa: SIM115 - closed after the server stops
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={REPO}",
         "--ServerApp.open_browser=False",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--ServerApp.allow_remote_access=False",
         *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    ready = False
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if _get(f"{base}/api/status", token, timeout=2)[0] == 200:
                ready = True
                break
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.3)
    if not ready:
        proc.kill()
        proc.wait()
        log.seek(0)
        pytest.fail("JupyterLab did not start:\n" + log.read()[-3000:])
    yield base, token, proc
    try:  # ask politely, as a user's "Shut Down" would
        req = urllib.request.Request(f"{base}/api/shutdown", method="POST", data=b"")
        req.add_header("Authorization", f"token {token}")
        urllib.request.urlopen(req, timeout=10).read()
        proc.wait(timeout=30)
    except (OSError, urllib.error.URLError, subprocess.TimeoutExpired):
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log.close()


@pytest.mark.slow
def test_lists_the_notebooks(server):
    base, token, _ = server
    status, ctype, body = _get(f"{base}/api/contents/notebooks?content=1", token)
    assert status == 200 and "json" in ctype
    listing = json.loads(body)
    assert listing["type"] == "directory"
    names = {item["name"]: item["type"] for item in listing["content"]}
    for nb in NOTEBOOKS:
        assert names.get(nb) == "notebook", f"{nb} not listed: {sorted(names)}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_serves_each_notebook(server, name):
    base, token, _ = server
    status, _, body = _get(f"{base}/api/contents/notebooks/{name}?content=1", token)
    model = json.loads(body)
    assert status == 200 and model["type"] == "notebook" and model["format"] == "json"
    cells = model["content"]["cells"]
    on_disk = json.loads((REPO / "notebooks" / name).read_text(encoding="utf-8"))
    assert len(cells) == len(on_disk["cells"]) > 3
    assert cells[0]["cell_type"] == "markdown"
    assert any(c["cell_type"] == "code" for c in cells)


def test_lab_ui_and_auth(server):
    base, token, proc = server
    status, ctype, body = _get(f"{base}/lab/tree/notebooks/{NOTEBOOKS[0]}", token)
    assert status == 200 and "html" in ctype and b"JupyterLab" in body
    with pytest.raises(urllib.error.HTTPError) as err:  # no token, no notebooks
        _get(f"{base}/api/contents/notebooks", None)
    assert err.value.code == 403
    assert proc.poll() is None
