"""Reduce each forecast draw as it is computed (``forecast(..., keep_ticks=False)``).

A forecast that keeps every draw's per-tick power holds ``draws x ticks`` numbers (7 days
at 100 ms, 20 draws: 121 million per scope).  With ``keep_ticks=False`` the engine hands
each draw's IT power to a :class:`Reducer` and forgets it; the reducer keeps, per scope
(``it``, ``facility``):

- per draw and base interval (``reduce_s``, default 1 s): the interval mean (interval
  means at any multiple of ``reduce_s`` and the quantile bands derive from these);
- per base interval, over draws: the lowest and highest tick value and the largest
  tick-to-tick rise and fall;
- per draw: energy, realised PUE, and the swing metrics of
  :func:`powerlab.grid.swings.swing_metrics` under these rules:

  * ``peak_w``, ``min_w``, tick-to-tick ramps and the ramps over named windows
    (100 ms, 1 s, 1 min means, every alignment) are exact, as with the ticks kept;
  * the swings ``swing_{1,10,60}s_w`` are the largest max-minus-min over windows
    *aligned to the base-interval grid* (a lower bound of the sliding-window swing,
    equal to it when the extremes fall inside one aligned window);
  * band RMS values come from the Welch spectrum of the IT power; the facility's are
    ``1 + electrical_loss_fraction`` times the IT's (the cooling, lagging by minutes,
    adds less than ``share / (2 pi f tau)`` of the IT oscillation above 0.1 Hz).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError
from .battery import battery_dispatch
from .facility import facility_power
from .swings import BANDS_HZ, GRID_BANDS_HZ, RAMP_WINDOWS, band_rms, dominant_frequency, spectrum
from .timebase import to_ticks

__all__ = ["Reducer"]

SCOPES = ("facility", "it")


def _window_ramps_fast(x: np.ndarray, tick_s: float, tick_up: float,
                       tick_down: float) -> dict:
    """Ramps over the named windows from one cumulative sum (see RAMP_WINDOWS); a window
    of one tick is the tick-to-tick ramp (``tick_up``, ``tick_down`` [W/s])."""
    c = np.concatenate([[0.0], np.cumsum(x - x[0])])
    out = {}
    for suffix, (win, per) in RAMP_WINDOWS.items():
        w = win / tick_s
        wi = round(w)
        if abs(w - wi) > 1e-6 * max(w, 1.0) or wi < 1 or len(x) < 2 * wi:
            out[f"ramp_up_{suffix}"] = out[f"ramp_down_{suffix}"] = float("nan")
            continue
        if wi == 1:
            out[f"ramp_up_{suffix}"] = tick_up * per
            out[f"ramp_down_{suffix}"] = tick_down * per
            continue
        means = (c[wi:] - c[:-wi]) / wi
        r = (means[wi:] - means[:-wi]) / win * per
        out[f"ramp_up_{suffix}"] = float(max(r.max(), 0.0))
        out[f"ramp_down_{suffix}"] = float(max(-r.min(), 0.0))
    return out


def _welch(x: np.ndarray, tick_s: float, segment_s: float = 50.0) -> pd.DataFrame:
    """:func:`powerlab.grid.swings.spectrum` (Welch: Hann window, half overlap, mean
    removed per segment, one-sided density), vectorised over segments."""
    from scipy.signal import get_window

    nper = int(2 ** np.ceil(np.log2(max(segment_s / tick_s, 8))))
    nper = min(nper, len(x))
    step = nper - nper // 2
    n_seg = (len(x) - nper) // step + 1
    if n_seg < 2:
        return spectrum(x, tick_s, segment_s)
    win = get_window("hann", nper)
    fs = 1.0 / tick_s
    freqs = np.fft.rfftfreq(nper, tick_s)
    acc = np.zeros(len(freqs))
    for a in range(0, n_seg, 4096):   # bounded temporaries
        b = min(n_seg, a + 4096)
        segs = np.lib.stride_tricks.sliding_window_view(x, nper)[a * step:(b - 1) * step + 1
                                                                  :step]
        segs = segs - segs.mean(axis=1, keepdims=True)
        acc += (np.abs(np.fft.rfft(segs * win, axis=1)) ** 2).sum(axis=0)
    p = acc / n_seg / (fs * (win * win).sum())
    p[1:-1 if nper % 2 == 0 else None] *= 2.0
    return pd.DataFrame({"frequency_hz": freqs, "psd_w2_per_hz": p})


def _aligned_swing(bmax: np.ndarray, bmin: np.ndarray, k: int) -> float:
    """Largest max-minus-min over ``k`` consecutive base intervals [W]."""
    from scipy.ndimage import maximum_filter1d, minimum_filter1d

    k = max(1, min(k, len(bmax)))
    if k == 1:
        return float((bmax - bmin).max())
    origin = -(k // 2)
    mx = maximum_filter1d(bmax, k, origin=origin, mode="nearest")
    mn = minimum_filter1d(bmin, k, origin=origin, mode="nearest")
    return float((mx - mn)[:len(bmax) - k + 1].max())


class Reducer:
    """Per-interval and per-draw statistics of a forecast, accumulated draw by draw.

    Parameters
    ----------
    scenario : Scenario
    n_ticks : int
    tick_s : float
        Engine tick [s].
    start_utc : Timestamp
    draws : int
    reduce_s : float
        Base interval, a whole number of ticks [s].
    """

    def __init__(self, scenario, n_ticks: int, tick_s: float, start_utc, draws: int,
                 reduce_s: float = 1.0):
        per = to_ticks(reduce_s, tick_s)
        if per < 1 or abs(per * tick_s - reduce_s) > 1e-6 * reduce_s:
            raise PowerlabError(f"reduce_s = {reduce_s:g} s is not a whole number of "
                                f"engine ticks ({tick_s:g} s)")
        self.scenario = scenario
        self.n_ticks = n_ticks
        self.tick_s = tick_s
        self.start_utc = start_utc
        self.draws = draws
        self.reduce_s = reduce_s
        self.per = per
        self.edges = np.arange(0, n_ticks, per)
        self.counts = np.diff(np.append(self.edges, n_ticks))
        m = len(self.edges)
        site = scenario.site
        if site.cooling is not None:
            times = pd.date_range(start_utc, periods=n_ticks,
                                  freq=pd.Timedelta(seconds=tick_s), unit="ns")
            self.pue = site.pue_at(times)
            del times
        else:
            self.pue = float(site.pue)
        self._dx = np.empty(n_ticks)
        self.means = {s: np.empty((draws, m)) for s in SCOPES}
        self.vmin = {s: np.full(m, np.inf) for s in SCOPES}
        self.vmax = {s: np.full(m, -np.inf) for s in SCOPES}
        self.up = {s: np.zeros(m) for s in SCOPES}
        self.down = {s: np.zeros(m) for s in SCOPES}
        self.energy = {s: np.empty(draws) for s in SCOPES}
        self.pue_realised = np.empty(draws)
        self.battery_drain_j = np.zeros(draws)
        self.rows: list[dict] = []

    def add(self, d: int, it_w: np.ndarray) -> None:
        """Reduce draw ``d`` from its per-tick IT power [W]."""
        site = self.scenario.site
        fac = facility_power(it_w, self.tick_s, self.pue,
                             electrical_loss_fraction=site.electrical_loss_fraction,
                             cooling_time_constant_s=site.cooling_time_constant_s,
                             base_load_w=site.base_load_w, parts=False).facility_w
        self.pue_realised[d] = (fac.sum() - site.base_load_w * len(fac)) / it_w.sum()
        bat = self.scenario.mitigations.battery
        if bat is not None:
            out, soc = battery_dispatch(fac, self.tick_s, bat)
            self.battery_drain_j[d] = (bat.initial_soc_fraction * bat.energy_megawatt_hours
                                       * 3.6e9 - soc[-1])
            fac = fac - out
        spec = _welch(it_w, self.tick_s)
        bands = {k: band_rms(spec, *v) for k, v in BANDS_HZ.items()}
        bands["3_30hz"] = band_rms(spec, *GRID_BANDS_HZ["3_30hz"])
        for sc, x in (("facility", fac), ("it", it_w)):
            e = self.edges
            self.means[sc][d] = np.add.reduceat(x, e) / self.counts
            bmax = np.maximum.reduceat(x, e)
            bmin = np.minimum.reduceat(x, e)
            np.maximum(self.vmax[sc], bmax, out=self.vmax[sc])
            np.minimum(self.vmin[sc], bmin, out=self.vmin[sc])
            dx = self._dx
            dx[0] = 0.0
            np.subtract(x[1:], x[:-1], out=dx[1:])
            dx *= 1.0 / self.tick_s
            up_b = np.maximum.reduceat(dx, e)
            dn_b = -np.minimum.reduceat(dx, e)
            np.maximum(self.up[sc], np.maximum(up_b, 0.0), out=self.up[sc])
            np.maximum(self.down[sc], np.maximum(dn_b, 0.0), out=self.down[sc])
            self.energy[sc][d] = float(x.sum()) * self.tick_s
            f = 1.0 + site.electrical_loss_fraction if sc == "facility" else 1.0
            row = {"scope": sc, "draw": d, "peak_w": float(x.max()),
                   "min_w": float(x.min())}
            for w in (1, 10, 60):
                row[f"swing_{w}s_w"] = _aligned_swing(bmax, bmin,
                                                      round(w / self.reduce_s))
            row["ramp_up_w_per_s"] = float(max(up_b.max(), 0.0))
            row["ramp_down_w_per_s"] = float(max(dn_b.max(), 0.0))
            row.update(_window_ramps_fast(x, self.tick_s, row["ramp_up_w_per_s"],
                                          row["ramp_down_w_per_s"]))
            fr = spec["frequency_hz"].to_numpy()
            ps = spec["psd_w2_per_hz"].to_numpy()
            row["dominant_frequency_hz"] = dominant_frequency(fr, ps)
            for k in BANDS_HZ:
                row[f"band_{k}_rms_w"] = bands[k] * f
                row[f"band_{k}_w2"] = (bands[k] * f) ** 2
            row["band_3_30hz_rms_w"] = bands["3_30hz"] * f
            self.rows.append(row)

    def interval_means(self, scope: str, resolution_s: float) -> np.ndarray:
        """Per draw, the mean power of each interval of ``resolution_s`` (a whole number
        of base intervals) [W], shape (draws, intervals)."""
        k = to_ticks(resolution_s, self.reduce_s)
        if k < 1 or abs(k * self.reduce_s - resolution_s) > 1e-6 * resolution_s:
            raise PowerlabError(f"resolution {resolution_s:g} s is not a whole number of "
                                f"the forecast's reduction intervals ({self.reduce_s:g} s); "
                                "forecast with keep_ticks=True for finer resolutions")
        e = np.arange(0, len(self.edges), k)
        w = self.counts.astype(float)
        num = np.add.reduceat(self.means[scope] * w, e, axis=1)
        return num / np.add.reduceat(w, e)

    def group(self, values: np.ndarray, resolution_s: float, how: str) -> np.ndarray:
        """Aggregate a per-base-interval array to ``resolution_s`` (``max`` or ``min``)."""
        k = to_ticks(resolution_s, self.reduce_s)
        e = np.arange(0, len(self.edges), k)
        return (np.maximum if how == "max" else np.minimum).reduceat(values, e)

    def tick_edges(self, resolution_s: float) -> np.ndarray:
        """First tick of each interval of ``resolution_s`` [-]."""
        k = to_ticks(resolution_s, self.reduce_s)
        return self.edges[::k]
