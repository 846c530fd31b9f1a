"""Laws every forecast obeys, checked by hypothesis on generated scenarios.

Written from the engine's documented rules (docs/forecast_semantics.md), not from its
code or from tests/support/reference_sim.py: conservation of energy across output resolutions,
physical bounds, monotonicity and exact scaling in GPU count, event counts against their
intervals, and failures never adding training time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from powerlab.site.engine import forecast
from powerlab.site.scenario import parse_scenario

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
START = pd.Timestamp("2025-06-02T12:00:00Z")


def _scenario(*, nodes=4, gpn=8, job_nodes=4, minutes=20, step_s=4.0, frac=0.8,
              jitter_s=0.0, ckpt=(0, 0), evl=(0, 0), rate=0.0, restart_s=60.0,
              tick_s=0.1, idle=75.0, compute=650.0, comm=250.0, overhead=2500.0,
              startup_s=30.0, shutdown_s=10.0, pue=1.2, base=100_000.0):
    job = {"name": "j", "gpus": job_nodes * gpn,
           "start_utc": (START + pd.Timedelta(minutes=1)).isoformat(),
           "duration_s": (minutes - 2) * 60, "startup_s": startup_s, "shutdown_s": shutdown_s,
           "step_time_s": step_s, "compute_fraction": frac, "jitter_s": jitter_s}
    if ckpt[0]:
        job["checkpoint"] = {"interval_s": ckpt[0], "duration_s": ckpt[1]}
    if evl[0]:
        job["eval"] = {"interval_s": evl[0], "duration_s": evl[1]}
    if rate:
        job["failures"] = {"rate_per_gpu_h": rate, "restart_s": restart_s}
    return parse_scenario({
        "name": "law",
        "horizon": {"start_utc": START.isoformat(),
                    "end_utc": (START + pd.Timedelta(minutes=minutes)).isoformat()},
        "simulation": {"tick_s": tick_s},
        "site": {"tz": "UTC", "base_load_w": base, "pue": pue},
        "hardware": {"gpu_model": "H100", "gpu_idle_w": idle, "gpu_compute_w": compute,
                     "gpu_comm_w": comm, "gpu_tdp_w": 700, "gpus_per_node": gpn,
                     "node_overhead_w": overhead, "cluster_gpus": nodes * gpn},
        "jobs": [job],
    })


job_shape = st.fixed_dictionaries({
    "step_s": st.sampled_from([2.0, 3.5, 6.0, 10.0]),
    "frac": st.sampled_from([0.5, 0.7, 0.9]),
    "jitter_s": st.sampled_from([0.0, 0.05, 0.3]),
    "ckpt": st.sampled_from([(0, 0), (120, 20), (300, 45)]),
    "evl": st.sampled_from([(0, 0), (180, 30)]),
})


@SETTINGS
@given(shape=job_shape, seed=st.integers(0, 10_000))
def test_energy_is_conserved_across_output_resolutions(shape, seed):
    res = forecast(_scenario(**shape), draws=2, seed=seed)
    for boundary in ("facility", "it"):
        total = res.energy_j(boundary).mean()
        for r in ("1s", "1min", "15min"):
            sf = res.summary_frame(r, boundary=boundary)
            dur = (sf["interval_end_utc"] - sf["interval_start_utc"]).dt.total_seconds()
            assert (sf["power_w_mean"] * dur).sum() == pytest.approx(total, rel=1e-9)


@SETTINGS
@given(shape=job_shape, seed=st.integers(0, 10_000))
def test_power_stays_within_physical_bounds(shape, seed):
    sc = _scenario(**shape, rate=0.002)
    res = forecast(sc, draws=2, seed=seed)
    hw = sc.hardware
    low = hw.cluster_gpus * min(hw.gpu_idle_w, 250.0) + hw.nodes * hw.node_overhead_w
    high = hw.cluster_gpus * hw.gpu_tdp_w + hw.nodes * hw.node_overhead_w
    it = res.power_w("it")
    assert it.min() >= low - 1e-6 and it.max() <= high + 1e-6
    fac = res.power_w("facility")
    assert (fac >= it).all()   # losses, cooling and base load are never negative


@SETTINGS
@given(shape=job_shape, k=st.integers(2, 4))
def test_power_above_idle_scales_exactly_with_the_site_at_zero_jitter(shape, k):
    shape = dict(shape, jitter_s=0.0)
    a = forecast(_scenario(**shape, nodes=2, job_nodes=2), draws=1)
    b = forecast(_scenario(**shape, nodes=2 * k, job_nodes=2 * k), draws=1)
    np.testing.assert_allclose(b.power_w("it"), k * a.power_w("it"), rtol=1e-12)


@SETTINGS
@given(shape=job_shape, extra=st.integers(1, 3))
def test_it_power_is_monotonic_in_the_gpus_a_job_uses(shape, extra):
    # the same cluster; a job on more of its nodes never draws less at any tick
    small = forecast(_scenario(**shape, nodes=4 + extra, job_nodes=4), draws=1)
    big = forecast(_scenario(**shape, nodes=4 + extra, job_nodes=4 + extra), draws=1)
    assert (big.power_w("it") >= small.power_w("it") - 1e-6).all()


@SETTINGS
@given(ckpt=st.sampled_from([(60, 10), (120, 20), (240, 30)]),
       step_s=st.sampled_from([2.0, 4.0, 5.0]))
def test_checkpoint_count_matches_its_training_time_interval(ckpt, step_s):
    res = forecast(_scenario(step_s=step_s, ckpt=ckpt), draws=1)
    n_ckpt = int((res.events["event"] == "checkpoint").sum())
    train_s = float(res.throughput["train_s"].iloc[0])
    # an interval counts training time, rounded to whole steps
    interval = round(ckpt[0] / step_s) * step_s
    assert n_ckpt in (int(train_s // interval), int(train_s // interval) - 1)
    assert n_ckpt >= 1


@SETTINGS
@given(shape=job_shape, seed=st.integers(0, 10_000),
       rate=st.sampled_from([0.0005, 0.002, 0.01]))
def test_a_failure_never_adds_training_time(shape, seed, rate):
    clean = forecast(_scenario(**shape), draws=3, seed=seed).throughput
    failing = forecast(_scenario(**shape, rate=rate), draws=3, seed=seed).throughput
    useful = lambda t: (t["train_s"] - t["lost_to_failures_s"]).to_numpy()
    assert (useful(failing) <= useful(clean) + 1e-9).all()
