"""Study-package section 2: the energisation schedule.

A staircase from zero to the largest peak over draws within the spec's ramp and step
limits on rises (:func:`powerlab.interconnect.energisation.energisation_schedule`),
checked by recomputing the spec's ramps on the staircase.
"""

from __future__ import annotations

import math

import pandas as pd

from ...limits.requirements import RequirementSpec
from ..energisation import energisation_schedule
from .html import esc, table
from .section import PackageFolder, Section, Study, register

__all__ = ["Energisation", "rise_limits"]


def rise_limits(spec: RequirementSpec) -> tuple[dict, float | None, float]:
    """The spec's limits on rises: ``({window [s]: ramp limit [W/s]}, step limit [W] or
    None, the step's window [s])`` (the strictest of each)."""
    ramps, step, within = {}, None, 1.0
    for r in spec.requirements:
        if r.kind == "ramp" and r.direction in ("up", "both"):
            ramps[r.window_s] = min(ramps.get(r.window_s, math.inf), r.limit_si)
        if r.kind == "step" and r.direction in ("up", "both") and (
                step is None or r.limit_si < step):
            step, within = r.limit_si, r.window_s
    return ramps, step, within


class Energisation(Section):
    """The energisation schedule to the largest peak over draws."""

    name = "energisation"
    order = 20
    title = "Energisation schedule"

    def build(self, study: Study) -> None:
        ramps, step, within = rise_limits(study.spec)
        peak_w = float(study.per_draw["peak_power_megawatts"].max()) * 1e6
        if not ramps and step is None:
            study.notes.append("The spec sets no ramp or step limit on rises: the "
                               "energisation schedule uses blocks of a tenth of the peak, "
                               "1 s apart.")
        study.tables["energisation"] = energisation_schedule(
            peak_w, ramp_limits_w_per_s=ramps, step_limit_w=step, step_within_s=within,
            max_block_w=study.options.max_block_w)

    def key_lines(self, pkg) -> list[str]:
        e = pkg.energisation
        return [f"Energisation: {len(e)} blocks to {e['power_megawatts'].iloc[-1]:.3g} MW, "
                f"{e.attrs['block_spacing_s']:g} s apart, "
                f"{e['time_s'].iloc[-1]:g} s in all ({e.attrs['binding']})."]

    def html(self, pkg) -> str:
        e = pkg.energisation
        return (f"<p>{len(e)} blocks, {e.attrs['block_spacing_s']:g} s apart, to "
                f"{e['power_megawatts'].iloc[-1]:.4g} MW (the largest peak over draws) in "
                f"{e['time_s'].iloc[-1]:g} s; {esc(e.attrs['binding'])}. Checked by "
                "recomputing the spec's ramps on the staircase.</p>"
                + table(e if len(e) <= 30 else pd.concat([e.head(15), e.tail(15)])))

    def files(self, pkg, folder: PackageFolder) -> dict:
        return {"energisation schedule": folder.csv("energisation_schedule.csv",
                                                    pkg.energisation)}


register(Energisation())
