"""Robust helpers shared by the straggler detector and its per-chip baseline."""

from __future__ import annotations

import numpy as np

__all__ = ["group_median", "nanmad"]


def nanmad(x, axis=0):
    """Normal-consistent MAD along an axis, NaN-aware (numpy's nanmedian is much faster
    here than ``scipy.stats.median_abs_deviation(nan_policy="omit")``, which loops)."""
    med = np.nanmedian(x, axis=axis, keepdims=True)
    return 1.482602218505602 * np.nanmedian(np.abs(x - med), axis=axis)


def group_median(a, loo):
    """Median across the columns of ``a`` (rows x m): the same for every column, or with
    ``loo`` each column's median of the other columns (one vectorised call)."""
    m = a.shape[1]
    if not loo:
        return np.nanmedian(a, axis=1, keepdims=True)
    others = np.array([[j for j in range(m) if j != i] for i in range(m)])
    return np.nanmedian(a[:, others], axis=2)
