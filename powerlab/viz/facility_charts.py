"""Facility power over time: the timeline of a forecast with its quantile band, the
events of one draw as marked rules, and a strip to zoom with."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .prepare import (
    as_utc,
    chart_times,
    downsample,
    number_format,
    require_columns,
    time_label,
    unit_of,
)
from .render import (
    DEFAULT_MAX_ROWS,
    PALETTE,
    alt,
    inline_table,
    sized,
    time_tooltip,
    time_x,
)

__all__ = ["TimelineColumns", "facility_chart"]

# --------------------------------------------------------------------------- facility


@dataclass(frozen=True)
class TimelineColumns:
    """Column names of a timeline for :func:`facility_chart`.

    Attributes
    ----------
    value : str, default "power_megawatts"
        The plotted value [MW].
    lower, upper : str or None
        Band bounds [MW] (quantiles of Monte Carlo draws); None or absent: no band.
    time : str, default "timestamp"
        Tz-aware times.
    series : str or None, default "boundary"
        One line per value of this column (e.g. boundary ``"it"`` / ``"facility"``);
        None or absent: one line.  (A timeline with the column's name before 2026-12-03,
        ``scope`` holding ``it``/``facility``, is still drawn by it, with a
        :class:`DeprecationWarning`.)
    """

    value: str = "power_megawatts"
    lower: str | None = "power_megawatts_lower"
    upper: str | None = "power_megawatts_upper"
    time: str = "timestamp"
    series: str | None = "boundary"


def _old_boundary_column(timeline: pd.DataFrame) -> list[str]:
    """``["scope"]`` for a timeline written before the ``boundary`` column was renamed
    (2026-12-03: ``scope`` holding ``it``/``facility``), with a warning; else ``[]``."""
    if "scope" not in timeline.columns or not set(
            timeline["scope"].dropna().astype(str).unique()) <= {"it", "facility"}:
        return []
    warnings.warn("facility_chart: the timeline's 'scope' column (it/facility) is renamed "
                  "'boundary'; the old name will be removed in the next release",
                  DeprecationWarning, stacklevel=4)
    return ["scope"]


def facility_chart(timeline: pd.DataFrame, events: pd.DataFrame | None = None, *,
                   columns: TimelineColumns | None = None, max_rows: int = DEFAULT_MAX_ROWS,
                   band_label: str = "quantile band", title: str | None = None,
                   site_tz: str | None = None, width: int | None = None,
                   height: int = 240) -> alt.VConcatChart:
    """Facility power over time with its quantile band, event markers and a zoom strip.

    Brushing (dragging) over the small overview below selects the time range shown in
    the main panel.  Event markers are vertical rules (dash pattern by event) with
    tooltips.

    Long timelines are binned (:func:`downsample`).  Then the line is the bin mean, the
    darker band the bin means of ``lower`` and ``upper``, and a faint envelope spans the
    lowest and highest ``value`` within the bin, so fast swings stay visible.

    Parameters
    ----------
    timeline : pandas.DataFrame
        Tidy timeline: ``time`` (tz-aware), ``value`` [MW], optional ``lower`` and ``upper``
        band bounds [MW] (quantiles of Monte Carlo draws), optional ``series`` (e.g. boundary
        ``"it"`` / ``"facility"``).
    events : pandas.DataFrame, optional
        ``timestamp`` (tz-aware) and ``event`` (text, e.g. ``"checkpoint"``); an optional
        ``detail`` column is shown in the tooltip.  At most 200 are drawn (evenly thinned).
    columns : TimelineColumns, optional
        Column names of ``value``, ``lower``, ``upper``, ``time`` and ``series``
        (default ``TimelineColumns()``: ``power_megawatts``, its ``_lower``/``_upper``
        band, ``timestamp``, ``boundary``).
    max_rows : int, default 3000
        Most rows embedded for the timeline.
    band_label : str
        What the band is (subtitle), e.g. ``"p10–p90 across draws"``.
    title : str, optional
    site_tz : str, optional
        Show times in this IANA time zone (the site's local time, daylight saving applied)
        instead of UTC, on a 24-hour clock.
    width, height : int
        Size of the main panel in pixels.

    Returns
    -------
    altair.VConcatChart
    """
    c = columns or TimelineColumns()
    require_columns(timeline, [c.time, c.value], "facility_chart")
    has_band = (c.lower is not None and c.upper is not None and c.lower in timeline.columns
                and c.upper in timeline.columns)
    by = _series_column(timeline, c)
    data = _timeline_data(timeline, c, by, has_band, max_rows, site_tz)
    binned = bool((data["n_samples"] > 1).any())
    tlabel = time_label(site_tz)
    unit = unit_of(c.value) or "MW"
    ylab = f"power [{unit}]"
    x = time_x("timestamp", tlabel)
    color = alt.Color(f"{by[0]}:N", title=by[0]) if by else alt.value(PALETTE[0])
    brush = alt.selection_interval(name="brush", encodings=["x"])
    tips = _timeline_tooltips(c, by, unit, tlabel, binned, has_band)
    base = alt.Chart(inline_table(data))
    detail_x = time_x("timestamp", tlabel, domain=brush)
    layers = _band_layers(base, c, detail_x, color, ylab, binned, has_band)
    layers.append(base.mark_line().encode(
        x=detail_x, y=alt.Y(f"{c.value}:Q", title=ylab, scale=alt.Scale(zero=False)),
        color=color, tooltip=tips))
    if events is not None and len(events):
        layers.append(_event_rules(events, detail_x, tlabel, site_tz))
    main = alt.layer(*layers).properties(height=height)
    overview = base.mark_line(strokeWidth=1).encode(
        x=x, y=alt.Y(f"{c.value}:Q", title=None, axis=alt.Axis(tickCount=2),
                     scale=alt.Scale(zero=False)),
        color=color).add_params(brush).properties(height=50)
    return alt.vconcat(sized(main, width, None), sized(overview, width, None)).properties(
        title=alt.Title(title or "Facility power",
                        subtitle=_timeline_subtitle(band_label, binned, has_band)))


def _series_column(timeline: pd.DataFrame, c: TimelineColumns) -> list[str]:
    """``[c.series]`` when the timeline has that column (or, for ``boundary``, its old
    name), else ``[]``: one line per value of it, or one line."""
    if c.series is not None and c.series in timeline.columns:
        return [c.series]
    return _old_boundary_column(timeline) if c.series == "boundary" else []


def _band_layers(base: alt.Chart, c: TimelineColumns, x: alt.X, color, ylab: str,
                 binned: bool, has_band: bool) -> list:
    """The faint lowest-highest envelope of each time bin and the quantile band."""
    layers = []
    if binned:
        layers.append(base.mark_area(opacity=0.12).encode(
            x=x, y=alt.Y(f"{c.value}_min:Q", title=ylab), y2=f"{c.value}_max:Q",
            color=color))
    if has_band:
        layers.append(base.mark_area(opacity=0.35).encode(
            x=x, y=alt.Y(f"{c.lower}:Q", title=ylab), y2=f"{c.upper}:Q", color=color))
    return layers


def _timeline_subtitle(band_label: str, binned: bool, has_band: bool) -> str:
    parts = ["line: mean"]
    if has_band:
        parts.append(f"band: {band_label}" + (" (bin means)" if binned else ""))
    if binned:
        parts.append("faint: lowest–highest within each time bin")
    parts.append("drag over the strip below to zoom")
    return "; ".join(parts)


def _timeline_data(timeline: pd.DataFrame, c: TimelineColumns, by: list, has_band: bool,
                   max_rows: int, site_tz: str | None) -> pd.DataFrame:
    """The timeline binned to at most ``max_rows`` rows over all series (bin means,
    and the lowest and highest value per bin), times in the chart's time zone."""
    cols = [c.value] + ([c.lower, c.upper] if has_band else [])
    frame = timeline[[c.time, *by, *cols]].rename(columns={c.time: "timestamp"})
    if by:
        frame[by[0]] = frame[by[0]].astype(str)
    n_series = max(frame[by[0]].nunique(), 1) if by else 1
    per_series = int(max(2, min(1500, (max_rows - 200) // n_series)))
    data = downsample(frame, cols, by=by, max_points=per_series)
    if has_band:
        data = data.drop(columns=[f"{c.lower}_min", f"{c.lower}_max", f"{c.upper}_min",
                                  f"{c.upper}_max"])
    data["timestamp"] = chart_times(data["timestamp"], site_tz)
    return data


def _timeline_tooltips(c: TimelineColumns, by: list, unit: str, tlabel: str, binned: bool,
                       has_band: bool) -> list:
    fmt = number_format(unit)
    tips = [time_tooltip("timestamp", tlabel)]
    if by:
        tips.append(alt.Tooltip(f"{by[0]}:N"))
    tips.append(alt.Tooltip(f"{c.value}:Q", title=f"mean [{unit}]", format=fmt))
    if binned:
        tips += [alt.Tooltip(f"{c.value}_min:Q", title=f"lowest [{unit}]", format=fmt),
                 alt.Tooltip(f"{c.value}_max:Q", title=f"highest [{unit}]", format=fmt)]
    if has_band:
        tips += [alt.Tooltip(f"{c.lower}:Q", title=f"band low [{unit}]", format=fmt),
                 alt.Tooltip(f"{c.upper}:Q", title=f"band high [{unit}]", format=fmt)]
    return tips


def _event_rules(events: pd.DataFrame, detail_x, tlabel: str, site_tz: str | None):
    """Vertical rules at the events (at most 200, evenly thinned), dashed by event."""
    require_columns(events, ["timestamp", "event"], "facility_chart events")
    ev = events.copy()
    ev["timestamp"] = as_utc(ev["timestamp"])
    ev = ev.sort_values("timestamp")
    if len(ev) > 200:  # keep the chart light: thin evenly
        ev = ev.iloc[np.linspace(0, len(ev) - 1, 200).round().astype(int)]
    ev_cols = ["timestamp", "event"] + (["detail"] if "detail" in ev.columns else [])
    ev = ev[ev_cols].copy()
    ev["event"] = ev["event"].astype(str)
    ev["timestamp"] = chart_times(ev["timestamp"], site_tz)
    ev_tips = [alt.Tooltip("event:N"), time_tooltip("timestamp", tlabel)]
    if "detail" in ev.columns:
        ev["detail"] = ev["detail"].astype(str)
        ev_tips.append(alt.Tooltip("detail:N"))
    return alt.Chart(ev).mark_rule(color="#444444", opacity=0.6).encode(
        x=detail_x, strokeDash=alt.StrokeDash("event:N", title="event"), tooltip=ev_tips)

