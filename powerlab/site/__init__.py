"""The site: the facility whose power we forecast.  Scenarios, the forecast engine, the
facility model, swing metrics, mitigations (what-ifs) and the exports handed to
facilities teams.  "grid" in powerlab means only the utility's grid
(:mod:`powerlab.interconnect`); this wing was ``powerlab.grid`` before 0.2.0.

Modules
-------
:mod:`~powerlab.site.scenario`     the YAML scenario: jobs, mitigations, the whole scenario
:mod:`~powerlab.site.hardware`     GPU power levels and node composition (``hardware:``)
:mod:`~powerlab.site.timebase`     the engine's discrete time grid
:mod:`~powerlab.site.engine`       the engine: per-job templates, jitter, failures
                                   (:func:`powerlab.site.forecast` is its entry point)
:mod:`~powerlab.site.randomness`   each job's failures and GPU offsets in a draw; the
                                   uncertain parameters of a draw (ParameterBands)
:mod:`~powerlab.site.parameterdraws` forecast draws that vary those parameters
:mod:`~powerlab.site.memory`       the memory a forecast needs, before it allocates
:mod:`~powerlab.site.jobplan`      a job's training, checkpoint and downtime plan
:mod:`~powerlab.site.chunks`       one draw's IT power built chunk by chunk (state carried)
:mod:`~powerlab.site.transients`   GPU power rising and falling with a first-order lag,
                                   or slewing under a ramp limiter
:mod:`~powerlab.site.facility`     the site (``site:``) and IT -> electrical losses ->
                                   lagging cooling -> base load
:mod:`~powerlab.site.reduction`    reducing each draw as it is computed (keep_ticks=False)
:mod:`~powerlab.site.streaming`    ramps, spectrum and swings fed chunk by chunk
:mod:`~powerlab.site.uncertainty`  exceedance probabilities and bands with MC errors
:mod:`~powerlab.site.interruption_sim` a job's interruption process alone (no power)
:mod:`~powerlab.site.disturbances` voltage sags: trips, UPS ride-through, recovery
:mod:`~powerlab.site.battery`      battery dispatch at the point of interconnection
:mod:`~powerlab.site.stagger`      staggered job starts
:mod:`~powerlab.site.results`      ForecastResult and its summary
:mod:`~powerlab.site.swings`       swings, ramps, spectrum, limit violation episodes
:mod:`~powerlab.site.planner`      the planner's figures: 15-min peak demand, MWh, MW/min
:mod:`~powerlab.site.mitigations`  what-ifs: what each mitigation removes and costs
:mod:`~powerlab.site.export`       the facilities CSV and its JSON sidecar
:mod:`~powerlab.site.export_reader` reading a facilities CSV back, checked by its sidecar
:mod:`~powerlab.site.export_workbook` the facilities table as an Excel workbook

What a utility or the scenario's ``limits:`` states, and how it is measured, is the wing
below, :mod:`powerlab.limits`; the interruption model (root causes, Young/Daly) is
:mod:`powerlab.reliability`.  Calibrating a job on measured power is the downstream wing
:mod:`powerlab.calibration`; checking a site against a utility's spec is
:mod:`powerlab.interconnect`.

This wing imports :mod:`powerlab.telemetry`, :mod:`powerlab.limits` and
:mod:`powerlab.reliability` (and the base modules).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "scenario": (
        "Scenario", "parse_scenario", "read_scenario",
    ),
    "engine": (
        "forecast",
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
    "randomness": (
        "ParameterBands", "draw_parameters",
    ),
    "parameterdraws": (
        "parameter_draws",
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
    "swings": (
        "check_limits", "swing_metrics",
    ),
    "planner": (
        "planner_summary",
    ),
    "mitigations": (
        "compare_mitigations",
    ),
    "export": (
        "facilities_frame", "write_facilities_csv",
    ),
    "export_reader": (
        "read_facilities_csv",
    ),
    "export_workbook": (
        "write_facilities_xlsx",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
