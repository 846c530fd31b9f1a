"""The curtailment plan simulated over every forecast draw, and judged per target.

The forecast of the scenario with the levers' scenario changes (the shifted starts) is
the simulation's base; each lever family adds, job by job, the change its settings make
in every draw (:meth:`powerlab.levers.lever.CurtailmentLever.simulate`: a job under its
limits interpolated between forecasts at a 50-W grid of limits, a paused job's GPUs
idle), all with the same seed (the same failures and timing offsets).  Facility power
follows from :func:`powerlab.site.facility.facility_power`; what levers take off at the
boundary (the battery's planned output) is subtracted from it and from the power at the
targets' boundary (at the IT boundary the battery is read as carrying that much of the
IT load).

A target is met in a draw when the trailing ``averaging_s`` mean of the power in the
target's boundary is at or under the cap at every tick from ``start + response_s`` to its
end; its response time is the time from the start after which that holds.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..levers.lever import SimContext
from ..levers.operating import Merit
from ..levers.registry import LEVERS
from ..levers.shedstate import LeverSchedule
from ..site.engine import forecast
from ..site.facility import facility_power
from ..site.scenario import Scenario
from .planpower import PlannedPower, PlanTicks
from .planschedule import PlanCost, site_offset_w

__all__ = ["SimulatedPlan", "simulate_plan", "target_results", "trailing_mean"]


def trailing_mean(x: np.ndarray, w: int) -> np.ndarray:
    """Mean over the last ``w`` ticks (fewer at the start), along the last axis."""
    c = np.cumsum(x, axis=-1)
    out = c.copy()
    out[..., w:] = c[..., w:] - c[..., :-w]
    n = np.minimum(np.arange(1, x.shape[-1] + 1), w)
    return out / n


class SimulatedPlan(NamedTuple):
    """The plan in every draw [W]: IT power (the GPUs'), facility power at the point of
    connection, and the IT power the grid sees (less what levers carry at the boundary)."""

    it_w: np.ndarray
    facility_w: np.ndarray
    it_seen_w: np.ndarray


def simulate_plan(scenario: Scenario, base, merit: Merit, curves: dict, ls: LeverSchedule,
                  g: PlanTicks, draws: int, seed: int) -> SimulatedPlan:
    """IT and facility power of every draw under the plan [W]."""
    sim_sc = scenario
    for lv in LEVERS.objects():
        sim_sc = lv.simulated_scenario(sim_sc, ls)
    sim_base = base if sim_sc is scenario else forecast(sim_sc, draws=draws, seed=seed,
                                                        tick_s=g.tick_s)
    sim = SimContext(sim_sc, sim_base, merit, curves, ls, draws, seed, g.tick_s)
    it = sim_base.it_w.copy()
    families = LEVERS.families()
    for ji in range(len(merit.jobs)):
        for first, _ in families:
            first.simulate(sim, ji, it)
    site = scenario.site
    fac = facility_power(it, g.tick_s, g.pue,
                         electrical_loss_fraction=site.electrical_loss_fraction,
                         cooling_time_constant_s=site.cooling_time_constant_s,
                         base_load_w=site.base_load_w, parts=False).facility_w
    offset = site_offset_w(ls)
    return SimulatedPlan(it, fac - offset, it - offset)


def target_results(f: pd.DataFrame, g: PlanTicks, plan_w: np.ndarray, ls: LeverSchedule,
                   planned: PlannedPower, cost: PlanCost, response_s: float,
                   averaging_s: float) -> list[dict]:
    """Per target: met share and met, worst overshoot, worst response time, lost and
    delayed training, the throttling lever (``"none"`` where none sheds), the mean
    planned shed per lever, the levers' target columns (the battery's state of charge at
    its end) and the IT level planned, judged on the trailing ``averaging_s`` mean of the
    simulated power.  Lost and delayed training are the plan's per-tick costs
    (training-share weighted, restarts included) summed over the target's ticks, so the
    ramps before and after a target count toward the plan's total only."""
    tick_s = g.tick_s
    tm = trailing_mean(plan_w, max(1, round(averaging_s / tick_s)))
    levers = LEVERS.objects()
    rows = []
    for r, thr, (lvl, at_floor) in zip(f.itertuples(), planned.levers, planned.levels):
        i0 = max(0, g.index(r.start_utc, math.floor))
        i1 = min(g.n, g.index(r.end_utc, math.ceil))
        seg = tm[:, i0:i1] - r.cap_w
        ir = min(math.ceil(response_s / tick_s), i1 - i0 - 1)
        over = seg > 1e-6
        met = ~over[:, ir:].any(axis=1)
        last_over = np.where(over.any(axis=1),
                             over.shape[1] - np.argmax(over[:, ::-1], axis=1), 0)
        resp = last_over * tick_s
        thr_shed = ls.shed_w.get(thr)
        row = {"start_utc": r.start_utc, "end_utc": r.end_utc,
               "cap_megawatts": r.cap_w / 1e6, "source": r.source,
               "met_share": float(met.mean()), "met": bool(met.all()),
               "worst_overshoot_megawatts": float(seg[:, ir:].max()) / 1e6,
               "response_time_s": float(resp.max()),
               "lost_gpu_hours": float(sum(cost.per_tick[lv.name][i0:i1].sum()
                                           for lv in levers)),
               "delayed_gpu_hours": float(cost.delayed_per_tick[i0:i1].sum()),
               # the lever the target would throttle with, "none" where none throttles
               "throttle_lever": thr if thr_shed is not None and float(
                   thr_shed[i0:i1].max(initial=0.0)) > 1e-6 else "none"}
        for lv in levers:
            row[f"shed_megawatts[{lv.name}]"] = float(ls.shed_w[lv.name][i0:i1].mean()) / 1e6
        for lv in levers:
            row.update(lv.target_columns(ls, i0, i1))
        # the IT level the target is planned at, and whether that is the site's floor
        row["planned_it_level_megawatts"] = lvl / 1e6
        row["planned_at_floor"] = at_floor
        rows.append(row)
    return rows
