"""A PERC1 parameter set derived from the equipment model, with its mapping documented.

PERC1 ("Power Electronic Reconnecting and Ceasing") is the load model NERC's Level 3
alert on computational loads (May 2026) names as the minimum for such loads.  It is
based on EPRI's aggregated power-electronic load model (LDEV1: Sundaresh and Matra, "A
Positive Sequence Model for Aggregated Representation of Electric Vehicle Chargers",
EPRI 2022) and adds, per the PowerWorld Simulator documentation of PERC1 (Version 24,
Oct. 2025): ``Frecon`` (after reconnecting, the load returns to
``1 - Fcease + Frecon * Fcease``), separate lead-lag time constants for P and Q
(``Tap``, ``Tbp``, ``Taq``, ``Tbq``), separate low and high frequency deadbands
(``Dbfl``, ``Dbfh``) and a single P/Q path (several PERC1 records in a composite load
model represent several paths).  ``MWinit`` is the load's initial MW; ``QPRatio`` gives
its initial Mvar inside a composite load; ``Kvp``/``Tvp`` and ``Kvq``/``Tvq`` are the
washout responses of P and Q to a voltage change.

**What is confirmed and what is not.**  The names above are the ones the stored excerpt
of the PERC1 documentation gives.  The voltage and frequency trip and cease/reconnect
settings (``Vcease``, ``Tcease``, ``Vrecon``, ``Trecon``, ``Rrecon``, ``Vl0``, ``Tvl0``,
``Vh0``, ``Tvh0``, ``Fl``, ``Tfl``, ``Fh``, ``Tfh``, ``Vrfrac``) are named after their
LDEV1 counterparts as the PERC1 block diagram describes them in words; the table marks
each (``name_confirmed``), and the exported record says to check names and order
against the simulator's model documentation before submission.

**The mapping** (:data:`MAPPING`, :func:`perc1_from_parameters`): the PERC1 record
represents the site's **IT load** (power-electronic: server PSUs, behind or not behind
the UPS); the non-IT load (cooling drives, pumps) is outside it (a motor or other record
of the composite load; the data list says so).  The dominant IT path decides the cease
and reconnect settings: with a UPS on at least half the IT load, the load ceases when the
UPS goes to battery (below its transfer threshold) and reconnects over its walk-in;
without, the PSUs' constant-power limit is the ceasing voltage and their brown-in the
reconnecting one.  Trips: the PSUs' hold-up at their loading (no UPS) or the UPS autonomy
(UPS), and the site's own 27/59/81 relays.

:func:`perc1_parameters` returns the table (parameter, value, unit, from, assumption,
name_confirmed); :func:`write_perc1_dyd` writes it as a PSLF ``.dyd`` record.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..outputs import atomic_write
from .equipment import SiteEquipment, tan_phi

__all__ = [
    "CONFIRMED_NAMES",
    "MAPPING",
    "equipment_parameters",
    "perc1_from_parameters",
    "perc1_parameters",
    "write_perc1_dyd",
]

#: PERC1 parameter names the stored PERC1 documentation excerpt gives verbatim.
CONFIRMED_NAMES = frozenset({"QPRatio", "Kvp", "Tvp", "Kvq", "Tvq", "Tap", "Tbp", "Taq",
                             "Tbq", "Dbfl", "Dbfh", "Fcease", "Frecon"})

#: PERC1 parameter -> (unit, from (equipment key paths), assumption)
MAPPING = {
    "QPRatio": ("-", "psu.power_factor_curve at psu.loading, ups.input_power_factor, "
                "ups.it_share, signs", "Q/P of the IT load at its operating point"),
    "Kvp": ("pu/pu", "-", "0: PSUs and UPS rectifiers regulate constant power; no P "
            "washout response to a voltage step"),
    "Tvp": ("s", "-", "0 (unused with Kvp = 0)"),
    "Kvq": ("pu/pu", "-", "0: no Q washout response"),
    "Tvq": ("s", "-", "0 (unused with Kvq = 0)"),
    "Tap": ("s", "-", "0: lead-lag of the P path bypassed (converter control faster "
            "than the positive-sequence time step)"),
    "Tbp": ("s", "-", "0"),
    "Taq": ("s", "-", "0"),
    "Tbq": ("s", "-", "0"),
    "Vcease": ("pu", "ups.transfer_threshold_pu (UPS on >= half the IT load) else "
               "1 / psu.current_limit_pu", "below it the dominant path stops drawing"),
    "Tcease": ("s", "ups.transfer_time_s", "VFI: 0 (the UPS transfers without a break)"),
    "Fcease": ("-", "ups.it_share (UPS) else 1", "share of the IT load that ceases"),
    "Vrecon": ("pu", "ups.transfer_threshold_pu (UPS) else psu.restart_pu",
               "voltage above which ceased load reconnects"),
    "Trecon": ("s", "ups.return_delay_s (UPS) else psu.reboot_s",
               "delay before reconnecting starts"),
    "Rrecon": ("pu/s", "1 / ups.walk_in_s (UPS) else 1 / psu.reboot_s",
               "rate of reconnection (linear walk-in)"),
    "Frecon": ("-", "ups.autonomy_s >= longest studied event", "1: all ceased load "
               "reconnects (battery outlasts the event)"),
    "Vl0": ("pu", "1 / psu.current_limit_pu (no UPS) or ups.transfer_threshold_pu (UPS)",
            "below it the load trips after Tvl0"),
    "Tvl0": ("s", "psu.holdup_s / psu.loading (no UPS) or ups.autonomy_s (UPS)",
             "hold-up at 0 V (shortest) / battery autonomy"),
    "Vh0": ("pu", "protection.overvoltage_pu", "59 pickup"),
    "Tvh0": ("s", "protection.overvoltage_delay_s", "59 delay"),
    "Fl": ("Hz", "max(protection.underfrequency_hz (default 0.95 f0), "
           "psu.frequency_min_hz)", "81U or PSU "
           "input range"),
    "Tfl": ("s", "protection.underfrequency_delay_s", "81U delay"),
    "Fh": ("Hz", "min(protection.overfrequency_hz (default 1.03 f0), "
           "psu.frequency_max_hz)", "81O or PSU "
           "input range"),
    "Tfh": ("s", "protection.overfrequency_delay_s", "81O delay"),
    "Dbfl": ("Hz", "-ups.frequency_tolerance_hz (UPS) else 0", "below f0 + Dbfl the UPS "
             "load goes to battery (ceases)"),
    "Dbfh": ("Hz", "ups.frequency_tolerance_hz (UPS) else 0", "above f0 + Dbfh likewise"),
    "Vrfrac": ("-", "-", "0: tripped load restarts after minutes (psu.reboot_s), beyond "
               "a stability simulation"),
}


def equipment_parameters(eq: SiteEquipment, it_share: float = 1.0) -> dict:
    """The plain dictionary :func:`perc1_from_parameters` reads: every equipment key path
    (``"psu.holdup_s"``, ...) with its value, plus ``"it_share"`` [-]."""
    return {**dict(eq.parameters()), "it_share": float(it_share)}


def perc1_from_parameters(p: dict) -> dict:
    """PERC1 parameters from a plain dictionary of equipment parameters (the key paths of
    :meth:`~powerlab.interconnect.equipment.SiteEquipment.parameters`; see
    :data:`MAPPING` for each rule).  Returns ``{PERC1 name: value}``."""
    ups = 0.0 if p["ups.topology"] == "none" else float(p["ups.it_share"])
    vfi = p["ups.topology"] == "double_conversion"
    x, y = zip(*p["psu.power_factor_curve"])
    pf_psu = float(np.interp(p["psu.loading"], x, y))
    t_psu = p["psu.reactive_sign"] * float(tan_phi(pf_psu))
    t_ups = p["ups.reactive_sign"] * float(tan_phi(p["ups.input_power_factor"])) if vfi \
        else t_psu
    qp = ups * t_ups + (1.0 - ups) * t_psu
    v_cp = 1.0 / p["psu.current_limit_pu"]
    f0 = float(p.get("poi.frequency_hz", 60.0))
    f_lo = p["protection.underfrequency_hz"] if p.get("protection.underfrequency_hz") \
        is not None else 0.95 * f0
    f_hi = p["protection.overfrequency_hz"] if p.get("protection.overfrequency_hz") \
        is not None else 1.03 * f0
    by_ups = ups >= 0.5
    return {
        "QPRatio": qp, "Kvp": 0.0, "Tvp": 0.0, "Kvq": 0.0, "Tvq": 0.0,
        "Tap": 0.0, "Tbp": 0.0, "Taq": 0.0, "Tbq": 0.0,
        "Vcease": p["ups.transfer_threshold_pu"] if by_ups else v_cp,
        "Tcease": p["ups.transfer_time_s"] if by_ups else 0.0,
        "Fcease": ups if by_ups else 1.0,
        "Vrecon": p["ups.transfer_threshold_pu"] if by_ups else p["psu.restart_pu"],
        "Trecon": p["ups.return_delay_s"] if by_ups else p["psu.reboot_s"],
        "Rrecon": 1.0 / max(p["ups.walk_in_s"] if by_ups else p["psu.reboot_s"], 1e-9),
        "Frecon": 1.0,
        "Vl0": p["ups.transfer_threshold_pu"] if by_ups else v_cp,
        "Tvl0": p["ups.autonomy_s"] if by_ups else
        p["psu.holdup_s"] / max(p["psu.loading"], 1e-9),
        "Vh0": p["protection.overvoltage_pu"], "Tvh0": p["protection.overvoltage_delay_s"],
        "Fl": max(f_lo, p["psu.frequency_min_hz"]),
        "Tfl": p["protection.underfrequency_delay_s"],
        "Fh": min(f_hi, p["psu.frequency_max_hz"]),
        "Tfh": p["protection.overfrequency_delay_s"],
        "Dbfl": -p["ups.frequency_tolerance_hz"] if by_ups else 0.0,
        "Dbfh": p["ups.frequency_tolerance_hz"] if by_ups else 0.0,
        "Vrfrac": 0.0,
    }


def perc1_parameters(eq: SiteEquipment, it_share: float = 1.0) -> pd.DataFrame:
    """The PERC1 parameter set of the site's IT load with its mapping: one row per
    parameter, ``parameter``, ``value``, ``unit``, ``from`` (equipment key paths),
    ``assumption`` and ``name_confirmed``."""
    vals = perc1_from_parameters(equipment_parameters(eq, it_share))
    rows = [{"parameter": k, "value": float(v), "unit": MAPPING[k][0],
             "from": MAPPING[k][1], "assumption": MAPPING[k][2],
             "name_confirmed": k in CONFIRMED_NAMES} for k, v in vals.items()]
    out = pd.DataFrame(rows)
    out.attrs.update(represents="IT load (power-electronic); non-IT load not included",
                     it_share=it_share)
    return out


def write_perc1_dyd(table: pd.DataFrame, path, *, bus: int = 1, bus_name: str = "DCLOAD",
                    base_kv: float = 138.0, load_id: str = "1") -> Path:
    """Write the PERC1 record as a PSLF dynamic-data (``.dyd``) record.

    Layout (GE PSLF dyd): ``model bus "name" kV "id" : #9`` then ``"parameter" value``
    pairs, ``/`` ending a line that continues; lines starting with ``#`` are comments.
    The comment block says what the record represents and that parameter names not
    confirmed in the stored documentation (``name_confirmed`` false) must be checked
    against the simulator's PERC1 documentation before submission.
    """
    head = [f"# PERC1 record written by powerlab: {table.attrs.get('represents', '')}",
            f"# IT share of the site's power: {table.attrs.get('it_share', float('nan')):.4g}",
            "# names marked ? below are not confirmed by the stored PERC1 documentation: "
            "check names and order against the simulator's model manual"]
    unconfirmed = [r.parameter for r in table.itertuples() if not r.name_confirmed]
    head.append("# ? " + " ".join(unconfirmed))
    pairs = [f'"{r.parameter.lower()}" {r.value:.6g}' for r in table.itertuples()]
    lines = [f'perc1 {int(bus)} "{bus_name[:12]}" {base_kv:.2f} "{load_id[:2]:<2}" : #9']
    for i in range(0, len(pairs), 4):
        lines.append(" " + " ".join(pairs[i:i + 4]))
    body = " /\n".join(lines)
    text = "\n".join(head) + "\n" + body + "\n"
    p = Path(path)
    return atomic_write(p, lambda tmp: Path(tmp).write_text(text, "ascii"))
