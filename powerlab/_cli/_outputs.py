"""The one check every writing subcommand makes before it does any work: an output never
lands on one of the command's inputs, and never on an existing file unless ``--force``.

Paths are compared after resolving links and ``..`` and, where both exist, by device and
inode (a hard link or a bind mount of an input is the input). Sidecars count: the
facilities CSV's ``.json`` sidecar is an output like the CSV itself (issue 24: ``powerlab
forecast sc.json --out sc.csv`` wrote its sidecar over the scenario).
"""

from __future__ import annotations

import os
from pathlib import Path


def add_force(p) -> None:
    """Add ``--force`` (overwrite an existing output file that is not an input)."""
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


def guard_outputs(outputs, inputs, *, force: bool = False) -> None:
    """Refuse to write: an output that is (or is the same file as) an input, always; an
    output that exists and is not a regular file, always; an existing output file, unless
    ``force``.

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
    from ..exceptions import PowerlabError

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
