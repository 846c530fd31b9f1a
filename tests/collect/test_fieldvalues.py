"""powerlab.collect.fieldvalues, signals and nvml_codes: the NVML pieces without pynvml."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from powerlab.collect import fieldvalues, nvml_codes, signals
from powerlab.exceptions import GPULostError, NVMLError, NVMLUnavailableError


@pytest.mark.parametrize("vtype, value, raw", [
    (0, -2.5, struct.unpack("<Q", struct.pack("<d", -2.5))[0]),          # double
    (1, 4_000_000_000, 4_000_000_000 | (7 << 32)),                      # u32, high bits set
    (2, 2**40, 2**40),                                                   # unsigned long
    (3, 2**63 + 5, 2**63 + 5),                                           # unsigned long long
    (4, -7, struct.unpack("<Q", struct.pack("<q", -7))[0]),             # signed long long
    (5, -3, (2**32 - 3) | (9 << 32)),                                    # signed int
    (6, 65535, 65535 | (1 << 20)),                                       # unsigned short
])
def test_scalar_and_vector_decoding_agree(vtype, value, raw):
    assert fieldvalues.decode_raw(vtype, raw) == value
    got = fieldvalues.decode_values(np.array([vtype], np.uint32), np.array([raw], np.uint64))
    assert got.dtype == np.float64 and got[0] == float(value)


def test_the_record_layout_is_nvmls_40_bytes():
    assert fieldvalues.FV_STRUCT.size == fieldvalues.FV_DTYPE.itemsize == 40
    assert [f[0] for f in fieldvalues.FIELDS] == ["power_w", "power_avg_w", "energy_j",
                                                  "temp_mem_c"]
    assert all(fieldvalues.COLUMN_POS[c] == signals.SAMPLE_COLUMNS.index(c)
               for c, *_ in fieldvalues.FIELDS)


def test_signal_groups_cover_every_column_once_and_masks_are_bits():
    cols = [c for g in signals.GROUPS.values() for c in g]
    assert sorted(cols) == sorted(signals.SAMPLE_COLUMNS)
    assert signals.group_mask(["power"]) == 1
    assert signals.group_mask(["clocks", "power_limit"]) == 4 | 16
    assert signals.group_mask(signals.GROUPS) == signals.ALL_GROUPS == 31
    with pytest.raises(ValueError, match="signal group must be one of .* got 'fan'"):
        signals.group_mask(["fan"])


@pytest.mark.parametrize("code, cls, kind, text", [
    (15, GPULostError, "lost", "GPU is lost (NVML_ERROR_GPU_IS_LOST): gone"),
    (12, NVMLUnavailableError, "unavailable", "libnvidia-ml.so.1 not found"),
    (10, NVMLError, "timeout", "NVML error: slow (NVML return code 10)"),
    (4, NVMLError, "permission", "(NVML return code 4)"),
    (77, NVMLError, "error", "NVML error: odd (NVML return code 77)"),
])
def test_each_return_code_becomes_its_powerlab_error(code, cls, kind, text):
    detail = {15: "gone", 10: "slow", 77: "odd"}.get(code, "x")
    err = nvml_codes.powerlab_error(code, detail)
    assert type(err) is cls and (err.code, err.kind) == (code, kind)
    assert text in str(err)
