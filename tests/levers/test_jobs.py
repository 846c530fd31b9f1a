"""powerlab.levers.jobs: what the levers act on (the site's power range)."""

from __future__ import annotations

from pathlib import Path

from powerlab.levers.jobs import site_power_range_w

REPO = Path(__file__).resolve().parents[2]


def test_site_maximum_bounds_every_draws_peak():
    """Issue 33 item 4: the site maximum the targets are checked against came from
    ``gpu_tdp_w`` alone, 16.1 MW for a calibrated B200 site whose forecast peaked at
    24.6 MW (a calibrated ``gpu_tdp_w`` is no TDP).  It now bounds the forecast's own IT
    power in every draw, on a bundled scenario and on a calibrated-like one."""
    import numpy as np

    from powerlab.site import forecast, parse_scenario, read_scenario
    from powerlab.site.scaling import SiteAssumptions, scale_scenario
    from tests.site.test_scaling import JOB

    job = {**JOB, "hardware": {**JOB["hardware"], "gpu_tdp_w": 700.0}}   # below 900 W
    spec, _ = scale_scenario(job, SiteAssumptions(gpus=512, horizon_h=0.5, lead_s=60.0,
                                                  failure_rate_per_gpu_h=1e-3))
    for sc in (read_scenario(REPO / "data" / "scenarios" / "small.yaml"),
               parse_scenario(spec)):
        res = forecast(sc, draws=3, seed=2)
        _, _, top = site_power_range_w(sc)
        peak = float(np.max(res.it_w))
        assert peak <= top * (1 + 1e-9), (sc.name, peak, top)
    # and it is not loose by orders: the calibrated-like site peaks within 10 % of it
    assert peak >= 0.9 * top
