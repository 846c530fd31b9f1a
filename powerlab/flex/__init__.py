"""Flexibility: how many megawatts a training site can shed, how fast, for how long, at
what training cost, and the curtailment plan that delivers a target.

Modules
-------
:mod:`~powerlab.flex.curvefit`     the power-throughput curve fitted from telemetry or a sweep
:mod:`~powerlab.flex.campaign`     power-capping campaign on the synthetic twin (validation data)
:mod:`~powerlab.flex.offer`        MW sheddable vs response time and duration, with its cost
:mod:`~powerlab.flex.targets`      target trajectories from CSV or OpenADR 3 event JSON
:mod:`~powerlab.flex.plan`         the curtailment plan: its steps, simulated over every draw
:mod:`~powerlab.flex.planpower`    the planned site power and each target's throttling lever
:mod:`~powerlab.flex.planschedule` the plan's schedule, lost training and table of levers
:mod:`~powerlab.flex.plansim`      the plan in every draw, judged per target
:mod:`~powerlab.flex.planramps`    the plan's ramps against the ramp requirements
:mod:`~powerlab.flex.planresult`   the CurtailmentPlan results object and its files
:mod:`~powerlab.flex.verify`       measurement and verification: baselines and credited MW

The levers themselves (power cap, clock lock, pause, shifted start, storage), their
physics and the power-throughput curve are the wing below, :mod:`powerlab.levers`; the
offer and the plan iterate over its registered levers.  Downstream of
:mod:`powerlab.site` (the forecast engine), :mod:`powerlab.throughput` (the twin) and
:mod:`powerlab.interconnect` (ramp requirements); reads them through their public
names.  Names that moved to :mod:`powerlab.levers` in 0.2.0 still resolve here, with a
deprecation warning.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "curvefit": ("CAPPED_BELOW_REF", "curve_points", "fit_curve", "fit_curve_points"),
    "campaign": ("twin_capping_campaign", "twin_step_time"),
    "offer": ("FlexOffer", "flex_offer"),
    "targets": ("Targets", "read_targets", "parse_openadr_event", "random_targets"),
    "plan": ("PlanMargins", "PlanOptions", "plan_curtailment"),
    "planresult": ("CurtailmentPlan",),
    "verify": ("Verification", "verify_event", "BASELINE_METHODS"),
}

#: names that moved to another wing in 0.2.0 (deprecated here, removed in 0.3.0)
_MOVED = {
    "powerlab.levers": (
        "PRIORS", "CurvePrior", "PowerThroughputCurve", "prior_curve",
        "LEVERS", "LeverAssumptions", "job_curves", "capped_scenario", "paused_scenario",
        "LeverSchedule", "shift_starts", "storage_dispatch",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, moved=_MOVED)
