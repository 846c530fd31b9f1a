"""Draws that vary the uncertain parameters (issue 34.8): exceedance probabilities follow
the parameter bands (known ground truth), and without bands they are seed noise only."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import ScenarioError
from powerlab.site.engine import forecast
from powerlab.site.parameterdraws import exceedance, parameter_draws
from powerlab.site.randomness import PARAMETER_STREAM, ParameterBands, draw_parameters
from powerlab.site.scenario import read_scenario


@pytest.fixture(scope="module")
def one_job():
    """small.yaml's pretrain job alone, no jitter, no failures, 10 minutes of training."""
    sc = read_scenario("data/scenarios/small.yaml")
    j = dataclasses.replace(sc.jobs[0], jitter_s=0.0, failure_rate_per_gpu_h=0.0)
    start = j.start_utc + pd.Timedelta(seconds=200)
    return sc.replace(jobs=(j,), horizon_start_utc=start,
                      horizon_end_utc=start + pd.Timedelta(minutes=10))


def _peak_at(sc, factor):
    """Facility peak with the job's power levels times ``factor`` [MW]."""
    j = sc.jobs[0]
    levels = {k: getattr(j, k) * factor for k in ("compute_w", "comm_w", "startup_w",
                                                  "checkpoint_w", "eval_w", "shutdown_w")}
    res = forecast(sc.replace(jobs=(dataclasses.replace(j, **levels),)), draws=1, seed=0)
    return float(res.power_w("facility")[0].max()) / 1e6


def test_exceedance_follows_the_job_power_band(one_job):
    # only the job's power varies, u ~ U(-0.1, 0.1): the peak is increasing in the factor,
    # so P(peak > peak at factor f) = (1.1 - f) / 0.2: 0.5 at f = 1, 0.25 at f = 1.05
    bands = ParameterBands(job_power_fraction=0.1, pue_fraction=0.0)
    d = parameter_draws(one_job, bands, draws=120, seed=3)
    assert d.attrs["varied"] == ["job power levels +-10% (one factor per job)"]
    thr = [_peak_at(one_job, 1.0), _peak_at(one_job, 1.05), _peak_at(one_job, 1.1) * 1.001]
    ex = exceedance(d["peak_power_megawatts"], thr)
    for got, se, want in zip(ex["probability"], ex["probability_se"], (0.5, 0.25, 0.0)):
        assert abs(got - want) <= 3 * se + 1e-12, (got, want, se)
    # the drawn factor explains the peak
    r = np.corrcoef(d["job_power_factor_pretrain"], d["peak_power_megawatts"])[0, 1]
    assert r > 0.99


def test_without_bands_the_draws_are_seed_noise(one_job):
    d = parameter_draws(one_job, ParameterBands(0, 0, 0, 0), draws=8, seed=1)
    assert d.attrs["varied"] == ["nothing (seed noise only)"]
    peak = d["peak_power_megawatts"]
    assert peak.max() / peak.min() - 1 < 1e-6
    assert exceedance(peak, [peak.max()])["probability"].iloc[0] == 0.0


def test_pue_band_moves_the_overhead_not_below_one(one_job):
    sc = one_job.replace(site=dataclasses.replace(one_job.site, pue=1.2, cooling=None))
    for d in range(20):
        scen, vals = draw_parameters(sc, ParameterBands(0.0, 0.5), seed=0, draw=d)
        assert scen.site.pue == pytest.approx(1 + 0.2 * vals["pue_factor"])
        assert 1.1 <= scen.site.pue <= 1.3


def test_parameter_stream_is_its_own_and_reproducible(one_job):
    a = draw_parameters(one_job, ParameterBands(start_shift_s=30), seed=5, draw=2)[1]
    b = draw_parameters(one_job, ParameterBands(start_shift_s=30), seed=5, draw=2)[1]
    assert a == b and abs(a["start_shift_s_pretrain"]) <= 30
    assert PARAMETER_STREAM > 1000            # never a job index
    with pytest.raises(ScenarioError, match="job_power_fraction"):
        ParameterBands(job_power_fraction=1.5)
