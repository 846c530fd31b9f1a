import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import AnalysisError, SchemaError
from powerlab.telemetry.quality import (
    clock_drift,
    counter_resets,
    duplicate_devices,
    gaps,
    implausible,
    quality_report,
    stale,
)
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


# --------------------------------------------------------------------------- cross-device


def _fleet(n_hosts=4, n_gpus=4, n=1500, seed=0, period_s=1.0, start="2024-05-17T00:00:00Z"):
    """GPUs of one synchronous job: a common workload (step pattern, random load changes,
    checkpoint dips) plus a per-GPU offset (sd 10 W) and noise (sd 3 W)."""
    rng = np.random.default_rng(seed)
    k = np.arange(n)
    level = np.repeat(rng.uniform(450, 650, n // 50 + 1), 50)[:n]
    work = level + 80 * (k % 7 < 4) - 250 * (rng.random(n) < 0.01)
    t = (pd.Timestamp(start) + pd.to_timedelta(k * period_s, unit="s")).as_unit("ns")
    rows = []
    for h in range(n_hosts):
        for g in range(n_gpus):
            rows.append(pd.DataFrame({
                "timestamp": t, "host": f"node-{h:02d}", "scope": "gpu", "gpu_index": g,
                "power_w": np.round(work + rng.normal(0, 10) + rng.normal(0, 3, n), 2),
                "temp_gpu_c": 60 + rng.normal(0, 1, n)}))
    return pd.concat(rows, ignore_index=True)


def test_independent_gpus_of_one_job_are_not_duplicates():
    for seed in range(3):
        d = duplicate_devices(_fleet(seed=seed))
        assert not d and d.pairs.empty and d.lines() == []
    # idle GPUs stuck at one reading are not fingerprints either
    f = _fleet(n_hosts=2, n_gpus=2, n=200).assign(power_w=70.0)
    assert not duplicate_devices(f)


def test_exact_copy_under_another_name_is_found():
    f = _fleet()
    src = (f["host"] == "node-00") & (f["gpu_index"] == 1)
    dst = (f["host"] == "node-03") & (f["gpu_index"] == 2)
    f.loc[dst, "power_w"] = f.loc[src, "power_w"].to_numpy()
    d = duplicate_devices(f)
    assert d.groups == [["node-00/gpu1", "node-03/gpu2"]]
    assert d.pairs["match"].tolist() == ["identical"] and d.pairs["shift_s"].iloc[0] == 0
    line = d.lines()[0]
    assert "identical" in line and "node-00/gpu1" in line and "node-03/gpu2" in line


def test_duplicate_devices_display_comes_from_the_results_base():
    from powerlab._summary import Results
    from powerlab.telemetry.quality import DuplicateDevices

    f = _fleet()
    src = (f["host"] == "node-00") & (f["gpu_index"] == 1)
    f.loc[(f["host"] == "node-03") & (f["gpu_index"] == 2), "power_w"] = \
        f.loc[src, "power_w"].to_numpy()
    d = duplicate_devices(f)
    assert isinstance(d, Results)
    assert not {"__str__", "__repr__", "_repr_html_"} & set(vars(DuplicateDevices))
    assert str(d) == d.summary().as_text() == d.lines()[0]
    assert d._repr_html_() == d.summary().as_html()
    assert repr(d) == "<DuplicateDevices power_w: 1 group(s), 1 pair(s)>"
    none = duplicate_devices(_fleet(seed=1))
    assert str(none) == "no devices with identical power_w series"


def test_whole_host_copied_gives_one_group_per_gpu():
    f = _fleet(n_hosts=3)
    copy = f[f["host"] == "node-01"].assign(host="node-09")
    d = duplicate_devices(pd.concat([f, copy], ignore_index=True))
    assert d.groups == [[f"node-01/gpu{g}", f"node-09/gpu{g}"] for g in range(4)]
    assert len(d.lines()) == 4


def test_copy_shifted_in_time_and_near_identical_copy():
    f = _fleet(n_hosts=2, n_gpus=2)
    src = f[(f["host"] == "node-00") & (f["gpu_index"] == 0)]
    shifted = src.assign(host="node-07", timestamp=src["timestamp"] + pd.Timedelta("30s"))
    rng = np.random.default_rng(1)
    noisy = src.assign(host="node-08", power_w=src["power_w"] + rng.normal(0, 0.05, len(src)))
    d = duplicate_devices(pd.concat([f, shifted, noisy], ignore_index=True))
    assert d.groups == [["node-00/gpu0", "node-07/gpu0", "node-08/gpu0"]]
    p = d.pairs.set_index("device_b")
    assert p.loc["node-07/gpu0", "match"] == "shifted"
    assert p.loc["node-07/gpu0", "shift_s"] == 30.0
    assert p.loc["node-08/gpu0", "match"] == "near-identical"
    assert "shifted by 30 s" in d.lines()[0] and "identical" in d.lines()[0]


def _drift_fleet(hours=4, seed=0):
    f = _fleet(n_hosts=5, n_gpus=2, n=hours * 3600, seed=seed)
    t = f["timestamp"]
    el = (t - t.min()).dt.total_seconds()
    ahead = f["host"] == "node-02"        # clock ahead by a constant 10 s
    drifting = f["host"] == "node-04"     # clock gains 4 s per hour (1.1e-3)
    f.loc[ahead, "timestamp"] = t[ahead] + pd.Timedelta("10s")
    f.loc[drifting, "timestamp"] = t[drifting] + pd.to_timedelta(el[drifting] / 900, unit="s")
    return f


def test_clock_drift_finds_offset_and_drifting_hosts():
    r = clock_drift(_drift_fleet()).set_index("host")
    assert r.loc["node-02", "offset_s"] == pytest.approx(10, abs=1.01)
    assert r.loc["node-02", "drift_s_per_h"] == pytest.approx(0, abs=1.0)
    assert r.loc["node-04", "drift_s_per_h"] == pytest.approx(4, abs=0.5)
    assert r["flagged"].tolist() == [False, False, True, False, True]
    assert (r["windows"] == 16).all()


def test_clock_drift_null_fleet_flags_nothing():
    for seed in range(3):
        f = _fleet(n_hosts=5, n_gpus=2, n=3 * 3600, seed=seed)
        r = clock_drift(f)
        assert not r["flagged"].any(), r
        assert (r["offset_s"].abs() <= 1).all()


@pytest.mark.bad_input("reliability")
def test_clock_drift_needs_three_hosts():
    with pytest.raises(AnalysisError, match="at least 3 hosts"):
        clock_drift(_fleet(n_hosts=2, n=600))


def test_implausible_values_for_the_model():
    f = _fleet(n_hosts=1, n_gpus=2, n=50).assign(clock_sm_mhz=1980.0)
    assert not implausible(f, "NVIDIA H100 80GB HBM3").any()
    f.loc[3, "power_w"] = 2000.0
    f.loc[4, "power_w"] = -5.0
    f.loc[5, "clock_sm_mhz"] = 2600.0
    f.loc[6, "temp_gpu_c"] = 130.0
    f.loc[7, "temp_gpu_c"] = 0.0
    m = implausible(f, "NVIDIA H100 80GB HBM3")
    assert m[m].index.tolist() == [3, 4, 5, 6, 7]
    # without a model the power limit column bounds power; the clock is not judged
    g = f.assign(power_limit_w=700.0)
    r = implausible(g)
    assert r[r].index.tolist() == [3, 4, 6, 7]
    # the A100's 400 W make 650 W implausible
    assert implausible(f.iloc[:3], "NVIDIA A100-SXM4-80GB").all()


@pytest.mark.bad_input("reliability")
def test_implausible_unknown_model_and_missing_column():
    with pytest.raises(ValueError, match="unknown device model"):
        implausible(_fleet(n_hosts=1, n_gpus=1, n=10), "GeForce 256")
    with pytest.raises(SchemaError):
        duplicate_devices(_fleet(n_hosts=1, n_gpus=1, n=10), column="energy_j")


def _smi_csv(f: pd.DataFrame) -> str:
    """nvidia-smi --query-gpu CSV of a fleet frame (one host per file)."""
    lines = ["timestamp, index, power.draw [W], temperature.gpu"]
    for r in f.sort_values(["timestamp", "gpu_index"]).itertuples():
        lines.append(f"{r.timestamp:%Y/%m/%d %H:%M:%S.%f}"[:-3]
                     + f", {r.gpu_index}, {r.power_w:.2f} W, {r.temp_gpu_c:.0f}")
    return "\n".join(lines) + "\n"


def test_cli_import_and_summary_name_identical_devices(tmp_path, capsys):
    from powerlab.cli import main

    f = _fleet(n_hosts=2, n_gpus=2, n=120)
    a = f[f["host"] == "node-00"]
    (tmp_path / "a.csv").write_text(_smi_csv(a))
    (tmp_path / "b.csv").write_text(_smi_csv(f[f["host"] == "node-01"]))
    (tmp_path / "copy.csv").write_text(_smi_csv(a))          # a copied file
    store = tmp_path / "store"
    outs = []
    for src, host in (("a.csv", "node-00"), ("b.csv", "node-01"), ("copy.csv", "node-05")):
        assert main(["import", str(tmp_path / src), "--out", str(store), "--host", host,
                     "--tz", "UTC"]) == 0
        outs.append(capsys.readouterr().out)
    expected = [("warning: 2 devices with identical power_w series: node-00/gpu0, "
                "node-05/gpu0"),
                ("warning: 2 devices with identical power_w series: node-00/gpu1, "
                "node-05/gpu1")]
    # independent hosts: silent; the copy: one line per group, naming both members
    assert ["identical" in o for o in outs] == [False, False, True]
    assert [ln for ln in outs[2].splitlines() if "identical" in ln] == expected
    assert main(["summary", str(store)]) == 0
    out = capsys.readouterr().out
    assert [ln for ln in out.splitlines() if "identical" in ln] == expected


def test_real_h100_job_is_not_flagged_and_its_copy_is(shared_data):
    """8 H100s of one training job sampled at 100 ms (real): no identical pair, nothing
    implausible; the same file under a second host name: 8 groups."""
    import warnings

    from powerlab.iotools import read_any

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = read_any(shared_data / "nvidia-smi-h100-100ms" / "h100-traces_ckpt1.csv",
                      host="n1", tz="UTC")
    assert not duplicate_devices(df)
    assert not implausible(df, "NVIDIA H100 80GB HBM3").any()
    d = duplicate_devices(pd.concat([df, df.assign(host="n9")], ignore_index=True))
    assert d.groups == [[f"n1/gpu{g}", f"n9/gpu{g}"] for g in range(8)]
