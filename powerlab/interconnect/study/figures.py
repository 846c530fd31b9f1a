"""Study-package section 1: peak, ramps and steps by exceedance probability.

Every draw's peak power, ramps over 1-s and 1-min means and largest step within 1 s
(:data:`PER_DRAW_COLUMNS`), and over the draws the value exceeded with each stated
probability.  With ``D`` draws, the value "exceeded with probability p" is the empirical
``1 - p`` quantile of the per-draw values (linear interpolation between order statistics,
:func:`numpy.quantile`), reported only where ``p D >= 1`` (with 20 draws, p below 0.05 is
not resolved); the largest draw is always reported too (``exceed_probability`` 0,
"largest of D draws").  A measured trace is one draw: only its value is reported.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...exceptions import AnalysisError
from ...limits import loadmetrics as lm
from ..powertrace import PowerTrace
from .html import table
from .resolution import data_label, unresolved_reason
from .section import FIGURE_COLUMNS, PackageFolder, Section, Study, register

__all__ = ["PER_DRAW_COLUMNS", "WINDOW_S", "Figures", "envelope", "ramp_envelope"]

#: Per-draw figures: column -> (unit, definition, source).
PER_DRAW_COLUMNS = {
    "peak_power_megawatts": (
        "MW", "largest value of the power at one tick over the horizon",
        "largest sample (one value per draw)"),
    "ramp_up_megawatts_per_s_1s_means": (
        "MW/s", "largest rise between adjacent 1-s means, every alignment, per second",
        ("form: Choukse et al. 2025 (arXiv:2508.14318), ramp rate in MW/s; "
        "powerlab.limits.ramps.ramp_of_means")),
    "ramp_down_megawatts_per_s_1s_means": (
        "MW/s", "largest fall between adjacent 1-s means, every alignment, per second",
        ("form: Choukse et al. 2025 (arXiv:2508.14318), ramp rate in MW/s; "
        "powerlab.limits.ramps.ramp_of_means")),
    "ramp_up_megawatts_per_min_1min_means": (
        "MW/min", "largest rise between adjacent 1-min means, every alignment, per minute",
        ("form: 1-min ramp limits of large-load requirements (e.g. ERCOT studies); "
        "powerlab.limits.ramps.ramp_of_means")),
    "ramp_down_megawatts_per_min_1min_means": (
        "MW/min", "largest fall between adjacent 1-min means, every alignment, per minute",
        ("form: 1-min ramp limits of large-load requirements (e.g. ERCOT studies); "
        "powerlab.limits.ramps.ramp_of_means")),
    "largest_step_megawatts_within_1s": (
        "MW", "largest change between any two samples at most 1 s apart (up or down)",
        "powerlab.limits.loadmetrics.largest_step"),
}


#: The window of each window figure [s].
WINDOW_S = {"ramp_up_megawatts_per_s_1s_means": 1.0,
            "ramp_down_megawatts_per_s_1s_means": 1.0,
            "ramp_up_megawatts_per_min_1min_means": 60.0,
            "ramp_down_megawatts_per_min_1min_means": 60.0,
            "largest_step_megawatts_within_1s": 1.0}


def per_draw_figures(dp: PowerTrace, boundary: str) -> dict:
    """The :data:`PER_DRAW_COLUMNS` of one draw (NaN where the series is too short, or
    read too seldom to resolve the figure's window)."""
    x = dp.power_w(boundary)
    tick = dp.tick_s
    out = {"peak_power_megawatts": float(x.max()) / 1e6}
    for name, d, scale in (("ramp_up_megawatts_per_s_1s_means", "up", 1.0),
                           ("ramp_down_megawatts_per_s_1s_means", "down", 1.0),
                           ("ramp_up_megawatts_per_min_1min_means", "up", 60.0),
                           ("ramp_down_megawatts_per_min_1min_means", "down", 60.0)):
        try:
            out[name] = lm.ramp_of_means(x, tick, WINDOW_S[name], d) * scale / 1e6
        except AnalysisError:
            out[name] = math.nan
    try:
        out["largest_step_megawatts_within_1s"] = lm.largest_step(x, tick, 1.0) / 1e6
    except AnalysisError:
        out["largest_step_megawatts_within_1s"] = math.nan
    for name, w in WINDOW_S.items():
        if unresolved_reason(w, dp):
            out[name] = math.nan
    return out


def envelope(per_draw: pd.DataFrame, probabilities, *, data: str = "",
             refused: dict | None = None) -> pd.DataFrame:
    """Figure rows (:data:`~powerlab.interconnect.study.section.FIGURE_COLUMNS`): each
    per-draw figure exceeded with each resolved probability, and the largest draw;
    ``data`` (the data, in words) starts every source, and a figure in ``refused``
    (``{figure: reason}``) is one NaN row whose statistic gives the reason."""
    rows = []
    n = len(per_draw)
    refused = refused or {}
    for col, (unit, definition, method) in PER_DRAW_COLUMNS.items():
        source = f"{data}; {method}" if data else method
        if col in refused:
            rows.append((col, math.nan, unit, 0.0, f"not resolved: {refused[col]}",
                         definition, source))
            continue
        v = per_draw[col].to_numpy(float)
        ok = v[np.isfinite(v)]
        for p in probabilities:
            if n == 1 or p * n < 1 - 1e-9:
                continue    # not resolved by this many draws: the largest draw stands
            val = float(np.quantile(ok, 1 - p)) if len(ok) else math.nan
            rows.append((col, val, unit, p, f"value exceeded in {p:.0%} of draws",
                         definition, source))
        rows.append((col, float(ok.max()) if len(ok) else math.nan, unit, 0.0,
                     f"largest of {n} draw{'s' if n != 1 else ''}", definition, source))
    return pd.DataFrame(rows, columns=FIGURE_COLUMNS)


def ramp_envelope(figures: pd.DataFrame) -> pd.DataFrame:
    """The per-draw figures as a table: one row per figure, one column per exceedance
    probability (``exceed_0.5``, ..., ``largest``)."""
    f = figures[figures["figure"].isin(list(PER_DRAW_COLUMNS))]
    col = np.where(f["exceed_probability"] == 0.0, "largest",
                   "exceed_" + f["exceed_probability"].map("{:g}".format))
    wide = f.assign(column=col).pivot(index="figure", columns="column", values="value")
    order = [c for c in wide.columns if c != "largest"] + ["largest"]
    wide = wide[sorted(order[:-1], key=lambda c: -float(c.split("_")[1])) + ["largest"]]
    return wide.reindex([c for c in PER_DRAW_COLUMNS if c in wide.index])


class Figures(Section):
    """Peak, ramps and steps of every draw and their exceedance envelope."""

    name = "figures"
    order = 10
    title = "Peak, ramps and steps by exceedance probability"

    def per_draw(self, trace, study: Study) -> dict:
        return per_draw_figures(trace, study.boundary)

    def build(self, study: Study) -> None:
        refused = {c: r for c, w in WINDOW_S.items() if (r := unresolved_reason(w, study.trace))}
        for c, r in refused.items():
            study.notes.append(f"{c} not given: {r}.")
        study.figures.append(envelope(study.per_draw, study.options.probabilities,
                                      data=data_label(study), refused=refused))

    def key_lines(self, pkg) -> list[str]:
        f = pkg.figures
        env = pkg.ramp_envelope
        out = []
        for col in env.index:
            unit = f.loc[f["figure"] == col, "unit"].iloc[0]
            parts = ", ".join(f"{c.replace('exceed_', 'p=')}: {v:.3g}"
                              for c, v in env.loc[col].items() if pd.notna(v))
            out.append(f"  {col} [{unit}]  {parts}")
        return out

    def html(self, pkg) -> str:
        defs = pkg.figures.drop_duplicates("figure")[["figure", "unit", "definition",
                                                      "source"]]
        return (f"<p>Over {pkg.draws} Monte Carlo draw(s): the value exceeded with the "
                "column's probability (empirical quantile over draws) and the largest "
                "draw.</p>" + table(pkg.ramp_envelope.round(4), index=True) + table(defs))

    def files(self, pkg, folder: PackageFolder) -> dict:
        return {
            "figures with definitions, sources, exceedance probabilities":
                folder.csv("figures.csv", pkg.summary_frame()),
            "ramp envelope by exceedance probability":
                folder.csv("ramp_envelope.csv", pkg.ramp_envelope, index=True),
            "per-draw figures": folder.csv("per_draw.csv", pkg.per_draw, index=True),
        }


register(Figures())
