"""The phases of one job in one forecast draw, as runs of ticks (:func:`job_plan`).

A job's GPUs follow one template (:mod:`powerlab.site.engine`): start-up, then steps
of compute and communication wait, a checkpoint every ``checkpoint.interval_s`` and an
evaluation every ``eval.interval_s`` (both rounded to whole steps), interrupted by the
arrivals of :func:`powerlab.site.randomness.job_randomness` (failures, planned
interruptions) and by grid-disturbance trips, and a final shutdown.  The plan is laid
out by a chain of named steps, as pvlib's ``ModelChain.run_model`` runs its models:

1. :func:`plan_ticks` - every duration of the job in whole ticks;
2. :func:`arrivals` - the interruptions in time order, each with its kind and downtime;
3. :class:`_Layout` - the phases one after another (:func:`_phases` yields those of a
   fresh or restarted job), each interruption applied by the rules of
   :mod:`powerlab.reliability.interruptions` (:meth:`_Layout.interrupt`);
4. :func:`_expand_blocks` - the training blocks split into compute/comm runs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from .scenario import Job, Scenario
from .timebase import to_ticks

__all__ = ["STATES", "JobPlan", "PlanTicks", "arrivals", "job_levels", "job_plan",
           "plan_ticks"]

#: Phase codes of a GPU template.
STATES = ("idle", "startup", "compute", "comm", "checkpoint", "eval", "down", "shutdown",
          "warmup")
IDLE, STARTUP, COMPUTE, COMM, CKPT, EVAL, DOWN, SHUTDOWN, WARMUP = range(len(STATES))
_TRAIN = -1  # placeholder for a block of steps in a plan
_SEGMENT = -2  # a plan's block list entry (_SEGMENT, sequence, first, end phase)

#: Event names of the arrival kinds (0 failure, 1 planned, 2 trip).
ARRIVAL_NAMES = ("failure", "planned_interruption", "trip")


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


@dataclass(frozen=True)
class PlanTicks:
    """A job's durations in whole engine ticks (:func:`plan_ticks`).

    Attributes
    ----------
    period, compute : int
        Step and its compute part [ticks].
    startup, shutdown, restart, planned_restart : int
        Start-up, shutdown, downtime after a failure and after a planned interruption
        [ticks].
    ckpt_steps, eval_steps : int
        Steps between checkpoints and between evaluations (0: none) [-].
    eval_first_steps : int
        Steps before the first evaluation of a (re)started job [-].
    warmup : int
        Training ticks at the start of a (re)started job run at the warm-up level (flat,
        counted as training for checkpoints and evaluations).
    ckpt, eval : int
        Checkpoint and evaluation durations [ticks].
    """

    period: int
    compute: int
    startup: int
    shutdown: int
    restart: int
    planned_restart: int
    ckpt_steps: int
    eval_steps: int
    ckpt: int
    eval: int
    eval_first_steps: int = 0
    warmup: int = 0


def plan_ticks(job: Job, tick_s: float) -> PlanTicks:
    """Step 1: every duration of ``job`` in whole ticks of ``tick_s`` [s]; steps at
    least 2 ticks, checkpoint and evaluation intervals in whole steps."""
    period = max(2, to_ticks(job.step_time_s, tick_s))
    restart = to_ticks(job.restart_s, tick_s)

    def every(interval_s: float) -> int:
        return max(1, math.floor(interval_s / job.step_time_s + 0.5)) \
            if interval_s > 0 else 0

    return PlanTicks(
        period=period, compute=math.floor(job.compute_fraction * period + 0.5),
        startup=to_ticks(job.startup_s, tick_s), shutdown=to_ticks(job.shutdown_s, tick_s),
        restart=restart,
        planned_restart=(to_ticks(job.interruptions.planned_restart_s, tick_s)
                         if job.interruptions is not None else restart),
        ckpt_steps=every(job.checkpoint_interval_s), eval_steps=every(job.eval_interval_s),
        ckpt=to_ticks(job.checkpoint_duration_s, tick_s),
        eval=to_ticks(job.eval_duration_s, tick_s),
        eval_first_steps=every(job.eval_first_s or job.eval_interval_s),
        warmup=(max(1, math.floor(job.warmup_s / job.step_time_s + 0.5)) * period
                if job.warmup_s > 0 else 0))


def arrivals(failure_ticks: np.ndarray, start_tick: int, pt: PlanTicks,
             planned: np.ndarray | None = None, trips=None) -> list[tuple[int, int, int]]:
    """Step 2: the interruptions of a job as ``(tick, kind, downtime ticks)`` in time
    order; kind 0 failure, 1 planned (:mod:`powerlab.reliability.interruptions`), 2 trip
    (:mod:`powerlab.site.disturbances`); failures and planned ones from ``failure_ticks``
    (ticks from ``start_tick``), trips as ``(tick from the horizon start, downtime)``."""
    out = [(start_tick + int(f), int(planned is not None and bool(planned[i])),
            pt.planned_restart if planned is not None and planned[i] else pt.restart)
           for i, f in enumerate(failure_ticks)]
    out += [(int(tk), 2, int(nd)) for tk, nd in (trips or ())]
    return sorted(out, key=lambda a: a[0])


def _phases(pt: PlanTicks):
    """Generator of ``(state, length or None, event)`` of a (re)started job: start-up,
    then blocks of steps up to the next checkpoint or evaluation, forever (a None length
    trains to the end); the first ``pt.warmup`` training ticks are warm-up blocks."""
    left = pt.warmup
    for st, n, ev in _cadence(pt):
        if st != _TRAIN or left <= 0:
            yield st, n, ev
            continue
        w = left if n is None else min(left, n)
        left -= w
        yield WARMUP, w, None
        if n is None or n > w:
            yield _TRAIN, (None if n is None else n - w), ev


def _cadence(pt: PlanTicks):
    """:func:`_phases` without the warm-up."""
    yield STARTUP, pt.startup, None
    s_ck = 0
    # the first evaluation after eval_first_steps (the count starts that much "late")
    s_ev = pt.eval_steps - pt.eval_first_steps if pt.eval_steps else 0
    while True:
        due = [n - s for n, s in ((pt.ckpt_steps, s_ck), (pt.eval_steps, s_ev)) if n]
        k = min(due) if due else None
        yield _TRAIN, (k * pt.period if k else None), None
        if k:
            s_ck += k
            s_ev += k
            if pt.ckpt_steps and s_ck >= pt.ckpt_steps:
                s_ck = 0
                yield CKPT, pt.ckpt, "checkpoint"
            if pt.eval_steps and s_ev >= pt.eval_steps:
                s_ev = 0
                yield EVAL, pt.eval, "eval"


@dataclass(frozen=True)
class _Sequence:
    """The phases of :func:`_phases` after a start-up, laid out from offset 0 (lists
    indexed by phase, zero-length ones included), with their running training ticks."""

    state: list
    start: list     # [ticks from the first phase]
    length: list
    event: list
    end: np.ndarray         # start + length [ticks]
    train_before: list      # training ticks in the phases before each one (one more)
    last_ckpt: list         # the last checkpoint phase before each one, -1 for none
    run_states: np.ndarray  # the phases expanded into runs (:func:`_expand_blocks`)
    run_lengths: np.ndarray
    run_first: list         # first run of each phase (one more)


@functools.lru_cache(maxsize=32)   # ~150 kB per 1,000 phases and 5 B per run
def _sequence(pt: PlanTicks, ticks: int) -> _Sequence | None:
    """:func:`_phases` after the start-up, covering at least ``ticks`` ticks; None when
    training runs to the end (no checkpoints, no evaluations)."""
    if not (pt.ckpt_steps or pt.eval_steps):
        return None
    gen = _phases(pt)
    next(gen)   # the start-up
    state, start, length, event, train_before, last_ckpt = [], [], [], [], [0], [-1]
    off = 0
    while off < ticks:
        st, n, ev = next(gen)
        state.append(st)
        start.append(off)
        length.append(n)
        event.append(ev)
        off += max(n, 0)
        train_before.append(train_before[-1] + (n if st in (_TRAIN, WARMUP) else 0))
        last_ckpt.append(len(state) - 1 if st == CKPT else last_ckpt[-1])
    blocks = [(st, a, n) for st, a, n in zip(state, start, length) if n > 0]
    run_states, run_lengths = _expand_blocks(blocks, pt.period, pt.compute)
    arr = np.array([(st, n) for st, _, n in blocks], np.int64).reshape(-1, 2)
    cnt = np.zeros(len(state), np.int64)
    cnt[np.asarray(length) > 0] = _run_counts(arr[:, 0], arr[:, 1], pt.period, pt.compute)
    run_first = [0, *np.cumsum(cnt).tolist()]
    return _Sequence(state, start, length, event,
                     np.add(start, np.maximum(length, 0)), train_before, last_ckpt,
                     run_states.astype(np.int8), run_lengths.astype(np.int32), run_first)


@dataclass
class _Layout:
    """Step 3: the phases laid out one after another over ``[t, stop)``."""

    pt: PlanTicks
    arrivals: list
    t: int
    stop: int
    blocks: list = field(default_factory=list)   # (state, start, length)
    events: list = field(default_factory=list)   # (tick, event, duration)
    train: int = 0
    lost: int = 0
    since_ckpt: int = 0      # training ticks since the last completed checkpoint
    fi: int = 0              # next arrival

    def run(self) -> _Layout:
        """Lay out every phase until the shutdown.  The phases after a start-up that end
        before the next arrival and before the stop are laid out at once from
        :func:`_sequence`, with the same blocks, events and counts as one by one."""
        seq = _sequence(self.pt, self.stop - self.t)
        plan = _phases(self.pt)
        fails = [a[0] for a in self.arrivals]
        i = -1   # phase of ``seq`` next (-1: the start-up from ``plan``)
        while self.t < self.stop:
            if i < 0 or seq is None:
                state, length, ev = next(plan)
                i = max(i, 0)
            else:
                while self.fi < len(fails) and fails[self.fi] < self.t:
                    self.fi += 1
                nxt = fails[self.fi] if self.fi < len(fails) else self.stop
                limit = seq.start[i] + min(nxt, self.stop - 1) - self.t
                j = int(np.searchsorted(seq.end, limit, "right"))
                if j > i + 1:
                    self._phases_at_once(seq, i, j)
                    i = j
                    continue
                state, length, ev = seq.state[i], seq.length[i], seq.event[i]
                i += 1
            if length is None:
                length = self.stop - self.t
            if length <= 0:
                if ev == "checkpoint":
                    self.since_ckpt = 0
                continue
            end = min(self.t + length, self.stop)
            while self.fi < len(fails) and fails[self.fi] < self.t:
                self.fi += 1  # before the start (arrivals while down are taken below)
            if self.fi < len(fails) and fails[self.fi] < end:
                self.interrupt(state, ev, fails[self.fi])
                plan = _phases(self.pt)
                i = -1
                continue
            self._block(state, self.t, end - self.t, ev)
            if state == CKPT and end == self.t + length:
                self.since_ckpt = 0
            self.t = end
        return self

    def _phases_at_once(self, seq: _Sequence, i: int, j: int) -> None:
        """Phases ``i .. j-1`` of ``seq`` from ``t``, none interrupted or cut short."""
        shift = self.t - seq.start[i]
        sl = slice(i, j)
        self.blocks.append((_SEGMENT, seq, i, j))   # expanded from the sequence's runs
        self.events.extend([(shift + a, ev, n) for a, ev, n
                            in zip(seq.start[sl], seq.event[sl], seq.length[sl])
                            if ev and n > 0])
        self.train += seq.train_before[j] - seq.train_before[i]
        ck = seq.last_ckpt[j]
        if ck >= i:   # a checkpoint completed in the range: training since it
            self.since_ckpt = seq.train_before[j] - seq.train_before[ck + 1]
        else:
            self.since_ckpt += seq.train_before[j] - seq.train_before[i]
        self.t = shift + int(seq.end[j - 1])

    def _block(self, state: int, t: int, length: int, ev) -> None:
        """A phase of ``length`` ticks from ``t`` (with its event, if any)."""
        if length > 0:
            self.blocks.append((state, t, length))
            if state in (_TRAIN, WARMUP):
                self.train += length
                self.since_ckpt += length
        if ev:
            self.events.append((t, ev, length))

    def interrupt(self, state: int, ev, f: int) -> None:
        """The arrival at tick ``f`` cuts the phase ``state`` short; the job is down,
        arrivals while it is down extend the downtime (rules of
        :mod:`powerlab.reliability.interruptions`), then it restarts."""
        pt, stop = self.pt, self.stop
        _, kind, n_down = self.arrivals[self.fi]
        self.fi += 1
        if f > self.t:
            self._block(state, self.t, f - self.t, None)
        if ev:
            self.events.append((self.t, ev, f - self.t))
        down0 = f
        if kind == 1:   # planned: on-demand checkpoint, no work lost
            down0 = min(f + pt.ckpt, stop)
            if down0 > f:
                self.blocks.append((CKPT, f, down0 - f))
        else:
            self.lost += self.since_ckpt
        self.since_ckpt = 0
        down_end = min(down0 + n_down, stop)
        i_ev = len(self.events)
        self.events.append(None)  # the interruption itself, filled in below
        while self.fi < len(self.arrivals) and self.arrivals[self.fi][0] < down_end:
            g, g_kind, g_down = self.arrivals[self.fi]   # queued, not lost
            self.events.append((g, ARRIVAL_NAMES[g_kind], 0))
            down_end = min(max(down_end, g + g_down), stop)
            self.fi += 1
        self.events[i_ev] = (f, ARRIVAL_NAMES[kind], down_end - f)
        if down_end > down0:
            self.blocks.append((DOWN, down0, down_end - down0))
        self.t = down_end
        if self.t < stop:
            self.events.append((self.t, "restart", 0))


def _expand_blocks(blocks: list, period: int, compute: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Step 4: run-length states and lengths of a list of ``(state, start, length)``
    blocks, the training blocks split into compute/comm runs of steps (``C`` ticks of
    compute, then ``P - C`` of communication; a partial last step computes first), for
    all blocks at once."""
    if not blocks:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    arr = np.array(blocks, dtype=np.int64).reshape(-1, 3)
    st, ln = arr[:, 0], arr[:, 2]
    train = st == _TRAIN
    if compute <= 0 or compute >= period:
        one = COMPUTE if compute >= period else COMM
        return np.where(train, one, st), ln.copy()
    # every block's runs in place: a training block's whole steps alternate compute
    # (even offset from the block's first run) and comm, then its partial last step
    # (compute, then comm if longer than the compute part); other blocks one run
    n_full, rem = np.divmod(ln, period)
    n_full = np.where(train, n_full, 0)
    rem = np.where(train, rem, 0)
    cnt = _run_counts(st, ln, period, compute)
    first = np.cumsum(cnt) - cnt
    total = int(cnt.sum())
    odd = np.zeros(total, np.int8)
    odd[1::2] = 1
    odd ^= np.repeat((first & 1).astype(np.int8), cnt)   # offset parity in the block
    states = odd.astype(np.int64)
    states += COMPUTE                                    # COMM == COMPUTE + 1
    lengths = np.where(odd.view(bool), period - compute, compute)
    other = ~train
    states[first[other]] = st[other]
    lengths[first[other]] = ln[other]
    part = train & (rem > 0)
    lengths[first[part] + 2 * n_full[part]] = np.minimum(rem[part], compute)
    part2 = train & (rem > compute)
    lengths[first[part2] + 2 * n_full[part2] + 1] = rem[part2] - compute
    return states, lengths


def _run_counts(st: np.ndarray, ln: np.ndarray, period: int, compute: int) -> np.ndarray:
    """Runs each block of states ``st`` and lengths ``ln`` expands into
    (:func:`_expand_blocks`)."""
    train = st == _TRAIN
    if compute <= 0 or compute >= period:
        return np.ones(len(st), np.int64)
    n_full, rem = np.divmod(ln, period)
    return np.where(train, 2 * n_full + (rem > 0) + (rem > compute), 1)


def _runs(blocks: list, pt: PlanTicks, start_tick: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """States, first ticks and lengths of the runs of ``blocks`` (:func:`_expand_blocks`;
    segments of a :class:`_Sequence` from its expanded runs)."""
    states_p, lengths_p, plain = [], [], []

    def flush():
        if plain:
            st, ln = _expand_blocks(plain, pt.period, pt.compute)
            states_p.append(st)
            lengths_p.append(ln)
            plain.clear()

    for b in blocks:
        if b[0] == _SEGMENT:
            flush()
            _, seq, i, j = b
            r0, r1 = seq.run_first[i], seq.run_first[j]
            states_p.append(seq.run_states[r0:r1])
            lengths_p.append(seq.run_lengths[r0:r1])
        else:
            plain.append(b)
    flush()
    if not states_p:
        states_p, lengths_p = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    states = np.concatenate(states_p, dtype=np.int64)
    lengths = np.concatenate(lengths_p, dtype=np.int64)
    starts = np.empty(len(lengths), np.int64)
    if len(lengths):
        starts[0] = 0
        np.cumsum(lengths[:-1], out=starts[1:])
        starts += start_tick
    return states, starts, lengths


def job_plan(job: Job, tick_s: float, start_tick: int, end_tick: int,
             failure_ticks: np.ndarray, planned: np.ndarray | None = None,
             trips=None) -> JobPlan:
    """Lay out the phases of a job over its allocation ``[start_tick, end_tick)``.

    The chain of steps of the module docstring: :func:`plan_ticks`, :func:`arrivals`,
    the layout of the phases with each interruption applied, the shutdown, and the
    training blocks split into compute/comm runs.

    Parameters
    ----------
    job : Job
    tick_s : float
        Engine tick [s].
    start_tick, end_tick : int
        Allocation, in ticks from the horizon start.
    failure_ticks : ndarray
        Failure times in ticks from ``start_tick`` (from
        :func:`powerlab.site.randomness.job_randomness`).
    planned : ndarray of bool, optional
        Which of them are planned interruptions (:mod:`powerlab.reliability.interruptions`:
        an on-demand checkpoint saves the work, no detection time).
    trips : sequence of (int, int), optional
        Forced interruptions ``(tick from the horizon start, downtime ticks)`` by grid
        disturbances (:mod:`powerlab.site.disturbances`); work since the last checkpoint
        is lost.

    Returns
    -------
    JobPlan
    """
    pt = plan_ticks(job, tick_s)
    stop_train = max(start_tick, end_tick - pt.shutdown)
    lay = _Layout(pt, arrivals(failure_ticks, start_tick, pt, planned, trips),
                  start_tick, stop_train, events=[(start_tick, "start", 0)]).run()
    if pt.shutdown and end_tick > stop_train:
        lay.blocks.append((SHUTDOWN, stop_train, end_tick - stop_train))
        lay.events.append((stop_train, "shutdown", end_tick - stop_train))
    lay.events.append((end_tick, "stop", 0))
    states, starts, lengths = _runs(lay.blocks, pt, start_tick)
    return JobPlan(states, starts, lengths, lay.events, lay.train, lay.lost)


def job_levels(job: Job, scenario: Scenario) -> np.ndarray:
    """Per-GPU power of each state in :data:`STATES`, floor applied [W]."""
    hw = scenario.hardware
    lv = np.array([hw.gpu_idle_w, job.startup_w, job.compute_w, job.comm_w,
                   job.checkpoint_w, job.eval_w, hw.gpu_idle_w, job.shutdown_w,
                   job.warmup_w], float)
    floor = scenario.mitigations.gpu_power_floor_pct_tdp / 100.0 * hw.gpu_tdp_w
    if floor > 0:
        lv[1:] = np.maximum(lv[1:], floor)
    return lv
