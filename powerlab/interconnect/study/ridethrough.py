"""Study-package section 5: the ride-through table (scenarios only).

Residual voltage x sag duration -> load lost during and just after the sag and the
recovery time, from the engine's disturbance model run with and without each sag on the
same draws (:func:`powerlab.interconnect.ridethrough.ride_through_table`), the sags
striking at draw 0's peak unless told otherwise; what each sag does is the scenario's
equipment model (:mod:`powerlab.interconnect.eventresponse`), the same model as
``comply --sags``.  Measured telemetry has no disturbance model: the section says so
instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..equipment import equipment_from_scenario
from ..ridethrough import ride_through_table
from .html import esc, table
from .section import PackageFolder, Section, Study, register

__all__ = ["RideThrough", "RideThroughSection"]


@dataclass(frozen=True)
class RideThrough:
    """The ride-through table of :func:`~powerlab.interconnect.studypackage.study_package`
    (:func:`~powerlab.interconnect.ridethrough.ride_through_table`).

    Attributes
    ----------
    draws : int, default 3
        Monte Carlo draws of the table [-].
    at_utc : datetime-like, optional
        When the sags strike; default draw 0's peak.
    """

    draws: int = 3
    at_utc: object = None


def _table(study: Study, opts: RideThrough) -> pd.DataFrame:
    """The table at ``opts.at_utc`` (default draw 0's peak)."""
    trace, scenario = study.trace, study.source.scenario
    at = (pd.Timestamp(opts.at_utc) if opts.at_utc is not None else
          trace.start_utc + pd.Timedelta(
              seconds=float(np.argmax(trace.power_w(study.boundary))) * trace.tick_s))
    return ride_through_table(scenario, at.floor("s"), draws=opts.draws, seed=study.seed,
                              tick_s=study.tick_s, boundary=study.boundary,
                              model=equipment_from_scenario(scenario))


def _lost(rt: pd.DataFrame) -> pd.Series:
    """Load lost per sag, the larger of during and after, largest over draws [MW]."""
    return rt["load_lost_megawatts_during_sag_max"].combine(
        rt["load_lost_megawatts_after_sag_max"], max)


class RideThroughSection(Section):
    """The ride-through table of a scenario; a note for measured telemetry."""

    name = "ride_through"
    order = 50
    title = "Ride-through"

    def build(self, study: Study) -> None:
        opt = study.options.ride_through
        opts = RideThrough() if opt is True else (opt or None)
        study.tables[self.name] = None
        if study.source.is_forecast and opts is not None:
            study.tables[self.name] = _table(study, opts)
        elif not study.source.is_forecast:
            study.notes.append("Ride-through table: needs the disturbance model of a "
                               "scenario; for measured telemetry with recorded sags use "
                               "'powerlab comply --sags'.")

    def key_lines(self, pkg) -> list[str]:
        rt = pkg.ride_through
        if rt is None:
            return []
        lost = _lost(rt)
        return [f"Ride-through: {int((lost > 0).sum())} of {len(rt)} sags lose load "
                f"(up to {lost.max():.3g} MW against the sag-free draw); "
                f"{int((rt['tripped_megawatts'] > 0).sum())} trip load that needs a "
                f"restart ({rt.attrs['supply_trip_assumption']})."]

    def html(self, pkg) -> str:
        rt = pkg.ride_through
        if rt is None:
            return ""
        a = rt.attrs
        parts = [f"<p>Sags at {esc(pd.Timestamp(a['at_utc']).isoformat())}, each "
                 "forecast with and without the sag on the same draws; load lost = "
                 "power without minus power with the sag. What each sag does: "
                 f"{esc(a['supply_trip_assumption'])}. 'After' covers {a['after_s']:g} "
                 "s after the sag; recovery: 1-min means back within 5 % of the loss. "
                 "At 0 pu the power at the point of interconnection is 0 during the sag "
                 "(P = V I cos phi), so the load lost during it is all the load.</p>"]
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
            parts.append(f"<p><b>{esc(what)}</b> (rows: residual voltage; columns: sag "
                         f"duration; {int(rt['draws'].iloc[0])} draws; full table in "
                         "ride_through.csv)</p>")
            parts.append(table(m, fmt={c: fmt for c in m.columns}, index=True))
        return "".join(parts)

    def files(self, pkg, folder: PackageFolder) -> dict:
        if pkg.ride_through is None:
            return {}
        return {"ride-through table": folder.csv("ride_through.csv", pkg.ride_through)}


register(RideThroughSection())
