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
CRC-32 of their bytes in their name, both verified on read.

The round trip is exact, dtypes included: pandas' own metadata travels with each file.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import StoreError
from ..outputs import atomic_write as atomic_write_bytes  # the store's name for it
from .schema import CORE_COLUMNS, GLOSSARY, conform, empty_frame, na_array, validate
from .storefiles import (
    CRC_RE,
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
    verify_crc,
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
    return [t for _, _, t in _read_files(files, columns=columns, start=start, end=end,
                                         read_dictionary=read_dictionary)]


def _read_files(files, *, columns=None, start=None, end=None, read_dictionary=()):
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
    from concurrent.futures import ThreadPoolExecutor

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
    """The bytes of a store file, memory-mapped (no copy: the CRC-32 and the Parquet
    reader read the page cache; store files are never rewritten in place)."""
    if f.stat().st_size == 0:
        return pa.py_buffer(b"")
    with pa.memory_map(str(f), "r") as src:
        return src.read_buffer()


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
    import pyarrow.compute as pc

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
    parts = list(_read_files(files, columns=cols, start=start_u, end=end_u))
    if not parts:
        frame = conform(empty_frame(cols))
    else:
        frame = _frame(parts, cols)
    if cols is not None:
        for c in cols:  # asked for, but in none of the files read
            if c not in frame.columns:
                frame[c] = na_array(GLOSSARY[c].dtype, len(frame))
        frame = frame[[c for c in frame.columns if c in cols]]
    return frame


def _frame(parts: list, cols: list[str] | None) -> pd.DataFrame:
    """The tables read (``parts``, emptied here), as one conformed frame sorted by host,
    scope, GPU and time.  Only the core columns of ``cols`` that no file holds are added
    as NA; the files' own order is kept where it is sorted already."""
    import pyarrow.compute as pc

    runs = []  # (rows, host, the one scope or None) of each table, in order
    for f, one, t in parts:
        scope = one.get("scope")
        if scope is None and "scope" in t.column_names and not t.column("scope").null_count:
            mm = pc.min_max(t.column("scope"))
            scope = mm["min"].as_py() if mm["min"].as_py() == mm["max"].as_py() else None
        runs.append((t.num_rows, partition_of(f)[1], scope))
    tables = [t for _, _, t in parts]
    parts.clear()
    segs = _segments(tables, runs)
    take = None
    if segs:                                # sorted runs of rows, to interleave
        if len(segs) <= _MAX_SLICES:        # zero-copy slices, one copy in to_pandas
            tables = [tables[i].slice(a, b - a) for i, a, b in segs]
        else:
            starts = np.cumsum([0] + [t.num_rows for t in tables])[:-1]
            lo = np.array([starts[i] + a for i, a, _ in segs], dtype=np.int64)
            size = np.array([b - a for _, a, b in segs], dtype=np.int64)
            take = np.arange(size.sum()) + np.repeat(lo - (np.cumsum(size) - size), size)
    table = pa.concat_tables(tables, promote_options="permissive") \
        if len(tables) > 1 else tables[0]
    del tables
    # split_blocks: no copy of the float columns into one 2-D block (pandas' own layout
    # after any column operation); self_destruct: the Arrow buffers go as they are copied
    frame = table.to_pandas(split_blocks=True, self_destruct=True)
    del table
    n = len(frame)
    for c in CORE_COLUMNS:  # absent core columns, cheaply (conform's way is per row)
        if c not in frame.columns and (cols is None or c in cols):
            frame[c] = na_array(GLOSSARY[c].dtype, n)
    frame = conform(frame, sort=False, add_missing=False)
    if segs is None:
        take = _sort_order(_sort_keys(frame, runs))
    return frame if take is None else frame.take(take).reset_index(drop=True)


#: Sort key of a missing GPU index: before every Int16 value (NA first, as conform sorts).
_NA_GPU = -(2**20)
#: Most sorted runs interleaved as Arrow slices (more: one index and a take).
_MAX_SLICES = 2000


def _numpy(col: pa.ChunkedArray) -> np.ndarray:
    """A column without nulls as one NumPy array (no copy for a single chunk)."""
    return (col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()).to_numpy()


def _segments(tables: list[pa.Table], runs: list) -> list[tuple[int, int, int]] | None:
    """The rows of ``tables`` (one after the other) in the order of host, scope, GPU and
    time, as runs ``(table, first row, end row)`` (none when they come in that order
    already), when each table (one host and one
    scope) is sorted by GPU and time and each device's runs follow each other in time
    (a store appended to in time order); None otherwise (a full sort is needed).  On the
    Arrow columns, before any conversion."""
    if any(scope is None for _, _, scope in runs):
        return None
    segs = []  # (host, scope, gpu, table, first row, end row, first time, last time)
    for i, (t, (n, host, scope)) in enumerate(zip(tables, runs)):
        if "gpu_index" not in t.column_names or not pa.types.is_integer(
                t.schema.field("gpu_index").type):
            return None
        ts = t.column("timestamp")
        if not (pa.types.is_timestamp(ts.type) and ts.type.unit == "ns") or ts.null_count:
            return None
        g = t.column("gpu_index")
        if g.null_count:
            import pyarrow.compute as pc

            g = pc.fill_null(g.cast(pa.int32()), _NA_GPU)
        gg = _numpy(g)
        tt = _numpy(ts).view(np.int64)
        end = np.flatnonzero(gg[1:] != gg[:-1])     # last row of each GPU's run
        if (gg[end + 1] < gg[end]).any():
            return None
        down = np.flatnonzero(tt[1:] < tt[:-1])     # time going back: only between runs
        if down.size and not np.isin(down, end).all():
            return None
        cut = end + 1
        for a, b in zip([0, *cut.tolist()], [*cut.tolist(), n]):
            segs.append((host, scope, int(gg[a]), i, a, b, int(tt[a]), int(tt[b - 1])))
    segs.sort(key=lambda s: s[:4])
    for x, y in itertools.pairwise(segs):
        if x[:3] == y[:3] and x[7] > y[6]:   # one device's runs overlap in time
            return None
    out = [s[3:6] for s in segs]
    if all(x < y for x, y in itertools.pairwise(out)):
        return []   # the rows as they come are sorted already
    return out


def _sort_keys(frame: pd.DataFrame, runs: list) -> tuple:
    """Integer sort keys (host, scope, GPU, time) of the rows of ``frame``, the tables of
    ``runs`` one after the other (each of one host, that of its folder)."""
    hosts = [h for _, h, _ in runs]
    rank = {h: i for i, h in enumerate(sorted(set(hosts)))}
    host_codes = np.repeat(np.array([rank[h] for h in hosts], dtype=np.int32),
                           [n for n, _, _ in runs])
    scope = frame["scope"]
    is_node = (scope == "node").to_numpy(dtype=bool, na_value=False)
    if scope.isna().any() or not (is_node | (scope == "gpu").to_numpy(
            dtype=bool, na_value=False)).all():
        scope_codes = pd.factorize(scope, sort=True)[0]
    else:  # "gpu" < "node"
        scope_codes = is_node.astype(np.int8)
    gpu = frame["gpu_index"].array.to_numpy(dtype="int32", na_value=_NA_GPU)
    return host_codes, scope_codes, gpu, to_epoch_ns(frame["timestamp"])


def _sort_order(keys: tuple) -> np.ndarray | None:
    """Row order sorting by ``keys`` (stable; NA GPU first, as :func:`conform` sorts),
    or None when the rows are sorted already."""
    n = len(keys[-1])
    if n < 2:
        return None
    ok = np.ones(n - 1, dtype=bool)
    eq = np.ones(n - 1, dtype=bool)
    for k in keys:  # lexicographic: non-decreasing, first difference decides
        d = np.diff(k)
        ok &= ~eq | (d >= 0)
        eq &= d == 0
        if not ok.all():
            break
    else:
        return None
    return np.lexsort(keys[::-1])


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

