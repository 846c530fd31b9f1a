"""Mitigations: how much of the swings and ramps each mitigation removes, with its cost
(extra energy, throughput) in the tooltips."""

from __future__ import annotations

import pandas as pd

from ..exceptions import SchemaError, Violation
from .prepare import require_columns
from .render import alt, sized

__all__ = ["mitigation_chart"]


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
