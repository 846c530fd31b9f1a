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
  its downtime (:mod:`powerlab.grid.interruptions`).
* **Ride-through on UPS.** A share ``ups_fraction`` of the IT load that did not trip
  moves to the UPS batteries for ``duration_s`` (the UPS isolates it from the sag) and is
  walked back onto the grid linearly over ``ups_return_s``.  The IT load keeps running;
  the point of interconnection sees it leave and come back.  Battery recharge after the
  event is not modelled.

The forecast shows the MW lost at the point of interconnection and the recovery ramp;
each sag is an event row (``event == "voltage_sag"``, ``residual_voltage_pu``,
``duration_s``) that :mod:`powerlab.interconnect.compliance` ride-through checks read, and
:func:`disturbance_summary` reports per sag the load lost (median and worst credible
over draws, [W]), the recovery time and the largest recovery ramp over 1-s means.

Without disturbances nothing changes: no random numbers are drawn, no power is touched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..exceptions import ScenarioError
from .timebase import to_ticks
from .yamlspec import Section

__all__ = [
    "DisturbancePlan",
    "VoltageSag",
    "add_sag_events",
    "check_ups_needs_ticks",
    "disturbance_plan",
    "disturbance_summary",
    "parse_disturbances",
    "ups_transfer_w",
]


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
    """

    name: str
    at_utc: pd.Timestamp
    residual_voltage_pu: float
    duration_s: float
    trip_fraction: float = 0.0
    ups_fraction: float = 0.0
    ups_return_s: float = 0.0
    outage_s: float = 600.0


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
        sag = VoltageSag(
            name=s.string("name", f"sag{i}"),
            at_utc=s.timestamp("at_utc"),
            residual_voltage_pu=res,
            duration_s=s.number("duration_s", required=True, lo=0.0, lo_open=True,
                                hi=3600.0),
            trip_fraction=s.number("trip_fraction", 0.0, hi=1.0),
            ups_fraction=s.number("ups_fraction", 0.0, hi=1.0),
            ups_return_s=s.number("ups_return_s", 0.0, hi=3600.0),
            outage_s=s.number("outage_s", 600.0, hi=7 * 86400.0),
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
        if sag.ups_fraction > 0:
            raise ScenarioError("a voltage sag with ups_fraction > 0 needs the per-tick "
                                "power: run forecast(..., keep_ticks=True) or set "
                                "ups_fraction to 0", key=f"disturbances[{i}].ups_fraction")


def ups_transfer_w(scenario, it_w: np.ndarray, t0: pd.Timestamp, tick_s: float
                   ) -> np.ndarray | None:
    """Power the UPS batteries carry per draw and tick (subtracted at the point of
    interconnection) [W]; None without sags moving load to UPS."""
    sags = [s for s in getattr(scenario, "disturbances", ()) if s.ups_fraction > 0]
    if not sags:
        return None
    out = np.zeros_like(it_w)
    n = it_w.shape[1]
    for sag in sags:
        a = _sag_tick(sag, t0, tick_s)
        b = a + max(1, to_ticks(sag.duration_s, tick_s))
        r = to_ticks(sag.ups_return_s, tick_s)
        share = np.concatenate([np.ones(b - a), 1.0 - np.arange(1, r + 1) / (r + 1)])
        k = np.arange(a, a + len(share))
        ok = (k >= 0) & (k < n)
        out[:, k[ok]] += sag.ups_fraction * it_w[:, k[ok]] * share[ok]
    return out


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


def disturbance_summary(res, scope: str = "facility") -> pd.DataFrame:
    """Per sag: load lost at the point of interconnection and the recovery.

    Columns: ``residual_voltage_pu``, ``duration_s``, ``load_loss_w_median`` and
    ``load_loss_w_max`` (over draws, measured from the mean of the second before the
    sag, as :func:`powerlab.interconnect.loadmetrics.sag_load_loss` does) [W],
    ``load_loss_w_worst_credible`` (the largest over draws of the highest power in the
    minute before the sag minus the lowest after it: the sag striking at the top of a
    step) [W],
    ``tripped_jobs_median`` [-], ``recovery_s_median`` (from the sag until the power is
    back within 5 % of the lost load of its pre-sag level) [s] and
    ``recovery_ramp_w_per_s_max`` (largest rise between consecutive 1-s means within
    the hour after the sag) [W/s].  The load lost is the mean power over the second
    before the sag minus the lowest power from its start to 1 s after the UPS has
    returned the load (or the outage of tripped nodes ends, whichever is earlier).
    """
    sags = getattr(res.scenario, "disturbances", ())
    if not sags:
        return pd.DataFrame()
    if not getattr(res, "keeps_ticks", True):
        return pd.DataFrame({"note": [("the load lost in voltage sags needs "
                                       "forecast(..., keep_ticks=True)")]})
    x = res.power_w(scope)
    tick = res.tick_s
    n = x.shape[1]
    pre = max(1, round(1.0 / tick))
    ev = res.events
    rows = {}
    for sag in sags:
        a = _sag_tick(sag, res.start_utc, tick)
        if a - pre < 0 or a >= n:
            continue
        window = max(sag.duration_s + sag.ups_return_s, sag.duration_s) + 1.0
        if sag.trip_fraction > 0:
            window = max(window, min(sag.outage_s, 60.0))
        b = min(n, a + max(1, to_ticks(window, tick)))
        losses, recs, ramps, tripped = [], [], [], []
        peak_pre = max(1, to_ticks(60.0, tick))
        worst = []
        for d in range(res.draws):
            before = float(x[d, a - pre:a].mean())
            lowest = float(x[d, a:b].min())
            loss = max(0.0, before - lowest)
            losses.append(loss)
            worst.append(max(0.0, float(x[d, max(0, a - peak_pre):a].max()) - lowest))
            after = x[d, a:]
            back = np.flatnonzero(after >= before - 0.05 * loss) if loss > 0 else [0]
            # first tick after the lowest point that is back near the pre-sag level
            low = int(np.argmin(x[d, a:b]))
            later = [k for k in back if k >= low] if loss > 0 else [0]
            recs.append(later[0] * tick if len(later) else math.nan)
            sm = _second_means(x[d], tick, a, min(n, a + to_ticks(3600.0, tick)))
            ramps.append(float(np.max(np.diff(sm), initial=0.0)))
            t_ev = ev[(ev["draw"] == d) & (ev["event"] == "trip")
                      & (ev["tick"] == a)]
            tripped.append(len(t_ev))
        rows[sag.name] = {
            "at_utc": sag.at_utc, "residual_voltage_pu": sag.residual_voltage_pu,
            "duration_s": sag.duration_s,
            "load_loss_w_median": float(np.median(losses)),
            "load_loss_w_max": float(np.max(losses)),
            "load_loss_w_worst_credible": float(np.max(worst)),
            "tripped_jobs_median": float(np.median(tripped)),
            "recovery_s_median": float(np.nanmedian(recs)) if np.isfinite(recs).any()
            else math.nan,
            "recovery_ramp_w_per_s_max": float(np.max(ramps)),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("sag")
