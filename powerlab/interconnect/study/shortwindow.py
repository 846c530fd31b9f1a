"""The study package's short window: a few minutes forecast again at a fine tick.

The spectrum and the PMU view need a tick that resolves 30 Hz (0.01 s by default), which
the whole horizon is not forecast at.  By default the window starts 30 s before draw 0's
largest rise between 1-s means (the PMU view shows that ramp; the spectrum leaves out the
window's first 40 s, so that it shows the steady rhythm after the ramp), and every draw
is forecast again over it with the same seed, the cooling plant's lag warmed up first.
A measured trace is its own short window.  Each section's ``per_short_draw`` hook is
called on every draw of the window (:mod:`powerlab.interconnect.study.section`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..powertrace import PowerTrace, for_each_draw
from .section import Section, Study

__all__ = ["ShortRun", "ShortWindow", "largest_ramp_time_s", "short_window"]


@dataclass(frozen=True)
class ShortWindow:
    """The short window of :func:`~powerlab.interconnect.studypackage.study_package`
    (spectrum and PMU view).

    Attributes
    ----------
    tick_s : float, default 0.01
        Tick of the short window forecast [s]; 0.01 s resolves up to 50 Hz.
    window_s : float, default 300
        Length of the short window [s].
    start_utc : datetime-like, optional
        Start of the short window; default 30 s before draw 0's largest rise between
        1-s means (the PMU view shows that ramp; the spectrum then leaves out the first
        40 s of the window, so that it shows the steady rhythm after the ramp).
    """

    tick_s: float = 0.01
    window_s: float = 300.0
    start_utc: object = None


@dataclass
class ShortRun:
    """The short window as the sections see it (``study.short``).

    Attributes
    ----------
    window_s : float
        Its length [s].
    skip_s : float
        Seconds at its start the spectrum leaves out (the ramp) [s].
    trace : PowerTrace
        Draw 0 over the window (the measured trace itself).
    rows : dict
        Section name -> what its ``per_short_draw`` returned, one item per draw.
    """

    window_s: float
    skip_s: float
    trace: PowerTrace | None = None
    rows: dict = field(default_factory=dict)


def largest_ramp_time_s(x: np.ndarray, tick_s: float) -> float:
    """Time (from the start) of the boundary between the two 1-s windows with the
    largest rise of means [s]."""
    w = max(1, round(1.0 / tick_s))
    if len(x) < 2 * w:
        return 0.0
    c = np.concatenate([[0.0], np.cumsum(x - x[0])])
    means = (c[w:] - c[:-w]) / w
    d = means[w:] - means[:-w]
    return float((int(np.argmax(d)) + w) * tick_s)


def short_window(study: Study, secs: list[Section]) -> ShortRun:
    """The short window of ``study`` with each section's ``per_short_draw`` of every draw
    (also kept as ``study.short``)."""
    if study.source.is_forecast:
        return _forecast_window(study, secs)
    tr = study.trace
    study.short = run = ShortRun(tr.duration_s, 0.0, tr)
    for s in secs:
        run.rows[s.name] = [s.per_short_draw(tr, study)]
    return run


def _window_times(trace: PowerTrace, boundary: str, short: ShortWindow):
    """``(start, end, length [s], skip [s])`` of the window within the horizon."""
    if short.start_utc is None:
        t_ramp = largest_ramp_time_s(trace.power_w(boundary), trace.tick_s)
        start = trace.start_utc + pd.Timedelta(seconds=max(0.0, t_ramp - 30.0))
    else:
        start = pd.Timestamp(short.start_utc)
    start = start.floor("s")
    length = min(float(short.window_s), math.floor(trace.duration_s))
    skip = 0.0 if short.start_utc is not None else 40.0
    end = min(start + pd.Timedelta(seconds=length),
              trace.start_utc + pd.Timedelta(seconds=trace.duration_s))
    return end - pd.Timedelta(seconds=length), end, length, skip


def _forecast_window(study: Study, secs: list[Section]) -> ShortRun:
    """Every draw forecast again over the window at ``ShortWindow.tick_s``."""
    short = study.options.short
    trace = study.trace
    start, end, length, skip = _window_times(trace, study.boundary, short)
    scenario = study.source.scenario
    # the cooling plant's lag starts at its steady state at a horizon's start: warm it
    # up for three time constants (5 % of the start-up error left) before the window
    warm = 3.0 * float(scenario.site.cooling_time_constant_s)
    warm_start = max(trace.start_utc, start - pd.Timedelta(seconds=warm)).floor("s")
    k0 = round((start - warm_start).total_seconds() / short.tick_s)
    win = scenario.replace(horizon_start_utc=warm_start, horizon_end_utc=end)
    study.short = run = ShortRun(length, skip, rows={s.name: [] for s in secs})

    def short_fn(dp):
        ev = dp.events
        if len(ev):
            ev = ev[ev["timestamp"] >= start].reset_index(drop=True)
        dp = PowerTrace(dp.draw, dp.tick_s, start, dp.it_w[k0:], dp.facility_w[k0:], ev,
                        description=f"{dp.description}, tick {dp.tick_s:g} s, "
                                    f"{length:g} s from {start.isoformat()}")
        if dp.draw == 0:
            run.trace = dp
        for s in secs:
            run.rows[s.name].append(s.per_short_draw(dp, study))
        return {}

    for_each_draw(win, short_fn, draws=study.draws, seed=study.seed, tick_s=short.tick_s)
    return run
