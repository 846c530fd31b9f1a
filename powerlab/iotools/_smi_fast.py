"""The CSV pass of :mod:`powerlab.iotools.nvidia_smi` for logs in the shape nvidia-smi prints.

``nvidia-smi --format=csv`` prints every cell after the first as ``", "`` plus the value,
and a value with a unit as ``"<number> <unit>"``: split at single spaces, a line is a
fixed sequence of tokens (``2025/07/27``, ``00:34:45.155,``, ``72.36``, ``W,``, ``0``,
``%,`` ...).  Read in that dialect by the pandas C parser, the numbers are parsed in the
CSV pass straight into float64 (no string column per field, no unit stripping), and the
unit tokens are whole cells that must all equal the unit.

This is only a faster route to the same result: :func:`fast_columns` returns ``None``
(and the reader takes its general path, which names the line and column of any bad cell)
unless every line of the body has exactly the expected tokens, every unit token is the
unit, every number parses, no value is missing, and the timestamps have nvidia-smi's
``YYYY/MM/DD HH:MM:SS.fff`` form.  Numbers are read by pandas' type inference with NA
filtering off, so a cell that is not a number (``[N/A]``, ``true`` in any case, an empty
cell of a short row) leaves a text, boolean or object column, which declines.  Where
pandas would still read a cell that the general path refuses or reads otherwise, the
body is declined: a tab, vertical tab or form feed (pandas skips them around a
number), and a zero in a column pandas read as integers where a token of the piece starts
with ``-`` (pandas reads ``-0`` as the integer 0, the general path as -0.0; a ``-``
inside a token, as in a UUID, is no sign and reads alike).  (Numbers are not read with ``dtype=float64``: that reads an
all-``true`` column as 1.0.)  The
float parser is pandas 3's (correctly rounded: the same doubles as pyarrow's cast of the
same text); with older pandas the general path is always taken.
"""

from __future__ import annotations

import csv
import itertools
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..telemetry import schema
from ._common import localize

#: pandas >= 3 parses decimals correctly rounded (tested: the same doubles as pyarrow)
EXACT_FLOATS = int(pd.__version__.split(".")[0]) >= 3
#: units printed after a number (the ``hex`` bitmask and text fields take the general path)
_NUMBER_UNITS = ("W", "MHz", "C", "%", "MiB")
_TIMESTAMP = (4, "/", 2, "/", 2, " ", 2, ":", 2, ":", 2, ".", 3)
#: pandas skips a tab, vertical tab or form feed around a number (the general path refuses
#: them after it) and reads ``-0`` as the integer 0 (the general path as -0.0)
_DECLINED_BYTES = (b"\t", b"\x0b", b"\x0c")
_IDS = ("gpu_uuid", "pci_bus_id")
_FAILED = (ValueError, TypeError, OverflowError, IndexError, pa.ArrowException)


def fast_columns(data: bytes, start: int, end: int, specs: list, wanted: dict, tz,
                 by_order: bool, workers: int = 1):
    """Canonical columns of the body ``data[start:end]`` read in the space-split
    dialect, or ``None`` where the general path must read it.

    Parameters
    ----------
    data : bytes
        The whole log (UTF-8, checked).
    start, end : int
        The body's byte range (after the header line, without a cut last line).
    specs : list
        Per field, its :data:`~powerlab.iotools.nvidia_smi.VARIABLE_MAP` entry
        ``(canonical, unit, factor)`` or ``None``.
    wanted : dict
        Canonical column -> the position of the field that gives it.
    tz : str or tzinfo
        Zone of the wall-clock timestamps (``None``: the general path says what is
        missing).
    by_order : bool
        Also return which adjacent rows are identical (GPU attribution by row order).
    workers : int
        Threads: the body is cut at line ends into pieces of about :data:`PIECE_BYTES`,
        read and converted on up to ``workers`` threads at once (the pandas parser and
        numpy release the GIL); the result does not depend on it.

    Returns
    -------
    tuple or None
        ``(cols, repeats)`` as the general path gives them: canonical column -> values,
        ``"timestamp"`` -> ``(utc, n_ambiguous, n_nonexistent)``; ``repeats[i]`` is true
        where rows ``i`` and ``i + 1`` are identical lines (``None`` unless ``by_order``).
    """
    if not EXACT_FLOATS or tz is None or end <= start:
        return None
    plan = _token_plan(data, start, end, specs)
    if plan is None:
        return None
    pieces = _pieces(data, start, end, workers)
    threads = min(workers, len(pieces))
    try:
        with warnings.catch_warnings(), \
                ThreadPoolExecutor(max_workers=max(threads, 1)) as ex:
            warnings.simplefilter("ignore")  # mixed-type chunks: declined below anyway

            def run(fn, items) -> list:
                return list(ex.map(fn, items) if threads > 1 else map(fn, items))

            # the pieces' tokens, then their values written straight into the columns
            frames = run(lambda ab: _tokens(data, *ab, plan), pieces)
            if any(f is None for f in frames):
                return None
            offsets = np.cumsum([0] + [len(f[0]) for f in frames])
            out = {i: np.empty(int(offsets[-1]), np.int64 if kinds[0] == "date" else np.float64)
                   for i, kinds in enumerate(plan) if specs[i][0] not in _IDS}

            def convert(k: int) -> dict:
                frame, (a, b) = frames[k]
                frames[k] = None  # (its memory goes as soon as it is read)

                def minus() -> bool:  # asked only where an integer column holds a 0
                    return _leading_minus(data, a, b, _dashes_in_ids(frame, plan))
                return _converted(frame, plan, specs, wanted, minus,
                                  {i: v[offsets[k]:offsets[k + 1]] for i, v in out.items()})
            texts = run(convert, range(len(frames)))
        return _columns(data, start, end, out, texts, wanted, tz, by_order)
    except _FAILED:
        return None


#: bytes of body per piece: pieces of a few MiB keep each piece's token and conversion
#: arrays small enough to be reused from the heap (measured at 2M rows: 8 MiB pieces,
#: 0.31 s of CPU and 2,500 page faults; the body in one piece, 0.34 s and 38,000)
PIECE_BYTES = 8 << 20


#: bytes of body per thread below which a log is not cut further for more threads
THREAD_BYTES = 1 << 20


def _pieces(data: bytes, start: int, end: int, workers: int = 1) -> list[tuple[int, int]]:
    """``data[start:end]`` cut at line ends into pieces of about :data:`PIECE_BYTES`,
    and into at least one piece per thread where each has :data:`THREAD_BYTES`."""
    k = max((end - start) // PIECE_BYTES, min(workers, (end - start) // THREAD_BYTES))
    if k <= 1:
        return [(start, end)]
    cuts = [start]
    for i in range(1, k):
        nl = data.find(b"\n", start + (end - start) * i // k, end)
        if nl < 0 or nl + 1 >= end:
            break
        if nl + 1 > cuts[-1]:
            cuts.append(nl + 1)
    cuts.append(end)
    return list(itertools.pairwise(cuts))


#: the bytes after which a ``-`` starts a token: the space that ends the token before it,
#: a line end (LF, or a lone CR, which pandas also ends lines at)
_TOKEN_ENDS = np.array([ord(" "), ord("\n"), ord("\r")], dtype=np.uint8)


def _tokens(data: bytes, start: int, end: int, plan: list):
    """``(tokens, (start, end))`` of one piece of the body, or ``None`` where a byte the
    fast dialect cannot vouch for is in it."""
    for b in _DECLINED_BYTES:
        if data.find(b, start, end) >= 0:
            return None
    return _read_tokens(data, start, end, plan), (start, end)


def _dashes_in_ids(frame: pd.DataFrame, plan: list) -> int:
    """How many ``-`` the identity tokens of one piece hold (a UUID holds 4)."""
    kinds = [k for field in plan for k in field]
    n = 0
    for j, k in enumerate(kinds):
        if k == "id":
            cats = frame[j].cat.categories
            rows = np.bincount(frame[j].cat.codes.to_numpy(), minlength=len(cats))
            n += int(np.dot(np.asarray(cats.str.count("-"), dtype=np.int64), rows))
    return n


def _leading_minus(data: bytes, start: int, end: int, inside: int = 0) -> bool:
    """A token of ``data[start:end]`` (split at spaces and line ends) starts with ``-``;
    ``inside``: how many ``-`` are known to lie inside tokens (those of the UUIDs).

    Where the piece holds no other ``-`` (counted: the usual case) there is none;
    else every ``-`` is found by one vectorised comparison and the byte before each
    looked at (``bytes.find(b" -")`` stops at every space, 40x slower on a log of
    UUIDs).
    """
    if data.count(b"-", start, end) == inside:
        return False
    body = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start)
    at = np.flatnonzero(body == ord("-"))
    return bool(at[0] == 0 or np.isin(body[at[at > 0] - 1], _TOKEN_ENDS).any())


def _token_plan(data: bytes, start: int, end: int, specs: list) -> list | None:
    """Per field, the kinds of its tokens, from the field list and the first body line:
    ``"date"``/``"time"`` (timestamp), ``"num"`` (a number parsed by the CSV pass),
    ``"text"`` (a one-token cell ending in the comma, converted afterwards), ``"id"``
    (such a cell naming the GPU, read as a category) or ``("unit", u)``; ``None`` for fields this path does not read."""
    nl = data.find(b"\n", start, end)
    first = data[start:nl if nl >= 0 else end].decode("utf-8").rstrip("\r")
    cells = first.split(", ")
    if len(cells) != len(specs):
        return None
    plan = []
    last = len(specs) - 1
    for i, (spec, cell) in enumerate(zip(specs, cells)):
        if spec is None:
            return None
        canon, unit = spec[0], spec[1]
        if canon == "timestamp":
            if not _has_shape(cell, _TIMESTAMP):
                return None
            plan.append(["date", "time"])
        elif unit in _NUMBER_UNITS and cell.endswith(" " + unit):
            plan.append(["num", ("unit", unit)])
        elif unit in _NUMBER_UNITS or canon == "gpu_index":
            plan.append(["num" if i == last else "text"])
        elif canon in _IDS:
            plan.append(["id"])
        else:
            return None
    return plan


def _has_shape(s: str, shape: tuple) -> bool:
    """``s`` is digits and separators in the order of ``shape`` (ints: digit counts)."""
    k = 0
    for part in shape:
        if isinstance(part, int):
            if not (s[k:k + part].isascii() and s[k:k + part].isdigit()) \
                    or len(s[k:k + part]) != part:
                return False
            k += part
        elif s[k:k + 1] != part:
            return False
        else:
            k += 1
    return k == len(s)


def _read_tokens(data: bytes, start: int, end: int, plan: list) -> pd.DataFrame:
    """The body split at single spaces by the pandas C parser: numbers parsed in the
    pass (int64 or float64), the date, time and unit tokens as fixed-width bytes one
    wider than expected (so that a longer token shows), the identities (a few distinct
    values, each repeated on many rows) as categories, the other text tokens as text."""
    kinds = [k for field in plan for k in field]
    dtype = {}
    for j, k in enumerate(kinds):
        if k in ("date", "time") or isinstance(k, tuple):
            dtype[j] = f"S{_width(k)}"
        elif k == "id":
            dtype[j] = "category"

    frame = pd.read_csv(ByteRange(data, start, end), sep=" ", header=None, quoting=csv.QUOTE_NONE, na_filter=False,
                        skip_blank_lines=False, engine="c", dtype=dtype)
    if frame.shape[1] != len(kinds):
        raise ValueError("not the planned tokens")
    return frame


class ByteRange:
    """``data[start:end]`` as a binary file for the pandas parser, read in the small
    chunks it asks for (``io.BytesIO`` of a slice copies the whole range first: 10 %
    more CPU in the parse of 8 MiB pieces)."""

    def __init__(self, data: bytes, start: int, end: int):
        self._view, self._pos, self._end = memoryview(data), start, end

    def read(self, size: int = -1) -> bytes:
        stop = self._end if size is None or size < 0 else min(self._end, self._pos + size)
        out = self._view[self._pos:stop].tobytes()
        self._pos = stop
        return out


def _width(kind) -> int:
    """Bytes of the fixed-width column of a date, time or unit token: 4, 8 or 16, at
    least one more than the token (``"W,"``, ``"MiB,"``, ``"00:34:45.155,"``), so that a
    token cut to the width differs from the expected one and whole rows can be compared
    as one unsigned integer (or two)."""
    if kind == "date":
        return 11
    if kind == "time":
        return 16
    n = len(kind[1]) + 2  # the unit, the comma after it (or none) and one more byte
    return 4 if n <= 4 else 8 if n <= 8 else 16


def _fixed(s: pd.Series, width: int) -> np.ndarray:
    """The ``S<width>`` values of a column read as fixed-width bytes."""
    v = s.to_numpy()
    if v.dtype != np.dtype(f"S{width}"):
        raise TypeError("not fixed-width bytes")
    return v


def _converted(frame: pd.DataFrame, plan: list, specs: list, wanted: dict, minus,
               out: dict) -> dict:
    """Check every token of one piece and write its fields' values into ``out`` (field
    position -> the piece's rows of the column: naive nanoseconds, float64 numbers with
    the unit factor applied); returns the identities (field position -> ``(values,
    codes)``: the distinct values as pyarrow text, each row's code into them).
    ValueError where the general path must read the log; ``minus()``: a token of the
    piece starts with ``-``."""
    last = len(plan) - 1
    used = set(wanted.values())
    texts: dict[int, tuple] = {}
    j = 0
    for i, kinds in enumerate(plan):
        tail = "" if i == last else ","
        canon, _unit, factor = specs[i]
        if kinds[0] == "date":
            out[i][:] = _timestamps_ns(_fixed(frame[j], 11), _fixed(frame[j + 1], 16), tail)
            j += len(kinds)
            continue
        if kinds[0] == "num":
            v = frame[j].to_numpy()
            if v.dtype == np.int64 and not v.all() and minus():
                raise ValueError("a zero, perhaps written -0")
            if v.dtype not in (np.int64, np.float64) or (v.dtype == np.float64
                                                          and np.isnan(v).any()):
                raise ValueError("missing or non-numeric value")
            if len(kinds) == 2:
                _check_all_equal(frame[j + 1], kinds[1][1] + tail, _width(kinds[1]))
        elif kinds[0] == "id":  # one token ending in the comma, of a few distinct values
            texts[i] = _category(frame[j], tail)
            j += len(kinds)
            continue
        else:  # "text": one token ending in the comma
            cut = _without_tail(frame[j], tail)
            v = pc.cast(cut, pa.float64()).to_numpy(zero_copy_only=False)
            if np.isnan(v).any():
                raise ValueError("missing value")
        if canon == "gpu_index":
            top = schema.GLOSSARY["gpu_index"].valid_range[1]
            if ((v % 1 != 0) | (v < 0) | (v > top)).any():
                raise ValueError("not a GPU index")  # the general path says where
        if i in used and factor not in (None, 1.0):
            with np.errstate(over="ignore"):  # 1e308 MiB -> inf B, masked later
                np.multiply(v, factor, out=out[i])
        else:
            out[i][:] = v  # (int64 -> float64: exact below 2**53, else correctly rounded)
        j += len(kinds)
    return texts


def _columns(data, start, end, out, texts, wanted, tz, by_order):
    """The fields' values (``out``, and the pieces' identities ``texts`` joined) as the
    canonical columns, and the identical lines."""
    numbers = dict(out)
    for i in texts[0]:
        numbers[i] = _joined_categories([t[i] for t in texts])
    t_ns = numbers.pop(wanted["timestamp"])
    cols = {}
    for canon, i in wanted.items():
        if canon == "timestamp":
            cols[canon] = localize(pd.DatetimeIndex(t_ns.view("datetime64[ns]")), tz)
        elif canon == "gpu_index":
            cols[canon] = numbers[i].astype(np.int64)
        else:
            cols[canon] = numbers[i]
    repeats = None
    if by_order:
        # (numbers scaled by a unit factor are equal where the numbers are, and may be
        # equal where those are not only by overflowing to inf: candidates either way,
        # compared as text)
        repeats = _identical_lines(data, start, end, t_ns,
                                   [v for v in numbers.values()
                                    if isinstance(v, np.ndarray) and v.dtype == np.float64])
    return cols, repeats


def _category(s: pd.Series, tail: str) -> tuple[pa.Array, np.ndarray]:
    """``(values, codes)`` of a column read as a category: its distinct tokens without
    their trailing ``tail`` (each checked to end in it) and each row's code."""
    if not isinstance(s.dtype, pd.CategoricalDtype):
        raise TypeError("not a category")
    codes = s.cat.codes.to_numpy()
    if len(codes) and codes.min() < 0:
        raise ValueError("missing token")
    return _without_tail(pd.Series(s.cat.categories), tail), codes


def _joined_categories(parts: list[tuple[pa.Array, np.ndarray]]) -> pa.DictionaryArray:
    """The pieces' ``(values, codes)`` as one dictionary array: the distinct values of
    all pieces, each used by some row, the codes mapped into them."""
    if len(parts) == 1:
        values, codes = parts[0]
        return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), values)
    values = pc.unique(pa.concat_arrays([v for v, _ in parts]))
    codes = np.concatenate([
        pc.index_in(v, value_set=values).to_numpy(zero_copy_only=False)
        .astype(np.int32)[c] for v, c in parts])
    return pa.DictionaryArray.from_arrays(pa.array(codes), values)


def _arrow(s: pd.Series) -> pa.Array:
    """The text tokens of one column as one pyarrow string array without nulls."""
    if not isinstance(s.dtype, pd.StringDtype):
        raise TypeError("not text")
    arr = pa.array(s.array)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        raise ValueError("missing token")
    return arr


_UINT = {4: np.uint32, 8: np.uint64}


def _check_all_equal(s: pd.Series, expected: str, width: int) -> None:
    """Every token of the fixed-width column is ``expected`` (compared as integers)."""
    v = _fixed(s, width)
    want = np.array([expected.encode("utf-8")], dtype=f"S{width}")
    if width in _UINT:
        if not (v.view(_UINT[width]) == want.view(_UINT[width])[0]).all():
            raise ValueError("another unit")
    elif not (v == want[0]).all():
        raise ValueError("another unit")


def _without_tail(s: pd.Series, tail: str) -> pa.Array:
    """The tokens without their trailing ``tail`` (``","`` or ``""``), each checked to
    end in it."""
    arr = _arrow(s)
    if not tail:
        return arr
    if not pc.all(pc.ends_with(arr, tail)).as_py():
        raise ValueError("no comma")
    binary = pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary()
    return pc.binary_slice(arr.view(binary), 0, -len(tail)).view(arr.type)


#: ``HH:MM:SS.fff`` and the tail in 16 bytes: per byte its smallest value and how far
#: above it it may be (digits: '0' and 9, or 2 and 5 for the tens of hours, minutes and
#: seconds; separators exactly; the padding zero) and the weight of its digit [ms]
_TIME_LOW = np.frombuffer(b"00:00:00.000\0\0\0\0", dtype=np.uint8)
_TIME_SPAN = np.array([2, 9, 0, 5, 9, 0, 5, 9, 0, 9, 9, 9, 0, 0, 0, 0], dtype=np.uint8)
_TIME_DIGITS = [0, 1, 3, 4, 6, 7, 9, 10, 11]
_TIME_MS = np.array([36_000_000, 3_600_000, 600_000, 60_000, 10_000, 1_000, 100, 10, 1],
                    dtype=np.int32)
#: rows of 16 bytes handled as one row of a wider array (numpy's byte-wise operations
#: with a 16-value operand are several times faster on rows of 1024 bytes)
_TILE = 64
#: ``YYYY/MM/DD``: the digits' places
_DATE_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9]
#: days since 1970 of the first and last dates whose every time of day has a
#: nanosecond timestamp (pandas.Timestamp.min and .max lie within the day before and after)
_DAYS = (int(pd.Timestamp.min.ceil("D").value // 86_400_000_000_000),
         int(pd.Timestamp.max.floor("D").value // 86_400_000_000_000) - 1)


def _timestamps_ns(date: np.ndarray, time: np.ndarray, tail: str) -> np.ndarray:
    """Naive wall-clock nanoseconds of ``YYYY/MM/DD`` (``S11``) and ``HH:MM:SS.fff``
    plus ``tail`` (``S16``) tokens.

    The dates (a few runs of equal values) are checked digit by digit and read by
    numpy's ISO-8601 parser, which refuses a day the month lacks, as the general path's
    reader does; the times of day are fixed-width digits.
    """
    n = len(date)
    # a log within one day (the usual case) is checked by one comparison with its first
    # date (as bytes: faster than numpy's comparison of S11 strings); else the runs of
    # equal dates
    flat = date.view(np.uint8)
    m = 11 * (n - n % _TILE)
    if ((flat[:m].reshape(-1, 11 * _TILE) == np.tile(flat[:11], _TILE)).all()
            and (flat[m:].reshape(-1, 11) == flat[:11]).all()):
        starts = np.zeros(1, dtype=np.intp)
    else:
        starts = np.r_[0, np.flatnonzero(date[1:] != date[:-1]) + 1]
    days = date[starts].view(np.uint8).reshape(-1, 11)
    if not ((days[:, _DATE_DIGITS] - np.uint8(ord("0")) <= 9).all()
            and (days[:, 4] == ord("/")).all() and (days[:, 7] == ord("/")).all()
            and not days[:, 10].any()):
        raise ValueError("not a date")
    iso = days[:, :10].copy()
    iso[:, [4, 7]] = ord("-")
    day = iso.view("S10").ravel().astype("datetime64[D]").astype(np.int64)
    if day.min() < _DAYS[0] or day.max() > _DAYS[1]:
        raise ValueError("beyond the nanosecond range")  # the general path says so

    # every byte within its range (below the smallest value wraps past any span), the
    # digits' values being the bytes less their smallest value
    low = _TIME_LOW.copy()
    if tail:
        low[12] = ord(tail)
    flat = time.view(np.uint8)
    d = np.empty(16 * n, dtype=np.uint8)
    m = 16 * (n - n % _TILE)
    for part, lo, span in ((slice(0, m), np.tile(low, _TILE), np.tile(_TIME_SPAN, _TILE)),
                           (slice(m, None), low, _TIME_SPAN)):
        dp = d[part].reshape(-1, len(lo))
        np.subtract(flat[part].reshape(-1, len(lo)), lo, out=dp)
        if not (dp <= span).all():
            raise ValueError("not HH:MM:SS.fff")
    ms = np.einsum("ij,j->i", d.reshape(n, 16)[:, _TIME_DIGITS], _TIME_MS, dtype=np.int32)
    if ms.max() >= 86_400_000:  # hours 24..29
        raise ValueError("not a time of day")
    t_ns = ms.astype(np.int64)
    t_ns *= 1_000_000
    day_ns = day * 86_400_000_000_000
    if len(starts) == 1:
        t_ns += day_ns[0]
    else:
        t_ns += np.repeat(day_ns, np.diff(np.r_[starts, n]))
    return t_ns


def _identical_lines(data: bytes, start: int, end: int, t_ns: np.ndarray,
                     numbers: list[np.ndarray]) -> np.ndarray:
    """``out[i]``: lines ``i`` and ``i + 1`` of the body are identical.

    Rows equal in time and in every number are the only candidates (numbers equal in
    value may be written differently, ``72.3`` and ``72.30``): those few are compared
    as text.
    """
    n = len(t_ns)
    if n < 2:
        return np.zeros(max(n - 1, 0), dtype=bool)
    same = t_ns[1:] == t_ns[:-1]
    for v in numbers:
        same &= v[1:] == v[:-1]
    cand = np.flatnonzero(same)
    if not len(cand):
        return same
    body = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start)
    ends = np.flatnonzero(body == ord("\n")) + start
    if len(ends) != n:
        raise ValueError("lines and rows differ")  # a lone CR splits lines for pandas
    starts = np.r_[start, ends[:-1] + 1]

    def line(i: int) -> bytes:
        return data[starts[i]:ends[i]].removesuffix(b"\r")
    same[cand] = [line(i) == line(i + 1) for i in cand]
    return same
