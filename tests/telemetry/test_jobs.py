"""Slurm accounting in (powerlab.iotools.slurm), power and energy per job
(powerlab.telemetry.jobs), node scope, the pandas engine and `powerlab aggregate` errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pytest

from powerlab.cli import main as cli_main
from powerlab.exceptions import DataQualityWarning, ParseError, PowerlabError
from powerlab.iotools.slurm import expand_hostlist, read_sacct
from powerlab.telemetry import aggregate as ag
from powerlab.telemetry import jobs as jb
from powerlab.telemetry.engines import EmptyResultWarning
from powerlab.telemetry.schema import conform
from powerlab.telemetry.store import write_store

REPO = Path(__file__).resolve().parents[2]

# sacct --parsable2 --format=JobID,JobIDRaw,JobName,Partition,State,Start,End,NNodes,NodeList,AllocTRES
# (Slurm's documented output: steps .batch/.extern/.0, array tasks 1235_7, a pending array
# range, a running job with End=Unknown, typed and untyped gres/gpu TRES; local times)
SACCT = """JobID|JobIDRaw|JobName|Partition|State|Start|End|NNodes|NodeList|AllocTRES
1234|1234|pretrain|gpu|COMPLETED|2025-07-01T00:00:00|2025-07-01T00:30:00|2|node[001-002]|billing=64,cpu=64,gres/gpu=16,mem=1T,node=2
1234.batch|1234.batch|batch||COMPLETED|2025-07-01T00:00:00|2025-07-01T00:30:00|1|node001|cpu=32,mem=500G,node=1
1234.extern|1234.extern|extern||COMPLETED|2025-07-01T00:00:00|2025-07-01T00:30:00|2|node[001-002]|billing=64,cpu=64,gres/gpu=16,mem=1T,node=2
1234.0|1234.0|python||COMPLETED|2025-07-01T00:01:00|2025-07-01T00:29:00|2|node[001-002]|cpu=64,gres/gpu:h100=16,mem=1T,node=2
1235_7|1240|sweep|gpu|RUNNING|2025-07-01T00:10:00|Unknown|1|node003|billing=8,cpu=8,gres/gpu:h100=8,node=1
1236_[1-3]|1236|sweep2|gpu|PENDING|Unknown|Unknown|1|None assigned|billing=8,cpu=8,gres/gpu=8,node=1
1237|1237|small|gpu|COMPLETED|2025-07-01T00:00:00|2025-07-01T00:20:00|1|node004|cpu=8,gres/gpu=2,node=1
"""

SACCT_JSON = {"meta": {"plugin": {"type": "openapi/v0.0.40"}}, "jobs": [
    {"job_id": 1234, "name": "pretrain", "partition": "gpu",
     "array": {"job_id": 0, "task_id": {"set": False, "infinite": False, "number": 0}},
     "state": {"current": ["COMPLETED"], "reason": "None"},
     "time": {"start": 1751346000, "end": 1751347800},
     "nodes": "node[001-002]",
     "tres": {"allocated": [{"type": "cpu", "count": 64},
                            {"type": "gres", "name": "gpu", "count": 16}]},
     "steps": [{"step": {"id": "1234.batch", "name": "batch"}, "state": ["COMPLETED"],
                "time": {"start": 1751346000, "end": 1751347800},
                "nodes": {"range": "node001"}, "tres": {"allocated": []}}]},
    {"job_id": 1240, "name": "sweep", "partition": "gpu",
     "array": {"job_id": 1235, "task_id": {"set": True, "infinite": False, "number": 7}},
     "state": {"current": ["RUNNING"]}, "time": {"start": 1751346600, "end": 0},
     "nodes": "node003", "tres": {"allocated": [{"type": "gres", "name": "gpu",
                                                "count": 8}]}},
    {"job_id": 1237, "name": "small", "partition": "gpu",
     "array": {"job_id": 0, "task_id": {"set": False, "number": 0}},
     "state": {"current": "COMPLETED"}, "time": {"start": 1751346000, "end": 1751347200},
     "nodes": "node004", "gres_detail": ["gpu:h100:2(IDX:4-5)"],
     "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}},
]}


@pytest.mark.parametrize("expr,hosts", [
    ("node[001-004,007]", ["node001", "node002", "node003", "node004", "node007"]),
    ("gpu-a1,gpu-b[09-10]", ["gpu-a1", "gpu-b09", "gpu-b10"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("None assigned", []),
])
def test_hostlist_expansion(expr, hosts):
    assert expand_hostlist(expr) == hosts


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("expr", ["node[1-", "node1]", "node[5-2]", "node[a-b]"])
def test_bad_hostlists_are_refused(expr):
    with pytest.raises(ValueError):
        expand_hostlist(expr)


def test_parsable2_jobs_steps_arrays_running_and_time_zone(tmp_path):
    f = tmp_path / "sacct.txt"
    f.write_text(SACCT)
    with pytest.warns(DataQualityWarning, match="1 job row"):
        jobs = read_sacct(f, tz="America/Chicago")
    assert len(jobs) == 7
    alloc = jobs[jobs["step"].isna()].set_index("job_id")
    # Chicago in July is UTC-5
    assert alloc.loc["1234", "start"] == pd.Timestamp("2025-07-01T05:00:00Z")
    assert alloc.loc["1234", "hosts"] == ("node001", "node002")
    assert alloc.loc["1234", "gpus"] == 16 and alloc.loc["1235_7", "gpus"] == 8
    assert alloc.loc["1235_7", "array_job_id"] == "1235"
    assert alloc.loc["1235_7", "array_task_id"] == 7
    assert alloc.loc["1235_7", "running"] and pd.isna(alloc.loc["1235_7", "end"])
    assert pd.isna(alloc.loc["1236_[1-3]", "start"])
    steps = jobs[jobs["step"].notna()]
    assert set(steps["step"]) == {"batch", "extern", "0"}
    assert (steps["job_id"] == "1234").all()


def test_json_matches_parsable2(tmp_path):
    f = tmp_path / "sacct.json"
    f.write_text(json.dumps(SACCT_JSON))
    jobs = read_sacct(f)  # epochs: no zone needed
    alloc = jobs[jobs["step"].isna()].set_index("job_id")
    assert alloc.loc["1234", "start"] == pd.Timestamp("2025-07-01T05:00:00Z")
    assert alloc.loc["1235_7", "running"] and alloc.loc["1235_7", "array_task_id"] == 7
    assert alloc.loc["1237", "gpu_indices"] == {"node004": (4, 5)}
    assert jobs.loc[jobs["step"].notna(), "step"].tolist() == ["batch"]


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("text,kw,match", [
    (SACCT, {}, "pass tz="),
    (SACCT, {"tz": "Mars/Olympus"}, "IANA"),
    ("JobID|State\n1|COMPLETED\n", {"tz": "UTC"}, "missing field"),
    (SACCT.replace("1237|1237", "12x7|1237"), {"tz": "UTC"}, "not a Slurm job ID"),
    (SACCT.replace("node004|", "node[4-|"), {"tz": "UTC"}, "NodeList|unbalanced"),
    (SACCT.replace("2025-07-01T00:20:00", "yesterday"), {"tz": "UTC"}, "bad time"),
    (SACCT + "1|2\n", {"tz": "UTC"}, "fields"),
    ('{"jobs": 3}', {}, "jobs"),
    ("\xff\xfe garbage", {}, "not UTF-8|header"),
])
def test_bad_sacct_output_is_one_parse_error(tmp_path, text, kw, match):
    f = tmp_path / "bad.txt"
    f.write_bytes(text.encode("latin-1") if "\xff" in text else text.encode())
    with pytest.raises(ParseError, match=match) as ei, warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        read_sacct(f, **kw)
    assert "bad.txt" in str(ei.value)


def test_gpu_job_map_refuses_to_guess_shared_nodes(tmp_path):
    f = tmp_path / "sacct.txt"
    f.write_text(SACCT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        jobs = read_sacct(f, tz="UTC")
    until = pd.Timestamp("2025-07-01T01:00:00Z")
    with pytest.warns(DataQualityWarning, match="1237"):
        m = jb.gpu_job_map(jobs, 8, until=until)
    assert set(m["job_id"]) == {"1234", "1235_7"}          # 1237 holds 2 of 8: unknown which
    assert len(m[m["job_id"] == "1234"]) == 16
    assert (m.loc[m["job_id"] == "1235_7", "end"] == until).all()  # running: until
    # with the indices Slurm recorded (--json), the shared-node job is mapped exactly
    fj = tmp_path / "sacct.json"
    fj.write_text(json.dumps(SACCT_JSON))
    mj = jb.gpu_job_map(read_sacct(fj), 8, until=until)
    assert sorted(mj.loc[mj["job_id"] == "1237", "gpu_index"].tolist()) == [4, 5]


def _cluster_frame():
    """4 nodes x 8 GPUs at known power for an hour of 10-s samples, and node rows."""
    t = pd.date_range("2025-07-01T05:00:00Z", periods=360, freq="10s")
    rows = []
    for n in range(1, 5):
        host = f"node{n:03d}"
        for g in range(8):
            rows.append(pd.DataFrame({"timestamp": t, "host": host, "scope": "gpu",
                                      "gpu_index": g, "power_w": 100.0 * n + g}))
        rows.append(pd.DataFrame({"timestamp": t, "host": host, "scope": "node",
                                  "gpu_index": pd.NA, "power_w": 1000.0 * n}))
    return conform(pd.concat(rows, ignore_index=True))


def test_job_power_and_energy_from_sacct_against_hand_sums(tmp_path):
    df = _cluster_frame()
    f = tmp_path / "sacct.txt"
    f.write_text(SACCT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        jmap = jb.gpu_job_map(read_sacct(f, tz="America/Chicago"), 8,
                              until=pd.Timestamp("2025-07-01T06:00:00Z"))
    p = jb.job_power(df, jmap, "1min")
    e = jb.job_energy(p, "1min").set_index("job_id")
    # job 1234: node001+node002, all GPUs, 05:00-05:30 UTC
    gpu_w = sum(100.0 * n + g for n in (1, 2) for g in range(8))
    assert e.loc["1234", "energy_megawatt_hours"] == pytest.approx(gpu_w * 0.5 / 1e6)
    assert e.loc["1234", "peak_power_megawatts"] == pytest.approx(gpu_w / 1e6)
    assert e.loc["1234", "gpus_max"] == 16
    # job 1235_7 on node003 from 05:10 until the data end (06:00)
    assert e.loc["1235_7", "energy_megawatt_hours"] == pytest.approx(
        sum(300.0 + g for g in range(8)) * (50 / 60) / 1e6)
    # node scope: node AC power per job
    pn = jb.job_power(df, jmap, "1min", scope="node")
    en = jb.job_energy(pn, "1min").set_index("job_id")
    assert en.loc["1234", "energy_megawatt_hours"] == pytest.approx(3000.0 * 0.5 / 1e6)
    assert en.loc["1234", "gpus_max"] == 2   # nodes, for node scope


def test_scope_node_and_all_never_add_node_to_gpu_power(tmp_path):
    df = _cluster_frame()
    gpu = ag.power_sums(df, "1min")
    node = ag.power_sums(df, "1min", scope="node")
    both = ag.power_sums(df, "1min", scope="all")
    assert gpu["power_w"].iloc[0] == pytest.approx(sum(100.0 * n + g for n in range(1, 5)
                                                       for g in range(8)))
    assert node["power_w"].iloc[0] == pytest.approx(10_000.0)
    assert set(both["scope"]) == {"gpu", "node"}
    np.testing.assert_allclose(both.loc[both["scope"] == "node", "power_w"].to_numpy(),
                               node["power_w"].to_numpy())


def test_pandas_engine_equals_dask_on_a_store_and_empty_results_say_why(tmp_path):
    pytest.importorskip("dask")
    df = _cluster_frame()
    root = tmp_path / "store"
    write_store(df, root, fsync=False)
    import dask

    with dask.config.set(scheduler="sync"):
        a = ag.power_sums(root, "1min", by="host", engine="dask")
    b = ag.power_sums(root, "1min", by="host", engine="pandas")
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(ag.power_sums(root, "1min", by="host", engine="duckdb"), b)
    # per job, GPU and node scope: DuckDB (the default) gives the pandas engine's answer
    jobs = pd.DataFrame({"host": ["node001", "node002", "node003"], "gpu_index": [0, 1, 0],
                         "job_id": ["a", "b", "a"],
                         "start": pd.to_datetime(["2025-07-01T05:00:05Z", "2025-07-01T05:10:00Z",
                                                  "2025-07-01T05:30:00Z"]),
                         "end": pd.to_datetime(["2025-07-01T05:20:05Z", "2025-07-01T07:00:00Z",
                                                "2025-07-01T05:45:30Z"])})
    for scope in ("gpu", "node"):
        ref = jb.job_power(root, jobs, "1min", engine="pandas", scope=scope)
        got = jb.job_power(root, jobs, "1min", scope=scope)
        assert len(ref) > 0
        pd.testing.assert_frame_equal(got, ref, check_exact=False, rtol=1e-12, atol=0)
    only_node = tmp_path / "nodes"
    write_store(df[df["scope"] == "node"], only_node, fsync=False)
    with pytest.warns(EmptyResultWarning, match=r"no rows of scope 'gpu'.*'node' rows.*"
                                                 r"--scope node"):
        out = ag.power_sums(only_node, "1min", engine="pandas")
    assert len(out) == 0


def _run(args, *, block_dask=False, timeout=120):
    pre = ("import sys\n"
           + ("sys.modules['dask'] = None; sys.modules['distributed'] = None\n"
              if block_dask else "")
           + "from powerlab.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", pre, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, check=False)


def test_cli_without_the_dask_extra_runs_on_pandas_and_explains_zero_rows(tmp_path):
    df = _cluster_frame()
    root = tmp_path / "nodes"
    write_store(df[df["scope"] == "node"], root, fsync=False)
    out = tmp_path / "c.csv"
    p = _run(["aggregate", str(root), "--out", str(out)], block_dask=True)
    assert p.returncode == 0, p.stderr
    assert "wrote 0 rows" in p.stdout
    assert "warning: power_sums: no rows of scope 'gpu'" in p.stderr
    assert "--scope node" in p.stderr and "Traceback" not in p.stderr
    p = _run(["aggregate", str(root), "--scope", "node", "--out", str(out), "--force"],
             block_dask=True)
    assert p.returncode == 0 and "wrote 60 rows" in p.stdout, p.stderr
    p = _run(["aggregate", str(root), "--scheduler", "tcp://127.0.0.1:1", "--out", str(out)],
             block_dask=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "pip install 'powerlab[dask]'" in p.stderr


def test_cli_by_job_from_sacct(tmp_path, capsys):
    df = _cluster_frame()
    root = tmp_path / "store"
    write_store(df, root, fsync=False)
    f = tmp_path / "sacct.json"
    f.write_text(json.dumps(SACCT_JSON))
    out = tmp_path / "jobs.csv"
    rc = cli_main(["aggregate", str(root), "--by", "job", "--sacct", str(f), "--engine",
                   "pandas", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "energy_megawatt_hours" in text and "1234" in text
    got = pd.read_csv(out)
    assert set(got["job_id"].astype(str)) == {"1234", "1235_7", "1237"}


class _Server:
    """A TCP port that accepts and stays silent, or answers with fixed bytes at once."""

    def __init__(self, greeting: bytes | None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.greeting = greeting
        self.conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.greeting:
                c.sendall(self.greeting)

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.bad_input("aggregate")
@pytest.mark.parametrize("greeting,match", [
    (None, "nothing answered within 1 s"),
    (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "does not speak the Dask"),
])
@pytest.mark.slow
def test_scheduler_that_never_answers_or_speaks_http_fails_within_the_timeout(
        tmp_path, greeting, match):
    pytest.importorskip("distributed")
    root = tmp_path / "store"
    write_store(_cluster_frame(), root, fsync=False)
    srv = _Server(greeting)
    try:
        p = _run(["aggregate", str(root), "--scheduler", f"tcp://127.0.0.1:{srv.port}",
                  "--timeout-s", "1", "--out", str(tmp_path / "x.csv")])
    finally:
        srv.close()
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and match in p.stderr, p.stderr
    # it gave up at its 1-s timeout (the message says so); a hang would end in _run's
    # subprocess timeout, an error, so no wall-clock bound is asserted


def test_a_real_scheduler_passes_the_probe(tmp_path):
    distributed = pytest.importorskip("distributed")
    from powerlab._cli.aggregate import probe_scheduler

    # no NVML monitor in this process (see test_aggregate.NO_NVML)
    with dask.config.set({"distributed.diagnostics.nvml": False}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                     protocol="tcp://", dashboard_address=None,
                                     silence_logs=40) as c:
        addr = c.scheduler_address
        assert addr.startswith("tcp://")
        assert probe_scheduler(addr, 5.0) == addr
    with pytest.raises(PowerlabError, match="cannot reach"):
        probe_scheduler(addr, 2.0)   # closed now
