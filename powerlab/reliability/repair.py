"""Repair-time distributions of node faults: exponential, Weibull and lognormal fitted by
maximum likelihood with right censoring (faults still open at the end of the record),
compared by AIC, with bootstrap intervals of the median and the mean.

For a repair time :math:`t_i` with censoring flag :math:`\\delta_i` (1 repaired, 0 still
open) the log-likelihood of a distribution with density :math:`f` and survival :math:`S`
is :math:`\\sum_i \\delta_i \\log f(t_i) + (1-\\delta_i) \\log S(t_i)` (Lawless [1]_,
ch. 2).  Intervals of the median and mean repair time come from a nonparametric bootstrap of
the records when every repair is complete, and from the best model's delta method
(numerical Hessian of the censored likelihood) when some are open.

References
----------
.. [1] J. F. Lawless, *Statistical Models and Methods for Lifetime Data*, 2nd ed., Wiley,
   2003.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize, stats
from statsmodels.tools.numdiff import approx_fprime, approx_hess3

from ..exceptions import AnalysisError

__all__ = ["REPAIR_MODELS", "fit_repair", "repair_distribution"]

#: Model name -> scipy.stats family (location fixed at 0).
REPAIR_MODELS = {"exponential": stats.expon, "weibull": stats.weibull_min,
                 "lognormal": stats.lognorm}


def repair_distribution(model: str, params):
    """The frozen scipy distribution of a fitted repair model (``params`` as in
    :func:`fit_repair`'s table: ``shape`` (NaN for exponential) and ``scale_d``)."""
    shape, scale = params
    if model == "exponential":
        return stats.expon(scale=scale)
    return REPAIR_MODELS[model](shape, scale=scale)


def _nll(model, p, t, d):
    """Negative censored log-likelihood, in closed form (scipy's frozen distributions
    cost milliseconds a call inside the optimiser)."""
    scale = np.exp(p[-1])
    if model == "exponential":
        logsf = -t / scale
        logpdf = logsf - p[-1]
    elif model == "weibull":
        k = np.exp(p[0])
        zk = (t / scale) ** k
        logsf = -zk
        logpdf = p[0] - p[-1] + (k - 1) * (np.log(t) - p[-1]) - zk
    else:                                 # lognormal: shape sigma, scale exp(mu)
        sig = np.exp(p[0])
        u = (np.log(t) - p[-1]) / sig
        logsf = stats.norm.logsf(u)
        logpdf = -np.log(t * sig * np.sqrt(2 * np.pi)) - u * u / 2
    ll = np.where(d, logpdf, logsf)
    return -float(np.sum(ll)) if np.all(np.isfinite(ll)) else 1e300


def _summaries(model, p):
    shape = np.nan if model == "exponential" else float(np.exp(p[0]))
    dist = repair_distribution(model, (shape, float(np.exp(p[-1]))))
    return np.array([np.log(dist.median()), np.log(dist.mean())])


def _delta_interval(model, p, t, d, z):
    """Wald intervals of the median and mean on the log scale (delta method with the
    numerical Hessian of the censored log-likelihood)."""
    h = approx_hess3(np.asarray(p, float), lambda q: _nll(model, q, t, d))
    cov = np.linalg.pinv(h)
    g = approx_fprime(np.asarray(p, float), lambda q: _summaries(model, q))
    se = np.sqrt(np.maximum(np.diag(g @ cov @ g.T), 0.0))
    est = _summaries(model, p)
    return np.exp(est - z * se), np.exp(est + z * se)


def _fit_one(model, t, d):
    lt = np.log(t)
    start = [np.log(np.mean(t))] if model == "exponential" else \
        [np.log(max(np.std(lt), 0.1)) if model == "lognormal" else 0.0, np.mean(lt)]
    res = optimize.minimize(lambda p: _nll(model, p, t, d), start, method="Nelder-Mead",
                            options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 4000})
    p = res.x
    shape = np.nan if model == "exponential" else float(np.exp(p[0]))
    return shape, float(np.exp(p[-1])), -float(res.fun), p


def fit_repair(durations_d, repaired=None, *, n_boot: int = 400, conf: float = 0.95,
               seed: int = 0) -> pd.DataFrame:
    """Fit repair-time models to repair durations.

    Parameters
    ----------
    durations_d : array-like
        Time from fault to repair (or to the end of the record for open faults) [d].
    repaired : array-like of bool, optional
        False for faults still open (right-censored); default all repaired.
    n_boot : int, default 400
        Bootstrap resamples for the intervals of the median and mean [-].
    conf : float, default 0.95
    seed : int, default 0

    Returns
    -------
    pandas.DataFrame
        One row per model (best AIC first): ``shape``, ``scale_d``, ``loglik``, ``aic``,
        ``median_d``, ``mean_d`` and ``median_lower_d``/``median_upper_d``,
        ``mean_lower_d``/``mean_upper_d`` (best model's row only), ``empirical_median_d``
        and ``empirical_mean_d`` (complete data), ``n``, ``n_censored``.
    """
    t = np.asarray(durations_d, float)
    d = np.ones(len(t), bool) if repaired is None else np.asarray(repaired, bool)
    if len(t) != len(d):
        raise AnalysisError("durations_d and repaired differ in length")
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise AnalysisError("repair durations must be finite and non-negative [d]")
    t = np.maximum(t, 1e-4)               # a repair logged at its fault's minute
    if d.sum() < 3:
        raise AnalysisError(f"{int(d.sum())} completed repairs are too few to fit")
    rng = np.random.default_rng(seed)
    a = (1 - conf) / 2
    rows, raw = [], {}
    for model in REPAIR_MODELS:
        shape, scale, ll, p = _fit_one(model, t, d)
        raw[model], k = p, len(p)
        dist = repair_distribution(model, (shape, scale))
        rows.append({"model": model, "shape": shape, "scale_d": scale, "loglik": ll,
                     "aic": 2 * k - 2 * ll, "median_d": float(dist.median()),
                     "mean_d": float(dist.mean())})
    out = pd.DataFrame(rows).sort_values("aic").reset_index(drop=True)
    best = out.iloc[0]
    if d.all():                           # complete data: bootstrap the records
        i = rng.integers(0, len(t), (n_boot, len(t)))
        lo, hi = np.quantile(np.c_[np.median(t[i], axis=1), t[i].mean(axis=1)],
                             [a, 1 - a], axis=0)
    else:                                 # censored: the best model's delta method
        lo, hi = _delta_interval(best["model"], raw[best["model"]], t, d,
                                 stats.norm.ppf(1 - a))
    out["median_lower_d"], out["mean_lower_d"] = lo
    out["median_upper_d"], out["mean_upper_d"] = hi
    out.loc[out.index > 0, ["median_lower_d", "mean_lower_d", "median_upper_d",
                            "mean_upper_d"]] = np.nan    # the intervals are the best row's
    out["empirical_median_d"] = float(np.median(t[d])) if d.all() else np.nan
    out["empirical_mean_d"] = float(np.mean(t[d])) if d.all() else np.nan
    out["n"], out["n_censored"] = len(t), int((~d).sum())
    return out
