# ruff: noqa: F811  (pytest fixtures imported from tests/support/fake_nvml_util.py)
"""The /metrics endpoint under hostile local clients (issue 24), with real sockets on
127.0.0.1 only: clients that pipeline requests and never read their replies cannot take it
down, a scrape never renders (an immutable snapshot per collection), /health says when the
collection is missing or stale, and SIGINT ends ``powerlab collect`` without a traceback.
Every loop here is bounded (counts and socket timeouts), nothing waits on luck."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from powerlab.collect.metrics import MetricsServer

from ..support.fake_nvml_util import fake_env, fake_libdir, write_scenario  # noqa: F401

pytestmark = pytest.mark.bad_input("collector")

BODY = b"# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n" + b"x" * 200_000 + b"\n"


def _get(port: int, path: str = "/metrics", timeout: float = 10.0):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.status, r.read()


def _status(port: int, path: str) -> int:
    try:
        return _get(port, path)[0]
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def server():
    made = []

    def make(**kw):
        kw.setdefault("render", lambda: BODY)
        srv = MetricsServer(port=0, **kw)
        made.append(srv)
        return srv

    yield make
    for srv in made:
        srv.shutdown()
        srv.server_close()


def test_70_pipelining_clients_that_never_read_cannot_take_metrics_down(server):
    srv = server(write_timeout_s=1.0, refresh_s=0.2)
    socks = []
    try:
        for _ in range(70):
            s = socket.create_connection(("127.0.0.1", srv.server_port), 5)
            s.setblocking(False)
            socks.append(s)
        req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 2000
        for _ in range(3):                  # fill what the server will take; never read
            for s in socks:
                try:
                    s.send(req)
                except (BlockingIOError, ConnectionError):
                    pass
        for _ in range(3):                  # a scrape gets through while they sit there
            status, body = _get(srv.server_port)
            assert status == 200 and body == BODY
    finally:
        for s in socks:
            s.close()
    status, body = _get(srv.server_port)    # and at once after they are gone
    assert status == 200 and body == BODY


def test_a_client_stuck_in_a_write_is_evicted_for_a_new_scraper(server):
    """At the connection limit with no idle connection, the one stuck longest in a write
    makes room (the old server closed the newcomer instead)."""
    srv = server(max_connections=2, write_timeout_s=30.0, refresh_s=60.0)
    stuck = []
    for _ in range(2):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", srv.server_port))
        s.setblocking(False)
        stuck.append(s)
    try:
        req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 200
        for s in stuck:
            s.send(req)
        deadline = time.monotonic() + 10
        while len(srv._writing) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(srv._writing) == 2            # both stuck: nobody reads the replies
        status, body = _get(srv.server_port)
        assert status == 200 and body == BODY and srv.evicted >= 1
    finally:
        for s in stuck:
            s.close()


def test_a_scrape_serves_the_snapshot_and_never_renders(server):
    calls = []

    def render():
        calls.append(1)
        return BODY

    srv = server(render=render, refresh_s=60.0)
    for _ in range(30):
        assert _get(srv.server_port)[1] == BODY
    assert len(calls) == 1                 # once per refresh, not once per scrape


def test_a_failing_render_keeps_the_last_snapshot_and_is_counted(server):
    state = {"fail": False}

    def render():
        if state["fail"]:
            raise RuntimeError("boom")
        return BODY

    srv = server(render=render, refresh_s=60.0)
    assert _get(srv.server_port)[1] == BODY
    state["fail"] = True
    srv._refresh()
    assert srv.render_errors == 1 and _get(srv.server_port)[1] == BODY


def test_health_before_the_first_collection_fresh_and_stale(server):
    last = {"t": None}
    srv = server(refresh_s=0.1, stale_s=0.3, last_collection=lambda: last["t"])
    assert _status(srv.server_port, "/health") == 503         # no collection yet
    last["t"] = time.monotonic()
    assert _status(srv.server_port, "/health") == 200
    last["t"] = time.monotonic() - 1.0                        # > 3 intervals ago
    assert _status(srv.server_port, "/health") == 503
    assert _status(srv.server_port, "/nope") == 404


def test_collect_with_metrics_ends_on_sigint_without_a_traceback(fake_libdir, tmp_path):
    env = fake_env(fake_libdir, write_scenario(tmp_path / "s.txt", {"gpus": 1}))
    p = subprocess.Popen([sys.executable, "-m", "powerlab.cli", "collect", "--out",
                          str(tmp_path / "st"), "--interval-s", "0.05", "--prometheus-port",
                          "0", "--duration-s", "60"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        assert "sampling" in line, line
        port = int(line.split("/metrics on port ")[1].split(";")[0])
        deadline = time.monotonic() + 10
        while _status(port, "/health") != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _status(port, "/health") == 200
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "Traceback" not in err and "stopped by SIGINT" in err
