"""powerlab.iotools.read_prometheus against a real Prometheus server.

The server (Debian's ``prometheus`` package; ``.ci/run`` installs it) runs on the loopback
with a temporary data folder and scrapes powerlab's own collector, which samples the fake
NVML library: collector -> /metrics -> Prometheus -> query_range -> read_prometheus must
give back the collector's own samples at the scrape resolution.
"""

# ruff: noqa: F811  (pytest fixtures imported from tests/support/fake_nvml_util.py)
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import numpy as np
import pandas as pd
import pytest

from powerlab.collect.collector import Collector
from powerlab.exceptions import PowerlabError
from powerlab.iotools import read_prometheus
from powerlab.telemetry.schema import validate
from powerlab.telemetry.store import read_store

from ..support.fake_nvml_util import fake_libdir, fake_nvml  # noqa: F401  (fixtures)
from ..support.load_probe import SchedulingProbe

PROMETHEUS = shutil.which("prometheus")
SCRAPE_S = 0.5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prometheus_server(tmp_path):
    """Start Prometheus on the loopback; yields ``(url, set_target)``."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus server binary is not installed "
                    "(Debian: apt-get install prometheus; .ci/run installs it)")
    procs = []

    def start(target_port: int) -> str:
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(f"""
global:
  scrape_interval: {int(SCRAPE_S * 1000)}ms
  scrape_timeout: {int(SCRAPE_S * 1000)}ms
scrape_configs:
  - job_name: powerlab
    static_configs:
      - targets: ["127.0.0.1:{target_port}"]
""")
        port = _free_port()
        p = subprocess.Popen(
            [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(p)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:  # ready, and the target scraped once (the
            if p.poll() is not None:        # scrape manager starts about 5 s after ready)
                pytest.fail("prometheus exited: " + p.stderr.read().decode()[-2000:])
            try:
                q = urllib.request.urlopen(url + "/api/v1/query?query=up", timeout=1).read()
                if b'"value"' in q and b'"1"]' in q:
                    return url
            except OSError:
                pass
            time.sleep(0.2)
        pytest.fail("prometheus did not scrape its target within 40 s")

    yield start
    for p in procs:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


def _scrape_times(url: str, start, end, step: float) -> dict[tuple[int, int], float]:
    """The scrape time [s since epoch] of the sample Prometheus answers with at each
    step, per GPU: ``{(gpu, step time [ms]): scrape time}`` (PromQL ``timestamp()``)."""
    q = urllib.parse.urlencode({"query": "timestamp(DCGM_FI_DEV_POWER_USAGE_INSTANT)",
                                "start": start.timestamp(), "end": end.timestamp(),
                                "step": step})
    body = json.loads(urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=30)
                      .read())
    return {(int(r["metric"]["gpu"]), round(float(t) * 1000)): float(v)
            for r in body["data"]["result"] for t, v in r["values"]}


@pytest.mark.slow
def test_collector_prometheus_round_trip_matches_the_store(fake_nvml, prometheus_server,
                                                          tmp_path):
    fake_nvml({"gpus": 2, "gpu*.power_mw": "0:200000 1:450000 2:300000 @3",
               "gpu1.power_mw": "0:250000 1.5:500000 @3",
               "gpu*.clock_sm_mhz": "0:1980 1.2:1410 @2.4",
               "gpu*.throttle": "0:0 1.2:4 @2.4", "gpu*.temp_gpu_c": "0:40 2:55 @4"})
    store = tmp_path / "store"
    with Collector(store, interval_s=0.05, flush_interval_s=0.5, prometheus_port=0,
                   host="node-rt") as c, SchedulingProbe() as probe:
        url = prometheus_server(c.metrics_port)
        t_start = pd.Timestamp.now(tz="UTC")
        time.sleep(6.0)
        t_end = pd.Timestamp.now(tz="UTC")
    start, end = t_start.ceil("500ms") + pd.Timedelta("1s"), t_end.floor("500ms")
    tel = read_prometheus(url, start, end, step=SCRAPE_S)
    validate(tel)
    assert set(tel["gpu_index"]) == {0, 1} and (tel["host"] == "node-rt").all()
    n_steps = int((end - start) / pd.Timedelta(seconds=SCRAPE_S)) + 1
    assert (tel.groupby("gpu_index").size() == n_steps).all()
    assert tel["gpu_uuid"].str.startswith("GPU-fa6e0000").all()
    own = read_store(store)
    scraped = _scrape_times(url, start, end, SCRAPE_S)
    # each value Prometheus returns at T is the collector's value at the scrape it
    # answers with (the scrape's start from PromQL's timestamp(), not assumed: on a
    # loaded machine a scrape may be late or missed): the latest sample the collector had
    # published when it answered, within the scrape timeout after that start, i.e. one of
    # its samples from the last one taken before the start (back over the publication
    # lag: the machine's measured scheduling delay, at least 0.1 s) to the timeout
    cols = ["power_w", "power_avg_w", "clock_sm_mhz", "temp_gpu_c", "throttle_reasons",
            "power_limit_w", "util_gpu_pct", "energy_j"]
    matched = 0
    own_s = own["timestamp"].astype("int64").to_numpy() * 1e-9
    for _, row in tel.iterrows():
        s_t = scraped[(int(row["gpu_index"]), row["timestamp"].value // 1_000_000)]
        mine = (own["gpu_index"] == row["gpu_index"]).to_numpy()
        last = own_s[mine & (own_s <= s_t)].max()
        g = own[mine & (own_s >= min(last, s_t - max(0.1, probe.max_late_s)))
                & (own_s <= s_t + SCRAPE_S)]
        assert len(g) > 0
        for col in cols:
            candidates = g[col].dropna().to_numpy(dtype="float64")
            assert np.isclose(float(row[col]), candidates, rtol=1e-12, atol=0).any(), (
                col, row["timestamp"], row[col], candidates)
        matched += 1
    assert matched == len(tel) > 10
    # the power waveform really moved through Prometheus (not one constant value)
    assert set(tel.loc[tel["gpu_index"] == 0, "power_w"]) >= {200.0, 450.0, 300.0}
    assert tel["energy_j"].between(1000.0, 1e5).all()  # J, from mJ
    assert set(tel["throttle_reasons"].astype("int64")) == {0, 4}
    # chunked requests (3 points each) give the same frame as one request
    chunked = read_prometheus(url, start, end, step=SCRAPE_S, max_points=3)
    pd.testing.assert_frame_equal(chunked, tel)


@pytest.mark.bad_input("collector")
@pytest.mark.parametrize("kwargs, message", [
    ({"start": "2026-12-01T00:00"}, "has no time zone"),
    ({"end": "2026-11-30T00:00Z"}, "is before start"),
    ({"step": "soon"}, "step: expected seconds"),
    ({"step": 0}, "step must be at least 1 ms"),
    ({"metrics": ["DCGM_FI_DEV_NOPE"]}, "metrics: unknown"),
    ({"url": "garbage://x"}, "url: expected http"),
    ({"max_points": 1}, "max_points must be at least 2"),
])
def test_bad_arguments_are_clear_errors(kwargs, message):
    args = {"url": "http://127.0.0.1:9", "start": "2026-12-01T00:00Z",
            "end": "2026-12-01T01:00Z", **kwargs}
    with pytest.raises(PowerlabError, match=message):
        read_prometheus(args.pop("url"), args.pop("start"), args.pop("end"), **args)


@pytest.mark.bad_input("collector")
def test_unreachable_or_non_prometheus_server_is_a_clear_error():
    import http.server
    import threading

    port = _free_port()
    with pytest.raises(PowerlabError, match="cannot reach Prometheus at"):
        read_prometheus(f"http://127.0.0.1:{port}", "2026-12-01T00:00Z",
                        "2026-12-01T00:01Z", timeout_s=5)

    class Junk(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>not prometheus</html>")

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Junk)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with pytest.raises(PowerlabError, match="expected Prometheus' JSON answer"):
            read_prometheus(f"http://127.0.0.1:{srv.server_port}", "2026-12-01T00:00Z",
                            "2026-12-01T00:01Z", timeout_s=5)
    finally:
        srv.shutdown()
