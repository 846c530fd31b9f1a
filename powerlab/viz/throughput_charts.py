"""Charts of throughput analyses: hour-of-day effect, throttle shares by hour, straggler
heat map; and the adapters from TimeOfDayResult and StragglerResult."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._options import Options
from ..exceptions import SchemaError, Violation
from .prepare import require_columns
from .render import PALETTE, alt, sized

__all__ = ["HeatmapColumns", "HourOfDayColumns", "hour_of_day_chart", "straggler_heatmap",
           "stragglers_chart", "throttle_share_chart", "time_of_day_charts"]

# --------------------------------------------------------------------------- time of day


@dataclass(frozen=True)
class HourOfDayColumns(Options):
    """Column names of an hour-of-day profile for :func:`hour_of_day_chart`.

    Attributes
    ----------
    hour : str, default "hour"
        Local fractional hour [h], 0–24.
    effect : str, default "effect_pct"
        Effect on throughput [%] of the mean.
    lower, upper : str or None, default "lower_pct", "upper_pct"
        Interval bounds [%]; None or absent: no interval.
    """

    hour: str = "hour"
    effect: str = "effect_pct"
    lower: str | None = "lower_pct"
    upper: str | None = "upper_pct"


def hour_of_day_chart(profile: pd.DataFrame, *, columns: HourOfDayColumns | None = None,
                      peak_hour: float | None = None, trough_hour: float | None = None,
                      site_tz: str | None = None, title: str | None = None,
                      width: int | None = None, height: int | None = None,
                      **column_kw) -> alt.LayerChart:
    """The fitted hour-of-day effect with its confidence interval.

    Parameters
    ----------
    profile : pandas.DataFrame
        ``hour`` (local fractional hour, 0–24), ``effect`` (effect on throughput [%] of the
        mean), optional ``lower`` and ``upper`` interval bounds [%].
    columns : HourOfDayColumns, optional
        Column names of ``hour``, ``effect``, ``lower`` and ``upper`` (default
        ``HourOfDayColumns()``: ``hour``, ``effect_pct``, ``lower_pct``, ``upper_pct``).
    peak_hour, trough_hour : float, optional
        Marked with labelled rules [h, local].
    site_tz : str, optional
        Time zone named in the axis title.
    title : str, optional
    width, height : int, optional
    **column_kw
        Fields of :class:`HourOfDayColumns` replacing those of ``columns``
        (``hour_of_day_chart(prof, hour="local_hour")``).

    Returns
    -------
    altair.LayerChart
    """
    names = HourOfDayColumns.from_kwargs(columns, **column_kw)
    hour, effect, lower, upper = names.hour, names.effect, names.lower, names.upper
    require_columns(profile, [hour, effect], "hour_of_day_chart")
    has_ci = lower is not None and upper is not None and {lower, upper} <= set(profile.columns)
    cols = [hour, effect] + ([lower, upper] if has_ci else [])
    data = profile[cols].astype(float).rename(columns={hour: "hour", effect: "effect_pct"})
    if has_ci:
        data = data.rename(columns={lower: "lower_pct", upper: "upper_pct"})
    xlab = f"hour of day [h, {site_tz}]" if site_tz else "hour of day [h, local]"
    x = alt.X("hour:Q", title=xlab, scale=alt.Scale(domain=[0, 24], nice=False),
              axis=alt.Axis(values=list(range(0, 25, 3))))
    tips = [alt.Tooltip("hour:Q", title="hour [h]", format=".2f"),
            alt.Tooltip("effect_pct:Q", title="effect [%]", format="+.3f")]
    layers = []
    if has_ci:
        tips += [alt.Tooltip("lower_pct:Q", title="95% low [%]", format="+.3f"),
                 alt.Tooltip("upper_pct:Q", title="95% high [%]", format="+.3f")]
        layers.append(alt.Chart(data).mark_area(color=PALETTE[0]).encode(
            x=x, y=alt.Y("lower_pct:Q", title="effect on throughput [%]"), y2="upper_pct:Q"))
    layers.append(alt.Chart(data).mark_line(color=PALETTE[0]).encode(
        x=x, y=alt.Y("effect_pct:Q", title="effect on throughput [%]"), tooltip=tips))
    layers.append(alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(
        color="#888888", strokeDash=[2, 2]).encode(y="y:Q"))
    marks = [(h, name) for h, name in ((peak_hour, "peak"), (trough_hour, "trough"))
             if h is not None and np.isfinite(h)]
    if marks:
        mk = pd.DataFrame({"hour": [float(h) for h, _ in marks],
                           "label": [f"{n} {h:.1f} h" for h, n in marks]})
        layers.append(alt.Chart(mk).mark_rule(color="#D55E00").encode(
            x="hour:Q", tooltip=[alt.Tooltip("label:N")]))
        layers.append(alt.Chart(mk).mark_text(align="left", dx=3, baseline="top",
                                              color="#D55E00").encode(
            x="hour:Q", y=alt.value(2), text="label:N"))
    sub = "line: fitted effect" + ("; shaded: 95% interval" if has_ci else "")
    chart = alt.layer(*layers).properties(
        title=alt.Title(title or "Throughput by hour of day", subtitle=sub))
    return sized(chart, width, height)


def throttle_share_chart(shares: pd.DataFrame, *, hour: str = "hour", reason: str = "reason",
                         share: str = "share", site_tz: str | None = None,
                         title: str | None = None, width: int | None = None,
                         height: int | None = None) -> alt.Chart:
    """Share of GPU time under each throttle reason, by hour of day (stacked bars).

    Parameters
    ----------
    shares : pandas.DataFrame
        Long frame: ``hour`` (local hour, 0–23), ``reason`` (name of the throttle reason)
        and ``share`` (fraction of GPU time, 0–1).  Reasons may overlap (a GPU can be
        throttled for two reasons at once), so the stack can exceed 1.
    hour, reason, share : str
        Column names.
    site_tz : str, optional
        Time zone named in the axis title.
    title : str, optional
    width, height : int, optional

    Returns
    -------
    altair.Chart
    """
    require_columns(shares, [hour, reason, share], "throttle_share_chart")
    data = pd.DataFrame({"hour": pd.to_numeric(shares[hour]).astype(float),
                         "reason": shares[reason].astype(str),
                         "share_pct": 100.0 * pd.to_numeric(shares[share]).astype(float)})
    bad = data["share_pct"].lt(-1e-9) | data["share_pct"].gt(100 + 1e-9)
    if bad.any():
        raise SchemaError([Violation(share, "shares must be fractions in [0, 1]",
                                     tuple(shares.index[bad.to_numpy()]))])
    data = data[data["share_pct"] > 0]
    xlab = f"hour of day [h, {site_tz}]" if site_tz else "hour of day [h, local]"
    chart = alt.Chart(data).mark_bar().encode(
        x=alt.X("hour:O", title=xlab, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("sum(share_pct):Q", title="GPU time throttled [%]", stack="zero"),
        color=alt.Color("reason:N", title="throttle reason"),
        tooltip=[alt.Tooltip("hour:O", title="hour [h]"), alt.Tooltip("reason:N"),
                 alt.Tooltip("share_pct:Q", title="GPU time [%]", format=".2f")],
    ).properties(title=alt.Title(title or "Throttle reasons by hour of day",
                                 subtitle="share of GPU time under each reason"))
    return sized(chart, width, height)


# --------------------------------------------------------------------------- stragglers


@dataclass(frozen=True)
class HeatmapColumns(Options):
    """Column names of per-GPU scores for :func:`straggler_heatmap`.

    Attributes
    ----------
    host : str, default "host"
    gpu : str, default "gpu_index"
        Index of the GPU on its host.
    value : str, default "score"
        A robust score against peers (e.g. a median z-score).
    flagged : str or None, default "flagged"
        Boolean: the GPU is flagged; None or absent: nothing marked.
    """

    host: str = "host"
    gpu: str = "gpu_index"
    value: str = "score"
    flagged: str | None = "flagged"


def straggler_heatmap(scores: pd.DataFrame, *, columns: HeatmapColumns | None = None,
                      value_title: str = "robust score", higher_is_worse: bool = True,
                      details: Sequence[str] = (), title: str | None = None,
                      width: int | None = None, height: int | None = None,
                      **column_kw) -> alt.LayerChart:
    """Heat map of a per-GPU straggler score, hosts down and GPUs across.

    Parameters
    ----------
    scores : pandas.DataFrame
        One row per GPU: ``host``, ``gpu`` (index on the host) and ``value`` (a robust
        score against peers, e.g. a median z-score), optional boolean ``flagged``.
    columns : HeatmapColumns, optional
        Column names of ``host``, ``gpu``, ``value`` and ``flagged`` (default
        ``HeatmapColumns()``: ``host``, ``gpu_index``, ``score``, ``flagged``).
    value_title : str
        Legend title of the score.
    higher_is_worse : bool, default True
        Colour the harmful direction red (False for a clock, where low is slow).
    details : sequence of str
        Further columns shown in the tooltip (e.g. ``reasons``, ``cost_step_pct``).
    title : str, optional
    width, height : int, optional
    **column_kw
        Fields of :class:`HeatmapColumns` replacing those of ``columns``
        (``straggler_heatmap(scores, value="clock_sm_mhz_z")``).

    Returns
    -------
    altair.LayerChart
    """
    names = HeatmapColumns.from_kwargs(columns, **column_kw)
    host, gpu, value, flagged = names.host, names.gpu, names.value, names.flagged
    details = [c for c in details if c in scores.columns and c not in (host, gpu, value)]
    require_columns(scores, [host, gpu, value], "straggler_heatmap")
    data = pd.DataFrame({"host": scores[host].astype(str).to_numpy(),
                         "gpu_index": pd.to_numeric(scores[gpu]).astype("int64").to_numpy(),
                         "score": pd.to_numeric(scores[value]).astype(float).to_numpy()})
    has_flag = flagged is not None and flagged in scores.columns
    data["flagged"] = (scores[flagged].fillna(False).astype(bool).to_numpy()
                       if has_flag else False)
    for c in details:
        col = scores[c]
        data[c] = (col.astype(float).round(4) if pd.api.types.is_numeric_dtype(col)
                   else col.astype(str)).to_numpy()
    if data.duplicated(["host", "gpu_index"]).any():
        raise SchemaError([Violation(gpu, "one row per host and GPU expected")])
    tips = [alt.Tooltip("host:N"), alt.Tooltip("gpu_index:O", title="GPU"),
            alt.Tooltip("score:Q", title=value_title, format=".2f"),
            alt.Tooltip("flagged:N")] + [alt.Tooltip(f"{c}:N") for c in details]
    lim = float(np.nanmax(np.abs(data["score"]))) if len(data) else 1.0
    lim = lim if np.isfinite(lim) and lim > 0 else 1.0
    base = alt.Chart(data)
    y = alt.Y("host:N", title="host", sort=sorted(data["host"].unique()))
    x = alt.X("gpu_index:O", title="GPU", axis=alt.Axis(labelAngle=0))
    rect = base.mark_rect().encode(
        x=x, y=y, color=alt.Color("score:Q", title=value_title,
                                  scale=alt.Scale(scheme="redblue", reverse=higher_is_worse,
                                                  domain=[-lim, lim])),
        tooltip=tips)
    layers = [rect]
    sub = "score of each GPU against its peers at the same moments"
    if has_flag and data["flagged"].any():
        layers.append(base.transform_filter(alt.datum.flagged).mark_point(
            shape="diamond", filled=True, color="black", size=40).encode(x=x, y=y,
                                                                        tooltip=tips))
        sub += f"; ◆ flagged ({int(data['flagged'].sum())})"
    n_hosts = data["host"].nunique()
    chart = alt.layer(*layers).properties(
        title=alt.Title(title or "Straggler GPUs", subtitle=sub),
        height=height or max(60, min(14 * n_hosts, 900)))
    return sized(chart, width, None)


def time_of_day_charts(result: Any) -> dict[str, alt.TopLevelMixin]:
    """Charts of a :class:`powerlab.throughput.dvfs.TimeOfDayResult`.

    Returns
    -------
    dict
        ``"profile"`` (:func:`hour_of_day_chart` of ``result.profile`` with its interval,
        peak and trough) and, when the fit had telemetry with throttle reasons,
        ``"throttle"`` (:func:`throttle_share_chart` of ``result.throttle_by_hour``;
        reasons never seen, and the GPU-idle bit, are left out).
    """
    prof = result.profile.reset_index()
    hour_col = "local_hour" if "local_hour" in prof.columns else prof.columns[0]
    lo, hi = result.amplitude_ci_pct
    out: dict[str, alt.TopLevelMixin] = {
        "profile": hour_of_day_chart(
            prof, hour=hour_col, peak_hour=result.peak_hour, trough_hour=result.trough_hour,
            site_tz=result.site_tz,
            title=(f"Throughput by hour of day: {result.amplitude_pct:.2f} % peak to trough "
                   f"[{lo:.2f}, {hi:.2f}], p = {result.pvalue:.2g}")),
    }
    tb = getattr(result, "throttle_by_hour", None)
    if tb is not None and len(tb):
        skip = ("n_samples", "any_slowdown", "gpu_idle")  # idle is not a slowdown
        reasons = [c for c in tb.columns if c not in skip and tb[c].fillna(0).gt(0).any()]
        if reasons:
            long = tb[reasons].reset_index().melt(
                id_vars=tb.index.name or "index", var_name="reason", value_name="share")
            long = long.rename(columns={tb.index.name or "index": "hour"}).dropna()
            out["throttle"] = throttle_share_chart(long, site_tz=result.site_tz)
    return out


def stragglers_chart(result: Any, metric: str = "clock_sm_mhz") -> alt.LayerChart:
    """Heat map of a :class:`powerlab.throughput.stragglers.StragglerResult` (flagged GPUs marked).

    Parameters
    ----------
    result : StragglerResult
    metric : str, default "clock_sm_mhz"
        Metric whose median robust z-score colours the cells (``<metric>_z`` in
        ``result.scores``); for the clock, low (blue-to-red reversed) is slow.

    Returns
    -------
    altair.LayerChart
    """
    col = f"{metric}_z"
    names = {"clock_sm_mhz": "SM clock", "temp_gpu_c": "GPU temperature",
             "power_w": "power", "temp_mem_c": "HBM temperature"}
    n_flag = int(result.scores["flagged"].sum())
    return straggler_heatmap(
        result.scores, value=col, value_title=f"{names.get(metric, metric)} z",
        higher_is_worse=metric != "clock_sm_mhz",
        details=("reasons", "clock_deficit_mhz", "top_throttle_reason", "cost_step_pct"),
        title=(f"Straggler GPUs: {n_flag} flagged, costing "
               f"{result.cost_step_pct_total:.2f} % of step time"))
