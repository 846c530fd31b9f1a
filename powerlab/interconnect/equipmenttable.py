"""The equipment model's parameters as a table: each key path, its value and unit, what it
is, its source, and whether the scenario set it or the default applies.

:func:`equipment_table` is what the study package writes (``equipment.csv``) and what the
data list (:mod:`powerlab.interconnect.datalist`) reads to say which inputs the site
still has to give.
"""

from __future__ import annotations

import pandas as pd

from .equipment import SiteEquipment

__all__ = ["PARAMETERS", "equipment_table"]

_CRPS = "Intel CRPS design specification (hold-up >= 10 ms at 100 % load; 90-264 V, " \
        "47-63 Hz)"
_80P = "80 PLUS certification levels (230 V internal redundant; PF >= 0.95 at 50 % load)"
_IEC = "IEC 62040-3:2021 clause 5.3.4 (VFI / VI / VFD) and output classes"
_ASSUMED = "assumed (typical value; the site must confirm)"
_RELAY = "IEEE C37.2 device 27/59/81; setting assumed, the site must give its own"

#: key path -> (unit, meaning, source)
PARAMETERS = {
    "psu.holdup_s": ("s", "PSU hold-up time at rated load", _CRPS),
    "psu.current_limit_pu": ("-", "PSU input current limit / rated current at nominal V",
                             _ASSUMED + "; 90-V low line at rated power needs 1.3-1.5"),
    "psu.loading": ("-", "PSU loading at the site's peak IT power (N+N: about 0.5)",
                    _ASSUMED),
    "psu.restart_pu": ("pu", "voltage above which a dropped PSU restarts", _ASSUMED),
    "psu.frequency_min_hz": ("Hz", "lowest input frequency", _CRPS),
    "psu.frequency_max_hz": ("Hz", "highest input frequency", _CRPS),
    "psu.reboot_s": ("s", "PSU dropout to server back in service", _ASSUMED),
    "psu.power_factor_curve": ("-", "PSU input power factor against loading", _80P),
    "psu.efficiency_curve": ("-", "PSU efficiency against loading",
                             "80 PLUS Titanium 90/94/96/91 % at 10/20/50/100 %"),
    "psu.reactive_sign": ("-", "-1 leading (EMI capacitors), +1 lagging", _ASSUMED),
    "ups.topology": ("", "UPS topology", _IEC),
    "ups.it_share": ("-", "share of IT load behind the UPS", _ASSUMED),
    "ups.transfer_threshold_pu": ("pu", "input voltage below which the UPS goes to battery",
                                  "typical VFI rectifier tolerance -15 % at full load"),
    "ups.frequency_tolerance_hz": ("Hz", "input frequency window (+-)",
                                   "typical +-5 % of nominal"),
    "ups.transfer_time_s": ("s", "break at transfer to battery", _IEC + " (VFI: 0)"),
    "ups.autonomy_s": ("s", "battery autonomy at the site's load", _ASSUMED),
    "ups.return_delay_s": ("s", "delay before the walk-in once the input is back",
                           _ASSUMED),
    "ups.walk_in_s": ("s", "rectifier walk-in time (load back to the grid)", _ASSUMED),
    "ups.input_power_factor": ("-", "UPS rectifier input power factor",
                               "typical IGBT rectifier datasheet value >= 0.99"),
    "ups.reactive_sign": ("-", "+1 lagging, -1 leading", _ASSUMED),
    "auxiliaries.power_factor": ("-", "power factor of the non-IT load", _ASSUMED),
    "auxiliaries.reactive_sign": ("-", "+1 lagging", _ASSUMED),
    "auxiliaries.dropout_pu": ("pu", "contactor / drive dropout voltage",
                               "contactors hold to 0.6-0.75 pu (typical)"),
    "auxiliaries.dropout_s": ("s", "time below dropout_pu before dropout", _ASSUMED),
    "auxiliaries.restart_s": ("s", "cooling load back after dropout", _ASSUMED),
    "protection.undervoltage_pu": ("pu", "27 pickup", _RELAY),
    "protection.undervoltage_delay_s": ("s", "27 delay", _RELAY),
    "protection.overvoltage_pu": ("pu", "59 pickup", _RELAY),
    "protection.overvoltage_delay_s": ("s", "59 delay", _RELAY),
    "protection.underfrequency_hz": ("Hz", "81U pickup (None: 0.95 x nominal)",
                                     _RELAY + "; PRC-024 no-trip zone reaches 57.0 Hz"),
    "protection.underfrequency_delay_s": ("s", "81U delay", _RELAY),
    "protection.overfrequency_hz": ("Hz", "81O pickup (None: 1.03 x nominal)",
                                    _RELAY + "; PRC-024 no-trip zone reaches 61.8 Hz"),
    "protection.overfrequency_delay_s": ("s", "81O delay", _RELAY),
    "protection.reconnect_s": ("s", "protection trip to the site reconnected", _ASSUMED),
    "poi.nominal_kv": ("kV", "nominal voltage at the POI", "the interconnection request"),
    "poi.frequency_hz": ("Hz", "nominal frequency", "the system (50 or 60 Hz)"),
    "poi.short_circuit_mva": ("MVA", "three-phase short-circuit level at the POI",
                              "the transmission owner's short-circuit study"),
    "poi.x_over_r": ("-", "X/R of the grid at the POI",
                     "the transmission owner's short-circuit study"),
}


def equipment_table(eq: SiteEquipment) -> pd.DataFrame:
    """One row per parameter: ``parameter`` (key path), ``value``, ``unit``,
    ``meaning``, ``source`` and ``set_by`` (``scenario`` or ``default``)."""
    rows = []
    for key, value in eq.parameters():
        unit, meaning, source = PARAMETERS.get(key, ("", "", ""))
        rows.append({"parameter": key,
                     "value": "" if value is None else str(value),
                     "unit": unit, "meaning": meaning, "source": source,
                     "set_by": "scenario" if f"equipment.{key}" in eq.overridden
                     else "default"})
    return pd.DataFrame(rows)
