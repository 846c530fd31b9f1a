"""The facility power-swing forecast engine.

Given a :class:`~powerlab.grid.scenario.Scenario`, :func:`forecast` produces the IT and
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
already down are absorbed.

:func:`job_randomness` is the one source of randomness: seeded by ``(seed, draw, job)``,
so a brute-force per-GPU simulation (``tests/reference_sim.py``) reproduces a draw
exactly.

IT power = sum of the jobs + idle GPUs in no job + ``nodes * node_overhead_w``.
Facility power = IT * PUE(t) + ``base_load_w``, minus what the battery (if any)
delivers.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
from scipy import signal, special

from ..exceptions import PowerlabError, ScenarioError
from .scenario import Battery, Job, Scenario

__all__ = [
    "STATES",
    "ForecastResult",
    "JobDraw",
    "JobPlan",
    "battery_dispatch",
    "forecast",
    "job_plan",
    "job_randomness",
    "to_ticks",
]

#: Phase codes of a GPU template.
STATES = ("idle", "startup", "compute", "comm", "checkpoint", "eval", "down", "shutdown")
IDLE, STARTUP, COMPUTE, COMM, CKPT, EVAL, DOWN, SHUTDOWN = range(len(STATES))
_TRAIN = -1  # placeholder for a block of steps in a plan


def to_ticks(seconds: float, tick_s: float) -> int:
    """Round a duration to whole engine ticks (half up) [-]."""
    return math.floor(seconds / tick_s + 0.5 + 1e-9)


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


# --------------------------------------------------------------------------- job plan


@dataclass
class JobPlan:
    """The phases of one job in one draw, as runs of ticks.

    Attributes
    ----------
    states, starts, lengths : ndarray
        Run-length encoding of the template over the allocation; ``states`` are codes of
        :data:`STATES` with training blocks already split into compute/comm runs.
    events : list of tuple
        ``(tick, event, duration_ticks)``.
    train_ticks, lost_ticks : int
        Ticks spent stepping, and stepping ticks lost to failures (work after the last
        checkpoint).
    """

    states: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    events: list
    train_ticks: int
    lost_ticks: int


def _steps_rle(length: int, period: int, compute: int) -> tuple[np.ndarray, np.ndarray]:
    """Compute/comm runs of a block of ``length`` ticks of steps."""
    if compute <= 0 or compute >= period:
        st = COMPUTE if compute >= period else COMM
        return np.array([st]), np.array([length])
    n_full, rem = divmod(length, period)
    states = np.tile(np.array([COMPUTE, COMM]), n_full)
    lens = np.tile(np.array([compute, period - compute]), n_full)
    if rem:
        if rem <= compute:
            states = np.append(states, COMPUTE)
            lens = np.append(lens, rem)
        else:
            states = np.append(states, [COMPUTE, COMM])
            lens = np.append(lens, [compute, rem - compute])
    return states, lens


def job_plan(job: Job, tick_s: float, start_tick: int, end_tick: int,
             failure_ticks: np.ndarray) -> JobPlan:
    """Lay out the phases of a job over its allocation ``[start_tick, end_tick)``.

    Parameters
    ----------
    job : Job
    tick_s : float
        Engine tick [s].
    start_tick, end_tick : int
        Allocation, in ticks from the horizon start.
    failure_ticks : ndarray
        Failure times in ticks from ``start_tick`` (from :func:`job_randomness`).

    Returns
    -------
    JobPlan
    """
    P = max(2, to_ticks(job.step_time_s, tick_s))
    C = math.floor(job.compute_fraction * P + 0.5)
    n_su = to_ticks(job.startup_s, tick_s)
    n_sd = to_ticks(job.shutdown_s, tick_s)
    n_rs = to_ticks(job.restart_s, tick_s)
    ck_steps = max(1, math.floor(job.checkpoint_interval_s / job.step_time_s + 0.5)) \
        if job.checkpoint_interval_s > 0 else 0
    ev_steps = max(1, math.floor(job.eval_interval_s / job.step_time_s + 0.5)) \
        if job.eval_interval_s > 0 else 0
    n_ck = to_ticks(job.checkpoint_duration_s, tick_s)
    n_ev = to_ticks(job.eval_duration_s, tick_s)
    stop_train = max(start_tick, end_tick - n_sd)
    fails = [start_tick + int(f) for f in failure_ticks]
    fi = 0
    blocks: list[tuple[int, int, int]] = []  # (state, start, length)
    events: list[tuple[int, str, int]] = [(start_tick, "start", 0)]
    train = 0
    lost = 0
    since_ckpt = 0  # training ticks since the last completed checkpoint
    t = start_tick

    def fresh_plan():
        """Generator of (state, length, event) for a (re)started job."""
        yield STARTUP, n_su, None
        s_ck = s_ev = 0
        while True:
            due = [n - s for n, s in ((ck_steps, s_ck), (ev_steps, s_ev)) if n]
            k = min(due) if due else None
            yield _TRAIN, (k * P if k else None), None
            if k:
                s_ck += k
                s_ev += k
                if ck_steps and s_ck >= ck_steps:
                    s_ck = 0
                    yield CKPT, n_ck, "checkpoint"
                if ev_steps and s_ev >= ev_steps:
                    s_ev = 0
                    yield EVAL, n_ev, "eval"

    plan = fresh_plan()
    while t < stop_train:
        state, length, ev = next(plan)
        if length is None:
            length = stop_train - t
        if length <= 0:
            if ev == "checkpoint":
                since_ckpt = 0
            continue
        end = min(t + length, stop_train)
        while fi < len(fails) and fails[fi] < t:
            fi += 1  # absorbed while down
        if fi < len(fails) and fails[fi] < end:
            f = fails[fi]
            fi += 1
            if f > t:
                blocks.append((state, t, f - t))
                if state == _TRAIN:
                    train += f - t
                    since_ckpt += f - t
            if ev:
                events.append((t, ev, f - t))
            lost += since_ckpt
            since_ckpt = 0
            down_end = min(f + n_rs, stop_train)
            events.append((f, "failure", down_end - f))
            if down_end > f:
                blocks.append((DOWN, f, down_end - f))
            t = down_end
            if t < stop_train:
                events.append((t, "restart", 0))
            plan = fresh_plan()
            continue
        blocks.append((state, t, end - t))
        if ev:
            events.append((t, ev, end - t))
        if state == _TRAIN:
            train += end - t
            since_ckpt += end - t
        if state == CKPT and end == t + length:
            since_ckpt = 0
        t = end
    if n_sd and end_tick > stop_train:
        blocks.append((SHUTDOWN, stop_train, end_tick - stop_train))
        events.append((stop_train, "shutdown", end_tick - stop_train))
    events.append((end_tick, "stop", 0))
    st_parts, len_parts = [], []
    for state, _, length in blocks:
        if state == _TRAIN:
            s_, l_ = _steps_rle(length, P, C)
            st_parts.append(s_)
            len_parts.append(l_)
        else:
            st_parts.append(np.array([state]))
            len_parts.append(np.array([length]))
    states = np.concatenate(st_parts) if st_parts else np.zeros(0, np.int64)
    lengths = np.concatenate(len_parts) if len_parts else np.zeros(0, np.int64)
    starts = start_tick + np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) \
        else np.zeros(0, np.int64)
    return JobPlan(states.astype(np.int64), starts.astype(np.int64),
                   lengths.astype(np.int64), events, train, lost)


def job_levels(job: Job, scenario: Scenario) -> np.ndarray:
    """Per-GPU power of each state in :data:`STATES`, floor applied [W]."""
    hw = scenario.hardware
    lv = np.array([hw.gpu_idle_w, job.startup_w, job.compute_w, job.comm_w,
                   job.checkpoint_w, job.eval_w, hw.gpu_idle_w, job.shutdown_w], float)
    floor = scenario.mitigations.gpu_power_floor_pct_tdp / 100.0 * hw.gpu_tdp_w
    if floor > 0:
        lv[1:] = np.maximum(lv[1:], floor)
    return lv


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


# --------------------------------------------------------------------------- battery


def battery_dispatch(power_w: np.ndarray, tick_s: float, battery: Battery
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Battery power that holds the grid near a trailing moving average.

    The battery delivers ``b = clip(P - target, -P_max, P_max)`` (positive: discharge)
    where ``target`` is the mean of the last ``window_s`` of facility power, within its
    state-of-charge limits; charging stores ``efficiency`` of the energy taken.

    Parameters
    ----------
    power_w : ndarray
        Facility power before the battery, one value per tick [W].
    tick_s : float
        Tick [s].
    battery : Battery

    Returns
    -------
    battery_w : ndarray
        Battery output (positive discharges into the site) [W].
    soc_j : ndarray
        State of charge after each tick [J].
    """
    p_max = battery.power_megawatts * 1e6
    cap = battery.energy_megawatt_hours * 3.6e9
    eff = battery.round_trip_efficiency
    n_w = max(1, to_ticks(battery.window_s, tick_s))
    cs = np.concatenate([[0.0], np.cumsum(power_w)])
    k = np.arange(len(power_w))
    lo = np.maximum(0, k - n_w)
    target = (cs[k] - cs[lo]) / np.maximum(k - lo, 1)
    target[0] = power_w[0]
    b = np.clip(power_w - target, -p_max, p_max)
    de = np.where(b > 0, b, b * eff) * tick_s
    soc = battery.initial_soc_fraction * cap - np.cumsum(de)
    if len(soc) and (soc.min() < 0 or soc.max() > cap):
        # SoC limits bind: exact sequential dispatch (slower, O(ticks) in Python)
        s = battery.initial_soc_fraction * cap
        bl = b.tolist()
        out = np.empty_like(b)
        socs = np.empty_like(b)
        for i, bi in enumerate(bl):
            if bi > 0:
                bi = min(bi, s / tick_s)
                s -= bi * tick_s
            else:
                bi = max(bi, -(cap - s) / (eff * tick_s))
                s -= bi * eff * tick_s
            out[i] = bi
            socs[i] = s
        return out, socs
    return b, soc


# --------------------------------------------------------------------------- engine


def _job_ticks(scenario: Scenario, t0: pd.Timestamp, tick: float
               ) -> list[tuple[int, int, float]]:
    """(start_tick, end_tick, staggered_s) of every job after staggering."""
    out = []
    stagger = scenario.mitigations.stagger_starts_s
    seen: dict[int, int] = {}
    for job in scenario.jobs:
        s = to_ticks((job.start_utc - t0).total_seconds(), tick)
        e = s + to_ticks(job.duration_s, tick)
        delay = 0
        if stagger > 0:
            key = round((job.start_utc - t0).total_seconds())
            rank = seen.get(key, 0)
            seen[key] = rank + 1
            delay = min(to_ticks(rank * stagger, tick),
                        max(0, e - s - to_ticks(job.startup_s + job.shutdown_s, tick) - 1))
        out.append((s + delay, e, delay * tick))
    return out


def forecast(scenario: Scenario, *, draws: int = 20, seed: int = 0,
             tick_s: float | None = None) -> ForecastResult:
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

    Returns
    -------
    ForecastResult
    """
    if not isinstance(scenario, Scenario):
        raise PowerlabError(f"forecast() needs a Scenario, got {type(scenario).__name__}")
    if draws < 1:
        raise ScenarioError(f"draws must be >= 1, got {draws}", key="draws")
    tick = float(tick_s if tick_s is not None else scenario.tick_s)
    if not tick > 0:
        raise ScenarioError(f"tick_s must be > 0, got {tick}", key="simulation.tick_s")
    t0 = scenario.start_utc
    n = to_ticks((scenario.end_utc - t0).total_seconds(), tick)
    if n < 2:
        raise ScenarioError("the horizon is shorter than two ticks", key="horizon")
    if n > 50_000_000:
        raise ScenarioError(f"{n} ticks is too many; raise simulation.tick_s",
                            key="simulation.tick_s")
    hw = scenario.hardware
    mit = scenario.mitigations
    slew = mit.gpu_ramp_limit_w_per_s * tick
    jticks = _job_ticks(scenario, t0, tick)
    idle_gpus = hw.cluster_gpus - sum(j.gpus for j in scenario.jobs)
    constant_w = idle_gpus * hw.gpu_idle_w + hw.nodes * hw.node_overhead_w
    it = np.full((draws, n), constant_w, dtype=float)
    events = []
    thr = []
    for ji, job in enumerate(scenario.jobs):
        s, e, delay_s = jticks[ji]
        levels = job_levels(job, scenario)
        big_j = 0
        for d in range(draws):
            rnd = job_randomness(job, tick, seed, d, ji, s, e)
            plan = job_plan(job, tick, s, e, rnd.failure_ticks)
            big_j = int(rnd.offset_ticks[-1])
            lo, hi = -big_j, n + big_j
            if slew > 0:
                lo -= math.ceil(float(np.ptp(levels)) / slew) + 1
            # clip the plan to [lo, hi) and pad with idle
            st, ln = plan.states, plan.lengths
            b0, b1 = plan.starts, plan.starts + plan.lengths
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
            if slew > 0:
                y = _slew_rle(vals, lens, slew)
                comp = np.repeat(states == COMPUTE, lens)
                x = np.repeat(vals, lens)
                core = slice(-lo, -lo + n)
                deficit = float(np.sum(1.0 - np.minimum(1.0, y[core][comp[core]]
                                                         / x[core][comp[core]])))
                y = y[-big_j - lo:]
            else:
                y = np.repeat(vals, lens)
                deficit = 0.0
            counts = rnd.offset_counts.astype(float)
            if len(counts) == 1:
                it[d] += counts[0] * y
            elif len(counts) <= 64:
                it[d] += np.convolve(y, counts, mode="valid")
            else:
                it[d] += signal.oaconvolve(y, counts, mode="valid")
            for tk, name, dur in plan.events:
                events.append((d, tk, job.name, name, dur * tick))
            thr.append((d, job.name, job.gpus, plan.train_ticks * tick,
                        plan.lost_ticks * tick, deficit * tick, delay_s))
    ev = pd.DataFrame(events, columns=["draw", "tick", "job", "event", "duration_s"])
    ev = ev[(ev["tick"] >= 0) & (ev["tick"] <= n)].copy()
    ev.insert(1, "timestamp", t0 + pd.to_timedelta(ev["tick"].to_numpy() * tick, unit="s"))
    ev["timestamp"] = ev["timestamp"].astype("datetime64[ns, UTC]")
    ev = ev.sort_values(["draw", "tick", "job"], kind="stable").reset_index(drop=True)
    tp = pd.DataFrame(thr, columns=["draw", "job", "gpus", "train_s", "lost_to_failures_s",
                                    "ramp_deficit_s", "stagger_delay_s"])
    tp["useful_gpu_h"] = (tp["train_s"] - tp["lost_to_failures_s"] - tp["ramp_deficit_s"]
                          ) * tp["gpus"] / 3600.0
    return ForecastResult(scenario, it, tick, t0, draws, seed, ev, tp)


# --------------------------------------------------------------------------- results


def _interval_edges(n: int, tick: float, resolution_s: float) -> np.ndarray:
    per = to_ticks(resolution_s, tick)
    if per < 1 or abs(per * tick - resolution_s) > 1e-6 * max(resolution_s, 1e-9):
        raise PowerlabError(f"resolution {resolution_s:g} s is not a whole number of "
                            f"engine ticks ({tick:g} s)")
    return np.arange(0, n, per)


def _parse_resolution(resolution) -> float:
    if isinstance(resolution, (int, float)):
        return float(resolution)
    try:
        return pd.Timedelta(str(resolution)).total_seconds()
    except ValueError:
        raise PowerlabError(f"cannot read resolution {resolution!r}; use e.g. '1s', "
                            "'1min', '15min' or seconds") from None


class ForecastResult:
    """Results of :func:`forecast` (statsmodels style).

    Attributes
    ----------
    scenario : Scenario
    tick_s : float
        Engine tick [s].
    draws : int
    seed : int
    events : DataFrame
        ``draw, timestamp, tick, job, event, duration_s`` (start, checkpoint, eval,
        failure, restart, shutdown, stop).
    throughput : DataFrame
        Per draw and job: ``train_s``, ``lost_to_failures_s``, ``ramp_deficit_s``,
        ``stagger_delay_s``, ``useful_gpu_h``.
    """

    def __init__(self, scenario, it_w, tick_s, start_utc, draws, seed, events, throughput):
        self.scenario = scenario
        self._it = it_w
        self.tick_s = tick_s
        self.start_utc = start_utc
        self.draws = draws
        self.seed = seed
        self.events = events
        self.throughput = throughput
        self._it.setflags(write=False)

    # -- raw arrays --------------------------------------------------------------------
    @property
    def n_ticks(self) -> int:
        """Ticks in the horizon [-]."""
        return self._it.shape[1]

    @cached_property
    def times(self) -> pd.DatetimeIndex:
        """Start of each tick (UTC)."""
        return pd.date_range(self.start_utc, periods=self.n_ticks,
                             freq=pd.Timedelta(seconds=self.tick_s), unit="ns", name="timestamp")

    @cached_property
    def pue(self) -> np.ndarray:
        """PUE at each tick [-]."""
        return self.scenario.site.pue_at(self.times)

    @property
    def it_w(self) -> np.ndarray:
        """IT power, shape (draws, ticks) [W]."""
        return self._it

    @cached_property
    def facility_before_battery_w(self) -> np.ndarray:
        """Facility power before the battery, shape (draws, ticks) [W]."""
        out = self._it * self.pue + self.scenario.site.base_load_w
        out.setflags(write=False)
        return out

    @cached_property
    def battery_w(self) -> np.ndarray | None:
        """Battery output per draw and tick (positive: discharge) [W], or None."""
        bat = self.scenario.mitigations.battery
        if bat is None:
            return None
        fac = self.facility_before_battery_w
        outs = [battery_dispatch(fac[d], self.tick_s, bat) for d in range(self.draws)]
        soc0 = bat.initial_soc_fraction * bat.energy_megawatt_hours * 3.6e9
        self._battery_drain_j = np.array([soc0 - o[1][-1] for o in outs])
        return np.vstack([o[0] for o in outs])

    @property
    def battery_recharge_j(self) -> np.ndarray:
        """Grid energy needed per draw to bring the battery back to its initial state of
        charge (0 without battery) [J]."""
        if self.battery_w is None:
            return np.zeros(self.draws)
        eff = self.scenario.mitigations.battery.round_trip_efficiency
        return np.maximum(self._battery_drain_j, 0.0) / eff + np.minimum(
            self._battery_drain_j, 0.0)

    @cached_property
    def facility_w(self) -> np.ndarray:
        """Facility (grid) power, shape (draws, ticks) [W]."""
        if self.battery_w is None:
            return self.facility_before_battery_w
        out = self.facility_before_battery_w - self.battery_w
        out.setflags(write=False)
        return out

    def power_w(self, scope: str = "facility") -> np.ndarray:
        """Power of one scope, ``"facility"`` or ``"it"``, shape (draws, ticks) [W]."""
        if scope == "facility":
            return self.facility_w
        if scope == "it":
            return self.it_w
        raise PowerlabError(f"scope must be 'facility' or 'it', got {scope!r}")

    def energy_j(self, scope: str = "facility") -> np.ndarray:
        """Energy over the horizon per draw [J]."""
        return self.power_w(scope).sum(axis=1) * self.tick_s

    # -- frames ------------------------------------------------------------------------
    @cached_property
    def timeline(self) -> pd.DataFrame:
        """Tidy per-tick frame: ``timestamp, scope, power_w_mean, power_w_p10,
        power_w_p50, power_w_p90`` (quantiles across draws)."""
        parts = []
        for scope in ("it", "facility"):
            x = self.power_w(scope)
            q = np.quantile(x, [0.1, 0.5, 0.9], axis=0) if self.draws > 1 else \
                np.repeat(x, 3, axis=0)
            parts.append(pd.DataFrame({
                "timestamp": self.times, "scope": scope, "power_w_mean": x.mean(axis=0),
                "power_w_p10": q[0], "power_w_p50": q[1], "power_w_p90": q[2]}))
        df = pd.concat(parts, ignore_index=True)
        df["scope"] = df["scope"].astype("string")
        return df

    def summary_frame(self, resolution="1min", scope: str | None = None,
                      alpha: float = 0.2) -> pd.DataFrame:
        """Interval statistics, one row per interval and scope.

        Parameters
        ----------
        resolution : str or float
            Interval length (``'1s'``, ``'1min'``, ``'15min'`` or seconds), a whole
            number of ticks.
        scope : {'facility', 'it'}, optional
            Only this scope (default: both).
        alpha : float, default 0.2
            The band is the ``alpha/2`` and ``1 - alpha/2`` quantiles across draws of the
            interval mean (p10/p90 for the default).

        Returns
        -------
        DataFrame
            ``interval_start_utc, interval_end_utc, scope, power_w_mean`` (mean over
            draws of the interval mean), ``power_w_min``/``power_w_max`` (extremes over
            ticks and draws), ``power_w_p10``/``power_w_p90`` (band of the interval
            mean across draws), ``ramp_up_w_per_s_max``/``ramp_down_w_per_s_max``
            (largest tick-to-tick rise/fall into a tick of the interval, any draw),
            ``events`` (events of draw 0 in the interval, ``'job:event'`` joined by
            ``'; '``).
        """
        res = _parse_resolution(resolution)
        edges = _interval_edges(self.n_ticks, self.tick_s, res)
        counts = np.diff(np.append(edges, self.n_ticks))
        starts = self.times[edges]
        ends = starts + pd.to_timedelta(counts * self.tick_s, unit="s")
        ev0 = self.events[self.events["draw"] == 0]
        idx = np.searchsorted(edges, ev0["tick"].to_numpy(), side="right") - 1
        ok = (idx >= 0) & (ev0["tick"].to_numpy() < self.n_ticks)
        labels = (ev0["job"] + ":" + ev0["event"]).to_numpy()
        ev_text = [""] * len(edges)
        for i, lab in zip(idx[ok], labels[ok]):
            ev_text[i] = lab if not ev_text[i] else ev_text[i] + "; " + lab
        scopes = [scope] if scope else ["facility", "it"]
        frames = []
        for sc in scopes:
            x = self.power_w(sc)
            means = np.add.reduceat(x, edges, axis=1) / counts
            lo_q, hi_q = np.quantile(means, [alpha / 2, 1 - alpha / 2], axis=0)
            dx = np.diff(x, axis=1, prepend=x[:, :1]) / self.tick_s
            frames.append(pd.DataFrame({
                "interval_start_utc": starts,
                "interval_end_utc": ends,
                "scope": sc,
                "power_w_mean": means.mean(axis=0),
                "power_w_min": np.minimum.reduceat(x.min(axis=0), edges),
                "power_w_max": np.maximum.reduceat(x.max(axis=0), edges),
                "power_w_p10": lo_q,
                "power_w_p90": hi_q,
                "ramp_up_w_per_s_max": np.maximum.reduceat(
                    np.maximum(dx.max(axis=0), 0.0), edges),
                "ramp_down_w_per_s_max": np.maximum.reduceat(
                    np.maximum(-dx.min(axis=0), 0.0), edges),
                "events": ev_text,
            }))
        df = pd.concat(frames, ignore_index=True)
        df["scope"] = df["scope"].astype("string")
        df["events"] = df["events"].astype("string")
        return df

    # -- metrics -----------------------------------------------------------------------
    @cached_property
    def metrics(self) -> pd.DataFrame:
        """Swing metrics per draw and scope (see :func:`powerlab.grid.swings.swing_metrics`)."""
        from .swings import swing_metrics

        rows = []
        for sc in ("facility", "it"):
            x = self.power_w(sc)
            for d in range(self.draws):
                m = swing_metrics(x[d], self.tick_s)
                rows.append({"scope": sc, "draw": d, **m})
        return pd.DataFrame(rows)

    def summary(self) -> ForecastSummary:
        """Text summary (``print(res.summary())``; renders as HTML in JupyterLab)."""
        return ForecastSummary(self)

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()

    def __repr__(self) -> str:
        return (f"<ForecastResult {self.scenario.name!r}: {self.draws} draws x "
                f"{self.n_ticks} ticks of {self.tick_s:g} s from {self.start_utc}>")


class ForecastSummary:
    """Summary tables of a :class:`ForecastResult`."""

    def __init__(self, res: ForecastResult):
        self.res = res
        sc = res.scenario
        m = res.metrics
        self.header = pd.DataFrame({"value": [
            sc.name, sc.hash()[:12], str(res.start_utc), str(res.start_utc + pd.Timedelta(
                seconds=res.n_ticks * res.tick_s)), f"{res.tick_s:g} s", res.draws, res.seed,
            sc.hardware.cluster_gpus, len(sc.jobs)]},
            index=["scenario", "hash", "start (UTC)", "end (UTC)", "tick", "draws", "seed",
                   "GPUs", "jobs"])
        cols = {"peak_w": "peak [MW]", "min_w": "minimum [MW]",
                "swing_1s_w": "largest swing in 1 s [MW]",
                "swing_10s_w": "largest swing in 10 s [MW]",
                "swing_60s_w": "largest swing in 60 s [MW]",
                "ramp_up_w_per_s": "max ramp up [MW/s]",
                "ramp_down_w_per_s": "max ramp down [MW/s]",
                "dominant_frequency_hz": "dominant frequency [Hz]",
                "band_0p1_2hz_rms_w": "RMS in 0.1-2 Hz [MW]",
                "band_2_20hz_rms_w": "RMS in 2-20 Hz [MW]"}
        rows = {}
        for sc_name in ("facility", "it"):
            sub = m[m["scope"] == sc_name]
            for k, lab in cols.items():
                v = sub[k].to_numpy()
                f = 1.0 if k == "dominant_frequency_hz" else 1e-6
                rows.setdefault(lab, {})[f"{sc_name} median"] = np.median(v) * f
                rows[lab][f"{sc_name} worst"] = (v.min() if k == "min_w" else v.max()) * f
        e = {s: res.energy_j(s) / 3.6e9 for s in ("facility", "it")}
        rows["energy [MWh]"] = {"facility median": np.median(e["facility"]),
                                "facility worst": e["facility"].max(),
                                "it median": np.median(e["it"]), "it worst": e["it"].max()}
        self.table = pd.DataFrame(rows).T
        evc = res.events.groupby("event").size() / res.draws
        self.events = evc.rename("per draw").to_frame()
        t = res.throughput
        self.throughput = t.groupby("job")[["train_s", "lost_to_failures_s",
                                            "ramp_deficit_s", "useful_gpu_h"]].mean()
        nyq = 0.5 / res.tick_s
        self.notes = []
        if nyq < 20:
            self.notes.append(f"Tick {res.tick_s:g} s: spectrum ends at {nyq:g} Hz; the "
                              "2-20 Hz band is truncated there.")

    def __str__(self) -> str:
        with pd.option_context("display.width", 120, "display.max_columns", 20,
                               "display.float_format", "{:,.3f}".format):
            parts = ["Power-swing forecast", "=" * 20, self.header.to_string(header=False),
                     "", self.table.to_string(), "", "Events (mean count per draw)",
                     self.events.to_string(), "", "Throughput (mean per draw)",
                     self.throughput.to_string()]
        parts += [""] + [f"Note: {n}" for n in self.notes]
        return "\n".join(parts)

    def _repr_html_(self) -> str:
        fmt = "{:,.3f}".format
        body = (f"<h4>Power-swing forecast</h4>{self.header.to_html(header=False)}"
                f"{self.table.to_html(float_format=fmt)}"
                f"<p>Events (mean count per draw)</p>{self.events.to_html(float_format=fmt)}"
                f"<p>Throughput (mean per draw)</p>"
                f"{self.throughput.to_html(float_format=fmt)}")
        body += "".join(f"<p><i>{html.escape(n)}</i></p>" for n in self.notes)
        return body

    __repr__ = __str__
