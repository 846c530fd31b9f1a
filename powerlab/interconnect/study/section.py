"""What a section of the study package is, and the ordered registry of sections.

A section is one part of the package: what it computes from the forecast (or the measured
trace), its lines in the text summary, its part of the printable page and the files it
writes.  :func:`~powerlab.interconnect.studypackage.study_package` runs every registered
section in ``order`` on one :class:`Study`; the summary, the page and
:meth:`StudyPackage.write <powerlab.interconnect.studypackage.StudyPackage.write>` read
them back in the same order.  A section implements some of the hooks of
:class:`Section` and registers itself (:func:`register`) in its own module of
:mod:`powerlab.interconnect.study`, which imports every module it holds: adding a
section touches that one module (and its test).

The hooks, in the order they run:

``per_draw(trace, study)``
    A mapping of figures of one draw of the whole horizon (every Monte Carlo draw, or the
    measured trace); the columns of ``study.per_draw``.
``per_short_draw(trace, study)``
    Anything computed on one draw of the short window (a forecast at ``ShortWindow.tick_s``
    around the largest ramp, or the measured trace); kept in order in
    ``study.short.rows[name]``.
``build(study)``
    The section's tables into ``study.tables`` (read back as ``pkg.tables[name]`` and as
    attributes ``pkg.<name>``), its figure rows (:data:`FIGURE_COLUMNS`) into
    ``study.figures``, its notes into ``study.notes``.
``key_lines(pkg)``
    Lines of the text summary.
``html(pkg)``
    Its part of the page, under a numbered heading ``title`` ('' for none).
``files(pkg, folder)``
    ``{what: path}`` of the files it writes with ``folder`` (:class:`PackageFolder`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ...exceptions import PowerlabError
from ...outputs import atomic_write

__all__ = [
    "FIGURE_COLUMNS",
    "PackageFolder",
    "Section",
    "Study",
    "register",
    "sections",
    "unregister",
]

#: Columns of the package's figures (``figures.csv``, ``StudyPackage.summary_frame()``).
FIGURE_COLUMNS = ["figure", "value", "unit", "exceed_probability", "statistic",
                  "definition", "source"]


@dataclass
class Study:
    """The working state of one :func:`~powerlab.interconnect.studypackage.study_package`
    run, which the sections read and add to.

    Attributes
    ----------
    source : PowerSource
        What the package was built from (:mod:`powerlab.interconnect.sources`).
    spec : RequirementSpec
    boundary : str
        ``facility`` or ``it`` (the spec's).
    options : StudyOptions
        The package's options (:class:`~powerlab.interconnect.studypackage.StudyOptions`).
    seed : int
        Seed of the forecast (a forecast result's own).
    tick_s : float or None
        Tick of the whole-horizon forecast (None: the scenario's) [s].
    draws : int
        Draws over the whole horizon (1 for a measured trace) [-].
    label : str
        The source in words.
    trace : PowerTrace
        Draw 0 over the whole horizon, or the measured trace.
    per_draw : DataFrame
        The sections' ``per_draw`` figures, one row per draw.
    short : ShortRun
        The short window (:mod:`powerlab.interconnect.study.shortwindow`).
    tables, figures, notes, timings_s
        What the sections built: tables by name, figure-row frames, notes, seconds.
    """

    source: object
    spec: object
    boundary: str
    options: object
    seed: int
    tick_s: float | None
    draws: int = 0
    label: str = ""
    trace: object = None
    per_draw: pd.DataFrame | None = None
    short: object = None
    tables: dict = field(default_factory=dict)
    figures: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    timings_s: dict = field(default_factory=dict)


class PackageFolder:
    """The output folder of a package: files written atomically, CSV in one style."""

    def __init__(self, out):
        out = Path(out)
        if out.exists() and not out.is_dir():
            raise PowerlabError(f"{out} exists and is not a folder")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PowerlabError(f"cannot create {out}: {exc.strerror or exc}") from None
        self.root = out

    def path(self, name: str) -> Path:
        """The path of file ``name`` in the folder (for writers of their own)."""
        return self.root / name

    def text(self, name: str, s: str) -> Path:
        """Write text (UTF-8)."""
        return atomic_write(self.root / name, lambda tmp: Path(tmp).write_text(s, "utf-8"))

    def csv(self, name: str, df: pd.DataFrame, index: bool = False) -> Path:
        """Write a table as CSV (6 significant digits, ``\\n`` line ends)."""
        return self.text(name, df.to_csv(index=index, float_format="%.6g",
                                         lineterminator="\n"))


class Section:
    """One section of the study package (see the module docstring for the hooks).

    Attributes
    ----------
    name : str
        Unique name; the key of its tables and of its per-short-draw rows.
    order : float
        Place among the sections (ascending; built-in ones at 10, 20, ... 60).
    title : str
        Heading of its part of the page ('' for none).
    """

    name: str = ""
    order: float = 0.0
    title: str = ""

    def per_draw(self, trace, study: Study) -> Mapping[str, float]:
        """Figures of one draw over the whole horizon (default none)."""
        return {}

    def per_short_draw(self, trace, study: Study):
        """What the section keeps of one draw of the short window (default nothing)."""
        return None

    def build(self, study: Study) -> None:
        """Tables, figure rows and notes into ``study`` (default nothing)."""

    def key_lines(self, pkg) -> list[str]:
        """Lines of the text summary (default none)."""
        return []

    def html(self, pkg) -> str:
        """Its part of the page, without the heading (default none)."""
        return ""

    def files(self, pkg, folder: PackageFolder) -> dict:
        """``{what: path}`` of the files it writes (default none)."""
        return {}


_REGISTRY: dict[str, Section] = {}


def register(section: Section) -> Section:
    """Add ``section`` to the package (its ``name`` unused so far); returns it."""
    if not isinstance(section, Section) or not section.name:
        raise PowerlabError("a study-package section is a Section with a name")
    if section.name in _REGISTRY:
        raise PowerlabError(f"a study-package section named {section.name!r} is registered "
                            "already")
    _REGISTRY[section.name] = section
    return section


def unregister(name: str) -> Section:
    """Remove the section named ``name``; returns it."""
    try:
        return _REGISTRY.pop(name)
    except KeyError:
        raise PowerlabError(f"no study-package section named {name!r}") from None


def sections() -> list[Section]:
    """The registered sections, in ``order`` (then name)."""
    return sorted(_REGISTRY.values(), key=lambda s: (s.order, s.name))
