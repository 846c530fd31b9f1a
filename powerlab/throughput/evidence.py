"""Straggler evidence channels and their calibrated combination.

A GPU that holds a synchronous job back shows it in one or more of: a clock below its
host peers', a die temperature above theirs, a share of samples with slowing throttle
bits above theirs, an enforced power limit below the fleet's.  Each is turned into a
robust z-score ("harm" direction positive) against the spread of the other GPUs, so that
each counts on its own; the combined score is the largest of them and of the pairs
"clock low and one other kind of evidence" (Stouffer's sum of the two over
:math:`\\sqrt 2` [1]_), so that a clock deficit within the leakage spread *with* a
moderate heat or bit excess is found, while the evidence never hides the GPU (a hot GPU
is flagged *and* explained as thermal).  Its p-value is Sidak-corrected for the number
of statistics taken per GPU; ``n_gpus * p`` is the expected number of false alarms in
the fleet at that score, reported per GPU.

Throttle bits are judged by their *share* of samples, not by a clock drop while they are
set: a GPU whose clock is low throughout carries the bit without a measurable drop
(issue 22).  The share's excess over the median of the host's other GPUs is scaled by
the spread of those peers' shares (a hot host throttles more on all its GPUs, and
unevenly), the GPU's own window-to-window standard error, and a floor of 2 points.

References
----------
.. [1] S. A. Stouffer et al., *The American Soldier*, vol. 1, Princeton, 1949 (the sum
   of independent z-scores over the square root of their number).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm, spearmanr

from ..telemetry.schema import THROTTLE_REASONS
from ._robust import group_median, nanmad

__all__ = ["BIT_GROUPS", "CAUSES", "bit_share_z", "cause_of", "combine_evidence",
           "expected_share_given_temp", "host_heat_c", "sidak_p"]

#: slowing throttle bits by the cause they point to
BIT_GROUPS = {
    "thermal_bits": np.uint64(THROTTLE_REASONS["sw_thermal_slowdown"]
                              | THROTTLE_REASONS["hw_thermal_slowdown"]),
    "hw_bits": np.uint64(THROTTLE_REASONS["hw_slowdown"]
                         | THROTTLE_REASONS["hw_power_brake_slowdown"]),
}
#: evidence channel -> cause of the slowdown it points to
CAUSES = {"temp": "thermal", "thermal_bits": "thermal", "hbm": "thermal",
          "hw_bits": "hardware slowdown", "power_limit": "power cap",
          "clock": "unexplained"}


def expected_share_given_temp(hit: np.ndarray, temp: np.ndarray, *, bin_c: float = 0.5,
                              min_count: int = 20,
                              host_heat: np.ndarray | None = None) -> np.ndarray:
    """Share of samples with thermal bits each GPU would have at its own temperatures,
    judged by the *other* GPUs of the fleet, and by its host's heat.

    Per 0.5 degC bin of die temperature, the share of the other GPUs' samples in that
    bin with the bits (bins with fewer than ``min_count`` such samples are skipped), made
    non-decreasing in temperature (a hotter die never throttles less: the running
    maximum); the GPU's expected share is the mean over its samples.  A hot host's GPUs
    throttle as often as any GPU at their temperature: explained, not evidence.

    Above the hottest bin the other GPUs fill, the fleet says nothing: a die there is the
    hottest of the fleet, and thermal slowdown holds a die at its slowdown temperature,
    so the die temperature no longer shows how much heat it would have.  With
    ``host_heat``, such a sample is explained by its host's inlet (expected bit share 1,
    the bit is the physical consequence of that heat) when removing the host's heat
    brings it back into the range the other GPUs fill and the host's heat is at least
    half of the die's excess over the fleet's median GPU (the larger part of the excess
    is the host's): the GPU is the hottest only because its host is hot.  A sample that
    stays beyond that range without its host's heat, or whose excess is mostly the
    GPU's own, keeps the running maximum of the cooler bins (its bits are evidence).

    Parameters
    ----------
    hit : numpy.ndarray
        Bits set, samples x GPUs (bool; False where missing).
    temp : numpy.ndarray
        Die temperature, samples x GPUs [degC] (NaN where missing).
    host_heat : numpy.ndarray, optional
        The host's heat, samples x GPUs [degC]: how much hotter the *other* GPUs of the
        GPU's host run than the fleet's median GPU at the same moment (its inlet excess
        as the dies see it), :func:`host_heat_c`; negative values explain nothing.

    Returns
    -------
    numpy.ndarray
        Expected share per GPU [-] (NaN without temperatures).
    """
    ok = np.isfinite(temp)
    n_g = temp.shape[1]
    if not ok.any():
        return np.full(n_g, np.nan)
    b0 = int(np.floor(np.nanmin(temp) / bin_c))
    b = np.floor(np.where(ok, temp, 0.0) / bin_c).astype(np.int64) - b0
    b[~ok] = 0
    nb = int(b[ok].max()) + 1
    key = (np.broadcast_to(np.arange(n_g), temp.shape) * nb + b)[ok]
    cnt = np.bincount(key, minlength=n_g * nb).reshape(n_g, nb)
    hits = np.bincount(key, weights=hit[ok].astype(float),
                       minlength=n_g * nb).reshape(n_g, nb)
    loo_c = cnt.sum(axis=0)[None, :] - cnt
    loo_h = hits.sum(axis=0)[None, :] - hits
    filled = loo_c >= min_count
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(filled, loo_h / loo_c, 0.0)
    p = np.maximum.accumulate(p, axis=1)
    if host_heat is None:
        return (cnt * p).sum(axis=1) / np.maximum(cnt.sum(axis=1), 1)
    # the hottest bin the other GPUs fill, per GPU (-1: none)
    top = np.where(filled.any(axis=1), nb - 1 - np.argmax(filled[:, ::-1], axis=1), -1)
    ps = np.take_along_axis(p.T, b, axis=0)                   # samples x GPUs
    heat = np.clip(np.nan_to_num(host_heat), 0.0, None)
    b_cool = np.floor(np.where(ok, temp - heat, 0.0) / bin_c).astype(np.int64) - b0
    # the host's heat must be at least the GPU's own share of the die's excess over the
    # fleet's median GPU (heat >= excess - heat): a die 6 degC hotter than its hostmates
    # in a host 0.7 degC warm is its own heat, even if 0.7 degC takes it back into range
    excess = temp - np.nanmedian(temp, axis=1, keepdims=True)
    by_host = (ok & (b > top[None, :]) & (b_cool <= top[None, :])
               & (2.0 * heat >= np.nan_to_num(excess)))
    ps = np.where(by_host, 1.0, ps)
    return np.where(ok, ps, 0.0).sum(axis=0) / np.maximum(ok.sum(axis=0), 1)


def host_heat_c(temp: np.ndarray, host_code: np.ndarray) -> np.ndarray:
    """How much hotter the other GPUs of each GPU's host run than the fleet's median GPU
    at the same moment [degC], samples x GPUs: the host's inlet excess as its dies see
    it (the median of the others, so the GPU's own heat is not counted as its host's).
    Hosts with fewer than 3 GPUs get NaN (no heat explained)."""
    off = temp - np.nanmedian(temp, axis=1, keepdims=True)
    heat = np.full_like(off, np.nan)
    for h in np.unique(host_code):
        cols = np.flatnonzero(host_code == h)
        if len(cols) >= 3:
            heat[:, cols] = group_median(off[:, cols], True)
    return heat


def bit_share_z(bits: np.ndarray, present: np.ndarray, wcode: np.ndarray,
                host_code: np.ndarray, mask: np.uint64, *, floor: float = 0.02,
                expected: np.ndarray | None = None):
    """Share of samples with any of ``mask`` set, per GPU, against its host's others.

    Parameters
    ----------
    bits : numpy.ndarray
        Throttle-reason bitmasks, samples x GPUs (uint64).
    present : numpy.ndarray
        Whether each sample exists (bool, same shape).
    wcode : numpy.ndarray
        Window number of each sample row.
    host_code : numpy.ndarray
        Host number of each GPU.
    mask : numpy.uint64
        The bits counted.
    floor : float
        Floor of the scale [-] (2 points of share).
    expected : numpy.ndarray, optional
        Share each GPU is expected to have (thermal bits: at its temperatures,
        :func:`expected_share_given_temp`); else the median of its host's other GPUs.

    Returns
    -------
    share, excess, z : numpy.ndarray
        Share of the GPU's samples with the bits [-], its excess over the expected share
        [-], and the robust z of that excess (scaled by the spread of the host's other
        GPUs' excesses, the GPU's window-to-window standard error and ``floor``).
    """
    hit = ((bits & mask) != 0) & present
    num = pd.DataFrame(hit.astype(float)).groupby(wcode).sum().to_numpy()
    den = pd.DataFrame(present.astype(float)).groupby(wcode).sum().to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        win = np.where(den > 0, num / den, np.nan)
    share = num.sum(axis=0) / np.maximum(den.sum(axis=0), 1)
    n_w = np.maximum(np.isfinite(win).sum(axis=0), 1)
    se = np.nanstd(win, axis=0) / np.sqrt(n_w)
    ref = np.zeros_like(share)
    for h in np.unique(host_code):
        cols = np.flatnonzero(host_code == h)
        if len(cols) >= 2:
            ref[cols] = group_median(share[cols][None, :], True)[0]
    if expected is not None:
        ref = np.where(np.isfinite(expected), expected, ref)
    excess = share - ref
    peer_sd = np.zeros_like(share)
    for h in np.unique(host_code):
        cols = np.flatnonzero(host_code == h)
        if len(cols) >= 3:
            others = np.array([[j for j in cols if j != i] for i in cols])
            peer_sd[cols] = nanmad(excess[others], axis=1)
    z = excess / np.sqrt(floor ** 2 + peer_sd ** 2 + np.nan_to_num(se) ** 2)
    return share, excess, z


def sidak_p(score: np.ndarray, n_stats: int) -> np.ndarray:
    """One-sided p-value of the largest of ``n_stats`` standard-normal statistics."""
    return -np.expm1(n_stats * np.log1p(-norm.sf(score)))


def combine_evidence(channels: dict[str, np.ndarray]):
    """Combined straggler score from per-channel harm z-scores.

    Parameters
    ----------
    channels : dict of str to numpy.ndarray
        Robust z per GPU, positive in the harmful direction; must hold ``"clock"``.  NaN
        is no evidence (taken as 0).

    Returns
    -------
    score, p_value : numpy.ndarray
        The largest channel z and "clock + best other" pair ``(z_clock + z_other) /
        sqrt(2)`` (both positive), and its Sidak p-value over ``len(channels) + 1``
        statistics.
    best : numpy.ndarray of str
        The channel (or ``"clock+<channel>"``) that gives the score.
    """
    names = list(channels)
    z = np.vstack([np.nan_to_num(np.asarray(channels[n], float)) for n in names])
    clock = z[names.index("clock")]
    other = np.array([n for n in names if n != "clock"])
    # channels are not independent under the null (a hotter chip leaks more and clocks
    # lower under a power cap): the pair is scaled by sqrt(2 + 2 rho), rho the rank
    # correlation of the two channels across the fleet's GPUs (most of them healthy),
    # floored at 0
    pairs = np.full((max(len(other), 1), len(clock)), -np.inf)
    for j, n in enumerate(other):
        zo = z[names.index(n)]
        rho = _rank_corr(clock, zo)
        pairs[j] = np.where((clock > 0) & (zo > 0),
                            (clock + zo) / np.sqrt(2.0 + 2.0 * rho), -np.inf)
    pair = pairs.max(axis=0)
    allz = np.vstack([z, pair])
    labels = np.array(names + ["pair"], dtype=object)
    k = allz.argmax(axis=0)
    best = labels[k]
    if len(other):
        pair_lab = np.array([f"clock+{other[j]}" for j in pairs.argmax(axis=0)],
                            dtype=object)
        best = np.where(best == "pair", pair_lab, best)
    score = allz.max(axis=0)
    return score, sidak_p(score, len(names) + 1), best


def _rank_corr(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman correlation of two channels, floored at 0 (0 when either is constant)."""
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    r = spearmanr(a, b).statistic
    return float(max(r, 0.0)) if np.isfinite(r) else 0.0


def cause_of(channels: dict[str, np.ndarray], *, support: float = 2.0) -> np.ndarray:
    """Most likely cause per GPU: the cause of its strongest non-clock channel when that
    is at least ``support`` robust sigma, else ``"unexplained"`` (a clock deficit or
    fail-slow with nothing in the telemetry that says why)."""
    names = [n for n in channels if n != "clock"]
    if not names:
        return np.full(len(channels["clock"]), "unexplained", dtype=object)
    z = np.vstack([np.nan_to_num(np.asarray(channels[n], float)) for n in names])
    k = z.argmax(axis=0)
    cause = np.array([CAUSES.get(names[j], "unexplained") for j in k], dtype=object)
    return np.where(z.max(axis=0) >= support, cause, "unexplained")
