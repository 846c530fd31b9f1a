"""Fail-slow episodes: onsets of a GPU's slowdown against its own baseline, found by a
one-sided CUSUM on its window-aggregated clock offset against peers.

A GPU whose clock offset against its peers (already aggregated per time window and
centred on its host) drops by ``shift`` at some moment is found by Page's CUSUM [1]_

.. math::  S_w = \\max(0, S_{w-1} + (\\mu_0 - x_w) / \\sigma - k),

alarm when :math:`S_w > h`.  :math:`\\mu_0` is the median of the first windows (the
GPU's own baseline, which removes its static leakage offset), :math:`\\sigma` the
window-to-window noise (normal-consistent MAD of first differences over
:math:`\\sqrt 2`, robust to the step itself), :math:`k = \\delta / 2\\sigma` for the
smallest shift worth finding :math:`\\delta` (``min_shift_pct``).  The onset is the
last window where :math:`S` was zero before the alarm (the CUSUM change-time estimate);
the episode ends when three consecutive windows are back above
:math:`\\mu_0 - \\delta/2`.  Fail-slow episodes in production last from tens of seconds to
about 10 h and slow jobs 1.34x on average [2]_.

References
----------
.. [1] E. S. Page, "Continuous inspection schemes", Biometrika 41(1/2), 1954.
.. [2] T. Wu et al., "Falcon: Pinpointing and mitigating stragglers for large-scale
   hybrid-parallel training", arXiv:2410.12588, 2024.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import median_abs_deviation

__all__ = ["cusum_episodes"]


def cusum_episodes(x: np.ndarray, *, min_shift_pct: float = 1.0, h: float = 8.0,
                   baseline_windows: int = 8, sigma_floor_pct: float = 0.05,
                   back_windows: int = 3) -> list[dict]:
    """Fail-slow episodes in one GPU's series of window clock offsets.

    Parameters
    ----------
    x : numpy.ndarray
        Window offsets of the GPU's clock against its peers, in time order; NaN for
        windows without data [%].
    min_shift_pct : float
        Smallest drop worth an alarm; sets the CUSUM reference value [%].
    h : float
        Alarm threshold of the standardised CUSUM [-].
    baseline_windows : int
        Number of first (valid) windows whose median is the baseline.
    sigma_floor_pct : float
        Floor on the window noise [%].
    back_windows : int
        Consecutive windows back near baseline that end an episode.

    Returns
    -------
    list of dict
        One per episode: ``onset`` and ``detected`` and ``end`` (window positions; ``end``
        is exclusive and equals ``len(x)`` for an ongoing episode), ``ongoing``,
        ``shift_pct`` (median offset in the episode minus baseline) [%].
    """
    ok = np.flatnonzero(np.isfinite(x))
    if len(ok) < baseline_windows + 2:
        return []
    v = x[ok]
    mu0 = float(np.median(v[:baseline_windows]))
    sigma = max(float(median_abs_deviation(np.diff(v), scale="normal")) / np.sqrt(2),
                sigma_floor_pct)
    k = min_shift_pct / 2 / sigma
    mid = mu0 - min_shift_pct / 2
    out = []
    s, last_zero, i = 0.0, -1, 0
    while i < len(v):
        s = max(0.0, s + (mu0 - v[i]) / sigma - k)
        if s == 0.0:
            last_zero = i
        if s > h:
            onset = last_zero + 1
            j, back = i + 1, 0
            while j < len(v) and back < back_windows:
                back = back + 1 if v[j] >= mid else 0
                j += 1
            ongoing = back < back_windows
            end = len(v) if ongoing else j - back_windows
            shift = float(np.median(v[onset:end]) - mu0)
            if shift <= -min_shift_pct:
                out.append({"onset": int(ok[onset]), "detected": int(ok[i]),
                            "end": int(ok[end]) if end < len(v) else len(x),
                            "ongoing": bool(ongoing), "shift_pct": shift})
            s, last_zero, i = 0.0, end - 1, end
            continue
        i += 1
    return out
