"""powerlab.site.scaling / ``powerlab scale``: a calibrated job becomes a site scenario
with every assumption stated (issue 33 item 3)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml

from powerlab.exceptions import ScenarioError
from powerlab.site import forecast, parse_scenario
from powerlab.site.scaling import (
    LLAMA3_FAILURE_RATE_PER_GPU_H,
    SiteAssumptions,
    scale_scenario,
    scale_scenario_file,
)

#: A calibrated job as `powerlab calibrate` writes it (8 GPUs, minutes of a run).
JOB = {
    "name": "calibrated-replay",
    "horizon": {"start_utc": "2025-04-24T17:01:00+00:00",
                "end_utc": "2025-04-24T17:06:00+00:00"},
    "simulation": {"tick_s": 0.1},
    "site": {"pue": 1.0, "electrical_loss_fraction": 0.0},
    "hardware": {"gpu_model": "B200", "gpus_per_node": 8, "node_overhead_w": 1800.0,
                 "gpu_tdp_w": 1000.0, "gpu_idle_w": 140.0, "cluster_gpus": 8},
    "jobs": [{"name": "calibrated", "gpus": 8, "start_utc": "2025-04-24T17:01:45+00:00",
              "duration_s": 220.0, "step_time_s": 2.0, "compute_fraction": 0.8,
              "power": {"compute_w": 900.0, "comm_w": 500.0}}],
}


def test_the_llama3_rate_is_table_5():
    """Llama 3 report (arXiv:2407.21783) Table 5: 419 unexpected interruptions over the
    54-day snapshot on 16,384 H100 GPUs."""
    assert LLAMA3_FAILURE_RATE_PER_GPU_H * 54 * 24 * 16384 == pytest.approx(419)


def test_site_scenario_carries_the_job_and_states_each_assumption(tmp_path):
    src = tmp_path / "job.yaml"
    src.write_text(yaml.safe_dump(JOB))
    text, spec = scale_scenario_file(src, SiteAssumptions(
        gpus=16384, job_mix=(0.75, 0.25), stagger_s=300.0, sag=(0.5, 1.0, 12.0)))
    sc = parse_scenario(yaml.safe_load(text))          # the commented text is the spec
    assert sc.hardware.cluster_gpus == 16384 and sc.hardware.gpu_model == "B200"
    assert [j.gpus for j in sc.jobs] == [12288, 4096]
    assert sc.hardware.node_overhead_w == 1800.0          # the calibrated split, unchanged
    for j in sc.jobs:
        assert (j.compute_w, j.comm_w, j.step_time_s) == (900.0, 500.0, 2.0)
        assert j.start_utc + np.timedelta64(int(j.duration_s * 1e6), "us") == sc.horizon_end_utc
    assert (sc.jobs[1].start_utc - sc.jobs[0].start_utc).total_seconds() == 300.0
    for needle in ("# assumption: 16,384 site GPUs x share 0.75",
                   "# Llama 3 405B: 419 unexpected interruptions",
                   "# assumption: the recording writes no checkpoint",
                   "# assumption: one voltage sag", "# assumption: a constant PUE"):
        assert needle in text, needle
    assert spec["disturbances"][0]["residual_voltage_pu"] == 0.5


def test_site_power_is_the_job_times_the_gpus():
    """Arithmetic known answer: no failures, checkpoints or evaluations, PUE 1.25, no
    losses: mean facility power = PUE x (N x (0.8 x 900 + 0.2 x 500) W + N/8 x 1800 W),
    whatever the job mix (a numerical knob: one job or four)."""
    n = 4096
    want = 1.25 * (n * (0.8 * 900 + 0.2 * 500) + n / 8 * 1800)
    got = []
    for mix in ((1.0,), (0.25, 0.25, 0.25, 0.25)):
        spec, _ = scale_scenario(JOB, SiteAssumptions(
            gpus=n, job_mix=mix, horizon_h=1.0, lead_s=0.0, pue=1.25,
            electrical_loss_fraction=0.0, failure_rate_per_gpu_h=0.0,
            checkpoint_interval_s=0.0))
        spec["jobs"] = [dict(j, startup_s=0.0, shutdown_s=0.0) for j in spec["jobs"]]
        res = forecast(parse_scenario(spec), draws=1, seed=1)
        got.append(float(np.mean(res.facility_w)))
    assert got[0] == pytest.approx(want, rel=0.01)
    assert got[1] == pytest.approx(got[0], rel=0.005)


@pytest.mark.parametrize("change,key", [
    ({"gpus": 0}, "gpus"), ({"pue": float("nan")}, "pue"), ({"pue": 0.5}, "pue"),
    ({"job_mix": (1.0, -1.0)}, "job_mix"), ({"stagger_s": 1e9}, "stagger_s"),
    ({"sag": (1.2, 1.0, 1.0)}, "sag"), ({"horizon_h": 1.0, "stagger_s": 7200.0,
                                         "job_mix": (0.5, 0.5)}, "stagger_s")])
def test_impossible_sites_are_refused_naming_the_option(change, key):
    with pytest.raises(ScenarioError, match=key):
        scale_scenario(JOB, SiteAssumptions(**change))


def test_the_gpu_model_is_never_guessed():
    """It decides which mitigations exist (Blackwell smoothing): a calibrated scenario
    without one needs --gpu-model; a contradicting one is refused."""
    bare = {**JOB, "hardware": {k: v for k, v in JOB["hardware"].items()
                                if k != "gpu_model"}}
    with pytest.raises(ScenarioError, match="--gpu-model"):
        scale_scenario(bare, SiteAssumptions(gpus=64))
    spec, _ = scale_scenario(bare, SiteAssumptions(gpus=64, gpu_model="B200"))
    assert spec["hardware"]["gpu_model"] == "B200"
    with pytest.raises(ScenarioError, match="names 'B200', not 'H100'"):
        scale_scenario(JOB, SiteAssumptions(gpus=64, gpu_model="H100"))


def test_cli_writes_the_site_and_never_its_input(tmp_path):
    src = tmp_path / "job.yaml"
    src.write_text(yaml.safe_dump(JOB))
    before = src.read_bytes()
    cmd = [sys.executable, "-m", "powerlab.cli", "scale", str(src), "--gpus", "1024",
           "--job-mix", "0.5,0.5", "--stagger-s", "60", "--sag", "0.6:0.5@3"]
    r = subprocess.run([*cmd, "--out", str(src)], capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert src.read_bytes() == before
    out = tmp_path / "site.yaml"
    r = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "1,024 GPUs of B200 in 2 job(s) (512, 512)" in r.stdout
    sc = parse_scenario(yaml.safe_load(out.read_text()))
    assert sum(j.gpus for j in sc.jobs) == 1024
    r = subprocess.run([sys.executable, "-m", "powerlab.cli", "scale", str(src), "--gpus",
                        "64", "--sag", "half", "--out", str(tmp_path / "x.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "PU:SECONDS@HOURS" in r.stderr
