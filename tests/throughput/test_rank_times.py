"""Slow ranks and slow links from per-rank section times (issue 35), on the development
job generator tests/support/rank_dev.py (the blind one only scores,
benchmarks/validate_blind_fleet.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import AnalysisError
from powerlab.iotools.ranktimes import read_rank_times
from powerlab.throughput.rank_times import find_slow_ranks, section_kind
from tests.support import rank_dev


def _find(seed, case, **kw):
    t, m, truth = rank_dev.generate(seed, case, **kw)
    return find_slow_ranks(read_rank_times(t, rank_map=m)), truth


def test_section_kinds():
    assert [section_kind(s) for s in ("nccl:all_reduce pg0", "allreduce", "send",
                                      "dataloader", "forward", "backward")] == \
        ["comm", "comm", "comm", "data", "compute", "compute"]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["slow_rank", "slow_link", "slow_p2p"])
def test_finds_the_slow_rank_or_link(case):
    hits = 0
    for seed in range(4):
        res, truth = _find(seed, case, slow_pct=4.0)
        want = set(truth["slow_ranks"] or truth["slow_link"])
        f = res.findings
        hits += any(want <= set(r) for r in f["ranks"])
        # nothing else is reported
        assert len(f) == 1
        kind = "slow rank" if case == "slow_rank" else "slow link"
        assert f["kind"].iloc[0] == kind
        if case == "slow_link":
            # two ranks on two hosts: an inter-node link, named by its hosts
            assert "inter-node link between" in f["detail"].iloc[0]
            assert len(f["hosts"].iloc[0]) == 2
    assert hits == 4


@pytest.mark.slow
def test_clean_jobs_report_nothing_and_state_the_limit():
    for seed in range(6):
        res, _ = _find(seed, "clean")
        assert res.findings.empty
    det = res.params["min_detectable_pct"]
    # the compute limit is z x the ranks' spread (chips 0.4 %): 1-3 %
    assert 1.0 <= det["compute"] <= 3.0
    assert "smallest excess detectable" in str(res.summary())


def test_communication_only_times_find_the_rank_the_others_wait_for():
    """A flight recorder sees collectives only: the slow rank is the one whose
    collectives are short (it arrives last; the others' include their wait)."""
    t, m, truth = rank_dev.generate(2, "slow_rank", slow_pct=4.0)
    comm = t[t["section"] == "allreduce"]
    res = find_slow_ranks(comm)
    assert res.findings["ranks"].tolist() == [truth["slow_ranks"]]
    assert "wait" in res.findings["detail"].iloc[0]


def test_stable_across_step_count():
    a, truth = _find(1, "slow_link", n_steps=40)
    b, _ = _find(1, "slow_link", n_steps=120)
    assert a.findings["ranks"].tolist() == b.findings["ranks"].tolist() == [
        sorted(truth["slow_link"])]
    assert a.findings["excess_pct"].iloc[0] == pytest.approx(
        b.findings["excess_pct"].iloc[0], abs=3.0)


def test_bad_input():
    with pytest.raises(AnalysisError, match="columns"):
        find_slow_ranks(pd.DataFrame({"rank": [0]}))
    t = pd.DataFrame({"rank": np.arange(3), "step": 0, "section": "fwd",
                      "duration_s": 1.0})
    with pytest.raises(AnalysisError, match="at least 4"):
        find_slow_ranks(t)


def test_hostmates_waiting_for_a_slow_rank_are_not_a_slow_link():
    """Tensor parallel inside a host: the slow rank's hostmates wait for it in their
    intra-host collective (+20 % there, every step); one finding, the slow rank."""
    t, m, truth = rank_dev.generate(3, "slow_rank", slow_pct=4.0)
    bad = truth["slow_ranks"][0]
    mates = [r for r in range(bad // 8 * 8, bad // 8 * 8 + 8) if r != bad]
    tp = t[t["section"] == "forward"].assign(section="tp_comm", duration_s=0.03)
    tp.loc[tp["rank"].isin(mates), "duration_s"] *= 1.2
    res = find_slow_ranks(read_rank_times(pd.concat([t, tp]), rank_map=m))
    assert res.findings["kind"].tolist() == ["slow rank"]
    assert res.findings["ranks"].tolist() == [[bad]]
    assert "7 hostmates wait for it in tp_comm" in res.findings["detail"].iloc[0]
