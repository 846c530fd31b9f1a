"""Interconnection: what a utility asks of a large load, checked on a forecast or on
measured telemetry, and the cheapest mitigation that meets it.

Modules
-------
:mod:`~powerlab.interconnect.powertrace`   one regular power series: a forecast draw or measured data
:mod:`~powerlab.interconnect.sources`      the one resolver of what a check is given (forecast, telemetry, ...)
:mod:`~powerlab.interconnect.compliance`   a power series or a forecast checked against a spec
:mod:`~powerlab.interconnect.verdicts`     the verdicts over draws: ComplianceResult
:mod:`~powerlab.interconnect.resonance`    harmonics of the load against the grid's mode bands
:mod:`~powerlab.interconnect.equipment`    the site's electrical front end: PSUs, UPS, protection; P and Q at the POI
:mod:`~powerlab.interconnect.gridstudy`    playback files for PSCAD, PowerFactory and CSV
:mod:`~powerlab.interconnect.ridethrough`  ride-through load loss against the sag-free forecast; the sag table
:mod:`~powerlab.interconnect.assessability` can a forecast at this tick assess a spec? (no engine run)
:mod:`~powerlab.interconnect.sitemodel`    per-job forecast series for fast option evaluation
:mod:`~powerlab.interconnect.searchspace`  the mitigation options, the grid searched, the costs
:mod:`~powerlab.interconnect.optionsearch` options evaluated, and the search's steps
:mod:`~powerlab.interconnect.searchsize`   the search's size and time, announced before it runs
:mod:`~powerlab.interconnect.sizing`       the cheapest mitigations that meet a requirement spec
:mod:`~powerlab.interconnect.sizingresult` its result: the Pareto set, the files
:mod:`~powerlab.interconnect.pmu`          what P- and M-class reference PMUs (C37.118.1) report
:mod:`~powerlab.interconnect.flicker`      the IEC 61000-4-15 flickermeter: Pinst, Pst, Plt
:mod:`~powerlab.interconnect.voltagechange` voltage change and flicker at the POI from P, Q, S_sc, X/R
:mod:`~powerlab.interconnect.comtrade`     COMTRADE (C37.111) ASCII records: writer, reader
:mod:`~powerlab.interconnect.energisation` staircase energisation within ramp and step limits
:mod:`~powerlab.interconnect.studypackage` the large-load study package
:mod:`~powerlab.interconnect.study`        its sections, one module each
:mod:`~powerlab.interconnect.studypage`    its text summary, printable page and files

Data flows one way: this wing reads the requirement specs and load metrics of
:mod:`powerlab.limits`, the site model and the forecast engine of :mod:`powerlab.site`
(and :mod:`powerlab.telemetry` for measured data) through their public names; none of
those imports anything from here.  The specs and metrics were re-exported here before
0.2.0; those names still resolve, with a deprecation warning.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "powertrace": (
        "PowerTrace", "band_visibility", "for_each_draw", "forecast_trace",
        "trace_from_telemetry",
    ),
    "sources": (
        "MeasuredOptions", "PowerSource", "resolve",
    ),
    "compliance": (
        "Compliance", "comply",
    ),
    "verdicts": (
        "ComplianceResult",
    ),
    "resonance": (
        "ResonanceResult", "screen_resonance",
    ),
    "equipment": (
        "SiteEquipment", "equipment_from_scenario", "pq_at_poi", "trace_pq",
    ),
    "gridstudy": (
        "playback_frame", "represented_band", "write_grid_playback",
    ),
    "ridethrough": (
        "SagAssumptions", "SagGrid", "counterfactual_sag_loss", "ride_through_table",
    ),
    "assessability": (
        "Assessability", "assess",
    ),
    "searchspace": (
        "CostModel", "MitigationOption", "SearchGrid",
    ),
    "sizing": (
        "size_mitigation",
    ),
    "sizingresult": (
        "SizingResult",
    ),
    "pmu": (
        "PmuSettings", "modulation_gain", "pmu_filter", "pmu_power",
    ),
    "flicker": (
        "FlickerOptions", "pinst_from_envelope", "pinst_from_waveform", "plt_from_pst",
        "pst", "pst_from_pinst",
    ),
    "voltagechange": (
        "FlickerResult", "GridStrength", "flicker_at_poi", "relative_voltage",
        "voltage_steps",
    ),
    "comtrade": (
        "read_comtrade", "write_comtrade", "write_trace_comtrade",
    ),
    "energisation": (
        "energisation_schedule", "schedule_power",
    ),
    "studypackage": (
        "RideThrough", "ShortWindow", "StudyOptions", "StudyPackage", "study_package",
    ),
    "study.spectrum": (
        "spectrum_lines",
    ),
}

#: names that moved to another wing in 0.2.0 (deprecated here, removed in 0.3.0)
_MOVED = {
    "powerlab.limits": (
        "DEVIATION_RULES", "GridMode", "Requirement", "RequirementSpec", "parse_requirements",
        "read_requirements", "band_oscillation", "band_windows", "gated_ramp",
        "largest_deviation", "largest_step", "ramp_of_means", "sag_load_loss",
    ),
    "powerlab.levers": (
        "SmoothingProfile", "smooth_power", "smoothing_support", "StorageTechnology",
        "TECHNOLOGIES", "storage_battery",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, moved=_MOVED)
