"""One resolver for what the interconnection checks are given (issue 31, item 4).

A check of a site's power takes it from one of five kinds of source; each kind has one
entry (pvlib's ``ModelChain.run_model_from_poa``, ``run_model_from_effective_irradiance``
are the model) and :func:`resolve` is the one dispatcher (pvlib's ``run_model``):

============  ====================================================  ===========================
kind          what                                                  entry
============  ====================================================  ===========================
``forecast``  a forecast already run (``ForecastResult``; its       :meth:`PowerSource.from_forecast`
              draws are read, no engine run)
``scenario``  a ``Scenario`` or a scenario YAML (every Monte        :meth:`PowerSource.from_scenario`
              Carlo draw is forecast)
``trace``     one :class:`~powerlab.interconnect.powertrace.         :meth:`PowerSource.from_trace`
              PowerTrace`
``telemetry`` canonical telemetry in memory (a ``DataFrame``)       :meth:`PowerSource.from_telemetry`
``store``     a telemetry store folder or a canonical ``.parquet``  :meth:`PowerSource.from_store`
              file (read when the power is asked for)
============  ====================================================  ===========================

:func:`~powerlab.interconnect.compliance.comply`,
:func:`~powerlab.interconnect.resonance.screen_resonance`,
:func:`~powerlab.interconnect.studypackage.study_package` and
:func:`powerlab.flex.verify.verify_event` call :func:`resolve` and then read the power the
same way whatever the kind:

- :meth:`PowerSource.run` - a function on every draw, one row per draw (a measured source
  is one draw);
- :meth:`PowerSource.trace` - one draw, or the measured trace;
- :meth:`PowerSource.forecast` - the forecast itself (a scenario or a forecast result);
- :meth:`PowerSource.site_power` - measured site power per time bin (measured kinds).

Anything else is refused by :func:`resolve` with one :class:`~powerlab.exceptions.OptionError`
naming the kinds accepted (:data:`ACCEPTED`), the same for every entry point.  Measured
telemetry becomes a trace through
:func:`~powerlab.interconnect.powertrace.trace_from_telemetry`, with the options of
:class:`MeasuredOptions`.

Examples
--------
>>> src = resolve("data/scenarios/small.yaml")
>>> src.kind
'scenario'
>>> trace = src.trace(draw=0, seed=0)          # one forecast draw as a PowerTrace
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .._options import Options, choice
from ..exceptions import AnalysisError, OptionError, PowerlabError
from ..site.engine import forecast as run_forecast
from ..site.results import ForecastResult
from ..site.scenario import Scenario, read_scenario
from ..telemetry.aggregate import power_sums
from .eventresponse import scenario_with_sags
from .powertrace import (
    PowerTrace,
    for_each_draw,
    forecast_trace,
    read_telemetry,
    telemetry_path,
    trace_from_telemetry,
)

__all__ = [
    "ACCEPTED",
    "KINDS",
    "DrawRun",
    "MeasuredOptions",
    "PowerSource",
    "open_source",
    "resolve",
]

#: The kinds of source, in the order :func:`resolve` tries them.
KINDS = ("forecast", "scenario", "trace", "telemetry", "store")

#: What :func:`resolve` accepts, in words (the text of its error).
ACCEPTED = ("a ForecastResult, a Scenario (or a scenario .yaml), a PowerTrace, canonical "
            "telemetry (a DataFrame), a telemetry store folder or a canonical .parquet file")

_MEASURED = ("trace", "telemetry", "store")


@dataclass(frozen=True)
class MeasuredOptions(Options):
    """How measured telemetry becomes a trace (see
    :func:`~powerlab.interconnect.powertrace.trace_from_telemetry`); ignored for a
    forecast, whose ticks are already a trace.

    Attributes
    ----------
    pue : float, optional
        When given, facility power is IT power x ``pue`` + ``base_load_w`` [-].
    base_load_w : float, default 0
        Non-IT load [W].
    start, end : datetime-like, optional
        Time range to use (tz-aware).
    max_gap_s : float, optional
        Longest gap bridged by interpolation (default 3 x the device's median
        interval) [s].
    sampling : {'instantaneous', 'interval_mean'}
        What each reading is: the power at its time (NVML's) or the mean over the
        interval before it.
    """

    pue: float | None = None
    base_load_w: float = 0.0
    start: object = None
    end: object = None
    max_gap_s: float | None = None
    sampling: str = "instantaneous"


@dataclass(frozen=True)
class DrawRun:
    """What :meth:`PowerSource.run` returns.

    Attributes
    ----------
    values : DataFrame
        One row per draw (index ``draw``), the columns of the function's mappings.
    first : PowerTrace
        Draw 0, or the measured trace.
    description : str
        What was evaluated (``forecast of scenario 'x', 20 draws, seed 0`` or the
        measured trace's description).
    draws : int
        Draws evaluated (1 for a measured source) [-].
    seed : int or None
        Seed of the forecast (None for a measured source).
    """

    values: pd.DataFrame
    first: PowerTrace
    description: str
    draws: int
    seed: int | None


@dataclass(frozen=True)
class PowerSource:
    """Where a check's power comes from: one of :data:`KINDS` and its data.

    Build one with an entry per kind (:meth:`from_forecast`, :meth:`from_scenario`,
    :meth:`from_trace`, :meth:`from_telemetry`, :meth:`from_store`) or with
    :func:`resolve`, which picks the entry.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    data : object
        The ``ForecastResult``, ``Scenario``, ``PowerTrace``, ``DataFrame`` or the
        ``Path`` of a store folder or ``.parquet`` file.
    """

    kind: str
    data: object

    def __post_init__(self):
        choice(self.kind, "kind", KINDS)

    # -- one entry per kind ------------------------------------------------------------
    @classmethod
    def from_forecast(cls, result: ForecastResult) -> PowerSource:
        """A forecast already run: its draws are read (no engine run)."""
        return cls("forecast", _checked(result, ForecastResult, "a ForecastResult"))

    @classmethod
    def from_scenario(cls, scenario) -> PowerSource:
        """A scenario (or the path of its YAML): every draw is forecast."""
        if isinstance(scenario, (str, os.PathLike)):
            scenario = read_scenario(scenario)
        scenario = _checked(scenario, Scenario, "a Scenario")
        if any(getattr(d, "from_model", False) for d in scenario.disturbances):
            # sags that state no effect take the equipment model's (issue 33: the
            # Python comply() read 0 MW where the command line read 20 MW)
            scenario = scenario_with_sags(scenario, None)
        return cls("scenario", scenario)

    @classmethod
    def from_trace(cls, trace: PowerTrace) -> PowerSource:
        """One trace, measured or a forecast draw, taken as it is."""
        return cls("trace", _checked(trace, PowerTrace, "a PowerTrace"))

    @classmethod
    def from_telemetry(cls, frame: pd.DataFrame) -> PowerSource:
        """Canonical telemetry in memory (:mod:`powerlab.telemetry.schema`)."""
        return cls("telemetry", _checked(frame, pd.DataFrame, "a DataFrame"))

    @classmethod
    def from_store(cls, path) -> PowerSource:
        """A telemetry store folder or a canonical ``.parquet`` file (checked here, read
        when the power is asked for, within the time range asked)."""
        return cls("store", telemetry_path(path))

    # -- what the kinds have in common ---------------------------------------------
    @property
    def is_forecast(self) -> bool:
        """True for a scenario or a forecast result (draws), False for measured power."""
        return self.kind not in _MEASURED

    @property
    def scenario(self) -> Scenario | None:
        """The scenario (of a forecast result too); None for measured power."""
        if self.kind == "forecast":
            return self.data.scenario
        return self.data if self.kind == "scenario" else None

    def run(self, fn: Callable[[PowerTrace], Mapping], *, draws: int = 20, seed: int = 0,
            tick_s: float | None = None, measured: MeasuredOptions | None = None,
            progress=False, sag_free: bool = False) -> DrawRun:
        """Call ``fn`` on every draw (a measured source: on its one trace).

        Parameters
        ----------
        fn : callable
            ``fn(trace) -> mapping``; one row per draw.
        draws : int, default 20
            Draws of a scenario; of a forecast result, its first ``draws`` [-].
        seed : int, default 0
            Seed of a scenario's forecast (a forecast result keeps its own).
        tick_s : float, optional
            Engine tick of a scenario, or the grid measured telemetry is resampled to [s].
        measured : MeasuredOptions, optional
            How measured telemetry becomes a trace.
        progress : bool or None, default False
            A scenario's forecast progress (:func:`~powerlab.interconnect.powertrace.
            for_each_draw`).
        sag_free : bool, default False
            A forecast result: also run its sag-free twin for the ride-through
            counterfactual (``PowerTrace.without_sags``); a scenario's draws carry it
            whenever it has voltage sags.

        Returns
        -------
        DrawRun
        """
        if self.kind == "scenario":
            return self._run_scenario(fn, draws, seed, tick_s, progress)
        if self.kind == "forecast":
            return self._run_forecast(fn, draws, sag_free)
        tr = self.trace(tick_s=tick_s, measured=measured)
        values = pd.DataFrame([dict(fn(tr))], index=pd.RangeIndex(1, name="draw"))
        return DrawRun(values, tr, tr.description, 1, None)

    def trace(self, *, draw: int = 0, seed: int = 0, tick_s: float | None = None,
              measured: MeasuredOptions | None = None) -> PowerTrace:
        """One draw of a forecast (``draw``, ``seed``, ``tick_s``), or the measured trace
        (resampled to ``tick_s`` with the ``measured`` options)."""
        if self.kind == "scenario":
            return forecast_trace(self.data, draw=draw, seed=seed, tick_s=tick_s)
        if self.kind == "forecast":
            if not 0 <= draw < self.data.draws:
                raise PowerlabError(f"draw must be from 0 to {self.data.draws - 1} (the "
                                    f"forecast's draws), got {draw!r}")
            return _draw_trace(self.data, draw)
        if self.kind == "trace":
            return self.data
        opts = measured if measured is not None else MeasuredOptions()
        return trace_from_telemetry(self.data, tick_s=tick_s, **opts.as_dict())

    def forecast(self, *, draws: int = 20, seed: int = 0,
                 tick_s: float | None = None) -> ForecastResult:
        """The forecast: a forecast result as it is, a scenario's run now."""
        if self.kind == "forecast":
            return self.data
        if self.kind == "scenario":
            return run_forecast(self.data, draws=draws, seed=seed, tick_s=tick_s)
        raise PowerlabError(f"a forecast needs a scenario or a forecast result, got "
                            f"measured power ({self.kind})")

    def site_power(self, freq: str = "1min", *, scope: str = "gpu") -> pd.Series:
        """Measured site power per ``freq`` bin [W], indexed by UTC time: telemetry
        summed over devices (:func:`powerlab.telemetry.power_sums`, rows of ``scope``),
        or a trace's IT power."""
        if self.kind == "trace":
            return pd.Series(self.data.it_w, index=self.data.times())
        if self.is_forecast:
            raise PowerlabError(f"site power is measured: give telemetry, a store or a "
                                f"trace, not a {self.kind}")
        agg = power_sums(self.data, freq, by="cluster", scope=scope, engine="pandas")
        if agg.empty:
            raise AnalysisError("no power readings in the telemetry")
        return agg.set_index("timestamp")["power_w"]

    def read(self) -> pd.DataFrame:
        """Measured telemetry as a frame (a store or file read whole)."""
        if self.kind == "store":
            return read_telemetry(self.data)
        if self.kind == "telemetry":
            return self.data
        raise PowerlabError(f"a {self.kind} is not telemetry")

    # -- steps ---------------------------------------------------------------------
    def _run_scenario(self, fn, draws, seed, tick_s, progress) -> DrawRun:
        first: list[PowerTrace] = []

        def keep(dp):
            if not first:
                first.append(dp)
            return fn(dp)

        values = for_each_draw(self.data, keep, draws=draws, seed=seed, tick_s=tick_s,
                               progress=progress)
        return DrawRun(values, first[0], f"forecast of scenario {self.data.name!r}, "
                                         f"{draws} draws, seed {seed}", draws, seed)

    def _run_forecast(self, fn, draws, sag_free: bool) -> DrawRun:
        res = self.data
        n = min(res.draws, int(draws))
        if n < 1:
            raise PowerlabError(f"draws must be >= 1, got {draws!r}")
        base = res.sag_free() if sag_free and res.sag_free is not None else None
        rows, first = [], None
        for d in range(n):
            dp = _draw_trace(res, d, base)
            first = first or dp
            rows.append(dict(fn(dp)))
        values = pd.DataFrame(rows, index=pd.RangeIndex(n, name="draw"))
        return DrawRun(values, first, f"forecast of scenario {res.scenario.name!r}, "
                                      f"{n} draws, seed {res.seed}", n, res.seed)


def _checked(value, kind: type, what: str):
    if not isinstance(value, kind):
        raise OptionError(f"expected {what}, got {type(value).__name__}")
    return value


def _draw_trace(res: ForecastResult, d: int, base: ForecastResult | None = None
                ) -> PowerTrace:
    """Draw ``d`` of a forecast result (and of its sag-free twin ``base``)."""
    b0 = None if base is None else PowerTrace(
        d, base.tick_s, base.start_utc, base.it_w[d], base.facility_w[d])
    return PowerTrace(d, res.tick_s, res.start_utc, res.it_w[d], res.facility_w[d],
                      res.events[res.events["draw"] == d].reset_index(drop=True),
                      without_sags=b0)


def _from_path(path) -> PowerSource:
    """A scenario YAML, a store folder or a canonical ``.parquet`` file."""
    if Path(path).suffix.lower() in (".yaml", ".yml"):
        return PowerSource.from_scenario(path)
    return PowerSource.from_store(path)


#: The dispatch table of :func:`resolve`: type -> the entry of its kind.
_ENTRIES: tuple[tuple[type | tuple, Callable[..., PowerSource]], ...] = (
    (ForecastResult, PowerSource.from_forecast),
    (Scenario, PowerSource.from_scenario),
    (PowerTrace, PowerSource.from_trace),
    (pd.DataFrame, PowerSource.from_telemetry),
    ((str, os.PathLike), _from_path),
)


def resolve(source) -> PowerSource:
    """The :class:`PowerSource` of what a check was given.

    Parameters
    ----------
    source : ForecastResult, Scenario, PowerTrace, DataFrame, path-like or PowerSource
        A forecast already run, a scenario (or its YAML), one trace, canonical telemetry,
        a telemetry store folder or a canonical ``.parquet`` file; a ``PowerSource`` is
        returned as it is.

    Returns
    -------
    PowerSource

    Raises
    ------
    OptionError
        For anything else: ``source must be <ACCEPTED>; got <type>``.
    PowerlabError
        A path that does not exist or is neither a scenario YAML, a store folder nor a
        ``.parquet`` file.
    """
    if isinstance(source, PowerSource):
        return source
    for kind, entry in _ENTRIES:
        if isinstance(source, kind):
            return entry(source)
    raise OptionError(f"source must be {ACCEPTED}; got {type(source).__name__}")


def open_source(path):
    """What a command was given on disk: a scenario YAML (returns the ``Scenario``) or
    measured telemetry (a store folder or a canonical ``.parquet`` file, returned read as
    a frame).  Prefer :func:`resolve`, which reads telemetry only when asked."""
    src = _from_path(path)
    return src.data if src.kind == "scenario" else src.read()
