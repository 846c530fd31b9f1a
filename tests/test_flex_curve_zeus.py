"""The power-throughput curve (powerlab.flex.curve) on real power-capped data: the Zeus
NSDI'23 power traces (data/zeus-nsdi23/, Apache-2.0), and fit_curve_points itself.

Source definitions (ml-energy/zeus, examples/research_reproducibility/zeus_nsdi23/trace/
README.md): ``power_limit`` "The power limit of the GPU in Watts"; ``time_per_epoch``
"The duration of training one epoch in seconds"; ``average_power`` "The average power
consumption of the GPU in Watts"; "These results not stochastic, and hence only measured
once."  Throughput cost at a limit ``L`` = ``1 - r(L) / r(L_top)``, ``r = 1 /
time_per_epoch`` (issue 23: "Throughput cost predicted by the curve within 10 % of ...
truth on held-out power limits").  Split rules and statistics: tests/curve_holdout.py;
the full table: ``python benchmarks/validate_curve_zeus.py`` (docs/flexibility.md).

Tolerances are the values measured on these files (stated in each test) with a margin;
the stated prior slope (b1 = 0.30, b2 = 0) fails the same criterion, so they can fail.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import powerlab.flex.curve as curve_mod
from powerlab.exceptions import AnalysisError
from powerlab.flex import PRIORS, fit_curve, fit_curve_points, twin_capping_campaign

from .curve_holdout import (
    error_stats,
    holdout,
    slopes,
    split_extrapolate,
    split_interleaved,
    split_interleaved_odd,
    zeus_points,
)


@pytest.fixture(scope="module")
def points():
    return zeus_points()


@pytest.fixture(scope="module")
def interleaved(points):
    return holdout(points, split_interleaved)


# --- held-out limits on real data -----------------------------------------------------------

def test_interleaved_holdout_errors_within_measured_tolerance(interleaved):
    """Stated rule (limits from the highest: fit on every other one, the top and the
    bottom). Measured at the power measured under the held-out limit: median |error| 1.58
    percentage points of step rate, 90th percentile 6.17 pp, over 400 held-out limits of
    130 jobs; through kappa (the power the curve predicts) 2.01 / 6.55 pp."""
    rows, skipped = interleaved
    assert len(rows) >= 350 and skipped["limits do not bind"] >= 50
    at_power = error_stats(rows, "cost_at_power")
    assert at_power["median_abs_pp"] <= 2.0 and at_power["p90_abs_pp"] <= 7.5, at_power
    via_kappa = error_stats(rows, "cost_at_limit")
    assert via_kappa["median_abs_pp"] <= 2.5 and via_kappa["p90_abs_pp"] <= 8.0, via_kappa
    # the stated prior slope (H100/A100/B200: b1 = 0.30, b2 = 0) fails the same criterion
    # (p90 13.8 pp): the tolerance discriminates
    prior = error_stats(rows, "cost_prior")
    assert prior["p90_abs_pp"] > 7.5, prior


def test_large_costs_within_10pct_on_the_stated_split(interleaved):
    """Held-out limits whose true cost is >= 20 % (60 of them): measured median relative
    error 3.9 %, 88 % within 10 % (the issue's target). Smaller costs are not held to 10 %:
    one measurement scatters by ~3.5 % sd of log rate where the limit does not bind, so a
    2-10 % cost cannot be known to 10 % from these data (measured there: 8 % within)."""
    rows, _ = interleaved
    st = error_stats(rows[rows["cost_true"] >= 0.20], "cost_at_power")
    assert st["n"] >= 50
    assert st["median_rel"] <= 0.06 and st["share_within_10pct"] >= 0.80, st


def test_other_parity_of_the_split(points):
    """The same rule with the other half of the limits held out (positions 1, 3, 5, ...
    fitted with top and bottom). Measured: median 2.64 pp, p90 6.05 pp; for costs >= 20 %
    median 3.58 pp but only 45 % within 10 % relative (the cliff at the lowest limits of
    the A40 and RTX 6000 bends the quadratic: docs/flexibility.md)."""
    rows, _ = holdout(points, split_interleaved_odd)
    st = error_stats(rows, "cost_at_power")
    assert st["median_abs_pp"] <= 3.0 and st["p90_abs_pp"] <= 7.5, st
    big = error_stats(rows[rows["cost_true"] >= 0.20], "cost_at_power")
    assert big["median_abs_pp"] <= 5.0, big


def test_extrapolation_below_the_fitted_range(points):
    """Fit on the highest half of the limits: one limit below the fitted range, median
    |error| 1.65 pp (as inside it); three or more below, median 20.3 pp with the cost
    underestimated (median signed -19.2 pp): the curve must not be read far below the
    lowest fitted limit."""
    rows, _ = holdout(points, split_extrapolate)
    one = error_stats(rows[rows["steps_below"] == 1], "cost_at_power")
    far = error_stats(rows[rows["steps_below"] >= 3], "cost_at_power")
    assert one["median_abs_pp"] <= 2.5, one
    assert far["median_abs_pp"] > 10.0 and far["bias_pp"] < -10.0, far


def test_kappa_rule_is_stable_when_its_threshold_changes(points, monkeypatch):
    """Without throttle reasons a point counts as capped when its power is more than
    CAPPED_BELOW_REF below P_ref; 3 %, 5 % and 10 % give a median |error| through kappa
    of 1.99, 2.01 and 1.99 pp (p90 6.62, 6.55, 6.74)."""
    out = []
    for thr in (0.03, 0.05, 0.10):
        monkeypatch.setattr(curve_mod, "CAPPED_BELOW_REF", thr)
        out.append(error_stats(holdout(points, split_interleaved)[0], "cost_at_limit"))
    med = [o["median_abs_pp"] for o in out]
    p90 = [o["p90_abs_pp"] for o in out]
    assert np.ptp(med) <= 0.2 and np.ptp(p90) <= 0.5, (med, p90)


def test_real_slopes_against_the_stated_prior(points):
    """PRIORS: b1 = 0.30 +- 0.12 (b2 = 0) for H100/A100/B200, none of which Zeus measured.
    Measured (the prior's form fitted to every job whose limits bind): median b1 P100 0.29,
    V100 0.45, RTX 6000 0.68, A40 1.14; cost at 80 % of P_ref (quadratic fit) median 5.3,
    4.1, -0.8, 0.1 % against the prior's 6.5 %: near the top the prior overstates the cost,
    over the whole range (down to ~45 % of P_ref) it understates it on the A40, RTX 6000
    and V100."""
    sl = slopes(points)
    med = sl.groupby("gpu_model")["b1"].median()
    pr = PRIORS["H100"]
    assert abs(med["P100"] - pr.b1) <= pr.b1_sd
    assert med["A40"] > pr.b1 + 2 * pr.b1_sd
    c80 = sl.groupby("gpu_model")["cost_at_80pct"].median()
    assert (c80 < 1 - 0.8 ** pr.b1).all(), c80


# --- fit_curve_points ----------------------------------------------------------------------

def _exact_points(b1=0.4, b2=-0.3, kappa=0.97, p_ref=300.0):
    lim = np.array([400.0, 300.0, 260.0, 220.0, 180.0, 140.0])
    p = np.minimum(kappa * lim, p_ref)
    u = np.log(p / p_ref)
    rate = 2.5 * np.exp(b1 * u + b2 * u * u)
    return pd.DataFrame({"power_limit_w": lim, "power_w": p, "step_rate_per_s": rate})


def test_exact_curve_is_recovered():
    """Points on log r = b1 u + b2 u^2, u = log(P / P_ref), P = min(kappa L, P_ref)
    (docs/flexibility.md, Definitions): the fit returns b1, b2 and kappa exactly."""
    c = fit_curve_points(_exact_points(), gpu_model="V100")
    assert np.allclose(c.b, [0.4, -0.3], atol=1e-9)
    assert c.kappa == pytest.approx(0.97) and c.p_ref_w == pytest.approx(300.0)
    assert (c.min_limit_w, c.max_limit_w) == (140.0, 400.0)     # no prior for V100
    assert c.source == "fit: OLS (HC3) on 6 operating points at 6 power limits"
    assert c.fit_power_w == (pytest.approx(0.97 * 140), pytest.approx(300.0))
    assert "fitted on mean powers 136-300 W" in str(c)
    sf = c.summary_frame([400, 220])
    assert sf["step_rate_loss_pct"].iloc[0] == 0
    u = np.log(0.97 * 220 / 300)
    assert sf["step_rate_loss_pct"].iloc[1] == pytest.approx(
        100 * (1 - np.exp(0.4 * u - 0.3 * u * u)))


def test_rate_or_time_columns_give_the_same_fit():
    pts = _exact_points()
    a = fit_curve_points(pts)
    t = pts.drop(columns="step_rate_per_s").assign(step_time_s=1 / pts["step_rate_per_s"])
    e = pts.drop(columns="step_rate_per_s").assign(epoch_time_s=80 / pts["step_rate_per_s"])
    assert np.allclose(fit_curve_points(t).b, a.b)
    assert np.allclose(fit_curve_points(e).b, a.b)


def test_same_fit_as_fit_curve_on_its_blocks():
    """fit_curve is curve_points + the one fit of fit_curve_points."""
    tel, st = twin_capping_campaign([700, 500, 400, 300], hours_each=0.5, rounds=1, seed=1)
    c = fit_curve(tel, st, block_s=300)
    d = fit_curve_points(c.points)
    assert np.array_equal(c.b, d.b) and np.array_equal(c.cov, d.cov)
    assert (c.kappa, c.p_ref_w, c.clock) == (d.kappa, d.p_ref_w, d.clock)


@pytest.mark.parametrize("change,match", [
    (lambda p: p.drop(columns="power_w"), "missing"),
    (lambda p: p.drop(columns="step_rate_per_s"), "need a rate"),
    (lambda p: p.assign(power_w=p["power_w"].where(p.index != 2, -1.0)), "positive finite"),
    (lambda p: p.assign(power_limit_w=p["power_limit_w"].astype(str).where(
        p.index != 1, "n/a")), "positive finite"),
    (lambda p: p.iloc[:2], "2 distinct power limit"),
    # 400 and 300 W both at P_ref: 4 limits, 3 power levels (a point of leverage 1)
    (lambda p: p.iloc[:4].assign(power_w=[300.0, 300.0, 252.2, 213.4]),
     "3 distinct power levels"),
    (lambda p: p.assign(power_w=300.0 - p.index), "less than 10 %"),
    (lambda p: p.to_dict(), "must be a DataFrame"),
])
def test_bad_points_are_refused(change, match):
    with pytest.raises(AnalysisError, match=match):
        fit_curve_points(change(_exact_points()))
