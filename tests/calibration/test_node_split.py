"""The hardware a calibration carries (issue 33 item 2): the GPU model from an MLPerf
system description, and the GPU / non-GPU split of node power from idle readings or the
model's prior (``powerlab.calibration.node_split``)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from powerlab.calibration.node_split import (
    find_system_json,
    gpu_model_of,
    idle_level,
    node_split,
    prior_for,
)

T0 = pd.Timestamp("2025-01-01T00:00:00Z")


def _nodes(pre_w: float, train_w: float = 6000.0, nodes: int = 3, pre_s: int = 30):
    """Node readings every 2 s: ``pre_s`` before run_start at ``pre_w``, 300 s of
    training, 20 s after run_stop at ``pre_w``."""
    rows = []
    rng = np.random.default_rng(0)
    for i in range(nodes):
        for t in np.arange(-pre_s, 320, 2.0):
            w = train_w if 0 <= t <= 300 else pre_w
            rows.append((T0 + pd.Timedelta(seconds=float(t)), f"node_{i}",
                         w + rng.normal(0, 10)))
    return pd.DataFrame(rows, columns=["timestamp", "host", "power_w"])


def test_split_from_idle_readings_known_answer():
    """Idle nodes at 2,000 W before and after the run: node idle 2,000 W; with the H100
    prior of 75 W per idle GPU, non-GPU power 2,000 - 8 x 75 = 1,400 W."""
    idle = idle_level(_nodes(2000.0), T0, T0 + pd.Timedelta(seconds=300), 2.0)
    assert idle.nodes == 3 and idle.node_idle_w == pytest.approx(2000.0, abs=20)
    over, sd, gpu_idle, src = node_split("H100-SXM5-80GB", idle, 8)
    assert over == pytest.approx(1400.0, abs=20) and gpu_idle == pytest.approx(75.0, abs=3)
    assert 0 < sd < 1000 and src.startswith("idle readings")


def test_initialisation_at_training_level_is_not_idle():
    """The null case: readings before the run at the training level (initialisation,
    as in v5.0 RetinaNet) are not idle: no idle level; the split falls back to the
    model's prior and says so; an unknown model gives no split."""
    df = _nodes(6000.0)
    assert idle_level(df, T0, T0 + pd.Timedelta(seconds=300), 2.0) is None
    over, _, gpu_idle, src = node_split("B200-SXM-180GB", None, 8)
    assert (over, gpu_idle) == (prior_for("B200").overhead_w, prior_for("B200").idle_w)
    assert src.startswith("hardware prior")
    assert node_split("MI300X", None, 8) is None and node_split(None, None, 8) is None


def test_gpu_model_from_the_system_description(tmp_path):
    """An MLPerf submission layout: results/<system>/<benchmark>/power/<run> finds
    systems/<system>.json; the vendor prefix and a generation name are dropped."""
    sub = tmp_path / "Lenovo"
    run = sub / "results" / "SR780aV3" / "bert" / "power" / "result_0"
    run.mkdir(parents=True)
    (sub / "systems").mkdir()
    (sub / "systems" / "SR780aV3.json").write_text(json.dumps(
        {"accelerator_model_name": "NVIDIA Blackwell GPU (B200-SXM-180GB)",
         "accelerators_per_node": "8"}))
    path = find_system_json(run)
    assert path == sub / "systems" / "SR780aV3.json"
    assert gpu_model_of(path)[:2] == ("B200-SXM-180GB", 8)
    assert find_system_json(tmp_path / "elsewhere") is None


def test_calibrate_cli_carries_the_bundled_b200_model(tmp_path):
    """``powerlab calibrate`` on the bundled B200 sample names the model from its
    system.json, writes the B200 TDP and a sourced split; ``--gpu-model`` overrides."""
    import yaml

    from powerlab.cli import main
    from powerlab.data import bundled_path

    d = bundled_path("mlperf-v50-b200-bert")
    out = tmp_path / "j.yaml"
    assert main(["calibrate", str(d / "power" / "result_0"), "--events",
                 str(d / "result_0.txt.gz"), "--out", str(out)]) == 0
    text = out.read_text()
    hw = yaml.safe_load(text)["hardware"]
    assert hw["gpu_model"] == "B200-SXM-180GB" and hw["gpu_tdp_w"] == 1000
    assert "system description" in text and "hardware prior" in text
    assert main(["calibrate", str(d / "power" / "result_0"), "--events",
                 str(d / "result_0.txt.gz"), "--gpu-model", "H100-SXM5-80GB",
                 "--out", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["hardware"]["gpu_model"] == "H100-SXM5-80GB"
