"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
#: ../shared/data beside the checkout; POWERLAB_SHARED_DATA points elsewhere (a worktree).
SHARED_DATA = Path(os.environ.get("POWERLAB_SHARED_DATA", REPO.parent / "shared" / "data"))
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def shared_data() -> Path:
    """The read-only real data beside the checkout; skip where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared real data not found at {SHARED_DATA}")
    return SHARED_DATA


def make_telemetry(n_hosts: int = 2, n_gpus: int = 4, n_samples: int = 50,
                   start: str = "2024-05-17T23:59:50Z", period_s: float = 0.5,
                   seed: int = 0) -> pd.DataFrame:
    """A small valid telemetry frame with every core column filled (crossing midnight)."""
    rng = np.random.default_rng(seed)
    rows = []
    t = pd.Timestamp(start) + pd.to_timedelta(np.arange(n_samples) * period_s, unit="s")
    for h in range(n_hosts):
        for g in range(n_gpus):
            p = 300 + 50 * rng.standard_normal(n_samples)
            rows.append(pd.DataFrame({
                "timestamp": t,
                "host": f"node-{h:02d}",
                "scope": "gpu",
                "gpu_index": g,
                "gpu_uuid": f"GPU-{h:04d}{g:04d}-aaaa-bbbb-cccc-000000000000",
                "power_w": p,
                "energy_j": 1e6 + np.cumsum(p * period_s),
                "clock_sm_mhz": rng.choice([1755.0, 1980.0], n_samples),
                "clock_mem_mhz": 2619.0,
                "temp_gpu_c": 40 + 5 * rng.random(n_samples),
                "temp_mem_c": 45 + 5 * rng.random(n_samples),
                "util_gpu_pct": rng.integers(0, 101, n_samples).astype(float),
                "power_limit_w": 700.0,
                "throttle_reasons": rng.choice(np.array([0, 4, 2**40 + 1], dtype=np.uint64),
                                               n_samples),
            }))
    from powerlab.telemetry.schema import conform

    return conform(pd.concat(rows, ignore_index=True))


@pytest.fixture
def telemetry() -> pd.DataFrame:
    return make_telemetry()


@pytest.fixture(scope="session")
def mlperf_gpt3():
    """The bundled MLPerf GPT-3 64-node run: ``(node power telemetry, MLLogResult)``, read
    once per test session (tests/calibration/test_profile.py, tests/system/test_demo.py)."""
    from powerlab.iotools import read_mllog, read_mlperf_power

    folder = REPO / "data" / "mlperf-gpt3-64node"
    assert (folder / "power").is_dir(), f"bundled MLPerf excerpt missing at {folder}"
    import warnings

    from powerlab.exceptions import DataQualityWarning

    with warnings.catch_warnings():
        # as published: 30 pairs of node logs hold identical readings (asserted in
        # tests/iotools/test_mlperf.py)
        warnings.filterwarnings("ignore", ".*node logs with identical readings",
                                DataQualityWarning)
        power = read_mlperf_power(folder / "power")
    return power, read_mllog(next(folder.glob("result_*.txt*")))


def pytest_collection_modifyitems(config, items):
    """With ``POWERLAB_TALLY_FILE`` set, write the bad-input cases per component there
    (tests/support/robustness_tally.py builds docs/robustness.md from it)."""
    import json
    import os

    out = os.environ.get("POWERLAB_TALLY_FILE")
    if not out:
        return
    tally: dict[str, list[str]] = {}
    for item in items:
        for mark in item.iter_markers("bad_input"):
            component = mark.args[0] if mark.args else "unspecified"
            tally.setdefault(component, []).append(item.nodeid)
    Path(out).write_text(json.dumps(tally, indent=1, sort_keys=True), encoding="utf-8")


def make_targets(rows):
    """Curtailment targets (powerlab.flex.targets.Targets) from ``(start, end, cap_w,
    notice)`` tuples, sources ``t0, t1, ...`` (notice ``None``: known in advance)."""
    from powerlab.flex.targets import Targets

    return Targets(pd.DataFrame([{"start_utc": pd.Timestamp(a), "end_utc": pd.Timestamp(b),
                                  "cap_w": c, "notice_utc": pd.Timestamp(n) if n else pd.NaT,
                                  "source": f"t{i}"}
                                 for i, (a, b, c, n) in enumerate(rows)]))
