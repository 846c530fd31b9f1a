"""The metrics a utility asks of a large load, on a regular power series.

Each function takes power sampled every ``tick_s`` seconds (one draw of a forecast, or a
measured trace resampled by :func:`powerlab.interconnect.powertrace.trace_from_telemetry`) and
returns one number in SI units (W, or W/s):

- :func:`ramp_of_means` - largest change between adjacent ``window_s`` means, per second
  (ramps "over 1-s means" or "over 1-min means");
- :func:`largest_deviation` - largest max-minus-min within any ``window_s`` (the allowed
  short-term deviation);
- :func:`band_oscillation` - RMS (Welch) or peak-to-peak (zero-phase Butterworth
  band-pass) of the oscillation in a frequency band;
- :func:`largest_step` - largest net change between samples ``within_s`` apart;
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

import math

import numpy as np
import pandas as pd
from scipy import signal
from scipy.ndimage import maximum_filter1d, minimum_filter1d

from ..exceptions import AnalysisError
from ..grid.ramps import pick_direction, power_series, ramp_of_means, whole_ticks

__all__ = [
    "band_oscillation",
    "band_rms",
    "largest_deviation",
    "largest_step",
    "ramp_of_means",
    "sag_load_loss",
    "welch_psd",
    "welch_segment_s",
    "whole_ticks",
]

#: Order of the Butterworth band-pass used for peak-to-peak (applied forward and backward).
BANDPASS_ORDER = 6


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


def band_rms(frequency_hz: np.ndarray, psd_w2_per_hz: np.ndarray,
             band_hz: tuple[float, float]) -> float:
    """RMS of the oscillation in a band from a power spectral density [W]: the square
    root of the density summed over the band's bins times the bin width."""
    f = np.asarray(frequency_hz)
    m = (f >= band_hz[0]) & (f <= band_hz[1])
    return float(math.sqrt(np.asarray(psd_w2_per_hz)[m].sum() * (f[1] - f[0])))


def band_oscillation(power_w, tick_s: float, band_hz: tuple[float, float],
                     measure: str = "rms") -> float:
    """RMS or peak-to-peak of the oscillation in a frequency band [W].

    ``rms``: the square root of the Welch power spectral density (Hann window, segments
    of :func:`welch_segment_s` with half overlap, mean removed per segment) integrated
    over the band - the standard deviation of the in-band component; a sinusoid of
    amplitude ``A`` in the band gives ``A / sqrt(2)``.

    ``peak_to_peak``: the series is band-passed with a Butterworth filter of order
    :data:`BANDPASS_ORDER` applied forward and backward (zero phase,
    :func:`scipy.signal.sosfiltfilt`, even padding of three low-edge periods), the first
    and last 1.5 periods of the low edge are left out (filter transients), and the
    largest max-minus-min of the filtered series within one period of the band's low edge
    is returned; a sinusoid of amplitude ``A`` well inside the band gives ``2 A`` (less
    near the band edges, where the Butterworth response rolls off: to about 0.77 at 95 %
    of the upper edge).

    The band is cut at the Nyquist frequency ``1 / (2 tick_s)``.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    band_hz : (float, float)
        Band ``(lo, hi)``, ``0 < lo < hi`` [Hz].
    measure : {'rms', 'peak_to_peak'}

    Returns
    -------
    float
        [W]; 0 when the band lies wholly above the Nyquist frequency.
    """
    x = power_series(power_w)
    lo, hi = float(band_hz[0]), float(band_hz[1])
    if not 0 < lo < hi:
        raise AnalysisError(f"band must satisfy 0 < lo < hi, got ({lo:g}, {hi:g})")
    fs = 1.0 / tick_s
    nyq = 0.5 * fs
    if lo >= nyq:
        return 0.0
    duration = len(x) * tick_s
    if duration < 4.0 / lo:
        raise AnalysisError(f"{duration:g} s of data is shorter than four periods of "
                            f"{lo:g} Hz, the band's low edge")
    if measure == "rms":
        return band_rms(*welch_psd(x, tick_s, welch_segment_s(lo)), (lo, hi))
    if measure == "peak_to_peak":
        if hi >= 0.95 * nyq:
            sos = signal.butter(BANDPASS_ORDER, lo, btype="highpass", fs=fs, output="sos")
        else:
            sos = signal.butter(BANDPASS_ORDER, [lo, hi], btype="bandpass", fs=fs,
                                output="sos")
        y = signal.sosfiltfilt(sos, x - x.mean(), padtype="even",
                               padlen=min(len(x) - 1, round(3 * fs / lo)))
        edge = round(1.5 * fs / lo)                 # the filter's start and end transients
        y = y[edge:len(y) - edge]
        n = min(len(y), max(2, round(fs / lo) + 1))
        return float((maximum_filter1d(y, n, mode="nearest")
                      - minimum_filter1d(y, n, mode="nearest")).max())
    raise AnalysisError(f"measure must be 'rms' or 'peak_to_peak', got {measure!r}")


def largest_step(power_w, tick_s: float, within_s: float, direction: str = "both") -> float:
    """Largest net change of the power between samples ``within_s`` apart [W].

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
    w = whole_ticks(within_s, tick_s)
    if len(x) <= w:
        raise AnalysisError(f"{(len(x) - 1) * tick_s:g} s of data is shorter than "
                            f"{within_s:g} s")
    d = x[w:] - x[:-w]
    return pick_direction(float(max(d.max(), 0.0)), float(max(-d.min(), 0.0)), direction)


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
