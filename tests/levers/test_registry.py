"""The lever registry (powerlab.levers.registry): the planners iterate over it, so a lever
defined here, in this test module only, is offered by the flexibility offer and used by
the curtailment plan without any other file changing (docs/contributing.md, "Adding a
lever", is this lever)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from powerlab.exceptions import PowerlabError
from powerlab.flex import flex_offer, plan_curtailment
from powerlab.levers import (
    LEVERS,
    MITIGATIONS,
    CurtailmentLever,
    LeverAssumptions,
    OfferRow,
    register_lever,
    site_power_range_w,
    unregister_lever,
)
from powerlab.limits import read_requirements
from powerlab.site import read_scenario
from tests.conftest import make_targets

REPO = Path(__file__).resolve().parents[2]


class SheddableLoad(CurtailmentLever):
    """A site load outside the GPUs (50 kW of office cooling, say) that is switched off
    at once and for as long as asked, at no training cost."""

    name = "sheddable_load"
    merit_order = 0          # first in the plan's table of levers: it costs no training
    plan_phase = 0           # its step runs before every other lever's
    reduces_it = False       # the GPUs draw on: it sheds outside them
    default_response_s = 0.5
    power_w = 50e3

    def offer_rows(self, offer, members):
        mw = self.power_w / 1e6
        return [OfferRow.of(self.name, (mw, mw, mw),
                            ramp_time_s=self.response_s(offer.assumptions),
                            hold_max_s=offer.hold_max_s, note="site load switched off")]

    def allocate(self, state, members):
        shed = np.minimum(state.need, self.power_w)
        state.need = state.need - shed
        state.shed[self.name] = shed

    def site_offset_w(self, ls):
        return ls.shed_w[self.name]


@pytest.fixture
def sheddable():
    """The lever registered for one test, and removed after it."""
    register_lever(SheddableLoad)
    try:
        yield SheddableLoad
    finally:
        unregister_lever(SheddableLoad.name)


@pytest.fixture(scope="module")
def small():
    return read_scenario(REPO / "data/scenarios/small.yaml")


def test_the_builtin_levers_in_the_order_of_the_offer():
    assert tuple(LEVERS) == ("power_cap", "clock_lock", "pause", "shift_start", "storage")
    assert tuple(MITIGATIONS) == ("smoothing", "filler", "stagger", "storage")
    assert LEVERS.get("storage") is MITIGATIONS.get("storage")       # one class, both
    fams = [(first.name, [m.name for m in members]) for first, members in LEVERS.families()]
    assert fams[0] == ("power_cap", ["power_cap", "clock_lock"])     # one family: the caps
    assert [lv.name for lv in sorted(LEVERS.objects(), key=lambda x: x.merit_order)] == [
        "shift_start", "storage", "power_cap", "clock_lock", "pause"]


def test_select_keeps_the_registry_order_and_names_an_unknown_lever():
    assert [lv.name for lv in LEVERS.select(["storage", "pause"])] == ["pause", "storage"]
    assert LEVERS.select("pause")[0].name == "pause" and LEVERS.select(()) == ()
    with pytest.raises(PowerlabError, match="unknown lever 'battery'; levers are "
                       "power_cap, clock_lock, pause, shift_start, storage"):
        LEVERS.select(["power_cap", "battery"])


def test_register_refuses_a_duplicate_and_what_is_no_lever(sheddable):
    assert "sheddable_load" in LEVERS and "sheddable_load" not in MITIGATIONS
    with pytest.raises(PowerlabError, match="registered already"):
        register_lever(SheddableLoad)
    with pytest.raises(PowerlabError, match="neither"):
        register_lever(dict)


def test_unregister_removes_the_lever():
    register_lever(SheddableLoad)
    unregister_lever("sheddable_load")
    assert "sheddable_load" not in LEVERS and len(LEVERS) == 5
    with pytest.raises(PowerlabError, match="no lever or mitigation named"):
        unregister_lever("sheddable_load")


def test_a_lever_defined_in_a_test_is_offered(sheddable, small):
    off = flex_offer(small, levels_w=[400.0], draws=2)
    assert list(off.rows["lever"]) == ["power_cap", "clock_lock", "pause", "shift_start",
                                       "storage", "sheddable_load"]
    row = off.rows.set_index("lever").loc["sheddable_load"]
    assert row["shed_megawatts"] == pytest.approx(0.05) and row["ramp_time_s"] == 0.5
    assert row["step_rate_loss_pct"] == 0 and row["note"] == "site load switched off"
    _, full, _ = site_power_range_w(small)
    assert row["shed_pct_of_it"] == pytest.approx(100 * 0.05e6 / full)


def test_a_lever_defined_in_a_test_is_planned_first_and_spares_the_caps(sheddable, small):
    """A 0.88-of-full cap on small.yaml for 30 min (a 0.115 MW shed): with the sheddable
    load the plan takes its 0.05 MW first (merit order 0, step before the others), the
    caps shed that much less, and every target is still met in every draw."""
    spec = read_requirements(REPO / "data/requirements/small_site_example.yaml")
    _, full, _ = site_power_range_w(small)
    tg = make_targets([("2025-06-02T12:20Z", "2025-06-02T12:50Z", 0.88 * full, None)])
    with_it = plan_curtailment(small, tg, spec=spec, draws=2)
    without = plan_curtailment(small, tg, spec=spec, draws=2, simulate=False,
                               assumptions=LeverAssumptions(levers=tuple(
                                   x for x in LEVERS if x != "sheddable_load")))
    lv = with_it.lever_frame()
    assert lv["lever"].iloc[0] == "sheddable_load" and lv["used"].iloc[0]
    assert lv["peak_shed_megawatts"].iloc[0] == pytest.approx(0.05)
    assert lv["lost_gpu_hours"].iloc[0] == 0 and lv["jobs"].iloc[0] == ""
    assert "shed_megawatts[sheddable_load]" in with_it.schedule
    assert "sheddable_load" in with_it.levers_allowed
    cap = lv.set_index("lever").loc["power_cap", "shed_megawatt_hours"]
    cap0 = without.lever_frame().set_index("lever").loc["power_cap", "shed_megawatt_hours"]
    assert cap < cap0 - 0.02                  # 0.05 MW for 30 min: 0.025 MWh less
    assert with_it.lost_gpu_hours < without.lost_gpu_hours
    assert with_it.share_met == 1.0 and with_it.targets["met"].all()
