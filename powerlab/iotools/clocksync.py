"""Clock offsets between the nodes of one job, from the workload they share.

The power meters of an MLPerf submission log on each node's own clock; the nodes run
one synchronous job, so their power follows one workload.  :func:`clock_offsets` finds
each node's offset as the lag that best lines its power up with the median of all nodes
(:func:`powerlab.iotools.read_mlperf_power` reports it, and subtracts it on request).

References
----------
.. [1] J. S. Bendat and A. G. Piersol, *Random Data*, 4th ed., Wiley, 2010, ch. 5
   (cross-correlation and time-delay estimation).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import fft

from ..telemetry.timeutil import to_epoch_ns

__all__ = ["clock_offsets"]


def clock_offsets(telemetry: pd.DataFrame, *, max_lag_s: float = 30.0,
                  grid_s: float = 0.1) -> pd.Series:
    """Clock offset of each node against the others, from their common workload [s].

    Each node's readings are interpolated onto a common ``grid_s`` grid; its offset is the
    lag (within ``+-max_lag_s``, refined by a parabola through the peak) that maximises the
    cross-correlation of its demeaned series with the median of all nodes.  A positive
    offset means the node's clock runs ahead: the same workload change carries a later
    timestamp there; ``timestamp - offset`` puts it on the common clock.  The median over
    nodes is 0 by construction of the reference only approximately, so offsets are
    reported relative to their median.

    Parameters
    ----------
    telemetry : DataFrame
        Node-scope telemetry of one job (``timestamp``, ``host``, ``power_w``).
    max_lag_s : float, default 30
        Largest offset searched [s] (real node clocks have been seen -6.5 .. +9.3 s apart;
        the former 5-s bound cut such offsets off).
    grid_s : float, default 0.1
        Resolution of the common grid [s].

    Returns
    -------
    pandas.Series
        Offset per host [s], named ``clock_offset_s``.

    References
    ----------
    .. [1] J. S. Bendat and A. G. Piersol, *Random Data*, 4th ed., Wiley, 2010, ch. 5
       (cross-correlation and time-delay estimation).
    """
    hosts, series, m = _on_common_grid(telemetry, grid_s)
    k = min(round(max_lag_s / grid_s), max(1, m // 4))   # a short log: a quarter of it
    out = []
    for win in _lag_windows(series, m, k):
        j, shift = _peak(win)
        out.append((j - k + shift) * grid_s)
    off = np.asarray(out)
    return pd.Series(off - np.median(off), index=hosts, name="clock_offset_s")


def _on_common_grid(telemetry: pd.DataFrame, grid_s: float) -> tuple[list[str], list, int]:
    """Host names (sorted), each host's power interpolated onto one grid ``grid_s``
    apart from the first reading of the job to its last, and the grid's length."""
    df = telemetry[telemetry["power_w"].notna()]
    t_ns = to_epoch_ns(df["timestamp"])
    t0, t1 = t_ns.min(), t_ns.max()
    grid = np.arange(0.0, (t1 - t0) / 1e9, grid_s)
    hosts, series = [], []
    for h, g in df.groupby("host", sort=True, observed=True):
        tt = (to_epoch_ns(g["timestamp"]) - t0) / 1e9
        o = np.argsort(tt)
        hosts.append(str(h))
        series.append(np.interp(grid, tt[o], g["power_w"].to_numpy(float)[o]))
    return hosts, series, len(grid)


def _lag_windows(series: list, m: int, k: int) -> list:
    """For each series (``m`` points), its cross-correlation with the demeaned median of
    all series at lags ``-k..k`` grid steps (index ``k + lag``)."""
    if m > k:   # every node at once, the reference transformed once
        n = fft.next_fast_len(m + k, real=True)   # no wrap-around within +-k
        y = np.zeros((len(series), n))            # zero-padded in place
        for i, row in enumerate(series):
            y[i, :m] = row
        ref = np.median(y[:, :m], axis=0)
        ref = ref - ref.mean()
        y[:, :m] -= y[:, :m].mean(axis=1, keepdims=True)
        cc = fft.irfft(fft.rfft(y, axis=1) * np.conj(fft.rfft(ref, n)), n, axis=1)
        # wins[:, k + lag] = sum_l x[l] ref[l - lag], the "full" cross-correlation
        return list(np.concatenate([cc[:, n - k:], cc[:, :k + 1]], axis=1))
    ref = np.median(np.vstack(series), axis=0)
    ref = ref - ref.mean()
    mid = len(ref) - 1
    return [_correlate_full(row - row.mean(), ref)[mid - k: mid + k + 1] for row in series]


def _correlate_full(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``scipy.signal.correlate(x, ref, mode="full", method="fft")`` for real 1-D
    arrays, computed as SciPy does (``fftconvolve`` of ``x`` with ``ref`` reversed, on
    a fast FFT length), without importing ``scipy.signal``."""
    size = len(x) + len(ref) - 1
    shape = [fft.next_fast_len(size, True)]
    spec = fft.rfftn(x, shape, axes=[0]) * fft.rfftn(ref[::-1].conj(), shape, axes=[0])
    return fft.irfftn(spec, shape, axes=[0])[:size].copy()


def _peak(win: np.ndarray) -> tuple[int, float]:
    """The index of the largest value of ``win`` and its refinement (a fraction of a
    step) by a parabola through it and its neighbours."""
    j = int(np.argmax(win))
    shift = 0.0
    if 0 < j < len(win) - 1:
        a, b, c = win[j - 1], win[j], win[j + 1]
        den = a - 2 * b + c
        shift = 0.5 * (a - c) / den if den != 0 else 0.0
    return j, shift
