"""Scoring against the blind PERC1 mapping (tests/blind/perc1_ref.py, written from the
PERC1 sources without reading powerlab's code; used only to score, never edited).

The reference takes a plain dict of equipment facts and returns two PERC1 paths, "ups"
and "direct"; powerlab's :func:`~powerlab.interconnect.perc1.perc1_from_parameters`
takes the equipment model's key paths.  The adapter below translates one into the other
by meaning (the reference's docstring names what each of its inputs is):

* ``p_mw`` = the IT power the PERC1 records represent (facility power x IT share);
* ``psu_undervoltage_cutout_pu`` = the PSUs' ceasing voltage, ``1 / current_limit_pu``;
  ``psu_holdup_s`` (at the operating load) = ``holdup_s / loading``; brown-in hysteresis
  = ``restart_pu`` minus that; restart delay = ``reboot_s``, ramp 0 (a step);
* ``ups_transfer_pu``, ``ups_transfer_s``, ``ups_retransfer_delay_s``,
  ``ups_walk_in_s``, ``ups_autonomy_s`` = the UPS settings; retransfer hysteresis 0;
* the reference has one power factor and one frequency band for both paths: each path is
  compared with a call given that path's power factor and band (the band within the
  relays; delays of 81U and 81O equal).
"""

import math

import numpy as np
import pytest

from powerlab.interconnect.equipment import parse_equipment
from powerlab.interconnect.perc1 import equipment_parameters, perc1_from_parameters
from tests.blind.perc1_ref import perc1_parameters as ref_perc1

COMPARED = ("Vcease", "Tcease", "Fcease", "Vrecon", "Trecon", "Frecon", "Fl", "Fh", "Tfl",
            "Tfh", "Kvp", "Tvp", "Kvq", "Tvq", "Tap", "Tbp", "Taq", "Tbq", "Dbfl", "Dbfh")


def _random_equipment(rng):
    delay = float(rng.uniform(0.1, 2.0))
    return parse_equipment({
        "psu": {"holdup_s": float(rng.uniform(0.008, 0.03)),
                "loading": float(rng.uniform(0.3, 1.0)),
                "current_limit_pu": float(rng.uniform(1.2, 1.6)),
                "restart_pu": float(rng.uniform(0.85, 0.95)),
                "reboot_s": float(rng.uniform(60, 600)),
                "power_factor_curve": [[0.0, float(rng.uniform(0.9, 0.99))],
                                       [1.0, float(rng.uniform(0.9, 0.99))]]},
        "ups": {"topology": "double_conversion", "it_share": float(rng.uniform(0, 1)),
                "transfer_threshold_pu": float(rng.uniform(0.7, 0.9)),
                "transfer_time_s": float(rng.uniform(0, 0.004)),
                "return_delay_s": float(rng.uniform(0, 5)),
                "walk_in_s": float(rng.uniform(2, 20)),
                "autonomy_s": float(rng.uniform(60, 900)),
                "frequency_tolerance_hz": float(rng.uniform(1, 4)),
                "input_power_factor": float(rng.uniform(0.95, 1.0))},
        "protection": {"underfrequency_delay_s": delay, "overfrequency_delay_s": delay}})


def _ref_path(eq, p: dict, path: str, rec: dict, it_mw: float) -> dict:
    """The reference's record of ``path``, from the same equipment."""
    f0 = eq.poi.frequency_hz
    pf = 1.0 / math.sqrt(1.0 + rec["QPRatio"] ** 2)
    cut = 1.0 / eq.psu.current_limit_pu
    facts = dict(
        p_mw=it_mw, power_factor=pf, power_factor_leading=rec["QPRatio"] < 0,
        psu_holdup_s=eq.psu.holdup_s / eq.psu.loading, psu_undervoltage_cutout_pu=cut,
        psu_brownin_hysteresis_pu=eq.psu.restart_pu - cut,
        psu_restart_delay_s=eq.psu.reboot_s, psu_restart_ramp_s=0.0,
        ups_share=1.0 if path == "ups" else 0.0,
        ups_transfer_pu=eq.ups.transfer_threshold_pu, ups_transfer_s=eq.ups.transfer_time_s,
        ups_retransfer_hysteresis_pu=0.0, ups_retransfer_delay_s=eq.ups.return_delay_s,
        ups_walk_in_s=eq.ups.walk_in_s, ups_autonomy_s=eq.ups.autonomy_s,
        frequency_low_trip_hz=rec["Fl"] * f0, frequency_high_trip_hz=rec["Fh"] * f0,
        frequency_trip_delay_s=eq.protection.underfrequency_delay_s, f0_hz=f0)
    out = ref_perc1(facts)
    return out["paths"][path], out


@pytest.mark.parametrize("seed", range(40))
def test_perc1_agrees_with_the_blind_reference(seed):
    rng = np.random.default_rng(seed)
    eq = _random_equipment(rng)
    share, p_mw = float(rng.uniform(0.6, 0.95)), float(rng.uniform(5, 300))
    mine = perc1_from_parameters(equipment_parameters(eq, share, p_mw))
    for path, rec in mine.items():
        ref, whole = _ref_path(eq, equipment_parameters(eq), path, rec, p_mw * share)
        for k in COMPARED:
            assert rec[k] == pytest.approx(ref[k], rel=1e-9, abs=1e-12), (path, k)
        assert rec["Trmp"] == pytest.approx(ref["Trmp"])
        assert rec["Tvalid"] == pytest.approx(ref["valid_event_s"])
        assert rec["QPRatio"] == pytest.approx(whole["QPRatio"], rel=1e-9)
        assert rec["MWinit"] == pytest.approx(ref["MW"] * rec["fraction"], rel=1e-9)
