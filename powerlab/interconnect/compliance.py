"""Check a site's power against a utility's requirement spec.

Three layers (pvlib style):

- the metric functions of :mod:`powerlab.limits.loadmetrics`;
- :class:`Compliance` holds a parsed :class:`~powerlab.limits.requirements.RequirementSpec`
  and evaluates it (through :func:`powerlab.limits.evaluation.evaluate_power`, the one
  evaluation of powerlab's limits, which a scenario's ``limits:`` also goes through) on
  one power series (a ``DrawPower`` of the engine or a
  :class:`~powerlab.interconnect.powertrace.PowerTrace`): ``Compliance(spec).evaluate(dp)``
  returns ``{requirement: value}``, cheap enough to call for every draw of every option
  a mitigation search tries, and shaped as the engine's ``on_draw`` callback;
- :func:`comply` runs it on a scenario (every Monte Carlo draw), a forecast already run, a
  measured telemetry frame, a store or a trace (whichever,
  :func:`~powerlab.interconnect.sources.resolve` sorts it out), and returns a
  :class:`~powerlab.interconnect.verdicts.ComplianceResult` (``summary()``,
  ``summary_frame()``, ``write(dir)`` for ``compliance.csv``).

Oscillation requirements are read over sliding windows of the band-passed power
(:func:`~powerlab.limits.loadmetrics.band_windows`): the value is the worst window,
and the result says when it starts and what share of the windows exceed the limit.  A
``deviation`` requirement is, by default, the allowance before the ramp limits are
triggered (:data:`~powerlab.limits.requirements.DEVIATION_RULES`).  For measured
telemetry each oscillation row's note says what the sampling shows of its band and names
the aliasing of faster content (:func:`~powerlab.interconnect.powertrace.band_visibility`).

Verdicts
--------
A requirement **fails** when more than ``spec.max_exceed_probability`` of the draws exceed
its limit (default 0: any draw).  ``value`` is the draw value at that quantile (the worst
draw by default), so ``value > limit`` exactly when the verdict is ``fail``; for one
measured trace ``exceed_probability`` is 0 or 1.

The verdict is ``pass`` or ``fail``, nothing else.  A requirement the data cannot show
to comply **fails** with ``value`` NaN (and ``assessed`` False in ``summary_frame()``, the
reason in ``note`` and in the text summary): a ramp or deviation window shorter than the
readings' interval, an oscillation band above the Nyquist frequency of the readings, a
series shorter than the window, a ride-through requirement without a covered voltage sag
in the data.  Passing what was not measured would be silently wrong.  When only the top
of an RMS band is cut off and the resolved part already exceeds the limit, the value is
that resolved part (the full band's RMS can only be larger); when the resolved part is
under the limit the full band still cannot be shown to comply: ``fail``, value NaN, the
resolved part in ``note``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .._lazy import lazy_exports
from ..exceptions import PowerlabError
from ..limits import loadmetrics as lm
from ..limits.evaluation import ASSESSABLE, evaluate_power, plan_requirements
from ..limits.requirements import Requirement, RequirementSpec, read_requirements
from ..limits.scenario_limits import limits_spec
from ..outputs import output_folder  # noqa: F401  (sizing writes through it too)
from .powertrace import PowerTrace
from .ridethrough import counterfactual_sag_loss, simulated_sags
from .sources import MeasuredOptions, resolve
from .verdicts import ComplianceResult

__all__ = [
    "Compliance",
    "comply",
]


class Compliance:
    """A requirement spec ready to evaluate on power series.

    Parameters
    ----------
    spec : RequirementSpec, Limits or path-like
        The spec (read once); a scenario's ``limits`` are read as a spec
        (:func:`~powerlab.limits.scenario_limits.limits_spec`).
    sags : DataFrame, optional
        Voltage sags (``timestamp``, ``duration_s``, ``residual_voltage_pu``) to add to
        every series' own ``voltage_sag`` events, e.g. from a power-quality recorder.

    Examples
    --------
    >>> check = Compliance(read_requirements("data/requirements/choukse2025_forms.yaml"))
    >>> values = check.evaluate(trace)          # {requirement: value in its unit}
    """

    def __init__(self, spec, *, sags: pd.DataFrame | None = None):
        if hasattr(spec, "ramp_up_megawatts_per_s"):   # a scenario's limits: block
            spec = limits_spec(spec)
        elif not isinstance(spec, RequirementSpec):
            spec = read_requirements(spec)
        self.spec = spec
        self.sags = None
        if sags is not None and len(sags):
            # validated once, through the same code as a trace's sags
            dummy = PowerTrace(0, 1.0, pd.Timestamp("2000-01-01", tz="UTC"),
                               np.zeros(2), None)
            self.sags = dummy.with_sags(sags).events
        self._plans: dict[tuple, dict[str, tuple[str, str]]] = {}

    @property
    def names(self) -> list[str]:
        """Requirement names, in spec order."""
        return [r.name for r in self.spec.requirements]

    def plan(self, tick_s: float, native_interval_s: float, duration_s: float
             ) -> dict[str, tuple[str, str]]:
        """``{requirement: (status, note)}`` for series of this tick, native interval and
        length; status ``ok``, ``partial`` or ``no`` (see the module docstring)."""
        key = (float(tick_s), float(native_interval_s), float(duration_s))
        if key not in self._plans:
            self._plans[key] = plan_requirements(self.spec, *key)
        return self._plans[key]

    def assessable(self, tick_s: float, native_interval_s: float, duration_s: float):
        """``(spec, dropped)``: the spec cut to the requirements series of this tick,
        native interval and length can show met, and the names of those left out."""
        plan = self.plan(tick_s, native_interval_s, duration_s)
        keep = tuple(r for r in self.spec.requirements if plan[r.name][0] == "ok")
        dropped = [r.name for r in self.spec.requirements if plan[r.name][0] != "ok"]
        return dataclasses.replace(self.spec, requirements=keep), dropped

    def _sags(self, dp) -> pd.DataFrame | None:
        ev = getattr(dp, "events", None)
        own = None
        if ev is not None and len(ev) and "event" in ev.columns \
                and "residual_voltage_pu" in ev.columns:
            own = ev[ev["event"] == "voltage_sag"]
        parts = [p for p in (own, self.sags) if p is not None and len(p)]
        return pd.concat(parts, ignore_index=True) if parts else None

    def evaluate(self, dp) -> dict[str, float]:
        """Every requirement's value on one power series, in the requirement's unit.

        Parameters
        ----------
        dp : DrawPower or PowerTrace
            Anything with ``tick_s``, ``start_utc``, ``it_w``, ``facility_w`` and
            ``events`` (``native_interval_s`` optional, default the tick).

        Returns
        -------
        dict
            ``{requirement name: value}``; NaN where the series cannot assess it.
        """
        return self.evaluate_details(dp)[0]

    __call__ = evaluate

    def evaluate_details(self, dp) -> tuple[dict[str, float], dict[str, float]]:
        """:meth:`evaluate`, and for every windowed oscillation requirement where its worst
        window starts (``"<name>.worst_window_start_s"``, seconds from the first sample)
        and the share of its windows over the limit (``"<name>.share_of_windows_over_limit"``).
        """
        tick = float(dp.tick_s)
        x = dp.it_w if self.spec.boundary == "it" else dp.facility_w
        if x is None:
            PowerTrace(0, tick, dp.start_utc, dp.it_w, None).power_w("facility")  # raises
        x = np.asarray(x, dtype=float)
        native = float(getattr(dp, "native_interval_s", tick))
        plan = self.plan(tick, native, len(x) * tick)
        sags: list = []

        def ride_through(r: Requirement) -> float:
            base = getattr(dp, "without_sags", None)
            if base is not None:    # a forecast: against the same draw without sags
                v, _ = counterfactual_sag_loss(
                    x, base.power_w(self.spec.boundary), tick, dp.start_utc,
                    simulated_sags(dp), residual_voltage_pu=r.residual_voltage_pu,
                    sag_duration_s=r.window_s, observe_s=r.observe_s)
                return v
            if not sags:
                sags.append(self._sags(dp))
            v, _ = lm.sag_load_loss(x, tick, dp.start_utc, sags[0],
                                    residual_voltage_pu=r.residual_voltage_pu,
                                    sag_duration_s=r.window_s, observe_s=r.observe_s)
            return v

        out, detail = evaluate_power(self.spec, x, tick, native, plan=plan,
                                     ride_through=ride_through)
        return out, detail

    def passes(self, dp) -> bool:
        """Whether one series is shown to meet every requirement (a requirement the series
        cannot assess does not pass)."""
        return not self.failing(dp)

    def failing(self, dp) -> list[str]:
        """Requirements one series does not meet or cannot show met (for searches)."""
        vals = self.evaluate(dp)
        x = dp.it_w
        plan = self.plan(float(dp.tick_s), float(getattr(dp, "native_interval_s", dp.tick_s)),
                         len(x) * float(dp.tick_s))
        return [r.name for r in self.spec.requirements
                if plan[r.name][0] != ASSESSABLE or not vals[r.name] <= r.limit]

    def result(self, values: pd.DataFrame, *, tick_s: float, native_interval_s: float,
               duration_s: float, description: str = "", trace=None,
               sampling: str = "interval_mean") -> ComplianceResult:
        """Assemble a :class:`ComplianceResult` from per-draw values (one row per draw,
        a column per requirement, as :meth:`evaluate` returns them; the detail columns
        of :meth:`evaluate_details` may be there too).  ``sampling``: how the data were
        sampled (``interval_mean`` or ``instantaneous``, see
        :attr:`~powerlab.interconnect.powertrace.PowerTrace.sampling`)."""
        missing = [n for n in self.names if n not in values.columns]
        if missing:
            raise PowerlabError(f"per-draw values lack requirement(s) {missing}")
        details = values[[c for c in values.columns if "." in str(c)]]
        return ComplianceResult(self.spec, values[self.names].reset_index(drop=True),
                                self.plan(tick_s, native_interval_s, duration_s),
                                tick_s=tick_s, native_interval_s=native_interval_s,
                                duration_s=duration_s, description=description,
                                trace=trace, details=details.reset_index(drop=True),
                                sampling=sampling)

    def _row(self, dp) -> dict[str, float]:
        vals, detail = self.evaluate_details(dp)
        return {**vals, **detail}


def comply(source, spec, *, draws: int = 20, seed: int = 0, tick_s: float | None = None,
           sags: pd.DataFrame | None = None, measured: MeasuredOptions | None = None,
           **measured_kw) -> ComplianceResult:
    """Evaluate a scenario's forecast or a measured trace against a requirement spec.

    Parameters
    ----------
    source : Scenario, ForecastResult, PowerTrace, DataFrame or path-like
        A scenario (every Monte Carlo draw is evaluated), a forecast already run (its
        first ``draws`` draws, no engine run), a trace, canonical telemetry,
        a store folder, a canonical Parquet file or a scenario YAML
        (:func:`~powerlab.interconnect.sources.resolve`).
    spec : RequirementSpec, Compliance, Limits or path-like
        The requirements (a scenario's ``limits`` are read as a spec by
        :func:`~powerlab.limits.scenario_limits.limits_spec`).
    draws : int, default 20
        Monte Carlo draws of a scenario [-].
    seed : int, default 0
        Seed of the forecast.
    tick_s : float, optional
        Engine tick of a scenario, or resampling grid of telemetry [s].
    sags : DataFrame, optional
        Voltage sags (``timestamp``, ``duration_s``, ``residual_voltage_pu``) for the
        ride-through requirements.
    measured : MeasuredOptions, optional
        Telemetry only: how it becomes a trace
        (:class:`~powerlab.interconnect.sources.MeasuredOptions`).
    **measured_kw
        Its fields as keywords, replacing those of ``measured``: ``pue``,
        ``base_load_w`` (facility power = IT x ``pue`` + ``base_load_w``, needed when the
        spec's boundary is ``facility``), ``start``, ``end``, ``max_gap_s`` (see
        :func:`~powerlab.interconnect.powertrace.trace_from_telemetry`) and ``sampling``
        (``instantaneous``, NVML's power: content above the Nyquist frequency folds
        into the bands and a warning names the aliasing; or ``interval_mean``).

    Returns
    -------
    ComplianceResult

    Notes
    -----
    A scenario's forecast shows its size, estimate and progress, then the draws checked,
    on standard error when it may take 2 s or more
    (:func:`~powerlab.interconnect.powertrace.for_each_draw`); within
    ``powerlab._progress.quiet()`` nothing is shown.
    """
    check = _checker(spec, sags)
    src = resolve(source)
    if src.kind == "scenario" and (isinstance(draws, bool) or not isinstance(
            draws, (int, np.integer)) or draws < 1):
        raise PowerlabError(f"draws must be an integer >= 1, got {draws!r}")
    run = src.run(check._row, draws=int(draws) if src.is_forecast else draws, seed=seed,
                  tick_s=tick_s, progress=None,
                  measured=MeasuredOptions.from_kwargs(measured, **measured_kw),
                  sag_free=any(r.kind == "ride_through" for r in check.spec.requirements))
    tr = run.first
    tick = float(tr.tick_s)
    return check.result(run.values, tick_s=tick, native_interval_s=float(tr.native_interval_s),
                        duration_s=tr.n_ticks * tick, description=run.description,
                        trace=tr, sampling=tr.sampling)


def _checker(spec, sags) -> Compliance:
    """The spec as a :class:`Compliance`, with the sags given (a ``Compliance`` given
    with ``sags`` is rebuilt around its spec)."""
    if isinstance(spec, Compliance):
        return Compliance(spec.spec, sags=sags) if sags is not None else spec
    return Compliance(spec, sags=sags)


# names that moved to verdicts (issue 31); the old path warns for one release
_, __getattr__, _ = lazy_exports(__name__, {}, moved={
    "powerlab.interconnect.verdicts": ("COMPLIANCE_COLUMNS", "ComplianceSummary")})
