"""Synthetic fault records of known truth: a fleet of nodes with gamma-frailty Poisson
faults and drawn repair times, in the fault table's form (for checking the fits against
ground truth, the null case included)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["simulate_fault_records"]


def simulate_fault_records(n_nodes: int = 400, days: float = 349.0,
                           rate_per_node_day: float = 4.2e-3, theta: float = 0.0, *,
                           repair=None, origin="2024-01-01", seed: int = 0
                           ) -> pd.DataFrame:
    """Fault records of a fleet whose truth is known.

    Node ``i`` has rate ``rate_per_node_day * z_i`` with ``z_i ~ Gamma(1/theta, theta)``
    (all 1 when ``theta`` is 0); faults strike while the node is in service, each is
    followed by a repair drawn from ``repair`` (a callable ``rng -> days``; default
    lognormal with median 0.85 d and sigma 1.8), and a repair still running at the end
    stays open (``end`` NaT).  Classes are ``gpu`` for every fault.

    Returns
    -------
    pandas.DataFrame
        The fault table (``node, start, end, fault_class, detail, source``).
    """
    rng = np.random.default_rng(seed)
    rep = repair or (lambda r: float(r.lognormal(np.log(0.85), 1.8)))
    z = rng.gamma(1 / theta, theta, n_nodes) if theta > 0 else np.ones(n_nodes)
    t0 = pd.Timestamp(origin, tz="UTC")
    rows = []
    for i in range(n_nodes):
        t = 0.0
        while True:
            t += rng.exponential(1 / (rate_per_node_day * z[i]))
            if t >= days:
                break
            r = rep(rng)
            end = t + r
            rows.append({"node": f"n{i:05d}", "start": t0 + pd.Timedelta(days=t),
                         "end": t0 + pd.Timedelta(days=end) if end < days else pd.NaT,
                         "fault_class": "gpu", "detail": "synthetic", "source": "sim"})
            t = end
    return pd.DataFrame(rows, columns=["node", "start", "end", "fault_class", "detail",
                                       "source"])
