"""Tests of powerlab.iotools.clocksync: node clock offsets from a shared workload."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import signal

from powerlab.iotools.clocksync import _correlate_full, clock_offsets


def test_clock_offsets_recover_known_shifts():
    """Offsets of 2-s interval-mean meters reading one workload through shifted clocks."""
    t0 = pd.Timestamp("2025-01-01", tz="UTC")
    rng = np.random.default_rng(0)
    fine = np.arange(0, 600, 0.01)
    base = np.where(fine % 10 < 8, 7000.0, 5500.0) - np.where(fine % 97 < 5, 1500.0, 0.0)
    cum = np.r_[0.0, np.cumsum(base) * 0.01]
    shifts = [0.0, 0.5, -1.2, 2.0, 0.0, 0.0]
    rows = []
    for i, d in enumerate(shifts):
        tr = np.arange(rng.uniform(3, 5), 595, 2.0)
        e = np.interp(tr - d, np.r_[fine, 600.0], cum) - np.interp(tr - d - 2, np.r_[
            fine, 600.0], cum)
        rows.append(pd.DataFrame({"timestamp": t0 + pd.to_timedelta(tr, unit="s"),
                                  "host": f"n{i}", "power_w": e / 2.0}))
    off = clock_offsets(pd.concat(rows, ignore_index=True))
    assert off.to_numpy() == pytest.approx(np.array(shifts), abs=0.2)
    # null case: no shift, no offset
    same = pd.concat([r.assign(host=f"m{i}") for i, r in enumerate([rows[0]] * 3)])
    assert clock_offsets(same).abs().max() < 0.05


def test_the_short_job_correlation_is_scipys_correlate():
    """A job shorter than the lag searched correlates each node with SciPy's FFT
    correlation, rebuilt on scipy.fft: the same numbers to the last bit."""
    rng = np.random.default_rng(3)
    for m in (1, 2, 7, 30, 49, 50, 97):
        x, ref = rng.normal(size=m), rng.normal(size=m)
        want = signal.correlate(x, ref, mode="full", method="fft")
        assert np.array_equal(_correlate_full(x, ref), want), m


def test_offsets_of_a_job_shorter_than_the_lag_searched():
    t0 = pd.Timestamp("2025-01-01", tz="UTC")
    t = np.arange(0.0, 3.0, 0.5)                   # 3 s of readings, lags up to 5 s
    w = np.array([5000.0, 7000.0, 5000.0, 5000.0, 7000.0, 5000.0])
    df = pd.concat([pd.DataFrame({"timestamp": t0 + pd.to_timedelta(t, unit="s"),
                                  "host": h, "power_w": w}) for h in ("a", "b", "c")])
    off = clock_offsets(df)
    assert list(off.index) == ["a", "b", "c"] and off.name == "clock_offset_s"
    assert np.isfinite(off).all() and (off == 0).all()   # identical nodes: no offset
