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

:func:`~powerlab.site.randomness.job_randomness` is the one source of randomness: seeded
by ``(seed, draw, job)``, so a brute-force per-GPU simulation
(``tests/support/reference_sim.py``) reproduces a draw exactly.  Before anything is
allocated the engine checks its memory estimate (:mod:`powerlab.site.memory`).

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
from types import SimpleNamespace

import numpy as np
import pandas as pd

from .._options import Options, renamed_keywords
from .._progress import Progress
from ..exceptions import PowerlabError, ScenarioError
from ..reliability.interruption_draws import (
    cause_rows,
    interruption_frame,
    interruption_marks,
    interruption_stats,
    planned_mask,
)
from .chunks import add_dense, dense_chunks, it_power_chunks, job_steps
from .chunks import chunk_ticks as _chunk_len
from .disturbances import add_sag_events, apply_dark, check_ups_needs_ticks, disturbance_plan
from .jobplan import IDLE, STATES, JobPlan, job_levels, job_plan
from .memory import default_memory_limit, memory_estimate_bytes
from .randomness import JobDraw, job_randomness
from .reduction import Reducer
from .results import ForecastResult
from .scenario import Scenario
from .stagger import stagger_delay_ticks
from .timebase import to_ticks
from .uncertainty import exceedance_frame, interval_statistic, quantile_bands

__all__ = [
    "STATES",
    "TICK_DRAWS_PER_S",
    "ForecastResult",
    "JobDraw",
    "JobPlan",
    "TargetErrorOptions",
    "forecast",
    "forecast_to_target",
    "job_plan",
    "job_randomness",
    "memory_estimate_bytes",
    "to_ticks",
]


# --------------------------------------------------------------------------- engine


def _shifted(dplan, first_tick: int):
    """A disturbance plan's outages in ticks from ``first_tick`` (for one chunk)."""
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


#: Rough engine throughput [ticks x draws per second] for the up-front estimate
#: (benchmarks/bench_forecast.py: 24 h at 100 ms, 20 draws of 100,000 GPUs in about 2 s
#: on a 2-core machine, i.e. ~9e6; taken lower so the estimate errs long).  The
#: ``forecast`` command uses it too, to say up front that a run will take a while.
TICK_DRAWS_PER_S = 5e6


def _progress_bar(progress, draws: int, n: int, tick: float, est_bytes: int):
    """(Progress, whether this call owns it) for :func:`forecast`."""
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
        Seed of the random streams (see :func:`~powerlab.site.randomness.job_randomness`).
    tick_s : float, optional
        Engine tick (default: ``scenario.tick_s``, 0.1 s) [s].
    memory_limit_bytes : int, optional
        Refuse (``ScenarioError`` with the estimate) a forecast whose
        :func:`~powerlab.site.memory.memory_estimate_bytes` exceeds this (default: half
        the physical memory) [bytes].
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
    limit = memory_limit_bytes if memory_limit_bytes is not None else default_memory_limit()
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
    return add_dense(dense, plan, eng.levels[ji], rnd, s, eng.slew, eng.tick, eng.rise,
                     eng.fall)


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


@dataclass(frozen=True)
class TargetErrorOptions(Options):
    """What :func:`forecast_to_target` measures, and the draws it may spend.

    Attributes
    ----------
    thresholds_w : sequence of float or None, default None
        Measure the standard errors of the exceedance probabilities of these thresholds
        (:func:`~powerlab.site.uncertainty.exceedance_frame`); None: of the quantile
        bands ``probs``, relative to the band's mean power [W].
    probs : tuple of float, default (0.1, 0.9)
        Quantiles of the bands [-].
    resolution : str, default '15min'
        Interval of the figures.
    boundary : {'facility', 'it'}, default 'facility'
        Whose power (:data:`~powerlab.limits.requirements.BOUNDARIES`).
    draws0 : int, default 20
        Draws of the pilot forecast [-].
    max_draws : int, default 2000
        Most draws of the rerun [-].
    seed : int, default 0
        Seed of the forecasts (:func:`~powerlab.site.randomness.job_randomness`).
    tick_s : float or None, default None
        Engine tick (None: the scenario's) [s].
    """

    thresholds_w: object = None
    probs: tuple = (0.1, 0.9)
    resolution: str = "15min"
    boundary: str = "facility"
    draws0: int = 20
    max_draws: int = 2000
    seed: int = 0
    tick_s: float | None = None


def _largest_se(res: ForecastResult, opts: TargetErrorOptions) -> float:
    """The largest standard error over the intervals: of the exceedance probabilities
    (with ``thresholds_w``), else of the quantile bands relative to the mean power [-]."""
    if opts.thresholds_w is not None:
        return float(exceedance_frame(res, opts.thresholds_w, opts.resolution,
                                      opts.boundary)["probability_se"].max())
    qb = quantile_bands(res, opts.probs, opts.resolution, opts.boundary)
    mean = interval_statistic(res, opts.resolution, opts.boundary)[1].mean(axis=0)
    ses = qb[[c for c in qb.columns if c.endswith("_se")]].to_numpy()
    return float((ses / np.abs(mean)[:, None]).max())


@renamed_keywords(scope="boundary")
def forecast_to_target(scenario: Scenario, target_se: float,
                       options: TargetErrorOptions | None = None, **option_kw
                       ) -> tuple[ForecastResult, float]:
    """Forecast with enough draws that every reported figure reaches a target MC error.

    A pilot of ``draws0`` draws measures the largest standard error over intervals (of
    the exceedance probabilities when ``thresholds_w`` is given, else of the quantile
    bands, relative to the band's mean power); the draws are scaled by
    ``(se / target)^2`` (errors fall as ``1/sqrt(draws)``) and the forecast rerun (draws
    are seeded one by one, so the pilot's draws are the first of the rerun).

    Parameters
    ----------
    scenario : Scenario
    target_se : float
        The largest standard error wanted (a probability, or a fraction of the mean
        power for bands) [-].
    options : TargetErrorOptions, optional
        What is measured and the draws allowed; default: the defaults.
    **option_kw
        Fields of :class:`TargetErrorOptions` replacing those of ``options``
        (``forecast_to_target(sc, 0.02, thresholds_w=[5e7])``).

    Returns
    -------
    result : ForecastResult
    achieved_se : float
        The largest standard error at the final draw count (a probability, or a
        fraction of the mean power for bands) [-].
    """
    opts = TargetErrorOptions.from_kwargs(options, **option_kw)
    res = forecast(scenario, draws=opts.draws0, seed=opts.seed, tick_s=opts.tick_s)
    se = _largest_se(res, opts)
    if se <= target_se:
        return res, se
    need = min(opts.max_draws, math.ceil(opts.draws0 * (se / target_se) ** 2))
    if need > opts.draws0:
        res = forecast(scenario, draws=need, seed=opts.seed, tick_s=opts.tick_s)
        se = _largest_se(res, opts)
    return res, se
