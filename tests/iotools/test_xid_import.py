"""XID logs through ``powerlab import`` into the store's events (issue 22 item 6)."""

from __future__ import annotations

import pandas as pd

from powerlab.cli import main
from powerlab.iotools import read_any, sniff_format
from powerlab.telemetry.event_store import read_events

KERNEL = (
    "2026-03-02T10:11:12+0000 node017 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, "
    "name=python, GPU has fallen off the bus.\n"
    "2026-03-02T10:15:00+0000 node017 kernel: usb 1-1: new device\n"
    "2026-03-02T11:00:01+0000 node017 kernel: NVRM: Xid (PCI:0000:5e:00): 48, pid=99, "
    "name=python, An uncorrectable double bit error (DBE) has been detected.\n")
DCGM = ('DCGM_FI_DEV_XID_ERRORS{gpu="2",UUID="GPU-abc",pci_bus_id="00000000:86:00.0",'
        'Hostname="node018",err_msg="Graphics Engine Exception"} 13 1772452800000\n')


def test_xid_logs_are_recognised_and_imported_into_the_store_events(tmp_path, capsys):
    """NVIDIA XID catalogue: Xid 79 "GPU has fallen off the bus", Xid 48 "double bit
    ECC error", Xid 13 "Graphics Engine Exception"; one event per Xid line (other kernel
    lines are not events); importing the same log again adds nothing."""
    k = tmp_path / "kern.log"
    k.write_text(KERNEL)
    d = tmp_path / "xid.prom"
    d.write_text(DCGM)
    assert sniff_format(k) == "kernel-xid" and sniff_format(d) == "dcgm-xid"
    assert list(read_any(k)["xid"]) == [79, 48]
    store = tmp_path / "store"
    assert main(["import", str(k), str(d), "--out", str(store)]) == 0
    out = capsys.readouterr().out
    assert "2 events (kernel-xid)" in out and "1 events (dcgm-xid)" in out
    ev = read_events(store)
    assert list(ev["xid"]) == [79, 48, 13]
    assert list(ev["host"]) == ["node017", "node017", "node018"]
    assert isinstance(ev["timestamp"].dtype, pd.DatetimeTZDtype)
    # 79 and 48 are hardware failures; 13 is usually the application's (no root cause)
    assert list(ev["root_cause"].fillna("-")) == ["faulty_gpu", "gpu_hbm3_memory", "-"]
    assert main(["import", str(k), "--out", str(store), "--force"]) == 0
    assert "0 events" in capsys.readouterr().out
    assert len(read_events(store)) == 3
