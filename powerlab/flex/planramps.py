"""The curtailment plan's ramps: the allowed ramp rates (each ramp limit less the
baseline's own largest ramp), the plan's ramps judged per draw against each ramp
requirement, and the ramps of the levers' own planned power against the allowed rates
(:mod:`powerlab.flex.plan`, docs/flexibility.md "Plan").

Ramps are those of adjacent window means, as everywhere in powerlab
(:func:`powerlab.limits.ramps.ramp_of_means`).

References
----------
docs/flexibility.md, "Plan" step 1 (the allowed rates) and "Definitions" (a ramp of
window means); the requirement specs: docs/interconnection.md.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..levers.operating import NOTCH_W, Merit
from ..levers.registry import LEVERS
from ..levers.shedstate import LeverSchedule
from ..limits.ramps import ramps_of_means, whole_ticks

__all__ = ["allowed_rates", "lever_ramps", "ramp_results"]


def allowed_rates(alloc: Merit, reqs: list, b_spec, conv: float, tick_s: float,
                   fast: float, min_ramp_share: float) -> tuple[float, float]:
    """Allowed plan ramp rates down and up [IT W/s]: each ramp limit less the baseline's
    own largest ramp of that window (at least ``min_ramp_share`` of the limit), in IT
    power (``conv``: the highest PUE for limits at the facility boundary); ``fast`` without one."""
    r_down = r_up = fast
    for rq in reqs:
        w = whole_ticks(rq.window_s, tick_s)
        worst_up = worst_dn = 0.0
        for d in range(len(b_spec)):
            rr = ramps_of_means(b_spec[d], w, rq.window_s)
            worst_up, worst_dn = max(worst_up, rr.max()), max(worst_dn, -rr.min())
        lim = rq.limit_si
        if rq.direction in ("down", "both"):
            r_down = min(r_down, max(lim - worst_dn, min_ramp_share * lim) / conv)
        if rq.direction in ("up", "both"):
            r_up = min(r_up, max(lim - worst_up, min_ramp_share * lim) / conv)
    return r_down, r_up


def ramp_results(reqs: list, plan_w: np.ndarray, b_spec, tick_s: float,
                  r_down: float, r_up: float) -> list[dict]:
    """Per ramp requirement and direction: the plan's violations over all draws (a ramp
    over the limit and over the baseline's own largest ramp in that draw) and the worst
    plan and baseline ramps."""
    ramps = []
    for rq in reqs:
        w = whole_ticks(rq.window_s, tick_s)
        for direction in (("up", "down") if rq.direction == "both" else (rq.direction,)):
            sgn = 1.0 if direction == "up" else -1.0
            viol, worst, worst_b = 0, 0.0, 0.0
            for d in range(len(plan_w)):
                rp = sgn * ramps_of_means(plan_w[d], w, rq.window_s)
                rb = sgn * ramps_of_means(b_spec[d], w, rq.window_s)
                # the plan violates where its ramp exceeds the limit and everything the
                # site does anyway in that draw (a site over the limit already is not
                # made worse)
                allowed = max(rq.limit_si, float(rb.max())) * (1 + 1e-9)
                bad = rp > allowed
                viol += int(bad.sum())
                worst = max(worst, float(rp.max()))
                worst_b = max(worst_b, float(rb.max()))
            # one unit for every row (MW/min), whatever unit the requirement is stated in
            ramps.append({"requirement": rq.name, "direction": direction,
                          "window_s": rq.window_s,
                          "limit_megawatts_per_min": rq.limit_si * 60 / 1e6,
                          "plan_rate_it_megawatts_per_min":
                              (r_up if direction == "up" else r_down) * 60 / 1e6,
                          "violations": viol,
                          "worst_plan_ramp_megawatts_per_min": worst * 60 / 1e6,
                          "worst_baseline_ramp_megawatts_per_min": worst_b * 60 / 1e6})
    return ramps


def lever_ramps(ramps: list[dict], reqs: list, merit: Merit, ls: LeverSchedule,
                times: pd.DatetimeIndex, tick_s: float) -> None:
    """Add to each ramp row the worst ramp of the levers' own planned power (the site's
    full IT power less every lever's planned shed, nominal: no draw) over the
    requirement's window means [IT MW/min], when it happens, and whether it is faster
    than the plan's allowed rate (plus one 5-W notch of every GPU per window: a cap moves
    in notches).  A pause steps a job from its minimum limit's power to idle in a tick,
    faster than the rate where that step is large: the simulated draws judge the ramps
    at the requirement's boundary with the baseline's own ramps, so a step that falls
    away from a checkpoint ramp in every draw passes there; this says it anyway."""
    lever_w = merit.full_w - sum(ls.shed_w[x] for x in LEVERS)
    notch_w = NOTCH_W * sum(j.gpus for j in merit.jobs)
    by_req = {rq.name: rq for rq in reqs}
    for row in ramps:
        rq = by_req[row["requirement"]]
        w = whole_ticks(rq.window_s, tick_s)
        sgn = 1.0 if row["direction"] == "up" else -1.0
        rr = sgn * ramps_of_means(lever_w, w, rq.window_s) if len(lever_w) >= 2 * w \
            else np.zeros(1)
        i = int(np.argmax(rr))
        worst = max(float(rr[i]), 0.0) * 60 / 1e6
        row["worst_lever_ramp_it_megawatts_per_min"] = worst
        row["worst_lever_ramp_utc"] = times[min(i + w, len(times) - 1)] if worst > 0 else pd.NaT
        row["lever_ramp_over_plan_rate"] = bool(
            worst > row["plan_rate_it_megawatts_per_min"] * 1.01
            + notch_w / rq.window_s * 60 / 1e6)
