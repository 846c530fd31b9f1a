"""The forecast engine's discrete time grid: durations in whole ticks, output intervals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError

__all__ = ["interval_edges", "parse_resolution", "to_ticks"]


def to_ticks(seconds: float, tick_s: float) -> int:
    """Round a duration to whole engine ticks (half up) [-]."""
    return math.floor(seconds / tick_s + 0.5 + 1e-9)


def interval_edges(n: int, tick: float, resolution_s: float) -> np.ndarray:
    """First tick of each output interval of ``resolution_s`` over ``n`` ticks [-]."""
    per = to_ticks(resolution_s, tick)
    if per < 1 or abs(per * tick - resolution_s) > 1e-6 * max(resolution_s, 1e-9):
        raise PowerlabError(f"resolution {resolution_s:g} s is not a whole number of "
                            f"engine ticks ({tick:g} s)")
    return np.arange(0, n, per)


def parse_resolution(resolution) -> float:
    """An output resolution (``"1s"``, ``"15min"`` or seconds) in seconds [s]."""
    if isinstance(resolution, (int, float)):
        return float(resolution)
    try:
        return pd.Timedelta(str(resolution)).total_seconds()
    except ValueError:
        raise PowerlabError(f"cannot read resolution {resolution!r}; use e.g. '1s', "
                            "'1min', '15min' or seconds") from None
