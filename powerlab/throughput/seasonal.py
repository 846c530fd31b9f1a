"""MSTL decomposition of training throughput into trend, daily and weekly parts [5]_.

References
----------
.. [5] K. Bandara, R. J. Hyndman and C. Bergmeir, "MSTL: A seasonal-trend decomposition
   algorithm for time series with multiple seasonal patterns", arXiv:2107.13462, 2021.
"""

from __future__ import annotations

import pandas as pd
from statsmodels.tsa.seasonal import MSTL

from ..exceptions import AnalysisError, SchemaError, Violation

__all__ = ["decompose_seasonal"]


def decompose_seasonal(throughput: pd.Series, *, periods=(24, 168),
                       interval: str = "1h") -> pd.DataFrame:
    """MSTL decomposition of throughput into trend, daily and weekly parts.

    The series is averaged to regular UTC intervals (default hourly); missing intervals
    (downtime) are filled by time interpolation and flagged in ``filled``.  Periods are
    counted in intervals (24 = daily, 168 = weekly for hourly data); periods needing more
    than half the series are dropped.

    Parameters
    ----------
    throughput : pandas.Series
        Throughput indexed by tz-aware timestamps [any unit].
    periods : tuple of int
        Seasonal periods in intervals.
    interval : str
        Resampling interval (pandas offset).

    Returns
    -------
    pandas.DataFrame
        ``observed``, ``trend``, ``seasonal_<p>`` for each period used, ``resid`` and
        ``filled`` (bool), indexed by UTC interval start.

    References
    ----------
    K. Bandara, R. J. Hyndman and C. Bergmeir, "MSTL: A seasonal-trend decomposition
    algorithm for time series with multiple seasonal patterns", arXiv:2107.13462, 2021.
    """
    if not isinstance(throughput.index, pd.DatetimeIndex) or throughput.index.tz is None:
        raise SchemaError([Violation("timestamp", "tz-aware DatetimeIndex expected")])
    s = throughput.tz_convert("UTC").resample(interval).mean()
    filled = s.isna()
    s = s.interpolate(method="time").ffill().bfill()
    use = tuple(int(p) for p in periods if 2 * int(p) <= len(s))
    if not use:
        raise AnalysisError(f"series of {len(s)} intervals is too short for MSTL with "
                            f"periods {tuple(periods)} (needs two full periods)")
    res = MSTL(s, periods=use if len(use) > 1 else use[0]).fit()
    seas = res.seasonal
    out = pd.DataFrame({"observed": s, "trend": res.trend})
    if isinstance(seas, pd.Series):
        out[f"seasonal_{use[0]}"] = seas.to_numpy()
    else:
        for c in seas.columns:
            out[c] = seas[c].to_numpy()
    out["resid"] = res.resid.to_numpy()
    out["filled"] = filled.to_numpy()
    return out
