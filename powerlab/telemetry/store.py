"""The telemetry store: Parquet files partitioned by date and host (format 2).

Layout (:mod:`powerlab.telemetry.storefiles`, ``docs/store.md``)::

    STORE/
      2024-05-17/
        node_1/
          part-20240517T153800000000Z-<id>-c<crc32>.parquet
      _meta/                       format marker, collector side tables, writer locks

Every write creates *new* files; nothing is ever rewritten in place.  A file is written
under a temporary dot-name in its final folder, flushed with ``fsync``, renamed into place
and the folder is fsynced, so a crash (or SIGKILL, or a full disk) at any moment leaves
only complete files visible.  Readers ignore leftover temporary files; the next write to
the partition removes them.  A sample (device, timestamp) is stored once: the writer
drops rows the partition already holds.  Files carry Parquet page checksums and the
CRC-32 of their bytes in their name, both verified on read
(:mod:`powerlab.telemetry.store_tables`), and a read returns its rows in store order
(:mod:`powerlab.telemetry.store_order`).

The round trip is exact, dtypes included: pandas' own metadata travels with each file.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import StoreError
from ..outputs import atomic_write as atomic_write_bytes  # the store's name for it
from .schema import GLOSSARY, conform, empty_frame, na_array, validate
from .store_order import tables_frame
from .store_tables import read_file_tables, read_tables
from .storefiles import (
    PART_RE,
    TMP_PREFIX,
    clean_temporaries,
    file_crc,
    fsync_dir,
    fsync_file,
    partition_dir,
    partition_lock,
    partition_of,
    store_format,
    write_format_marker,
)
from .storefiles import list_files as _list_files
from .timeutil import time_bound as _as_utc
from .timeutil import to_epoch_ns

__all__ = [
    "atomic_write_bytes",
    "clear_cache",
    "list_files",
    "read_store",
    "read_tables",
    "store_summary",
    "write_store",
]

_TMP_PREFIX = TMP_PREFIX


def write_store(df: pd.DataFrame, root: str | os.PathLike, *, fsync: bool = True,
                compression: str = "zstd", _upgrading: bool = False) -> list[Path]:
    """Append telemetry to a store as new Parquet files, one per (date, host).

    Samples already in the store are not written again: under the partition's writer
    lock, the rows whose (scope, GPU, timestamp) a file of the partition already holds
    are dropped (see ``docs/store.md``), so re-importing a source never duplicates a
    sample.  Each file carries Parquet page checksums and the CRC-32 of its bytes in its
    name; temporary files a killed writer left in the partition are removed.

    Parameters
    ----------
    df : pandas.DataFrame
        Telemetry in the canonical schema; it is conformed and validated first.
    root : path-like
        The store folder (created when missing).
    fsync : bool, default True
        Make each file durable before it becomes visible.
    compression : str, default "zstd"
        Parquet compression codec.

    Returns
    -------
    list of pathlib.Path
        The files written (none for a partition whose samples were all there already).

    Raises
    ------
    powerlab.exceptions.SchemaError
        When ``df`` breaks the schema (nothing is written).
    powerlab.exceptions.StoreError
        When a file cannot be written, when another process holds a partition's writer
        lock, or when ``root`` is a format-1 store (run ``powerlab store upgrade``);
        files written before remain valid.
    """
    root = Path(root)
    frame = conform(df)
    validate(frame, source="write_store input")
    if frame.empty:
        return []
    if not _upgrading and root.is_dir() and store_format(root) == 1:
        raise StoreError(f"{root} is a format-1 store; convert it first with "
                         f"'powerlab store upgrade {root}' (reading it works as it is)")
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not _upgrading:
            write_format_marker(root)
    except OSError as exc:
        raise StoreError(f"cannot create store folder {root}: {exc.strerror}") from exc
    day = to_epoch_ns(frame["timestamp"]) // (86_400 * 10**9)
    written: list[Path] = []
    for (dnum, host), part in frame.groupby([day, frame["host"]], sort=True, observed=True):
        date = (pd.Timestamp(0, tz="UTC") + pd.Timedelta(days=int(dnum))).strftime("%Y-%m-%d")
        folder = partition_dir(root, date, str(host))
        with partition_lock(root, date, str(host)):
            clean_temporaries(folder)
            part = _new_rows(part.reset_index(drop=True), folder)
            if part.empty:
                continue
            written.append(_write_part(part, folder, compression, fsync))
    return written


_KEY_COLUMNS = ["timestamp", "scope", "gpu_index", "gpu_uuid"]
#: Most file time ranges :func:`_time_range` remembers (~250 bytes each: ~16 MB at most);
#: the least recently used are forgotten first.
RANGES_MAX = 65_536
#: path -> (first, last) timestamp [ns] of a store file, from its footer (files are never
#: rewritten: a name, which holds the file's CRC-32, stands for one content).
_RANGES: OrderedDict[str, tuple[int, int]] = OrderedDict()
_RANGES_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forget the store files' time ranges remembered in this process (at most
    :data:`RANGES_MAX`).  Only memory is freed: a range is read again from the file's
    footer when needed, and since a store file is never rewritten under its name, a
    remembered range is never stale."""
    with _RANGES_LOCK:
        _RANGES.clear()


def _remember_range(key: str, got: tuple[int, int]) -> None:
    with _RANGES_LOCK:
        _RANGES[key] = got
        _RANGES.move_to_end(key)
        while len(_RANGES) > RANGES_MAX:
            _RANGES.popitem(last=False)


def _time_range(f: Path) -> tuple[int, int]:
    key = str(f)
    with _RANGES_LOCK:
        got = _RANGES.get(key)
        if got is not None:
            _RANGES.move_to_end(key)
    if got is None:
        try:
            md = pq.read_metadata(f)
            i = md.schema.names.index("timestamp")
            lo, hi = [], []
            for r in range(md.num_row_groups):
                st = md.row_group(r).column(i).statistics
                if st is None or not st.has_min_max:
                    raise ValueError("no statistics")
                lo.append(pd.Timestamp(st.min).value)
                hi.append(pd.Timestamp(st.max).value)
            got = (min(lo), max(hi)) if lo else (0, -1)
        except (ValueError, OSError, pa.ArrowException):
            got = (np.iinfo(np.int64).min, np.iinfo(np.int64).max)  # read it to be sure
        _remember_range(key, got)
    return got


def _keys(df: pd.DataFrame) -> pd.MultiIndex:
    n = len(df)
    return pd.MultiIndex.from_arrays([
        to_epoch_ns(df["timestamp"]) if "timestamp" in df else np.zeros(n),
        df["scope"].astype("string").fillna("").to_numpy(dtype=object)
        if "scope" in df else np.full(n, "gpu", dtype=object),
        df["gpu_index"].astype("Int32").fillna(-1).to_numpy(dtype="int32")
        if "gpu_index" in df else np.full(n, -1, dtype="int32"),
        df["gpu_uuid"].astype("string").fillna("").to_numpy(dtype=object)
        if "gpu_uuid" in df else np.full(n, "", dtype=object),
    ])


def _new_rows(part: pd.DataFrame, folder: Path) -> pd.DataFrame:
    """The rows of ``part`` whose sample (scope, GPU, timestamp) no file of the partition
    folder holds yet.  Only files whose time range overlaps ``part`` are read."""
    if not folder.is_dir():
        return part
    ts = to_epoch_ns(part["timestamp"])
    lo, hi = int(ts.min()), int(ts.max())
    old = []
    for f in folder.iterdir():
        if not PART_RE.match(f.name):
            continue
        flo, fhi = _time_range(f)
        if fhi < lo or flo > hi:
            continue
        for t in read_tables([f], columns=_KEY_COLUMNS, start=None, end=None):
            old.append(t.to_pandas())
    if not old:
        return part
    seen = _keys(pd.concat(old, ignore_index=True))
    keep = ~_keys(part).isin(seen)
    return part[keep].reset_index(drop=True) if not keep.all() else part


def _write_part(part: pd.DataFrame, folder: Path, compression: str, fsync: bool) -> Path:
    """Write one partition's rows as a new file: temporary name, fsync, CRC-32 of the
    bytes into the final name, rename, fsync of the folder."""
    t0 = part["timestamp"].min().strftime("%Y%m%dT%H%M%S%fZ")
    stem = f"part-{t0}-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{_TMP_PREFIX}{stem}.partial"
    table = pa.Table.from_pandas(part, preserve_index=False)
    try:
        pq.write_table(table, tmp, compression=compression, write_page_checksum=True)
        if fsync:
            fsync_file(tmp)
        target = folder / f"{stem}-c{file_crc(tmp):08x}.parquet"
        os.replace(tmp, target)
        if fsync:
            fsync_dir(folder)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise StoreError(f"could not write {folder / stem}.parquet: "
                         f"{exc.strerror or exc}") from exc
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    ts = to_epoch_ns(part["timestamp"])
    _remember_range(str(target), (int(ts.min()), int(ts.max())))
    return target


def list_files(root: str | os.PathLike, *, start=None, end=None,
               hosts: Iterable[str] | None = None) -> list[Path]:
    """The Parquet files of a store that may hold samples in ``[start, end)`` for ``hosts``.

    Pruning is by the partition folders alone (date and host); temporary files are
    skipped, other foreign files skipped with a warning.  Both store formats are read.
    """
    return _list_files(root, start=_as_utc(start), end=_as_utc(end), hosts=hosts)


def read_store(root: str | os.PathLike, *, start=None, end=None,
               hosts: Sequence[str] | None = None,
               columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Read telemetry back from a store (format 2, or format 1).

    Parameters
    ----------
    root : path-like
        The store folder.
    start, end : datetime-like, optional
        Keep samples with ``start <= timestamp < end`` (tz-aware).
    hosts : str or sequence of str, optional
        Keep these hosts only (a single name may be given as a string).
    columns : sequence of str, optional
        Measurement columns to read (identity columns are always read).

    Returns
    -------
    pandas.DataFrame
        Conformed telemetry sorted by host, scope, GPU and time.

    Raises
    ------
    powerlab.exceptions.StoreError
        No store at ``root``, a damaged file (checksum mismatch) or a foreign file.
    """
    start_u, end_u = _as_utc(start), _as_utc(end)
    files = _list_files(root, start=start_u, end=end_u, hosts=hosts)
    cols = None
    if columns is not None:
        unknown = [c for c in columns if c not in GLOSSARY]
        if unknown:
            raise StoreError(f"unknown column(s) {unknown}; known: {sorted(GLOSSARY)}")
        cols = list(dict.fromkeys(["timestamp", "host", "scope", "gpu_index", "gpu_uuid",
                                   *columns]))
    # host-major file order: with each file sorted (write_store writes conformed frames),
    # the result is often sorted already, and the sort below is skipped
    files = sorted(files, key=lambda f: (partition_of(f)[1], partition_of(f)[0], f.name))
    parts = list(read_file_tables(files, columns=cols, start=start_u, end=end_u))
    if not parts:
        frame = conform(empty_frame(cols))
    else:
        frame = tables_frame(parts, cols)
    if cols is not None:
        for c in cols:  # asked for, but in none of the files read
            if c not in frame.columns:
                frame[c] = na_array(GLOSSARY[c].dtype, len(frame))
        frame = frame[[c for c in frame.columns if c in cols]]
    return frame


def store_summary(root: str | os.PathLike) -> pd.DataFrame:
    """One row per host and scope: number of GPUs, samples, first and last time.

    Reads only the identity columns.
    """
    df = read_store(root, columns=[])
    if df.empty:
        return pd.DataFrame(columns=["host", "scope", "n_gpus", "samples", "first", "last"])
    g = df.groupby(["host", "scope"], observed=True)
    out = pd.DataFrame({
        "n_gpus": g["gpu_index"].nunique(),
        "samples": g.size(),
        "first": g["timestamp"].min(),
        "last": g["timestamp"].max(),
    }).reset_index()
    return out

