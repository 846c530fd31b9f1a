"""Calibration on measured power: a job's power profile fitted from telemetry, what an
interval-averaging meter reads, and backtests of the forecast against a recording.

It sits downstream of :mod:`powerlab.site` (it writes scenario jobs and runs the engine to
score them) and beside :mod:`powerlab.interconnect`; nothing below imports it.

Modules
-------
:mod:`~powerlab.calibration.profile`      calibrating a job's power levels on measured power
:mod:`~powerlab.calibration.profile_fit`  the calibrated profile, its uncertainties and priors
:mod:`~powerlab.calibration.step_shape`   the step's period and dip from the readings
:mod:`~powerlab.calibration.windows`      evaluation and idle windows, and the readings in them
:mod:`~powerlab.calibration.meter`        what an interval-averaging meter would read of a forecast
:mod:`~powerlab.calibration.calibrate`    a scenario job (and its hardware) from a recording
:mod:`~powerlab.calibration.calibrated_job`  the calibrated job (Calibration), its scenario YAML
:mod:`~powerlab.calibration.runfind`      a job's run in event-less telemetry; regime-change notes
:mod:`~powerlab.calibration.backtest`     the forecast scored against what was measured
:mod:`~powerlab.calibration.scores`       how a backtest scores it

Moved out of :mod:`powerlab.site` on 2026-12-03 (the wing had grown two domains): import
from ``powerlab.calibration`` (``powerlab.site.profile`` etc. no longer exist).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "profile": (
        "ProfileFit", "fit_profile",
    ),
    "profile_fit": (
        "Prior",
    ),
    "meter": (
        "Meter", "meter_forecast", "meter_readings", "sum_meters",
    ),
    "calibrate": (
        "calibrate_job",
    ),
    "calibrated_job": (
        "Calibration",
    ),
    "backtest": (
        "backtest_runs", "backtest_split",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
