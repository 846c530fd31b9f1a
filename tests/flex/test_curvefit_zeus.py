"""The power-throughput curve (powerlab.flex.curvefit, powerlab.levers.curve) on real power-capped data: the Zeus
NSDI'23 power traces (data/zeus-nsdi23/, Apache-2.0), and fit_curve_points itself.

Source definitions (ml-energy/zeus, examples/research_reproducibility/zeus_nsdi23/trace/
README.md): ``power_limit`` "The power limit of the GPU in Watts"; ``time_per_epoch``
"The duration of training one epoch in seconds"; ``average_power`` "The average power
consumption of the GPU in Watts"; "These results not stochastic, and hence only measured
once."  Throughput cost at a limit ``L`` = ``1 - r(L) / r(L_top)``, ``r = 1 /
time_per_epoch`` (issue 23: "Throughput cost predicted by the curve within 10 % of ...
truth on held-out power limits").  Split rules and statistics: tests/support/curve_holdout.py;
the full table: ``python benchmarks/validate_curve_zeus.py`` (docs/flexibility.md).

Tolerances are the values measured on these files (stated in each test) with a margin;
the stated prior slope (b1 = 0.30, b2 = 0) fails the same criterion, so they can fail.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest

import powerlab.flex.curvefit as curve_mod
from powerlab.exceptions import AnalysisError
from powerlab.flex import fit_curve, fit_curve_points, twin_capping_campaign
from powerlab.levers import prior_curve

from ..support.curve_holdout import (
    error_stats,
    groups,
    holdout,
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
    130 jobs; at the power the curve predicts (``power_at_limit``, the limit map: the
    planner's path) 1.69 / 6.30 pp, max 10.6 pp (through the former ``min(kappa L,
    P_ref)``: 2.01 / 6.55 pp, max 25.2 pp)."""
    rows, skipped = interleaved
    assert len(rows) >= 350 and skipped["limits do not bind"] >= 50
    at_power = error_stats(rows, "cost_at_power")
    assert at_power["median_abs_pp"] <= 2.0 and at_power["p90_abs_pp"] <= 7.5, at_power
    via_map = error_stats(rows, "cost_at_limit")
    assert via_map["median_abs_pp"] <= 2.0 and via_map["p90_abs_pp"] <= 7.0, via_map
    assert via_map["max_abs_pp"] <= 15.0, via_map
    # the stated prior slope (H100/A100/B200: b1 = 0.30, b2 = 0) fails the same criterion
    # (p90 13.8 pp): the tolerance discriminates
    prior = error_stats(rows, "cost_prior")
    assert prior["p90_abs_pp"] > 7.5, prior


def test_power_under_held_out_limits_from_the_limit_map(interleaved):
    """``power_at_limit`` at held-out limits inside the fitted range against the power
    measured there: median |error| 0.9 %, p90 3.1 % (the former ``min(kappa L, P_ref)``:
    2.9 %, p90 7.8 %, median +2.0 %: the ratio power/limit is not constant)."""
    rows, _ = interleaved
    err = (rows["power_pred_w"] / rows["power_w"] - 1).abs()
    assert err.median() <= 0.015 and err.quantile(0.9) <= 0.05, err.describe()
    # inside the fitted range the map is the linear interpolation of the fitted limits'
    # powers (made monotone: equal wherever the fitted powers already are)
    same = np.isclose(rows["power_pred_w"], rows["power_interp_w"], rtol=1e-9)
    assert same.mean() >= 0.9


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


@pytest.mark.slow
def test_planner_path_does_not_hang_on_the_kappa_threshold(points, monkeypatch):
    """Without throttle reasons a point counts as capped (for the reported ``kappa``)
    when its power is more than CAPPED_BELOW_REF below P_ref.  The planner's path (the
    limit map) does not use kappa: 3 % and 10 % give the same held-out costs to the last
    digit, while the kappa reported for the same fits moves (the knob is live)."""
    out, kap = [], []
    for thr in (0.03, 0.10):
        monkeypatch.setattr(curve_mod, "CAPPED_BELOW_REF", thr)
        out.append(holdout(points, split_interleaved)[0]["cost_at_limit"].to_numpy())
        k = []
        for _, g in itertools.islice(groups(points), 40):
            try:
                k.append(fit_curve_points(g).kappa)
            except AnalysisError:
                pass
        kap.append(np.array(k))
    assert all(np.array_equal(out[0], o) for o in out[1:])
    assert not np.array_equal(kap[0], kap[1])


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
    c = fit_curve_points(_exact_points(), gpu_model="GX-unknown")
    assert np.allclose(c.b, [0.4, -0.3], atol=1e-9)
    assert c.kappa == pytest.approx(0.97) and c.p_ref_w == pytest.approx(300.0)
    assert (c.min_limit_w, c.max_limit_w) == (140.0, 400.0)     # no prior for GX
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


# --- the limit map (power under a limit from the measured operating points) -------------

def _affine_points():
    """Points where the mean busy power is affine in the limit (a capped compute half and
    a fixed 100-W communication half: P = 0.5 min(L, 700) + 50), the rate on the curve
    b1 = 0.5, b2 = 0 at that power."""
    lim = np.array([700.0, 600.0, 500.0, 400.0, 300.0])
    p = 0.5 * np.minimum(lim, 700.0) + 50.0
    rate = 2.0 * (p / p[0]) ** 0.5
    return pd.DataFrame({"power_limit_w": lim, "power_w": p, "step_rate_per_s": rate})


def test_limit_map_known_answer():
    """docs/flexibility.md (Definitions): between fitted limits the power under a limit is
    the linear interpolation of the fitted limits' mean powers, ``P_ref`` at and above the
    highest, proportional to the limit below the lowest (flagged); the rate is the
    curve's at that power.  With P = 0.5 min(L, 700) + 50: P(650) = 375 W, P(450) =
    275 W, P(200) = 200 * 200 / 300 W (extrapolated: proportional from the lowest
    fitted point); P_ref = 400 W at and above 700 W.  (kappa L would give 0.61 * 450.)"""
    c = fit_curve_points(_affine_points())
    assert c.p_ref_w == 400.0 and np.allclose(c.b, [0.5, 0.0], atol=1e-9)
    assert np.allclose(c.power_at_limit([800, 700, 650, 450, 300, 200]),
                       [400, 400, 375, 275, 200, 200 * 200 / 300])
    assert c.binding_limit_w == pytest.approx(700.0)
    rr = c.rate_at_limit([650, 450, 200])
    assert rr["extrapolated"].tolist() == [False, False, True]
    assert np.allclose(rr["rate_mean"], (rr["power_w"] / 400.0) ** 0.5)
    sf = c.summary_frame([700, 450, 250])
    assert sf["extrapolated"].tolist() == [False, False, True]
    assert "limit map: measured operating points at 5 limits 300-700 W" in str(c)
    assert np.allclose(c.limit_for_power(c.power_at_limit([650.0, 450.0, 320.0])),
                       [650.0, 450.0, 320.0])


def test_limit_map_is_monotone_relative_and_travels_with_p_ref():
    """Noise that makes a lower limit draw more power is pooled (isotonic regression);
    the map is relative to P_ref, so a curve re-anchored at twice the power (what
    powerlab.levers.jobs.job_curves does for another job) draws twice the power at twice
    the limit, with the same rate."""
    pts = _affine_points()
    pts.loc[3, "power_w"] = 310.0                      # 400 W limit: 310 W > 300 W (noise)
    c = fit_curve_points(pts)
    assert c.power_at_limit(500.0) == pytest.approx(305.0)     # pooled
    assert c.power_at_limit(400.0) == pytest.approx(305.0)
    assert np.all(np.diff(c.power_at_limit(np.arange(200.0, 801.0, 10.0))) >= 0)
    d = dataclasses.replace(c, p_ref_w=2 * c.p_ref_w)
    lim = np.array([650.0, 450.0, 350.0, 250.0])
    assert np.allclose(d.power_at_limit(2 * lim), 2 * c.power_at_limit(lim))
    assert np.allclose(d.rate_at_limit(2 * lim)["rate_mean"],
                       c.rate_at_limit(lim)["rate_mean"])


def test_band_carries_the_power_interpolation_uncertainty():
    """Between fitted limits the band of rate_at_limit adds the power's uncertainty
    (neighbours' standard errors, PCHIP-vs-linear distance) to the coefficients': it is
    at least as wide as relative_rate's band at the same power, wider between limits
    where the two interpolants differ, and equal at a fitted limit with one point."""
    pts = _affine_points().assign(power_w=[400.0, 385.0, 330.0, 250.0, 200.0])
    pts["step_rate_per_s"] *= np.exp([0.0, 0.004, -0.003, 0.002, -0.004])
    c = fit_curve_points(pts)
    lim = [650.0, 550.0, 450.0, 400.0]
    a = c.rate_at_limit(lim)
    b = c.relative_rate(a["power_w"])
    wa = np.log(a["rate_upper"] / a["rate_lower"]).to_numpy()
    wb = np.log(b["rate_upper"] / b["rate_lower"]).to_numpy()
    assert np.all(wa >= wb - 1e-12)
    assert wa[0] > wb[0] and wa[1] > wb[1]
    assert wa[3] == pytest.approx(wb[3])


def test_prior_path_is_unchanged():
    """No data: power under a limit min(L, P_ref) (kappa 1, stated), no limit map,
    rate_at_limit = relative_rate at that power; flagged only below the lowest relative
    power the prior's sweeps reached (150 W of 650 W: 23 %, under their 36.6 %)."""
    c = prior_curve("H100-SXM", 650.0)
    lim = np.array([700.0, 650.0, 500.0, 300.0, 150.0])
    assert c.limit_map is None and c.kappa == 1.0
    assert np.array_equal(c.power_at_limit(lim), np.minimum(lim, 650.0))
    rr = c.rate_at_limit(lim)
    ref = c.relative_rate(np.minimum(lim, 650.0))
    assert list(rr["extrapolated"]) == [False, False, False, False, True]
    for col in ("rate_mean", "rate_lower", "rate_upper"):
        assert np.array_equal(rr[col].to_numpy(), ref[col].to_numpy())
    assert c.binding_limit_w == 650.0
    assert "min(kappa L, P_ref)" in str(c)
    with pytest.raises(AnalysisError, match="positive finite"):
        c.rate_at_limit([300.0, -5.0])


def test_reanchored_map_ends_at_the_gpus_highest_limit():
    """A job's unconstrained power is what it draws at the GPU's highest limit: the map
    transferred to a job drawing 500 W (fitted job: 400 W at 700 W, map relative to
    P_ref) would place its highest fitted limit at 875 W, above the 700-W maximum; it
    ends at 700 W with P_ref there instead (known answer: at 600 W, between the
    re-anchored 500-W node (x = 1.25, y = 0.75) and (1.4, 1): 0.725 * 500 = 362.5 W).  A
    job drawing less keeps the map as it is (x relative to its own P_ref)."""
    c = fit_curve_points(_affine_points())
    d = c.reanchored(500.0)
    assert d.p_ref_w == 500.0 and d.binding_limit_w == pytest.approx(700.0)
    assert d.power_at_limit(700.0) == pytest.approx(500.0)
    assert d.power_at_limit(600.0) == pytest.approx(362.5)
    lim = np.arange(300.0, 701.0, 10.0)
    assert np.all(d.power_at_limit(lim) <= lim) and np.all(np.diff(d.power_at_limit(lim)) >= 0)
    e = c.reanchored(300.0)
    assert e.limit_map.equals(c.limit_map)
    assert e.power_at_limit(450.0 * 0.75) == pytest.approx(0.75 * c.power_at_limit(450.0))
