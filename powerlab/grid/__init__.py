"""Facility power: scenarios, the forecast engine, swing metrics, limits (a scenario's ``limits:`` and a utility's requirement specs, one
evaluation), mitigations and the exports handed to facilities teams.  Checking a site
against a utility's spec (compliance, mitigation sizing, study exports) is the downstream
wing :mod:`powerlab.interconnect`.

Modules
-------
:mod:`~powerlab.grid.scenario`     the YAML scenario: site, hardware, jobs, mitigations, limits
:mod:`~powerlab.grid.timebase`     the engine's discrete time grid
:mod:`~powerlab.grid.forecast`     the engine: per-job templates, jitter, failures
:mod:`~powerlab.grid.chunks`       one draw's IT power built chunk by chunk (state carried)
:mod:`~powerlab.grid.transients`   GPU power rising and falling with a first-order lag
:mod:`~powerlab.grid.facility`     IT -> electrical losses -> lagging cooling -> base load
:mod:`~powerlab.grid.reduction`    reducing each draw as it is computed (keep_ticks=False)
:mod:`~powerlab.grid.uncertainty`  exceedance probabilities and bands with MC errors
:mod:`~powerlab.grid.interruptions` interruptions by root cause, recovery, Young/Daly
:mod:`~powerlab.grid.interruption_sim` a job's interruption process alone (no power)
:mod:`~powerlab.grid.disturbances` voltage sags: trips, UPS ride-through, recovery
:mod:`~powerlab.grid.battery`      battery dispatch at the point of interconnection
:mod:`~powerlab.grid.results`      ForecastResult and its summary
:mod:`~powerlab.grid.ramps`        ramps of window means (one definition for every wing)
:mod:`~powerlab.grid.loadmetrics`  the metrics limits are stated in: ramps, deviation, bands, steps
:mod:`~powerlab.grid.requirements` limits as requirement specs (YAML or a scenario's limits:)
                                   and their one evaluation
:mod:`~powerlab.grid.swings`       swings, ramps, spectrum, limit violation episodes
:mod:`~powerlab.grid.mitigations`  what-ifs: what each mitigation removes and costs
:mod:`~powerlab.grid.export`       the facilities CSV and its JSON sidecar

Calibrating a job on measured power, the meter model and backtests are the downstream
wing :mod:`powerlab.calibration`.

The engine function is :func:`powerlab.grid.forecast.forecast` (the name ``forecast`` in
this package is the module).  This wing imports only :mod:`powerlab.telemetry` (and
:mod:`powerlab.exceptions`).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "scenario": (
        "Scenario", "parse_scenario", "read_scenario",
    ),
    "battery": (
        "battery_dispatch",
    ),
    "facility": (
        "facility_power",
    ),
    "uncertainty": (
        "exceedance_frame", "quantile_bands",
    ),
    "interruptions": (
        "InterruptionModel", "checkpoint_report", "daly_interval_s", "llama3_model",
        "young_interval_s",
    ),
    "interruption_sim": (
        "simulate_interruptions",
    ),
    "disturbances": (
        "VoltageSag", "disturbance_summary", "sag_load_loss_vs_baseline",
    ),
    "results": (
        "ForecastResult", "ForecastSummary",
    ),
    "ramps": (
        "ramp_of_means",
    ),
    "requirements": (
        "RequirementSpec", "evaluate_power", "limits_spec", "parse_requirements",
        "read_requirements",
    ),
    "swings": (
        "check_limits", "swing_metrics",
    ),
    "mitigations": (
        "compare_mitigations",
    ),
    "export": (
        "facilities_frame", "read_facilities_csv", "write_facilities_csv",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
