"""What the data behind a study-package figure can resolve, and what they are.

A figure over a window (a ramp between 1-s means, the largest change within 1 s) is
refused where the data were read less often than the window: readings every 2 s cannot
resolve a 1-s window (the rule of :func:`powerlab.limits.evaluation.plan_requirements`,
which ``comply`` applies too), so the figure is NaN, its ``statistic`` says why and a note
repeats it.  Every figure's ``source`` starts with the data it comes from
(:func:`data_label`): the scenario forecast (its draws and seed, the tick) or the measured
trace (its description, the interval of its readings).
"""

from __future__ import annotations

__all__ = ["data_label", "native_interval_s", "unresolved_reason"]


def native_interval_s(trace) -> float:
    """Interval of the readings behind a trace: its tick, or the measured readings'
    interval where longer [s]."""
    return max(float(trace.tick_s), float(getattr(trace, "native_interval_s", trace.tick_s)))


def unresolved_reason(window_s: float, trace) -> str:
    """Why data like ``trace`` cannot resolve a ``window_s`` window ('' where they can)."""
    native = native_interval_s(trace)
    if window_s < native * (1 - 1e-9):
        return f"readings every {native:g} s cannot resolve a {window_s:g}-s window"
    return ""


def data_label(study) -> str:
    """The data a figure of ``study`` comes from, in words."""
    tr = study.trace
    if study.source.is_forecast:
        return f"data: {study.label}, tick {tr.tick_s:g} s"
    return f"data: {study.label} (readings every {native_interval_s(tr):g} s)"
