"""Grid disturbances: voltage sags, the load they drop, and the recovery.

A scenario's ``disturbances:`` list holds voltage sags (:class:`VoltageSag`).  What a sag
does to the site, per Monte Carlo draw:

* **Trip.** Each node's power supplies drop out independently with probability
  ``trip_fraction`` (sags deeper or longer than the supplies' hold-up time).  A tripped
  node draws nothing for ``outage_s`` (until power is back, the node has rebooted and
  passed its checks).  A synchronous job with at least one tripped node stops: it is
  interrupted at the sag like a failure (work since the last checkpoint is lost), all
  its GPUs go idle (those on tripped nodes to zero), and it starts up again when the
  outage ends.  Every tripped job restarts at the same tick: a synchronized start, the
  recovery ramp the grid sees.  An interruption arriving while a job is down extends
  its downtime (:mod:`powerlab.reliability.interruptions`).
* **Ride-through on UPS.** A share ``ups_fraction`` of the IT load that did not trip
  moves to the UPS batteries for ``duration_s`` (the UPS isolates it from the sag) and is
  walked back onto the grid linearly over ``ups_return_s``.  The IT load keeps running;
  the point of interconnection sees it leave and come back.  Battery recharge after the
  event is not modelled.

The forecast shows the MW lost at the point of interconnection and the recovery ramp;
each sag is an event row (``event == "voltage_sag"``, ``residual_voltage_pu``,
``duration_s``) that :mod:`powerlab.interconnect.compliance` ride-through checks read, and
:func:`disturbance_summary` reports per sag the load lost, during the sag and after it
apart (median and max over draws, [W]), the recovery time and the largest recovery ramp
over 1-s means.

Load lost is a counterfactual
-----------------------------
The load a sag takes off the grid is the power the site would have drawn without the sag
minus the power it drew (:func:`sag_load_loss_vs_baseline`): the engine runs the same
draw twice, with and without the disturbances (the same seed gives the same workload),
so a training job's own swing (a step ending during the sag) is not counted as load lost,
and a sag that changes nothing reads 0 exactly.  "1-s mean before the sag minus the
lowest power after it" counted that swing: a load that ignores the sag read 0.068 MW
median (issue 20, item 3).  Measured telemetry has no counterfactual; its baseline is the
mean over the second before the sag, and what it reports says so
(``BASELINE_MEASURED``).

Without disturbances nothing changes: no random numbers are drawn, no power is touched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._options import renamed_keywords
from ..exceptions import ScenarioError
from ..limits.yamlspec import Section
from .timebase import to_ticks

__all__ = [
    "BASELINE_FORECAST",
    "BASELINE_MEASURED",
    "DisturbancePlan",
    "VoltageSag",
    "add_sag_events",
    "check_ups_needs_ticks",
    "disturbance_plan",
    "disturbance_summary",
    "parse_disturbances",
    "sag_load_loss_vs_baseline",
    "ups_transfer_w",
    "without_disturbances",
]

#: What a forecast's ride-through load loss is measured against.
BASELINE_FORECAST = ("the same forecast draw without the voltage sags (same seed): "
                     "load lost = power without the sag - power with it")
#: What a measured trace's ride-through load loss is measured against.
BASELINE_MEASURED = ("mean power over the second before the sag (measured telemetry has "
                     "no sag-free counterfactual; the workload's own swing is counted)")


@dataclass(frozen=True)
class VoltageSag:
    """A voltage sag at the point of interconnection.

    Attributes
    ----------
    name : str
    at_utc : pandas.Timestamp
        Start of the sag (UTC).
    residual_voltage_pu : float
        Voltage during the sag, per unit of nominal (0.5: a sag to 50 %) [pu].
    duration_s : float
        Length of the sag [s].
    trip_fraction : float
        Probability that a node's supplies drop out [-].
    ups_fraction : float
        Share of the untripped IT load carried by UPS batteries during the sag [-].
    ups_return_s : float
        Time over which the UPS walks the load back onto the grid after the sag [s].
    outage_s : float
        From the sag until tripped nodes are back and their jobs start up [s].
    cease_fraction : float
        Share of the grid power left (after the UPS transfer and the trips) that ceases
        during the sag and resumes at its end: supplies on their hold-up, loads at
        reduced voltage; 1 at 0 pu, where nothing is drawn [-].
    ups_return_delay_s : float
        From the end of the sag to the start of the UPS walk-in [s].
    aux_trip_fraction : float
        Share of the non-IT power (facility minus IT) that trips at the sag [-].
    aux_outage_s : float
        From the sag until the tripped non-IT load is back [s].
    from_model : bool
        True when the scenario gave none of the effect keys (the fractions and times
        above): the interconnection commands then take the sag's effect from the site's
        equipment model (:func:`powerlab.interconnect.eventresponse.scenario_with_sags`);
        the engine alone applies the zeros.
    """

    name: str
    at_utc: pd.Timestamp
    residual_voltage_pu: float
    duration_s: float
    trip_fraction: float = 0.0
    ups_fraction: float = 0.0
    ups_return_s: float = 0.0
    outage_s: float = 600.0
    cease_fraction: float = 0.0
    ups_return_delay_s: float = 0.0
    aux_trip_fraction: float = 0.0
    aux_outage_s: float = 0.0
    from_model: bool = False

    @property
    def acts_on_facility(self) -> bool:
        """Whether the sag changes the grid power beyond the IT nodes' trips."""
        return bool(self.ups_fraction > 0 or self.cease_fraction > 0
                    or self.aux_trip_fraction > 0)


#: The keys of a sag that state its effect (none given: the equipment model decides).
_EFFECT_KEYS = ("trip_fraction", "ups_fraction", "ups_return_s", "outage_s",
                "cease_fraction", "ups_return_delay_s", "aux_trip_fraction", "aux_outage_s")


def parse_disturbances(raw, source: str | None = None) -> tuple[VoltageSag, ...]:
    """Read the scenario's ``disturbances:`` list (key paths ``disturbances[i].key``)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ScenarioError("expected a list of disturbances", key="disturbances",
                            path=source)
    out = []
    for i, item in enumerate(raw):
        s = Section(item, f"disturbances[{i}]", source)
        kind = s.string("type", "voltage_sag")
        if kind != "voltage_sag":
            raise s.error("type", f"expected 'voltage_sag', got {kind!r}")
        res = s.number("residual_voltage_pu", required=True, hi=1.0)
        if res >= 1.0:
            raise s.error("residual_voltage_pu", "must be below 1 pu (a sag lowers the "
                          "voltage; 0.7 means a sag to 70 % of nominal)")
        model = not any(s.has(k) for k in _EFFECT_KEYS)
        sag = VoltageSag(
            from_model=model,
            name=s.string("name", f"sag{i}"),
            at_utc=s.timestamp("at_utc"),
            residual_voltage_pu=res,
            duration_s=s.number("duration_s", required=True, lo=0.0, lo_open=True,
                                hi=3600.0),
            trip_fraction=s.number("trip_fraction", 0.0, hi=1.0),
            ups_fraction=s.number("ups_fraction", 0.0, hi=1.0),
            ups_return_s=s.number("ups_return_s", 0.0, hi=3600.0),
            outage_s=s.number("outage_s", 600.0, hi=7 * 86400.0),
            cease_fraction=s.number("cease_fraction", 0.0, hi=1.0),
            ups_return_delay_s=s.number("ups_return_delay_s", 0.0, hi=3600.0),
            aux_trip_fraction=s.number("aux_trip_fraction", 0.0, hi=1.0),
            aux_outage_s=s.number("aux_outage_s", 0.0, hi=7 * 86400.0),
        )
        if sag.outage_s < sag.duration_s and sag.trip_fraction > 0:
            raise s.error("outage_s", f"{sag.outage_s:g} s is shorter than the sag "
                          f"({sag.duration_s:g} s): tripped nodes stay dark at least "
                          "while it lasts")
        s.finish()
        out.append(sag)
    names = [d.name for d in out]
    for i, n in enumerate(names):
        if names.index(n) != i:
            raise ScenarioError(f"duplicate disturbance name {n!r}",
                                key=f"disturbances[{i}].name", path=source)
    return tuple(out)


# --------------------------------------------------------------------------- per draw


@dataclass(frozen=True)
class DisturbancePlan:
    """What the disturbances do in one draw.

    Attributes
    ----------
    trips : list of list of (int, int)
        Per job: ``(sag tick, downtime ticks)`` of each sag that stops it.
    dark : list of (int, int, int)
        ``(first tick, end tick, tripped nodes)`` per sag.
    """

    trips: list
    dark: list


def _sag_tick(sag: VoltageSag, t0: pd.Timestamp, tick_s: float) -> int:
    return to_ticks((sag.at_utc - t0).total_seconds(), tick_s)


def disturbance_plan(scenario, t0: pd.Timestamp, tick_s: float, seed: int, draw: int
                     ) -> DisturbancePlan | None:
    """Which nodes and jobs each sag trips in one draw (None without disturbances).

    Tripped nodes per job and among the nodes in no job are binomial draws from
    ``numpy.random.default_rng([seed, draw, sag index, 2])``.
    """
    sags = getattr(scenario, "disturbances", ())
    if not sags:
        return None
    hw = scenario.hardware
    job_nodes = [math.ceil(j.gpus / hw.gpus_per_node) for j in scenario.jobs]
    free_nodes = max(0, hw.nodes - sum(job_nodes))
    trips: list = [[] for _ in scenario.jobs]
    dark = []
    for k, sag in enumerate(sags):
        rng = np.random.default_rng([int(seed), int(draw), k, 2])
        per_job = rng.binomial(job_nodes, sag.trip_fraction)
        free = int(rng.binomial(free_nodes, sag.trip_fraction))
        t = _sag_tick(sag, t0, tick_s)
        n_out = max(1, to_ticks(sag.outage_s, tick_s))
        for ji, n_tripped in enumerate(per_job):
            if n_tripped > 0:
                trips[ji].append((t, n_out))
        dark.append((t, t + n_out, int(per_job.sum()) + free))
    return DisturbancePlan(trips, dark)


def apply_dark(it_w: np.ndarray, plan: DisturbancePlan | None, scenario) -> None:
    """Remove the tripped nodes' power (node overhead and idle GPUs: their jobs are down)
    from one draw's IT power, in place.  The engine's GPU fall transient at the trip
    (tens of ms) is kept: the first ticks of the outage are slightly above zero."""
    if plan is None:
        return
    hw = scenario.hardware
    per_node = hw.node_overhead_w + hw.gpus_per_node * hw.gpu_idle_w
    n = len(it_w)
    for a, b, nodes in plan.dark:
        a, b = max(0, a), min(n, b)
        if b > a and nodes:
            it_w[a:b] -= nodes * per_node


def check_ups_needs_ticks(scenario, keep_ticks: bool) -> None:
    """Refuse a reduced forecast (``keep_ticks=False``) of sags that move load to UPS:
    the transfer is applied to the per-tick facility power only, and the reduction
    would silently leave it out."""
    if keep_ticks:
        return
    for i, sag in enumerate(getattr(scenario, "disturbances", ())):
        if sag.acts_on_facility:
            raise ScenarioError("a voltage sag with ups_fraction, cease_fraction or "
                                "aux_trip_fraction > 0 needs the per-tick power: run "
                                "forecast(..., keep_ticks=True) or set them to 0",
                                key=f"disturbances[{i}].ups_fraction")


def ups_transfer_w(scenario, it_w: np.ndarray, t0: pd.Timestamp, tick_s: float,
                   facility_w: np.ndarray | None = None) -> np.ndarray | None:
    """Power the sags take off the grid beyond the tripped nodes, per draw and tick
    (subtracted at the point of interconnection) [W]; None without such sags.

    The UPS batteries' share of the IT load (during the sag, held for
    ``ups_return_delay_s``, then walked back linearly over ``ups_return_s``); with the
    facility power given, also the tripped non-IT load (``aux_trip_fraction`` of facility
    minus IT power for ``aux_outage_s``) and, during the sag, ``cease_fraction`` of what
    is left (all of it at ``cease_fraction`` 1: the grid power is then 0 exactly).
    """
    sags = [s for s in getattr(scenario, "disturbances", ()) if s.acts_on_facility]
    if not sags:
        return None
    out = np.zeros_like(it_w)
    n = it_w.shape[1]
    for sag in sags:
        a = _sag_tick(sag, t0, tick_s)
        b = a + max(1, to_ticks(sag.duration_s, tick_s))
        if sag.ups_fraction > 0:
            h, r = to_ticks(sag.ups_return_delay_s, tick_s), to_ticks(sag.ups_return_s,
                                                                        tick_s)
            share = np.concatenate([np.ones(b - a + h),
                                    1.0 - np.arange(1, r + 1) / (r + 1)])
            k = np.arange(a, a + len(share))
            ok = (k >= 0) & (k < n)
            out[:, k[ok]] += sag.ups_fraction * it_w[:, k[ok]] * share[ok]
        if facility_w is not None:
            _aux_and_cease(out, sag, it_w, facility_w, (a, b), tick_s)
    return out


def _aux_and_cease(out: np.ndarray, sag: VoltageSag, it_w: np.ndarray,
                   facility_w: np.ndarray, ab: tuple[int, int], tick_s: float) -> None:
    """Add the tripped non-IT load and the power ceasing during the sag to ``out``."""
    a, b = ab
    n = it_w.shape[1]
    if sag.aux_trip_fraction > 0:
        e = min(n, a + max(1, to_ticks(sag.aux_outage_s, tick_s)))
        if e > max(a, 0):
            aux = np.clip(facility_w[:, max(a, 0):e] - it_w[:, max(a, 0):e], 0.0, None)
            out[:, max(a, 0):e] += sag.aux_trip_fraction * aux
    a0, b0 = max(a, 0), min(b, n)
    if sag.cease_fraction > 0 and b0 > a0:
        left = facility_w[:, a0:b0] - out[:, a0:b0]
        out[:, a0:b0] = (facility_w[:, a0:b0] if sag.cease_fraction >= 1.0 else
                         out[:, a0:b0] + sag.cease_fraction * left)


def add_sag_events(ev: pd.DataFrame, scenario, draws: int, t0: pd.Timestamp,
                   tick_s: float) -> pd.DataFrame:
    """The events frame with a ``voltage_sag`` row per sag and draw and a
    ``residual_voltage_pu`` column (NaN on other rows)."""
    sags = getattr(scenario, "disturbances", ())
    if not sags:
        return ev
    rows = []
    for sag in sags:
        t = _sag_tick(sag, t0, tick_s)
        for d in range(draws):
            rows.append({"draw": d, "tick": t, "job": "", "event": "voltage_sag",
                         "duration_s": sag.duration_s,
                         "residual_voltage_pu": sag.residual_voltage_pu})
    add = pd.DataFrame(rows)
    add.insert(1, "timestamp", (t0 + pd.to_timedelta(add["tick"] * tick_s, unit="s")))
    add["timestamp"] = add["timestamp"].astype("datetime64[ns, UTC]")
    out = ev.copy()
    out["residual_voltage_pu"] = np.nan
    out = pd.concat([out, add[out.columns]], ignore_index=True)
    return out.sort_values(["draw", "tick", "job"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- summary


def _second_means(x: np.ndarray, tick_s: float, a: int, b: int) -> np.ndarray:
    per = max(1, round(1.0 / tick_s))
    seg = x[a:b]
    m = len(seg) // per
    return seg[:m * per].reshape(m, per).mean(axis=1) if m else seg


def without_disturbances(scenario):
    """The scenario with no disturbances (the counterfactual of a ride-through)."""
    return scenario.replace(disturbances=())


def sag_load_loss_vs_baseline(power_w: np.ndarray, baseline_w: np.ndarray, tick_s: float,
                              sag_tick: int, duration_s: float, observe_s: float = 1.0
                              ) -> tuple[float, float]:
    """Load a voltage sag takes off the grid: ``(during the sag, after it)`` [W].

    ``loss(t) = baseline(t) - power(t)`` where ``baseline`` is the power the site draws
    in the same draw without the sag.  During the sag: the largest ``loss`` from the
    sag's first tick to its end; after it: the largest ``loss`` from its end to
    ``observe_s`` later (the load not yet back once the voltage has recovered).  Both are
    at least 0, and exactly 0 for a sag that changes nothing.

    Parameters
    ----------
    power_w, baseline_w : ndarray
        Power with and without the sag, one value per tick [W].
    tick_s : float
        [s].
    sag_tick : int
        First tick of the sag [-].
    duration_s, observe_s : float
        Length of the sag, and the time after it still counted [s].

    Returns
    -------
    (float, float)
        [W], [W]; NaN when the sag lies outside the series.
    """
    x = np.asarray(power_w, dtype=float)
    b = np.asarray(baseline_w, dtype=float)
    n = len(x)
    if sag_tick < 0 or sag_tick >= n:
        return math.nan, math.nan
    end = min(n, sag_tick + max(1, math.ceil(duration_s / tick_s - 1e-9)))
    obs = min(n, end + max(0, math.ceil(observe_s / tick_s - 1e-9)))
    d = b - x
    during = max(0.0, float(d[sag_tick:end].max()))
    after = max(0.0, float(d[end:obs].max())) if obs > end else 0.0
    return during, after


@renamed_keywords(scope="boundary")
def disturbance_summary(res, boundary: str = "facility", baseline=None) -> pd.DataFrame:
    """Per sag: load lost at the point of interconnection and the recovery.

    Parameters
    ----------
    res : ForecastResult
        A forecast with disturbances (kept ticks).
    boundary : {'facility', 'it'}
    baseline : ForecastResult, optional
        The same forecast without disturbances (same seed, draws and tick); default: run
        it (one more engine run, ``res.sag_free()``, which the engine attaches).

    Returns
    -------
    DataFrame
        One row per sag: ``residual_voltage_pu``, ``duration_s``,
        ``load_loss_during_sag_w_median`` / ``_max`` and ``load_loss_after_sag_w_median``
        / ``_max`` (over draws; :func:`sag_load_loss_vs_baseline` with 1 s after the sag,
        or until the UPS has returned the load and 1 s more) [W], ``load_loss_w_median``
        and ``load_loss_w_max`` (the larger of the two) [W], ``tripped_jobs_median`` [-],
        ``recovery_s_median`` (from the lowest power until it is back within 5 % of the
        lost load of the mean over the second before the sag) [s],
        ``recovery_ramp_w_per_s_max`` (largest rise between consecutive 1-s means within
        the hour after the sag) [W/s] and ``baseline`` (what the loss is measured
        against: ``BASELINE_FORECAST``).
    """
    sags = getattr(res.scenario, "disturbances", ())
    if not sags:
        return pd.DataFrame()
    if not getattr(res, "keeps_ticks", True):
        return pd.DataFrame({"note": [("the load lost in voltage sags needs "
                                       "forecast(..., keep_ticks=True)")]})
    x, x0 = _with_and_without(res, boundary, baseline)
    rows = {}
    for sag in sags:
        a = _sag_tick(sag, res.start_utc, res.tick_s)
        if 0 <= a < x.shape[1]:
            rows[sag.name] = _sag_row(sag, _sag_draws(res, x, x0, sag, a))
            if getattr(sag, "from_model", False):
                rows[sag.name]["baseline"] = (
                    "NOT MODELLED HERE: the sag states no effect (no trip_fraction, "
                    "ups_fraction), so this engine run drops no load; its effect comes "
                    "from the site's equipment model: forecast "
                    "powerlab.interconnect.scenario_with_sags(scenario, None), as "
                    "powerlab forecast, comply, size-mitigation and study-package do")
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("sag")


def _with_and_without(res, boundary: str, baseline) -> tuple[np.ndarray, np.ndarray]:
    """Step: the power of every draw with the sags and without them (the baseline
    forecast, run through ``res.sag_free()`` when not given), shape (draws, ticks) [W]."""
    if baseline is None:
        rerun = getattr(res, "sag_free", None)    # set by the engine (forecast.py)
        if rerun is None:
            raise ScenarioError("the load lost in a sag needs the same forecast without "
                                "the disturbances: pass baseline=", key="baseline")
        baseline = rerun()
    x = res.power_w(boundary)
    x0 = baseline.power_w(boundary)
    if x0.shape != x.shape:
        raise ScenarioError("the baseline forecast differs in draws or ticks", key="baseline")
    return x, x0


def _sag_draws(res, x: np.ndarray, x0: np.ndarray, sag: VoltageSag, a: int) -> dict:
    """Step: per draw, the load lost during and after the sag starting at tick ``a`` [W],
    the recovery time [s], the largest recovery ramp over 1-s means [W/s] and the jobs
    it tripped [-]."""
    tick, n = res.tick_s, x.shape[1]
    ev = res.events
    observe = 1.0 + sag.ups_return_s
    out: dict[str, list] = {"during": [], "after": [], "recovery": [], "ramp": [],
                            "tripped": []}
    for d in range(res.draws):
        dl, af = sag_load_loss_vs_baseline(x[d], x0[d], tick, a, sag.duration_s, observe)
        out["during"].append(dl)
        out["after"].append(af)
        out["recovery"].append(_recovery_s(x[d], tick, a, max(dl, af),
                                           sag.duration_s + observe))
        sm = _second_means(x[d], tick, a, min(n, a + to_ticks(3600.0, tick)))
        out["ramp"].append(float(np.max(np.diff(sm), initial=0.0)))
        t_ev = ev[(ev["draw"] == d) & (ev["event"] == "trip") & (ev["tick"] == a)]
        out["tripped"].append(len(t_ev))
    return out


def _recovery_s(x: np.ndarray, tick_s: float, a: int, loss: float, span_s: float
                ) -> float:
    """Time from the lowest power within ``span_s`` of the sag's start (tick ``a``) until
    the power is back within 5 % of the lost load of the mean over the second before the
    sag [s]: 0 without loss, NaN when it never is.  (The sag-free draw is no target here:
    a restarted job's steps run out of phase with it.)"""
    if not loss > 0:
        return 0.0
    n = len(x)
    pre = max(1, round(1.0 / tick_s))
    before = float(x[max(0, a - pre):a].mean()) if a > 0 else float(x[a])
    low = int(np.argmin(x[a:min(n, a + to_ticks(span_s, tick_s) + 1)]))
    back = np.flatnonzero(x[a + low:] >= before - 0.05 * loss)
    return (low + back[0]) * tick_s if len(back) else math.nan


def _sag_row(sag: VoltageSag, figs: dict) -> dict:
    """Step: a sag's row, the medians and maxima over draws of :func:`_sag_draws`."""
    during, after, recs = figs["during"], figs["after"], figs["recovery"]
    both = np.maximum(during, after)
    return {
        "at_utc": sag.at_utc, "residual_voltage_pu": sag.residual_voltage_pu,
        "duration_s": sag.duration_s,
        "load_loss_during_sag_w_median": float(np.median(during)),
        "load_loss_during_sag_w_max": float(np.max(during)),
        "load_loss_after_sag_w_median": float(np.median(after)),
        "load_loss_after_sag_w_max": float(np.max(after)),
        "load_loss_w_median": float(np.median(both)),
        "load_loss_w_max": float(np.max(both)),
        "tripped_jobs_median": float(np.median(figs["tripped"])),
        "recovery_s_median": float(np.nanmedian(recs)) if np.isfinite(recs).any()
        else math.nan,
        "recovery_ramp_w_per_s_max": float(np.max(figs["ramp"])),
        "baseline": BASELINE_FORECAST,
    }
