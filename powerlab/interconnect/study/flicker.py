"""Study-package section: voltage change and flicker at the point of interconnection.

Every draw of the short window (:mod:`.shortwindow`) through
:func:`powerlab.interconnect.voltagechange.flicker_at_poi`: the relative voltage from
the site's P and Q behind the stated short-circuit power and X/R
(:class:`~powerlab.interconnect.voltagechange.GridStrength`, ``StudyOptions.grid``), its
largest voltage step, the largest instantaneous flicker sensation and, where the window
lasts 10 minutes, Pst (IEC 61000-4-15).  Plt needs 12 consecutive Pst values at a tick
that resolves flicker (two hours at 0.01 s): the package does not forecast that, and says
so.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..flicker import LOWPASS_HZ, PST_INTERVAL_S, FlickerOptions
from ..voltagechange import GridStrength, flicker_at_poi
from .html import esc, table
from .resolution import data_label, native_interval_s
from .section import FIGURE_COLUMNS, PackageFolder, Section, Study, register

__all__ = ["Flicker", "flicker_options"]


def flicker_options(study: Study) -> tuple[GridStrength, FlickerOptions]:
    """The grid (``StudyOptions.grid``, default :class:`GridStrength`) and the
    flickermeter's options (120-V lamp at 60 Hz, 230-V lamp at 50 Hz)."""
    grid = getattr(study.options, "grid", None) or GridStrength()
    f0 = float(study.options.pmu.f0_hz)
    return grid, FlickerOptions(lamp="120V" if f0 == 60 else "230V", f0_hz=f0)


class Flicker(Section):
    """Largest voltage step, Pinst and Pst of the short window, over draws."""

    name = "flicker"
    order = 45
    title = "Voltage change and flicker at the point of interconnection"

    def per_short_draw(self, trace, study: Study) -> dict:
        grid, opts = flicker_options(study)
        res = flicker_at_poi(trace.power_w(study.boundary), trace.tick_s, grid,
                             options=opts, source=trace.description or "power trace")
        steps = res.steps.head(20).assign(draw=trace.draw)
        return {"max_dv_pct": res.max_dv_pct, "pinst_max": res.pinst_max,
                "pst": float(res.pst[0]) if len(res.pst) else math.nan,
                "steps": steps, "notes": res.notes}

    def build(self, study: Study) -> None:
        rows = study.short.rows[self.name]
        grid, opts = flicker_options(study)
        n = len(rows)
        src = (f"{data_label(study)}; short window ({study.short.window_s:g} s, {n} "
               f"draw{'s' if n != 1 else ''}); "
               f"S_sc {grid.short_circuit_megavolt_amperes:g} MVA, X/R {grid.x_over_r:g}, "
               f"power factor {grid.power_factor:g}; IEC 61000-4-15 flickermeter, "
               f"{opts.lamp} lamp, {opts.f0_hz:g} Hz")
        dv = np.array([r["max_dv_pct"] for r in rows])
        pst = np.array([r["pst"] for r in rows])
        figs = [("max_voltage_step_pct", float(dv[np.argmax(np.abs(dv))]), "%",
                 f"largest |step| of {n} draws",
                 "largest voltage step dV/V = -(R dP + X dQ)/V^2 (IEC/TR 61000-3-7 6.3); "
                 "negative a drop")]
        native = native_interval_s(study.short.trace)
        top = LOWPASS_HZ[int(opts.f0_hz)]
        if 0.5 / native < top:
            why = (f"readings every {native:g} s resolve fluctuations only up to "
                   f"{0.5 / native:g} Hz; the flickermeter weighs them up to {top:g} Hz")
            figs += [(f, math.nan, "-", f"not resolved: {why}", d) for f, d in (
                ("pinst_max", "largest instantaneous flicker sensation"),
                ("pst", "short-term flicker severity"))]
            study.notes.append(f"Pinst and Pst not given: {why}.")
            pst = np.full(n, math.nan)
        else:
            figs.append(("pinst_max", max(r["pinst_max"] for r in rows), "-",
                         f"largest of {n} draws", "largest instantaneous flicker sensation"))
        if np.isfinite(pst).any():
            figs.append(("pst", float(np.nanmax(pst)), "-", f"largest of {n} draws",
                         "short-term flicker severity over the window's first 10 min"))
        elif 0.5 / native >= top:
            study.notes.append(f"Pst needs a {PST_INTERVAL_S:g}-s window; the short window "
                               f"lasts {study.short.window_s:g} s (ShortWindow(window_s="
                               "660) gives Pst).")
        study.notes.append("Plt (12 consecutive Pst, 2 h at a tick resolving flicker) is "
                           "not computed by the package.")
        fig = pd.DataFrame([(f, v, u, 0.0, st, d, src) for f, v, u, st, d in figs],
                           columns=FIGURE_COLUMNS)
        study.tables.update(flicker_figures=fig, voltage_steps=pd.concat(
            [r["steps"] for r in rows], ignore_index=True))
        study.figures.append(fig)

    def key_lines(self, pkg) -> list[str]:
        f = pkg.flicker_figures.set_index("figure")["value"]
        line = f"Voltage at the POI: largest step {f['max_voltage_step_pct']:.3g} %"
        for k, name in (("pinst_max", "Pinst max"), ("pst", "Pst")):
            if k in f and pd.notna(f[k]):
                line += f", {name} {f[k]:.3g}"
        return [line + "."]

    def html(self, pkg) -> str:
        f = pkg.flicker_figures
        return (f"<p>{esc(f['source'].iloc[0])}. The relative voltage is formed from the "
                "site's P and Q (Q at the stated power factor) behind the grid's "
                "impedance; the steps are runs of one sign.</p>"
                + table(f[["figure", "value", "unit", "statistic", "definition"]])
                + table(pkg.voltage_steps.sort_values(
                    "dv_pct", key=abs, ascending=False).head(10)))

    def files(self, pkg, folder: PackageFolder) -> dict:
        return {"voltage steps at the POI": folder.csv("voltage_steps.csv",
                                                        pkg.voltage_steps)}


register(Flicker())
