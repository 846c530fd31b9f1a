"""Monte Carlo uncertainty of a forecast: exceedance probabilities and quantile bands.

Every per-interval figure a forecast gives over its draws is an estimate with a Monte
Carlo error; this module reports both.

- :func:`interval_statistic` - per draw and interval, the mean (or max) power;
- :func:`exceedance_frame` - ``P(power > x)`` per interval and threshold, with its
  standard error;
- :func:`quantile_bands` - quantiles of the interval power across draws (order
  statistics), with their Maritz-Jarrett standard errors;
- :func:`draws_for_standard_error` - draws needed for a target error of a probability;
- :func:`powerlab.site.engine.forecast_to_target` - rerun a forecast with enough draws
  for a target error (in the engine's module: it runs the engine).

Standard errors
---------------
An exceedance probability estimated as ``k / n`` from ``n`` independent draws has the
binomial error ``sqrt(p (1 - p) / n)``; it is computed with the Agresti-Coull estimate
``p~ = (k + 2) / (n + 4)`` so that an interval where no draw (or every draw) exceeds the
threshold does not claim an error of 0.  A quantile ``q`` is the order statistic
``x_(m)``, ``m = int(q n + 0.5)``, and its error the Maritz-Jarrett estimate (the
standard deviation of a Beta-weighted sum of the order statistics, as
:func:`scipy.stats.mstats.mjci` computes it, here vectorised over intervals).

References
----------
.. [1] A. Agresti, B. A. Coull, "Approximate is better than 'exact' for interval
   estimation of binomial proportions", The American Statistician 52(2), 119-126, 1998.
.. [2] J. S. Maritz, R. G. Jarrett, "A note on estimating the variance of the sample
   median", JASA 73(361), 194-196, 1978.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from .._options import choice, renamed_keywords
from ..exceptions import PowerlabError, ScenarioError
from .timebase import interval_edges, parse_resolution

__all__ = [
    "draws_for_standard_error",
    "exceedance_frame",
    "interval_statistic",
    "quantile_bands",
]


@renamed_keywords(scope="boundary")
def interval_statistic(result, resolution="15min", boundary: str = "facility",
                       statistic: str = "mean") -> tuple[pd.DatetimeIndex, np.ndarray]:
    """Per draw and interval, the interval's mean or max power.

    Returns
    -------
    starts : DatetimeIndex
        Interval starts (UTC).
    values : ndarray, shape (draws, intervals)
        [W].
    """
    res = parse_resolution(resolution)
    red = getattr(result, "reduced", None)
    if red is not None and not result.keeps_ticks:
        if statistic != "mean":
            raise PowerlabError("without the ticks kept only interval means are known; "
                                "use statistic='mean' or forecast(..., keep_ticks=True)")
        edges = red.tick_edges(res)
        return result.times[edges], red.interval_means(boundary, res)
    edges = interval_edges(result.n_ticks, result.tick_s, res)
    choice(statistic, "statistic", ("mean", "max"))
    x = result.power_w(boundary)
    if statistic == "mean":
        counts = np.diff(np.append(edges, result.n_ticks))
        vals = np.add.reduceat(x, edges, axis=1) / counts
    else:
        vals = np.maximum.reduceat(x, edges, axis=1)
    return result.times[edges], vals


def _se_probability(k: np.ndarray, n: int) -> np.ndarray:
    p = (k + 2.0) / (n + 4.0)
    return np.sqrt(p * (1.0 - p) / (n + 4.0))


@renamed_keywords(scope="boundary")
def exceedance_frame(result, thresholds_w, resolution="15min", boundary: str = "facility",
                     statistic: str = "mean") -> pd.DataFrame:
    """Probability that the interval power exceeds each threshold, with its MC error.

    Parameters
    ----------
    result : ForecastResult
    thresholds_w : sequence of float
        Power thresholds [W].
    resolution : str or float, default '15min'
        Interval length, a whole number of ticks.
    boundary : {'facility', 'it'}
    statistic : {'mean', 'max'}
        Exceedance of the interval mean (what a meter averaging over the interval reads)
        or of the largest tick value in the interval.

    Returns
    -------
    DataFrame
        ``interval_start_utc, threshold_w, probability, probability_se, draws``: the
        share of draws whose interval value exceeds the threshold and its standard
        error (module docstring).
    """
    thr = np.atleast_1d(np.asarray(thresholds_w, float))
    starts, vals = interval_statistic(result, resolution, boundary, statistic)
    n = vals.shape[0]
    frames = []
    for t in thr:
        k = (vals > t).sum(axis=0)
        frames.append(pd.DataFrame({
            "interval_start_utc": starts, "threshold_w": t, "probability": k / n,
            "probability_se": _se_probability(k, n), "draws": n}))
    return pd.concat(frames, ignore_index=True)


def _mj_weights(n: int, q: float) -> tuple[int, np.ndarray]:
    m = min(max(int(q * n + 0.5), 2), n - 1)
    x = np.arange(1, n + 1) / n
    w = special.betainc(m - 1, n - m, x) - special.betainc(m - 1, n - m, x - 1.0 / n)
    return m, w


@renamed_keywords(scope="boundary")
def quantile_bands(result, probs=(0.1, 0.5, 0.9), resolution="15min",
                   boundary: str = "facility", statistic: str = "mean") -> pd.DataFrame:
    """Quantiles of the interval power across draws, each with its MC standard error.

    Parameters
    ----------
    result : ForecastResult
    probs : sequence of float
        Quantile levels in (0, 1) [-].
    resolution, boundary, statistic
        As in :func:`exceedance_frame`.

    Returns
    -------
    DataFrame
        ``interval_start_utc``, then ``power_w_q<level>`` and ``power_w_q<level>_se``
        for each level (``q10``, ``q50``, ``q90``...) [W] and ``draws``.
    """
    starts, vals = interval_statistic(result, resolution, boundary, statistic)
    n = vals.shape[0]
    if n < 3:
        raise PowerlabError(f"quantile bands need at least 3 draws, got {n}")
    srt = np.sort(vals, axis=0)
    centre = srt.mean(axis=0)
    dev = srt - centre  # centred: no cancellation in C2 - C1^2
    out = {"interval_start_utc": starts}
    for q in probs:
        if not 0 < q < 1:
            raise PowerlabError(f"quantile levels must be in (0, 1), got {q!r}")
        m, w = _mj_weights(n, q)
        c1 = w @ dev
        c2 = w @ (dev * dev)
        name = f"power_w_q{round(100 * q):g}" if abs(100 * q - round(100 * q)) < 1e-9 \
            else f"power_w_q{100 * q:g}".replace(".", "p")
        out[name] = srt[m - 1]
        out[f"{name}_se"] = np.sqrt(np.maximum(c2 - c1 * c1, 0.0))
    out["draws"] = n
    return pd.DataFrame(out)


def draws_for_standard_error(target_se: float, p: float = 0.5) -> int:
    """Draws needed for a probability ``p`` to have standard error ``target_se`` (the
    worst case ``p = 0.5`` by default) [-]."""
    if not 0 < target_se < 0.5:
        raise ScenarioError(f"target standard error must be in (0, 0.5), got {target_se!r}",
                            key="target_se")
    return max(3, math.ceil(p * (1 - p) / target_se ** 2 - 1e-9))
