"""Independent PERC1 parameter mapping for a GPU data-centre load (scoring only).

Written without reading powerlab's interconnection code, from the public
description of the WECC / PowerWorld "PERC1" model:

* PowerWorld Simulator help, "Load Characteristic Model: PERC1" (Power
  Electronic Reconnecting and Ceasing load model), https://www.powerworld.com/WebHelp/Content/TransientModels_HTML/Load%20Characteristic%20PERC1.htm
  -- based on LDEV1 / the EPRI report "A Positive Sequence Model for Aggregated
  Representation Electric Vehicle Chargers" (L. Sundaresh, P. Matra, EPRI
  1-116982, Nov. 2022); meant for "a large number of computers such as a data
  center"; MWinit/Mvarinit from the power flow; QPRatio sets Mvarinit when used
  inside CompLoad; washouts Kvp/Tvp and Kvq/Tvq (transient voltage
  sensitivity); separate lead-lags Tap, Tbp, Taq, Tbq for P and Q; separate low
  and high frequency deadbands Dbfl, Dbfh; a cease-and-reconnect logic on a single
  path where, after reconnection, the fraction returns to
  1 - Fcease + Frecon * Fcease; several PERC1 models in CompLoad represent
  several paths.
* PowerWorld help, "Load Characteristic Model: LDEV1" (same source family).

The stored copies of these pages did not include the full parameter table, so
the threshold and timer names below (Vcease/Tcease, Vrecon/Trecon, Trmp,
Fl/Fh/Tfl/Tfh) are descriptive names for the quantities the description names
(cease, reconnect, ramp, frequency trip), in DER_A style; map them by meaning.

Modelling choice: two PERC1 paths, as the PERC1 description suggests for mixed
equipment:

* ``"ups"``: load behind double-conversion UPSs (``ups_share``). When the bus
  voltage falls below the UPS's transfer voltage the rectifier stops drawing
  and the battery carries the IT load: seen from the grid the path *ceases*
  (Fcease = 1) at once, and *all* of it comes back (Frecon = 1) once the
  voltage recovers, after the retransfer delay, ramped over the rectifier's
  walk-in time -- provided the event is shorter than the battery autonomy.
* ``"direct"``: server power supplies fed straight from the grid
  (1 - ``ups_share``). Below the PSU brown-out (undervoltage cut-out) voltage
  the PFC stage stops drawing; the bulk capacitor holds the output for the
  hold-up time. A sag shorter than the hold-up is ridden through (no loss); a
  longer one shuts the servers down (ceasing, Tcease = hold-up), and they come
  back after the restart (boot) delay, ramped over the restart ramp, in the
  proportion ``psu_restart_fraction``.

Both paths are constant-power power electronics above their cut-out: no
transient voltage sensitivity (Kvp = Kvq = 0), no lead-lag (Tap..Tbq = 0), no
frequency response (Dbfl = Dbfh = 0 with no frequency gain), and a frequency
trip outside [frequency_low_trip_hz, frequency_high_trip_hz].

Equipment dict (plain ``dict``; units in brackets)
--------------------------------------------------
Required:
    p_mw                       facility active power at the terminal [MW]
    power_factor               displacement power factor, 0 < pf <= 1 [-]
    psu_holdup_s               PSU hold-up time at the operating load [s]
    psu_undervoltage_cutout_pu PSU brown-out voltage, per unit of nominal [pu]
    psu_restart_delay_s        time from voltage recovery to servers drawing power again (boot) [s]
    psu_restart_ramp_s         ramp of the restarted load back to its level [s]
    ups_share                  fraction of p_mw behind double-conversion UPSs [-]
    ups_transfer_pu            bus voltage below which the UPS carries the load [pu]
    frequency_low_trip_hz      under-frequency trip / transfer [Hz]
    frequency_high_trip_hz     over-frequency trip / transfer [Hz]
    f0_hz                      nominal frequency [Hz]
Optional (defaults):
    power_factor_leading       False: the load absorbs vars (Q > 0) [bool]
    psu_restart_fraction       1.0: share of tripped servers that come back [-]
    psu_brownin_hysteresis_pu  0.05: PSU brown-in above brown-out [pu]
    ups_retransfer_hysteresis_pu 0.02: UPS returns to mains above transfer + this [pu]
    ups_retransfer_delay_s     2.0: voltage must be back this long before the UPS retransfers [s]
    ups_walk_in_s              10.0: UPS rectifier walk-in ramp [s]
    ups_transfer_s             0.0: detection delay of the UPS [s]
    ups_autonomy_s             300.0: battery runtime; longer events lose the UPS load [s]
    frequency_trip_delay_s     0.1: time outside the frequency band before tripping [s]

Output of :func:`perc1_parameters` (dict)
-----------------------------------------
    MWinit [MW], Mvarinit [Mvar], QPRatio [-] (Q/P, sign: + absorbing),
    pf [-], and ``paths``: {"ups": {...}, "direct": {...}}, each path with
    fraction [-], MW, Mvar, Vcease [pu], Tcease [s], Fcease [-], Vrecon [pu],
    Trecon [s], Trmp [s], Frecon [-], Fl, Fh [pu of f0], Tfl, Tfh [s],
    Kvp, Tvp, Kvq, Tvq, Tap, Tbp, Taq, Tbq, Dbfl, Dbfh, valid_event_s [s]
    (the longest event for which the path's Frecon holds) and ``source`` (a
    line per value: its rule). Plus ``final_fraction`` [-]: the share of p_mw
    back after a long deep sag (1 - sum fraction * Fcease * (1 - Frecon)).

:func:`terminal_power` evaluates the quasi-static P at the terminal during and
after a rectangular sag from these parameters (used by the self-test).
"""

from __future__ import annotations

import math

__all__ = ["perc1_parameters", "terminal_power", "DEFAULTS", "REQUIRED"]

REQUIRED = (
    "p_mw", "power_factor", "psu_holdup_s", "psu_undervoltage_cutout_pu", "psu_restart_delay_s",
    "psu_restart_ramp_s", "ups_share", "ups_transfer_pu", "frequency_low_trip_hz",
    "frequency_high_trip_hz", "f0_hz",
)
DEFAULTS = {
    "power_factor_leading": False,
    "psu_restart_fraction": 1.0,
    "psu_brownin_hysteresis_pu": 0.05,
    "ups_retransfer_hysteresis_pu": 0.02,
    "ups_retransfer_delay_s": 2.0,
    "ups_walk_in_s": 10.0,
    "ups_transfer_s": 0.0,
    "ups_autonomy_s": 300.0,
    "frequency_trip_delay_s": 0.1,
}


def _check(eq):
    missing = [k for k in REQUIRED if k not in eq]
    if missing:
        raise KeyError(f"equipment lacks {missing}")
    e = {**DEFAULTS, **eq}
    if not 0 < e["power_factor"] <= 1:
        raise ValueError("power_factor must be in (0, 1]")
    if not 0 <= e["ups_share"] <= 1:
        raise ValueError("ups_share must be in [0, 1]")
    if e["frequency_low_trip_hz"] >= e["f0_hz"] or e["frequency_high_trip_hz"] <= e["f0_hz"]:
        raise ValueError("frequency trip band must contain f0_hz")
    for k in ("psu_holdup_s", "psu_restart_delay_s", "psu_restart_ramp_s", "ups_retransfer_delay_s",
              "ups_walk_in_s", "ups_transfer_s", "ups_autonomy_s", "frequency_trip_delay_s"):
        if e[k] < 0:
            raise ValueError(f"{k} must be >= 0")
    return e


def _common(e, fraction, q_ratio):
    f0 = float(e["f0_hz"])
    return {
        "fraction": fraction,
        "MW": e["p_mw"] * fraction,
        "Mvar": e["p_mw"] * fraction * q_ratio,
        "Fl": e["frequency_low_trip_hz"] / f0,
        "Fh": e["frequency_high_trip_hz"] / f0,
        "Tfl": e["frequency_trip_delay_s"],
        "Tfh": e["frequency_trip_delay_s"],
        "Kvp": 0.0, "Tvp": 0.0, "Kvq": 0.0, "Tvq": 0.0,
        "Tap": 0.0, "Tbp": 0.0, "Taq": 0.0, "Tbq": 0.0,
        "Dbfl": 0.0, "Dbfh": 0.0,
    }


_COMMON_SOURCE = {
    "Fl": "frequency_low_trip_hz / f0_hz (PERC1 frequency cease/trip)",
    "Fh": "frequency_high_trip_hz / f0_hz",
    "Tfl": "frequency_trip_delay_s",
    "Tfh": "frequency_trip_delay_s",
    "Kvp": "0: PFC front ends regulate constant power, no transient voltage sensitivity (washout off)",
    "Kvq": "0: as Kvp",
    "Tap": "0: no lead-lag on the P path (power electronics settle within a cycle)",
    "Dbfl": "0 with no frequency gain: IT load does not respond to frequency inside the trip band",
    "MW": "p_mw * fraction (MWinit split by path)",
    "Mvar": "MW * QPRatio",
}


def perc1_parameters(equipment: dict) -> dict:
    """PERC1 parameters (two paths) for a data-centre load; see module docstring."""
    e = _check(dict(equipment))
    pf = float(e["power_factor"])
    q_ratio = math.tan(math.acos(pf)) * (-1.0 if e["power_factor_leading"] else 1.0)
    u = float(e["ups_share"])

    ups = _common(e, u, q_ratio)
    ups.update({
        "Vcease": float(e["ups_transfer_pu"]),
        "Tcease": float(e["ups_transfer_s"]),
        "Fcease": 1.0,
        "Vrecon": float(e["ups_transfer_pu"]) + float(e["ups_retransfer_hysteresis_pu"]),
        "Trecon": float(e["ups_retransfer_delay_s"]),
        "Trmp": float(e["ups_walk_in_s"]),
        "Frecon": 1.0,
        "valid_event_s": float(e["ups_autonomy_s"]),
    })
    ups["source"] = {
        **_COMMON_SOURCE,
        "Vcease": "ups_transfer_pu: below it the rectifier stops drawing, the battery carries the load",
        "Tcease": "ups_transfer_s (double conversion: no transfer gap, detection only)",
        "Fcease": "1: the whole UPS-fed load leaves the grid together",
        "Vrecon": "ups_transfer_pu + ups_retransfer_hysteresis_pu",
        "Trecon": "ups_retransfer_delay_s",
        "Trmp": "ups_walk_in_s (rectifier soft-start walk-in)",
        "Frecon": "1: IT load never lost power, all of it returns (valid up to ups_autonomy_s)",
    }

    direct = _common(e, 1.0 - u, q_ratio)
    direct.update({
        "Vcease": float(e["psu_undervoltage_cutout_pu"]),
        "Tcease": float(e["psu_holdup_s"]),
        "Fcease": 1.0,
        "Vrecon": float(e["psu_undervoltage_cutout_pu"]) + float(e["psu_brownin_hysteresis_pu"]),
        "Trecon": float(e["psu_restart_delay_s"]),
        "Trmp": float(e["psu_restart_ramp_s"]),
        "Frecon": float(e["psu_restart_fraction"]),
        "valid_event_s": math.inf,
    })
    direct["source"] = {
        **_COMMON_SOURCE,
        "Vcease": "psu_undervoltage_cutout_pu (PSU brown-out)",
        "Tcease": "psu_holdup_s: shorter sags are ridden through on the bulk capacitor",
        "Fcease": "1: identical PSUs on one bus shut down together",
        "Vrecon": "psu_undervoltage_cutout_pu + psu_brownin_hysteresis_pu (brown-in)",
        "Trecon": "psu_restart_delay_s (server boot until it draws load)",
        "Trmp": "psu_restart_ramp_s",
        "Frecon": "psu_restart_fraction (power-restore policy; 1 = all come back)",
    }

    final = 1.0 - sum(p["fraction"] * p["Fcease"] * (1.0 - p["Frecon"]) for p in (ups, direct))
    return {
        "MWinit": float(e["p_mw"]),
        "Mvarinit": float(e["p_mw"]) * q_ratio,
        "QPRatio": q_ratio,
        "pf": pf,
        "paths": {"ups": ups, "direct": direct},
        "final_fraction": final,
        "source": {
            "MWinit": "p_mw",
            "QPRatio": "tan(acos(power_factor)), negative when power_factor_leading",
            "Mvarinit": "p_mw * QPRatio",
            "final_fraction": "1 - Fcease + Frecon * Fcease per path (PERC1 description), weighted by fraction",
        },
    }


def _path_power(p, v_pu, sag_s, t_after_s, f_pu=1.0):
    """P of one path [fraction of p_mw] during (t_after_s < 0) or after an event."""
    low_v = v_pu < p["Vcease"]
    off_f = not (p["Fl"] <= f_pu <= p["Fh"])
    if t_after_s < 0:  # during the event, sag_s + t_after_s into it
        t_in = sag_s + t_after_s
        if low_v or (off_f and t_in >= p["Tfl"]):
            return 0.0  # storage carries the load (momentary) or the path ceased
        return p["fraction"]
    if (low_v or off_f) and sag_s > p["valid_event_s"]:
        return 0.0  # UPS battery exhausted: the IT load was lost (no return modelled)
    ceased = (low_v and sag_s > p["Tcease"]) or (off_f and sag_s >= p["Tfl"])
    if not ceased:
        return p["fraction"]  # never left, or ridden through on PSU hold-up
    if t_after_s < p["Trecon"]:
        return p["fraction"] * (1.0 - p["Fcease"])
    ramp = 1.0 if p["Trmp"] <= 0 else min(1.0, (t_after_s - p["Trecon"]) / p["Trmp"])
    return p["fraction"] * (1.0 - p["Fcease"] + p["Fcease"] * p["Frecon"] * ramp)


def terminal_power(params: dict, v_pu: float, sag_s: float, t_after_s: float, f_pu: float = 1.0) -> float:
    """Quasi-static active power at the terminal [MW] for a rectangular event.

    The bus sits at ``v_pu`` (and ``f_pu``) for ``sag_s`` seconds, then returns
    to 1 pu. ``t_after_s`` < 0 asks for the power during the event (that many
    seconds before its end); >= 0 for the power that long after it.
    """
    total = sum(_path_power(p, v_pu, sag_s, t_after_s, f_pu) for p in params["paths"].values())
    return params["MWinit"] * total
