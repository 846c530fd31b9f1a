"""The study package on paper: the text summary, the printable HTML page a utility
engineer reads, and the files of :meth:`StudyPackage.write
<powerlab.interconnect.studypackage.StudyPackage.write>`.

The page is one self-contained HTML file with print CSS (A4/Letter, tables kept whole
across pages); every string that comes from the inputs (scenario and spec names, sources,
notes) is HTML-escaped.  It shows tables only; charts belong to :mod:`powerlab.viz`.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .._summary import Summary
from ..exceptions import PowerlabError

__all__ = ["StudySummary", "package_html", "write_package"]

_CSS = """
body{font-family:Helvetica,Arial,sans-serif;font-size:10pt;color:#111;max-width:60em;
margin:1.5em auto;line-height:1.3}
h1{font-size:15pt;margin:0 0 .2em}h2{font-size:11.5pt;margin:1.2em 0 .3em;
border-bottom:1px solid #999}
table{border-collapse:collapse;margin:.3em 0 .6em;font-size:8.5pt}
th,td{border:1px solid #bbb;padding:2px 5px;vertical-align:top}
th{background:#eee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.meta{color:#444}.note{color:#633}.flag{font-weight:bold;color:#a00}
@page{size:auto;margin:14mm}
@media print{body{margin:0;max-width:none;font-size:9pt}table{page-break-inside:avoid}
h2{page-break-after:avoid}a{color:inherit;text-decoration:none}}
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _num(v, fmt="{:.3g}") -> str:
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, float, np.floating, np.integer)):
        return "n/a" if not math.isfinite(float(v)) else fmt.format(float(v))
    return _e(v)


def _table(df: pd.DataFrame, fmt: dict | None = None, index: bool = False) -> str:
    fmt = fmt or {}
    d = df.reset_index() if index else df
    head = "".join(f"<th>{_e(c).replace('_', '_<wbr>')}</th>" for c in d.columns)
    body = []
    for _, row in d.iterrows():
        cells = []
        for c in d.columns:
            v = row[c]
            num = isinstance(v, (int, float, np.floating, np.integer)) and \
                not isinstance(v, (bool, np.bool_))
            cells.append(f"<td class='n'>{_num(v, fmt.get(c, '{:.4g}'))}</td>" if num
                         else f"<td>{_num(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _key_lines(pkg) -> list[str]:
    f = pkg.figures
    env = pkg.ramp_envelope
    out = [f"Source: {pkg.source}; spec {pkg.spec.name!r}; boundary {pkg.boundary}."]
    for col in env.index:
        unit = f.loc[f["figure"] == col, "unit"].iloc[0]
        parts = ", ".join(f"{c.replace('exceed_', 'p=')}: {v:.3g}"
                          for c, v in env.loc[col].items() if pd.notna(v))
        out.append(f"  {col} [{unit}]  {parts}")
    e = pkg.energisation
    out.append(f"Energisation: {len(e)} blocks to {e['power_megawatts'].iloc[-1]:.3g} MW, "
               f"{e.attrs['block_spacing_s']:g} s apart, "
               f"{e['time_s'].iloc[-1]:g} s in all ({e.attrs['binding']}).")
    if len(pkg.lines):
        top = pkg.lines.head(5)
        out.append("Strongest lines (0.1-30 Hz): " + ", ".join(
            f"{r.frequency_hz:.3g} Hz {r.amplitude_megawatts:.3g} MW"
            for r in top.itertuples()))
    near = pkg.lines[pkg.lines["near_observed_hz"] != ""] if len(pkg.lines) else pkg.lines
    out.append("Lines near observed utility oscillations (14.7, 23 Hz): " + (
        ", ".join(f"{r.frequency_hz:.3g} Hz {r.amplitude_megawatts:.3g} MW"
                  for r in near.itertuples()) if len(near) else "none above 1 kW"))
    pm = pkg.pmu_figures.set_index("figure")["value"]
    out.append("Largest 1-s swing, raw / P-class PMU / M-class PMU [MW]: " + " / ".join(
        f"{v:.3g}" for v in pm.to_numpy()))
    if pkg.ride_through is not None:
        rt = pkg.ride_through
        lost = rt["load_lost_megawatts_during_sag_max"].combine(
            rt["load_lost_megawatts_after_sag_max"], max)
        out.append(f"Ride-through: {int((lost > 0).sum())} of {len(rt)} sags lose load "
                   f"(up to {lost.max():.3g} MW); {int(rt['itic_ride_through'].sum())} lie "
                   "in the ITIC no-interruption region and lose none.")
    out += [f"Note: {n}" for n in pkg.notes]
    return out


class StudySummary(Summary):
    """Text summary of a :class:`~powerlab.interconnect.studypackage.StudyPackage`."""

    def __init__(self, pkg):
        super().__init__("Large-load study package")
        self.pkg = pkg
        self.add_text(_key_lines(pkg), pre=True)


def package_html(pkg, files: dict | None = None) -> str:
    """The printable summary page (one self-contained HTML document)."""
    from .. import __version__

    spec = pkg.spec
    parts = [(f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>Large-load study package: {_e(pkg.source)}</title>"
             f"<style>{_CSS}</style></head><body>"),
             "<h1>Large-load study package</h1>",
             (f"<p class='meta'>{_e(pkg.source)}<br>Requirement spec: {_e(spec.name)} "
             f"({_e(spec.description)}); power at the {_e(pkg.boundary)} boundary"
             f"{' (point of interconnection)' if pkg.boundary == 'facility' else ''}.<br>"
             f"powerlab {_e(__version__)}; generated "
             f"{_e(pd.Timestamp.now(tz='UTC').strftime('%Y-%m-%d %H:%M UTC'))}.</p>")]
    parts.append("<h2>1. Peak, ramps and steps by exceedance probability</h2>"
                 f"<p>Over {pkg.draws} Monte Carlo draw(s): the value exceeded with the "
                 "column's probability (empirical quantile over draws) and the largest "
                 "draw.</p>")
    parts.append(_table(pkg.ramp_envelope.round(4), index=True))
    defs = pkg.figures.drop_duplicates("figure")[["figure", "unit", "definition", "source"]]
    parts.append(_table(defs))
    e = pkg.energisation
    parts.append("<h2>2. Energisation schedule</h2>"
                 f"<p>{len(e)} blocks, {e.attrs['block_spacing_s']:g} s apart, to "
                 f"{e['power_megawatts'].iloc[-1]:.4g} MW (the largest peak over draws) in "
                 f"{e['time_s'].iloc[-1]:g} s; {_e(e.attrs['binding'])}. Checked by "
                 "recomputing the spec's ramps on the staircase.</p>")
    parts.append(_table(e if len(e) <= 30 else pd.concat([e.head(15), e.tail(15)])))
    parts.append("<h2>3. Oscillation: narrow-band lines 0.1-30 Hz</h2>"
                 f"<p>Welch spectrum of a {pkg.short_trace.duration_s:g}-s window at a "
                 f"{pkg.short_trace.tick_s:g}-s tick (starting "
                 f"{_e(pd.Timestamp(pkg.short_trace.start_utc).isoformat())}), median over "
                 "draws; a line stands 10 dB above the median density within 1 Hz; its "
                 "amplitude is that of the equivalent sinusoid. Lines within 0.5 Hz of "
                 "14.7 Hz or 23 Hz (frequencies at which utilities have observed "
                 "data-center oscillations) are flagged. The PMU columns multiply by the "
                 "reference filters' gain.</p>")
    ln = pkg.lines
    if len(ln):
        flagged = ln["near_observed_hz"] != ""
        ln = ln[(ln.index < 15) | flagged]
        parts.append(f"<p>The 15 strongest of {len(pkg.lines)} lines and every flagged one "
                     "(all in spectrum_lines.csv).</p>")
    parts.append(_table(ln) if len(ln) else "<p>No line above 1 kW.</p>")
    near = pkg.lines[pkg.lines["near_observed_hz"] != ""] if len(pkg.lines) else pkg.lines
    parts.append(f"<p class='{'flag' if len(near) else 'meta'}'>Lines near 14.7 / 23 Hz: "
                 + (", ".join(f"{r.frequency_hz:.3g} Hz ({r.amplitude_megawatts:.3g} MW)"
                              for r in near.itertuples()) if len(near) else "none")
                 + "</p>")
    parts.append("<h2>4. What a PMU reports</h2><p>IEEE C37.118.1 reference P-class and "
                 "M-class phasor estimators applied to the site's current (voltage at "
                 "nominal, constant power factor), next to the raw forecast.</p>")
    parts.append(_table(pkg.pmu_figures[["figure", "value", "unit", "statistic",
                                         "definition"]]))
    if pkg.pmu_gains is not None:
        parts.append("<p>Share of a power oscillation at each frequency that the reference "
                     "filters pass (magnitude response, C37.118.1 Annex C):</p>")
        parts.append(_table(pkg.pmu_gains, fmt={c: "{:.3f}" for c in pkg.pmu_gains.columns
                                                if c != "frequency_hz"}))
    if pkg.ride_through is not None:
        rt = pkg.ride_through
        a = rt.attrs
        parts.append("<h2>5. Ride-through</h2>"
                     f"<p>Sags at {_e(pd.Timestamp(a['at_utc']).isoformat())}, each "
                     "forecast with and without the sag on the same draws; load lost = "
                     "power without minus power with the sag. Assumptions: supplies trip "
                     f"(fraction {a['trip_fraction_outside_itic']:g}) outside the ITIC "
                     "no-interruption region, none inside; UPS carries "
                     f"{a['ups_fraction']:g} of the untripped load; tripped nodes are "
                     f"dark {a['outage_s']:g} s. 'After' covers {a['after_s']:g} s after "
                     "the sag; recovery: 1-min means back within 5 % of the loss.</p>")
        lost = rt.assign(load_lost=np.maximum(rt["load_lost_megawatts_during_sag_max"],
                                              rt["load_lost_megawatts_after_sag_max"]))
        for what, col, fmt in (("Load lost [MW], largest over draws of during or 'after'",
                                "load_lost", "{:.3g}"),
                               ("Recovery time [s], median over draws", "recovery_s_median",
                                "{:.4g}")):
            m = lost.pivot(index="residual_voltage_pu", columns="duration_s", values=col)
            m.columns = [f"{c:g} s" for c in m.columns]
            m.index = [f"{v:g} pu" for v in m.index]
            m = m.rename_axis("residual voltage")
            parts.append(f"<p><b>{_e(what)}</b> (rows: residual voltage; columns: sag "
                         f"duration; {int(rt['draws'].iloc[0])} draws; full table in "
                         "ride_through.csv)</p>")
            parts.append(_table(m, fmt={c: fmt for c in m.columns}, index=True))
    if files:
        parts.append("<h2>Files</h2><ul>" + "".join(
            f"<li>{_e(Path(p).name)}: {_e(what)}</li>" for what, p in files.items()
            if what != "page") + "</ul>")
    notes = list(pkg.notes) + [
        "Requirement numbers marked illustrative in the spec are not published limits.",
        "Playback files are draw 0, one trajectory, never a quantile across draws."]
    parts.append("<h2>Notes and assumptions</h2><ul>" + "".join(
        f"<li class='note'>{_e(n)}</li>" for n in notes) + "</ul>")
    src = "".join(f"<li>{_e(r.name)}: {_e(r.source)}"
                  f"{' (illustrative)' if r.illustrative else ''}</li>"
                  for r in spec.requirements)
    parts.append(f"<h2>Requirement sources</h2><ul>{src}</ul></body></html>")
    return "".join(parts)


def write_package(pkg, out) -> dict:
    """Write every table, the playback files and the page into folder ``out``."""
    from ..telemetry.store import atomic_write_bytes
    from .comtrade import write_trace_comtrade
    from .gridstudy import write_grid_playback

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise PowerlabError(f"{out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PowerlabError(f"cannot create {out}: {exc.strerror or exc}") from None

    def text(name, s):
        return atomic_write_bytes(out / name, lambda tmp: Path(tmp).write_text(s, "utf-8"))

    def csv(name, df, index=False):
        return text(name, df.to_csv(index=index, float_format="%.6g", lineterminator="\n"))

    files = {
        "figures with definitions, sources, exceedance probabilities":
            csv("figures.csv", pkg.summary_frame()),
        "ramp envelope by exceedance probability": csv("ramp_envelope.csv",
                                                       pkg.ramp_envelope, index=True),
        "per-draw figures": csv("per_draw.csv", pkg.per_draw, index=True),
        "energisation schedule": csv("energisation_schedule.csv", pkg.energisation),
        "spectrum (short window)": csv("spectrum.csv", pkg.spectrum),
        "narrow-band lines": csv("spectrum_lines.csv", pkg.lines),
        "PMU view (draw 0, short window)": csv("pmu.csv", pkg.pmu.assign(
            timestamp_utc=pkg.pmu["timestamp_utc"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
            if "timestamp_utc" in pkg.pmu else pkg.pmu),
    }
    if pkg.pmu_gains is not None:
        files["PMU filter gains"] = csv("pmu_filter_gain.csv", pkg.pmu_gains)
    if pkg.ride_through is not None:
        files["ride-through table"] = csv("ride_through.csv", pkg.ride_through)
    st = pkg.short_trace
    for fmt in ("pscad", "powerfactory"):
        files[f"{fmt} playback, short window at {st.tick_s:g} s"] = write_grid_playback(
            st, out / f"playback_short_{fmt}.txt", fmt, step_s=st.tick_s, boundary=pkg.boundary)
        tr = pkg.trace
        step = 1.0 if tr.duration_s >= 2.0 else tr.tick_s
        files[f"{fmt} playback, whole horizon, {step:g}-s means"] = write_grid_playback(
            tr, out / f"playback_horizon_{fmt}.txt", fmt, step_s=step, boundary=pkg.boundary)
    ct = write_trace_comtrade(st, out / "playback_short_comtrade", rev_year=1999)
    files[f"COMTRADE (C37.111-1999 ASCII) configuration, short window at {st.tick_s:g} s"] \
        = ct["cfg"]
    files["COMTRADE data"] = ct["dat"]
    files["text summary"] = text("summary.txt", str(pkg.summary()) + "\n")
    files["page"] = out / "study_package.html"
    text("study_package.html", package_html(pkg, files))
    return files
