"""Charts of telemetry, forecasts and time-of-day analyses (the only module importing altair).

Every function takes a **tidy frame** with documented column names (or, through the thin
adapters at the end of the module, a powerlab results object) and returns an altair chart.
Charts only draw: the few reductions they make (binning a long series to a few thousand
points, a histogram) exist so that raw telemetry never trips altair's 5,000-row limit, and
they keep the extremes (each point carries the mean, minimum and maximum of its bin).

Importing the module registers the ``powerlab`` theme (``alt.theme.register``) and enables
it unless the user already enabled another one; :func:`use_theme` enables it explicitly.

Chart functions
---------------
:func:`telemetry_chart`          power / clock / temperature over time per GPU, host or fleet
:func:`telemetry_overview`       several telemetry metrics stacked, with a shared zoom
:func:`facility_chart`           facility power timeline with quantile band and event markers
:func:`ramp_rate_chart`          distribution of ramp rates with the limit marked
:func:`spectrum_chart`           oscillation spectrum with the limit bands shaded
:func:`hour_of_day_chart`        hour-of-day effect with its confidence interval
:func:`throttle_share_chart`     share of GPU time under each throttle reason by hour
:func:`straggler_heatmap`        robust straggler score per host x GPU
:func:`mitigation_chart`         swing and ramp reduction per mitigation, cost in tooltips

Adapters from results objects
-----------------------------
:func:`forecast_charts`          ForecastResult -> timeline, ramps, spectrum
:func:`time_of_day_charts`       TimeOfDayResult -> hour-of-day profile, throttle shares
:func:`stragglers_chart`         StragglerResult -> heat map

In notebooks, :func:`use_offline_renderer` makes chart outputs carry their JavaScript so
that they render in JupyterLab without network access; :func:`to_svg` / :func:`to_png`
render with vl-convert, no browser needed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from ..exceptions import SchemaError, Violation
from ..telemetry.schema import GLOSSARY

__all__ = [
    "THEME",
    "downsample",
    "facility_chart",
    "forecast_charts",
    "hour_of_day_chart",
    "mitigation_chart",
    "ramp_rate_chart",
    "spectrum_chart",
    "straggler_heatmap",
    "stragglers_chart",
    "telemetry_chart",
    "telemetry_overview",
    "throttle_share_chart",
    "time_of_day_charts",
    "to_png",
    "to_svg",
    "use_offline_renderer",
    "use_theme",
]

#: Name of the registered altair theme.
THEME = "powerlab"

#: altair refuses to embed more rows than this by default; charts stay below it.
MAX_ROWS = 5000
#: Default budget of rows a chart function embeds (leaves room under :data:`MAX_ROWS`).
DEFAULT_MAX_ROWS = 4000

# Okabe-Ito, a palette readable with colour-vision deficiencies.
_PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
            "#666666"]
_FONT = "'Source Sans 3', 'Helvetica Neue', Arial, sans-serif"


@alt.theme.register(THEME, enable=False)
def _powerlab_theme() -> alt.theme.ThemeConfig:
    return {
        "config": {
            "font": _FONT,
            "view": {"continuousWidth": 640, "continuousHeight": 220, "stroke": None},
            "range": {"category": _PALETTE},
            "title": {"anchor": "start", "fontSize": 14, "fontWeight": 600,
                      "font": _FONT, "subtitleFont": _FONT, "subtitleColor": "#555555"},
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "titleFontWeight": 500,
                     "gridColor": "#e6e6e6", "domainColor": "#888888",
                     "tickColor": "#888888"},
            "legend": {"labelFontSize": 11, "titleFontSize": 12, "orient": "right"},
            "line": {"strokeWidth": 1.5},
            "area": {"opacity": 0.25},
        }
    }


def use_theme() -> None:
    """Enable the ``powerlab`` altair theme (it is registered on import)."""
    alt.theme.enable(THEME)


if alt.theme.active == "default":
    use_theme()


def use_offline_renderer() -> None:
    """Show charts in Jupyter without network access.

    Altair's default notebook output loads the Vega JavaScript from a CDN, which a closed
    datacenter network blocks.  This enables the ``powerlab`` renderer: each chart output
    carries the Vega, Vega-Lite and vega-embed JavaScript inline (about 0.9 MB, built once
    by vl-convert and cached, see :func:`powerlab.viz.report.javascript_bundle`), evaluated
    only once per page, so charts render offline and after the notebook is reopened.
    """
    alt.renderers.enable("powerlab")


def _offline_renderer(spec: dict, **metadata) -> dict[str, str]:
    import json
    import uuid

    from .report import javascript_bundle

    div = f"powerlab-{uuid.uuid4().hex}"
    js = javascript_bundle(_vl_version())
    text = json.dumps(spec, separators=(",", ":")).replace("<", "\\u003c")
    opts = json.dumps({"renderer": "svg", "actions": False,
                       **metadata.get("embed_options", {})})
    html = (f'<div id="{div}"></div>\n<script type="text/javascript">\n'
            f"if (typeof window.vegaEmbed !== 'function') {{ (function () {{\n{js}\n}})(); }}\n"
            f"window.vegaEmbed('#{div}', {text}, {opts}).catch(function (err) {{\n"
            f"  document.getElementById('{div}').textContent = 'chart failed: ' + err;\n"
            f"  console.error(err);\n}});\n</script>")
    return {"text/html": html, "text/plain": f"<powerlab chart {div}>"}


alt.renderers.register("powerlab", _offline_renderer)


# --------------------------------------------------------------------------- helpers


def _require(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} expects a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c is not None and c not in df.columns]
    if missing:
        raise SchemaError([Violation(c, f"missing column needed by {what}") for c in missing])


def _unit(column: str) -> str:
    col = GLOSSARY.get(column)
    if col is not None and col.unit:
        return "°C" if col.unit == "degC" else col.unit
    for suffix, unit in (("_megawatts_per_s", "MW/s"), ("_megawatts", "MW"), ("_w", "W"),
                         ("_mhz", "MHz"), ("_c", "°C"), ("_pct", "%"), ("_hz", "Hz"),
                         ("_s", "s"), ("_j", "J")):
        if column.endswith(suffix):
            return unit
    return ""


def _label(column: str) -> str:
    """Axis title with the unit in brackets: ``power_w`` -> ``power [W]``."""
    names = {"power_w": "power", "clock_sm_mhz": "SM clock", "clock_mem_mhz": "memory clock",
             "temp_gpu_c": "GPU temperature", "temp_mem_c": "HBM temperature",
             "util_gpu_pct": "GPU utilisation", "power_limit_w": "power limit",
             "energy_j": "energy", "power_avg_w": "average power"}
    unit = _unit(column)
    name = names.get(column)
    if name is None:
        name = column
        for suffix in ("_megawatts_per_s", "_megawatts", "_mhz", "_pct", "_hz", "_w", "_c",
                       "_s", "_j"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        name = name.replace("_", " ")
    return f"{name} [{unit}]" if unit else name


def _fmt(unit: str) -> str:
    return ",.3~f" if unit in ("MW", "MW/s") else ",.1f"


def _utc(ts: pd.Series) -> pd.Series:
    if not isinstance(ts.dtype, pd.DatetimeTZDtype):
        raise SchemaError([Violation(ts.name or "timestamp",
                                     f"timestamps must be tz-aware UTC, got {ts.dtype}")])
    return ts.dt.tz_convert("UTC")


def _time_text(ts: pd.Series) -> pd.Series:
    """Timestamps as text for tooltips (vega would show them in the viewer's time zone)."""
    return ts.dt.strftime("%Y-%m-%d %H:%M:%S UTC").astype(object)


def downsample(df: pd.DataFrame, value: str | Sequence[str], *, time: str = "timestamp",
               by: Sequence[str] = (), max_points: int = 1000) -> pd.DataFrame:
    """Reduce each series to at most ``max_points`` time bins, keeping mean, min and max.

    Bins are of equal width over the whole frame's time range, so every series shares the
    same bin edges.  Series shorter than ``max_points`` keep every sample (bins that hold
    one sample have min == mean == max).

    Parameters
    ----------
    df : pandas.DataFrame
        Tidy frame with a tz-aware ``time`` column and the ``value`` column(s).
    value : str or sequence of str
        Column(s) to reduce.
    time : str, default "timestamp"
        The time column (tz-aware).
    by : sequence of str
        Columns identifying one series (for example ``["host", "gpu_index"]``).
    max_points : int, default 1000
        Largest number of bins per series.

    Returns
    -------
    pandas.DataFrame
        ``by`` columns, ``time`` (the mean time of the samples in the bin),
        ``<value>`` (mean), ``<value>_min``, ``<value>_max`` and ``n_samples``.
    """
    values = [value] if isinstance(value, str) else list(value)
    by = list(by)
    _require(df, [time, *values, *by], "downsample")
    if max_points < 1:
        raise ValueError("max_points must be at least 1")
    t = _utc(df[time]).astype("datetime64[ns, UTC]").astype("int64").to_numpy()
    work = df[by + values].copy()
    for v in values:
        work[v] = pd.to_numeric(work[v], errors="coerce").astype("float64")
    t0 = int(t.min()) if len(t) else 0
    work["_t"] = (t - t0).astype("float64")  # relative: float64 keeps ns precision
    if len(df) == 0:
        out = work.rename(columns={"_t": time}).iloc[:0]
        for v in values:
            out[f"{v}_min"] = out[v]
            out[f"{v}_max"] = out[v]
        out[time] = pd.Series([], dtype="datetime64[ns, UTC]")
        out["n_samples"] = pd.Series([], dtype="int64")
        return out
    width = max((int(t.max()) - t0) / max_points, 1.0)
    work["_bin"] = np.minimum(((t - t0) / width).astype(np.int64), max_points - 1)
    keys = by + ["_bin"]
    g = work.groupby(keys, sort=True, dropna=False, observed=True)
    out = g.agg(**{"_t": ("_t", "mean"), "n_samples": ("_t", "size"),
                   **{v: (v, "mean") for v in values},
                   **{f"{v}_min": (v, "min") for v in values},
                   **{f"{v}_max": (v, "max") for v in values}}).reset_index()
    out[time] = pd.to_datetime(out["_t"].round().astype("int64") + t0, utc=True,
                               unit="ns").astype("datetime64[ns, UTC]")
    cols = by + [time] + values + [f"{v}_min" for v in values] + [f"{v}_max" for v in values]
    return out[cols + ["n_samples"]]


def _is_node(df: pd.DataFrame) -> pd.Series:
    """Rows of node scope (``scope == "node"``, or no GPU index where there is a column)."""
    is_node = pd.Series(False, index=df.index)
    if "gpu_index" in df.columns:
        is_node = is_node | df["gpu_index"].isna()
    if "scope" in df.columns:
        is_node = is_node | (df["scope"].astype("string") == "node").fillna(False)
    return is_node.astype(bool)


def _series_label(df: pd.DataFrame, level: str) -> pd.Series:
    host = df["host"].astype("string").fillna("?")
    is_node = _is_node(df)
    # never average node readings (a whole node) with GPU readings into one line
    mixed = bool(is_node.any()) and not bool(is_node.all())
    if level == "fleet":
        lab = pd.Series("fleet", index=df.index, dtype=object)
        return lab.where(~is_node, "fleet (node)") if mixed else lab
    if level == "host" or "gpu_index" not in df.columns:
        return (host.where(~is_node, host + " (node)") if mixed else host).astype(object)
    gpu = df["gpu_index"].astype("Int64")
    lab = host + "/gpu" + gpu.astype("string").fillna("")
    return lab.where(~is_node, host + " (node)").astype(object)


def _choose_level(df: pd.DataFrame, by: str, max_rows: int, min_points: int) -> str:
    if by != "auto":
        if by not in ("gpu", "host", "fleet"):
            raise ValueError(f"by must be 'auto', 'gpu', 'host' or 'fleet', got {by!r}")
        return by
    n_gpu = len(df.drop_duplicates([c for c in ("host", "gpu_index") if c in df.columns]))
    if n_gpu * min_points <= max_rows and n_gpu <= 32:
        return "gpu"
    n_host = df["host"].nunique(dropna=False)
    if n_host * min_points <= max_rows and n_host <= 32:
        return "host"
    return "fleet"


def _scales_zoom(name: str = "zoom") -> alt.Parameter:
    return alt.selection_interval(name=name, encodings=["x"], bind="scales")


# --------------------------------------------------------------------------- telemetry


def telemetry_chart(telemetry: pd.DataFrame, metric: str = "power_w", *, by: str = "auto",
                    max_rows: int = DEFAULT_MAX_ROWS, max_points: int = 1000,
                    band: bool = True, title: str | None = None,
                    zoom: bool | alt.Parameter = True,
                    width: int | str | None = None, height: int | None = None
                    ) -> alt.LayerChart:
    """One telemetry metric over time, per GPU, per host or for the whole fleet.

    Long series are binned (:func:`downsample`) so that the chart embeds at most
    ``max_rows`` rows whatever the input size: the line is the bin mean and the shaded
    band spans the bin minimum to maximum, so short spikes stay visible.

    Parameters
    ----------
    telemetry : pandas.DataFrame
        Telemetry in the canonical schema; needs ``timestamp`` (tz-aware), ``host``,
        ``metric`` and, for per-GPU lines, ``gpu_index`` (``scope == "node"`` rows are drawn
        as one series per host).
    metric : str, default "power_w"
        Column to draw, e.g. ``power_w`` [W], ``clock_sm_mhz`` [MHz], ``temp_gpu_c`` [°C].
    by : {"auto", "gpu", "host", "fleet"}
        One line per GPU, per host (mean, min and max over the host's GPUs), or one for the
        fleet.  ``"auto"`` picks the finest level with at most 32 lines that fits
        ``max_rows``.
    max_rows : int, default 4000
        Most rows embedded in the chart (altair's limit is 5,000).
    max_points : int, default 1000
        Most time bins per line.
    band : bool, default True
        Draw the min-max band of each bin.
    title : str, optional
        Chart title.
    zoom : bool or altair.Parameter, default True
        Drag to pan, scroll to zoom the time axis (pass a shared interval parameter bound
        to the scales to zoom several charts together).  Clicking the legend highlights a
        series in any case.
    width, height : int, optional
        Size in pixels (theme default otherwise).

    Returns
    -------
    altair.LayerChart
    """
    _require(telemetry, ["timestamp", "host", metric], "telemetry_chart")
    df = telemetry.loc[telemetry[metric].notna()]
    level = _choose_level(df, by, max_rows, 50)
    frame = pd.DataFrame({"timestamp": df["timestamp"], "series": _series_label(df, level),
                          metric: df[metric]})
    n_series = max(frame["series"].nunique(), 1)
    per_series = int(max(2, min(max_points, max_rows // n_series)))
    data = downsample(frame, metric, by=["series"], max_points=per_series)
    data["time_utc"] = _time_text(data["timestamp"])
    unit = _unit(metric)
    ylab = _label(metric)
    fmt = _fmt(unit)
    legend_sel = alt.selection_point(name="pick", fields=["series"], bind="legend")
    x = alt.X("timestamp:T", title="time (UTC)", scale=alt.Scale(type="utc"),
              axis=alt.Axis(format="%H:%M:%S", labelOverlap=True))
    color = alt.Color("series:N", title={"gpu": "GPU", "host": "host"}.get(level, ""),
                      legend=None if n_series == 1 else alt.Legend())
    tooltip = [alt.Tooltip("series:N", title=level),
               alt.Tooltip("time_utc:N", title="time"),
               alt.Tooltip(f"{metric}:Q", title=f"mean [{unit}]", format=fmt),
               alt.Tooltip(f"{metric}_min:Q", title=f"min [{unit}]", format=fmt),
               alt.Tooltip(f"{metric}_max:Q", title=f"max [{unit}]", format=fmt),
               alt.Tooltip("n_samples:Q", title="samples")]
    base = alt.Chart(data)
    line = base.mark_line().encode(
        x=x, y=alt.Y(f"{metric}:Q", title=ylab, scale=alt.Scale(zero=False)), color=color,
        opacity=alt.condition(legend_sel, alt.value(1.0), alt.value(0.15)), tooltip=tooltip,
    ).properties(name=f"line_{metric}")
    if zoom is True:
        zoom = _scales_zoom()
    line = line.add_params(legend_sel, *([zoom] if zoom is not False else []))
    layers = [line]
    if band:
        area = base.mark_area().encode(
            x=x, y=alt.Y(f"{metric}_min:Q", title=ylab), y2=f"{metric}_max:Q", color=color,
            opacity=alt.condition(legend_sel, alt.value(0.22), alt.value(0.04)),
        )
        layers.insert(0, area)
    node = _is_node(df)
    unit_name = ("nodes" if node.all() else "GPUs") if len(df) else "GPUs"
    subtitle = {"gpu": "one line per " + unit_name[:-1], "host": f"mean of each host's {unit_name}",
                "fleet": f"mean of all {unit_name}"}[level]
    if node.any() and not node.all() and level != "gpu":
        subtitle += " (node-scope rows drawn apart)"
    if data["n_samples"].max() > 1:
        subtitle += "; band: min–max within each time bin"
    chart = alt.layer(*layers).properties(
        title=alt.Title(title or _label(metric).split(" [")[0], subtitle=subtitle))
    return _size(chart, width, height)


def telemetry_overview(telemetry: pd.DataFrame,
                       metrics: Sequence[str] = ("power_w", "clock_sm_mhz", "temp_gpu_c"), *,
                       by: str = "auto", max_rows: int = DEFAULT_MAX_ROWS,
                       title: str | None = None, width: int | None = None,
                       height: int = 160) -> alt.VConcatChart:
    """Several telemetry metrics stacked over a shared, zoomable time axis.

    Parameters
    ----------
    telemetry : pandas.DataFrame
        Telemetry in the canonical schema (see :func:`telemetry_chart`).
    metrics : sequence of str
        Columns to draw, one panel each; columns that are absent or all missing are skipped.
    by, max_rows
        As in :func:`telemetry_chart`; ``max_rows`` applies to each panel.
    title : str, optional
        Overall title.
    width, height : int
        Size of each panel in pixels.

    Returns
    -------
    altair.VConcatChart
    """
    present = [m for m in metrics if m in telemetry.columns and telemetry[m].notna().any()]
    if not present:
        raise SchemaError([Violation(", ".join(metrics),
                                     "none of the metrics has data for telemetry_overview")])
    zoom = _scales_zoom("zoom_shared")
    panels = []
    for m in present:
        panels.append(telemetry_chart(telemetry, m, by=by, max_rows=max_rows, zoom=zoom,
                                      width=width, height=height))
    with warnings.catch_warnings():
        # the zoom and legend selections are shared on purpose: altair merges them
        warnings.filterwarnings("ignore", message="Automatically deduplicated selection")
        out = alt.vconcat(*panels).resolve_scale(x="shared", color="shared")
    _prune_views(out)
    if title:
        out = out.properties(title=title)
    return out


def _prune_views(chart: alt.TopLevelMixin) -> None:
    """Keep only view names that exist in ``chart`` in its top-level parameters.

    altair (6.3) lists a view both under its own name and the position-suffixed name it
    gets inside a concatenation; Vega-Lite ignores the dangling one, but a spec should not
    name views that do not exist.
    """
    names = {d["name"] for d in _dicts(chart.to_dict(validate=False))
             if isinstance(d.get("name"), str) and "mark" in d}
    for p in chart.params or []:
        views = getattr(p, "views", alt.Undefined)
        if views is not alt.Undefined and views:
            p.views = [v for v in views if v in names]


def _dicts(obj):
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from _dicts(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _dicts(v)


def _size(chart, width, height):
    props = {}
    if width is not None:
        props["width"] = width
    if height is not None:
        props["height"] = height
    return chart.properties(**props) if props else chart


# --------------------------------------------------------------------------- facility


def facility_chart(timeline: pd.DataFrame, events: pd.DataFrame | None = None, *,
                   value: str = "power_megawatts", lower: str | None = "power_megawatts_lower",
                   upper: str | None = "power_megawatts_upper", time: str = "timestamp",
                   series: str | None = "scope", max_rows: int = DEFAULT_MAX_ROWS,
                   band_label: str = "quantile band", title: str | None = None,
                   width: int | None = None, height: int = 240) -> alt.VConcatChart:
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
        band bounds [MW] (quantiles of Monte Carlo draws), optional ``series`` (e.g. scope
        ``"it"`` / ``"facility"``).
    events : pandas.DataFrame, optional
        ``timestamp`` (tz-aware) and ``event`` (text, e.g. ``"checkpoint"``); an optional
        ``detail`` column is shown in the tooltip.  At most 200 are drawn (evenly thinned).
    value, lower, upper, time, series : str
        Column names; ``lower``/``upper``/``series`` may be None or absent.
    max_rows : int, default 4000
        Most rows embedded for the timeline.
    band_label : str
        What the band is (subtitle), e.g. ``"p10–p90 across draws"``.
    title : str, optional
    width, height : int
        Size of the main panel in pixels.

    Returns
    -------
    altair.VConcatChart
    """
    _require(timeline, [time, value], "facility_chart")
    has_band = (lower is not None and upper is not None and lower in timeline.columns
                and upper in timeline.columns)
    by = [series] if series is not None and series in timeline.columns else []
    cols = [value] + ([lower, upper] if has_band else [])
    frame = timeline[[time, *by, *cols]].rename(columns={time: "timestamp"})
    if by:
        frame[by[0]] = frame[by[0]].astype(str)
    n_series = max(frame[by[0]].nunique(), 1) if by else 1
    per_series = int(max(2, min(2000, (max_rows - 200) // n_series)))
    data = downsample(frame, cols, by=by, max_points=per_series)
    binned = bool((data["n_samples"] > 1).any())
    if has_band:
        data = data.drop(columns=[f"{lower}_min", f"{lower}_max", f"{upper}_min",
                                  f"{upper}_max"])
    data["time_utc"] = _time_text(data["timestamp"])
    unit = _unit(value) or "MW"
    fmt = _fmt(unit)
    ylab = f"power [{unit}]"
    x = alt.X("timestamp:T", title="time (UTC)", scale=alt.Scale(type="utc"))
    color = alt.Color(f"{by[0]}:N", title=by[0]) if by else alt.value(_PALETTE[0])
    brush = alt.selection_interval(name="brush", encodings=["x"])
    tips = [alt.Tooltip("time_utc:N", title="time")]
    if by:
        tips.append(alt.Tooltip(f"{by[0]}:N"))
    tips.append(alt.Tooltip(f"{value}:Q", title=f"mean [{unit}]", format=fmt))
    if binned:
        tips += [alt.Tooltip(f"{value}_min:Q", title=f"lowest [{unit}]", format=fmt),
                 alt.Tooltip(f"{value}_max:Q", title=f"highest [{unit}]", format=fmt)]
    if has_band:
        tips += [alt.Tooltip(f"{lower}:Q", title=f"band low [{unit}]", format=fmt),
                 alt.Tooltip(f"{upper}:Q", title=f"band high [{unit}]", format=fmt)]
    base = alt.Chart(data)
    detail_x = alt.X("timestamp:T", title="time (UTC)",
                     scale=alt.Scale(type="utc", domain=brush))
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
        _require(events, ["timestamp", "event"], "facility_chart events")
        ev = events.copy()
        ev["timestamp"] = _utc(ev["timestamp"])
        ev = ev.sort_values("timestamp")
        if len(ev) > 200:  # keep the chart light: thin evenly
            ev = ev.iloc[np.linspace(0, len(ev) - 1, 200).round().astype(int)]
        ev_cols = ["timestamp", "event"] + (["detail"] if "detail" in ev.columns else [])
        ev = ev[ev_cols].copy()
        ev["event"] = ev["event"].astype(str)
        ev["time_utc"] = _time_text(ev["timestamp"])
        ev_tips = [alt.Tooltip("event:N"), alt.Tooltip("time_utc:N", title="time")]
        if "detail" in ev.columns:
            ev["detail"] = ev["detail"].astype(str)
            ev_tips.append(alt.Tooltip("detail:N"))
        layers.append(alt.Chart(ev).mark_rule(color="#444444", opacity=0.6).encode(
            x=detail_x, strokeDash=alt.StrokeDash("event:N", title="event"),
            tooltip=ev_tips))
    main = alt.layer(*layers).properties(height=height)
    overview = base.mark_line(strokeWidth=1).encode(
        x=x, y=alt.Y(f"{value}:Q", title=None, axis=alt.Axis(tickCount=2),
                     scale=alt.Scale(zero=False)),
        color=color).add_params(brush).properties(height=50)
    main = _size(main, width, None)
    overview = _size(overview, width, None)
    parts = ["line: mean"]
    if has_band:
        parts.append(f"band: {band_label}" + (" (bin means)" if binned else ""))
    if binned:
        parts.append("faint: lowest–highest within each time bin")
    parts.append("drag over the strip below to zoom")
    return alt.vconcat(main, overview).properties(
        title=alt.Title(title or "Facility power", subtitle="; ".join(parts)))


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
    _require(ramps, [value] + ([series] if series else []), "ramp_rate_chart")
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
    unit = _unit(value) or ""
    fmt = ",.4~f"
    color = alt.Color("series:N", title=series) if series else alt.value(_PALETTE[0])
    bars = alt.Chart(data).mark_bar(opacity=0.65, binSpacing=0).encode(
        x=alt.X("bin_start:Q", title=_label(value), bin="binned"),
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
    return _size(chart, width, height)


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
    _require(spectrum, [frequency, value] + ([series] if series else []), "spectrum_chart")
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
        _require(bands, ["low_hz", "high_hz"], "spectrum_chart bands")
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
    ylab = value_title or _label(value)
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
    color = alt.Color("series:N", title=series) if series else alt.value(_PALETTE[0])
    line = alt.Chart(df).mark_line().encode(
        x=alt.X("frequency_hz:Q", scale=xs, title="frequency [Hz]"),
        y=alt.Y("psd:Q", scale=alt.Scale(type="log"), title=ylab), color=color,
        tooltip=[*([alt.Tooltip("series:N", title=series)] if series else []),
                 alt.Tooltip("frequency_hz:Q", title="frequency [Hz]", format=",.4~g"),
                 alt.Tooltip("psd:Q", title=ylab, format=",.4~g")])
    chart = alt.layer(rect, labels, line).resolve_scale(color="independent").properties(
        title=alt.Title(title or "Oscillation spectrum",
                        subtitle="Welch power spectral density; shaded: limit bands"))
    return _size(chart, width, height)


# --------------------------------------------------------------------------- time of day


def hour_of_day_chart(profile: pd.DataFrame, *, hour: str = "hour", effect: str = "effect_pct",
                      lower: str | None = "lower_pct", upper: str | None = "upper_pct",
                      peak_hour: float | None = None, trough_hour: float | None = None,
                      site_tz: str | None = None, title: str | None = None,
                      width: int | None = None, height: int | None = None) -> alt.LayerChart:
    """The fitted hour-of-day effect with its confidence interval.

    Parameters
    ----------
    profile : pandas.DataFrame
        ``hour`` (local fractional hour, 0–24), ``effect`` (effect on throughput [%] of the
        mean), optional ``lower`` and ``upper`` interval bounds [%].
    hour, effect, lower, upper : str
        Column names.
    peak_hour, trough_hour : float, optional
        Marked with labelled rules [h, local].
    site_tz : str, optional
        Time zone named in the axis title.
    title : str, optional
    width, height : int, optional

    Returns
    -------
    altair.LayerChart
    """
    _require(profile, [hour, effect], "hour_of_day_chart")
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
        layers.append(alt.Chart(data).mark_area(color=_PALETTE[0]).encode(
            x=x, y=alt.Y("lower_pct:Q", title="effect on throughput [%]"), y2="upper_pct:Q"))
    layers.append(alt.Chart(data).mark_line(color=_PALETTE[0]).encode(
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
    return _size(chart, width, height)


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
    _require(shares, [hour, reason, share], "throttle_share_chart")
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
    return _size(chart, width, height)


# --------------------------------------------------------------------------- stragglers


def straggler_heatmap(scores: pd.DataFrame, *, host: str = "host", gpu: str = "gpu_index",
                      value: str = "score", flagged: str | None = "flagged",
                      value_title: str = "robust score", higher_is_worse: bool = True,
                      details: Sequence[str] = (), title: str | None = None,
                      width: int | None = None, height: int | None = None) -> alt.LayerChart:
    """Heat map of a per-GPU straggler score, hosts down and GPUs across.

    Parameters
    ----------
    scores : pandas.DataFrame
        One row per GPU: ``host``, ``gpu`` (index on the host) and ``value`` (a robust
        score against peers, e.g. a median z-score), optional boolean ``flagged``.
    host, gpu, value, flagged : str
        Column names.
    value_title : str
        Legend title of the score.
    higher_is_worse : bool, default True
        Colour the harmful direction red (False for a clock, where low is slow).
    details : sequence of str
        Further columns shown in the tooltip (e.g. ``reasons``, ``cost_step_pct``).
    title : str, optional
    width, height : int, optional

    Returns
    -------
    altair.LayerChart
    """
    details = [c for c in details if c in scores.columns and c not in (host, gpu, value)]
    _require(scores, [host, gpu, value], "straggler_heatmap")
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
    return _size(chart, width, None)


# --------------------------------------------------------------------------- rendering


def to_svg(chart: alt.TopLevelMixin) -> str:
    """Render a chart to SVG text with vl-convert (no browser needed)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict(), vl_version=_vl_version())


def to_png(chart: alt.TopLevelMixin, scale: float = 1.0) -> bytes:
    """Render a chart to PNG bytes with vl-convert (no browser needed)."""
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_dict(), vl_version=_vl_version(), scale=scale)


def _vl_version() -> str:
    """The Vega-Lite version of altair's schema as vl-convert names it (``"6.4"``)."""
    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return major_minor


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
        ``throughput_loss_pct`` [%] (as :func:`powerlab.grid.swings.compare_mitigations`
        returns).
    title : str, optional
    width, height : int, optional

    Returns
    -------
    altair.Chart
    """
    df = table.reset_index() if "variant" not in table.columns else table.copy()
    _require(df, ["variant"], "mitigation_chart")
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
    return _size(chart, width, height)


def forecast_charts(result: Any, *, scope: str = "facility", draw: int = 0,
                    max_rows: int = DEFAULT_MAX_ROWS) -> dict[str, alt.TopLevelMixin]:
    """Charts of a :class:`powerlab.grid.forecast.ForecastResult`.

    Parameters
    ----------
    result : ForecastResult
    scope : {"facility", "it"}
        Scope of the ramp-rate and spectrum charts (the timeline shows both).
    draw : int, default 0
        Monte Carlo draw whose events, ramps and spectrum are drawn.
    max_rows : int
        Row budget of the timeline (see :func:`facility_chart`).

    Returns
    -------
    dict
        ``"timeline"`` (:func:`facility_chart`: mean across draws, p10–p90 band, events
        of ``draw``), ``"ramps"`` (:func:`ramp_rate_chart` of the tick-to-tick ramps of
        ``draw``, scenario ramp limits marked) and ``"spectrum"`` (:func:`spectrum_chart`
        of ``draw`` with the band RMS against the scenario limits).
    """
    from ..grid.swings import BANDS_HZ, spectrum

    tl = result.timeline
    frame = pd.DataFrame({"timestamp": tl["timestamp"], "scope": tl["scope"].astype(str),
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
        frame, events, max_rows=max_rows, band_label=band,
        title=f"Power of {result.scenario.name} ({result.draws} draws)")
    x = result.power_w(scope)[draw]
    lim = result.scenario.limits
    applies = lim.scope == scope
    ramps = pd.DataFrame({"ramp_megawatts_per_s": np.diff(x) / result.tick_s / 1e6})
    up, down = lim.ramp_up_megawatts_per_s, lim.ramp_down_megawatts_per_s
    out["ramps"] = ramp_rate_chart(
        ramps, limit=(down, up) if applies and (up > 0 or down > 0) else None,
        title=f"Ramp rates, {scope} (draw {draw}, {result.tick_s:g} s ticks)")
    spec_df = spectrum(x, result.tick_s)
    spec_df = pd.DataFrame({"frequency_hz": spec_df["frequency_hz"],
                            "psd_megawatts2_per_hz": spec_df["psd_w2_per_hz"] / 1e12})
    m = result.metrics
    row = m[(m["scope"] == scope) & (m["draw"] == draw)].iloc[0]
    bands = []
    for key, (lo, hi) in BANDS_HZ.items():
        b = {"low_hz": lo, "high_hz": hi,
             "label": f"{lo:g}–{hi:g} Hz: {row[f'band_{key}_rms_w'] / 1e6:.3g} MW rms",
             "measured": row[f"band_{key}_rms_w"] / 1e6}
        limit_mw = getattr(lim, f"band_{key}_megawatts")
        b["limit"] = limit_mw if applies and limit_mw > 0 else np.nan
        bands.append(b)
    bdf = pd.DataFrame(bands)
    if bdf["limit"].isna().all():
        bdf = bdf.drop(columns=["limit"])
    out["spectrum"] = spectrum_chart(
        spec_df, value="psd_megawatts2_per_hz", bands=bdf,
        value_title="power spectral density [MW²/Hz]",
        title=f"Oscillation spectrum, {scope} (draw {draw})")
    return out


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
