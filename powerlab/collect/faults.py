"""Fault handling of a running collector: the hang watchdog, GPU retries and XID events.

:class:`FaultHandling` is the part of :class:`powerlab.collect.collector.Collector` that
takes a failed GPU out of sampling (:meth:`FaultHandling._fail`) and runs in its retry
thread (see the Faults section there): it replaces a sampling thread whose NVML call hung,
retries lost GPUs with exponential backoff, each retry in its own thread, and records XID
errors NVML reports through its event set.
"""

from __future__ import annotations

import math
import threading
import time

from ..exceptions import NVMLError
from . import nvml
from .slots import Slot

__all__ = ["FaultHandling"]


class FaultHandling:
    """Mixin of :class:`~powerlab.collect.collector.Collector`: its fault handling."""

    def _fail(self, slot: Slot, exc: BaseException, wall_ns: int, mono: float) -> None:
        """Take a GPU out of sampling after ``exc`` and schedule its first retry."""
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

    def _watchdog(self) -> None:
        """Replace the sampling thread when its NVML call has hung (see Faults)."""
        call = self._call
        if call is None or self._stop_flag:
            return
        slot, t_call = call
        if time.monotonic() - t_call <= self.hang_timeout_s:
            return
        with self._call_lock:
            if self._call is not call:
                return  # it returned meanwhile
            self._gen += 1
            self._call = None
            gen = self._gen
            rows = self._tick_rows  # the hung tick's samples of the GPUs read before it
        self._keep(rows)
        self._digest()  # the hung tick's power-only samples of the GPUs read before it
        exc = NVMLError(f"an NVML call on GPU {slot.index} did not return within "
                        f"{self.hang_timeout_s:g} s (hung); sampling the other GPUs in a "
                        f"new thread")
        exc.kind = "hang"  # type: ignore[attr-defined]
        self._fail(slot, exc, time.time_ns(), time.monotonic())
        self._batch = self._new_batch()  # the hung call may still write into the old one
        self._k += 1  # the hung tick is over; carry on with the next one
        t = threading.Thread(target=self._sample_loop, args=(gen,), daemon=True,
                             name=f"powerlab-collector-sampler-{gen}")
        self._sampler = t
        t.start()

    def _xid_loop(self) -> None:
        """Wait for XID errors through NVML's event set; record each as an ``xid`` event
        and keep the last one per GPU for ``/metrics``."""
        try:
            watcher = nvml.XidWatcher(s.device for s in self._slots if s.device is not None)
        except NVMLError as exc:
            self._event(None, "error", f"XID errors not watched: {exc}")
            return
        by_index = {s.index: s for s in self._slots}
        for i in watcher.watched:
            by_index[i].xid_last = 0
        try:
            while not self._stop_flag and watcher.watched:
                try:
                    got = watcher.wait(200)
                except NVMLError as exc:
                    self._event(None, "error", f"XID errors no longer watched: {exc}")
                    return
                if got is None:
                    continue
                idx, xid = got
                slot = by_index.get(idx)
                if slot is not None:
                    slot.xid_last = xid
                self._event(slot, "xid", f"XID {xid} reported by NVML")
        finally:
            watcher.close()

    @staticmethod
    def _attempt(slot: Slot) -> None:
        try:
            dev = nvml.Device(slot.index)
            dev.read()
        except NVMLError as exc:
            slot.attempt_result = ("error", exc)
            return
        slot.attempt_result = ("ok", dev)

    def _retry_loop(self) -> None:
        hi = self.retry_backoff_s[1]
        while True:
            if self._stop_flag and self._stopped:
                return
            self._watchdog()
            now = time.monotonic()
            for slot in self._slots:  # start due retries, each in its own thread
                if (slot.down and slot.device is None and slot.next_retry <= now
                        and slot.attempt_thread is None):
                    slot.attempt += 1
                    slot.attempt_result = None
                    slot.attempt_t = now
                    slot.attempt_thread = threading.Thread(
                        target=self._attempt, args=(slot,), daemon=True,
                        name=f"powerlab-collector-retry-{slot.index}")
                    slot.attempt_thread.start()
            for slot in self._slots:
                th = slot.attempt_thread
                if th is None:
                    continue
                if th.is_alive():
                    if (now - slot.attempt_t > self.hang_timeout_s
                            and slot.attempt_result is None):
                        slot.attempt_result = ("hung", None)
                        slot.backoff = min(slot.backoff * 2, hi)
                        self._event(slot, "retry_failed", f"hang: the retry did not return "
                                    f"within {self.hang_timeout_s:g} s", slot.attempt,
                                    slot.backoff)
                    continue
                slot.attempt_thread = None
                result, value = slot.attempt_result or ("error", NVMLError("no result"))
                if result != "ok":
                    if result == "error":
                        slot.backoff = min(slot.backoff * 2, hi)
                        self._event(slot, "retry_failed",
                                    f"{getattr(value, 'kind', 'error')}: {value}",
                                    slot.attempt, slot.backoff)
                    slot.next_retry = time.monotonic() + slot.backoff
                    continue
                dev = value
                if dev.uuid != slot.uuid:
                    msg = f"recovered as a different GPU: {slot.uuid} -> {dev.uuid}"
                    slot.uuid = dev.uuid
                else:
                    msg = f"recovered after {slot.attempt} retr{'y' if slot.attempt == 1 else 'ies'}"
                self._event(slot, "recovered", msg, slot.attempt, math.nan)
                slot.down = False
                self._recovered.put((slot, dev))
            tick = min(0.1, self.hang_timeout_s / 4)
            waits = [s.next_retry for s in self._slots if s.down and s.device is None]
            if waits or any(s.attempt_thread is not None for s in self._slots):
                time.sleep(min(max(min(waits, default=now + tick) - time.monotonic(), 0.001),
                               0.05, tick))
            else:  # nothing to retry: look again soon, cheaply
                time.sleep(tick)
