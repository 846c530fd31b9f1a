"""One site envelope (issue 33 item 4): the plan's baseline is the forecast's power, also
where a scenario's level lies above the GPU's highest settable limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.flex import plan_curtailment
from powerlab.flex.targets import Targets
from powerlab.limits import read_requirements
from powerlab.site import forecast, parse_scenario
from powerlab.site.scaling import SiteAssumptions, scale_scenario
from tests.site.test_scaling import JOB

REPO = Path(__file__).resolve().parents[2]


def test_plan_baseline_is_the_forecast_when_levels_exceed_the_driver_limit():
    """A calibrated B200 job whose per-GPU level (1,224 W: node power not split) lies
    above the B200 prior's highest limit (1,000 W): the plan's baseline was 1,000 W per
    GPU, 18 % under the forecast, so it shed nothing for a target the forecast exceeds
    and overshot by 3.7 MW in simulation.  The baseline now equals the forecast's mean IT
    power and the target is met."""
    job = {**JOB, "hardware": {**JOB["hardware"], "node_overhead_w": 0.0},
           "jobs": [{**JOB["jobs"][0], "compute_fraction": 1.0,
                     "power": {"compute_w": 1224.0, "comm_w": 1224.0}}]}
    spec, _ = scale_scenario(job, SiteAssumptions(gpus=1024, horizon_h=1.0, lead_s=0.0,
                                                  failure_rate_per_gpu_h=0.0,
                                                  checkpoint_interval_s=0.0))
    spec["jobs"][0].update(startup_s=0.0, shutdown_s=0.0)
    sc = parse_scenario(spec)
    it_mean = float(np.mean(forecast(sc, draws=1, seed=0).it_w))
    assert it_mean == pytest.approx(1024 * 1224, rel=0.01)
    start = sc.start_utc + pd.Timedelta(minutes=20)
    tg = Targets(pd.DataFrame({"start_utc": [start],
                               "end_utc": [start + pd.Timedelta(minutes=10)],
                               "cap_w": [0.9 * it_mean], "notice_utc": [pd.NaT],
                               "source": ["t0"]}))
    spec_req = read_requirements(REPO / "data/requirements/small_site_example.yaml")
    plan = plan_curtailment(sc, tg, spec=spec_req, draws=2)
    base = plan.schedule["planned_it_power_megawatts"].iloc[0] * 1e6
    assert base == pytest.approx(it_mean, rel=0.01)
    assert plan.targets["met"].all()
