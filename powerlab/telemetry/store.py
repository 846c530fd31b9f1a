"""The telemetry store: Parquet files partitioned by date and host.

Layout::

    STORE/
      date=2024-05-17/
        host=node_1/
          part-20240517T153800Z-<uuid>.parquet
      events/                      (optional status events written by collectors)

Every write creates *new* files; nothing is ever rewritten in place.  A file is written
under a temporary dot-name in its final folder, flushed with ``fsync``, renamed into place
and the folder is fsynced, so a crash (or SIGKILL, or a full disk) at any moment leaves
only complete files visible.  Readers ignore leftover temporary files.

The round trip is exact, dtypes included: pandas' own metadata travels with each file.
"""

from __future__ import annotations

import os
import re
import urllib.parse
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import StoreError
from .schema import GLOSSARY, conform, empty_frame, validate

__all__ = [
    "atomic_write_bytes",
    "list_files",
    "read_store",
    "read_tables",
    "store_summary",
    "write_store",
]

_TMP_PREFIX = ".tmp-"
_PART_RE = re.compile(r"^part-.*\.parquet$")


def _safe_host(host: str) -> str:
    """Host names as folder names: keep [A-Za-z0-9._-], percent-escape the UTF-8 bytes
    of the rest (so every name maps to one folder and back)."""
    return "".join(ch if (ch.isalnum() and ch.isascii()) or ch in "._-"
                   else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
                   for ch in host)


def _unsafe_host(name: str) -> str:
    return urllib.parse.unquote(name, encoding="utf-8", errors="replace")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, write, *, fsync: bool = True) -> Path:
    """Write a file atomically: ``write(tmp_path)`` fills a temporary file, then rename.

    Parameters
    ----------
    path : path-like
        Final file name.
    write : callable
        Called with the temporary path; must create and close the file.
    fsync : bool, default True
        fsync the file and its folder (durability across power loss).

    Raises
    ------
    powerlab.exceptions.StoreError
        When the write fails (full disk, permissions); the temporary file is removed and
        any earlier file of that name is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{_TMP_PREFIX}{uuid.uuid4().hex}-{path.name}"
    try:
        write(tmp)
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
        if fsync:
            _fsync_dir(path.parent)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise StoreError(f"could not write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    return path


def write_store(df: pd.DataFrame, root: str | os.PathLike, *, fsync: bool = True,
                compression: str = "zstd") -> list[Path]:
    """Append telemetry to a store as new Parquet files, one per (date, host).

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
        The files written.

    Raises
    ------
    powerlab.exceptions.SchemaError
        When ``df`` breaks the schema (nothing is written).
    powerlab.exceptions.StoreError
        When a file cannot be written; files written before remain valid.
    """
    root = Path(root)
    frame = conform(df)
    validate(frame, source="write_store input")
    if frame.empty:
        return []
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create store folder {root}: {exc.strerror}") from exc
    day = frame["timestamp"].astype("int64").to_numpy() // (86_400 * 10**9)
    written: list[Path] = []
    for (dnum, host), part in frame.groupby([day, frame["host"]], sort=True, observed=True):
        date = (pd.Timestamp(0, tz="UTC") + pd.Timedelta(days=int(dnum))).strftime("%Y-%m-%d")
        part = part.reset_index(drop=True)
        t0 = part["timestamp"].min().strftime("%Y%m%dT%H%M%S%fZ")
        target = (root / f"date={date}" / f"host={_safe_host(str(host))}"
                  / f"part-{t0}-{uuid.uuid4().hex[:12]}.parquet")
        table = pa.Table.from_pandas(part, preserve_index=False)
        written.append(atomic_write_bytes(
            target, lambda tmp, table=table: pq.write_table(table, tmp, compression=compression),
            fsync=fsync))
    return written


def _as_utc(t) -> pd.Timestamp | None:
    if t is None:
        return None
    ts = pd.Timestamp(t)
    if ts.tzinfo is None:
        raise StoreError(f"time bound {t!r} has no time zone; give a tz-aware (UTC) time")
    return ts.tz_convert("UTC")


def list_files(root: str | os.PathLike, *, start=None, end=None,
               hosts: Iterable[str] | None = None) -> list[Path]:
    """The Parquet files of a store that may hold samples in ``[start, end)`` for ``hosts``.

    Pruning is by the partition folders alone (date and host); temporary files are skipped.
    """
    root = Path(root)
    if not root.is_dir():
        raise StoreError(f"no store at {root}")
    start, end = _as_utc(start), _as_utc(end)
    if isinstance(hosts, str):  # one host name, not a sequence of one-letter names
        hosts = [hosts]
    host_set = None if hosts is None else {str(h) for h in hosts}
    files = []
    for ddir in sorted(root.glob("date=*")):
        try:
            day = pd.Timestamp(ddir.name.split("=", 1)[1], tz="UTC")
        except ValueError:
            continue
        if start is not None and day + pd.Timedelta(days=1) <= start:
            continue
        if end is not None and day >= end:
            continue
        for hdir in sorted(ddir.glob("host=*")):
            host = _unsafe_host(hdir.name.split("=", 1)[1])
            if host_set is not None and host not in host_set:
                continue
            files.extend(sorted(p for p in hdir.iterdir() if _PART_RE.match(p.name)))
    return files


def read_tables(files: Sequence[str | os.PathLike], *, columns: Sequence[str] | None = None,
                start: pd.Timestamp | None = None, end: pd.Timestamp | None = None,
                read_dictionary: Sequence[str] = ()) -> list[pa.Table]:
    """Read store files, in order, as Arrow tables (the empty ones left out).

    Each file is projected to those of ``columns`` it holds (optional columns may be
    absent from some files), filtered to ``start <= timestamp < end`` (UTC), and the
    ``read_dictionary`` columns it holds stay dictionary-encoded.

    Raises
    ------
    powerlab.exceptions.StoreError
        Naming the file that cannot be read.
    """
    filters = []
    if start is not None:
        filters.append(("timestamp", ">=", start))
    if end is not None:
        filters.append(("timestamp", "<", end))
    tables = []
    for f in files:
        try:
            names = set(pq.read_schema(f).names)
            t = pq.read_table(
                f, columns=None if columns is None else [c for c in columns if c in names],
                filters=filters or None,
                read_dictionary=[c for c in read_dictionary if c in names] or None)
        except (OSError, pa.ArrowException) as exc:
            raise StoreError(f"cannot read store file {f}: {exc}") from exc
        if t.num_rows:
            tables.append(t)
    return tables


def read_store(root: str | os.PathLike, *, start=None, end=None,
               hosts: Sequence[str] | None = None,
               columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Read telemetry back from a store.

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
    """
    start_u, end_u = _as_utc(start), _as_utc(end)
    files = list_files(root, start=start_u, end=end_u, hosts=hosts)
    cols = None
    if columns is not None:
        unknown = [c for c in columns if c not in GLOSSARY]
        if unknown:
            raise StoreError(f"unknown column(s) {unknown}; known: {sorted(GLOSSARY)}")
        cols = list(dict.fromkeys(["timestamp", "host", "scope", "gpu_index", "gpu_uuid",
                                   *columns]))
    tables = read_tables(files, columns=cols, start=start_u, end=end_u)
    if not tables:
        frame = conform(empty_frame(cols))
    else:
        frame = conform(pa.concat_tables(tables, promote_options="permissive").to_pandas())
    if cols is not None:
        for c in cols:  # asked for, but in none of the files read
            if c not in frame.columns:
                frame[c] = pd.Series(index=frame.index, dtype=GLOSSARY[c].dtype)
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

