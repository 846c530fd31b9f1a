"""Helpers shared by the readers: opening text, sentinels, fast numeric columns, time zones.

Nothing here is public API; the readers in this package document the behaviour.
"""

from __future__ import annotations

import codecs
import datetime
import gzip
import os
import warnings
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import DataQualityWarning, ParseError
from ..telemetry import schema
from ..telemetry.timeutil import to_epoch_ns

#: Cell values that mean "no value" in the sources (nvidia-smi, dcgmi).  Any cell that
#: starts with ``[`` (``[N/A]``, ``[Not Supported]``, ``[Unknown Error]``,
#: ``[GPU is lost]`` ...) is treated the same way.
SENTINELS = ("N/A", "n/a", "NA", "-", "")

_NS_PER_MS = 1_000_000


def read_text(src, *, what: str = "file") -> tuple[str, str | None]:
    """Return ``(text, name)`` for a path, a text/bytes buffer or a string of content.

    ``.gz`` files are decompressed transparently.  ``name`` is the path (for messages)
    or ``None`` for in-memory content.  Bytes must be UTF-8 (a UTF-8 byte-order mark is
    skipped); anything else (a damaged ``.gz``, UTF-16, other encodings, binary data)
    is one :class:`~powerlab.exceptions.ParseError` naming the file.
    """
    if isinstance(src, str):
        return src.removeprefix("\ufeff"), None
    raw, name = read_bytes(src, what=what)
    return decode_utf8(raw, name), name


def read_bytes(src, *, what: str = "file") -> tuple[bytes, str | None]:
    """Like :func:`read_text` but returns the bytes, checked as UTF-8 text without a
    byte-order mark (a ``str`` is content)."""
    if isinstance(src, os.PathLike):
        path = Path(src)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise ParseError("no such file", path=path) from None
        except IsADirectoryError:
            raise ParseError("is a directory, expected a file", path=path) from None
        except OSError as exc:
            raise ParseError(f"cannot read the file ({exc.strerror or exc})",
                             path=path) from None
        if path.suffix == ".gz":
            raw = gunzip(raw, path)
        return check_utf8(raw, str(path)), str(path)
    if isinstance(src, bytes):
        return check_utf8(src, None), None
    if isinstance(src, str):
        return src.removeprefix("\ufeff").encode("utf-8"), None
    if hasattr(src, "read"):
        data = src.read()
        nm = getattr(src, "name", None)
        nm = nm if isinstance(nm, str) else None
        if isinstance(data, str):
            return data.removeprefix("\ufeff").encode("utf-8"), nm
        return check_utf8(data, nm), nm
    raise TypeError(f"expected a path, text or a readable buffer for the {what}, "
                    f"got {type(src).__name__}")


def gunzip(raw: bytes, path) -> bytes:
    """Decompress a ``.gz`` file's bytes; a damaged or cut archive is a ParseError."""
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        why = "it ends early (cut off?)" if isinstance(exc, EOFError) else str(exc)
        raise ParseError(f"not a readable gzip file: {why}; expected a complete .gz "
                         "archive", path=path) from None


_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def check_utf8(raw: bytes, path) -> bytes:
    """``raw`` without a UTF-8 byte-order mark, after checking that it is UTF-8 text.

    UTF-16/32 (with or without a byte-order mark), NUL bytes and invalid UTF-8 raise
    :class:`~powerlab.exceptions.ParseError` with the file and line.
    """
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[3:]
    head = raw[:4096]
    if raw.startswith(_UTF16_BOMS) or b"\x00" in head:
        # UTF-16 text without a byte-order mark: NUL in every other byte (ASCII text)
        utf16 = raw.startswith(_UTF16_BOMS) or max(head[0::2].count(0),
                                                     head[1::2].count(0)) > 0.4 * len(head)
        raise ParseError("the file is UTF-16 text, expected UTF-8 (convert it, e.g. "
                         "'iconv -f UTF-16 -t UTF-8')" if utf16 else
                         "the file holds NUL bytes (binary data), expected UTF-8 text",
                         path=path, line=1)
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise ParseError(f"byte 0x{raw[exc.start]:02x} at offset {exc.start} is not "
                             "UTF-8; expected UTF-8 text (convert it, e.g. 'iconv -f "
                             "LATIN1 -t UTF-8')", path=path, line=line) from None
    return raw


def decode_utf8(raw: bytes, path) -> str:
    """Decode bytes already passed through :func:`check_utf8`."""
    return raw.decode("utf-8") if not raw.isascii() else raw.decode("ascii")


def split_cut_last_line(text: str) -> tuple[str, int]:
    """``(text without a last line that lacks its newline, 1 if one was cut off else 0)``.

    A file cut while being written ends in a partial line: ``699.120000`` may read as
    ``69``.  Such a line is never parsed; callers count it in their warning.
    """
    if not text or text.endswith(("\n", "\r")):
        return text, 0
    cut = max(text.rfind("\n"), text.rfind("\r"))
    if not text[cut + 1:].strip():
        return text, 0
    return text[:cut + 1], 1


def check_tz(tz, path=None):
    """Return ``tz`` if pandas knows the zone; an unknown name is a ParseError."""
    if tz is None:
        return tz
    try:
        pd.Timestamp(0).tz_localize(tz)
    except (KeyError, ValueError, TypeError, OSError, IndexError):  # ZoneInfoNotFoundError
        # is a KeyError; an empty name is an IndexError inside pandas
        raise ParseError(f"unknown time zone {tz!r}; expected an IANA name such as "
                         "'America/New_York' or 'UTC'", path=path) from None
    return tz


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
    suffix = " " + unit if unit else ""
    fast = _float_cells_fast(arr, suffix)
    if fast is not None:
        return fast
    s = pc.ascii_ltrim_whitespace(arr)
    if s.null_count:
        s = pc.fill_null(s, "")
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


def _float_cells_fast(arr: pa.Array, suffix: str) -> np.ndarray | None:
    """The values of cells that are all ``" <number><suffix>"`` (one space, as in
    ``", 72.36 W"``), or ``None``.

    The common case in one byte slice and one cast, without the trimming and sentinel
    passes of :func:`strings_to_float`.  Any cell of another shape (no leading space,
    more spaces, a sentinel, a missing unit, not a number) fails a check or the cast,
    and ``None`` sends the column to the general path, which gives the same values or
    names the offending line.  Slicing off ASCII bytes keeps the text valid UTF-8.
    """
    if arr.null_count or not len(arr) or not isinstance(arr, pa.StringArray):
        return None
    if not pc.all(pc.starts_with(arr, " ")).as_py():
        return None
    if suffix and not pc.all(pc.ends_with(arr, suffix)).as_py():
        return None
    # (binary_slice's default stop, the largest int64, fails in pyarrow 26 with
    # "Negative buffer resize"; a 32-bit string is never longer than 2**31 - 1)
    stop = -len(suffix) if suffix else np.iinfo(np.int32).max
    try:
        cut = pc.binary_slice(arr.view(pa.binary()), 1, stop)
        out = pc.cast(cut.view(pa.string()), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return out.to_numpy(zero_copy_only=False)


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
    nonascii = pc.invert(pc.string_is_ascii(s)).to_numpy(zero_copy_only=False)
    if nonascii.any():                 # "S16" below would raise UnicodeEncodeError
        r = int(np.flatnonzero(nonascii)[0])
        raise ParseError(f"cannot read {arr[r].as_py()!r} as a hexadecimal bitmask",
                         path=path, line=row_line(r), column=column)
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


def available_workers(limit: int) -> int:
    """Threads one parse may use: the cores this process may run on now (its CPU
    affinity, as a container or ``taskset`` sets it), at most ``limit``."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        n = os.cpu_count() or 1
    return max(1, min(limit, n))


def _is_utc(tz) -> bool:
    """``tz`` names UTC itself (a zone without offset changes, ever)."""
    if tz is datetime.UTC:
        return True
    key = tz if isinstance(tz, str) else getattr(tz, "key", None)
    return key in ("UTC", "Etc/UTC")


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
    if _is_utc(tz):  # no ambiguous or nonexistent times: the wall clock is UTC
        return naive.as_unit("ns").tz_localize("UTC"), 0, 0
    loc = naive.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
    bad = loc.isna() & ~naive.isna()
    if not bad.any():
        return loc.tz_convert("UTC").as_unit("ns"), 0, 0
    shifted = naive.tz_localize(tz, ambiguous="NaT", nonexistent="shift_forward")
    ambiguous = np.asarray(shifted.isna() & ~naive.isna())
    nonexistent = np.asarray(bad) & ~ambiguous
    vals = to_epoch_ns(naive).copy()
    vals[np.asarray(naive.isna())] = np.iinfo(np.int64).min
    prev_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], vals[:-1]]))
    # daylight time until the wall clock has stepped back past this reading
    is_dst = ~(prev_max > vals)
    loc = naive.tz_localize(tz, ambiguous=is_dst, nonexistent="shift_forward")
    return loc.tz_convert("UTC").as_unit("ns"), int(ambiguous.sum()), int(nonexistent.sum())


def warn_quality(message: str, stacklevel: int = 3) -> None:
    """Emit one :class:`~powerlab.exceptions.DataQualityWarning`."""
    warnings.warn(message, DataQualityWarning, stacklevel=stacklevel)


#: Unix epoch milliseconds accepted as sample times: 2000-01-01 .. 2100-01-01 (UTC).
#: Outside that a ``time_ms`` is a damaged or unset clock, not a time.
TIME_MS_RANGE = (946_684_800_000, 4_102_444_800_000)


def mask_impossible(cols: dict, *, node=None, path=None, what: str = "file") -> dict:
    """Mask values no instrument can report, in place, and count them in one warning.

    A value is impossible where it is not finite (``inf``, ``1e308`` overflowing to
    ``inf`` after unit conversion) or lies outside its column's valid range in
    :data:`powerlab.telemetry.schema.GLOSSARY` (``-999`` degC, a counter of ``-1``
    read as ``2**64 - 1`` mJ).  Only a minority of a column's values is masked: when
    most of them are out of range the column is in another unit, and
    :func:`~powerlab.telemetry.schema.validate` says so with an error instead.

    Parameters
    ----------
    cols : dict of str to numpy.ndarray
        Canonical column name -> float64 values (modified in place).
    node : numpy.ndarray of bool or bool, optional
        Rows that measure a whole node (checked against the node range).
    path, what : str
        For the warning.

    Returns
    -------
    dict
        Column name -> number of masked values (empty if none).
    """
    counts: dict[str, int] = {}
    examples: dict[str, float] = {}
    for name, v in list(cols.items()):
        col = schema.GLOSSARY.get(name)
        if col is None or col.valid_range is None or not isinstance(v, np.ndarray) \
                or v.dtype != np.float64 or not len(v):
            continue
        lo, hi = col.valid_range
        if node is not None and col.node_range is not None:
            nlo, nhi = col.node_range
            lo = np.where(node, nlo, lo) if not np.isscalar(node) else (nlo if node else lo)
            hi = np.where(node, nhi, hi) if not np.isscalar(node) else (nhi if node else hi)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(v) | (v < lo) | (v > hi)
        bad &= ~np.isnan(v)
        k = int(np.count_nonzero(bad))
        if not k:
            continue
        finite_bad = bad & np.isfinite(v)
        if np.count_nonzero(finite_bad) * 2 > np.count_nonzero(~np.isnan(v)):
            continue  # most values out of range: a unit error for validate() to report
        examples[name] = float(v[np.flatnonzero(bad)[0]])
        if not v.flags.writeable:
            v = cols[name] = v.copy()
        v[bad] = np.nan
        counts[name] = k
    if counts:
        parts = [f"{n} {c} (e.g. {examples[c]:g})" for c, n in counts.items()]
        warn_quality(f"{path or what}: masked {sum(counts.values())} impossible value(s) "
                     f"as missing: {', '.join(parts)}", stacklevel=4)
    return counts


def check_gpu_indices(gpus: np.ndarray, source) -> None:
    """Refuse a GPU index outside 0 .. 32767 (the canonical ``gpu_index`` is Int16): an
    id of 40 digits or beyond 64 bits is a ParseError naming the file, not an overflow."""
    if gpus.dtype.kind not in "iuO":
        return
    big = [g for g in gpus.tolist() if g is not None and not 0 <= g <= np.iinfo(np.int16).max]
    if big:
        text = str(big[0])
        text = text if len(text) <= 24 else f"{text[:24]}... ({len(text)} digits)"
        raise ParseError(f"GPU index {text} is outside 0 to {np.iinfo(np.int16).max}",
                         path=source, column="gpu")
