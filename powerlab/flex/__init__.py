"""Flexibility: how many megawatts a training site can shed, how fast, for how long, at
what training cost, and the curtailment plan that delivers a target.

Modules
-------
:mod:`~powerlab.flex.curve`     power-throughput curve per job (fit or stated prior)
:mod:`~powerlab.flex.campaign`  power-capping campaign on the synthetic twin (validation data)
:mod:`~powerlab.flex.levers`    the levers (power cap, clock lock, pause, shift, storage)
:mod:`~powerlab.flex.offer`     MW sheddable vs response time and duration, with its cost
:mod:`~powerlab.flex.targets`   target trajectories from CSV or OpenADR 3 event JSON
:mod:`~powerlab.flex.merit`     the levers in merit order: shifts, storage, caps/locks, pauses
:mod:`~powerlab.flex.plan`      the curtailment plan, simulated over every forecast draw
:mod:`~powerlab.flex.verify`    measurement and verification: baselines and credited MW

Downstream of :mod:`powerlab.site` (the forecast engine), :mod:`powerlab.throughput` (the
twin) and :mod:`powerlab.interconnect` (ramp requirements); reads them through their
public names.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "curve": ("CAPPED_BELOW_REF", "PRIORS", "CurvePrior", "PowerThroughputCurve",
              "curve_points", "fit_curve", "fit_curve_points", "prior_curve"),
    "campaign": ("twin_capping_campaign", "twin_step_time"),
    "levers": ("LEVERS", "LeverAssumptions", "job_curves", "capped_scenario",
               "paused_scenario"),
    "offer": ("FlexOffer", "flex_offer"),
    "targets": ("Targets", "read_targets", "parse_openadr_event", "random_targets"),
    "merit": ("LeverSchedule", "shift_starts", "storage_dispatch"),
    "plan": ("CurtailmentPlan", "PlanMargins", "plan_curtailment"),
    "verify": ("Verification", "verify_event", "BASELINE_METHODS"),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
