"""Voltage and frequency ride-through tables from the equipment model, in the form of the
ride-through sections of a large-load interconnection request.

ERCOT's large-load voltage and frequency ride-through sections and NERC's data list ask,
for each voltage (residual voltage x duration) and frequency (deviation x duration)
disturbance: does the load ride through, how much ceases (momentary cessation) and how
much trips, P and Q during and after, and how long and how fast it comes back.  Each row
here is :func:`~powerlab.interconnect.eventresponse.event_response` of the site's
equipment, scaled by the facility power before the event (the forecast's, at the
moment the table is taken):

``rides_through``
    Nothing trips (ceasing load comes back by itself).
``ceased_megawatts`` / ``tripped_megawatts``
    Power that stops drawing and returns by itself / that disconnects and needs a
    restart [MW].
``p_during_megawatts``, ``q_during_megavars``
    At the point of interconnection at the end of the event (0 at 0 pu, by
    construction) [MW], [Mvar].
``p_after_megawatts``, ``q_after_megavars``
    Just after the event, before any return or restart [MW], [Mvar].
``return_delay_s``, ``return_s``, ``ramp_back_megawatts_per_s``
    Ceased load: delay before it returns, the time its return takes, and its rate.
``restart_s``
    From the event's start until the tripped load is back (0: none tripped) [s].
``reason``
    What each path did, in words.

These are the equipment model's answers; the engine's ride-through table
(:func:`~powerlab.interconnect.ridethrough.ride_through_table`) runs the same responses
through the forecast to add the load lost against the sag-free draw and the recovery of
the restarted jobs.
"""

from __future__ import annotations

import itertools

import pandas as pd

from .equipment import SiteEquipment
from .eventresponse import EventResponse, event_response

__all__ = [
    "FREQUENCY_DEVIATIONS_HZ",
    "FREQUENCY_DURATIONS_S",
    "frequency_ride_through",
    "response_row",
    "voltage_ride_through",
]

#: Frequency deviations of the default frequency table [Hz] (60-Hz system: 56.5-62.5 Hz).
FREQUENCY_DEVIATIONS_HZ = (-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5)
#: Durations of the default frequency table [s].
FREQUENCY_DURATIONS_S = (0.1, 1.0, 10.0, 60.0, 600.0)


def response_row(r: EventResponse, p_before_w: float) -> dict:
    """One table row: the response in MW, Mvar and s at ``p_before_w`` [W]."""
    mw = float(p_before_w) / 1e6
    return {
        "rides_through": r.tripped_pu == 0.0,
        "ceased_megawatts": r.ceased_pu * mw,
        "tripped_megawatts": r.tripped_pu * mw,
        "p_during_megawatts": r.p_during_pu * mw,
        "q_during_megavars": r.q_during_pu * mw,
        "p_after_megawatts": r.p_after_pu * mw,
        "q_after_megavars": r.q_after_pu * mw,
        "return_delay_s": r.return_delay_s,
        "return_s": r.return_s,
        "ramp_back_megawatts_per_s": r.ramp_back_pu_per_s * mw,
        "restart_s": r.restart_s,
        "protection_trip": r.protection_trip,
        "reason": "; ".join(r.reasons),
    }


def voltage_ride_through(eq: SiteEquipment, p_before_w: float, it_share: float,
                         residual_voltages_pu=(0.0, 0.3, 0.5, 0.7, 0.8, 0.9),
                         durations_s=(0.02, 0.1, 0.5, 1.0, 3.0, 10.0)) -> pd.DataFrame:
    """The voltage ride-through table: one row per residual voltage and duration.

    Parameters
    ----------
    eq : SiteEquipment
    p_before_w : float
        Facility power before the event [W].
    it_share : float
        IT power / facility power before the event [-].
    residual_voltages_pu, durations_s : sequence of float
        [pu], [s].
    """
    rows = []
    for v, d in itertools.product(residual_voltages_pu, durations_s):
        r = event_response(eq, residual_voltage_pu=v, duration_s=d, it_share=it_share)
        rows.append({"residual_voltage_pu": float(v), "duration_s": float(d),
                     **response_row(r, p_before_w)})
    out = pd.DataFrame(rows)
    out.attrs.update(p_before_megawatts=p_before_w / 1e6, it_share=it_share)
    return out


def frequency_ride_through(eq: SiteEquipment, p_before_w: float, it_share: float,
                           deviations_hz=FREQUENCY_DEVIATIONS_HZ,
                           durations_s=FREQUENCY_DURATIONS_S) -> pd.DataFrame:
    """The frequency ride-through table: one row per deviation and duration (the voltage
    at 1 pu); columns as :func:`voltage_ride_through` with ``frequency_hz`` and
    ``deviation_hz`` first.  The default deviations are for 60 Hz and scale with the
    nominal frequency (x 50/60 on a 50-Hz system)."""
    scale = eq.poi.frequency_hz / 60.0 if deviations_hz is FREQUENCY_DEVIATIONS_HZ else 1.0
    rows = []
    for df, d in itertools.product([x * scale for x in deviations_hz], durations_s):
        r = event_response(eq, frequency_deviation_hz=df, duration_s=d, it_share=it_share)
        rows.append({"frequency_hz": eq.poi.frequency_hz + float(df),
                     "deviation_hz": float(df), "duration_s": float(d),
                     **response_row(r, p_before_w)})
    out = pd.DataFrame(rows)
    out.attrs.update(p_before_megawatts=p_before_w / 1e6, it_share=it_share)
    return out
