"""How late the machine runs a thread while a test runs (for bounds that must hold on a
loaded machine: a measured delay, not a guessed slack)."""

from __future__ import annotations

import threading
import time


class SchedulingProbe:
    """The machine's scheduling delay while a test runs: a thread that sleeps 5 ms at a
    time and records how late it woke up [s].  On a loaded 2-core machine a process can
    wait 0.1-0.5 s for a core; the collector under test waits as long, so the bounds
    below add the delay measured here instead of a guessed slack."""

    def __init__(self) -> None:
        self.max_late_s = 0.0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            time.sleep(0.005)
            self.max_late_s = max(self.max_late_s, time.monotonic() - t0 - 0.005)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
