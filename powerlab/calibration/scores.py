"""How a backtest scores a forecast against a measurement on one regular grid
(:func:`score`, used by :mod:`powerlab.calibration.backtest`).

Scores (:data:`METRICS`): energy, also per phase (training, evaluations, end of run);
the whole minutes scored; 1-min mean power MAPE and bias (refused under
:data:`MIN_SCORED_MINUTES`) (whole minutes from the
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

import numpy as np
import pandas as pd
from scipy import signal

from .windows import eval_intervals

__all__ = ["METRICS", "MIN_SCORED_MINUTES", "score", "score_table"]

#: metric -> unit, in the order of ``backtest.csv``.
METRICS = {
    "energy_j": "J",
    "energy_train_j": "J",
    "energy_eval_j": "J",
    "energy_end_j": "J",
    "mean_power_w": "W",
    "scored_minutes": "min",
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
    evi = eval_intervals(evals) if evals is not None else pd.DataFrame(
        columns=["start_utc", "stop_utc"])
    return {**_level_scores(ym, yf, dt),
            **_phase_energy(ym, yf, dt, evi, meter_interval_s),
            **_step_scores(ym, yf, dt, evi, step_time_s, meter_interval_s),
            **_eval_scores(ym, yf, evi, forecast_evals, meter_interval_s),
            **_ramp_scores(ym, yf)}


#: Whole minutes a 1-min MAPE (and bias) needs; fewer: refused (``nan``, with a note) [-].
MIN_SCORED_MINUTES = 10


def _level_scores(ym: pd.Series, yf: pd.Series, dt: float) -> dict:
    """Energy, mean power, the whole minutes scored, and the MAPE and bias of
    whole-minute means (from the window's start; ``nan`` under
    :data:`MIN_SCORED_MINUTES`: a MAPE of a few minutes is the error of those minutes,
    not a rate)."""
    out = {}
    span = len(ym) * dt
    out["energy_j"] = (float(ym.sum() * dt), float(yf.sum() * dt))
    out["mean_power_w"] = (float(ym.mean()), float(yf.mean()))
    n_min = int(span // 60)
    per = round(60 / dt)
    out["scored_minutes"] = (float(n_min), float(n_min))
    if n_min >= MIN_SCORED_MINUTES:
        a = ym.to_numpy()[:n_min * per].reshape(n_min, per).mean(axis=1)
        b = yf.to_numpy()[:n_min * per].reshape(n_min, per).mean(axis=1)
        out["mape_1min_pct"] = (np.nan, float(100 * np.mean(np.abs(b - a) / a)))
        out["bias_1min_pct"] = (np.nan, float(100 * np.mean((b - a) / a)))
    else:
        out["mape_1min_pct"] = out["bias_1min_pct"] = (np.nan, np.nan)
    return out


def _step_scores(ym: pd.Series, yf: pd.Series, dt: float, evi: pd.DataFrame,
                 step_time_s: float, meter_interval_s: float) -> dict:
    """The step oscillation's trough, peak and swing over training time (evaluations and
    the meter intervals around them left out), and its period."""
    idx = ym.index
    train = np.ones(len(idx), bool)
    for a, b in zip(evi["start_utc"], evi["stop_utc"]):
        train &= ~((idx >= a - pd.Timedelta(seconds=meter_interval_s))
                   & (idx < b + pd.Timedelta(seconds=2 * meter_interval_s)))
    n_step = max(2, round(step_time_s / dt))
    if train.sum() > 2 * n_step:
        (tm, pm), (tf, pf) = (_swing(x, train, n_step, idx) for x in (ym, yf))
    else:
        tm = pm = tf = pf = np.nan
    return {"step_trough_w": (tm, tf), "step_peak_w": (pm, pf),
            "step_swing_w": (pm - tm, pf - tf),
            "step_period_s": tuple(_period(x, dt, n_step, step_time_s, meter_interval_s)
                                   for x in (ym, yf))}


def _swing(x: pd.Series, train: np.ndarray, n_step: int,
           idx: pd.DatetimeIndex) -> tuple[float, float]:
    """Median over training time of the lowest and highest value within one step (``x``
    on the grid ``idx``)."""
    s = pd.Series(np.where(train, x.to_numpy(), np.nan), index=idx)
    roll = s.rolling(n_step, center=True, min_periods=n_step)
    lo, hi = roll.min().dropna(), roll.max().dropna()
    if lo.empty:  # no whole step of training between the evaluations
        return np.nan, np.nan
    return float(lo.median()), float(hi.median())


def _period(x: pd.Series, dt: float, n_step: int, step_time_s: float,
            meter_interval_s: float) -> float:
    """Periodogram peak between half and twice the calibrated step (below the meter's
    Nyquist frequency) [s]."""
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


def _phase_energy(ym: pd.Series, yf: pd.Series, dt: float, evi: pd.DataFrame,
                  meter_interval_s: float) -> dict:
    """Energy per phase of the log: evaluations (``eval_start`` .. ``eval_stop`` plus one
    meter interval, the readings' lag), the end of the run (the last evaluation when it
    ends within 5 s or two meter intervals of the window's end: the run stops on it) and
    training (the rest); ``nan`` for a phase the window does not hold."""
    idx = ym.index
    lag = pd.Timedelta(seconds=meter_interval_s)
    ev = evi[(evi["stop_utc"] > idx[0]) & (evi["start_utc"] < idx[-1])].sort_values(
        "start_utc")
    is_eval = np.zeros(len(idx), bool)
    is_end = np.zeros(len(idx), bool)
    gap = pd.Timedelta(seconds=max(5.0, 2 * meter_interval_s))
    for i, (a, b) in enumerate(zip(ev["start_utc"], ev["stop_utc"])):
        m = (idx >= a) & (idx < b + lag)
        if i == len(ev) - 1 and b >= idx[-1] - gap:
            is_end |= (idx >= a)
        else:
            is_eval |= m
    is_eval &= ~is_end
    out = {}
    for name, m in (("energy_eval_j", is_eval), ("energy_end_j", is_end),
                    ("energy_train_j", ~(is_eval | is_end))):
        out[name] = ((float(ym[m].sum() * dt), float(yf[m].sum() * dt)) if m.any()
                     else (np.nan, np.nan))
    return out


def _eval_scores(ym: pd.Series, yf: pd.Series, evi: pd.DataFrame, forecast_evals,
                 meter_interval_s: float) -> dict:
    """Evaluation dip depth (mean over the window's evaluations of the mean 30 s before
    each against the evaluation from two meter intervals after its start) and the
    largest start error of the forecast's evaluations against the log's."""
    out = {}
    idx = ym.index
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
    return out


def _ramp_scores(ym: pd.Series, yf: pd.Series) -> dict:
    """The largest rise and fall between consecutive 1-s means, and the largest
    max-minus-min within one minute of them."""

    def ramps(x):
        s1 = x.groupby(x.index.floor("1s")).mean()
        d = np.diff(s1.to_numpy())
        sw = s1.rolling(60, min_periods=60).max() - s1.rolling(60, min_periods=60).min()
        return float(d.max()), float(-d.min()), float(sw.max())

    (um, dm, sm), (uf, df_, sf) = ramps(ym), ramps(yf)
    return {"ramp_up_1s_w_per_s": (um, uf), "ramp_down_1s_w_per_s": (dm, df_),
            "swing_1min_w": (sm, sf)}


def score_table(run: str, scores: dict) -> pd.DataFrame:
    """The scores of one run as rows of ``backtest.csv`` (:data:`METRICS` order): measured,
    forecast, error (forecast minus measured; for MAPE, bias and the evaluation start
    error the score itself) and error as a percentage of the measured value."""
    rows = []
    for k, unit in METRICS.items():
        m, f = scores.get(k, (np.nan, np.nan))
        if k in ("mape_1min_pct", "bias_1min_pct", "eval_start_error_s", "scored_minutes"):
            err, pct = f, np.nan
        else:
            err = f - m
            pct = 100 * err / abs(m) if np.isfinite(m) and m != 0 else np.nan
        rows.append({"run": run, "metric": k, "measured": m, "forecast": f, "error": err,
                     "error_pct": pct, "unit": unit})
    return pd.DataFrame(rows)
