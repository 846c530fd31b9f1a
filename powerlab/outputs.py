"""Writing output files: the one place every wing and command writes a file through.

* :func:`atomic_write` — a file appears whole or not at all: the content goes to a
  temporary file in the same folder, is fsynced, and is renamed over the final name
  (POSIX ``rename`` is atomic within a file system [1]_); a failed write leaves any
  earlier file of that name untouched and no temporary behind.
* :func:`write_temporary` — the first half of that, for writers that commit several
  files in an order of their own (the facilities CSV and its sidecar).
* :func:`guard_outputs` — the check every writing command makes before any work: an
  output never lands on one of its inputs, nor on an existing file without ``--force``
  (:func:`add_force` adds the option).
* :func:`protect_inputs` — the one output guard every write goes through while a command
  runs: a Python audit hook [2]_ sees every ``open`` for writing, rename, replace, link,
  truncate and removal in the process (pandas, openpyxl, ``Path.write_text`` and
  :func:`atomic_write` alike) and refuses one that lands on an input of *this* command
  (:func:`check_write`: resolved paths, hard links by device and inode, sidecars as any
  other file, every existing file under an input folder).
* :func:`output_folder` — the folder a writer fills: refused when a file has its name,
  created with its parents, a one-line error when it cannot be.
* :func:`fsync_file`, :func:`fsync_dir` — durability across a power loss.

This is a base module: it imports no wing, so readers, the store, the grid exports and
the command line all use it.

References
----------
.. [1] The Open Group, "rename", The Open Group Base Specifications Issue 7 (POSIX.1-2017),
   https://pubs.opengroup.org/onlinepubs/9699919799/functions/rename.html
.. [2] PEP 578, "Python Runtime Audit Hooks", https://peps.python.org/pep-0578/ (events
   ``open``, ``os.rename``, ``os.remove``, ``os.truncate``, ``os.link``,
   ``shutil.copyfile``: https://docs.python.org/3/library/audit_events.html)
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from .exceptions import PowerlabError, StoreError

__all__ = ["TMP_PREFIX", "add_force", "atomic_write", "fsync_dir", "fsync_file",
           "check_write", "guard_outputs", "output_folder", "protect_inputs",
           "write_temporary"]

#: Start of every temporary file's name (a store's cleaner recognises them by it).
TMP_PREFIX = ".tmp-"


def fsync_file(path: str | os.PathLike) -> None:
    """fsync a closed file by path (its data reaches the disk before a rename)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a folder (a rename in it reaches the disk); a no-op where folders cannot be
    opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


def write_temporary(path: str | os.PathLike, write: Callable[[Path], object], *,
                    fsync: bool = True, tag: str = "") -> Path:
    """Fill a temporary file next to ``path`` with ``write(tmp)`` and return its path.

    The caller renames it (``os.replace``) or removes it.  On any failure the temporary
    file is removed; an ``OSError`` (full disk, permissions) becomes a
    :class:`~powerlab.exceptions.StoreError` naming ``path``.

    Parameters
    ----------
    path : path-like
        Final file name (its folder is created).
    write : callable
        Called with the temporary path; must create and close the file.
    fsync : bool, default True
        fsync the temporary file.
    tag : str, optional
        Put in the temporary file's name (a writer's tag in folders shared by several
        writers, so a dead writer's leftovers can be told apart).
    """
    path = Path(path)
    tmp = path.parent / f"{TMP_PREFIX}{tag}{uuid.uuid4().hex}-{path.name}.partial"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        if fsync:
            fsync_file(tmp)
    except OSError as exc:
        _unlink(tmp)
        raise StoreError(f"could not write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object], *,
                 fsync: bool = True, tag: str = "") -> Path:
    """Write a file atomically: ``write(tmp_path)`` fills a temporary file, then rename.

    Parameters
    ----------
    path : path-like
        Final file name.
    write : callable
        Called with the temporary path; must create and close the file.
    fsync : bool, default True
        fsync the file and its folder (durability across power loss).
    tag : str, optional
        Put in the temporary file's name (``storefiles.owner_tag()`` in folders shared by
        several writers, so a dead writer's leftovers can be told apart).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    powerlab.exceptions.StoreError
        When the write fails (full disk, permissions); the temporary file is removed and
        any earlier file of that name is untouched.
    """
    path = Path(path)
    tmp = write_temporary(path, write, fsync=fsync, tag=tag)
    try:
        os.replace(tmp, path)
        if fsync:
            fsync_dir(path.parent)
    except OSError as exc:
        _unlink(tmp)
        raise StoreError(f"could not write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        _unlink(tmp)
        raise
    return path


def output_folder(path: str | os.PathLike, *, create: bool = True,
                  what: str | None = None) -> Path:
    """The folder outputs are written into.

    Parameters
    ----------
    path : path-like
        The folder.
    create : bool, default True
        Create it (and its parents).  False: only check, as a command does before any work.
    what : str, optional
        How the user named it (``"--out"``), put before the path in messages.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    PowerlabError
        When something that is not a folder has its name, or it cannot be created
        (permissions, a full disk, a file in its parents).
    """
    out = Path(path)
    name = f"{what} {out}" if what else str(out)
    if out.exists() and not out.is_dir():
        raise PowerlabError(f"{name} exists and is not a folder")
    if create:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PowerlabError(f"cannot create the output folder {out}: "
                                f"{exc.strerror or exc}") from None
    return out


# --------------------------------------------------------------------------- commands
def add_force(p) -> None:
    """Add ``--force`` (overwrite an existing output file that is not an input) to an
    argparse parser."""
    p.add_argument("--force", action="store_true",
                   help="overwrite existing output files (never an input)")


def _same(a: Path, b: Path) -> bool:
    try:
        if a.resolve() == b.resolve():
            return True
    except (OSError, RuntimeError):        # a link loop: compare the text
        if os.path.abspath(a) == os.path.abspath(b):
            return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def guard_outputs(outputs: Iterable, inputs: Iterable, *, force: bool = False) -> None:
    """Refuse to write: an output that is (or is the same file as) an input, always; an
    output that exists and is not a regular file, always; an existing output file, unless
    ``force``.

    Paths are compared after resolving links and ``..`` and, where both exist, by device
    and inode (a hard link or a bind mount of an input is the input).  Sidecars count: the
    facilities CSV's ``.json`` sidecar is an output like the CSV itself.

    Parameters
    ----------
    outputs : iterable of path-like
        Every file the command will write (sidecars included), before any is written.
    inputs : iterable of path-like or None
        Every file or folder the command reads (None entries are skipped).
    force : bool, default False
        Overwrite existing output files that are not inputs (``--force``).

    Raises
    ------
    PowerlabError
        Naming the output, the input it collides with, and the way out.
    """
    ins = [Path(p) for p in inputs if p is not None]
    for out in (Path(p) for p in outputs):
        for src in ins:
            if _same(out, src):
                raise PowerlabError(f"output {out} is the input {src}; refusing to write "
                                    "over an input (choose another output name)")
        if out.is_symlink() and not out.exists():
            raise PowerlabError(f"output {out} is a dangling link; remove it or choose "
                                "another name")
        if out.exists():
            if not out.is_file():
                raise PowerlabError(f"output {out} exists and is not a regular file")
            if not force:
                raise PowerlabError(f"output {out} exists; pass --force to overwrite it")


# --------------------------------------------------------------------------- the guard
class _Protected:
    """The inputs of the running command: files by resolved path and (device, inode),
    folders by resolved path."""

    def __init__(self, paths: Iterable) -> None:
        self.files: dict[str, Path] = {}
        self.inodes: dict[tuple[int, int], Path] = {}
        self.folders: list[tuple[str, Path]] = []
        self._walked: dict[tuple[int, int], Path] | None = None
        for p in paths:
            p = Path(p)
            try:
                st = os.stat(p)
                real = os.path.realpath(p)
            except (OSError, ValueError):
                continue
            if os.path.isdir(real):
                self.folders.append((real.rstrip(os.sep) + os.sep, p))
            else:
                self.files[real] = p
                self.inodes[(st.st_dev, st.st_ino)] = p

    def _folder_inodes(self) -> dict[tuple[int, int], Path]:
        """(device, inode) of every file in the input folders, walked once on the first
        write to a file with several links."""
        if self._walked is None:
            self._walked = {}
            for _, folder in self.folders:
                for root, _dirs, names in os.walk(folder):
                    for name in names:
                        p = os.path.join(root, name)
                        try:
                            st = os.stat(p)
                        except (OSError, ValueError):
                            continue
                        self._walked[(st.st_dev, st.st_ino)] = Path(p)
        return self._walked

    def input_of(self, target, *, under_folders: bool = True) -> Path | None:
        """The input ``target`` would overwrite, or None."""
        try:
            real = os.path.realpath(os.fsdecode(target))
        except (TypeError, ValueError):
            return None
        if real in self.files:
            return self.files[real]
        try:
            st = os.stat(real)
        except (OSError, ValueError):
            return None                      # a new file overwrites nothing
        if (st.st_dev, st.st_ino) in self.inodes:
            return self.inodes[(st.st_dev, st.st_ino)]
        if st.st_nlink > 1 and self.folders:       # a hard link to a file in an input folder
            hit = self._folder_inodes().get((st.st_dev, st.st_ino))
            if hit is not None:
                return hit
        if under_folders and not os.path.isdir(real):
            for prefix, folder in self.folders:
                if real.startswith(prefix):
                    return Path(real)
        return None


_ACTIVE: _Protected | None = None
_HOOKED = False
_BUSY = threading.local()
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def check_write(path: str | os.PathLike, *, under_folders: bool = True) -> None:
    """Refuse (:class:`PowerlabError`) a write to ``path`` while :func:`protect_inputs`
    is active and ``path`` is (resolved, or by device and inode) an input of the running
    command, or an existing file inside an input folder.  A no-op otherwise."""
    prot = _ACTIVE
    if prot is None:
        return
    hit = prot.input_of(path, under_folders=under_folders)
    if hit is not None:
        raise PowerlabError(f"output {os.fsdecode(path)} is the input {hit}; refusing to "
                            "write over an input (choose another output name or folder)")


def _writes(event: str, args: tuple) -> list:
    """The paths an audited event would write, replace or remove: ``[(path,
    under_folders)]``."""
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None))[:3]
        if isinstance(path, int):
            return []
        if isinstance(mode, str):
            return [(path, True)] if any(c in mode for c in "wax+") else []
        return [(path, True)] if isinstance(flags, int) and flags & _WRITE_FLAGS else []
    if event == "os.rename":          # os.rename and os.replace: the source disappears
        return [(args[0], False), (args[1], True)]
    if event in ("os.remove", "os.truncate"):
        return [(args[0], False)]
    if event in ("os.link", "os.symlink", "shutil.copyfile", "shutil.move"):
        return [(args[1], True)]
    return []


def _audit(event: str, args: tuple) -> None:
    if _ACTIVE is None or getattr(_BUSY, "on", False):
        return
    if event not in ("open", "os.rename", "os.remove", "os.truncate", "os.link",
                     "os.symlink", "shutil.copyfile", "shutil.move"):
        return
    _BUSY.on = True
    try:
        for path, under in _writes(event, args):
            if isinstance(path, (str, bytes, os.PathLike)):
                check_write(path, under_folders=under)
    finally:
        _BUSY.on = False


@contextlib.contextmanager
def protect_inputs(inputs: Iterable) -> Iterator[None]:
    """While the block runs, no write in this process (any thread) lands on ``inputs``.

    Parameters
    ----------
    inputs : iterable of path-like
        The files and folders the command reads (missing ones are skipped); every
        existing file inside an input folder counts as an input (a new file may be
        created there).

    Raises
    ------
    PowerlabError
        From the write that would have overwritten, replaced, truncated or removed an
        input; nothing of that input is changed.
    """
    global _ACTIVE, _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)        # hooks cannot be removed: it idles when inactive
        _HOOKED = True
    previous = _ACTIVE
    _ACTIVE = _Protected(inputs)
    try:
        yield
    finally:
        _ACTIVE = previous
