"""Reduce each forecast draw as it is computed (``forecast(..., keep_ticks=False)``).

A forecast that keeps every draw's per-tick power holds ``draws x ticks`` numbers (7 days
at 100 ms, 20 draws: 121 million per boundary).  With ``keep_ticks=False`` the engine hands
each draw's IT power to a :class:`Reducer` one chunk at a time
(:mod:`powerlab.site.chunks`, 65,536 ticks by default) and forgets it; no array as long
as the horizon is ever built.  Every pass over a chunk stays in the CPU cache and reuses
its work arrays.  What crosses a chunk boundary is carried: the cooling filter's state,
the last tick (tick-to-tick ramps), the cumulative sums of the last ``2 w - 1`` ticks
(ramps over windows of ``w`` ticks), the last ticks of the longest swing window and
the ticks of Welch segments still open (the streams of
:mod:`powerlab.site.streaming`).  Chunks
are whole base intervals, so per-interval figures never depend on the chunk length;
per-draw figures do only through the order of floating-point sums (relative 1e-9 or
better, ``tests/site/test_engine.py``).  The reducer keeps, per boundary (``it``,
``facility``):

- per draw and base interval (``reduce_s``, default 1 s): the interval mean (interval
  means at any multiple of ``reduce_s`` and the quantile bands derive from these);
- per base interval, over draws: the lowest and highest tick value and the largest
  tick-to-tick rise and fall;
- per draw: energy, realised PUE, and the swing metrics of
  :func:`powerlab.site.swings.swing_metrics` under these rules:

  * ``peak_w``, ``min_w``, tick-to-tick ramps, the ramps over named windows
    (100 ms, 1 s, 1 min means, every alignment) and the swings ``swing_{1,10,60}s_w``
    (sliding windows, every start: the last ``60 s / tick`` ticks are carried across
    chunks) are exact, as with the ticks kept, whatever the alignment of the load's
    steps to the base intervals (issue 20: windows aligned to whole seconds read a
    job-start swing of 9.55 MW as 0.58 MW, since job starts fall on whole seconds);
  * band RMS values come from the Welch spectrum of the IT power; the facility's are
    ``1 + electrical_loss_fraction`` times the IT's (the cooling, lagging by minutes,
    adds less than ``share / (2 pi f tau)`` of the IT oscillation above 0.1 Hz).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import signal

from .._options import renamed_keywords
from ..exceptions import PowerlabError
from ..limits.requirements import BOUNDARIES
from .battery import battery_dispatch
from .chunks import chunk_ticks, dense_chunks
from .facility import cooling_filter
from .streaming import RampStream, Scratch, SwingStream, WelchStream
from .swings import BANDS_HZ, GRID_BANDS_HZ, band_rms, dominant_frequency
from .timebase import to_ticks

__all__ = ["Reducer"]


def _per_interval(ufunc, x: np.ndarray, edges: np.ndarray, per: int, out: np.ndarray
                  ) -> np.ndarray:
    """``ufunc.reduceat(x, edges)`` for intervals of ``per`` ticks (the last may be
    shorter).  Short intervals are reduced column by column over a ``(k, per)`` view:
    ``reduceat`` loops over intervals and costs about 6 ns a tick at ``per = 10``."""
    k = len(edges)
    if per > 16:
        return ufunc.reduceat(x, edges, out=out)
    if len(x) != k * per:   # the horizon's last, partial interval: on its own
        _per_interval(ufunc, x[:(k - 1) * per], edges[:k - 1], per, out[:k - 1])
        out[k - 1] = ufunc.reduce(x[(k - 1) * per:])
        return out
    y = x.reshape(k, per)
    if per == 1:
        out[:] = y[:, 0]
        return out
    ufunc(y[:, 0], y[:, 1], out=out)
    for j in range(2, per):
        ufunc(out, y[:, j], out=out)
    return out


def _column_stats(x: np.ndarray, per: int, prev: float | None, scratch, sums: np.ndarray,
                  bmax: np.ndarray, bmin: np.ndarray, up: np.ndarray, dn: np.ndarray
                  ) -> None:
    """Per interval of ``per`` ticks (a chunk of whole intervals): the sum, maximum and
    minimum of ``x`` and the largest rise and fall of its tick differences (the first
    against ``prev``, 0 without one), into the ``out`` arrays.  One transposed copy of
    the chunk makes every reduction run along contiguous rows (a few vector passes
    instead of ``per - 1`` strided ones each); the sums are added in the same order as
    :func:`_per_interval`'s column by column, so every value is the same bit for bit."""
    k = len(x) // per
    xt = scratch.get("cols_x", per * k).reshape(per, k)
    xt[:] = x.reshape(k, per).T
    np.add.reduce(xt, axis=0, out=sums)
    np.maximum.reduce(xt, axis=0, out=bmax)
    np.minimum.reduce(xt, axis=0, out=bmin)
    dt = scratch.get("cols_dx", per * k).reshape(per, k)
    np.subtract(xt[1:], xt[:-1], out=dt[1:])
    dt[0, 0] = 0.0 if prev is None else x[0] - prev
    np.subtract(xt[0, 1:], xt[per - 1, :-1], out=dt[0, 1:])
    np.maximum.reduce(dt, axis=0, out=up)
    np.minimum.reduce(dt, axis=0, out=dn)


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
    chunk_ticks : int, optional
        Chunk length for what the reducer cuts itself (a battery site's facility
        power), as :func:`powerlab.site.chunks.chunk_ticks` [-].
    """

    def __init__(self, scenario, n_ticks: int, tick_s: float, start_utc, draws: int,
                 reduce_s: float = 1.0, chunk_ticks: int | None = None):
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
        self.chunk_ticks = chunk_ticks
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
        self.scratch = Scratch()
        self._edges_by_len: dict[int, np.ndarray] = {}
        self.bmax_buf = {s: np.empty(m) for s in BOUNDARIES}
        self.bmin_buf = {s: np.empty(m) for s in BOUNDARIES}
        self.means = {s: np.empty((draws, m)) for s in BOUNDARIES}
        self.vmin = {s: np.full(m, np.inf) for s in BOUNDARIES}
        self.vmax = {s: np.full(m, -np.inf) for s in BOUNDARIES}
        self.up = {s: np.zeros(m) for s in BOUNDARIES}
        self.down = {s: np.zeros(m) for s in BOUNDARIES}
        self.energy = {s: np.empty(draws) for s in BOUNDARIES}
        self.pue_realised = np.empty(draws)
        self.battery_drain_j = np.zeros(draws)
        self.rows: list[dict] = []

    def add(self, d: int, it_w: np.ndarray, chunk: int | None = None) -> None:
        """Reduce draw ``d`` from its whole per-tick IT power [W] (in chunks)."""
        dr = self.draw(d)
        for a, x in dense_chunks(it_w, chunk_ticks(chunk or self.chunk_ticks, self.per)):
            dr.feed(a, x)
        dr.finish()

    def local_edges(self, length: int) -> np.ndarray:
        """First tick of each base interval within a chunk of ``length`` ticks."""
        e = self._edges_by_len.get(length)
        if e is None:
            e = self._edges_by_len[length] = np.arange(0, length, self.per)
        return e

    def draw(self, d: int) -> _DrawReduction:
        """Start reducing draw ``d``: feed its IT power chunk by chunk
        (``feed(first_tick, it_w)``, chunks a whole number of base intervals long
        except the last), then ``finish()``."""
        return _DrawReduction(self, d)

    @renamed_keywords(scope="boundary")
    def interval_means(self, boundary: str, resolution_s: float) -> np.ndarray:
        """Per draw, the mean power of each interval of ``resolution_s`` (a whole number
        of base intervals) [W], shape (draws, intervals)."""
        k = to_ticks(resolution_s, self.reduce_s)
        if k < 1 or abs(k * self.reduce_s - resolution_s) > 1e-6 * resolution_s:
            raise PowerlabError(f"resolution {resolution_s:g} s is not a whole number of "
                                f"the forecast's reduction intervals ({self.reduce_s:g} s); "
                                "forecast with keep_ticks=True for finer resolutions")
        e = np.arange(0, len(self.edges), k)
        w = self.counts.astype(float)
        num = np.add.reduceat(self.means[boundary] * w, e, axis=1)
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


class _BoundaryStats:
    """The per-draw statistics of one boundary, fed chunk by chunk (see :class:`Reducer`)."""

    def __init__(self, red: Reducer, d: int, boundary: str, bmax: np.ndarray,
                 bmin: np.ndarray):
        self.red, self.d, self.boundary = red, d, boundary
        self.bmax, self.bmin = bmax, bmin  # per base interval, this draw
        self.prev = None
        self.total = 0.0
        self.up = 0.0
        self.down = 0.0
        self.ramps = RampStream(red.n_ticks, red.tick_s, red.scratch, red.per)
        self.swings = SwingStream(red.tick_s, red.scratch, red.per)

    def feed(self, a: int, x: np.ndarray) -> None:
        red, sc = self.red, self.boundary
        tmp = red.scratch
        i0 = a // red.per
        e = red.local_edges(len(x))
        i1 = i0 + len(e)
        k = len(e)
        per = red.per
        sums, up_b, dn_b = tmp.get("sums", k), tmp.get("up_b", k), tmp.get("dn_b", k)
        bmax, bmin = self.bmax[i0:i1], self.bmin[i0:i1]
        if 2 <= per <= 16 and len(x) == k * per:
            _column_stats(x, per, self.prev, tmp, sums, bmax, bmin, up_b, dn_b)
        else:
            _per_interval(np.add, x, e, per, sums)
            _per_interval(np.maximum, x, e, per, bmax)
            _per_interval(np.minimum, x, e, per, bmin)
            dx = tmp.get("dx", len(x))
            dx[0] = 0.0 if self.prev is None else x[0] - self.prev
            np.subtract(x[1:], x[:-1], out=dx[1:])
            _per_interval(np.maximum, dx, e, per, up_b)
            _per_interval(np.minimum, dx, e, per, dn_b)
        np.divide(sums, red.counts[i0:i1], out=red.means[sc][self.d, i0:i1])
        np.maximum(red.vmax[sc][i0:i1], bmax, out=red.vmax[sc][i0:i1])
        np.minimum(red.vmin[sc][i0:i1], bmin, out=red.vmin[sc][i0:i1])
        # the rate is the difference times 1/tick: a positive factor keeps the extremes
        # (rounding is monotone), so scale the k extremes, not the ticks
        up_b *= 1.0 / red.tick_s
        dn_b *= -1.0 / red.tick_s
        self.up = max(self.up, float(up_b.max()))
        self.down = max(self.down, float(dn_b.max()))
        np.maximum(up_b, 0.0, out=up_b)
        np.maximum(dn_b, 0.0, out=dn_b)
        np.maximum(red.up[sc][i0:i1], up_b, out=red.up[sc][i0:i1])
        np.maximum(red.down[sc][i0:i1], dn_b, out=red.down[sc][i0:i1])
        self.total += float(sums.sum())
        self.prev = float(x[-1])
        self.ramps.feed(x, sums, bmax, bmin)
        self.swings.feed(x, bmax, bmin)

    def finish(self, spec: pd.DataFrame, bands: dict) -> None:
        red, sc = self.red, self.boundary
        site = red.scenario.site
        red.energy[sc][self.d] = self.total * red.tick_s
        f = 1.0 + site.electrical_loss_fraction if sc == "facility" else 1.0
        row = {"boundary": sc, "draw": self.d, "peak_w": float(self.bmax.max()),
               "min_w": float(self.bmin.min())}
        row.update(self.swings.result())
        row["ramp_up_w_per_s_tick"] = float(max(self.up, 0.0))
        row["ramp_down_w_per_s_tick"] = float(max(self.down, 0.0))
        row.update(self.ramps.result(row["ramp_up_w_per_s_tick"],
                                     row["ramp_down_w_per_s_tick"]))
        fr = spec["frequency_hz"].to_numpy()
        ps = spec["psd_w2_per_hz"].to_numpy()
        row["dominant_frequency_hz"] = dominant_frequency(fr, ps)
        for k in BANDS_HZ:
            row[f"band_{k}_rms_w"] = bands[k] * f
            row[f"band_{k}_w2"] = (bands[k] * f) ** 2
        row["band_3_30hz_rms_w"] = bands["3_30hz"] * f
        red.rows.append(row)


class _DrawReduction:
    """One draw being reduced: facility power (losses, the cooling lag carried across
    chunks, base load) and both boundaries' statistics, chunk by chunk.  With a battery the
    facility power of the whole draw is kept until ``finish()`` (the dispatch needs it
    all) and reduced then."""

    def __init__(self, red: Reducer, d: int):
        self.red, self.d = red, d
        site = red.scenario.site
        self.site = site
        m = len(red.edges)
        self.stats = {sc: _BoundaryStats(red, d, sc, red.bmax_buf[sc][:m], red.bmin_buf[sc][:m])
                      for sc in BOUNDARIES}
        self.welch = WelchStream(red.n_ticks, red.tick_s, red.scratch)
        tau = site.cooling_time_constant_s
        self.ba = cooling_filter(red.tick_s, tau) if tau > 0 else None
        self.zi = None
        self.fac_sum = 0.0
        self.battery = red.scenario.mitigations.battery
        self.fac_all = np.empty(red.n_ticks) if self.battery is not None else None

    def _facility(self, a: int, it: np.ndarray) -> np.ndarray:
        """:func:`powerlab.site.facility.facility_power` of a chunk (equal within
        1e-15 relative), the cooling filter's state carried from the previous chunk."""
        site, red = self.site, self.red
        loss = site.electrical_loss_fraction
        if np.ndim(red.pue) == 0 and site.cooling_time_constant_s > 0:
            # constant PUE: the cooling filter takes the IT power with the share folded
            # into its gain (one pass less; not one ARMA filter for the facility,
            # whose input terms cancel to 1e-11 with a lag of minutes)
            b, a_ = self.ba
            if self.zi is None:
                share = max(float(red.pue) - 1.0 - loss, 0.0)
                self.ab = ([share * b[0]], a_)
                self.zi = signal.lfilter_zi(b, a_) * (share * it[:1])
            fac, self.zi = signal.lfilter(*self.ab, it, zi=self.zi)
            fac += site.base_load_w
            fac += np.multiply(it, 1.0 + loss, out=red.scratch.get("facility", len(it)))
            return fac
        pue = red.pue if np.ndim(red.pue) == 0 else red.pue[a:a + len(it)]
        share = np.maximum(np.asarray(pue, float) - 1.0 - site.electrical_loss_fraction,
                           0.0)
        tmp = red.scratch
        target = np.multiply(it, share, out=tmp.get("target", len(it)))
        if site.cooling_time_constant_s > 0:
            if self.zi is None:
                self.zi = signal.lfilter_zi(*self.ba) * target[:1]
            cooling, self.zi = signal.lfilter(*self.ba, target, zi=self.zi)
        else:
            cooling = target
        fac = np.multiply(it, 1.0 + site.electrical_loss_fraction,
                          out=tmp.get("facility", len(it)))
        fac += cooling
        fac += site.base_load_w
        return fac

    def feed(self, a: int, it: np.ndarray) -> None:
        fac = self._facility(a, it)
        self.welch.feed(it)
        self.stats["it"].feed(a, it)
        if self.fac_all is not None:   # the battery needs the whole draw
            self.fac_all[a:a + len(it)] = fac
            self.fac_sum += float(fac.sum())
        else:
            self.stats["facility"].feed(a, fac)

    def finish(self) -> None:
        red, d, site = self.red, self.d, self.site
        fac_sum = self.fac_sum if self.fac_all is not None else self.stats["facility"].total
        red.pue_realised[d] = ((fac_sum - site.base_load_w * red.n_ticks)
                               / self.stats["it"].total)
        if self.fac_all is not None:
            bat = self.battery
            out, soc = battery_dispatch(self.fac_all, red.tick_s, bat)
            red.battery_drain_j[d] = (bat.initial_soc_fraction * bat.energy_megawatt_hours
                                      * 3.6e9 - soc[-1])
            self.fac_all -= out
            del out, soc
            for a, x in dense_chunks(self.fac_all, chunk_ticks(red.chunk_ticks, red.per)):
                self.stats["facility"].feed(a, x)
            self.fac_all = None
        spec = self.welch.result()
        bands = {k: band_rms(spec, *v) for k, v in BANDS_HZ.items()}
        bands["3_30hz"] = band_rms(spec, *GRID_BANDS_HZ["3_30hz"])
        for sc in ("facility", "it"):
            self.stats[sc].finish(spec, bands)
