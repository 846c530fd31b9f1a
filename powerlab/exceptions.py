"""The powerlab exception family.

Every error that powerlab raises on purpose derives from :class:`PowerlabError`, so a
notebook or a script can catch all of them at once.  Each error says *where* (file, line,
column, key or rows) and *what was expected*.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "AnalysisError",
    "DataQualityWarning",
    "GPULostError",
    "Interrupted",
    "NVMLError",
    "NVMLUnavailableError",
    "OptionError",
    "ParseError",
    "PowerlabDeprecationWarning",
    "PowerlabError",
    "ScenarioError",
    "SchemaError",
    "StoreError",
    "Violation",
]


class PowerlabError(Exception):
    """Base class of every error raised by powerlab."""


def _fmt_rows(rows: Sequence, limit: int = 8) -> str:
    rows = list(rows)
    shown = ", ".join(str(r) for r in rows[:limit])
    more = f", ... ({len(rows)} rows in all)" if len(rows) > limit else ""
    return f"[{shown}{more}]"


@dataclass(frozen=True)
class Violation:
    """One problem found by :func:`powerlab.telemetry.schema.validate`.

    Attributes
    ----------
    column : str
        The column concerned (or ``"<frame>"`` for frame-level problems).
    message : str
        What is wrong and what was expected.
    rows : tuple
        Index labels of the offending rows (empty when the whole column is at fault).
    """

    column: str
    message: str
    rows: tuple = field(default_factory=tuple)

    def __str__(self) -> str:
        where = f" rows {_fmt_rows(self.rows)}" if self.rows else ""
        return f"column '{self.column}'{where}: {self.message}"


class SchemaError(PowerlabError, ValueError):
    """A telemetry frame breaks the canonical schema.

    All violations are collected and reported at once in :attr:`violations`.
    """

    def __init__(self, violations: Sequence[Violation], source: str | None = None):
        self.violations = list(violations)
        self.source = source
        head = f"{len(self.violations)} schema violation(s)"
        if source:
            head += f" in {source}"
        body = "\n".join(f"  - {v}" for v in self.violations)
        super().__init__(f"{head}:\n{body}")

    @property
    def columns(self) -> list[str]:
        """Columns named by the violations, in order of first appearance."""
        return list(dict.fromkeys(v.column for v in self.violations))


class ParseError(PowerlabError, ValueError):
    """A source file cannot be read as the expected format.

    Parameters
    ----------
    message : str
        What was found and what was expected.
    path : str, optional
        The file.
    line : int, optional
        1-based line number in the file.
    column : str, optional
        The column or field concerned.
    """

    def __init__(self, message: str, *, path=None, line: int | None = None,
                 column: str | None = None):
        self.path = None if path is None else str(path)
        self.line = line
        self.column = column
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column '{column}'")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class ScenarioError(PowerlabError, ValueError):
    """A scenario (forecast) specification is invalid; names the offending key."""

    def __init__(self, message: str, *, key: str | None = None, path=None):
        self.key = key
        self.path = None if path is None else str(path)
        where = []
        if self.path:
            where.append(self.path)
        if key:
            where.append(f"key '{key}'")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class OptionError(PowerlabError, ValueError):
    """An argument that takes one of a fixed set of values got another one; the message
    names the argument and the allowed values (:func:`powerlab._options.choice`)."""


class StoreError(PowerlabError, OSError):
    """The Parquet telemetry store cannot be written or read."""


class AnalysisError(PowerlabError, ValueError):
    """An analysis cannot be done on the data given (too short, too few points, no
    variation); the message says what was found and what is needed."""


class NVMLError(PowerlabError, RuntimeError):
    """An NVML call failed (wraps ``pynvml.NVMLError``)."""


class NVMLUnavailableError(NVMLError):
    """The NVML library is missing or no GPU can be used."""


class GPULostError(NVMLError):
    """A GPU fell off the bus or stopped answering (``NVML_ERROR_GPU_IS_LOST``)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a long search; :attr:`partial` holds what was done so far.

    A :class:`KeyboardInterrupt` (so a loop of searches stops, as Ctrl-C should), raised
    by long searches such as :func:`powerlab.interconnect.sizing.size_mitigation` with a
    results object of the work finished before the interrupt (its ``interrupted`` is
    True); ``powerlab`` commands write and print it and exit with code 130.
    """

    def __init__(self, message: str, partial=None):
        super().__init__(message)
        self.partial = partial


class DataQualityWarning(UserWarning):
    """Data were skipped or repaired while reading; the message says how many and why."""


class PowerlabDeprecationWarning(FutureWarning):
    """A name or import path that still works but will be removed in a named release
    (:mod:`powerlab._deprecation`).  A :class:`FutureWarning`, so that it shows in a
    notebook and a script by default (pvlib's ``pvlibDeprecationWarning`` likewise
    derives from a warning shown by default)."""
