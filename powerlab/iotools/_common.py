"""Helpers shared by the readers: opening text, sentinels, fast numeric columns, time zones.

Nothing here is public API; the readers in this package document the behaviour.
"""

from __future__ import annotations

import gzip
import os
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import DataQualityWarning, ParseError

#: Cell values that mean "no value" in the sources (nvidia-smi, dcgmi).  Any cell that
#: starts with ``[`` (``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``,
#: ``[GPU is lost]`` ...) is treated the same way.
SENTINELS = ("N/A", "n/a", "NA", "-", "")

_NS_PER_MS = 1_000_000


def read_text(src, *, what: str = "file") -> tuple[str, str | None]:
    """Return ``(text, name)`` for a path, a text/bytes buffer or a string of content.

    ``.gz`` files are decompressed transparently.  ``name`` is the path (for messages)
    or ``None`` for in-memory content.
    """
    if isinstance(src, (str, os.PathLike)) and not isinstance(src, str):
        return _read_path(Path(src)), str(src)
    if isinstance(src, bytes):
        return src.decode("utf-8", errors="replace"), None
    if isinstance(src, str):
        return src, None
    if hasattr(src, "read"):
        data = src.read()
        if isinstance(data, bytes):
            data = data.decode("utf-8", errors="replace")
        return data, getattr(src, "name", None) if isinstance(getattr(src, "name", None),
                                                                str) else None
    raise TypeError(f"expected a path, text or a readable buffer for the {what}, "
                    f"got {type(src).__name__}")


def read_bytes(src) -> tuple[bytes, str | None]:
    """Like :func:`read_text` but returns the raw bytes (a ``str`` is content)."""
    if isinstance(src, os.PathLike):
        path = Path(src)
        if not path.exists():
            raise ParseError("no such file", path=path)
        if path.is_dir():
            raise ParseError("is a directory, expected a file", path=path)
        raw = path.read_bytes()
        return (gzip.decompress(raw) if path.suffix == ".gz" else raw), str(path)
    if isinstance(src, bytes):
        return src, None
    if isinstance(src, str):
        return src.encode("utf-8"), None
    if hasattr(src, "read"):
        data = src.read()
        nm = getattr(src, "name", None)
        return (data.encode("utf-8") if isinstance(data, str) else data,
                nm if isinstance(nm, str) else None)
    raise TypeError(f"expected a path, text or a readable buffer, got {type(src).__name__}")


def _read_path(path: Path) -> str:
    if not path.exists():
        raise ParseError("no such file", path=path)
    if path.is_dir():
        raise ParseError("is a directory, expected a file", path=path)
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def strip_gz(name: str) -> str:
    """File name without a trailing ``.gz``."""
    return name.removesuffix(".gz")


def line_of_row(text: str, row: int, *, skip_lines: Iterable[int] = (),
                first_line: int = 1) -> int:
    """1-based line number of data row ``row`` (0-based) in ``text``.

    Data rows are the non-blank lines from ``first_line`` on, except the line numbers in
    ``skip_lines``.  Used only to build error messages, so a plain loop is fine.
    """
    skip = set(skip_lines)
    k = -1
    for i, line in enumerate(text.splitlines(), start=1):
        if i < first_line or i in skip or not line.strip():
            continue
        k += 1
        if k == row:
            return i
    return first_line + row


def strings_to_float(arr: pa.Array, *, unit: str | None, path, column: str,
                     row_line, expected: str, allow_empty: bool = True) -> np.ndarray:
    """Vectorised parse of a string column with optional unit suffix into float64.

    Sentinels become NaN.  Values must all carry the unit suffix (``"72.36 W"``) or all
    lack it (``nounits``); a mix is refused because it hints at truncated values.

    Parameters
    ----------
    arr : pyarrow.Array
        String values (nulls allowed).
    unit : str or None
        Expected unit suffix, e.g. ``"W"``; ``None`` when the source prints none.
    path, column : str
        For error messages.
    row_line : callable
        Maps a 0-based row number to its 1-based line number in the file.
    expected : str
        Words describing the expected value, e.g. ``"a number in W"``.
    allow_empty : bool
        Treat empty cells as missing (True) or refuse them with a ParseError (False).
    """
    s = pc.ascii_ltrim_whitespace(arr)
    if s.null_count:
        s = pc.fill_null(s, "")
    suffix = " " + unit if unit else ""
    has = pc.ends_with(s, suffix) if unit else None
    # when every value ends with " <unit>", only a value starting with "[" can be a
    # sentinel (none of SENTINELS ends that way): then skip building the full mask
    if (not unit or not pc.all(has).as_py()
            or pc.any(pc.starts_with(s, "[")).as_py()):
        sentinel = pc.or_(pc.starts_with(s, "["),
                          pc.is_in(s, pa.array(SENTINELS if allow_empty else SENTINELS[:-1])))
        if pc.any(sentinel).as_py():
            s = pc.if_else(sentinel, pa.scalar(None, s.type), s)
            has = pc.ends_with(s, suffix) if unit else None
    if unit:
        n_has = pc.sum(has).as_py() or 0
        n_val = len(s) - s.null_count
        if 0 < n_has < n_val:
            bad = np.flatnonzero(~pc.fill_null(has, True).to_numpy(zero_copy_only=False))
            r = int(bad[0])
            raise ParseError(f"value {s[r].as_py()!r} lacks the unit '{unit}' that the other "
                             f"values in this column carry (truncated or mixed output?); "
                             f"expected {expected}", path=path, line=row_line(r),
                             column=column)
        if n_has:
            s = pc.utf8_slice_codeunits(s, 0, -len(suffix))
    else:
        s = pc.ascii_rtrim_whitespace(s)
    try:
        out = pc.cast(s, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pieces = pd.Series(s.to_pylist(), dtype="object")
        vals = pd.to_numeric(pieces.str.strip(), errors="coerce")
        bad = np.flatnonzero(vals.isna().to_numpy() & pieces.notna().to_numpy())
        r = int(bad[0]) if len(bad) else 0
        raw = arr[r].as_py()
        what = "empty value" if not (raw or "").strip() else f"cannot read {raw!r}"
        raise ParseError(f"{what}, expected {expected}", path=path, line=row_line(r),
                         column=column) from None
    return out.to_numpy(zero_copy_only=False).astype("float64", copy=False)


_HEX = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i


def hex_to_uint64(arr: pa.Array, *, path, column: str, row_line) -> pd.Series:
    """Vectorised parse of ``0x...`` hexadecimal strings (up to 16 digits) into UInt64."""
    s = pc.utf8_trim_whitespace(arr)
    sentinel = pc.fill_null(pc.or_(pc.starts_with(s, "["), pc.is_in(s, pa.array(SENTINELS))),
                            True)
    s = pc.if_else(sentinel, pa.scalar("0", s.type), s)
    s = pc.replace_substring_regex(s, "^0[xX]", "")
    lengths = pc.utf8_length(s).to_numpy(zero_copy_only=False)
    if len(lengths) and (lengths.max() > 16 or lengths.min() == 0):
        r = int(np.flatnonzero((lengths > 16) | (lengths == 0))[0])
        raise ParseError(f"cannot read {arr[r].as_py()!r} as a 64-bit hexadecimal bitmask "
                         "(expected e.g. 0x0000000000000004)", path=path, line=row_line(r),
                         column=column)
    s = pc.utf8_lpad(s, 16, "0")
    raw = np.frombuffer(s.to_numpy(zero_copy_only=False).astype("S16").tobytes(),
                        dtype=np.uint8).reshape(-1, 16)
    nib = _HEX[raw]
    if (nib == 255).any():
        r = int(np.flatnonzero((nib == 255).any(axis=1))[0])
        raise ParseError(f"cannot read {arr[r].as_py()!r} as a hexadecimal bitmask",
                         path=path, line=row_line(r), column=column)
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    vals = (nib.astype(np.uint64) << shifts).sum(axis=1, dtype=np.uint64)
    out = pd.array(vals, dtype="UInt64")
    mask = sentinel.to_numpy(zero_copy_only=False)
    out[mask] = pd.NA
    return pd.Series(out)


def localize(naive: pd.DatetimeIndex, tz) -> tuple[pd.DatetimeIndex, int, int]:
    """Localize naive wall-clock times to ``tz`` and convert to UTC.

    Policy, explicit and counted:

    * ambiguous times (the repeated hour when clocks go back) are resolved by file
      order: rows before the wall clock steps back are daylight time, rows after it are
      standard time;
    * nonexistent times (the skipped hour when clocks go forward) cannot come from a
      real clock; they are shifted forward to the first valid instant.

    Returns ``(utc_index, n_ambiguous, n_nonexistent)``.
    """
    loc = naive.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
    bad = loc.isna() & ~naive.isna()
    if not bad.any():
        return loc.tz_convert("UTC").as_unit("ns"), 0, 0
    shifted = naive.tz_localize(tz, ambiguous="NaT", nonexistent="shift_forward")
    ambiguous = np.asarray(shifted.isna() & ~naive.isna())
    nonexistent = np.asarray(bad) & ~ambiguous
    vals = naive.asi8.copy()
    vals[np.asarray(naive.isna())] = np.iinfo(np.int64).min
    prev_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], vals[:-1]]))
    # daylight time until the wall clock has stepped back past this reading
    is_dst = ~(prev_max > vals)
    loc = naive.tz_localize(tz, ambiguous=is_dst, nonexistent="shift_forward")
    return loc.tz_convert("UTC").as_unit("ns"), int(ambiguous.sum()), int(nonexistent.sum())


def warn_quality(message: str, stacklevel: int = 3) -> None:
    """Emit one :class:`~powerlab.exceptions.DataQualityWarning`."""
    warnings.warn(message, DataQualityWarning, stacklevel=stacklevel)
