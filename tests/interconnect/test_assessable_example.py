"""A bundled scenario with disturbances and a requirement set it can be sized against
(issue 33.6): every requirement assessable at the scenario's tick, options found."""

import pytest

from powerlab.data import bundled_path
from powerlab.interconnect.assessability import assess
from powerlab.interconnect.compliance import Compliance
from powerlab.interconnect.sizing import size_mitigation
from powerlab.limits import read_requirements
from powerlab.site.scenario import read_scenario

SCENARIO = bundled_path("scenarios", "small_disturbed.yaml")
SPEC = bundled_path("requirements", "small_disturbed_example.yaml")


def test_the_pair_is_assessable_without_an_engine_run():
    sc = read_scenario(SCENARIO)
    spec = read_requirements(SPEC)
    assert len(sc.disturbances) == 1
    assert {r.kind for r in spec.requirements} == {"ramp", "deviation", "oscillation",
                                                   "step", "ride_through"}
    found = assess(sc, Compliance(spec), None)
    assert found.ok, found.text()


@pytest.mark.slow
def test_the_pair_sizes_with_options():
    res = size_mitigation(SCENARIO, SPEC, draws=2, seed=0, progress=False)
    assert res.status == "options_found"
    assert res.found and res.cheapest["cost_usd_per_day"] > 0
    assert res.evaluated.iloc[0]["requirements_not_shown"] == ""
