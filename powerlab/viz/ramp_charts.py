"""Ramps and swings: the distribution of ramp rates (a histogram on a log count axis) with
the utility's fall and rise limits marked."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..exceptions import SchemaError, Violation
from .prepare import axis_label, require_columns, unit_of
from .render import PALETTE, alt, sized

__all__ = ["ramp_rate_chart"]

#: Number format of ramp rates in tooltips.
_FMT = ",.4~f"


def ramp_rate_chart(ramps: pd.DataFrame, *, value: str = "ramp_megawatts_per_s",
                    series: str | None = None,
                    limit: float | tuple[float, float] | None = None, bins: int = 60,
                    title: str | None = None, width: int | None = None,
                    height: int | None = None) -> alt.LayerChart:
    """Distribution of ramp rates (histogram on a log count axis) with the limit marked.

    Parameters
    ----------
    ramps : pandas.DataFrame
        One row per interval with the signed ramp rate in ``value`` [MW/s] (or any unit
        named by the column suffix); optional ``series`` column (e.g. mitigation) draws one
        histogram per value, with shared bins.
    value : str, default "ramp_megawatts_per_s"
    series : str, optional
    limit : float or (float, float), optional
        Allowed ramp rate magnitude, drawn at ``-limit`` and ``+limit``; a pair gives
        the fall and rise limits ``(down, up)`` as positive numbers; 0 means no limit
        on that side [same unit as value].
    bins : int, default 60
    title : str, optional
    width, height : int, optional

    Returns
    -------
    altair.LayerChart
    """
    require_columns(ramps, [value] + ([series] if series else []), "ramp_rate_chart")
    v = pd.to_numeric(ramps[value], errors="coerce").astype("float64")
    ok = np.isfinite(v.to_numpy())
    vals = v.to_numpy()[ok]
    if vals.size == 0:
        raise SchemaError([Violation(value, "no finite ramp rates to draw")])
    down, up = _fall_and_rise(limit)
    groups = ramps.loc[ok, series].astype(str).to_numpy() if series else np.full(vals.size, "")
    data = _histogram(vals, groups, max(abs(vals.min()), abs(vals.max()), down, up) or 1.0,
                      bins)
    unit = unit_of(value) or ""
    color = alt.Color("series:N", title=series) if series else alt.value(PALETTE[0])
    bars = alt.Chart(data).mark_bar(opacity=0.65, binSpacing=0).encode(
        x=alt.X("bin_start:Q", title=axis_label(value), bin="binned"),
        x2="bin_end:Q",
        y=alt.Y("count:Q", title="intervals", scale=alt.Scale(type="log"), stack=None),
        color=color,
        tooltip=[*([alt.Tooltip("series:N", title=series)] if series else []),
                 alt.Tooltip("bin_start:Q", title=f"from [{unit}]", format=_FMT),
                 alt.Tooltip("bin_end:Q", title=f"to [{unit}]", format=_FMT),
                 alt.Tooltip("count:Q", title="intervals")])
    layers = [bars]
    sub = "count of intervals per ramp-rate bin (log scale)"
    if up > 0 or down > 0:
        layers.append(_limit_rules(down, up, unit))
        sub += "; " + _limit_note(vals, down, up, unit)
    chart = alt.layer(*layers).properties(
        title=alt.Title(title or "Ramp-rate distribution", subtitle=sub))
    return sized(chart, width, height)


def _fall_and_rise(limit: float | tuple[float, float] | None) -> tuple[float, float]:
    """``(down, up)`` limit magnitudes from one limit or a pair; 0 is no limit."""
    if limit is None:
        return 0.0, 0.0
    if isinstance(limit, (tuple, list)):
        down, up = (abs(float(x)) for x in limit)
        return down, up
    return abs(float(limit)), abs(float(limit))


def _histogram(vals: np.ndarray, groups: np.ndarray, span: float, bins: int) -> pd.DataFrame:
    """Counts per bin and group on ``bins`` shared bins over ``±1.05 span`` (empty bins
    left out: the count axis is logarithmic)."""
    edges = np.linspace(-span * 1.05, span * 1.05, bins + 1)
    rows = []
    for name in pd.unique(groups):
        counts, _ = np.histogram(vals[groups == name], bins=edges)
        rows.append(pd.DataFrame({"series": name, "bin_start": edges[:-1],
                                  "bin_end": edges[1:], "count": counts}))
    data = pd.concat(rows, ignore_index=True)
    return data[data["count"] > 0]


def _limit_rules(down: float, up: float, unit: str) -> alt.Chart:
    """Dashed rules at ``-down`` and ``+up`` (a side without a limit left out)."""
    xs, labels = [], []
    if down > 0:
        xs.append(-down)
        labels.append("fall limit")
    if up > 0:
        xs.append(up)
        labels.append("rise limit")
    lim = pd.DataFrame({"x": xs, "label": labels})
    return alt.Chart(lim).mark_rule(color="#D55E00", strokeDash=[6, 3]).encode(
        x="x:Q", tooltip=[alt.Tooltip("label:N"),
                          alt.Tooltip("x:Q", title=f"limit [{unit}]", format=_FMT)])


def _limit_note(vals: np.ndarray, down: float, up: float, unit: str) -> str:
    """The subtitle's word on the limits and the intervals that exceed them."""
    over = np.zeros(vals.size, dtype=bool)
    if up > 0:
        over |= vals > up
    if down > 0:
        over |= vals < -down
    what = f"±{up:g}" if up == down else f"−{down:g} / +{up:g}"
    return f"dashed: {what} {unit} limits, exceeded in {int(over.sum()):,} intervals"
