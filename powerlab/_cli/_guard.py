"""The inputs of a parsed command line, for the one output guard
(:func:`powerlab.outputs.protect_inputs`) every command runs under.

Every path a user names is an input except what the command writes: each ``--out``
(a file or the folder outputs go into) and the store ``store upgrade`` rewrites in place.
A ``POWER=LOG`` pair (``backtest --train-runs``) names two inputs.  Declared here, once,
so a new command's inputs are protected without a line in its module.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ..outputs import protect_inputs

#: Argument names (argparse ``dest``) that name what a command writes, not what it reads.
OUTPUT_DESTS = frozenset({"out"})
#: ``(command, action)`` -> the arguments it reads and rewrites in place (a store).
READ_WRITE = {("store", "upgrade"): frozenset({"store"})}


def _paths(value) -> list[Path]:
    vals = value if isinstance(value, (list, tuple)) else [value]
    out: list[Path] = []
    for v in vals:
        if isinstance(v, Path):
            out.append(v)
        elif isinstance(v, str) and v and "\0" not in v:
            for part in v.split("="):       # POWER=LOG
                if part and os.path.lexists(part):
                    out.append(Path(part))
    return out


def command_inputs(args) -> list[Path]:
    """Every input path named on the command line (see the module docstring)."""
    rw = READ_WRITE.get((getattr(args, "command", None), getattr(args, "action", None)),
                        frozenset())
    found: list[Path] = []
    for dest, value in vars(args).items():
        if dest in OUTPUT_DESTS or dest in rw or dest == "func":
            continue
        found.extend(_paths(value))
    return found


@contextlib.contextmanager
def guarded(args) -> Iterator[None]:
    """Run the command with its inputs protected from every write in the process."""
    with protect_inputs(command_inputs(args)):
        yield
