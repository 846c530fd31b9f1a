"""The time-of-day regression as it was before the levels were absorbed: explicit dummies.

One dense dummy column per run segment, fitted by statsmodels itself (``OLS``,
``OLS(cov_type="HAC")``, ``GLSAR(rho=p).iterative_fit(maxiter=8)`` +
``fit(cov_type="HAC")``): the frozen reference that
:func:`powerlab.throughput.absorb.fit_absorbed` must reproduce.  Cost
``O(n (S + q)^2)`` per fit and ``8 n S`` bytes of dummies: small cases only.

:func:`explicit_dummy_path` swaps it into :func:`powerlab.throughput.dvfs.fit_time_of_day`
(used by ``tests/throughput/test_absorb.py`` and as the same-run baseline of
``benchmarks/bench_dvfs.py``).
"""

from __future__ import annotations

import contextlib
import warnings
from types import SimpleNamespace

import numpy as np


def segment_dummies(seg: np.ndarray) -> np.ndarray:
    """Dense ``n x S`` indicator matrix, columns in ``numpy.unique(seg)`` order."""
    u, inv = np.unique(seg, return_inverse=True)
    d = np.zeros((len(seg), len(u)))
    d[np.arange(len(seg)), inv.ravel()] = 1.0
    return d


def fit_dummies(y, Z, seg, errors, ar_order=1, hac_lags=None):
    """statsmodels on ``[dummies, Z]``; returns the results and the number of dummies."""
    from statsmodels.regression.linear_model import GLSAR, OLS
    Z = Z[:, None] if Z.ndim == 1 else Z
    D = segment_dummies(seg)
    X = np.column_stack([D, Z])
    n = len(y)
    lags = hac_lags if hac_lags is not None else int(np.floor(4 * (n / 100.0) ** (2 / 9)))
    if errors == "ols":
        return OLS(y, X).fit(), D.shape[1]
    if errors == "hac":
        return OLS(y, X).fit(cov_type="HAC", cov_kwds={"maxlags": lags}), D.shape[1]
    model = GLSAR(y, X, rho=ar_order)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = model.iterative_fit(maxiter=8)
    model.iter_info = (it.iter, it.converged)    # the final fit below does not keep them
    return model.fit(cov_type="HAC", cov_kwds={"maxlags": lags}), D.shape[1]


def reference_fit_daily_profile(design, order, errors, ar_order, hac_lags, extra=None):
    """The old ``fit_daily_profile``, with the new function's return shape."""
    F = design.terms(order)
    Z = F if extra is None else np.column_stack(
        [extra[:, None] if extra.ndim == 1 else extra, F])
    res, s = fit_dummies(design.y, Z, design.seg, errors, ar_order, hac_lags)
    params = np.asarray(res.params)[s:]
    cov = np.asarray(res.cov_params())[s:, s:]
    fit = SimpleNamespace(bic=float(res.bic), aic=float(res.aic), params=params, cov=cov,
                          rho=(np.atleast_1d(res.model.rho).copy() if errors == "ar"
                               else None), sm=res)
    k = F.shape[1]
    return fit, params[-k:], cov[-k:, -k:], params, cov


@contextlib.contextmanager
def explicit_dummy_path():
    """Run ``fit_time_of_day`` with the explicit-dummy fits inside this block."""
    from powerlab.throughput import dvfs
    saved = dvfs.fit_daily_profile
    dvfs.fit_daily_profile = reference_fit_daily_profile
    try:
        yield
    finally:
        dvfs.fit_daily_profile = saved
