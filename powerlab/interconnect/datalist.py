"""The modelling data list of a computational load, filled from what powerlab knows.

NERC's Level 3 alert "Computational Load Modeling, Studies, Instrumentation,
Commissioning, Operations, Protection, and Control" (May 2026; Essential Action 1 as
summarised publicly) asks transmission planners for a list of modelling data, settings
and parameters from each computational load, with the PERC1 model as the minimum.  The
alert's own list was not available to this module: :data:`ITEMS` follows the seven areas
in the order of the alert's title, and within each the items its public summaries and
ERCOT's large-load ride-through sections name.

Each row is filled with a **value** when powerlab has it from the forecast, the study
package or a parameter the scenario sets (``equipment:``), and otherwise says
``needs: ...`` naming the missing input.  A value that is only the equipment model's
default is not given as the site's: it reads ``needs: <key path> (model assumes ...)``.
"""

from __future__ import annotations

import pandas as pd

from .equipment import SiteEquipment

__all__ = ["AREAS", "ITEMS", "data_list"]

#: The alert's seven areas, in the order of its title.
AREAS = ("Modeling", "Studies", "Instrumentation", "Commissioning", "Operations",
         "Protection", "Control")

#: (area, item, how it is filled): "known:<key>" reads the study's known values;
#: "eq:<key path>[,<key path>...]" the equipment parameters; "needs:<text>" nothing.
ITEMS = (
    ("Modeling", "Facility peak active power [MW]", "known:peak_megawatts"),
    ("Modeling", "Largest 1-s and 1-min ramps [MW/s]", "known:ramps"),
    ("Modeling", "Reactive power / power factor range", "known:q_range"),
    ("Modeling", "Load composition: IT share, share behind UPS, non-IT share",
     "known:composition"),
    ("Modeling", "Dynamic model: PERC1 parameter set (minimum model)", "known:perc1"),
    ("Modeling", "Voltage ride-through table (residual voltage x duration)",
     "known:voltage_rt"),
    ("Modeling", "Frequency ride-through table (deviation x duration)",
     "known:frequency_rt"),
    ("Modeling", "Server PSU hold-up time", "eq:psu.holdup_s"),
    ("Modeling", "Server PSU input voltage and frequency range",
     "eq:psu.current_limit_pu,psu.frequency_min_hz,psu.frequency_max_hz"),
    ("Modeling", "UPS topology, transfer threshold and transfer time",
     "eq:ups.topology,ups.transfer_threshold_pu,ups.transfer_time_s"),
    ("Modeling", "UPS battery autonomy and walk-in (return ramp)",
     "eq:ups.autonomy_s,ups.return_delay_s,ups.walk_in_s"),
    ("Modeling", "Oscillation content (narrow-band lines, 0.1-30 Hz)", "known:lines"),
    ("Studies", "Short-circuit level and X/R at the point of interconnection",
     "eq:poi.short_circuit_mva,poi.x_over_r"),
    ("Studies", "Steady-state and dynamic system model of the area",
     "needs:the transmission planner's power-flow and dynamics cases (not a powerlab "
     "input)"),
    ("Instrumentation", "Dynamic fault recording at the point of interconnection",
     "needs:recorder location, channels (P, Q, V, f) and sampling rate; powerlab writes "
     "COMTRADE playback, it does not record"),
    ("Instrumentation", "Measured disturbance records to validate the model",
     "known:measured_records"),
    ("Commissioning", "Energisation schedule within the ramp and step limits",
     "known:energisation"),
    ("Operations", "Ramp and step limits the load can hold (mitigations)",
     "known:mitigations"),
    ("Operations", "Contact for direct interpersonal communication",
     "needs:the operator's 24/7 contact (not a powerlab input)"),
    ("Protection", "Undervoltage (27) pickup and delay",
     "eq:protection.undervoltage_pu,protection.undervoltage_delay_s"),
    ("Protection", "Overvoltage (59) pickup and delay",
     "eq:protection.overvoltage_pu,protection.overvoltage_delay_s"),
    ("Protection", "Under/over-frequency (81U/81O) pickups and delays",
     "eq:protection.underfrequency_hz,protection.underfrequency_delay_s,"
     "protection.overfrequency_hz,protection.overfrequency_delay_s"),
    ("Protection", "Reconnection after a protection trip", "eq:protection.reconnect_s"),
    ("Control", "Load-side controls (power smoothing, storage, staggering)",
     "known:controls"),
)


def _from_equipment(eq: SiteEquipment, keys: str) -> tuple[str, str]:
    """(value, status) of equipment parameters: ``given`` when the scenario set them
    all, else ``needs``."""
    vals = dict(eq.parameters())
    ks = keys.split(",")
    text = "; ".join(f"{k} = {vals[k]}" for k in ks)
    missing = [k for k in ks if f"equipment.{k}" not in eq.overridden]
    if not missing:
        return text, "given"
    return (f"needs: {', '.join('equipment.' + k for k in missing)} (model assumes "
            f"{text})"), "needs"


def data_list(eq: SiteEquipment, known: dict | None = None) -> pd.DataFrame:
    """The filled data list.

    Parameters
    ----------
    eq : SiteEquipment
    known : dict, optional
        What the study package knows, by the keys of :data:`ITEMS` (``peak_megawatts``,
        ``ramps``, ``q_range``, ``composition``, ``perc1``, ``voltage_rt``,
        ``frequency_rt``, ``lines``, ``measured_records``, ``energisation``,
        ``mitigations``, ``controls``): a text each.

    Returns
    -------
    DataFrame
        ``number``, ``area``, ``item``, ``value`` (the value, or ``needs: ...``) and
        ``status`` (``given``, ``from forecast``, ``needs``), in :data:`ITEMS` order.
    """
    known = known or {}
    rows = []
    for i, (area, item, how) in enumerate(ITEMS, start=1):
        kind, _, arg = how.partition(":")
        if kind == "eq":
            value, status = _from_equipment(eq, arg)
        elif kind == "known" and known.get(arg):
            value, status = str(known[arg]), "from forecast"
        elif kind == "known":
            value, status = f"needs: {arg.replace('_', ' ')} (not in this package)", "needs"
        else:
            value, status = f"needs: {arg}", "needs"
        rows.append({"number": i, "area": area, "item": item, "value": value,
                     "status": status})
    return pd.DataFrame(rows)
