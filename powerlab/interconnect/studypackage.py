"""The large-load study package: what an interconnection study asks of a large load, from
a scenario's forecast (every Monte Carlo draw), a forecast already run, or measured
telemetry.

:func:`study_package` returns a :class:`StudyPackage` (``summary()``,
``summary_frame()``, ``write(dir)``) built by the sections of
:mod:`powerlab.interconnect.study`, in their order:

- **figures** (:mod:`~powerlab.interconnect.study.figures`): peak power, ramps over 1-s
  and 1-min means, the largest step, each as the value exceeded with a stated
  probability over the draws (``summary_frame()``: one row per figure and probability,
  with its definition and source);
- **energisation schedule** (:mod:`~powerlab.interconnect.study.energisation`) within
  the spec's ramp and step limits;
- **oscillation spectrum** (:mod:`~powerlab.interconnect.study.spectrum`) of a short
  window forecast at a tick that resolves 30 Hz (0.01 s by default,
  :mod:`~powerlab.interconnect.study.shortwindow`), the narrow-band lines in it and those
  near the frequencies at which utilities have observed data-center oscillations;
- **PMU view** (:mod:`~powerlab.interconnect.study.pmuview`): the short window as IEEE
  C37.118.1 P- and M-class reference PMUs report it, next to the raw values;
- **ride-through table** (:mod:`~powerlab.interconnect.study.ridethrough`): residual
  voltage x sag duration -> load lost during and just after the sag and the recovery
  time (:func:`~powerlab.interconnect.ridethrough.ride_through_table`);
- **playback files** (:mod:`~powerlab.interconnect.study.playback`): PSCAD,
  PowerFactory and COMTRADE, and a printable HTML page
  (:mod:`~powerlab.interconnect.studypage`).

The steps of :func:`study_package`: resolve the source
(:func:`~powerlab.interconnect.sources.resolve`), the whole horizon (every draw, each
section's ``per_draw`` figures), the short window (each section's ``per_short_draw``),
then each section's ``build``.  Adding a section is one module in
:mod:`powerlab.interconnect.study` (see :mod:`powerlab.interconnect.study.section`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pandas as pd

from .._lazy import lazy_exports
from .._options import Options, renamed_attribute, renamed_keywords
from .._summary import Results
from ..exceptions import PowerlabError
from ..limits.requirements import RequirementSpec, read_requirements
from .pmu import PmuSettings
from .powertrace import PowerTrace
from .sources import MeasuredOptions, PowerSource, resolve
from .study import Study, sections
from .study.figures import ramp_envelope
from .study.ridethrough import RideThrough
from .study.shortwindow import ShortWindow, short_window
from .studypage import StudySummary, write_package
from .voltagechange import GridStrength

__all__ = [
    "MeasuredOptions",
    "PmuSettings",
    "RideThrough",
    "ShortWindow",
    "StudyOptions",
    "StudyPackage",
    "study_package",
]


@dataclass(frozen=True)
class StudyOptions(Options):
    """What :func:`study_package` builds, beyond the draws: the sections' options.

    Attributes
    ----------
    short : ShortWindow
        Tick, length and start of the short window for the spectrum and the PMU view
        (default ``ShortWindow()``: 300 s at 0.01 s).
    ride_through : RideThrough or bool, default True
        Build the ride-through table (scenarios only) with these draws and sag time;
        True: ``RideThrough()``; False: no table.
    pmu : PmuSettings
        PMU nominal frequency and reporting rate (default 60 Hz, one frame a cycle).
    probabilities : tuple of float, default (0.5, 0.1, 0.05)
        Exceedance probabilities to report [-].
    max_block_w : float, optional
        Largest block of the energisation schedule [W].
    grid : GridStrength, optional
        Short-circuit power, X/R and power factor at the point of interconnection for
        the voltage-change and flicker section (default ``GridStrength()``: 1000 MVA,
        X/R 10, power factor 0.98, stated in the section).
    """

    short: ShortWindow | None = None
    ride_through: RideThrough | bool = True
    pmu: PmuSettings | None = None
    probabilities: tuple = (0.5, 0.1, 0.05)
    max_block_w: float | None = None
    grid: GridStrength | None = None

    def __post_init__(self):
        object.__setattr__(self, "short", self.short or ShortWindow())
        object.__setattr__(self, "pmu", self.pmu or PmuSettings())
        for p in self.probabilities:
            if not 0 < p < 1:
                raise PowerlabError(f"exceedance probabilities must lie in (0, 1), got {p!r}")


@dataclass(repr=False)
class StudyPackage(Results):
    """Results of :func:`study_package` (read :meth:`summary`).

    Attributes
    ----------
    source : str
        What the package was built from, in words.
    spec : RequirementSpec
    boundary : str
    draws, seed : int
    per_draw : DataFrame
        The sections' figures of every draw.
    figures : DataFrame
        Every figure (:meth:`summary_frame`).
    short_trace : PowerTrace
        Draw 0 over the short window.
    trace : PowerTrace
        Draw 0 over the whole horizon (or the measured trace).
    tables : dict
        The sections' tables by name, each also an attribute: ``energisation``,
        ``spectrum``, ``lines``, ``pmu``, ``pmu_figures``, ``pmu_gains``,
        ``ride_through`` (None when not built), and those of any added section.
    notes : list of str
    timings_s : dict
        Seconds per step [s].
    """

    source: str
    spec: RequirementSpec
    boundary: str
    draws: int
    seed: int
    per_draw: pd.DataFrame
    figures: pd.DataFrame
    short_trace: PowerTrace
    trace: PowerTrace
    tables: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    timings_s: dict = field(default_factory=dict)
    scope = renamed_attribute("boundary")     # the old name, for one release

    def __getattr__(self, name: str):
        tables = self.__dict__.get("tables") or {}
        if name in tables:
            return tables[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _repr_line(self) -> str:
        rt = self.tables.get("ride_through")
        return (f"<StudyPackage of {self.source}: {len(self.figures)} figures, "
                f"{len(self.tables.get('lines', ()))} spectrum lines, ride-through "
                f"{'table' if rt is not None else 'not done'}>")

    def summary_frame(self) -> pd.DataFrame:
        """Every figure with its unit, exceedance probability, definition and source."""
        return self.figures.copy()

    @property
    def ramp_envelope(self) -> pd.DataFrame:
        """The ramp, step and peak figures as a table: one row per figure, one column
        per exceedance probability (``exceed_0.5``, ..., ``largest``)."""
        return ramp_envelope(self.figures)

    def summary(self):
        """Text summary (``str()``) that renders as HTML in a notebook."""
        return StudySummary(self)

    def write(self, out) -> dict:
        """Write the package into folder ``out``; returns name -> path."""
        return write_package(self, out)


StudyPackage.__init__ = renamed_keywords(scope="boundary")(StudyPackage.__init__)


def study_package(source, spec, options: StudyOptions | None = None, *, draws: int = 20,
                  seed: int = 0, tick_s: float | None = None,
                  measured: MeasuredOptions | None = None, **option_kw) -> StudyPackage:
    """Build the large-load study package.

    The steps: the source (:func:`~powerlab.interconnect.sources.resolve`), the figures
    of every draw over the whole horizon (:func:`_horizon`), the short window
    (:func:`~powerlab.interconnect.study.shortwindow.short_window`), then each section of
    :mod:`powerlab.interconnect.study` in order (:func:`_build`).

    Parameters
    ----------
    source : Scenario, ForecastResult, PowerTrace, DataFrame or path-like
        A scenario (forecast, every draw), a forecast already run (its first ``draws``
        draws; the short window and the ride-through table forecast its scenario again
        with its seed), one trace, canonical telemetry, a store folder, a canonical
        Parquet file or a scenario YAML (measured: one "draw").
    spec : RequirementSpec or path-like
        The requirement spec (its boundary, and its ramp and step limits for the
        energisation schedule).
    options : StudyOptions, optional
        The sections' options (:class:`StudyOptions`); its fields as keywords
        (``short``, ``ride_through``, ``pmu``, ``probabilities``, ``max_block_w``)
        replace those of ``options``.
    draws, seed : int
        Monte Carlo draws and seed of the forecast [-].
    tick_s : float, optional
        Tick of the full-horizon forecast (default the scenario's; measured telemetry
        keeps its own grid) [s].
    measured : MeasuredOptions, optional
        Measured telemetry only: PUE, base load and time range (see
        :func:`~powerlab.interconnect.powertrace.trace_from_telemetry`).
    **option_kw
        Fields of :class:`StudyOptions`.

    Returns
    -------
    StudyPackage
    """
    spec = spec if isinstance(spec, RequirementSpec) else read_requirements(spec)
    if draws < 1:
        raise PowerlabError(f"draws must be >= 1, got {draws}")
    opts = StudyOptions.from_kwargs(options, **option_kw)
    study = Study(resolve(source), spec, spec.boundary, opts, seed, tick_s)
    secs = sections()
    _timed(study, "forecast_and_metrics", _horizon, study, secs, draws,
           measured or MeasuredOptions())
    _timed(study, "short_window", short_window, study, secs)
    _build(study, secs)
    return StudyPackage(source=study.label, spec=spec, boundary=study.boundary,
                        draws=study.draws, seed=study.seed, per_draw=study.per_draw,
                        figures=pd.concat(study.figures, ignore_index=True),
                        short_trace=study.short.trace, trace=study.trace,
                        tables=study.tables, notes=study.notes, timings_s=study.timings_s)


def _timed(study: Study, name: str, step, *args):
    """Run ``step(*args)``, its seconds into ``study.timings_s[name]``."""
    t0 = time.perf_counter()
    out = step(*args)
    study.timings_s[name] = time.perf_counter() - t0
    return out


def _horizon(study: Study, secs: list, draws: int, measured: MeasuredOptions) -> None:
    """Every draw over the whole horizon (the measured trace: one), each section's
    ``per_draw`` figures of it: ``study.per_draw``, ``trace``, ``draws``, ``label``."""
    src: PowerSource = study.source

    def fn(dp):
        row: dict = {}
        for s in secs:
            row.update(s.per_draw(dp, study))
        return row

    run = src.run(fn, draws=draws, seed=study.seed,
                  tick_s=study.tick_s if src.is_forecast else None, measured=measured)
    study.per_draw, study.trace, study.draws = run.values, run.first, run.draws
    if src.kind == "forecast":       # its own tick and seed, for the sections too
        study.tick_s, study.seed = float(run.first.tick_s), run.seed
    if src.is_forecast:
        study.label = (f"scenario {src.scenario.name!r} ({run.draws} draws, seed "
                       f"{study.seed})")
    else:
        study.label = f"measured: {run.first.description}"
        study.notes.append("Measured telemetry is one trace: exceedance probabilities "
                           "over draws do not apply; each figure is the trace's value.")


def _build(study: Study, secs: list) -> None:
    """Each section's tables, figure rows and notes, in order (timed by name)."""
    for s in secs:
        _timed(study, s.name, s.build, study)


# names that moved to the modules of their concept (issue 31); the old path warns
_, __getattr__, _ = lazy_exports(__name__, {}, moved={
    "powerlab.interconnect.ridethrough": ("ITIC_RIDE_THROUGH", "SagAssumptions",
                                          "itic_rides_through", "ride_through_table"),
    "powerlab.interconnect.study.spectrum": ("OBSERVED_LINES_HZ", "spectrum_lines"),
    "powerlab.interconnect.study.figures": ("PER_DRAW_COLUMNS",),
})
