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
* :func:`output_folder` — the folder a writer fills: refused when a file has its name,
  created with its parents, a one-line error when it cannot be.
* :func:`fsync_file`, :func:`fsync_dir` — durability across a power loss.

This is a base module: it imports no wing, so readers, the store, the grid exports and
the command line all use it.

References
----------
.. [1] The Open Group, "rename", The Open Group Base Specifications Issue 7 (POSIX.1-2017),
   https://pubs.opengroup.org/onlinepubs/9699919799/functions/rename.html
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from .exceptions import PowerlabError, StoreError

__all__ = ["TMP_PREFIX", "add_force", "atomic_write", "fsync_dir", "fsync_file",
           "guard_outputs", "output_folder", "write_temporary"]

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
