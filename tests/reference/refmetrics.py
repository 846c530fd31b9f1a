"""Independent reference implementations of interconnection load metrics.

Written from the sources' definitions only (numpy + scipy), for cross-checking
another implementation on random traces.  Every function takes power sampled
every ``tick_s`` seconds as a 1-D numpy array in watts; sample i is at time
t_i = i * tick_s.

Sources read
------------
[C25] E. Choukse et al., "Power Stabilization for AI Training Datacenters",
      arXiv:2508.14318 (2025), Sec. III "Specifications and Requirements".
[PMU] IEEE C37.118.1-2011 (+a-2014) Annex C reference model (numbered Annex D
      in IEC/IEEE 60255-118-1:2018): eq. C.1/C.2 (phasor = sqrt(2)/G * sum
      x(k) W(k) e^{-j k w0 dt}, G = sum W(k)), P class eq. C.5 (triangle),
      M class eq. C.7 + Table C.1 (Hamming-windowed sinc).

Time convention used throughout: integer sample counts are derived from
durations with ``_n(d) = round(d / tick_s)`` (at least 1 where a window is
needed) so that float noise in d / tick_s never changes a count.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.ndimage import maximum_filter1d, minimum_filter1d

__all__ = [
    "band_edge_guard_s",
    "band_power_gain",
    "band_rms_windows_w",
    "largest_step_w",
    "pmu_filter_taps",
    "pmu_magnitude",
    "ramp_over_means_w_per_s",
    "ride_through_loss_w",
    "short_term_deviation_excess_w",
    "short_term_deviation_ok",
]


# ----------------------------------------------------------------- helpers
def _as_power(power_w) -> np.ndarray:
    p = np.asarray(power_w, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError("power must be a 1-D array")
    return p


def _n(duration_s: float, tick_s: float, minimum: int = 0) -> int:
    """Number of ticks in a duration (rounded to the nearest tick)."""
    if tick_s <= 0:
        raise ValueError("tick_s must be > 0")
    return max(minimum, int(round(float(duration_s) / float(tick_s))))


def _moving_mean(p: np.ndarray, w: int) -> np.ndarray:
    """Means of every full window of w consecutive samples (all alignments):
    out[k] = mean(p[k:k+w]), k = 0 .. len(p)-w.  Computed with a cumulative
    sum of the offset-removed trace (p - p[0]) to keep the rounding error at
    the level of the swing rather than the absolute load."""
    if w < 1 or len(p) < w:
        return np.empty(0)
    base = p[0]
    c = np.concatenate(([0.0], np.cumsum(p - base)))
    return (c[w:] - c[:-w]) / w + base


# ------------------------------------------------------------------- ramp
def ramp_over_means_w_per_s(power_w, tick_s, window_s) -> float:
    """Largest ramp rate measured as the change between ADJACENT window means.

    Source [C25] Sec. III-A.1, time-domain spec:
      "Ramp-Up Rate: The maximum permitted rate of increase in power demand,
       typically expressed in megawatts per second (MW/s)."
      "Ramp-Down Rate: The maximum permitted decrease in power consumption
       over time."
    and: "DatacenterGPUs allow power overshoots at shorter time-scales (50ms)
    ... while still maintaining the TDP at a granularity of 1 second", i.e. the
    quantity a ramp limit is applied to is power averaged over a window.

    Reading implemented: with w = round(window_s/tick_s) samples and
    M[k] = mean(p[k:k+w]) for EVERY alignment k (not only multiples of w),
    result = max_k |M[k+w] - M[k]| / window_s   (window_s as given, in s).
    Both directions (ramp-up and ramp-down) are covered by the absolute value.
    A trace shorter than 2 windows has no pair of adjacent windows -> 0.0.
    A step of S W therefore gives exactly S / window_s.
    """
    p = _as_power(power_w)
    w = _n(window_s, tick_s, 1)
    m = _moving_mean(p, w)
    if len(m) <= w:
        return 0.0
    d = m[w:] - m[:-w]
    return float(np.max(np.abs(d)) / float(window_s))


def largest_step_w(power_w, tick_s, within_s) -> float:
    """Largest change |p(t2) - p(t1)| with 0 < t2 - t1 <= within_s.

    Source [C25] Sec. III-A.1: "The dynamic power range specification is
    particularly relevant for fast-changing workloads. It defines how much
    instantaneous fluctuation in power draw is acceptable, usually over
    sub-second intervals."

    Implementation: K = floor(within_s/tick_s + 1e-9) ticks (a pair of samples
    is counted only if its separation is <= within_s).  Any pair within K
    ticks lies inside some block of K+1 consecutive samples and the max-min of
    a block is attained by a pair inside it, so the answer is
    max over blocks of (max - min) of the block (exact, O(n)).
    K = 0 (within_s < tick_s) -> no admissible pair -> 0.0.
    """
    p = _as_power(power_w)
    k = int(math.floor(float(within_s) / float(tick_s) + 1e-9))
    if k < 1 or len(p) < 2:
        return 0.0
    size = k + 1
    if len(p) <= size:
        return float(np.max(p) - np.min(p))
    # centred filters; restrict to positions whose block lies fully inside
    mx = maximum_filter1d(p, size=size, mode="nearest")
    mn = minimum_filter1d(p, size=size, mode="nearest")
    # with mode='nearest' edge blocks are sub-blocks of full interior blocks
    # (padding repeats the edge sample), so taking all positions is exact.
    return float(np.max(mx - mn))


# ------------------------------------------------- short-term deviation
def short_term_deviation_excess_w(power_w, tick_s, window_s, ramp_limit_w_per_s) -> float:
    """Smallest dynamic-power-range D for which the trace passes (see below):

        E = max over i<j of ( |m_j - m_i| - R * (t_j - t_i) ),   E >= 0,

    where m is the window_s trailing mean evaluated at every sample and
    R = ramp_limit_w_per_s.  Computed exactly in O(n) with running extrema
    of m - R t and m + R t.  short_term_deviation_ok(..., D, ...) is E <= D.
    A caller who reads 'within +-D' as a tube of HALF-width D around a
    ramp-limited centre line should compare E <= 2 D instead.
    """
    p = _as_power(power_w)
    w = _n(window_s, tick_s, 1)
    m = _moving_mean(p, w)
    if len(m) < 2:
        return 0.0
    t = np.arange(len(m), dtype=np.float64) * float(tick_s)
    r = float(ramp_limit_w_per_s)
    a = m - r * t  # rise excess:  a_j - a_i  (i < j)
    b = m + r * t  # fall excess:  b_i - b_j  (i < j)
    rise = np.max(a - np.minimum.accumulate(a))
    fall = np.max(np.maximum.accumulate(b) - b)
    return float(max(0.0, rise, fall))


def short_term_deviation_ok(power_w, tick_s, deviation_w, window_s, ramp_limit_w_per_s) -> bool:
    """Does the trace respect a ramp limit with a dynamic power range?

    Source [C25] Sec. III-A.1:
      "Dynamic Power Range: The allowed short-term deviation in power draw
       before ramp constraints are triggered."
      "It defines how much instantaneous fluctuation in power draw is
       acceptable, usually over sub-second intervals."
      Fig. 4 caption: "PL denotes the device TDP here, and floor denotes MPF.
       Ramp-up and ramp-down times are calculated from the programmed ramp
       rates. Power between MPF and ceiling is allowed as a dynamic power
       range."

    Reading implemented (precise):
      1. The power is first measured as the window_s mean, at every sample
         (trailing mean m_j of samples j..j+w-1, w = round(window_s/tick_s);
         w = 1 gives the raw samples).  Faster wiggles are averaged out.
      2. A change of the measured power by up to deviation_w = D (peak to
         peak: the Fig. 4 band between floor and ceiling has total WIDTH D) is
         free; only the part of a change beyond D must obey the ramp limit R:
              for all i < j:  |m_j - m_i| <= D + R * (t_j - t_i).
      Equivalently (1-D Lipschitz interpolation): there exists a centre line
      c(t) with |dc/dt| <= R such that m(t) stays in [c - D/2, c + D/2]; i.e.
      the allowed band (width D) may itself move no faster than R.
      Returns short_term_deviation_excess_w(...) <= D (+1e-9 relative slack).
    Consequences: a step of S passes iff S <= D; a slow ramp at rate <= R
    always passes; a step of S > D followed by holding fails.
    """
    e = short_term_deviation_excess_w(power_w, tick_s, window_s, ramp_limit_w_per_s)
    d = float(deviation_w)
    return bool(e <= d + 1e-9 * max(1.0, abs(d)))


# ----------------------------------------------------------- band RMS
_BAND_ORDER = 16  # Butterworth order of each edge (applied twice: |H|^2)


def band_power_gain(f_hz, band_hz, order: int = _BAND_ORDER):
    """Power gain of the band-pass used by band_rms_windows_w at f_hz:
    G(f) = |H(f)|^4 where |H|^2 = 1/(1+(f/f_hi)^(2n)) * 1/(1+(f_lo/f)^(2n)),
    i.e. a zero-phase (forward-backward) Butterworth high-pass at f_lo and
    low-pass at f_hi, each of order n.  f_lo <= 0 -> no high-pass; f_hi
    infinite/None -> no low-pass."""
    f = np.abs(np.asarray(f_hz, dtype=np.float64))
    lo, hi = band_hz
    amp2 = np.ones_like(f)
    if hi is not None and np.isfinite(hi):
        amp2 = amp2 / (1.0 + (f / float(hi)) ** (2 * order))
    if lo is not None and lo > 0:
        with np.errstate(divide="ignore", over="ignore"):
            x = np.where(f > 0, float(lo) / np.where(f > 0, f, 1.0), np.inf)
            amp2 = amp2 / (1.0 + x ** (2 * order))
    return amp2 ** 2  # amplitude response |H|^2 applied once == power |H|^4


def band_rms_windows_w(power_w, tick_s, band_hz, window_s, step_s):
    """RMS of the band-limited content in each sliding window.

    Source [C25] Sec. III-A.2, frequency-domain spec: "A critical frequency
    range, e.g., 0.1-20 Hz. A maximum allowed spectral magnitude, e.g. capped
    at 20% of total harmonic energy within that range."  Resonance ranges
    named in Sec. III-B: "<1Hz" (long transmission lines), "1Hz to 2.5Hz"
    (closely coupled sources), "7Hz to >100Hz" (shaft torsional modes).

    Band-pass method: the whole trace is filtered once, zero-phase, in the
    frequency domain with the magnitude of a forward-backward Butterworth
    band-pass of order 16 per edge (power gain band_power_gain()).  Before
    the FFT the least-squares straight line is removed (trend is not
    oscillation; added back only if the band reaches DC) and the residual is
    zero-padded by its own length on both sides (no periodic wrap).  Then
    for each window start k*step (samples), rms = sqrt(mean(y[k:k+w]^2)).
    EDGE RULE (a stated limitation, not avoidable by any filter that is 10 %
    selective): windows closer than band_edge_guard_s(band) = 1/f_lo (or
    10/f_hi if f_lo = 0) to either end of the trace depend on how the trace
    is extended; zero padding was measured best of mirror / point-reflection
    / zero (edge window at 0.9*f_lo: 16 % vs 22-27 %).  Compare implementations
    only on windows at least the guard away from both ends.
    Leakage (steady state): power gain at 1.1*f_hi -> (1/(1+1.1^32))^2 =
    0.20 %; at 0.9*f_lo -> (1/(1+(1/0.9)^32))^2 = 0.08 %; both << 5 %.
    Measured on 10-s windows of 600-s traces, all phases, guarded windows:
    <= 2.1 % (0.1-2 Hz band at 0.09 Hz), <= 0.2 % (3-30 Hz band).  In-band: 1.00 mid-band,
    0.93 at 0.9*f_hi, 0.25 exactly at an edge (-6 dB power).
    Windows: w = round(window_s/tick), step s = max(1, round(step_s/tick)),
    starts 0, s, 2s, ... while start + w <= n; starts_s = start * tick_s.
    """
    p = _as_power(power_w)
    n = len(p)
    w = _n(window_s, tick_s, 1)
    s = _n(step_s, tick_s, 1)
    if n < w or n == 0:
        return np.empty(0), np.empty(0)
    lo, hi = band_hz
    # least-squares line removed first: a trend is not oscillation and, left
    # in, would become a step at the zero-padded ends.  If the band reaches
    # DC (f_lo <= 0) the line is part of the band content and is added back.
    tt = np.arange(n, dtype=np.float64) - 0.5 * (n - 1)
    slope = float(np.dot(tt, p - p.mean()) / np.dot(tt, tt)) if n > 1 else 0.0
    line = p.mean() + slope * tt
    x = p - line
    ext = np.concatenate((np.zeros(n), x, np.zeros(n)))  # zero padding
    N = len(ext)
    nfft = 1 << int(math.ceil(math.log2(N)))
    X = np.fft.rfft(ext, nfft)
    f = np.fft.rfftfreq(nfft, d=float(tick_s))
    g = band_power_gain(f, (lo, hi))
    H = np.sqrt(g)  # amplitude response (real, zero phase)
    y = np.fft.irfft(X * H, nfft)[n:2 * n]
    if not (lo is not None and lo > 0):
        y = y + line
    starts = np.arange(0, n - w + 1, s)
    c = np.concatenate(([0.0], np.cumsum(y * y)))
    ms = (c[starts + w] - c[starts]) / w
    rms = np.sqrt(np.maximum(ms, 0.0))
    return starts.astype(np.float64) * float(tick_s), rms


def band_edge_guard_s(band_hz) -> float:
    """Seconds at each end of a trace within which band_rms_windows_w's
    windows are edge-affected (see its EDGE RULE): 1/f_lo, or 10/f_hi when
    the band has no lower edge."""
    lo, hi = band_hz
    if lo is not None and lo > 0:
        return 1.0 / float(lo)
    if hi is not None and np.isfinite(hi) and hi > 0:
        return 10.0 / float(hi)
    return 0.0


# ----------------------------------------------------------------- PMU
# IEEE C37.118.1 Table C.1 (and 60255-118-1 Table D.1, which adds 100/120):
# M class filter reference frequency Ffr (Hz) and order N (taps = N+1), at the
# reference model's sampling rate.
_M_TABLE = {
    50.0: {10: (1.779, 806), 25: (4.355, 338), 50: (7.75, 142), 100: (14.1, 66)},
    60.0: {10: (1.78, 968), 12: (2.125, 816), 15: (2.64, 662), 20: (3.5, 502),
           30: (5.02, 306), 60: (8.19, 164), 120: (16.25, 70)},
}
# Reference-model sampling rate assumed for the Table's N (an assumption:
# 16 samples/cycle at 60 Hz, 20 samples/cycle at 50 Hz, so the P class order
# N = 2*(Fsamp/f0 - 1) is an integer).  Used only to convert N to seconds.
_REF_FSAMP = {50.0: 1000.0, 60.0: 960.0}


def pmu_filter_taps(tick_s, f0_hz, reporting_rate_hz, klass):
    """Normalised (sum = 1) low-pass taps of the standard's reference filter,
    resampled to the trace's tick, centred (index 0 .. L-1, centre L//2).

    P class, eq. C.5:  W(k) = 1 - 2|k|/(N+2),  k = -N/2..N/2,
        N = 2*(Fsamp/f0 - 1)   ("two-cycle triangular weighting").
      With t = k/Fsamp this is exactly W(t) = 1 - f0*|t| on |t| < 1/f0, a
      triangle spanning 2 nominal cycles, independent of Fsamp; sampled here
      at t = k*tick_s.
    M class, eq. C.7:  W(k) = sin(2*pi*(2*Ffr/Fsamp)*k) / (2*pi*(2*Ffr/Fsamp)*k)
        * h(k),  W(0) = 1,  h = Hamming window of N+1 points,
      Ffr, N from Table C.1 for (f0, Fs).  Here: t = k*tick_s over the same
      time span |t| <= (N/2)/Fsamp, W(t) = sinc(4*Ffr*t) * hamming(t).
    Taps are divided by G = sum W (eq. C.2 gain normalisation); the sqrt(2)
    of eq. C.1 converts peak to RMS of a waveform and is not applied because
    the quantity filtered here is already the power value.
    """
    f0 = float(f0_hz)
    tick = float(tick_s)
    k = str(klass).upper()
    if k == "P":
        half = int(math.floor((1.0 / f0) / tick - 1e-9))
        t = np.arange(-half, half + 1) * tick
        w = 1.0 - f0 * np.abs(t)
    elif k == "M":
        key = 50.0 if abs(f0 - 50.0) < 1e-9 else 60.0 if abs(f0 - 60.0) < 1e-9 else None
        if key is None:
            raise ValueError("M class reference filter defined only for f0 = 50 or 60 Hz")
        fs_key = int(round(float(reporting_rate_hz)))
        if abs(float(reporting_rate_hz) - fs_key) > 1e-9 or fs_key not in _M_TABLE[key]:
            raise ValueError(
                f"M class: reporting rate {reporting_rate_hz} not in Table C.1 for "
                f"{key:g} Hz: {sorted(_M_TABLE[key])}")
        ffr, order = _M_TABLE[key][fs_key]
        span_half_s = (order / 2.0) / _REF_FSAMP[key]
        half = int(math.floor(span_half_s / tick + 1e-9))
        kk = np.arange(-half, half + 1)
        t = kk * tick
        # Hamming window over the continuous span [-span_half_s, span_half_s]
        ham = 0.54 + 0.46 * np.cos(np.pi * t / span_half_s) if span_half_s > 0 else np.ones_like(t)
        w = np.sinc(4.0 * ffr * t) * ham  # np.sinc(x) = sin(pi x)/(pi x)
    else:
        raise ValueError("klass must be 'P' or 'M'")
    w = np.asarray(w, dtype=np.float64)
    return w / np.sum(w)


def pmu_magnitude(power_w, tick_s, f0_hz, reporting_rate_hz, klass):
    """The power signal as a class P/M PMU reporting at Fs would report it.

    Source [PMU] Annex C: the reference phasor is
      X(i) = sqrt(2)/G * sum_k x(i+k) W(k) exp(-j (i+k) dt w0),  G = sum W(k),
    i.e. quadrature demodulation at nominal f0 followed by the class's
    low-pass FIR W, the result being time-tagged at the filter centre
    (group delay N/2 removed) and reported at Fs.  P class: "two-cycle
    triangular" W (eq. C.5); M class: Hamming-windowed sinc with Ffr, N set
    by Fs (eq. C.7, Table C.1).

    Approximation made: the trace is treated as the ENVELOPE (magnitude) of a
    nominal-frequency quantity.  For a slowly modulated nominal-frequency
    signal the demodulated magnitude equals the envelope low-pass filtered by
    W/G (the 2*f0 image is rejected by W: the P triangle has zeros at every
    multiple of f0 and the M sinc cuts at 2*Ffr << 2*f0), so the PMU output
    is modelled as the FIR W/G applied directly to power (DC gain 1, no
    sqrt(2), no P-class off-nominal magnitude compensation, no
    frequency/phase estimation).  W is resampled in continuous time onto the
    trace's tick (pmu_filter_taps); if tick_s >= 1/f0 the P filter is a single
    tap (identity).
    Reports: times m/Fs (m integer >= 0) whose full filter span lies inside
    the trace; each value is the filter centred on the sample nearest m/Fs.
    Returns (times_s, values_w).
    """
    p = _as_power(power_w)
    taps = pmu_filter_taps(tick_s, f0_hz, reporting_rate_hz, klass)
    half = len(taps) // 2
    n = len(p)
    fs = float(reporting_rate_hz)
    if n < len(taps):
        return np.empty(0), np.empty(0)
    t_end = (n - 1) * float(tick_s)
    m_max = int(math.floor(t_end * fs + 1e-9))
    m = np.arange(0, m_max + 1)
    times = m / fs
    idx = np.rint(times / float(tick_s)).astype(np.int64)
    ok = (idx - half >= 0) & (idx + half <= n - 1)
    times, idx = times[ok], idx[ok]
    # correlation with symmetric taps == convolution; 'valid' part indexed by
    # centre: full_valid[c - half] is the filter centred at sample c.
    valid = np.convolve(p, taps[::-1], mode="valid")
    vals = valid[idx - half]
    return times, vals


# ------------------------------------------------------- ride-through
def ride_through_loss_w(power_with_sag_w, power_without_sag_w, tick_s, sag_start_s,
                        sag_duration_s, recovery_window_s=1.0) -> dict:
    """Load lost to a voltage sag, by counterfactual.

    Sources: NERC Incident Review "Considering Simultaneous Voltage-Sensitive
    Load Reductions" (Jan 2025), as summarised in trade press I could reach
    (the NERC PDF itself was not in the corpus): on July 10, 2024 a 230 kV
    line fault with repeated auto-reclosing led to "the sudden loss of
    approximately 1,500 MW of data center load in Virginia"; NERC calls it
    "load loss during normally cleared faults on the BES".  NERC's 2024 LTRA:
    "Sudden and unexpected disconnecting load during a grid fault is
    analogous to well-known [inverter-based resource] performance issues".
    No numeric ERCOT/NERC load ride-through curve was found, so the metric is
    the brief's definition: "the load lost is the draw without the sag minus
    the draw with it, largest during the sag and largest in
    recovery_window_s after it".

    Implementation: loss(t) = without(t) - with(t).  Samples t_i = i*tick:
      during = samples with sag_start <= t_i < sag_start + sag_duration,
      post   = samples with sag_end <= t_i < sag_end + recovery_window_s.
    (Boundaries by index: ceil(t/tick - 1e-9).)  Each result is
    max(0, max loss over its samples); an empty set or a sag that changes
    nothing gives exactly 0.0 (the subtraction of identical floats is 0).
    A load INCREASE is not a loss and is clipped to 0.
    """
    a = _as_power(power_with_sag_w)
    b = _as_power(power_without_sag_w)
    if a.shape != b.shape:
        raise ValueError("traces must have the same length")
    tick = float(tick_s)
    n = len(a)

    def idx(t):
        return min(n, max(0, int(math.ceil(float(t) / tick - 1e-9))))

    s0 = float(sag_start_s)
    s1 = s0 + float(sag_duration_s)
    s2 = s1 + float(recovery_window_s)
    i0, i1, i2 = idx(s0), idx(s1), idx(s2)
    loss = b - a

    def worst(lo, hi):
        if hi <= lo:
            return 0.0
        v = float(np.max(loss[lo:hi]))
        return max(0.0, v)

    return dict(during_w=worst(i0, i1), post_w=worst(i1, i2))


# ---------------------------------------------------------- self-check
def _selfcheck() -> None:
    rng = np.random.default_rng(0)
    tick = 0.001
    n = 60_000
    t = np.arange(n) * tick
    base = 80e6

    # 1. step of S W: ramp over 1-s means = S / 1 s; largest step = S
    S = 5e6
    p = np.full(n, base)
    p[n // 2:] += S
    r = ramp_over_means_w_per_s(p, tick, 1.0)
    assert abs(r - S) < 1e-3, r
    r2 = ramp_over_means_w_per_s(p, tick, 2.0)
    assert abs(r2 - S / 2.0) < 1e-3, r2
    assert abs(largest_step_w(p, tick, 0.001) - S) < 1e-6
    assert largest_step_w(p, tick, 0.0005) == 0.0
    # a linear ramp of rate R: ramp over 1-s means = R
    R = 2e6
    pr = base + R * t
    assert abs(ramp_over_means_w_per_s(pr, tick, 1.0) - R) < 1.0
    assert abs(largest_step_w(pr, tick, 0.5) - R * 0.5) < 1e-3

    # brute-force checks on a short random trace
    q = rng.normal(0, 1e6, 400) + base
    K = 7
    bf = max(abs(q[j] - q[i]) for i in range(len(q)) for j in range(i + 1, min(len(q), i + K + 1)))
    assert abs(largest_step_w(q, 0.01, 0.07) - bf) < 1e-6
    w = 10
    mm = np.array([q[k:k + w].mean() for k in range(len(q) - w + 1)])
    bf = np.max(np.abs(mm[w:] - mm[:-w])) / 0.1
    assert abs(ramp_over_means_w_per_s(q, 0.01, 0.1) - bf) < 1e-3 * bf
    mt = np.arange(len(mm)) * 0.01
    bf = max(0.0, max(abs(mm[j] - mm[i]) - 3e6 * (mt[j] - mt[i])
                      for i in range(len(mm)) for j in range(i + 1, len(mm))))
    assert abs(short_term_deviation_excess_w(q, 0.01, 0.1, 3e6) - bf) < 1e-6 * max(1.0, bf)

    # 2. short-term deviation: step S passes iff S <= D; slow ramp passes
    assert short_term_deviation_ok(p, tick, S, 0.001, 1e3)
    assert not short_term_deviation_ok(p, tick, 0.9 * S, 0.001, 1e3)
    assert short_term_deviation_ok(pr, tick, 0.0, 0.001, R * 1.0001)
    assert not short_term_deviation_ok(pr, tick, 0.1e6, 0.001, 0.5 * R)
    # burst: 1 MW square wave at 2 Hz on top of the base
    burst = base + 1e6 * (np.sin(2 * np.pi * 2.0 * t) > 0)
    assert short_term_deviation_ok(burst, tick, 1e6, 0.001, 1e3)
    assert not short_term_deviation_ok(burst, tick, 0.5e6, 0.001, 1e3)
    # averaged over 0.5 s (= one period) the burst is flat -> passes tight D
    assert short_term_deviation_ok(burst, tick, 1e4, 0.5, 1e3)  # +-1 sample of 500

    # 3. band RMS: sine of amplitude A in band -> A/sqrt(2)
    A = 3e6
    for band, f in (((0.1, 2.0), 0.7), ((3.0, 30.0), 9.0), ((7.0, 100.0), 25.0)):
        x = base + A * np.sin(2 * np.pi * f * t + 0.3)
        st, rms = band_rms_windows_w(x, tick, band, 10.0, 5.0)
        assert len(st) == 11 and st[1] == 5.0
        err = np.abs(rms / (A / np.sqrt(2)) - 1)
        assert np.all(err[1:-1] < 0.005) and np.all(err < 0.03), (band, rms)
        # leakage: a sine 10 % outside each edge puts < 5 % of its power in
        for fo in (band[1] * 1.1, band[0] * 0.9):
            xo = base + A * np.sin(2 * np.pi * fo * t)
            so, ro = band_rms_windows_w(xo, tick, band, 10.0, 5.0)
            g = band_edge_guard_s(band)
            keep = (so >= g) & (so + 10.0 <= t[-1] + tick - g)
            frac = np.max(ro[keep]) ** 2 / (A * A / 2)
            assert frac < 0.05, (band, fo, frac)
    # a burst (2-s packet of 5 Hz) shows up only in the windows covering it
    xb = np.full(n, base)
    sel = (t >= 30.0) & (t < 32.0)
    xb[sel] += A * np.sin(2 * np.pi * 5.0 * t[sel])
    st, rb = band_rms_windows_w(xb, tick, (3.0, 30.0), 2.0, 1.0)
    k30 = int(np.argmin(np.abs(st - 30.0)))
    assert abs(rb[k30] / (A / np.sqrt(2)) - 1) < 0.05, rb[k30]
    assert np.max(rb[np.abs(st - 30.0) > 3.0]) < 0.02 * A

    # 4. PMU: constant in -> constant out; taps normalised; M10 removes 8 Hz
    for kl, fs in (("P", 60), ("M", 10), ("M", 60)):
        tm, v = pmu_magnitude(np.full(n, base), tick, 60.0, fs, kl)
        assert len(tm) > 0 and np.allclose(v, base, rtol=1e-12)
        assert np.all(np.diff(tm) > 0)
    x8 = base + A * np.sin(2 * np.pi * 8.0 * t)
    _, vm = pmu_magnitude(x8, tick, 60.0, 10, "M")
    assert np.max(np.abs(vm - base)) < 0.01 * A
    _, vp = pmu_magnitude(x8, tick, 60.0, 10, "P")
    assert np.max(np.abs(vp - base)) > 0.8 * A  # P passes 8 Hz (gain sinc^2(8/60)=0.94)
    x1 = base + A * np.sin(2 * np.pi * 1.0 * t)
    _, vm1 = pmu_magnitude(x1, tick, 60.0, 10, "M")
    assert np.max(np.abs(vm1 - base)) > 0.95 * A  # M10 passes 1 Hz (< Fs/5)
    # P triangle on a 1 kHz tick: 33 taps, weights 1 - 60|t|
    tp = pmu_filter_taps(tick, 60.0, 60, "P")
    assert len(tp) == 33 and abs(tp[16] / tp[15] - 1 / (1 - 0.06)) < 1e-12
    # P class is a 2-cycle moving triangle: kills 60 Hz and 120 Hz ripple
    x60 = base + A * np.sin(2 * np.pi * 60.0 * t)
    _, v60 = pmu_magnitude(x60, tick, 60.0, 60, "P")
    assert np.max(np.abs(v60 - base)) < 0.02 * A

    # 5. ride-through: identical traces -> exactly 0
    d = ride_through_loss_w(p, p.copy(), tick, 10.0, 0.15, 1.0)
    assert d == {"during_w": 0.0, "post_w": 0.0}, d
    a = p.copy()
    a[10_050:10_100] -= 7e6        # during sag (10.05-10.1 s)
    a[10_500:10_600] -= 3e6        # after the sag (10.5-10.6 s)
    a[20_000:20_010] -= 9e6        # far later: outside recovery window
    d = ride_through_loss_w(a, p, tick, 10.0, 0.15, 1.0)
    assert d == {"during_w": 7e6, "post_w": 3e6}, d
    print("refmetrics self-check: all passed")


if __name__ == "__main__":
    _selfcheck()
