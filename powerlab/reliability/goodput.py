"""Goodput of a planned training job: effective training time ratio (ETTR) with its
interval, the checkpoint interval that maximises it, and the checkpoint and restart
events per day it implies (the power forecast's checkpoint dips and restart swings).

Two estimates, from the same fitted node hazards (:mod:`powerlab.reliability.faultfit`):

- **Young/Daly** (first order): ``ETTR = 1 - C/(tau + C) - ((tau + C)/2 + R)/M`` with
  checkpoint write time ``C``, training ``tau`` between checkpoints, restart ``R``
  (detection to training again) and the job's mean time to failure ``M``
  (:func:`powerlab.reliability.interruptions.checkpoint_waste_fraction`); Daly's interval
  [1]_ maximises it.
- **Simulation** (:func:`simulate_goodput`): the job's nodes are drawn from the fitted
  fleet with their gamma frailties (lemon nodes stay lemons: a repaired node returns to
  the spare pool and may rejoin), faults strike running nodes only, a failed node goes
  to repair (times resampled from the record's repairs; ``repair_crews`` limits repairs in
  parallel, a queue), a spare replaces it at once or the job waits for the next repaired
  node; work since the last completed checkpoint is lost, then ``R`` passes.  Each draw
  also redraws the fleet rate from its estimation uncertainty, so the interval holds the
  parameters' uncertainty, the frailty of the nodes the job gets and chance.

Assumptions (stated in every result): faults during a restart or a checkpoint are not
modelled apart (they strike as in training), planned outages are not simulated (their
expected count is reported), and the allocation's last partial interval is kept (a final
checkpoint).

References
----------
.. [1] J. T. Daly, "A higher order estimate of the optimum checkpoint interval for
   restart dumps", Future Generation Computer Systems 22(3), 303-312, 2006.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._options import Options
from .._summary import Results, Summary
from ..exceptions import AnalysisError
from .interruptions import checkpoint_waste_fraction, daly_interval_s
from .jobscale import job_interruptions, spare_pool
from .repair import repair_distribution

__all__ = ["GoodputPlan", "GoodputResult", "ettr_first_order", "plan_goodput",
           "simulate_goodput"]


@dataclass(frozen=True)
class GoodputPlan(Options):
    """A planned job and its recovery (see :func:`plan_goodput`).

    Attributes
    ----------
    gpus : int
    days : float
        Allocation [d].
    checkpoint_s : float
        Time to write one checkpoint (training blocked) [s].
    restart_s : float
        Detection plus restart, fault to training again, with a spare at hand [s].
    interval_s : float or None
        Training between checkpoints [s]; None: Daly's optimum.
    gpus_per_node : int
        GPUs per node [-] (8 unless the fleet says otherwise: an assumption).
    spares : int or None
        Spare nodes; None: the pool that keeps the job whole with probability 0.99.
    repair_crews : int or None
        Repairs in parallel; None: unlimited.
    draws : int
        Simulated allocations [-].
    seed : int
    retire_after : int or None
        A node with this many faults in the allocation is retired instead of repaired
        (lemon-node removal); None keeps every node.
    train_w, checkpoint_w, idle_w : float or None
        Per-GPU power while training, writing a checkpoint and down (restart) [W]; when
        given, the plan states the facility's power step at each checkpoint and restart
        (GPU power only) [MW].
    """

    gpus: int = 16_384
    days: float = 54.0
    checkpoint_s: float = 60.0
    restart_s: float = 600.0
    interval_s: float | None = None
    gpus_per_node: int = 8
    spares: int | None = None
    repair_crews: int | None = None
    draws: int = 40
    seed: int = 0
    retire_after: int | None = None
    train_w: float | None = None
    checkpoint_w: float | None = None
    idle_w: float | None = None

    def __post_init__(self):
        if self.gpus <= 0 or self.days <= 0 or self.gpus_per_node <= 0:
            raise AnalysisError("gpus, days and gpus_per_node must be positive")
        if self.checkpoint_s < 0 or self.restart_s < 0 or self.draws < 1:
            raise AnalysisError("checkpoint_s and restart_s must be >= 0, draws >= 1")
        if self.interval_s is not None and not self.interval_s > 0:
            raise AnalysisError("interval_s must be positive")

    @property
    def nodes(self) -> int:
        return math.ceil(self.gpus / self.gpus_per_node)


def ettr_first_order(interval_s, checkpoint_s, restart_s, mttf_s):
    """Young/Daly first-order ETTR, ``1 - waste`` clipped at 0 [-]."""
    return np.maximum(0.0, 1.0 - checkpoint_waste_fraction(interval_s, checkpoint_s,
                                                          mttf_s, restart_s))


def _sampler(params: dict, durations_d):
    if durations_d is not None and len(durations_d):
        d = np.asarray(durations_d, float)
        return lambda rng: float(d[rng.integers(len(d))])
    dist = repair_distribution(params["repair_model"],
                               (params["repair_shape"], params["repair_scale_d"]))
    return lambda rng: float(dist.rvs(random_state=rng))


def _one_run(rng, lam_day, theta, plan: GoodputPlan, spares, tau, repair):
    n, T, C, R = plan.nodes, plan.days * 86400.0, plan.checkpoint_s, plan.restart_s
    pool = n + spares
    z = rng.gamma(1 / theta, theta, pool) if theta > 0 else np.ones(pool)
    active = np.arange(n)
    free = list(range(n, pool))
    repairs: list = []
    crews = [0.0] * plan.repair_crews if plan.repair_crews else None
    count = np.zeros(pool, int)
    t = work = waited = 0.0
    faults = ckpts = 0
    cyc = tau + C
    while t < T:
        za = z[active]
        x = rng.exponential(86400.0 / (lam_day * za.sum()))
        seg = min(x, T - t)
        full = math.floor(seg / cyc)
        work += full * tau
        ckpts += full
        if x >= T - t:
            work += min(seg - full * cyc, tau)
            break
        t += x
        faults += 1
        j = int(np.searchsorted(np.cumsum(za), rng.random() * za.sum()))
        j = min(j, n - 1)
        node = int(active[j])
        count[node] += 1
        if not (plan.retire_after and count[node] >= plan.retire_after):
            dur = repair(rng) * 86400.0
            begin = max(t, heapq.heappop(crews)) if crews is not None else t
            if crews is not None:
                heapq.heappush(crews, begin + dur)
            heapq.heappush(repairs, (begin + dur, node))
        while repairs and repairs[0][0] <= t:
            free.append(heapq.heappop(repairs)[1])
        if not free and not repairs:      # every node retired: the allocation is lost
            waited += T - t
            break
        if not free:
            back, node = heapq.heappop(repairs)
            waited += back - t
            t = back
            free.append(node)
        active[j] = free.pop(0)
        t += R
    return work / T, faults, ckpts, waited


def simulate_goodput(params: dict, plan: GoodputPlan, *, interval_s: float,
                     spares: int, durations_d=None) -> pd.DataFrame:
    """Simulated allocations of the plan's job (see the module's text).

    Returns
    -------
    pandas.DataFrame
        One row per draw: ``ettr`` [-], ``interruptions``, ``checkpoints`` [-],
        ``waited_for_spare_s`` [s], ``rate_per_node_day`` (the draw's fleet rate).
    """
    rng = np.random.default_rng(plan.seed)
    repair = _sampler(params, durations_d)
    rows = []
    for _ in range(plan.draws):
        lam = rng.gamma(params["faults"] + 0.5, 1.0 / params["exposure_node_days"])
        e, k, c, w = _one_run(rng, lam, params.get("theta", 0.0), plan, spares,
                              interval_s, repair)
        rows.append({"ettr": e, "interruptions": k, "checkpoints": c,
                     "waited_for_spare_s": w, "rate_per_node_day": lam})
    return pd.DataFrame(rows)


@dataclass(frozen=True, repr=False)
class GoodputResult(Results):
    """A job's goodput plan (see :func:`plan_goodput`).

    Attributes
    ----------
    table : pandas.DataFrame
        ``metric, value, lower, upper, unit, note``: the rows of ``goodput.csv``.
    intervals : pandas.DataFrame
        Checkpoint intervals scanned: first-order and simulated ETTR.
    draws : pandas.DataFrame
        The simulation at the chosen interval, one row per draw.
    plan : GoodputPlan
    """

    table: pd.DataFrame
    intervals: pd.DataFrame
    draws: pd.DataFrame
    plan: GoodputPlan

    def value(self, metric: str) -> float:
        return float(self.table.set_index("metric").loc[metric, "value"])

    def summary_frame(self) -> pd.DataFrame:
        return self.table

    def summary(self) -> Summary:
        p = self.plan
        s = Summary(f"Goodput plan: {p.gpus:,} GPUs ({p.nodes:,} nodes), {p.days:g} d, "
                    f"checkpoint {p.checkpoint_s:g} s, restart {p.restart_s:g} s")
        s.add_df(self.table)
        return s


def _swings(plan: GoodputPlan) -> list:
    """The GPU power step of each checkpoint and restart [MW], when powers are given."""
    rows = []
    if plan.train_w is not None and plan.checkpoint_w is not None:
        rows.append(_row("checkpoint_swing_power_megawatts",
                         plan.gpus * (plan.train_w - plan.checkpoint_w) / 1e6, unit="MW",
                         note="GPU power drop at each checkpoint, back up after it"))
    if plan.train_w is not None and plan.idle_w is not None:
        rows.append(_row("restart_swing_power_megawatts",
                         plan.gpus * (plan.train_w - plan.idle_w) / 1e6, unit="MW",
                         note="GPU power drop at each failure, back up at restart"))
    return rows


def _row(metric, value, lower=np.nan, upper=np.nan, unit="", note=""):
    return {"metric": metric, "value": value, "lower": lower, "upper": upper,
            "unit": unit, "note": note}


def plan_goodput(params: dict, plan: GoodputPlan | None = None, *, durations_d=None,
                 factors=(0.5, 0.75, 1.0, 1.5, 2.0), **kw) -> GoodputResult:
    """Goodput of a planned job from fitted node hazards.

    Parameters
    ----------
    params : dict
        :meth:`powerlab.reliability.faultfit.FaultFit.params`.
    plan : GoodputPlan, optional
        The job; keywords (``gpus=...``) replace its fields.
    durations_d : array-like, optional
        Observed repair durations to resample [d]; default the fitted repair model.
    factors : sequence of float
        Multiples of Daly's interval the simulation scans for the best interval [-].

    Returns
    -------
    GoodputResult
    """
    plan = GoodputPlan.from_kwargs(plan, **kw)
    ji = job_interruptions(params, plan.gpus, plan.days, gpus_per_node=plan.gpus_per_node,
                           seed=plan.seed).iloc[0]
    m = ji["mttf_h"] * 3600.0
    daly = daly_interval_s(plan.checkpoint_s, m) if plan.checkpoint_s > 0 else m / 10
    pool = spare_pool(params, plan.nodes, seed=plan.seed)
    spares = pool["spares"] if plan.spares is None else int(plan.spares)
    chosen = daly if plan.interval_s is None else float(plan.interval_s)
    grid = sorted({chosen, *(daly * f for f in factors)})
    scan = []
    for tau in grid:
        sim = simulate_goodput(params, plan, interval_s=tau, spares=spares,
                               durations_d=durations_d)
        scan.append({"interval_s": tau, "ettr_first_order": float(ettr_first_order(
            tau, plan.checkpoint_s, plan.restart_s, m)), "ettr_simulated": sim["ettr"].mean(),
            "_sim": sim})
    best = max(scan, key=lambda r: r["ettr_simulated"])
    here = next(r for r in scan if r["interval_s"] == chosen)["_sim"]
    e_lo = float(ettr_first_order(chosen, plan.checkpoint_s, plan.restart_s,
                                  ji["mttf_lower_h"] * 3600))
    e_hi = float(ettr_first_order(chosen, plan.checkpoint_s, plan.restart_s,
                                  ji["mttf_upper_h"] * 3600))
    q = here[["ettr", "interruptions", "checkpoints"]].quantile([0.05, 0.95])
    days = plan.days
    rows = [
        _row("expected_interruptions", ji["expected_interruptions"],
             ji["predictive_lower"], ji["predictive_upper"], "-",
             "unexpected; 90 % predictive interval (rate, frailty, chance)"),
        _row("expected_planned_interruptions", ji["expected_planned"], unit="-",
             note="not simulated"),
        _row("mttf_h", ji["mttf_h"], ji["mttf_lower_h"], ji["mttf_upper_h"], "h",
             "95 % interval of the fleet rate"),
        _row("ettr_first_order", float(ettr_first_order(chosen, plan.checkpoint_s,
                                                        plan.restart_s, m)),
             min(e_lo, e_hi), max(e_lo, e_hi), "-", "Young/Daly at the MTTF's interval"),
        _row("ettr_simulated", here["ettr"].mean(), q.loc[0.05, "ettr"],
             q.loc[0.95, "ettr"], "-", f"{plan.draws} draws; 5-95 %; lemon nodes, "
             f"{spares} spares, repair queue"),
        _row("checkpoint_interval_s", chosen, unit="s",
             note="Daly" if plan.interval_s is None else "given"),
        _row("daly_interval_s", daly, unit="s"),
        _row("best_checkpoint_interval_s", best["interval_s"], unit="s",
             note=f"highest simulated ETTR of {len(grid)} intervals "
                  f"({best['ettr_simulated']:.4f})"),
        _row("checkpoints_per_day", here["checkpoints"].mean() / days,
             q.loc[0.05, "checkpoints"] / days, q.loc[0.95, "checkpoints"] / days, "1/d",
             "checkpoint power dips"),
        _row("restarts_per_day", here["interruptions"].mean() / days,
             q.loc[0.05, "interruptions"] / days, q.loc[0.95, "interruptions"] / days,
             "1/d", "restart power swings"),
        _row("spare_nodes", spares, unit="-",
             note=f"P(job whole) >= 0.99 at a random time: {pool['spares']}"),
        _row("waited_for_spare_h", here["waited_for_spare_s"].mean() / 3600, unit="h"),
        *_swings(plan),
    ]
    intervals = pd.DataFrame([{k: v for k, v in r.items() if k != "_sim"} for r in scan])
    return GoodputResult(pd.DataFrame(rows), intervals, here, plan)
