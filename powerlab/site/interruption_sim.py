"""The interruption process of one job alone, without power: the engine's randomness and
plan (:mod:`powerlab.site.engine`) with the rules of :mod:`powerlab.reliability.interruptions`,
fast enough for the 54 days of the Llama 3 snapshot at 1-s ticks.
"""

from __future__ import annotations

import pandas as pd

from ..reliability.interruption_draws import interruption_marks, interruption_stats, planned_mask
from .jobplan import job_plan
from .randomness import job_randomness
from .timebase import to_ticks

__all__ = ["simulate_interruptions"]


def simulate_interruptions(job, *, draws: int = 20, seed: int = 0, tick_s: float = 1.0,
                           job_index: int = 0) -> pd.DataFrame:
    """The interruption process of one job alone, without power (fast).

    Runs the engine's randomness and plan (:func:`~powerlab.site.randomness.job_randomness`,
    :func:`~powerlab.site.engine.job_plan`) exactly as :func:`forecast` does for a job
    starting at tick 0.

    Returns
    -------
    DataFrame
        One row per draw: ``interruptions``, ``planned_interruptions``,
        ``unexpected_interruptions``, ``downtime_s``, ``train_s``,
        ``lost_to_failures_s``, ``effective_training_time``.
    """
    e = to_ticks(job.duration_s, tick_s)
    rows = []
    for d in range(draws):
        rnd = job_randomness(job, tick_s, seed, d, job_index, 0, e)
        marks = interruption_marks(job.interruptions, seed, d, job_index,
                                   len(rnd.failure_ticks))
        plan = job_plan(job, tick_s, 0, e, rnd.failure_ticks,
                        planned=planned_mask(job.interruptions, marks))
        st = interruption_stats(job, plan, marks, 0, rnd.failure_ticks, tick_s)
        st["unexpected_interruptions"] = st["interruptions"] - st["planned_interruptions"]
        st.update(train_s=plan.train_ticks * tick_s, lost_to_failures_s=plan.lost_ticks
                  * tick_s)
        rows.append(st)
    return pd.DataFrame(rows, index=pd.RangeIndex(draws, name="draw"))
