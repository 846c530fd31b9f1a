"""Narrow-band lines of a power spectrum, flagged by significance and by materiality.

A line is **flagged** when it is significant, material and unexplained, that is

- **significant**: its Welch density stands above the local spectral floor by more than
  chance allows at a stated false-flag rate (:func:`significance_ratio`).  Under the null
  hypothesis of a smooth spectrum (no line), the Welch estimate of a bin, divided by the
  true floor, is distributed as ``chi^2_nu / nu`` with ``nu`` the estimate's equivalent
  degrees of freedom (:func:`welch_dof`, Welch 1967; Percival and Walden 1993 sec. 6.17);
  the median of ``D`` independent draws exceeds ``x`` when at least ``D // 2 + 1`` of
  them do (a binomial tail).  The threshold is set so that, over all the bins of the
  band searched, a spectrum without a line flags one with probability
  ``false_flag_rate`` (default 1 %, family-wise: the per-bin rate is divided by the
  number of bins).  The floor is the running median within ``+- neighbourhood_hz``,
  divided by the median of the null distribution (the running median of a ``chi^2``
  spectrum sits below its mean).
- **material**: its amplitude (of the equivalent sinusoid, the floor's share removed) is
  at least the amplitude that matters at the point of interconnection
  (:func:`material_amplitude_w`): the smallest ``min_amplitude_megawatts`` of the
  requirement spec's grid modes whose band holds the line, or a quarter of an oscillation
  limit whose band holds it (as a sinusoid's amplitude: ``sqrt(2) x`` an RMS limit, half
  a peak-to-peak limit); where neither covers the line's frequency, 0.1 % of the site's
  peak power.

- **unexplained**: no rhythm of the load explains it (:func:`attribute`): a line is a
  harmonic ``k`` of a rhythm (a job's step period, its evaluation or checkpoint cycle,
  or a period estimated from the trace) when it lies within 0.75 of a frequency bin of
  ``k / period``.  A material harmonic of the load's own rhythm is listed (``material``
  true, with its attribution) but not flagged: it is the rhythm the resonance screening
  (:mod:`powerlab.interconnect.resonance`) checks against the grid's mode bands; a flag
  says "an oscillation the load's rhythm does not make", as the 14.7-Hz and 23-Hz
  oscillations utilities have reported.  And each is listed at its **alias** for every
reporting rate a PMU offers at the system frequency (:func:`aliases`).

References
----------
.. [1] P. D. Welch, "The use of fast Fourier transform for the estimation of power
   spectra", IEEE Trans. Audio Electroacoust. 15(2), 1967, pp. 70-73.
.. [2] D. B. Percival and A. T. Walden, *Spectral Analysis for Physical Applications*,
   Cambridge University Press, 1993, sec. 6.17 (equivalent degrees of freedom of WOSA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import signal, stats
from scipy.ndimage import median_filter

from .._options import Options
from .pmu import M_CLASS, reported_frequency_hz

__all__ = [
    "LineOptions",
    "Rhythm",
    "aliases",
    "attribute",
    "flag_lines",
    "material_amplitude_w",
    "significance_ratio",
    "welch_dof",
]


@dataclass(frozen=True)
class LineOptions(Options):
    """How lines are flagged.

    Attributes
    ----------
    false_flag_rate : float, default 0.01
        Probability that a spectrum without a line flags one as significant [-].
    band_hz : tuple of float, default (0.1, 30)
        Frequencies searched [Hz].
    neighbourhood_hz : float, default 1.0
        Half-width of the running median that estimates the floor [Hz].
    materiality_share : float, default 0.25
        Share of an oscillation limit a line must reach to matter [-].
    site_share : float, default 0.001
        Share of the site's peak power a line must reach where no limit covers it [-].
    """

    false_flag_rate: float = 0.01
    band_hz: tuple[float, float] = (0.1, 30.0)
    neighbourhood_hz: float = 1.0
    materiality_share: float = 0.25
    site_share: float = 0.001


@dataclass(frozen=True)
class Rhythm:
    """A periodic rhythm of the load: ``what`` (e.g. ``"step of pretrain"``) and its
    ``period_s`` [s]."""

    what: str
    period_s: float


def welch_dof(n_samples: int, nperseg: int) -> float:
    """Equivalent degrees of freedom of a Welch estimate (periodic Hann window, half
    overlap): ``nu = 2 K / (1 + 2 sum_m (1 - m/K) c(m))``, ``c(m)`` the squared
    normalised overlap of the window with itself shifted by ``m`` segments [-]."""
    nperseg = min(int(nperseg), int(n_samples))
    step = nperseg - nperseg // 2
    k = max(1, (n_samples - nperseg) // step + 1)
    w = signal.get_window("hann", nperseg)
    den = float(np.sum(w * w)) ** 2
    corr = 0.0
    for m in range(1, k):
        lag = m * step
        if lag >= nperseg:
            break
        c = float(np.sum(w[:nperseg - lag] * w[lag:])) ** 2 / den
        corr += (1 - m / k) * c
    return 2.0 * k / (1.0 + 2.0 * corr)


def _median_tail(x: float, dof: float, draws: int) -> float:
    """P(median of ``draws`` iid ``chi^2_dof / dof`` > x), the median taken as the
    ``draws // 2 + 1``-th largest (exact for odd ``draws``, conservative for even)."""
    q = stats.chi2.sf(x * dof, dof)
    return float(stats.binom.sf(draws // 2, draws, q))


def _null_median(dof: float, draws: int) -> float:
    """Median of the null distribution of the median of ``draws`` estimates [-]."""
    lo, hi = 1e-6, 50.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _median_tail(mid, dof, draws) > 0.5 else (lo, mid)
    return 0.5 * (lo + hi)


def significance_ratio(dof: float, draws: int, n_bins: int,
                       false_flag_rate: float = 0.01) -> float:
    """The ratio to the running-median floor above which a bin is significant: a
    spectrum with no line exceeds it in any of ``n_bins`` bins with probability
    ``false_flag_rate`` (Bonferroni) [-]."""
    alpha = false_flag_rate / max(1, n_bins)
    lo, hi = 1.0, 1e4
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if _median_tail(mid, dof, draws) > alpha else (lo, mid)
    return hi / _null_median(dof, draws)


def material_amplitude_w(frequency_hz: float, spec, site_peak_w: float,
                         options: LineOptions | None = None) -> tuple[float, str]:
    """The amplitude a line at ``frequency_hz`` must reach to matter, and why [W]."""
    o = options or LineOptions()
    cands = []
    for mode in getattr(spec, "grid_modes", ()) or ():
        lo, hi = mode.band_hz
        if lo <= frequency_hz <= hi:
            cands.append((mode.min_amplitude_megawatts * 1e6,
                          f"grid mode {mode.name} ({mode.min_amplitude_megawatts:g} MW)"))
    for req in getattr(spec, "requirements", ()) or ():
        if req.kind != "oscillation" or req.band_hz is None:
            continue
        lo, hi = req.band_hz
        if lo <= frequency_hz <= hi:
            amp = req.limit * (math.sqrt(2.0) if req.measure == "rms" else 0.5)
            cands.append((o.materiality_share * amp * 1e6,
                          f"{o.materiality_share:g} x limit {req.name} "
                          f"({req.limit:g} {req.unit} {req.measure})"))
    if cands:
        return min(cands)
    return (o.site_share * site_peak_w,
            f"{o.site_share:.1%} of the site's peak ({site_peak_w / 1e6:.4g} MW)")


def attribute(frequency_hz: float, rhythms, df_hz: float) -> str:
    """The rhythm harmonic a line is (``"harmonic 3 of step of pretrain (6 s)"``) when
    within 0.75 of a frequency bin of ``k / period`` (a sinusoid's Welch peak lies
    within half a bin of it), else ``"unexplained"``.  Only rhythms whose harmonics lie
    at least 4 bins apart can explain a line (a 20-minute checkpoint cycle has a
    harmonic within every bin of a 64-s Welch segment, so it explains none)."""
    best = None
    for r in rhythms:
        if not (r.period_s > 0) or 1.0 / r.period_s < 4 * df_hz:
            continue
        k = round(frequency_hz * r.period_s)
        d = abs(frequency_hz - k / r.period_s)
        if k >= 1 and d <= 0.75 * df_hz and (best is None or d < best[0]):
            best = (d, k, r)
    if best is None:
        return "unexplained"
    _, k, r = best
    return f"harmonic {k} of {r.what} ({r.period_s:.4g} s)"


def aliases(frequency_hz, f0_hz: float) -> pd.DataFrame:
    """Where each line shows at every reporting rate a PMU offers at ``f0_hz`` (the
    rates of the M-class table, C37.118.1a / 60255-118-1), one column
    ``alias_hz_at_<rate>fps`` each [Hz]."""
    f = np.asarray(frequency_hz, dtype=float)
    rates = sorted(M_CLASS[int(f0_hz)])
    return pd.DataFrame({f"alias_hz_at_{r}fps": reported_frequency_hz(f, r) if len(f) else []
                         for r in rates})


def _candidates(freq: np.ndarray, med: np.ndarray, o: LineOptions, null_med: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Local maxima in the band: their indices, ratio to the floor, and the floor."""
    df = freq[1] - freq[0]
    k = max(1, round(o.neighbourhood_hz / df))
    # bins 0 and 1 hold the mean each segment removed: the floor leaves them out, and
    # mirrors (rather than repeats) the spectrum at its ends
    floor = np.empty_like(med)
    floor[2:] = median_filter(med[2:], size=2 * k + 1, mode="mirror") / null_med
    floor[:2] = floor[2]
    lo, hi = o.band_hz
    inner = np.r_[False, (med[1:-1] > med[:-2]) & (med[1:-1] >= med[2:]), False]
    idx = np.flatnonzero(inner & (freq >= lo) & (freq <= hi))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = med[idx] / floor[idx]
    return idx, ratio, floor


def flag_lines(freq, psd_draws, *, dof: float, spec=None, site_peak_w: float,
               rhythms=(), f0_hz: float = 60.0, options: LineOptions | None = None
               ) -> tuple[pd.DataFrame, dict]:
    """The significant lines of the median spectrum over draws, with their materiality,
    attribution and aliases.

    Parameters
    ----------
    freq : array_like
        Frequencies of the Welch estimates [Hz] (evenly spaced).
    psd_draws : array_like
        One Welch density per draw (rows) [W^2/Hz].
    dof : float
        Equivalent degrees of freedom of one estimate (:func:`welch_dof`) [-].
    spec : RequirementSpec, optional
        Its grid modes and oscillation limits set the materiality.
    site_peak_w : float
        The site's peak power (materiality where no limit applies) [W].
    rhythms : sequence of Rhythm
    f0_hz : {50, 60}
    options : LineOptions

    Returns
    -------
    (DataFrame, dict)
        The lines (``frequency_hz, amplitude_megawatts, ratio_to_floor, significant,
        material_megawatts, material_basis, material, flagged, attribution`` and an
        ``alias_hz_at_<rate>fps`` column per rate), strongest first; and the test's
        terms (``threshold_ratio``, ``dof``, ``draws``, ``bins``, ``false_flag_rate``).
    """
    o = options or LineOptions()
    f = np.asarray(freq, dtype=float)
    p = np.atleast_2d(np.asarray(psd_draws, dtype=float))
    med = np.median(p, axis=0)
    draws = p.shape[0]
    df = f[1] - f[0]
    n_bins = int(((f >= o.band_hz[0]) & (f <= o.band_hz[1])).sum())
    thr = significance_ratio(dof, draws, n_bins, o.false_flag_rate)
    idx, ratio, floor = _candidates(f, med, o, _null_median(dof, draws))
    keep = ratio > thr
    rows = []
    for i, r in zip(idx[keep], ratio[keep]):
        lo, hi = max(0, i - 3), min(len(med), i + 4)
        excess = float(np.clip(med[lo:hi] - floor[lo:hi], 0, None).sum())
        amp = math.sqrt(2.0 * excess * df)
        mat, basis = material_amplitude_w(float(f[i]), spec, site_peak_w, o)
        why = attribute(float(f[i]), rhythms, df)
        rows.append((float(f[i]), amp / 1e6, float(r), True, mat / 1e6, basis,
                     amp >= mat, amp >= mat and why == "unexplained", why))
    cols = ["frequency_hz", "amplitude_megawatts", "ratio_to_floor", "significant",
            "material_megawatts", "material_basis", "material", "flagged", "attribution"]
    out = pd.DataFrame(rows, columns=cols).sort_values(
        "amplitude_megawatts", ascending=False, ignore_index=True)
    out = pd.concat([out, aliases(out["frequency_hz"].to_numpy(), f0_hz)], axis=1)
    terms = {"threshold_ratio": thr, "dof": dof, "draws": draws, "bins": n_bins,
             "false_flag_rate": o.false_flag_rate}
    return out, terms
