"""Evaluating a requirement spec on a power series: what the series can assess, and each
requirement's value in its unit.

One evaluation for every limit powerlab checks: a utility's spec (interconnect's
``Compliance``, the mitigation search, the study package) and a scenario's ``limits:``
block (read as a spec by :func:`powerlab.limits.scenario_limits.limits_spec`;
:func:`powerlab.site.swings.check_limits`).

- :func:`plan_requirements` - which requirements series of a tick, native interval and
  length can assess (:data:`ASSESSABLE`, :data:`PARTIAL`, :data:`NOT_ASSESSABLE`);
- :func:`evaluate_power` - every requirement's value on one series, with the metrics of
  :mod:`powerlab.limits.loadmetrics`;
- :func:`metric_name`, :func:`rule_note` - the ``metric`` column of a requirement and how
  the spec's ``deviation_rule`` shaped it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..exceptions import AnalysisError
from . import loadmetrics as lm
from .requirements import Requirement, RequirementSpec

__all__ = [
    "ASSESSABLE",
    "NOT_ASSESSABLE",
    "PARTIAL",
    "evaluate_power",
    "metric_name",
    "plan_requirements",
    "rule_note",
]


#: Status of a requirement for a series: assessable (``ok``), only the resolved part of an
#: RMS band (``partial``), or not at all (``no``).
ASSESSABLE, PARTIAL, NOT_ASSESSABLE = "ok", "partial", "no"


def _assess(req: Requirement, tick_s: float, native_s: float, duration_s: float
            ) -> tuple[str, str]:
    """(status, note) of one requirement for series of this tick, native interval and
    length (see :func:`plan_requirements`)."""
    res = max(tick_s, native_s)
    if req.kind in ("ramp", "deviation", "step"):
        try:
            lm.whole_ticks(req.window_s, tick_s)
        except AnalysisError as exc:
            return NOT_ASSESSABLE, str(exc)
        if req.window_s < native_s * (1 - 1e-9):
            return NOT_ASSESSABLE, (f"readings every {native_s:g} s cannot resolve a "
                                    f"{req.window_s:g}-s window")
        need = 2 * req.window_s if req.kind == "ramp" else req.window_s + tick_s
        if duration_s < need:
            return NOT_ASSESSABLE, f"{duration_s:g} s of data is shorter than {need:g} s"
        return ASSESSABLE, ""
    if req.kind == "oscillation":
        lo, hi = req.band_hz
        nyq = 0.5 / res
        if lo >= nyq:
            return NOT_ASSESSABLE, (f"band {lo:g}-{hi:g} Hz lies above {nyq:g} Hz, the "
                                    f"Nyquist frequency of {res:g}-s samples")
        try:
            lm.whole_ticks(req.window_s, tick_s)
        except AnalysisError as exc:
            return NOT_ASSESSABLE, str(exc)
        need = req.window_s + 2 * lm.settle_s(lo)
        if duration_s < need * (1 - 1e-9):
            return NOT_ASSESSABLE, (
                f"{duration_s:g} s of data is shorter than the {req.window_s:g}-s window "
                f"plus {lm.settle_s(lo):g} s at each end (the band filter's transients)")
        if hi > nyq:
            note = (f"band cut at {nyq:g} Hz (Nyquist frequency of {res:g}-s samples); "
                    f"value over {lo:g}-{nyq:g} Hz only")
            return (PARTIAL if req.measure == "rms" else NOT_ASSESSABLE), note
        return ASSESSABLE, ""
    return ASSESSABLE, ""   # ride_through: decided per draw by the sags present


def plan_requirements(spec: RequirementSpec, tick_s: float, native_interval_s: float,
                      duration_s: float) -> dict[str, tuple[str, str]]:
    """Which requirements series of this tick, native interval and length can assess.

    Parameters
    ----------
    spec : RequirementSpec
    tick_s : float
        Sample spacing of the series [s].
    native_interval_s : float
        Interval of the readings the series was made from (the tick for a forecast) [s].
    duration_s : float
        Length of the series [s].

    Returns
    -------
    dict
        ``{requirement: (status, note)}``, status :data:`ASSESSABLE` (``ok``),
        :data:`PARTIAL` (``partial``: an RMS band cut at the Nyquist frequency, its
        resolved part evaluated) or :data:`NOT_ASSESSABLE` (``no``), the reason in ``note``.
        A deviation allowance whose ramp limits cannot be assessed is not assessable.
    """
    key = (float(tick_s), float(native_interval_s), float(duration_s))
    plan = {r.name: _assess(r, *key) for r in spec.requirements}
    for r in spec.requirements:   # an allowance needs a ramp limit to trigger
        gated = spec.gated_ramps(r)
        if gated and plan[r.name][0] == ASSESSABLE and all(
                plan[g.name][0] != ASSESSABLE for g in gated):
            plan[r.name] = (NOT_ASSESSABLE, (
                "it is the allowance before the ramp limits "
                f"({', '.join(g.name for g in gated)}), which these data cannot assess"))
    return plan


def metric_name(spec: RequirementSpec, req: Requirement) -> str:
    """The ``metric`` column of a requirement: :attr:`Requirement.metric`, qualified where
    the spec's ``deviation_rule`` changes what is measured."""
    if req.kind == "ramp" and spec.allowances(req):
        gates = "_".join(f"{d.window_s:g}s" for d in spec.allowances(req))
        return f"{req.metric}_beyond_deviation_allowance_{gates}"
    if req.kind == "deviation" and spec.deviation_rule == "allowance_before_ramp":
        return f"{req.metric}_where_a_ramp_limit_is_exceeded"
    return req.metric


def rule_note(spec: RequirementSpec, req: Requirement) -> str:
    """How the deviation rule shaped a ramp or deviation row ('' when it did not)."""
    if req.kind == "ramp" and spec.allowances(req):
        names = ", ".join(d.name for d in spec.allowances(req))
        return (f"ramps count only where the power leaves the short-term deviation "
                f"allowance ({names}; Choukse et al. 2025: deviation allowed before ramp "
                "constraints are triggered)")
    if req.kind == "deviation" and spec.deviation_rule == "allowance_before_ramp":
        names = ", ".join(g.name for g in spec.gated_ramps(req))
        return (f"allowance before the ramp limits ({names}) are triggered: fails only "
                "where the power leaves it and breaks a ramp limit there (deviation_rule: "
                "separate_limit checks it as a limit of its own)")
    return ""


def evaluate_power(spec: RequirementSpec, power_w, tick_s: float,
                   native_interval_s: float | None = None, *, plan: Mapping | None = None,
                   ride_through=None) -> tuple[dict[str, float], dict[str, float]]:
    """Every requirement's value on one power series, in the requirement's unit.

    The one evaluation of powerlab's limits: interconnection specs
    (:class:`powerlab.interconnect.compliance.Compliance`) and a scenario's ``limits:``
    (:func:`~powerlab.limits.scenario_limits.limits_spec`,
    :func:`powerlab.site.swings.check_limits`) both come here.

    Parameters
    ----------
    spec : RequirementSpec
    power_w : array_like
        The power the spec applies to (``spec.boundary``), one value per tick [W].
    tick_s : float
        Sample spacing [s].
    native_interval_s : float, optional
        Interval of the readings behind the series (default: the tick) [s].
    plan : mapping, optional
        :func:`plan_requirements` of this series (computed when not given).
    ride_through : callable, optional
        ``ride_through(requirement) -> load loss [W]`` for ``ride_through``
        requirements (they need the series' voltage sags); NaN without it.

    Returns
    -------
    values : dict
        ``{requirement: value}`` in each requirement's unit; NaN where the series cannot
        assess it.
    details : dict
        For every windowed oscillation requirement, where its worst window starts
        (``"<name>.worst_window_start_s"``, seconds from the first sample) and the share
        of its windows over the limit (``"<name>.share_of_windows_over_limit"``).
    """
    tick = float(tick_s)
    x = np.asarray(power_w, dtype=float)
    native = tick if native_interval_s is None else float(native_interval_s)
    if plan is None:
        plan = plan_requirements(spec, tick, native, len(x) * tick)
    out: dict[str, float] = {}
    detail: dict[str, float] = {}
    for r in spec.requirements:
        if plan[r.name][0] == NOT_ASSESSABLE:
            out[r.name] = math.nan
            continue
        if r.kind == "ramp":
            gates = [(d.window_s, d.limit_si) for d in spec.allowances(r)
                     if plan[d.name][0] == ASSESSABLE]
            v = (lm.gated_ramp(x, tick, r.window_s, r.direction, gates) if gates
                 else lm.ramp_of_means(x, tick, r.window_s, r.direction))
        elif r.kind == "deviation":
            ramps = [(g.window_s, g.direction, g.limit_si) for g in spec.gated_ramps(r)
                     if plan[g.name][0] == ASSESSABLE]
            v = (lm.deviation_beyond_allowance(x, tick, r.window_s, r.limit_si, ramps)
                 if spec.deviation_rule == "allowance_before_ramp"
                 else lm.largest_deviation(x, tick, r.window_s))
        elif r.kind == "oscillation":   # cut at the Nyquist frequency of the data
            band = (r.band_hz[0], min(r.band_hz[1], 0.5 / max(tick, native)))
            bw = lm.band_windows(x, tick, band, r.window_s, r.measure)
            v = bw.worst_w
            detail[f"{r.name}.worst_window_start_s"] = bw.worst_start_s
            detail[f"{r.name}.share_of_windows_over_limit"] = bw.share_over(r.limit_si)
        elif r.kind == "step":
            v = lm.largest_step(x, tick, r.window_s, r.direction)
        else:
            v = math.nan if ride_through is None else ride_through(r)
        out[r.name] = v / r.unit_factor
    return out, detail
