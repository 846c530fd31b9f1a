"""Study-package section: the site's electrical front end and what it does in voltage and
frequency events, in the form of a large-load interconnection request's ride-through
sections.

- the equipment parameters with their sources (``equipment.csv``;
  :func:`~powerlab.interconnect.equipmenttable.equipment_table`), from the scenario's
  ``equipment:`` block over the documented defaults (measured telemetry: the defaults,
  said so);
- P and Q at the point of interconnection over the horizon (draw 0,
  :func:`~powerlab.interconnect.equipment.trace_pq`);
- the voltage (residual voltage x duration) and frequency (deviation x duration)
  ride-through tables of the equipment model at draw 0's peak
  (``voltage_ride_through.csv``, ``frequency_ride_through.csv``;
  :mod:`powerlab.interconnect.ridethroughtables`), drawn as matrices coloured by outcome
  (rides through / ceases and returns / trips).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..equipment import SiteEquipment, equipment_from_scenario, trace_pq, with_overrides
from ..equipmenttable import equipment_table
from ..ridethroughtables import frequency_ride_through, voltage_ride_through
from .html import esc, table
from .section import PackageFolder, Section, Study, register

__all__ = ["FrontEnd", "operating_point", "study_equipment"]


def study_equipment(study: Study) -> SiteEquipment:
    """The equipment of the study: the scenario's (defaults for measured telemetry), at
    the PMU's nominal frequency when the scenario does not set ``poi.frequency_hz``."""
    src = study.source
    eq = equipment_from_scenario(src.scenario) if src.is_forecast else SiteEquipment()
    f0 = float(study.options.pmu.f0_hz)
    if "equipment.poi.frequency_hz" not in eq.overridden and eq.poi.frequency_hz != f0:
        eq = with_overrides(eq, poi={"frequency_hz": f0})
    return eq


def operating_point(trace) -> tuple[float, float, pd.Timestamp]:
    """Draw 0's peak: facility power [W], IT share of it [-] and its time."""
    fac = trace.facility_w if trace.facility_w is not None else trace.it_w
    k = int(np.argmax(fac))
    p = float(fac[k])
    share = float(np.clip(trace.it_w[k] / p, 0.0, 1.0)) if p > 0 else 1.0
    return p, share, trace.start_utc + pd.Timedelta(seconds=k * trace.tick_s)


_COLOURS = {"rides": "#d8f0d8", "ceases": "#fbe7b5", "trips": "#f6c6c6"}


def _outcome(row) -> str:
    if row["tripped_megawatts"] > 0:
        return "trips"
    return "ceases" if row["ceased_megawatts"] > 0 else "rides"


def _matrix(rt: pd.DataFrame, rows: str, row_fmt: str) -> str:
    """The table as a coloured matrix: rows ``rows``, columns the durations; each cell
    the MW lost during the event (ceased + tripped) and, after a slash, tripped."""
    durs = sorted(rt["duration_s"].unique())
    head = "".join(f"<th>{d:g} s</th>" for d in durs)
    body = []
    for key, grp in rt.groupby(rows, sort=True):
        cells = []
        for d in durs:
            r = grp[grp["duration_s"] == d].iloc[0]
            o = _outcome(r)
            lost = r["ceased_megawatts"] + r["tripped_megawatts"]
            cells.append(f"<td class='n' style='background:{_COLOURS[o]}' title='{o}'>"
                         f"{lost:.3g} / {r['tripped_megawatts']:.3g}</td>")
        body.append(f"<tr><th>{row_fmt.format(key)}</th>{''.join(cells)}</tr>")
    return (f"<table><thead><tr><th>{esc(rows)}</th>{head}</tr></thead><tbody>"
            f"{''.join(body)}</tbody></table>")


class FrontEnd(Section):
    """Equipment, P and Q at the POI, voltage and frequency ride-through tables."""

    name = "equipment"
    order = 48
    title = "Electrical front end, P and Q, voltage and frequency ride-through"

    def build(self, study: Study) -> None:
        eq = study_equipment(study)
        p, share, at = operating_point(study.trace)
        tab = equipment_table(eq)
        tab.attrs.update(equipment=eq, p_before_w=p, it_share=share, at_utc=at)
        study.tables[self.name] = tab
        study.tables["voltage_ride_through"] = voltage_ride_through(eq, p, share)
        study.tables["frequency_ride_through"] = frequency_ride_through(eq, p, share)
        _, q = trace_pq(study.trace, eq)
        study.tables["pq"] = pd.DataFrame({
            "quantity": ["P [MW]", "Q [Mvar]"],
            "min": [float(np.min(study.trace.power_w("facility"))) / 1e6
                    if study.trace.facility_w is not None else np.nan, q.min() / 1e6],
            "max": [p / 1e6, q.max() / 1e6]})
        if not study.source.is_forecast:
            study.notes.append("Equipment model: measured telemetry carries no equipment "
                               "description; the documented defaults are used.")

    def key_lines(self, pkg) -> list[str]:
        v, f = pkg.tables.get("voltage_ride_through"), pkg.tables.get(
            "frequency_ride_through")
        if v is None:
            return []
        a = pkg.tables["equipment"].attrs
        n_set = int((pkg.tables["equipment"]["set_by"] == "scenario").sum())
        return [f"Front end: {n_set} equipment parameters set by the scenario, the rest "
                f"defaults; at the peak ({a['p_before_w'] / 1e6:.3g} MW) "
                f"{int((~v['rides_through']).sum())} of {len(v)} voltage events and "
                f"{int((~f['rides_through']).sum())} of {len(f)} frequency events trip "
                "load; at 0 pu the power at the point of interconnection is 0."]

    def html(self, pkg) -> str:
        v = pkg.tables.get("voltage_ride_through")
        if v is None:
            return ""
        tab, f = pkg.tables["equipment"], pkg.tables["frequency_ride_through"]
        a = tab.attrs
        legend = " ".join(f"<span style='background:{c};padding:0 .4em'>{esc(k)}</span>"
                          for k, c in _COLOURS.items())
        return "".join([
            f"<p>At draw 0's peak ({esc(pd.Timestamp(a['at_utc']).isoformat())}: "
            f"{a['p_before_w'] / 1e6:.4g} MW, IT share {a['it_share']:.3g}). Each cell: "
            "MW that stop drawing during the event (ceasing + tripping) / MW that trip; "
            f"{legend}. Full tables with P, Q during and after, return and restart times "
            "in the CSV files.</p>",
            "<p><b>Voltage ride-through</b> (rows: residual voltage [pu])</p>",
            _matrix(v, "residual_voltage_pu", "{:g} pu"),
            "<p><b>Frequency ride-through</b> (rows: frequency [Hz])</p>",
            _matrix(f, "frequency_hz", "{:g} Hz"),
            "<p><b>P and Q at the point of interconnection</b>, draw 0 over the horizon "
            "(Q positive: absorbed)</p>",
            table(pkg.tables["pq"], fmt={"min": "{:.4g}", "max": "{:.4g}"}),
            "<p><b>Equipment parameters</b> (set by the scenario or default, with "
            "sources)</p>",
            table(tab[["parameter", "value", "unit", "set_by", "source"]])])

    def files(self, pkg, folder: PackageFolder) -> dict:
        if pkg.tables.get("voltage_ride_through") is None:
            return {}
        return {
            "equipment parameters and sources": folder.csv("equipment.csv",
                                                           pkg.tables["equipment"]),
            "voltage ride-through table (equipment model)": folder.csv(
                "voltage_ride_through.csv", pkg.tables["voltage_ride_through"]),
            "frequency ride-through table (equipment model)": folder.csv(
                "frequency_ride_through.csv", pkg.tables["frequency_ride_through"]),
        }


register(FrontEnd())
