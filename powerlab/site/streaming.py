"""The swing metrics of :func:`powerlab.site.swings.swing_metrics`, computed chunk by
chunk: each stream is fed one chunk of a draw's power at a time
(:mod:`powerlab.site.chunks`), carries across the chunk boundary what the next chunk
needs, and gives the same figures as the whole series would.

- :class:`RampStream` - ramps between adjacent window means over the named windows of
  :data:`~powerlab.site.swings.RAMP_WINDOWS`, every alignment (the cumulative sums of the
  last ``2 w - 1`` ticks carried; windows of whole base intervals searched by intervals);
- :class:`WelchStream` - the Welch spectrum (each segment transformed once all its ticks
  have arrived, the ticks of open segments carried);
- :class:`SwingStream` - the sliding-window swings ``swing_{1,10,60}s_w``, exactly the
  per-tick values (the last ticks of the longest window carried; branch and bound over
  the base intervals);
- :class:`Scratch` - named work arrays reused from chunk to chunk.

The reduction of a forecast draw (:mod:`powerlab.site.reduction`) feeds them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import fft as sp_fft
from scipy import signal

from ..limits.interval_ramps import IntervalRamps
from .swings import RAMP_WINDOWS, spectrum

__all__ = ["RampStream", "Scratch", "SwingStream", "WelchStream", "window_swings"]


class Scratch:
    """Named work arrays reused from chunk to chunk (no fresh temporaries per chunk:
    large fresh arrays cost page faults on every use)."""

    def __init__(self):
        self._bufs: dict[str, np.ndarray] = {}

    def get(self, name: str, size: int, dtype=np.float64) -> np.ndarray:
        buf = self._bufs.get(name)
        if buf is None or len(buf) < size:
            buf = self._bufs[name] = np.empty(max(size, 1), dtype)
        return buf[:size]


class RampStream:
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

    def __init__(self, n: int, tick_s: float, scratch: Scratch, per: int = 1):
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


class WelchStream:
    """:func:`powerlab.site.swings.spectrum` (Welch: Hann window, half overlap, mean
    removed per segment, one-sided density), fed chunk by chunk: each segment is
    transformed once all its ticks have arrived; the ticks of segments still open are
    carried to the next chunk."""

    def __init__(self, n: int, tick_s: float, scratch: Scratch, segment_s: float = 50.0):
        self.scratch = scratch
        self.n, self.tick_s, self.segment_s = n, tick_s, segment_s
        nper = int(2 ** np.ceil(np.log2(max(segment_s / tick_s, 8))))
        self.nper = min(nper, n)
        self.step = self.nper - self.nper // 2
        self.n_seg = (n - self.nper) // self.step + 1
        self.whole = self.n_seg < 2   # too short for two segments: scipy on the whole
        self.win = signal.get_window("hann", self.nper)
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


def window_swings(x: np.ndarray, sizes: list[int]) -> list[float]:
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
    all widths, as :func:`window_swings` does over ticks."""
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
        return window_swings(x[idx], [k])[0]
    if n_runs > 32:
        starts, ends = cand[:1], cand[-1:]
    else:
        starts, ends = cand[np.r_[0, brk + 1]], cand[np.r_[brk, len(cand) - 1]]
    best = 0.0
    for p0, p1 in zip(starts.tolist(), ends.tolist()):
        s_end = min(p1 * b + b - 1, n - k)   # the last start of the run
        best = max(best, window_swings(x[p0 * b:s_end + k], [k])[0])
    return best


class SwingStream:
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
      intervals with ``U[p] >= max(L, B)`` are evaluated exactly (:func:`window_swings`
      on their ticks), the others cannot exceed it.  The result is the same maximum of
      the same differences of the same tick values as the exhaustive search (bit for
      bit), at a cost of a few passes over the intervals instead of ~30 over the ticks.
    """

    WINDOWS_S = (1, 10, 60)

    def __init__(self, tick_s: float, scratch: Scratch, per: int = 1):
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
                self.best[i] = max(self.best[i], window_swings(buf, [k])[0])
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
