"""Ramps of window means on a regular power series: the one definition the planner
figures, the swing metrics and the interconnection checks share.

A ramp "over 1-s means" or "over 1-min means" compares the mean power over adjacent
windows, for every alignment of the averaging blocks on the tick grid.
"""

from __future__ import annotations

import numpy as np

from .._options import choice
from ..exceptions import AnalysisError

__all__ = ["RAMP_DEFINITIONS", "pick_direction", "power_series", "ramp_label", "ramp_of_means",
           "ramps_of_means", "whole_ticks"]

#: The one definition of each ramp figure, by the window suffix every name carries
#: (``ramp_up_w_per_s_1s`` in the metrics, ``ramp_up_megawatts_per_s_1s`` in figures,
#: ``facility_ramp_up_megawatts_per_s_1s_max`` in the facilities CSV): suffix ->
#: (what is differenced, the rate unit).  The same names in CSV, report and summary
#: (issue 20, item 10).
RAMP_DEFINITIONS = {
    "1s": ("adjacent 1-s means, every alignment on the tick grid", "per s"),
    "100ms": ("adjacent 100-ms means, every alignment on the tick grid", "per s"),
    "1min": ("adjacent 1-min means, every alignment on the tick grid", "per min"),
    "tick": ("adjacent ticks (depends on the tick: not a utility's measure)", "per s"),
}


def ramp_label(name: str, statistic: str = "") -> str:
    """``name`` with its definition from :data:`RAMP_DEFINITIONS`, for reports and
    summaries: ``"ramp_up_megawatts_per_s_1s (largest rise between adjacent 1-s means,
    every alignment on the tick grid; median over draws)"``."""
    suffix = name.rsplit("_", 1)[-1]
    if name.endswith("_max"):                      # a CSV column: the window is before it
        suffix = name[:-4].rsplit("_", 1)[-1]
    what, _ = RAMP_DEFINITIONS[suffix]
    move = "fall" if "_down_" in name else ("rise" if "_up_" in name else "change")
    text = f"largest {move} between {what}"
    return f"{name} ({text}{'; ' + statistic if statistic else ''})"


def power_series(power_w) -> np.ndarray:
    """``power_w`` as a finite 1-D float array of at least two samples [W]."""
    x = np.asarray(power_w, dtype=float)
    if x.ndim != 1 or len(x) < 2:
        raise AnalysisError("expected a 1-D power series of at least two samples")
    if not np.isfinite(x).all():
        raise AnalysisError("the power series contains NaN or infinite values")
    return x


def whole_ticks(window_s: float, tick_s: float) -> int:
    """``window_s`` in ticks, refusing a window that is not a whole number of ticks [-]."""
    k = round(window_s / tick_s)
    if k < 1 or abs(k * tick_s - window_s) > 1e-6 * max(window_s, tick_s):
        raise AnalysisError(f"window {window_s:g} s is not a whole number of ticks of "
                            f"{tick_s:g} s")
    return int(k)


def pick_direction(up: float, down: float, direction: str) -> float:
    """``up``, ``down`` or their maximum, by ``direction`` ('up', 'down', 'both')."""
    if direction == "up":
        return up
    if direction == "down":
        return down
    choice(direction, "direction", ("up", "down", "both"), error=AnalysisError)
    return max(up, down)


def ramp_of_means(power_w, tick_s: float, window_s: float, direction: str = "both") -> float:
    """Largest ramp between adjacent ``window_s`` means [W/s].

    The mean over every window ``[t, t + window_s)`` is compared with the mean over the
    next window ``[t + window_s, t + 2 window_s)``, for every start ``t`` on the tick grid
    (so the result is the worst over all alignments of a meter's averaging blocks); the
    ramp is their difference divided by ``window_s``.  A ramp "over 1-min means" in MW/min
    is this value times 60 / 1e6.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    window_s : float
        Averaging window, a whole number of ticks [s].
    direction : {'up', 'down', 'both'}
        Rises, falls (returned as a positive number) or the larger of the two.

    Returns
    -------
    float
        The largest ramp [W/s], >= 0.
    """
    x = power_series(power_w)
    w = whole_ticks(window_s, tick_s)
    if len(x) < 2 * w:
        raise AnalysisError(f"{len(x) * tick_s:g} s of data is shorter than two "
                            f"{window_s:g}-s windows")
    d = ramps_of_means(x, w, window_s)
    return pick_direction(float(max(d.max(), 0.0)), float(max(-d.min(), 0.0)), direction)


def ramps_of_means(x: np.ndarray, w: int, window_s: float) -> np.ndarray:
    """The ramp between adjacent ``w``-tick means for every start tick [W/s] (signed):
    the series :func:`ramp_of_means` takes the largest of; ``len(x) - 2 w + 1`` values.

    Parameters
    ----------
    x : numpy.ndarray
        Power, one value per tick [W] (at least ``2 w`` ticks).
    w : int
        Window in ticks (:func:`whole_ticks`).
    window_s : float
        The same window [s].
    """
    c = np.concatenate([[0.0], np.cumsum(x - x[0])])
    means = (c[w:] - c[:-w]) / w
    return (means[w:] - means[:-w]) / window_s
