"""Power-only ticks in bulk: raw NVML field values recorded per tick, decoded per batch.

At 1 kHz most of a collector's ticks read only the power group (``power_w``,
``power_avg_w``, ``energy_j``) when the slower groups are given their own intervals
(``signal_intervals_s``; nothing is slowed unless asked).  For those ticks the sampling
loop makes one ``nvmlDeviceGetFieldValues`` call per GPU straight into a preallocated
array of ``nvmlFieldValue_t`` records reused across ticks, and keeps only the wall and
monotonic clocks of the call in Python.  NVML semantics relied on (NVML API Reference
Guide, section "Field Value Queries", ``nvmlDeviceGetFieldValues``, and the
``nvmlFieldValue_t`` data structure): each record's ``fieldId`` must be filled in before
the call (here once, when a GPU is attached); the call returns ``NVML_SUCCESS`` when any
value was populated, so each record's own ``nvmlReturn`` is checked; each record carries
its ``valueType`` (which member of the value union is set) and ``timestamp`` [us].  The
field ids are checked again at each digest and filled in anew should a library ever
overwrite them.  Every ``batch_s`` (0.1 s), before any tick that reads other groups,
before a GPU fails or recovers, at every flush and at stop, :meth:`PowerBatch.digest`
decodes the records of all those ticks at once with numpy and returns the same sample
rows, with the same values, as :meth:`powerlab.collect.nvml.Device.read` would have,
updating each GPU's rates, jitter, energy (counter and integral) and latest row on the
way.  Nothing is decoded later than that, so the crash-safety bound (a flush interval
plus one write) is unchanged: a batch is digested before each flush.

A per-field error other than "not supported" in a tick takes that GPU out exactly as
:meth:`~powerlab.collect.nvml.Device.read` does (checked for the whole tick with one
numpy test, per GPU only when it fires).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from .fieldvalues import FV_DTYPE, decode_values
from .nvml_codes import ERR_NOT_SUPPORTED
from .sidetables import NAT
from .signals import SAMPLE_COLUMNS, TIMESTAMP_COLUMNS
from .slots import Chunk

__all__ = ["PowerBatch"]

_KMAX = 4
_NS = len(SAMPLE_COLUMNS)
_NT = len(TIMESTAMP_COLUMNS)
_POWER_MASK = 1  # the power group's bit (signals.GROUPS order)


class PowerBatch:
    """Field-value records of the power-only ticks since the last digest.

    Parameters
    ----------
    slots : sequence of Slot
        The collector's GPUs, in sampling order (their position indexes the buffer).
    ticks : int
        Ticks held before a digest is due.

    Attributes
    ----------
    views : list of list
        ``views[i][pos]``: the ctypes record array the call of tick ``i`` on the GPU at
        position ``pos`` writes into.
    j, wall, mono : list
        Per recorded sample: flat record index ``i * n_gpus + pos``, wall clock [ns since
        epoch] and monotonic clock [s] just before the call.
    i : int
        Ticks recorded so far.
    """

    def __init__(self, slots: Sequence, ticks: int):
        self.slots = list(slots)
        self.n = len(self.slots)
        self.ticks = max(1, int(ticks))
        self._mem = bytearray(self.ticks * self.n * _KMAX * FV_DTYPE.itemsize)
        self.rec = np.frombuffer(self._mem, dtype=FV_DTYPE).reshape(
            self.ticks, self.n, _KMAX)
        self.views: list[list] = [[None] * self.n for _ in range(self.ticks)]
        self.plans: list = [None] * self.n
        self.calls: list = [None] * self.n
        self.args: list[list] = [[] for _ in range(self.ticks)]
        self.j: list[int] = []
        self.wall: list[int] = []
        self.mono: list[float] = []
        self.i = 0
        self._ready: bool | None = None
        self._ids = np.zeros((self.n, _KMAX), dtype=np.uint32)  # requested field ids
        for pos, slot in enumerate(self.slots):
            self.attach(pos, slot.device)

    def attach(self, pos: int, dev) -> None:
        """Point position ``pos`` at ``dev`` (a new device after a recovery, or None)."""
        plan = None if dev is None else dev.power_batch
        self.plans[pos] = plan
        self._ready = None
        if plan is None:
            self.calls[pos] = None
            self._args()
            return
        fn, handle, arr_type, ids, _cols = plan
        self._ids[pos] = 0
        self._ids[pos, :len(ids)] = ids
        for i in range(self.ticks):
            self.rec[i, pos, :len(ids)]["fieldId"] = ids
            self.views[i][pos] = arr_type.from_buffer(
                self._mem, ((i * self.n + pos) * _KMAX) * FV_DTYPE.itemsize)
        self.calls[pos] = (fn, handle, len(ids))
        self._args()

    def _args(self) -> None:
        """``args[i]``: per GPU that the batch can read, ``(slot, fn, handle, count,
        records, flat index)`` for tick ``i`` -- the sampling loop's whole work per GPU."""
        n = self.n
        self.args = [[(self.slots[pos], *self.calls[pos], self.views[i][pos], i * n + pos)
                      for pos in range(n) if self.calls[pos] is not None]
                     for i in range(self.ticks)]

    @property
    def ready(self) -> bool:
        """Whether every GPU that is up can be read through the batch (cached; call
        :meth:`changed` when a GPU goes down)."""
        if self._ready is None:
            self._ready = all(c is not None for c, s in zip(self.calls, self.slots)
                              if s.device is not None)
        return self._ready

    def changed(self) -> None:
        """A GPU went down or came back: recompute :attr:`ready` at the next tick."""
        self._ready = None

    # ------------------------------------------------------------------ digest
    def digest(self) -> tuple[list[tuple], list[tuple[int, int, int, float]]]:
        """Decode the recorded ticks into sample rows (tick order, then GPU order, the
        layout of :data:`powerlab.collect.slots.ROW_COLS`), account them in their slots
        and start an empty batch.

        Returns
        -------
        rows : list of tuple
            The samples.
        failed : list of (pos, NVML return, wall, mono)
            GPUs whose records carried an error other than "not supported": that sample
            and the GPU's later ones in the batch are not returned (the GPU is taken out
            at that sample, as :meth:`~powerlab.collect.nvml.Device.read` would have).
        """
        n, t, g = len(self.j), self.i, self.n
        failed: list = []
        rows: Chunk | list
        if not n:
            rows = []
        elif (n == t * g and self._uniform()
              and not self.rec[:t, :, :self.calls[0][2]]["ret"].any()):
            rows = self._dense(t)
        else:
            rows, failed = self._general()
        if t and not (self.rec[:t]["fieldId"] == self._ids).all():
            self.rec["fieldId"] = self._ids  # the library wrote over them: ask anew
        self.j, self.wall, self.mono = [], [], []
        self.i = 0
        return rows, failed

    def _uniform(self) -> bool:
        first = self.plans[0]
        return first is not None and all(
            p is not None and p[3] == first[3] and p[4] == first[4] for p in self.plans)

    def _dense(self, t: int) -> Chunk:
        """Every GPU in every tick, one plan, no error: whole-batch arrays (t, n)."""
        g = self.n
        vals, tsv = self._dense_values(t)
        wall = self.wall
        mono = np.asarray(self.mono, dtype=np.float64).reshape(t, g)
        slots = self.slots
        rows = _chunk(np.asarray(wall, dtype=np.int64),
                      np.tile(np.array([s.index for s in slots], dtype=np.int16), t),
                      [s.uuid for s in slots] * t, mono.ravel(),
                      [v.ravel() for v in vals],
                      [None if x is None else x.ravel() for x in tsv])
        p, e = vals[0], vals[2]
        tp = None if tsv[0] is None else tsv[0] * 1e-6
        if tsv[2] is not None:
            te = tsv[2] * 1e-6
        else:
            te = np.asarray(wall, dtype=np.float64).reshape(t, g) * 1e-9
        e_ok = not np.isnan(e).any()
        last_e = np.array([s.e_last[0] if s.e_last is not None else -math.inf
                           for s in slots])
        if not e_ok or (e[0] < last_e).any() or (t > 1 and (e[1:] < e[:-1]).any()) \
                or np.isnan(p).any() or tp is None:
            # NaN or an energy-counter reset somewhere: GPU by GPU
            self._account_each(rows, t, vals, tsv, mono)
        else:
            self._account_all(rows, t, mono, (p, tp), (e, te))
        return rows

    def _dense_values(self, t: int) -> tuple[list, list]:
        """The power group's values (t, n) and NVML timestamps (t, n, or None) of a
        dense batch, decoded with its one plan."""
        rec = self.rec[:t]
        vals = [np.full((t, self.n), math.nan) for _ in range(3)]
        tsv = [None, None, None]
        for f, (col, ts_slot, scale) in enumerate(self.plans[0][4]):
            r = rec[:, :, f]
            vals[col] = decode_values(r["vtype"], r["value"]) * scale
            tsv[ts_slot] = r["timestamp"]
        return vals, tsv

    def _account_each(self, rows: Chunk, t: int, vals, tsv, mono: np.ndarray) -> None:
        """Account a dense batch GPU by GPU (:func:`_account`: NaN readings, counter
        resets)."""
        g = self.n
        rows_sel = np.arange(t * g).reshape(t, g)
        flat = [v.ravel() for v in vals]
        tsf = np.zeros((3, t * g), dtype=np.int64)
        tok = np.zeros((3, t * g), dtype=bool)
        for k in range(3):
            if tsv[k] is not None:
                tsf[k] = tsv[k].ravel()
                tok[k] = True
        for pos in range(g):
            sel = rows_sel[:, pos]
            _account(self.slots[pos], rows, sel, mono[:, pos], flat, tsf, tok, self.wall)

    def _account_all(self, rows: Chunk, t: int, mono: np.ndarray, power, energy) -> None:
        """Account a dense batch without NaN or counter reset: rates, jitter, energy
        two ways and the latest rows of every GPU from whole-batch arrays; ``power`` is
        ``(p, tp)`` and ``energy`` ``(e, te)``, values and times (t, n)."""
        g = self.n
        (p, tp), (e, te) = power, energy
        d = np.diff(mono, axis=0)
        sum_d = d.sum(0).tolist()
        sum_d2 = (d * d).sum(0).tolist()
        max_d = d.max(0).tolist() if t > 1 else [-math.inf] * g
        inc = (0.5 * (p[1:] + p[:-1]) * np.diff(tp, axis=0)).sum(0).tolist()
        m0, m1 = mono[0].tolist(), mono[-1].tolist()
        p0, p1 = p[0].tolist(), p[-1].tolist()
        tp0, tp1 = tp[0].tolist(), tp[-1].tolist()
        e0, e1 = e[0].tolist(), e[-1].tolist()
        te0, te1 = te[0].tolist(), te[-1].tolist()
        latest = rows.rows(range((t - 1) * g, t * g))
        for pos, slot in enumerate(self.slots):
            if slot.n:
                dt = m0[pos] - slot.last
                slot.sum_dt += sum_d[pos] + dt
                slot.sum_dt2 += sum_d2[pos] + dt * dt
                slot.max_dt = max(slot.max_dt, max_d[pos], dt)
            else:
                slot.first = m0[pos]
                slot.sum_dt += sum_d[pos]
                slot.sum_dt2 += sum_d2[pos]
                if t > 1:
                    slot.max_dt = max(slot.max_dt, max_d[pos])
            slot.last = m1[pos]
            slot.n += t
            slot.mask_n[_POWER_MASK] = slot.mask_n.get(_POWER_MASK, 0) + t
            if slot.e_first is None:
                slot.e_first = (e0[pos], te0[pos])
            slot.e_last = (e1[pos], te1[pos])
            if slot.p_t is not None:
                slot.e_int += 0.5 * (p0[pos] + slot.p_prev) * (tp0[pos] - slot.p_t)
                slot.int_n += 1
            slot.e_int += inc[pos]
            slot.int_n += t - 1
            slot.p_prev, slot.p_t = p1[pos], tp1[pos]
            slot.latest[_POWER_MASK] = latest[pos]

    def _general(self) -> tuple[Chunk | list, list]:
        """Any batch: GPUs missing from some ticks, per-field returns, mixed plans."""
        j = np.asarray(self.j, dtype=np.intp)
        pos_all = j % self.n
        recs = self.rec.reshape(-1, _KMAX)[j]
        wall = self.wall
        mono = np.asarray(self.mono, dtype=np.float64)
        failed = []
        rets = recs["ret"]
        bad = ((rets != 0) & (rets != ERR_NOT_SUPPORTED)).any(axis=1)
        if bad.any():  # a GPU is taken out at its first bad sample
            keep = np.ones(len(j), dtype=bool)
            for pos in np.unique(pos_all[bad]).tolist():
                q = int(np.flatnonzero(bad & (pos_all == pos))[0])
                k = self.calls[pos][2]
                ret = next(int(r) for r in rets[q, :k] if r not in (0, ERR_NOT_SUPPORTED))
                failed.append((pos, ret, wall[q], float(mono[q])))
                keep &= ~((pos_all == pos) & (np.arange(len(j)) >= q))
            j, pos_all, recs, mono = j[keep], pos_all[keep], recs[keep], mono[keep]
            wall = [w for w, kq in zip(wall, keep.tolist()) if kq]
        n = len(j)
        if not n:
            return [], failed
        vals = [np.full(n, math.nan) for _ in range(3)]  # power_w, power_avg_w, energy_j
        tsv = np.zeros((3, n), dtype=np.int64)
        tsok = np.zeros((3, n), dtype=bool)
        groups = []
        for pos in np.unique(pos_all).tolist():
            sel = np.flatnonzero(pos_all == pos)
            groups.append((pos, sel))
            for f, (col, ts_slot, scale) in enumerate(self.plans[pos][4]):
                r = recs[sel, f]
                ok = r["ret"] == 0
                v = decode_values(r["vtype"], r["value"]) * scale
                v[~ok] = math.nan
                vals[col][sel] = v
                tsv[ts_slot, sel] = r["timestamp"]
                tsok[ts_slot, sel] = ok
        slots = self.slots
        pl = pos_all.tolist()
        rows = _chunk(np.asarray(wall, dtype=np.int64),
                      np.array([slots[p].index for p in pl], dtype=np.int16),
                      [slots[p].uuid for p in pl], mono, vals,
                      [np.where(tsok[k], tsv[k], NAT) for k in range(3)])
        for pos, sel in groups:
            _account(slots[pos], rows, sel, mono[sel], vals, tsv, tsok, wall)
        return rows, failed


def _chunk(wall, index, uuid, mono, vals, ts) -> Chunk:
    """The bulk path's samples as a :class:`~powerlab.collect.slots.Chunk`: only the
    power group's columns are read (the others None: NaN, NA, NaT)."""
    return Chunk((wall, index, uuid, mono, *vals, *([None] * (_NS - 3)), *ts,
                  *([None] * (_NT - 3))), len(wall))


def _account(slot, rows: Chunk, sel: np.ndarray, m: np.ndarray, vals, tsv, tsok,
             wall: list[int]) -> None:
    """Rates, jitter, energy two ways and the latest row of one GPU's samples ``sel``,
    exactly as the per-tick loop keeps them (see :class:`powerlab.collect.slots.Slot`)."""
    cnt = len(sel)
    if slot.n:
        dts = np.diff(m, prepend=slot.last)
    else:
        slot.first = float(m[0])
        dts = np.diff(m)
    if len(dts):
        slot.sum_dt += float(dts.sum())
        slot.sum_dt2 += float((dts * dts).sum())
        slot.max_dt = max(slot.max_dt, float(dts.max()))
    slot.last = float(m[-1])
    slot.n += cnt
    slot.mask_n[_POWER_MASK] = slot.mask_n.get(_POWER_MASK, 0) + cnt
    e = vals[2][sel]
    p = vals[0][sel]
    ev_ok = ~np.isnan(e)
    te = np.where(tsok[2, sel], tsv[2, sel] * 1e-6,
                  np.asarray([wall[q] for q in sel.tolist()], dtype=np.float64) * 1e-9)
    tp_ok = tsok[0, sel] & ~np.isnan(p)
    tp = tsv[0, sel] * 1e-6
    # energy-counter resets: a reading below the previous one starts a new stretch
    rv = np.flatnonzero(ev_ok)
    resets: list[int] = []
    if len(rv):
        evals = e[rv]
        prev = np.empty(len(rv))
        prev[0] = slot.e_last[0] if slot.e_last is not None else -math.inf
        prev[1:] = evals[:-1]
        resets = rv[evals < prev].tolist()
    reset_set = set(resets)
    bounds = [*sorted({0, *resets}), cnt]
    for a, b in itertools.pairwise(bounds):
        if a in reset_set:
            slot.close_energy_segment()
        piece = rv[(rv >= a) & (rv < b)]
        if len(piece):
            first = (float(e[piece[0]]), float(te[piece[0]]))
            last = (float(e[piece[-1]]), float(te[piece[-1]]))
            if slot.e_first is None:
                slot.e_first = first
            slot.e_last = last
        pp = np.flatnonzero(tp_ok[a:b]) + a
        if len(pp):
            pv, tv = p[pp], tp[pp]
            if slot.p_t is not None:
                pv = np.concatenate(([slot.p_prev], pv))
                tv = np.concatenate(([slot.p_t], tv))
            if len(pv) > 1:
                slot.e_int += float((0.5 * (pv[1:] + pv[:-1]) * np.diff(tv)).sum())
                slot.int_n += len(pv) - 1
            slot.p_prev = float(pv[-1])
            slot.p_t = float(tv[-1])
    slot.latest[_POWER_MASK] = rows.row(int(sel[-1]))
