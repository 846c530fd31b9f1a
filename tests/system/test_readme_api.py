"""The README's "Python API at a glance" block runs unchanged (issue 26).

The ```python block under ``## Python API at a glance`` in README.md is executed
statement by statement, in one namespace, as a notebook would run it, in a temporary
working directory where every path it names exists with real, small data:

* ``gpu.csv``: an ``nvidia-smi --query-gpu ... --format=csv`` log (the layout of
  ``tests/data/iotools/nvidia_smi_constructed.csv``), 4 GPUs sampled every 100 ms for
  30 s, local time America/Los_Angeles, with one 1.5-s hole in the log;
* ``data/``: links to the repository's ``data/scenarios`` and ``data/requirements``;
* ``telemetry/`` and ``burn-in/``: stores written with ``write_store`` from generator A
  of ``tests/fleetgens``, case ``silent_from_start`` (2 hosts x 8 GPUs, 1-min samples,
  6 h; one GPU 1.5 % slow from the start; the burn-in is the same fleet's
  ``baseline=True`` record, healthy), plus node AC power rows (``scope = "node"``)
  derived from the GPU rows as a node meter would read them;
* ``sacct.txt``: ``sacct --parsable2`` output (the fields of tests/telemetry/test_jobs.py) of three
  jobs on those two hosts during the telemetry's window, America/Chicago local times;
* ``out/``: an empty folder.

The ONLY change to the README's text: ``http://prometheus:9090`` is replaced by the URL
of a fake Prometheus on 127.0.0.1 (tests/support/fakeprom.py, shared with
tests/iotools/test_prometheus_hostile.py) that answers range queries with 4 GPUs of one host at
the requested evaluation times.  The test asserts that, after that one substitution, the
text run is byte-identical to the README's block.

Expression statements are evaluated (their value kept, as a notebook shows it) so the
test can check what the lines return, not only that they raise nothing: the straggler
search with the burn-in baseline flags exactly the generator's slow GPU, node power sums
and each sacct job's energy equal sums by hand of the rows written, ``Compliance`` on
``chk.trace`` gives ``comply``'s own values for that draw.  No statement may raise a
DeprecationWarning or FutureWarning of powerlab's own API.  Tracebacks name README.md
lines.
"""

from __future__ import annotations

import ast
import json
import urllib.parse
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from powerlab.iotools import read_nvidia_smi
from powerlab.telemetry import schema, write_store

from ..fleetgens import fleetgen_A
from ..support import fakeprom

REPO = Path(__file__).resolve().parents[2]
README_HOST = "http://prometheus:9090"


def readme_block() -> tuple[str, int]:
    """The ```python block under '## Python API at a glance' and the README line number
    of its first line."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    head = "\n## Python API at a glance\n"
    assert text.count(head) == 1, "README.md: no single '## Python API at a glance'"
    section = text.index(head) + len(head)
    opening = text.index("```python\n", section)
    assert "\n## " not in text[section:opening], "the section has no ```python block"
    start = opening + len("```python\n")
    end = text.index("\n```\n", start) + 1
    return text[start:end], text[:start].count("\n") + 1


# --------------------------------------------------------------------------- data


def _write_nvidia_smi(path: Path) -> None:
    """4 H100s, 100-ms samples for 30 s (local time), a 1.5-s hole at 12:00:10."""
    head = ("timestamp, index, uuid, name, power.draw [W], enforced.power.limit [W], "
            "clocks.current.sm [MHz], clocks.current.memory [MHz], temperature.gpu, "
            "temperature.memory, utilization.gpu [%], utilization.memory [%], "
            "memory.used [MiB], fan.speed [%], clocks_event_reasons.active")
    rng = np.random.default_rng(7)
    t0 = pd.Timestamp("2026-03-01 12:00:00")
    lines = [head]
    for k in range(300):
        if 100 <= k < 115:                       # the logger stalled for 1.5 s
            continue
        t = t0 + pd.Timedelta(milliseconds=100 * k)
        for g in range(4):
            p = 640.0 + 25.0 * np.sin(k / 9.0) + rng.normal(0, 4)
            lines.append(
                f"{t:%Y/%m/%d %H:%M:%S}.{t.microsecond // 1000 + g:03d}, {g}, "
                f"GPU-0000abcd-0000-4000-8000-00000000000{g}, NVIDIA H100 80GB HBM3, "
                f"{p:.2f} W, 700.00 W, 1980 MHz, 2619 MHz, {60 + g}, {68 + g}, 100 %, "
                f"45 %, 61234 MiB, [Not Supported], 0x0000000000000000")
    path.write_text("\n".join(lines) + "\n")


# sacct --parsable2 --format=JobID,JobIDRaw,JobName,Partition,State,Start,End,NNodes,
# NodeList,AllocTRES; CST (UTC-6) times: 18:00 CST on 1 March 2026 = 00:00 UTC on 2 March
SACCT = """\
JobID|JobIDRaw|JobName|Partition|State|Start|End|NNodes|NodeList|AllocTRES
2001|2001|pretrain|gpu|COMPLETED|2026-03-01T18:00:00|2026-03-01T21:00:00|2|node[001-002]|billing=64,cpu=64,gres/gpu=16,mem=1T,node=2
2001.batch|2001.batch|batch||COMPLETED|2026-03-01T18:00:00|2026-03-01T21:00:00|1|node001|cpu=32,mem=500G,node=1
2001.0|2001.0|python||COMPLETED|2026-03-01T18:01:00|2026-03-01T20:59:00|2|node[001-002]|cpu=64,gres/gpu:h100=16,mem=1T,node=2
2002|2002|finetune|gpu|COMPLETED|2026-03-01T21:30:00|2026-03-01T23:30:00|1|node001|cpu=32,gres/gpu:h100=8,node=1
2003|2003|eval|gpu|FAILED|2026-03-01T21:30:00|2026-03-01T22:10:00|1|node002|cpu=32,gres/gpu=8,node=1
"""


def _node_rows(tel: pd.DataFrame) -> pd.DataFrame:
    """Node AC power (``scope = "node"``) as a node meter would read it: the GPUs' power
    through 94 %-efficient supplies plus 1.8 kW of CPUs, memory, NICs and fans."""
    gpu = tel.groupby(["host", "timestamp"], as_index=False)["power_w"].sum()
    return schema.conform(gpu.assign(scope="node", gpu_index=pd.NA,
                                     power_w=gpu["power_w"] / 0.94 + 1800.0))


class FakeProm(fakeprom.FakeProm):
    """A local Prometheus HTTP API: ``/api/v1/query_range`` for one host's 4 GPUs.

    Power (``DCGM_FI_DEV_POWER_USAGE_INSTANT``), SM clock and GPU temperature are
    answered at every evaluation time of the requested range; other metrics are empty
    matrices (a dcgm-exporter without them).  Every request is recorded."""

    SERIES: ClassVar[dict] = {
        "DCGM_FI_DEV_POWER_USAGE_INSTANT": lambda t, g: 500 + 100 * np.sin(t / 600 + g),
        "DCGM_FI_DEV_SM_CLOCK": lambda t, g: 1980 - 0 * t,
        "DCGM_FI_DEV_GPU_TEMP": lambda t, g: 55 + g + 0 * t}

    def __init__(self):
        self.requests: list[dict] = []
        super().__init__(self._answer)

    def _answer(self, h):
        u = urllib.parse.urlsplit(h.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        self.requests.append({"path": u.path, **q})
        if u.path != "/api/v1/query_range":
            h.send_error(404)
            return
        name = q["query"].split("{")[0]
        t = np.arange(float(q["start"]), float(q["end"]) + 1e-6, float(q["step"]))
        result = [] if name not in self.SERIES else [
            {"metric": {"__name__": name, "Hostname": "node003", "gpu": str(g),
                        "UUID": f"GPU-0000beef-0000-4000-8000-00000000000{g}"},
             "values": [[round(x, 3), f"{v:.3f}"]
                        for x, v in zip(t, self.SERIES[name](t, g))]}
            for g in range(4)]
        body = json.dumps({"status": "success", "data": {
            "resultType": "matrix", "result": result}}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


@pytest.fixture
def sketch_dir(tmp_path, monkeypatch):
    """A working directory holding every path the sketch names; yields the fake server,
    the telemetry written and the generator's truth."""
    _write_nvidia_smi(tmp_path / "gpu.csv")
    (tmp_path / "data").mkdir()
    for sub in ("scenarios", "requirements"):
        (tmp_path / "data" / sub).symlink_to(REPO / "data" / sub, target_is_directory=True)
    # one GPU 1.5 % slower than its peers from the start, healthy at burn-in: only a
    # baseline shows it (generator A's truth)
    kw = {"interval_s": 60, "hours": 6, "n_hosts": 2, "gpus_per_host": 8}
    tel, truth = fleetgen_A.generate(0, "silent_from_start", **kw)
    burn, _ = fleetgen_A.generate(0, "silent_from_start", baseline=True, **kw)
    node = _node_rows(tel)
    write_store(pd.concat([tel, node], ignore_index=True), tmp_path / "telemetry")
    write_store(burn, tmp_path / "burn-in")
    (tmp_path / "sacct.txt").write_text(SACCT)
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    prom = FakeProm()
    yield SimpleNamespace(prom=prom, tel=tel, node=node, truth=truth)
    prom.close()


# --------------------------------------------------------------------------- run


def run_block(source: str, first_line: int) -> tuple[dict, dict, list]:
    """Execute ``source`` statement by statement in one namespace; line numbers in
    tracebacks are README.md's.  Returns the namespace, ``{statement text: value}`` of
    the expression statements, and ``(statement, warning)`` of every warning."""
    ns: dict = {"__name__": "__readme__"}
    values: dict = {}
    caught: list = []
    tree = ast.parse(source)
    for stmt in tree.body:
        text = ast.get_source_segment(source, stmt)
        ast.increment_lineno(stmt, first_line - 1)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            if isinstance(stmt, ast.Expr):
                code = compile(ast.Expression(stmt.value), "README.md", "eval")
                values[text] = eval(code, ns)  # the README's own text
            else:
                exec(compile(ast.Module([stmt], []), "README.md", "exec"), ns)  # noqa: S102
        caught += [(text, x) for x in w]
    return ns, values, caught


def _value(values: dict, start: str):
    hits = [v for k, v in values.items() if k.startswith(start)]
    assert len(hits) == 1, (start, list(values))
    return hits[0]


@pytest.mark.slow
def test_readme_api_sketch_runs_unchanged(sketch_dir, capsys):
    block, first_line = readme_block()
    prom = sketch_dir.prom
    assert block.count(README_HOST) == 1
    run = block.replace(README_HOST, prom.url)
    # the one substitution: every other byte is the README's
    assert run.split(prom.url) == block.split(README_HOST)

    ns, values, caught = run_block(run, first_line)

    # no line of the README uses a deprecated powerlab call
    deprecated = [(s, str(w.message)) for s, w in caught
                  if issubclass(w.category, (DeprecationWarning, FutureWarning))
                  and (w.filename == "README.md" or "powerlab" in w.filename)]
    assert not deprecated, deprecated

    # nvidia-smi log: 4 GPUs x 285 samples; the 1.5-s hole found by gaps(), once per GPU
    # (ns["tel"] is later the Prometheus frame: the log is read again here)
    mask = ns["mask"]
    smi = read_nvidia_smi("gpu.csv", tz="America/Los_Angeles")
    assert len(mask) == len(smi) == 4 * 285 and mask.dtype == bool
    hole = smi.loc[mask.to_numpy()]
    assert sorted(hole["gpu_index"].tolist()) == [0, 1, 2, 3]
    # 12:00:11.5 PST, the first sample after the hole, is 20:00:11.5 UTC
    assert (hole["timestamp"].dt.floor("100ms")
            == pd.Timestamp("2026-03-01 20:00:11.5", tz="UTC")).all()
    # the forecast: a results object whose summary has text and HTML
    res = ns["res"]
    assert hasattr(res.summary(), "_repr_html_") and "<table" in res.summary()._repr_html_()
    printed = capsys.readouterr().out
    assert str(res.summary()).splitlines()[0] in printed
    chart = _value(values, 'viz.forecast_charts(res)["timeline"]')
    assert chart.to_dict()["$schema"].startswith("https://vega.github.io/schema/vega-lite")
    it_w = _value(values, 'res.power_w(boundary="it")')
    assert it_w.shape == (res.draws, res.n_ticks) and (it_w > 0).all()
    assert (res.power_w("facility") > it_w).all()
    # compliance: 20 draws, its CSV written, per-draw values for every requirement
    chk = ns["chk"]
    assert chk.draws == 20 and (Path("out") / "compliance.csv").is_file()
    per_draw = _value(values, "Compliance(spec).evaluate(")
    assert set(per_draw) == {r.name for r in ns["spec"].requirements}
    # the same draw, the same values as comply's own evaluation of it
    assert per_draw == pytest.approx(chk.draw_values.loc[0].to_dict(), nan_ok=True)
    own_limits = _value(values, "comply(res, res.scenario.limits")
    assert own_limits.draws == res.draws
    # flex offer, with its CSV
    assert hasattr(ns["offer"].summary(), "_repr_html_")
    assert (Path("out") / "flex_offer.csv").is_file()
    # planner summary and the facilities CSV with its JSON sidecar
    ps = _value(values, "planner_summary(res)")
    assert isinstance(ps, pd.DataFrame) and "energy [MWh]" in ps.index
    assert Path("site.csv").is_file() and Path("site.json").is_file()
    # stragglers: with the burn-in baseline exactly the generator's slow GPU is flagged
    flags = _value(values, 'find_stragglers(read_store("telemetry/"), baseline=base)')
    assert isinstance(flags, pd.DataFrame)
    assert flags["gpu_uuid"].tolist() == sketch_dir.truth["slow_gpus"]
    strict = _value(values, 'find_stragglers(read_store("telemetry/"), strict)')
    assert hasattr(strict, "_repr_html_")
    assert ns["strict"].z_threshold == 5.0 and ns["strict"].window_s == 1800.0
    # Prometheus: the README's range at 15 s, 4 GPUs of node003 through the fake server
    tel = ns["tel"]
    queries = [r for r in prom.requests if r["path"] == "/api/v1/query_range"]
    assert queries and {r["step"] for r in queries} == {"15"}
    assert float(queries[0]["start"]) == pd.Timestamp("2025-07-01T00:00Z").timestamp()
    assert set(tel["host"]) == {"node003"} and set(tel["gpu_index"]) == {0, 1, 2, 3}
    assert len(tel) == 4 * (24 * 240 + 1)
    # node power sums of the store: the node rows written, added per minute
    sums = _value(values, 'power_sums("telemetry/", "1min", scope="node")')
    want = sketch_dir.node.groupby("timestamp")["power_w"].sum()
    np.testing.assert_allclose(sums.set_index("timestamp")["power_w"].to_numpy(),
                               want.to_numpy(), rtol=1e-12)
    n_nodes = sketch_dir.node.groupby("timestamp").size()   # nodes, for node scope
    assert sums["n_gpus"].tolist() == n_nodes.tolist() and set(n_nodes) <= {1, 2}
    # the energy of each sacct job: its GPUs' 1-min samples over its span, by hand
    energy = _value(values, 'job_energy(job_power("telemetry/", jobs, "1min"), "1min")')
    energy = energy.set_index("job_id")["energy_megawatt_hours"]
    gpu = sketch_dir.tel
    for job, hosts, t0, t1 in [("2001", ["node001", "node002"], "00:00", "03:00"),
                               ("2002", ["node001"], "03:30", "05:30"),
                               ("2003", ["node002"], "03:30", "04:10")]:
        sel = (gpu["host"].isin(hosts)
               & (gpu["timestamp"] >= pd.Timestamp(f"2026-03-02 {t0}Z"))
               & (gpu["timestamp"] < pd.Timestamp(f"2026-03-02 {t1}Z")))
        assert energy[job] == pytest.approx(gpu.loc[sel, "power_w"].sum() * 60 / 3.6e9,
                                            rel=1e-12), job
