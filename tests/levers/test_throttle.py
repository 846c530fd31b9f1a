"""The throttling levers (powerlab.levers.throttle, powercap, clocklock): which lever a
target gets by its response, and the offer's rows of the family (one forecast per limit,
a row per member, in the columns of flex_offer.csv)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.flex import flex_offer
from powerlab.levers import LEVERS, LeverAssumptions, OfferRow, pick_throttle
from powerlab.site import read_scenario

REPO = Path(__file__).resolve().parents[2]
CAP, LOCK = LEVERS.get("power_cap"), LEVERS.get("clock_lock")
A = LeverAssumptions()          # power cap 5 s, clock lock 2 s


@pytest.mark.parametrize("allowed,available_s,want", [
    ((CAP, LOCK), None, CAP),          # known in advance: a cap (it bounds the power)
    ((CAP, LOCK), 5.0, CAP),           # the cap's response fits exactly
    ((CAP, LOCK), 4.9, LOCK),          # it does not: the faster lock
    ((CAP, LOCK), 1.0, LOCK),          # not even the lock fits: the fastest anyway
    ((CAP,), 1.0, CAP),                # only a cap allowed: a cap, late
    ((LOCK,), None, LOCK),
    ((), None, LOCK),                  # none allowed: the last registered one's timing
])
def test_the_throttling_lever_by_its_response(allowed, available_s, want):
    assert pick_throttle(allowed, (CAP, LOCK), available_s, A) is want


def test_the_lever_follows_the_assumed_responses():
    slow_lock = dataclasses.replace(A, power_cap_response_s=1.0, clock_lock_response_s=3.0)
    assert pick_throttle((CAP, LOCK), (CAP, LOCK), 2.0, slow_lock) is CAP
    assert CAP.response_s(slow_lock) == 1.0 and LOCK.response_s(slow_lock) == 3.0


def test_offer_rows_are_the_documented_columns():
    """OfferRow's fields are flex_offer.csv's columns in order (the offer adds
    shed_pct_of_it after the shed)."""
    doc = ("lever, power_limit_w, clock_sm_mhz, shed_megawatts, shed_megawatts_p05, "
           "shed_megawatts_p95, notice_s, ramp_time_s, hold_max_s, step_rate_loss_pct, "
           "step_rate_loss_pct_lower, step_rate_loss_pct_upper, lost_gpu_hours_per_hour, "
           "restart_gpu_hours, extra_checkpoint_writes, restart_risk_probability, note")
    row = OfferRow.of("x", (1.0, 0.5, 1.5), ramp_time_s=2.0).as_dict()
    assert list(row) == doc.split(", ")
    assert (row["shed_megawatts"], row["shed_megawatts_p05"], row["shed_megawatts_p95"]) == (
        1.0, 0.5, 1.5)
    assert np.isnan(row["power_limit_w"]) and row["note"] == ""


def test_cap_and_lock_share_each_limits_forecast():
    """Per limit, one forecast gives the cap's and the lock's rows: the same shed and
    cost, the lock with the curve's clock and its faster response."""
    sc = read_scenario(REPO / "data/scenarios/small.yaml")
    rows = flex_offer(sc, levels_w=[500.0, 300.0], draws=2).rows
    thr = rows[rows["lever"].isin(["power_cap", "clock_lock"])]
    assert list(thr["lever"]) == ["power_cap", "clock_lock"] * 2
    assert list(thr["power_limit_w"]) == [500.0, 500.0, 300.0, 300.0]
    for _, pair in thr.groupby("power_limit_w"):
        cap, lock = pair.iloc[0], pair.iloc[1]
        cols = ["shed_megawatts", "shed_megawatts_p05", "step_rate_loss_pct",
                "lost_gpu_hours_per_hour"]
        pd.testing.assert_series_equal(cap[cols], lock[cols], check_names=False)
        assert np.isnan(cap["clock_sm_mhz"]) and lock["clock_sm_mhz"] > 0
        assert (cap["ramp_time_s"], lock["ramp_time_s"]) == (5.0, 2.0)
    assert thr["shed_megawatts"].iloc[2] > thr["shed_megawatts"].iloc[0] > 0
