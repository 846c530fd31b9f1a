"""Known answers for the engine's fast paths (issue 25): the branch-and-bound search of
the sliding-window swings and the in-place expansion of a job plan's training blocks
are checked against the exhaustive definitions they replace."""

from __future__ import annotations

import numpy as np
import pytest

from powerlab.site.jobplan import COMM, COMPUTE, _expand_blocks
from powerlab.site.streaming import Scratch, SwingStream, window_swings


def _swing_exhaustive(x: np.ndarray, k: int) -> float:
    """The largest max-minus-min over every window of ``k`` consecutive values (scipy's
    running maximum and minimum filters)."""
    if len(x) < k:
        return float(x.max() - x.min())
    from scipy import ndimage

    lo = k // 2   # the filter's window [i - k // 2, i - k // 2 + k) is whole from i = lo
    hi = ndimage.maximum_filter1d(x, k)[lo:lo + len(x) - k + 1]
    low = ndimage.minimum_filter1d(x, k)[lo:lo + len(x) - k + 1]
    return float((hi - low).max())


@pytest.mark.parametrize("kind", ["noise", "steps", "walk", "flat"])
def test_swing_search_by_intervals_equals_every_window(kind):
    """swings.largest_swing: "the largest max-minus-min within any window of w seconds"
    (windows of round(w / tick) + 1 ticks, every start).  Fed in chunks of whole base
    intervals with the intervals' extremes, the bounded search must return exactly
    (bit for bit) the exhaustive maximum, for any tick, interval and chunk length."""
    rng = np.random.default_rng(11)
    for _ in range(10):
        tick = float(rng.choice([0.1, 0.05, 0.01, 0.5]))
        per = int(rng.choice([1, 5, 10, 100]))
        n = int(rng.integers(20, 2500))
        if kind == "noise":
            x = 5e7 + 1e6 * rng.normal(size=n)
        elif kind == "steps":   # a training-like square wave with a rare large step
            x = 5e7 + 3e6 * (np.arange(n) % 37 < 20) + 1e3 * rng.normal(size=n)
            x[n // 2:] += 2e7
        elif kind == "walk":
            x = 5e7 + np.cumsum(1e5 * rng.normal(size=n))
        else:
            x = np.full(n, 5e7)
        chunk = per * int(rng.integers(1, 80))
        st = SwingStream(tick, Scratch(), per)
        for a in range(0, n, chunk):
            xc = x[a:a + chunk]
            e = np.arange(0, len(xc), per)
            st.feed(xc, np.maximum.reduceat(xc, e), np.minimum.reduceat(xc, e))
        got = st.result()
        for w, k in zip(st.WINDOWS_S, st.sizes):
            assert got[f"swing_{w}s_w"] == _swing_exhaustive(x, k), (tick, per, n, chunk, k)


def test_window_swings_rows_take_the_largest_over_rows():
    x = np.array([[0.0, 1.0, 5.0, 1.0], [0.0, 0.0, 0.0, 9.0]])
    assert window_swings(x, [2]) == [9.0]
    assert window_swings(x[0], [3]) == [5.0]


def _expand_loop(blocks, period, compute):
    """Reference: each block on its own, a training block (state -1) as whole steps of
    ``compute`` ticks of compute then ``period - compute`` of comm, the partial last
    step computing first."""
    st, ln = [], []
    for s, _, length in blocks:
        if s != -1:
            st.append(s)
            ln.append(length)
            continue
        if compute <= 0 or compute >= period:
            st.append(COMPUTE if compute >= period else COMM)
            ln.append(length)
            continue
        n_full, rem = divmod(length, period)
        for _ in range(n_full):
            st += [COMPUTE, COMM]
            ln += [compute, period - compute]
        if rem:
            st.append(COMPUTE)
            ln.append(min(rem, compute))
            if rem > compute:
                st.append(COMM)
                ln.append(rem - compute)
    return np.array(st, np.int64), np.array(ln, np.int64)


def test_training_blocks_expand_as_step_by_step():
    rng = np.random.default_rng(5)
    for _ in range(400):
        period = int(rng.integers(2, 40))
        compute = int(rng.integers(-1, period + 2))
        t, blocks = 0, []
        for _ in range(int(rng.integers(0, 25))):
            s = int(rng.choice([-1, -1, 1, 4, 5, 6]))
            length = int(rng.integers(1, 4 * period))
            blocks.append((s, t, length))
            t += length
        got = _expand_blocks(blocks, period, compute)
        want = _expand_loop(blocks, period, compute)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert got[0].dtype == np.int64 and got[1].dtype == np.int64


def _random_job(rng, tick):
    """A job with a random step, checkpoint and evaluation cadence (zero durations
    included) over a few hundred to a few thousand steps."""
    from powerlab.site.scenario import parse_scenario

    step = float(rng.uniform(3, 200)) * tick
    job = {"name": "j", "gpus": 8, "start_utc": "2025-01-01T00:00:00Z",
           "duration_s": float(rng.uniform(10, 3000)) * step + 400, "step_time_s": step,
           "compute_fraction": float(rng.choice([0.0, 0.5, 0.75, 1.0])),
           "startup_s": float(rng.choice([0, 30, 300])),
           "shutdown_s": float(rng.choice([0, 10, 60])), "jitter_s": 0.0,
           "failures": {"rate_per_gpu_h": 1e-3, "restart_s": float(rng.choice([0, 60, 600]))}}
    if rng.random() < 0.8:
        job["checkpoint"] = {"interval_s": float(rng.uniform(1, 200)) * step,
                             "duration_s": float(rng.choice([0, tick, 60]))}
    if rng.random() < 0.6:
        job["eval"] = {"interval_s": float(rng.uniform(1, 200)) * step,
                       "duration_s": float(rng.choice([0, tick, 15]))}
    return parse_scenario({
        "name": "x", "simulation": {"tick_s": tick},
        "horizon": {"start_utc": "2025-01-01T00:00:00Z", "end_utc": "2025-02-01T00:00:00Z"},
        "site": {"pue": 1.2}, "hardware": {}, "jobs": [job]}).jobs[0]


def test_phases_laid_out_at_once_equal_one_by_one(monkeypatch):
    """jobplan: start-up, then "blocks of steps up to the next checkpoint or
    evaluation, forever", cut by each arrival.  Laying out the uninterrupted phases at
    once (from the cached sequence) must give exactly the blocks, events, training and
    lost ticks of laying them out one by one (the generator alone), with failures,
    planned interruptions and trips anywhere (also a tick either side of a phase's
    end), including during start-up and downtime."""
    from powerlab.site import jobplan

    rng = np.random.default_rng(17)
    cases = []
    for _ in range(150):
        tick = float(rng.choice([0.1, 0.01, 1.0]))
        job = _random_job(rng, tick)
        s0 = int(rng.integers(0, 100))
        e0 = s0 + max(1, round(job.duration_s / tick))
        nf = int(rng.poisson(rng.choice([0, 1, 5, 30])))
        fails = rng.integers(0, e0 - s0, nf)
        if rng.random() < 0.5:   # arrivals at, just before and just after phase ends
            free = jobplan.job_plan(job, tick, s0, e0, np.zeros(0, np.int64))
            ends = rng.choice(free.starts, min(3, len(free.starts))) - s0
            fails = np.concatenate([fails, ends + rng.integers(-1, 2, len(ends))])
        fails = np.sort(np.clip(fails, 0, e0 - s0 - 1))
        nf = len(fails)
        planned = rng.random(nf) < 0.3 if rng.random() < 0.5 else None
        trips = ([(int(rng.integers(s0, e0)), int(rng.integers(0, 5000)))
                  for _ in range(int(rng.integers(1, 3)))] if rng.random() < 0.3 else None)
        cases.append((job, tick, s0, e0, fails, planned, trips))
    at_once = [jobplan.job_plan(*c[:5], planned=c[5], trips=c[6]) for c in cases]
    assert sum(jobplan._sequence(jobplan.plan_ticks(c[0], c[1]), c[3] - c[2]) is not None
               for c in cases) > 100   # most cases have checkpoints or evaluations
    monkeypatch.setattr(jobplan, "_sequence", lambda pt, ticks: None)
    for c, got in zip(cases, at_once):
        want = jobplan.job_plan(*c[:5], planned=c[5], trips=c[6])
        np.testing.assert_array_equal(got.states, want.states)
        np.testing.assert_array_equal(got.starts, want.starts)
        np.testing.assert_array_equal(got.lengths, want.lengths)
        assert got.events == want.events
        assert (got.train_ticks, got.lost_ticks) == (want.train_ticks, want.lost_ticks)


@pytest.mark.parametrize("kind", ["noise", "steps", "walk", "flat"])
def test_ramps_searched_by_intervals_equal_every_window_pair(kind):
    """ramps.ramp_of_means: "the mean over every window [t, t + window_s) is compared
    with the mean over the next window ... for every start t on the tick grid".  With
    windows of whole base intervals the reducer searches the window pairs by interval
    bounds, without a per-tick cumulative sum; fed in chunks of whole intervals (the
    horizon may end in a partial one) it must give the largest rise and fall of the
    exhaustive definition, within rounding (the bound misses no window pair)."""
    from powerlab.limits.ramps import ramp_of_means
    from powerlab.site.streaming import RampStream

    rng = np.random.default_rng(23)
    checked = 0
    for _ in range(12):
        tick, per = [(0.1, 2), (0.1, 5), (0.1, 10), (0.05, 2), (0.02, 5)][rng.integers(5)]
        n = int(rng.integers(1300, 6000))
        if kind == "noise":
            x = 5e7 + 1e6 * rng.normal(size=n)
        elif kind == "steps":   # a square wave, a rare large step anywhere
            x = 5e7 + 3e6 * (np.arange(n) % int(rng.integers(3, 90)) < 20) \
                + 1e3 * rng.normal(size=n)
            x[int(rng.integers(0, n)):] += 2e7
        elif kind == "walk":
            x = 5e7 + np.cumsum(1e5 * rng.normal(size=n))
        else:
            x = np.full(n, 5e7)
        chunk = per * int(rng.integers(1, 300))
        st = RampStream(n, tick, Scratch(), per)
        assert st.by_intervals is not None and st.tail_len == 0   # no tick cumsum
        for a in range(0, n, chunk):
            xc = x[a:a + chunk]
            e = np.arange(0, len(xc), per)
            st.feed(xc, np.add.reduceat(xc, e), np.maximum.reduceat(xc, e),
                    np.minimum.reduceat(xc, e))
        got = st.result(0.0, 0.0)
        for suffix, (win, per_s) in {"w_per_s_100ms": (0.1, 1.0), "w_per_s_1s": (1.0, 1.0),
                                     "w_per_min_1min": (60.0, 60.0)}.items():
            if n < 2 * round(win / tick) or round(win / tick) < 2:
                continue
            for direction in ("up", "down"):
                want = ramp_of_means(x, tick, win, direction) * per_s
                scale = 1e-12 * (np.ptp(x) + 1.0) * per_s / win
                assert abs(got[f"ramp_{direction}_{suffix}"] - want) <= scale + 1e-9 * want
                checked += 1
    assert checked >= 24


def test_interval_stats_by_columns_equal_the_strided_reductions():
    """The reducer's per-interval sums, extremes and tick-difference extremes from one
    transposed copy must equal, bit for bit, the column-by-column reductions they
    replace (the sums in the same order), with and without a previous tick."""
    from powerlab.site.reduction import _column_stats, _per_interval

    rng = np.random.default_rng(31)
    for per in range(2, 17):
        k = int(rng.integers(1, 400))
        x = 5e7 + 1e6 * rng.normal(size=k * per)
        x[rng.integers(0, k * per, 5)] += 3e7
        e = np.arange(0, k * per, per)
        for prev in (None, float(x[0] - 1234.5)):
            got = [np.empty(k) for _ in range(5)]
            _column_stats(x, per, prev, Scratch(), *got)
            dx = np.empty_like(x)
            dx[0] = 0.0 if prev is None else x[0] - prev
            np.subtract(x[1:], x[:-1], out=dx[1:])
            want = [_per_interval(f, v, e, per, np.empty(k)) for f, v in
                    ((np.add, x), (np.maximum, x), (np.minimum, x), (np.maximum, dx),
                     (np.minimum, dx))]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
