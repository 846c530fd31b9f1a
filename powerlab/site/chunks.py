"""One draw's IT power, chunk by chunk over the horizon.

The engine never needs a draw's whole per-tick IT power at once: it builds the power of
one *chunk* of ticks (default 65,536, a few hundred kB per array, so that every pass
over it stays in the CPU cache), hands it to the reduction or the per-tick result, and
moves on.  The chunks carry their state across the boundary, so they join into exactly
the series the whole-horizon computation gives (each tick's value is computed by the
same floating-point operations in the same order whatever the chunk length: bit for
bit, see ``tests/site/test_engine.py``):

- the jobs' demand steps, spread over their GPUs' offsets (:func:`job_steps`), are
  scattered per chunk (every step whose spread touches the chunk; each chunk's sums in
  the same order as one scatter over the horizon) and summed cumulatively with the
  previous chunk's last value carried in;
- the symmetric first-order GPU transient (:func:`powerlab.site.transients.
  first_order_ticks`, equal to it within 1e-15 relative) runs as one ARMA(1, 1) filter
  of the demand whose state is carried from chunk to chunk (``scipy.signal.lfilter``
  with ``zi``);
- tripped nodes' power (:func:`powerlab.site.disturbances.apply_dark`) is removed where
  a chunk meets an outage.

The nonlinear GPU responses (a ramp limiter, unequal rise and fall) are built job by job
over the whole horizon (:func:`add_dense`) and then cut into the same chunks.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import signal

from ..exceptions import PowerlabError
from .jobplan import COMPUTE, IDLE
from .transients import first_order_rle, slew_rle

__all__ = ["DEFAULT_CHUNK_TICKS", "add_dense", "chunk_ticks", "dense_chunks",
           "it_power_chunks", "job_steps"]

#: Ticks per chunk unless asked otherwise: 512 kB per float64 array.
DEFAULT_CHUNK_TICKS = 65_536


def chunk_ticks(requested: int | None, per: int) -> int:
    """Chunk length: ``requested`` (default :data:`DEFAULT_CHUNK_TICKS`) rounded up to a
    whole number of ``per`` ticks (the reduction's base interval) [-]."""
    k = DEFAULT_CHUNK_TICKS if requested is None else requested
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise PowerlabError(f"chunk_ticks must be a whole number of ticks >= 1, got "
                            f"{requested!r}")
    k = int(k)
    return max(per, -(-k // per) * per)


def job_steps(plan, levels: np.ndarray, rnd, idle_state: int) -> tuple | None:
    """A job's demand steps and its offset histogram: ``(at, step, offsets, counts)``.

    The job's demand above idle is ``sum_j c[j] * x[k - j]`` with ``x`` piecewise
    constant; its tick-to-tick difference is the steps of ``x`` at the run starts
    (``at``, sorted; ``step`` [W per GPU]) spread by the offset histogram ``c``
    (``offsets`` [ticks] with ``counts`` GPUs, only offsets some GPU drew).  None when
    the job never changes its demand.
    """
    if not len(plan.states):
        return None
    vals = (levels - levels[idle_state])[plan.states]
    n = len(vals)
    at = np.empty(n + 1, np.int64)
    at[:n] = plan.starts
    at[n] = plan.starts[-1] + plan.lengths[-1]
    step = np.empty(n + 1)          # np.diff of (0, vals, 0), in one pass
    step[0] = vals[0]
    np.subtract(vals[1:], vals[:-1], out=step[1:n])
    step[n] = -vals[-1]
    nz = step != 0.0
    if not nz.all():
        at, step = at[nz], step[nz]
    if not len(at):
        return None
    used = rnd.offset_counts > 0  # offsets no GPU drew add nothing
    return (at.astype(np.int64, copy=False), step,
            rnd.offset_ticks[used].astype(np.int64, copy=False),
            rnd.offset_counts[used].astype(float))


class _Scatter:
    """Per chunk, the sum of every job's steps spread over its offsets, in reused
    buffers.  Each tick's entries are added one by one in a fixed order (job, offset,
    step: ``numpy.add.at`` is sequential), so that a tick's sum never depends on where
    the chunks start."""

    def __init__(self, parts: list, n: int, chunk: int):
        self.parts = [p for p in parts if p is not None]
        self.pad = max((int(p[2][-1] - p[2][0]) for p in self.parts), default=0) + 1
        self.idx = np.empty(0, np.int64)
        self.w = np.empty(0)
        self.out = np.empty(0)
        # per job, the steps whose spread touches each chunk: rows r0[i]..r1[i]-1
        first = np.arange(0, n, chunk)
        last = np.minimum(first + chunk, n)
        self.rows = []
        for at, step, offs, counts in self.parts:
            r0 = np.searchsorted(at, first - offs[-1], "left")
            r0[0] = 0   # steps before tick 0 land on tick 0
            r1 = np.searchsorted(at, last - offs[0], "left")
            self.rows.append((r0.tolist(), r1.tolist(), offs[:, None], counts[:, None]))
        self.chunk_len = chunk

    def chunk(self, a: int, b: int) -> np.ndarray:
        """Steps landing on ticks ``a..b-1`` (steps before tick 0 land on tick 0); a
        view of a reused buffer."""
        pad = self.pad
        i = a // self.chunk_len
        total = 0
        for (at, step, offs, counts), (r0, r1, _, _) in zip(self.parts, self.rows):
            total += max(0, r1[i] - r0[i]) * len(offs)
        if total > len(self.idx):
            size = max(total, 2 * len(self.idx))
            self.idx = np.empty(size, np.int64)
            self.w = np.empty(size)
        k = 0
        for (at, step, _, _), (r0, r1, offs, counts) in zip(self.parts, self.rows):
            lo, hi = r0[i], r1[i]
            if hi <= lo:
                continue
            m = (hi - lo) * len(offs)
            shape = (len(offs), hi - lo)   # offset-major: long inner loops
            np.add(offs + (pad - a), at[lo:hi], out=self.idx[k:k + m].reshape(shape))
            np.multiply(counts, step[lo:hi], out=self.w[k:k + m].reshape(shape))
            k += m
        size = b - a + 2 * pad + 1
        if len(self.out) < size:
            self.out = np.empty(max(size, 2 * len(self.out)))
        out = self.out[:size]
        out.fill(0.0)
        if k:
            idx = self.idx[:k]
            if a == 0:
                np.maximum(idx, pad, out=idx)
            np.add.at(out, idx, self.w[:k])
        return out[pad:pad + b - a]


def it_power_chunks(parts: list, n: int, base_w: float, tick_s: float, tau_s: float,
                    chunk: int, dark=None):
    """Yield ``(first tick, IT power [W])`` chunk by chunk for the linear engine path.

    Parameters
    ----------
    parts : list
        :func:`job_steps` of every job of the draw.
    n : int
        Ticks in the horizon.
    base_w : float
        Power with every GPU idle (idle GPUs, node overheads) [W].
    tick_s, tau_s : float
        Tick and the GPUs' (symmetric) first-order time constant, 0 for none [s].
    chunk : int
        Ticks per chunk.
    dark : callable, optional
        ``dark(x, a)`` removes tripped nodes' power from the chunk starting at tick
        ``a``, in place.

    The arrays yielded are reused: use each before asking for the next.
    """
    scat = _Scatter(parts, n, chunk)
    carry = 0.0
    if tau_s > 0:
        # the tick mean (1 - g) v[k] + g s[k] of the lagged state s[k] = a s[k-1] +
        # (1 - a) v[k-1] (transients.first_order_ticks) as one ARMA(1, 1) filter of the
        # demand, starting steady: one pass, its state carried across chunks
        ca = math.exp(-tick_s / tau_s)
        g = tau_s / tick_s * -math.expm1(-tick_s / tau_s)
        b_f = [1.0 - g, g * (1.0 - ca) - ca * (1.0 - g)]
        a_f = [1.0, -ca]
        zi_unit = signal.lfilter_zi(b_f, a_f)
    zi = None
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        v = scat.chunk(a, b) if scat.parts else np.zeros(b - a)
        v[0] += carry
        np.cumsum(v, out=v)
        carry = float(v[-1])
        v += base_w
        if tau_s > 0:
            if zi is None:
                zi = zi_unit * v[0]
            v, zi = signal.lfilter(b_f, a_f, v, zi=zi)
        if dark is not None:
            dark(v, a)
        yield a, v


def dense_chunks(x: np.ndarray, chunk: int):
    """Yield ``(first tick, view)`` of a whole-horizon series in chunks."""
    for a in range(0, len(x), chunk):
        yield a, x[a:a + chunk]


def add_dense(out: np.ndarray, plan, levels: np.ndarray, rnd, s: int, slew: float,
              tick: float, rise: float, fall: float) -> float:
    """Add a job's power to ``out`` (one draw's IT power over the horizon) tick by tick:
    the nonlinear GPU responses, a ramp limiter (``slew`` W per tick,
    :func:`~powerlab.site.transients.slew_rle`) or unequal rise and fall time constants
    (:func:`~powerlab.site.transients.first_order_rle`), applied per GPU to the job's
    template (its :class:`~powerlab.site.jobplan.JobPlan` at the per-state ``levels``,
    allocation from tick ``s``) before the shift by the offsets of ``rnd``
    (:class:`~powerlab.site.randomness.JobDraw`).

    Returns the ramp-limit deficit of compute power [ticks of full compute].
    """
    n = len(out)
    big_j = int(rnd.offset_ticks[-1])
    lo, hi = -big_j, n + big_j
    if slew > 0:
        lo -= math.ceil(float(np.ptp(levels)) / slew) + 1
    st, b0, b1 = plan.states, plan.starts, plan.starts + plan.lengths
    keep = (b1 > lo) & (b0 < hi)
    st, b0c, b1c = st[keep], np.maximum(b0[keep], lo), np.minimum(b1[keep], hi)
    ln = b1c - b0c
    pre = max(0, min(s, hi) - lo) if len(st) == 0 else b0c[0] - lo
    post = hi - (b1c[-1] if len(st) else lo + pre)
    states = np.concatenate([[IDLE], st, [IDLE]])
    lens = np.concatenate([[pre], ln, [post]])
    nz = lens > 0
    states, lens = states[nz], lens[nz]
    vals = levels[states]
    deficit = 0.0
    if slew > 0:
        y = slew_rle(vals, lens, slew)
        comp = np.repeat(states == COMPUTE, lens)
        x = np.repeat(vals, lens)
        core = slice(-lo, -lo + n)
        deficit = float(np.sum(1.0 - np.minimum(1.0, y[core][comp[core]]
                                                 / x[core][comp[core]])))
        y = y[-big_j - lo:]
    else:
        y = first_order_rle(vals, lens, tick, rise, fall)
    counts = rnd.offset_counts.astype(float)
    if len(counts) == 1:
        out += counts[0] * y
    elif len(counts) <= 64:
        out += np.convolve(y, counts, mode="valid")
    else:
        out += signal.oaconvolve(y, counts, mode="valid")
    return deficit
