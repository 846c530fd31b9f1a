"""The facility power-swing forecast engine.

Given a :class:`~powerlab.site.scenario.Scenario`, :func:`forecast` produces the IT and
facility power of the site at every engine tick (default 100 ms) over the horizon, for a
number of Monte Carlo draws of the stochastic parts (job failures, per-GPU timing
offsets), and returns a :class:`ForecastResult` (statsmodels-style: ``summary()``,
``summary_frame()``, a tidy ``timeline`` and ``_repr_html_``).

Model
-----
Time is discrete with step ``tick_s``: every duration of the scenario is rounded to whole
ticks (:func:`to_ticks`), steps to whole ticks, checkpoint and evaluation intervals to
whole steps.  Every GPU of a job follows the same *template* power series ``x[k]``
(start-up, steps of compute then communication wait, checkpoints, evaluations,
failures and restarts, shutdown), shifted by its own timing offset ``d_g`` ticks: GPU
``g`` draws ``y[k - d_g]``, where ``y`` is the template after the per-GPU mitigations
(power floor, ramp-rate limit), which are time-invariant and so commute with the shift.

The job's power is therefore the discrete convolution ``sum_j c[j] * y[k - j]`` of the
template with the histogram ``c`` of the offsets, whose counts are one multinomial draw
of the job's GPU count over the discretised (truncated at 4 sigma) normal jitter
distribution.  Its cost depends on the number of ticks and on the width of the jitter
kernel, never on the number of GPUs; for large jobs the histogram is ``N`` times the
jitter distribution plus its multinomial fluctuation.  Failures are a Poisson process at
``gpus * failure_rate_per_gpu_h`` during the allocation; a failure sends every GPU of the
job to idle for ``restart_s``, then start-up, then training resumes from the last
checkpoint (training time since then is lost).  Failures that fall while the job is
already down extend the downtime (never dropped); planned interruptions and the causes
of failures follow :mod:`powerlab.reliability.interruptions`.

:func:`job_randomness` is the one source of randomness: seeded by ``(seed, draw, job)``,
so a brute-force per-GPU simulation (``tests/support/reference_sim.py``) reproduces a draw
exactly.

Transients: each GPU's power follows its template with a first-order rise and fall
(``hardware.gpu_rise_time_constant_s``/``gpu_fall_time_constant_s``,
:mod:`powerlab.site.transients`); the per-tick value is the exact mean over the tick of
that continuous response, applied to the template before the shift (so exact for every
GPU).  With a ramp-rate limit (power smoothing) the limiter's output is the GPU power
and the natural transient, faster than any practical limit, is not added on top.

IT power = sum of the jobs + idle GPUs in no job + ``nodes * node_overhead_w``.
Facility power = IT + electrical losses (instantaneous) + cooling (lagging the heat by
minutes) + ``base_load_w`` (:mod:`powerlab.site.facility`), minus what the battery (if
any) delivers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import signal, special

from .._options import renamed_keywords
from ..exceptions import PowerlabError, ScenarioError
from ..reliability.interruptions import (
    cause_rows,
    interruption_frame,
    interruption_marks,
    interruption_stats,
    planned_mask,
)
from .chunks import DEFAULT_CHUNK_TICKS, dense_chunks, it_power_chunks, job_steps
from .chunks import chunk_ticks as _chunk_len
from .disturbances import add_sag_events, apply_dark, check_ups_needs_ticks, disturbance_plan
from .jobplan import COMPUTE, IDLE, STATES, JobPlan, job_levels, job_plan
from .reduction import Reducer
from .results import ForecastResult
from .scenario import Job, Scenario
from .stagger import stagger_delay_ticks
from .timebase import to_ticks
from .transients import first_order_rle

__all__ = [
    "STATES",
    "ForecastResult",
    "JobDraw",
    "JobPlan",
    "forecast",
    "forecast_to_target",
    "job_plan",
    "job_randomness",
    "memory_estimate_bytes",
    "to_ticks",
]

# --------------------------------------------------------------------------- randomness


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


def _slew_rle(values: np.ndarray, lengths: np.ndarray, step_w: float) -> np.ndarray:
    """Ramp-limit a run-length encoded series tick by tick; returns the painted series.

    ``y[k] = clip(x[k], y[k-1] - step_w, y[k-1] + step_w)`` with ``y[-1] = x[0]``; the
    loop runs over runs, not ticks.
    """
    n = len(values)
    y0 = np.empty(n)
    y = float(values[0])
    vals = values.tolist()
    lens = lengths.tolist()
    for i in range(n):
        y0[i] = y
        x = vals[i]
        reach = step_w * lens[i]
        if x > y:
            y = min(x, y + reach)
        elif x < y:
            y = max(x, y - reach)
    d = values - y0
    idx = np.repeat(np.arange(n), lengths)
    pos = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return y0[idx] + np.sign(d)[idx] * np.minimum(step_w * (pos + 1), np.abs(d)[idx])


def _add_dense(out: np.ndarray, plan: JobPlan, levels: np.ndarray, rnd: JobDraw, n: int,
               s: int, slew: float, tick: float, rise: float, fall: float) -> float:
    """Add a job's power to ``out`` tick by tick (ramp limiter or unequal rise and fall
    time constants: nonlinear per GPU, so applied to the template before the shift).

    Returns the ramp-limit deficit of compute power [ticks of full compute].
    """
    big_j = int(rnd.offset_ticks[-1])
    lo, hi = -big_j, n + big_j
    if slew > 0:
        lo -= math.ceil(float(np.ptp(levels)) / slew) + 1
    st, b0, b1 = plan.states, plan.starts, plan.starts + plan.lengths
    keep = (b1 > lo) & (b0 < hi)
    st, b0c, b1c = st[keep], np.maximum(b0[keep], lo), np.minimum(b1[keep], hi)
    ln = b1c - b0c
    pre = max(0, min(s, hi) - lo) if len(st) == 0 else b0c[0] - lo
    post = hi - (b1c[-1] if len(st) else lo + pre)
    states = np.concatenate([[IDLE], st, [IDLE]])
    lens = np.concatenate([[pre], ln, [post]])
    nz = lens > 0
    states, lens = states[nz], lens[nz]
    vals = levels[states]
    deficit = 0.0
    if slew > 0:
        y = _slew_rle(vals, lens, slew)
        comp = np.repeat(states == COMPUTE, lens)
        x = np.repeat(vals, lens)
        core = slice(-lo, -lo + n)
        deficit = float(np.sum(1.0 - np.minimum(1.0, y[core][comp[core]]
                                                 / x[core][comp[core]])))
        y = y[-big_j - lo:]
    else:
        y = first_order_rle(vals, lens, tick, rise, fall)
    counts = rnd.offset_counts.astype(float)
    if len(counts) == 1:
        out += counts[0] * y
    elif len(counts) <= 64:
        out += np.convolve(y, counts, mode="valid")
    else:
        out += signal.oaconvolve(y, counts, mode="valid")
    return deficit



# --------------------------------------------------------------------------- engine


def _shifted(dplan, first_tick: int):
    """A disturbance plan's outages in ticks from ``first_tick`` (for one chunk)."""
    from types import SimpleNamespace

    return SimpleNamespace(dark=[(a - first_tick, b - first_tick, nodes)
                                 for a, b, nodes in dplan.dark])


def _job_ticks(scenario: Scenario, t0: pd.Timestamp, tick: float
               ) -> list[tuple[int, int, float]]:
    """(start_tick, end_tick, staggered_s) of every job after staggering
    (:func:`powerlab.site.stagger.stagger_delay_ticks`)."""
    out = []
    for job, delay in zip(scenario.jobs, stagger_delay_ticks(scenario, t0, tick)):
        s = to_ticks((job.start_utc - t0).total_seconds(), tick)
        e = s + to_ticks(job.duration_s, tick)
        out.append((s + delay, e, delay * tick))
    return out


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


def _memory_parts(scenario: Scenario, draws: int, tick_s: float, keep_ticks: bool = True,
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
    event rows of all draws and, with a cooling model, the per-tick PUE.  An upper estimate: runs, events and
    failures are counted at a high draw (``tests/site/test_engine.py`` checks it against the
    traced peak).
    """
    return int(sum(_memory_parts(scenario, draws, tick_s, keep_ticks, reduce_s).values()))


def _default_memory_limit() -> int:
    """Half of the machine's physical memory (16 GiB where it cannot be read) [bytes]."""
    import os

    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


#: Rough engine throughput [ticks x draws per second] for the up-front estimate
#: (benchmarks/bench_forecast.py: 24 h at 100 ms, 20 draws of 100,000 GPUs in about 2 s
#: on a 2-core machine, i.e. ~9e6; taken lower so the estimate errs long).  The
#: ``forecast`` command uses it too, to say up front that a run will take a while.
TICK_DRAWS_PER_S = 5e6


def _progress_bar(progress, draws: int, n: int, tick: float, est_bytes: int):
    """(Progress, whether this call owns it) for :func:`forecast`."""
    from .._progress import Progress

    if isinstance(progress, Progress):
        return progress, False
    est_s = n * draws / TICK_DRAWS_PER_S
    bar = Progress(draws, "forecast", "draw",
                   enabled=(est_s >= 2.0) if progress is None else bool(progress))
    bar.announce(f"{n:,} ticks of {tick:g} s x {draws:,} draws = {n * draws:,} tick-draws, "
                 f"memory about {est_bytes / 2**20:,.0f} MiB", estimate_s=est_s)
    return bar, True


def forecast(scenario: Scenario, *, draws: int = 20, seed: int = 0,
             tick_s: float | None = None, memory_limit_bytes: int | None = None,
             keep_ticks: bool = True, reduce_s: float = 1.0,
             chunk_ticks: int | None = None, progress=False) -> ForecastResult:
    """Forecast the site's IT and facility power over the scenario's horizon.

    Parameters
    ----------
    scenario : Scenario
        Site, hardware, jobs, mitigations.
    draws : int, default 20
        Monte Carlo draws of failures and per-GPU timing offsets [-].
    seed : int, default 0
        Seed of the random streams (see :func:`job_randomness`).
    tick_s : float, optional
        Engine tick (default: ``scenario.tick_s``, 0.1 s) [s].
    memory_limit_bytes : int, optional
        Refuse (``ScenarioError`` with the estimate) a forecast whose
        :func:`memory_estimate_bytes` exceeds this (default: half the physical memory)
        [bytes].
    keep_ticks : bool, default True
        Keep every draw's per-tick power (``it_w``, ``power_w()``, ``timeline``).  With
        False each draw is reduced to ``reduce_s`` interval statistics and its metrics
        as soon as it is computed (:mod:`powerlab.site.reduction`): memory grows with
        the intervals, not with draws x ticks.
    reduce_s : float, default 1
        Interval of the reduction when ``keep_ticks`` is False [s].
    chunk_ticks : int, optional
        Ticks per chunk in which each draw's power is built and reduced (default
        65,536, rounded up to whole reduction intervals; :mod:`powerlab.site.chunks`).
        The per-tick power does not depend on it; the reduced figures only through
        floating-point summation order (relative 1e-9 or better).
    progress : bool, None or powerlab._progress.Progress, default False
        Show the size (ticks x draws), an estimate and then draws done, rate and time
        left on standard error (:mod:`powerlab._progress`): ``True`` always, ``None``
        when the estimate is 2 s or more (what ``powerlab forecast`` passes), ``False``
        never (the default, so that loops of forecasts such as a mitigation search stay
        quiet); a ``Progress`` (total = draws) is updated and left open for the caller.

    Returns
    -------
    ForecastResult

    Notes
    -----
    A chain of named steps, as pvlib's ``ModelChain.run_model``: :func:`_check_request`
    (arguments, horizon, memory), :func:`_setup` (what every draw shares), then per
    draw :func:`_run_draw` (:func:`_disturbance_step`, per job :func:`_job_step` with
    its interruptions and :func:`_power_step`, then :func:`_it_power_step`), and
    :func:`_assemble` (events, throughput and interruption tables, the result).
    """
    tick, n, est = _check_request(scenario, draws, seed, tick_s, memory_limit_bytes,
                                  keep_ticks, reduce_s)
    bar, own_bar = _progress_bar(progress, draws, n, tick, est)
    eng = _setup(scenario, draws, seed, tick, n, keep_ticks, reduce_s, chunk_ticks)
    acc = _Collected()
    try:
        for d in range(draws):
            _run_draw(eng, acc, d)
            bar.update()
    except BaseException:
        if own_bar:
            bar.close(interrupted=True)  # Ctrl-C: the line says how far it got
        raise
    if own_bar:
        bar.close()
    sag_free = None
    if scenario.disturbances:   # the ride-through counterfactual, run on demand
        sag_free = functools.partial(
            forecast, scenario.replace(disturbances=()), draws=draws, seed=seed,
            tick_s=tick_s, memory_limit_bytes=memory_limit_bytes, keep_ticks=keep_ticks,
            reduce_s=reduce_s, chunk_ticks=chunk_ticks)
    return _assemble(eng, acc, sag_free)


# --------------------------------------------------------------------------- engine steps


def _check_request(scenario, draws, seed, tick_s, memory_limit_bytes, keep_ticks,
                   reduce_s) -> tuple[float, int, int]:
    """Step: check the arguments, the horizon and the memory a forecast needs; returns
    the tick [s], the ticks in the horizon and the memory estimate [bytes]."""
    if not isinstance(scenario, Scenario):
        raise PowerlabError(f"forecast() needs a Scenario, got {type(scenario).__name__}")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise ScenarioError(f"draws must be a whole number >= 1, got {draws!r}", key="draws")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) \
            or not 0 <= seed < 2**63:
        raise ScenarioError(f"seed must be a whole number from 0 to 2**63 - 1, got {seed!r}",
                            key="seed")
    tick = float(tick_s if tick_s is not None else scenario.tick_s)
    if not tick > 0:
        raise ScenarioError(f"tick_s must be > 0, got {tick}", key="simulation.tick_s")
    t0 = scenario.start_utc
    n = to_ticks((scenario.end_utc - t0).total_seconds(), tick)
    if n < 2:
        raise ScenarioError("the horizon is shorter than two ticks", key="horizon")
    if n > 50_000_000:
        raise ScenarioError(f"{n:,} ticks ({(scenario.end_utc - t0).total_seconds():,.0f} s "
                            f"at {tick:g} s) is too many (at most 50,000,000); raise "
                            "simulation.tick_s or shorten the horizon",
                            key="simulation.tick_s")
    est = memory_estimate_bytes(scenario, draws, tick, keep_ticks, reduce_s)
    limit = memory_limit_bytes if memory_limit_bytes is not None else _default_memory_limit()
    if est > limit:
        raise ScenarioError(
            f"this forecast would need about {est / 2**30:,.1f} GiB ({draws:,} draws x "
            f"{n:,} ticks of {tick:g} s, {len(scenario.jobs)} jobs), more than the "
            f"{limit / 2**30:,.1f} GiB allowed; use fewer draws, a coarser "
            "simulation.tick_s or a shorter horizon", key="draws")
    return tick, n, est


@dataclass
class _Engine:
    """What every draw of a forecast shares (:func:`_setup`)."""

    scenario: Scenario
    draws: int
    seed: int
    tick: float
    n: int
    t0: pd.Timestamp
    slew: float                  # ramp limit per tick [W]
    rise: float                  # GPU rise and fall time constants [s]
    fall: float
    linear: bool                 # linear GPU response: the chunked fast path
    jticks: list                 # (start, end, stagger delay [s]) per job
    levels: list                 # per-state GPU power per job [W]
    constant_w: float            # idle GPUs in no job and node overheads [W]
    job_idle_w: float            # the jobs' GPUs at idle [W]
    chunk: int                   # ticks per chunk
    it: np.ndarray | None        # per-tick IT power of all draws (keep_ticks)
    red: Reducer | None          # the reduction (keep_ticks=False)


@dataclass
class _Collected:
    """Rows every draw adds: events, throughput, interruption figures and causes."""

    events: list = field(default_factory=list)
    thr: list = field(default_factory=list)
    istats: list = field(default_factory=list)
    causes: list = field(default_factory=list)


def _setup(scenario, draws, seed, tick, n, keep_ticks, reduce_s, chunk_ticks) -> _Engine:
    """Step: the staggered job allocations, power levels, constant loads and the sink
    (per-tick array or :class:`~powerlab.site.reduction.Reducer`) every draw uses."""
    hw, mit = scenario.hardware, scenario.mitigations
    slew = mit.gpu_ramp_limit_w_per_s * tick
    rise, fall = hw.gpu_rise_time_constant_s, hw.gpu_fall_time_constant_s
    t0 = scenario.start_utc
    idle_gpus = hw.cluster_gpus - sum(j.gpus for j in scenario.jobs)
    red = None if keep_ticks else Reducer(scenario, n, tick, t0, draws, reduce_s,
                                          chunk_ticks)
    check_ups_needs_ticks(scenario, keep_ticks)  # disturbances: a UPS needs the ticks
    return _Engine(
        scenario=scenario, draws=draws, seed=seed, tick=tick, n=n, t0=t0, slew=slew,
        rise=rise, fall=fall,
        # one time constant and no ramp limiter: the GPU response is linear and
        # time-invariant, applied once to each draw's summed demand (fast path)
        linear=slew <= 0 and rise == fall,
        jticks=_job_ticks(scenario, t0, tick),
        levels=[job_levels(job, scenario) for job in scenario.jobs],
        constant_w=idle_gpus * hw.gpu_idle_w + hw.nodes * hw.node_overhead_w,
        job_idle_w=sum(job.gpus * hw.gpu_idle_w for job in scenario.jobs),
        chunk=_chunk_len(chunk_ticks, red.per if red is not None else 1),
        it=np.empty((draws, n)) if keep_ticks else None, red=red)


def _run_draw(eng: _Engine, acc: _Collected, d: int) -> None:
    """Step: one Monte Carlo draw, from the job plans to its IT power in the sink."""
    dplan = _disturbance_step(eng, d)
    parts: list = []
    dense = None if eng.linear else np.full(eng.n, eng.constant_w, dtype=float)
    for ji, job in enumerate(eng.scenario.jobs):
        plan, rnd = _job_step(eng, acc, d, ji, dplan)
        deficit = _power_step(eng, ji, plan, rnd, parts, dense)
        delay_s = eng.jticks[ji][2]
        tick = eng.tick
        acc.events.extend((d, tk, job.name, name, dur * tick)
                          for tk, name, dur in plan.events)
        acc.thr.append((d, job.name, job.gpus, plan.train_ticks * tick,
                        plan.lost_ticks * tick, deficit * tick, delay_s))
    _it_power_step(eng, d, parts, dense, dplan)


def _disturbance_step(eng: _Engine, d: int):
    """Step: the grid disturbances of draw ``d`` (trips of jobs, dark nodes;
    :mod:`powerlab.site.disturbances`), None without any."""
    return disturbance_plan(eng.scenario, eng.t0, eng.tick, eng.seed, d)


def _job_step(eng: _Engine, acc: _Collected, d: int, ji: int, dplan
              ) -> tuple[JobPlan, JobDraw]:
    """Step: job ``ji``'s randomness, the causes of its interruptions (planned ones,
    trips; :mod:`powerlab.reliability.interruptions`) and its plan; the interruption figures
    and cause rows are collected."""
    job, tick = eng.scenario.jobs[ji], eng.tick
    s, e, _ = eng.jticks[ji]
    rnd = job_randomness(job, tick, eng.seed, d, ji, s, e)
    marks = interruption_marks(job.interruptions, eng.seed, d, ji, len(rnd.failure_ticks))
    plan = job_plan(job, tick, s, e, rnd.failure_ticks,
                    planned=planned_mask(job.interruptions, marks),
                    trips=dplan.trips[ji] if dplan else None)
    acc.istats.append(interruption_stats(job, plan, marks, s, rnd.failure_ticks, tick))
    acc.causes.extend(cause_rows(job, job.interruptions, marks, s, rnd.failure_ticks,
                                 max(s, e - to_ticks(job.shutdown_s, tick)), d))
    return plan, rnd


def _power_step(eng: _Engine, ji: int, plan: JobPlan, rnd: JobDraw, parts: list,
                dense: np.ndarray | None) -> float:
    """Step: a job's power, as demand steps (linear path, summed chunk by chunk later)
    or added tick by tick to ``dense`` (ramp limiter, unequal rise and fall); returns
    the ramp-limit deficit [ticks of full compute]."""
    if eng.linear:
        parts.append(job_steps(plan, eng.levels[ji], rnd, IDLE))
        return 0.0
    s = eng.jticks[ji][0]
    return _add_dense(dense, plan, eng.levels[ji], rnd, eng.n, s, eng.slew, eng.tick,
                      eng.rise, eng.fall)


def _it_power_step(eng: _Engine, d: int, parts: list, dense: np.ndarray | None,
                   dplan) -> None:
    """Step: the draw's IT power chunk by chunk (tripped nodes dark), into the per-tick
    array or the reduction."""
    scenario = eng.scenario
    if eng.linear:
        dark = None if dplan is None else (
            lambda x, a: apply_dark(x, _shifted(dplan, a), scenario))
        chunks = it_power_chunks(parts, eng.n, eng.constant_w + eng.job_idle_w, eng.tick,
                                 eng.rise, eng.chunk, dark)
    else:
        apply_dark(dense, dplan, scenario)
        chunks = dense_chunks(dense, eng.chunk)
    if eng.red is None:
        for a, x in chunks:
            eng.it[d, a:a + len(x)] = x
        return
    dr = eng.red.draw(d)
    for a, x in chunks:
        dr.feed(a, x)
    dr.finish()


def _assemble(eng: _Engine, acc: _Collected, sag_free=None) -> ForecastResult:
    """Step: the events, throughput and interruption tables and the result."""
    n, t0, tick = eng.n, eng.t0, eng.tick
    ev = pd.DataFrame(acc.events, columns=["draw", "tick", "job", "event", "duration_s"])
    ev = ev[(ev["tick"] >= 0) & (ev["tick"] <= n)].copy()
    ev.insert(1, "timestamp", t0 + pd.to_timedelta(ev["tick"].to_numpy() * tick, unit="s"))
    ev["timestamp"] = ev["timestamp"].astype("datetime64[ns, UTC]")
    ev = ev.sort_values(["draw", "tick", "job"], kind="stable").reset_index(drop=True)
    ev = add_sag_events(ev, eng.scenario, eng.draws, t0, tick)
    tp = pd.DataFrame(acc.thr, columns=["draw", "job", "gpus", "train_s",
                                        "lost_to_failures_s", "ramp_deficit_s",
                                        "stagger_delay_s"])
    tp["useful_gpu_h"] = (tp["train_s"] - tp["lost_to_failures_s"] - tp["ramp_deficit_s"]
                          ) * tp["gpus"] / 3600.0
    tp = pd.concat([tp, pd.DataFrame(acc.istats, index=tp.index)], axis=1)
    return ForecastResult(eng.scenario, eng.it, tick, t0, eng.draws, eng.seed, ev, tp,
                          reduced=eng.red,
                          interruptions=interruption_frame(acc.causes, t0, tick),
                          sag_free=sag_free)


@renamed_keywords(scope="boundary")
def forecast_to_target(scenario, target_se: float, *, thresholds_w=None,
                       probs=(0.1, 0.9), resolution="15min", boundary: str = "facility",
                       draws0: int = 20, max_draws: int = 2000, seed: int = 0,
                       tick_s: float | None = None):
    """Forecast with enough draws that every reported figure reaches a target MC error.

    A pilot of ``draws0`` draws measures the largest standard error over intervals (of
    the exceedance probabilities when ``thresholds_w`` is given, else of the quantile
    bands, relative to the band's mean power); the draws are scaled by
    ``(se / target)^2`` (errors fall as ``1/sqrt(draws)``) and the forecast rerun (draws
    are seeded one by one, so the pilot's draws are the first of the rerun).

    Returns
    -------
    result : ForecastResult
    achieved_se : float
        The largest standard error at the final draw count (a probability, or a
        fraction of the mean power for bands) [-].
    """
    from .uncertainty import exceedance_frame, interval_statistic, quantile_bands

    def worst(res):
        if thresholds_w is not None:
            return float(exceedance_frame(res, thresholds_w, resolution, boundary)
                         ["probability_se"].max())
        qb = quantile_bands(res, probs, resolution, boundary)
        mean = interval_statistic(res, resolution, boundary)[1].mean(axis=0)
        ses = qb[[c for c in qb.columns if c.endswith("_se")]].to_numpy()
        return float((ses / np.abs(mean)[:, None]).max())

    res = forecast(scenario, draws=draws0, seed=seed, tick_s=tick_s)
    se = worst(res)
    if se <= target_se:
        return res, se
    need = min(max_draws, math.ceil(draws0 * (se / target_se) ** 2))
    if need > draws0:
        res = forecast(scenario, draws=need, seed=seed, tick_s=tick_s)
        se = worst(res)
    return res, se
