"""The training step's shape from power readings: its period (:func:`step_period`, the
periodogram averaged over devices), the two-level split of the readings
(:func:`otsu_threshold`), and the step dip (:func:`step_dip`): its energy always, its
duration and depth when the readings tell them; through an interval-averaging meter,
where the dip falls and each device's compute level (:func:`fold_dip`).

A meter reporting interval averages of ``W`` seconds blurs a step dip shorter than the
interval into a dip of the same energy ``A``, ``W + D`` seconds wide and ``A / W`` deep,
whatever its true duration ``D`` and depth ``A / D``.  The dip is located by a
least-squares fit of the metered two-level step to the training readings folded on the
steps (counted from each evaluation's end, as the forecast engine counts them); the
compute level of a device is the mean of its readings whose interval lies 0.5 s or more
away from the dip (not the fitted amplitude, which a wrong ``D`` biases).  How
:func:`~powerlab.calibration.profile.fit_profile` uses them is in its module's docstring
(*Meters*).

References
----------
.. [1] N. Otsu, "A threshold selection method from gray-level histograms",
   IEEE Trans. Systems, Man, and Cybernetics 9(1), 62-66, 1979.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import signal

from ..exceptions import AnalysisError, PowerlabError
from .profile_fit import Prior, split_label

__all__ = ["fold_dip", "otsu_threshold", "step_dip", "step_period"]


def otsu_threshold(values: np.ndarray, bins: int = 128) -> float:
    """Threshold that best splits ``values`` into two levels (Otsu's method [1]_)."""
    v = np.asarray(values, float)
    hist, edges = np.histogram(v, bins=bins)
    centers = 0.5 * (edges[1:] + edges[:-1])
    w0 = np.cumsum(hist)
    w1 = w0[-1] - w0
    m0 = np.cumsum(hist * centers)
    mu0 = m0 / np.maximum(w0, 1)
    mu1 = (m0[-1] - m0) / np.maximum(w1, 1)
    between = w0 * w1 * (mu0 - mu1) ** 2
    return float(edges[1:][np.argmax(between[:-1])]) if len(between) > 1 else float(v.mean())


def step_period(spectra: list, dt: float, period_range_s: tuple[float, float]):
    """The step period: periodogram (:func:`scipy.signal.periodogram`, Hann window,
    linear detrend) of each device's readings ``(t_ns, power)`` in ``spectra`` resampled
    on a regular grid of ``dt`` seconds (sampling clocks jitter), zero-padded for a fine
    frequency grid, averaged over devices; the peak refined by a parabola.

    Returns ``(period [s], each device's own peak period [s], frequencies [Hz], mean
    periodogram)``, the last two within ``period_range_s`` (the upper frequency also
    capped at half the sampling rate).
    """
    if not dt > 0:
        raise PowerlabError(f"the readings' median interval is {dt:g} s: most readings "
                            "repeat the time of the one before (a duplicated log?)")
    f_hi = min(1.0 / period_range_s[0], 0.5 / dt)
    f_lo = 1.0 / period_range_s[1]
    if f_hi <= f_lo:
        raise PowerlabError(f"sampling every {dt:g} s cannot resolve periods in "
                            f"{period_range_s} s")
    t0 = min(t[0] for t, _ in spectra)
    t1 = max(t[-1] for t, _ in spectra)
    grid = np.arange(0.0, (t1 - t0) / 1e9, dt)
    nfft = int(2 ** np.ceil(np.log2(len(grid) * 16)))
    acc = None
    peaks = []
    for t, p in spectra:
        y = np.interp(grid, (t - t0) / 1e9, p)
        f, pxx = signal.periodogram(y, fs=1.0 / dt, window="hann", nfft=nfft,
                                    detrend="linear")
        band = (f >= f_lo) & (f <= f_hi)
        peaks.append(1.0 / _peak_frequency(f[band], pxx[band]))
        acc = pxx if acc is None else acc + pxx
    acc = acc / len(spectra)
    band = (f >= f_lo) & (f <= f_hi)
    freqs, acc = f[band], acc[band]
    return 1.0 / _peak_frequency(freqs, acc), peaks, freqs, acc


def _peak_frequency(f: np.ndarray, pxx: np.ndarray) -> float:
    """Frequency of the largest periodogram value, refined by a parabola [Hz]."""
    k = int(np.argmax(pxx))
    if 0 < k < len(f) - 1:
        a, b, c = pxx[k - 1], pxx[k], pxx[k + 1]
        den = a - 2 * b + c
        shift = 0.5 * (a - c) / den if den != 0 else 0.0
        return float(f[k] + shift * (f[1] - f[0]))
    return float(f[k])


def _overlap(a0, a1, b0, b1):
    return np.clip(np.minimum(a1, b1) - np.maximum(a0, b0), 0.0, None)


def fold_dip(samples, means, period: float, w_s: float, dur: float, origins: np.ndarray
              ) -> tuple[np.ndarray, float]:
    """Where the step dip falls, and the compute level of each device, from metered readings.

    Model: each step of ``period`` seconds, counted from the last evaluation's end (the
    ``origins``), is at ``mean + A / period`` except for a dip of ``dur`` seconds at
    ``mean + A / period - A / dur`` that ends ``shift`` seconds after the step's end; a
    reading is its mean over the ``w_s`` seconds before it.  ``shift`` maximises the
    least-squares fit (``A`` is linear given ``shift``; ``shift`` is searched on a grid).
    The compute level of a device is then the mean of its readings whose interval lies
    0.5 s or more away from the dip (robust to a wrong ``dur``, unlike the fitted ``A``);
    without such readings (steps too short), ``mean + A / period`` from the fit.

    Returns
    -------
    compute_w : ndarray
        Per device [W].
    shift : float
        [s]; ``nan`` without origins (the fold then starts at the first reading).
    """
    t_all = np.concatenate([t for t, _ in samples])
    r_all = np.concatenate([p - m for (_, p), m in zip(samples, means)])
    dev = np.repeat(np.arange(len(samples)), [len(t) for t, _ in samples])
    if len(origins):
        j = np.searchsorted(origins, t_all, side="right") - 1
        keep = j >= 0
        x = (t_all[keep] - origins[j[keep]]) / 1e9
    else:
        keep = np.ones(len(t_all), bool)
        x = (t_all - t_all.min()) / 1e9
    r, dev = r_all[keep], dev[keep]
    if len(r) < 10:
        raise AnalysisError("too few readings after an evaluation to fit the step dip")

    def basis(sh):
        phi = np.mod(x - sh, period)
        ov = _overlap(phi - w_s, phi, -dur, 0.0) + _overlap(phi - w_s, phi, period - dur,
                                                              period)
        return 1.0 / period - ov / (dur * w_s)

    def gain(sh):  # einsum, not BLAS: threaded dot products crawl on a loaded machine
        b = basis(sh)
        return np.einsum("i,i->", b, r) ** 2 / max(np.einsum("i,i->", b, b), 1e-30)

    coarse = np.arange(-0.5 * period, 0.5 * period, 0.1)
    best = coarse[int(np.argmax([gain(s) for s in coarse]))]
    fine = best + np.arange(-0.1, 0.1001, 0.005)
    best = float(fine[int(np.argmax([gain(s) for s in fine]))])
    b = basis(best)
    n = len(samples)
    phi = np.mod(x - best, period)
    margin = 0.5
    flat = (phi >= w_s + margin) & (phi <= period - dur - margin)
    counts = np.bincount(dev[flat], minlength=n)
    if counts.min() >= 3:
        level = np.bincount(dev[flat], r[flat], minlength=n) / counts
    else:
        num = np.bincount(dev, b * r, minlength=n)
        den = np.bincount(dev, b * b, minlength=n)
        level = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan) / period
    return np.asarray(means) + level, (best if len(origins) else np.nan)


def step_dip(per: pd.DataFrame, samples: list, period: float, w_s: float,
             dip_prior: Prior | None, origins: np.ndarray) -> tuple[dict, str, float, float]:
    """The step dip of each device (rows of ``per``: ``compute_w``, ``train_mean_w``,
    ``duty_raw``, ``low_cluster_w``): its energy always; its duration and depth when the
    readings tell them (instantaneous samples, ``w_s == 0``, or a dip longer than 1.5
    meter intervals), else from ``dip_prior``, else a bound (the meter interval).

    Returns ``(columns, source, sd, centre)``: the new or updated columns of ``per``
    (``dip_energy_j``, ``duty``, ``comm_w``, and ``compute_w`` through a meter), where
    the dip's duration came from and its standard deviation [s], and the dip's centre
    after the end of each step counted from ``origins`` [s] (:func:`fold_dip`; ``nan``
    for instantaneous samples).
    """
    d_obs = (1.0 - float(np.median(per["duty_raw"]))) * period
    if w_s == 0:
        return ({"dip_energy_j": period * (per["compute_w"] - per["train_mean_w"]),
                 "duty": per["duty_raw"], "comm_w": per["low_cluster_w"]},
                "measured", 0.0, np.nan)
    dip_sd = 0.0
    if dip_prior is not None:
        if not 0 < dip_prior.mean < period:
            raise PowerlabError(f"dip_duration_s = {dip_prior.mean:g} s must be in "
                                f"(0, step time {period:.3g} s)")
        src, dip_sd, dur = split_label(dip_prior), dip_prior.sd, dip_prior.mean
    elif 1.5 * w_s <= d_obs < period:
        src, dur = "measured", d_obs
    else:
        src, dur = "bound", w_s
    compute, shift = fold_dip(samples, per["train_mean_w"].to_numpy(), period, w_s, dur,
                              origins)
    energy = period * (compute - per["train_mean_w"])
    return ({"compute_w": compute, "dip_energy_j": energy, "comm_w": compute - energy / dur,
             "duty": 1.0 - dur / period}, src, dip_sd, shift - dur / 2)
