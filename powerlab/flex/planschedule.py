"""The curtailment plan's schedule and what its levers cost, from the levers' own
accounts (:class:`powerlab.levers.lever.CurtailmentLever`: each registered lever adds
its columns, its cost and its row; nothing here branches on a lever's name).

- the schedule per tick (:func:`schedule_frame`): planned IT power, the site columns of
  the levers (the battery's output and state of charge), the planned shed per lever,
  then per job its lever (the one whose :meth:`job_ticks` hold the tick, ``""``: none)
  and each lever's setting columns (``power_limit_w[JOB]``, ``clock_sm_mhz[JOB]``,
  ``paused[JOB]``); the planned facility power is added by
  :func:`add_planned_facility`;
- the lost and delayed training (:func:`plan_cost`): each lever's
  :meth:`~powerlab.levers.lever.CurtailmentLever.cost`, summed in registry order;
- the table of levers in merit order (:func:`lever_frame`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..levers.lever import LeverCost
from ..levers.operating import Merit
from ..levers.registry import LEVERS
from ..levers.shedstate import LeverSchedule
from ..site.facility import facility_power
from .planpower import PlanTicks

__all__ = ["LEVER_COLUMNS", "PlanCost", "add_planned_facility", "lever_frame",
           "plan_cost", "schedule_frame"]

#: Columns of ``plan_levers.csv``; the setting and state columns are NaN where a lever
#: reports none.
LEVER_COLUMNS = ("lever", "jobs", "peak_shed_megawatts", "shed_megawatt_hours",
                 "lost_gpu_hours", "delayed_gpu_hours", "restart_gpu_hours",
                 "min_power_limit_w", "min_clock_sm_mhz", "storage_soc_fraction",
                 "storage_discharge_megawatt_hours", "storage_recharge_megawatt_hours",
                 "used")


class PlanCost(NamedTuple):
    """What the plan costs in training [GPU-h].

    Attributes
    ----------
    lost : ndarray
        Lost training ``(mean, lower, upper)`` (the curves' band), restarts included.
    restart : float
        Of it, restarting what the levers stopped.
    per_tick : dict
        Lost training per lever and tick (curve mean).
    delayed_per_tick : ndarray
        Training delayed, not lost, per tick.
    delayed : float
        Its total.
    levers : dict
        Each lever's :class:`~powerlab.levers.lever.LeverCost`.
    """

    lost: np.ndarray
    restart: float
    per_tick: dict
    delayed_per_tick: np.ndarray
    delayed: float
    levers: dict


def schedule_frame(times, p: np.ndarray, merit: Merit, ls: LeverSchedule) -> pd.DataFrame:
    """Per tick: planned IT power, the levers' site columns, the planned shed per lever,
    and per job its lever and the levers' setting columns."""
    levers = LEVERS.objects()
    cols = {"timestamp": times, "planned_it_power_megawatts": p / 1e6}
    for lv in levers:
        cols.update(lv.site_columns(ls))
    sched = pd.DataFrame(cols)
    for lv in levers:
        sched[f"shed_megawatts[{lv.name}]"] = ls.shed_w[lv.name] / 1e6
    for ji, j in enumerate(merit.jobs):
        lever = np.full(len(p), "", object)
        for lv in levers:
            lever[lv.job_ticks(merit, ls, ji)] = lv.name
        sched[f"lever[{j.name}]"] = lever
        for lv in levers:
            for name, col in lv.schedule_columns(merit, ls, ji, lever).items():
                sched[name] = col
    return sched


def add_planned_facility(sched: pd.DataFrame, p: np.ndarray, ls: LeverSchedule, site,
                         g: PlanTicks) -> None:
    """Add the planned facility power (at the point of connection: what levers take off
    at the boundary subtracted) from the GPUs' planned IT power (the planned power plus
    the shed of levers that carry load rather than lower it), and the steady-state PUE it
    is computed with, to the schedule."""
    levers = LEVERS.objects()
    gpus_w = p + sum(ls.shed_w[lv.name] for lv in levers if not lv.reduces_it)
    fac = facility_power(gpus_w[None, :], g.tick_s, g.pue,
                         electrical_loss_fraction=site.electrical_loss_fraction,
                         cooling_time_constant_s=site.cooling_time_constant_s,
                         base_load_w=site.base_load_w, parts=False).facility_w[0]
    sched.insert(2, "planned_facility_power_megawatts",
                 (fac - site_offset_w(ls)) / 1e6)
    sched.insert(3, "pue_steady_w_per_w", g.pue)


def site_offset_w(ls: LeverSchedule):
    """Power the levers take off the site at the boundary, outside the GPUs [W]."""
    return sum(w for lv in LEVERS.objects() if (w := lv.site_offset_w(ls)) is not None)


def plan_cost(merit: Merit, ls: LeverSchedule, share: pd.Series, tick_s: float) -> PlanCost:
    """Planned lost training (curve mean and band; each throttled job weighted by its
    share of time training over the draws), restarts, per lever and per tick, and the
    delayed training of shifted starts: the levers' costs in registry order."""
    n = ls.limits_w.shape[1]
    costs: dict[str, LeverCost] = {lv.name: lv.cost(merit, ls, share, tick_s)
                                   for lv in LEVERS.objects()}
    lost = np.zeros(3)
    restart = 0.0
    delayed = np.zeros(n)
    for c in costs.values():
        lost += c.lost_band
        restart += c.restart_gpu_hours
        if c.delayed_per_tick is not None:
            delayed = delayed + c.delayed_per_tick
    return PlanCost(lost + restart, restart,
                    {name: c.lost_per_tick for name, c in costs.items()}, delayed,
                    float(delayed.sum()), costs)


def lever_frame(merit: Merit, ls: LeverSchedule, cost: PlanCost, tick_s: float,
                equipment) -> pd.DataFrame:
    """One row per lever (merit order): jobs using it, peak and energy of its planned
    shed, lost and delayed training, its lowest setting, and its state (the battery's)."""
    rows = []
    for lv in sorted(LEVERS.objects(), key=lambda x: x.merit_order):
        sh = ls.shed_w[lv.name]
        c = cost.levers[lv.name]
        row = dict.fromkeys(LEVER_COLUMNS, np.nan)
        row.update({"lever": lv.name, "jobs": " ".join(lv.jobs_using(merit, ls)),
                    "peak_shed_megawatts": float(sh.max()) / 1e6 if len(sh) else 0.0,
                    "shed_megawatt_hours": float(sh.sum()) * tick_s / 3.6e9,
                    "lost_gpu_hours": float(cost.per_tick[lv.name].sum()),
                    "delayed_gpu_hours": (float(c.delayed_per_tick.sum())
                                          if c.delayed_per_tick is not None else 0.0),
                    "restart_gpu_hours": float(c.restart_gpu_hours),
                    "used": bool((sh > 1e-6).any())})
        row.update(lv.lever_row(merit, ls, equipment, tick_s))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(LEVER_COLUMNS))
