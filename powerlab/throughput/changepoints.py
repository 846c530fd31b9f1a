"""Gapless level shifts in a throughput series with a daily profile: OLS-CUSUM structural
break test with binary segmentation.

A software change or a partial degradation shifts throughput at one moment without a
gap.  Left in the model, the step leaks into the daily profile (a step at 14:00 looks
like an afternoon effect).  :func:`level_shifts` finds such steps so that they become
segment boundaries:

1. fit the current model (one level per segment + ``order`` daily harmonics), by
   within-segment demeaning (Frisch-Waugh-Lovell: the segment levels are absorbed, the
   regression has only the Fourier columns);
2. in each segment, the OLS-residual CUSUM ``max_k |sum_{i<=k} e_i| / (sigma_LR sqrt(n))``
   follows, under "no break", the supremum of a Brownian bridge (Kolmogorov's law,
   ``scipy.stats.kstwobign``) [1]_; ``sigma_LR`` is the long-run standard deviation of
   the residuals from an AR(2) Yule-Walker fit, ``sigma / (1 - rho_1 - rho_2)``, so
   hour-long noise correlation does not pass for a break [2]_;
3. a segment whose p-value is below ``alpha`` (the penalty: 1 % per segment by default,
   so false boundaries are rare and a boundary is never bought by noise) is split at the
   CUSUM's maximum, the location estimate of a single break, provided both parts keep
   ``min_size`` intervals; repeat until no segment breaks or ``max_breaks`` is reached.

References
----------
.. [1] W. Ploberger and W. Kraemer, "The CUSUM test with OLS residuals", Econometrica
   60(2), 1992.
.. [2] J. Bai and P. Perron, "Estimating and testing linear models with multiple
   structural changes", Econometrica 66(1), 1998 (sequential splitting, serially
   correlated errors).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.regression.linear_model import yule_walker

__all__ = ["demeaned_fit", "level_shifts", "shift_table", "within_segments"]


def _within(a: np.ndarray, seg_inv: np.ndarray, n_seg: int) -> np.ndarray:
    """Subtract each segment's mean from the rows of ``a`` (1-D or 2-D)."""
    cnt = np.bincount(seg_inv, minlength=n_seg).astype(float)
    if a.ndim == 1:
        return a - (np.bincount(seg_inv, weights=a, minlength=n_seg) / cnt)[seg_inv]
    out = np.empty_like(a, dtype=float)
    for j in range(a.shape[1]):
        out[:, j] = a[:, j] - (np.bincount(seg_inv, weights=a[:, j], minlength=n_seg)
                               / cnt)[seg_inv]
    return out


def within_segments(a: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """``a`` (1-D or 2-D, one row per interval) minus its mean within each segment."""
    _, inv = np.unique(seg, return_inverse=True)
    return _within(a, inv, int(inv.max()) + 1)


def demeaned_fit(y: np.ndarray, F: np.ndarray, seg: np.ndarray):
    """OLS of ``y`` on segment levels + ``F`` by within-segment demeaning.

    Returns ``(coef_F, residuals)``; identical to the dummy-variable regression (FWL)
    at O(n k) instead of O(n (k + n_seg)^2).
    """
    _, inv = np.unique(seg, return_inverse=True)
    n_seg = int(inv.max()) + 1
    yd = _within(y, inv, n_seg)
    Fd = _within(F, inv, n_seg)
    coef, *_ = np.linalg.lstsq(Fd, yd, rcond=None)
    return coef, yd - Fd @ coef


def _long_run_sd(u: np.ndarray) -> float:
    if len(u) < 20 or not np.any(u):
        return float(np.std(u))
    with warnings.catch_warnings():     # the future NamedTuple return (statsmodels 0.16)
        warnings.simplefilter("ignore", FutureWarning)
        rho, sigma = yule_walker(u, order=2, method="mle")[:2]
    denom = max(1.0 - float(np.sum(rho)), 0.05)
    return float(sigma) / denom


def level_shifts(y: np.ndarray, F: np.ndarray, seg: np.ndarray, *, alpha: float = 0.01,
                 min_size: int = 12, max_breaks: int = 8):
    """Find level shifts within segments (see the module docstring).

    Parameters
    ----------
    y : numpy.ndarray
        Interval throughput, in time order [any unit].
    F : numpy.ndarray
        Daily Fourier columns, one row per interval.
    seg : numpy.ndarray
        Segment code per interval (run segments, contiguous).
    alpha : float
        Significance level of the per-segment break test (the penalty) [-].
    min_size : int
        Fewest intervals on each side of a break.
    max_breaks : int
        Most breaks added.

    Returns
    -------
    new_seg : numpy.ndarray
        Segment codes with the breaks as boundaries.
    breaks : list of dict
        One per break: ``index`` (first interval after it), ``pvalue``, ``statistic``.
    """
    seg = np.asarray(seg).copy()
    breaks: list[dict] = []
    while len(breaks) < max_breaks:
        _, u = demeaned_fit(y, F, seg)
        sd = _long_run_sd(u)
        if not sd > 0:
            break
        found = []
        starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
        ends = np.r_[starts[1:], len(seg)]
        for a, b in zip(starts, ends):
            n = b - a
            if n < 2 * min_size + 1:
                continue
            cs = np.cumsum(u[a:b])
            inner = np.abs(cs[min_size - 1:n - min_size])
            if not len(inner):
                continue
            k = int(np.argmax(inner)) + min_size      # break after k intervals
            stat = float(np.abs(cs).max() / (sd * np.sqrt(n)))
            p = float(stats.kstwobign.sf(stat))
            if p < alpha:
                found.append({"index": int(a + k), "pvalue": p, "statistic": stat})
        if not found:
            break
        found.sort(key=lambda d: d["pvalue"])
        breaks.extend(found[: max_breaks - len(breaks)])
        # relabel: a new code at every boundary (old segments and breaks)
        cut = np.zeros(len(seg), dtype=bool)
        cut[1:] = seg[1:] != seg[:-1]
        for f in breaks:
            cut[f["index"]] = True
        seg = np.cumsum(cut).astype(np.int64)
    breaks.sort(key=lambda d: d["index"])
    return seg, breaks


def shift_table(y: np.ndarray, F: np.ndarray, seg: np.ndarray, t_ns: np.ndarray,
                shifts: list[dict], *, mean_y: float, site_tz: str) -> pd.DataFrame:
    """The level shifts found (:func:`level_shifts`): time (UTC and local), size [%] from
    the final model's segment levels (``y`` on ``F`` and one level per ``seg``, as a
    percentage of ``mean_y``), p-value."""
    if not shifts:
        return pd.DataFrame({
            "timestamp": pd.Series([], dtype="datetime64[ns, UTC]"),
            "local_time": pd.Series([], dtype=f"datetime64[ns, {site_tz}]"),
            "shift_pct": pd.Series([], dtype=float), "pvalue": pd.Series([], dtype=float)})
    coef, _ = demeaned_fit(y, F, seg)
    base = y - F @ coef
    level = pd.Series(base).groupby(seg).mean()
    rows = []
    for s in shifts:
        i = s["index"]
        before, after = level[seg[i - 1]], level[seg[i]]
        ts = pd.Timestamp(t_ns[i], tz="UTC")
        rows.append((ts, ts.tz_convert(site_tz), 100.0 * (after - before) / mean_y,
                     s["pvalue"]))
    return pd.DataFrame(rows, columns=["timestamp", "local_time", "shift_pct", "pvalue"])
