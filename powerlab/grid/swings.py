"""Power-swing metrics: swings, ramps, oscillation spectrum, limits and mitigation costs.

Functions take a power series sampled every ``tick_s`` seconds (one draw of a forecast or a
measured trace resampled to a regular grid) or a :class:`~powerlab.grid.forecast.ForecastResult`.

- :func:`largest_swing` - largest max-minus-min within any window of given length;
- :func:`ramp_rates` - largest rise and fall between consecutive samples [W/s];
- :func:`spectrum` - Welch power spectral density (:func:`scipy.signal.welch`);
- :func:`band_rms` - RMS amplitude of the oscillation in a frequency band;
- :func:`swing_metrics` - all of the above in one dict;
- :func:`events_table` - start, stop, checkpoint, eval, failure, restart events;
- :func:`check_limits` - every violation of user-set limits;
- :func:`compare_mitigations` - what-ifs: swing and ramp reduction and their cost.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy import signal
from scipy.ndimage import maximum_filter1d, minimum_filter1d

from ..exceptions import PowerlabError
from .scenario import Limits, Mitigations, Scenario

__all__ = [
    "BANDS_HZ",
    "band_rms",
    "check_limits",
    "compare_mitigations",
    "events_table",
    "largest_swing",
    "ramp_rates",
    "spectrum",
    "swing_metrics",
    "swing_series",
]

#: Oscillation bands utilities ask about [Hz].
BANDS_HZ = {"0p1_2hz": (0.1, 2.0), "2_20hz": (2.0, 20.0)}


def _arr(power_w) -> np.ndarray:
    x = np.asarray(power_w, dtype=float)
    if x.ndim != 1 or len(x) < 2:
        raise PowerlabError("expected a 1-D power series of at least two samples")
    if not np.isfinite(x).all():
        raise PowerlabError("the power series contains NaN or infinite values")
    return x


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
    x = _arr(power_w)
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
    x = _arr(power_w)
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
    x = _arr(power_w)
    nper = int(2 ** np.ceil(np.log2(max(segment_s / tick_s, 8))))
    nper = min(nper, len(x))
    f, p = signal.welch(x, fs=1.0 / tick_s, nperseg=nper, detrend="constant")
    return pd.DataFrame({"frequency_hz": f, "psd_w2_per_hz": p})


def band_rms(spec: pd.DataFrame, f_lo_hz: float, f_hi_hz: float) -> float:
    """RMS amplitude of the oscillation between ``f_lo_hz`` and ``f_hi_hz`` [W].

    The square root of the PSD integrated over the band (its variance); the band is cut
    at the Nyquist frequency of the series.
    """
    f = spec["frequency_hz"].to_numpy()
    p = spec["psd_w2_per_hz"].to_numpy()
    if len(f) < 2:
        return 0.0
    df = f[1] - f[0]
    m = (f >= f_lo_hz) & (f < f_hi_hz)
    return float(np.sqrt(p[m].sum() * df))


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
        ``ramp_up_w_per_s``, ``ramp_down_w_per_s`` [W/s], ``dominant_frequency_hz``
        [Hz] (strongest line of the Welch PSD, see :func:`dominant_frequency`),
        ``band_0p1_2hz_rms_w``, ``band_2_20hz_rms_w`` [W] and the matching band
        energies ``band_*_w2`` (variance in the band) [W^2].
    """
    x = _arr(power_w)
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
        "ramp_up_w_per_s": up,
        "ramp_down_w_per_s": down,
        "dominant_frequency_hz": dom,
    }
    for name, (lo, hi) in BANDS_HZ.items():
        r = band_rms(spec, lo, hi)
        out[f"band_{name}_rms_w"] = r
        out[f"band_{name}_w2"] = r * r
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


def check_limits(result, limits: Limits | None = None) -> pd.DataFrame:
    """Every violation of the limits, in every draw.

    Parameters
    ----------
    result : ForecastResult
    limits : Limits, optional
        Default: the scenario's ``limits``.

    Returns
    -------
    DataFrame
        One row per violation episode: ``draw, limit, start_utc, end_utc, worst,
        limit_value, unit``.  Ramps: consecutive ticks whose rise (fall) rate exceeds
        the limit; swings: runs of window starts whose window swing exceeds the limit;
        bands: one row per draw whose band RMS exceeds the limit.  Empty when all hold.
    """
    lim = limits if limits is not None else result.scenario.limits
    x_all = result.power_w(lim.scope)
    tick = result.tick_s
    times = result.times
    end = times[-1] + pd.Timedelta(seconds=tick)
    rows = []

    def t_at(i):
        return times[i] if i < len(times) else end

    for d in range(result.draws):
        x = x_all[d]
        dx = np.diff(x) / tick
        for name, val, sign in (("ramp_up", lim.ramp_up_megawatts_per_s, 1.0),
                                ("ramp_down", lim.ramp_down_megawatts_per_s, -1.0)):
            if val > 0:
                s = sign * dx / 1e6
                for a, b in _episodes(s > val):
                    rows.append((d, name, t_at(a), t_at(b + 1), float(s[a:b].max()), val,
                                 "MW/s"))
        for w in (1, 10, 60):
            val = getattr(lim, f"swing_{w}s_megawatts")
            if val > 0:
                s = swing_series(x, tick, w) / 1e6
                for a, b in _episodes(s > val):
                    stop = b - 1 + _window_ticks(w, tick)
                    rows.append((d, f"swing_{w}s", t_at(a), t_at(min(stop, len(x))),
                                 float(s[a:b].max()), val, "MW"))
        bands = {k: getattr(lim, f"band_{k}_megawatts") for k in BANDS_HZ}
        if any(v > 0 for v in bands.values()):
            spec = spectrum(x, tick)
            for k, val in bands.items():
                if val > 0:
                    r = band_rms(spec, *BANDS_HZ[k]) / 1e6
                    if r > val:
                        rows.append((d, f"band_{k}", times[0], end, r, val, "MW rms"))
    df = pd.DataFrame(rows, columns=["draw", "limit", "start_utc", "end_utc", "worst",
                                     "limit_value", "unit"])
    df["limit"] = df["limit"].astype("string")
    df["unit"] = df["unit"].astype("string")
    for c in ("start_utc", "end_utc"):
        df[c] = pd.to_datetime(df[c], utc=True).astype("datetime64[ns, UTC]")
    return df


def _default_variants(m: Mitigations) -> dict[str, Mitigations]:
    out = {}
    if m.gpu_power_floor_pct_tdp:
        out["power floor"] = Mitigations(gpu_power_floor_pct_tdp=m.gpu_power_floor_pct_tdp)
    if m.gpu_ramp_limit_w_per_s:
        out["ramp limit"] = Mitigations(gpu_ramp_limit_w_per_s=m.gpu_ramp_limit_w_per_s)
    if m.stagger_starts_s:
        out["staggered starts"] = Mitigations(stagger_starts_s=m.stagger_starts_s)
    if m.battery is not None:
        out["battery"] = Mitigations(battery=m.battery)
    if len(out) > 1:
        out["all"] = m
    return out


def compare_mitigations(scenario: Scenario, variants: Mapping[str, Mitigations] | None = None,
                        *, draws: int = 5, seed: int = 0, scope: str = "facility",
                        tick_s: float | None = None) -> pd.DataFrame:
    """Mitigation what-ifs: how much swing and ramp each removes and what it costs.

    Every variant is forecast with the same seed and over the same horizon as the
    unmitigated baseline (the widest horizon of the variants).

    Parameters
    ----------
    scenario : Scenario
    variants : mapping of str to Mitigations, optional
        Default: each mitigation of ``scenario.mitigations`` alone, then all together.
    draws, seed : int
        Monte Carlo draws and seed of every forecast.
    scope : {'facility', 'it'}
    tick_s : float, optional
        Engine tick [s].

    Returns
    -------
    DataFrame
        Indexed by variant (``baseline`` first): median over draws of
        ``swing_1s_megawatts``, ``swing_60s_megawatts``, ``ramp_up_megawatts_per_s``,
        ``ramp_down_megawatts_per_s``, ``band_0p1_2hz_rms_megawatts``, their reductions
        in % of the baseline (``*_reduction_pct``), and the costs:
        ``extra_energy_megawatt_hours`` (mean over draws, scope energy minus baseline;
        for a battery, including the grid energy that restores its initial state of
        charge, so its losses count) and ``throughput_loss_pct`` (useful GPU-hours lost
        against the baseline, mean over draws).
    """
    from .forecast import forecast

    if variants is None:
        variants = _default_variants(scenario.mitigations)
        if not variants:
            raise PowerlabError("the scenario has no mitigations; pass variants=")
    runs = {"baseline": scenario.replace(mitigations=Mitigations())}
    for name, m in variants.items():
        if not isinstance(m, Mitigations):
            raise PowerlabError(f"variant {name!r} is not a Mitigations")
        runs[name] = scenario.replace(mitigations=m)
    # one horizon for all: without an explicit horizon, staggering lengthens it, and the
    # energy of the extra idle tail would otherwise be billed to the mitigation
    h0 = min(sc.start_utc for sc in runs.values())
    h1 = max(sc.end_utc for sc in runs.values())
    runs = {k: sc.replace(horizon_start_utc=h0, horizon_end_utc=h1) for k, sc in runs.items()}
    rows = {}
    for name, sc in runs.items():
        res = forecast(sc, draws=draws, seed=seed, tick_s=tick_s)
        x = res.power_w(scope)
        ms = pd.DataFrame([swing_metrics(x[d], res.tick_s) for d in range(draws)])
        useful = res.throughput.groupby("draw")["useful_gpu_h"].sum().to_numpy()
        rows[name] = {
            "swing_1s_megawatts": ms["swing_1s_w"].median() / 1e6,
            "swing_60s_megawatts": ms["swing_60s_w"].median() / 1e6,
            "ramp_up_megawatts_per_s": ms["ramp_up_w_per_s"].median() / 1e6,
            "ramp_down_megawatts_per_s": ms["ramp_down_w_per_s"].median() / 1e6,
            "band_0p1_2hz_rms_megawatts": ms["band_0p1_2hz_rms_w"].median() / 1e6,
            "_energy": res.energy_j(scope) + (res.battery_recharge_j if scope == "facility"
                                              else 0.0),
            "_useful": useful,
        }
    base = rows["baseline"]
    out = []
    for name, r in rows.items():
        row = {"variant": name}
        for k in ("swing_1s_megawatts", "swing_60s_megawatts", "ramp_up_megawatts_per_s",
                  "ramp_down_megawatts_per_s", "band_0p1_2hz_rms_megawatts"):
            row[k] = r[k]
            row[k.rsplit("_megawatts", 1)[0] + "_reduction_pct"] = (
                100.0 * (1 - r[k] / base[k]) if base[k] > 0 else 0.0)
        row["extra_energy_megawatt_hours"] = float(np.mean(r["_energy"] - base["_energy"])
                                                   / 3.6e9)
        row["throughput_loss_pct"] = float(np.mean(
            100.0 * (base["_useful"] - r["_useful"]) / base["_useful"]))
        out.append(row)
    return pd.DataFrame(out).set_index("variant")
