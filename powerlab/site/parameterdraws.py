"""Forecast draws that vary the uncertain parameters, so that exceedance probabilities
express what is not known about the site, not only the seed.

:func:`parameter_draws` runs one forecast per draw: the scenario with its parameters drawn
within :class:`~powerlab.site.randomness.ParameterBands`
(:func:`~powerlab.site.randomness.draw_parameters`: job power levels, PUE, job starts,
timing jitter), one Monte Carlo draw of failures and jitter on the seed
``seed * 1_000_003 + draw``, and per draw the drawn values next to the figures of the
forecast (peak, mean, largest ramp between 1-s means; or a function of the caller's).
:func:`exceedance` gives ``P(figure > x)`` over the draws with its binomial standard
error (Agresti-Coull, as :func:`powerlab.site.uncertainty.exceedance_frame`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ..exceptions import AnalysisError, PowerlabError
from ..limits import loadmetrics as lm
from .engine import forecast
from .randomness import ParameterBands, draw_parameters
from .scenario import Scenario

__all__ = ["default_figures", "exceedance", "parameter_draws"]

_SEED_STRIDE = 1_000_003


def default_figures(res, boundary: str = "facility") -> dict:
    """Peak and mean power [MW] and the largest rise between 1-s means [MW/s] of a
    one-draw forecast."""
    x = res.power_w(boundary)[0]
    try:
        ramp = lm.ramp_of_means(x, res.tick_s, 1.0, "up") / 1e6
    except AnalysisError:
        ramp = float("nan")
    return {"peak_power_megawatts": float(x.max()) / 1e6,
            "mean_power_megawatts": float(x.mean()) / 1e6,
            "ramp_up_megawatts_per_s_1s_means": ramp}


def parameter_draws(scenario: Scenario, bands: ParameterBands | None = None, *,
                    draws: int = 20, seed: int = 0, tick_s: float | None = None,
                    figures: Callable | None = None) -> pd.DataFrame:
    """One forecast per draw of the uncertain parameters.

    Parameters
    ----------
    scenario : Scenario
    bands : ParameterBands, optional
        What varies and how much (default ``ParameterBands()``: job power +-5 %, PUE
        overhead +-3 %).
    draws : int, default 20
    seed : int, default 0
    tick_s : float, optional
        Engine tick [s].
    figures : callable, optional
        ``figures(result) -> mapping`` of a one-draw ``ForecastResult`` (default
        :func:`default_figures`).

    Returns
    -------
    DataFrame
        One row per draw: ``draw``, the drawn values and the figures;
        ``attrs['varied']`` lists the parameters that vary, in words.
    """
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise PowerlabError(f"draws must be an integer >= 1, got {draws!r}")
    bands = bands or ParameterBands()
    fn = figures or default_figures
    rows = []
    for d in range(int(draws)):
        scen, vals = draw_parameters(scenario, bands, seed, d)
        res = forecast(scen, draws=1, seed=int(seed) * _SEED_STRIDE + d, tick_s=tick_s)
        rows.append({"draw": d, **vals, **fn(res)})
    out = pd.DataFrame(rows)
    out.attrs["varied"] = bands.varied() or ["nothing (seed noise only)"]
    return out


def exceedance(values, thresholds) -> pd.DataFrame:
    """``P(value > x)`` over draws for each threshold, with its standard error
    (Agresti-Coull: ``p~ = (k + 2) / (n + 4)``, ``sqrt(p~ (1 - p~) / (n + 4))``).

    Returns
    -------
    DataFrame
        ``threshold, probability, probability_se, draws``.
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    n = len(v)
    if n == 0:
        raise PowerlabError("no finite values to count exceedances over")
    thr = np.atleast_1d(np.asarray(thresholds, dtype=float))
    k = (v[None, :] > thr[:, None]).sum(axis=1)
    pt = (k + 2.0) / (n + 4.0)
    return pd.DataFrame({"threshold": thr, "probability": k / n,
                         "probability_se": np.sqrt(pt * (1 - pt) / (n + 4.0)), "draws": n})
