"""Ride-through: the load a voltage sag costs, against the same draw without the sag.

Two uses of one definition:

- :func:`ride_through_table` - the study package's table: for a grid of sags (residual
  voltage x duration) the scenario forecast with and without each sag on the same draws
  (:class:`SagGrid`, :class:`SagAssumptions`; the ITIC curve, :func:`itic_rides_through`,
  says which the supplies ride through);
- :func:`counterfactual_sag_loss` - a ``ride_through`` requirement of a spec.

:func:`counterfactual_sag_loss` is what :class:`~powerlab.interconnect.compliance.Compliance`
reads for a ``ride_through`` requirement when the series carries its sag-free twin
(``PowerTrace.without_sags``, which the forecast adapters fill by running the engine with
and without the scenario's disturbances).  Measured telemetry has no such twin: its load
loss stays :func:`powerlab.limits.loadmetrics.sag_load_loss`, against the mean of the
second before the sag (:data:`powerlab.site.disturbances.BASELINE_MEASURED`).

Definition (issue 20, item 3): the load lost is ``baseline(t) - power(t)``, the power the
site would have drawn without the sag minus what it drew, its largest value during the sag
and in the ``observe_s`` after it (reported apart by
:func:`powerlab.site.disturbances.sag_load_loss_vs_baseline`); a sag with no effect reads
0 exactly, and a training job's own swing is not counted.

References
----------
.. [1] ITI (CBEMA) Curve Application Note, Information Technology Industry Council, 2000:
   the no-interruption region ("no interruption in function") an equipment ride-through
   is judged against; what counts is the function lost because of the event.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._options import Options, renamed_keywords
from ..site.disturbances import VoltageSag, sag_load_loss_vs_baseline
from ..site.engine import forecast
from .equipment import SiteEquipment, equipment_from_scenario
from .eventresponse import (
    engine_sag,
    event_response,
    nominal_it_share,
    supply_trip_assumption,
)
from .ridethroughtables import response_row

__all__ = [
    "ITIC_RIDE_THROUGH",
    "SagAssumptions",
    "SagGrid",
    "counterfactual_sag_loss",
    "itic_rides_through",
    "ride_through_table",
    "simulated_sags",
]

#: ITIC (CBEMA) curve, no-interruption region: (longest duration [s], lowest residual
#: voltage [pu]); beyond 10 s, 0.9 pu (ITI, "ITI (CBEMA) Curve Application Note", 2000).
ITIC_RIDE_THROUGH = ((0.02, 0.0), (0.5, 0.7), (10.0, 0.8), (math.inf, 0.9))


def itic_rides_through(residual_voltage_pu: float, duration_s: float) -> bool:
    """True when a sag lies in the ITIC curve's no-interruption region (the IT equipment
    is expected to ride through it): 0 pu up to 20 ms, 0.7 pu up to 0.5 s, 0.8 pu up to
    10 s, 0.9 pu beyond.

    References
    ----------
    .. [1] Information Technology Industry Council, "ITI (CBEMA) Curve Application
       Note", 2000.
    """
    for longest, lowest in ITIC_RIDE_THROUGH:
        if duration_s <= longest + 1e-12:
            return residual_voltage_pu >= lowest - 1e-12
    return False


def simulated_sags(dp) -> pd.DataFrame | None:
    """The voltage sags a forecast draw simulated (its own ``voltage_sag`` events).

    Sags given from outside (measured, ``Compliance(spec, sags=...)``) are not among
    them: the engine did not simulate what they do, so against the sag-free twin they
    would read a loss of 0 that nothing supports.
    """
    ev = getattr(dp, "events", None)
    if ev is None or not len(ev) or "residual_voltage_pu" not in ev.columns:
        return None
    own = ev[ev["event"] == "voltage_sag"]
    return own if len(own) else None


def counterfactual_sag_loss(power_w, baseline_w, tick_s: float, start_utc,
                            sags: pd.DataFrame | None, *, residual_voltage_pu: float,
                            sag_duration_s: float, observe_s: float = 1.0
                            ) -> tuple[float, int]:
    """Largest load lost in the covered sags, against the sag-free series [W].

    A sag is covered when its residual voltage is at least ``residual_voltage_pu`` and
    it lasts at most ``sag_duration_s`` (as
    :func:`~powerlab.limits.loadmetrics.sag_load_loss`).

    Returns
    -------
    (float, int)
        The largest load loss during or after a covered sag [W] (NaN when none lies in
        the series) and the number of covered sags evaluated.
    """
    if sags is None or len(sags) == 0:
        return math.nan, 0
    x = np.asarray(power_w, dtype=float)
    t0 = pd.Timestamp(start_utc)
    rel = (pd.to_datetime(sags["timestamp"], utc=True) - t0).dt.total_seconds().to_numpy()
    dur = sags["duration_s"].to_numpy(float)
    res = sags["residual_voltage_pu"].to_numpy(float)
    covered = (res >= residual_voltage_pu - 1e-12) & (dur <= sag_duration_s + 1e-12)
    worst, used = 0.0, 0
    for t, d in zip(rel[covered], dur[covered]):
        k0 = math.floor(t / tick_s + 1e-9)
        if k0 < 0 or k0 + math.ceil((d + observe_s) / tick_s - 1e-9) > len(x):
            continue
        during, after = sag_load_loss_vs_baseline(x, baseline_w, tick_s, k0, d, observe_s)
        worst = max(worst, during, after)
        used += 1
    return (worst, used) if used else (math.nan, 0)


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class SagAssumptions:
    """What a sag does to the site, as assumed by :func:`ride_through_table` (stated in
    the table's ``attrs``).

    Attributes
    ----------
    trip_fraction_outside_itic : float, default 1
        Share of the nodes' supplies that trip when the sag lies outside the ITIC
        no-interruption region [-].
    ups_fraction : float, default 0
        Share of the untripped load that moves to UPS during the sag [-].
    ups_return_s : float, default 0
        Time the UPS load takes to return to the grid after the sag [s].
    outage_s : float, default 600
        How long tripped nodes stay down (at least the sag) [s].
    """

    trip_fraction_outside_itic: float = 1.0
    ups_fraction: float = 0.0
    ups_return_s: float = 0.0
    outage_s: float = 600.0


@dataclass(frozen=True)
class SagGrid(Options):
    """The sags of :func:`ride_through_table` and how their effect is read.

    Attributes
    ----------
    residual_voltages_pu : tuple of float, default (0, 0.5, 0.7, 0.8, 0.9)
        Residual voltages of the sags [pu].
    durations_s : tuple of float, default (0.02, 0.1, 0.5, 1, 3, 10)
        Durations of the sags [s].
    after_s : float, default 1
        Span after the sag whose load lost is reported apart [s].
    recovery_tolerance : float, default 0.05
        Share of the loss the 1-min mean may still miss at recovery [-].
    follow_s : float, optional
        How long recovery is followed (default: the outage, the longest job start-up
        and 600 s) [s].
    """

    residual_voltages_pu: tuple = (0.0, 0.5, 0.7, 0.8, 0.9)
    durations_s: tuple = (0.02, 0.1, 0.5, 1.0, 3.0, 10.0)
    after_s: float = 1.0
    recovery_tolerance: float = 0.05
    follow_s: float | None = None


@renamed_keywords(scope="boundary", assumptions="model")
def ride_through_table(scenario, at_utc, grid: SagGrid | None = None, *, draws: int = 3,
                       seed: int = 0, tick_s: float | None = None,
                       boundary: str = "facility",
                       model: SiteEquipment | SagAssumptions | None = None,
                       **grid_kw) -> pd.DataFrame:
    """Load lost and recovery for a grid of voltage sags, from the disturbance model.

    For every (residual voltage, duration) the scenario is forecast over a window around
    ``at_utc`` on the same draws and seed without the sag and with it (the engine's
    other random streams do not depend on the sag).  What the sag does is the equipment
    model's response (:func:`~powerlab.interconnect.eventresponse.event_response`) run
    through the engine (:func:`~powerlab.interconnect.eventresponse.engine_sag`), as
    ``comply --sags`` and ``size-mitigation --sags`` do; a :class:`SagAssumptions` as
    ``model`` applies the older ITIC rule (:func:`itic_rides_through`) instead.

    Per draw, with ``P0`` the power without and ``P1`` with the sag, from the sag start
    ``a`` and end ``b``: load lost **during the sag** ``max(P0 - P1)`` over ``[a, b)``;
    **after the sag** ``max(P0 - P1)`` over ``[b, b + after_s)``; **recovery time** from
    ``a`` until the first whole second ``t >= b`` at which the mean of ``P1`` over the
    next minute is within ``recovery_tolerance`` of the loss of the mean of ``P0``
    (1-min means, so the job's step rhythm, whose phase a restart changes, does not
    count); 0 when nothing is lost, NaN when not within ``follow_s`` (default: the
    outage, the longest job start-up and 600 s).  A sag with no effect reads 0 exactly.

    Parameters
    ----------
    scenario : Scenario
    at_utc : datetime-like
        When the sags strike.
    grid : SagGrid, optional
        The sags and how their effect is read; its fields as keywords replace its own.
    draws, seed : int
        Monte Carlo draws and seed [-].
    tick_s : float, optional
        Engine tick (default the scenario's) [s].
    boundary : {'facility', 'it'}
        The power compared (``scope``: its deprecated name), in ``attrs``.
    model : SiteEquipment or SagAssumptions, optional
        Default: the scenario's equipment (``assumptions``: the deprecated name).

    Returns
    -------
    DataFrame
        One row per sag: ``residual_voltage_pu``, ``duration_s``, ``itic_ride_through``,
        ``trip_fraction``, ``load_lost_megawatts_during_sag_median`` / ``_max``,
        ``load_lost_megawatts_after_sag_median`` / ``_max``, ``recovery_s_median`` /
        ``_max`` (over draws), ``draws``; with the equipment model also the columns of
        :func:`~powerlab.interconnect.ridethroughtables.response_row` at the median
        facility power before the sag.  ``attrs["supply_trip_assumption"]`` says which
        rule decided the trips.
    """
    g = SagGrid.from_kwargs(grid, **grid_kw)
    sa = model if isinstance(model, SagAssumptions) else SagAssumptions()
    eq = None if isinstance(model, SagAssumptions) else (
        model or equipment_from_scenario(scenario))
    at = pd.Timestamp(at_utc)
    tick = float(tick_s or scenario.tick_s)
    follow_s = g.follow_s if g.follow_s is not None else _default_follow_s(scenario, sa)
    window0 = at - pd.Timedelta(seconds=120)
    window1 = at + pd.Timedelta(seconds=max(g.durations_s) + follow_s + 60.0)
    base = scenario.replace(horizon_start_utc=window0, horizon_end_utc=window1,
                            disturbances=())
    r0 = forecast(base, draws=draws, seed=seed, tick_s=tick)
    a = round((at - window0).total_seconds() / tick)
    p_before, it_share = _before(r0, a)
    rows = [_table_row(base, r0.power_w(boundary), (at, a, tick), (v, d), g,
                       (eq, sa, it_share, p_before), (draws, seed, boundary))
            for v, d in itertools.product(g.residual_voltages_pu, g.durations_s)]
    out = pd.DataFrame(rows)
    out.attrs.update(at_utc=at, boundary=boundary, ups_fraction=sa.ups_fraction,
                     outage_s=sa.outage_s, after_s=g.after_s, follow_s=follow_s,
                     trip_fraction_outside_itic=sa.trip_fraction_outside_itic,
                     p_before_megawatts=p_before / 1e6, it_share=it_share,
                     **_model_attrs(eq, sa))
    return out


def _model_attrs(eq, sa: SagAssumptions) -> dict:
    """``model`` and ``supply_trip_assumption`` of the table's attrs."""
    if eq is not None:
        return {"model": "equipment", "supply_trip_assumption": supply_trip_assumption(eq)}
    return {"model": "itic", "supply_trip_assumption": (
        f"ITIC rule: supplies trip (fraction {sa.trip_fraction_outside_itic:g}) outside "
        "the ITIC curve")}


def _table_row(base, p0: np.ndarray, when: tuple, vd: tuple, g: SagGrid, how: tuple,
               run: tuple) -> dict:
    """Step: one sag of the table, forecast with it and compared with ``p0``."""
    at, a, tick = when
    v, d = vd
    eq, sa, it_share, p_before = how
    draws, seed, boundary = run
    rides, trip, sag = _sag(at, v, d, sa)
    extra = {}
    if eq is not None:
        resp = event_response(eq, residual_voltage_pu=v, duration_s=d, it_share=it_share)
        share = nominal_it_share(base)      # as comply --sags: one model
        sag = engine_sag(event_response(eq, residual_voltage_pu=v, duration_s=d,
                                        it_share=share), at, eq=eq, it_share=share)
        trip, extra = resp.it_tripped, response_row(resp, p_before)
    p1 = forecast(base.replace(disturbances=(sag,)), draws=draws, seed=seed,
                  tick_s=tick).power_w(boundary)
    b = a + max(1, round(d / tick))
    c = min(p0.shape[1], b + max(1, round(g.after_s / tick)))
    during, after, rec = _sag_effect(p0, p1, (a, b, c), tick, g.recovery_tolerance)
    return {**_sag_row(v, d, rides, trip, during, after, rec, draws), **extra}


def _before(res, a: int) -> tuple[float, float]:
    """Median facility power over the draws at tick ``a`` [W] and the IT share of it
    [-] (the operating point of the equipment model)."""
    fac = np.asarray(res.power_w("facility"))[:, a]
    it = np.asarray(res.it_w)[:, a]
    p = float(np.median(fac))
    return p, float(np.clip(np.median(it) / p, 0.0, 1.0)) if p > 0 else 1.0


def _default_follow_s(scenario, sa: SagAssumptions) -> float:
    """How long recovery is followed by default: the outage, the longest job start-up
    and 600 s [s]."""
    return sa.outage_s + max((j.startup_s for j in scenario.jobs), default=0.0) + 600.0


def _sag(at: pd.Timestamp, v: float, d: float, sa: SagAssumptions
         ) -> tuple[bool, float, VoltageSag]:
    """Whether the ITIC curve says the supplies ride through a sag of residual voltage
    ``v`` lasting ``d``, the share that trips, and the engine's sag at ``at``."""
    rides = itic_rides_through(v, d)
    trip = 0.0 if rides else float(sa.trip_fraction_outside_itic)
    return rides, trip, VoltageSag(name="sag", at_utc=at, residual_voltage_pu=float(v),
                                   duration_s=float(d), trip_fraction=trip,
                                   ups_fraction=float(sa.ups_fraction),
                                   ups_return_s=float(sa.ups_return_s),
                                   outage_s=max(float(sa.outage_s), float(d)))


def _sag_effect(p0: np.ndarray, p1: np.ndarray, abc: tuple[int, int, int], tick: float,
                recovery_tolerance: float) -> tuple[list, list, list]:
    """Per draw: load lost during ``[a, b)`` and after ``[b, c)`` the sag [W], and the
    recovery time from ``a`` [s] (see :func:`ride_through_table`)."""
    a, b, c = abc
    per_s = max(1, round(1.0 / tick))
    per_min = 60 * per_s
    during, after, rec = [], [], []
    for k in range(len(p0)):
        lost = p0[k] - p1[k]
        dl = max(0.0, float(lost[a:b].max()))
        al = max(0.0, float(lost[b:c].max())) if c > b else 0.0
        during.append(dl)
        after.append(al)
        loss = max(dl, al)
        if loss == 0.0:
            rec.append(0.0)
            continue
        c0 = np.concatenate([[0.0], np.cumsum(p0[k])])
        c1 = np.concatenate([[0.0], np.cumsum(p1[k])])
        starts = np.arange(b, p0.shape[1] - per_min + 1, per_s)
        gap = (c0[starts + per_min] - c0[starts] - c1[starts + per_min]
               + c1[starts]) / per_min
        ok = np.flatnonzero(gap <= recovery_tolerance * loss)
        rec.append(float((starts[ok[0]] - a) * tick) if len(ok) else math.nan)
    return during, after, rec


def _sag_row(v, d, rides: bool, trip: float, during: list, after: list, rec: list,
             draws: int) -> dict:
    """One row of the ride-through table (medians and maxima over the draws)."""
    rec_a = np.asarray(rec)
    fin = rec_a[np.isfinite(rec_a)]
    return {
        "residual_voltage_pu": float(v), "duration_s": float(d),
        "itic_ride_through": rides, "trip_fraction": trip,
        "load_lost_megawatts_during_sag_median": float(np.median(during)) / 1e6,
        "load_lost_megawatts_during_sag_max": float(np.max(during)) / 1e6,
        "load_lost_megawatts_after_sag_median": float(np.median(after)) / 1e6,
        "load_lost_megawatts_after_sag_max": float(np.max(after)) / 1e6,
        "recovery_s_median": float(np.median(rec_a)) if len(fin) == len(rec_a)
        else math.nan,
        "recovery_s_max": float(fin.max()) if len(fin) == len(rec_a) else math.nan,
        "draws": draws,
    }
