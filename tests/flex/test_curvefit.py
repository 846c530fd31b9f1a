"""The power-throughput curve (powerlab.flex.curvefit, powerlab.levers.curve), validated on the synthetic twin.

The truth is the twin's own mean productive step time under each power limit
(powerlab.throughput.synth: clock capped where the power demand would exceed the limit,
step time from the clock), never the curve's formula (a quadratic in log-log)."""

from __future__ import annotations

import numpy as np
import pytest

from powerlab.exceptions import AnalysisError, PowerlabError
from powerlab.flex import fit_curve, twin_capping_campaign, twin_step_time
from powerlab.levers import prior_curve

TRAIN_W = [700, 600, 500, 400, 300, 250]
HELD_OUT_W = [550, 450, 350, 275]


@pytest.fixture(scope="module")
def campaign():
    return twin_capping_campaign(TRAIN_W, hours_each=1.0, rounds=2, seed=0)


@pytest.fixture(scope="module")
def truth():
    ref = twin_step_time(700)
    return {w: 1.0 - ref / twin_step_time(w) for w in HELD_OUT_W}


def test_cost_within_10pct_of_twin_truth_on_held_out_limits(campaign, truth):
    """Throughput cost = 1 - (step rate under limit L) / (step rate at the default 700 W
    limit); the curve, fitted on other limits, predicts it within 10 % of the twin's."""
    c = fit_curve(*campaign, gpu_model="H100-SXM")
    pred = c.summary_frame(HELD_OUT_W)["step_rate_loss_pct"].to_numpy() / 100
    true = np.array([truth[w] for w in HELD_OUT_W])
    assert (true > 0.02).all()                      # the held-out limits do bind
    rel = np.abs(pred - true) / true
    assert rel.max() <= 0.10, dict(zip(HELD_OUT_W, rel.round(3)))


def test_cost_is_stable_when_the_block_length_changes(campaign):
    a = fit_curve(*campaign, block_s=600).summary_frame(HELD_OUT_W)["step_rate_loss_pct"]
    b = fit_curve(*campaign, block_s=300).summary_frame(HELD_OUT_W)["step_rate_loss_pct"]
    assert np.allclose(a, b, atol=0.5)             # percentage points


def test_band_and_shape(campaign):
    c = fit_curve(*campaign, gpu_model="H100-SXM")
    sf = c.summary_frame()
    assert (sf["step_rate_loss_pct_lower"] <= sf["step_rate_loss_pct"] + 1e-12).all()
    assert (sf["step_rate_loss_pct"] <= sf["step_rate_loss_pct_upper"] + 1e-12).all()
    assert np.all(np.diff(sf["step_rate_loss_pct"]) >= -1e-9)   # lower limit, more loss
    # a limit above what the job draws costs nothing
    assert sf.loc[sf["power_limit_w"] == 700, "step_rate_loss_pct"].iloc[0] == 0
    assert 0.95 < c.kappa <= 1.01
    assert "fit" in c.summary() and c.rsquared > 0.9


def test_null_case_limits_that_never_bind_are_refused():
    """Limits above the power the job draws (~620 W) change nothing: no curve to fit."""
    tel, st = twin_capping_campaign([700, 690, 680], hours_each=0.5, rounds=1, seed=3)
    with pytest.raises(AnalysisError, match="less than 10 %"):
        fit_curve(tel, st)


def test_too_few_limits_and_unknown_model():
    tel, st = twin_capping_campaign([700, 400], hours_each=0.5, rounds=1, seed=4)
    with pytest.raises(AnalysisError, match="2 distinct power limit"):
        fit_curve(tel, st)
    with pytest.raises(PowerlabError, match="no prior"):
        prior_curve("MI300X", 650.0)


def test_prior_states_its_source_and_is_monotone():
    c = prior_curve("H100-SXM-80GB", 650.0)
    assert c.source.startswith("prior") and "assumption" in c.source
    sf = c.summary_frame([650, 500, 300])
    assert sf["step_rate_loss_pct"].iloc[0] == 0
    assert sf["step_rate_loss_pct"].is_monotonic_increasing
    assert (sf["step_rate_loss_pct_upper"] > sf["step_rate_loss_pct_lower"]).iloc[1:].all()
