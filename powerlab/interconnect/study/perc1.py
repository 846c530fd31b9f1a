"""Study-package section: the PERC1 parameter file and the filled data list.

The PERC1 parameter set of the site's IT load derived from the equipment model with its
mapping (``perc1_mapping.csv``; :mod:`powerlab.interconnect.perc1`), written as a PSLF
``.dyd`` record (``perc1.dyd``), and the data list NERC's Level 3 alert on computational
loads asks for, in the order of its areas (``data_list.csv``;
:mod:`powerlab.interconnect.datalist`): each item's value, or ``needs: ...`` naming the
missing input.  Measured disturbance records: none are bundled with powerlab, so the
ride-through parameters are not fitted to measurements (the data list says so).
"""

from __future__ import annotations

import numpy as np

from ..datalist import data_list
from ..perc1 import perc1_parameters, write_perc1_dyd
from .html import esc, table
from .section import PackageFolder, Section, Study, register

__all__ = ["Perc1Section"]


def _figure(study: Study, name: str) -> float:
    """The largest-over-draws value of a per-draw figure (NaN when absent)."""
    if study.per_draw is None or name not in getattr(study.per_draw, "columns", ()):
        return float("nan")
    return float(np.nanmax(study.per_draw[name].to_numpy(float)))


def _known(study: Study) -> dict:
    """What the package knows for the data list, as text."""
    t = study.tables
    eq_tab = t.get("equipment")
    a = eq_tab.attrs if eq_tab is not None else {}
    eq = a.get("equipment")
    known = {"measured_records": ""}
    peak = _figure(study, "peak_power_megawatts")
    if np.isfinite(peak):
        known["peak_megawatts"] = f"{peak:.4g} MW (largest of {study.draws} draws)"
    up, down = (_figure(study, "ramp_up_megawatts_per_s_1s_means"),
                _figure(study, "ramp_down_megawatts_per_s_1s_means"))
    if np.isfinite(up):
        known["ramps"] = (f"up {up:.3g} / down {down:.3g} MW/s over 1-s means (largest "
                          "of the draws; figures.csv has 1-min means)")
    if t.get("pq") is not None:
        q = t["pq"].iloc[1]
        known["q_range"] = f"Q {q['min']:.3g} to {q['max']:.3g} Mvar (draw 0)"
    if eq is not None:
        known["composition"] = (f"IT share {a['it_share']:.3g} of facility power at the "
                                f"peak; {eq.ups.share:.0%} of IT behind a "
                                f"{eq.ups.topology} UPS")
        known["perc1"] = ("perc1.dyd and perc1_mapping.csv (IT load, one record per path: "
                          "UPS-fed, directly fed)")
    for key, name in (("voltage_rt", "voltage_ride_through"),
                      ("frequency_rt", "frequency_ride_through")):
        if t.get(name) is not None:
            known[key] = f"{name}.csv ({len(t[name])} events)"
    if t.get("lines") is not None:
        known["lines"] = f"{len(t['lines'])} narrow-band lines listed (lines.csv)"
    if t.get("energisation") is not None:
        known["energisation"] = f"{len(t['energisation'])} blocks (energisation.csv)"
    if study.source.is_forecast:
        m = study.source.scenario.mitigations
        known["controls"] = known["mitigations"] = (
            "scenario mitigations: " + (", ".join(
                k for k in ("gpu_power_floor_pct_tdp", "gpu_ramp_limit_w_per_s",
                            "stagger_starts_s") if getattr(m, k)) + (
                ", battery" if m.battery is not None else "") if m.active else "none"))
    return known


class Perc1Section(Section):
    """PERC1 parameter file and the data list."""

    name = "perc1"
    order = 55
    title = "PERC1 model and data list"

    def build(self, study: Study) -> None:
        eq_tab = study.tables.get("equipment")
        if eq_tab is None:
            study.tables[self.name] = study.tables["data_list"] = None
            return
        a = eq_tab.attrs
        study.tables[self.name] = perc1_parameters(a["equipment"], a["it_share"],
                                                   a["p_before_w"] / 1e6)
        study.tables["data_list"] = data_list(a["equipment"], _known(study))
        study.notes.append("Measured disturbance records: none bundled; the ride-through "
                           "parameters come from the equipment model, not fitted to "
                           "records.")

    def key_lines(self, pkg) -> list[str]:
        dl = pkg.tables.get("data_list")
        if dl is None:
            return []
        n = int((dl["status"] == "needs").sum())
        p = pkg.tables["perc1"]
        return [f"PERC1: {p['path'].nunique()} records (UPS-fed and directly fed IT load), "
                f"{len(p)} parameters from the equipment model (perc1.dyd); data list: {len(dl) - n} of {len(dl)} items filled, {n} "
                "need inputs from the site or the planner."]

    def html(self, pkg) -> str:
        p, dl = pkg.tables.get("perc1"), pkg.tables.get("data_list")
        if p is None:
            return ""
        return "".join([
            "<p><b>PERC1 parameters</b> of the IT load and where each comes from "
            "(names not confirmed by the stored documentation are marked 'no': check "
            "them against the simulator's manual)</p>",
            table(p[["path", "parameter", "value", "unit", "from", "assumption",
                     "name_confirmed"]], fmt={"value": "{:.4g}"}),
            "<p><b>Data list</b> in the order of the alert's areas</p>",
            table(dl[["number", "area", "item", "value"]]),
            f"<p>{esc('Measured disturbance records: none bundled; nothing fitted.')}</p>"])

    def files(self, pkg, folder: PackageFolder) -> dict:
        p = pkg.tables.get("perc1")
        if p is None:
            return {}
        eq = pkg.tables["equipment"].attrs["equipment"]
        return {
            "PERC1 record (PSLF .dyd)": write_perc1_dyd(
                p, folder.path("perc1.dyd"), base_kv=eq.poi.nominal_kv),
            "PERC1 mapping": folder.csv("perc1_mapping.csv", p),
            "data list": folder.csv("data_list.csv", pkg.tables["data_list"]),
        }


register(Perc1Section())
