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

__all__ = ["cusum_episodes", "drop_episodes", "drop_shared"]


def cusum_episodes(x: np.ndarray, *, min_shift_pct: float = 1.0, h: float = 8.0,
                   baseline_windows: int = 8, sigma_floor_pct: float = 0.05,
                   back_windows: int = 3, min_windows: int = 2) -> list[dict]:
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
    min_windows : int
        Fewest windows of an episode (a single low window is a transient, e.g. the
        edge of a fleet-wide phase).

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
            if shift <= -min_shift_pct and end - onset >= min_windows:
                out.append({"onset": int(ok[onset]), "detected": int(ok[i]),
                            "end": int(ok[end]) if end < len(v) else len(x),
                            "ongoing": bool(ongoing), "shift_pct": shift})
            s, last_zero, i = 0.0, end - 1, end
            continue
        i += 1
    return out


def drop_episodes(x: np.ndarray, *, min_shift_pct: float = 1.0, min_windows: int = 2,
                  z_min: float = 2.5, h: float = 6.0, sigma_floor_pct: float = 0.05,
                  gap_windows: int = 1) -> list[dict]:
    """Intermittent slowdowns: runs of windows below the GPU's own typical level.

    Unlike :func:`cusum_episodes` (one onset against the first windows), this finds
    repeated episodes anywhere in the record, in the spirit of Minder (continuity over
    time of a deviation from the machines' common behaviour; the fleet median and the
    host centring have already removed what all machines share) [3]_.  The GPU's level
    :math:`\\mu` is the median of all its windows (an intermittent fault present less
    than half of the time does not move it), the window noise :math:`\\sigma` the
    normal-consistent MAD of first differences over :math:`\\sqrt 2` (robust to the
    steps themselves).  A window is low when :math:`\\mu - x_w` exceeds both
    :math:`z_{min} \\sigma` and half of ``min_shift_pct``; low windows separated by at
    most ``gap_windows`` are merged into a run; a run is an episode when it has at least
    ``min_windows`` low windows, its mean drop is at least ``min_shift_pct`` and its
    standardised sum :math:`\\sum (\\mu - x_w) / (\\sigma \\sqrt L)` exceeds ``h``.

    Parameters
    ----------
    x : numpy.ndarray
        Window offsets of the GPU's clock against its peers, in time order, NaN where
        missing [%].
    min_shift_pct : float
        Smallest mean drop of an episode [%].
    min_windows : int
        Fewest low windows in an episode.
    z_min : float
        Smallest standardised drop of a low window [-].
    h : float
        Threshold of the run's standardised sum [-].
    sigma_floor_pct : float
        Floor on the window noise [%].
    gap_windows : int
        Largest gap of windows not low inside one episode.

    Returns
    -------
    list of dict
        ``onset``, ``end`` (window positions, ``end`` exclusive), ``ongoing`` (runs to
        the last window), ``shift_pct`` (mean offset in the episode minus the level,
        negative) [%], ``z`` (the run's standardised sum).

    References
    ----------
    .. [3] Y. Deng et al., "Minder: Faulty machine detection for large-scale distributed
       model training", NSDI 2025.
    """
    ok = np.flatnonzero(np.isfinite(x))
    if len(ok) < 4 * min_windows:
        return []
    v = x[ok]
    mu = float(np.median(v))
    sigma = max(float(median_abs_deviation(np.diff(v), scale="normal")) / np.sqrt(2),
                sigma_floor_pct)
    d = mu - v
    low = (d > z_min * sigma) & (d > min_shift_pct / 2)
    out = []
    for a, b in _low_runs(np.flatnonzero(low), gap_windows):
        seg = d[a:b]
        n_low = int(low[a:b].sum())
        zsum = float(seg.sum() / (sigma * np.sqrt(len(seg))))
        if n_low >= min_windows and seg.mean() >= min_shift_pct and zsum > h:
            out.append({"onset": int(ok[a]), "end": int(ok[b]) if b < len(v) else len(x),
                        "ongoing": bool(b >= len(v)), "shift_pct": float(-seg.mean()),
                        "z": zsum})
    return out


def _low_runs(idx: np.ndarray, gap_windows: int) -> list[tuple[int, int]]:
    """``(start, end)`` (``end`` exclusive) of the runs of low windows ``idx``, merged
    across gaps of at most ``gap_windows``."""
    if not len(idx):
        return []
    runs, start, prev = [], idx[0], idx[0]
    for i in idx[1:]:
        if i - prev > gap_windows + 1:
            runs.append((start, prev + 1))
            start = i
        prev = i
    runs.append((start, prev + 1))
    return runs


def drop_shared(found_by: dict, host_code: np.ndarray, n_w: int) -> dict:
    """Drop episodes that two or more GPUs of a host share (at least half of the
    episode's windows covered by another hostmate's episode).  Similarity across
    machines (Minder): a drop seen on several GPUs of a host at once is the host's (or
    the mirror image, in its hostmates' references, of one GPU's rise), not a GPU
    fault; the fleet median has already removed what the whole fleet shares."""
    masks = {}
    for g, found in found_by.items():
        for k, e in enumerate(found):
            m = np.zeros(n_w, dtype=bool)
            m[e["onset"]:e["end"]] = True
            masks[(g, k)] = m
    out = {}
    for g, found in found_by.items():
        mates = [h for h in found_by if h != g and host_code[h] == host_code[g]]
        union = np.zeros(n_w, dtype=bool)
        for h in mates:
            for k in range(len(found_by[h])):
                union |= masks[(h, k)]
        out[g] = [e for k, e in enumerate(found)
                  if not (union[masks[(g, k)]].mean() >= 0.5)]
    return out
