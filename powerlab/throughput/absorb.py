"""Regressions with one level per run segment absorbed (fixed effects, Frisch-Waugh-Lovell).

The time-of-day model (:mod:`powerlab.throughput.diurnal`) has one level per run segment
plus a handful of Fourier (and mediator) columns.  With explicit dummy columns the
design is ``n x (S + q)`` and every fit is an SVD costing ``O(n (S + q)^2)``: with two
restarts a day for a year (``S = 730``) that is hours of work and gigabytes of dummies.
:func:`fit_absorbed` returns the *same* estimates as statsmodels' ``OLS`` /
``OLS(cov_type="HAC")`` / ``GLSAR.iterative_fit`` + ``fit(cov_type="HAC")`` on the
dummy design, at ``O(n q)`` per fit:

- the dummy block ``D`` is kept as a sparse matrix; for AR(p) errors it is whitened
  exactly as ``GLSAR.whiten`` whitens every column (``x_t - sum_i rho_i x_{t-i}``, the
  first ``p`` rows dropped), which leaves it sparse with ``D_w' D_w`` banded;
- the other columns ``Z`` and ``y`` are projected off ``D_w``
  (``M v = v - D_w (D_w' D_w)^{-1} D_w' v``, a sparse LU of the ``S x S`` matrix); by
  Frisch-Waugh-Lovell the coefficients of ``Z``, the residuals, and the ``Z`` block of
  the plain and of the HAC sandwich covariance of the full regression are those of the
  regression of ``M y`` on ``M Z`` [1]_;
- the plain (non-robust) covariance uses the full model's residual degrees of freedom
  ``n - S - q`` (the absorbed levels are parameters too), and the log-likelihood and
  information criteria count them, so BIC / AIC match the dummy regression;
- the levels are recovered as ``(D_w' D_w)^{-1} D_w' (y_w - Z_w b)``; GLSAR's feasible
  iteration (Yule-Walker ``rho`` from the unwhitened residuals, at most ``maxiter``
  rounds, stopping when no coefficient, levels included, moves by a relative ``rtol``)
  is replayed step by step.

References
----------
.. [1] R. Frisch and F. V. Waugh, "Partial time regressions as compared with individual
   trends", Econometrica 1(4), 1933; M. C. Lovell, "Seasonal adjustment of economic time
   series and multiple regression analysis", JASA 58(304), 1963.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import splu
from statsmodels.regression.linear_model import OLS, yule_walker
from statsmodels.tools.tools import pinv_extended

from .._options import choice
from ..exceptions import AnalysisError

__all__ = ["AbsorbedFit", "fit_absorbed"]

ERRORS = ("ar", "hac", "ols")


@dataclass(frozen=True)
class AbsorbedFit:
    """Result of :func:`fit_absorbed` (the statsmodels dummy-variable fit's numbers).

    Attributes
    ----------
    params : numpy.ndarray
        Coefficients of the non-absorbed columns ``Z``.
    cov : numpy.ndarray
        Their covariance (the ``Z`` block of the full model's covariance).
    levels : numpy.ndarray
        One level per segment, in ``numpy.unique(seg)`` order.
    resid : numpy.ndarray
        ``y - level - Z params`` (not whitened), one per row.
    rho : numpy.ndarray or None
        AR coefficients of the errors (``errors="ar"``).
    llf : float
        Gaussian log-likelihood (of the whitened regression for ``"ar"``).
    nobs : int
        Rows in the (whitened) regression.
    rank : int
        Parameters: segment levels plus the columns of ``Z``.
    iterations : int
        Feasible-GLS rounds (``"ar"``); 1 otherwise.
    converged : bool
        Whether the GLS iteration stopped on ``rtol`` before ``maxiter``.
    """

    params: np.ndarray
    cov: np.ndarray
    levels: np.ndarray
    resid: np.ndarray
    rho: np.ndarray | None
    llf: float
    nobs: int
    rank: int
    errors: str
    iterations: int = 1
    converged: bool = False
    cov_kwds: dict = field(default_factory=dict)

    @property
    def bse(self) -> np.ndarray:
        """Standard errors of ``params``."""
        return np.sqrt(np.diag(self.cov))

    @property
    def df_resid(self) -> float:
        return float(self.nobs - self.rank)

    @property
    def bic(self) -> float:
        """``-2 llf + log(nobs) rank``, as statsmodels' dummy-variable fit."""
        return float(-2.0 * self.llf + np.log(self.nobs) * self.rank)

    @property
    def aic(self) -> float:
        """``-2 llf + 2 rank``, as statsmodels' dummy-variable fit."""
        return float(-2.0 * self.llf + 2.0 * self.rank)


def _whiten(x: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """``GLSAR.whiten``: ``x_t - sum_i rho_i x_{t-i}``, the first ``p`` rows dropped."""
    x = np.asarray(x, np.float64)
    out = x.copy()
    for i in range(len(rho)):
        out[i + 1:] = out[i + 1:] - rho[i] * x[:-(i + 1)]
    return out[len(rho):]


class _Absorber:
    """Projection off the (whitened) segment dummies, kept sparse."""

    def __init__(self, inv: np.ndarray, n_seg: int, rho: np.ndarray):
        n, p = len(inv), len(rho)
        D = sparse.csr_matrix((np.ones(n), (np.arange(n), inv)), shape=(n, n_seg))
        Dw = D[p:]
        for i in range(p):
            Dw = Dw - rho[i] * D[p - i - 1:n - i - 1]
        Dw = Dw.tocsc()
        diag = np.asarray(Dw.multiply(Dw).sum(axis=0)).ravel()
        # a segment whose only rows are the p dropped ones has an all-zero column: the
        # minimum-norm solution (statsmodels' pinv) gives it level 0 and one rank less
        self.cols = np.flatnonzero(diag > 0)
        self.n_seg = n_seg
        self.Dw = Dw[:, self.cols] if len(self.cols) < n_seg else Dw
        self.DwT = self.Dw.T.tocsr()
        self.lu = splu((self.DwT @ self.Dw).tocsc())

    def _solve(self, v: np.ndarray) -> np.ndarray:
        return self.lu.solve(np.asarray(self.DwT @ v, dtype=np.float64))

    def project(self, v: np.ndarray) -> np.ndarray:
        """``v - D_w (D_w' D_w)^{-1} D_w' v`` (rows of the whitened regression)."""
        return v - self.Dw @ self._solve(v)

    def levels(self, r: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n_seg)
        out[self.cols] = self._solve(r)
        return out

    @property
    def rank(self) -> int:
        return len(self.cols)


def _llf(ssr: float, nobs: int) -> float:
    """statsmodels' Gaussian log-likelihood at the least-squares estimate."""
    nobs2 = nobs / 2.0
    return float(-np.log(ssr) * nobs2 - (1 + np.log(np.pi / nobs2)) * nobs2)


def _wls_step(y, Z, inv, n_seg, rho):
    """Least squares with levels absorbed after whitening with ``rho``.

    Returns ``(params_Z, levels, resid (unwhitened), My, MZ, absorber)``.
    """
    ab = _Absorber(inv, n_seg, rho)
    yw, Zw = _whiten(y, rho), _whiten(Z, rho)
    My, MZ = ab.project(yw), ab.project(Zw)
    b = pinv_extended(MZ)[0] @ My
    lev = ab.levels(yw - Zw @ b)
    resid = y - lev[inv] - Z @ b
    return b, lev, resid, My, MZ, ab


def fit_absorbed(y: np.ndarray, Z: np.ndarray, seg: np.ndarray, errors: str = "ar",
                 ar_order: int = 1, hac_lags: int | None = None, *, maxiter: int = 8,
                 rtol: float = 1e-4) -> AbsorbedFit:
    """Regress ``y`` on one level per segment plus ``Z``, the levels absorbed.

    Parameters
    ----------
    y : numpy.ndarray
        Response, one row per interval in time order [any unit].
    Z : numpy.ndarray
        The other regressors (``n x q``), e.g. daily Fourier terms and a mediator.
    seg : numpy.ndarray
        Segment code per row (any hashable values; need not be contiguous).
    errors : {"ar", "hac", "ols"}
        ``"ar"``: ``GLSAR(y, X, rho=ar_order).iterative_fit(maxiter)`` followed by
        ``fit(cov_type="HAC")`` on the whitened data; ``"hac"``: OLS with Newey-West HAC;
        ``"ols"``: OLS with the plain covariance.
    ar_order : int
        Order ``p`` of the AR error model for ``"ar"``.
    hac_lags : int, optional
        HAC bandwidth [rows]; default ``floor(4 (n/100)^(2/9))``.
    maxiter, rtol : int, float
        Feasible-GLS iteration limits (statsmodels' ``iterative_fit``).

    Returns
    -------
    AbsorbedFit
        Equal (to rounding) to the ``Z`` part of the statsmodels fit with explicit dummy
        columns ``[D, Z]``; ``levels`` are the dummies' coefficients.
    """
    choice(errors, "errors", ERRORS, error=AnalysisError)
    if errors == "ar" and not (isinstance(ar_order, (int, np.integer)) and ar_order >= 1):
        raise AnalysisError(f"ar_order must be a positive integer, got {ar_order!r}")
    y = np.asarray(y, np.float64)
    Z = np.asarray(Z, np.float64)
    Z = Z[:, None] if Z.ndim == 1 else Z
    _, inv = np.unique(seg, return_inverse=True)
    inv = inv.ravel()
    n_seg = int(inv.max()) + 1 if len(inv) else 0
    n = Z.shape[0]
    lags = hac_lags if hac_lags is not None else int(np.floor(4 * (n / 100.0) ** (2 / 9)))
    if errors in ("ols", "hac"):
        return _fit_least_squares(y, Z, inv, n_seg, errors, lags)
    return _fit_glsar(y, Z, inv, n_seg, int(ar_order), lags, maxiter, rtol)


def _fit_least_squares(y, Z, inv, n_seg: int, errors: str, lags: int) -> AbsorbedFit:
    """OLS with the levels absorbed: the plain covariance (``"ols"``, the full model's
    residual degrees of freedom) or Newey-West HAC (``"hac"``)."""
    n, q = Z.shape
    b, lev, resid, My, MZ, ab = _wls_step(y, Z, inv, n_seg, np.zeros(0))
    rank = ab.rank + q
    ssr = float(np.sum((My - MZ @ b) ** 2))
    if errors == "hac":
        red = OLS(My, MZ, hasconst=False).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
        cov, kw = np.asarray(red.cov_params()), {"maxlags": lags}
    else:
        red = OLS(My, MZ, hasconst=False).fit()
        cov, kw = np.asarray(red.normalized_cov_params) * ssr / (n - rank), {}
    return AbsorbedFit(params=b, cov=cov, levels=lev, resid=resid, rho=None,
                       llf=_llf(ssr, n), nobs=n, rank=rank, errors=errors, cov_kwds=kw)


def _fit_glsar(y, Z, inv, n_seg: int, p: int, lags: int, maxiter: int,
               rtol: float) -> AbsorbedFit:
    """``GLSAR(rho=p).iterative_fit(maxiter, rtol)`` step by step with the levels
    absorbed, then ``fit(cov_type="HAC")`` on the whitened data."""
    n, q = Z.shape
    rho = np.zeros(p)
    converged, i, last = False, -1, None
    for i in range(maxiter - 1):
        b, lev, resid, *_ = _wls_step(y, Z, inv, n_seg, rho)
        params = np.concatenate([lev, b])
        if i > 0:
            with np.errstate(divide="ignore", invalid="ignore"):
                diff = np.max(np.abs(last - params) / np.abs(last))
            if diff < rtol:
                converged = True
                break
        last = params
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            rho, _ = yule_walker(resid, order=p, df=None, result_object=False)
        rho = np.atleast_1d(rho)
    b, lev, resid, My, MZ, ab = _wls_step(y, Z, inv, n_seg, rho)
    red = OLS(My, MZ, hasconst=False).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
    wresid = My - MZ @ b
    nobs = n - p
    return AbsorbedFit(params=b, cov=np.asarray(red.cov_params()), levels=lev,
                       resid=resid, rho=np.array(rho, dtype=float),
                       llf=_llf(float(np.sum(wresid ** 2)), nobs), nobs=nobs,
                       rank=ab.rank + q, errors="ar",
                       iterations=(i + 1) + (0 if converged else 1), converged=converged,
                       cov_kwds={"maxlags": lags})
