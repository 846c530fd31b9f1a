"""The memory a forecast needs, estimated before any allocation.

:func:`memory_estimate_bytes` adds the terms of :func:`memory_parts`: the per-tick arrays
a forecast keeps (or, reducing as it goes, the per-interval ones), one chunk's work
arrays, one draw's job plans, the event rows of all draws and, where a draw must exist
whole, that draw.  :func:`powerlab.site.forecast` refuses a forecast whose estimate
exceeds ``memory_limit_bytes`` (default :func:`default_memory_limit`, half the physical
memory) before it allocates anything; ``tests/site/test_engine.py`` checks the estimate
against the traced peak.
"""

from __future__ import annotations

import math
import os

from .chunks import DEFAULT_CHUNK_TICKS
from .scenario import Scenario
from .timebase import to_ticks

__all__ = ["default_memory_limit", "memory_estimate_bytes", "memory_parts"]

#: Per-tick float64 arrays of all draws a forecast holds at its peak: IT power, facility
#: power, electrical losses, cooling, and the cooling target while it is computed.
_ARRAYS_PER_DRAW_TICK = 5

#: Bytes per run of a job's plan held for the whole draw (the demand step: tick int64 and
#: step float64; the job's phases expanded into runs, cached across draws: 5 B), and held
#: while one job's plan is built (states, starts, lengths, the expansion's and the
#: steps' temporaries: about fifteen 8-byte arrays).
_BYTES_PER_RUN_HELD = 21
_BYTES_PER_RUN_BUILDING = 120

#: Float64 work arrays per tick of a chunk when reducing (IT power, facility, the
#: reduction's scratch: about a dozen, and the filters' fresh outputs; four when the
#: ticks are kept: the IT power alone).
_ARRAYS_PER_CHUNK_TICK = 16

#: Bytes per event row: the collected tuple with its tick and duration objects (~140 B
#: on CPython 3.11) and the events table built from them (six columns, a sorted copy).
_BYTES_PER_EVENT = 250


def memory_parts(scenario: Scenario, draws: int, tick_s: float, keep_ticks: bool = True,
                  reduce_s: float = 1.0) -> dict:
    """The terms of :func:`memory_estimate_bytes` [bytes], by name: ``ticks``,
    ``intervals`` and ``pue`` are arrays of known size; ``plans``, ``events``, ``chunk``,
    ``target`` and ``draw`` are upper estimates, each at most about twice what it
    holds."""
    n = to_ticks((scenario.end_utc - scenario.start_utc).total_seconds(), tick_s)
    jobs = scenario.jobs
    widest = max((math.ceil(4.0 * j.jitter_s / tick_s) for j in jobs), default=0)
    chunk = min(n, DEFAULT_CHUNK_TICKS) + 2 * widest + 2
    runs, scatter, events = [], 0, 0.0
    for j in jobs:
        alloc = min(n, to_ticks(j.duration_s, tick_s))
        period = max(2, to_ticks(j.step_time_s, tick_s))
        cadence = sum(alloc / max(to_ticks(iv, tick_s), 1)
                      for iv in (j.checkpoint_interval_s, j.eval_interval_s) if iv > 0)
        fails = j.gpus * j.failure_rate_per_gpu_h * alloc * tick_s / 3600.0
        fails += 4.0 * math.sqrt(fails)   # a draw well above the mean
        runs.append(2 * alloc / period + 2 * cadence + 4 * fails + 8)
        offsets = 2 * math.ceil(4.0 * j.jitter_s / tick_s) + 1
        # the steps landing in a chunk, spread over the offsets (index and weight),
        # in buffers that grow by doubling
        scatter += 2 * (2 * min(chunk, alloc) / period + 2) * offsets * 16
        events += 4 + cadence + 3 * fails
    mit, hw = scenario.mitigations, scenario.hardware
    whole = (mit.gpu_ramp_limit_w_per_s > 0 or mit.battery is not None
             or hw.gpu_rise_time_constant_s != hw.gpu_fall_time_constant_s)
    parts = {
        "plans": int(sum(runs) * _BYTES_PER_RUN_HELD
                     + max(runs, default=0) * _BYTES_PER_RUN_BUILDING),
        "events": int(draws * events * _BYTES_PER_EVENT),
        # the chunk's work arrays (IT power, facility, the reduction's scratch) and the
        # jobs' steps scattered on it
        "chunk": chunk * 8 * (4 if keep_ticks else _ARRAYS_PER_CHUNK_TICK) + int(scatter),
    }
    if scenario.site.cooling is not None:   # the per-tick PUE and its timestamps
        parts["pue"] = 2 * n * 8
    if keep_ticks:
        # IT, facility, losses and cooling kept; the cooling target while computed
        parts["ticks"] = int(draws) * n * 8 * (_ARRAYS_PER_DRAW_TICK - 1)
        parts["target"] = int(draws) * n * 8
        if whole:
            parts["draw"] = (n + 2 * widest + 2) * 8 * 8
        return parts
    m = math.ceil(n * tick_s / reduce_s)
    parts["intervals"] = int(draws) * m * 8 * 2 + m * 8 * 14
    if whole:
        parts["draw"] = (n + 2 * widest + 2) * 8 * 3
    return parts


def memory_estimate_bytes(scenario: Scenario, draws: int, tick_s: float,
                          keep_ticks: bool = True, reduce_s: float = 1.0) -> int:
    """Peak memory a forecast needs, estimated before any allocation [bytes].

    Keeping the ticks: ``draws x ticks x 8 B x 5`` (IT, facility, losses, cooling and its
    target per draw and tick), the chunk work of the IT power (``4 x 8 B`` per tick of a
    chunk) and, where a draw must exist whole (a ramp limiter or unequal rise and fall, a
    battery), one draw being built with its temporaries (``8 x 8 B`` per tick).
    Reducing as it goes (:mod:`powerlab.site.chunks`): per draw and base interval two
    means, per base interval fourteen arrays (extremes, ramps, the interval edges and
    lengths), the chunk work arrays (``16 x 8 B`` per tick of a chunk) and, where a draw
    must exist whole, ``3 x 8 B`` per tick.  Both add the jobs' steps scattered on a
    chunk, one draw's job plans (the demand steps of every job and their cached runs,
    ``21 B`` a run of compute or communication, and one job's plan being built), the
    event rows of all draws and, with a cooling model, the per-tick PUE.  An upper
    estimate: runs, events and failures are counted at a high draw
    (``tests/site/test_engine.py`` checks it against the traced peak).
    """
    return int(sum(memory_parts(scenario, draws, tick_s, keep_ticks, reduce_s).values()))


def default_memory_limit() -> int:
    """Half of the machine's physical memory (16 GiB where it cannot be read) [bytes]."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30
