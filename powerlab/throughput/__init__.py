"""Training-throughput analytics: the time-of-day (DVFS) effect, straggler GPUs, and
the synthetic twin that gives them ground truth.

Modules
-------
:mod:`~powerlab.throughput.dvfs`          fit_time_of_day and its results, attribution
:mod:`~powerlab.throughput.diurnal`       the regression behind it (design, errors, tests)
:mod:`~powerlab.throughput.absorb`        regressions with segment levels absorbed (FWL)
:mod:`~powerlab.throughput.changepoints`  gapless level shifts (CUSUM, binary segmentation)
:mod:`~powerlab.throughput.throttling`    slowest clocks and throttle shares by local hour
:mod:`~powerlab.throughput.seasonal`      MSTL decomposition (daily and weekly parts)
:mod:`~powerlab.throughput.stragglers`    GPUs that hold a synchronous job back
:mod:`~powerlab.throughput.chip_baseline` each chip's offsets from an earlier record
:mod:`~powerlab.throughput.synth`         the synthetic twin of a training run
:mod:`~powerlab.throughput.twin_physics`  the twin's parameters and physics
:mod:`~powerlab.throughput.reliability`   failure rates per GPU-hour, job MTBF
:mod:`~powerlab.throughput.hazard`        hazard model of failures vs temperature, power

This wing imports only :mod:`powerlab.telemetry` (and :mod:`powerlab.exceptions`).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "dvfs": (
        "TimeOfDayResult", "fit_time_of_day",
    ),
    "throttling": (
        "slowest_clock", "throttle_share_by_hour",
    ),
    "seasonal": (
        "decompose_seasonal",
    ),
    "stragglers": (
        "StragglerResult", "find_stragglers", "straggler_baseline",
    ),
    "chip_baseline": (
        "StragglerBaseline",
    ),
    "synth": (
        "TwinResult", "TwinTruth", "simulate_training", "sinusoidal_ambient",
    ),
    "twin_physics": (
        "TwinParameters",
    ),
    "reliability": (
        "FailureRates", "failure_rates", "garwood_interval", "job_mtbf", "llama3_rates",
    ),
    "hazard": (
        "HazardResult", "exposure_table", "fit_hazard", "simulate_fleet_failures",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
