"""From node hazards to jobs: interruptions and MTTF against job size, and the spare pool
that keeps a job at its size.

A synchronous job on :math:`n = N / g` nodes (:math:`N` GPUs, :math:`g` per node) stops
at any node's fault.  Nodes are drawn from a fleet whose rates are :math:`\\lambda z_i`
with gamma frailty :math:`z \\sim \\Gamma(1/\\theta, \\theta)`
(:mod:`powerlab.reliability.faultfit`), so the job's rate
:math:`\\Lambda = \\lambda \\sum_i z_i \\sim \\Gamma(n/\\theta, \\theta\\lambda)` has mean
:math:`n\\lambda` (the MTTF is :math:`1/(n\\lambda)`) and relative spread
:math:`\\sqrt{\\theta/n}`.  The interruptions of a job of :math:`D` days are
Poisson given :math:`\\Lambda`; their predictive interval combines the rate's
estimation uncertainty (Garwood interval of :math:`\\lambda`), the frailty of the nodes
the job gets and the Poisson count (:func:`job_interruptions`).

**Spares.**  A node alternates between service (exponential, rate :math:`\\lambda z_i`)
and repair (mean :math:`\\bar r`); in steady state it is down with probability
:math:`u_i = \\lambda z_i \\bar r / (1 + \\lambda z_i \\bar r)` whatever the repair
distribution's shape (alternating renewal process, Ross [1]_ sec. 7.5).  A pool of
:math:`n + s` nodes keeps the job at :math:`n` nodes while at most :math:`s` are down;
:func:`spare_pool` gives the smallest :math:`s` with :math:`P(\\text{down} \\le s) \\ge p`
at a random time, from the frailty-mixed Poisson-binomial count (Monte Carlo over the
frailties, unlimited repair crews).

References
----------
.. [1] S. M. Ross, *Introduction to Probability Models*, 12th ed., Academic Press, 2019.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..exceptions import AnalysisError

__all__ = ["job_interruptions", "spare_pool"]


def _rng_rates(params: dict, n_nodes: int, draws: int, rng) -> np.ndarray:
    """Draws of a job's total fault rate [1/d]: estimation x frailty."""
    k, expo = params["faults"], params["exposure_node_days"]
    lam = rng.gamma(k + 0.5, 1.0 / expo, draws)          # Jeffreys posterior of lambda
    theta = params.get("theta", 0.0)
    if theta > 0:
        z = rng.gamma(n_nodes / theta, theta, draws) / n_nodes
    else:
        z = np.ones(draws)
    return lam * z * n_nodes


def job_interruptions(params: dict, gpus, days: float, *, gpus_per_node: int = 8,
                      conf: float = 0.90, draws: int = 20_000,
                      seed: int = 0) -> pd.DataFrame:
    """Interruptions and MTTF of a synchronous job against its size.

    Parameters
    ----------
    params : dict
        :meth:`powerlab.reliability.faultfit.FaultFit.params` (``faults``,
        ``exposure_node_days``, ``rate_per_node_day`` with ``rate_lower``/``rate_upper``,
        ``theta``, ``planned_rate_per_node_day``).
    gpus : int or array-like
        GPUs of the job [-].
    days : float
        Length of the job [d].
    gpus_per_node : int, default 8
        GPUs per node (an assumption where the fault record does not give it) [-].
    conf : float, default 0.90
        Level of the predictive interval of the count [-].
    draws : int, default 20000
        Monte Carlo draws of the predictive interval [-].
    seed : int, default 0

    Returns
    -------
    pandas.DataFrame
        Per GPU count: ``nodes``, ``expected_interruptions`` (unexpected) with its
        confidence interval ``lower``/``upper`` (rate's Garwood interval) and predictive
        interval ``predictive_lower``/``predictive_upper``, ``expected_planned``,
        ``mttf_h`` with ``mttf_lower_h``/``mttf_upper_h``.
    """
    g = np.atleast_1d(np.asarray(gpus, float))
    if np.any(g <= 0) or gpus_per_node <= 0 or not days > 0:
        raise AnalysisError("gpus, gpus_per_node and days must be positive")
    rng = np.random.default_rng(seed)
    a = (1 - conf) / 2
    rows = []
    for n_gpu in g:
        n = int(np.ceil(n_gpu / gpus_per_node))
        lam = params["rate_per_node_day"]
        rate = _rng_rates(params, n, draws, rng)
        count = rng.poisson(rate * days)
        rows.append({
            "gpus": int(n_gpu), "nodes": n, "days": days,
            "expected_interruptions": n * lam * days,
            "lower": n * params["rate_lower"] * days,
            "upper": n * params["rate_upper"] * days,
            "predictive_lower": float(np.quantile(count, a)),
            "predictive_upper": float(np.quantile(count, 1 - a)),
            "expected_planned": n * params.get("planned_rate_per_node_day", 0.0) * days,
            "mttf_h": 24.0 / (n * lam), "mttf_lower_h": 24.0 / (n * params["rate_upper"]),
            "mttf_upper_h": 24.0 / (n * params["rate_lower"])})
    return pd.DataFrame(rows)


def spare_pool(params: dict, nodes: int, *, prob: float = 0.99,
               repair_mean_d: float | None = None, draws: int = 400,
               seed: int = 0) -> dict:
    """Smallest number of spare nodes that keeps a job at ``nodes`` nodes with
    probability ``prob`` at a random time.

    Parameters
    ----------
    params : dict
        As in :func:`job_interruptions`, with ``repair_mean_d``.
    nodes : int
        Nodes the job needs [-].
    prob : float, default 0.99
        Probability that at least ``nodes`` are in service [-].
    repair_mean_d : float, optional
        Mean repair time [d]; default the fit's.
    draws : int, default 400
        Fleets of frailties drawn [-].
    seed : int, default 0

    Returns
    -------
    dict
        ``spares``, ``spare_fraction`` (spares / nodes), ``mean_down`` (expected nodes
        down of the pool), ``unavailability`` (mean share down) [-].
    """
    if nodes <= 0 or not 0 < prob < 1:
        raise AnalysisError("nodes must be positive and prob in (0, 1)")
    rbar = params["repair_mean_d"] if repair_mean_d is None else float(repair_mean_d)
    lam, theta = params["rate_per_node_day"], params.get("theta", 0.0)
    rng = np.random.default_rng(seed)
    s = 0
    for _ in range(60):          # grow s until the pool holds (the pool has nodes + s)
        pool = nodes + s
        z = rng.gamma(1 / theta, theta, (draws, pool)) if theta > 0 else \
            np.ones((draws, pool))
        x = lam * z * rbar
        u = x / (1 + x)
        down = (rng.random(u.shape) < u).sum(axis=1)
        p_ok = float(np.mean(down <= s))
        if p_ok >= prob:
            break
        s = max(s + 1, int(np.quantile(down, prob)))
    else:
        raise AnalysisError(f"no spare pool up to {s} spares reaches P {prob} for {nodes} "
                            "nodes at these rates")
    return {"nodes": int(nodes), "spares": int(s), "spare_fraction": s / nodes,
            "prob": prob, "mean_down": float(u.sum(axis=1).mean()),
            "unavailability": float(u.mean()), "repair_mean_d": rbar}
