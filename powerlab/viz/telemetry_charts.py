"""Charts of telemetry: one metric over time per GPU, host or fleet; several stacked."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from .._options import Options
from ..exceptions import SchemaError, Violation
from .prepare import (
    axis_label,
    chart_times,
    choose_level,
    downsample,
    is_node,
    number_format,
    require_columns,
    series_label,
    time_label,
    unit_of,
)
from .render import (
    DEFAULT_MAX_ROWS,
    alt,
    inline_table,
    prune_views,
    scales_zoom,
    sized,
    time_tooltip,
    time_x,
)

__all__ = ["TelemetryChartOptions", "telemetry_chart", "telemetry_overview"]


@dataclass(frozen=True)
class TelemetryChartOptions(Options):
    """How :func:`telemetry_chart` reduces telemetry to lines and draws them.

    Attributes
    ----------
    by : {"auto", "gpu", "host", "fleet"}
        One line per GPU, per host (mean, min and max over the host's GPUs), or one for the
        fleet.  ``"auto"`` picks the finest level with at most 32 lines that fits
        ``max_rows``.
    max_rows : int, default 3000
        Most rows embedded in the chart (altair's limit is 5,000).
    max_points : int, default 600
        Most time bins per line (about the width of the chart in pixels; each bin keeps
        its minimum and maximum, so nothing narrower than a pixel disappears).
    band : bool, default True
        Draw the min-max band of each bin.
    """

    by: str = "auto"
    max_rows: int = DEFAULT_MAX_ROWS
    max_points: int = 600
    band: bool = True


def telemetry_chart(telemetry: pd.DataFrame, metric: str = "power_w", *,
                    options: TelemetryChartOptions | None = None, title: str | None = None,
                    zoom: bool | alt.Parameter = True, site_tz: str | None = None,
                    width: int | str | None = None, height: int | None = None,
                    **option_kw) -> alt.LayerChart:
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
    options : TelemetryChartOptions, optional
        The level of the lines (``by``), the row and bin budgets (``max_rows``,
        ``max_points``) and the min-max ``band``; default: the defaults.
    title : str, optional
        Chart title.
    zoom : bool or altair.Parameter, default True
        Drag to pan, scroll to zoom the time axis (pass a shared interval parameter bound
        to the scales to zoom several charts together).  Clicking the legend highlights a
        series in any case.
    site_tz : str, optional
        Show times in this IANA time zone (the site's local time, daylight saving
        applied) instead of UTC; labels use a 24-hour clock.
    width, height : int, optional
        Size in pixels (theme default otherwise).
    **option_kw
        Fields of :class:`TelemetryChartOptions` replacing those of ``options``
        (``telemetry_chart(tel, by="fleet", max_points=300)``).

    Returns
    -------
    altair.LayerChart
    """
    opts = TelemetryChartOptions.from_kwargs(options, **option_kw)
    require_columns(telemetry, ["timestamp", "host", metric], "telemetry_chart")
    df = telemetry.loc[telemetry[metric].notna()]
    level, data, n_series = _binned_series(df, metric, opts, site_tz)
    tlabel = time_label(site_tz)
    ylab = axis_label(metric)
    legend_sel = alt.selection_point(name="pick", fields=["series"], bind="legend")
    x = time_x("timestamp", tlabel)
    color = alt.Color("series:N", title={"gpu": "GPU", "host": "host"}.get(level, ""),
                      legend=None if n_series == 1 else alt.Legend())
    base = alt.Chart(inline_table(data))
    line = base.mark_line().encode(
        x=x, y=alt.Y(f"{metric}:Q", title=ylab, scale=alt.Scale(zero=False)), color=color,
        opacity=alt.condition(legend_sel, alt.value(1.0), alt.value(0.15)),
        tooltip=_tooltips(metric, level, tlabel),
    ).properties(name=f"line_{metric}")
    if zoom is True:
        zoom = scales_zoom()
    line = line.add_params(legend_sel, *([zoom] if zoom is not False else []))
    layers = [line]
    if opts.band:
        area = base.mark_area().encode(
            x=x, y=alt.Y(f"{metric}_min:Q", title=ylab), y2=f"{metric}_max:Q", color=color,
            opacity=alt.condition(legend_sel, alt.value(0.22), alt.value(0.04)),
        )
        layers.insert(0, area)
    chart = alt.layer(*layers).properties(
        title=alt.Title(title or ylab.split(" [")[0], subtitle=_subtitle(df, level, data)))
    return sized(chart, width, height)


def _binned_series(df: pd.DataFrame, metric: str, opts: TelemetryChartOptions,
                   site_tz: str | None) -> tuple[str, pd.DataFrame, int]:
    """The level of the lines, the lines binned to the row and bin budgets (mean, min,
    max and samples per bin; times in the chart's zone), and the number of lines."""
    level = choose_level(df, opts.by, opts.max_rows, 50)
    frame = pd.DataFrame({"timestamp": df["timestamp"], "series": series_label(df, level),
                          metric: df[metric]})
    n_series = max(frame["series"].nunique(), 1)
    per_series = int(max(2, min(opts.max_points, opts.max_rows // n_series)))
    data = downsample(frame, metric, by=["series"], max_points=per_series)
    data["timestamp"] = chart_times(data["timestamp"], site_tz)
    return level, data, n_series


def _tooltips(metric: str, level: str, tlabel: str) -> list:
    unit = unit_of(metric)
    fmt = number_format(unit)
    return [alt.Tooltip("series:N", title=level),
            time_tooltip("timestamp", tlabel),
            alt.Tooltip(f"{metric}:Q", title=f"mean [{unit}]", format=fmt),
            alt.Tooltip(f"{metric}_min:Q", title=f"min [{unit}]", format=fmt),
            alt.Tooltip(f"{metric}_max:Q", title=f"max [{unit}]", format=fmt),
            alt.Tooltip("n_samples:Q", title="samples")]


def _subtitle(df: pd.DataFrame, level: str, data: pd.DataFrame) -> str:
    """What a line is (one GPU, a host's or the fleet's mean) and what the band spans."""
    node = is_node(df)
    unit_name = ("nodes" if node.all() else "GPUs") if len(df) else "GPUs"
    subtitle = {"gpu": "one line per " + unit_name[:-1],
                "host": f"mean of each host's {unit_name}",
                "fleet": f"mean of all {unit_name}"}[level]
    if node.any() and not node.all() and level != "gpu":
        subtitle += " (node-scope rows drawn apart)"
    if data["n_samples"].max() > 1:
        subtitle += "; band: min–max within each time bin"
    return subtitle


def telemetry_overview(telemetry: pd.DataFrame,
                       metrics: Sequence[str] = ("power_w", "clock_sm_mhz", "temp_gpu_c"), *,
                       by: str = "auto", max_rows: int = DEFAULT_MAX_ROWS,
                       title: str | None = None, site_tz: str | None = None,
                       width: int | None = None, height: int = 160) -> alt.VConcatChart:
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
    site_tz : str, optional
        Show times in the site's local time (see :func:`telemetry_chart`).
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
    zoom = scales_zoom("zoom_shared")
    panels = []
    for m in present:
        panels.append(telemetry_chart(telemetry, m, by=by, max_rows=max_rows, zoom=zoom,
                                      site_tz=site_tz, width=width, height=height))
    with warnings.catch_warnings():
        # the zoom and legend selections are shared on purpose: altair merges them
        warnings.filterwarnings("ignore", message="Automatically deduplicated selection")
        out = alt.vconcat(*panels).resolve_scale(x="shared", color="shared")
    prune_views(out)
    if title:
        out = out.properties(title=title)
    return out
