"""Ramps over windows of whole base intervals, fed chunk by chunk without a per-tick
cumulative sum (:class:`IntervalRamps`, used by :mod:`powerlab.site.reduction`).

The ramp over windows of ``w`` ticks at the boundary ``g`` (between ticks ``g - 1`` and
``g``) is ``r(g) = S(g) - S(g - w)``, ``S(g)`` the sum of the ``w`` ticks before ``g``;
the figure reported is the largest rise and fall over every ``g`` (every alignment),
divided by ``w`` and the window length.  When ``w = m b`` is a whole number of base
intervals of ``b`` ticks, whose sums, maxima and minima the reduction has already:

- at the first boundary of interval ``p`` (its *anchor*) ``r(pb)`` is a difference of
  interval sums: ``W(p) - W(p - m)`` with ``W(p)`` the sum of intervals ``p - m .. p - 1``;
- at ``pb + j`` (``0 < j < b``) it is the anchor plus ``P_p(j) - 2 P_{p-m}(j) +
  P_{p-2m}(j)``, ``P_q(j)`` the sum of the first ``j`` ticks of interval ``q``; so it is
  at most ``anchor + (b - 1) max(0, max_p + max_{p-2m} - 2 min_{p-m})`` and at least
  ``anchor + (b - 1) min(0, min_p + min_{p-2m} - 2 max_{p-m})``.

Only the intervals whose bound (widened by a bound on the rounding) reaches the largest
ramp found so far are evaluated tick by tick: the same maximum as evaluating every
boundary, at a few passes over the intervals instead of a cumulative sum and four
passes over the ticks per window.  The values differ from the per-tick cumulative sum's
only by rounding (``tests/site/test_engine_steps.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["IntervalRamps"]

_EPS = float(np.finfo(float).eps)


class _Joined:
    """The carried ticks followed by a chunk's, read without copying them together."""

    def __init__(self, head: np.ndarray, x: np.ndarray):
        self.head, self.x, self.h = head, x, len(head)

    def __len__(self) -> int:
        return self.h + len(self.x)

    def rows(self, first: np.ndarray, width: int) -> np.ndarray:
        """The ``width`` values from each of the ticks ``first`` (rows that lie wholly
        in the carried ticks or wholly in the chunk), shape ``(len(first), width)``
        [W]."""
        cols = np.arange(width)
        inx = first >= self.h
        if inx.all():
            return self.x[(first - self.h)[:, None] + cols]
        out = np.empty((len(first), width))
        out[inx] = self.x[(first[inx] - self.h)[:, None] + cols]
        out[~inx] = self.head[first[~inx][:, None] + cols]
        return out

    def tail(self, k: int) -> np.ndarray:
        """A copy of the last ``k`` values [W]."""
        if k <= len(self.x):
            return self.x[len(self.x) - k:].copy()
        return np.concatenate([self.head[self.h - (k - len(self.x)):], self.x])


class IntervalRamps:
    """Largest rise and fall of ``r(g)`` (module docstring) for windows of ``wins``
    ticks (each a multiple of ``per >= 2``), over a horizon of ``n`` ticks fed in chunks
    of whole intervals (the last may end in a partial one).

    ``feed(x, sums, bmax, bmin)`` takes a chunk's ticks [W] with its intervals' sums,
    maxima and minima; ``hi[w]``, ``lo[w]`` are the extremes of ``r`` [W x ticks].
    """

    def __init__(self, n: int, per: int, wins: list[int]):
        self.n, self.b = int(n), int(per)
        self.wins = sorted({int(w) for w in wins})
        self.keep = 2 * max(self.wins) // self.b    # intervals carried
        self.seen = 0
        self.ref = None
        self.xdev = 0.0
        self.t_x = np.empty(0)          # ticks of the carried intervals
        self.t_s = np.empty(0)          # their sums less b x ref
        self.t_hi = np.empty(0)
        self.t_lo = np.empty(0)
        self.hi = {w: -np.inf for w in self.wins}
        self.lo = {w: np.inf for w in self.wins}

    def feed(self, x: np.ndarray, sums: np.ndarray, bmax: np.ndarray,
             bmin: np.ndarray) -> None:
        b = self.b
        if self.ref is None:
            self.ref = float(x[0])
        ref = self.ref
        k = len(sums)
        lens = np.full(k, float(b))
        lens[-1] = len(x) - (k - 1) * b
        t_n = len(self.t_s)             # carried intervals
        p0 = self.seen // b - t_n       # global index of local interval 0
        self.seen += len(x)
        last = self.seen >= self.n
        self.xdev = max(self.xdev, float(bmax.max()) - ref, ref - float(bmin.min()))
        s = np.concatenate([self.t_s, sums - lens * ref])
        hi = np.concatenate([self.t_hi, bmax])
        lo = np.concatenate([self.t_lo, bmin])
        xx = _Joined(self.t_x, x)
        pi = np.empty(len(s) + 1)
        pi[0] = 0.0
        np.cumsum(s, out=pi[1:])
        whole = k if len(x) == k * b else k - 1   # whole intervals in this chunk
        # rounding: |pi| <= (intervals + 1) b xdev; each r adds <= 4 m + 4 b roundings
        scale = (len(pi) + 1) * b * (self.xdev + abs(ref)) + 1.0
        for w in self.wins:
            m = w // b
            # anchors: intervals u (local) with global index >= 2m, in this chunk; the
            # end of the horizon is one more anchor when it falls on an interval edge
            u0 = max(t_n, 2 * m - p0)
            u1 = t_n + whole + (1 if last and whole == k else 0)
            if u1 > u0:
                anchor = np.subtract(pi[u0:u1], pi[u0 - m:u1 - m])
                anchor -= np.subtract(pi[u0 - m:u1 - m], pi[u0 - 2 * m:u1 - 2 * m])
                self.hi[w] = max(self.hi[w], float(anchor.max()))
                self.lo[w] = min(self.lo[w], float(anchor.min()))
                g1 = min(u1, t_n + whole)   # anchors whose interval has ticks after them
                if g1 > u0:
                    a = anchor[:g1 - u0]
                    q0, s0 = u0 - m, u0 - 2 * m
                    rise = np.add(hi[u0:g1], hi[s0:g1 - 2 * m])
                    rise -= 2.0 * lo[q0:g1 - m]
                    fall = np.add(lo[u0:g1], lo[s0:g1 - 2 * m])
                    fall -= 2.0 * hi[q0:g1 - m]
                    np.maximum(rise, 0.0, out=rise)
                    np.minimum(fall, 0.0, out=fall)
                    rise *= float(b - 1)
                    fall *= float(b - 1)
                    rise += a
                    fall += a
                    margin = 64.0 * (m + b) * _EPS * scale
                    sel = np.flatnonzero((rise >= self.hi[w] - margin)
                                         | (fall <= self.lo[w] + margin))
                    if len(sel):
                        self._ticks(w, m, sel + u0, a[sel], xx, b)
            if whole < k and t_n + whole >= 2 * m - p0:
                # the partial last interval: every boundary in it and the horizon's end
                self._partial(w, m, t_n + whole, pi, xx, len(xx) - (t_n + whole) * b)
        keep = min(self.keep, len(s) - (0 if whole == k else 1))
        if not last and keep:
            self.t_s = s[len(s) - keep:].copy()
            self.t_hi, self.t_lo = hi[len(s) - keep:].copy(), lo[len(s) - keep:].copy()
            self.t_x = xx.tail(keep * b)

    def _ticks(self, w: int, m: int, cand: np.ndarray, anchor: np.ndarray,
               xx: np.ndarray, b: int) -> None:
        """Evaluate ``r`` at every boundary of the intervals ``cand`` (local, whole)."""
        # r(pb + j) - anchor = P_p(j) - 2 P_q(j) + P_s(j): one cumulative sum of the
        # combined ticks
        comb = xx.rows(cand * b, b - 1)
        comb -= 2.0 * xx.rows((cand - m) * b, b - 1)
        comb += xx.rows((cand - 2 * m) * b, b - 1)
        np.cumsum(comb, axis=1, out=comb)
        comb += anchor[:, None]
        self.hi[w] = max(self.hi[w], float(comb.max()))
        self.lo[w] = min(self.lo[w], float(comb.min()))

    def _partial(self, w: int, m: int, u: int, pi: np.ndarray, xx: np.ndarray,
                 length: int) -> None:
        """Every boundary of the partial last interval ``u`` (``length`` ticks) up to
        and including the horizon's end."""
        b = self.b
        anchor = (pi[u] - pi[u - m]) - (pi[u - m] - pi[u - 2 * m])
        comb = xx.rows(np.array([u * b]), length)[0]
        comb -= 2.0 * xx.rows(np.array([(u - m) * b]), length)[0]
        comb += xx.rows(np.array([(u - 2 * m) * b]), length)[0]
        r = np.cumsum(comb) + anchor
        self.hi[w] = max(self.hi[w], anchor, float(r.max()))
        self.lo[w] = min(self.lo[w], anchor, float(r.min()))
