"""Chart of a backtest: measured against forecast power through the recording's meters."""

from __future__ import annotations

import math

import pandas as pd

from ..exceptions import SchemaError, Violation
from .render import DEFAULT_MAX_ROWS, PALETTE, alt, sized

__all__ = ["backtest_chart"]


def backtest_chart(series: pd.DataFrame, *, title: str | None = None, every_s: float = 1.0,
                   width: int | None = None, height: int | None = None,
                   max_rows: int = DEFAULT_MAX_ROWS) -> alt.Chart:
    """Measured and forecast power (summed node meters) over the scored window.

    Parameters
    ----------
    series : pandas.DataFrame
        ``measured_w`` and ``forecast_w`` [W] on a time index (UTC), as in
        :attr:`powerlab.calibration.backtest.BacktestResult.series`.
    title : str, optional
    every_s : float, default 1
        Means over this interval are drawn [s]; widened to whole seconds when the
        series would need more than ``max_rows`` rows (the subtitle says so).
    width, height : int, optional
    max_rows : int, default DEFAULT_MAX_ROWS
        Rows embedded at most (two a mean), under altair's limit of 5,000.

    Returns
    -------
    altair.Chart
    """
    miss = [c for c in ("measured_w", "forecast_w") if c not in series.columns]
    if miss or not isinstance(series.index, pd.DatetimeIndex):
        raise SchemaError([Violation(c, "required by backtest_chart") for c in miss]
                          or [Violation("index", "must be a DatetimeIndex")])
    span_s = (series.index.max() - series.index.min()).total_seconds() if len(series) else 0
    need = math.ceil(2 * (span_s / every_s + 1) / max(max_rows, 2)) if span_s > 0 else 1
    wider = need > 1                      # a long run: wider means, not a refused chart
    every_s = math.ceil(every_s * need) if wider else every_s
    s = series.groupby(series.index.floor(f"{every_s}s")).mean()
    long = s.rename(columns={"measured_w": "measured", "forecast_w": "forecast"}) \
        .rename_axis("timestamp").reset_index().melt("timestamp", var_name="series",
                                                     value_name="power_w")
    long["timestamp"] = long["timestamp"].dt.tz_convert("UTC").dt.tz_localize(None)
    chart = alt.Chart(long).mark_line(strokeWidth=1).encode(
        x=alt.X("timestamp:T", title="time (UTC)"),
        y=alt.Y("power_w:Q", title="power [W]", scale=alt.Scale(zero=False),
                axis=alt.Axis(format="~s")),
        color=alt.Color("series:N", scale=alt.Scale(domain=["measured", "forecast"],
                                                    range=[PALETTE[0], PALETTE[1]])),
        tooltip=["timestamp:T", "series:N", alt.Tooltip("power_w:Q", format=",.0f")],
    ).properties(title=alt.Title(title or "Backtest: measured vs forecast",
                                 subtitle=f"{every_s:g}-s means of the summed meters"
                                 + (f" (widened to stay under {max_rows:,} rows)"
                                    if wider else "")))
    return sized(chart, width, height)
