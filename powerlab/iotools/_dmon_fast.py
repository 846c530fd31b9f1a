"""The CSV pass of :func:`powerlab.iotools.dcgm.parse_dcgm_dmon` for plain ``dcgmi dmon`` output.

Output of ``dcgmi dmon -e ... -d ...`` without line timestamps is a table split at runs of
whitespace: ``GPU <id> <value> ...`` rows under ``#Entity`` header and ``ID`` units lines
(repeated every few samples).  Where the header lines are all alike and every other line
is such a GPU row, the pandas C parser reads the rows with the header and units lines
skipped, the numbers parsed in the CSV pass.

This is only a faster route to the same result: :func:`fast_rows` returns ``None`` (and
the reader takes its line-by-line path, which names the line of any bad row) unless every
row has the header's number of values, every value is a number or ``N/A``, the GPU ids
are integers repeating in one fixed cycle, and nothing pandas would read differently from
Python's ``float`` is present (``-0``, booleans, ``#`` inside a row).
"""

from __future__ import annotations

import csv
import io
import warnings

import numpy as np
import pandas as pd

from ._smi_fast import EXACT_FLOATS

_FAILED = (ValueError, TypeError, OverflowError, IndexError)


def fast_rows(text: str, variable_map: dict, blank_to_nan):
    """``(gpus, data, sample)`` of plain ``dcgmi dmon`` output, or ``None``.

    ``gpus`` are the rows' GPU ids, ``data`` canonical column -> float64 values (as the
    line-by-line path fills them: unit factors applied, DCGM blanks NaN, ``N/A`` NaN,
    where two fields map to one column the later non-``N/A`` one wins) and ``sample`` the
    sample number of each row (a new sample wherever a GPU id repeats).
    """
    if not EXACT_FLOATS or "-" in text or "\t" in text:
        return None
    lines_head = _header_lines(text)
    if lines_head is None:
        return None
    columns, skip, skipped_na = lines_head
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            frame = pd.read_csv(io.StringIO(text), sep=r"\s+", header=None,
                                skiprows=skip, quoting=csv.QUOTE_NONE,
                                na_values=["N/A"], keep_default_na=False,
                                skip_blank_lines=True, engine="c")
        return _convert(text.count("N/A") - skipped_na, frame, columns, variable_map,
                        blank_to_nan)
    except _FAILED:
        return None


def _header_lines(text: str):
    """``(field names, 0-based numbers of the header, units and 'dmon was stopped'
    lines, the 'N/A' in those lines)``, or ``None`` unless every ``#Entity`` line is alike
    and the text starts with one."""
    first = text.lstrip("\n").split("\n", 1)[0].strip()
    if not first.startswith("#Entity"):
        return None
    if text.count("#") != text.count("#Entity"):
        return None  # a '#' inside a row: pandas would not see it as the general path does
    skip = []
    for marker in ("#Entity", "\nID", "\ndmon was stopped"):
        pos = text.find(marker)
        while pos >= 0:
            if marker == "#Entity":
                if pos and text[pos - 1] != "\n":
                    return None
                end = text.find("\n", pos)
                if text[pos:end if end >= 0 else len(text)].strip() != first:
                    return None
                skip.append(pos)
            else:
                skip.append(pos + 1)
            pos = text.find(marker, pos + 1)
    # line numbers of those positions (few: one header per screenful of rows), and the
    # 'N/A' they hold (not values)
    skip.sort()
    lines, last, count, na = [], 0, 0, 0
    for pos in skip:
        count += text.count("\n", last, pos)
        last = pos
        lines.append(count)
        end = text.find("\n", pos)
        na += text.count("N/A", pos, end if end >= 0 else len(text))
    return first.split()[1:], lines, na


def _convert(n_na: int, frame, columns, variable_map, blank_to_nan):
    n = len(frame)
    if n == 0 or frame.shape[1] != len(columns) + 2:
        return None
    entity = frame[0]
    if not isinstance(entity.dtype, pd.StringDtype) or not (entity == "GPU").all():
        return None  # other entities: the line-by-line path counts them
    gpus = frame[1].to_numpy()
    if gpus.dtype != np.int64:
        return None
    k = int(gpus.max()) + 1 if n else 0
    if k < 1 or not np.array_equal(gpus, np.arange(n) % k) or gpus.min() < 0:
        return None
    n_missing = 0
    values = []
    for j in range(len(columns)):
        v = frame[j + 2].to_numpy()
        if v.dtype == np.int64:
            v = v.astype(np.float64)
        if v.dtype != np.float64:
            return None
        n_missing += int(np.count_nonzero(np.isnan(v)))
        values.append(v)
    if n_missing != n_na:
        return None  # a short row (padded) or a 'nan' cell: the general path decides
    blank = np.vectorize(blank_to_nan, otypes=[np.float64])
    data: dict[str, np.ndarray] = {}
    for short, v in zip(columns, values):
        spec = variable_map.get(short)
        if spec is None:
            continue
        canon, _unit, factor = spec
        arr = data.get(canon)
        if arr is None:
            arr = data[canon] = np.full(n, np.nan)
        given = ~np.isnan(v)
        x = v[given]
        suspect = x >= 140737488355328.0  # DCGM blanks start at 2**47
        if suspect.any():
            x = x.copy()
            x[suspect] = blank(x[suspect])
        arr[given] = x * factor if canon != "throttle_reasons" else x
    return gpus, data, np.arange(n) // k
