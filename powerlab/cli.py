"""The ``powerlab`` command line.

Each subcommand lives in its own module under :mod:`powerlab._cli` and exposes
``register(subparsers)``; the module is imported only to build the parser, so heavy
dependencies are imported inside the command's handler.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .exceptions import PowerlabError

#: Subcommand modules under powerlab._cli, in the order shown by --help.
COMMAND_MODULES = [
    "summary",
    "collect",
    "import_",
    "forecast",
    "calibrate",
    "scale",
    "backtest",
    "demo",
    "aggregate",
    "comply",
    "export_grid",
    "store",
    "size_mitigation",
    "flex",
    "study_package",
    "reliability",
]


class _Parser(argparse.ArgumentParser):
    """argparse with usage mistakes reported on one line (exit code 2).

    The default prints the whole usage block before the error; a user mistake in powerlab
    ends with exactly one line on stderr, which names the ``--help`` that shows the usage.
    Sub-command parsers inherit this class.
    """

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="powerlab",
        description="Power and thermal analytics of GPU clusters.",
    )
    parser.add_argument("--version", action="version", version=f"powerlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        mod = importlib.import_module(f"powerlab._cli.{name}")
        mod.register(sub)
    from ._cli._bounds import apply

    apply(parser)                 # every number typed: finite, in its declared range
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # a usage error (one line already printed) is exit code 2,
        if exc.code == 2:       # returned like every other error; --help still exits
            return 2
        raise
    import warnings

    from .exceptions import DataQualityWarning

    def _show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, DataQualityWarning):  # one line, in the command's voice
            print(f"powerlab {args.command}: warning: {message}", file=sys.stderr)
        else:
            _default_show(message, category, filename, lineno, file, line)

    _default_show = warnings.showwarning
    warnings.showwarning = _show
    from ._cli._args import special_paths
    from ._cli._guard import guarded

    try:
        bad = special_paths(args)
        if bad:
            raise PowerlabError(bad)
        with guarded(args):                 # no write lands on an input of this command
            rc = args.func(args)
    except PowerlabError as exc:
        msg = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        print(f"powerlab {args.command}: error: {msg}", file=sys.stderr)  # one line
        return 2
    except OSError as exc:   # the disk, not the input: full, read-only, permissions
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"powerlab {args.command}: error: {where}{exc.strerror or exc}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"powerlab {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = _default_show
    return 0 if rc is None else int(rc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
