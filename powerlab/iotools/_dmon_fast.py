"""The CSV pass of :func:`powerlab.iotools.dcgm.parse_dcgm_dmon` for plain ``dcgmi dmon`` output.

Output of ``dcgmi dmon -e ... -d ...`` without line timestamps is a table split at runs of
whitespace: ``GPU <id> <value> ...`` rows under ``#Entity`` header and ``ID`` units lines
(repeated every few samples).  Where the header lines are all alike and every other line
is such a GPU row, the pandas C parser reads the runs of rows between the header and
units lines, the numbers parsed in the CSV pass; long runs are cut at line ends into
pieces read on threads (as pandas' own ``read_csv`` of a file does), the result not
depending on the cut.  The text must be ASCII (its characters are then its bytes).

This is only a faster route to the same result: :func:`fast_rows` returns ``None`` (and
the reader takes its line-by-line path, which names the line of any bad row) unless every
row has the header's number of values, every value is a number or ``N/A``, the GPU ids
are integers repeating in one fixed cycle, and nothing pandas would read differently from
Python's ``float`` is present (``-0``, booleans, ``#`` inside a row).
"""

from __future__ import annotations

import csv
import itertools
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from ._smi_fast import EXACT_FLOATS, ByteRange

_FAILED = (ValueError, TypeError, OverflowError, IndexError)


def fast_rows(text: str | bytes, variable_map: dict, blank_to_nan, workers: int = 1):
    """``(gpus, data, sample)`` of plain ``dcgmi dmon`` output (text, or its bytes), or
    ``None``.

    ``gpus`` are the rows' GPU ids, ``data`` canonical column -> float64 values (as the
    line-by-line path fills them: unit factors applied, DCGM blanks NaN, ``N/A`` NaN,
    where two fields map to one column the later non-``N/A`` one wins) and ``sample`` the
    sample number of each row (a new sample wherever a GPU id repeats).  The runs of
    rows between header lines are read in pieces of about :data:`PIECE_BYTES`, on up to
    ``workers`` threads at once (the result does not depend on it).
    """
    raw = text.encode("ascii") if isinstance(text, str) and text.isascii() else text
    if (not EXACT_FLOATS or not isinstance(raw, bytes) or not raw.isascii()
            or raw.find(b"-") >= 0 or raw.find(b"\t") >= 0):
        return None
    lines_head = _header_lines(raw)
    if lines_head is None:
        return None
    columns, skipped, skipped_na = lines_head
    pieces = _pieces(raw, skipped)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if workers < 2 or len(pieces) < 2:
                frames = [_read_piece(raw, a, b) for a, b in pieces]
            else:
                with ThreadPoolExecutor(max_workers=min(workers, len(pieces))) as ex:
                    frames = list(ex.map(lambda ab: _read_piece(raw, *ab), pieces))
        n_na = raw.count(b"N/A") if raw.find(b"N") >= 0 else 0
        return _convert(n_na - skipped_na, frames, columns, variable_map, blank_to_nan)
    except _FAILED:
        return None


#: bytes of rows per piece (a few MiB: each piece's arrays stay small)
PIECE_BYTES = 4 << 20


def _pieces(raw: bytes, skipped: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Byte ranges of the rows: the text between the skipped lines (``(start, end)``
    of each), cut at line ends into pieces of about :data:`PIECE_BYTES`; ranges holding
    only whitespace are left out."""
    out = []
    pos = 0
    for a, b in [*skipped, (len(raw), len(raw))]:
        if a > pos and (a - pos > 4096 or raw[pos:a].strip()):
            k = max(1, (a - pos) // PIECE_BYTES)
            cuts = [pos]
            for i in range(1, k):
                nl = raw.find(b"\n", pos + (a - pos) * i // k, a)
                if nl < 0:
                    break
                if nl + 1 > cuts[-1] and nl + 1 < a:
                    cuts.append(nl + 1)
            cuts.append(a)
            out.extend(itertools.pairwise(cuts))
        pos = b
    return out


def _read_piece(raw: bytes, start: int, end: int) -> pd.DataFrame:
    return pd.read_csv(ByteRange(raw, start, end), sep=r"\s+", header=None,
                       quoting=csv.QUOTE_NONE, na_values=["N/A"], keep_default_na=False,
                       skip_blank_lines=True, engine="c")


#: the lines that are not rows, by their first byte (rows hold none of these bytes):
#: the header, its units line and the line dcgmi prints when stopped
_MARKERS = {ord("#"): b"#Entity", ord("I"): b"ID", ord("d"): b"dmon was stopped"}


def _header_lines(raw: bytes):
    """``(field names, (start, end) of the header, units and 'dmon was stopped' lines,
    the 'N/A' in those lines)``, or ``None`` unless every ``#Entity`` line is alike and
    the text starts with one.

    Those lines are found by their first bytes (``#``, ``I``, ``d``: single bytes are
    found at memory speed, several times faster than a search for ``"\\nID"``); such a
    byte anywhere but at the start of such a line or inside one declines.
    """
    if isinstance(raw, str):
        raw = raw.encode("ascii")
    p = 0
    while raw.startswith(b"\n", p):
        p += 1
    nl = raw.find(b"\n", p)
    first = raw[p:nl if nl >= 0 else len(raw)].strip()
    if not first.startswith(b"#Entity"):
        return None
    lines: dict[int, int] = {}  # start -> end (after its newline) of each skipped line
    for byte, marker in _MARKERS.items():
        pos = raw.find(byte)
        while pos >= 0:
            ls = raw.rfind(b"\n", 0, pos) + 1
            if ls not in lines:
                if ls != pos or not raw.startswith(marker, pos):
                    return None
                end = raw.find(b"\n", pos)
                end = end + 1 if end >= 0 else len(raw)
                if byte == ord("#") and raw[pos:end].strip() != first:
                    return None
                lines[ls] = end
            pos = raw.find(byte, lines[ls])
    skipped = sorted(lines.items())
    na = sum(raw.count(b"N/A", a, b) for a, b in skipped)
    return first.decode("ascii").split()[1:], skipped, na


def _convert(n_na: int, frames: list, columns, variable_map, blank_to_nan):
    if not frames:
        return None
    for frame in frames:
        if len(frame) == 0 or frame.shape[1] != len(columns) + 2:
            return None
        entity = frame[0]
        if not isinstance(entity.dtype, pd.StringDtype) or not (entity == "GPU").all():
            return None  # other entities: the line-by-line path counts them
        if frame[1].dtype != np.int64:
            return None

    def joined(j: int) -> np.ndarray:
        parts = [f[j].to_numpy() for f in frames]
        if any(p.dtype not in (np.int64, np.float64) for p in parts):
            raise TypeError("not numbers")
        if len(parts) > 1 and len({p.dtype for p in parts}) > 1:
            parts = [p.astype(np.float64) for p in parts]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    gpus = joined(1)
    n = len(gpus)
    k = int(gpus.max()) + 1 if n else 0
    if k < 1 or not np.array_equal(gpus, np.arange(n) % k) or gpus.min() < 0:
        return None
    n_missing = 0
    values = []
    for j in range(len(columns)):
        v = joined(j + 2)
        if v.dtype == np.int64:
            v = v.astype(np.float64)
        if v.dtype != np.float64:
            return None
        missing = int(np.count_nonzero(np.isnan(v)))
        n_missing += missing
        values.append((v, missing))
    if n_missing != n_na:
        return None  # a short row (padded) or a 'nan' cell: the general path decides
    blank = np.vectorize(blank_to_nan, otypes=[np.float64])
    data: dict[str, np.ndarray] = {}
    for short, (v, missing) in zip(columns, values):
        spec = variable_map.get(short)
        if spec is None:
            continue
        canon, _unit, factor = spec
        scale = factor if canon != "throttle_reasons" else 1.0
        # (the values given, blanks included: a blank of a later field blanks the column)
        given = ~np.isnan(v) if missing else slice(None)
        suspect = v >= 140737488355328.0  # DCGM blanks start at 2**47 (NaN never is)
        if suspect.any():
            v = v.copy()
            v[suspect] = blank(v[suspect])
        arr = data.get(canon)
        if arr is None and not missing:  # every value given: no masks
            data[canon] = v * scale if scale != 1.0 else v
            continue
        if arr is None:
            arr = data[canon] = np.full(n, np.nan)
        arr[given] = v[given] * scale if scale != 1.0 else v[given]
    return gpus, data, np.arange(n) // k
