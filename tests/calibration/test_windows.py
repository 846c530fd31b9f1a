"""Tests of powerlab.calibration.windows: which readings, each the mean over the meter
interval before it, overlap a window or lie wholly inside one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powerlab.calibration.windows import eval_intervals, inside, intervals, overlaps
from powerlab.exceptions import PowerlabError

S = 10 ** 9
T0 = pd.Timestamp("2025-01-01", tz="UTC")


def test_readings_overlapping_and_inside_a_window():
    # one window 10..20 s; readings every 2 s, each the mean over the 2 s before it
    s, e = intervals([(T0 + pd.Timedelta(seconds=10), T0 + pd.Timedelta(seconds=20))],
                     "idle")
    t = T0.value + np.arange(0, 26, 2) * S
    over = overlaps(t, 2 * S, s, e)
    within = inside(t, 2 * S, s, e)
    # the reading at 10 s (8..10 s) touches the window's start: it overlaps, not inside
    assert (np.flatnonzero(over) * 2).tolist() == [10, 12, 14, 16, 18, 20]
    assert (np.flatnonzero(within) * 2).tolist() == [12, 14, 16, 18, 20]
    # a 3-s meter: the reading at 12 s averages 9..12 s, partly before the window
    assert (np.flatnonzero(overlaps(t, 3 * S, s, e)) * 2).tolist() == [10, 12, 14, 16,
                                                                        18, 20, 22]
    assert (np.flatnonzero(inside(t, 3 * S, s, e)) * 2).tolist() == [14, 16, 18, 20]
    assert not overlaps(t, 2 * S, s[:0], e[:0]).any()


def test_windows_sorted_and_checked():
    b = (T0 + pd.Timedelta(seconds=30), T0 + pd.Timedelta(seconds=40))
    a = (T0, T0 + pd.Timedelta(seconds=5))
    s, e = intervals([b, a], "idle")
    assert s.tolist() == [T0.value, b[0].value] and e.tolist() == [a[1].value, b[1].value]
    with pytest.raises(PowerlabError, match="is not after"):
        intervals([(b[1], b[0])], "idle")
    ev = pd.DataFrame({"timestamp": [T0, T0 + pd.Timedelta(seconds=9),
                                     T0 + pd.Timedelta(seconds=20)],
                       "key": ["eval_start", "eval_stop", "eval_start"]})
    evi = eval_intervals(ev)      # an evaluation without its stop is left out
    assert evi["start_utc"].tolist() == [T0]
    assert evi["stop_utc"].tolist() == [T0 + pd.Timedelta(seconds=9)]
