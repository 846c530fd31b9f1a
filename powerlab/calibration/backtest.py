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

Scores (:data:`METRICS`): energy; 1-min mean power MAPE and bias (whole minutes from the
window's start); the step oscillation's trough and peak (median over training time of the
lowest and highest value within one step) and its period (periodogram peak between half
and twice the calibrated step); evaluation dip depth (mean over the window's evaluations
of the mean 30 s before each against the evaluation from two meter intervals after its
start); evaluation start error (forecast evaluation events against the log's); the
largest rise and fall between consecutive 1-s means; the largest max-minus-min within one
minute of the 1-s means.  A score the recording cannot give (no evaluation in the window,
no whole minute) is ``nan``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import signal

from .._summary import Summary
from ..exceptions import AnalysisError, PowerlabError
from .calibrate import Calibration, calibrate_job, run_window, summed_readings
from .profile import eval_intervals
from .runfind import find_run, regime_notes

__all__ = ["METRICS", "BacktestResult", "backtest_runs", "backtest_split", "score",
           "split_rule"]

#: metric -> unit, in the order of ``backtest.csv``.
METRICS = {
    "energy_j": "J",
    "mean_power_w": "W",
    "mape_1min_pct": "%",
    "bias_1min_pct": "%",
    "step_trough_w": "W",
    "step_peak_w": "W",
    "step_swing_w": "W",
    "step_period_s": "s",
    "eval_dip_depth_w": "W",
    "eval_start_error_s": "s",
    "ramp_up_1s_w_per_s": "W/s",
    "ramp_down_1s_w_per_s": "W/s",
    "swing_1min_w": "W",
}
GRID_S = 0.1


@dataclass
class BacktestResult:
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
        if not self.ramp_resolved:
            notes.append("the meter does not resolve a periodic step: the step swing, its "
                         "period and the 1-s ramps are not a test of the model here.")
        return notes

    def _repr_html_(self) -> str:
        return self.summary().as_html()


def _forecast_through_meters(cal: Calibration, power: pd.DataFrame, *, job_start,
                             startup: bool, horizon, duration_s: float):
    """Forecast the job from ``job_start`` and read it at ``power``'s own instants."""
    from ..site.engine import forecast
    from ..site.scenario import parse_scenario
    from .meter import Meter, meter_forecast

    step = cal.fit.step_time_s
    spec = cal.scenario_spec(name="backtest", start=job_start, duration_s=duration_s,
                             horizon=horizon, tick_s=step / math.ceil(step / 0.01))
    job = spec["jobs"][0]
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
    meas = meas.dropna()
    if meas.empty:
        raise AnalysisError("no readings in the forecast window")
    n = meas["host"].nunique()
    fc = pd.concat([meter_forecast(res, Meter(w), times=g["timestamp"], share=1 / n)
                    .assign(host=h) for h, g in meas.groupby("host", observed=True)],
                   ignore_index=True)
    return res, meas, fc.dropna(subset=["power_w"])


def score(measured: pd.Series, forecast: pd.Series, *, step_time_s: float, evals=None,
          forecast_evals=None, meter_interval_s: float = 2.0) -> dict:
    """Scores of a forecast against a measurement on one regular grid (see module doc).

    Returns
    -------
    dict
        metric -> (measured, forecast) for levels, or (nan, score) for MAPE and bias.
    """
    ym, yf = measured, forecast
    dt = (ym.index[1] - ym.index[0]).total_seconds()
    out = {}
    span = len(ym) * dt
    out["energy_j"] = (float(ym.sum() * dt), float(yf.sum() * dt))
    out["mean_power_w"] = (float(ym.mean()), float(yf.mean()))
    n_min = int(span // 60)
    per = round(60 / dt)
    if n_min:
        a = ym.to_numpy()[:n_min * per].reshape(n_min, per).mean(axis=1)
        b = yf.to_numpy()[:n_min * per].reshape(n_min, per).mean(axis=1)
        out["mape_1min_pct"] = (np.nan, float(100 * np.mean(np.abs(b - a) / a)))
        out["bias_1min_pct"] = (np.nan, float(100 * np.mean((b - a) / a)))
    else:
        out["mape_1min_pct"] = out["bias_1min_pct"] = (np.nan, np.nan)
    idx = ym.index
    evi = eval_intervals(evals) if evals is not None else pd.DataFrame(
        columns=["start_utc", "stop_utc"])
    train = np.ones(len(idx), bool)
    for a, b in zip(evi["start_utc"], evi["stop_utc"]):
        train &= ~((idx >= a - pd.Timedelta(seconds=meter_interval_s))
                   & (idx < b + pd.Timedelta(seconds=2 * meter_interval_s)))
    n_step = max(2, round(step_time_s / dt))

    def swing(x):
        s = pd.Series(np.where(train, x.to_numpy(), np.nan), index=idx)
        roll = s.rolling(n_step, center=True, min_periods=n_step)
        lo, hi = roll.min().dropna(), roll.max().dropna()
        if lo.empty:  # no whole step of training between the evaluations
            return np.nan, np.nan
        return float(lo.median()), float(hi.median())

    if train.sum() > 2 * n_step:
        (tm, pm), (tf, pf) = swing(ym), swing(yf)
    else:
        tm = pm = tf = pf = np.nan
    out["step_trough_w"], out["step_peak_w"] = (tm, tf), (pm, pf)
    out["step_swing_w"] = (pm - tm, pf - tf)

    def period(x):
        v = x.to_numpy()
        if len(v) < 4 * n_step:
            return np.nan
        fr, pxx = signal.periodogram(v, fs=1 / dt, window="hann",
                                     nfft=int(2 ** np.ceil(np.log2(len(v) * 16))),
                                     detrend="linear")
        lo_f = 1 / (2 * step_time_s)
        hi_f = min(2 / step_time_s, 1 / (2 * meter_interval_s))
        band = (fr > lo_f) & (fr < hi_f)
        return float(1.0 / fr[band][np.argmax(pxx[band])]) if band.any() else np.nan

    out["step_period_s"] = (period(ym), period(yf))
    later = evi[(evi["start_utc"] > idx[0] + pd.Timedelta(seconds=30))
                & (evi["stop_utc"] < idx[-1])]
    off = pd.Timedelta(seconds=2 * meter_interval_s)
    later = later[(later["stop_utc"] - later["start_utc"]) > off + pd.Timedelta(seconds=1)]

    def dip(x, a, b):
        before = x[(x.index >= a - pd.Timedelta(seconds=30)) & (x.index < a)].mean()
        return before - x[(x.index >= a + off) & (x.index < b)].mean()

    if len(later):
        out["eval_dip_depth_w"] = tuple(float(np.mean([dip(x, a, b) for a, b in zip(
            later["start_utc"], later["stop_utc"])])) for x in (ym, yf))
    else:
        out["eval_dip_depth_w"] = (np.nan, np.nan)
    inwin = evi[(evi["start_utc"] >= idx[0]) & (evi["start_utc"] <= idx[-1])]
    if forecast_evals is not None and len(forecast_evals) and len(inwin):
        fe = pd.DatetimeIndex(forecast_evals)
        errs = [float((fe - a).total_seconds()[np.argmin(np.abs((fe - a).total_seconds()))])
                for a in inwin["start_utc"]]
        out["eval_start_error_s"] = (np.nan, float(np.max(np.abs(errs))))
    else:
        out["eval_start_error_s"] = (np.nan, np.nan)

    def ramps(x):
        s1 = x.groupby(x.index.floor("1s")).mean()
        d = np.diff(s1.to_numpy())
        sw = s1.rolling(60, min_periods=60).max() - s1.rolling(60, min_periods=60).min()
        return float(d.max()), float(-d.min()), float(sw.max())

    (um, dm, sm), (uf, df_, sf) = ramps(ym), ramps(yf)
    out["ramp_up_1s_w_per_s"] = (um, uf)
    out["ramp_down_1s_w_per_s"] = (dm, df_)
    out["swing_1min_w"] = (sm, sf)
    return out


def _table(run: str, scores: dict) -> pd.DataFrame:
    rows = []
    for k, unit in METRICS.items():
        m, f = scores.get(k, (np.nan, np.nan))
        if k in ("mape_1min_pct", "bias_1min_pct", "eval_start_error_s"):
            err, pct = f, np.nan
        else:
            err = f - m
            pct = 100 * err / abs(m) if np.isfinite(m) and m != 0 else np.nan
        rows.append({"run": run, "metric": k, "measured": m, "forecast": f, "error": err,
                     "error_pct": pct, "unit": unit})
    return pd.DataFrame(rows)


def _score_window(cal, power, events, *, job_start, startup, t0, t1, duration_s, run):
    res, meas, fc = _forecast_through_meters(cal, power, job_start=job_start,
                                             startup=startup, horizon=(t0, t1),
                                             duration_s=duration_s)
    w = cal.meter_interval_s
    start = t0 + pd.Timedelta(seconds=3 * w)
    ym = summed_readings(meas.assign(scope="node"), every_s=GRID_S, start=start, end=t1)
    yf = summed_readings(fc.assign(scope="node"), every_s=GRID_S, start=start, end=t1)
    ok = ym.notna() & yf.notna()
    ym, yf = ym[ok], yf[ok]
    if len(ym) < round(10 * w / GRID_S):
        raise AnalysisError(f"{run}: the forecast window {t0} .. {t1} holds too few "
                            "readings to score")
    fev = res.events.loc[res.events["event"] == "eval", "timestamp"] \
        if "event" in res.events else None
    sc = score(ym, yf, step_time_s=cal.fit.step_time_s, evals=events,
               forecast_evals=fev, meter_interval_s=w)
    return (_table(run, sc), pd.DataFrame({"measured_w": ym, "forecast_w": yf}),
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
                   source: str | None = None, events_source: str | None = None
                   ) -> BacktestResult:
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
    past = None
    ev_all = eval_intervals(events) if events is not None else None
    if ev_all is not None:  # evaluations of the run (some logs evaluate after run_stop)
        ev_all = ev_all[(ev_all["start_utc"] >= r0) & (ev_all["stop_utc"] <= r1)]
    if events is not None:
        ev = getattr(events, "events", events)
        past = ev[ev["timestamp"] < cut] if "timestamp" in ev else \
            ev_all[ev_all["stop_utc"] < cut]
        n_past = int(((ev_all["start_utc"] >= cal_all.training_start)
                      & (ev_all["stop_utc"] < cut)).sum())
        if len(ev_all) and n_past == 0:
            raise AnalysisError(f"{evname}: the split at {split:g} of the run ({cut}) leaves "
                                f"no complete evaluation before it to calibrate (the log "
                                f"has {len(ev_all)}, the first ending "
                                f"{ev_all['stop_utc'].min()}); move the split later")
    # an evaluation begun but not ended at the split is known to be running: the
    # calibration stops at its start (its readings are not training)
    end = running = cut
    if past is not None and "key" in past:
        st = past.loc[past["key"] == "eval_start", "timestamp"]
        sp = past.loc[past["key"] == "eval_stop", "timestamp"]
        if len(st) and (sp.empty or st.max() > sp.max()):
            end = running = min(cut, st.max())
    cal = calibrate_job(power, events=past, start=r0, end=end,
                        meter_interval_s=cal_all.meter_interval_s,
                        gpus_per_node=gpus_per_node, source=name)
    # the job resumes at the end of the last evaluation known at the split; an evaluation
    # under way at the split is the resumed job's start-up, as long as a calibrated one
    done = ev_all[ev_all["stop_utc"] < cut] if ev_all is not None else None
    job_start = done["stop_utc"].max() if done is not None and len(done) else \
        cal.training_start
    startup = False
    job = cal.job()
    if running < cut and "eval" in job:
        job_start = running
        startup = (job["eval"]["duration_s"], job["power"]["eval_w"])
    dur = (r1 - job_start).total_seconds() + 60.0
    table, ser, fev = _score_window(cal, power, events, job_start=job_start,
                                    startup=startup, t0=cut, t1=r1, duration_s=dur,
                                    run="split")
    notes = [found.describe()] if found else []
    notes += _regime(power, events, cal, cut, r1)
    return BacktestResult(metrics=table, calibration=cal, series={"split": ser},
                          mode="split", forecast_evals={"split": fev}, split=float(split),
                          run_notes=notes)


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
            devices=first.devices)
    tables, series, fevs = [], {}, {}
    for nm, p, e in test:
        if e is None:
            raise PowerlabError(f"{nm}: a run-to-run backtest needs each run's events log")
        r0, r1 = run_window(p, e, name=str(nm))  # its own start and stop events only
        t, s, fev = _score_window(cal, p, e, job_start=r0, startup=True, t0=r0, t1=r1,
                                  duration_s=(r1 - r0).total_seconds() + 60.0,
                                  run=str(nm))
        tables.append(t)
        series[str(nm)] = s
        fevs[str(nm)] = fev
    return BacktestResult(metrics=pd.concat(tables, ignore_index=True), calibration=cal,
                          series=series, mode="runs", forecast_evals=fevs)
