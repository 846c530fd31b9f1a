"""Planner figures: the numbers a utility bill and a facilities team read off a forecast.

- **15-minute peak demand** [MW]: the largest mean power over a complete, clock-aligned
  15-minute demand interval (the billing demand of most tariffs);
- **energy** [MWh] over the horizon;
- **largest ramp** [MW/min]: the largest change between adjacent 1-minute means, over all
  alignments of the averaging blocks (:func:`powerlab.limits.ramps.ramp_of_means`),
  and likewise [MW/s] between adjacent 1-second means;
- **load factor** [-]: mean power over the horizon divided by the 15-minute peak demand.

Each figure is computed per Monte Carlo draw; :func:`planner_figures` returns one row per
draw, :func:`planner_summary` their median, 90th percentile and worst case.  The same
helpers cut a forecast into clock-aligned intervals for the facilities CSV
(:mod:`powerlab.site.export`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._options import renamed_keywords
from ..exceptions import AnalysisError, PowerlabError
from ..limits.ramps import ramp_of_means, whole_ticks

__all__ = [
    "DEMAND_INTERVAL_S",
    "PLANNER_FIGURES",
    "clock_edges",
    "demand_peak_w",
    "planner_figures",
    "planner_summary",
    "ramp_into_tick",
]

#: Length of a utility demand interval [s].
DEMAND_INTERVAL_S = 900.0

#: Planner figures: column -> (label, scale to the label's unit).
PLANNER_FIGURES = {
    "peak_demand_megawatts_15min": ("15-min peak demand [MW]", 1.0),
    "energy_megawatt_hours": ("energy [MWh]", 1.0),
    "ramp_megawatts_per_min_1min": (
        ("ramp_megawatts_per_min_1min (largest change between adjacent 1-min means) "
         "[MW/min]"), 1.0),
    "ramp_megawatts_per_s_1s": (
        "ramp_megawatts_per_s_1s (largest change between adjacent 1-s means) [MW/s]", 1.0),
    "load_factor": ("load factor [-]", 1.0),
}


def clock_edges(start_utc, n_ticks: int, tick_s: float, resolution_s: float) -> np.ndarray:
    """First tick of each clock-aligned interval of ``resolution_s`` [-].

    Intervals start on multiples of ``resolution_s`` since 1970-01-01 UTC (so 15-minute
    rows start at :00, :15, :30, :45 in every time zone with a whole-quarter-hour
    offset).  The first interval is partial when the horizon starts between two
    boundaries.  ``resolution_s`` must be a whole number of ticks.
    """
    per = whole_ticks(resolution_s, tick_s)
    t0_ns = pd.Timestamp(start_utc).value
    res_ns = round(resolution_s * 1e9)
    tick_ns = round(tick_s * 1e9)
    # ticks from the start to the first boundary at or after it
    lead_ns = (-t0_ns) % res_ns
    if lead_ns % tick_ns:
        raise PowerlabError(f"the horizon start {pd.Timestamp(start_utc)} is not on the "
                            f"{tick_s:g}-s tick grid of the {resolution_s:g}-s intervals")
    first = lead_ns // tick_ns
    edges = np.arange(first, n_ticks, per, dtype=np.int64)
    if first > 0 or len(edges) == 0:
        edges = np.concatenate([[0], edges]).astype(np.int64)
    return edges


def ramp_into_tick(power_w: np.ndarray, tick_s: float, window_s: float) -> np.ndarray:
    """Ramp between adjacent ``window_s`` means, placed at the boundary tick [W/s].

    Element ``b`` is ``(mean(x[b:b+w]) - mean(x[b-w:b])) / window_s`` with ``w`` the
    window in ticks; NaN where either window leaves the series.  The largest absolute
    value equals :func:`~powerlab.limits.ramps.ramp_of_means`.
    """
    x = np.asarray(power_w, dtype=float)
    w = whole_ticks(window_s, tick_s)
    out = np.full(x.shape, np.nan)
    n = x.shape[-1]
    if n < 2 * w:
        return out
    c = np.concatenate([np.zeros(x.shape[:-1] + (1,)),
                        np.cumsum(x - x[..., :1], axis=-1)], axis=-1)
    means = (c[..., w:] - c[..., :-w]) / w
    out[..., w:n - w + 1] = (means[..., w:] - means[..., :-w]) / window_s
    return out


def demand_peak_w(power_w: np.ndarray, tick_s: float, start_utc,
                  window_s: float = DEMAND_INTERVAL_S) -> np.ndarray:
    """Largest mean over complete clock-aligned ``window_s`` intervals, per draw [W].

    Parameters
    ----------
    power_w : ndarray, shape (draws, ticks) or (ticks,)
    tick_s : float
    start_utc : Timestamp
        Time of the first tick.
    window_s : float, default 900
        Demand interval [s].

    Returns
    -------
    ndarray, shape (draws,)
        NaN for a draw whose horizon holds no complete interval.
    """
    x = np.atleast_2d(np.asarray(power_w, dtype=float))
    n = x.shape[1]
    edges = clock_edges(start_utc, n, tick_s, window_s)
    per = whole_ticks(window_s, tick_s)
    full = [e for e in edges if e + per <= n and (e > 0 or _on_boundary(start_utc, window_s))]
    if not full:
        return np.full(x.shape[0], np.nan)
    c = np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(x, axis=1)], axis=1)
    idx = np.asarray(full)
    means = (c[:, idx + per] - c[:, idx]) / per
    return means.max(axis=1)


def _on_boundary(start_utc, window_s: float) -> bool:
    return pd.Timestamp(start_utc).value % round(window_s * 1e9) == 0


@renamed_keywords(scope="boundary")
def planner_figures(result, boundary: str = "facility") -> pd.DataFrame:
    """Planner figures of a forecast, one row per draw.

    Parameters
    ----------
    result : ForecastResult
    boundary : {'facility', 'it'}

    Returns
    -------
    DataFrame
        ``draw`` and the columns of :data:`PLANNER_FIGURES` (MW, MWh, MW/min, MW/s, -).
        A ramp over 1-s means is NaN when the tick does not divide 1 s; a figure whose
        window does not fit twice (ramps) or once (demand) into the horizon is NaN.
    """
    x = result.power_w(boundary)
    tick = result.tick_s
    rows = []
    peak = demand_peak_w(x, tick, result.start_utc)
    for d in range(x.shape[0]):
        row = {"draw": d, "peak_demand_megawatts_15min": peak[d] / 1e6,
               "energy_megawatt_hours": x[d].sum() * tick / 3.6e9}
        for col, win, scale in (("ramp_megawatts_per_min_1min", 60.0, 60.0 / 1e6),
                                ("ramp_megawatts_per_s_1s", 1.0, 1.0 / 1e6)):
            try:
                row[col] = ramp_of_means(x[d], tick, win) * scale
            except AnalysisError:  # window not whole ticks, or horizon too short
                row[col] = np.nan
        mean_megawatts = x[d].mean() / 1e6
        row["load_factor"] = mean_megawatts / row["peak_demand_megawatts_15min"]
        rows.append(row)
    return pd.DataFrame(rows)


@renamed_keywords(scope="boundary")
def planner_summary(result, boundary: str = "facility") -> pd.DataFrame:
    """Median, 90th percentile and worst case over draws of each planner figure.

    The worst case is the maximum, except for the load factor (the minimum).

    Returns
    -------
    DataFrame
        Index: the labels of :data:`PLANNER_FIGURES`; columns ``median``, ``p90``
        (the value that 10 % of draws are worse than: the 90th percentile, or the 10th
        for the load factor) and ``worst``.
    """
    fig = planner_figures(result, boundary)
    out = {}
    for col, (label, _) in PLANNER_FIGURES.items():
        v = fig[col].to_numpy(dtype=float)
        if np.isnan(v).all():
            out[label] = {"median": np.nan, "p90": np.nan, "worst": np.nan}
            continue
        low_is_bad = col == "load_factor"
        out[label] = {"median": float(np.nanmedian(v)),
                      "p90": float(np.nanquantile(v, 0.1 if low_is_bad else 0.9)),
                      "worst": float(np.nanmin(v) if low_is_bad else np.nanmax(v))}
    return pd.DataFrame(out).T
