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
  and at most ``F + 2 W_max + 2 T`` seconds of samples are lost, ``ceil((F + 2 W_max +
  2 T) / T)`` ticks of every GPU (F the flush interval, T the sampling interval, W_max
  the longest write, measured; :meth:`Collector.loss_bound` states it live, the report
  at the end, :meth:`Collector.unsaved_samples` counts what is unsaved now).  The
  writer holds one batch at a time: when a write is still running at a flush time, the
  samples stay in the sampler's buffer and go out together with the next flush once the
  writer is free (no queue of batches builds up behind a slow disk, so a write slower
  than the flush interval makes the flushes as frequent as the disk allows).  The
  temporary files of a killed run are removed when the next collector starts.  The buffer is bounded by ``max_buffer_s``:
  beyond it new samples are **dropped** (sampling never blocks) and counted in a
  ``dropped`` status event and in :attr:`CollectorReport.dropped_samples`.
* A store write that fails (full disk, quota, file-size limit, permissions) stops the
  collector with a :class:`~powerlab.exceptions.StoreError`; files written before are
  untouched.

Status events are written beside the data under ``STORE/events/`` (read them with
:func:`read_events`), and the GPUs' static facts (name, UUID, serial, TDP, driver,
capabilities) once per start under ``STORE/devices/`` (:func:`read_devices`).

Parts
-----
:class:`Collector` holds the run (start, stop, live window, report, status events); its
options are one :class:`~powerlab.collect.options.CollectorOptions`, and each thread's
work is a part of its own: the sampling loop (:mod:`powerlab.collect.sampling`), the
buffer, flushes and writer (:mod:`powerlab.collect.flushing`), and the hang watchdog,
retries and XID events (:mod:`powerlab.collect.faults`).
"""

from __future__ import annotations

import math
import socket
import threading
import time
from pathlib import Path
from typing import Self

import pandas as pd

from ..exceptions import NVMLError, NVMLUnavailableError, PowerlabError, StoreError
from ..telemetry.schema import conform
from ..telemetry.storefiles import clean_host_temporaries
from . import nvml
from .faults import FaultHandling
from .flushing import Flushing
from .metrics import serve_metrics
from .options import CollectorOptions
from .run_report import CollectorReport
from .sampling import BATCH_S, Sampling
from .sidetables import (
    DEVICE_COLUMNS,
    EVENT_COLUMNS,
    device_facts_frame,
    events_frame,
    read_devices,
    read_events,
)
from .slots import Slot, gpu_table, latest_by_gpu, parts_to_frame

__all__ = ["DEVICE_COLUMNS", "EVENT_COLUMNS", "Collector", "CollectorOptions",
           "CollectorReport", "read_devices",
           "read_events"]  # the side-table names are re-exported from .sidetables


class Collector(Sampling, Flushing, FaultHandling):
    """Sample GPUs through NVML into a live window and a Parquet store.

    Parameters
    ----------
    out : path-like, optional
        Store folder; None keeps samples in memory only (the live window).
    options : CollectorOptions, optional
        What to sample, how often, and how to record it (see
        :class:`~powerlab.collect.options.CollectorOptions` for each option and its
        default).
    **option_kw
        Fields of :class:`~powerlab.collect.options.CollectorOptions` as keywords,
        replacing those of ``options``: ``interval_s`` (tick interval [s], default
        0.1), ``gpus``, ``flush_interval_s`` (default 10 s), ``signal_intervals_s``,
        ``host``, ``window_s``, ``retry_backoff_s``, ``prometheus_port``,
        ``prometheus_addr``, ``writer``, ``max_buffer_s``, ``hang_timeout_s``.

    Raises
    ------
    powerlab.exceptions.PowerlabError
        An option out of range (nothing is opened).

    Examples
    --------
    >>> with Collector("store", interval_s=0.05, flush_interval_s=5) as c:  # doctest: +SKIP
    ...     time.sleep(10)
    ...     live = c.recent(2.0)
    """

    def __init__(self, out: str | Path | None = None, *,
                 options: CollectorOptions | None = None, **option_kw):
        opts = CollectorOptions.from_kwargs(options, **option_kw)
        self.options = opts
        self._configure(out, opts)
        self._init_sampling(opts)
        self._init_flushing(opts)
        self._init_run()

    def _configure(self, out, opts: CollectorOptions) -> None:
        """The options as the attributes every part of the collector reads."""
        self.out = None if out is None else Path(out)
        self.interval_s = float(opts.interval_s)
        self.flush_interval_s = float(opts.flush_interval_s)
        self.gpus = None if opts.gpus is None else [int(g) for g in opts.gpus]
        self.host = opts.host or socket.gethostname()
        self.window_s = float(opts.window_s)
        lo, hi = opts.retry_backoff_s
        self.retry_backoff_s = (float(lo), float(hi))
        self.prometheus_port = opts.prometheus_port
        self.prometheus_addr = opts.prometheus_addr
        self.max_buffer_s = opts.buffer_s
        self.hang_timeout_s = opts.hang_s

    def _init_run(self) -> None:
        """The run's own state: GPUs, threads, status events, stop flags."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop_flag = False
        self._started = False
        self._stopped = False
        self._slots: list[Slot] = []
        self._events: list[dict] = []
        self._all_events: list[dict] = []
        self._threads: list[threading.Thread] = []
        self._xid_thread: threading.Thread | None = None
        self._httpd = None
        self.devices: dict[int, nvml.Device] = {}
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
        idx = self._indices()
        self._t_start = time.monotonic()
        self._open(idx)
        if self.prometheus_port is not None:  # a bad address fails before the store
            refresh = max(self.interval_s, BATCH_S)   # one snapshot per collection
            self._httpd = serve_metrics(lambda: latest_by_gpu(self._slots), self.host,
                                        self.prometheus_port, self.prometheus_addr,
                                        refresh_s=refresh, stale_s=3 * refresh,
                                        last_collection=lambda: self._last_collect)
        if self.out is not None:  # fail now rather than at the first flush
            self._prepare_store()
        self._recent_max = max(16, int(self.window_s / self.interval_s + 1) * len(self._slots))
        self._max_rows = max(1, math.ceil(self.max_buffer_s / self.interval_s)) * len(self._slots)
        self._event(None, "start", f"collecting GPUs {idx} every {self.interval_s:g} s")
        self._started = True
        self._start_threads()
        return self

    def _indices(self) -> list[int]:
        """The NVML indices to sample, checked against the GPUs NVML sees."""
        nvml.init()
        n = nvml.device_count()
        if n == 0:
            raise NVMLUnavailableError("NVML sees no GPU on this host")
        idx = list(range(n)) if self.gpus is None else self.gpus
        bad = [i for i in idx if not 0 <= i < n]
        if bad:
            raise NVMLError(f"GPU index {bad} not found; this host has {n} GPU(s) "
                            f"(indices 0..{n - 1})")
        return idx

    def _open(self, idx: list[int]) -> None:
        """One slot per GPU; a GPU that fails to open is down from the start (retried)."""
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

    def _prepare_store(self) -> None:
        """Create the store folder and record the GPUs' static facts there; on failure
        the metrics endpoint is closed again."""
        try:
            try:
                self.out.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create store folder {self.out}: "
                                 f"{exc.strerror or exc}") from exc
            self._cleaned = clean_host_temporaries(self.out, self.host)  # a killed run's
            self._write_devices()
        except BaseException:
            if self._httpd is not None:
                self._httpd.shutdown()
                self._httpd.server_close()
            raise

    def _start_threads(self) -> None:
        """The XID watcher (with ``/metrics``), then the sampler, writer and retry threads."""
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
        end = self._t_stop if self._stopped else time.monotonic()
        return gpu_table(self._slots, end - self._t_start)

    def report(self) -> CollectorReport:
        """Rates, jitter, energy two ways, events and files so far."""
        end = self._t_stop if self._stopped else time.monotonic()
        n_ticks = max(self._ticks, 1)
        bound_samples, bound_s = self.loss_bound()
        return CollectorReport(
            gpus=self.rates(), interval_s=self.interval_s,
            duration_s=end - self._t_start, ticks=self._ticks, missed_ticks=self._missed,
            lateness_mean_ms=1e3 * self._late_sum / n_ticks,
            lateness_max_ms=1e3 * self._late_max, rows_written=self._rows_written,
            files_written=len(self._files), events=self.events(),
            dropped_samples=self._dropped_total + self._dropped,
            loss_bound_samples=bound_samples, loss_bound_s=bound_s,
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

    def device_facts(self) -> pd.DataFrame:
        """Static facts of the opened GPUs, read once at start (see :func:`read_devices`)."""
        return device_facts_frame(self.devices, self.host)
