"""The fuzz harness's hang deadline (tests/support/fuzz_harness.py ``run_case``) counts
the time a case had, not the time it waited for a CPU (issue 37): a hang, busy or
blocked, is still classed as one."""

from __future__ import annotations

import threading
import time

from ..support.fuzz_harness import _cpu_wait_s, run_case


def test_a_busy_or_blocked_hang_is_a_hang_and_a_quick_call_is_not():
    def busy():
        while True:
            pass

    assert run_case(busy, 0.3).kind == "hang"
    assert run_case(threading.Event().wait, 0.3).kind == "hang"
    assert run_case(lambda: None, 0.3).kind == "ok"


def test_waiting_for_a_cpu_is_measured_and_never_decreases():
    a = _cpu_wait_s()
    t = time.monotonic()
    while time.monotonic() - t < 0.05:  # runnable for a while
        pass
    assert _cpu_wait_s() >= a >= 0.0
