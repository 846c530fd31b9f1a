"""The one source of randomness of a forecast: each job's failures and per-GPU timing
offsets in each Monte Carlo draw.

:func:`job_randomness` draws them from ``numpy.random.default_rng([seed, draw, job])``:
failures first (a Poisson count at ``gpus * failure_rate_per_gpu_h`` over the
allocation, then uniform ticks), then the histogram of the GPUs' timing offsets (one
multinomial draw over the discretised normal jitter, :func:`jitter_probabilities`).
Any simulation that calls it sees the same randomness: a brute-force per-GPU simulation
(``tests/support/reference_sim.py``) reproduces an engine draw exactly, and
:mod:`powerlab.site.interruption_sim` the engine's interruption process.  The causes of
the arrivals come from a stream of their own
(:func:`powerlab.reliability.interruption_draws.interruption_marks`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from .scenario import Job
from .timebase import to_ticks

__all__ = ["JobDraw", "jitter_probabilities", "job_randomness"]


@dataclass(frozen=True)
class JobDraw:
    """The random parts of one job in one Monte Carlo draw.

    Attributes
    ----------
    failure_ticks : ndarray of int64
        Ticks (from the job start) at which failures strike, sorted.
    offset_ticks : ndarray of int64
        The possible per-GPU timing offsets ``-J..J`` [ticks].
    offset_counts : ndarray of int64
        How many of the job's GPUs have each offset (sums to ``gpus``).
    """

    failure_ticks: np.ndarray
    offset_ticks: np.ndarray
    offset_counts: np.ndarray


def jitter_probabilities(jitter_s: float, tick_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Offsets ``-J..J`` [ticks] and their probabilities for a normal jitter.

    The normal distribution of standard deviation ``jitter_s`` is truncated at 4 sigma
    and discretised on ticks (offset ``j`` gets the mass of ``[(j-1/2), (j+1/2)) * tick``).
    """
    offs, p = _jitter_table(float(jitter_s), float(tick_s))
    return offs.copy(), p.copy()


@functools.lru_cache(maxsize=64)
def _jitter_table(jitter_s: float, tick_s: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`jitter_probabilities`, computed once per (jitter, tick): every job of
    every draw asks for it."""
    if jitter_s <= 0:
        return np.zeros(1, np.int64), np.ones(1)
    big_j = math.ceil(4.0 * jitter_s / tick_s)
    offs = np.arange(-big_j, big_j + 1, dtype=np.int64)
    edges = (np.append(offs, big_j + 1) - 0.5) * tick_s / jitter_s
    cdf = special.ndtr(np.clip(edges, -4.0, 4.0))
    p = np.diff(cdf)
    return offs, p / p.sum()


def job_randomness(job: Job, tick_s: float, seed: int, draw: int, job_index: int,
                   start_tick: int | None = None, end_tick: int | None = None) -> JobDraw:
    """Draw the failures and the offset histogram of one job in one draw.

    The generator is ``numpy.random.default_rng([seed, draw, job_index])``; failures are
    drawn first (a Poisson count, then uniform ticks over the allocation), then the
    offset histogram (one multinomial draw), so that any simulation calling this
    function sees the same randomness.

    Parameters
    ----------
    job : Job
    tick_s : float
        Engine tick [s].
    seed, draw, job_index : int
        Identify the stream.
    start_tick, end_tick : int, optional
        The allocation in ticks (default: from the job's duration).

    Returns
    -------
    JobDraw
    """
    rng = np.random.default_rng([int(seed), int(draw), int(job_index)])
    n_alloc = (end_tick - start_tick) if start_tick is not None else to_ticks(
        job.duration_s, tick_s)
    lam = job.gpus * job.failure_rate_per_gpu_h * n_alloc * tick_s / 3600.0
    n_fail = int(rng.poisson(lam)) if lam > 0 else 0
    fails = np.sort(rng.integers(0, n_alloc, n_fail)) if n_fail else np.zeros(0, np.int64)
    offs, p = jitter_probabilities(job.jitter_s, tick_s)
    counts = rng.multinomial(job.gpus, p) if len(p) > 1 else np.array([job.gpus])
    return JobDraw(fails.astype(np.int64), offs, counts.astype(np.int64))
