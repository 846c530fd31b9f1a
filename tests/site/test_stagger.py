"""The stagger rule exists once (issue 26): the forecast engine and the mitigation
search's site model delay the same jobs by the same amount, capped the same way."""

from pathlib import Path

import pytest
import yaml

from powerlab.interconnect.sitemodel import SiteModel
from powerlab.site.engine import forecast
from powerlab.site.scenario import parse_scenario
from powerlab.site.stagger import stagger_delay_ticks

SCEN = Path(__file__).parents[2] / "data" / "scenarios"


def _three_together(stagger_s: float):
    """Three jobs starting on the same second; the third is short, so a long stagger
    would push its start past the point where its start-up and shutdown still fit."""
    d = yaml.safe_load((SCEN / "small.yaml").read_text())
    d["horizon"] = {"start_utc": "2025-06-02T12:00:00Z", "end_utc": "2025-06-02T13:00:00Z"}
    d["simulation"] = {"tick_s": 1.0}
    a, b = d["jobs"]
    a.update(gpus=512, duration_s=3000)
    b.update(gpus=256, duration_s=2400)
    c = dict(b, name="short", gpus=128, duration_s=600)
    for j in (a, b, c):
        j.pop("failures", None)
    d["jobs"] = [a, b, c]
    d["mitigations"] = {"stagger_starts_s": stagger_s}
    return parse_scenario(d)


def test_rule_ranks_jobs_starting_together_and_caps_the_delay():
    sc = _three_together(400.0)
    ticks = stagger_delay_ticks(sc, sc.start_utc, 1.0)
    short = sc.jobs[2]
    room = short.duration_s - short.startup_s - short.shutdown_s - 1
    # rank 0 and 1 get 0 and 400 s; rank 2 would get 800 s but only `room` s fit
    assert ticks == [0, 400, int(room)]
    assert room < 800
    assert stagger_delay_ticks(sc, sc.start_utc, 1.0, 0.0) == [0, 0, 0]


@pytest.mark.parametrize("stagger_s", [30.0, 400.0])
def test_engine_and_search_site_model_agree(stagger_s):
    sc = _three_together(stagger_s)
    res = forecast(sc, draws=1, seed=1)
    engine = res.throughput.sort_values("job")["stagger_delay_s"].to_numpy()
    model = SiteModel.build(sc.replace(mitigations=type(sc.mitigations)()), draws=1,
                            seed=1, tick_s=None, filler=False)
    search = model.stagger_delays_s(stagger_s)
    order = [j.name for j in sc.jobs]
    by_name = dict(zip(res.throughput.sort_values("job")["job"], engine))
    assert [by_name[n] for n in order] == pytest.approx(search)
    if stagger_s == 400.0:      # the cap binds: the old search priced 800 s here
        assert search[2] < 800.0
