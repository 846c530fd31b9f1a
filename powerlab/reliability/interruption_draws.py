"""A forecast's interruptions, draw by draw: what the engine draws and records of the
interruption model (:mod:`powerlab.reliability.interruptions`).

- :func:`interruption_marks` - the cause of each arrival of a job's interruption process,
  from a random stream of its own (so that adding causes never changes a draw's per-GPU
  timing offsets), and :func:`planned_mask`, which arrivals are planned;
- :func:`interruption_stats` - a job's interruptions, downtime and effective training
  time in one draw (columns of the forecast's ``throughput``);
- :func:`cause_rows` and :func:`interruption_frame` - the arrivals by cause (the
  forecast's ``interruptions`` table);
- :func:`interruption_summary` - their medians over the draws of a forecast, with the
  recovery split of one unexpected interruption.

The engine (:mod:`powerlab.site.engine`) and :mod:`powerlab.site.interruption_sim` call
them; the arrivals themselves come from :func:`powerlab.site.randomness.job_randomness`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .interruptions import PLANNED, InterruptionModel

__all__ = [
    "cause_rows",
    "interruption_frame",
    "interruption_marks",
    "interruption_stats",
    "interruption_summary",
    "planned_mask",
]


def interruption_marks(model: InterruptionModel | None, seed: int, draw: int,
                       job_index: int, n: int) -> np.ndarray:
    """Cause index (into :attr:`InterruptionModel.all_causes`) of each of ``n`` arrivals.

    Drawn from ``numpy.random.default_rng([seed, draw, job_index, 1])``, a stream of its
    own.  Without a model every arrival is an unexpected failure of cause 0.
    """
    if model is None or n == 0:
        return np.zeros(n, np.int64)
    rng = np.random.default_rng([int(seed), int(draw), int(job_index), 1])
    p = model.probabilities()
    return rng.choice(len(p), size=n, p=p).astype(np.int64)


def planned_mask(model: InterruptionModel | None, marks: np.ndarray) -> np.ndarray | None:
    """Which arrivals are planned (None without a model)."""
    if model is None:
        return None
    return marks == len(model.causes)


def interruption_stats(job, plan, marks: np.ndarray, start_tick: int,
                       failure_ticks: np.ndarray, tick_s: float) -> dict:
    """Per-draw interruption figures of one job (for the engine's throughput frame).

    Returns
    -------
    dict
        ``interruptions``, ``planned_interruptions``, ``downtime_s`` (from each
        interruption to the end of its downtime, start-up excluded) and
        ``effective_training_time`` ([-], see :mod:`powerlab.reliability.interruptions`).
    """
    n_arr = sum(1 for _, name, _ in plan.events if name in ("failure", "planned_interruption"))
    n_planned = sum(1 for _, name, _ in plan.events if name == "planned_interruption")
    down = sum(d for _, name, d in plan.events if name in ("failure", "planned_interruption"))
    alloc_s = job.duration_s
    eff = (plan.train_ticks - plan.lost_ticks) * tick_s / alloc_s if alloc_s > 0 else 0.0
    return {"interruptions": n_arr, "planned_interruptions": n_planned,
            "downtime_s": down * tick_s, "effective_training_time": eff}


def cause_rows(job, model, marks, start_tick, failure_ticks, stop_tick, draw) -> list:
    """``(draw, job, tick, cause, planned)`` rows of the arrivals that count (before the
    job's shutdown)."""
    causes = model.all_causes if model is not None else ("failure", PLANNED)
    out = []
    for f, m in zip(failure_ticks.tolist(), marks.tolist()):
        tk = start_tick + int(f)
        if tk < stop_tick:
            out.append((draw, job.name, tk, causes[m], causes[m] == PLANNED))
    return out


def interruption_summary(res) -> pd.DataFrame:
    """Per job: interruptions per draw (median, planned), downtime, effective training
    time (median and p10 over draws) [-] and the recovery split of one unexpected
    interruption (detection, drain, reschedule, start-up [s]; a plain ``failures:``
    section's ``restart_s`` is shown as reschedule); empty without any rate."""
    t = res.throughput
    if "interruptions" not in t.columns or not (t["interruptions"] > 0).any():
        return pd.DataFrame()
    g = t.groupby("job", sort=False)
    out = pd.DataFrame({
        "interruptions (median)": g["interruptions"].median(),
        "planned (median)": g["planned_interruptions"].median(),
        "downtime_s (median)": g["downtime_s"].median(),
        "effective_training_time (median)": g["effective_training_time"].median(),
        "effective_training_time (p10)": g["effective_training_time"].quantile(0.1),
    })
    # the recovery split of one unexpected interruption [s]
    jobs = {j.name: j for j in res.scenario.jobs}
    for col, attr in (("detection_s", "detection_s"), ("drain_s", "drain_s"),
                      ("reschedule_s", "reschedule_s")):
        out[f"restart: {col}"] = [
            getattr(jobs[n].interruptions, attr) if jobs[n].interruptions is not None
            else (jobs[n].restart_s if attr == "reschedule_s" else 0.0) for n in out.index]
    out["restart: startup_s"] = [jobs[n].startup_s for n in out.index]
    return out


def interruption_frame(rows: list, start_utc, tick_s: float) -> pd.DataFrame:
    """The engine's arrivals as a frame: ``draw, timestamp, job, cause, planned``."""
    df = pd.DataFrame(rows, columns=["draw", "job", "tick", "cause", "planned"])
    ts = pd.Timestamp(start_utc) + pd.to_timedelta(df["tick"].to_numpy() * tick_s, unit="s")
    df.insert(1, "timestamp", pd.DatetimeIndex(ts).astype("datetime64[ns, UTC]"))
    df["job"] = df["job"].astype("string")
    df["cause"] = df["cause"].astype("string")
    df["planned"] = df["planned"].astype(bool)
    return df.drop(columns="tick")
