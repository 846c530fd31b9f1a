"""Step 6 of the demo, time of day: the time-of-day analysis
(:func:`powerlab.throughput.dvfs.fit_time_of_day`) and the straggler search
(:func:`powerlab.throughput.stragglers.find_stragglers`) on the synthetic twin
(:func:`powerlab.throughput.synth.simulate_training`) driven by the real weather of a
station next to the MGHPCC datacenter (MIT); the twin knows the true answer."""

from __future__ import annotations

import warnings

from ..data import bundled_path
from ..exceptions import DataQualityWarning
from ..iotools import read_weather
from ..throughput.dvfs import fit_time_of_day
from ..throughput.stragglers import find_stragglers
from ..throughput.synth import simulate_training

__all__ = ["time_of_day_figures", "twin_time_of_day"]


def twin_time_of_day(twin_days: float, seed: int):
    """The twin's training run under the real Holyoke weather, its time-of-day analysis
    and the straggler search on its telemetry."""
    with warnings.catch_warnings():
        # the bundled weather files are damaged as recorded; the reader counts them
        warnings.simplefilter("ignore", DataQualityWarning)
        weather = read_weather(bundled_path("weather-kmahighl4-2025"))
    run = simulate_training("2025-06-05", days=twin_days, ambient=weather,
                            amplitude_pct=1.5, n_hosts=4, gpus_per_host=8, stragglers=2,
                            telemetry_interval_s=300.0, seed=seed)
    tod = fit_time_of_day(run.steps, site_tz="America/New_York",
                          telemetry=run.telemetry, ambient=weather)
    return run, tod, find_stragglers(run.telemetry)


def time_of_day_figures(run, tod, strag) -> dict[str, float]:
    """The effect found against the twin's truth, and the stragglers flagged and injected."""
    lo, hi = tod.amplitude_ci_pct
    return {"tod_amplitude_pct": float(tod.amplitude_pct), "tod_amplitude_ci_low_pct": lo,
            "tod_amplitude_ci_high_pct": hi, "tod_trough_hour": float(tod.trough_hour),
            "tod_true_amplitude_pct": float(run.truth.amplitude_pct),
            "tod_true_trough_hour": float(run.truth.trough_hour),
            "tod_gpu_hours_lost_per_day": float(tod.gpu_hours_lost_per_day),
            "stragglers_flagged": float(len(strag.flags)),
            "stragglers_injected": float(len(run.truth.stragglers))}
