"""Tests of powerlab.calibration.runfind (the run of event-less telemetry) and of the time-split
backtest that uses it.

The synthetic recordings are GPU-scope telemetry of one host with 8 GPUs read every
0.1 s, each reading the mean of 10-ms samples over the interval before it (brute force,
not powerlab.calibration.meter): idle, a training job with a known level and step period, an
idle tail, a short second burst and idle again.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from powerlab.calibration.backtest import backtest_split
from powerlab.calibration.runfind import find_run

FINE, METER_S, GPUS = 0.01, 0.1, 8
IDLE_W, TAIL_W = 90.0, 70.0           # per GPU, before and after the job
HI_W, LO_W = 600.0, 300.0             # per GPU, the step's compute and dip levels
STEP_S, DIP_S = 10.0, 4.0
IDLE_S, JOB_S, TAIL_S, BURST_S, END_S = 120.0, 360.0, 150.0, 40.0, 60.0
T0 = pd.Timestamp("2025-07-27T00:00:00Z")


def _recording(*, second_half_step_s: float = STEP_S, seed: int = 0) -> pd.DataFrame:
    """GPU-scope readings of idle - training - idle tail - second burst - idle.

    Training from ``IDLE_S`` for ``JOB_S``: steps of ``STEP_S`` at ``HI_W`` with the last
    ``DIP_S`` at ``LO_W``; from the middle of the job the step is ``second_half_step_s``
    long (same duty cycle) when given.  The burst is flat at ``HI_W``."""
    rng = np.random.default_rng(seed)
    dur = IDLE_S + JOB_S + TAIL_S + BURST_S + END_S
    t = (np.arange(round(dur / FINE)) + 0.5) * FINE
    p = np.full(len(t), IDLE_W)
    job = (t >= IDLE_S) & (t < IDLE_S + JOB_S)
    mid = IDLE_S + JOB_S / 2
    step = np.where(t < mid, STEP_S, second_half_step_s)
    origin = np.where(t < mid, IDLE_S, mid)
    x = np.mod(t - origin, step)
    p[job] = np.where(x[job] < step[job] * (1 - DIP_S / STEP_S), HI_W, LO_W)
    b0 = IDLE_S + JOB_S + TAIL_S
    p[(t >= IDLE_S + JOB_S) & (t < b0)] = TAIL_W
    p[(t >= b0) & (t < b0 + BURST_S)] = HI_W
    p[t >= b0 + BURST_S] = TAIL_W
    k = round(METER_S / FINE)
    means = p[: len(p) // k * k].reshape(-1, k).mean(axis=1)
    ts = T0 + pd.to_timedelta((np.arange(len(means)) + 1) * METER_S, unit="s")
    rows = [pd.DataFrame({"timestamp": ts, "host": "h0", "scope": "gpu", "gpu_index": g,
                          "power_w": means + rng.normal(0, 3.0, len(means))})
            for g in range(GPUS)]
    df = pd.concat(rows, ignore_index=True).sort_values(["timestamp", "gpu_index"],
                                                        kind="stable")
    df["host"] = df["host"].astype("string")
    df["scope"] = df["scope"].astype("string")
    df["gpu_index"] = df["gpu_index"].astype("Int16")
    return df.reset_index(drop=True)


@pytest.fixture(scope="module")
def stationary():
    return _recording()


def test_find_run_known_bounds(stationary):
    """Known answer: the job runs from IDLE_S to IDLE_S + JOB_S after the recording's
    start.  The rule (powerlab.calibration.runfind): "the longest stretch of 1-s summed power at
    or above 90 % of its median, dips of up to 3 step periods joined"; the bounds are its
    first and last 1-s mean, so they are within one meter interval plus one step of the
    truth (the last step may end in its dip).  The idle tail (15 step periods) is not
    joined, so the short second burst is not part of the run."""
    r = find_run(stationary, meter_interval_s=METER_S)
    tol = METER_S + STEP_S
    assert abs((r.start - T0).total_seconds() - IDLE_S) <= tol
    assert abs((r.end - T0).total_seconds() - (IDLE_S + JOB_S)) <= tol
    # the 1-s level: the median of 1-s means of the step is the compute level x 8 GPUs
    assert r.level_w == pytest.approx(GPUS * HI_W, rel=0.02)
    assert r.step_period_s == pytest.approx(STEP_S, rel=0.1)


def test_find_run_is_stable_when_the_record_is_cut(stationary):
    """The bounds do not depend on how much idle the recording holds after the job."""
    a = find_run(stationary, meter_interval_s=METER_S)
    cut = stationary[stationary["timestamp"] < T0 + pd.Timedelta(
        seconds=IDLE_S + JOB_S + 60)]
    b = find_run(cut, meter_interval_s=METER_S)
    assert (a.start, a.end) == (b.start, b.end)


@pytest.mark.parametrize("split", [0.4, 0.5, 0.6])
def test_split_backtest_without_events_scores_the_run_only(stationary, split):
    """Energy of a stationary job forecast through the meters (time split of the found
    run) is within 2 % of the measured, at any of three splits; the summary says how the
    run was found and gives no regime-change note (null case)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = backtest_split(stationary, split=split)
    assert abs(res.value("energy_j")) < 2.0
    notes = res.notes()
    assert notes[0].startswith("no run events: the run was found from the readings")
    assert not any(n.startswith("regime change") for n in notes)
    idx = res.series["split"].index
    assert (idx[-1] - T0).total_seconds() <= IDLE_S + JOB_S + METER_S + STEP_S


def test_split_backtest_says_when_the_step_pattern_changes():
    """A job whose step period doubles at the middle of its run (the held-out part is in
    another regime) gets a regime-change note in words, and its numbers still."""
    rec = _recording(second_half_step_s=2 * STEP_S)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = backtest_split(rec, split=0.4)
    assert any(n.startswith("regime change") and "period" in n for n in res.notes())
    assert np.isfinite(res.value("energy_j"))


def test_nvidia_smi_trace_run_bounds(shared_data):
    """The h100 ckpt500 trace (shared, read-only): training 01:50:20-01:55:10 UTC by the
    20-s means, idle at 0.6 kW, a second short burst at 01:58:40; the run found is the
    training only (within one 20-s mean)."""
    from powerlab.iotools.nvidia_smi import read_nvidia_smi

    path = shared_data / "nvidia-smi-h100-100ms" / "h100-traces_ckpt500.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = read_nvidia_smi(path, tz="UTC")
    r = find_run(p[p["scope"] == "gpu"], meter_interval_s=0.1)
    day = "2025-07-27T"
    assert abs((r.start - pd.Timestamp(day + "01:50:20Z")).total_seconds()) <= 20
    assert abs((r.end - pd.Timestamp(day + "01:55:10Z")).total_seconds()) <= 20


@pytest.mark.slow  # reads a 2.6-MB trace and runs the backtest (3-7 s here)
def test_backtest_cli_on_an_nvidia_smi_trace_notes_the_run(shared_data, tmp_path):
    """``powerlab backtest`` on the ckpt500 trace (no events) scores the training only:
    energy within 2 % (it was +207 % when idle time and the second burst were scored),
    and ``backtest.csv``'s note column and the summary say how the run was found."""
    from powerlab.cli import main

    path = shared_data / "nvidia-smi-h100-100ms" / "h100-traces_ckpt500.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(["backtest", str(path), "--tz", "UTC", "--out", str(tmp_path / "bt")])
    assert rc == 0
    t = pd.read_csv(tmp_path / "bt" / "backtest.csv")
    e = t.loc[t["metric"] == "energy_j", "error_pct"].iloc[0]
    assert abs(e) < 2.0
    assert t["note"].iloc[0].startswith("no run events: the run was found from the readings")
    assert "no run events" in (tmp_path / "bt" / "summary.txt").read_text()
