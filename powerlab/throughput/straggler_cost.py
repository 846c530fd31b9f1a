"""What stragglers cost a synchronous job: step time and GPU-hours lost, by cause.

In a synchronous data-parallel job every step waits for the slowest GPU.  With a share
:math:`\\phi` of the step time that scales with 1 / clock, the step time at each moment is

.. math::  t = t_0\\,(\\phi\\, f_{ref} / f_{slowest} + 1 - \\phi).

Each flagged GPU's clock is raised by its measured deficit (its ``repair`` [%], per
sample: a persistent deficit everywhere, an episode's drop during the episode only;
a slow host's residual deficit on all its GPUs), and the fleet's mean step time is
compared with the repaired fleet's.  Per cause (thermal, power cap, hardware slowdown,
fail-slow, unexplained, host) the table gives:

- ``gpu_hours_own``: the GPUs' own compute lost, deficit x busy time [GPU-h];
- ``step_cost_pct``: the job's step-time increase that repairing only that cause's GPUs
  removes [%];
- ``job_gpu_hours``: the job's GPU-hours wasted by it, ``c / (100 + c)`` of the fleet's
  GPU-hours for a step-time increase of ``c`` % (every GPU waits) [GPU-h].

Causes overlap (the slowest GPU masks the next), so the per-cause step costs need not
add up to the ``all`` row.  The ByteDance straggler study found that stragglers persist
within a job and that a few slow workers cost the whole job [1]_.

References
----------
.. [1] J. Lin et al., "Understanding stragglers in large model training using what-if
   analysis", OSDI 2025.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["job_cost"]


def _step_time(f_slow: np.ndarray, f_ref: float, phi: float) -> np.ndarray:
    return phi * f_ref / f_slow + 1.0 - phi


def job_cost(clock: np.ndarray, row_med: np.ndarray, repair: np.ndarray,
             flagged: np.ndarray, host_deficit: np.ndarray, cause: np.ndarray, *,
             f_ref: float, compute_fraction: float, interval_s: float):
    """Step-time cost of each flagged GPU, of all together, and GPU-hours by cause.

    Parameters
    ----------
    clock : numpy.ndarray
        SM clocks, samples x GPUs [MHz] (NaN where missing).
    row_med : numpy.ndarray
        Fleet median clock per sample [MHz].
    repair : numpy.ndarray
        Clock deficit of each flagged GPU per sample [%].
    flagged : numpy.ndarray
        Flagged GPUs (bool).
    host_deficit : numpy.ndarray
        Deficit of the GPUs of flagged hosts [%] (0 elsewhere).
    cause : numpy.ndarray
        Cause of each flagged GPU (empty string if none).
    f_ref : float
        Reference clock [MHz].
    compute_fraction : float
        Share of the step time that scales with 1 / clock [-].
    interval_s : float
        Sampling interval [s].

    Returns
    -------
    cost : numpy.ndarray
        Step-time increase due to each GPU alone [%].
    total : float
        Step-time increase due to all flagged GPUs and hosts [%].
    lost : pandas.DataFrame
        Per cause: gpus, gpu_hours_own, step_cost_pct, job_gpu_hours; last row ``all``.
    """
    n_g = clock.shape[1]
    ok_rows = np.isfinite(row_med)
    fill = np.where(np.isfinite(clock), clock, row_med[:, None])[ok_rows]
    rep = np.where(flagged[None, :], repair, 0.0)[ok_rows]
    host_only = (host_deficit > 0) & ~flagged
    rep = np.where(host_only[None, :], host_deficit[None, :], rep)
    fixed = fill * (1.0 + rep / 100.0)
    base = _step_time(fill.min(axis=1), f_ref, compute_fraction).mean()

    def cost_of(sel):
        if not sel.any():
            return 0.0
        alt = np.where(sel[None, :], fixed, fill)
        return 100.0 * (base / _step_time(alt.min(axis=1), f_ref,
                                          compute_fraction).mean() - 1.0)

    cost = np.zeros(n_g)
    for i in np.flatnonzero(flagged):
        sel = np.zeros(n_g, dtype=bool)
        sel[i] = True
        cost[i] = cost_of(sel)
    any_sel = flagged | host_only
    total = cost_of(any_sel)
    busy_h = np.isfinite(clock[ok_rows]).sum(axis=0) * interval_s / 3600.0
    fleet_h = float(busy_h.sum())
    own = rep.mean(axis=0) / 100.0 * busy_h
    labels = np.where(host_only, "host", np.asarray(cause, dtype=object))
    rows = []
    for c in sorted({str(x) for x in labels[any_sel]}):
        sel = any_sel & (labels == c)
        sc = cost_of(sel)
        rows.append({"cause": c, "gpus": int(sel.sum()),
                     "gpu_hours_own": float(own[sel].sum()), "step_cost_pct": sc,
                     "job_gpu_hours": sc / (100.0 + sc) * fleet_h})
    rows.append({"cause": "all", "gpus": int(any_sel.sum()),
                 "gpu_hours_own": float(own[any_sel].sum()), "step_cost_pct": total,
                 "job_gpu_hours": total / (100.0 + total) * fleet_h})
    return cost, total, pd.DataFrame(rows)
