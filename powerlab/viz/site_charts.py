"""Charts of facility power forecasts: timeline with band and events, ramp rates,
oscillation spectrum, mitigations; and the adapter from a ForecastResult."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._options import renamed_keywords
from ..exceptions import SchemaError, Violation
from .prepare import (
    as_utc,
    axis_label,
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

__all__ = ["TimelineColumns", "facility_chart", "forecast_charts", "mitigation_chart", "ramp_rate_chart",
           "spectrum_chart"]

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
    import warnings

    warnings.warn("facility_chart: the timeline's 'scope' column (it/facility) is renamed "
                  "'boundary'; the old name will be removed in the next release",
                  DeprecationWarning, stacklevel=3)
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
    value, lower, upper = c.value, c.lower, c.upper
    require_columns(timeline, [c.time, value], "facility_chart")
    has_band = (lower is not None and upper is not None and lower in timeline.columns
                and upper in timeline.columns)
    by = [c.series] if c.series is not None and c.series in timeline.columns else []
    if not by and c.series == "boundary":
        by = _old_boundary_column(timeline)
    data = _timeline_data(timeline, c, by, has_band, max_rows, site_tz)
    binned = bool((data["n_samples"] > 1).any())
    tlabel = time_label(site_tz)
    unit = unit_of(value) or "MW"
    ylab = f"power [{unit}]"
    x = time_x("timestamp", tlabel)
    color = alt.Color(f"{by[0]}:N", title=by[0]) if by else alt.value(PALETTE[0])
    brush = alt.selection_interval(name="brush", encodings=["x"])
    tips = _timeline_tooltips(c, by, unit, tlabel, binned, has_band)
    base = alt.Chart(inline_table(data))
    detail_x = time_x("timestamp", tlabel, domain=brush)
    layers = []
    if binned:
        layers.append(base.mark_area(opacity=0.12).encode(
            x=detail_x, y=alt.Y(f"{value}_min:Q", title=ylab), y2=f"{value}_max:Q",
            color=color))
    if has_band:
        layers.append(base.mark_area(opacity=0.35).encode(
            x=detail_x, y=alt.Y(f"{lower}:Q", title=ylab), y2=f"{upper}:Q", color=color))
    layers.append(base.mark_line().encode(
        x=detail_x, y=alt.Y(f"{value}:Q", title=ylab, scale=alt.Scale(zero=False)),
        color=color, tooltip=tips))
    if events is not None and len(events):
        layers.append(_event_rules(events, detail_x, tlabel, site_tz))
    main = alt.layer(*layers).properties(height=height)
    overview = base.mark_line(strokeWidth=1).encode(
        x=x, y=alt.Y(f"{value}:Q", title=None, axis=alt.Axis(tickCount=2),
                     scale=alt.Scale(zero=False)),
        color=color).add_params(brush).properties(height=50)
    main = sized(main, width, None)
    overview = sized(overview, width, None)
    parts = ["line: mean"]
    if has_band:
        parts.append(f"band: {band_label}" + (" (bin means)" if binned else ""))
    if binned:
        parts.append("faint: lowest–highest within each time bin")
    parts.append("drag over the strip below to zoom")
    return alt.vconcat(main, overview).properties(
        title=alt.Title(title or "Facility power", subtitle="; ".join(parts)))


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


# --------------------------------------------------------------------------- ramps


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
    if limit is None:
        down = up = 0.0
    elif isinstance(limit, (tuple, list)):
        down, up = (abs(float(v)) for v in limit)
    else:
        down = up = abs(float(limit))
    span = max(abs(vals.min()), abs(vals.max()), down, up) or 1.0
    edges = np.linspace(-span * 1.05, span * 1.05, bins + 1)
    groups = ramps.loc[ok, series].astype(str).to_numpy() if series else np.full(vals.size, "")
    rows = []
    for name in pd.unique(groups):
        counts, _ = np.histogram(vals[groups == name], bins=edges)
        rows.append(pd.DataFrame({"series": name, "bin_start": edges[:-1],
                                  "bin_end": edges[1:], "count": counts}))
    data = pd.concat(rows, ignore_index=True)
    data = data[data["count"] > 0]
    unit = unit_of(value) or ""
    fmt = ",.4~f"
    color = alt.Color("series:N", title=series) if series else alt.value(PALETTE[0])
    bars = alt.Chart(data).mark_bar(opacity=0.65, binSpacing=0).encode(
        x=alt.X("bin_start:Q", title=axis_label(value), bin="binned"),
        x2="bin_end:Q",
        y=alt.Y("count:Q", title="intervals", scale=alt.Scale(type="log"), stack=None),
        color=color,
        tooltip=[*([alt.Tooltip("series:N", title=series)] if series else []),
                 alt.Tooltip("bin_start:Q", title=f"from [{unit}]", format=fmt),
                 alt.Tooltip("bin_end:Q", title=f"to [{unit}]", format=fmt),
                 alt.Tooltip("count:Q", title="intervals")])
    layers = [bars]
    sub = "count of intervals per ramp-rate bin (log scale)"
    if up > 0 or down > 0:
        xs, labels = [], []
        if down > 0:
            xs.append(-down)
            labels.append("fall limit")
        if up > 0:
            xs.append(up)
            labels.append("rise limit")
        lim = pd.DataFrame({"x": xs, "label": labels})
        layers.append(alt.Chart(lim).mark_rule(color="#D55E00", strokeDash=[6, 3]).encode(
            x="x:Q", tooltip=[alt.Tooltip("label:N"),
                              alt.Tooltip("x:Q", title=f"limit [{unit}]", format=fmt)]))
        over = np.zeros(vals.size, dtype=bool)
        if up > 0:
            over |= vals > up
        if down > 0:
            over |= vals < -down
        what = f"±{up:g}" if up == down else f"−{down:g} / +{up:g}"
        sub += f"; dashed: {what} {unit} limits, exceeded in {int(over.sum()):,} intervals"
    chart = alt.layer(*layers).properties(
        title=alt.Title(title or "Ramp-rate distribution", subtitle=sub))
    return sized(chart, width, height)


# --------------------------------------------------------------------------- spectrum


def spectrum_chart(spectrum: pd.DataFrame, *, frequency: str = "frequency_hz",
                   value: str = "psd", series: str | None = None,
                   bands: Sequence[tuple[float, float]] | pd.DataFrame = ((0.1, 2.0),
                                                                           (2.0, 20.0)),
                   value_title: str | None = None, max_points: int = 800,
                   title: str | None = None, width: int | None = None,
                   height: int | None = None) -> alt.LayerChart:
    """Oscillation spectrum (log-log) with the regulated frequency bands shaded.

    Parameters
    ----------
    spectrum : pandas.DataFrame
        ``frequency`` [Hz] and ``value`` (power spectral density, e.g. [MW²/Hz]) columns,
        optional ``series``; rows at zero frequency are dropped (log axis).
    frequency, value, series : str
        Column names.
    bands : sequence of (low_hz, high_hz) or DataFrame
        Bands to shade.  A DataFrame needs ``low_hz`` and ``high_hz`` and may carry
        ``label``, ``measured`` and ``limit`` columns (shown in the tooltip; a band whose
        ``measured`` exceeds ``limit`` is shaded red).
    value_title : str, optional
        Axis title of the density (default from the column name).
    max_points : int, default 800
        Spectra longer than this are reduced to log-spaced frequency bins (mean density).
    title : str, optional
    width, height : int, optional

    Returns
    -------
    altair.LayerChart
    """
    require_columns(spectrum, [frequency, value] + ([series] if series else []), "spectrum_chart")
    df = pd.DataFrame({"frequency_hz": pd.to_numeric(spectrum[frequency]).astype(float),
                       "psd": pd.to_numeric(spectrum[value]).astype(float),
                       "series": spectrum[series].astype(str) if series else ""})
    df = df[(df["frequency_hz"] > 0) & np.isfinite(df["psd"]) & (df["psd"] > 0)]
    if df.empty:
        raise SchemaError([Violation(value, "no positive spectral density at f > 0 to draw")])
    n_series = df["series"].nunique()
    per = max(50, max_points // n_series)
    if df.groupby("series").size().max() > per:
        lo, hi = np.log10(df["frequency_hz"].min()), np.log10(df["frequency_hz"].max())
        edges = np.logspace(lo, hi + 1e-9, per + 1)
        df["bin"] = np.searchsorted(edges, df["frequency_hz"], side="right") - 1
        df = df.groupby(["series", "bin"], as_index=False).agg(
            frequency_hz=("frequency_hz", "mean"), psd=("psd", "mean"))
    if isinstance(bands, pd.DataFrame):
        require_columns(bands, ["low_hz", "high_hz"], "spectrum_chart bands")
        bdf = bands.copy()
    else:
        bdf = pd.DataFrame(list(bands), columns=["low_hz", "high_hz"])
    if "label" not in bdf.columns:
        bdf["label"] = [f"{a:g}–{b:g} Hz" for a, b in zip(bdf["low_hz"], bdf["high_hz"])]
    bdf["label"] = bdf["label"].astype(str)
    if {"measured", "limit"} <= set(bdf.columns):
        meas = bdf["measured"].astype(float)
        lim = bdf["limit"].astype(float)
        bdf["status"] = np.where(lim.isna(), "band",
                                 np.where(meas > lim, "over limit", "within limit"))
    else:
        bdf["status"] = "band"
    fmin, fmax = df["frequency_hz"].min(), df["frequency_hz"].max()
    bdf = bdf[(bdf["high_hz"] > fmin) & (bdf["low_hz"] < fmax)].copy()
    bdf["low_hz"] = bdf["low_hz"].clip(lower=fmin)
    bdf["high_hz"] = bdf["high_hz"].clip(upper=fmax)
    ylab = value_title or axis_label(value)
    status_colors = {"band": "#888888", "within limit": "#009E73", "over limit": "#D55E00"}
    statuses = [s for s in status_colors if (bdf["status"] == s).any()] or ["band"]
    xs = alt.Scale(type="log")
    band_tips = [alt.Tooltip("label:N", title="band"), alt.Tooltip("status:N")]
    for c in ("measured", "limit"):
        if c in bdf.columns:
            band_tips.append(alt.Tooltip(f"{c}:Q", format=",.4~g"))
    rect = alt.Chart(bdf).mark_rect(opacity=0.12).encode(
        x=alt.X("low_hz:Q", scale=xs, title="frequency [Hz]"), x2="high_hz:Q",
        color=alt.Color("status:N", title="band",
                        scale=alt.Scale(domain=statuses,
                                        range=[status_colors[s] for s in statuses])),
        tooltip=band_tips)
    labels = alt.Chart(bdf).mark_text(align="left", baseline="top", dx=3, dy=3,
                                      fontSize=10, color="#444444").encode(
        x=alt.X("low_hz:Q", scale=xs), y=alt.value(0), text="label:N")
    color = alt.Color("series:N", title=series) if series else alt.value(PALETTE[0])
    line = alt.Chart(df).mark_line().encode(
        x=alt.X("frequency_hz:Q", scale=xs, title="frequency [Hz]"),
        y=alt.Y("psd:Q", scale=alt.Scale(type="log"), title=ylab), color=color,
        tooltip=[*([alt.Tooltip("series:N", title=series)] if series else []),
                 alt.Tooltip("frequency_hz:Q", title="frequency [Hz]", format=",.4~g"),
                 alt.Tooltip("psd:Q", title=ylab, format=",.4~g")])
    chart = alt.layer(rect, labels, line).resolve_scale(color="independent").properties(
        title=alt.Title(title or "Oscillation spectrum",
                        subtitle="Welch power spectral density; shaded: limit bands"))
    return sized(chart, width, height)


# --------------------------------------------------------------------------- adapters
# Thin adapters from powerlab results objects to the chart functions above.  They pick
# columns and convert units for display (W -> MW); every number comes from the results
# objects or from the analysis functions of their modules.


def mitigation_chart(table: pd.DataFrame, *, title: str | None = None,
                     width: int | None = None, height: int | None = None) -> alt.Chart:
    """Swing and ramp reduction of each mitigation, with its cost in the tooltip.

    Parameters
    ----------
    table : pandas.DataFrame
        Indexed (or with a ``variant`` column) by mitigation, with ``*_reduction_pct``
        columns [%] and optional ``extra_energy_megawatt_hours`` [MWh] and
        ``throughput_loss_pct`` [%] (as :func:`powerlab.site.mitigations.compare_mitigations`
        returns).
    title : str, optional
    width, height : int, optional

    Returns
    -------
    altair.Chart
    """
    df = table.reset_index() if "variant" not in table.columns else table.copy()
    require_columns(df, ["variant"], "mitigation_chart")
    red = [c for c in df.columns if c.endswith("_reduction_pct")]
    if not red:
        raise SchemaError([Violation("*_reduction_pct", "no reduction columns to draw")])
    df = df[df["variant"] != "baseline"]
    costs = [c for c in ("extra_energy_megawatt_hours", "throughput_loss_pct")
             if c in df.columns]
    long = df.melt(id_vars=["variant", *costs], value_vars=red, var_name="metric",
                   value_name="reduction_pct")
    long["metric"] = long["metric"].str.replace("_reduction_pct", "", regex=False).str.replace(
        "_", " ", regex=False).str.replace("0p1", "0.1", regex=False)
    long["variant"] = long["variant"].astype(str)
    tips = [alt.Tooltip("variant:N", title="mitigation"), alt.Tooltip("metric:N"),
            alt.Tooltip("reduction_pct:Q", title="reduction [%]", format=".1f")]
    if "extra_energy_megawatt_hours" in costs:
        tips.append(alt.Tooltip("extra_energy_megawatt_hours:Q", title="extra energy [MWh]",
                                format=",.3f"))
    if "throughput_loss_pct" in costs:
        tips.append(alt.Tooltip("throughput_loss_pct:Q", title="throughput loss [%]",
                                format=".3f"))
    chart = alt.Chart(long).mark_bar().encode(
        y=alt.Y("variant:N", title=None),
        x=alt.X("reduction_pct:Q", title="reduction against no mitigation [%]"),
        color=alt.Color("variant:N", legend=None),
        row=alt.Row("metric:N", title=None, header=alt.Header(labelAngle=0,
                                                              labelAlign="left")),
        tooltip=tips,
    ).properties(title=alt.Title(title or "Mitigations: what they remove",
                                 subtitle="hover for the cost (extra energy, throughput)"))
    return sized(chart, width, height)


@renamed_keywords(scope="boundary")
def forecast_charts(result: Any, *, boundary: str = "facility", draw: int = 0,
                    max_rows: int = DEFAULT_MAX_ROWS) -> dict[str, alt.TopLevelMixin]:
    """Charts of a :class:`powerlab.site.engine.ForecastResult`.

    Parameters
    ----------
    result : ForecastResult
    boundary : {"facility", "it"}
        Boundary of the ramp-rate and spectrum charts (the timeline shows both).
    draw : int, default 0
        Monte Carlo draw whose events, ramps and spectrum are drawn.
    max_rows : int
        Row budget of the timeline (see :func:`facility_chart`).

    Returns
    -------
    dict
        ``"timeline"`` (:func:`facility_chart`: mean across draws, p10–p90 band, events
        of ``draw``), ``"ramps"`` (:func:`ramp_rate_chart` of ``draw``'s ramps between
        adjacent 1-s means at every tick boundary, ``ramp_megawatts_per_s_1s``, which the
        scenario's ramp limits marked on it apply to; tick to tick when the tick does not
        divide 1 s) and ``"spectrum"`` (:func:`spectrum_chart` of ``draw``; a band with
        a scenario limit shows the value the limit is checked on, the worst window's RMS
        of the band-passed power, others the whole record's RMS).
    """
    from ..site.swings import BANDS_HZ, spectrum

    tl = result.timeline
    frame = pd.DataFrame({"timestamp": tl["timestamp"],
                          "boundary": tl["boundary"].astype(str),
                          "power_megawatts": tl["power_w_mean"] / 1e6,
                          "power_megawatts_lower": tl["power_w_p10"] / 1e6,
                          "power_megawatts_upper": tl["power_w_p90"] / 1e6})
    ev = result.events
    ev = ev[ev["draw"] == draw]
    events = pd.DataFrame({"timestamp": ev["timestamp"], "event": ev["event"].astype(str),
                           "detail": ("job " + ev["job"].astype(str) + ", "
                                      + ev["duration_s"].map("{:g} s".format))})
    band = "p10–p90 across draws" if result.draws > 1 else "single draw"
    out: dict[str, alt.TopLevelMixin] = {}
    out["timeline"] = facility_chart(
        frame, events, max_rows=max_rows, band_label=band, site_tz=result.scenario.site.tz,
        title=f"Power of {result.scenario.name} ({result.draws} draws)")
    x = result.power_w(boundary)[draw]
    lim = result.scenario.limits
    applies = lim.boundary == boundary
    # the ramps the scenario's limits apply to (site.swings.check_limits): between
    # adjacent 1-s means at every tick boundary, tick to tick when the tick does not
    # divide 1 s (names and definitions: limits.ramps.RAMP_DEFINITIONS)
    from ..site.planner import ramp_into_tick

    tick = result.tick_s
    if abs(round(1.0 / tick) * tick - 1.0) < 1e-9:
        name, r = "ramp_megawatts_per_s_1s", ramp_into_tick(x, tick, 1.0) / 1e6
        what = "between adjacent 1-s means, every alignment"
    else:
        name, r = "ramp_megawatts_per_s_tick", np.diff(x) / tick / 1e6
        what = f"tick to tick ({tick:g} s)"
    ramps = pd.DataFrame({name: r[np.isfinite(r)]})
    up, down = lim.ramp_up_megawatts_per_s, lim.ramp_down_megawatts_per_s
    out["ramps"] = ramp_rate_chart(
        ramps, value=name, limit=(down, up) if applies and (up > 0 or down > 0) else None,
        title=f"Ramp rates {what}, {boundary} (draw {draw})")
    spec_df = spectrum(x, result.tick_s)
    spec_df = pd.DataFrame({"frequency_hz": spec_df["frequency_hz"],
                            "psd_megawatts2_per_hz": spec_df["psd_w2_per_hz"] / 1e12})
    m = result.metrics
    row = m[(m["boundary"] == boundary) & (m["draw"] == draw)].iloc[0]
    # a band with a limit shows the value the limit is checked on (the requirement
    # spec's oscillation metric, limits.requirements.evaluate_power: the worst window's
    # RMS of the band-passed power); a band without one the whole record's RMS
    from ..limits.evaluation import evaluate_power
    from ..limits.scenario_limits import limits_spec

    spec = limits_spec(lim)
    checked = {r.name: r for r in spec.requirements if r.kind == "oscillation"} \
        if applies else {}
    values = evaluate_power(spec, x, tick)[0] if checked else {}
    bands = []
    for key, (lo, hi) in BANDS_HZ.items():
        r = checked.get(f"band_{key}")
        if r is not None:
            v = values[r.name]
            what = (f"worst {r.window_s:g}-s window {v:.3g} MW rms" if np.isfinite(v)
                    else "cannot be assessed at this tick")
        else:
            v = row[f"band_{key}_rms_w"] / 1e6
            what = f"{v:.3g} MW rms (whole record)"
        bands.append({"low_hz": lo, "high_hz": hi, "label": f"{lo:g}–{hi:g} Hz: {what}",
                      "measured": v, "limit": r.limit if r is not None else np.nan})
    bdf = pd.DataFrame(bands)
    if bdf["limit"].isna().all():
        bdf = bdf.drop(columns=["limit"])
    out["spectrum"] = spectrum_chart(
        spec_df, value="psd_megawatts2_per_hz", bands=bdf,
        value_title="power spectral density [MW²/Hz]",
        title=f"Oscillation spectrum, {boundary} (draw {draw})")
    return out
