"""What the site's equipment does in a voltage or frequency event: the one ride-through
model of powerlab.

:func:`event_response` takes the equipment (:class:`~powerlab.interconnect.equipment.SiteEquipment`),
an event (residual voltage and/or frequency deviation, lasting ``duration_s``) and the
IT share of the facility power before it, and returns an :class:`EventResponse`: per unit
of the facility power before the event, the power that **continues** at the point of
interconnection, that **ceases** (stops drawing from the grid and comes back by itself:
IT load on UPS battery, PSUs running from their bulk capacitors, drives at reduced
voltage) and that **trips** (disconnects and needs a restart: PSUs that dropped out,
drives whose contactors opened, the whole site when its own protection operates), with
the P and Q during and just after the event, the time until the ceased load is back
(UPS return delay and walk-in, the ramp back) and until the tripped load is (restarts).

The rules, per path (module :mod:`~powerlab.interconnect.equipment` gives each
parameter's source):

1. **Protection** (ANSI 27/59/81): a pickup held for its delay trips the whole site at the
   POI; IT behind a UPS keeps running on battery if the autonomy lasts until the
   reconnection, the rest trips.
2. **IT behind the UPS** (share ``ups.it_share``): below ``ups.transfer_threshold_pu``
   or beyond ``ups.frequency_tolerance_hz`` it goes to battery (ceases at the POI); with
   a break (``transfer_time_s``, VI/VFD) longer than the PSUs' hold-up at their loading it
   trips; an event longer than ``autonomy_s`` trips it.  Back within tolerance it returns
   after ``return_delay_s`` over ``walk_in_s``.
3. **IT on the grid directly**: PSUs outside ``[frequency_min_hz, frequency_max_hz]``
   trip; at or above ``psu.constant_power_pu`` they draw constant power; below it the
   grid delivers ``v / constant_power_pu`` of their power and the bulk capacitor the rest
   until :meth:`~powerlab.interconnect.equipment.PowerSupplies.dropout_s`: an event
   longer than that trips them.
4. **Auxiliaries** (the non-IT share): below ``dropout_pu`` for longer than
   ``dropout_s`` they trip (``restart_s``); shorter, they draw ``v**2`` of their power
   (impedance-like); at or above ``dropout_pu`` constant power.

At 0 pu every path draws nothing: P at the POI during the event is 0 by construction
(a load cannot draw power from a bus at zero voltage: ``P = V I cos(phi) = 0``).

:func:`engine_sag` turns a response into the engine's
:class:`~powerlab.site.disturbances.VoltageSag`, so a forecast with the sag (the
ride-through table, ``comply --sags``, ``size-mitigation --sags``) simulates the same
ceasing, tripping and restarts.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..exceptions import ScenarioError
from ..site.disturbances import VoltageSag
from .equipment import SiteEquipment, equipment_from_scenario, tan_phi

__all__ = [
    "SUPPLY_TRIP_ASSUMPTION",
    "EventResponse",
    "engine_sag",
    "event_response",
    "nominal_it_share",
    "scenario_with_sags",
    "supply_trip_assumption",
]

#: The words printed with every ride-through figure derived from the model.
SUPPLY_TRIP_ASSUMPTION = ("supplies trip per the equipment model "
                          "(powerlab.interconnect.eventresponse): PSUs when the sag outlasts "
                          "their hold-up, UPS load to battery below its transfer threshold, "
                          "the site on its own 27/59/81 protection")


@dataclass(frozen=True)
class EventResponse:
    """The site's response to one event, per unit of the facility power before it.

    Attributes
    ----------
    residual_voltage_pu, frequency_deviation_hz, duration_s : float
        The event [pu], [Hz], [s].
    p_during_pu, q_during_pu : float
        P and Q at the POI at the end of the event [pu of P before].
    ceased_pu, tripped_pu : float
        Power that ceased (comes back by itself) and that tripped [pu of P before].
    p_after_pu, q_after_pu : float
        Just after the event, before any return or restart [pu of P before].
    it_tripped, ups_on_battery, aux_tripped : float
        Shares of the IT load that tripped and that is on UPS battery, and of the non-IT
        load that tripped [-].
    protection_trip : bool
    return_delay_s, return_s : float
        Ceased load: from the end of the event to the start of its return, and the time
        its return takes (0 when none ceased) [s].
    restart_s : float
        From the event's start until tripped load is back (0 when none tripped) [s].
    ramp_back_pu_per_s : float
        Rate of the ceased load's return [pu of P before per s].
    reasons : tuple of str
        What each path did, in words.
    """

    residual_voltage_pu: float
    frequency_deviation_hz: float
    duration_s: float
    p_during_pu: float
    q_during_pu: float
    ceased_pu: float
    tripped_pu: float
    p_after_pu: float
    q_after_pu: float
    it_tripped: float
    ups_on_battery: float
    aux_tripped: float
    protection_trip: bool
    return_delay_s: float
    return_s: float
    restart_s: float
    ramp_back_pu_per_s: float
    reasons: tuple


def _protection(eq: SiteEquipment, v: float, df: float, d: float) -> str:
    """The relay that trips the site, or ''."""
    pr, f = eq.protection, eq.poi.frequency_hz + df
    f_lo, f_hi = pr.frequency_band_hz(eq.poi.frequency_hz)
    if v < pr.undervoltage_pu and d > pr.undervoltage_delay_s:
        return f"27 undervoltage ({v:g} < {pr.undervoltage_pu:g} pu for > " \
               f"{pr.undervoltage_delay_s:g} s)"
    if v > pr.overvoltage_pu and d > pr.overvoltage_delay_s:
        return f"59 overvoltage ({v:g} > {pr.overvoltage_pu:g} pu)"
    if f < f_lo and d > pr.underfrequency_delay_s:
        return f"81U underfrequency ({f:g} < {f_lo:g} Hz for > " \
               f"{pr.underfrequency_delay_s:g} s)"
    if f > f_hi and d > pr.overfrequency_delay_s:
        return f"81O overfrequency ({f:g} > {f_hi:g} Hz for > " \
               f"{pr.overfrequency_delay_s:g} s)"
    return ""


def _ups_path(eq: SiteEquipment, v: float, df: float, d: float) -> tuple[str, str]:
    """What the UPS share does: ('continue' | 'cease' | 'trip', reason)."""
    ups, psu = eq.ups, eq.psu
    if ups.share <= 0:
        return "continue", "no UPS"
    out = v < ups.transfer_threshold_pu or abs(df) > ups.frequency_tolerance_hz
    if not out:
        return "continue", "UPS input within tolerance"
    holdup = psu.holdup_s / max(psu.loading, 1e-9)
    if ups.transfer_time_s > holdup:
        return "trip", (f"UPS transfer break {ups.transfer_time_s * 1e3:g} ms > PSU "
                        f"hold-up {holdup * 1e3:g} ms")
    if d > ups.autonomy_s:
        return "trip", f"event longer than the UPS autonomy ({ups.autonomy_s:g} s)"
    return "cease", "UPS load on battery"


def _psu_path(eq: SiteEquipment, v: float, df: float, d: float) -> tuple[str, float, str]:
    """What the directly fed PSUs do: (state, share of their power still drawn, reason)."""
    psu, f = eq.psu, eq.poi.frequency_hz + df
    if not psu.frequency_min_hz <= f <= psu.frequency_max_hz:
        return "trip", 0.0, f"PSU input frequency {f:g} Hz out of range"
    if v >= psu.constant_power_pu - 1e-12:
        return "continue", 1.0, "PSUs at constant power"
    if d > psu.dropout_s(v):
        return "trip", 0.0, (f"PSUs drop out after {psu.dropout_s(v) * 1e3:.3g} ms "
                             "(hold-up exhausted)")
    return "cease", v / psu.constant_power_pu, "PSUs on current limit and hold-up"


def _aux_path(eq: SiteEquipment, v: float, d: float) -> tuple[str, float, str]:
    aux = eq.auxiliaries
    if v >= aux.dropout_pu:
        return "continue", 1.0, "auxiliaries ride through"
    if d > aux.dropout_s:
        return "trip", 0.0, "auxiliaries' contactors and drives drop out"
    return "cease", v * v, "auxiliaries at reduced voltage"


def event_response(eq: SiteEquipment, *, residual_voltage_pu: float = 1.0,
                   frequency_deviation_hz: float = 0.0, duration_s: float,
                   it_share: float = 0.8) -> EventResponse:
    """The site's response to one voltage and/or frequency event (module docstring).

    Parameters
    ----------
    eq : SiteEquipment
    residual_voltage_pu : float, default 1
        Voltage during the event [pu].
    frequency_deviation_hz : float, default 0
        Frequency during the event minus nominal [Hz].
    duration_s : float
        [s].
    it_share : float, default 0.8
        IT power / facility power before the event (the forecast's) [-].
    """
    v, df, d = max(0.0, float(residual_voltage_pu)), float(frequency_deviation_hz), \
        float(duration_s)
    s_it = min(max(float(it_share), 0.0), 1.0)
    u = eq.ups.share
    relay = _protection(eq, v, df, d)
    if relay:
        return _tripped_by_protection(eq, v, df, d, s_it, relay)
    ups_state, ups_why = _ups_path(eq, v, df, d)
    psu_state, psu_draw, psu_why = _psu_path(eq, v, df, d)
    aux_state, aux_draw, aux_why = _aux_path(eq, v, d)
    if v == 0.0:            # nothing is drawn from a bus at 0 V, whatever its state
        psu_draw = aux_draw = 0.0
    shares = {"ups": s_it * u, "psu": s_it * (1.0 - u), "aux": 1.0 - s_it}
    tan = _path_tan(eq)
    during = {"ups": 1.0 if ups_state == "continue" else 0.0,
              "psu": psu_draw if psu_state != "trip" else 0.0,
              "aux": aux_draw if aux_state != "trip" else 0.0}
    if ups_state == "continue" and v == 0.0:
        during["ups"] = 0.0
    tripped = (shares["ups"] * (ups_state == "trip") + shares["psu"] * (psu_state == "trip")
               + shares["aux"] * (aux_state == "trip"))
    p_during = sum(shares[k] * during[k] for k in shares)
    after = {"ups": 1.0 if ups_state == "continue" else 0.0,
             "psu": 0.0 if psu_state == "trip" else 1.0,
             "aux": 0.0 if aux_state == "trip" else 1.0}
    p_after = sum(shares[k] * after[k] for k in shares)
    on_battery = u if ups_state == "cease" else 0.0
    ceased_ups = shares["ups"] * on_battery / u if u else 0.0
    it_trip = (shares["ups"] > 0 and ups_state == "trip") or (shares["psu"] > 0 and
                                                                psu_state == "trip")
    restart = max(eq.psu.reboot_s if it_trip else 0.0,
                  eq.auxiliaries.restart_s if shares["aux"] > 0 and aux_state == "trip"
                  else 0.0)
    walk = eq.ups.walk_in_s if on_battery else 0.0
    return EventResponse(
        residual_voltage_pu=v, frequency_deviation_hz=df, duration_s=d,
        p_during_pu=p_during, q_during_pu=sum(shares[k] * during[k] * tan[k] for k in tan),
        ceased_pu=max(0.0, 1.0 - p_during - tripped), tripped_pu=tripped,
        p_after_pu=p_after, q_after_pu=sum(shares[k] * after[k] * tan[k] for k in tan),
        it_tripped=(u * (ups_state == "trip") + (1.0 - u) * (psu_state == "trip")),
        ups_on_battery=on_battery,
        aux_tripped=float(aux_state == "trip" and shares["aux"] > 0),
        protection_trip=False,
        return_delay_s=eq.ups.return_delay_s if on_battery else 0.0, return_s=walk,
        restart_s=restart + (d if restart else 0.0),
        ramp_back_pu_per_s=ceased_ups / walk if walk > 0 else 0.0,
        reasons=(f"UPS: {ups_why}", f"direct PSUs: {psu_why}", f"auxiliaries: {aux_why}"))


def _path_tan(eq: SiteEquipment) -> dict:
    """Q/P of each path, signed (the PSUs at their loading) [-]."""
    vfi = eq.ups.topology == "double_conversion"
    psu_t = eq.psu.reactive_sign * float(tan_phi(eq.psu.power_factor(eq.psu.loading)))
    return {"ups": eq.ups.reactive_sign * float(tan_phi(eq.ups.input_power_factor))
            if vfi else psu_t, "psu": psu_t,
            "aux": eq.auxiliaries.reactive_sign * float(tan_phi(eq.auxiliaries.power_factor))}


def _tripped_by_protection(eq: SiteEquipment, v: float, df: float, d: float, s_it: float,
                           relay: str) -> EventResponse:
    """The site disconnected by its own relay: nothing at the POI until reconnection."""
    pr, u = eq.protection, eq.ups.share
    carried = u if eq.ups.autonomy_s >= pr.reconnect_s + d else 0.0
    restart = d + pr.reconnect_s + max(eq.psu.reboot_s if carried < 1 else 0.0,
                                       eq.auxiliaries.restart_s)
    return EventResponse(
        residual_voltage_pu=v, frequency_deviation_hz=df, duration_s=d, p_during_pu=0.0,
        q_during_pu=0.0, ceased_pu=0.0, tripped_pu=1.0, p_after_pu=0.0, q_after_pu=0.0,
        it_tripped=1.0 - carried, ups_on_battery=carried, aux_tripped=1.0,
        protection_trip=True, return_delay_s=pr.reconnect_s + eq.ups.return_delay_s,
        return_s=eq.ups.walk_in_s if carried else 0.0, restart_s=restart,
        ramp_back_pu_per_s=(s_it * carried / eq.ups.walk_in_s) if carried and
        eq.ups.walk_in_s > 0 else 0.0,
        reasons=(f"protection: {relay} trips the site",))


def engine_sag(resp: EventResponse, at_utc, *, name: str = "sag", eq: SiteEquipment,
               it_share: float) -> VoltageSag:
    """The engine's :class:`~powerlab.site.disturbances.VoltageSag` that simulates
    ``resp`` (same ceasing, tripping, UPS return and restarts).

    ``cease_fraction`` is the share of the grid power left after the UPS transfer and
    the trips that ceases during the sag, so that P during the sag is ``p_during_pu``
    of the power before (0 exactly at 0 pu).
    """
    s_it = min(max(float(it_share), 0.0), 1.0)
    trip = resp.it_tripped
    ups = min(1.0, resp.ups_on_battery / (1.0 - trip)) if trip < 1 else 0.0
    left = 1.0 - s_it * (trip + resp.ups_on_battery) - (1.0 - s_it) * resp.aux_tripped
    cease = 1.0 if resp.p_during_pu <= 0 or left <= 0 else \
        min(1.0, max(0.0, 1.0 - resp.p_during_pu / left))
    outage = resp.duration_s + (eq.protection.reconnect_s if resp.protection_trip else
                                0.0) + eq.psu.reboot_s
    return VoltageSag(
        name=name, at_utc=pd.Timestamp(at_utc), residual_voltage_pu=resp.residual_voltage_pu,
        duration_s=resp.duration_s, trip_fraction=trip, ups_fraction=ups,
        ups_return_s=resp.return_s, outage_s=max(outage, resp.duration_s),
        cease_fraction=cease, ups_return_delay_s=resp.return_delay_s,
        aux_trip_fraction=resp.aux_tripped,
        aux_outage_s=(resp.duration_s + (eq.protection.reconnect_s if resp.protection_trip
                                         else 0.0) + eq.auxiliaries.restart_s)
        if resp.aux_tripped else 0.0)


def supply_trip_assumption(eq: SiteEquipment) -> str:
    """The supply-trip assumption in one line, with the parameters that decide it."""
    psu, ups = eq.psu, eq.ups
    return (f"{SUPPLY_TRIP_ASSUMPTION}; PSU hold-up {psu.holdup_s * 1e3:g} ms at rated "
            f"load ({psu.holdup_s / max(psu.loading, 1e-9) * 1e3:g} ms at "
            f"{psu.loading:g} loading), UPS {ups.topology} on {ups.share:.0%} of IT "
            f"below {ups.transfer_threshold_pu:g} pu, protection 27 at "
            f"{eq.protection.undervoltage_pu:g} pu / {eq.protection.undervoltage_delay_s:g} "
            "s")



def nominal_it_share(scenario) -> float:
    """IT power / facility power the engine's sags are calibrated with: ``1 / PUE`` of
    the scenario's site (0.8 without a PUE) [-].  The same for every caller, so the same
    sag is the same engine disturbance in the ride-through table, ``comply --sags`` and
    ``size-mitigation --sags``."""
    pue = getattr(getattr(scenario, "site", None), "pue", None)
    return 1.0 / pue if pue and pue >= 1.0 else 0.8


def scenario_with_sags(scenario, sags: pd.DataFrame, equipment: SiteEquipment | None = None):
    """The scenario with voltage sags given as a table (``timestamp``, ``duration_s``,
    ``residual_voltage_pu``; None or empty: none) added to its disturbances, each as the
    equipment model's response (:func:`engine_sag`; equipment default: the scenario's);
    its own sags that state no effect (``from_model``) take the model's too."""
    eq = equipment or equipment_from_scenario(scenario)
    share = nominal_it_share(scenario)
    own = tuple(engine_sag(event_response(eq, residual_voltage_pu=d.residual_voltage_pu,
                                          duration_s=d.duration_s, it_share=share),
                           d.at_utc, name=d.name, eq=eq, it_share=share)
                if getattr(d, "from_model", False) else d
                for d in getattr(scenario, "disturbances", ()))
    names = {d.name for d in own}
    add = []
    for i, row in enumerate(() if sags is None else sags.itertuples(index=False)):
        t0 = pd.Timestamp(row.timestamp)
        for d in own:
            d0 = pd.Timestamp(d.at_utc)
            if (t0 < d0 + pd.Timedelta(seconds=float(d.duration_s))
                    and d0 < t0 + pd.Timedelta(seconds=float(row.duration_s))):
                raise ScenarioError(
                    f"sag {i + 1} of the given sags ({t0}, {float(row.duration_s):g} s) "
                    f"overlaps the scenario's own sag {d.name!r} ({d0}, "
                    f"{float(d.duration_s):g} s): the load would be counted lost twice; "
                    "give one or the other", key="sags")
        resp = event_response(eq, residual_voltage_pu=float(row.residual_voltage_pu),
                              duration_s=float(row.duration_s), it_share=share)
        name = f"given_sag{i}"
        while name in names:
            name += "_"
        add.append(engine_sag(resp, pd.Timestamp(row.timestamp), name=name, eq=eq,
                              it_share=share))
    return scenario.replace(disturbances=own + tuple(add))
