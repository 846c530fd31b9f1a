"""The files of a telemetry store: layout (format 2), checksums, writer locks, upgrade.

Format 2 (see ``docs/store.md``)::

    STORE/
      2024-05-17/                      UTC date of the samples
        node_1/                        host name (escaped; never holds "=")
          part-20240517T153800000000Z-<id>-<crc32>.parquet
      _meta/
        .format.json                   {"format": 2}
        events/events-*.pq             collector side tables (not ``*.parquet``)
        devices/devices-*.pq
        locks/DATE/.HOST.lock          one writer per partition
      _imports/*.json                  what ``powerlab import`` has imported

Only telemetry files end in ``.parquet``, and no folder name holds ``=``, so
``pandas.read_parquet(STORE)``, ``pyarrow.dataset.dataset(STORE, partitioning="hive")``
and ``STORE/**/*.parquet`` globs (DuckDB, polars) read exactly the telemetry: every
file holds all its columns, ``host`` included, with pandas' dtypes in its metadata.

Format 1 (``date=YYYY-MM-DD/host=H/part-*.parquet``, side tables in ``events/`` and
``devices/``) is still read; :func:`powerlab.telemetry.store_upgrade.upgrade_store` converts it in
place.
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import re
import socket
import threading
import urllib.parse
import warnings
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Self

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..exceptions import DataQualityWarning, StoreError
from ..outputs import TMP_PREFIX, fsync_dir, fsync_file  # re-exported: the store's helpers

__all__ = [
    "FORMAT",
    "META",
    "clean_dead_temporaries",
    "clean_host_temporaries",
    "file_crc",
    "fsync_dir",
    "fsync_file",
    "is_store",
    "list_files",
    "owner_tag",
    "partition_lock",
    "partition_of",
    "side_table_dir",
    "side_table_files",
    "store_format",
    "verify_crc",
    "verify_store",
]

#: The store format written by this version.
FORMAT = 2
#: Folder of everything in a store that is not telemetry.
META = "_meta"
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: Names of a partition's data files (both store formats).
PART_RE = re.compile(r"^part-.*\.parquet$")
#: The CRC-32 a data file's name carries (``part-...-cXXXXXXXX.parquet``).
CRC_RE = re.compile(r"-c([0-9a-f]{8})\.parquet$")
#: Marker of an upgrade in progress (``_meta/.upgrading``): while it exists the store holds
#: some rows in both formats, so reads refuse it until the upgrade is run again.
UPGRADING = ".upgrading"
#: Seconds a process keeps a partition's writer lock after its last write.
LOCK_HOLD_S = 30.0


def safe_host(host: str) -> str:
    """Host names as folder names: keep [A-Za-z0-9._-], percent-escape the UTF-8 bytes
    of the rest, and a leading ``.`` or ``_`` (which readers skip as hidden), so every
    name maps to one folder and back and no folder name holds ``=``."""
    out = "".join(ch if (ch.isalnum() and ch.isascii()) or ch in "._-"
                  else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
                  for ch in host)
    if out[:1] in (".", "_"):
        out = f"%{ord(out[0]):02X}" + out[1:]
    return out


def unsafe_host(name: str) -> str:
    return urllib.parse.unquote(name, encoding="utf-8", errors="replace")


# --------------------------------------------------------------------------- layout

def store_format(root: str | os.PathLike) -> int | None:
    """1 or 2 for a store folder, None for a folder that holds no store (yet)."""
    root = Path(root)
    if any(root.glob("date=*")) or (root / "events").is_dir() or (root / "devices").is_dir():
        return 1  # format-1 folders left (also after an interrupted upgrade)
    if (root / META / ".format.json").is_file():
        try:
            return int(json.loads((root / META / ".format.json").read_text())["format"])
        except (ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise StoreError(f"{root / META / '.format.json'}: unreadable store format "
                             f"marker ({why}); expected {{\"format\": {FORMAT}}}") from None
    if any(_DATE_RE.match(p.name) for p in root.iterdir()) if root.is_dir() else False:
        return FORMAT
    return None


def is_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a store folder (either format)."""
    p = Path(path)
    return p.is_dir() and store_format(p) is not None


def partition_dir(root: Path, date: str, host: str) -> Path:
    return root / date / safe_host(host)


def partition_of(path: str | os.PathLike) -> tuple[str, str]:
    """(date, host) of a telemetry file of either format."""
    p = Path(path)
    d, h = p.parent.parent.name, p.parent.name
    return d.removeprefix("date="), unsafe_host(h.removeprefix("host="))


def file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            crc = zlib.crc32(block, crc)
    return crc


def verify_crc(path: Path, data) -> None:
    """Check a file's bytes (any bytes-like object) against the CRC-32 in its name
    (format 2 files)."""
    m = CRC_RE.search(path.name)
    if m is None:
        return
    if zlib.crc32(data) != int(m.group(1), 16):
        raise StoreError(f"store file {path} is damaged: its CRC-32 is "
                         f"{zlib.crc32(data):08x}, its name records {m.group(1)} "
                         "(restore it from a backup or delete it)")


def _partition_dirs(root: Path):
    """(date, host, folder) of every telemetry partition, format 2 then format 1."""
    for ddir in sorted(root.iterdir()):
        if ddir.is_dir() and _DATE_RE.match(ddir.name):
            for hdir in sorted(ddir.iterdir()):
                if hdir.is_dir():
                    yield ddir.name, unsafe_host(hdir.name), hdir
    for ddir in sorted(root.glob("date=*")):
        for hdir in sorted(ddir.glob("host=*")):
            yield ddir.name.split("=", 1)[1], unsafe_host(hdir.name.split("=", 1)[1]), hdir


def _stray(path: Path, why: str) -> None:
    warnings.warn(f"store: skipped {path}: {why}", DataQualityWarning, stacklevel=4)


def list_files(root: str | os.PathLike, *, start=None, end=None,
               hosts: Iterable[str] | None = None) -> list[Path]:
    """The telemetry files of a store that may hold samples in ``[start, end)`` for
    ``hosts`` (UTC timestamps), pruned by the partition folders alone.

    Temporary files of writes in progress are skipped silently; any other file in a
    partition folder that is not a telemetry file, and any ``.parquet`` file outside the
    partition folders, is skipped with a :class:`~powerlab.exceptions.DataQualityWarning`.
    """
    root = Path(root)
    if not root.is_dir():
        raise StoreError(f"no store at {root}")
    if isinstance(hosts, str):  # one host name, not a sequence of one-letter names
        hosts = [hosts]
    if (root / META / UPGRADING).exists():
        raise StoreError(f"an upgrade of the store {root} was interrupted: some rows are in "
                         "both formats; run 'powerlab store upgrade "
                         f"{root}' again (it resumes) before reading it")
    host_set = None if hosts is None else {str(h) for h in hosts}
    for p in root.iterdir():
        if p.is_file() and p.suffix == ".parquet":
            _stray(p, "a Parquet file outside the date/host partition folders")
    files = []
    misplaced = 0
    for date, host, hdir in _partition_dirs(root):
        try:
            day = pd.Timestamp(date, tz="UTC")
        except ValueError:
            continue
        if host_set is not None and host not in host_set:
            continue
        if (start is not None and day + pd.Timedelta(days=1) <= start) or \
                (end is not None and day >= end):
            misplaced += _named_inside(hdir, date, start, end)   # skipped: said, counted
            continue
        format2 = not hdir.name.startswith("host=")
        crcs: dict[str, Path] = {}
        for p in sorted(hdir.iterdir()):
            if PART_RE.match(p.name):
                m = CRC_RE.search(p.name)
                if format2 and m is None:   # read (page checksums), but said
                    warnings.warn(f"store: {p} has no CRC-32 in its name (powerlab names "
                                  "every file it writes part-...-c<crc32>.parquet: renamed, "
                                  "or not written by powerlab?); read with its page "
                                  "checksums only", DataQualityWarning, stacklevel=3)
                if m is not None and m.group(1) in crcs:
                    _stray(p, f"the same CRC-32 as {crcs[m.group(1)].name} in this folder "
                              "(a copy: its rows would be read twice)")
                    continue
                if m is not None:
                    crcs[m.group(1)] = p
                files.append(p)
            elif not p.name.startswith(TMP_PREFIX):
                _stray(p, "not a telemetry file (expected part-*.parquet)")
    if misplaced:
        warnings.warn(f"store: {misplaced} file(s) named for a date in the range read sit "
                      "in another date's folder and were not read (moved?); run "
                      f"'powerlab store verify {root}'", DataQualityWarning, stacklevel=3)
    return files


_NAME_DAY = re.compile(r"^part-(\d{4})(\d{2})(\d{2})T")


def _named_inside(hdir: Path, date: str, start, end) -> int:
    """Part files of a folder outside ``[start, end)`` whose names (the first sample's
    time) say a day inside it and not the folder's: files moved to another date folder,
    which a date-bounded read would skip without a word."""
    n = 0
    for name in os.listdir(hdir):
        m = _NAME_DAY.match(name)
        if m is None or "-".join(m.groups()) == date:
            continue
        day = pd.Timestamp("-".join(m.groups()), tz="UTC")
        if (start is None or day + pd.Timedelta(days=1) > start) and \
                (end is None or day < end):
            n += 1
    return n


def verify_store(root: str | os.PathLike) -> dict:
    """Check every file of a store: the CRC-32 in each telemetry file's name against its
    bytes, and every Parquet page checksum (telemetry and side tables) — what pandas,
    DuckDB or pyarrow do not check by default.

    Returns
    -------
    dict
        ``files`` checked, ``bytes``, ``damaged`` (list of ``(path, why)``), ``foreign``
        (files in the partition folders that are not powerlab part files, CRC-less or
        copied part files, as in :func:`list_files`).
    """
    root = Path(root)
    if not root.is_dir():
        raise StoreError(f"no store at {root}")
    if store_format(root) is None:
        raise StoreError(f"{root} holds no powerlab store (no date folders, no "
                         f"{META}/.format.json)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DataQualityWarning)
        files = list_files(root)
    foreign = [str(w.message) for w in caught if issubclass(w.category, DataQualityWarning)]
    side = [p for kind in ("events", "devices") for p in side_table_files(root, kind)]
    out = {"files": 0, "bytes": 0, "damaged": [], "foreign": foreign}
    telemetry = set(files)
    for f in [*files, *side]:
        out["files"] += 1
        try:
            data = f.read_bytes()
            out["bytes"] += len(data)
            verify_crc(f, data)
            t = pq.read_table(io.BytesIO(data), page_checksum_verification=True)
            why = _misplaced_rows(f, t) if f in telemetry else None
            if why:                        # a file moved to another date or host folder
                out["damaged"].append((str(f), why))
        except StoreError as exc:
            out["damaged"].append((str(f), str(exc)))
        except Exception as exc:  # noqa: BLE001  (pyarrow's errors: OSError, ArrowInvalid)
            out["damaged"].append((str(f), f"not a readable Parquet file: {str(exc)[:200]}"))
    return out


def partition_day(f: Path) -> pd.Timestamp | None:
    """The UTC day of a telemetry file's date folder (None: not a date)."""
    try:
        return pd.Timestamp(partition_of(f)[0], tz="UTC")
    except ValueError:
        return None


def misplaced_span(f: Path, lo, hi) -> str | None:
    """Why rows timed ``lo`` .. ``hi`` do not belong to the date folder of ``f``, or None.

    Every row of a part file lies in its folder's UTC day (the writer partitions so); a
    file moved to another date folder would be skipped by a date-bounded read."""
    day = partition_day(f)
    if day is None or lo is None or hi is None:
        return None
    lo, hi = pd.Timestamp(lo), pd.Timestamp(hi)
    lo, hi = (x.tz_localize("UTC") if x.tz is None else x for x in (lo, hi))
    if lo >= day and hi < day + pd.Timedelta(days=1):
        return None
    return (f"holds rows from {lo} to {hi}, outside its date folder {day.date()}: move it "
            "to the folder of its date (or out of the store)")


def _misplaced_rows(f: Path, t) -> str | None:
    """Why the rows of table ``t`` (file ``f``) do not belong to its partition: its date
    folder (by the rows' times) or its host folder (by their host); None if they do."""
    if not t.num_rows or "timestamp" not in t.column_names:
        return None
    mm = pc.min_max(t.column("timestamp"))
    why = misplaced_span(f, mm["min"].as_py(), mm["max"].as_py())
    if why or "host" not in t.column_names:
        return why
    col = t.column("host")
    hosts = {str(h) for h in pc.unique(col.cast("string") if not
                                       str(col.type).startswith("string") else col)
             .to_pylist()}
    want = partition_of(f)[1]
    if hosts != {want}:
        return (f"holds rows of host(s) {', '.join(sorted(hosts)[:3])}, not of its folder's "
                f"host {want!r}")
    return None


def side_table_dir(root: str | os.PathLike, kind: str) -> Path:
    """Where a side table (``events``, ``devices``) of a format-2 store is written."""
    return Path(root) / META / kind


def side_table_files(root: str | os.PathLike, kind: str) -> list[Path]:
    """The files of a side table, format 2 (``_meta/KIND/*.pq``) and format 1."""
    root = Path(root)
    return (sorted(side_table_dir(root, kind).glob(f"{kind}-*.pq"))
            + sorted((root / kind).glob(f"{kind}-*.parquet")))


def write_format_marker(root: Path) -> None:
    marker = root / META / ".format.json"
    if marker.is_file():
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.parent / f"{TMP_PREFIX}{os.getpid()}-{threading.get_ident()}-format.json"
    tmp.write_text(json.dumps({"format": FORMAT, "layout": "DATE/HOST/part-*.parquet"}))
    os.replace(tmp, marker)


# --------------------------------------------------------------------------- locks

class _Held:
    __slots__ = ("fd", "timer", "tlock", "users")

    def __init__(self, fd: int):
        self.fd = fd
        self.timer: threading.Timer | None = None
        self.tlock = threading.Lock()
        self.users = 0  # writes in progress or waiting (never released while > 0)


_HELD: dict[str, _Held] = {}
_HELD_LOCK = threading.Lock()


def _release(key: str) -> None:
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is None or held.users:
            return  # a write is in progress or waiting; its end re-arms the timer
        del _HELD[key]
        os.close(held.fd)  # closing the descriptor drops the flock


class partition_lock:  # lower case: used as a context manager, like open()
    """Exclusive writer lock of one (date, host) partition of a store.

    The lock is an ``fcntl.flock`` on ``_meta/locks/DATE/.HOST.lock``.  A process keeps it
    for :data:`LOCK_HOLD_S` seconds after its last write (the operating system drops it
    when the process ends), so a second process writing the same partition meanwhile,
    such as a second collector of the same host, gets a :class:`StoreError` instead of
    interleaving two series.  Threads of one process take turns.
    """

    def __init__(self, root: Path, date: str, host: str):
        self.path = root / META / "locks" / date / f".{safe_host(host)}.lock"
        self.key = str(self.path.resolve()) if self.path.parent.exists() else str(self.path)
        self.root, self.date, self.host = root, date, host

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.key = str(self.path.resolve())
        with _HELD_LOCK:
            held = _HELD.get(self.key)
            if held is None:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    os.close(fd)
                    if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                        raise StoreError(f"cannot lock {self.path}: {exc.strerror}") from exc
                    owner = self.path.read_text(errors="replace").strip() or "unknown"
                    raise StoreError(
                        f"store {self.root}: partition {self.date}/{self.host} is being "
                        f"written by another process ({owner}); a partition takes one "
                        "writer at a time (is a second collector or import running for "
                        "this host?)") from None
                os.ftruncate(fd, 0)
                os.write(fd, f"pid {os.getpid()}".encode())
                held = _HELD[self.key] = _Held(fd)
            if held.timer is not None:
                held.timer.cancel()
                held.timer = None
            held.users += 1
        held.tlock.acquire()
        self._held = held
        return self

    def __exit__(self, *exc) -> None:
        held = self._held
        held.tlock.release()
        with _HELD_LOCK:
            held.users -= 1
            if _HELD.get(self.key) is held and not held.users:
                if held.timer is not None:
                    held.timer.cancel()
                held.timer = threading.Timer(LOCK_HOLD_S, _release, args=(self.key,))
                held.timer.daemon = True
                held.timer.start()


def release_locks() -> None:
    """Drop every partition lock this process holds (tests, long-lived notebooks)."""
    for key in list(_HELD):
        held = _HELD.get(key)
        if held is not None and held.timer is not None:
            held.timer.cancel()
        _release(key)


def owner_tag() -> str:
    """``host~pid~`` of this process, put in the name of temporary files in folders that
    several writers share (side tables), so that :func:`clean_dead_temporaries` can tell
    a dead writer's leftovers from a live writer's work in progress."""
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())
    return f"{host}~{os.getpid()}~"


def clean_dead_temporaries(folder: Path) -> int:
    """Remove temporary files left in a shared folder by writers of this host that are no
    longer running (their ``host~pid~`` tag names a process that does not exist).
    Leftovers of other hosts (a shared file system) are left alone.  Returns how many
    were removed."""
    me = owner_tag().split("~")[0]
    n = 0
    if not folder.is_dir():
        return 0
    for p in folder.iterdir():
        if not p.name.startswith(TMP_PREFIX):
            continue
        parts = p.name[len(TMP_PREFIX):].split("~")
        if len(parts) < 3 or parts[0] != me or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
            continue  # alive (or not ours to signal): keep
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        n += _unlink(p)
    return n


def _unlink(p: Path) -> bool:
    """Remove a leftover file; False when it is already gone or cannot be removed."""
    try:
        p.unlink()
        return True
    except OSError:
        return False


def clean_host_temporaries(root: str | os.PathLike, host: str) -> int:
    """Remove what killed writers of ``host`` left in a store: temporary files in every
    date folder of that host (each under its partition lock, so a live writer of the same
    partition is never cut short) and this host's dead writers' temporaries in the side
    tables.  A collector calls it at start (issue 38: orphans after kills on a slow disk
    stayed until the next write to that very partition).  Returns how many were removed."""
    root = Path(root)
    n = 0
    for date, h, folder in list(_partition_dirs(root)) if root.is_dir() else []:
        if h != host or not any(p.name.startswith(TMP_PREFIX) for p in folder.iterdir()):
            continue
        with partition_lock(root, date, host):
            n += clean_temporaries(folder)
    for kind in ("events", "devices"):
        n += clean_dead_temporaries(side_table_dir(root, kind))
    return n


def clean_temporaries(folder: Path) -> int:
    """Remove temporary files a killed writer left in a partition folder (call with the
    partition's lock held).  Returns how many were removed."""
    if not folder.is_dir():
        return 0
    return sum(_unlink(p) for p in folder.iterdir() if p.name.startswith(TMP_PREFIX))
