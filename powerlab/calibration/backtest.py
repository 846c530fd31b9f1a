"""Backtest the forecast against a recording: :func:`backtest_split`, :func:`backtest_runs`.

Two modes, the same scoring:

- **time split** (:func:`backtest_split`): calibrate (:func:`powerlab.calibration.calibrate.
  calibrate_job`) on the recording up to ``split`` with the events known by then, forecast
  the rest; by default the split is :func:`split_rule`'s (the middle of the run, unless
  that leaves fewer than two evaluations to measure a cadence on);
- **run to run** (:func:`backtest_runs`): calibrate on some runs of a system, forecast
  other runs from their own start events (``run_start``, ``run_stop``).

**Without run events** (``nvidia-smi`` traces, GPU scope) the run is found from the
readings (:func:`powerlab.calibration.runfind.find_run`: the longest stretch of 1-s summed power
at or above 90 % of its median, the start-up threshold of the calibration, dips of up to
three step periods joined) and the time split calibrates and scores that run only, never
the idle time or another job around it; the summary's first note says where the run was
found and how.  A held-out part in another regime than the calibration part (its mean
1-min power outside the range of the calibration part's, widened by 1 %, or another step
period) gets a note in words (:func:`powerlab.calibration.runfind.regime_notes`); the numbers are
still given.

The forecast job restarts where the forecaster stands: in a time split at the end of the
last evaluation before the split (no start-up; the engine counts steps and evaluations
from there) or, when an evaluation is under way at the split, at its start with a
start-up as long as a calibrated evaluation at the evaluation level; in a run-to-run
backtest at the test run's ``run_start`` with the calibrated
start-up.  The forecast runs at PUE 1 and is read **through the recording's own meters**
(:func:`powerlab.calibration.meter.meter_forecast` at each node's own reading instants, each
node's share ``1 / nodes``); measured and forecast readings are then summed holding each
node's last reading (:func:`powerlab.calibration.meter.sum_meters`) on a 0.1-s grid.  Every score
compares these two series over the scored window (from one meter interval after the
forecast starts to the end of the run).

Scores (:data:`~powerlab.calibration.scores.METRICS`, defined in
:func:`~powerlab.calibration.scores.score`): energy, 1-min mean power, the step
oscillation, evaluations, ramps and swings.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._summary import Results, Summary
from ..exceptions import AnalysisError, PowerlabError
from ..site.engine import forecast
from ..site.scenario import parse_scenario
from .calibrate import calibrate_job, check_span, drop_dropouts, run_window, summed_readings
from .calibrated_job import Calibration
from .meter import Meter, meter_forecast
from .phases import END_GAP_S
from .runfind import find_run, regime_notes
from .scores import METRICS, MIN_SCORED_MINUTES, score, score_table
from .windows import eval_intervals

__all__ = ["METRICS", "BacktestResult", "backtest_runs", "backtest_split", "score",
           "split_rule"]

GRID_S = 0.1


@dataclass(repr=False)
class BacktestResult(Results):
    """Scores of a backtest.

    Attributes
    ----------
    metrics : DataFrame
        ``run, metric, measured, forecast, error, error_pct, unit``; ``error`` is forecast
        minus measured (for MAPE and bias, the score itself).
    calibration : Calibration
        What was fitted.
    series : dict
        Run -> DataFrame of ``measured_w`` and ``forecast_w`` on the 0.1-s grid (summed
        meters).
    forecast_evals : dict
        Run -> start times of the forecast's evaluations (UTC).
    mode : str
        ``'split'`` or ``'runs'``.
    ramp_resolved : bool
        Whether the meter resolves the step (a periodic step with a period of at least
        four meter intervals): only then are ramp ratios a test of the model.
    """

    metrics: pd.DataFrame
    calibration: Calibration
    series: dict = field(repr=False)
    mode: str = "split"
    forecast_evals: dict = field(default_factory=dict, repr=False)
    split: float = float("nan")
    run_notes: list = field(default_factory=list)

    @property
    def ramp_resolved(self) -> bool:
        c = self.calibration
        return bool(c.has_periodic_step and c.fit.step_time_s >= 4 * c.meter_interval_s)

    def summary_frame(self) -> pd.DataFrame:
        """The metrics table (a copy)."""
        return self.metrics.copy()

    def value(self, metric: str, column: str = "error_pct", run=None) -> float:
        m = self.metrics[self.metrics["metric"] == metric]
        if run is not None:
            m = m[m["run"] == str(run)]
        return float(m[column].iloc[0]) if len(m) else float("nan")

    def summary(self) -> Summary:
        """The calibration in one line, the metrics table and the notes."""
        c = self.calibration
        head = [f"Backtest ({'time split' if self.mode == 'split' else 'run to run'}): "
                f"{c.gpus} GPUs, meter {c.meter_interval_s:g} s, calibrated step "
                f"{c.fit.step_time_s:.3g} s"
                + ("" if c.has_periodic_step else " (no periodic step: see notes)")
                + (f"; split at {self.split:.3g} of the run" if self.mode == "split" else "")]
        notes = self.notes()
        s = Summary(float_format="{:,.4g}", max_rows=200)
        s.add_text(head)
        s.add_df(self.metrics, index=False)
        if notes:
            s.add_text([f"Note: {n}" for n in notes])
        return s

    def notes(self) -> list[str]:
        """The notes in words: how the run was found (no run events), a regime change
        in the held-out part, then the calibration's notes."""
        notes = list(self.run_notes) + list(self.calibration.notes())
        m = self.metrics[self.metrics["metric"] == "scored_minutes"]
        for run, n in zip(m["run"], m["measured"]):
            if n < MIN_SCORED_MINUTES:
                notes.append(f"{run}: 1-min MAPE and bias refused: {n:.0f} whole minute(s) "
                             f"scored (< {MIN_SCORED_MINUTES}); energy is still scored.")
        if not self.ramp_resolved:
            notes.append("the meter does not resolve a periodic step: the step swing, its "
                         "period and the 1-s ramps are not a test of the model here.")
        return notes


def ends_with_eval(events, run_stop, meter_interval_s: float) -> bool:
    """Whether the run stops on an evaluation: its log's last ``eval_stop`` at most
    :data:`powerlab.calibration.phases.END_GAP_S` (or two meter intervals) before
    ``run_stop``.  The forecast is told this as it is told ``run_stop`` (the MLPerf rule
    that a run stops at the evaluation reaching the target)."""
    if events is None or run_stop is None:
        return False
    ev = eval_intervals(events)
    ev = ev[ev["stop_utc"] <= run_stop + pd.Timedelta(seconds=1)]
    if ev.empty:
        return False
    gap = (run_stop - ev["stop_utc"].max()).total_seconds()
    return gap <= max(END_GAP_S, 2 * meter_interval_s)


def _forecast_through_meters(cal: Calibration, power: pd.DataFrame, *, job_start,
                             startup: bool, horizon, duration_s: float,
                             end_phase: bool = True):
    """Forecast the job from ``job_start`` and read it at ``power``'s own instants."""
    step = cal.fit.step_time_s
    spec = cal.scenario_spec(name="backtest", start=job_start, duration_s=duration_s,
                             horizon=horizon, tick_s=step / math.ceil(step / 0.01))
    job = spec["jobs"][0]
    if not end_phase:
        job.pop("shutdown_s", None)
        job["power"].pop("shutdown_w", None)
    if startup is not True:   # resumed after an evaluation: one interval on, no warm-up
        job.get("eval", {}).pop("first_s", None)
        job.pop("warmup_s", None)
        job["power"].pop("warmup_w", None)
    if startup is False and "startup_s" in job:
        job.pop("startup_s")
        job["power"].pop("startup_w", None)
    elif isinstance(startup, tuple):  # (seconds, per-GPU level): an evaluation under way
        job["startup_s"], job["power"]["startup_w"] = float(startup[0]), float(startup[1])
    res = forecast(parse_scenario(spec), draws=1, seed=0)
    w = cal.meter_interval_s
    lo = pd.Timestamp(horizon[0]) + pd.Timedelta(seconds=w)
    sel = power.loc[(power["timestamp"] >= lo) & (power["timestamp"] <= horizon[1])]
    sel = sel[sel["scope"] == cal.fit.scope] if "scope" in sel else sel
    meas = sel[["timestamp", "host", "power_w"]].copy()
    if cal.fit.scope == "gpu" and "gpu_index" in sel:  # one meter per GPU
        meas["host"] = (sel["host"].astype(str) + "/"
                        + sel["gpu_index"].astype("string").fillna(""))
    meas = drop_dropouts(meas.dropna())[0]
    if meas.empty:
        raise AnalysisError("no readings in the forecast window")
    n = meas["host"].nunique()
    fc = pd.concat([meter_forecast(res, Meter(w), times=g["timestamp"], share=1 / n)
                    .assign(host=h) for h, g in meas.groupby("host", observed=True)],
                   ignore_index=True)
    return res, meas, fc.dropna(subset=["power_w"])


def _score_window(cal, power, events, *, job_start, startup, t0, t1, duration_s, run):
    end_eval = ends_with_eval(events, t1, cal.meter_interval_s)
    res, meas, fc = _forecast_through_meters(
        cal, power, job_start=job_start, startup=startup, horizon=(t0, t1),
        duration_s=duration_s, end_phase=end_eval)
    w = cal.meter_interval_s
    start = t0 + pd.Timedelta(seconds=3 * w)
    ym = summed_readings(meas.assign(scope="node"), every_s=GRID_S, start=start, end=t1)
    yf = summed_readings(fc.assign(scope="node"), every_s=GRID_S, start=start, end=t1)
    ok = ym.notna() & yf.notna()
    ym, yf = ym[ok], yf[ok]
    if len(ym) < round(10 * w / GRID_S):
        raise AnalysisError(f"{run}: the forecast window {t0} .. {t1} holds too few "
                            "readings to score")
    kinds = ["eval", "shutdown"] if end_eval else ["eval"]   # the end phase: the last one
    fev = res.events.loc[res.events["event"].isin(kinds), "timestamp"] \
        if "event" in res.events else None
    sc = score(ym, yf, step_time_s=cal.fit.step_time_s, evals=events,
               forecast_evals=fev, meter_interval_s=w)
    return (score_table(run, sc), pd.DataFrame({"measured_w": ym, "forecast_w": yf}),
            pd.DatetimeIndex(fev if fev is not None else []))


def split_rule(evals, run_start, run_stop) -> float:
    """Where a time split cuts a run by default [fraction of the run].

    The middle of the run, unless fewer than ``k`` complete evaluations of the run end
    before it, ``k = 2`` when the run has three or more evaluations, else ``k = 1``; then
    the middle of the training block after the ``k``-th evaluation.  Why: a forecast needs
    at least one evaluation to calibrate the evaluations on, and an evaluation *cadence*
    is a gap between two of them; the first evaluation also carries one-time set-up
    (:mod:`powerlab.calibration.profile`, *One-time costs*), so only a second one shows a
    recurring evaluation.  The rule reads only the run's own evaluation count and times.

    Parameters
    ----------
    evals : DataFrame or MLLogResult
        Evaluation intervals or events (:func:`powerlab.calibration.profile.eval_intervals`).
    run_start, run_stop : Timestamp
        The run (UTC); evaluations outside it are not counted.
    """
    r0, r1 = pd.Timestamp(run_start), pd.Timestamp(run_stop)
    ev = eval_intervals(evals).sort_values("start_utc")
    ev = ev[(ev["start_utc"] >= r0) & (ev["stop_utc"] <= r1)]
    k = 2 if len(ev) >= 3 else 1
    dur = (r1 - r0).total_seconds()
    if len(ev) <= k or (ev["stop_utc"].iloc[k - 1] - r0).total_seconds() < 0.5 * dur:
        return 0.5
    a, b = ev["stop_utc"].iloc[k - 1], ev["start_utc"].iloc[k]
    return ((a + (b - a) / 2) - r0).total_seconds() / dur


def backtest_split(power: pd.DataFrame, events=None, *, split: float | None = None,
                   meter_interval_s: float | None = None, gpus_per_node: int = 8,
                   source: str | None = None, events_source: str | None = None,
                   gpu_model: str | None = None) -> BacktestResult:
    """Calibrate on the recording up to ``split`` (fraction of the run), forecast the rest.

    Parameters
    ----------
    power : DataFrame
        Node-scope telemetry of one run.
    events : MLLogResult or DataFrame, optional
        The run's training log; only its events before the split are given to the
        calibration (``run_stop`` bounds the scored window).  Without ``run_start`` and
        ``run_stop`` the run is found from the readings
        (:func:`powerlab.calibration.runfind.find_run`) and ``split`` is a fraction of that run.
    gpu_model : str, optional
        The GPU model (the node split's prior; :class:`~powerlab.calibration.calibrate.
        CalibrateOptions`).
    split : float, optional
        Where the run is cut, as a fraction of its duration (0 < split < 1); default
        :func:`split_rule` (the middle of the run, moved after the second evaluation
        when the run has three or more and fewer than two end before the middle).

    Raises
    ------
    AnalysisError
        The calibration part holds no evaluation while the log has some (a split leaving
        no evaluations to calibrate them), or too few readings.
    """
    name = source or "the recording"
    if split is not None and not 0 < split < 1:
        raise PowerlabError(f"--split must be between 0 and 1, got {split!r}")
    evname = events_source or getattr(events, "path", None) or "the events log"
    check_span(power, name)
    found = _found_run(power, events, meter_interval_s, name)
    cal_all = calibrate_job(power, events=events, meter_interval_s=meter_interval_s,
                            gpus_per_node=gpus_per_node, source=name,
                            events_source=evname,
                            start=found.start if found else None,
                            end=found.end if found else None)
    r0, r1 = cal_all.job_start, cal_all.job_end
    if split is None:
        split = split_rule(events, r0, r1) if events is not None else 0.5
    cut = r0 + (r1 - r0) * split
    ev_all = _run_evals(events, r0, r1)
    past = _known_at(events, ev_all, cut, cal_all.training_start,
                     what=f"{evname}: the split at {split:g} of the run ({cut})")
    running = _eval_under_way(past, cut)
    cal = calibrate_job(power, events=past, start=r0, end=running,
                        meter_interval_s=cal_all.meter_interval_s,
                        gpus_per_node=gpus_per_node, source=name, gpu_model=gpu_model)
    job_start, startup = _resumed_job(cal, ev_all, cut, running)
    dur = (r1 - job_start).total_seconds()   # the job ends at run_stop (its end phase)
    table, ser, fev = _score_window(cal, power, events, job_start=job_start,
                                    startup=startup, t0=cut, t1=r1, duration_s=dur,
                                    run="split")
    notes = [found.describe()] if found else []
    notes += _regime(power, events, cal, cut, r1)
    return BacktestResult(metrics=table, calibration=cal, series={"split": ser},
                          mode="split", forecast_evals={"split": fev}, split=float(split),
                          run_notes=notes)


def _run_evals(events, r0, r1) -> pd.DataFrame | None:
    """The evaluations of the run (some logs evaluate after ``run_stop``); None without
    events."""
    if events is None:
        return None
    ev_all = eval_intervals(events)
    return ev_all[(ev_all["start_utc"] >= r0) & (ev_all["stop_utc"] <= r1)]


def _known_at(events, ev_all, cut, training_start, *, what: str):
    """The events known at the split ``cut`` (None without events); an AnalysisError
    when no complete evaluation after ``training_start`` ends before it while the run
    has some."""
    if events is None:
        return None
    ev = getattr(events, "events", events)
    past = ev[ev["timestamp"] < cut] if "timestamp" in ev else \
        ev_all[ev_all["stop_utc"] < cut]
    n_past = int(((ev_all["start_utc"] >= training_start)
                  & (ev_all["stop_utc"] < cut)).sum())
    if len(ev_all) and n_past == 0:
        raise AnalysisError(f"{what} leaves no complete evaluation before it to calibrate "
                            f"(the log has {len(ev_all)}, the first ending "
                            f"{ev_all['stop_utc'].min()}); move the split later")
    return past


def _eval_under_way(past, cut):
    """Where the calibration stops: the start of an evaluation begun but not ended at the
    split (its readings are not training), else the split."""
    if past is not None and "key" in past:
        st = past.loc[past["key"] == "eval_start", "timestamp"]
        sp = past.loc[past["key"] == "eval_stop", "timestamp"]
        if len(st) and (sp.empty or st.max() > sp.max()):
            return min(cut, st.max())
    return cut


def _resumed_job(cal: Calibration, ev_all, cut, running):
    """Where the forecast job resumes and its start-up: at the end of the last evaluation
    known at the split (no start-up); an evaluation under way at the split is the resumed
    job's start-up, as long as a calibrated one at the evaluation level."""
    done = ev_all[ev_all["stop_utc"] < cut] if ev_all is not None else None
    job_start = done["stop_utc"].max() if done is not None and len(done) else \
        cal.training_start
    startup = False
    job = cal.job()
    if running < cut and "eval" in job:
        job_start = running
        startup = (job["eval"]["duration_s"], job["power"]["eval_w"])
    return job_start, startup


def _found_run(power, events, meter_interval_s, name):
    """The run found from the readings (:func:`powerlab.calibration.runfind.find_run`) when the
    events give no ``run_start`` and ``run_stop``, else None."""
    ev = getattr(events, "events", events)
    keys = set(ev["key"]) if isinstance(ev, pd.DataFrame) and "key" in ev else set()
    if {"run_start", "run_stop"} <= keys:
        return None
    return find_run(_scope_rows(power, name), meter_interval_s=meter_interval_s, name=name)


def _scope_rows(power, name) -> pd.DataFrame:
    """The readings with power of the scope the calibration uses (node when present)."""
    if not isinstance(power, pd.DataFrame) or "power_w" not in power:
        raise PowerlabError(f"{name}: no power readings")
    df = power[power["power_w"].notna()]
    if df.empty:
        raise PowerlabError(f"{name}: no power readings")
    scopes = df["scope"].dropna().unique().tolist() if "scope" in df else []
    if not scopes:
        return df
    return df[df["scope"] == ("node" if "node" in scopes else scopes[0])]


def _regime(power, events, cal, cut, r1) -> list[str]:
    """:func:`powerlab.calibration.runfind.regime_notes` on the measured training readings of
    the calibration part and of the held-out part (evaluations left out)."""
    df = _scope_rows(power, "the recording")

    def part(a, b):
        y = summed_readings(df[(df["timestamp"] >= a) & (df["timestamp"] <= b)],
                            every_s=1.0)
        if events is not None:
            for e0, e1 in zip(*(eval_intervals(events)[k] for k in ("start_utc",
                                                                      "stop_utc"))):
                y = y[(y.index < e0) | (y.index >= e1 + pd.Timedelta(
                    seconds=2 * cal.meter_interval_s))]
        return y

    return regime_notes(part(cal.training_start, cal.job_end), part(cut, r1),
                        meter_interval_s=cal.meter_interval_s,
                        periodic=cal.has_periodic_step)


def backtest_runs(train: list, test: list, *, meter_interval_s: float | None = None,
                  gpus_per_node: int = 8) -> BacktestResult:
    """Calibrate on training runs, forecast test runs from their own start events.

    Parameters
    ----------
    train, test : list of (name, power, events)
        Runs of one system and job: node telemetry and the training log.  Several training
        runs are calibrated together (their nodes count as separate devices).

    Returns
    -------
    BacktestResult
        ``metrics`` has one block of rows per test run (``run`` = its name).
    """
    if not train or not test:
        raise PowerlabError("a run-to-run backtest needs at least one training and one "
                            "test run")
    parts, evs, names = [], [], []
    for i, (nm, p, e) in enumerate(train):
        names.append(str(nm))
        if e is None:
            raise PowerlabError(f"{nm}: a run-to-run backtest needs each run's events log")
        c = calibrate_job(p, events=e, source=str(nm))   # checks the log matches
        q = p.copy()
        q["host"] = f"r{i}:" + q["host"].astype(str)
        parts.append((q, c))
        evs.append(getattr(e, "events", e))
    if len(parts) == 1:
        cal = calibrate_job(train[0][1], events=train[0][2],
                            meter_interval_s=meter_interval_s, gpus_per_node=gpus_per_node,
                            source=names[0])
    else:
        first = parts[0][1]
        # each run from the end of its own start-up; their nodes count as devices
        both = pd.concat([q[q["timestamp"] >= c.training_start] for q, c in parts],
                         ignore_index=True)
        both = both.sort_values(["host", "timestamp"], kind="stable").reset_index(drop=True)
        ev = pd.concat(evs, ignore_index=True).sort_values("timestamp")
        cal = calibrate_job(both, events=ev.assign(key=ev["key"].where(
            ~ev["key"].isin(["run_start", "run_stop"]))), start=min(c.job_start for _, c
                                                                   in parts),
            end=max(c.job_end for _, c in parts), meter_interval_s=first.meter_interval_s,
            gpus_per_node=gpus_per_node, source="+".join(names),
            training_start=min(c.training_start for _, c in parts))
        # the step test of the runs taken together: every run must show it
        cal = dataclasses.replace(
            cal, periodic_p_value=float(max(c.periodic_p_value for _, c in parts)),
            startup_s=float(np.mean([c.startup_s for _, c in parts])),
            device_startup_w=float(np.nanmean([c.device_startup_w for _, c in parts])),
            devices=first.devices,
            step_halves=next((c.step_halves for _, c in parts if not c.halves_agree),
                             first.step_halves))
    tables, series, fevs = [], {}, {}
    for nm, p, e in test:
        if e is None:
            raise PowerlabError(f"{nm}: a run-to-run backtest needs each run's events log")
        r0, r1 = run_window(p, e, name=str(nm))  # its own start and stop events only
        t, s, fev = _score_window(cal, p, e, job_start=r0, startup=True, t0=r0, t1=r1,
                                  duration_s=(r1 - r0).total_seconds(),
                                  run=str(nm))
        tables.append(t)
        series[str(nm)] = s
        fevs[str(nm)] = fev
    return BacktestResult(metrics=pd.concat(tables, ignore_index=True), calibration=cal,
                          series=series, mode="runs", forecast_evals=fevs)
