"""Training-throughput analytics: the time-of-day (DVFS) effect, straggler GPUs, and
the synthetic twin that gives them ground truth.

Modules
-------
:mod:`~powerlab.throughput.dvfs`          fit_time_of_day (its model), attribution
:mod:`~powerlab.throughput.time_of_day_result`  what it reports (TimeOfDayResult)
:mod:`~powerlab.throughput.diurnal`       the regression behind it (design, errors, tests)
:mod:`~powerlab.throughput.absorb`        regressions with segment levels absorbed (FWL)
:mod:`~powerlab.throughput.changepoints`  gapless level shifts (CUSUM, binary segmentation)
:mod:`~powerlab.throughput.throttling`    slowest clocks and throttle shares by local hour
:mod:`~powerlab.throughput.seasonal`      MSTL decomposition (daily and weekly parts)
:mod:`~powerlab.throughput.stragglers`    GPUs that hold a synchronous job back
:mod:`~powerlab.throughput.straggler_scoring`  the steps of the straggler search
:mod:`~powerlab.throughput.fleet_matrix`  its options and the fleet as matrices
:mod:`~powerlab.throughput.peer_evidence` each GPU's evidence against its peers
:mod:`~powerlab.throughput.evidence`      straggler evidence channels and their score
:mod:`~powerlab.throughput.fleet_levels`  slow hosts and racks against the fleet
:mod:`~powerlab.throughput.group_step`    the host and rack step (utilisation, baseline)
:mod:`~powerlab.throughput.group_episodes` episodes of hosts and racks (time of day)
:mod:`~powerlab.throughput.regimes`       fleet-wide regime breaks (limit, policy, level)
:mod:`~powerlab.throughput.regime_step`   the search cut at the breaks
:mod:`~powerlab.throughput.rank_times`    slow ranks and links from per-rank times
:mod:`~powerlab.throughput.failslow`      fail-slow onsets and intermittent episodes
:mod:`~powerlab.throughput.straggler_cost` step time and GPU-hours lost, by cause
:mod:`~powerlab.throughput.chip_baseline` each chip's offsets from an earlier record
:mod:`~powerlab.throughput.synth`         the synthetic twin of a training run
:mod:`~powerlab.throughput.twin_physics`  the twin's parameters and physics
:mod:`~powerlab.throughput.twin_ambient`  the ambient temperature that drives it
:mod:`~powerlab.throughput.twin_log`      its run segments and per-step training log

Failure rates, hazards and survival moved to :mod:`powerlab.reliability` in 0.2.0 (their
old names here still resolve, with a deprecation warning).  This wing imports only
:mod:`powerlab.telemetry` (and the base modules).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "dvfs": (
        "TimeOfDayOptions", "fit_time_of_day",
    ),
    "time_of_day_result": (
        "TimeOfDayResult",
    ),
    "throttling": (
        "slowest_clock", "throttle_share_by_hour",
    ),
    "seasonal": (
        "decompose_seasonal",
    ),
    "stragglers": (
        "StragglerOptions", "StragglerResult", "find_stragglers", "straggler_baseline",
    ),
    "chip_baseline": (
        "StragglerBaseline",
    ),
    "rank_times": (
        "RankTimesOptions", "RankTimesResult", "find_slow_ranks",
    ),
    "synth": (
        "TwinFleet", "TwinResult", "TwinRun", "TwinTruth", "simulate_training",
    ),
    "twin_ambient": (
        "sinusoidal_ambient",
    ),
    "twin_physics": (
        "TwinParameters",
    ),
}

#: names that moved to another wing in 0.2.0 (deprecated here, removed in 0.3.0)
_MOVED = {
    "powerlab.reliability": (
        "FailureRates", "failure_rates", "garwood_interval", "job_mtbf", "llama3_rates",
        "HazardResult", "exposure_table", "fit_hazard", "simulate_fleet_failures",
        "CoxResult", "DispersionResult", "WeibullResult", "dispersion_test", "fit_cox",
        "fit_weibull", "kaplan_meier", "regression_calibration",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, moved=_MOVED)
