"""Self-test of the blind recording fuzzer on a synthetic recording in the real format."""

import gzip
import json
import re

import pytest

from tests.blind.recordings import mutate as M

T0 = 1715901705452


def _line(t, key, value, ev="POINT_IN_TIME"):
    v = "null" if value is None else str(value)
    return (f':::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "{ev}", "key": "{key}", '
            f'"value": {v}, "metadata": ""}}\r\n')


def _make(folder, n_nodes=4, n=60, step_ms=2000, gz=False):
    folder.mkdir(parents=True)
    for k in range(1, n_nodes + 1):
        lines = [_line(T0, "power_measurement_start", None, "INTERVAL_START")]
        lines += [_line(T0 + i * step_ms, "power_reading", 5000 + 10 * i + k) for i in range(n)]
        lines.append(_line(T0 + (n - 1) * step_ms, "power_measurement_stop", None, "INTERVAL_END"))
        data = "".join(lines).encode()
        if gz:
            (folder / f"node_{k}.txt.gz").write_bytes(gzip.compress(data))
        else:
            (folder / f"node_{k}.txt").write_bytes(data)
    return folder


def _times(p):
    return [int(x) for x in re.findall(rb'"time_ms": (\d+)', M._read(p))]


def test_clock_skew(tmp_path):
    src = _make(tmp_path / "src")
    t = M.clock_skew(src, tmp_path / "dst", seed=1)
    for name, off in t["offsets_ms"].items():
        assert abs(off) <= 30000
        assert [a - off for a in _times(tmp_path / "dst" / name)] == _times(src / name)
    assert (tmp_path / "dst" / "node_1.txt").read_bytes().endswith(b"\r\n")


def test_repeated_polls(tmp_path):
    src = _make(tmp_path / "src")
    t = M.repeated_polls(src, tmp_path / "dst", seed=2)
    for name, info in t["nodes"].items():
        lines = (tmp_path / "dst" / name).read_bytes().splitlines(keepends=True)
        assert info["n_repeated"] == 12  # 20 % of 60
        assert len(lines) == 62 + 12
        for i in info["inserted_line_numbers"]:
            assert lines[i] == lines[i - 1]


def test_drop_truncate_shuffle_duplicate(tmp_path):
    src = _make(tmp_path / "src")
    t = M.drop_nodes(src, tmp_path / "a", seed=3)
    assert len(t["dropped"]) == 1 and not (tmp_path / "a" / t["dropped"][0]).exists()
    t = M.truncate(src, tmp_path / "b", seed=3)
    (name, info), = t["nodes"].items()
    assert (tmp_path / "b" / name).stat().st_size == info["kept_bytes"] < info["original_bytes"]
    t = M.shuffle_lines(src, tmp_path / "c", seed=3)
    for name in t["nodes"]:
        a = sorted((tmp_path / "c" / name).read_bytes().splitlines(keepends=True))
        assert a == sorted((src / name).read_bytes().splitlines(keepends=True))
    t = M.duplicate_nodes(src, tmp_path / "d", seed=3, n=2)
    for new, old in t["copies"].items():
        assert (tmp_path / "d" / new).read_bytes() == (src / old).read_bytes()


def test_late_start_early_stop(tmp_path):
    src = _make(tmp_path / "src")
    t = M.late_start(src, tmp_path / "a", seed=4, seconds=30)
    (name, info), = t["nodes"].items()
    ts = _times(tmp_path / "a" / name)
    assert min(ts) == info["first_reading_time_ms"] == T0 + 30000 and info["readings_removed"] == 15
    t = M.early_stop(src, tmp_path / "b", seed=4, seconds=30)
    (name, info), = t["nodes"].items()
    data = (tmp_path / "b" / name).read_bytes()
    assert b"power_measurement_stop" not in data
    assert max(_times(tmp_path / "b" / name)) == info["last_reading_time_ms"] == T0 + 88000


@pytest.mark.parametrize("gz,step", [(False, 2000), (True, 1000)])
def test_change_interval(tmp_path, gz, step):
    src = _make(tmp_path / "src", gz=gz, step_ms=step)
    t = M.change_interval(src, tmp_path / "dst", seed=5)
    assert len(t["nodes"]) == 2  # half the nodes: a mixed-interval recording
    for name, info in t["nodes"].items():
        assert info["old_interval_s"] == step / 1000
        assert info["new_interval_s"] == (1.0 if step == 2000 else 2.0)


def test_driver_manifest(tmp_path):
    _make(tmp_path / "bench" / "power" / "result_1")
    _make(tmp_path / "bench" / "power" / "result_2", gz=True, step_ms=1000)
    (tmp_path / "bench" / "result_1.txt").write_text("0: :::MLLOG {}\n")
    rc = M.main([str(tmp_path / "bench"), str(tmp_path / "out"), "--seed", "7", "--n", "9"])
    assert rc == 0
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert len(man["recordings"]) == 9
    kinds = {k for e in man["recordings"] for k in e["mutations"]}
    assert kinds == set(M.KINDS)
    for e in man["recordings"]:
        assert {r["recording"] for r in e["recordings"]} == {"power/result_1", "power/result_2"}
        assert (tmp_path / "out" / e["dir"] / "result_1.txt").exists()
