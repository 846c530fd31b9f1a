"""The sampling loop of a running collector: one tick every ``interval_s``.

:class:`Sampling` is the part of :class:`powerlab.collect.collector.Collector` that runs
in its sampling thread.  Each tick reads the signal groups due in it (see
``signal_intervals_s``): ticks that read only the power group take the bulk path of
:mod:`powerlab.collect.batch` (:meth:`Sampling._fast_tick`: one raw field-value call per
GPU, decoded at least every :data:`BATCH_S`), the others read GPU by GPU
(:meth:`Sampling._read_slots`).  A tick that starts more than one interval late skips
the ticks it missed (counted), a failed read takes its GPU down (see
:mod:`powerlab.collect.faults`), and at each flush time the buffer goes to the writer
(:mod:`powerlab.collect.flushing`).  The loop runs at up to 1 kHz: it adds no per-tick
cost (``benchmarks/bench_collector.py``).
"""

from __future__ import annotations

import ctypes
import math
import queue
import sys
import threading
import time

from ..exceptions import NVMLError
from . import nvml
from .batch import PowerBatch
from .options import CollectorOptions
from .signals import GROUPS
from .slots import I_ENERGY, I_POWER, I_TS_ENERGY, I_TS_POWER, Slot

__all__ = ["BATCH_S", "Sampling"]

#: Power-only ticks are decoded in bulk at least this often [s] (see :mod:`.batch`).
BATCH_S = 0.1


def _fine_timer_slack() -> None:
    """Ask Linux for 1 us timer slack in this thread (default 50 us), so that the sleeps
    between ticks end on time at 1 kHz; a no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):  # pragma: no cover
        pass


class Sampling:
    """Mixin of :class:`~powerlab.collect.collector.Collector`: its sampling loop."""

    def _init_sampling(self, opts: CollectorOptions) -> None:
        """The sampling loop's state: schedule, tick statistics, the NVML call running."""
        self._every = opts.every()  # ticks between reads of each signal group
        self._k = 0
        self._t0 = math.nan
        self._next_flush = math.nan
        self._ticks = 0
        self._missed = 0
        self._late_sum = 0.0
        self._late_max = 0.0
        self._gen = 0  # generation of the sampling thread (a new one after a hang)
        self._call: tuple | None = None  # (slot, monotonic start) of the NVML read running
        self._call_lock = threading.Lock()
        self._sampler: threading.Thread | None = None
        self._tick_rows: list[tuple] = []
        self._batch: PowerBatch | None = None  # power-only ticks not yet decoded
        self._digest_t = 0.0
        self._recovered: queue.SimpleQueue = queue.SimpleQueue()

    def _groups_for(self, k: int) -> int:
        mask = 0
        for bit, g in enumerate(GROUPS):
            if k % self._every[g] == 0:
                mask |= 1 << bit
        return mask

    def _sample_loop(self, gen: int = 0) -> None:
        """One tick every ``interval_s``: power-only ticks in bulk (``_fast_tick``),
        others per GPU (``_read_slots``); runs at up to 1 kHz: add no per-tick cost
        (``benchmarks/bench_collector.py``)."""
        interval = self.interval_s
        period = 1
        for n in self._every.values():
            period = period * n // math.gcd(period, n)
        masks = [self._groups_for(k) for k in range(period)]
        t0 = self._t0
        next_flush = self._next_flush
        k = self._k
        _fine_timer_slack()
        mem_every = max(1, round(1.0 / interval))  # framebuffer memory about once a second
        mono = time.monotonic
        sleep = time.sleep
        slots = self._slots
        while not self._stop_flag and self._error is None:
            self._k = k
            target = t0 + k * interval
            now = mono()
            if target > now:
                # time.sleep costs less CPU per wake-up than Event.wait; sleep at most
                # 0.1 s at a time so that a stop request is seen promptly
                sleep(min(target - now, 0.1))
                if self._stop_flag or self._error is not None:
                    break
                now = mono()
                if target > now:
                    continue
            late = now - target
            if late >= interval:
                skip = int(late // interval)
                k += skip
                self._missed += skip
                late -= skip * interval
            self._ticks += 1
            self._late_sum += late
            self._late_max = max(self._late_max, late)
            groups = masks[k % period]
            batch = self._batch
            if not self._recovered.empty():
                self._reattach(batch)
            rows = self._tick_rows = []
            mem_tick = self._httpd is not None and k % mem_every == 0
            if groups == 1 and not mem_tick and batch.ready:  # power only: in bulk
                if self._fast_tick(batch, gen):
                    return  # replaced by the watchdog while a call hung
            else:
                self._digest()  # keep the rows in time order
                if self._read_slots(slots, rows, groups, mem_tick, gen):
                    return  # replaced by the watchdog while a call hung
            if rows:
                self._keep(rows)
            elif batch.i >= batch.ticks or now - self._digest_t >= BATCH_S:
                self._digest()
            # a flush is due: hand the buffer over when the writer is free; otherwise
            # keep buffering and hand it over at the first tick the writer is free
            if now >= next_flush and not self._writing:
                next_flush = self._hand_over(now, next_flush)
            k += 1

    def _reattach(self, batch: PowerBatch) -> None:
        """GPUs the retry thread has recovered rejoin sampling (after the samples taken
        before the outage are decoded; energy is not bridged across the outage)."""
        self._digest()  # the samples before the outage first
        while not self._recovered.empty():
            slot, dev = self._recovered.get()
            slot.close_energy_segment()  # energy is not bridged across the outage
            slot.device = dev
            slot.down = False
            self.devices[slot.index] = dev
            batch.attach(self._slots.index(slot), dev)


    def _read_slots(self, slots: list[Slot], rows: list, groups: int, mem_tick: bool,
                    gen: int) -> bool:
        """One tick of ``groups`` read GPU by GPU into ``rows`` (rates, jitter and energy
        accounted per sample); a failed read takes its GPU down.  True when the watchdog
        replaced this thread meanwhile."""
        call_lock = self._call_lock
        mono = time.monotonic
        wall = time.time_ns
        isnan = math.isnan
        for slot in slots:
            dev = slot.device
            if dev is None:
                continue
            w = wall()
            m = mono()
            self._call = (slot, m)
            try:
                vals, ts = dev.read(groups)
                if mem_tick:
                    slot.fb = dev.memory_mib()
            except NVMLError as exc:
                with call_lock:
                    if self._gen != gen:
                        return True  # replaced by the watchdog while this call hung
                    self._call = None
                self._fail(slot, exc, w, m)
                continue
            with call_lock:
                if self._gen != gen:
                    return True
                self._call = None
            row = (w, slot.index, slot.uuid, m, *vals, *ts)
            rows.append(row)
            # rates and jitter
            if slot.n:
                dt = m - slot.last
                slot.sum_dt += dt
                slot.sum_dt2 += dt * dt
                slot.max_dt = max(slot.max_dt, dt)
            else:
                slot.first = m
            slot.last = m
            slot.n += 1
            mn = slot.mask_n
            mn[groups] = mn.get(groups, 0) + 1
            # energy two ways
            e = row[I_ENERGY]
            if not isnan(e):
                te = row[I_TS_ENERGY]
                rec = (e, te * 1e-6 if te is not None else w * 1e-9)
                if slot.e_last is not None and e < slot.e_last[0]:
                    slot.close_energy_segment()  # counter reset: a new stretch
                if slot.e_first is None:
                    slot.e_first = rec
                slot.e_last = rec
            p = row[I_POWER]
            tp = row[I_TS_POWER]
            if tp is not None and not isnan(p):
                t = tp * 1e-6
                if slot.p_t is not None:
                    slot.e_int += 0.5 * (p + slot.p_prev) * (t - slot.p_t)
                    slot.int_n += 1
                slot.p_prev = p
                slot.p_t = t
            slot.latest[groups] = row
        return False

    def _new_batch(self) -> PowerBatch:
        return PowerBatch(self._slots, min(256, math.ceil(BATCH_S / self.interval_s)))

    def _digest(self) -> None:
        """Decode the power-only ticks recorded so far into rows (:mod:`.batch`)."""
        self._digest_t = time.monotonic()
        if not self._batch.i and not self._batch.j:
            return  # nothing recorded since the last digest
        rows, failed = self._batch.digest()
        if rows:
            self._keep(rows)
        for pos, ret, w, m in failed:  # per-field errors: taken out at that sample
            self._fail(self._slots[pos], nvml.error_for(ret), w, m)

    def _fast_tick(self, batch: PowerBatch, gen: int) -> bool:
        """One power-only tick: a raw field-value call per GPU into the batch (decoded
        later, in bulk).  True when the watchdog replaced this thread meanwhile."""
        i = batch.i
        jl, wl, ml = batch.j, batch.wall, batch.mono
        wall, mono, call_lock = time.time_ns, time.monotonic, self._call_lock
        failed = []
        for slot, fn, h, count, records, j in batch.args[i]:
            if slot.device is None:
                continue
            w = wall()
            m = mono()
            self._call = (slot, m)
            ret = fn(h, count, records)
            with call_lock:
                if self._gen != gen:
                    return True
                self._call = None
            if ret:
                failed.append((j % batch.n, ret, w, m))
                continue
            jl.append(j)
            wl.append(w)
            ml.append(m)
        batch.i = i + 1
        if failed:
            self._digest()  # what the failed GPUs recorded before, then the events
            for pos, ret, w, m in sorted(failed):
                self._fail(self._slots[pos], nvml.error_for(ret), w, m)
        return False
