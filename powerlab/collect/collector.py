"""A running NVML collector: samples GPUs at a fixed rate and records them crash-safely.

:class:`Collector` samples every selected GPU once per tick through :mod:`powerlab.collect.nvml`
(one ``nvmlDeviceGetFieldValues`` call for power, energy and memory temperature, plus
individual calls for clocks, temperatures, utilisation, power limit and throttle
reasons), keeps a live window of recent samples for notebooks, and flushes buffered
samples to a Parquet store (:func:`powerlab.telemetry.store.write_store`: new files, temporary
name, fsync, rename) every ``flush_interval_s``.

Slower signals, only when asked
-------------------------------
Every signal group is read every tick unless ``signal_intervals_s`` gives it a longer
interval (e.g. ``{"temperature": 1.0, "clocks": 1.0, "utilization": 1.0,
"power_limit": 1.0}``; ``powerlab collect --signal-interval-s temperature=1``); the
columns of a group not read in a tick are NaN (NA for ``throttle_reasons``), and
:class:`CollectorReport` gives each group's achieved rate.  Ticks that read only the
power group (``power_w``, ``power_avg_w``, ``energy_j``) take the bulk path of
:mod:`powerlab.collect.batch`: one raw ``nvmlDeviceGetFieldValues`` call per GPU into
records reused across ticks, decoded with numpy at least every :data:`BATCH_S` (0.1 s),
before any other tick, fault, recovery, flush and at stop -- the same values, NVML
timestamps, rates and energy figures as the per-tick path.  On that path the live window
(:meth:`Collector.recent`) and ``/metrics`` lag by up to 0.1 s, and the buffer bound
(``max_buffer_s``) is checked per batch (it may be passed by one batch, 0.1 s).  This is
what keeps 8 GPUs at 1 kHz under 10 % of one core (``benchmarks/bench_collector.py``).

Faults
------
* A GPU that is lost, times out or answers ``Unknown`` gets a status event, is taken out
  of the tick loop and retried in the background with exponential backoff; the other
  GPUs keep being sampled on schedule.  A successful retry records ``recovered``.
* An NVML call that does not return (a hung driver call) within ``hang_timeout_s``: a
  watchdog records a ``hang`` event, takes that GPU out of the tick loop and starts a
  fresh sampling thread that carries on the schedule with the other GPUs (the stuck
  thread ends, without recording anything, whenever its call returns).  The GPU is
  retried like a lost one; each retry runs in its own thread, so a retry that hangs too
  blocks nothing.  The other GPUs miss at most ``hang_timeout_s`` of samples, once.
* SIGKILL at any moment: files in the store are complete (the store writes atomically)
  and at most one flush interval plus the time of one write of samples is lost.  The
  writer holds one batch at a time: when a write is still running at a flush time, the
  samples stay in the sampler's buffer and go out together with the next flush once the
  writer is free (no queue of batches builds up behind a slow disk, so a write slower
  than the flush interval makes the flushes as frequent as the disk allows, and the
  loss at most that write's time twice).  The buffer is bounded by ``max_buffer_s``:
  beyond it new samples are **dropped** (sampling never blocks) and counted in a
  ``dropped`` status event and in :attr:`CollectorReport.dropped_samples`.
* A store write that fails (full disk, quota, file-size limit, permissions) stops the
  collector with a :class:`~powerlab.exceptions.StoreError`; files written before are
  untouched.

Status events are written beside the data under ``STORE/events/`` (read them with
:func:`read_events`), and the GPUs' static facts (name, UUID, serial, TDP, driver,
capabilities) once per start under ``STORE/devices/`` (:func:`read_devices`).
"""

from __future__ import annotations

import collections
import math
import queue
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Self

import pandas as pd

from .._options import choice
from ..exceptions import NVMLError, PowerlabError, StoreError
from . import nvml
from .batch import PowerBatch
from .faults import FaultHandling
from .metrics import serve_metrics
from .run_report import CollectorReport
from .sidetables import (
    DEVICE_COLUMNS,
    EVENT_COLUMNS,
    device_facts_frame,
    events_frame,
    read_devices,
    read_events,
    write_side_table,
)
from .slots import (
    I_ENERGY,
    I_POWER,
    I_TS_ENERGY,
    I_TS_POWER,
    Chunk,
    Slot,
    first_wall,
    gpu_table,
    is_full,
    last_wall,
    latest_by_gpu,
    parts_to_frame,
)

__all__ = ["DEVICE_COLUMNS", "EVENT_COLUMNS", "Collector", "CollectorReport", "read_devices",
           "read_events"]  # the side-table names are re-exported from .sidetables

#: Power-only ticks are decoded in bulk at least this often [s] (see :mod:`.batch`).
BATCH_S = 0.1


def _fine_timer_slack() -> None:
    """Ask Linux for 1 us timer slack in this thread (default 50 us), so that the sleeps
    between ticks end on time at 1 kHz; a no-op elsewhere."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):  # pragma: no cover
        pass


class Collector(FaultHandling):
    """Sample GPUs through NVML into a live window and a Parquet store.

    Parameters
    ----------
    out : path-like, optional
        Store folder; None keeps samples in memory only (the live window).
    interval_s : float, default 0.1
        Tick interval [s].
    gpus : sequence of int, optional
        NVML indices to sample; all GPUs when None.
    flush_interval_s : float, default 10.0
        How often buffered samples are written to the store [s]; a SIGKILL loses at
        most this plus the time of one write (when writes take longer than this, at most
        two writes' time; see Faults).
    signal_intervals_s : mapping of str to float, optional
        Slower intervals for signal groups (``power``, ``temperature``, ``clocks``,
        ``utilization``, ``power_limit``) [s], rounded to a whole number of ticks; e.g.
        ``{"temperature": 1.0}``.  Columns of a group not read in a tick are NaN.
    host : str, optional
        Host name recorded with the samples (default: this machine's).
    window_s : float, default 60.0
        Length of the live window returned by :meth:`recent` [s].
    retry_backoff_s : (float, float), default (0.5, 30.0)
        First and largest wait before retrying a failed GPU [s]; doubles per failure.
    prometheus_port : int, optional
        Serve ``/metrics`` with DCGM-compatible names on this port (0: any free port).
    prometheus_addr : str, default "127.0.0.1"
        Address the metrics endpoint binds to (``"0.0.0.0"`` opens it to the network).
    writer : callable, optional
        ``writer(frame, root) -> list[Path]`` used for flushes; default
        :func:`powerlab.telemetry.store.write_store`.
    hang_timeout_s : float, optional
        An NVML call taking longer than this is treated as hung [s]; default the larger
        of 1 s and five intervals.
    max_buffer_s : float, optional
        Most samples held in memory while the store is behind, as seconds of sampling
        [s]; newer samples are dropped and counted beyond it.  Default: the larger of
        60 s and four flush intervals.

    Examples
    --------
    >>> with Collector("store", interval_s=0.05, flush_interval_s=5) as c:  # doctest: +SKIP
    ...     time.sleep(10)
    ...     live = c.recent(2.0)
    """

    def __init__(self, out: str | Path | None = None, *, interval_s: float = 0.1,
                 gpus: Sequence[int] | None = None, flush_interval_s: float = 10.0,
                 signal_intervals_s: Mapping[str, float] | None = None,
                 host: str | None = None, window_s: float = 60.0,
                 retry_backoff_s: tuple[float, float] = (0.5, 30.0),
                 prometheus_port: int | None = None, prometheus_addr: str = "127.0.0.1",
                 writer: Callable | None = None, max_buffer_s: float | None = None,
                 hang_timeout_s: float | None = None):
        if not 0 < interval_s < math.inf:
            raise PowerlabError(f"interval_s must be a finite number > 0 s, got {interval_s}")
        if not 0 < flush_interval_s < math.inf:
            raise PowerlabError(f"flush_interval_s must be a finite number > 0 s, "
                                f"got {flush_interval_s}")
        if not 0 < window_s < math.inf:
            raise PowerlabError(f"window_s must be a finite number > 0 s, got {window_s}")
        if gpus is not None:
            gpus = [int(g) for g in gpus]
            dup = sorted({g for g in gpus if gpus.count(g) > 1})
            if dup or any(g < 0 for g in gpus):
                raise PowerlabError(f"gpus must be distinct GPU indices >= 0, got {gpus}"
                                    + (f" (repeated: {dup})" if dup else ""))
        if prometheus_port is not None and not 0 <= int(prometheus_port) <= 65535:
            raise PowerlabError(f"prometheus_port must be 0..65535 (0: any free port), "
                                f"got {prometheus_port}")
        if hang_timeout_s is None:
            hang_timeout_s = max(1.0, 5 * interval_s)
        if not 0 < hang_timeout_s < math.inf:
            raise PowerlabError(f"hang_timeout_s must be a finite number > 0 s, "
                                f"got {hang_timeout_s}")
        self.hang_timeout_s = float(hang_timeout_s)
        if max_buffer_s is None:
            max_buffer_s = max(60.0, 4 * flush_interval_s)
        if not flush_interval_s <= max_buffer_s < math.inf:
            raise PowerlabError(f"max_buffer_s must be a finite number of seconds >= "
                                f"flush_interval_s = {flush_interval_s} s, got {max_buffer_s}")
        lo, hi = retry_backoff_s
        if not 0 < lo <= hi:
            raise PowerlabError(f"retry_backoff_s must be (first, largest) with "
                                f"0 < first <= largest, got {retry_backoff_s}")
        self.out = None if out is None else Path(out)
        self.interval_s = float(interval_s)
        self.flush_interval_s = float(flush_interval_s)
        self.gpus = None if gpus is None else [int(g) for g in gpus]
        self.host = host or socket.gethostname()
        self.window_s = float(window_s)
        self.retry_backoff_s = (float(lo), float(hi))
        self.prometheus_port = prometheus_port
        self.prometheus_addr = prometheus_addr
        self._writer = writer
        self.max_buffer_s = float(max_buffer_s)
        self._max_rows = 0  # set at start (depends on the number of GPUs)
        self._writing = False  # a batch is with the writer (set by the sampler, cleared
        #                        by the writer when the batch is on disk or failed)
        self._dropped = 0
        self._dropped_total = 0
        self._gen = 0  # generation of the sampling thread (a new one after a hang)
        self._call: tuple | None = None  # (slot, monotonic start) of the NVML read running
        self._call_lock = threading.Lock()
        self._sampler: threading.Thread | None = None
        self._tick_rows: list[tuple] = []
        self._batch: PowerBatch | None = None  # power-only ticks not yet decoded
        self._digest_t = 0.0
        self._xid_thread: threading.Thread | None = None
        self._k = 0
        self._t0 = math.nan
        self._next_flush = math.nan
        self._dropped_span: list[int] = []
        self._every = {g: 1 for g in nvml.GROUPS}
        for g, s in (signal_intervals_s or {}).items():
            choice(g, "signal_intervals_s: signal group", tuple(nvml.GROUPS))
            if not s >= interval_s:
                raise PowerlabError(f"signal_intervals_s[{g!r}] = {s} s is shorter than "
                                    f"interval_s = {interval_s} s")
            if not s < math.inf:
                raise PowerlabError(f"signal_intervals_s[{g!r}] must be a finite number of "
                                    f"seconds, got {s}")
            self._every[g] = max(1, round(s / interval_s))
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop_flag = False
        self._started = False
        self._stopped = False
        self._slots: list[Slot] = []
        self._buffer: list = []  # parts: a tick's row tuples or a batch's Chunk
        self._buffer_n = 0
        self._recent: collections.deque = collections.deque()  # parts, as _buffer
        self._recent_n = 0
        self._recent_max = 16
        self._events: list[dict] = []
        self._all_events: list[dict] = []
        self._recovered: queue.SimpleQueue = queue.SimpleQueue()
        self._writeq: queue.Queue = queue.Queue()
        self._error: StoreError | None = None
        self._rows_written = 0
        self._files: list[Path] = []
        self._threads: list[threading.Thread] = []
        self._httpd = None
        self._last_collect: float | None = None
        self.devices: dict[int, nvml.Device] = {}
        self._ticks = 0
        self._missed = 0
        self._late_sum = 0.0
        self._late_max = 0.0
        self._t_start = math.nan
        self._t_stop = math.nan

    # -- public API ----------------------------------------------------------------
    def start(self) -> Collector:
        """Open the GPUs and start sampling in background threads.

        Raises
        ------
        powerlab.exceptions.NVMLUnavailableError
            NVML is missing or sees no GPU.
        powerlab.exceptions.NVMLError
            A requested GPU index does not exist, or no GPU could be opened.
        powerlab.exceptions.StoreError
            The store folder cannot be created.
        """
        if self._started:
            raise PowerlabError("this collector was already started; make a new one")
        nvml.init()
        n = nvml.device_count()
        if n == 0:
            from ..exceptions import NVMLUnavailableError

            raise NVMLUnavailableError("NVML sees no GPU on this host")
        idx = list(range(n)) if self.gpus is None else self.gpus
        bad = [i for i in idx if not 0 <= i < n]
        if bad:
            raise NVMLError(f"GPU index {bad} not found; this host has {n} GPU(s) "
                            f"(indices 0..{n - 1})")
        self._t_start = time.monotonic()
        for i in idx:
            slot = Slot(i)
            try:
                slot.device = nvml.Device(i)
                slot.uuid = slot.device.uuid
                self.devices[i] = slot.device
            except NVMLError as exc:
                if getattr(exc, "kind", "") == "unavailable":
                    raise
                self._fail(slot, exc, time.time_ns(), time.monotonic())
            self._slots.append(slot)
        if all(s.device is None for s in self._slots):
            raise NVMLError("no GPU could be opened: " + "; ".join(
                e["message"] for e in self._events))
        if self.prometheus_port is not None:  # a bad address fails before the store
            refresh = max(self.interval_s, BATCH_S)   # one snapshot per collection
            self._httpd = serve_metrics(lambda: latest_by_gpu(self._slots), self.host,
                                        self.prometheus_port, self.prometheus_addr,
                                        refresh_s=refresh, stale_s=3 * refresh,
                                        last_collection=lambda: self._last_collect)
        if self.out is not None:  # fail now rather than at the first flush
            try:
                try:
                    self.out.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(f"cannot create store folder {self.out}: "
                                     f"{exc.strerror or exc}") from exc
                self._write_devices()
            except BaseException:
                if self._httpd is not None:
                    self._httpd.shutdown()
                    self._httpd.server_close()
                raise
        self._recent_max = max(16, int(self.window_s / self.interval_s + 1) * len(self._slots))
        self._max_rows = max(1, math.ceil(self.max_buffer_s / self.interval_s)) * len(self._slots)
        self._event(None, "start", f"collecting GPUs {idx} every {self.interval_s:g} s")
        self._started = True
        if self.prometheus_port is not None:  # XID errors for /metrics, as NVML reports
            t = threading.Thread(target=self._xid_loop, name="powerlab-collector-xid",
                                 daemon=True)
            t.start()
            self._xid_thread = t
        self._batch = self._new_batch()
        self._t0 = self._digest_t = time.monotonic()
        self._next_flush = self._t0 + self.flush_interval_s
        for target, name in ((self._sample_loop, "sampler"), (self._write_loop, "writer"),
                             (self._retry_loop, "retry")):
            t = threading.Thread(target=target, name=f"powerlab-collector-{name}",
                                 daemon=True)
            t.start()
            self._threads.append(t)
        self._sampler = self._threads[0]
        return self

    def request_stop(self) -> None:
        """Ask the collector to stop soon (safe to call from a signal handler)."""
        self._stop_flag = True

    @property
    def running(self) -> bool:
        """Whether the sampling thread is alive."""
        return self._sampler is not None and self._sampler.is_alive()

    @property
    def error(self) -> StoreError | None:
        """The store error that stopped the collector, if any."""
        return self._error

    def run(self, duration_s: float | None = None) -> CollectorReport:
        """Start (when needed), sample for ``duration_s`` seconds (or until
        :meth:`request_stop` or an error), then :meth:`stop`."""
        if not self._started:
            self.start()
        end = math.inf if duration_s is None else time.monotonic() + float(duration_s)
        while not self._stop_flag and self.running and time.monotonic() < end:
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))
        return self.stop()

    def stop(self) -> CollectorReport:
        """Stop sampling, flush what is buffered and return the report.

        Raises
        ------
        powerlab.exceptions.StoreError
            When writing to the store failed; files written before are intact.
        """
        if not self._started:
            raise PowerlabError("the collector was not started")
        if not self._stopped:
            self._stopped = True
            self._stop_flag = True
            self._wake.set()
            while True:  # a watchdog may replace the sampler while we wait
                sampler = self._sampler
                sampler.join(self.hang_timeout_s + 0.5)
                if sampler is not self._sampler:
                    continue
                if sampler.is_alive():  # stuck in an NVML call: abandon it (a daemon)
                    with self._call_lock:
                        self._gen += 1
                        self._call = None
                    self._event(None, "hang", "an NVML call was still hung at stop; the "
                                "sampling thread was abandoned")
                break
            self._threads[2].join()
            if self._xid_thread is not None:
                self._xid_thread.join(2.0)
            self._t_stop = time.monotonic()
            self._event(None, "stop", f"stopped after {self._t_stop - self._t_start:.3f} s")
            self._digest()
            self._flush()
            self._writeq.put(None)
            self._threads[1].join()
            if self._httpd is not None:
                self._httpd.shutdown()
                self._httpd.server_close()
            self.devices = {s.index: s.device for s in self._slots if s.device is not None}
        if self._error is not None:
            raise self._error
        return self.report()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.stop()
        except StoreError:
            if exc_type is None:
                raise

    def recent(self, seconds: float | None = None) -> pd.DataFrame:
        """The live window: the latest samples as a conformed telemetry frame.

        Parameters
        ----------
        seconds : float, optional
            Keep only the last ``seconds`` [s] (by the monotonic clock).
        """
        from ..telemetry.schema import conform

        with self._lock:
            parts = list(self._recent)
        frame = parts_to_frame(parts, self.host, conformed=False)
        if len(frame) > self._recent_max:
            frame = frame.iloc[-self._recent_max:]
        if seconds is not None and len(frame):
            frame = frame[frame["monotonic_s"].to_numpy() >= time.monotonic() - float(seconds)]
        if not len(frame):
            return parts_to_frame([], self.host)
        return conform(frame.reset_index(drop=True))

    def events(self) -> pd.DataFrame:
        """Status events of this run so far."""
        with self._lock:
            ev = list(self._all_events)
        return events_frame(ev)

    @property
    def metrics_port(self) -> int | None:
        """The port of the ``/metrics`` endpoint, when one is served."""
        return None if self._httpd is None else self._httpd.server_port

    def rates(self) -> pd.DataFrame:
        """Achieved per-GPU, per-signal rates so far (see :class:`CollectorReport`)."""
        return gpu_table(self._slots, (self._t_stop if self._stopped else time.monotonic()) - self._t_start)

    def report(self) -> CollectorReport:
        """Rates, jitter, energy two ways, events and files so far."""
        end = self._t_stop if self._stopped else time.monotonic()
        n_ticks = max(self._ticks, 1)
        return CollectorReport(
            gpus=gpu_table(self._slots, (self._t_stop if self._stopped else time.monotonic()) - self._t_start), interval_s=self.interval_s,
            duration_s=end - self._t_start, ticks=self._ticks, missed_ticks=self._missed,
            lateness_mean_ms=1e3 * self._late_sum / n_ticks,
            lateness_max_ms=1e3 * self._late_max, rows_written=self._rows_written,
            files_written=len(self._files), events=self.events(),
            dropped_samples=self._dropped_total + self._dropped,
            error=None if self._error is None else str(self._error))

    # -- internals -----------------------------------------------------------------
    def _event(self, slot: Slot | None, kind: str, message: str, attempt: int | None = None,
               backoff: float = math.nan, wall_ns: int | None = None) -> None:
        ev = {"timestamp": wall_ns or time.time_ns(), "host": self.host,
              "gpu_index": None if slot is None else slot.index,
              "gpu_uuid": None if slot is None else slot.uuid, "kind": kind,
              "attempt": attempt, "backoff_s": backoff, "message": message}
        with self._lock:
            self._events.append(ev)
            self._all_events.append(ev)

    def _fail(self, slot: Slot, exc: BaseException, wall_ns: int, mono: float) -> None:
        kind = getattr(exc, "kind", "error")
        if kind not in ("lost", "timeout", "unknown", "hang"):
            kind = "error"
        # the retry thread picks a slot up once it is down: schedule the retry first
        slot.kind = kind
        slot.attempt = 0
        slot.backoff = self.retry_backoff_s[0]
        slot.next_retry = mono + slot.backoff
        slot.device = None
        slot.latest = {}  # a GPU that is down leaves /metrics, not frozen in it
        slot.down = True
        if self._batch is not None:
            self._batch.changed()
        self._event(slot, kind, str(exc), 0, slot.backoff, wall_ns)

    def _groups_for(self, k: int) -> int:
        mask = 0
        for bit, g in enumerate(nvml.GROUPS):
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

    def _hand_over(self, now: float, next_flush: float) -> float:
        """Hand the store buffer to the writer; returns the next flush time."""
        self._digest()
        self._flush()
        next_flush += self.flush_interval_s * (
            1 + int((now - next_flush) // self.flush_interval_s))
        self._next_flush = next_flush
        return next_flush

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
            self._writeq.put((rows, events))

    def _write_loop(self) -> None:
        from ..telemetry import store

        writer = self._writer or store.write_store
        while True:
            item = self._writeq.get()
            if item is None:
                return
            rows, events = item
            if self._error is not None:
                self._writing = False
                continue
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
            self._writing = False

    def _write_events(self, events: list[dict]) -> None:
        self._files.append(write_side_table(self.out, "events", events_frame(events)))

    def device_facts(self) -> pd.DataFrame:
        """Static facts of the opened GPUs, read once at start (see :func:`read_devices`)."""
        return device_facts_frame(self.devices, self.host)

    def _write_devices(self) -> None:
        self._files.append(write_side_table(self.out, "devices", self.device_facts()))
