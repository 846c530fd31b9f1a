"""Charts of flexibility: the offer (MW sheddable against response time, per hold
duration), the power-throughput curve with its band, and a curtailment plan's power
against its caps.  They draw the tidy frames of :mod:`powerlab.flex` (no computation)."""

from __future__ import annotations

import pandas as pd

from .prepare import require_columns
from .render import alt, sized, time_tooltip, time_x

__all__ = ["flex_curve_chart", "flex_offer_chart", "flex_plan_chart"]


def flex_offer_chart(frame: pd.DataFrame, *, title: str | None = None,
                     width: int | None = None, height: int | None = None) -> alt.Chart:
    """MW sheddable within each response time, one line per hold duration.

    Parameters
    ----------
    frame : pandas.DataFrame
        :meth:`powerlab.flex.offer.FlexOffer.response_frame`: ``response_s,
        duration_s, shed_megawatts, shed_pct_of_it, lever, step_rate_loss_pct``.

    Returns
    -------
    altair.Chart
    """
    require_columns(frame, ["response_s", "duration_s", "shed_megawatts", "shed_pct_of_it",
                            "lever", "step_rate_loss_pct"], "flex_offer_chart")
    df = frame.copy()
    df["hold"] = (df["duration_s"] / 3600.0).map(lambda h: f"held {h:g} h")
    chart = alt.Chart(df).mark_line(point=True, interpolate="step-after").encode(
        x=alt.X("response_s:Q", scale=alt.Scale(type="log"), title="response time [s]"),
        y=alt.Y("shed_megawatts:Q", title="sheddable power [MW]"),
        color=alt.Color("hold:N", title=None, sort=None),
        tooltip=[alt.Tooltip("response_s:Q", title="response [s]"),
                 alt.Tooltip("hold:N"),
                 alt.Tooltip("shed_megawatts:Q", title="shed [MW]", format=".2f"),
                 alt.Tooltip("shed_pct_of_it:Q", title="of IT power [%]", format=".1f"),
                 alt.Tooltip("lever:N", title="cheapest lever"),
                 alt.Tooltip("step_rate_loss_pct:Q", title="step rate loss [%]",
                             format=".1f")],
    ).properties(title=alt.Title(title or "Flexibility offer",
                                 subtitle="most MW sheddable within a response time, "
                                          "per hold duration"))
    return sized(chart, width, height)


def flex_curve_chart(frame: pd.DataFrame, *, title: str | None = None,
                     width: int | None = None, height: int | None = None) -> alt.Chart:
    """Step-rate loss against the GPU power limit, with its band.

    Parameters
    ----------
    frame : pandas.DataFrame
        :meth:`powerlab.levers.curve.PowerThroughputCurve.summary_frame`:
        ``power_limit_w, step_rate_loss_pct, step_rate_loss_pct_lower,
        step_rate_loss_pct_upper``.
    """
    require_columns(frame, ["power_limit_w", "step_rate_loss_pct",
                            "step_rate_loss_pct_lower", "step_rate_loss_pct_upper"],
                    "flex_curve_chart")
    base = alt.Chart(frame).encode(x=alt.X("power_limit_w:Q", title="GPU power limit [W]"))
    band = base.mark_area().encode(y=alt.Y("step_rate_loss_pct_lower:Q",
                                           title="step rate loss [%]"),
                                   y2="step_rate_loss_pct_upper:Q")
    line = base.mark_line(point=True).encode(
        y="step_rate_loss_pct:Q",
        tooltip=[alt.Tooltip("power_limit_w:Q", title="limit [W]"),
                 alt.Tooltip("step_rate_loss_pct:Q", title="loss [%]", format=".2f")])
    chart = (band + line).properties(title=alt.Title(
        title or "Power-throughput curve", subtitle="step rate loss with its 90 % band"))
    return sized(chart, width, height)


def flex_plan_chart(timeline: pd.DataFrame, *, title: str | None = None,
                    width: int | None = None, height: int | None = None) -> alt.Chart:
    """A curtailment plan's power against its caps.

    Parameters
    ----------
    timeline : pandas.DataFrame
        :meth:`powerlab.flex.plan.CurtailmentPlan.timeline`: ``timestamp, series,
        power_megawatts`` (keep it under a few thousand rows per series).
    """
    require_columns(timeline, ["timestamp", "series", "power_megawatts"], "flex_plan_chart")
    df = timeline[pd.notna(timeline["power_megawatts"])
                  & (timeline["power_megawatts"] < 1e9)].copy()
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True).dt.tz_localize(None)
    chart = alt.Chart(df).mark_line().encode(
        x=time_x("timestamp"),
        y=alt.Y("power_megawatts:Q", title="power [MW]"),
        color=alt.Color("series:N", title=None),
        tooltip=[time_tooltip("timestamp"), alt.Tooltip("series:N"),
                 alt.Tooltip("power_megawatts:Q", title="MW", format=".2f")],
    ).properties(title=alt.Title(title or "Curtailment plan",
                                 subtitle="baseline and planned power (draws) and the caps"))
    return sized(chart, width, height)
