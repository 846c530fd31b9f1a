"""XID readers on impossible input (issue 24): huge codes, impossible and nonexistent
times, huge GPU indices -> one ParseError naming the line, or a counted skip."""

from __future__ import annotations

import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools.xid import parse_dcgm_health, parse_dcgm_xid, parse_kernel_xid

pytestmark = pytest.mark.bad_input("readers")

K = "2025-07-02T10:00:00+00:00 node1 kernel: NVRM: Xid (PCI:0000:3b:00): {code}, pid=1, x\n"
P = 'DCGM_FI_DEV_XID_ERRORS{{gpu="{gpu}",UUID="GPU-1",Hostname="h"}} {value}{ts}\n'


@pytest.mark.parametrize("text, match", [
    (K.format(code="9" * 40), "above 65535"),
    (K.format(code=79).replace("07-02", "02-30"), "day is out of range"),
    ("[Sun Mar  9 02:30:00 2025] NVRM: Xid (PCI:0000:3b:00): 79, x\n", "Nonexistent|exist"),
])
def test_kernel_log(text, match):
    with pytest.raises(ParseError, match=match) as e:
        parse_kernel_xid(text, tz="America/Chicago")
    assert e.value.line == 1
    with pytest.warns(DataQualityWarning, match="skipped 1"):
        assert len(parse_kernel_xid(text, tz="America/Chicago", errors="warn")) == 0


def test_kernel_log_good_line_still_reads():
    df = parse_kernel_xid(K.format(code=79))
    assert df["xid"].tolist() == [79]


@pytest.mark.parametrize("gpu, value, ts, match", [
    ("0", "1e308", "", "above 65535"),
    ("0", "99999999999", "", "above 65535"),
    ("99999999", "79", "", "GPU index"),
    ("0", "79", " 99999999999999999999", "Out of bounds|out of bounds|overflow"),
])
def test_dcgm_exporter(gpu, value, ts, match):
    text = P.format(gpu=gpu, value=value, ts=ts)
    with pytest.raises(ParseError, match=match):
        parse_dcgm_xid(text, timestamp="2025-07-02")


def test_dcgm_health_huge_gpu_and_xid():
    head = "Health Monitor Report\n"
    with pytest.raises(ParseError, match="GPU index"):
        parse_dcgm_health(head + "| -> GPU 999999999 | Fail |\n", timestamp="2025-07-02")
