"""Levers and mitigations: what a site can do to its power, one class each, with its
physics in one place (shed, ramp, response, cost, the hardware it needs).

Modules
-------
:mod:`~powerlab.levers.lever`       the interface every lever and mitigation implements
:mod:`~powerlab.levers.registry`    the registered ones (LEVERS, MITIGATIONS), register_lever
:mod:`~powerlab.levers.curve`       power-throughput curve per job (the physics of caps and locks)
:mod:`~powerlab.levers.jobs`        what a power limit or a pause does to a job of a scenario
:mod:`~powerlab.levers.operating`   the jobs' operating points in 5-W notches of their limit
:mod:`~powerlab.levers.throttle`    the throttling levers' shared physics (cap and lock)
:mod:`~powerlab.levers.powercap`    power cap (``nvmlDeviceSetPowerManagementLimit``)
:mod:`~powerlab.levers.clocklock`   clock lock (``nvmlDeviceSetGpuLockedClocks``)
:mod:`~powerlab.levers.pause`       pause after an on-demand checkpoint
:mod:`~powerlab.levers.shift`       a job's start held through a curtailment
:mod:`~powerlab.levers.storage`     the site battery, storage technology classes
:mod:`~powerlab.levers.smoothing`   NVML power smoothing (Blackwell or newer)
:mod:`~powerlab.levers.filler`      a filler workload during communication waits
:mod:`~powerlab.levers.stagger`     staggered starts of jobs starting together
:mod:`~powerlab.levers.allocation`  a planned shed split over the levers in merit order
:mod:`~powerlab.levers.shedstate`   the split's state and its result (LeverSchedule)

The planners iterate over the registered objects: the flexibility offer and the
curtailment plan (:mod:`powerlab.flex`) over :data:`LEVERS`, the mitigation search
(:mod:`powerlab.interconnect`) over :data:`MITIGATIONS`.  Adding a lever is one module
with one class (docs/contributing.md, "Adding a lever").

This wing imports :mod:`powerlab.site` (the forecast engine, its battery dispatch and
stagger rule) and the base modules; :mod:`powerlab.interconnect`, :mod:`powerlab.flex`
and :mod:`powerlab.viz` import it.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "lever": (
        "CurtailmentLever", "JobOnSite", "Lever", "LeverAssumptions", "LeverCost",
        "Mitigation", "OfferContext", "OfferRow", "SimContext",
    ),
    "registry": (
        "LEVERS", "MITIGATIONS", "LeverRegistry", "register_lever", "unregister_lever",
    ),
    "curve": (
        "PRIORS", "CurvePrior", "PowerThroughputCurve", "prior_curve", "prior_for",
    ),
    "jobs": (
        "capped_scenario", "job_curves", "job_power_w", "job_rate", "job_rate_frame",
        "paused_scenario", "restart_risk", "site_constant_w", "site_power_range_w",
    ),
    "operating": (
        "NOTCH_W", "Allocator", "JobTable", "Merit",
    ),
    "throttle": (
        "Throttle", "pick_throttle",
    ),
    "powercap": (
        "PowerCap",
    ),
    "clocklock": (
        "ClockLock",
    ),
    "pause": (
        "Pause",
    ),
    "shift": (
        "ShiftStart", "shift_starts",
    ),
    "storage": (
        "STORAGE", "Storage", "StorageTechnology", "TECHNOLOGIES", "available_storage",
        "storage_battery", "storage_dispatch", "storage_grid_energy",
    ),
    "smoothing": (
        "NVML_PROFILE_PARAMS", "Smoothing", "SmoothingOptions", "SmoothingProfile",
        "gpu_generation", "smooth_power", "smoothing_support",
    ),
    "filler": (
        "Filler",
    ),
    "stagger": (
        "Stagger",
    ),
    "allocation": (
        "allocate",
    ),
    "shedstate": (
        "Allocation", "LeverSchedule", "ShedContext",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
