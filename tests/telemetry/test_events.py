"""Tests of powerlab.telemetry.events: the root-cause table reproduces the Llama 3
paper's counts, and every XID maps to a known kind and root cause."""

from powerlab.telemetry.events import (
    EVENT_COLUMNS,
    LLAMA3_SNAPSHOT,
    ROOT_CAUSES,
    XID_CATALOGUE,
    classify_xid,
    empty_events,
)


def test_root_causes_add_up_to_the_paper():
    assert sum(r.llama3_count for r in ROOT_CAUSES) == LLAMA3_SNAPSHOT["unexpected"] == 419
    assert LLAMA3_SNAPSHOT["unexpected"] + LLAMA3_SNAPSHOT["planned"] == 466
    names = [r.name for r in ROOT_CAUSES]
    assert len(set(names)) == len(names) == 18
    gpu = sum(r.llama3_count for r in ROOT_CAUSES if r.category == "GPU")
    assert gpu == 268   # 64.0 % of 419 by count (the paper prints 58.7 %)
    assert {r.name: r.llama3_count for r in ROOT_CAUSES}["gpu_hbm3_memory"] == 72


def test_xid_catalogue_is_consistent():
    causes = {r.name for r in ROOT_CAUSES}
    kinds = {"gpu_memory", "gpu_hardware", "nvlink", "application", "informational"}
    for code, info in XID_CATALOGUE.items():
        assert info.code == code and info.kind in kinds
        assert (info.root_cause is None) == (info.kind in ("application", "informational"))
        assert info.root_cause is None or info.root_cause in causes
    assert classify_xid(79).root_cause == "faulty_gpu"
    assert classify_xid(48).kind == "gpu_memory"
    assert classify_xid(13).root_cause is None
    assert classify_xid(9999).kind == "unknown"


def test_empty_events_has_the_canonical_columns():
    e = empty_events()
    assert tuple(e.columns) == EVENT_COLUMNS and len(e) == 0
    assert str(e["timestamp"].dtype) == "datetime64[ns, UTC]" and str(e["xid"].dtype) == "Int32"
