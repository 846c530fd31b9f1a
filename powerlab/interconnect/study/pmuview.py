"""Study-package section 4: what a PMU reports of the short window.

The IEEE C37.118.1 reference P-class and M-class phasor estimators applied to the site's
current over draw 0's short window (:func:`powerlab.interconnect.pmu.pmu_power`), next to
the raw values; the largest change within 1 s of each over every draw (three figure
rows), and the share of an oscillation at a few frequencies that the filters pass.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.ndimage import maximum_filter1d, minimum_filter1d

from ..pmu import modulation_gain, pmu_power
from .html import table
from .resolution import data_label, unresolved_reason
from .section import FIGURE_COLUMNS, PackageFolder, Section, Study, register
from .spectrum import OBSERVED_LINES_HZ

__all__ = ["PmuView", "pmu_swings"]


def pmu_swings(x: np.ndarray, tick_s: float, f0_hz: float, fps: int) -> dict:
    """Largest change within 1 s of the raw series and of what P/M-class PMUs report
    (both read at the PMU's frame times) [MW]: ``raw``, ``p``, ``m``."""
    f = pmu_power(x, tick_s, f0_hz=f0_hz, reporting_rate_fps=fps)
    out = {}
    n = fps + 1
    for col, name in (("power_megawatts_raw", "raw"), ("power_megawatts_pmu_p_class", "p"),
                      ("power_megawatts_pmu_m_class", "m")):
        y = f[col].to_numpy()
        out[name] = float((maximum_filter1d(y, n) - minimum_filter1d(y, n)).max()) \
            if len(y) >= n else math.nan
    return out


def _swing_figures(rows: pd.DataFrame, f0_hz: float, fps: int, data: str = "",
                   refused: str = "") -> pd.DataFrame:
    """The figure rows of the swings: the largest over draws of each (NaN, with the
    reason as the statistic, where the data cannot resolve 1 s: ``refused``)."""
    src = (f"{data}; " if data else "") + (
        f"IEEE C37.118.1-2011 Annex C reference {{}}-class filter, {f0_hz:g} Hz, "
        f"{fps} frames/s; powerlab.interconnect.pmu")
    out = []
    n = len(rows)
    for name, cls in (("raw", None), ("p", "P"), ("m", "M")):
        v = rows[name].to_numpy(float)
        what = "the forecast at the PMU's frame times" if cls is None else \
            f"the power a {cls}-class reference PMU reports"
        stat = f"not resolved: {refused}" if refused else \
            f"largest of {n} draw{'s' if n != 1 else ''} (short window)"
        out.append((f"swing_megawatts_within_1s_{'raw' if cls is None else name + '_class'}",
                    math.nan if refused else float(np.nanmax(v)), "MW", 0.0, stat,
                    f"largest max-minus-min within 1 s of {what}",
                    src.format(cls) if cls else
                    (f"{data}; " if data else "") + "the short window's samples"))
    return pd.DataFrame(out, columns=FIGURE_COLUMNS)


def _filter_gains(f0_hz: float, fps: int) -> pd.DataFrame:
    """P- and M-class modulation gains at a few frequencies (with the observed ones)."""
    gain_f = np.array([0.1, 1.0, 2.0, 5.0, 10.0, *OBSERVED_LINES_HZ, 30.0])
    return pd.DataFrame({"frequency_hz": gain_f, **{
        f"gain_{c.lower()}_class": modulation_gain(gain_f, c, f0_hz=f0_hz,
                                                   reporting_rate_fps=fps)
        for c in ("P", "M")}})


class PmuView(Section):
    """Draw 0's short window as reference PMUs report it, and the swings over draws."""

    name = "pmu"
    order = 40
    title = "What a PMU reports"

    def per_short_draw(self, trace, study: Study) -> dict:
        pmu = study.options.pmu
        return pmu_swings(trace.power_w(study.boundary), trace.tick_s, pmu.f0_hz,
                          pmu.reporting_rate_fps)

    def build(self, study: Study) -> None:
        f0, fps = study.options.pmu.f0_hz, study.options.pmu.reporting_rate_fps
        short = study.short.trace
        refused = unresolved_reason(1.0, short)
        if refused:
            study.notes.append(f"PMU swings within 1 s not given: {refused}.")
        figs = _swing_figures(pd.DataFrame(study.short.rows[self.name]), f0, fps,
                              data_label(study), refused)
        study.tables.update(
            pmu=pmu_power(short.power_w(study.boundary), short.tick_s, short.start_utc,
                          f0_hz=f0, reporting_rate_fps=fps),
            pmu_figures=figs, pmu_gains=_filter_gains(f0, fps))
        study.figures.append(figs)

    def key_lines(self, pkg) -> list[str]:
        pm = pkg.pmu_figures.set_index("figure")["value"]
        return ["Largest 1-s swing, raw / P-class PMU / M-class PMU [MW]: " + " / ".join(
            f"{v:.3g}" if pd.notna(v) else "not resolved" for v in pm.to_numpy())]

    def html(self, pkg) -> str:
        parts = ["<p>IEEE C37.118.1 reference P-class and M-class phasor estimators "
                 "applied to the site's current (voltage at nominal, constant power "
                 "factor), next to the raw forecast.</p>",
                 table(pkg.pmu_figures[["figure", "value", "unit", "statistic",
                                        "definition"]])]
        gains = pkg.tables.get("pmu_gains")
        if gains is not None:
            parts.append("<p>Share of a power oscillation at each frequency that the "
                         "reference filters pass (magnitude response, C37.118.1 Annex "
                         "C):</p>")
            parts.append(table(gains, fmt={c: "{:.3f}" for c in gains.columns
                                           if c != "frequency_hz"}))
        return "".join(parts)

    def files(self, pkg, folder: PackageFolder) -> dict:
        view = pkg.pmu
        if "timestamp_utc" in view:
            view = view.assign(
                timestamp_utc=view["timestamp_utc"].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        out = {"PMU view (draw 0, short window)": folder.csv("pmu.csv", view)}
        gains = pkg.tables.get("pmu_gains")
        if gains is not None:
            out["PMU filter gains"] = folder.csv("pmu_filter_gain.csv", gains)
        return out


register(PmuView())
