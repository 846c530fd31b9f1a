"""Time windows of a recording and the readings in them: evaluation intervals from a
training log (:func:`eval_intervals`), windows given as pairs or a frame
(:func:`intervals`: idle periods, evaluations), and whether each reading -- the mean over
its meter interval ``[t - w, t]`` -- overlaps one (:func:`overlaps`) or lies wholly
inside one (:func:`inside`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError
from ..telemetry.timeutil import to_utc

__all__ = ["eval_intervals", "inside", "intervals", "overlaps"]


def eval_intervals(events) -> pd.DataFrame:
    """Evaluation intervals (``start_utc``, ``stop_utc``) from MLLOG-style events.

    Parameters
    ----------
    events : DataFrame or object with ``.events``
        Rows with ``timestamp`` and ``key`` in ``eval_start`` / ``eval_stop`` (the
        ``events`` table of :func:`powerlab.iotools.read_mllog`), or already a frame with
        ``start_utc`` and ``stop_utc``.
    """
    ev = getattr(events, "events", events)
    if isinstance(ev, pd.DataFrame) and {"start_utc", "stop_utc"} <= set(ev.columns):
        return ev[["start_utc", "stop_utc"]].reset_index(drop=True)
    if not isinstance(ev, pd.DataFrame) or not {"timestamp", "key"} <= set(ev.columns):
        raise PowerlabError("events must be a frame with 'timestamp' and 'key' columns "
                            "(read_mllog(...).events) or with 'start_utc' and 'stop_utc'")
    starts = ev.loc[ev["key"] == "eval_start", "timestamp"].drop_duplicates().sort_values()
    stops = ev.loc[ev["key"] == "eval_stop", "timestamp"].drop_duplicates().sort_values()
    rows = []
    for s in starts:
        after = stops[stops > s]
        if len(after):
            rows.append((s, after.iloc[0]))
    return pd.DataFrame(rows, columns=["start_utc", "stop_utc"])


def intervals(windows, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (start_ns, stop_ns) arrays of UTC windows given as pairs or a frame."""
    if isinstance(windows, pd.DataFrame):
        if not {"start_utc", "stop_utc"} <= set(windows.columns):
            raise PowerlabError(f"{what} must be (start, end) pairs or a frame with "
                                "'start_utc' and 'stop_utc'")
        pairs = list(zip(windows["start_utc"], windows["stop_utc"]))
    else:
        try:
            pairs = [(a, b) for a, b in windows]
        except (TypeError, ValueError):
            raise PowerlabError(f"{what} must be (start, end) pairs of UTC times") from None
    s, e = [], []
    for a, b in pairs:
        ta, tb = to_utc(a, what=f"{what} start"), to_utc(b, what=f"{what} end")
        if tb <= ta:
            raise PowerlabError(f"{what}: {tb} is not after {ta}")
        s.append(ta.value)
        e.append(tb.value)
    order = np.argsort(s)
    return np.asarray(s, np.int64)[order], np.asarray(e, np.int64)[order]


def overlaps(t_ns: np.ndarray, w_ns: int, s_ns: np.ndarray, e_ns: np.ndarray) -> np.ndarray:
    """Whether each reading's window ``[t - w, t]`` overlaps one of the intervals."""
    if not len(s_ns):
        return np.zeros(len(t_ns), bool)
    j = np.searchsorted(s_ns, t_ns, side="right") - 1  # last interval starting <= t
    ok = j >= 0
    return ok & (e_ns[np.clip(j, 0, None)] > t_ns - w_ns)


def inside(t_ns: np.ndarray, w_ns: int, s_ns: np.ndarray, e_ns: np.ndarray) -> np.ndarray:
    """Whether each reading's window ``[t - w, t]`` lies inside one of the intervals."""
    if not len(s_ns):
        return np.zeros(len(t_ns), bool)
    j = np.searchsorted(s_ns, t_ns - w_ns, side="right") - 1
    ok = j >= 0
    return ok & (e_ns[np.clip(j, 0, None)] >= t_ns)
