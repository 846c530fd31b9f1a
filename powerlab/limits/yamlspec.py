"""Safe reading of the YAML files planners write (scenarios, requirement specs).

:func:`load_yaml` parses a document with PyYAML's safe loader plus the checks a file
written by hand (or sent by someone else) needs before any number is trusted:

* **duplicate keys are refused**, naming both lines (YAML would silently keep the last:
  ``gpus: 8`` ... ``gpus: 800`` gives 800, a second ``jobs:`` replaces the first);
* **aliases and nesting are bounded** before the document is built: at most
  :data:`MAX_ALIASES` aliases, :data:`MAX_DEPTH` levels and :data:`MAX_NODES` nodes once
  aliases are expanded, so a "billion laughs" file fails in milliseconds and deep nesting
  never reaches Python's recursion limit;
* **numbers in exponent form are numbers** (YAML 1.1 reads ``1e9`` and ``4.9e6`` as
  strings);
* timestamps stay text, so that the schema code parses and checks their time zone.

:class:`Section` gives typed access to one mapping with the key path in every error
(``jobs[2].checkpoint.interval_s``) and refuses unknown keys with a close-match hint.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import stat
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from ..exceptions import ScenarioError
from ..telemetry.timeutil import to_utc

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_NODES", "Section", "load_yaml"]

#: Largest number of aliases (``*name``) a document may use.
MAX_ALIASES = 1_000
#: Deepest nesting of mappings and sequences.
MAX_DEPTH = 64
#: Largest number of nodes once every alias is expanded.
MAX_NODES = 200_000

_FLOAT_EXP = re.compile(r"^[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


class _Loader(yaml.SafeLoader):
    """Safe loader: timestamps left as text, exponent floats, duplicate keys refused."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # the base class reports unhashable keys
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} on lines {seen[key]} and {line}",
                        key_node.start_mark)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _first in "-+0123456789.":
    _Loader.yaml_implicit_resolvers.setdefault(_first, []).insert(
        0, ("tag:yaml.org,2002:float", _FLOAT_EXP))


def _expanded_size(node, memo: dict[int, int], limit: int) -> int:
    """Nodes of ``node`` with every alias expanded (memoised on node identity), stopping
    early once past ``limit``."""
    stack = [(node, False)]
    while stack:
        n, done = stack.pop()
        key = id(n)
        if key in memo:
            continue
        children = []
        if isinstance(n, yaml.SequenceNode):
            children = list(n.value)
        elif isinstance(n, yaml.MappingNode):
            children = [c for kv in n.value for c in kv]
        if not done:
            stack.append((n, True))
            stack.extend((c, False) for c in children if id(c) not in memo)
            continue
        total = 1 + sum(memo.get(id(c), 0) for c in children)
        memo[key] = min(total, limit + 1)
    return memo[id(node)]


def _error(exc: yaml.YAMLError, source: str | None, error_cls) -> Exception:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return error_cls(f"not valid YAML{where}: {problem}", path=source)


#: Largest YAML file read [bytes] (specs and scenarios are a few kB).
MAX_FILE_BYTES = 16 * 2**20

_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe\x00\x00", "UTF-32"),
         (b"\xfe\xff", "UTF-16"), (b"\xff\xfe", "UTF-16"))


def read_yaml_text(path, *, what: str, error_cls=ScenarioError) -> str:
    """A YAML file's text: a regular file (a FIFO or device would block or never end), at
    most :data:`MAX_FILE_BYTES`, UTF-8 (a UTF-8 byte-order mark is dropped; UTF-16/32 is
    refused by name, with the way out).

    Raises
    ------
    error_cls
        Naming the file and what is wrong with it, on one line.
    """
    p = Path(path)
    try:
        st = os.stat(p)
        if stat.S_ISDIR(st.st_mode):
            raise error_cls(f"cannot read {what}: is a folder", path=p)
        if not stat.S_ISREG(st.st_mode):
            raise error_cls(f"cannot read {what}: not a regular file (a FIFO, socket or "
                            "device)", path=p)
        if st.st_size > MAX_FILE_BYTES:
            raise error_cls(f"{what} is {st.st_size:,} bytes; at most {MAX_FILE_BYTES:,}",
                            path=p)
        with open(p, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise error_cls(f"cannot read {what}: {exc.strerror or exc}", path=p) from None
    if len(raw) > MAX_FILE_BYTES:
        raise error_cls(f"{what} is larger than {MAX_FILE_BYTES:,} bytes", path=p)
    for bom, enc in _BOMS:
        if raw.startswith(bom):
            raise error_cls(f"{what} is {enc} text; save it as UTF-8", path=p)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error_cls(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                        path=p) from None


def load_yaml(text: str, *, source: str | None = None, error_cls=ScenarioError) -> Any:
    """Parse YAML text safely (see the module docstring for what is checked).

    Parameters
    ----------
    text : str
        The document.
    source : str, optional
        File name for error messages.
    error_cls : type, default ScenarioError
        Exception raised (a :class:`~powerlab.exceptions.PowerlabError` taking ``key`` and
        ``path`` keywords).

    Returns
    -------
    object
        The parsed document (``None`` for an empty one).
    """
    # 1. events only (iterative, no recursion): bound depth and aliases before building
    depth = aliases = 0
    try:
        for ev in yaml.parse(text, Loader=_Loader):
            if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise error_cls(f"nesting deeper than {MAX_DEPTH} levels at line "
                                    f"{ev.start_mark.line + 1}", path=source)
            elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif isinstance(ev, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise error_cls(f"more than {MAX_ALIASES} aliases (line "
                                    f"{ev.start_mark.line + 1}); expand them in the file",
                                    path=source)
        # 2. the node graph: bound its size with aliases expanded
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            size = _expanded_size(node, {}, MAX_NODES)
            if size > MAX_NODES:
                raise error_cls(f"the document expands to more than {MAX_NODES:,} nodes "
                                "through its aliases (a 'billion laughs' file?)", path=source)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _error(exc, source, error_cls) from None
    except RecursionError:  # pragma: no cover - bounded above
        raise error_cls(f"nesting too deep (over {MAX_DEPTH} levels)", path=source) from None


class Section:
    """Typed access to one mapping of a YAML document, with key paths in errors.

    Parameters
    ----------
    data : mapping or None
        The mapping (``None`` reads as empty).
    path : str
        Key path of this mapping (``""`` for the document).
    source : str or None
        File name for error messages.
    error_cls : type, default ScenarioError
        Exception raised, taking ``key`` and ``path`` keywords.
    """

    def __init__(self, data: Any, path: str, source: str | None, error_cls=ScenarioError):
        self.path = path
        self.source = source
        self.error_cls = error_cls
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise error_cls(f"expected a mapping, got {type(data).__name__}",
                            key=path or "<document>", path=source)
        self.data = dict(data)
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def error(self, name: str, msg: str) -> Exception:
        return self.error_cls(msg, key=self.key(name), path=self.source)

    def has(self, name: str) -> bool:
        """Whether ``name`` holds a value.  An empty key (``cooling:`` with nothing after
        it) reads as absent: it is marked as seen, so :meth:`finish` does not call it
        unknown."""
        if name in self.data and self.data[name] is None:
            self.used.add(name)
        return self.data.get(name) is not None

    def raw(self, name: str, default=None):
        self.used.add(name)
        return self.data.get(name, default)

    def renamed(self, old: str, new: str) -> None:
        """Read the old key ``old`` as ``new`` for one release, with a
        :class:`DeprecationWarning` naming the new key; both present is an error."""
        if old not in self.data:
            return
        if new in self.data:
            raise self.error(old, f"is the old name of {new!r}; give {new!r} only")
        warnings.warn(f"{self.source or 'spec'}, key {self.key(old)!r} is renamed "
                      f"{new!r}; the old name will be removed in the next release",
                      DeprecationWarning, stacklevel=4)
        self.data[new] = self.data.pop(old)

    def number(self, name: str, default: float | None = None, *, lo: float | None = 0.0,
               hi: float | None = None, lo_open: bool = False, required: bool = False
               ) -> float:
        self.used.add(name)
        val = self.data.get(name)
        if val is None:
            if required or default is None:
                raise self.error(name, "is required (a number)")
            return float(default)
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            raise self.error(name, f"expected a number, got {val!r}")
        try:
            val = float(val)
        except OverflowError:   # an integer of hundreds of digits
            raise self.error(name, f"expected a finite number, got an integer of "
                             f"{len(str(abs(val)))} digits") from None
        if not math.isfinite(val):
            raise self.error(name, f"expected a finite number, got {val!r}")
        if lo is not None and (val < lo or (lo_open and val == lo)):
            raise self.error(name, f"must be {'>' if lo_open else '>='} {lo:g}, got {val:g}")
        if hi is not None and val > hi:
            raise self.error(name, f"must be <= {hi:g}, got {val:g}")
        return val

    def integer(self, name: str, default: int | None = None, *, lo: int = 1,
                hi: int | None = None) -> int:
        self.used.add(name)
        val = self.data.get(name)
        if val is None:
            if default is None:
                raise self.error(name, "is required (an integer)")
            return int(default)
        if isinstance(val, float) and val.is_integer() and abs(val) < 2**53:
            val = int(val)   # 1e4 written for 10000
        if isinstance(val, bool) or not isinstance(val, int):
            raise self.error(name, f"expected an integer, got {val!r}")
        if val < lo:
            raise self.error(name, f"must be >= {lo}, got {val}")
        if hi is not None and val > hi:
            raise self.error(name, f"must be <= {hi:,}, got {val:,}")
        return int(val)

    def string(self, name: str, default: str | None = None) -> str:
        self.used.add(name)
        val = self.data.get(name)
        if val is None:
            if default is None:
                raise self.error(name, "is required (a string)")
            return default
        if not isinstance(val, str):
            raise self.error(name, f"expected a string, got {val!r}")
        return val

    def timestamp(self, name: str, required: bool = True) -> pd.Timestamp | None:
        self.used.add(name)
        val = self.data.get(name)
        if val is None:
            if required:
                raise self.error(name, "is required (ISO 8601 UTC time, e.g. "
                                 "'2024-05-17T15:00:00Z')")
            return None
        # YAML reads 2024-05-17T15:00:00Z as a datetime: its str() is ISO 8601 again
        ts = to_utc(str(val), what="time", error=lambda msg: self.error(name, msg))
        return ts.as_unit("ns")

    def section(self, name: str) -> Section:
        self.used.add(name)
        return Section(self.data.get(name), self.key(name), self.source, self.error_cls)

    def finish(self) -> None:
        extra = [k for k in self.data if k not in self.used]
        if extra:
            k = extra[0]
            close = difflib.get_close_matches(str(k), sorted(self.used), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else (
                f"; known keys: {', '.join(sorted(self.used))}")
            raise self.error(str(k), f"unknown key{hint}")
