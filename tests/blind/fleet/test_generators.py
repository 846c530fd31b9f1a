"""Quick physics checks of the blind fleet generators (not of any detector)."""

import json

import numpy as np
import pandas as pd
import pytest

from tests.blind.fleet.gen_fleet import CASES as FLEET_CASES, generate_fleet
from tests.blind.fleet.gen_ranks import SECTIONS, generate_ranks, write_ranks

COLUMNS = ["timestamp", "host", "scope", "gpu_index", "gpu_uuid", "rack", "power_w", "energy_j",
           "clock_sm_mhz", "clock_mem_mhz", "temp_gpu_c", "temp_mem_c", "util_gpu_pct",
           "power_limit_w", "throttle_reasons", "temp_inlet_c"]
KW = dict(n_hosts=8, gpus_per_host=8, days=1.0, interval_s=300, seed=5)


@pytest.fixture(scope="module")
def fleets():
    return {c: generate_fleet(case=c, **KW) for c in FLEET_CASES}


def _busy(df):
    return df[df.util_gpu_pct > 50]


def test_shape_columns_dtypes(fleets):
    for case, (df, truth) in fleets.items():
        assert list(df.columns) == COLUMNS
        assert len(df) == 288 * 64
        assert str(df.timestamp.dtype) == "datetime64[ns, UTC]"
        assert str(df.gpu_index.dtype) == "Int16" and str(df.throttle_reasons.dtype) == "UInt64"
        assert not df.duplicated(["timestamp", "host", "gpu_index"]).any()
        assert df.gpu_uuid.nunique() == 64
        assert (df.power_w > 0).all() and (df.power_w <= df.power_limit_w * 1.02 + 1e-9).all()
        assert df.clock_sm_mhz.mod(15).eq(0).all()
        assert (df.groupby("gpu_uuid").energy_j.diff().dropna() > 0).all()
        assert truth["case"] == case
        json.dumps(truth)


def test_same_fleet_in_every_case(fleets):
    clean = fleets["clean"][0]
    for case in ("slow_host", "rack_cooling"):
        df = fleets[case][0]
        assert (df.gpu_uuid == clean.gpu_uuid).all()


def test_dvfs_clock_falls_with_temperature_under_cap(fleets):
    df = _busy(fleets["clean"][0])
    # across a chip's own samples: hotter inlet -> lower clock
    r = df.groupby("gpu_uuid").apply(lambda g: np.corrcoef(g.temp_inlet_c, g.clock_sm_mhz)[0, 1],
                                     include_groups=False)
    assert r.median() < -0.3
    assert df.clock_sm_mhz.std() > 10  # chip-to-chip variation


def test_slow_host(fleets):
    clean = _busy(fleets["clean"][0])
    df, truth = fleets["slow_host"]
    df = _busy(df)
    h = truth["slow_hosts"][0]
    ratio = df[df.host == h].clock_sm_mhz.mean() / clean[clean.host == h].clock_sm_mhz.mean()
    assert ratio == pytest.approx(0.98, abs=0.004)
    others = df.host != h
    assert (df[others].clock_sm_mhz.to_numpy() == clean[clean.host != h].clock_sm_mhz.to_numpy()).all()
    assert len(truth["stragglers"]) == 8


def test_data_stall(fleets):
    clean = _busy(fleets["clean"][0])
    df, truth = fleets["data_stall"]
    df = _busy(df)
    h = truth["stall_hosts"][0]
    on = df.host == h
    assert df[on].util_gpu_pct.mean() == pytest.approx(97.0, abs=0.6)
    assert df[~on].util_gpu_pct.mean() > 99
    assert (df.clock_sm_mhz.to_numpy() == clean.clock_sm_mhz.to_numpy()).all()  # clocks normal
    assert df[on].power_w.mean() < df[~on].power_w.mean() - 3
    assert truth["stragglers"] == []


def test_rack_cooling_afternoons_only(fleets):
    clean = fleets["clean"][0]
    df, truth = fleets["rack_cooling"]
    hour = df.timestamp.dt.tz_convert(truth["site_tz"]).dt.hour
    hot = df.host.isin(truth["hot_hosts"])
    d_in = df.temp_inlet_c - clean.temp_inlet_c
    assert d_in[hot & hour.between(13, 16)].min() >= 7.9
    assert d_in[~hot].abs().max() < 1e-9
    assert d_in[hot & ((hour < 12) | (hour >= 18))].abs().max() < 1e-9
    m = hot & hour.between(13, 16) & (df.util_gpu_pct > 50)
    drop = df.clock_sm_mhz[m].mean() / clean.clock_sm_mhz[m].mean() - 1
    assert -0.03 < drop < -0.01
    assert len(truth["hot_intervals_utc"]) >= 1


def test_power_limit_change(fleets):
    df, truth = fleets["power_limit_change"]
    t = pd.Timestamp(truth["power_limit_change"]["time"])
    assert set(df[df.timestamp < t].power_limit_w) == {700.0}
    assert set(df[df.timestamp >= t].power_limit_w) == {600.0}
    b = _busy(df)
    assert b[b.timestamp >= t].clock_sm_mhz.mean() < b[b.timestamp < t].clock_sm_mhz.mean() - 30


def test_sampling_intervals():
    for s in (60, 900):
        df, _ = generate_fleet(n_hosts=2, gpus_per_host=8, days=0.25, interval_s=s, seed=1)
        assert df.timestamp.diff().dropna().max() == pd.Timedelta(seconds=s)


# ---------------------------------------------------------------- ranks

def _wide(times, sec):
    return times[times.section == sec].pivot(index="step", columns="rank", values="duration_s")


def test_ranks_shape_and_sync():
    times, rmap, truth = generate_ranks(dp=4, tp=8, n_steps=50, case="clean", seed=2)
    assert list(times.columns) == ["rank", "step", "section", "duration_s"]
    assert len(times) == 32 * 50 * len(SECTIONS)
    assert list(rmap.columns) == ["rank", "host", "gpu_index", "dp_rank", "tp_rank"]
    assert rmap.host.nunique() == 4 and (times.duration_s > 0).all()
    # every TP group finishes each tp collective together: arrival + duration equal
    total = times.groupby("rank").duration_s.sum()
    assert total.max() - total.min() < 0.2 * 0.12 * 50


def test_slow_rank_signature():
    times, rmap, truth = generate_ranks(dp=4, tp=8, n_steps=60, case="slow_rank", seed=3)
    r, fac = truth["slow_ranks"][0]["rank"], truth["slow_ranks"][0]["factor"]
    assert 1.03 <= fac <= 1.05
    fwd = _wide(times, "backward").mean()
    assert fwd[r] / fwd.drop(r).median() == pytest.approx(fac, abs=0.01)
    tpc = _wide(times, "tp_comm_bwd").mean()
    peers = [x for x in range(32) if x // 8 == r // 8 and x != r]
    assert tpc[r] < tpc[peers].min()  # it never waits; its peers do


def test_slow_link_only_its_group():
    times, rmap, truth = generate_ranks(dp=4, tp=8, n_steps=60, case="slow_link", seed=4)
    sl = truth["slow_link"]
    assert sl["group"] == "dp" and rmap.host[sl["ranks"][0]] != rmap.host[sl["ranks"][1]]
    w = _wide(times, "dp_allreduce")
    # the transfer of a group's collective = the shortest member duration
    mins = {k: w[list(range(k, 32, 8))].min(axis=1).median() for k in range(8)}
    k = sl["group_index"]
    others = np.median([v for g, v in mins.items() if g != k])
    assert mins[k] / others == pytest.approx(1.5, rel=0.05)
    tmins = _wide(times, "tp_comm_bwd").min(axis=1).median()
    assert tmins == pytest.approx(0.05, rel=0.1)


def test_write_ranks(tmp_path):
    paths = write_ranks(tmp_path, dp=2, tp=4, n_steps=5, case="slow_rank", seed=1)
    df = pd.read_csv(paths["sections"])
    assert list(df.columns) == ["rank", "step", "section", "duration_s"]
    assert json.loads(paths["truth"].read_text())["slow_ranks"][0]["rank"] in range(8)
