"""Band-limited resampling of a regular series (for the PMU view and the flickermeter).

A series sampled every ``tick_s`` holds its spectrum up to ``0.5 / tick_s``; a faster
model (the PMU's 960-Hz reference estimator, the flickermeter's 800-Hz chain) needs the
same series at its own rate.  Linear interpolation attenuates what lies near the input's
Nyquist frequency (its response is ``sinc(f tick)^2``: a 23-Hz line on a 0.01-s series
reads 16 % low); the polyphase resampler here interpolates with a Kaiser-windowed sinc
(beta 8, 10 input samples either side), flat within 0.1 % to 80 % of the input's Nyquist
frequency.  The ends are padded with their edge values so they do not ring.

References
----------
.. [1] R. E. Crochiere and L. R. Rabiner, *Multirate Digital Signal Processing*,
   Prentice-Hall, 1983, ch. 2 (polyphase interpolation); scipy.signal.resample_poly.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy import signal

__all__ = ["resample_bandlimited", "upsample"]

_PAD = 64


def _ratio(rate_hz: float, target_hz: float) -> tuple[int, int] | None:
    """``(up, down)`` with ``rate * up / down == target`` exactly, small enough to run;
    None when none."""
    fr = Fraction(target_hz / rate_hz).limit_denominator(1000)
    if abs(float(fr) * rate_hz - target_hz) > 1e-9 * target_hz or fr.numerator > 20000:
        return None
    return fr.numerator, fr.denominator


def _fir(up: int, down: int) -> np.ndarray:
    """The interpolation filter: Kaiser-windowed sinc (beta 8, 10 samples of the slower
    rate either side), each polyphase branch scaled to unit gain at 0 Hz so that a
    constant stays exactly constant."""
    m = max(up, down)
    h = signal.firwin(2 * 10 * m + 1, 1.0 / m, window=("kaiser", 8.0))
    for k in range(up):
        h[k::up] /= h[k::up].sum() * up
    return h


def _poly(x: np.ndarray, up: int, down: int) -> np.ndarray:
    pad = min(len(x), _PAD)
    padded = np.concatenate([np.full(pad, x[0]), x, np.full(pad, x[-1])])
    y = signal.resample_poly(padded, up, down, window=_fir(up, down))
    cut = pad * up // down
    return y[cut:cut + len(x) * up // down]


def upsample(x, rate_hz: float, target_hz: float) -> tuple[np.ndarray, float]:
    """``x`` at ``rate_hz`` resampled band-limited to a rate of at least ``target_hz``
    (unchanged when already as fast); returns the series and its rate [Hz].  Sample
    ``i`` of the result is at ``i / rate`` from the first input sample."""
    x = np.asarray(x, dtype=float)
    if rate_hz >= target_hz:
        return x, float(rate_hz)
    r = _ratio(rate_hz, target_hz)
    up, down = r if r is not None and r[1] <= 50 else (math.ceil(target_hz / rate_hz), 1)
    return _poly(x, up, down), rate_hz * up / down


def resample_bandlimited(x, rate_hz: float, target_hz: float) -> np.ndarray:
    """``x`` at ``rate_hz`` resampled band-limited to exactly ``target_hz``: sample ``i``
    at ``i / target_hz`` from the first input sample, up to the last input sample's time.
    A ratio with no small fraction goes through the nearest integer upsampling at or
    above ``8 target_hz`` and then linear interpolation (its error there below 1e-4 of
    what the input holds up to its Nyquist frequency)."""
    x = np.asarray(x, dtype=float)
    n_out = math.floor((len(x) - 1) / rate_hz * target_hz + 1e-9) + 1
    if abs(rate_hz - target_hz) <= 1e-12 * target_hz:
        return x[:n_out].copy()
    r = _ratio(rate_hz, target_hz)
    if r is not None:
        y = _poly(x, *r)
        return np.concatenate([y, np.full(max(0, n_out - len(y)), x[-1])])[:n_out]
    up = max(1, math.ceil(8 * target_hz / rate_hz))
    y = _poly(x, up, 1)
    t_in = np.arange(len(y)) / (rate_hz * up)
    return np.interp(np.arange(n_out) / target_hz, t_in, y)
