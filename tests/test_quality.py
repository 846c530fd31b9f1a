import numpy as np
import pandas as pd

from powerlab.telemetry.quality import counter_resets, gaps, quality_report, stale
from tests.conftest import make_telemetry


def test_gaps_flag_first_sample_after_gap_per_device():
    df = make_telemetry(1, 2, 20, period_s=1.0)
    # remove 5 samples of GPU 1 -> one gap of 6 s
    drop = df.index[(df["gpu_index"] == 1) & df.index.isin(range(25, 30))]
    df = df.drop(drop)
    m = gaps(df, max_gap_s=1.5)
    assert m.index.equals(df.index)
    assert m.sum() == 1
    assert m[30] and df.loc[30, "gpu_index"] == 1
    assert gaps(df, max_gap_s=10).sum() == 0


def test_gaps_do_not_cross_devices_and_handle_shuffled_rows():
    df = make_telemetry(2, 2, 10, period_s=1.0)
    shuffled = df.sample(frac=1.0, random_state=3)
    assert gaps(shuffled, max_gap_s=1.5).sum() == 0


def test_stale_runs():
    df = make_telemetry(1, 1, 30)
    df.loc[5:16, "power_w"] = 123.0  # 12 identical readings
    df.loc[20:23, "power_w"] = 99.0  # 4 identical: below min_run
    m = stale(df, "power_w", min_run=10)
    assert m[5:16].all() and m.sum() == 12
    assert stale(df, "power_w", min_run=3).sum() == 16
    df.loc[:, "temp_gpu_c"] = np.nan
    assert stale(df, "temp_gpu_c", min_run=2).sum() == 0


def test_counter_resets_skip_nan_and_are_per_device():
    df = make_telemetry(1, 2, 10)
    e = df["energy_j"].to_numpy().copy()
    e[4] = np.nan
    e[5] = 10.0          # reset after a NaN: compare with last valid
    df["energy_j"] = e
    m = counter_resets(df)
    assert m.sum() == 1 and m[5]
    # GPU 1 starts lower than GPU 0 ended: not a reset (different device)
    df2 = make_telemetry(1, 2, 10)
    df2.loc[df2["gpu_index"] == 1, "energy_j"] -= 1e5
    assert counter_resets(df2).sum() == 0


def test_quality_report_counts():
    df = make_telemetry(1, 2, 30)
    df.loc[0:11, "power_w"] = 5.0
    rep = quality_report(df, max_gap_s=1.0)
    row = rep[rep["gpu_index"] == 0].iloc[0]
    assert row["stale_power_w"] == 12 and row["samples"] == 30 and row["gap"] == 0
    assert isinstance(rep, pd.DataFrame)


def test_gaps_refuses_nonpositive_or_nan_threshold():
    import pytest

    df = make_telemetry(1, 1, 5)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="max_gap_s"):
            gaps(df, max_gap_s=bad)
