"""Fault-record readers (powerlab.iotools.faults) and the fault table's checks
(powerlab.telemetry.faults): the InfiniteHBD trace, the CSV, XID events and sacct; bad
records raise one-line errors or counted warnings, never silent drops."""

import json
import warnings

import pandas as pd
import pytest

from powerlab.data import bundled_path
from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools.faults import (
    faults_from_events,
    faults_from_sacct,
    parse_fault_csv,
    parse_infinitehbd,
    read_infinitehbd,
)
from powerlab.iotools.xid import parse_kernel_xid
from powerlab.telemetry.faults import FAULT_COLUMNS, check_faults

TRACE = bundled_path("infinitehbd-fault-trace", "fault_trace.json.gz")


def _ev(node, t, kind, cls="GPU", level="Hardware Failure", desc="GPU Lost"):
    return {"node_id": node, "event_time": t, "event_type": kind,
            "fault_type": {"Level": level, "Class": cls, "Desc": desc}}


def test_infinitehbd_trace_counts_match_its_statistics_file():
    # fault_statistics.json of stepfun-ai/InfiniteHBD-Trace: 584 faults; GPU class 158 of
    # which 60 DBE and 1 SBE over threshold (ECC -> gpu_memory); cable 40 + NIC 30
    # (network); fan 33; PSU 26; Stress Test Failure 97; Change 4 + Test 2 (planned)
    with pytest.warns(DataQualityWarning, match="2 fault.s. overlap"):
        f, meta = read_infinitehbd(TRACE)
    assert list(f.columns) == list(FAULT_COLUMNS)
    assert len(f) == 584 and f["node"].nunique() == 231 and meta["n_nodes"] == 400
    c = f["fault_class"].value_counts()
    assert c["gpu"] + c["gpu_memory"] == 158 and c["gpu_memory"] == 61
    assert (c["network"], c["cooling"], c["power"], c["stress_test"], c["planned"]) == \
        (70, 33, 26, 97, 6)
    assert f["end"].notna().all() and (f["end"] >= f["start"]).all()
    rep = (f["end"] - f["start"]).dt.total_seconds() / 86400
    # issue 36's first look: median repair 0.85 d, mean 5.5 d
    assert rep.median() == pytest.approx(0.85, abs=0.01)
    assert rep.mean() == pytest.approx(5.535, abs=0.01)
    assert meta["end"] - meta["start"] == pd.Timedelta(days=349)


def test_infinitehbd_pairs_by_node_and_type_not_by_order():
    txt = json.dumps([_ev("a", 1.0, "fault_start"),
                      _ev("a", 2.0, "fault_start", "Fan", desc="Speed Critical (Sensor)"),
                      _ev("a", 3.0, "fault_end", "Fan", desc="Speed Critical (Sensor)"),
                      _ev("a", 4.0, "fault_end")])
    with pytest.warns(DataQualityWarning, match="1 fault.s. overlap"):
        f, _ = parse_infinitehbd(txt)
    got = {r.fault_class: ((r.start - pd.Timestamp("2024-03-30", tz="UTC")).days,
                           (r.end - pd.Timestamp("2024-03-30", tz="UTC")).days)
           for r in f.itertuples()}
    assert got == {"gpu": (1, 4), "cooling": (2, 3)}


@pytest.mark.bad_input("readers")
def test_infinitehbd_bad_records_raise_or_are_counted():
    end_only = json.dumps([_ev("a", 1.0, "fault_start"), _ev("a", 2.0, "fault_end"),
                           _ev("b", 3.0, "fault_end")])
    with pytest.raises(ParseError, match="event 3.*no start"):
        parse_infinitehbd(end_only)
    with pytest.warns(DataQualityWarning, match="left out 1 record.s. with no start"):
        f, _ = parse_infinitehbd(end_only, errors="warn")
    assert len(f) == 1
    unknown = json.dumps([_ev("a", 1.0, "fault_start", "Quantum Flux")])
    with pytest.raises(ParseError, match="unknown fault class.*Quantum Flux"):
        parse_infinitehbd(unknown)
    with pytest.warns(DataQualityWarning, match="1 open fault"):
        f, _ = parse_infinitehbd(json.dumps([_ev("a", 1.0, "fault_start")]))
    assert f["end"].isna().all()
    with pytest.raises(ParseError, match="not JSON"):
        parse_infinitehbd("[{")


CSV = """node,start,end,fault_class,detail
n1,2024-05-01T10:00:00Z,2024-05-02T10:00:00Z,gpu,Xid 79
n2,2024-05-03 08:00,,network,link down
"""


def test_fault_csv_reads_times_in_utc_and_open_ends():
    with pytest.warns(DataQualityWarning, match="1 open fault"):
        f = parse_fault_csv(CSV, tz="America/Chicago")
    assert f.loc[f.node == "n2", "start"].iloc[0] == pd.Timestamp("2024-05-03 13:00",
                                                                  tz="UTC")
    assert f["end"].isna().sum() == 1


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("row, match", [
    ("n1,2024-05-01T10:00Z,2024-05-01T09:00Z,gpu", "line 2.*end before start"),
    ("n1,2024-05-01T10:00Z,,warp_core", "unknown fault class 'warp_core'"),
    (",2024-05-01T10:00Z,,gpu", "no node"),
])
def test_fault_csv_bad_rows_one_line_errors(row, match):
    with pytest.raises(ParseError, match=match):
        parse_fault_csv("node,start,end,fault_class\n" + row + "\n")
    with pytest.warns(DataQualityWarning, match="left out 1 record"):
        assert len(parse_fault_csv("node,start,end,fault_class\n" + row + "\n",
                                   errors="warn")) == 0


@pytest.mark.bad_input("readers")
def test_fault_csv_refuses_zoneless_times_without_tz():
    with pytest.raises(ParseError, match="line 3"):
        parse_fault_csv(CSV)


def test_overlapping_faults_are_kept_and_counted():
    df = pd.DataFrame({"node": ["a", "a", "b"],
                       "start": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-01"],
                                               utc=True),
                       "end": pd.to_datetime(["2024-01-05", "2024-01-03", "2024-01-02"],
                                             utc=True),
                       "fault_class": ["gpu", "power", "fan"]})
    with pytest.raises(ParseError, match="unknown fault class 'fan'"):
        check_faults(df)
    df.loc[2, "fault_class"] = "cooling"
    with pytest.warns(DataQualityWarning, match="1 fault.s. overlap.*1 node"):
        assert len(check_faults(df)) == 3


def test_faults_from_xid_events_and_sacct():
    log = ("2024-05-01T10:00:00+0000 n1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
           "name=python, GPU has fallen off the bus.\n"
           "2024-05-01T10:00:30+0000 n1 kernel: NVRM: Xid (PCI:0000:3b:00): 45, pid=1, x\n"
           "2024-05-01T10:01:00+0000 n1 kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE\n"
           "2024-05-03T10:00:00+0000 n2 kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=1, x\n")
    with pytest.warns(DataQualityWarning, match="1 open fault"):
        f = faults_from_events(parse_kernel_xid(log))
    # 79 and 48 one minute apart on n1 are one incident; Xid 13 (application) is none
    assert f[["node", "fault_class"]].values.tolist() == [["n1", "gpu"]]
    jobs = pd.DataFrame({"job_id": ["7", "8"], "state": ["NODE_FAIL", "COMPLETED"],
                         "end": pd.to_datetime(["2024-05-01", "2024-05-02"], utc=True),
                         "hosts": [["n1", "n2"], ["n3"]]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        s = faults_from_sacct(jobs)
    assert sorted(s["node"]) == ["n1", "n2"] and set(s["fault_class"]) == {"unknown"}
