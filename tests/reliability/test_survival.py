"""Failure hazards per GPU (issue 22): Kaplan-Meier, Weibull, Cox with regression
calibration and cluster-robust intervals, dispersion at rare-event rates -- validated on
generator A's survival data (tests/fleetgens/fleetgen_A.py, written independently)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab._summary import Results
from powerlab.exceptions import AnalysisError
from powerlab.reliability.survival import (
    dispersion_test,
    fit_cox,
    fit_weibull,
    kaplan_meier,
    regression_calibration,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "fleetgens"))


def _gen_a():
    import fleetgen_A

    return fleetgen_A


def test_kaplan_meier_without_censoring_is_the_empirical_survival():
    """Kaplan and Meier (1958): with no censoring the product-limit estimate is the
    empirical survival function, S(t) = #(T > t) / n."""
    t = np.array([5.0, 1.0, 3.0, 3.0, 8.0, 2.0])
    km = kaplan_meier(pd.DataFrame({"duration_s": t, "failed": True}))
    for _, r in km.iterrows():
        assert r["survival"] == pytest.approx(np.mean(t > r["time_s"]))
    assert (km["lower"] <= km["survival"] + 1e-12).all()
    assert (km["upper"] >= km["survival"] - 1e-12).all()


def test_weibull_recovers_shape_and_hazard_ratio():
    """Weibull PH, h(t|x) = (k/lam)(t/lam)^(k-1) exp(x b): shape 1.3 and b per degC
    recovered within 3 standard errors from 20,000 GPUs of generator A over 3 years
    (true temperatures)."""
    df, truth = _gen_a().generate_failures(3, n_gpus=20000, days=3 * 365,
                                           base_rate_per_gpu_year=0.2,
                                           temp_noise_sd_c=0.0)
    w = fit_weibull(df, ["temp_gpu_c_true"])
    se = w.bse
    assert abs(w.params["log_shape"] - np.log(truth["weibull_shape"])) < 3 * se["log_shape"]
    assert abs(w.params["temp_gpu_c_true"] - truth["log_hr_per_c"]) < 3 * se["temp_gpu_c_true"]
    assert "shape" in w.summary()


def test_regression_calibration_undoes_the_attenuation():
    """Carroll et al. (2006, ch. 4): with W = X + U, E[X|W] = mu + (var X / var W)(W - mu);
    the slope of y on E[X|W] is the slope on X."""
    rng = np.random.default_rng(0)
    x = rng.normal(65, 5, 200_000)
    w = x + rng.normal(0, 3, x.size)
    y = 0.04 * x + rng.normal(0, 0.1, x.size)
    naive = np.polyfit(w, y, 1)[0]
    xc = regression_calibration(w, 9.0)[:, 0]
    assert naive == pytest.approx(0.04 * 25 / 34, rel=0.02)
    assert np.polyfit(xc, y, 1)[0] == pytest.approx(0.04, rel=0.02)
    with pytest.raises(AnalysisError, match="measurement-error variance"):
        regression_calibration(w, 100.0)


@pytest.mark.slow
def test_cox_hazard_ratio_coverage_with_noise_and_frailty():
    """95 % coverage of the true log hazard ratio (1.5 per 10 degC) >= 0.9 over 30 seeds
    of generator A (2,000 GPUs, 180 days) with 3 degC of measurement noise on the
    temperature (stated error variance 9 degC^2), without and with a per-host gamma
    frailty of variance 0.5 (cluster-robust by host).  The naive fit is biased low."""
    gen = _gen_a()
    for frailty in (0.0, 0.5):
        cover, est, naive = 0, [], []
        for seed in range(30):
            df, truth = gen.generate_failures(100 + seed, frailty_var=frailty)
            b = truth["log_hr_per_c"]
            r = fit_cox(df, ["temp_gpu_c_measured"], groups="host",
                        error_var={"temp_gpu_c_measured": 9.0})
            f = r.summary_frame().iloc[0]
            cover += f["lower"] <= np.exp(b) <= f["upper"]
            est.append(r.params.iloc[0])
            naive.append(fit_cox(df, ["temp_gpu_c_measured"]).params.iloc[0])
        assert cover / 30 >= 0.9, (frailty, cover)
        # regression calibration removes the attenuation (var X / var W = 25 / 34)
        assert np.mean(naive) < np.mean(est)
        assert np.mean(est) == pytest.approx(b, abs=0.012)


def test_cox_bad_input():
    df = pd.DataFrame({"duration_s": [1.0, 2.0, 3.0], "failed": [True, False, True],
                       "t": [60.0, 70.0, 65.0]})
    with pytest.raises(AnalysisError, match="lacks"):
        fit_cox(df, ["temp"])
    with pytest.raises(AnalysisError, match="error_var"):
        fit_cox(df, ["t"], error_var={"x": 1.0})
    with pytest.raises(AnalysisError, match="failures"):
        fit_cox(df.assign(failed=False), ["t"])


@pytest.mark.slow
def test_dispersion_size_power_and_its_limit_at_rare_rates():
    """Dean and Lawless (1989) score test on generator A's per-GPU x period counts
    (5,000 GPUs, 26 periods, 0.002 failures per GPU-period: ~260 failures), 12 seeds
    each: size near 5 % without frailty (<= 2 of 12), power >= 0.8 at frailty variance 2, and the stated smallest
    detectable variance (~0.9 here) is above 0.5, where power is low -- a documented
    limit, not a hidden one."""
    gen = _gen_a()
    rej = {0.0: 0, 0.5: 0, 2.0: 0}
    n = 12
    for fv in rej:
        for seed in range(n):
            c, _ = gen.generate_failure_counts(200 + seed, frailty_var=fv)
            d = dispersion_test(c, exposure="exposure_periods", fit_nb=False)
            rej[fv] += d.overdispersed
    assert rej[0.0] <= 2
    assert rej[2.0] >= 0.8 * n
    assert 0.5 < d.min_detectable_var < 2.0
    assert rej[0.5] < 0.8 * n            # below the detectable limit, as stated
    # the negative-binomial fit of the frailty variance, on the last data set (var 2)
    nb = dispersion_test(c, exposure="exposure_periods")
    assert nb.score == d.score and nb.frailty_var > 0.5 and nb.lr_p_value < 0.05
    assert "detectable" in nb.summary()


def test_the_survival_results_display_through_the_results_base():
    """WeibullResult, CoxResult and DispersionResult are powerlab Results: ``str``,
    ``repr`` and the HTML are their summary's, and none defines a display of its own."""
    rng = np.random.default_rng(5)
    n = 400
    temp = rng.normal(65.0, 5.0, n)
    t = rng.exponential(1e7 * np.exp(-0.05 * (temp - 65.0)))
    df = pd.DataFrame({"duration_s": np.minimum(t, 2e7), "failed": t < 2e7, "temp": temp})
    counts = pd.DataFrame({"count": rng.poisson(0.5, 200), "gpu_uuid": np.arange(200) % 40})
    fits = [fit_weibull(df, ["temp"]), fit_cox(df, ["temp"]),
            dispersion_test(counts, fit_nb=False)]
    for r in fits:
        assert isinstance(r, Results)
        assert not {"__repr__", "__str__", "_repr_html_"} & set(vars(type(r)))
        text = r.summary().as_text()
        assert str(r) == repr(r) == text and text
        assert r._repr_html_() == r.summary().as_html()
    assert "shape" in str(fits[0]) and "Cox PH" in repr(fits[1])
    assert "Dispersion of failure counts over 40 units" in str(fits[2])


def _noisy_weibull_fleet(seed, n=4000, noise_c=3.0):
    """GPUs whose true mean temperature X ~ N(65, 5^2) degC drives a Weibull PH hazard
    (shape 1.5, HR 1.5 per 10 degC); the analysis sees W = X + N(0, noise_c^2); censored
    at 3 years: about 3,350 failures (near the issue 35 setting of ~2,900)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(65.0, 5.0, n)
    beta = np.log(1.5) / 10
    t = 2.0 * 365 * 86400 * (-np.log(rng.uniform(size=n)) / np.exp(beta * (x - 65))) ** (
        1 / 1.5)
    cens = 3 * 365 * 86400.0
    return pd.DataFrame({"duration_s": np.minimum(t, cens), "failed": t < cens,
                         "temp_gpu_c": x + rng.normal(0, noise_c, n)}), beta


def test_weibull_measurement_error_correction_covers_the_truth():
    """Issue 35 item 7: at ~2,900 failures the naive Weibull HR interval (attenuated by
    var X / var W = 25/34) missed the truth; regression calibration with the stated error
    variance (9 degC^2) covers it, as fit_cox(error_var=...) does (Carroll et al. 2006,
    ch. 4)."""
    naive_cover = fixed_cover = 0
    for seed in range(10):
        df, beta = _noisy_weibull_fleet(seed)
        for kw, hit in (({}, "naive"), ({"error_var": {"temp_gpu_c": 9.0}}, "fixed")):
            r = fit_weibull(df, ["temp_gpu_c"], **kw)
            f = r.summary_frame().loc["temp_gpu_c"]
            inside = f["lower"] <= beta <= f["upper"]
            if hit == "naive":
                naive_cover += inside
            else:
                fixed_cover += inside
                assert r.reliability["temp_gpu_c"] == pytest.approx(25 / 34, abs=0.05)
    assert fixed_cover >= 8 and naive_cover <= 3
    # the null: no temperature effect stays none after the correction
    rng = np.random.default_rng(99)
    df = pd.DataFrame({"duration_s": rng.weibull(1.5, 3000) * 1e7, "failed": True,
                       "temp_gpu_c": rng.normal(65, 5, 3000) + rng.normal(0, 3, 3000)})
    f = fit_weibull(df, ["temp_gpu_c"], error_var={"temp_gpu_c": 9.0}).summary_frame()
    assert f.loc["temp_gpu_c", "lower"] <= 0 <= f.loc["temp_gpu_c", "upper"]
    with pytest.raises(AnalysisError, match="not among"):
        fit_weibull(df, ["temp_gpu_c"], error_var={"power_w": 1.0})
