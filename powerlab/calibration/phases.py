"""The phases of a real run that a cadence from ``run_start`` misses (:func:`run_phases`):
the warm-up block, the first evaluation's own offset and the end of the run.

Rules (the same for every recording)
------------------------------------
- **First evaluation**: with two or more evaluations in the window, the training time
  from the end of the start-up to the first evaluation's ``eval_start`` (scenario
  ``eval.first_s``); the later ones follow every ``eval.interval_s``.  With fewer, the
  first evaluation is placed one interval in, as before.
- **Warm-up block**: with two or more evaluations and the training level taken from the
  training after the first evaluation (:mod:`powerlab.calibration.profile`, one-time
  costs), the first training block (end of the start-up to the first ``eval_start``) is
  a warm-up phase at its own level (each node's mean over the readings wholly inside
  it, an unlogged dip before the evaluation included) when that level differs from the
  later training by more than :data:`WARMUP_MIN_DIFFERENCE`; scenario ``warmup_s`` /
  ``power.warmup_w``.
- **End of run**: an MLPerf run stops at the evaluation that reaches the target
  (``run_stop`` follows that ``eval_stop``), so the run ends with an evaluation, not at
  the training level.  When the window holds ``run_stop`` and the log's last evaluation
  ends within :data:`END_GAP_S` (or two meter intervals) before it, the end phase lasts
  from that evaluation's start to ``run_stop`` and its level is each node's mean over
  the readings wholly inside it (at least two meter intervals long; a shorter one is at
  the calibrated evaluation level, what the meter cannot resolve); otherwise, with evaluations calibrated, the end phase is one evaluation at
  the evaluation level (a prior from the MLPerf rules, stated as such).  The scenario
  carries it as the job's ``shutdown_s`` / ``power.shutdown_w``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .windows import eval_intervals

__all__ = ["END_GAP_S", "run_phases"]

#: Largest gap between the last ``eval_stop`` and ``run_stop`` for the run to end with it [s].
END_GAP_S = 5.0
#: Smallest relative difference of the first block from the later training for a
#: warm-up phase [-].
WARMUP_MIN_DIFFERENCE = 0.01


def _evals(events, a, b) -> pd.DataFrame:
    if events is None:
        return pd.DataFrame(columns=["start_utc", "stop_utc"])
    try:
        ev = eval_intervals(events).sort_values("start_utc")
    except Exception:   # noqa: BLE001 - events without evaluations
        return pd.DataFrame(columns=["start_utc", "stop_utc"])
    return ev[(ev["start_utc"] >= a) & (ev["stop_utc"] <= b)]


def _warmup(fit, df, t_train, first_eval, w) -> dict:
    """The first training block as a warm-up when it differs from the later training
    (module rules); empty when it does not, or when the training level is that block's."""
    later = "after the first evaluation" in str(fit.params.loc["device_train_mean_w",
                                                              "source"])
    ts = df["timestamp"]
    inside = (ts - pd.Timedelta(seconds=w) >= t_train) & (ts <= first_eval)
    per = df.loc[inside].groupby("host", observed=True)["power_w"].mean()
    dur = float((first_eval - t_train).total_seconds())
    if not later or per.empty or dur < 2 * w:
        return {}
    level = float(per.mean())
    ratio = level / fit.device_train_mean_w
    if abs(ratio - 1.0) <= WARMUP_MIN_DIFFERENCE:
        return {}
    return {"warmup_s": dur, "warmup_device_w": level,
            "warmup_source": f"measured: the first training block ({dur:.1f} s, "
            f"{int(inside.sum())} readings) at {ratio:.1%} of the later training level"}


def run_phases(fit, df, events, t_train, job_end, run_stop, w: float) -> dict:
    """``{"eval_first_s", "eval_first_source", "end_s", "end_device_w", "end_source"}``
    (module rules); ``nan`` / empty where the data give none."""
    out = {"eval_first_s": float("nan"), "eval_first_source": "",
           "end_s": 0.0, "end_device_w": float("nan"), "end_source": "",
           "warmup_s": 0.0, "warmup_device_w": float("nan"), "warmup_source": ""}
    ev = _evals(events, t_train, job_end + pd.Timedelta(seconds=1))
    if len(ev) >= 2:
        out["eval_first_s"] = float((ev["start_utc"].iloc[0] - t_train).total_seconds())
        out["eval_first_source"] = ("events: training time from the end of the start-up to "
                                    "the first eval_start")
        out.update(_warmup(fit, df, t_train, ev["start_utc"].iloc[0], w))
    gap = max(END_GAP_S, 2 * w)
    holds_stop = run_stop is not None and job_end >= run_stop - pd.Timedelta(seconds=1)
    if holds_stop and len(ev):
        a, b = ev["start_utc"].iloc[-1], ev["stop_utc"].iloc[-1]
        if (run_stop - b).total_seconds() <= gap:
            dur = float((run_stop - a).total_seconds())
            ts = df["timestamp"]
            inside = (ts - pd.Timedelta(seconds=w) >= a) & (ts <= run_stop)
            per = df.loc[inside].groupby("host", observed=True)["power_w"].mean()
            if dur >= 2 * w and len(per):
                out.update(end_s=dur, end_device_w=float(per.mean()),
                           end_source=f"measured: the last evaluation to run_stop ({dur:.1f} "
                           f"s), mean of the {int(inside.sum())} readings wholly inside it")
            else:   # too short for the meter: its length from the log, the eval level
                out.update(end_s=dur, end_device_w=float("nan"),
                           end_source=f"events: the last evaluation to run_stop ({dur:.1f} "
                           f"s, shorter than two {w:g}-s meter intervals), at the "
                           "evaluation level")
            return out
    if fit.evals_used and np.isfinite(fit.eval_duration_s) and fit.eval_duration_s > 0:
        # level nan: the calibrated evaluation level (Calibration.device_eval_w)
        out.update(end_s=float(fit.eval_duration_s), end_device_w=float("nan"),
                   end_source="prior (MLPerf rules: a run stops at the evaluation that "
                   "reaches the target): one evaluation at the evaluation level")
    return out
