"""The IEC 61000-4-15 flickermeter: instantaneous flicker sensation, Pst and Plt.

The flickermeter models the chain lamp - eye - brain of an average observer looking at a
60-W incandescent lamp supplied by the measured voltage.  Its blocks (IEC 61000-4-15:2010,
clause 4 and Figure 1; IEEE Std 1453-2015 adopts it):

1. **Input voltage adaptor**: the voltage is scaled to an internal reference level.
   Here: the waveform is divided by its RMS value over the record (the standard's
   27.3-s adaptive gain gives the same for records whose mean level does not drift);
   an RMS-envelope input is divided by its mean.
2. **Squaring demodulator**: ``u(t)^2``; for a waveform ``sqrt(2) r(t) cos(w0 t)`` it
   holds ``r(t)^2`` plus a ``2 f0`` component that block 3 removes.  The envelope entry
   (:func:`pinst_from_envelope`) squares the relative RMS ``r(t)`` itself.
3. **Demodulation and weighting filters**: a first-order high-pass at 0.05 Hz, a 6th-order
   Butterworth low-pass at 35 Hz (50-Hz systems) or 42 Hz (60-Hz systems), and the lamp's
   weighting filter (:data:`LAMPS`)::

       K(s) = k w1 s / (s^2 + 2 lambda s + w1^2) * (1 + s / w2) / ((1 + s / w3)(1 + s / w4))

4. **Squaring and smoothing**: the square of the weighted signal through a first-order
   low-pass of time constant 300 ms (the "sliding mean"), times the constant that makes
   the steady-state maximum 1.0 for the reference fluctuation: a sinusoidal modulation
   at 8.8 Hz of ``dV/V = 0.250 %`` (peak to peak) seen through the 230-V lamp's filter
   (:func:`block4_gain`, computed from the analytic responses).  The output is the
   instantaneous flicker sensation ``Pinst`` (1 = the threshold of perceptibility).
5. **Statistical evaluation** (:func:`pst_from_pinst`): ``Pinst`` classified into
   :data:`CLASSES` logarithmic classes from :data:`CLASS_RANGE`; the cumulative
   probability function gives the levels exceeded for a share of the time, smoothed::

       P1s = (P0.7 + P1 + P1.5) / 3          P3s = (P2.2 + P3 + P4) / 3
       P10s = (P6 + P8 + P10 + P13 + P17) / 5   P50s = (P30 + P50 + P80) / 3
       Pst = sqrt(0.0314 P0.1 + 0.0525 P1s + 0.0657 P3s + 0.28 P10s + 0.08 P50s)

   over each 10-minute interval, and ``Plt = (sum_i Pst_i^3 / 12)^(1/3)`` over 12
   consecutive ones (2 h).

The filters are the analytic (s-domain) ones mapped by the bilinear transform at the
internal rate (at least :data:`MIN_RATE_HZ`; the warp at 35 Hz is below 0.7 %), started in
their steady state for the first sample (the standard's pre-test time to charge the
filters).  Verified against the standard's test points (``tests/interconnect/
test_flicker.py``): Table 5's rectangular fluctuations give Pst = 1 within 5 %.

References
----------
.. [1] IEC 61000-4-15:2010, "Electromagnetic compatibility (EMC) - Part 4-15: Testing and
   measurement techniques - Flickermeter - Functional and design specifications",
   clause 4 (blocks 1-5), Table 1 (8.8 Hz, 0.250 %), Table 5 (classifier test points).
.. [2] IEEE Std 1453-2015, "IEEE Recommended Practice for the Analysis of Fluctuating
   Installations on Power Systems", clause 5 and Annex A (the 120-V lamp's filter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import signal

from .._options import Options, choice
from ..exceptions import AnalysisError
from .resampling import upsample

__all__ = [
    "CLASSES",
    "CLASS_RANGE",
    "LAMPS",
    "MIN_RATE_HZ",
    "FlickerOptions",
    "LampFilter",
    "block4_gain",
    "pinst_from_envelope",
    "pinst_from_waveform",
    "plt_from_pst",
    "pst",
    "pst_from_pinst",
]


@dataclass(frozen=True)
class LampFilter:
    """Constants of a lamp's weighting filter (IEC 61000-4-15:2010 clause 4.4; IEEE 1453
    for the 120-V lamp): gain ``k`` [-] and the corner frequencies [Hz] of
    ``lambda = 2 pi lambda_hz``, ``w_i = 2 pi f_i``."""

    k: float
    lambda_hz: float
    f1_hz: float
    f2_hz: float
    f3_hz: float
    f4_hz: float


#: Weighting filters of the 230-V/60-W and 120-V/60-W reference lamps.
LAMPS = {
    "230V": LampFilter(1.74802, 4.05981, 9.15494, 2.27979, 1.22535, 21.9),
    "120V": LampFilter(1.6357, 4.167375, 9.077169, 2.939902, 1.394468, 17.31512),
}

#: Corner of block 3's 6th-order Butterworth low-pass by system frequency [Hz].
LOWPASS_HZ = {50: 35.0, 60: 42.0}
#: Corner of block 3's first-order high-pass [Hz].
HIGHPASS_HZ = 0.05
#: Time constant of block 4's first-order sliding mean [s].
SLIDING_MEAN_S = 0.3
#: The reference fluctuation of block 4's gain: sinusoidal, 8.8 Hz, dV/V = 0.250 %
#: (peak to peak), 230-V lamp (IEC 61000-4-15:2010 Table 1).
REFERENCE_HZ, REFERENCE_DV_PCT = 8.8, 0.250
#: Classes of the statistical evaluation (logarithmic) and their range [-].
CLASSES = 4096
CLASS_RANGE = (1e-4, 1e4)
#: Lowest internal rate of the chain [Hz].
MIN_RATE_HZ = 800.0
#: Length of a Pst interval [s] and number of Pst intervals in a Plt.
PST_INTERVAL_S = 600.0
PLT_INTERVALS = 12

_PERCENTS = (0.1, 0.7, 1.0, 1.5, 2.2, 3.0, 4.0, 6.0, 8.0, 10.0, 13.0, 17.0, 30.0, 50.0,
             80.0)


@dataclass(frozen=True)
class FlickerOptions(Options):
    """Options of the flickermeter.

    Attributes
    ----------
    lamp : {'230V', '120V'}, default '120V'
        Reference lamp of the weighting filter (North America: 120 V).
    f0_hz : {50, 60}, default 60
        System frequency (block 3's low-pass corner: 35 or 42 Hz) [Hz].
    """

    lamp: str = "120V"
    f0_hz: float = 60.0

    def __post_init__(self):
        choice(self.lamp, "lamp", tuple(LAMPS), error=AnalysisError)
        choice(self.f0_hz, "f0_hz", (50, 60), error=AnalysisError)


def _weighting_ba(lamp: LampFilter) -> tuple[np.ndarray, np.ndarray]:
    """s-domain numerator and denominator of the weighting filter."""
    lam, w1 = 2 * np.pi * lamp.lambda_hz, 2 * np.pi * lamp.f1_hz
    w2, w3, w4 = (2 * np.pi * f for f in (lamp.f2_hz, lamp.f3_hz, lamp.f4_hz))
    b = np.convolve([lamp.k * w1, 0.0], [1.0 / w2, 1.0])
    a = np.convolve([1.0, 2 * lam, w1 * w1], [1.0 / (w3 * w4), 1.0 / w3 + 1.0 / w4, 1.0])
    return b, a


def _analog_gain(f_hz: float, opts: FlickerOptions, lamp: str) -> float:
    """|H(j 2 pi f)| of block 3 (high-pass, Butterworth, weighting) [-]."""
    w = 2 * np.pi * f_hz
    hp = abs(1j * w / (1j * w + 2 * np.pi * HIGHPASS_HZ))
    wc = 2 * np.pi * LOWPASS_HZ[int(opts.f0_hz)]
    _, h_lp = signal.freqs_zpk(*signal.butter(6, wc, analog=True, output="zpk"), worN=[w])
    b, a = _weighting_ba(LAMPS[lamp])
    _, h_w = signal.freqs(b, a, worN=[w])
    return float(hp * abs(h_lp[0]) * abs(h_w[0]))


def block4_gain(options: FlickerOptions | None = None) -> float:
    """Block 4's constant: the steady-state maximum of ``Pinst`` is 1.0 for the reference
    fluctuation (8.8 Hz sinusoidal, dV/V = 0.250 %, 230-V lamp, IEC 61000-4-15 Table 1).

    With ``r(t) = 1 + a sin(w t)``, ``a = dV/V / 2``, block 2 gives ``1 + 2 a sin(w t)``
    (to first order), block 3 ``2 a |H| sin``; its square has mean ``2 a^2 |H|^2`` and a
    ripple at ``2 w`` that the sliding mean passes with gain
    ``rho = 1 / sqrt(1 + (2 w tau)^2)``, so the maximum is ``2 a^2 |H|^2 (1 + rho)``.
    """
    opts = options or FlickerOptions()
    a = REFERENCE_DV_PCT / 100.0 / 2.0
    h = _analog_gain(REFERENCE_HZ, opts, "230V")
    rho = 1.0 / math.sqrt(1.0 + (2 * 2 * np.pi * REFERENCE_HZ * SLIDING_MEAN_S) ** 2)
    return 1.0 / (2 * a * a * h * h * (1.0 + rho))


def _chain_sos(rate_hz: float, opts: FlickerOptions) -> list[np.ndarray]:
    """Block 3 and block 4's sliding mean as second-order sections at ``rate_hz``."""
    hp = signal.butter(1, HIGHPASS_HZ, "highpass", fs=rate_hz, output="sos")
    lp = signal.butter(6, LOWPASS_HZ[int(opts.f0_hz)], fs=rate_hz, output="sos")
    b, a = _weighting_ba(LAMPS[opts.lamp])
    z, p, k = signal.bilinear_zpk(*signal.tf2zpk(b, a), rate_hz)
    wt = signal.zpk2sos(z, p, k)
    sm = signal.butter(1, 1.0 / (2 * np.pi * SLIDING_MEAN_S), fs=rate_hz, output="sos")
    return [hp, lp, wt, sm]


def _filter(sos: np.ndarray, x: np.ndarray, x0: float) -> np.ndarray:
    """``x`` through ``sos``, the filter starting in its steady state for the input
    ``x0``."""
    return signal.sosfilt(sos, x, zi=signal.sosfilt_zi(sos) * x0)[0]


def _blocks_3_4(demod: np.ndarray, rate_hz: float, opts: FlickerOptions,
                start: float) -> np.ndarray:
    hp, lp, wt, sm = _chain_sos(rate_hz, opts)
    y = _filter(hp, demod, start)
    y = _filter(lp, y, 0.0)
    y = _filter(wt, y, 0.0)
    return block4_gain(opts) * _filter(sm, y * y, 0.0)


def _check_rate(x: np.ndarray, rate_hz: float, what: str, min_rate: float) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or len(x) < 2 or not np.isfinite(x).all():
        raise AnalysisError(f"the flickermeter needs a finite 1-D {what} of at least two "
                            "samples")
    if not (math.isfinite(rate_hz) and rate_hz >= min_rate):
        raise AnalysisError(f"the flickermeter needs the {what} at {min_rate:g} Hz or "
                            f"faster, got {rate_hz!r} Hz (use pinst_from_envelope for an "
                            "RMS series)")
    return x


def pinst_from_waveform(u, rate_hz: float, options: FlickerOptions | None = None,
                        **kw) -> np.ndarray:
    """Instantaneous flicker sensation of a voltage waveform (blocks 1-4).

    Parameters
    ----------
    u : array_like
        Instantaneous voltage [V] (any scale: block 1 normalises it).
    rate_hz : float
        Its sampling rate, at least :data:`MIN_RATE_HZ` [Hz].
    options : FlickerOptions, optional
        ``lamp`` and ``f0_hz`` (also as keywords).

    Returns
    -------
    ndarray
        ``Pinst`` at each sample [-].
    """
    opts = FlickerOptions.from_kwargs(options, **kw)
    x = _check_rate(u, rate_hz, "voltage waveform", MIN_RATE_HZ)
    x = x - x.mean()
    rms = math.sqrt(float(np.mean(x * x)))
    if rms <= 0:
        raise AnalysisError("the voltage waveform is zero throughout")
    demod = (x / rms) ** 2
    return _blocks_3_4(demod, rate_hz, opts, float(demod[: max(1, round(rate_hz / opts.f0_hz))]
                                                   .mean()))


def pinst_from_envelope(rms, rate_hz: float, options: FlickerOptions | None = None,
                        **kw) -> tuple[np.ndarray, float]:
    """Instantaneous flicker sensation of an RMS-voltage series (blocks 1-4 without the
    carrier: block 2's ``r(t)^2`` is formed from the relative RMS itself).

    Parameters
    ----------
    rms : array_like
        RMS voltage, or voltage relative to nominal (any scale: divided by its mean) [V
        or pu].
    rate_hz : float
        Its sampling rate [Hz]; a series slower than :data:`MIN_RATE_HZ` is resampled
        band-limited (:func:`~powerlab.interconnect.resampling.upsample`): fluctuations
        above its Nyquist frequency are not seen (a 0.01-s series resolves them up to
        50 Hz, beyond block 3's 35/42-Hz low-pass).
    options : FlickerOptions, optional

    Returns
    -------
    (ndarray, float)
        ``Pinst`` [-] and its rate [Hz].
    """
    opts = FlickerOptions.from_kwargs(options, **kw)
    x = _check_rate(rms, rate_hz, "RMS voltage series", 1e-9)
    m = float(x.mean())
    if m <= 0:
        raise AnalysisError("the RMS voltage series must be positive")
    r, rate = upsample(x / m, rate_hz, MIN_RATE_HZ)
    demod = r * r
    return _blocks_3_4(demod, rate, opts, float(demod[0])), rate


def _levels(pinst: np.ndarray) -> dict[float, float]:
    """Levels exceeded for each of :data:`_PERCENTS` of the time, from the classifier:
    :data:`CLASSES` logarithmic classes over :data:`CLASS_RANGE`, the cumulative
    probability interpolated linearly within a class."""
    lo, hi = CLASS_RANGE
    edges = np.geomspace(lo, hi, CLASSES + 1)
    counts, _ = np.histogram(np.clip(pinst, lo, hi * (1 - 1e-12)), bins=edges)
    # share of the time above each edge (the CPF's complement), from the top
    above = np.concatenate([np.cumsum(counts[::-1])[::-1], [0]]) / max(len(pinst), 1) * 100
    out = {}
    for p in _PERCENTS:
        # first edge whose exceedance share falls to p or below
        j = int(np.argmax(above <= p))
        if j == 0:
            out[p] = lo
            continue
        a0, a1 = above[j - 1], above[j]
        t = (a0 - p) / (a0 - a1) if a0 > a1 else 0.0
        out[p] = float(edges[j - 1] + t * (edges[j] - edges[j - 1]))
    return out


def pst_from_pinst(pinst) -> float:
    """Pst of one interval of ``Pinst`` samples (IEC 61000-4-15:2010 clause 4.7.2, the
    smoothed percentiles; see the module docstring) [-]."""
    x = np.asarray(pinst, dtype=float)
    if x.ndim != 1 or len(x) == 0 or not np.isfinite(x).all():
        raise AnalysisError("Pst needs finite Pinst samples")
    p = _levels(x)
    p1s = (p[0.7] + p[1.0] + p[1.5]) / 3
    p3s = (p[2.2] + p[3.0] + p[4.0]) / 3
    p10s = (p[6.0] + p[8.0] + p[10.0] + p[13.0] + p[17.0]) / 5
    p50s = (p[30.0] + p[50.0] + p[80.0]) / 3
    return math.sqrt(0.0314 * p[0.1] + 0.0525 * p1s + 0.0657 * p3s + 0.28 * p10s
                     + 0.08 * p50s)


def plt_from_pst(pst_values) -> float:
    """Plt, the cubic mean of consecutive Pst values: ``(sum Pst^3 / N)^(1/3)``, ``N``
    = :data:`PLT_INTERVALS` (12, two hours) [-]; fewer values are refused."""
    v = np.asarray(pst_values, dtype=float)
    if len(v) < PLT_INTERVALS or not np.isfinite(v).all():
        raise AnalysisError(f"Plt needs {PLT_INTERVALS} consecutive Pst values (2 h), got "
                            f"{len(v)}")
    v = v[-PLT_INTERVALS:]
    return float(np.cbrt(np.sum(v ** 3) / PLT_INTERVALS))


def pst(pinst, rate_hz: float, *, interval_s: float = PST_INTERVAL_S) -> np.ndarray:
    """Pst of each whole ``interval_s`` (default 10 min) of a ``Pinst`` series [-]; a
    series shorter than one interval is refused (a shorter record gives no Pst)."""
    x = np.asarray(pinst, dtype=float)
    n = round(interval_s * rate_hz)
    if n < 1 or len(x) < n:
        raise AnalysisError(f"Pst needs {interval_s:g} s of Pinst; got "
                            f"{len(x) / rate_hz:.4g} s")
    return np.array([pst_from_pinst(x[i * n:(i + 1) * n]) for i in range(len(x) // n)])
