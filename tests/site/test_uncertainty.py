"""Tests of powerlab.site.uncertainty: exceedance probabilities and quantile bands with
their Monte Carlo errors."""

import numpy as np
import pytest
from scipy.stats import mstats

from powerlab.exceptions import ScenarioError
from powerlab.site.engine import TargetErrorOptions, forecast, forecast_to_target
from powerlab.site.scenario import parse_scenario
from powerlab.site.uncertainty import draws_for_standard_error, interval_statistic


def _hazard(second_job_rate=0.0):
    """64 GPUs failing at a constant 0.5 per hour for 12 h (30-min restarts); optionally a
    second job with its own failures from 06:00 (the hazard is then not constant)."""
    jobs = [{"name": "j", "gpus": 64, "start_utc": "2025-06-02T00:00:00Z",
             "duration_s": 43200, "step_time_s": 10.0, "startup_s": 120, "shutdown_s": 0,
             "failures": {"rate_per_gpu_h": 0.5 / 64, "restart_s": 1800}}]
    if second_job_rate:
        jobs.append({"name": "k", "gpus": 64, "start_utc": "2025-06-02T06:00:00Z",
                     "duration_s": 21600, "step_time_s": 10.0, "startup_s": 120,
                     "shutdown_s": 0,
                     "failures": {"rate_per_gpu_h": second_job_rate / 64,
                                  "restart_s": 1800}})
    return parse_scenario({
        "name": "hazard",
        "horizon": {"start_utc": "2025-06-02T00:00:00Z", "end_utc": "2025-06-02T12:00:00Z"},
        "simulation": {"tick_s": 1.0}, "site": {"pue": 1.2},
        "hardware": {"cluster_gpus": 128}, "jobs": jobs})


def _band_z(res, hours):
    qb = res.quantile_bands((0.1, 0.9), "1h", boundary="it")
    width = (qb["power_w_q90"] - qb["power_w_q10"]).to_numpy()
    se = np.hypot(qb["power_w_q10_se"], qb["power_w_q90_se"]).to_numpy()
    ref = np.median(width[1:6])
    return np.abs(width[hours] - ref) / np.maximum(se[hours], 1.0)


def test_band_width_is_constant_under_a_constant_hazard():
    res = forecast(_hazard(), draws=300, seed=1)
    # hour 0 holds the start-up; from hour 1 the failure process is stationary
    assert (_band_z(res, slice(1, 12)) < 4).all()
    # the check can fail: a second failing job from 06:00 widens the band by many errors
    res2 = forecast(_hazard(second_job_rate=0.5), draws=300, seed=1)
    assert (_band_z(res2, slice(6, 12)) > 4).all()


def test_standard_errors_match_their_definitions():
    res = forecast(_hazard(), draws=60, seed=2)
    _, vals = interval_statistic(res, "1h", "it")
    ex = res.exceedance([np.median(vals)], "1h", boundary="it")
    k = (vals > np.median(vals)).sum(axis=0)
    p = (k + 2) / 64
    np.testing.assert_allclose(ex["probability"], k / 60)
    np.testing.assert_allclose(ex["probability_se"], np.sqrt(p * (1 - p) / 64))
    qb = res.quantile_bands((0.1, 0.5, 0.9), "1h", boundary="it")
    for h in (1, 7):
        mj = mstats.mjci(vals[:, h] - vals[:, h].mean(), prob=[0.1, 0.5, 0.9])
        np.testing.assert_allclose(qb.loc[h, ["power_w_q10_se", "power_w_q50_se",
                                              "power_w_q90_se"]].to_numpy(float), mj,
                                   rtol=1e-6, atol=1e-3)
    # errors fall as 1/sqrt(draws): 4x the draws, about half the error
    big = forecast(_hazard(), draws=240, seed=2).exceedance([np.median(vals)], "1h",
                                                            boundary="it")
    ratio = ex["probability_se"].mean() / big["probability_se"].mean()
    assert 1.7 < ratio < 2.3


def test_draws_chosen_for_a_target_error():
    assert draws_for_standard_error(0.05) == 100
    assert draws_for_standard_error(0.01, p=0.1) == 900
    res, se = forecast_to_target(_hazard(), 0.04, thresholds_w=[50_000.0],
                                 resolution="1h", boundary="it", draws0=20)
    assert se <= 0.04 * 1.05
    assert res.draws > 20
    # the options as one object: the same forecast; an unknown option is named
    opts = TargetErrorOptions(thresholds_w=[50_000.0], resolution="1h", boundary="it")
    res2, se2 = forecast_to_target(_hazard(), 0.04, opts)
    assert (res2.draws, se2) == (res.draws, se)
    with pytest.raises(TypeError, match="unknown TargetErrorOptions option"):
        forecast_to_target(_hazard(), 0.04, opts, draws=5)


@pytest.mark.bad_input("scenario")
def test_bad_target_error():
    with pytest.raises(ScenarioError, match="target standard error"):
        draws_for_standard_error(0.0)
