"""Check a site's power against a utility's requirement spec.

Three layers (pvlib style):

- the metric functions of :mod:`powerlab.limits.loadmetrics`;
- :class:`Compliance` holds a parsed :class:`~powerlab.limits.requirements.RequirementSpec`
  and evaluates it (through :func:`powerlab.limits.requirements.evaluate_power`, the one
  evaluation of powerlab's limits, which a scenario's ``limits:`` also goes through) on one power series (a ``DrawPower`` of the engine or a
  :class:`~powerlab.interconnect.powertrace.PowerTrace`): ``Compliance(spec).evaluate(dp)``
  returns ``{requirement: value}``, cheap enough to call for every draw of every option
  a mitigation search tries, and shaped as the engine's ``on_draw`` callback;
- :func:`comply` runs it on a scenario (every Monte Carlo draw), a measured telemetry
  frame, a store or a trace, and returns a :class:`ComplianceResult` (``summary()``,
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

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .._summary import Summary
from ..exceptions import PowerlabError
from ..limits import loadmetrics as lm
from ..limits.evaluation import (
    ASSESSABLE,
    NOT_ASSESSABLE,
    PARTIAL,
    evaluate_power,
    metric_name,
    plan_requirements,
    rule_note,
)
from ..limits.requirements import Requirement, RequirementSpec, read_requirements
from ..limits.scenario_limits import limits_spec
from ..outputs import output_folder  # re-exported: sizing writes through it too
from .powertrace import PowerTrace, band_visibility, for_each_draw, trace_from_telemetry

__all__ = [
    "COMPLIANCE_COLUMNS",
    "Compliance",
    "ComplianceResult",
    "ComplianceSummary",
    "comply",
]

#: Columns of ``compliance.csv``.
COMPLIANCE_COLUMNS = ("requirement", "metric", "window_s", "limit", "value", "unit",
                      "exceed_probability", "verdict", "worst_window_start_utc",
                      "share_of_windows_over_limit")

_OK, _PARTIAL, _NO = ASSESSABLE, PARTIAL, NOT_ASSESSABLE



class Compliance:
    """A requirement spec ready to evaluate on power series.

    Parameters
    ----------
    spec : RequirementSpec, Limits or path-like
        The spec (read once); a scenario's ``limits`` are read as a spec
        (:func:`~powerlab.limits.requirements.limits_spec`).
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
        import dataclasses

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
                from .ridethrough import counterfactual_sag_loss, simulated_sags

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
                if plan[r.name][0] != _OK or not vals[r.name] <= r.limit]

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


def _order_value(vals: np.ndarray, p_max: float) -> float:
    """The draw value that is exceeded by at most ``p_max`` of the draws."""
    s = np.sort(vals)[::-1]
    return float(s[min(math.floor(p_max * len(s) + 1e-9), len(s) - 1)])


def _upper95(k: int, n: int) -> float:
    """One-sided 95 % Clopper-Pearson upper bound of a probability seen k times in n."""
    from scipy.special import betaincinv

    return 1.0 if k >= n else float(betaincinv(k + 1, n - k, 0.95))


class ComplianceResult:
    """Results of :func:`comply` (statsmodels style).

    Attributes
    ----------
    spec : RequirementSpec
    draw_values : DataFrame
        Per draw (rows) and requirement (columns): the value in the requirement's unit.
    tick_s, native_interval_s, duration_s : float
        Sample spacing, spacing of the underlying data, length of the series [s].
    description : str
        What was evaluated.
    trace : PowerTrace, DrawPower or None
        The measured trace, or draw 0 of a forecast (for plots, resonance screening and
        grid-study exports of the same series).
    """

    def __init__(self, spec: RequirementSpec, draw_values: pd.DataFrame,
                 plan: Mapping[str, tuple[str, str]], *, tick_s: float,
                 native_interval_s: float, duration_s: float, description: str = "",
                 trace=None, details: pd.DataFrame | None = None,
                 sampling: str = "interval_mean"):
        self.spec = spec
        self.trace = trace
        self.draw_values = draw_values
        self.draw_details = details if details is not None else pd.DataFrame(
            index=draw_values.index)
        self.sampling = sampling
        self.start_utc = getattr(trace, "start_utc", None)
        self.tick_s = tick_s
        self.native_interval_s = native_interval_s
        self.duration_s = duration_s
        self.description = description
        self._plan = dict(plan)
        self._frame = self._build()

    @property
    def draws(self) -> int:
        """Number of draws (1 for a measured trace) [-]."""
        return len(self.draw_values)

    def _build(self) -> pd.DataFrame:
        p_max = self.spec.max_exceed_probability
        rows = []
        for r in self.spec.requirements:
            status, note = self._plan[r.name]
            vals = self.draw_values[r.name].to_numpy(float)
            ok = vals[np.isfinite(vals)]
            n = len(ok)
            value = prob = upper = med = worst = share = math.nan
            when = pd.NaT
            k = 0
            if n:
                value = _order_value(ok, p_max)
                when, share = self._window_detail(r, vals, value)
                k = int((ok > r.limit).sum())
                prob = k / n
                upper = _upper95(k, n)
                med, worst = float(np.median(ok)), float(ok.max())
            assessed = True
            if status == _NO or n == 0:
                if not note and r.kind == "ride_through":
                    note = (f"no voltage sag to >= {r.residual_voltage_pu:g} pu lasting <= "
                            f"{r.window_s:g} s (with {r.observe_s:g} s after it) in the "
                            "data; give measured sags, or forecast them (engine ride-through "
                            "events)")
                note = "cannot be shown to comply: " + (note or "no value")
                assessed = False
                value = prob = upper = math.nan
            elif status == _PARTIAL and not prob > p_max:
                note = (f"cannot be shown to comply: {note}, {value:.4g} {r.unit} there, "
                        "under the limit, but the full band's RMS can be larger")
                assessed = False
                value = prob = upper = math.nan
            elif status == _PARTIAL:
                note += "; the full band's RMS can only be larger"
            verdict = "pass" if assessed and not prob > p_max else "fail"
            if r.kind == "ride_through" and n and n < self.draws:
                note = (note + "; " if note else "") + (
                    f"{n} of {self.draws} draws hold a covered sag")
            extra = rule_note(self.spec, r) if assessed else ""
            if r.kind == "oscillation":
                extra = "; ".join(t for t in (extra, band_visibility(
                    r.band_hz, max(self.tick_s, self.native_interval_s),
                    self.sampling)) if t)
            if extra:
                note = (note + "; " if note else "") + extra
            if not assessed:
                when, share = pd.NaT, math.nan
            elif r.kind == "oscillation" and pd.notna(when):
                note = (f"worst {r.window_s:g}-s window from {when:%Y-%m-%d %H:%M:%S} UTC; "
                        f"{share:.2%} of the windows over the limit"
                        + ("; " + note if note else ""))
            if r.kind == "ride_through" and n:        # what the load lost is measured from
                from ..site.disturbances import BASELINE_FORECAST, BASELINE_MEASURED

                note = (note + "; " if note else "") + "baseline: " + (
                    BASELINE_FORECAST if getattr(self.trace, "without_sags", None)
                    is not None else BASELINE_MEASURED)
            rows.append({
                "requirement": r.name, "kind": r.kind, "metric": metric_name(self.spec, r),
                "window_s": r.window_s, "limit": r.limit, "value": value, "unit": r.unit,
                "exceed_probability": prob, "verdict": verdict,
                "exceed_probability_upper95": upper, "value_median": med,
                "value_worst": worst, "assessed": assessed, "draws_assessed": n,
                "exceedances": k, "worst_window_start_utc": when,
                "share_of_windows_over_limit": share,
                "illustrative": r.illustrative, "source": r.source, "note": note})
        df = pd.DataFrame(rows)
        for c in ("requirement", "kind", "metric", "unit", "verdict", "source", "note"):
            df[c] = df[c].astype("string")
        df["worst_window_start_utc"] = pd.to_datetime(df["worst_window_start_utc"],
                                                      utc=True)
        return df

    def _window_detail(self, r: Requirement, vals: np.ndarray, value: float):
        """(start of the worst window [UTC], share of windows over the limit) of the
        draw whose value is reported; (NaT, NaN) for a requirement without windows."""
        col = f"{r.name}.worst_window_start_s"
        if r.kind != "oscillation" or col not in self.draw_details.columns:
            return pd.NaT, math.nan
        d = int(np.flatnonzero(vals == value)[0])
        start = float(self.draw_details[col].iloc[d])
        share = float(self.draw_details[f"{r.name}.share_of_windows_over_limit"].iloc[d])
        t0 = self.start_utc
        when = (pd.Timestamp(t0) + pd.Timedelta(seconds=start)) if t0 is not None \
            else pd.NaT
        return when, share

    def summary_frame(self) -> pd.DataFrame:
        """One row per requirement: the ``compliance.csv`` columns (for an oscillation
        requirement ``worst_window_start_utc`` and ``share_of_windows_over_limit`` of the
        reported draw; NaT/NaN for the other kinds), then
        ``exceed_probability_upper95`` (one-sided 95 % Clopper-Pearson bound over the
        draws), ``value_median``, ``value_worst``, ``assessed`` (False: the data cannot show the
        requirement met, verdict ``fail``, value NaN), ``draws_assessed``, ``exceedances``,
        ``kind``, ``illustrative``, ``source`` and ``note``."""
        extra = [c for c in self._frame.columns if c not in COMPLIANCE_COLUMNS]
        return self._frame[list(COMPLIANCE_COLUMNS) + extra].copy()

    @property
    def verdicts(self) -> pd.Series:
        """Verdict per requirement (``pass`` or ``fail``)."""
        return self._frame.set_index("requirement")["verdict"]

    @property
    def failed(self) -> list[str]:
        """Requirements that fail."""
        return self.verdicts[self.verdicts == "fail"].index.tolist()

    @property
    def not_assessed(self) -> list[str]:
        """Requirements that fail because the data cannot show them met (value NaN)."""
        f = self._frame
        return f.loc[~f["assessed"], "requirement"].tolist()

    @property
    def passed(self) -> bool:
        """True when every requirement passes."""
        return bool((self.verdicts == "pass").all())

    def summary(self) -> ComplianceSummary:
        """Text summary (``print(res.summary())``; HTML in JupyterLab)."""
        return ComplianceSummary(self)

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()

    def __repr__(self) -> str:
        return (f"<ComplianceResult {self.spec.name!r}: {len(self.failed)} fail "
                f"({len(self.not_assessed)} not assessable) of {len(self._frame)}, "
                f"{self.draws} draw(s)>")

    def to_csv(self, path) -> Path:
        """Write ``compliance.csv`` (columns :data:`COMPLIANCE_COLUMNS`) atomically."""
        from ..outputs import atomic_write

        text = self._frame[list(COMPLIANCE_COLUMNS)].to_csv(index=False, float_format="%.6g")
        return atomic_write(path, lambda tmp: Path(tmp).write_text(text, "utf-8"))

    def write(self, out_dir) -> tuple[Path, Path]:
        """Write ``out_dir/compliance.csv`` and ``out_dir/compliance_summary.txt``."""
        from ..outputs import atomic_write

        out = output_folder(out_dir)
        csv = self.to_csv(out / "compliance.csv")
        text = str(self.summary()) + "\n"
        txt = atomic_write(out / "compliance_summary.txt",
                           lambda tmp: Path(tmp).write_text(text, "utf-8"))
        return csv, txt


class ComplianceSummary(Summary):
    """What :meth:`ComplianceResult.summary` shows."""

    def __init__(self, res: ComplianceResult):
        super().__init__("Interconnection requirements check", width=140)
        self.res = res
        f = res._frame
        spec = res.spec
        self.header = pd.DataFrame({"value": [
            spec.name, spec.hash()[:12], spec.boundary, res.description or "-", res.draws,
            f"{res.tick_s:g} s", f"{res.native_interval_s:g} s", f"{res.duration_s:g} s",
            f"{spec.max_exceed_probability:g}"]},
            index=["requirement spec", "spec hash", "boundary", "evaluated", "draws", "tick",
                   "data interval", "duration", "allowed exceed probability"])
        t = f[["requirement", "limit", "value", "unit", "exceed_probability",
               "verdict"]].copy()
        if res.draws > 1:        # a bound over one trace says nothing
            t["P(exceed) 95% upper"] = f["exceed_probability_upper95"]
        t["illustrative"] = np.where(f["illustrative"], "yes", "no")
        self.table = t.set_index("requirement")
        n_fail, n_na = len(res.failed), len(res.not_assessed)
        if n_fail:
            self.verdict = (f"FAIL: {n_fail} of {len(f)} requirements fail "
                            f"({', '.join(res.failed)})")
            if n_na:
                self.verdict += (f"; {n_na} of them cannot be shown to comply from these "
                                 f"data ({', '.join(res.not_assessed)}; see the notes)")
        else:
            self.verdict = f"PASS: all {len(f)} requirements pass"
        self.notes = [f"{r}: {n}" for r, n in zip(f["requirement"], f["note"]) if n]
        n_ill = int(f["illustrative"].sum())
        if n_ill:
            self.notes.append(f"{n_ill} of {len(f)} limits are illustrative assumptions, "
                              "not published limits (see each requirement's source)")
        self.add_df(self.header, header=False)
        self.add_df(self.table)
        self.add_text([self.verdict] + [f"Note: {n}" for n in self.notes])


def comply(source, spec, *, draws: int = 20, seed: int = 0, tick_s: float | None = None,
           pue: float | None = None, base_load_w: float = 0.0,
           sags: pd.DataFrame | None = None, start=None, end=None,
           max_gap_s: float | None = None, sampling: str = "instantaneous"
           ) -> ComplianceResult:
    """Evaluate a scenario's forecast or a measured trace against a requirement spec.

    Parameters
    ----------
    source : Scenario, ForecastResult, PowerTrace, DataFrame or path-like
        A scenario (every Monte Carlo draw is evaluated), a forecast already run (its
        first ``draws`` draws, no engine run), a trace, canonical telemetry,
        a store folder, a canonical Parquet file or a scenario YAML.
    spec : RequirementSpec, Compliance, Limits or path-like
        The requirements (a scenario's ``limits`` are read as a spec by
        :func:`~powerlab.limits.requirements.limits_spec`).
    draws : int, default 20
        Monte Carlo draws of a scenario [-].
    seed : int, default 0
        Seed of the forecast.
    tick_s : float, optional
        Engine tick of a scenario, or resampling grid of telemetry [s].
    pue, base_load_w : float, optional
        Telemetry only: facility power = IT x ``pue`` + ``base_load_w`` [-], [W] (needed
        when the spec's boundary is ``facility``).
    sags : DataFrame, optional
        Voltage sags (``timestamp``, ``duration_s``, ``residual_voltage_pu``) for the
        ride-through requirements.
    start, end, max_gap_s
        Telemetry only: time range and longest bridged gap (see
        :func:`~powerlab.interconnect.powertrace.trace_from_telemetry`).
    sampling : {'instantaneous', 'interval_mean'}
        Telemetry only: whether each reading is the power at its time (NVML's
        instantaneous power: content above the Nyquist frequency folds into the bands, a
        warning names the aliasing) or the mean over the interval before it.

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
    from ..site.results import ForecastResult
    from ..site.scenario import Scenario, read_scenario

    check = spec if isinstance(spec, Compliance) else Compliance(spec, sags=sags)
    if sags is not None and isinstance(spec, Compliance):
        check = Compliance(spec.spec, sags=sags)
    if isinstance(source, (str, Path)) and Path(source).suffix.lower() in (".yaml", ".yml"):
        source = read_scenario(source)
    if isinstance(source, ForecastResult):          # a forecast already run: no rerun
        rows, first = [], None
        base = None      # ride-through counterfactual: the same forecast without sags
        if getattr(source, "sag_free", None) is not None and any(
                r.kind == "ride_through" for r in check.spec.requirements):
            base = source.sag_free()
        for d in range(min(source.draws, int(draws))):
            b0 = None if base is None else PowerTrace(
                d, base.tick_s, base.start_utc, base.it_w[d], base.facility_w[d])
            dp = PowerTrace(d, source.tick_s, source.start_utc, source.it_w[d],
                            source.facility_w[d],
                            source.events[source.events["draw"] == d].reset_index(drop=True),
                            without_sags=b0)
            first = first or dp
            rows.append(check._row(dp))
        tick = float(source.tick_s)
        return check.result(pd.DataFrame(rows), tick_s=tick, native_interval_s=tick,
                            duration_s=source.n_ticks * tick,
                            description=f"forecast of scenario {source.scenario.name!r}, "
                                        f"{len(rows)} draws, seed {source.seed}", trace=first)
    if isinstance(source, Scenario):
        if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
            raise PowerlabError(f"draws must be an integer >= 1, got {draws!r}")
        first = []

        def fn(dp):
            if not first:
                first.append(dp)
            return check._row(dp)

        values = for_each_draw(source, fn, draws=int(draws), seed=seed, tick_s=tick_s,
                               progress=None)
        dp = first[0]
        tick = float(dp.tick_s)
        return check.result(values, tick_s=tick, native_interval_s=tick,
                            duration_s=len(dp.it_w) * tick,
                            description=f"forecast of scenario {source.name!r}, "
                                        f"{draws} draws, seed {seed}", trace=dp)
    if isinstance(source, PowerTrace):
        trace = source
    else:
        trace = trace_from_telemetry(source, tick_s=tick_s, pue=pue, base_load_w=base_load_w,
                                     start=start, end=end, max_gap_s=max_gap_s,
                                     sampling=sampling)
    values = pd.DataFrame([check._row(trace)])
    return check.result(values, tick_s=trace.tick_s, native_interval_s=trace.native_interval_s,
                        duration_s=trace.duration_s, description=trace.description,
                        trace=trace, sampling=trace.sampling)
