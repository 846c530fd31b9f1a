"""Readers that recognise their own files: the registry and the one dispatcher.

Each reader module defines one small entrypoint per format (xarray's
``backends/common.py`` ``BackendEntrypoint`` is the model): a :class:`ReaderEntrypoint`
with the format's ``name``, what it gives (``kind``), ``guess_can_open(path,
head_bytes)`` and ``open(path, **kw)``, registered with :func:`register_reader`.
:func:`sniff_format` and :func:`read_any` ask the registered readers in one stated
order (xarray's ``plugins.guess_engine``): by ``priority``, then in the order they
registered; the first whose ``guess_can_open`` says yes reads the file.  The built-in
readers are asked in this order, specific markers first, broad header shapes last:

========  ============  ===================================================================
priority  name          recognises
========  ============  ===================================================================
10        mlperf-power  MLLOG lines with ``power_reading`` events; a folder of
                        ``node_N.txt`` logs
20        mllog         other MLLOG lines (a training result log)
30        kernel-xid    ``NVRM: Xid`` lines
40        dcgm-dmon     a ``#Entity`` header among the first 50 lines
50        dcgm-xid      ``DCGM_FI_*`` lines that are all ``DCGM_FI_DEV_XID_ERRORS``
60        dcgm-prom     other ``DCGM_FI_*`` text
70        weather       a ``Time,... Temp ...`` header or ``YYYY-MM-DD ... | Temp:`` lines;
                        a folder holding such a file
80        nvidia-smi    a first line of nvidia-smi field names, or one of its rows
========  ============  ===================================================================

A reader registered without a priority is asked after these (100).  A folder is read by
the first reader that recognises the folder itself (``guess_can_open_folder``), else by
the reader of the first of its files (in name order, ``LICENSE`` left out) whose reader
reads whole folders of its files (``folder_of_files``).

A module of this package that registers a reader needs no import elsewhere:
:func:`readers` imports every public module of ``powerlab.iotools`` once (xarray finds
its backends through entry points), so adding a reader touches that one module and its
test.

References
----------
.. [1] xarray, ``xarray/backends/common.py``, class ``BackendEntrypoint``
   (``guess_can_open``, ``open_dataset``), and ``xarray/backends/plugins.py``,
   ``guess_engine``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from .._options import choice
from ..exceptions import ParseError
from ._common import read_bytes

__all__ = [
    "FORMATS",
    "HEAD_BYTES",
    "ReaderEntrypoint",
    "formats",
    "get_reader",
    "guess_reader",
    "head_lines",
    "head_text",
    "read_any",
    "readers",
    "register_reader",
    "sniff_format",
    "unregister_reader",
]

#: Bytes of a file's start (decompressed) that ``guess_can_open`` is shown.
HEAD_BYTES = 65536
#: Priority of a reader that states none: asked after the built-in ones.
DEFAULT_PRIORITY = 100
#: What a reader gives: canonical telemetry (``powerlab import`` writes it to the store's
#: samples), GPU error events (to the store's events), or something else (None).
KINDS = ("telemetry", "events", None)
#: The order 0.2 listed its formats in (``FORMATS``, messages); readers registered
#: later follow in the order they registered.
_LISTED_FIRST = ("nvidia-smi", "dcgm-dmon", "dcgm-prom", "mlperf-power", "mllog", "weather",
                 "kernel-xid", "dcgm-xid")


class ReaderEntrypoint:
    """One format a reader recognises and reads (xarray ``BackendEntrypoint``).

    A subclass sets the class attributes and implements :meth:`guess_can_open` (and
    :meth:`guess_can_open_folder` where a folder is one source) and :meth:`open`; an
    instance is registered with :func:`register_reader` (which can decorate the class).

    Attributes
    ----------
    name : str
        The format's name (``read_any(format=name)``, ``powerlab import --format``).
    kind : {"telemetry", "events", None}
        What :meth:`open` returns: canonical telemetry, GPU error events (both accepted
        by ``powerlab import``), or something else.
    description : str
        How messages name the format (``"nvidia-smi CSV"``).
    priority : int
        Place in the order the dispatcher asks the readers (lower: earlier).
    folder_of_files : bool
        Whether a folder holding a file this reader recognises is read whole by it.
    """

    name: str = ""
    kind: str | None = None
    description: str = ""
    priority: int = DEFAULT_PRIORITY
    folder_of_files: bool = False

    def guess_can_open(self, path: Path, head_bytes: bytes) -> bool:
        """Whether this reader reads the file ``path``, from its first
        :data:`HEAD_BYTES` bytes (decompressed, checked as UTF-8)."""
        return False

    def guess_can_open_folder(self, path: Path) -> bool:
        """Whether this reader reads the folder ``path`` as one source."""
        return False

    def open(self, path, **kw):
        """Read ``path``; ``kw`` holds only options this method's signature names."""
        raise NotImplementedError(f"reader {self.name!r} does not implement open()")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


_READERS: dict[str, ReaderEntrypoint] = {}
_discovered = False


def register_reader(entrypoint):
    """Register a reader: a :class:`ReaderEntrypoint` instance, or a subclass (then
    instantiated without arguments, so that this works as a class decorator).

    Returns what it was given.  Raises ``ValueError`` for a name already taken by
    another reader, a missing name or an unknown kind.
    """
    ep = entrypoint() if isinstance(entrypoint, type) else entrypoint
    if not isinstance(ep, ReaderEntrypoint) or not ep.name:
        raise ValueError(f"expected a ReaderEntrypoint with a name, got {ep!r}")
    if ep.kind not in KINDS:
        raise ValueError(f"reader {ep.name!r}: kind must be one of {list(KINDS)}, "
                         f"got {ep.kind!r}")
    old = _READERS.get(ep.name)
    if old is not None and type(old) is not type(ep):
        raise ValueError(f"a reader named {ep.name!r} is registered already ({old!r})")
    _READERS[ep.name] = ep
    return entrypoint


def unregister_reader(name: str) -> ReaderEntrypoint:
    """Remove the reader ``name`` from the registry and return it."""
    return _READERS.pop(name)


def _discover() -> None:
    """Import every public module of this package once, so that a reader module
    registers its entrypoints without being imported anywhere else."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = sys.modules[__package__]
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__package__}.{info.name}")


def _listing_key(item: tuple[int, str]) -> tuple[int, int]:
    i, name = item
    return (_LISTED_FIRST.index(name), 0) if name in _LISTED_FIRST else (len(_LISTED_FIRST), i)


def _listed() -> list[ReaderEntrypoint]:
    _discover()
    names = [n for _, n in sorted(enumerate(_READERS), key=_listing_key)]
    return [_READERS[n] for n in names]


def readers() -> list[ReaderEntrypoint]:
    """The registered readers in the order the dispatcher asks them."""
    return sorted(_listed(), key=lambda ep: ep.priority)


def formats(*kinds: str | None) -> tuple[str, ...]:
    """Names of the registered readers (those of the given kinds: ``"telemetry"``,
    ``"events"``, None), in the order messages list them."""
    return tuple(ep.name for ep in _listed() if not kinds or ep.kind in kinds)


class _Formats(Mapping):
    """A live read-only view: format name -> the function that reads it."""

    def __getitem__(self, name: str):
        _discover()
        return _READERS[name].open

    def __iter__(self) -> Iterator[str]:
        return iter(formats())

    def __len__(self) -> int:
        return len(formats())

    def __repr__(self) -> str:
        return repr(dict(self))


#: Formats :func:`read_any` knows, with their readers (every registered one).
FORMATS: Mapping = _Formats()


@functools.lru_cache(maxsize=4)
def head_text(head_bytes: bytes) -> str:
    """The head of a file as text (a character cut at the end is replaced)."""
    return head_bytes.decode("utf-8", errors="replace")


@functools.lru_cache(maxsize=4)
def head_lines(head_bytes: bytes) -> tuple[str, ...]:
    """The non-blank lines of the head of a file."""
    return tuple(ln for ln in head_text(head_bytes).splitlines() if ln.strip())


def _guess_file(p: Path) -> ReaderEntrypoint | None:
    data, _ = read_bytes(p)
    head = data[:HEAD_BYTES]
    return next((ep for ep in readers() if ep.guess_can_open(p, head)), None)


def _guess_folder(p: Path) -> ReaderEntrypoint | None:
    ep = next((ep for ep in readers() if ep.guess_can_open_folder(p)), None)
    if ep is not None:
        return ep
    for f in sorted(p.iterdir()):
        if f.is_file() and f.name != "LICENSE":
            try:
                ep = _guess_file(f)
            except ParseError:
                continue
            if ep is not None and ep.folder_of_files:
                return ep
    return None


def guess_reader(path) -> ReaderEntrypoint:
    """The reader of a file or folder, recognised from its content (see the module
    docstring for the order); a :class:`~powerlab.exceptions.ParseError` when none
    recognises it."""
    p = Path(path)
    if p.is_dir():
        ep = _guess_folder(p)
        if ep is None:
            raise ParseError("no readable telemetry files in this directory", path=p)
        return ep
    ep = _guess_file(p)
    if ep is None:
        names = list(dict.fromkeys(e.description or e.name for e in _listed()))
        expected = " or ".join(filter(None, [", ".join(names[:-1]), *names[-1:]]))
        raise ParseError(f"cannot tell the format from the content (expected {expected})",
                         path=p)
    return ep


def sniff_format(path) -> str:
    """Name the format of a file or directory from its content.

    Returns one of :data:`FORMATS`; raises :class:`~powerlab.exceptions.ParseError` when
    nothing fits.
    """
    return guess_reader(path).name


def get_reader(name: str, path=None) -> ReaderEntrypoint:
    """The reader registered as ``name``; a ParseError naming ``path`` and the known
    formats otherwise."""
    _discover()
    if name not in _READERS:
        choice(name, "format", [*sorted(_READERS), "auto"],
               error=lambda m: ParseError(m, path=path))
    return _READERS[name]


def _options(ep: ReaderEntrypoint, kw: dict) -> dict:
    """The options of ``kw`` that ``ep.open`` takes, None ones left out."""
    params = inspect.signature(ep.open).parameters
    return {k: v for k, v in kw.items() if k in params and v is not None}


def read_any(path, *, format: str = "auto", **kw):
    """Read ``path`` with the reader its content calls for.

    Parameters
    ----------
    path : str or path-like
        File or directory.
    format : str, default "auto"
        ``"auto"`` (sniff) or a key of :data:`FORMATS`.
    **kw
        Passed to the reader (e.g. ``tz=``, ``host=``, ``n_gpus=``); options a reader
        does not take are dropped.

    Returns
    -------
    pandas.DataFrame or MLLogResult
        What the chosen reader returns.
    """
    ep = guess_reader(path) if format == "auto" else get_reader(format, path)
    return ep.open(path, **_options(ep, kw))
