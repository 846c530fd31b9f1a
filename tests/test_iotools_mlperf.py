"""Tests of powerlab.iotools.mlperf on real MLPerf excerpts and the bundled 64-node run."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import parse_mllog, read_mllog, read_mlperf_power

from .conftest import REPO, TEST_DATA

D = TEST_DATA / "iotools"
RUN = REPO / "data" / "mlperf-gpt3-64node"


def test_node_excerpt():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataQualityWarning)
        df = read_mlperf_power(D / "mlperf_gpt3_node_7_excerpt.txt")
    assert len(df) == 43                          # 45 lines minus start/stop events
    assert (df["scope"] == "node").all() and (df["host"] == "mlperf_gpt3_node_7_excerpt").all()
    assert df["gpu_index"].isna().all()
    assert df["power_w"].iloc[0] == 3963.0
    assert df["timestamp"].iloc[0] == pd.Timestamp(1715960308910, unit="ms", tz="UTC")
    assert df["timestamp"].is_monotonic_increasing


def test_broken_power_log_counts_skipped_lines():
    with pytest.warns(DataQualityWarning, match=r"skipped 2 malformed") as rec:
        df = read_mlperf_power(D / "mlperf_power_broken.txt", host="node_7")
    msg = str(rec[0].message)
    assert "mlperf_power_broken.txt" in msg and "line 7" in msg
    assert len(df) == 9                  # 11 readings, one cut short, one non-numeric
    assert 7144.0 in df["power_w"].tolist()     # the rank-prefixed line is read
    assert (df["host"] == "node_7").all()


@pytest.fixture(scope="module")
def run64():
    assert (RUN / "power").is_dir(), "bundled MLPerf data missing"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataQualityWarning)
        return read_mlperf_power(RUN / "power")


def test_64_node_run_counts_units_and_energy(run64):
    df = run64
    sizes = df.groupby("host").size()
    assert len(sizes) == 64
    assert set(sizes.index) == {f"node_{i}" for i in range(1, 65)}
    assert sizes.value_counts().to_dict() == {1702: 52, 1701: 12}
    assert df["timestamp"].min() >= pd.Timestamp("2024-05-17 15:38", tz="UTC")
    assert df["timestamp"].max() <= pd.Timestamp("2024-05-17 16:36", tz="UTC")
    assert 3000 < df["power_w"].min() and df["power_w"].max() < 8000    # W per node
    # ground truth: integrating the 64 node logs gives the submission's total energy
    total = (RUN / "power" / "total_power.txt").read_text()
    kwh_reported = float(total.split(":")[1].split()[0])
    kwh = 0.0
    for _, g in df.groupby("host"):
        t = g["timestamp"].astype("int64").to_numpy() / 1e9
        kwh += np.trapezoid(g["power_w"].to_numpy(), t) / 3.6e6
    assert kwh == pytest.approx(kwh_reported, rel=1e-3)


def test_host_for_a_directory_is_refused():
    with pytest.raises(ParseError, match="host="):
        read_mlperf_power(RUN / "power", host="x")


def test_result_log_excerpt_events_and_steps():
    r = read_mllog(D / "mlperf_gpt3_result_excerpt.txt")
    events, steps = r
    assert len(events) == 72
    assert events["rank"].notna().all() and set(events["rank"].dropna()) >= {0, 208}
    assert r.run_start == pd.Timestamp(1715960307022, unit="ms", tz="UTC")
    assert r.run_stop == pd.Timestamp(1715963719692, unit="ms", tz="UTC")
    assert r.status == "success"
    assert len(steps) == 44
    train = steps["train_step_timing_s"].dropna()
    assert len(train) > 30 and train.between(10.3, 10.7).all()
    assert steps["step"].is_monotonic_increasing
    ev = r.evals
    acc = ev.dropna(subset=["eval_accuracy"])
    assert acc["epoch_num"].iloc[0] == 50331648
    assert acc["eval_accuracy"].iloc[0] == pytest.approx(2.7505922317504883)
    assert "train_step_timing_s" in r.summary()


def test_full_result_log(run64):
    r = read_mllog(RUN / "result_5848-240517221859825376616_2.txt.gz")
    assert r.duration_s == pytest.approx(3412.67)
    assert len(r.blocks) == 24 and len(r.evals) == 24
    assert r.blocks["duration_s"].between(120, 140).all()
    assert len(r.steps) > 300
    # the power logs cover the run: the run starts within the first readings
    assert run64["timestamp"].min() <= r.run_start + pd.Timedelta(seconds=5)


def test_malformed_mllog_lines_are_counted_not_silent():
    text = ('0: :::MLLOG {"time_ms": 1715960308001, "key": "run_start", "value": null, "metadata": {}}\n'
            'some shell output\n'
            '0: :::MLLOG {"time_ms": 1715960308002, "key": "tracked_stats", "value": {"train_step_timing '
            'in s": 1.5}, "metadata": {"step": 8}}\n'
            '0: :::MLLOG {"time_ms": 1715960308003, "key": "run_st\n'
            '+ echo \':::MLLOG {"time_ms": 1715960308004}\'\n')
    with pytest.warns(DataQualityWarning, match="skipped 2 malformed"):
        r = parse_mllog(text)
    assert r.steps["train_step_timing_s"].tolist() == [1.5]
    assert r.steps["step"].tolist() == [8]
    assert r.run_stop is None
