"""Absorbed segment levels give statsmodels' explicit-dummy estimates (issue 16, DVFS).

The reference is ``tests/support/dvfs_reference.py``: statsmodels ``OLS`` / ``HAC`` /
``GLSAR.iterative_fit`` on a design with one dense dummy column per segment, i.e. the
fitting path of ``fit_time_of_day`` before the levels were absorbed.  Speed is measured in
``benchmarks/bench_dvfs.py``, not here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import AnalysisError
from powerlab.throughput.absorb import fit_absorbed
from powerlab.throughput.dvfs import fit_time_of_day
from powerlab.throughput.synth import simulate_training
from tests.support.dvfs_reference import explicit_dummy_path, fit_dummies

TOL = 1e-6   # the tolerance; the agreement is ~1e-10 (rounding)
TZ = "America/New_York"


def _data(seed=0, n=3000, n_seg=25, rho=0.6, first=None):
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(5, n - 5), n_seg - 1, replace=False))
    if first is not None:
        cuts[0] = first
    seg = np.zeros(n, dtype=np.int64)
    seg[cuts] = 1
    seg = np.cumsum(seg) * 7 + 3          # codes need not be 0..S-1
    h = np.arange(n) * 24 / 288
    Z = np.column_stack([np.sin(2 * np.pi * h / 24), np.cos(2 * np.pi * h / 24),
                         np.sin(4 * np.pi * h / 24), np.cos(4 * np.pi * h / 24),
                         rng.normal(size=n)])
    e = np.zeros(n)
    w = rng.normal(scale=2.0, size=n)
    for t in range(1, n):
        e[t] = rho * e[t - 1] + w[t]
    level = rng.normal(1000.0, 30.0, size=n_seg + 1)[np.cumsum(np.r_[0, np.diff(seg) != 0])]
    y = level + Z @ np.array([3.0, -2.0, 0.5, 0.0, 1.0]) + e
    return y, Z, seg


def _close(a, b, what, scale=None):
    """Largest difference relative to each value (or to ``scale``, e.g. for residuals)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    ref = np.abs(b) if scale is None else scale
    err = np.max(np.abs(a - b) / np.maximum(ref, 1e-12 * np.max(np.abs(b))))
    assert err < TOL, f"{what}: relative difference {err:.2e}"


@pytest.mark.parametrize("errors, p, rho", [("ols", 1, 0.6), ("hac", 1, 0.6), ("ar", 1, 0.6),
                                            ("ar", 2, 0.6), ("ar", 3, 0.6), ("ar", 1, 0.97),
                                            ("ar", 3, 0.995)])
def test_fit_absorbed_equals_statsmodels_with_dummy_columns(errors, p, rho):
    # rho near 1: the whitened dummies are nearly zero inside a segment
    y, Z, seg = _data(seed=p, rho=rho)
    fit = fit_absorbed(y, Z, seg, errors, p, None)
    ref, s = fit_dummies(y, Z, seg, errors, p)
    _close(fit.params, np.asarray(ref.params)[s:], "coefficients")
    _close(fit.levels, np.asarray(ref.params)[:s], "segment levels")
    _close(fit.cov, np.asarray(ref.cov_params())[s:, s:], "covariance")
    _close(fit.bse, np.asarray(ref.bse)[s:], "standard errors")
    _close(fit.resid, np.asarray(ref.resid), "residuals", scale=np.std(ref.resid))
    _close([fit.llf, fit.bic, fit.aic], [ref.llf, ref.bic, ref.aic], "llf, BIC, AIC")
    assert fit.nobs == ref.nobs and fit.df_resid == ref.df_resid
    if errors == "ar":
        _close(fit.rho, ref.model.rho, "AR coefficients")
        assert (fit.iterations, fit.converged) == ref.model.iter_info
    # the test can fail: a wrong residual degrees of freedom (levels not counted) moves
    # the plain standard errors by sqrt((n - 5) / (n - 5 - S)), far beyond TOL
    if errors == "ols":
        n, S = len(y), len(np.unique(seg))
        assert abs(np.sqrt((n - 5) / (n - 5 - S)) - 1) > 100 * TOL


def test_segment_inside_the_dropped_whitening_rows():
    # first segment of 2 intervals with AR(3) errors: its whitened dummy column is zero in
    # the first GLS round; statsmodels' pinv gives it level 0 and one rank less
    y, Z, seg = _data(seed=5, n=1500, n_seg=8, first=2)
    fit = fit_absorbed(y, Z, seg, "ar", 3, None)
    ref, s = fit_dummies(y, Z, seg, "ar", 3)
    _close(fit.params, np.asarray(ref.params)[s:], "coefficients")
    _close(fit.cov, np.asarray(ref.cov_params())[s:, s:], "covariance")
    _close(fit.bic, ref.bic, "BIC")


def test_fit_absorbed_bad_options():
    y, Z, seg = _data(n=200, n_seg=3)
    with pytest.raises(AnalysisError, match="errors must be"):
        fit_absorbed(y, Z, seg, "gls")
    with pytest.raises(AnalysisError, match="ar_order"):
        fit_absorbed(y, Z, seg, "ar", 0)


@pytest.fixture(scope="module")
def restart_run():
    # 4 days, two restarts a day (9 segments), 16 GPUs with telemetry for attribution
    start = pd.Timestamp("2025-06-03", tz="UTC")
    restarts = [start + pd.Timedelta(hours=12 * i + 5) for i in range(8)]
    return simulate_training("2025-06-03", days=4, amplitude_pct=1.5, seed=21, n_hosts=2,
                             step_time_s=20, restarts=restarts, telemetry_interval_s=300)


@pytest.mark.parametrize("kw", [{}, {"errors": "hac"}, {"errors": "ols"},
                                {"ar_order": 2, "shift_alpha": None}])
def test_fit_time_of_day_equals_the_explicit_dummy_path(restart_run, kw):
    run = restart_run
    extra = {"telemetry": run.telemetry} if not kw else {}
    new = fit_time_of_day(run.steps, site_tz=TZ, n_boot=200, **extra, **kw)
    with explicit_dummy_path():
        old = fit_time_of_day(run.steps, site_tz=TZ, n_boot=200, **extra, **kw)
    assert new.counts["n_segments"] >= 9
    assert new.order == old.order
    _close(list(new.ic_values.values()), list(old.ic_values.values()), "BIC per order")
    _close(new.coef, old.coef, "Fourier coefficients")
    _close(new.cov, old.cov, "covariance")
    _close([new.amplitude_pct, *new.amplitude_ci_pct], [old.amplitude_pct,
                                                        *old.amplitude_ci_pct], "amplitude")
    _close([new.pvalue, new.pvalue_model, new.wald_chi2],
           [old.pvalue, old.pvalue_model, old.wald_chi2], "p-values")
    _close(new.profile.to_numpy(), old.profile.to_numpy(), "profile and its interval")
    assert (new.peak_hour, new.trough_hour) == (old.peak_hour, old.trough_hour)
    if new.rho is not None:
        _close(new.rho, old.rho, "AR coefficients")
    if extra:
        att_n, att_o = new.attribution, old.attribution
        assert len(att_n) == 2
        cols = ["coef", "se", "pvalue", "share_mediated", "direct_amplitude_pct"]
        _close(att_n[cols].to_numpy(), att_o[cols].to_numpy(), "attribution")
