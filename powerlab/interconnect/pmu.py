"""What a phasor measurement unit (PMU) reports of a site's power: the IEEE C37.118.1
reference phasor estimators (P class and M class) applied to the site's current.

A PMU at the point of interconnection samples the voltage and current waveforms and
reports phasors ``Fs`` times a second (the reporting rate, frames per second).  The
standard's reference model (IEEE C37.118.1-2011 Annex C, with Amendment 1 of 2014;
IEC/IEEE 60255-118-1:2018 Annex D) estimates a phasor by quadrature demodulation at the
nominal frequency ``f0`` and a symmetric low-pass FIR filter ``W(k)``,
``k = -N/2 ... N/2``, of the demodulated samples::

    X(i) = sqrt(2) / G * sum_k x(i + k) W(k) exp(-j w0 (i + k) dt),   G = sum_k W(k)

P class (protection, fast):  ``W(k) = 1 - 2 |k| / (N + 2)``, ``N = 2 (Fsamples / f0 - 1)``:
a triangle two nominal cycles long.

M class (measurement, anti-aliased):  ``W(k) = sin(2 pi 2 Ffr k / Fsamples) /
(2 pi 2 Ffr k / Fsamples) * h(k)``, ``W(0) = 1``, ``h`` a Hamming window of ``N + 1``
points; the reference frequency ``Ffr`` and the order ``N`` depend on the nominal
frequency and the reporting rate (:data:`M_CLASS_60HZ` for ``Fsamples = 960`` Hz,
:data:`M_CLASS_50HZ` for ``Fsamples = 800`` Hz).

How powerlab uses it (assumptions, stated): the voltage stays at nominal magnitude and
frequency, the three phases are balanced and the power factor is constant, so each
phase's current amplitude is proportional to the site's active power.  The power series
is resampled band-limited onto the estimator's grid ``Fsamples = 16 f0``
(:func:`~powerlab.interconnect.resampling.resample_bandlimited`: linear interpolation
would attenuate a 23-Hz oscillation on a 0.01-s series by 16 % before the filter does),
the three currents ``sqrt(2) P(t) cos(w0 t - 2 pi k / 3)`` are demodulated, filtered by
the reference filter and combined into the positive-sequence phasor (what a PMU
reports; the standard's reference model computes it from the three phase phasors), and
its magnitude at the frame times (time-stamped at the window centre, as the reference
model does) is the power the PMU shows.  An oscillation of the power at ``fm`` then
appears multiplied by exactly the filter's gain at ``fm`` (:func:`modulation_gain`): the
``2 f0`` images of the three phases cancel in the positive sequence.  ``sequence =
'single'`` keeps one phase's phasor, with the image the filter leaks (the P-class
triangle nulls it only at ``2 f0`` itself, not at ``2 f0 +- fm``).

Frames are reported ``Fs`` times a second, so an oscillation above ``Fs / 2`` shows at
its alias (:func:`reported_frequency_hz`): at 30 frames/s a 23-Hz oscillation appears at
7 Hz.  Off-nominal frequency and the P-class magnitude correction (which is 1 at nominal
frequency) are not modelled.

References
----------
.. [1] IEEE Std C37.118.1-2011, "IEEE Standard for Synchrophasor Measurements for Power
   Systems", Annex C (reference signal processing model), and IEEE Std C37.118.1a-2014
   (Amendment 1), Table C.1.
.. [2] IEC/IEEE 60255-118-1:2018, "Measuring relays and protection equipment - Part
   118-1: Synchrophasor for power systems - Measurements", Annex D (Table D.1 gives the
   M-class ``Ffr`` and ``N`` for 50-Hz and 60-Hz systems).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import signal

from .._options import choice
from ..exceptions import PowerlabError
from .resampling import resample_bandlimited

__all__ = [
    "CLASSES",
    "M_CLASS",
    "M_CLASS_50HZ",
    "M_CLASS_60HZ",
    "SAMPLES_PER_CYCLE",
    "PmuSettings",
    "modulation_gain",
    "pmu_filter",
    "pmu_power",
    "reported_frequency_hz",
]

#: Performance classes of IEEE C37.118.1.
CLASSES = ("P", "M")

#: Samples per nominal cycle of the reference model (960 Hz at 60 Hz) [-].
SAMPLES_PER_CYCLE = 16


@dataclass(frozen=True)
class PmuSettings:
    """The reference PMUs (IEEE C37.118.1) of a PMU view (e.g. the study package's).

    Attributes
    ----------
    f0_hz : {50, 60}, default 60
        Nominal frequency [Hz].
    reporting_rate_fps : int, optional
        Reporting rate, default one frame a nominal cycle (60 or 50) [frames/s].
    """

    f0_hz: float = 60.0
    reporting_rate_fps: int | None = None

    def __post_init__(self):    # (an f0 other than 50 or 60 is refused by pmu, by name)
        if self.reporting_rate_fps is None and self.f0_hz in (50, 60):
            object.__setattr__(self, "reporting_rate_fps", int(self.f0_hz))

#: M-class reference filter for 60-Hz systems sampled at 960 Hz, by reporting rate
#: [frames/s]: (``Ffr`` [Hz], filter order ``N`` [-]); IEEE C37.118.1a-2014 Table C.1, as
#: reproduced in IEC/IEEE 60255-118-1 Annex D (Table D.1).
M_CLASS_60HZ = {10: (1.779, 968), 12: (2.125, 816), 15: (2.64, 662), 20: (3.5, 502),
                30: (5.02, 306), 60: (8.19, 164), 120: (16.25, 70)}

#: M-class reference filter for 50-Hz systems sampled at 800 Hz (16 samples a cycle, as
#: 960 Hz is at 60 Hz), by reporting rate [frames/s]: (``Ffr`` [Hz], ``N`` [-]);
#: IEC/IEEE 60255-118-1:2018 Table D.1 (as public implementations of its Annex D model
#: reproduce it).  The table does not say at what rate its orders count; 16 samples a
#: cycle is the reading that matches the 60-Hz design: at 10 frames/s, where both columns
#: give Ffr = 1.779 Hz, the 50-Hz window (806 / 800 Hz = 1.0075 s) then lasts as long as
#: the 60-Hz one (968 / 960 Hz = 1.0083 s), and every 50-Hz filter meets the bandwidth
#: and out-of-band requirements with the 60-Hz filters' margins.
M_CLASS_50HZ = {10: (1.779, 806), 25: (4.355, 338), 50: (7.75, 142), 100: (14.1, 66)}

#: The M-class tables by nominal frequency [Hz].
M_CLASS = {50: M_CLASS_50HZ, 60: M_CLASS_60HZ}


def _check(pmu_class: str, f0_hz: float, reporting_rate_fps: int) -> str:
    c = str(pmu_class).upper()
    choice(c, "PMU class", CLASSES)
    choice(f0_hz, "nominal frequency f0_hz", (50, 60))
    if c == "M":
        choice(reporting_rate_fps, f"M-class reporting rate at {f0_hz:g} Hz",
               sorted(M_CLASS[int(f0_hz)]))
    elif not (isinstance(reporting_rate_fps, (int, np.integer)) and reporting_rate_fps > 0):
        raise PowerlabError(f"reporting rate must be a positive whole number of frames/s, "
                            f"got {reporting_rate_fps!r}")
    return c


def pmu_filter(pmu_class: str = "P", *, f0_hz: float = 60.0,
               reporting_rate_fps: int = 60) -> tuple[np.ndarray, float]:
    """The reference filter weights ``W(k)``, ``k = -N/2 ... N/2``, and the sampling rate.

    Parameters
    ----------
    pmu_class : {'P', 'M'}
    f0_hz : {50, 60}
        Nominal system frequency [Hz].
    reporting_rate_fps : int, default 60
        Reporting rate Fs (the M class's filter depends on it) [frames/s].

    Returns
    -------
    (ndarray, float)
        The weights (not normalised; ``G = W.sum()``) [-] and ``Fsamples`` [Hz].

    References
    ----------
    .. [1] IEEE Std C37.118.1-2011 Annex C, equations for the P-class triangular and the
       M-class Hamming-windowed sinc filters; C37.118.1a-2014 Table C.1.
    .. [2] IEC/IEEE 60255-118-1:2018 Annex D, Table D.1 (the 50-Hz M-class filters).
    """
    c = _check(pmu_class, f0_hz, reporting_rate_fps)
    fs = SAMPLES_PER_CYCLE * float(f0_hz)
    if c == "P":
        n = 2 * (SAMPLES_PER_CYCLE - 1)
        k = np.arange(-n // 2, n // 2 + 1)
        return 1.0 - 2.0 * np.abs(k) / (n + 2), fs
    ffr, n = M_CLASS[int(f0_hz)][int(reporting_rate_fps)]
    k = np.arange(-n // 2, n // 2 + 1)
    arg = 2 * np.pi * 2 * ffr * k / fs
    with np.errstate(invalid="ignore", divide="ignore"):
        sinc = np.where(k == 0, 1.0, np.sin(arg) / arg)
    return sinc * np.hamming(n + 1), fs


def modulation_gain(frequency_hz, pmu_class: str = "P", *, f0_hz: float = 60.0,
                    reporting_rate_fps: int = 60) -> np.ndarray:
    """Magnitude response of the reference filter to a modulation at ``frequency_hz``:
    ``|sum_k W(k) exp(-j 2 pi f k / Fsamples)| / sum_k W(k)`` [-].

    A power oscillation of amplitude ``A`` at ``f`` is reported with amplitude
    ``A * modulation_gain(f)`` (before the reporting rate's aliasing).
    """
    w, fs = pmu_filter(pmu_class, f0_hz=f0_hz, reporting_rate_fps=reporting_rate_fps)
    f = np.atleast_1d(np.asarray(frequency_hz, dtype=float))
    n = (len(w) - 1) // 2
    k = np.arange(-n, n + 1)
    # symmetric filter: the response is real, sum W(k) cos(2 pi f k / fs)
    h = np.cos(2 * np.pi * np.outer(f, k) / fs) @ w / w.sum()
    return np.abs(h)


def reported_frequency_hz(frequency_hz, reporting_rate_fps: float) -> np.ndarray:
    """Where an oscillation at ``frequency_hz`` shows in frames reported ``Fs`` times a
    second: its alias ``|f - Fs round(f / Fs)|`` (itself up to ``Fs / 2``) [Hz]."""
    f = np.abs(np.atleast_1d(np.asarray(frequency_hz, dtype=float)))
    fs = float(reporting_rate_fps)
    return np.abs(f - fs * np.round(f / fs))


def _demodulated(p: np.ndarray, t: np.ndarray, f0_hz: float, sequence: str) -> np.ndarray:
    """The demodulated current ``sqrt(2) sum_k a^k i_k(t) exp(-j w0 t) / 3`` of the three
    phases (positive sequence), or of phase a alone (``single``)."""
    w0 = 2 * np.pi * f0_hz
    rot = np.exp(-1j * w0 * t)
    if sequence == "single":
        return math.sqrt(2.0) * p * np.cos(w0 * t) * rot
    out = np.zeros(len(t), complex)
    for k in range(3):
        shift = 2 * np.pi * k / 3
        out += math.sqrt(2.0) * p * np.cos(w0 * t - shift) * rot * np.exp(1j * shift)
    return out / 3


def pmu_power(power_w, tick_s: float, start_utc=None, *, classes=("P", "M"),
              f0_hz: float = 60.0, reporting_rate_fps: int = 60,
              sequence: str = "positive") -> pd.DataFrame:
    """The site's active power as P-class and M-class reference PMUs report it.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W] (instantaneous values; resampled band-limited onto
        the PMU's sampling grid).
    tick_s : float
        Spacing of ``power_w`` [s]; oscillations above ``0.5 / tick_s`` are not in it.
    start_utc : pandas.Timestamp, optional
        Time of the first sample (for the ``timestamp_utc`` column).
    classes : sequence of {'P', 'M'}
    f0_hz : {50, 60}
        Nominal frequency [Hz].
    reporting_rate_fps : int, default 60
        Frames per second [1/s].
    sequence : {'positive', 'single'}, default 'positive'
        The positive-sequence phasor of balanced three-phase currents (what a PMU
        reports), or one phase's (with the ``2 f0`` image its filter leaks).

    Returns
    -------
    DataFrame
        One row per reported frame whose filter window lies inside the series:
        ``time_s`` (from the first sample), ``timestamp_utc`` (when ``start_utc`` is
        given), ``power_megawatts_raw`` (the series at the frame time) and
        ``power_megawatts_pmu_p_class`` / ``..._m_class``.
    """
    x = np.asarray(power_w, dtype=float)
    if x.ndim != 1 or len(x) < 2 or not np.isfinite(x).all():
        raise PowerlabError("expected a finite 1-D power series of at least two samples")
    if not (math.isfinite(tick_s) and tick_s > 0):
        raise PowerlabError(f"tick_s must be a positive number, got {tick_s!r}")
    choice(sequence, "sequence", ("positive", "single"))
    cls = [_check(c, f0_hz, reporting_rate_fps) for c in classes]
    if not cls:
        raise PowerlabError("give at least one PMU class")
    fs = SAMPLES_PER_CYCLE * float(f0_hz)
    frame_step = fs / reporting_rate_fps
    if abs(frame_step - round(frame_step)) > 1e-9:
        raise PowerlabError(f"{reporting_rate_fps} frames/s is not a whole number of "
                            f"samples at {fs:g} Hz")
    frame_step = round(frame_step)
    duration = (len(x) - 1) * tick_s
    p = resample_bandlimited(x, 1.0 / tick_s, fs)
    t = np.arange(len(p)) / fs
    demod = _demodulated(p, t, f0_hz, sequence)
    out = {}
    centres = None
    for c in cls:
        w, _ = pmu_filter(c, f0_hz=f0_hz, reporting_rate_fps=reporting_rate_fps)
        half = (len(w) - 1) // 2
        est = math.sqrt(2.0) / w.sum() * signal.fftconvolve(demod, w[::-1], mode="valid")
        # est[j] is the estimate centred on sample j + half; frames on multiples of step
        idx = np.arange(0, len(t), frame_step)
        idx = idx[(idx >= half) & (idx < len(t) - half)]
        # the longest filter decides which frames every class can report
        centres = idx if centres is None else np.intersect1d(centres, idx)
        out[c] = (idx, np.abs(est[idx - half]))
    if centres is None or len(centres) == 0:
        raise PowerlabError(f"{duration:g} s of data is shorter than the PMU filter window")
    frame = {"time_s": t[centres]}
    if start_utc is not None:
        frame["timestamp_utc"] = pd.Timestamp(start_utc) + pd.to_timedelta(t[centres],
                                                                             unit="s")
    frame["power_megawatts_raw"] = p[centres] / 1e6
    for c, (idx, val) in out.items():
        keep = np.isin(idx, centres)
        frame[f"power_megawatts_pmu_{c.lower()}_class"] = val[keep] / 1e6
    return pd.DataFrame(frame)
