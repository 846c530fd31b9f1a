"""The timestamps of an nvidia-smi log, read into UTC.

nvidia-smi prints local wall-clock time without a zone (``2025/07/27 10:00:00.123``);
the reader is told the zone (``tz=``) and resolves daylight-saving gaps and repeats
(:func:`~powerlab.iotools._common.localize`).  Timestamps that all carry an offset are
read as they say.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import ParseError
from ._common import localize

#: A timestamp's zone offset at its end.
ZONE = r"(Z|[+-]\d\d:?\d\d)$"


def parse_timestamps(arr: pa.Array, tz, path, column, row_line):
    """nvidia-smi's timestamps (``YYYY/MM/DD HH:MM:SS.fff``, local wall-clock time; or
    all with a zone offset) -> ``(UTC DatetimeIndex, n_ambiguous, n_nonexistent)``; a
    ParseError naming the line (``row_line(row)``) and column of a bad one."""
    s = arr
    if len(s) and (s[0].as_py()[:1].isspace() or s[0].as_py()[-1:].isspace()):
        s = pc.utf8_trim_whitespace(s)
    n_zoned = 0
    if len(s) and re.search(ZONE, s[0].as_py()):
        # zoned timestamps: make sure all of them are (a naive one would be taken as UTC)
        zoned = pc.match_substring_regex(s, ZONE)
        n_zoned = pc.sum(pc.cast(zoned, pa.int64())).as_py() or 0
    if 0 < n_zoned < len(s):
        r = int(np.flatnonzero(~zoned.to_numpy(zero_copy_only=False))[0])
        raise ParseError("some timestamps carry a time zone and some do not", path=path,
                         line=row_line(r), column=column)
    iso = replace_byte(s, b"/", b"-")
    target = pa.timestamp("ns", tz="UTC") if n_zoned else pa.timestamp("ns")
    try:
        ts = pc.cast(iso, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = pd.to_datetime(pd.Series(iso.to_pylist(), dtype=object), errors="coerce",
                             format="ISO8601", utc=bool(n_zoned)).isna().to_numpy()
        r = int(np.flatnonzero(bad)[0]) if bad.any() else 0
        raise ParseError(f"cannot read {arr[r].as_py()!r} as a timestamp (expected "
                         "'YYYY/MM/DD HH:MM:SS.fff' as nvidia-smi prints it)", path=path,
                         line=row_line(r), column=column) from None
    ns = ts.cast(pa.int64()).to_numpy(zero_copy_only=False)
    if n_zoned:
        return pd.DatetimeIndex(ns.view("datetime64[ns]")).tz_localize("UTC"), 0, 0
    if tz is None:
        raise ParseError("timestamps have no time zone (nvidia-smi prints local wall-clock "
                         "time); pass tz=, e.g. tz='America/New_York' or tz='UTC', naming "
                         "the zone of the machine that wrote the log", path=path,
                         column=column)
    return localize(pd.DatetimeIndex(ns.view("datetime64[ns]")), tz)


def replace_byte(arr: pa.Array, old: bytes, new: bytes) -> pa.Array:
    """``pc.replace_substring(arr, old, new)`` for one ASCII byte, done on the data buffer.

    Replacing one ASCII byte by another keeps every offset and keeps the text valid UTF-8
    (ASCII bytes never occur inside a multi-byte sequence).
    """
    if not isinstance(arr, (pa.StringArray, pa.LargeStringArray)) or len(old) != 1:
        return pc.replace_substring(arr, old.decode(), new.decode())
    validity, offsets, data = arr.buffers()
    if data is None:
        return arr
    raw = data.to_pybytes()
    if old not in raw:
        return arr
    return pa.Array.from_buffers(arr.type, len(arr),
                                 [validity, offsets, pa.py_buffer(raw.replace(old, new))],
                                 arr.null_count, arr.offset)
