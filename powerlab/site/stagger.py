"""Staggered starts: the one rule that delays jobs starting together.

Jobs whose starts fall on the same whole second (counted from the horizon start) are
ranked in scenario order; the job of rank ``k`` starts ``k x stagger_starts_s`` later,
rounded to whole engine ticks, but never so late that its start-up and shutdown no longer
fit in its allocation (the delay is capped at the allocation minus start-up, shutdown and
one tick).  The forecast engine (:mod:`powerlab.site.engine`) and the mitigation search
(:mod:`powerlab.interconnect.sitemodel`) both call :func:`stagger_delay_ticks`, so a
search cannot price a stagger the engine would not run.
"""

from __future__ import annotations

import pandas as pd

from .timebase import to_ticks

__all__ = ["stagger_delay_ticks"]


def stagger_delay_ticks(scenario, t0: pd.Timestamp, tick_s: float,
                        stagger_starts_s: float | None = None) -> list[int]:
    """Start delay of every job of ``scenario`` after staggering [ticks].

    Parameters
    ----------
    scenario : powerlab.site.scenario.Scenario
    t0 : pandas.Timestamp
        Horizon start (UTC); starts are grouped by whole seconds from it.
    tick_s : float
        Engine tick [s].
    stagger_starts_s : float, optional
        Delay between jobs starting together [s]; default the scenario's
        ``mitigations.stagger_starts_s``.

    Returns
    -------
    list of int
        One delay per job, in scenario order [ticks]; all 0 without staggering.
    """
    stagger = (scenario.mitigations.stagger_starts_s if stagger_starts_s is None
               else float(stagger_starts_s))
    out: list[int] = []
    seen: dict[int, int] = {}
    for job in scenario.jobs:
        if stagger <= 0:
            out.append(0)
            continue
        key = round((job.start_utc - t0).total_seconds())
        rank = seen.get(key, 0)
        seen[key] = rank + 1
        length = to_ticks(job.duration_s, tick_s)
        room = max(0, length - to_ticks(job.startup_s + job.shutdown_s, tick_s) - 1)
        out.append(min(to_ticks(rank * stagger, tick_s), room))
    return out
