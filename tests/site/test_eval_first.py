"""``eval.first_s``: the first evaluation of a job at its own offset (issue 32), the later
ones every ``eval.interval_s``; without it, the first after one interval as before."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import PowerlabError
from powerlab.site.engine import forecast
from powerlab.site.scenario import parse_scenario


def _spec(first=None):
    ev = {"interval_s": 100.0, "duration_s": 10.0}
    if first is not None:
        ev["first_s"] = first
    return {"name": "t", "horizon": {"start_utc": "2025-01-01T00:00:00Z",
                                     "end_utc": "2025-01-01T00:10:00Z"},
            "simulation": {"tick_s": 0.5},
            "hardware": {"cluster_gpus": 8},
            "jobs": [{"name": "j", "gpus": 8, "start_utc": "2025-01-01T00:00:00Z",
                      "duration_s": 600.0, "step_time_s": 5.0, "startup_s": 20.0,
                      "eval": ev}]}


def _eval_starts(spec):
    res = forecast(parse_scenario(spec), draws=1, seed=0)
    e = res.events
    t = e.loc[e["event"] == "eval", "timestamp"]
    return ((t - pd.Timestamp("2025-01-01T00:00:00Z")).dt.total_seconds()).tolist()


@pytest.mark.parametrize("first", [35.0, 150.0])
def test_first_evaluation_at_its_own_offset(first):
    """Start-up 20 s, first evaluation after ``first`` s of training (whole 5-s steps),
    the next ones 100 s of training plus 10 s of evaluation apart."""
    starts = _eval_starts(_spec(first))
    assert starts[0] == pytest.approx(20.0 + first)
    assert starts[1] == pytest.approx(20.0 + first + 10.0 + 100.0)


def test_without_first_s_the_cadence_is_unchanged():
    """The null case: no first_s gives the first evaluation one interval in."""
    assert _eval_starts(_spec())[:2] == pytest.approx([120.0, 230.0])


def test_first_s_needs_an_interval():
    spec = _spec(30.0)
    spec["jobs"][0]["eval"] = {"first_s": 30.0}
    with pytest.raises(PowerlabError, match="first_s"):
        parse_scenario(spec)


def test_warmup_block_runs_at_its_level_and_counts_as_training():
    """A 60-s warm-up at 300 W after a 20-s start-up, then compute at 600 W (no dip):
    the GPUs draw 300 W from 20 s to 80 s and 600 W after; the first evaluation still
    comes after 35 s of training (inside the warm-up), so the warm-up counts as
    training; without warmup_s (the null case) the block is at the compute level."""
    spec = _spec(35.0)
    job = spec["jobs"][0]
    job.update(warmup_s=60.0, compute_fraction=1.0,
               power={"compute_w": 600.0, "comm_w": 600.0, "warmup_w": 300.0,
                      "startup_w": 100.0, "eval_w": 200.0})
    spec["hardware"]["node_overhead_w"] = 0.0
    res = forecast(parse_scenario(spec), draws=1, seed=0)
    assert _eval_starts(spec)[0] == pytest.approx(55.0)
    gpu = np.asarray(res.it_w).reshape(-1)[:round(600 / 0.5)] / 8   # per GPU
    t = np.arange(len(gpu)) * 0.5
    assert gpu[(t > 25) & (t < 50)].mean() == pytest.approx(300.0, rel=0.01)
    assert gpu[(t > 70) & (t < 80)].mean() == pytest.approx(300.0, rel=0.01)
    assert gpu[(t > 90) & (t < 150)].mean() == pytest.approx(600.0, rel=0.01)
    job.pop("warmup_s")
    res = forecast(parse_scenario(spec), draws=1, seed=0)
    gpu = np.asarray(res.it_w).reshape(-1)[:round(600 / 0.5)] / 8
    assert gpu[(t > 25) & (t < 50)].mean() == pytest.approx(600.0, rel=0.01)
