"""Study-package section 6: playback files for grid-study tools.

Draw 0 (one trajectory, never a quantile across draws) as PSCAD and PowerFactory
playback (:mod:`powerlab.interconnect.gridstudy`): the short window at its tick, and the
whole horizon in 1-s means; the short window as a COMTRADE record
(:mod:`powerlab.interconnect.comtrade`, C37.111-1999 ASCII, ``lf`` the study's nominal
frequency, the record's description in its ``.hdr``).  With the equipment model of the
front-end section, every file carries P, Q and (with a short-circuit level) V at the
point of interconnection.  Files only: the page lists them.
"""

from __future__ import annotations

from ..comtrade import write_trace_comtrade
from ..gridstudy import write_grid_playback
from .section import PackageFolder, Section, register

__all__ = ["Playback"]


class Playback(Section):
    """PSCAD, PowerFactory and COMTRADE playback of draw 0."""

    name = "playback"
    order = 60

    def files(self, pkg, folder: PackageFolder) -> dict:
        out = {}
        st, tr = pkg.short_trace, pkg.trace
        eq_tab = pkg.tables.get("equipment")
        eq = eq_tab.attrs.get("equipment") if eq_tab is not None else None
        what = "P, Q" + (", V" if eq is not None and eq.poi.short_circuit_mva else "") \
            if eq is not None and pkg.boundary == "facility" else "P"
        for fmt in ("pscad", "powerfactory"):
            out[f"{fmt} playback ({what}), short window at {st.tick_s:g} s"] = \
                write_grid_playback(st, folder.path(f"playback_short_{fmt}.txt"), fmt,
                                    step_s=st.tick_s, boundary=pkg.boundary, equipment=eq)
            step = 1.0 if tr.duration_s >= 2.0 else tr.tick_s
            out[f"{fmt} playback ({what}), whole horizon, {step:g}-s means"] = \
                write_grid_playback(tr, folder.path(f"playback_horizon_{fmt}.txt"), fmt,
                                    step_s=step, boundary=pkg.boundary, equipment=eq)
        f0 = eq.poi.frequency_hz if eq is not None else 60.0
        ct = write_trace_comtrade(st, folder.path("playback_short_comtrade"), rev_year=1999,
                                  line_frequency_hz=f0, equipment=eq)
        out[f"COMTRADE (C37.111-1999 ASCII, {f0:g} Hz) configuration, short window at "
            f"{st.tick_s:g} s"] = ct["cfg"]
        out["COMTRADE data"] = ct["dat"]
        out["COMTRADE header (what the record is)"] = ct["hdr"]
        return out


register(Playback())
