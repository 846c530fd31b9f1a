"""The lever interface (powerlab.levers.lever): the defaults every hook has, the
assumptions, and the names that moved here in 0.2.0 still resolving at their old homes."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from powerlab.exceptions import PowerlabDeprecationWarning
from powerlab.levers import LEVERS, CurtailmentLever, LeverAssumptions, LeverCost, Mitigation


def test_a_bare_lever_offers_nothing_and_costs_nothing():
    class Bare(CurtailmentLever):
        name = "bare"

    lv = Bare()
    assert lv.offer_rows(None, (lv,)) == [] and lv.family_key == "bare"
    assert lv.response_s(LeverAssumptions()) == 0.0 and lv.response_text(None) is None
    c = LeverCost.none(4)
    assert (c.lost_per_tick == 0).all() and c.lost_band.shape == (3,)
    assert c.restart_gpu_hours == 0 and c.delayed_per_tick is None
    m = Mitigation()
    power = np.array([1.0, 2.0])
    assert m.job_power(None, power, None) == (power, 0.0)
    assert m.capital_usd_per_day(None) == 0.0 and m.storage_size(None) == (0.0, 0.0)


def test_the_assumptions_name_each_builtin_levers_response():
    a = LeverAssumptions(power_cap_response_s=7.0, clock_lock_response_s=3.0,
                         pause_drain_s=20.0, storage_response_s=0.5)
    got = {name: LEVERS.get(name).response_s(a) for name in LEVERS}
    assert got == {"power_cap": 7.0, "clock_lock": 3.0, "pause": 20.0, "shift_start": 0.0,
                   "storage": 0.5}
    assert LeverAssumptions().levers is None          # every registered lever


@pytest.mark.parametrize("old,name,new", [
    ("powerlab.flex", "LeverAssumptions", "powerlab.levers"),
    ("powerlab.flex", "prior_curve", "powerlab.levers"),
    ("powerlab.flex", "storage_dispatch", "powerlab.levers"),
    ("powerlab.interconnect", "SmoothingProfile", "powerlab.levers"),
    ("powerlab.interconnect", "TECHNOLOGIES", "powerlab.levers"),
])
def test_moved_names_resolve_with_a_deprecation(old, name, new, monkeypatch):
    monkeypatch.delitem(vars(importlib.import_module(old)), name, raising=False)  # again
    with pytest.warns(PowerlabDeprecationWarning, match=f"use {new}.{name} instead"):
        value = getattr(importlib.import_module(old), name)
    assert value is getattr(importlib.import_module(new), name)


def test_moved_modules_resolve_with_a_deprecation(monkeypatch):
    monkeypatch.delitem(sys.modules, "powerlab.flex.levers", raising=False)  # warn again
    with pytest.warns(PowerlabDeprecationWarning, match="powerlab.flex.levers was deprecated"):
        mod = importlib.import_module("powerlab.flex.levers")
    from powerlab.levers import site_power_range_w

    assert mod.site_power_range_w is site_power_range_w
