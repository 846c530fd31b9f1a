"""NVML field values: the fields powerlab asks for, their record layout and decoding.

One ``nvmlDeviceGetFieldValues`` call reads instant power, average power, the energy
counter and the memory temperature with NVML's own per-field timestamps.  Each
``nvmlFieldValue_t`` record (40 bytes: ``fieldId``, ``scopeId``, ``timestamp`` [us],
``latencyUsec``, ``valueType``, ``nvmlReturn`` and an 8-byte value union) says which
member of the union is set (``valueType``); :func:`decode_raw` reads one record's value,
:func:`decode_values` the values of many records at once (the bulk path of
:mod:`powerlab.collect.batch`).  No ``pynvml`` here: the boundary module
(:mod:`powerlab.collect.nvml`) makes the calls.

References
----------
.. [1] NVIDIA, "NVML API Reference Guide", Field Value Enums, ``nvmlFieldValue_t`` and
   ``nvmlDeviceGetFieldValues``. https://docs.nvidia.com/deploy/nvml-api/
"""

from __future__ import annotations

import struct

import numpy as np

from .signals import SAMPLE_COLUMNS

__all__ = ["COLUMN_POS", "FIELDS", "FV_DTYPE", "FV_STRUCT", "decode_raw", "decode_values"]

# field ids (NVML_FI_DEV_*)
FI_MEMORY_TEMP = 82
FI_TOTAL_ENERGY = 83
FI_POWER_AVERAGE = 185
FI_POWER_INSTANT = 186

#: The fields read in one call: (column, field id, timestamp slot, scale to SI, the
#: individual call that reads the column where the field is not supported, or None).
FIELDS = (
    ("power_w", FI_POWER_INSTANT, 0, 1e-3, None),
    ("power_avg_w", FI_POWER_AVERAGE, 1, 1e-3, "nvmlDeviceGetPowerUsage"),
    ("energy_j", FI_TOTAL_ENERGY, 2, 1e-3, "nvmlDeviceGetTotalEnergyConsumption"),
    ("temp_mem_c", FI_MEMORY_TEMP, 3, 1.0, None),
)
#: Position of each column in a sample's values (:data:`~.signals.SAMPLE_COLUMNS`).
COLUMN_POS = {c: i for i, c in enumerate(SAMPLE_COLUMNS)}

#: ``c_nvmlFieldValue_t``: fieldId u32, scopeId u32, timestamp i64, latencyUsec i64,
#: valueType u32, nvmlReturn u32, value (8-byte union) -- 40 bytes, no padding.
FV_STRUCT = struct.Struct("<IIqqIIQ")
#: The same record as a numpy dtype (the value union read as unsigned 64-bit).
FV_DTYPE = np.dtype([("fieldId", "<u4"), ("scopeId", "<u4"), ("timestamp", "<i8"),
                     ("latency", "<i8"), ("vtype", "<u4"), ("ret", "<u4"),
                     ("value", "<u8")])
_U64 = struct.Struct("<Q")
_DBL = struct.Struct("<d")
_I64 = struct.Struct("<q")


def decode_raw(vtype: int, raw: int):
    """A field value from its 8 raw bytes (as an unsigned 64-bit int) and its type."""
    if vtype == 1:  # unsigned int
        return raw & 0xFFFFFFFF
    if vtype == 3 or vtype == 2:  # unsigned long long / unsigned long
        return raw
    if vtype == 0:  # double
        return _DBL.unpack(_U64.pack(raw))[0]
    if vtype == 4:  # signed long long
        return _I64.unpack(_U64.pack(raw))[0]
    if vtype == 5:  # signed int
        v = raw & 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v
    return raw & 0xFFFF  # unsigned short


def decode_values(vtype: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Field values as float64 from NVML's ``valueType`` and the raw 8-byte union
    (the vector form of :func:`decode_raw`)."""
    if vtype.size and (vtype == 1).all():  # the power fields' type: the common case
        return (raw & 0xFFFFFFFF).astype(np.float64)
    if vtype.size and (vtype == 3).all():  # the energy counter's
        return raw.astype(np.float64)
    out = np.empty(raw.shape, dtype=np.float64)
    for t in np.unique(vtype):
        m = vtype == t
        r = raw[m]
        if t == 1:  # unsigned int
            out[m] = r & 0xFFFFFFFF
        elif t in (2, 3):  # unsigned long / unsigned long long
            out[m] = r
        elif t == 0:  # double
            out[m] = r.view(np.float64)
        elif t == 4:  # signed long long
            out[m] = r.view(np.int64)
        elif t == 5:  # signed int
            out[m] = (r & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        else:  # unsigned short
            out[m] = r & 0xFFFF
    return out
