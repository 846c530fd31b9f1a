"""The shifted-start lever (powerlab.levers.shift): a job starting in a curtailment is held
until it ends; known answers derived by hand from the definition."""

from __future__ import annotations

import numpy as np

from powerlab.levers.shift import shift_starts


def test_shift_starts_known_answer():
    """Definition: a job starting in a run of shed waits until the run ends; held jobs
    start in order, each ``ceil(step / (r_up tick))`` ticks after the previous one, and a
    start pushed into a later run waits for that one too."""
    shed = np.zeros(20)
    shed[2:5] = 1.0
    shed[11:14] = 1.0
    # steps 10 W and 5 W at 5 W/s: gaps of 2 and 1 ticks; the third job starts outside
    out = shift_starts(np.array([2, 4, 8]), shed, np.array([10.0, 5.0, 5.0]), 5.0, 1.0)
    assert list(out) == [5, 7, 8]
    # a 40-W step (8 ticks) pushes the second job to 13, inside the second run: 14
    out = shift_starts(np.array([3, 3]), shed, np.array([40.0, 40.0]), 5.0, 1.0)
    assert list(out) == [5, 14]
    assert list(shift_starts(np.array([0, 6]), np.zeros(20), np.ones(2), 1.0, 1.0)) == [0, 6]
    # a wait over max_hold_s (3 ticks from 2) is no shift: that job starts on time;
    # the one starting at 3 waits 2 ticks, within it
    assert list(shift_starts(np.array([2, 3]), shed, np.array([10.0, 5.0]), 5.0, 1.0,
                             max_hold_s=2.5)) == [2, 5]
