"""Hosts, racks, regimes and sampling (issue 35), on the development fleet generator
tests/support/fleet_dev.py (tuned there; the blind generators only score,
benchmarks/validate_blind_fleet.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powerlab.throughput.group_episodes import summarise_episodes
from powerlab.throughput.regimes import find_regimes, regime_codes
from powerlab.throughput.stragglers import find_stragglers, straggler_baseline
from tests.support import fleet_dev

SMALL = {"n_hosts": 8, "hosts_per_rack": 2, "hours": 48.0}


def _run(seed, case, baseline=False, window_s=900.0, **kw):
    tel, truth = fleet_dev.generate(seed, case, **{**SMALL, **kw})
    base = None
    if baseline:
        base = straggler_baseline(fleet_dev.generate(seed, case, baseline=True,
                                                     **{**SMALL, **kw})[0])
    return find_stragglers(tel, baseline=base, window_s=window_s), truth


def _flagged(tbl):
    return set(tbl.loc[tbl["flagged"], "group"]) if len(tbl) else set()


@pytest.mark.parametrize("seed", [0])
def test_data_stall_host_found_by_its_utilisation(seed):
    res, truth = _run(seed, "data_stall")
    assert _flagged(res.hosts) == set(truth["slow_hosts"])
    h = res.hosts.set_index("group").loc[truth["slow_hosts"][0]]
    assert h["cause"] == "data stall (utilisation low)"
    assert h["util_offset"] == pytest.approx(-2.5, abs=0.6)
    assert res.flags.empty


def test_rack_cooling_in_the_afternoons_is_one_rack_finding():
    res, truth = _run(2, "rack_pm")
    assert _flagged(res.racks) == set(truth["slow_racks"])
    r = res.racks.set_index("group").loc[truth["slow_racks"][0]]
    assert r["episode_kind"] == "time of day" and r["cause"].startswith("cooling")
    start_h = int(r["hours_utc"][:2])
    assert 12 <= start_h <= 14          # the fault runs 13:00-18:00 UTC
    # one finding: no GPU flag and no host of that rack flagged on its own
    assert res.flags.empty and not _flagged(res.hosts)
    assert "time of day episodes" in str(res.summary())


@pytest.mark.slow
@pytest.mark.parametrize("case", ["cap_change", "clock_lock"])
def test_fleet_wide_change_is_a_regime_break_not_stragglers(case):
    res, truth = _run(1, case)
    assert res.flags.empty and not _flagged(res.hosts) and not _flagged(res.racks)
    reg = res.regimes
    assert len(reg) == 1
    brk = truth["regime_break"]
    assert reg["start"].iloc[0] - pd.Timedelta(hours=1) <= brk <= \
        reg["end"].iloc[0] + pd.Timedelta(hours=1)
    kind = "power limit" if case == "cap_change" else "simultaneous shifts"
    assert reg["kind"].iloc[0] == kind
    assert "regime break" in str(res.summary())


@pytest.mark.slow
def test_host_change_since_a_baseline_and_not_identifiable_without():
    """A whole host 2 % slower in clock only: each chip's change is centred on its
    hostmates (cancels); the host's change against the other hosts' does not."""
    res, truth = _run(3, "host_slow_quiet", baseline=True)
    host = truth["slow_hosts"][0]
    assert _flagged(res.hosts) == {host}
    h = res.hosts.set_index("group").loc[host]
    assert h["clock_change_pct"] == pytest.approx(-2.0, abs=0.2)
    assert res.flags.empty
    res0, _ = _run(3, "host_slow_quiet")
    h0 = res0.hosts.set_index("group").loc[host]
    if not h0["flagged"]:
        assert h0["identifiable"] == "not identifiable without a baseline"
    assert res0.params["host_silent_limit_pct"] > 1.0


@pytest.mark.slow
@pytest.mark.parametrize("interval_s, averaged", [(300.0, False), (900.0, True)])
def test_clean_and_hot_host_at_coarse_sampling(interval_s, averaged):
    for case in ("clean", "hot_host"):
        res, _ = _run(4, case, interval_s=interval_s, averaged=averaged)
        assert res.flags.empty and not _flagged(res.hosts) and not _flagged(res.racks)
        assert res.regimes.empty
        # a window holds at least 4 samples; the limit at this sampling is stated
        assert res.params["window_s_used"] >= 4 * interval_s
        assert res.params["min_detectable_pct"]["gpu_episode"] >= 1.0
        assert f"At {interval_s:g}-s sampling" in str(res.summary())


@pytest.mark.slow
def test_data_stall_stable_across_window_length():
    a, truth = _run(5, "data_stall", window_s=900)
    b, _ = _run(5, "data_stall", window_s=1800)
    assert _flagged(a.hosts) == _flagged(b.hosts) == set(truth["slow_hosts"])


def test_regimes_known_answer():
    """A limit lowered from 700 to 600 W host by host over windows 10-12: one break,
    its transition windows 11-12 left out (-1), the regimes 0 before and 1 after."""
    n_w, per_w, n_g = 24, 4, 8
    wcode = np.repeat(np.arange(n_w), per_w)
    limit = np.full((n_w * per_w, n_g), 700.0)
    for g in range(n_g):
        limit[(11 + g // 4) * per_w:, g] = 600.0
    wstart = np.arange(n_w) * 900 * 10**9
    reg = find_regimes(wcode=wcode, n_w=n_w, wstart=wstart, win_ns=900 * 10**9,
                       win_clock=np.zeros((n_w, n_g)), level_pct=np.zeros(n_w),
                       limit=limit)
    assert reg["kind"].tolist() == ["power limit"]
    assert (reg["before"].item(), reg["after"].item()) == (700.0, 600.0)
    code = regime_codes(reg, n_w)
    assert (code[:11] == 0).all() and (code[11:12] == -1).all() and (code[12:] == 1).all()


def test_episode_classes_known_answer():
    """Three afternoons 13:00-18:00 on three days: time of day; two episodes at 02:00
    and 15:00: on/off."""
    def ep(day, h0, h1, group):
        t0 = pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(days=day)
        return {"level": "rack", "group": group, "metric": "clock",
                "onset": t0 + pd.Timedelta(hours=h0), "end": t0 + pd.Timedelta(hours=h1),
                "duration_s": 3600 * (h1 - h0), "shift": -2.0, "temp_rise_c": 8.0,
                "thermal_bits_rise": 0.1, "explained": False, "w_on": 0, "w_off": 1}
    eps = pd.DataFrame([ep(d, 13, 18, "r1") for d in range(3)]
                       + [ep(0, 2, 4, "r2"), ep(1, 15, 16, "r2")])
    s = summarise_episodes(eps).set_index("group")
    assert s.loc["r1", "episode_kind"] == "time of day"
    assert s.loc["r1", "hours_utc"] == "13:00-18:00"
    assert s.loc["r2", "episode_kind"] == "on/off"


def test_gpu_episode_classes_known_answer():
    """One GPU slow 14:00-16:00 on two days (time of day), another once (on/off)."""
    from powerlab.throughput.straggler_scoring import _gpu_episode_kinds

    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    eps = pd.DataFrame({
        "host": ["n0", "n0", "n1"], "gpu_index": pd.array([3, 3, 0], dtype="Int16"),
        "onset": [t0 + pd.Timedelta(hours=14), t0 + pd.Timedelta(hours=38),
                  t0 + pd.Timedelta(hours=5)],
        "end": [t0 + pd.Timedelta(hours=16), t0 + pd.Timedelta(hours=40),
                t0 + pd.Timedelta(hours=6)],
        "shift_pct": [-1.5, -1.6, -2.0]})
    assert _gpu_episode_kinds(eps).tolist() == ["time of day", "time of day", "on/off"]
