"""Survival of GPUs to failure: Kaplan-Meier, a Weibull fit and a Cox model robust to
noisy covariates and to frailty, and a test of over-dispersion at rare-event rates.

One row per GPU: its time in service ``duration_s`` [s] until failure (``failed``) or
censoring (decommissioned, end of the record), and covariates such as its mean die
temperature.

- :func:`kaplan_meier` -- the product-limit estimate with Greenwood intervals
  (statsmodels ``SurvfuncRight``) [1]_.
- :func:`fit_weibull` -- a parametric Weibull proportional-hazards fit by maximum
  likelihood with right censoring (statsmodels ``GenericLikelihoodModel``):
  :math:`h(t|x) = (k/\\lambda)(t/\\lambda)^{k-1} e^{x\\beta}`.
- :func:`fit_cox` -- Cox proportional hazards (statsmodels ``PHReg``, Breslow ties).
  **Covariate measurement error.**  A mean temperature measured with error variance
  :math:`\\sigma_u^2` (stated by the caller, e.g. (3 degC)^2 for a sensor and averaging
  error) attenuates the log hazard ratio by the reliability
  :math:`\\lambda = (\\mathrm{var}\\,W - \\sigma_u^2)/\\mathrm{var}\\,W` (from 1.5 to about 1.37 per
  10 degC at 3 degC noise on a 5 degC spread).  Regression calibration [2]_ replaces
  each measured covariate :math:`W` by :math:`E[X|W] = \\bar W + \\Sigma_X \\Sigma_W^{-1}
  (W - \\bar W)` before the fit; with rare events this is consistent to first order.
  **Frailty.**  GPUs of a host (or rack) share unmeasured conditions; ``groups`` gives
  the cluster-robust (sandwich) covariance of Lin and Wei [3]_, so the intervals hold
  under shared frailty; the point estimate is the marginal hazard ratio, equal to the
  conditional one to first order while the cumulative hazard is small.
- :func:`dispersion_test` -- failure counts per GPU and period: Dean and Lawless's
  score test of Poisson against a gamma frailty (negative binomial) [4]_, with the
  smallest frailty variance it detects with 80 % power at the data's rates (at rare
  rates it is large: documented, not hidden), and a negative-binomial fit of the
  frailty variance (statsmodels ``NegativeBinomial``) with the likelihood-ratio test on
  the boundary (half chi-square).

References
----------
.. [1] E. L. Kaplan and P. Meier, "Nonparametric estimation from incomplete
   observations", JASA 53 (1958) 457-481.
.. [2] R. J. Carroll, D. Ruppert, L. A. Stefanski and C. M. Crainiceanu, *Measurement
   Error in Nonlinear Models*, 2nd ed., Chapman & Hall/CRC, 2006, ch. 4.
.. [3] D. Y. Lin and L. J. Wei, "The robust inference for the Cox proportional hazards
   model", JASA 84 (1989) 1074-1078.
.. [4] C. Dean and J. F. Lawless, "Tests for detecting overdispersion in Poisson
   regression models", JASA 84 (1989) 467-472.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy.stats import chi2, norm
from statsmodels.base.model import GenericLikelihoodModel

from .._summary import Results, Summary
from ..exceptions import AnalysisError

__all__ = ["CoxResult", "DispersionResult", "WeibullResult", "dispersion_test",
           "fit_cox", "fit_weibull", "kaplan_meier", "regression_calibration"]


def _survival_columns(df, duration, event, covariates=()):
    missing = [c for c in (duration, event, *covariates) if c not in df.columns]
    if missing:
        raise AnalysisError(f"survival table lacks column(s) {missing}")
    d = df[[duration, event, *covariates]].dropna()
    t = d[duration].to_numpy(float)
    if len(t) == 0 or np.any(t < 0):
        raise AnalysisError(f"{duration}: need non-negative durations [s]")
    e = d[event].to_numpy().astype(bool)
    if e.sum() < max(2, len(covariates) + 1):
        raise AnalysisError(f"{int(e.sum())} failures are too few for a survival fit")
    return d, t, e


def kaplan_meier(df: pd.DataFrame, *, duration: str = "duration_s",
                 event: str = "failed", conf: float = 0.95) -> pd.DataFrame:
    """Kaplan-Meier survival of GPUs with right censoring.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per GPU.
    duration, event : str
        Columns of the time in service [s] and whether it ended in a failure.
    conf : float
        Level of the pointwise (log-log Greenwood) interval.

    Returns
    -------
    pandas.DataFrame
        ``time_s``, ``survival``, ``lower``, ``upper``, ``at_risk``, ``failures`` at each
        failure time.
    """
    _, t, e = _survival_columns(df, duration, event)
    sf = sm.SurvfuncRight(t, e.astype(int))
    se = sf.surv_prob_se
    s = sf.surv_prob
    z = norm.ppf(0.5 + conf / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        # log(-log) interval (Kalbfleisch-Prentice), inside [0, 1]
        v = se / (s * np.log(s))
        lower = s ** np.exp(-z * v)
        upper = s ** np.exp(z * v)
    return pd.DataFrame({"time_s": sf.surv_times, "survival": s,
                         "lower": np.where(np.isfinite(lower), lower, s),
                         "upper": np.where(np.isfinite(upper), upper, s),
                         "at_risk": sf.n_risk, "failures": sf.n_events})


@dataclass(frozen=True, repr=False)
class WeibullResult(Results):
    """Weibull proportional-hazards fit (see :func:`fit_weibull`).

    Attributes
    ----------
    shape : float
        Weibull shape k [-] (> 1: wear-out, < 1: infant mortality).
    scale_s : float
        Scale lambda at covariates zero (centred: their mean) [s].
    params, bse : pandas.Series
        ``log_shape``, ``log_scale``, then the covariates' log hazard ratios per unit.
    n_failures, n : int
    error_var : dict
        The measurement-error variance stated per covariate (0: none) [unit^2].
    reliability : dict
        Per covariate, var(X)/var(W) implied by it [-] (1 without error).
    """

    shape: float
    scale_s: float
    params: pd.Series
    bse: pd.Series
    n_failures: int
    n: int
    conf: float = 0.95
    error_var: dict = field(default_factory=dict)
    reliability: dict = field(default_factory=dict)

    def summary_frame(self) -> pd.DataFrame:
        z = norm.ppf(0.5 + self.conf / 2)
        return pd.DataFrame({"estimate": self.params, "se": self.bse,
                             "lower": self.params - z * self.bse,
                             "upper": self.params + z * self.bse})

    def summary(self) -> Summary:
        """Shape, scale and the coefficient table."""
        s = Summary("Weibull PH fit")
        s.add_text(f"shape {self.shape:.3f}, scale {self.scale_s / 86400:.4g} d; "
                   f"{self.n_failures} failures of {self.n}" + (
                       "; measurement-error variance " + ", ".join(
                           f"{k}: {v:g}" for k, v in self.error_var.items())
                       + " (regression calibration)" if any(self.error_var.values())
                       else ""))
        s.add_df(self.summary_frame())
        return s


def _calibrated(d, cov, error_var):
    """Covariates (centred), regression-calibrated for the stated error variances, and
    the variances and reliabilities per covariate."""
    W = d[cov].to_numpy(float) if cov else np.zeros((len(d), 0))
    unknown = set(error_var or {}) - set(cov)
    if unknown:
        raise AnalysisError(f"error_var names {sorted(unknown)}, not among the covariates")
    ev = {c: float((error_var or {}).get(c, 0.0)) for c in cov}
    X = regression_calibration(W, [ev[c] for c in cov]) if any(ev.values()) else W
    rel = {c: float(1 - ev[c] / np.var(W[:, j], ddof=1)) for j, c in enumerate(cov)}
    return X - X.mean(axis=0) if cov else X, ev, rel


def fit_weibull(df: pd.DataFrame, covariates=(), *, duration: str = "duration_s",
                event: str = "failed", conf: float = 0.95,
                error_var=None) -> WeibullResult:
    """Maximum-likelihood Weibull proportional-hazards fit with right censoring.

    The log-likelihood is
    :math:`\\sum_i d_i(\\log k - k\\log\\lambda + (k-1)\\log t_i + x_i\\beta)
    - \\sum_i (t_i/\\lambda)^k e^{x_i\\beta}`; covariates are centred on their means.

    Parameters
    ----------
    error_var : dict or None
        Variance of the classical measurement error per covariate [unit^2], as in
        :func:`fit_cox`: the covariates are regression-calibrated
        (:func:`regression_calibration`) before the fit, which removes the attenuation of
        the log hazard ratios to first order [2]_ (the intervals do not add the
        calibration's own uncertainty; with the error variance known and many GPUs it is
        small).

    Returns
    -------
    WeibullResult
    """
    cov = list(covariates)
    d, t, e = _survival_columns(df, duration, event, cov)
    X, ev, rel = _calibrated(d, cov, error_var)
    t_unit = float(np.median(t[t > 0]))          # scale time for conditioning
    tt = np.maximum(t / t_unit, 1e-12)

    class _Weibull(GenericLikelihoodModel):
        def loglike(self, p):
            lk, ll, b = p[0], p[1], p[2:]
            k = np.exp(lk)
            eta = X @ b if len(b) else 0.0
            logh = lk - k * ll + (k - 1) * np.log(tt) + eta
            cumh = np.exp(k * (np.log(tt) - ll) + eta)
            return float(np.sum(e * logh) - np.sum(cumh))

    names = ["log_shape", "log_scale", *cov]
    start = np.r_[0.0, np.log(np.mean(tt) / max(e.mean(), 1e-3)), np.zeros(len(cov))]
    with warnings.catch_warnings():
        # GenericLikelihoodModel counts parameters from exog; ours come from loglike
        warnings.simplefilter("ignore", UserWarning)
        mod = _Weibull(e.astype(float), np.ones((len(t), 1)))
        res = mod.fit(start_params=start, method="bfgs", maxiter=2000, disp=False)
    p = np.asarray(res.params, float)
    bse = np.asarray(res.bse, float)
    p[1] += np.log(t_unit)
    params = pd.Series(p, index=names)
    return WeibullResult(shape=float(np.exp(p[0])), scale_s=float(np.exp(p[1])),
                         params=params, bse=pd.Series(bse, index=names),
                         n_failures=int(e.sum()), n=len(t), conf=conf, error_var=ev,
                         reliability=rel)


def regression_calibration(W: np.ndarray, error_var) -> np.ndarray:
    """Best linear predictor :math:`E[X|W]` of true covariates from measured ones.

    Parameters
    ----------
    W : numpy.ndarray
        Measured covariates, n x p.
    error_var : float or array-like
        Variance of the classical measurement error of each covariate (p values, or a
        p x p covariance) [unit^2]; 0 for covariates measured without error.

    Returns
    -------
    numpy.ndarray
        Calibrated covariates, n x p.
    """
    W = np.asarray(W, float)
    W = W[:, None] if W.ndim == 1 else W
    p = W.shape[1]
    su = np.asarray(error_var, float)
    su = np.diag(np.broadcast_to(su, (p,))) if su.ndim < 2 else su
    sw = np.atleast_2d(np.cov(W, rowvar=False))
    sx = sw - su
    if np.any(np.linalg.eigvalsh(sx) <= 0):
        raise AnalysisError("the stated measurement-error variance is not smaller than "
                            "the covariate's observed variance; the true covariate's "
                            "spread would be zero or negative")
    mu = W.mean(axis=0)
    return mu + (W - mu) @ np.linalg.solve(sw, sx)


@dataclass(frozen=True, repr=False)
class CoxResult(Results):
    """Cox proportional-hazards fit (see :func:`fit_cox`).

    Attributes
    ----------
    covariates : tuple of str
    params, bse : pandas.Series
        Log hazard ratios per unit of each covariate and their standard errors
        (cluster-robust with ``groups``).
    error_var : dict
        The measurement-error variance stated per covariate (0: none) [unit^2].
    reliability : dict
        Per covariate, var(X)/var(W) implied by it [-] (1 without error).
    n_failures, n : int
    robust : bool
        Whether the covariance is cluster-robust.
    """

    covariates: tuple
    params: pd.Series
    bse: pd.Series
    error_var: dict
    reliability: dict
    n_failures: int
    n: int
    robust: bool
    conf: float = 0.95
    _fit: object = field(default=None, repr=False)

    def summary_frame(self, per: float = 1.0) -> pd.DataFrame:
        """Per covariate: hazard ratio per ``per`` units with its interval, log HR, se,
        p-value."""
        z = norm.ppf(0.5 + self.conf / 2)
        b, se = self.params * per, self.bse * per
        return pd.DataFrame({"hazard_ratio": np.exp(b), "lower": np.exp(b - z * se),
                             "upper": np.exp(b + z * se), "log_hr": b, "se": se,
                             "p_value": 2 * norm.sf(np.abs(b / se))})

    def summary(self) -> Summary:
        """Covariance, measurement-error variances and the hazard-ratio table."""
        head = (f"Cox PH: {self.n_failures} failures of {self.n} GPUs; covariance "
                f"{'cluster-robust' if self.robust else 'model-based'}; measurement-error "
                "variance " + ", ".join(f"{k}: {v:g}" for k, v in self.error_var.items())
                + " (reliability " + ", ".join(f"{v:.2f}" for v in
                                               self.reliability.values()) + ")")
        s = Summary()
        s.add_text(head)
        s.add_df(self.summary_frame())
        return s


def fit_cox(df: pd.DataFrame, covariates, *, duration: str = "duration_s",
            event: str = "failed", error_var=None, groups: str | None = None,
            conf: float = 0.95) -> CoxResult:
    """Cox proportional-hazards model, robust to covariate noise and to frailty.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per GPU.
    covariates : sequence of str
        Covariate columns (e.g. mean die temperature [degC], a location code).
    duration, event : str
        Time in service [s] and failure indicator columns.
    error_var : dict or None
        Variance of the classical measurement error per covariate [unit^2], e.g.
        ``{"temp_gpu_c": 9.0}`` for 3 degC; the covariates are regression-calibrated
        (:func:`regression_calibration`).  Covariates not named have none.
    groups : str, optional
        Cluster column (host, rack): shared frailty; cluster-robust covariance.
    conf : float

    Returns
    -------
    CoxResult
    """
    cov = list(covariates)
    extra = [groups] if groups else []
    d, t, e = _survival_columns(df, duration, event, cov + extra)
    W = d[cov].to_numpy(float)
    ev = {c: float((error_var or {}).get(c, 0.0)) for c in cov}
    unknown = set(error_var or {}) - set(cov)
    if unknown:
        raise AnalysisError(f"error_var names {sorted(unknown)}, not among the covariates")
    X = regression_calibration(W, [ev[c] for c in cov]) if any(ev.values()) else W
    rel = {c: float(1 - ev[c] / np.var(W[:, j], ddof=1)) for j, c in enumerate(cov)}
    kw = {}
    if groups:
        kw["groups"] = pd.factorize(d[groups])[0]
    mod = sm.PHReg(t, X - X.mean(axis=0), status=e.astype(int), ties="breslow", **kw)
    fit = mod.fit()
    params = pd.Series(np.asarray(fit.params), index=cov)
    bse = pd.Series(np.asarray(fit.bse), index=cov)
    return CoxResult(covariates=tuple(cov), params=params, bse=bse, error_var=ev,
                     reliability=rel, n_failures=int(e.sum()), n=len(t),
                     robust=bool(groups), conf=conf, _fit=fit)


@dataclass(frozen=True, repr=False)
class DispersionResult(Results):
    """Over-dispersion of failure counts (see :func:`dispersion_test`).

    Attributes
    ----------
    score : float
        Dean-Lawless score statistic, N(0, 1) under the Poisson model [-].
    p_value : float
        One-sided p-value of the score test [-].
    frailty_var : float
        Negative-binomial (NB2) estimate of the frailty variance [-].
    frailty_se : float
    lr_p_value : float
        Likelihood-ratio p-value of frailty variance 0 (half chi-square on the boundary).
    min_detectable_var : float
        Smallest frailty variance the score test detects with 80 % power at level
        ``alpha`` at these rates [-]: ``(z_alpha + z_0.8) / sqrt(sum mu^2 / 2)``.
    n_units, n_failures : int
    """

    score: float
    p_value: float
    frailty_var: float
    frailty_se: float
    lr_p_value: float
    min_detectable_var: float
    n_units: int
    n_failures: int
    alpha: float = 0.05

    @property
    def overdispersed(self) -> bool:
        return self.p_value < self.alpha

    def summary_frame(self) -> pd.DataFrame:
        """One row: the score test and the NB2 frailty fit."""
        return pd.DataFrame([{k: getattr(self, k) for k in (
            "score", "p_value", "frailty_var", "frailty_se", "lr_p_value",
            "min_detectable_var", "n_units", "n_failures", "alpha")}])

    def summary(self) -> Summary:
        """One paragraph: the score test, the frailty fit and what is detectable."""
        s = Summary()
        s.add_text(f"Dispersion of failure counts over {self.n_units} units "
                   f"({self.n_failures} failures): score {self.score:.2f} (p "
                   f"{self.p_value:.3g}); NB2 frailty variance {self.frailty_var:.3g} +- "
                   f"{self.frailty_se:.2g} (LR p {self.lr_p_value:.3g}); smallest frailty "
                   f"variance detectable with 80 % power at these rates: "
                   f"{self.min_detectable_var:.3g}")
        return s


def dispersion_test(df: pd.DataFrame, *, count: str = "count", unit: str = "gpu_uuid",
                    exposure: str | None = None, alpha: float = 0.05,
                    fit_nb: bool = True) -> DispersionResult:
    """Test failure counts for over-dispersion (per-unit frailty) against Poisson.

    Counts are summed per ``unit`` (a GPU's frailty is shared by all its periods), with
    a common rate per unit of exposure.  Dean and Lawless's score statistic
    :math:`T = \\sum_i ((y_i - \\hat\\mu_i)^2 - y_i) / \\sqrt{2 \\sum_i \\hat\\mu_i^2}` is
    N(0, 1) under Poisson; its mean under a gamma frailty of variance :math:`\\theta` is
    :math:`\\theta \\sqrt{\\sum \\hat\\mu_i^2 / 2}`, which at rare rates is small: the result
    says how large a frailty must be to be seen.  With ``fit_nb`` (default) the frailty
    variance is also estimated by a negative-binomial fit (NaN otherwise).

    Returns
    -------
    DispersionResult
    """
    need = [count, unit] + ([exposure] if exposure else [])
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise AnalysisError(f"count table lacks column(s) {missing}")
    g = df.groupby(unit, sort=False)
    y = g[count].sum().to_numpy(float)
    ex = g[exposure].sum().to_numpy(float) if exposure else g[count].size().to_numpy(float)
    if np.any(y < 0) or not np.all(ex > 0):
        raise AnalysisError("counts must be non-negative and exposures positive")
    if y.sum() < 5:
        raise AnalysisError(f"{int(y.sum())} failures: too few to test dispersion")
    mu = ex * y.sum() / ex.sum()
    s2 = np.sum(mu ** 2)
    T = float(np.sum((y - mu) ** 2 - y) / np.sqrt(2 * s2))
    p = float(norm.sf(T))
    mdv = float((norm.isf(alpha) + norm.isf(0.2)) / np.sqrt(s2 / 2))
    if not fit_nb:
        return DispersionResult(score=T, p_value=p, frailty_var=np.nan,
                                frailty_se=np.nan, lr_p_value=np.nan,
                                min_detectable_var=mdv, n_units=len(y),
                                n_failures=int(y.sum()), alpha=alpha)
    X = np.ones((len(y), 1))
    pois = sm.GLM(y, X, family=sm.families.Poisson(), offset=np.log(ex)).fit()
    try:
        nb = sm.NegativeBinomial(y, X, offset=np.log(ex), loglike_method="nb2").fit(
            disp=False, maxiter=200)
        a = float(nb.params[-1])
        a_se = float(nb.bse[-1])
        lr = max(2 * (nb.llf - pois.llf), 0.0)
    except Exception:                                  # noqa: BLE001 - boundary fits
        a, a_se, lr = 0.0, np.nan, 0.0
    lr_p = float(0.5 * chi2.sf(lr, 1)) if lr > 0 else 0.5
    return DispersionResult(score=T, p_value=p, frailty_var=max(a, 0.0), frailty_se=a_se,
                            lr_p_value=lr_p, min_detectable_var=mdv, n_units=len(y),
                            n_failures=int(y.sum()), alpha=alpha)
