"""Reliability of GPU clusters: failure rates, hazards, survival and the interruption
model of training jobs (root causes, recovery, checkpoint intervals).  Moved out of
:mod:`powerlab.throughput` and ``powerlab.grid`` in 0.2.0; the robustness of powerlab
itself against bad input is another matter (``docs/robustness.md``).

Modules
-------
:mod:`~powerlab.reliability.rates`         failure rates per GPU-hour, job MTBF
:mod:`~powerlab.reliability.hazard`        hazard model of failures vs temperature, power
:mod:`~powerlab.reliability.survival`      Kaplan-Meier, Weibull, Cox (noisy covariates,
                                           frailty), dispersion of failure counts
:mod:`~powerlab.reliability.interruptions` interruptions by root cause, recovery,
                                           Young/Daly checkpoint intervals
:mod:`~powerlab.reliability.interruption_draws` a forecast's interruptions draw by draw:
                                           causes, per-draw figures, the cause table
:mod:`~powerlab.reliability.faultfit`      node hazards fitted to fault records: rates by
                                           class, lemon-node frailty and its test, trend
:mod:`~powerlab.reliability.repair`        repair-time distributions (censored MLE)
:mod:`~powerlab.reliability.faultsim`      synthetic fault records of known truth
:mod:`~powerlab.reliability.jobscale`      interruptions and MTTF against job size; spares
:mod:`~powerlab.reliability.goodput`       ETTR (Young/Daly and simulated), best interval,
                                           checkpoint and restart events per day
:mod:`~powerlab.reliability.transfer`      what a plan carries over from a fit, what it
                                           assumes
:mod:`~powerlab.reliability.published`     the published fleets against a fit

This wing imports :mod:`powerlab.telemetry` (event vocabulary) and :mod:`powerlab.limits`
(the YAML section reader); the forecast engine (:mod:`powerlab.site`) imports its
interruption model.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "rates": (
        "FailureRates", "failure_rates", "garwood_interval", "job_mtbf", "llama3_rates",
    ),
    "hazard": (
        "HazardResult", "exposure_table", "fit_hazard", "simulate_fleet_failures",
    ),
    "survival": (
        "CoxResult", "DispersionResult", "WeibullResult", "dispersion_test", "fit_cox",
        "fit_weibull", "kaplan_meier", "regression_calibration",
    ),
    "faultfit": ("FaultFit", "fit_faults", "node_exposure"),
    "repair": ("REPAIR_MODELS", "fit_repair", "repair_distribution"),
    "faultsim": ("simulate_fault_records",),
    "jobscale": ("job_interruptions", "spare_pool"),
    "goodput": ("GoodputPlan", "GoodputResult", "ettr_first_order", "plan_goodput",
                "simulate_goodput"),
    "transfer": ("transfer_table",),
    "published": ("PUBLISHED", "compare_published"),
    "interruptions": (
        "InterruptionModel", "checkpoint_report", "daly_interval_s", "llama3_model",
        "young_interval_s",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
