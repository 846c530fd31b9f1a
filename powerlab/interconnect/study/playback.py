"""Study-package section 6: playback files for grid-study tools.

Draw 0 (one trajectory, never a quantile across draws) as PSCAD and PowerFactory
playback (:mod:`powerlab.interconnect.gridstudy`): the short window at its tick, and the
whole horizon in 1-s means; the short window as a COMTRADE record
(:mod:`powerlab.interconnect.comtrade`, C37.111-1999 ASCII).  Files only: the page lists
them.
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
        for fmt in ("pscad", "powerfactory"):
            out[f"{fmt} playback, short window at {st.tick_s:g} s"] = write_grid_playback(
                st, folder.path(f"playback_short_{fmt}.txt"), fmt, step_s=st.tick_s,
                boundary=pkg.boundary)
            step = 1.0 if tr.duration_s >= 2.0 else tr.tick_s
            out[f"{fmt} playback, whole horizon, {step:g}-s means"] = write_grid_playback(
                tr, folder.path(f"playback_horizon_{fmt}.txt"), fmt, step_s=step,
                boundary=pkg.boundary)
        ct = write_trace_comtrade(st, folder.path("playback_short_comtrade"), rev_year=1999)
        out[f"COMTRADE (C37.111-1999 ASCII) configuration, short window at {st.tick_s:g} "
            "s"] = ct["cfg"]
        out["COMTRADE data"] = ct["dat"]
        return out


register(Playback())
