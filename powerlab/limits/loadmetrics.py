"""The metrics a utility asks of a large load, on a regular power series.

Each function takes power sampled every ``tick_s`` seconds (one draw of a forecast, or a
measured trace resampled by :func:`powerlab.interconnect.powertrace.trace_from_telemetry`) and
returns one number in SI units (W, or W/s):

- :func:`ramp_of_means` - largest change between adjacent ``window_s`` means, per second
  (ramps "over 1-s means" or "over 1-min means");
- :func:`largest_deviation` - largest max-minus-min within any ``window_s`` (the
  short-term deviation read as a limit of its own);
- :func:`gated_ramp`, :func:`deviation_beyond_allowance` - the short-term deviation read
  as Choukse et al.'s allowance before ramp constraints are triggered;
- :func:`band_windows`, :func:`band_oscillation` - RMS or peak-to-peak of the
  band-passed power (zero-phase Butterworth, half power at the edges) in every sliding
  window, and the worst window;
- :func:`largest_step` - largest change between any two samples at most ``within_s``
  apart;
- :func:`sag_load_loss` - the load lost during and after voltage sags.

Windows must be whole numbers of ticks; a series too short for a window raises
:class:`~powerlab.exceptions.AnalysisError`.

References
----------
.. [1] E. Choukse et al., "Power Stabilization for AI Training Datacenters",
   arXiv:2508.14318, 2025 (utility limits as ramp rate, short-term deviation and
   oscillation per frequency band).
.. [2] P. Welch, "The use of the fast Fourier transform for the estimation of power
   spectra", IEEE Trans. Audio Electroacoustics 15(2), 70-73, 1967.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import signal
from scipy.ndimage import maximum_filter1d, minimum_filter1d

from .._options import choice
from ..exceptions import AnalysisError
from .ramps import pick_direction, power_series, ramp_of_means, whole_ticks

__all__ = [
    "BandWindows",
    "band_filter",
    "band_oscillation",
    "band_passed",
    "band_windows",
    "default_band_window_s",
    "deviation_around",
    "deviation_beyond_allowance",
    "gated_ramp",
    "largest_deviation",
    "largest_step",
    "ramp_at_boundaries",
    "ramp_of_means",
    "sag_load_loss",
    "settle_s",
    "welch_psd",
    "welch_segment_s",
    "whole_ticks",
]

#: Order (per edge) of the Butterworth band-pass of :func:`band_passed` (run forward and
#: backward: twice the attenuation in dB).
BANDPASS_ORDER = 10

_MEASURES = ("rms", "peak_to_peak")


def largest_deviation(power_w, tick_s: float, window_s: float) -> float:
    """Largest max-minus-min of the power within any ``window_s`` [W].

    A window spans ``window_s / tick_s + 1`` samples (both ends included), so a step
    completed within ``window_s`` counts in full.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    window_s : float
        The window T, a whole number of ticks [s].

    Returns
    -------
    float
        The largest deviation [W].
    """
    x = power_series(power_w)
    n = whole_ticks(window_s, tick_s) + 1
    if len(x) < n:
        raise AnalysisError(f"{(len(x) - 1) * tick_s:g} s of data is shorter than the "
                            f"{window_s:g}-s window")
    # centred filters with edge repetition: a window cut by an edge is part of a full one
    return float((maximum_filter1d(x, n, mode="nearest")
                  - minimum_filter1d(x, n, mode="nearest")).max())


def ramp_at_boundaries(power_w, tick_s: float, window_s: float) -> np.ndarray:
    """Ramp across every boundary of adjacent ``window_s`` means [W/s].

    Element ``j`` is ``(mean(x[b:b+w]) - mean(x[b-w:b])) / window_s`` at the boundary
    ``b = j + w`` (``w`` ticks per window): the series whose largest value
    :func:`ramp_of_means` returns (positive: a rise).
    """
    x = power_series(power_w)
    w = whole_ticks(window_s, tick_s)
    if len(x) < 2 * w:
        raise AnalysisError(f"{len(x) * tick_s:g} s of data is shorter than two "
                            f"{window_s:g}-s windows")
    c = np.concatenate([[0.0], np.cumsum(x - x[0])])
    means = (c[w:] - c[:-w]) / w
    return (means[w:] - means[:-w]) / window_s


def deviation_around(power_w, tick_s: float, window_s: float) -> np.ndarray:
    """Max minus min of the power over the ``window_s`` centred on each tick boundary [W].

    Element ``b`` covers ticks ``b - m .. b + m - 1`` (``m = window_s / (2 tick_s)``, a
    whole number of ticks; cut at the ends of the series): the T seconds around the
    boundary between ticks ``b - 1`` and ``b``.
    """
    x = power_series(power_w)
    m = whole_ticks(window_s / 2.0, tick_s)
    return (maximum_filter1d(x, 2 * m, mode="nearest")
            - minimum_filter1d(x, 2 * m, mode="nearest"))


def gated_ramp(power_w, tick_s: float, window_s: float, direction: str,
               allowances) -> float:
    """Largest ramp of ``window_s`` means where a short-term deviation allowance is
    exceeded [W/s] (Choukse et al. 2025: the deviation allowed before ramp constraints
    are triggered).

    A ramp across a boundary counts only when, for at least one allowance ``(T, D)``,
    the power moves by more than ``D`` (max minus min) within the ``T`` seconds centred
    on that boundary (:func:`deviation_around`); changes that stay within every
    allowance do not trigger the ramp constraint.  0 when nothing triggers it.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    window_s : float
        Averaging window of the ramp [s].
    direction : {'up', 'down', 'both'}
    allowances : iterable of (float, float)
        ``(T [s], D [W])`` pairs, ``T >= 2 window_s``.

    Returns
    -------
    float
        [W/s], >= 0.
    """
    r = ramp_at_boundaries(power_w, tick_s, window_s)
    on = _triggered(power_w, tick_s, window_s, allowances)
    if not on.any():
        return 0.0
    rr = r[on]
    return pick_direction(float(max(rr.max(), 0.0)), float(max(-rr.min(), 0.0)), direction)


def _triggered(power_w, tick_s: float, window_s: float, allowances) -> np.ndarray:
    """Boundaries (as :func:`ramp_at_boundaries`) where some allowance is exceeded."""
    x = power_series(power_w)
    w = whole_ticks(window_s, tick_s)
    on = np.zeros(len(x) - 2 * w + 1, dtype=bool)
    for t_s, d_w in allowances:
        on |= deviation_around(x, tick_s, t_s)[w:len(x) - w + 1] > d_w
    return on


def deviation_beyond_allowance(power_w, tick_s: float, window_s: float, limit_w: float,
                               ramps) -> float:
    """The short-term deviation read as an allowance (Choukse et al. 2025) [W].

    The largest max-minus-min within the ``window_s`` centred on a boundary where one of
    ``ramps`` exceeds its limit; 0 when no ramp exceeds its limit where the power moves by
    more than ``limit_w``.  So the value exceeds ``limit_w`` exactly when the power leaves
    the allowance *and* breaks a ramp limit there: a deviation beyond the allowance that
    keeps to the ramp limits complies.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    window_s, limit_w : float
        The allowance ``T`` [s] and ``D`` [W].
    ramps : iterable of (float, str, float)
        ``(window_s [s], direction, limit [W/s])`` of the ramp requirements it gates.

    Returns
    -------
    float
        [W], >= 0.
    """
    x = power_series(power_w)
    dev = deviation_around(x, tick_s, window_s)
    worst = 0.0
    for win, direction, lim in ramps:
        w = whole_ticks(win, tick_s)
        r = ramp_at_boundaries(x, tick_s, win)
        over = {"up": r > lim, "down": -r > lim}.get(direction, np.abs(r) > lim)
        d = dev[w:len(x) - w + 1][over]
        d = d[d > limit_w]
        if len(d):
            worst = max(worst, float(d.max()))
    return worst


def welch_segment_s(f_lo_hz: float) -> float:
    """Welch segment length used for a band starting at ``f_lo_hz``: eight periods of the
    lowest frequency, at least 64 s [s]."""
    return max(64.0, 8.0 / f_lo_hz)


def welch_psd(power_w, tick_s: float, segment_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Welch power spectral density (Hann window, half overlap, mean removed per
    segment of ``segment_s``, cut to the series' length).

    Returns
    -------
    (ndarray, ndarray)
        Frequencies [Hz] and the density [W^2/Hz].
    """
    x = power_series(power_w)
    nper = min(len(x), round(segment_s / tick_s))
    return signal.welch(x, fs=1.0 / tick_s, nperseg=nper, detrend="constant")


def settle_s(f_lo_hz: float) -> float:
    """Time left out at each end of a record by :func:`band_windows`: three periods of
    the band's low edge, where the band filter's start and end transients can exceed
    0.5 % of a sine's amplitude [s]."""
    return 3.0 / f_lo_hz


def default_band_window_s(f_lo_hz: float) -> float:
    """Default window of an oscillation requirement: 60 s, or six periods of the band's
    low edge when that is longer (a powerlab assumption; the sources give no window) [s]."""
    return max(60.0, 6.0 / f_lo_hz)


@functools.lru_cache(maxsize=64)
def band_filter(band_hz: tuple[float, float], fs_hz: float) -> np.ndarray:
    """Second-order sections of the band-pass filter of :func:`band_passed`.

    A Butterworth band-pass of order :data:`BANDPASS_ORDER` per edge (a high-pass when
    the band's top lies at or above 95 % of the Nyquist frequency), its design edges
    widened so that, run forward and backward, its *power* response is exactly one half
    at the requested edges (a sine on an edge counts half).  The widening is computed in
    the bilinear transform's pre-warped frequencies, where the analog band-pass is
    geometrically symmetric: ``|H|^2 = 1 / (1 + Omega^(2N))``, ``Omega = (w^2 - w0^2) /
    (w B)``; ``|H|^4 = 1/2`` at the edges needs ``Omega_edge = (sqrt(2) - 1)^(1/(2N))``.
    """
    lo, hi = band_hz
    nyq = 0.5 * fs_hz
    n = BANDPASS_ORDER
    omega_e = (math.sqrt(2.0) - 1.0) ** (1.0 / (2 * n))

    def warp(f):
        return 2.0 * fs_hz * math.tan(math.pi * f / fs_hz)

    def unwarp(w):
        return fs_hz / math.pi * math.atan(w / (2.0 * fs_hz))

    if hi >= 0.95 * nyq:
        return signal.butter(n, unwarp(warp(lo) * omega_e), btype="highpass", fs=fs_hz,
                             output="sos")
    wl, wh = warp(lo), warp(hi)
    w0sq, b = wl * wh, (wh - wl) / omega_e
    wh2 = b / 2.0 + math.sqrt(b * b / 4.0 + w0sq)
    edges = [unwarp(wh2 - b), min(unwarp(wh2), 0.999 * nyq)]
    return signal.butter(n, edges, btype="bandpass", fs=fs_hz, output="sos")


def band_passed(power_w, tick_s: float, band_hz: tuple[float, float]) -> np.ndarray:
    """The part of the power inside a frequency band, zero phase [W].

    The mean is removed and the series is filtered forward and backward
    (:func:`scipy.signal.sosfiltfilt`, odd extension of three low-edge periods) by
    :func:`band_filter`.  Power response (measured, ``tests/interconnect/test_compliance.py``): 0.5 at
    each edge; at most 4 % of a sine's power at 0.9 x the low edge and at most 6 % at
    1.1 x the high edge pass (the leakage); at least 90 % passes from 1.1 x the low edge
    to 0.9 x the high edge, and 100 % (within 0.1 %) at the band's geometric centre.
    The filter's start and end transients last about three low-edge periods
    (:func:`settle_s`), which :func:`band_windows` leaves out; in the windows it keeps, a
    sine at 0.9 x the low edge reads at most 5 % of its power (worst window).

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    band_hz : (float, float)
        ``(lo, hi)``, ``0 < lo < hi < 1 / (2 tick_s)`` [Hz].
    """
    x = power_series(power_w)
    lo, hi = float(band_hz[0]), float(band_hz[1])
    fs = 1.0 / tick_s
    if not 0 < lo < hi or lo >= 0.5 * fs:
        raise AnalysisError(f"band ({lo:g}, {hi:g}) Hz: expected 0 < lo < hi and lo below "
                            f"the Nyquist frequency {0.5 * fs:g} Hz")
    sos = band_filter((lo, min(hi, 0.5 * fs)), fs)
    return signal.sosfiltfilt(sos, x - x.mean(), padtype="odd",
                              padlen=min(len(x) - 1, round(3 * fs / lo)))


@dataclass(frozen=True)
class BandWindows:
    """The band-limited oscillation in every sliding window of a series.

    Attributes
    ----------
    start_s : ndarray
        Start of each window, from the first sample [s].
    value_w : ndarray
        RMS (or peak-to-peak) of the band-passed power in each window [W].
    window_s : float
        Window length [s].
    measure : str
        ``rms`` or ``peak_to_peak``.
    """

    start_s: np.ndarray
    value_w: np.ndarray
    window_s: float
    measure: str

    @property
    def worst_w(self) -> float:
        """The largest window value [W]."""
        return float(self.value_w.max())

    @property
    def worst_start_s(self) -> float:
        """Start of the (first) worst window [s]."""
        return float(self.start_s[int(np.argmax(self.value_w))])

    def share_over(self, limit_w: float) -> float:
        """Share of the windows whose value exceeds ``limit_w`` [-]."""
        return float((self.value_w > limit_w).mean())


def band_windows(power_w, tick_s: float, band_hz: tuple[float, float], window_s: float,
                 measure: str = "rms", step_s: float | None = None) -> BandWindows:
    """Band-limited oscillation over sliding windows (:class:`BandWindows`).

    The power is band-passed once over the whole record (:func:`band_passed`); then, in
    each window of ``window_s`` starting every ``step_s`` (windows within
    :func:`settle_s` of either end of the record, where the filter's transients are,
    are left out): ``rms`` is the root mean square
    of the band-passed power (a sinusoid of amplitude ``A`` in the band: ``A / sqrt(2)``),
    ``peak_to_peak`` its max minus min (``2 A``).  A burst is read at its own strength in
    the window that holds it, whatever the record's length (a whole-record spectrum
    dilutes it by the record length).  The band is cut at the Nyquist frequency.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    band_hz : (float, float)
        ``(lo, hi)`` [Hz].
    window_s : float
        Window length, a whole number of ticks, at most the record [s].
    measure : {'rms', 'peak_to_peak'}
    step_s : float, optional
        Spacing of window starts (default one tick: every window) [s].

    Returns
    -------
    BandWindows
        All zeros when the band lies wholly above the Nyquist frequency.

    References
    ----------
    .. [1] E. Choukse et al., "Power Stabilization for AI Training Datacenters",
       arXiv:2508.14318, 2025 (oscillation limits per frequency band).
    """
    x = power_series(power_w)
    choice(measure, "measure", _MEASURES, error=AnalysisError)
    w = whole_ticks(window_s, tick_s)
    step = 1 if step_s is None else whole_ticks(step_s, tick_s)
    edge = math.ceil(settle_s(band_hz[0]) / tick_s - 1e-9)
    if len(x) < w + 2 * edge:
        raise AnalysisError(f"{len(x) * tick_s:g} s of data is shorter than the "
                            f"{window_s:g}-s window plus {settle_s(band_hz[0]):g} s at each "
                            "end (the band filter's transients)")
    starts = np.arange(edge, len(x) - edge - w + 1, step)
    if float(band_hz[0]) >= 0.5 / tick_s:
        return BandWindows(starts * tick_s, np.zeros(len(starts)), float(window_s), measure)
    y = band_passed(x, tick_s, band_hz)
    if measure == "rms":
        c = np.concatenate([[0.0], np.cumsum(y * y)])
        ms = (c[starts + w] - c[starts]) / w
        v = np.sqrt(np.maximum(ms, 0.0))
    else:
        k = min(w, len(y))
        origin = -(k // 2)          # window [i, i + k)
        v = (maximum_filter1d(y, k, origin=origin, mode="nearest")
             - minimum_filter1d(y, k, origin=origin, mode="nearest"))[starts]
    return BandWindows(starts * tick_s, v, float(window_s), measure)


def band_oscillation(power_w, tick_s: float, band_hz: tuple[float, float],
                     measure: str = "rms", window_s: float | None = None) -> float:
    """Worst-window RMS or peak-to-peak of the oscillation in a frequency band [W].

    The largest value of :func:`band_windows` over windows of ``window_s`` (default
    :func:`default_band_window_s`, cut to the record).  0 when the band lies wholly
    above the Nyquist frequency ``1 / (2 tick_s)``.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    band_hz : (float, float)
        Band ``(lo, hi)``, ``0 < lo < hi`` [Hz].
    measure : {'rms', 'peak_to_peak'}
    window_s : float, optional
        Window length [s].

    Returns
    -------
    float
        [W].
    """
    x = power_series(power_w)
    lo, hi = float(band_hz[0]), float(band_hz[1])
    if not 0 < lo < hi:
        raise AnalysisError(f"band must satisfy 0 < lo < hi, got ({lo:g}, {hi:g})")
    choice(measure, "measure", _MEASURES, error=AnalysisError)
    if lo >= 0.5 / tick_s:
        return 0.0
    duration = len(x) * tick_s
    if duration < 2.0 / lo + 2 * settle_s(lo):
        raise AnalysisError(f"{duration:g} s of data is shorter than two periods of "
                            f"{lo:g} Hz, the band's low edge, plus {settle_s(lo):g} s at "
                            "each end (the band filter's transients)")
    if window_s is None:
        window_s = min(default_band_window_s(lo), duration - 2 * settle_s(lo))
        window_s = tick_s * max(1, math.floor(window_s / tick_s + 1e-9))
    return band_windows(x, tick_s, (lo, hi), window_s, measure).worst_w


def largest_step(power_w, tick_s: float, within_s: float, direction: str = "both") -> float:
    """Largest change of the power completed within ``within_s`` [W].

    Up: the largest ``x[j] - x[i]`` over sample pairs with ``0 < t_j - t_i <=
    within_s``; down: the largest ``x[i] - x[j]`` (as a positive number).  Any pair
    counts, not only samples exactly ``within_s`` apart, so a load that jumps and comes
    back within ``within_s`` is seen (issue 20: the independent reference
    ``tests/reference/refmetrics.py`` reads "within" so; the earlier net change over
    exactly ``within_s`` missed it).

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    within_s : float
        Time within which a change counts as one step, a whole number of ticks [s].
    direction : {'up', 'down', 'both'}
        Load increases, decreases (as a positive number) or the larger.

    Returns
    -------
    float
        [W], >= 0.
    """
    x = power_series(power_w)
    k = whole_ticks(within_s, tick_s)
    if len(x) <= k:
        raise AnalysisError(f"{(len(x) - 1) * tick_s:g} s of data is shorter than "
                            f"{within_s:g} s")
    # trailing extremes over x[j-k .. j] from centred filters of k + 1 samples, shifted
    c = (k + 1) // 2
    lo = np.concatenate([np.minimum.accumulate(x[:k]),
                         minimum_filter1d(x, k + 1, mode="nearest")[c:len(x) - k + c]])
    hi = np.concatenate([np.maximum.accumulate(x[:k]),
                         maximum_filter1d(x, k + 1, mode="nearest")[c:len(x) - k + c]])
    up, down = float((x - lo).max()), float((hi - x).max())    # j = i gives 0
    return pick_direction(max(up, 0.0), max(down, 0.0), direction)


def sag_load_loss(power_w, tick_s: float, start_utc, sags: pd.DataFrame, *,
                  residual_voltage_pu: float, sag_duration_s: float, observe_s: float = 1.0,
                  pre_s: float = 1.0) -> tuple[float, int]:
    """Largest load loss in the voltage sags a ride-through requirement covers [W].

    A sag is covered when it is no deeper and no longer than the requirement's (its
    residual voltage is at least ``residual_voltage_pu`` and it lasts at most
    ``sag_duration_s``).  The load loss of a sag is the mean power over the ``pre_s``
    before it started minus the lowest power from its start to ``observe_s`` after its
    end (never below 0).  Sags whose windows leave the series are skipped.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    start_utc : pandas.Timestamp
        Time of the first sample.
    sags : DataFrame
        ``timestamp`` (UTC start), ``duration_s`` [s], ``residual_voltage_pu`` [pu].
    residual_voltage_pu, sag_duration_s : float
        The requirement's sag [pu], [s].
    observe_s : float, default 1
        Time after the sag still counted [s].
    pre_s : float, default 1
        Averaging window of the power before the sag [s].

    Returns
    -------
    (float, int)
        The largest load loss [W] (NaN when no covered sag lies in the series) and the
        number of covered sags evaluated.
    """
    x = power_series(power_w)
    if sags is None or len(sags) == 0:
        return math.nan, 0
    t0 = pd.Timestamp(start_utc)
    rel = (pd.to_datetime(sags["timestamp"], utc=True) - t0).dt.total_seconds().to_numpy()
    dur = sags["duration_s"].to_numpy(float)
    res = sags["residual_voltage_pu"].to_numpy(float)
    covered = (res >= residual_voltage_pu - 1e-12) & (dur <= sag_duration_s + 1e-12)
    n_pre = max(1, round(pre_s / tick_s))
    worst, used = -math.inf, 0
    for t, d in zip(rel[covered], dur[covered]):
        k0 = math.floor(t / tick_s + 1e-9)
        k1 = math.ceil((t + d + observe_s) / tick_s - 1e-9)
        if k0 - n_pre < 0 or k1 > len(x):
            continue
        loss = x[k0 - n_pre:k0].mean() - x[k0:max(k1, k0 + 1)].min()
        worst = max(worst, float(loss))
        used += 1
    return (max(worst, 0.0), used) if used else (math.nan, 0)
