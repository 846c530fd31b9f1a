"""Kernel-log Xids in every format (issue 35 item 6): each line of a corpus gets the right
UTC time, host, GPU (PCI bus id -> GPU from an ``nvidia-smi -q`` map) and category; zone-
less times are refused without a zone, dmesg without a host is refused, a ``dmesg -T`` line
whose weekday is not its date's is refused; ``powerlab import`` honours ``--tz``.

Categories follow NVIDIA's Xid catalogue ("Analyzing Xid Errors with the Xid Catalog",
docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html): 79 fallen off the bus, 48
double-bit ECC, 94 contained ECC, 63 row-remapping recorded (informational), 92 high
single-bit ECC rate (informational), 13 graphics engine exception (application), 119 GSP
RPC timeout, 74 NVLink error.  America/Chicago is UTC-5 in July (CDT).
"""

import pandas as pd
import pytest

from powerlab.cli import main
from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools.gpumap import parse_gpu_map
from powerlab.iotools.xid import parse_kernel_xid
from powerlab.reliability.rates import failure_rates
from powerlab.telemetry.event_store import read_events

PCI = ["18", "2a", "3b", "5d", "9a", "ab", "ba", "db"]
SMI_Q = ("==============NVSMI LOG==============\n\nTimestamp : Fri Jul  4 03:00:00 2025\n"
         "Attached GPUs                             : 8\n" + "".join(
             f"GPU 00000000:{p.upper()}:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n"
             f"    GPU UUID                              : GPU-{i:04d}\n"
             f"    Minor Number                          : {7 - i}\n"
             for i, p in enumerate(PCI)))
MAP = parse_gpu_map(SMI_Q)


def _x(pci, code, msg="x"):
    return f"NVRM: Xid (PCI:0000:{pci}:00): {code}, pid=1, name=python, {msg}"


# (format, text, parse options, utc, host, gpu_index, kind, root_cause)
CORPUS = [
    ("journalctl default", f"Jul 04 03:22:10 gpu-a01 kernel: {_x('18', 79)}",
     {"tz": "America/Chicago", "year": 2025}, "2025-07-04T08:22:10", "gpu-a01", 0,
     "gpu_hardware", "faulty_gpu"),
    ("syslog, kernel time inside", f"Jul  4 03:22:11 gpu-a01 kernel: [  812.345678] "
     f"{_x('2a', 48)}", {"tz": "America/Chicago", "year": 2025}, "2025-07-04T08:22:11",
     "gpu-a01", 1, "gpu_memory", "gpu_hbm3_memory"),
    ("journalctl -o short-iso", f"2025-07-04T03:23:00-0500 gpu-a02 kernel: {_x('3b', 94)}",
     {}, "2025-07-04T08:23:00", "gpu-a02", 2, "gpu_memory", "gpu_hbm3_memory"),
    ("rsyslog RFC 3339", "2025-07-04T03:24:00.250000-05:00 gpu-a02 kernel: "
     f"{_x('5d', 63)}", {}, "2025-07-04T08:24:00.25", "gpu-a02", 3, "informational", None),
    ("rsyslog RFC 3339, kernel time", "2025-07-04T10:24:01.000000+02:00 gpu-a03 kernel: "
     f"[ 9001.5] {_x('9a', 92)}", {}, "2025-07-04T08:24:01", "gpu-a03", 4, "informational",
     None),
    ("dmesg -T", f"[Fri Jul  4 03:25:00 2025] {_x('ab', 13)}",
     {"tz": "America/Chicago", "host": "gpu-a04"}, "2025-07-04T08:25:00", "gpu-a04", 5,
     "application", None),
    ("raw dmesg", f"[ 3600.000000] {_x('ba', 119)}",
     {"host": "gpu-a04", "boot_time": "2025-07-04T07:26:00Z"}, "2025-07-04T08:26:00",
     "gpu-a04", 6, "gpu_hardware", "gpu_system_processor"),
    ("dmesg -T, ISO-less journal of an old year", f"Dec 31 23:59:59 gpu-a05 kernel: "
     f"{_x('db', 74)}", {"tz": "UTC", "year": 2024}, "2024-12-31T23:59:59", "gpu-a05", 7,
     "nvlink", "faulty_gpu"),
]


@pytest.mark.parametrize("fmt, text, opts, utc, host, gpu, kind, cause", CORPUS,
                         ids=[c[0] for c in CORPUS])
def test_every_format_gets_time_host_gpu_and_category(fmt, text, opts, utc, host, gpu,
                                                       kind, cause):
    ev = parse_kernel_xid(text + "\n", devices=MAP, **opts)
    assert len(ev) == 1
    r = ev.iloc[0]
    assert r["timestamp"] == pd.Timestamp(utc, tz="UTC")
    assert r["host"] == host and r["gpu_index"] == gpu and r["gpu_uuid"] == f"GPU-{gpu:04d}"
    assert r["kind"] == kind
    assert (pd.isna(r["root_cause"]) and cause is None) or r["root_cause"] == cause


def test_journal_year_is_inferred_and_stated():
    line = f"Jul 04 03:22:10 gpu-a01 kernel: {_x('18', 79)}\n"
    with pytest.warns(DataQualityWarning, match="no year: read as 2025"):
        ev = parse_kernel_xid(line, tz="UTC", reference="2026-03-01")
    assert ev["timestamp"].iloc[0] == pd.Timestamp("2025-07-04T03:22:10Z")
    with pytest.warns(DataQualityWarning, match="read as 2026"):
        ev = parse_kernel_xid(line, tz="UTC", reference="2026-07-04T12:00Z")
    assert ev["timestamp"].iloc[0].year == 2026


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("text, opts, match", [
    (f"Jul 04 03:22:10 h kernel: {_x('18', 79)}", {"year": 2025}, "no zone; pass tz"),
    (f"[Fri Jul  4 03:25:00 2025] {_x('ab', 13)}", {"host": "h"}, "pass tz"),
    (f"2025-07-04T03:23:00 h kernel: {_x('3b', 94)}", {}, "has no zone"),
    (f"[Sat Jul  4 03:25:00 2025] {_x('ab', 13)}", {"host": "h", "tz": "UTC"},
     "Sat does not match the date .a Friday"),
    (f"[ 3600.000000] {_x('ba', 119)}", {"boot_time": "2025-07-04T07:26:00Z"},
     "names no host"),
])
def test_refusals(text, opts, match):
    with pytest.raises(ParseError, match=match) as e:
        parse_kernel_xid(text + "\n", **opts)
    assert e.value.line == 1


def test_failure_rates_count_incidents_not_lines():
    # 9 Xid lines on 8 GPUs: 63 and 92 are informational (not failures); 48+63 and 95+64
    # one second apart on one GPU are one incident each -> 5 incidents
    t = "2025-07-04T08:00:{:02d}+00:00 n1 kernel: " + "NVRM: Xid (PCI:0000:{}:00): {}, x\n"
    log = "".join([t.format(0, "18", 79), t.format(1, "2a", 48), t.format(2, "2a", 63),
                   t.format(3, "3b", 95), t.format(4, "3b", 64), t.format(5, "5d", 63),
                   t.format(6, "9a", 92), t.format(7, "ab", 94), t.format(8, "ba", 74)])
    ev = parse_kernel_xid(log, devices=MAP)
    assert len(ev) == 9 and ev["root_cause"].notna().sum() == 6
    r = failure_rates(ev, 1000.0)
    assert r.total == 5
    assert failure_rates(ev, 1000.0, window_s=0).total == 6     # every failure line


def test_import_honours_tz_host_and_gpu_map(tmp_path, capsys):
    log = tmp_path / "dmesg_T.log"
    log.write_text("[Fri Jul  4 14:03:22 2025] " + _x("3b", 79) + "\n")
    smi = tmp_path / "smi_q.txt"
    smi.write_text(SMI_Q)
    store = tmp_path / "store"
    # no zone given: refused (not stored as UTC); no host given: refused (not NA)
    assert main(["import", str(log), "--host", "gpu-a04", "--out", str(store)]) == 2
    assert "pass tz" in capsys.readouterr().err
    assert main(["import", str(log), "--tz", "America/Chicago", "--out", str(store)]) == 2
    assert "names no host" in capsys.readouterr().err
    assert main(["import", str(log), "--tz", "America/Chicago", "--host", "gpu-a04",
                 "--gpu-map", str(smi), "--out", str(store)]) == 0
    ev = read_events(store)
    # 14:03:22 CDT is 19:03:22 UTC (issue 35: it was stored as 14:03:22Z)
    assert ev["timestamp"].tolist() == [pd.Timestamp("2025-07-04T19:03:22Z")]
    assert ev["host"].tolist() == ["gpu-a04"] and ev["gpu_index"].tolist() == [2]


def test_gpu_map_from_nvidia_smi_query_csv():
    csv = ("index, uuid, pci.bus_id\n0, GPU-aaaa, 00000000:18:00.0\n"
           "1, GPU-bbbb, 00000000:2A:00.0\n")
    m = parse_gpu_map(csv, host="gpu-a01")
    assert m[["host", "pci_bus_id", "gpu_index", "gpu_uuid"]].values.tolist() == [
        ["gpu-a01", "00000000:18:00.0", 0, "GPU-aaaa"],
        ["gpu-a01", "00000000:2A:00.0", 1, "GPU-bbbb"]]
    ev = parse_kernel_xid(f"2025-07-04T03:23:00Z gpu-a01 kernel: {_x('2a', 79)}\n"
                          f"2025-07-04T03:23:00Z gpu-b07 kernel: {_x('2a', 79)}\n", devices=m)
    # the map is gpu-a01's: gpu-b07's GPU at the same PCI address stays unnamed
    assert ev["gpu_index"].tolist()[0] == 1 and pd.isna(ev["gpu_index"].iloc[1])
    with pytest.raises(ParseError, match="needs pci.bus_id"):
        parse_gpu_map("name, serial\nx, y\n")
