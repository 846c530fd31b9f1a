"""argparse types shared by the subcommands: every number and name a user types has a
bound, checked while the command line is parsed (exit code 2, one line)."""

from __future__ import annotations

import argparse

#: Largest seed (numpy's SeedSequence takes any integer >= 0; 2**63 - 1 keeps it an int64).
MAX_SEED = 2**63 - 1
#: Longest host name (RFC 1035: 253 characters for a full domain name).
MAX_HOST_NAME = 253


def seed(text: str) -> int:
    """A random seed: a whole number from 0 to 2**63 - 1."""
    try:
        val = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
    if not 0 <= val <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text[:40]} is outside 0 to 2**63 - 1")
    return val


def host(text: str) -> str:
    """A host name: 1 to 253 printable characters, no control characters."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty")
    if len(text) > MAX_HOST_NAME:
        raise argparse.ArgumentTypeError(f"is {len(text)} characters; at most "
                                         f"{MAX_HOST_NAME}")
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"{text[:40]!r} holds control characters")
    return text


def add_seed(p) -> None:
    p.add_argument("--seed", type=seed, default=0, help="random seed, 0 to 2**63 - 1 "
                   "(default 0)")


def special_paths(args) -> str | None:
    """The first path argument that exists and is neither a regular file nor a folder (a
    FIFO would block the command for ever, a device never ends), as an error message."""
    import os
    import stat
    from pathlib import Path

    for name, val in sorted(vars(args).items()):
        for v in (val if isinstance(val, list) else [val]):
            if not isinstance(v, Path):
                continue
            try:
                mode = os.stat(v).st_mode
            except (OSError, ValueError):
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return (f"{v} is not a regular file or folder (a FIFO, socket or device); "
                        "give a file")
    return None


class _RenamedFlag(argparse.Action):
    """An old flag kept as a hidden alias of its new name for one release."""

    def __init__(self, option_strings, dest, new: str = "", **kw):
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        import sys
        import warnings

        msg = (f"{option_string} is renamed {self.new}; the old flag will be removed in "
               "the next release")
        print(f"{parser.prog}: warning: {msg}", file=sys.stderr)   # one line, always shown
        warnings.warn(msg, DeprecationWarning, stacklevel=2)
        setattr(namespace, self.dest, values)


def add_renamed_flag(p, new: str, old: str, **kw) -> None:
    """Add ``new`` (``--boundary``) and keep ``old`` (``--scope``) as a hidden alias that
    warns (:class:`DeprecationWarning`) and sets the same value."""
    dest = new.lstrip("-").replace("-", "_")
    p.add_argument(new, dest=dest, **kw)
    alias = {k: v for k, v in kw.items() if k in ("choices", "type")}
    p.add_argument(old, dest=dest, action=_RenamedFlag, new=new, help=argparse.SUPPRESS,
                   default=argparse.SUPPRESS, **alias)
