"""Power-swing metrics: swings, ramps, oscillation spectrum and limit checks.

Functions take a power series sampled every ``tick_s`` seconds (one draw of a forecast or a
measured trace resampled to a regular grid) or a :class:`~powerlab.site.engine.ForecastResult`.

- :func:`largest_swing` - largest max-minus-min within any window of given length;
- :func:`ramp_rates` - largest rise and fall between consecutive samples [W/s];
- :func:`spectrum` - Welch power spectral density (:func:`scipy.signal.welch`);
- :func:`band_rms` - RMS amplitude of the oscillation in a frequency band;
- :func:`swing_metrics` - all of the above in one dict;
- :func:`events_table` - start, stop, checkpoint, eval, failure, restart events;
- :func:`check_limits` - every violation of user-set limits.

Mitigation what-ifs are in :mod:`powerlab.site.mitigations`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import signal
from scipy.ndimage import maximum_filter1d, minimum_filter1d

from ..limits import loadmetrics as lm
from ..limits.evaluation import NOT_ASSESSABLE, PARTIAL, evaluate_power, plan_requirements
from ..limits.ramps import power_series, ramp_of_means
from ..limits.scenario_limits import Limits, limits_spec

__all__ = [
    "BANDS_HZ",
    "GRID_BANDS_HZ",
    "RAMP_WINDOWS",
    "band_rms",
    "check_limits",
    "events_table",
    "largest_swing",
    "psd_band_rms",
    "ramp_rates",
    "resolved_bands",
    "spectrum",
    "swing_metrics",
    "swing_series",
    "window_ramps",
]

#: Oscillation bands utilities ask about [Hz].
BANDS_HZ = {"0p1_2hz": (0.1, 2.0), "2_20hz": (2.0, 20.0)}

#: Grid bands a forecast should resolve (Choukse et al. 2025): sub-synchronous
#: oscillation and the faster band that reaches generator torsional modes [Hz].
GRID_BANDS_HZ = {"0p1_2hz": (0.1, 2.0), "3_30hz": (3.0, 30.0)}

#: Named ramp windows: metric suffix -> (window [s], rate unit [s]).  A ramp over a
#: window is the largest change between adjacent window means (every alignment), per
#: rate unit: ``ramp_up_w_per_s_1s`` in W/s over 1-s means, ``ramp_up_w_per_min_1min`` in
#: W/min over 1-min means (the form interconnection requirements use).
RAMP_WINDOWS = {"w_per_s_100ms": (0.1, 1.0), "w_per_s_1s": (1.0, 1.0),
                "w_per_min_1min": (60.0, 60.0)}


def resolved_bands(tick_s: float) -> dict:
    """Which part of each grid band a tick resolves: name -> (lo, hi or None) [Hz].

    The spectrum of a series sampled every ``tick_s`` ends at its Nyquist frequency
    ``1 / (2 tick_s)``; ``hi`` is the band's upper edge cut there, ``None`` when the band
    starts above it.
    """
    nyq = 0.5 / tick_s
    return {k: (lo, min(hi, nyq) if lo < nyq else None)
            for k, (lo, hi) in GRID_BANDS_HZ.items()}


def window_ramps(power_w, tick_s: float) -> dict:
    """Ramps over the named windows of :data:`RAMP_WINDOWS`: ``ramp_up_<suffix>`` and
    ``ramp_down_<suffix>`` (positive numbers); NaN where the window is not a whole number
    of ticks or the series is shorter than two windows."""
    x = power_series(power_w)
    out = {}
    for suffix, (win, per) in RAMP_WINDOWS.items():
        w = win / tick_s
        ok = abs(w - round(w)) < 1e-6 * max(w, 1.0) and round(w) >= 1 \
            and len(x) >= 2 * round(w)
        for direction in ("up", "down"):
            out[f"ramp_{direction}_{suffix}"] = (
                ramp_of_means(x, tick_s, win, direction) * per if ok else float("nan"))
    return out


def _window_ticks(window_s: float, tick_s: float) -> int:
    return max(2, round(window_s / tick_s) + 1)


def swing_series(power_w, tick_s: float, window_s: float) -> np.ndarray:
    """Max minus min of the window of ``window_s`` seconds starting at each sample [W].

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    window_s : float
        Window length [s]; it spans ``round(window_s / tick_s) + 1`` samples.
    """
    x = power_series(power_w)
    n = min(_window_ticks(window_s, tick_s), len(x))
    origin = -(n // 2)  # window [i, i + n)
    mx = maximum_filter1d(x, n, origin=origin, mode="nearest")
    mn = minimum_filter1d(x, n, origin=origin, mode="nearest")
    return mx - mn


def largest_swing(power_w, tick_s: float, window_s: float) -> float:
    """Largest max-minus-min within any window of ``window_s`` seconds [W].

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    window_s : float
        Window length [s].

    Returns
    -------
    float
        The largest swing [W].
    """
    return float(swing_series(power_w, tick_s, window_s).max())


def ramp_rates(power_w, tick_s: float) -> tuple[float, float]:
    """Largest rise and largest fall rate between consecutive samples [W/s].

    Both are returned as non-negative numbers (a fall of 5 MW/s gives ``5e6``).
    """
    x = power_series(power_w)
    d = np.diff(x) / tick_s
    return float(max(d.max(), 0.0)), float(max(-d.min(), 0.0))


def spectrum(power_w, tick_s: float, segment_s: float = 50.0) -> pd.DataFrame:
    """Welch power spectral density of a power series.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    segment_s : float, default 50
        Welch segment length (frequency resolution about ``1/segment_s``) [s].

    Returns
    -------
    DataFrame
        ``frequency_hz`` and ``psd_w2_per_hz`` [W^2/Hz].

    References
    ----------
    .. [1] P. Welch, "The use of the fast Fourier transform for the estimation of power
       spectra", IEEE Trans. Audio Electroacoustics 15(2), 70-73, 1967.
    """
    x = power_series(power_w)
    nper = int(2 ** np.ceil(np.log2(max(segment_s / tick_s, 8))))
    nper = min(nper, len(x))
    f, p = signal.welch(x, fs=1.0 / tick_s, nperseg=nper, detrend="constant")
    return pd.DataFrame({"frequency_hz": f, "psd_w2_per_hz": p})


def psd_band_rms(frequency_hz, psd_w2_per_hz, band_hz: tuple[float, float]) -> float:
    """RMS amplitude of the oscillation in a band from a power spectral density [W].

    The square root of the density summed over the bins with ``lo <= f < hi`` times the
    bin width (the band's variance); half-open, so adjacent bands sharing an edge never
    count a bin twice.  The one band-RMS rule of powerlab: the forecast's swing metrics
    (:func:`band_rms`) and the interconnection checks' whole-record figure use it.

    Parameters
    ----------
    frequency_hz : array_like
        Evenly spaced bin frequencies [Hz].
    psd_w2_per_hz : array_like
        One-sided power spectral density [W^2/Hz].
    band_hz : (float, float)
        ``(lo, hi)`` [Hz].
    """
    f = np.asarray(frequency_hz, dtype=float)
    p = np.asarray(psd_w2_per_hz, dtype=float)
    if len(f) < 2:
        return 0.0
    m = (f >= band_hz[0]) & (f < band_hz[1])
    return float(np.sqrt(p[m].sum() * (f[1] - f[0])))


def band_rms(spec: pd.DataFrame, f_lo_hz: float, f_hi_hz: float) -> float:
    """RMS amplitude of the oscillation between ``f_lo_hz`` and ``f_hi_hz`` [W], from a
    :func:`spectrum` frame (:func:`psd_band_rms`; the band is cut at the Nyquist frequency
    of the series by the spectrum itself)."""
    return psd_band_rms(spec["frequency_hz"].to_numpy(), spec["psd_w2_per_hz"].to_numpy(),
                        (f_lo_hz, f_hi_hz))


def dominant_frequency(frequency_hz, psd) -> float:
    """Frequency of the strongest spectral line [Hz].

    The line's power is summed over three adjacent bins (a Hann-windowed line spreads over
    about that many, so a line that falls between two bins is not under-rated against
    one that falls on a bin), and its frequency is the power-weighted centroid of those
    bins.  Bins below twice the frequency resolution (the mean and slow drift) are
    ignored.  NaN for a flat spectrum.
    """
    f = np.asarray(frequency_hz, dtype=float)
    p = np.asarray(psd, dtype=float)
    if len(f) < 4:
        return float("nan")
    three = p[:-2] + p[1:-1] + p[2:]          # centred on bins 1 .. n-2
    centre = np.arange(1, len(f) - 1)
    ok = f[centre] >= 2 * (f[1] - f[0])
    if not ok.any() or three[ok].max() <= 0:
        return float("nan")
    k = centre[ok][np.argmax(three[ok])]
    w = p[k - 1:k + 2]
    return float((f[k - 1:k + 2] * w).sum() / w.sum())


def swing_metrics(power_w, tick_s: float) -> dict:
    """All swing metrics of one power series.

    Returns
    -------
    dict
        ``peak_w``, ``min_w``, ``swing_1s_w``, ``swing_10s_w``, ``swing_60s_w`` [W],
        ``ramp_up_w_per_s_tick``, ``ramp_down_w_per_s_tick`` (tick to tick: depends on
        the tick) [W/s], the ramps over named windows of :func:`window_ramps`
        (``ramp_up_w_per_s_1s``, ``ramp_down_w_per_min_1min``, ...), ``dominant_frequency_hz``
        [Hz] (strongest line of the Welch PSD, see :func:`dominant_frequency`),
        ``band_0p1_2hz_rms_w``, ``band_2_20hz_rms_w`` [W] and the matching band
        energies ``band_*_w2`` (variance in the band) [W^2], and
        ``band_3_30hz_rms_w`` (cut at the Nyquist frequency, see :func:`resolved_bands`).
    """
    x = power_series(power_w)
    up, down = ramp_rates(x, tick_s)
    spec = spectrum(x, tick_s)
    f = spec["frequency_hz"].to_numpy()
    p = spec["psd_w2_per_hz"].to_numpy()
    dom = dominant_frequency(f, p)
    out = {
        "peak_w": float(x.max()),
        "min_w": float(x.min()),
        "swing_1s_w": largest_swing(x, tick_s, 1.0),
        "swing_10s_w": largest_swing(x, tick_s, 10.0),
        "swing_60s_w": largest_swing(x, tick_s, 60.0),
        "ramp_up_w_per_s_tick": up,
        "ramp_down_w_per_s_tick": down,
        **window_ramps(x, tick_s),
        "dominant_frequency_hz": dom,
    }
    for name, (lo, hi) in BANDS_HZ.items():
        r = band_rms(spec, lo, hi)
        out[f"band_{name}_rms_w"] = r
        out[f"band_{name}_w2"] = r * r
    out["band_3_30hz_rms_w"] = band_rms(spec, *GRID_BANDS_HZ["3_30hz"])
    return out


def events_table(result, draw: int | None = None) -> pd.DataFrame:
    """The events of a forecast (start, checkpoint, eval, failure, restart, shutdown,
    stop), for one draw or all."""
    ev = result.events
    if draw is not None:
        ev = ev[ev["draw"] == draw].reset_index(drop=True)
    return ev


def _episodes(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) index pairs of the True runs of ``mask``."""
    if not mask.any():
        return []
    m = np.concatenate([[False], mask, [False]]).astype(np.int8)
    d = np.diff(m)
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)))


def _runs(req, x: np.ndarray, tick_s: float, times, end_utc) -> list[tuple]:
    """(start, end, worst in the requirement's unit) of every run over ``req``'s limit,
    from the per-position series of the metric :func:`~powerlab.limits.evaluation.evaluate_power`
    takes the largest of."""
    n = len(x)

    def t_at(i):
        return times[i] if i < n else end_utc

    f = req.unit_factor
    out = []
    if req.kind == "ramp":
        # element i: the ramp across the boundary of tick i + 1 (adjacent window means)
        w = lm.whole_ticks(req.window_s, tick_s)
        rab = lm.ramp_at_boundaries(x, tick_s, req.window_s)
        s = np.zeros(n - 1)
        s[w - 1:w - 1 + len(rab)] = rab
        s = (s if req.direction == "up" else -s) / f
        for a, b in _episodes(s > req.limit):
            out.append((t_at(a), t_at(b + 1), float(s[a:b].max())))
    elif req.kind == "deviation":      # separate_limit: windows from each tick
        s = swing_series(x, tick_s, req.window_s) / f
        for a, b in _episodes(s > req.limit):
            stop = b - 1 + _window_ticks(req.window_s, tick_s)
            out.append((t_at(a), t_at(stop), float(s[a:b].max())))
    elif req.kind == "oscillation":    # cut at the Nyquist frequency, as evaluated
        band = (req.band_hz[0], min(req.band_hz[1], 0.5 / tick_s))
        bw = lm.band_windows(x, tick_s, band, req.window_s, req.measure)
        s = bw.value_w / f
        i0 = np.rint(bw.start_s / tick_s).astype(int)
        wt = lm.whole_ticks(req.window_s, tick_s)
        for a, b in _episodes(s > req.limit):
            out.append((t_at(i0[a]), t_at(i0[b - 1] + wt), float(s[a:b].max())))
    return out


def check_limits(result, limits: Limits | None = None) -> pd.DataFrame:
    """Every violation of the limits, in every draw.

    The limits are read as a requirement spec (:func:`powerlab.limits.scenario_limits.limits_spec`)
    and evaluated by the code that checks a utility's spec
    (:func:`powerlab.limits.evaluation.evaluate_power`, which ``powerlab comply`` runs):
    a limit has rows in a draw exactly when that draw fails it there, and the largest
    ``worst`` of a draw's rows is the draw's value in ``comply``.  This function adds
    where and when: one row per episode.

    Parameters
    ----------
    result : ForecastResult
    limits : Limits, optional
        Default: the scenario's ``limits``.

    Returns
    -------
    DataFrame
        One row per violation episode: ``draw, limit, start_utc, end_utc, worst,
        limit_value, unit``.  Ramps: runs of tick boundaries where the change between
        the adjacent 1-s means around them exceeds the limit; swings: runs of window
        starts whose window swing (max minus min, both ends included) exceeds the limit;
        bands: runs of sliding windows (60 s for 0.1-2 Hz, 6/low edge when longer)
        whose RMS of the band-passed power exceeds the limit.  A limit the forecast
        cannot assess (a tick that does not divide the 1-s ramp window, a horizon shorter
        than a window, a band above the Nyquist frequency of the tick, or the resolved
        part of a band cut by it under the limit) cannot be shown to hold: one row per
        draw over the whole horizon with ``worst`` NaN (``comply``: ``fail``, value NaN).
        Empty when all hold.
    """
    lim = limits if limits is not None else result.scenario.limits
    spec = limits_spec(lim)
    tick = result.tick_s
    times = result.times
    end = times[-1] + pd.Timedelta(seconds=tick)
    rows = []
    if spec.requirements:
        x_all = result.power_w(spec.boundary)
        plan = plan_requirements(spec, tick, tick, x_all.shape[-1] * tick)
    for d in range(result.draws if spec.requirements else 0):
        x = np.asarray(x_all[d], dtype=float)
        values, _ = evaluate_power(spec, x, tick, plan=plan)
        for r in spec.requirements:
            status = plan[r.name][0]
            unit = f"{r.unit} rms" if r.measure == "rms" else r.unit
            v = values[r.name]
            if status == NOT_ASSESSABLE or (status == PARTIAL and not v > r.limit):
                rows.append((d, r.name, times[0], end, float("nan"), r.limit, unit))
            elif v > r.limit:
                rows += [(d, r.name, a, b, w, r.limit, unit)
                         for a, b, w in _runs(r, x, tick, times, end)]
    df = pd.DataFrame(rows, columns=["draw", "limit", "start_utc", "end_utc", "worst",
                                     "limit_value", "unit"])
    df["draw"] = df["draw"].astype(int)
    df["worst"] = df["worst"].astype(float)
    df["limit_value"] = df["limit_value"].astype(float)
    df["limit"] = df["limit"].astype("string")
    df["unit"] = df["unit"].astype("string")
    for c in ("start_utc", "end_utc"):
        df[c] = pd.to_datetime(df[c], utc=True).astype("datetime64[ns, UTC]")
    return df
