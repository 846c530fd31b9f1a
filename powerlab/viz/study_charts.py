"""Charts of the large-load study package, where an interconnection engineer reads them.

:func:`study_charts` draws a :class:`~powerlab.interconnect.studypackage.StudyPackage`
as SVG text, by section (section name -> list of (title, SVG)), for
``StudyPackage.write(out, charts=...)`` (the page draws each under its section's heading
and writes it as ``charts/*.svg``; ``powerlab study-package`` does this unless
``--no-charts``).  :func:`study_chart_specs` gives the same charts as altair charts.

=================  ==============================================================
section            charts
=================  ==============================================================
``figures``        facility power over the horizon (median and 5-95 % band over
                   draws of time-bin means, the largest tick of any draw); the ramp
                   and step figures by exceedance probability
``energisation``   the energisation schedule's power
``spectrum``       the spectrum (median and largest over draws) with its material
                   and flagged lines, the requirement's oscillation bands shaded
``pmu``            raw and P-/M-class PMU power around the largest 1-s swing; the
                   filters' gain against the oscillation frequency
``flicker``        each voltage step of the short window (dV/V)
``equipment``      voltage and frequency ride-through of the equipment model
                   (load that ceases or trips per cell, as heat maps)
``ride_through``   load lost per residual voltage x sag duration (heat map)
=================  ==============================================================

Every chart embeds at most :data:`~powerlab.viz.render.DEFAULT_MAX_ROWS` rows (altair
refuses more than :data:`~powerlab.viz.render.MAX_ROWS`): the horizon comes in at most
400 bins (:mod:`powerlab.interconnect.horizonband`), the spectrum in at most 800
log-spaced bins, the PMU view as a window of at most 10 s at the reporting rate (thinned
where even that is over budget); each chart's subtitle says what it shows.  A section
whose table is absent (not built, measured data) has no chart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._options import choice
from ..exceptions import SchemaError, Violation
from .prepare import require_columns
from .render import DEFAULT_MAX_ROWS, PALETTE, alt, time_x, to_svg
from .spectrum_charts import spectrum_chart, spectrum_lines_chart

__all__ = ["energisation_chart", "horizon_chart", "pmu_chart", "pmu_gain_chart",
           "ramp_envelope_chart", "ride_through_heatmap", "study_chart_specs",
           "study_charts", "voltage_step_chart"]

_W = 560          # chart width on the page [px]
#: Longest PMU window drawn [s].
PMU_WINDOW_S = 10.0


def _fit(df: pd.DataFrame, budget: int = DEFAULT_MAX_ROWS) -> tuple[pd.DataFrame, int]:
    """``df`` thinned to at most ``budget`` rows (every k-th); returns it and k."""
    k = max(1, int(np.ceil(len(df) / budget)))
    return (df.iloc[::k] if k > 1 else df), k


def horizon_chart(band: pd.DataFrame, *, label: str = "", width: int = _W,
                  height: int = 200) -> alt.LayerChart:
    """Power over the horizon: the median over draws of each bin's mean, the 5-95 %
    band over draws, and the largest tick of any draw (the package's
    ``power_over_horizon`` table)."""
    cols = ["timestamp_utc", "bin_s", "draws", "power_megawatts_median",
            "power_megawatts_p05", "power_megawatts_p95", "power_megawatts_peak"]
    require_columns(band, cols, "horizon_chart")
    d, k = _fit(band[cols].copy())
    d["timestamp_utc"] = pd.to_datetime(d["timestamp_utc"], utc=True).dt.tz_localize(None)
    draws, bin_s = int(d["draws"].iloc[0]), float(d["bin_s"].median())
    x = time_x("timestamp_utc")
    y = alt.Y("power_megawatts_p05:Q", title="power [MW]", scale=alt.Scale(zero=False))
    area = alt.Chart(d).mark_area(color=PALETTE[0], opacity=0.25).encode(
        x=x, y=y, y2="power_megawatts_p95:Q")
    med = alt.Chart(d).mark_line(color=PALETTE[0]).encode(x=x, y="power_megawatts_median:Q")
    peak = alt.Chart(d).mark_line(color=PALETTE[3], strokeDash=[4, 3],
                                  strokeWidth=1).encode(x=x, y="power_megawatts_peak:Q")
    what = (f"{draws} draw{'s' if draws != 1 else ''}: median (line) and 5-95 % band of "
            f"{bin_s:g}-s bin means; dashed: largest tick of any draw")
    if k > 1:
        what += f"; one bin in {k} drawn"
    sub = [what] + ([label] if label else [])
    where = "IT" if band.attrs.get("boundary") == "it" else "Facility"
    return alt.layer(area, med, peak).properties(
        width=width, height=height,
        title=alt.Title(f"{where} power over the horizon", subtitle=sub))


_PROB_ORDER = ["p = 0.5", "p = 0.1", "p = 0.05", "p = 0.01", "largest draw"]


def ramp_envelope_chart(envelope: pd.DataFrame, units: dict | None = None, *,
                        width: int = 150, height: int = 130) -> alt.FacetChart:
    """The peak, ramp and step figures against their exceedance probability (the
    package's ``ramp_envelope``: one row per figure, ``exceed_<p>`` and ``largest``
    columns), one panel per unit."""
    env = envelope.copy()
    env.index = env.index.astype(str)
    rows = []
    for fig, r in env.iterrows():
        for c, v in r.items():
            if pd.notna(v):
                p = "largest draw" if c == "largest" else f"p = {c.split('_', 1)[1]}"
                rows.append((fig, p, float(v)))
    if not rows:
        raise SchemaError([Violation("ramp_envelope", "no finite figure to draw")])
    d = pd.DataFrame(rows, columns=["figure", "probability", "value"])
    d["unit"] = d["figure"].map(lambda f: (units or {}).get(f) or _unit(f))
    d["figure"] = d["figure"].map(_words)
    order = [p for p in _PROB_ORDER if p in set(d["probability"])] + sorted(
        set(d["probability"]) - set(_PROB_ORDER))
    base = alt.Chart(d).encode(
        x=alt.X("probability:O", sort=order, title="exceeded with probability",
                axis=alt.Axis(labelAngle=0)),
        y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        color=alt.Color("figure:N", title="figure", legend=alt.Legend(orient="bottom",
                                                                       columns=2)))
    layer = alt.layer(base.mark_line(), base.mark_point(filled=True))
    return layer.properties(width=width, height=height).facet(
        column=alt.Column("unit:N", title=None)).resolve_scale(y="independent").properties(
        title=alt.Title("Peak, ramps and steps by exceedance probability",
                        subtitle="value exceeded in the stated share of draws "
                                 "(empirical quantile), and the largest draw"))


def _unit(fig: str) -> str:
    return ("MW/s" if "_per_s" in fig else "MW/min" if "_per_min" in fig else "MW")


def _words(fig: str) -> str:
    for a, b in (("_megawatts_per_s_1s_means", " (1-s means)"),
                 ("_megawatts_per_min_1min_means", " (1-min means)"),
                 ("_megawatts_within_1s", " within 1 s"), ("_megawatts", "")):
        fig = fig.replace(a, b)
    return fig.replace("_", " ")


def energisation_chart(schedule: pd.DataFrame, *, width: int = _W,
                       height: int = 160) -> alt.Chart:
    """Power after each block of the energisation schedule (a step line)."""
    require_columns(schedule, ["time_s", "power_megawatts", "block"], "energisation_chart")
    d, k = _fit(schedule[["time_s", "power_megawatts", "block"]])
    sub = "power after each block is switched in" + (f"; one block in {k} drawn" if k > 1 else "")
    return alt.Chart(d).mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("time_s:Q", title="time from the first block [s]"),
        y=alt.Y("power_megawatts:Q", title="power [MW]")).properties(
        width=width, height=height,
        title=alt.Title("Energisation schedule", subtitle=sub))


def _spectrum(pkg) -> alt.LayerChart:
    """The spectrum section's chart: median and largest PSD over draws, the lines and the
    spec's oscillation bands."""
    sp = pkg.tables["spectrum"]
    val = [c for c in sp.columns if c.startswith("psd_")]
    long = sp.melt(id_vars="frequency_hz", value_vars=val, var_name="statistic",
                   value_name="psd")
    long["statistic"] = long["statistic"].str.rsplit("_", n=1).str[-1] + " over draws"
    bands = [(r.band_hz[0], r.band_hz[1], r.name) for r in pkg.spec.requirements
             if getattr(r, "band_hz", None)]
    bdf = (pd.DataFrame(bands, columns=["low_hz", "high_hz", "label"]) if bands
           else ((0.1, 2.0), (2.0, 20.0)))
    lines = pkg.tables.get("lines")
    if isinstance(lines, pd.DataFrame) and {"material", "flagged"} <= set(lines.columns):
        lines = lines[lines["material"].astype(bool) | lines["flagged"].astype(bool)]
    kw = dict(series="statistic", bands=bdf, value_title="PSD [MW²/Hz]", max_points=800,
              width=_W, height=220)
    if isinstance(lines, pd.DataFrame) and len(lines):
        return spectrum_lines_chart(long, lines, title="Oscillation spectrum of the short "
                                    "window (rules: material or flagged lines)", **kw)
    return spectrum_chart(long, title="Oscillation spectrum of the short window", **kw)


def pmu_chart(pmu: pd.DataFrame, *, window_s: float = PMU_WINDOW_S, width: int = _W,
              height: int = 200) -> alt.Chart:
    """Raw power and what P- and M-class PMUs report, over at most ``window_s`` around
    the largest change of the raw power within 1 s (the package's ``pmu`` table)."""
    cols = {"power_megawatts_raw": "raw", "power_megawatts_pmu_p_class": "P class",
            "power_megawatts_pmu_m_class": "M class"}
    require_columns(pmu, ["time_s", *cols], "pmu_chart")
    t = pmu["time_s"].to_numpy(float)
    raw = pmu["power_megawatts_raw"].to_numpy(float)
    fps = 1.0 / float(np.median(np.diff(t))) if len(t) > 1 else 1.0
    n1 = max(1, int(round(fps)))
    swing = (pd.Series(raw).rolling(n1 + 1, min_periods=1).max()
             - pd.Series(raw).rolling(n1 + 1, min_periods=1).min()).to_numpy()
    centre = t[int(np.nanargmax(swing))] if len(t) and np.isfinite(swing).any() else 0.0
    lo = max(t[0], centre - window_s / 2) if len(t) else 0.0
    sel = pmu[(t >= lo) & (t <= lo + window_s)]
    long = sel.melt(id_vars="time_s", value_vars=list(cols), var_name="series",
                    value_name="power_megawatts")
    long["series"] = long["series"].map(cols)
    long, k = _fit(long.iloc[np.lexsort((long["time_s"], long["series"]))])
    sub = (f"{sel['time_s'].min():.1f}-{sel['time_s'].max():.1f} s of the short window, "
           f"around the largest 1-s change of the raw power, at {fps:.3g} frames/s"
           + (f"; one frame in {k} drawn" if k > 1 else ""))
    return alt.Chart(long).mark_line().encode(
        x=alt.X("time_s:Q", title="time in the short window [s]",
                scale=alt.Scale(zero=False)),
        y=alt.Y("power_megawatts:Q", title="power [MW]", scale=alt.Scale(zero=False)),
        color=alt.Color("series:N", title=None, sort=list(cols.values())),
        strokeDash=alt.StrokeDash("series:N", sort=list(cols.values()), legend=None)
    ).properties(width=width, height=height,
                 title=alt.Title("What a PMU reports", subtitle=sub))


def pmu_gain_chart(gains: pd.DataFrame, *, width: int = _W, height: int = 160) -> alt.Chart:
    """The P- and M-class filters' gain on an oscillation of each frequency (the
    package's ``pmu_gains``)."""
    require_columns(gains, ["frequency_hz", "gain_p_class", "gain_m_class"],
                    "pmu_gain_chart")
    d = gains.melt(id_vars="frequency_hz", value_vars=["gain_p_class", "gain_m_class"],
                   var_name="class", value_name="gain")
    d["class"] = d["class"].map({"gain_p_class": "P class", "gain_m_class": "M class"})
    return alt.Chart(d).mark_line(point=True).encode(
        x=alt.X("frequency_hz:Q", title="oscillation frequency [Hz]",
                scale=alt.Scale(type="log")),
        y=alt.Y("gain:Q", title="share passed [-]"), color=alt.Color("class:N", title=None)
    ).properties(width=width, height=height, title=alt.Title(
        "PMU filters' gain", subtitle="share of an oscillation's amplitude that each "
                                      "reference filter reports"))


def voltage_step_chart(steps: pd.DataFrame, *, width: int = _W,
                       height: int = 160) -> alt.Chart:
    """Each voltage step of the short window, dV/V against its start, per draw (the
    flicker section's ``voltage_steps``)."""
    require_columns(steps, ["start_s", "duration_s", "dv_pct", "draw"], "voltage_step_chart")
    d, k = _fit(steps[["start_s", "duration_s", "dv_pct", "draw"]])
    sub = "relative voltage change of each step at the point of interconnection" + (
        f"; one step in {k} drawn" if k > 1 else "")
    return alt.Chart(d).mark_bar(width=3).encode(
        x=alt.X("start_s:Q", title="start in the short window [s]"),
        y=alt.Y("dv_pct:Q", title="dV/V [%]", stack=None), color=alt.Color("draw:N", title="draw"),
        tooltip=["start_s:Q", "duration_s:Q", "dv_pct:Q", "draw:N"]).properties(
        width=width, height=height, title=alt.Title("Voltage steps", subtitle=sub))


def ride_through_heatmap(table: pd.DataFrame, value, *, x: str = "duration_s",
                         y: str = "residual_voltage_pu", title: str = "Load lost",
                         subtitle: str = "", combine: str = "sum", width: int = 420,
                         height: int = 200) -> alt.LayerChart:
    """A ride-through table as a heat map: ``y`` x ``x`` -> ``value`` [MW] (a column, or
    a list of columns combined by ``combine``, ``"sum"`` or ``"max"``), the value written
    in each cell."""
    vals = [value] if isinstance(value, str) else list(value)
    require_columns(table, [x, y, *vals], "ride_through_heatmap")
    d = table[[x, y]].copy()
    v = table[vals].to_numpy(float)
    d["lost_megawatts"] = v.max(axis=1) if choice(combine, "combine", ("sum", "max")) \
        == "max" else v.sum(axis=1)
    d = d.groupby([x, y], as_index=False)["lost_megawatts"].max()
    enc = {"x": alt.X(f"{x}:O", title=x.replace("_s", " [s]").replace("_", " "),
                      axis=alt.Axis(labelAngle=0)),
           "y": alt.Y(f"{y}:O", title=y.replace("_pu", " [pu]").replace("_hz", " [Hz]")
                      .replace("_", " "), sort="descending")}
    top = float(d["lost_megawatts"].max()) if len(d) else 0.0
    rect = alt.Chart(d).mark_rect(stroke="white").encode(
        **enc, color=alt.Color("lost_megawatts:Q", title="MW",
                               scale=alt.Scale(scheme="oranges", domainMin=0)))
    text = alt.Chart(d).mark_text(fontSize=9).encode(
        **enc, text=alt.Text("lost_megawatts:Q", format=".3~g"),
        color=alt.condition(alt.datum.lost_megawatts > 0.6 * top, alt.value("white"),
                            alt.value("black")))
    return alt.layer(rect, text).properties(width=width, height=height,
                                            title=alt.Title(title, subtitle=subtitle))


def study_chart_specs(pkg) -> dict:
    """The package's charts as altair charts: section name -> list of (title, chart);
    a section whose table is absent has none."""
    t = pkg.tables
    out: dict = {}

    def add(section, title, make, *keys):
        if all(isinstance(t.get(k), pd.DataFrame) and len(t[k]) for k in keys):
            out.setdefault(section, []).append((title, make()))

    units = dict(zip(pkg.figures["figure"], pkg.figures["unit"]))
    add("figures", "Power over the horizon",
        lambda: horizon_chart(t["power_over_horizon"], label=f"source: {pkg.source}"),
        "power_over_horizon")
    env = pkg.ramp_envelope
    if len(env) and env.notna().any().any():
        out.setdefault("figures", []).append((
            "Peak, ramps and steps by exceedance probability",
            ramp_envelope_chart(env, units)))
    add("energisation", "Energisation schedule",
        lambda: energisation_chart(t["energisation"]), "energisation")
    add("spectrum", "Oscillation spectrum with its lines", lambda: _spectrum(pkg), "spectrum")
    add("pmu", "What a PMU reports", lambda: pmu_chart(t["pmu"]), "pmu")
    add("pmu", "PMU filters' gain", lambda: pmu_gain_chart(t["pmu_gains"]), "pmu_gains")
    add("flicker", "Voltage steps", lambda: voltage_step_chart(t["voltage_steps"]),
        "voltage_steps")
    add("equipment", "Voltage ride-through of the equipment model", lambda: (
        ride_through_heatmap(t["voltage_ride_through"],
                             ["ceased_megawatts", "tripped_megawatts"],
                             title="Voltage ride-through: load that ceases or trips",
                             subtitle="per residual voltage and duration, equipment model")),
        "voltage_ride_through")
    add("equipment", "Frequency ride-through of the equipment model", lambda: (
        ride_through_heatmap(t["frequency_ride_through"],
                             ["ceased_megawatts", "tripped_megawatts"], y="frequency_hz",
                             title="Frequency ride-through: load that ceases or trips",
                             subtitle="per frequency and duration, equipment model")),
        "frequency_ride_through")
    add("ride_through", "Load lost by residual voltage and sag duration", lambda: (
        ride_through_heatmap(t["ride_through"], ["load_lost_megawatts_during_sag_max",
                                                 "load_lost_megawatts_after_sag_max"],
                             combine="max", title="Load lost during or just after the sag",
                             subtitle="the larger of the two, largest over draws "
                                      "(disturbance model)")),
        "ride_through")
    return out


def study_charts(pkg) -> dict:
    """The package's charts as SVG text (vl-convert): section name -> list of (title,
    SVG), for ``StudyPackage.write(out, charts=...)``."""
    return {name: [(title, to_svg(chart)) for title, chart in items]
            for name, items in study_chart_specs(pkg).items()}
