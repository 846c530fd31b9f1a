"""When no option passes, the closest options with their shortfall per requirement
(issue 33.6): listed in the summary and written to mitigation_options.csv."""

import numpy as np
import pandas as pd
import pytest

from powerlab.interconnect.searchspace import SearchGrid
from powerlab.interconnect.sizing import size_mitigation
from tests.interconnect.test_sizing import scenario, spec

TINY_GRID = SearchGrid(floor_pct_tdp=(0, 60), ramp_w_per_s=(0, 125, 8), hysteresis_ms=(0,),
                       filler=(False,), stagger_s=(0,), battery_power_fraction=(0.01,),
                       battery_duration_h=(0.1,), battery_window_s=(60,))


@pytest.fixture(scope="module")
def hopeless():
    # limits far below anything the site and the small grid can reach
    return size_mitigation(scenario(0.02), spec(ramp=1e-4, dev=1e-4, step=1e-4), draws=1,
                           seed=0, grid=TINY_GRID)


def test_none_passes_lists_the_closest_with_shortfalls(hopeless, tmp_path):
    res = hopeless
    assert res.status == "none_passes" and not res.found
    close = res.closest
    assert 1 <= len(close) <= 5 and not close["passes"].any()
    for r in ("ramp_1s", "dev_10s", "step_1s"):
        col = f"shortfall_{r}"
        assert (close[col] > 0).all()
    # ranked: fewest failed, then the smallest summed shortfall share
    assert np.all(np.diff(close["shortfall_share_sum"].to_numpy()) >= 0)
    # the shortfall is value - limit: the unmitigated row's ramp matches its compliance
    base = res.evaluated.iloc[0]
    assert base["shortfall_ramp_1s"] > 0
    text = str(res.summary())
    assert "Closest options" in text and "ramp_1s +" in text
    csv, _ = res.write(tmp_path / "out")
    back = pd.read_csv(csv)
    assert len(back) == len(close) and "shortfall_step_1s" in back
    assert not back["passes"].any()


def test_a_passing_search_keeps_its_options_csv(tmp_path):
    res = size_mitigation(scenario(0.02), spec(ramp=100, dev=100, step=100), draws=1,
                          grid=TINY_GRID)
    assert res.found and res.closest.empty
    back = pd.read_csv(res.write(tmp_path / "o")[0])
    assert back["option"].tolist() == ["none"]
