"""Per-rank section times and PyTorch NCCL flight-recorder dumps (issue 35)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from powerlab.exceptions import ParseError
from powerlab.iotools.ranktimes import read_flight_recorder, read_rank_map, read_rank_times

CSV = """rank,step,section,duration_s
0,1,forward,0.30
1,1,forward,0.31
0,1,allreduce,0.12
1,1,allreduce,0.11
"""
MAP = "rank,host,gpu_index,gpu_uuid\n0,node000,0,GPU-a\n1,node000,1,GPU-b\n"


def test_csv_and_rank_map(tmp_path):
    p = tmp_path / "sections.csv"
    p.write_text(CSV)
    t = read_rank_times(p, rank_map=MAP)
    assert list(t.columns[:4]) == ["rank", "step", "section", "duration_s"]
    assert t["rank"].dtype == np.int64 and len(t) == 4
    assert t.loc[t["rank"] == 1, "gpu_uuid"].unique().tolist() == ["GPU-b"]
    assert str(t["gpu_index"].dtype) == "Int16"


@pytest.mark.parametrize("body, line, column", [
    ("rank,step,section,duration_s\n0,1,fwd,0.3\n0,1,fwd,-1\n", 3, "duration_s"),
    ("rank,step,section,duration_s\n0,1,fwd,0.3\nx,1,fwd,0.3\n", 3, "rank"),
    ("rank,step,section,duration_s\n0,1.5,fwd,0.3\n", 2, "step"),
])
def test_bad_rows_name_line_and_column(body, line, column):
    with pytest.raises(ParseError) as e:
        read_rank_times(body)
    assert e.value.line == line and e.value.column == column


def test_missing_columns_and_duplicate_map_rank():
    with pytest.raises(ParseError, match="duration_s"):
        read_rank_times("rank,step,section\n0,1,fwd\n")
    with pytest.raises(ParseError, match="listed twice"):
        read_rank_map("rank,host,gpu_index\n0,a,0\n0,a,1\n")


def _dump(rank, durations_ms, start=1_700_000_000_000_000_000):
    """A flight-recorder dump in the layout of the PyTorch tutorial "Flight Recorder
    for Debugging" (PyTorch 2.5): version, pg_config, pg_status, entries."""
    return {"version": "2.3", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                  "ranks": "[0, 1, 2, 3]"}},
            "pg_status": {"0": {"last_enqueued_collective": len(durations_ms)}},
            "entries": [{"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"),
                         "collective_seq_id": i + 1, "p2p_seq_id": 0, "op_id": i + 1,
                         "profiling_name": "nccl:all_reduce",
                         "time_created_ns": start + i * 10**9, "input_sizes": [[3, 4]],
                         "state": "completed", "duration_ms": d,
                         "time_discovered_started_ns": None,
                         "time_discovered_completed_ns": start + i * 10**9 + 10**7,
                         "retired": True, "timeout_ms": 600000, "is_p2p": False}
                        for i, d in enumerate(durations_ms)]}


def test_flight_recorder_json_and_pickle(tmp_path):
    for r in range(4):
        d = _dump(r, [40.0 + r, 41.0 + r])
        if r % 2:
            (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(d))
        else:
            (tmp_path / f"nccl_trace_rank_{r}").write_text(json.dumps(d))
    t = read_flight_recorder(tmp_path)
    assert sorted(t["rank"].unique()) == [0, 1, 2, 3]
    assert t.loc[(t["rank"] == 3) & (t["step"] == 2), "duration_s"].item() == \
        pytest.approx(0.044)
    assert (t["section"] == "nccl:all_reduce pg0").all()


def test_flight_recorder_refuses_code_in_a_pickle(tmp_path):
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(pickle.dumps({"entries": [], "x": np.float64(1.0)}))
    with pytest.raises(ParseError, match="plain"):
        read_flight_recorder(p)
