"""Reading store files as checked Arrow tables.

Every file a store read touches goes through :func:`read_tables` (or
:func:`read_file_tables`, which also gives each file's footer facts): its bytes are
read into memory (never memory-mapped: a file another program truncates or rewrites in
place while it is mapped kills the reader with SIGBUS) and checked against the CRC-32 in its name (for large files the next file's
check runs in a thread while the current one is parsed), its Parquet page checksums are
verified, it is projected to the columns asked for that it holds and filtered to the time
range, and its rows must belong to the host of its folder.  A file that fails any of this
raises a :class:`~powerlab.exceptions.StoreError` naming it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..exceptions import StoreError
from .storefiles import CRC_RE, partition_of, verify_crc

__all__ = ["read_file_tables", "read_tables"]

#: Columns a file must hold to be read as telemetry.
_REQUIRED = ("timestamp", "host")


def read_tables(files: Sequence[str | os.PathLike], *, columns: Sequence[str] | None = None,
                start: pd.Timestamp | None = None, end: pd.Timestamp | None = None,
                read_dictionary: Sequence[str] = ()) -> list[pa.Table]:
    """Read store files, in order, as Arrow tables (the empty ones left out).

    Each file is checked against the CRC-32 in its name and its Parquet page checksums,
    projected to those of ``columns`` it holds (optional columns may be absent from some
    files), filtered to ``start <= timestamp < end`` (UTC), and the ``read_dictionary``
    columns it holds stay dictionary-encoded.

    Raises
    ------
    powerlab.exceptions.StoreError
        Naming the file that cannot be read, is damaged, or is not telemetry.
    """
    return [t for _, _, t in read_file_tables(files, columns=columns, start=start, end=end,
                                          read_dictionary=read_dictionary)]


def read_file_tables(files, *, columns=None, start=None, end=None, read_dictionary=()):
    """``(file, one_value, table)`` for each file of :func:`read_tables` with rows;
    ``one_value``: ``{column: value}`` for ``host`` and ``scope`` where the footer's
    statistics show one value and no null in every row group (trusted only in files
    whose CRC-32, which covers the footer, was checked)."""
    filters = []
    if start is not None:
        filters.append(("timestamp", ">=", start))
    if end is not None:
        filters.append(("timestamp", "<", end))
    files = [Path(f) for f in files]
    with _checked_buffers(files) as checked:
        for f, get in zip(files, checked):
            try:
                buf = get()     # the file's bytes, their CRC-32 checked
                t, md = _parse(f, buf, columns, filters, read_dictionary)
                one = _one_value(md, ("host", "scope")) if CRC_RE.search(f.name) else {}
            except (OSError, pa.ArrowException, ValueError) as exc:
                raise StoreError(f"cannot read store file {f}: {exc}") from exc
            if t.num_rows:
                if "host" in t.column_names:
                    _check_host(f, t, one.get("host"))
                yield f, one, t


def _parse(f: Path, buf: pa.Buffer, columns, filters, read_dictionary):
    """``(table, footer)`` of one store file's bytes: projected, filtered, page
    checksums verified."""
    md = pq.read_metadata(pa.BufferReader(buf))
    names = md.schema.names
    if not all(c in names for c in _REQUIRED):
        raise StoreError(f"{f} is not a powerlab telemetry file (it has no "
                         f"{' or '.join(c for c in _REQUIRED if c not in names)} "
                         "column); move it out of the store")
    cols = None if columns is None else [c for c in columns if c in names]
    dicts = [c for c in read_dictionary if c in names] or None
    if filters:
        t = pq.read_table(pa.BufferReader(buf), columns=cols, filters=filters,
                          page_checksum_verification=True, read_dictionary=dicts)
    else:   # no row filter: the file reader alone, on the footer already parsed
        t = pq.ParquetFile(pa.BufferReader(buf), metadata=md,
                           page_checksum_verification=True,
                           read_dictionary=dicts).read(columns=cols)
    return t, md


#: Mean file size [bytes] from which the next file's CRC-32 is checked in a thread while
#: the current one is parsed (below, the hand-over costs more than it hides).
_PIPELINE_BYTES = 1 << 20


@contextmanager
def _checked_buffers(files: list[Path]):
    """One callable per file, in order, returning its bytes with their CRC-32 checked
    (raising as :func:`verify_crc` does).  Every file is checked before it is parsed;
    with large files, file i+1 is checked in a thread while file i is parsed (the CRC-32
    releases the GIL), so the check costs no wall time where a core is free."""
    def check(f: Path) -> pa.Buffer:
        buf = _file_buffer(f)
        verify_crc(f, buf)
        return buf

    try:
        size = sum(f.stat().st_size for f in files) / max(len(files), 1)
    except OSError:
        size = 0
    if len(files) < 2 or size < _PIPELINE_BYTES:
        yield [functools.partial(check, f) for f in files]
        return
    with ThreadPoolExecutor(1, thread_name_prefix="powerlab-crc") as pool:
        pending = {0: pool.submit(check, files[0])}

        def get(i: int) -> pa.Buffer:
            fut = pending.pop(i)
            if i + 1 < len(files):     # the next file's check runs while i is parsed
                pending[i + 1] = pool.submit(check, files[i + 1])
            return fut.result()

        try:
            yield [functools.partial(get, i) for i in range(len(files))]
        finally:
            for fut in pending.values():
                fut.cancel()


def _file_buffer(f: Path) -> pa.Buffer:
    """The bytes of a store file, read into memory.

    Not memory-mapped (issue 38): powerlab never rewrites a store file in place, but
    another program may, and a mapped page that a truncation removed raises SIGBUS, a
    native crash no ``except`` can catch.  Read, a file changed under the reader is at
    worst bytes that fail their CRC-32: a :class:`StoreError` naming it."""
    with open(f, "rb") as fh:
        return pa.py_buffer(fh.read())


def _one_value(md: pq.FileMetaData, names: Sequence[str]) -> dict[str, str]:
    """The string columns of ``names`` whose row-group statistics all say one value and
    no null: ``{column: value}``."""
    out = {}
    schema = md.schema.names
    for name in names:
        if name not in schema:
            continue
        i, vals = schema.index(name), set()
        for r in range(md.num_row_groups):
            st = md.row_group(r).column(i).statistics
            if (st is None or not st.has_min_max or not st.has_null_count or st.null_count
                    or not isinstance(st.min, str) or st.min != st.max):
                break
            vals.add(st.min)
        else:
            if len(vals) == 1:
                out[name] = vals.pop()
    return out


def _check_host(f: Path, t: pa.Table, one: str | None = None) -> None:
    """A file's rows belong to the host of its folder (a file copied into another host's
    folder would otherwise be read, and de-duplicated, as that folder's samples).
    ``one``: the file's single host value by its checked footer statistics, if known."""
    want = partition_of(f)[1]
    if one is not None and one == want:
        return                                      # every row group: that host alone
    col = t.column("host")
    if pa.types.is_dictionary(col.type):
        if not col.null_count and all(c.dictionary.to_pylist() == [want]
                                      for c in col.chunks):
            return                                  # one dictionary value, the folder's
        col = pa.chunked_array([c.dictionary.take(c.indices) for c in col.chunks],
                               type=col.type.value_type)
    mm = pc.min_max(col)
    if col.null_count or mm["min"].as_py() != want or mm["max"].as_py() != want:
        got = sorted({str(h) for h in pc.unique(col).to_pylist()})[:3]
        raise StoreError(f"store file {f} is in the folder of host {want!r} but holds "
                         f"rows of {', '.join(map(repr, got))}; move it to its host's "
                         "folder or out of the store")
