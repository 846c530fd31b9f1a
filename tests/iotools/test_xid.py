"""Tests of powerlab.iotools.xid: kernel-log, journal, DCGM and collector events become one
events table with XID codes classified after NVIDIA's catalogue."""

from __future__ import annotations

import gzip
import warnings

import pandas as pd
import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools.xid import (
    events_from_collector,
    normalize_pci_bus_id,
    parse_dcgm_health,
    parse_dcgm_xid,
    parse_kernel_xid,
    read_kernel_xid,
)
from powerlab.telemetry.events import EVENT_COLUMNS, EVENT_DTYPES

DMESG = """\
[    5.123456] nvidia: loading out-of-tree module taints kernel.
[ 8273.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
[ 8273.200000] NVRM: GPU at PCI:0000:3b:00: GPU-5c4b0a1e-0000-0000-0000-000000000000
[ 9001.500000] NVRM: Xid (PCI:0000:b3:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.
[ 9100.000000] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 44 egress
"""

JOURNAL = """\
2024-05-17T10:11:12+0000 node-07 kernel: NVRM: Xid (PCI:0000:3b:00): 94, pid=77, name=pt_main_thread, Ch 00000008
2024-05-17T11:00:00+0000 node-07 systemd[1]: Started Session 4 of user root.
2024-05-17T12:30:00+02:00 node-08 kernel: NVRM: Xid (PCI:0000:ca:00): 13, pid=9, name=python, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)
"""

DCGM_PROM = """\
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:3B:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-01",err_code="0",err_msg="No Error"} 0 1715940000000
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:5E:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-01",err_code="79",err_msg="GPU has fallen off the bus"} 79 1715940000000
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:5E:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-01",err_code="79",err_msg="GPU has fallen off the bus"} 79 1715940030000
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:5E:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-01",err_code="48",err_msg="DBE"} 48 1715940060000
"""

DCGM_HEALTH = """\
+---------------------------+----------------------------------------------------------+
| Health Monitor Report                                                                |
+===========================+==========================================================+
| Group 0                   |                                                          |
| -> Overall Health         | Failure                                                  |
| -> GPU ID: 0              | Failure                                                  |
|    -> Memory system       | Failure                                                  |
|       -> Error            | GPU 0 had uncorrectable memory errors and row remapping  |
|                           |  failed.                                                 |
| -> GPU ID: 3              | Warning                                                  |
|    -> PCIe system         | Warning                                                  |
|       -> Warning          | Detected more than 8 PCIe replays per minute for GPU 3   |
|    -> NVLink system       | Failure                                                  |
|       -> Error            | Detected XID 74 NVLink error on GPU 3                    |
+---------------------------+----------------------------------------------------------+
"""


def _canonical(df):
    assert tuple(df.columns) == EVENT_COLUMNS
    for c in EVENT_COLUMNS:
        assert str(df[c].dtype) == EVENT_DTYPES[c], c


def test_dmesg_seconds_since_boot_become_utc():
    ev = parse_kernel_xid(DMESG, host="node-01", boot_time="2024-05-17T00:00:00Z")
    _canonical(ev)
    assert list(ev["xid"]) == [79, 48]           # the GPU-at line and the SXid are not Xids
    assert ev["timestamp"].iloc[0] == pd.Timestamp("2024-05-17T02:17:53.123456Z")
    assert list(ev["pci_bus_id"]) == ["00000000:3B:00.0", "00000000:B3:00.0"]
    assert list(ev["root_cause"]) == ["faulty_gpu", "gpu_hbm3_memory"]
    assert list(ev["kind"]) == ["gpu_hardware", "gpu_memory"]
    assert ev["message"].iloc[0] == "GPU has fallen off the bus."
    assert (ev["host"] == "node-01").all() and (ev["source"] == "kernel_log").all()


def test_dmesg_without_times_warns_and_keeps_nat():
    text = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
    with pytest.warns(DataQualityWarning, match="no absolute time"):
        ev = parse_kernel_xid(text, host="h")
    assert len(ev) == 1 and ev["timestamp"].isna().all() and ev["xid"].iloc[0] == 79
    with pytest.warns(DataQualityWarning):
        ev = parse_kernel_xid(DMESG, host="h")      # relative times without boot_time
    assert ev["timestamp"].isna().all()


def test_dmesg_T_local_time_and_journal_hosts():
    t = "[Fri May 17 10:11:12 2024] NVRM: Xid (PCI:0000:3b:00): 63, pid=1, name=x, Row Remapper\n"
    ev = parse_kernel_xid(t, host="n", tz="Europe/Paris")
    assert ev["timestamp"].iloc[0] == pd.Timestamp("2024-05-17T08:11:12Z")
    # NVIDIA's Xid catalogue: 63 records a row remapping (active at the next reset): an
    # informational event, not a failure
    assert ev["kind"].iloc[0] == "informational" and pd.isna(ev["root_cause"].iloc[0])
    j = parse_kernel_xid(JOURNAL)
    assert list(j["host"]) == ["node-07", "node-08"]
    assert list(j["timestamp"]) == [pd.Timestamp("2024-05-17T10:11:12Z"),
                                    pd.Timestamp("2024-05-17T10:30:00Z")]
    assert j["root_cause"].isna().tolist() == [False, True]     # XID 13 is an application's


def test_read_gz_and_devices_fill_gpu_identity(tmp_path):
    p = tmp_path / "kern.log.gz"
    p.write_bytes(gzip.compress(JOURNAL.encode()))
    devices = pd.DataFrame({"host": ["node-07", "node-08"],
                            "pci_bus_id": ["00000000:3B:00.0", "0000:ca:00"],
                            "gpu_index": [2, 6], "gpu_uuid": ["GPU-x", "GPU-y"]})
    ev = read_kernel_xid(p, devices=devices)
    assert list(ev["gpu_index"]) == [2, 6] and list(ev["gpu_uuid"]) == ["GPU-x", "GPU-y"]


def test_normalize_pci_bus_id():
    assert normalize_pci_bus_id("0000:3b:00") == "00000000:3B:00.0"
    assert normalize_pci_bus_id("00000000:3B:00.0") == "00000000:3B:00.0"
    assert normalize_pci_bus_id("3b:00.1") == "00000000:3B:00.1"
    with pytest.raises(ValueError):
        normalize_pci_bus_id("GPU-3b")


def test_dcgm_exporter_xid_one_event_per_change():
    ev = parse_dcgm_xid(DCGM_PROM)
    _canonical(ev)
    assert list(ev["xid"]) == [79, 48]          # the repeated 79 of the next scrape is one
    assert list(ev["gpu_index"]) == [1, 1] and (ev["host"] == "node-01").all()
    assert ev["timestamp"].iloc[0] == pd.Timestamp(1715940000000, unit="ms", tz="UTC")
    assert list(ev["root_cause"]) == ["faulty_gpu", "gpu_hbm3_memory"]


def test_dcgm_health_errors_and_warnings():
    ev = parse_dcgm_health(DCGM_HEALTH, timestamp="2024-05-17T12:00:00Z", host="node-02")
    _canonical(ev)
    assert list(ev["gpu_index"]) == [0, 3]
    assert list(ev["root_cause"]) == ["gpu_hbm3_memory", "faulty_gpu"]
    assert "row remapping failed" in ev["message"].iloc[0]
    assert ev["xid"].iloc[1] == 74 and (ev["kind"] == "health").all()
    ev_w = parse_dcgm_health(DCGM_HEALTH, timestamp="2024-05-17T12:00:00Z",
                             include_warnings=True)
    assert len(ev_w) == 3 and "PCIe" in ev_w["message"].iloc[1]


def test_collector_events():
    from powerlab.collect.sidetables import events_frame

    ts = pd.Timestamp("2024-05-17T00:00:00Z").value
    raw = events_frame([
        {"timestamp": ts, "host": "h", "gpu_index": 3, "gpu_uuid": "GPU-3", "kind": "lost",
         "attempt": None, "backoff_s": None, "message": "GPU is lost"},
        {"timestamp": ts + 10**9, "host": "h", "gpu_index": 1, "gpu_uuid": "GPU-1",
         "kind": "xid", "attempt": None, "backoff_s": None, "message": "Xid 48 on GPU 1"},
        {"timestamp": ts + 2 * 10**9, "host": "h", "gpu_index": 1, "gpu_uuid": "GPU-1",
         "kind": "start", "attempt": None, "backoff_s": None, "message": "started"},
    ])
    ev = events_from_collector(raw)
    _canonical(ev)
    assert list(ev["xid"]) == [79, 48] and list(ev["gpu_index"]) == [3, 1]
    assert (ev["source"] == "collector").all()


# --------------------------------------------------------------------------- bad input
@pytest.mark.bad_input("readers")
def test_malformed_xid_line_names_its_line():
    text = DMESG + "[ 9200.0] NVRM: Xid (PCI:zz:00): seventy-nine, GPU gone\n"
    with pytest.raises(ParseError, match="line 6"):
        parse_kernel_xid(text, host="h", boot_time="2024-05-17T00:00:00Z")


@pytest.mark.bad_input("readers")
def test_malformed_xid_line_skipped_with_warning():
    text = DMESG + "[ 9200.0] NVRM: Xid (PCI:0000:3b:00) 79 GPU gone\n"
    with pytest.warns(DataQualityWarning, match="skipped 1 malformed"):
        ev = parse_kernel_xid(text, host="h", boot_time="2024-05-17T00:00:00Z",
                              errors="warn")
    assert list(ev["xid"]) == [79, 48]


@pytest.mark.bad_input("readers")
def test_dcgm_xid_bad_value():
    text = 'DCGM_FI_DEV_XID_ERRORS{gpu="0",Hostname="h"} 7.5\n'
    with pytest.raises(ParseError, match="line 1"):
        parse_dcgm_xid(text)
    with pytest.raises(ParseError, match="line 1"):
        parse_dcgm_xid('DCGM_FI_DEV_XID_ERRORS{gpu="0" 79\n')


@pytest.mark.bad_input("readers")
def test_dcgm_health_not_health_output():
    with pytest.raises(ParseError, match="Health Monitor Report"):
        parse_dcgm_health("GPU 0: OK\n", timestamp="2024-05-17T00:00:00Z")


@pytest.mark.bad_input("readers")
def test_missing_log_file(tmp_path):
    with pytest.raises(ParseError, match="no such file"):
        read_kernel_xid(tmp_path / "nope.log")


def test_no_xid_lines_give_an_empty_table():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = parse_kernel_xid("[ 1.0] Linux version 6.8\n", host="h")
    _canonical(ev)
    assert len(ev) == 0
