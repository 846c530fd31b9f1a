"""Reduce each forecast draw as it is computed (``forecast(..., keep_ticks=False)``).

A forecast that keeps every draw's per-tick power holds ``draws x ticks`` numbers (7 days
at 100 ms, 20 draws: 121 million per boundary).  With ``keep_ticks=False`` the engine hands
each draw's IT power to a :class:`Reducer` one chunk at a time
(:mod:`powerlab.site.chunks`, 65,536 ticks by default) and forgets it; no array as long
as the horizon is ever built.  Every pass over a chunk stays in the CPU cache and reuses
its work arrays.  What crosses a chunk boundary is carried: the cooling filter's state,
the last tick (tick-to-tick ramps), the cumulative sums of the last ``2 w - 1`` ticks
(ramps over windows of ``w`` ticks), the last ticks of the longest swing window and
the ticks of Welch segments still open.  Chunks
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
from scipy import fft as sp_fft
from scipy import signal

from .._options import renamed_keywords
from ..exceptions import PowerlabError
from ..limits.interval_ramps import IntervalRamps
from .battery import battery_dispatch
from .facility import cooling_filter
from .swings import BANDS_HZ, GRID_BANDS_HZ, RAMP_WINDOWS, band_rms, dominant_frequency, spectrum
from .timebase import to_ticks

__all__ = ["Reducer"]

BOUNDARIES = ("facility", "it")


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


class _Scratch:
    """Named work arrays reused from chunk to chunk (no fresh temporaries per chunk:
    large fresh arrays cost page faults on every use)."""

    def __init__(self):
        self._bufs: dict[str, np.ndarray] = {}

    def get(self, name: str, size: int, dtype=np.float64) -> np.ndarray:
        buf = self._bufs.get(name)
        if buf is None or len(buf) < size:
            buf = self._bufs[name] = np.empty(max(size, 1), dtype)
        return buf[:size]


class _RampStream:
    """Ramps over the named windows of :data:`RAMP_WINDOWS` (every alignment), fed chunk
    by chunk: the largest rise and fall between adjacent window means.

    Each chunk's power, less the draw's first value, is summed cumulatively from the
    chunk's start and joined to the sums over the last ``2 w - 1`` ticks before it
    (partial sums over a chunk, not the horizon: better conditioned than one
    cumulative sum).  A window of one tick is
    the tick-to-tick ramp, which the caller supplies.  When every longer window is a
    whole number of base intervals (``per`` ticks, 1-s intervals at 100-ms ticks) no
    cumulative sum of the ticks is needed: they are searched by intervals
    (:class:`powerlab.limits.interval_ramps.IntervalRamps`; equal within rounding).
    """

    def __init__(self, n: int, tick_s: float, scratch: _Scratch, per: int = 1):
        self.tick_s = tick_s
        self.scratch = scratch
        self.wins = {}
        for suffix, (win, per_) in RAMP_WINDOWS.items():
            w = win / tick_s
            wi = round(w)
            ok = abs(w - wi) <= 1e-6 * max(w, 1.0) and wi >= 1 and n >= 2 * wi
            self.wins[suffix] = (wi if ok else 0, win, per_)
        # windows of whole base intervals are searched by intervals (interval_ramps),
        # when that saves the per-tick cumulative sum: when every window is one
        long = [wi for wi, _, _ in self.wins.values() if wi >= 2]
        whole = long if per >= 2 and all(wi % per == 0 for wi in long) else []
        self.by_intervals = IntervalRamps(n, per, whole) if whole else None
        self.tail_len = max([2 * wi - 1 for wi, _, _ in self.wins.values()
                             if wi > 1 and wi not in whole], default=0)
        self.ctail = np.zeros(1)
        self.ref = None
        self.hi = {k: -np.inf for k in self.wins}
        self.lo = {k: np.inf for k in self.wins}

    def feed(self, x: np.ndarray, sums=None, bmax=None, bmin=None) -> None:
        """Take the next chunk ``x`` (whole base intervals but at the horizon's end) with
        its intervals' sums, maxima and minima (needed when ``per >= 2``)."""
        if self.by_intervals is not None:
            self.by_intervals.feed(x, sums, bmax, bmin)
        if not self.tail_len:
            return
        if self.ref is None:
            self.ref = float(x[0])
        t = len(self.ctail) - 1
        end = t + len(x)
        # c: cumulative sum of (power - ref) over the carried tail and this chunk,
        # zero at the chunk's start (the tail's values re-based on it)
        c = self.scratch.get("ramp_cumsum", end + 1)
        c[:t + 1] = self.ctail
        np.subtract(x, self.ref, out=c[t + 1:])
        np.cumsum(c[t + 1:], out=c[t + 1:])
        keep = min(self.tail_len, end)
        self.ctail = c[end - keep:] - c[end]
        sc = self.scratch
        skip = self.by_intervals.wins if self.by_intervals is not None else ()
        for k, (wi, _, _) in self.wins.items():
            if wi < 2 or wi in skip:
                continue
            e0 = max(t + 1, 2 * wi)   # window pairs ending in this chunk
            if e0 > end:
                continue
            m = end + 1 - e0
            sums = np.subtract(c[e0 - wi:end + 1], c[e0 - 2 * wi:end + 1 - wi],
                               out=sc.get("ramp_sums", m + wi))
            r = np.subtract(sums[wi:], sums[:-wi], out=sc.get("ramp_r", m))
            self.hi[k] = max(self.hi[k], float(r.max()))
            self.lo[k] = min(self.lo[k], float(r.min()))

    def result(self, tick_up: float, tick_down: float) -> dict:
        """``ramp_up_<suffix>``, ``ramp_down_<suffix>``; NaN where the window is not a
        whole number of ticks or the horizon is shorter than two windows."""
        out = {}
        iv = self.by_intervals
        for k, (wi, win, per) in self.wins.items():
            if iv is not None and wi in iv.wins:
                self.hi[k], self.lo[k] = iv.hi[wi], iv.lo[wi]
            if wi == 0:
                up = down = float("nan")
            elif wi == 1:
                up, down = tick_up * per, tick_down * per
            else:
                up = max(self.hi[k] / wi / win * per, 0.0)
                down = max(-self.lo[k] / wi / win * per, 0.0)
            out[f"ramp_up_{k}"] = float(up)
            out[f"ramp_down_{k}"] = float(down)
        return out


class _WelchStream:
    """:func:`powerlab.site.swings.spectrum` (Welch: Hann window, half overlap, mean
    removed per segment, one-sided density), fed chunk by chunk: each segment is
    transformed once all its ticks have arrived; the ticks of segments still open are
    carried to the next chunk."""

    def __init__(self, n: int, tick_s: float, scratch: _Scratch, segment_s: float = 50.0):
        from scipy.signal import get_window

        self.scratch = scratch
        self.n, self.tick_s, self.segment_s = n, tick_s, segment_s
        nper = int(2 ** np.ceil(np.log2(max(segment_s / tick_s, 8))))
        self.nper = min(nper, n)
        self.step = self.nper - self.nper // 2
        self.n_seg = (n - self.nper) // self.step + 1
        self.whole = self.n_seg < 2   # too short for two segments: scipy on the whole
        self.win = get_window("hann", self.nper)
        self.batch = max(1, 2**15 // self.nper)
        self.acc = np.zeros(self.nper // 2 + 1)
        self.pending = np.empty(0)
        self.done = 0           # segments transformed
        self.seen = 0           # ticks received

    def feed(self, x: np.ndarray) -> None:
        if self.whole:
            self.pending = np.concatenate([self.pending, x])
            return
        first = self.done * self.step          # tick of the first pending value
        t = len(self.pending)
        buf = self.scratch.get("welch_buf", t + len(x))
        buf[:t] = self.pending
        buf[t:] = x
        self.seen += len(x)
        ready = min(self.n_seg, (self.seen - self.nper) // self.step + 1) \
            if self.seen >= self.nper else 0
        nper, step = self.nper, self.step
        j = 0
        if ready > self.done:
            view = np.lib.stride_tricks.sliding_window_view(buf, nper)[::step]
            means = self._means(buf, view, ready - self.done)
        while self.done + j < ready:
            b = min(ready - self.done, j + self.batch)
            segs = self.scratch.get("welch_segs", (b - j) * nper).reshape(b - j, nper)
            np.subtract(view[j:b], means[j:b, None], out=segs)
            segs *= self.win
            zz = sp_fft.rfft(segs, axis=1, overwrite_x=True).view(np.float64)
            # re^2, im^2 side by side, summed over the segments in one pass
            col = np.einsum("ij,ij->j", zz, zz)
            self.acc += col[0::2]
            self.acc += col[1::2]
            j = b
        self.done += j
        keep = self.done * step - first
        self.pending = buf[keep:].copy() if self.done < self.n_seg else np.empty(0)

    def _means(self, buf: np.ndarray, view: np.ndarray, k: int) -> np.ndarray:
        """The means of the first ``k`` segments of ``view`` (windows of ``buf``).  With
        half overlap and a segment of 16 m > 128 ticks, numpy's pairwise sum of a segment
        is exactly the sum of its two halves' pairwise sums, so each half is summed once
        (one pass over the ticks, not two) and the means are ``view.mean(axis=1)`` bit
        for bit."""
        nper, step = self.nper, self.step
        if 2 * step != nper or nper % 16 or nper <= 128:
            return view[:k].mean(axis=1)
        halves = buf[:(k + 1) * step].reshape(k + 1, step).sum(axis=1)
        return np.divide(halves[:-1] + halves[1:], nper)

    def result(self) -> pd.DataFrame:
        if self.whole:
            return spectrum(self.pending, self.tick_s, self.segment_s)
        fs = 1.0 / self.tick_s
        p = self.acc / self.n_seg / (fs * (self.win * self.win).sum())
        p[1:-1 if self.nper % 2 == 0 else None] *= 2.0
        return pd.DataFrame({"frequency_hz": np.fft.rfftfreq(self.nper, self.tick_s),
                             "psd_w2_per_hz": p})


def _window_swings(x: np.ndarray, sizes: list[int]) -> list[float]:
    """Largest max-minus-min over every window of ``k`` consecutive values, for each
    ``k`` of ``sizes`` (each at most ``x.shape[-1]``; windows along the last axis, the
    largest over all rows): one sparse table of power-of-two windows shared by all
    sizes (``log2 max(sizes)`` vector passes for the max and as many for the min), each
    window the extreme of two overlapping power-of-two ones."""
    order = sorted(set(sizes))
    out: dict[int, float] = {}
    span, hi, lo = 1, x, x
    for k in order:
        while 2 * span <= k:
            hi = np.maximum(hi[..., :-span], hi[..., span:])
            lo = np.minimum(lo[..., :-span], lo[..., span:])
            span *= 2
        n_win = x.shape[-1] - k + 1
        out[k] = float((np.maximum(hi[..., :n_win], hi[..., k - span:k - span + n_win])
                        - np.minimum(lo[..., :n_win], lo[..., k - span:k - span + n_win])
                        ).max())
    return [out[k] for k in sizes]


def _block_window_extremes(hi: np.ndarray, lo: np.ndarray, widths: list[int]
                           ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """For every block ``p`` and each width ``q`` of ``widths``, the largest of
    ``hi[p:p+q]`` and the smallest of ``lo[p:p+q]`` (windows running past the end are
    cut short) [W]: one sparse table of power-of-two windows over the blocks shared by
    all widths, as :func:`_window_swings` does over ticks."""
    nb = len(hi)
    pad = max(widths) - 1
    h = np.concatenate([hi, np.full(pad, -np.inf)])
    l_ = np.concatenate([lo, np.full(pad, np.inf)])
    out = {}
    span = 1
    for q in sorted(set(widths)):
        while 2 * span <= q:
            h = np.maximum(h[:-span], h[span:])
            l_ = np.minimum(l_[:-span], l_[span:])
            span *= 2
        out[q] = (np.maximum(h[:nb], h[q - span:q - span + nb]),
                  np.minimum(l_[:nb], l_[q - span:q - span + nb]))
    return out


def _candidate_swing(x: np.ndarray, cand: np.ndarray, b: int, k: int) -> float:
    """Largest swing over the windows of ``k`` ticks of ``x`` that start in the base
    intervals ``cand`` (of ``b`` ticks; windows running past the end are left out)."""
    n = len(x)
    span_len = b + k - 1      # the ticks the windows starting in one interval cover
    brk = np.flatnonzero(np.diff(cand) > 1)
    n_runs = len(brk) + 1
    # runs of consecutive candidates share their ticks; scattered ones are gathered
    runs_cost = len(cand) * b + n_runs * (k - 1 + 2000)   # ~2000 ticks of overhead a run
    if len(cand) * span_len <= n and len(cand) * span_len < runs_cost:
        # every candidate's ticks as one row (starts past n - k are clipped to the
        # last tick: such a window lies within the last whole window, whose interval
        # is a candidate too, so it cannot raise the maximum)
        idx = cand[:, None] * b + np.arange(span_len)
        np.minimum(idx, n - 1, out=idx)
        return _window_swings(x[idx], [k])[0]
    if n_runs > 32:
        starts, ends = cand[:1], cand[-1:]
    else:
        starts, ends = cand[np.r_[0, brk + 1]], cand[np.r_[brk, len(cand) - 1]]
    best = 0.0
    for p0, p1 in zip(starts.tolist(), ends.tolist()):
        s_end = min(p1 * b + b - 1, n - k)   # the last start of the run
        best = max(best, _window_swings(x[p0 * b:s_end + k], [k])[0])
    return best


class _SwingStream:
    """The sliding-window swings ``swing_{1,10,60}s_w`` of
    :func:`powerlab.site.swings.largest_swing` (windows of ``round(w / tick) + 1``
    ticks, every start), fed chunk by chunk: each chunk is joined to the last whole base
    intervals before it that hold ``k_max - 1`` ticks, so every window of the horizon is
    seen whole in some chunk; exactly the per-tick values, whatever the alignment of the
    load's steps.

    Only the windows that can hold the largest swing are evaluated tick by tick (branch
    and bound over the base intervals, whose extremes the reducer has already):

    - every window of ``k`` ticks starting in base interval ``p`` lies within the
      intervals ``p .. p + q - 1`` (``q = (b + k - 2) // b + 1`` for intervals of ``b``
      ticks), so its swing is at most ``U[p]``, the highest of their maxima less the
      lowest of their minima;
    - ``r = k // b`` whole intervals fit in a window, so the largest swing is at least
      ``L``, the largest swing of ``r`` consecutive intervals (and at least the largest
      swing found so far, ``B``);
    - the window holding the largest swing has ``U[p] >= swing >= max(L, B)``: only the
      intervals with ``U[p] >= max(L, B)`` are evaluated exactly (:func:`_window_swings`
      on their ticks), the others cannot exceed it.  The result is the same maximum of
      the same differences of the same tick values as the exhaustive search (bit for
      bit), at a cost of a few passes over the intervals instead of ~30 over the ticks.
    """

    WINDOWS_S = (1, 10, 60)

    def __init__(self, tick_s: float, scratch: _Scratch, per: int = 1):
        self.sizes = [max(2, round(w / tick_s) + 1) for w in self.WINDOWS_S]
        self.per = max(1, int(per))
        self.keep_blocks = -(-(max(self.sizes) - 1) // self.per)   # whole intervals
        self.scratch = scratch
        self.tail = np.empty(0)
        self.tail_hi = np.empty(0)
        self.tail_lo = np.empty(0)
        self.best = [0.0] * len(self.sizes)
        self.seen = 0
        self.hi, self.lo = -np.inf, np.inf

    def feed(self, x: np.ndarray, bmax: np.ndarray | None = None,
             bmin: np.ndarray | None = None) -> None:
        """Take the next chunk ``x`` (a whole number of base intervals except at the
        horizon's end) with its per-interval maxima and minima (computed here when not
        given)."""
        b = self.per
        if bmax is None:
            e = np.arange(0, len(x), b)
            bmax, bmin = np.maximum.reduceat(x, e), np.minimum.reduceat(x, e)
        t = len(self.tail)
        buf = self.scratch.get("swing_buf", t + len(x))
        buf[:t] = self.tail
        buf[t:] = x
        hi = np.concatenate([self.tail_hi, bmax])
        lo = np.concatenate([self.tail_lo, bmin])
        self.seen += len(x)
        self.hi, self.lo = max(self.hi, float(bmax.max())), min(self.lo, float(bmin.min()))
        n = len(buf)
        nb = len(hi)
        plan = []   # (i, k, q, r) of the windows searched by intervals
        for i, k in enumerate(self.sizes):
            if k > n:
                continue
            if k < b or nb < 2:   # windows shorter than an interval: every one
                self.best[i] = max(self.best[i], _window_swings(buf, [k])[0])
                continue
            plan.append((i, k, (b + k - 2) // b + 1, k // b))
        ext = _block_window_extremes(hi, lo, [w for p in plan for w in p[2:]]) \
            if plan else {}
        for i, k, q, r in plan:
            last = (n - k) // b    # the last interval a window of buf starts in
            lb_hi, lb_lo = ext[r]
            thr = max(self.best[i], float((lb_hi - lb_lo).max()))
            ub_hi, ub_lo = ext[q]
            cand = np.flatnonzero(ub_hi[:last + 1] - ub_lo[:last + 1] >= thr)
            if not len(cand):
                continue
            self.best[i] = max(self.best[i], _candidate_swing(buf, cand, b, k))
        keep = min(self.keep_blocks, nb)
        self.tail = buf[(nb - keep) * b:].copy() if keep else np.empty(0)
        self.tail_hi, self.tail_lo = hi[nb - keep:].copy(), lo[nb - keep:].copy()

    def result(self) -> dict:
        """``swing_{w}s_w``; a horizon shorter than a window gives its whole swing."""
        return {f"swing_{w}s_w": (b if self.seen >= k else self.hi - self.lo)
                for w, k, b in zip(self.WINDOWS_S, self.sizes, self.best)}


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
        self.scratch = _Scratch()
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
        from .chunks import chunk_ticks, dense_chunks

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
        self.ramps = _RampStream(red.n_ticks, red.tick_s, red.scratch, red.per)
        self.swings = _SwingStream(red.tick_s, red.scratch, red.per)

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
        self.welch = _WelchStream(red.n_ticks, red.tick_s, red.scratch)
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
            from .chunks import chunk_ticks, dense_chunks

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
