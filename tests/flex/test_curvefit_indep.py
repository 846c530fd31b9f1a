"""The power-throughput curve (``powerlab.flex.fit_curve``) against an independent generator.

``tests/flexgens/capgen.py`` was written by helper session "hgen" from a physical
description only (DVFS with a voltage floor, leakage, HBM power, power capping per step
phase, slowest-GPU synchronisation), without reading powerlab's flexibility code; its
physics and assumptions are in ``tests/flexgens/CAPGEN_SPEC.md``.  Its :func:`truth` gives
the noise-free mean train-step time at any limit.

Target (the issue's words): "Throughput cost predicted by the curve within 10 % of the
twin's truth on held-out power limits".

Rule applied here: training campaign 700, 600, 500, 400, 300 W, 1 h each, 2 rounds;
held-out limits 650, 450, 350 W.  Predicted cost ``c_hat = 1 - rate_mean(power_at_limit(L))``;
true cost ``c = 1 - t(700 W) / t(L)`` from ``capgen.truth``.  For every held-out limit
with ``c >= 2 %`` (a relative error of a smaller cost is not meaningful):
``|c_hat - c| <= 0.10 c``.  Every case of seeds 0, 1, 2 must pass.  Held-out cases with
``c < 2 %`` are not checked (comm_heavy at 650 W: c = 0.0-0.7 %; compute_bound at 650 W
is 1.3-2.0 %, so only its seed 0 is checked).

Cases the curve misses would be strict expected failures carrying the measured numbers;
the generator was not changed to fit the curve and the rule was not loosened.  The
per-case table over more seeds is ``benchmarks/validate_curve_capgen.py``.

History: until 2026-12-03 the curve's ``power_at_limit`` was ``min(P_ref, kappa L)``, and
compute_bound at 650 W, comm_heavy at 450 and 350 W and the block-length stability of
comm_heavy failed here (strict xfails): capgen's limit binds phase by phase (compute
phases far above the mean power, the all-reduce far below it, the leakiest GPU pacing
the job), so the mean busy power is an affine function of the limit and a limit costs
throughput while still above the mean power.  The curve now takes the power under a
limit from the measured operating points (the *limit map*: per-limit mean busy power,
linear between fitted limits), and every case above passes (10-seed table before and
after in docs/flexibility.md; ``tests/flexgens/README.md`` keeps the first comparison).
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from powerlab.exceptions import AnalysisError
from powerlab.flex import fit_curve

sys.path.insert(0, str(Path(__file__).parents[1] / "flexgens"))
import capgen

TRAIN_LIMITS_W = (700.0, 600.0, 500.0, 400.0, 300.0)
REF_LIMIT_W = 700.0
SEEDS = (0, 1, 2)
MIN_COST = 0.02
REL_TOL = 0.10


@cache
def _campaign(job, seed):
    return capgen.generate(job, seed, limits_w=TRAIN_LIMITS_W, hold_s=3600.0, n_rounds=2)


@cache
def _curve(job, seed, block_s=600.0):
    tel, steps, _ = _campaign(job, seed)
    return fit_curve(tel, steps, block_s=block_s)


def _pred_cost(curve, limit_w):
    p = curve.power_at_limit(limit_w)
    return float(1.0 - curve.relative_rate(p)["rate_mean"].iloc[0])


def _true_cost(job, seed, limit_w):
    return 1.0 - capgen.truth(REF_LIMIT_W, job=job, seed=seed) / capgen.truth(
        limit_w, job=job, seed=seed)


def _misses(job, limit_w):
    """(seed, truth, predicted) of the checked cases that break the 10 % rule."""
    bad, checked = [], 0
    for seed in SEEDS:
        c = _true_cost(job, seed, limit_w)
        if c < MIN_COST:
            continue
        checked += 1
        c_hat = _pred_cost(_curve(job, seed), limit_w)
        if abs(c_hat - c) > REL_TOL * c:
            bad.append((seed, round(c, 4), round(c_hat, 4)))
    return bad, checked


def test_generator_logged_steps_match_truth():
    """Known answer of the generator itself: the logged train steps at each limit,
    away from the first 5 min after a change, average to capgen.truth within 0.6 %
    (the all-reduce jitter gives a standard error of about 0.2 % per limit)."""
    for job in ("compute_bound", "comm_heavy"):
        _, steps, info = _campaign(job, 0)
        tr = steps[steps["phase"] == "train"].reset_index(drop=True)
        lim = info["step_limit_w"]
        sched = info["schedule"]
        seg = sched["start"].searchsorted(tr["timestamp"], side="right") - 1
        seg_start = sched["start"].iloc[seg].reset_index(drop=True)
        settled = (tr["timestamp"] - seg_start).dt.total_seconds() > 300
        for L in TRAIN_LIMITS_W:
            m = tr.loc[settled & (lim == L), "duration_s"].mean()
            assert m == pytest.approx(info["truth"](L), rel=0.006), (job, L)


def test_generator_telemetry_is_canonical_and_physical():
    """The generator's telemetry passes the canonical schema check, and its physics
    holds: the truth's step time falls as the limit rises; settled busy samples stay
    below the limit (mean power, 3 sigma of the 2 W + 0.4 % sensor noise); SwPowerCap is
    (almost) never set at 700 W (only while clocks ramp after a raise) and set in most
    busy samples at 300 W, where the compute phases are capped."""
    from powerlab.telemetry.schema import conform, validate

    tel, _, info = _campaign("compute_bound", 0)
    validate(conform(tel))
    t = info["truth"](np.array([300.0, 400.0, 500.0, 600.0, 700.0]))
    assert np.all(np.diff(t) <= 0) and t[0] > t[-1]
    busy = tel[tel["util_gpu_pct"] > 50]
    assert (busy["power_w"] <= busy["power_limit_w"] * 1.012 + 6.0).mean() > 0.99
    cap = (busy["throttle_reasons"].astype("uint64") & capgen.BIT_SW_POWER_CAP) > 0
    share = cap.groupby(busy["power_limit_w"]).mean()
    assert share[700.0] < 0.01 and share[300.0] > 0.8


@pytest.mark.parametrize("job,limit_w", [
    ("compute_bound", 450.0),
    ("compute_bound", 350.0),
    ("compute_bound", 650.0),
    ("comm_heavy", 450.0),
    ("comm_heavy", 350.0),
])
def test_heldout_cost_within_10pct(job, limit_w):
    """Held-out limit: |c_hat - c| <= 0.10 c for every seed whose true cost c >= 2 %."""
    bad, checked = _misses(job, limit_w)
    assert checked > 0, "no seed has a true cost >= 2 %: nothing to check"
    assert not bad, f"(seed, true cost, predicted cost) outside 10 %: {bad}"


def test_null_limits_never_bind():
    """Null case: limits 700, 690, 680, 670 W never bind for the comm-heavy job (truth:
    every GPU keeps F_MAX in every phase, cost exactly 0).  fit_curve must either refuse
    (AnalysisError) or predict a cost of at most 0.5 % at each of these limits."""
    lims = (700.0, 690.0, 680.0, 670.0)
    for seed in (0, 1):
        for L in lims:
            s = capgen.truth_state(L, job="comm_heavy", seed=seed)
            assert s["fc"].min() == capgen.F_MAX and s["fm"].min() == capgen.F_MAX
            assert _true_cost("comm_heavy", seed, L) == 0.0
        tel, steps, _ = capgen.generate("comm_heavy", seed, limits_w=lims, hold_s=3600.0,
                                        n_rounds=1)
        try:
            curve = fit_curve(tel, steps)
        except AnalysisError:
            continue
        costs = [_pred_cost(curve, L) for L in lims]
        assert max(abs(c) for c in costs) <= 0.005, (seed, costs)


@pytest.mark.parametrize("job", [
    "compute_bound",
    "comm_heavy",
])
def test_block_length_stability(job):
    """Changing the numerical knob block_s from 600 s to 300 s moves the predicted cost
    at each held-out limit by at most max(0.5 percentage point, 5 % of the cost)."""
    for L in (650.0, 450.0, 350.0):
        c6 = _pred_cost(_curve(job, 0, 600.0), L)
        c3 = _pred_cost(_curve(job, 0, 300.0), L)
        assert abs(c3 - c6) <= max(0.005, 0.05 * abs(c6)), (job, L, c3, c6)


def test_fit_curve_timestamp_resolution():
    """The same campaign stored with microsecond timestamps gives the same curve."""
    tel, steps, _ = _campaign("compute_bound", 0)
    tel = tel.assign(timestamp=tel["timestamp"].dt.as_unit("us"))
    steps = steps.assign(timestamp=steps["timestamp"].dt.as_unit("us"))
    c_us = _pred_cost(fit_curve(tel, steps), 450.0)
    assert c_us == pytest.approx(_pred_cost(_curve("compute_bound", 0), 450.0), abs=1e-9)
