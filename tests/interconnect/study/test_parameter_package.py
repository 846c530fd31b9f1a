"""The study package's exceedance probabilities with parameter uncertainty (issue 34.8)."""

import pandas as pd

from powerlab.interconnect.studypackage import ShortWindow, study_package
from powerlab.site.randomness import ParameterBands
from powerlab.site.scenario import read_scenario

SPEC = "data/requirements/small_site_example.yaml"


def test_parameter_bands_widen_the_draws_and_say_what_varies():
    sc = read_scenario("data/scenarios/small.yaml")
    sc = sc.replace(horizon_end_utc=sc.start_utc + pd.Timedelta(minutes=20))
    kw = dict(draws=4, seed=0, short=ShortWindow(window_s=60), ride_through=False)
    seed_only = study_package(sc, SPEC, **kw)
    varied = study_package(sc, SPEC, parameters=ParameterBands(job_power_fraction=0.1,
                                                               pue_fraction=0.0), **kw)
    a = seed_only.per_draw["peak_power_megawatts"]
    b = varied.per_draw["peak_power_megawatts"]
    assert a.max() / a.min() - 1 < 1e-4                  # the seed noise
    assert b.max() / b.min() - 1 > 0.01                  # job power +-10 % moves the peak
    assert "job_power_factor_pretrain" in varied.per_draw
    # the peak follows the drawn power factors of the jobs (weighted by their GPUs)
    w = 768 * varied.per_draw["job_power_factor_pretrain"] \
        + 256 * varied.per_draw["job_power_factor_finetune"]
    assert w.rank().tolist() == b.rank().tolist()
    assert any(n.startswith("Each draw varies job power levels +-10%") for n in varied.notes)
