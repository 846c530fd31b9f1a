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
of the PERC1 documentation gives.  The cease, reconnect and trip settings (``Vcease``,
``Tcease``, ``Vrecon``, ``Trecon``, ``Trmp``, ``Fl``, ``Tfl``, ``Fh``, ``Tfh``, ``Vh0``,
``Tvh0``) are descriptive names for the quantities the PERC1 description names in words;
the table marks each (``name_confirmed``), and the exported records say to check names
and order against the simulator's model documentation before submission.

**The mapping** (:data:`MAPPING`, :func:`perc1_from_parameters`): the PERC1 records
represent the site's **IT load** (power-electronic server PSUs); the non-IT load (cooling
drives, pumps) is outside them (a motor or other record of the composite load; the data
list says so).  As the PERC1 description suggests for mixed equipment, there is one
record per path:

``ups``
    IT load behind the UPS (share ``ups.it_share``, 0 without a UPS): ceases when the
    UPS goes to battery (below ``ups.transfer_threshold_pu``, after
    ``ups.transfer_time_s``), all of it reconnects (``Frecon`` 1) once the voltage is
    back, after ``ups.return_delay_s``, ramped over ``ups.walk_in_s``; valid for events
    up to ``ups.autonomy_s`` (``Tvalid``).  Its frequency band is the UPS's input window
    within the site's relays.
``direct``
    IT load on the grid directly: ceases below the PSUs' constant-power voltage
    (``1 / psu.current_limit_pu``) once their hold-up at their loading
    (``psu.holdup_s / psu.loading``) is spent, reconnects above ``psu.restart_pu`` after
    the reboot (``psu.reboot_s``), in a step (``Trmp`` 0; the jobs' own start-up ramp is
    the forecast's).  Its frequency band is the PSUs' input range within the relays.

Both: constant power above their cut-out (``Kvp = Kvq = 0``), no lead-lag (``Tap`` ...
``Tbq`` 0), no frequency response inside the band (``Dbfl = Dbfh = 0``), frequencies in
pu of the nominal frequency, overvoltage trip at the site's 59 relay.

:func:`perc1_parameters` returns the table (path, parameter, value, unit, from,
assumption, name_confirmed); :func:`write_perc1_dyd` writes the records as PSLF ``.dyd``.
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
CONFIRMED_NAMES = frozenset({"MWinit", "QPRatio", "Kvp", "Tvp", "Kvq", "Tvq", "Tap", "Tbp", "Taq",
                             "Tbq", "Dbfl", "Dbfh", "Fcease", "Frecon"})

#: PERC1 parameter -> (unit, from (equipment key paths) for the ups / direct path,
#: assumption)
MAPPING = {
    "fraction": ("-", "ups.it_share / 1 - ups.it_share", "share of the IT load on the path"),
    "MWinit": ("MW", "IT power at the operating point x fraction", "the forecast's"),
    "QPRatio": ("-", "ups.input_power_factor (VFI) or the PSUs' / "
                "psu.power_factor_curve at psu.loading", "Q/P, + absorbing (reactive_sign)"),
    "Kvp": ("pu/pu", "-", "0: constant power, no P washout response to a voltage step"),
    "Tvp": ("s", "-", "0 (unused with Kvp = 0)"),
    "Kvq": ("pu/pu", "-", "0: no Q washout response"),
    "Tvq": ("s", "-", "0 (unused with Kvq = 0)"),
    "Tap": ("s", "-", "0: lead-lag bypassed (converters settle within a cycle)"),
    "Tbp": ("s", "-", "0"),
    "Taq": ("s", "-", "0"),
    "Tbq": ("s", "-", "0"),
    "Dbfl": ("pu", "-", "0 with no frequency gain: no response inside the band"),
    "Dbfh": ("pu", "-", "0"),
    "Vcease": ("pu", "ups.transfer_threshold_pu / 1 / psu.current_limit_pu",
               "below it the path stops drawing"),
    "Tcease": ("s", "ups.transfer_time_s / psu.holdup_s / psu.loading",
               "UPS detection; PSU hold-up at its loading"),
    "Fcease": ("-", "-", "1: the whole path leaves together"),
    "Vrecon": ("pu", "ups.transfer_threshold_pu / psu.restart_pu",
               "voltage above which the path reconnects"),
    "Trecon": ("s", "ups.return_delay_s / psu.reboot_s", "delay before reconnecting"),
    "Trmp": ("s", "ups.walk_in_s / -", "reconnection ramp (direct: a step)"),
    "Frecon": ("-", "-", "1: all of the ceased path reconnects"),
    "Fl": ("pu", "max(81U, f0 - ups.frequency_tolerance_hz) / max(81U, "
           "psu.frequency_min_hz), over poi.frequency_hz", "low frequency cease/trip"),
    "Tfl": ("s", "protection.underfrequency_delay_s", "81U delay"),
    "Fh": ("pu", "min(81O, f0 + ups.frequency_tolerance_hz) / min(81O, "
           "psu.frequency_max_hz), over poi.frequency_hz", "high frequency cease/trip"),
    "Tfh": ("s", "protection.overfrequency_delay_s", "81O delay"),
    "Vh0": ("pu", "protection.overvoltage_pu", "59 pickup"),
    "Tvh0": ("s", "protection.overvoltage_delay_s", "59 delay"),
    "Tvalid": ("s", "ups.autonomy_s / -", "longest event for which Frecon holds"),
}


def equipment_parameters(eq: SiteEquipment, it_share: float = 1.0,
                         p_megawatts: float = 1.0) -> dict:
    """The plain dictionary :func:`perc1_from_parameters` reads: every equipment key path
    (``"psu.holdup_s"``, ...) with its value, plus ``"it_share"`` [-] and
    ``"p_megawatts"`` (facility power at the operating point) [MW]."""
    return {**dict(eq.parameters()), "it_share": float(it_share),
            "p_megawatts": float(p_megawatts)}


def _band(p: dict, lo_hz: float, hi_hz: float) -> tuple[float, float]:
    """The relays' band narrowed to ``[lo_hz, hi_hz]``, in pu of nominal."""
    f0 = float(p["poi.frequency_hz"])
    u, o = p.get("protection.underfrequency_hz"), p.get("protection.overfrequency_hz")
    r_lo = u if u is not None else 0.95 * f0
    r_hi = o if o is not None else 1.03 * f0
    return max(r_lo, lo_hz) / f0, min(r_hi, hi_hz) / f0


def perc1_from_parameters(p: dict) -> dict:
    """PERC1 records from a plain dictionary of equipment parameters (the key paths of
    :meth:`~powerlab.interconnect.equipment.SiteEquipment.parameters`, ``it_share`` and
    ``p_megawatts``; see :data:`MAPPING` for each rule).  Returns ``{"ups": {...},
    "direct": {...}}``, each ``{PERC1 name: value}``."""
    u = 0.0 if p["ups.topology"] == "none" else float(p["ups.it_share"])
    it_mw = float(p.get("p_megawatts", 1.0)) * float(p.get("it_share", 1.0))
    f0 = float(p["poi.frequency_hz"])
    pf_psu = float(np.interp(p["psu.loading"], *zip(*p["psu.power_factor_curve"])))
    q_psu = p["psu.reactive_sign"] * float(tan_phi(pf_psu))
    q_ups = p["ups.reactive_sign"] * float(tan_phi(p["ups.input_power_factor"])) \
        if p["ups.topology"] == "double_conversion" else q_psu
    common = {"Kvp": 0.0, "Tvp": 0.0, "Kvq": 0.0, "Tvq": 0.0, "Tap": 0.0, "Tbp": 0.0,
              "Taq": 0.0, "Tbq": 0.0, "Dbfl": 0.0, "Dbfh": 0.0, "Fcease": 1.0,
              "Frecon": 1.0, "Tfl": p["protection.underfrequency_delay_s"],
              "Tfh": p["protection.overfrequency_delay_s"],
              "Vh0": p["protection.overvoltage_pu"],
              "Tvh0": p["protection.overvoltage_delay_s"]}
    tol = float(p["ups.frequency_tolerance_hz"])
    ups_fl, ups_fh = _band(p, f0 - tol, f0 + tol)
    psu_fl, psu_fh = _band(p, p["psu.frequency_min_hz"], p["psu.frequency_max_hz"])
    return {
        "ups": {"fraction": u, "MWinit": it_mw * u, "QPRatio": q_ups, **common,
                "Vcease": p["ups.transfer_threshold_pu"], "Tcease": p["ups.transfer_time_s"],
                "Vrecon": p["ups.transfer_threshold_pu"], "Trecon": p["ups.return_delay_s"],
                "Trmp": p["ups.walk_in_s"], "Fl": ups_fl, "Fh": ups_fh,
                "Tvalid": p["ups.autonomy_s"]},
        "direct": {"fraction": 1.0 - u, "MWinit": it_mw * (1.0 - u), "QPRatio": q_psu,
                   **common, "Vcease": 1.0 / p["psu.current_limit_pu"],
                   "Tcease": p["psu.holdup_s"] / max(p["psu.loading"], 1e-9),
                   "Vrecon": p["psu.restart_pu"], "Trecon": p["psu.reboot_s"],
                   "Trmp": 0.0, "Fl": psu_fl, "Fh": psu_fh, "Tvalid": float("inf")},
    }


def perc1_parameters(eq: SiteEquipment, it_share: float = 1.0,
                     p_megawatts: float = 1.0) -> pd.DataFrame:
    """The PERC1 records of the site's IT load with their mapping: one row per path and
    parameter, ``path``, ``parameter``, ``value``, ``unit``, ``from`` (equipment key
    paths, ups / direct), ``assumption`` and ``name_confirmed``."""
    recs = perc1_from_parameters(equipment_parameters(eq, it_share, p_megawatts))
    rows = [{"path": path, "parameter": k, "value": float(v), "unit": MAPPING[k][0],
             "from": MAPPING[k][1], "assumption": MAPPING[k][2],
             "name_confirmed": k in CONFIRMED_NAMES}
            for path, rec in recs.items() for k, v in rec.items()]
    out = pd.DataFrame(rows)
    out.attrs.update(represents="IT load (power-electronic), one record per path; non-IT "
                     "load not included", it_share=it_share)
    return out


def write_perc1_dyd(table: pd.DataFrame, path, *, bus: int = 1, bus_name: str = "DCLOAD",
                    base_kv: float = 138.0) -> Path:
    """Write the PERC1 records (one per path with a non-zero fraction; load ids ``U`` and
    ``D``) as PSLF dynamic-data (``.dyd``) records.

    Layout (GE PSLF dyd): ``model bus "name" kV "id" : #9`` then ``"parameter" value``
    pairs, `` /`` ending a line that continues; lines starting with ``#`` are comments.
    ``fraction``, ``MWinit`` and ``Tvalid`` are comments (the load's split, its MW from
    the power flow, the validity of ``Frecon``), not record parameters.  The comment
    block says which names are not confirmed in the stored documentation: check names
    and order against the simulator's PERC1 documentation before submission.
    """
    notes = ("fraction", "MWinit", "Tvalid")
    head = [f"# PERC1 records written by powerlab: {table.attrs.get('represents', '')}",
            f"# IT share of the site's power: {table.attrs.get('it_share', float('nan')):.4g}",
            "# names not confirmed by the stored PERC1 documentation (check names and order "
            "against the simulator's model manual): " + " ".join(sorted(
                {r.parameter for r in table.itertuples() if not r.name_confirmed}
                - set(notes)))]
    lines = []
    for name, rec in table.groupby("path", sort=False):
        v = dict(zip(rec["parameter"], rec["value"]))
        if v["fraction"] <= 0:
            continue
        lines.append(f"# path {name}: fraction {v['fraction']:.4g} of the IT load, MWinit "
                     f"{v['MWinit']:.4g}, Frecon valid for events up to {v['Tvalid']:g} s")
        pairs = [f'"{k.lower()}" {x:.6g}' for k, x in v.items() if k not in notes]
        rows = [f'perc1 {int(bus)} "{bus_name[:12]}" {base_kv:.2f} '
                f'"{name[0].upper()} " : #9']
        rows += [" " + " ".join(pairs[i:i + 4]) for i in range(0, len(pairs), 4)]
        lines.append(" /\n".join(rows))
    text = "\n".join(head + lines) + "\n"
    p = Path(path)
    return atomic_write(p, lambda tmp: Path(tmp).write_text(text, "ascii"))
