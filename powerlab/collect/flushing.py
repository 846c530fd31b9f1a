"""The store side of a running collector: the bounded buffer, flushes and the writer.

:class:`Flushing` is the part of :class:`powerlab.collect.collector.Collector` that keeps
samples until they are on disk.  The sampling loop adds each tick's samples to a buffer
bounded by ``max_buffer_s`` (beyond it new samples are dropped and counted, sampling never
blocks) and to the live window; at each flush time it hands the buffer and the status
events to the writer thread (:meth:`Flushing._hand_over`), which writes them through
:func:`powerlab.telemetry.store.write_store` (atomically: new files, temporary name, fsync,
rename) and the side tables.  The writer holds one batch at a time: while a write runs,
the samples stay in the buffer and go out with the next flush once it is free.  A write
that fails stops the collector with a :class:`~powerlab.exceptions.StoreError`
(see the Faults section of :mod:`powerlab.collect.collector`).

The loss bound (issue 38: "one flush plus one write" was exceeded under load, 3.8 s
with a 1-s flush): what a SIGKILL loses is the batch with the writer plus the buffer.  A
batch holds the samples of at most ``max(F, W) + T`` (F the flush interval, W a write's
duration, T the sampling interval: the next hand-over waits for the writer), and the
buffer grows for at most ``W + T`` while that batch is written, then for ``F`` once it is
on disk.  So at any moment at most ``F + 2 W_max + 2 T`` seconds of samples are unsaved,
``ceil((F + 2 W_max + 2 T) / T)`` ticks of every GPU, where ``W_max`` is the longest
write so far, measured (a slow or loaded disk raises it; :meth:`Flushing.loss_bound`
states it, :meth:`Flushing.unsaved_samples` counts what is unsaved now).
"""

from __future__ import annotations

import collections
import math
import queue
import time
from pathlib import Path

import pandas as pd

from ..exceptions import StoreError
from ..telemetry import store
from .options import CollectorOptions
from .sidetables import events_frame, write_side_table
from .slots import Chunk, first_wall, is_full, last_wall, parts_to_frame

__all__ = ["Flushing"]


class Flushing:
    """Mixin of :class:`~powerlab.collect.collector.Collector`: buffer, flushes, writer."""

    def _init_flushing(self, opts: CollectorOptions) -> None:
        """The buffer, the live window and the writer's state."""
        self._writer = opts.writer
        self._max_rows = 0  # set at start (depends on the number of GPUs)
        self._writing = False  # a batch is with the writer (set by the sampler, cleared
        #                        by the writer when the batch is on disk or failed)
        self._dropped = 0
        self._dropped_total = 0
        self._dropped_span: list[int] = []
        self._buffer: list = []  # parts: a tick's row tuples or a batch's Chunk
        self._buffer_n = 0
        self._recent: collections.deque = collections.deque()  # parts, as _buffer
        self._recent_n = 0
        self._recent_max = 16
        self._writeq: queue.Queue = queue.Queue()
        self._error: StoreError | None = None
        self._rows_written = 0
        self._files: list[Path] = []
        self._last_collect: float | None = None
        self._inflight_n = 0          # samples of the batch with the writer
        self._write_s_max = 0.0       # the longest write so far [s] (measured)
        self._write_t0: float | None = None   # monotonic start of the write running

    def unsaved_samples(self) -> int:
        """Samples a SIGKILL now would lose: the buffer and the batch being written."""
        return self._buffer_n + self._inflight_n

    def loss_bound(self) -> tuple[int, float]:
        """``(samples, seconds)`` a SIGKILL can lose at most, from the writes measured so
        far (see the module docstring): ``F + 2 W_max + 2 T`` seconds, that many ticks of
        every GPU."""
        t = self.interval_s
        t0 = self._write_t0              # a write still running counts as long as it is
        w = max(self._write_s_max, 0.0 if t0 is None else time.monotonic() - t0)
        sec = self.flush_interval_s + 2 * w + 2 * t
        return math.ceil(sec / t - 1e-9) * max(1, len(self._slots)), sec

    def _hand_over(self, now: float, next_flush: float) -> float:
        """Hand the store buffer to the writer; returns the next flush time."""
        self._digest()
        self._flush()
        next_flush += self.flush_interval_s * (
            1 + int((now - next_flush) // self.flush_interval_s))
        self._next_flush = next_flush
        return next_flush

    def _keep(self, rows: list[tuple] | Chunk) -> None:
        """Add a tick's samples (or a batch's, see :mod:`.batch`) to the store buffer
        (bounded) and the live window."""
        n = len(rows)
        if not n:
            return
        self._last_collect = time.monotonic()   # /health: the latest collection
        with self._lock:
            if self.out is not None:
                if self._buffer_n < self._max_rows:
                    self._buffer.append(rows)
                    self._buffer_n += n
                else:  # the store is behind by more than max_buffer_s: drop, count
                    if not self._dropped:
                        self._dropped_span = [first_wall(rows), first_wall(rows)]
                    self._dropped += n
                    self._dropped_span[1] = last_wall(rows)
            recent = self._recent
            recent.append(rows)
            self._recent_n += n
            while self._recent_n - len(recent[0]) >= self._recent_max:
                self._recent_n -= len(recent.popleft())

    def _flush(self) -> None:
        """Hand the buffered samples and events to the writer thread."""
        if self._dropped:
            n, (t0, t1) = self._dropped, self._dropped_span
            self._dropped_total += n
            self._dropped = 0
            self._event(None, "dropped",
                        f"{n} sample(s) from {pd.Timestamp(t0, tz='UTC').isoformat()} to "
                        f"{pd.Timestamp(t1, tz='UTC').isoformat()} not stored: the store "
                        f"fell more than max_buffer_s = {self.max_buffer_s:g} s behind",
                        wall_ns=t1)
        with self._lock:
            rows, self._buffer = self._buffer, []
            self._buffer_n = 0
            events, self._events = self._events, []
        if self.out is not None and (rows or events):
            self._writing = True
            self._inflight_n = sum(len(p) for p in rows)
            self._writeq.put((rows, events))

    def _write_loop(self) -> None:
        writer = self._writer or store.write_store
        while True:
            item = self._writeq.get()
            if item is None:
                return
            rows, events = item
            if self._error is not None:
                self._writing = False
                continue
            t0 = self._write_t0 = time.monotonic()
            try:
                if rows:
                    frame = parts_to_frame(rows, self.host, conformed=False, by_gpu=True)
                    files = writer(frame, self.out)
                    self._files.extend(files)
                    self._rows_written += len(frame)
                if events:
                    self._write_events(events)
            except Exception as exc:  # noqa: BLE001 - any failure to record stops it
                first = pd.Timestamp(first_wall(rows[0]), unit="ns", tz="UTC") if rows else None
                lost = sum(len(p) for p in rows)
                full = " (the disk is full or a size limit was hit)" if is_full(exc) else ""
                msg = (f"collector stopped: cannot write to store {self.out}{full}: {exc}. "
                       f"Files written before are intact ({self._rows_written} samples in "
                       f"{len(self._files)} file(s)); {lost} buffered sample(s)"
                       + (f" from {first.isoformat()} on" if first is not None else "")
                       + " (and any later ones) were not saved.")
                err = StoreError(msg.replace("\n", " "))
                err.__cause__ = exc
                self._error = err
                self._stop_flag = True
                self._wake.set()
            self._write_s_max = max(self._write_s_max, time.monotonic() - t0)
            self._write_t0 = None
            self._inflight_n = 0
            self._writing = False

    def _write_events(self, events: list[dict]) -> None:
        self._files.append(write_side_table(self.out, "events", events_frame(events)))

    def _write_devices(self) -> None:
        self._files.append(write_side_table(self.out, "devices", self.device_facts()))
