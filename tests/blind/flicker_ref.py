"""Independent reference flickermeter after IEC 61000-4-15 (blocks 1-5).

Written for scoring only, without reading powerlab's flicker code. Sources:

* IEC 61000-4-15:2010 (ed. 2) block diagram, as described by the standard's
  abstract and by instrument manuals that reproduce its constants: HIOKI 3196
  manual sec. 6.6 "Flicker" (weighting-filter constants k, lambda, omega1..4 for
  the 230 V and 120 V lamps; smoothing of the percentiles; Pst and Plt
  formulas), https://www.easymanua.ls/hioki/3196/manual?p=111 and HIOKI PQ3198
  appendix A17.
* NI LabVIEW Electrical Power Toolkit, "Measuring Flickers" (the demodulator:
  squared voltage v^2 = 2 V^2 m(t) + V^2 m(t)^2 after the low-pass removes the
  double-frequency term), https://www.ni.com/docs/en-US/bundle/labview-electrical-power-toolkit/page/measuring-flickers.html
* The normalisation point (Table 1/1a: sinusoidal 8.8 Hz fluctuation of
  dV/V = 0.250 % for the 230 V lamp and 0.321 % for the 120 V lamp gives a
  maximum Pinst of 1.0) as tabulated in M. Sira's verification script
  qwtb/qwtb ``qwtb/alg_flicker_sim/verify_flicker_sim.m`` (test tables only).

Chain
-----
1. Input adaptor: the voltage is normalised to its own slowly varying RMS (first
   order, ``agc_tau_s`` = 60 s, the standard's 1-min time constant; ``None``
   uses the mean over the whole record).
2. Squaring demodulator: u = (v / V_rms)^2 for a waveform; for an RMS or
   relative series u = (V / V_ref)^2 directly (the demodulated envelope).
3. Band-pass: first-order high-pass 0.05 Hz and 6th-order Butterworth low-pass
   35 Hz (42 Hz on 60 Hz mains); then the lamp-eye weighting filter

       K(s) = k w1 s / (s^2 + 2 lam s + w1^2) * (1 + s/w2) / ((1 + s/w3)(1 + s/w4))

   230 V lamp: k=1.74802, lam=2pi 4.05981, w1=2pi 9.15494, w2=2pi 2.27979,
   w3=2pi 1.22535, w4=2pi 21.9.  120 V lamp: k=1.6357, lam=2pi 4.167375,
   w1=2pi 9.077169, w2=2pi 2.939902, w3=2pi 1.394468, w4=2pi 17.31512.
4. Squaring and first-order sliding mean, time constant 300 ms, scaled so that
   the reference sinusoid above gives max Pinst = 1 (gain computed from the
   digital filters' own response at 8.8 Hz, so it is exact at any rate).
5. Statistics over 10 min: exact empirical percentiles (no classifier), P50s =
   mean(P30, P50, P80), P10s = mean(P6, P8, P10, P13, P17), P3s = mean(P2.2,
   P3, P4), P1s = mean(P0.7, P1, P1.5), P0.1 unsmoothed, and
   Pst = sqrt(0.0314 P0.1 + 0.0525 P1s + 0.0657 P3s + 0.28 P10s + 0.08 P50s);
   Plt = (sum Pst^3 / N)^(1/3), N = 12.

"Px" is the Pinst level exceeded x % of the time, i.e. the (100 - x)th
percentile.

Input kinds (``kind``):

* ``"waveform"``: instantaneous voltage samples (fs well above 2 f_mains, e.g.
  >= 1.6 kHz; 2-20 kHz typical);
* ``"rms"``: an RMS-voltage series in any unit (volts or per unit);
* ``"relative"``: a relative fluctuation series dV/V around 0 (0.01 = +1 %);
* ``"auto"`` (default): waveform if the signal changes sign at a rate near
  2 f_mains, relative if its mean is near 0, otherwise rms.

RMS/relative series slower than 400 Hz are held (zero-order hold) up to >= 400
Hz before filtering, so a 10 Hz series of half-cycle RMS values can be used.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import signal

__all__ = [
    "WEIGHTING",
    "instantaneous_flicker",
    "pst",
    "pst_series",
    "plt",
    "pst_from_pinst",
    "percentiles",
]

# Lamp weighting constants (frequencies in Hz, multiplied by 2 pi at use).
WEIGHTING = {
    230: dict(k=1.74802, lam=4.05981, f1=9.15494, f2=2.27979, f3=1.22535, f4=21.9),
    120: dict(k=1.6357, lam=4.167375, f1=9.077169, f2=2.939902, f3=1.394468, f4=17.31512),
}
# Table 1 / 1a-1b reference point: 8.8 Hz sinusoidal dV/V (peak-to-peak, %).
REFERENCE_DVV_PCT = {230: 0.250, 120: 0.321}
REFERENCE_F_HZ = 8.8
SMOOTH_TAU_S = 0.3
HP_HZ = 0.05
LP_HZ = 35.0
LP_HZ_60 = 42.0
MIN_PROC_FS = 400.0

PST_WEIGHTS = {"P0.1": 0.0314, "P1s": 0.0525, "P3s": 0.0657, "P10s": 0.28, "P50s": 0.08}
_SMOOTH = {
    "P1s": (0.7, 1.0, 1.5),
    "P3s": (2.2, 3.0, 4.0),
    "P10s": (6.0, 8.0, 10.0, 13.0, 17.0),
    "P50s": (30.0, 50.0, 80.0),
}


def _lamp(lamp_v):
    key = 230 if float(lamp_v) > 175 else 120
    return key, WEIGHTING[key]


def _weighting_sos(lamp_v, fs):
    _, c = _lamp(lamp_v)
    tp = 2 * math.pi
    k, lam, w1, w2, w3, w4 = c["k"], tp * c["lam"], tp * c["f1"], tp * c["f2"], tp * c["f3"], tp * c["f4"]
    # zeros: s = 0, s = -w2 ; poles: roots of s^2 + 2 lam s + w1^2, -w3, -w4
    # K(s) = k w1 w3 w4 / w2 * s (s + w2) / ((s^2 + 2 lam s + w1^2)(s + w3)(s + w4))
    zeros = np.array([0.0, -w2])
    poles = np.concatenate([np.roots([1.0, 2 * lam, w1 * w1]), [-w3, -w4]])
    gain = k * w1 * w3 * w4 / w2
    z, p, g = signal.bilinear_zpk(zeros, poles, gain, fs)
    return signal.zpk2sos(z, p, g)


def _bandpass_sos(fs, lp_hz=LP_HZ, hp_hz=HP_HZ):
    hp = signal.butter(1, hp_hz, btype="highpass", fs=fs, output="sos")
    lp_hz = min(lp_hz, 0.45 * fs)
    lp = signal.butter(6, lp_hz, btype="lowpass", fs=fs, output="sos")
    return hp, lp


def _smooth(x, fs, tau=SMOOTH_TAU_S):
    a = 1.0 - math.exp(-1.0 / (fs * tau))
    return signal.lfilter([a], [1.0, -(1.0 - a)], x)


def _gain(lamp_v, fs, lp_hz=LP_HZ):
    """Block 4 scale: reference sinusoid -> max Pinst = 1 (steady state)."""
    key, _ = _lamp(lamp_v)
    d = REFERENCE_DVV_PCT[key] / 100.0  # peak-to-peak relative change
    hp, lp = _bandpass_sos(fs, lp_hz)
    w = _weighting_sos(lamp_v, fs)
    f = REFERENCE_F_HZ
    h = 1.0
    for sos in (hp, lp, w):
        h *= abs(signal.sosfreqz(sos, worN=[f], fs=fs)[1][0])
    # envelope (1 + (d/2) sin)^2 -> demodulated amplitude d at f
    amp = d * h
    mean_sq = amp * amp / 2.0
    # ripple at 2f through the exponential smoother (exact digital response)
    a = 1.0 - math.exp(-1.0 / (fs * SMOOTH_TAU_S))
    hs = abs(signal.freqz([a], [1.0, -(1.0 - a)], worN=[2 * f], fs=fs)[1][0])
    return 1.0 / (mean_sq * (1.0 + hs))


def _detect_kind(v, fs, f_mains):
    x = np.asarray(v, dtype=float)
    if x.size < 4:
        return "rms"
    m = np.mean(x)
    peak = np.max(np.abs(x))
    if peak > 0 and abs(m) < 0.2 * peak and fs >= 8 * f_mains:
        crossings = np.count_nonzero(np.diff(np.signbit(x - m)))
        rate = crossings / (x.size / fs)
        if 1.5 * f_mains <= rate <= 2.5 * f_mains:
            return "waveform"
    if abs(m) < 0.5:
        return "relative"
    return "rms"


def _normalise(x, fs, agc_tau_s):
    """x: non-negative series (V^2 or V). Returns x / its slow mean."""
    if agc_tau_s is None:
        return x / np.mean(x)
    a = 1.0 - math.exp(-1.0 / (fs * agc_tau_s))
    n0 = max(1, int(round(fs)))  # initialise with the first second's mean
    zi = np.array([(1.0 - a) * np.mean(x[:n0])])
    ref = signal.lfilter([a], [1.0, -(1.0 - a)], x, zi=zi)[0]
    return x / ref


def _demodulated(v, fs, f_mains, kind, agc_tau_s, lp_hz):
    """Blocks 1-2 and the 35 Hz low-pass; returns (u, fs_proc)."""
    x = np.asarray(v, dtype=float)
    if kind == "auto":
        kind = _detect_kind(x, fs, f_mains)
    if kind == "waveform":
        if fs < 8 * f_mains:
            raise ValueError("waveform input needs fs >= 8 f_mains")
        sq = x * x
        # the mean square over whole cycles is the RMS^2 used by the adaptor;
        # normalise with the slow AGC (ripple at 2 f_mains averages out).
        u = _normalise(sq, fs, agc_tau_s)
        _, lp = _bandpass_sos(fs, lp_hz)
        u = signal.sosfilt(lp, u, zi=signal.sosfilt_zi(lp))[0]
        # decimate to ~1 kHz: the 6th-order 35 Hz low-pass is the anti-alias
        q = max(1, int(fs // 1000))
        return u[::q], fs / q, True
    if kind == "relative":
        x = 1.0 + x
    elif kind != "rms":
        raise ValueError(f"unknown kind {kind!r}")
    if np.any(x <= 0):
        raise ValueError("rms series must be positive")
    rep = 1
    if fs < MIN_PROC_FS:
        rep = int(math.ceil(MIN_PROC_FS / fs))
        x = np.repeat(x, rep)
    fsp = fs * rep
    u = _normalise(x, fsp, agc_tau_s) ** 2
    return u, fsp, False


def instantaneous_flicker(v, fs, f_mains=50, lamp_v=230, *, kind="auto", agc_tau_s=60.0,
                          lp_hz=None, return_fs=False):
    """Instantaneous flicker sensation Pinst (output of block 4).

    Parameters
    ----------
    v : array_like
        Voltage waveform [V], RMS series [V or pu] or relative deviation [-].
    fs : float
        Sample rate of ``v`` [Hz].
    f_mains : float
        Nominal mains frequency, 50 or 60 [Hz].
    lamp_v : float
        Reference lamp, 230 or 120 [V].
    kind : {"auto", "waveform", "rms", "relative"}
    agc_tau_s : float or None
        Time constant of the input adaptor [s]; None: whole-record mean.
    lp_hz : float or None
        Corner of the 6th-order Butterworth low-pass [Hz]; None: 35 Hz on 50 Hz
        mains, 42 Hz on 60 Hz mains (the 42 Hz corner is what reproduces the
        standard's 4800 cpm / 40 Hz rows for 60 Hz systems: with 35 Hz they give
        Pst 0.55 instead of 1).
    return_fs : bool
        Also return the rate of the returned series [Hz].

    Returns
    -------
    pinst : numpy.ndarray
        Pinst [perceptibility units], at the processing rate (waveforms are
        decimated to about 1 kHz; slow series are held up to >= 400 Hz).
    """
    if lp_hz is None:
        lp_hz = LP_HZ if float(f_mains) < 55 else LP_HZ_60
    u, fsp, lp_done = _demodulated(v, float(fs), float(f_mains), kind, agc_tau_s, lp_hz)
    hp, lp = _bandpass_sos(fsp, lp_hz)
    u = u - u[0]  # start filters from rest at the initial level
    if not lp_done:
        u = signal.sosfilt(lp, u)
    u = signal.sosfilt(hp, u)
    y = signal.sosfilt(_weighting_sos(lamp_v, fsp), u)
    pinst = _gain(lamp_v, fsp, lp_hz) * _smooth(y * y, fsp)
    return (pinst, fsp) if return_fs else pinst


def percentiles(pinst):
    """Block 5 levels: P0.1, P1s, P3s, P10s, P50s (and the raw ones) [pu]."""
    p = np.asarray(pinst, dtype=float)
    levels = sorted({0.1, *[x for t in _SMOOTH.values() for x in t]})
    raw = {x: float(np.percentile(p, 100.0 - x)) for x in levels}
    out = {"P0.1": raw[0.1]}
    for name, xs in _SMOOTH.items():
        out[name] = float(np.mean([raw[x] for x in xs]))
    out["raw"] = raw
    return out


def pst_from_pinst(pinst):
    """Pst from one observation interval of Pinst [-]."""
    p = percentiles(pinst)
    return math.sqrt(sum(w * p[k] for k, w in PST_WEIGHTS.items()))


def pst_series(v, fs, f_mains=50, lamp_v=230, *, interval_s=600.0, settle_s=20.0, **kw):
    """Pst for each complete ``interval_s`` window after ``settle_s`` [-]."""
    pinst, fsp = instantaneous_flicker(v, fs, f_mains, lamp_v, return_fs=True, **kw)
    start = int(round(settle_s * fsp))
    n = int(round(interval_s * fsp))
    p = pinst[start:]
    k = p.size // n
    return np.array([pst_from_pinst(p[i * n:(i + 1) * n]) for i in range(k)])


def pst(v, fs, f_mains=50, lamp_v=230, *, interval_s=600.0, settle_s=20.0, **kw):
    """Short-term flicker severity of the last ``interval_s`` of the record [-].

    The first ``settle_s`` seconds (filter start-up) are never used; if the
    record is shorter than ``settle_s + interval_s`` everything after the
    settling time is used, with a warning.
    """
    pinst, fsp = instantaneous_flicker(v, fs, f_mains, lamp_v, return_fs=True, **kw)
    start = int(round(settle_s * fsp))
    n = int(round(interval_s * fsp))
    p = pinst[start:]
    if p.size < n:
        warnings.warn(f"record shorter than settle_s + interval_s; Pst over {p.size / fsp:.0f} s",
                      stacklevel=2)
    else:
        p = p[-n:]
    return pst_from_pinst(p)


def plt(pst_values, n=12):
    """Long-term flicker severity: cube root of the mean of Pst^3 [-].

    Uses the last ``n`` (12 = 2 h) values; fewer if fewer are given.
    """
    x = np.asarray(pst_values, dtype=float)
    x = x[~np.isnan(x)][-n:]
    if x.size == 0:
        return float("nan")
    return float(np.cbrt(np.sum(x ** 3) / x.size))


def rectangular_test_signal(cpm, dvv_pct, fs, duration_s, f_mains=50, v_rms=230.0, kind="waveform"):
    """Test signal: rectangular modulation, ``cpm`` changes/min, dV/V peak-to-peak [%].

    Two changes make one period, so the modulation frequency is cpm / 120 Hz.
    """
    t = np.arange(int(round(duration_s * fs))) / fs
    fm = cpm / 120.0
    sq = np.where(np.sin(2 * np.pi * fm * t) >= 0, 1.0, -1.0)
    env = 1.0 + (dvv_pct / 100.0) / 2.0 * sq
    if kind == "waveform":
        return v_rms * math.sqrt(2) * env * np.sin(2 * np.pi * f_mains * t)
    if kind == "rms":
        return v_rms * env
    return env - 1.0
