"""Ride-through parameters fitted to a measured record of the site's power through a sag.

When a disturbance record exists (COMTRADE read back with
:func:`~powerlab.interconnect.comtrade.read_comtrade`, or telemetry around a sag),
:func:`fit_sag_record` estimates what the equipment model
(:mod:`powerlab.interconnect.eventresponse`) predicts, so the two can be compared and the
model's parameters set from the site's own behaviour:

- ``p_before_w``: mean power over ``pre_s`` before the sag;
- ``p_during_pu``: mean power during the sag, per unit of ``p_before_w``;
- ``p_after_pu``: mean over the first ``settle_s`` after the sag (what did not come back
  at once);
- ``tripped_pu``: what is still missing at the end of the record (mean over its last
  ``settle_s``): load that needs a restart, not a walk-in;
- ``ceased_pu``: ``1 - p_during_pu - tripped_pu`` (stopped drawing during the sag, back
  by itself);
- ``return_delay_s`` and ``return_s``: the linear ramp ``p(t) = a + (b - a) clip((t -
  delay) / ramp, 0, 1)`` after the sag with ``a = p_after``, ``b`` the end level, fitted
  by least squares over a grid of delays and ramp times (step ``tick_s``); ``rms_pu``
  is the fit's residual and ``ramp_rms_pu`` that of the flat line ``b`` (the fit explains
  the recovery when it is clearly smaller).

Records carry the workload's own swing: a training job's step edges add to the residual
and bias the levels by their share of the windows.  No measured disturbance record is
bundled with powerlab; the tests fit records built from the equipment model with a
known answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..exceptions import AnalysisError

__all__ = ["SagFit", "fit_sag_record"]


@dataclass(frozen=True)
class SagFit:
    """Ride-through parameters fitted to one record (see the module docstring).

    Attributes
    ----------
    p_before_w : float
        [W]
    p_during_pu, p_after_pu, ceased_pu, tripped_pu : float
        [pu of ``p_before_w``]
    return_delay_s, return_s : float
        [s]; NaN when nothing returns.
    rms_pu, flat_rms_pu : float
        Residual of the ramp fit and of a flat line at the end level [pu].
    """

    p_before_w: float
    p_during_pu: float
    p_after_pu: float
    ceased_pu: float
    tripped_pu: float
    return_delay_s: float
    return_s: float
    rms_pu: float
    flat_rms_pu: float


def fit_sag_record(power_w, tick_s: float, sag_index: int, duration_s: float, *,
                   pre_s: float = 1.0, settle_s: float = 0.5) -> SagFit:
    """Fit the ride-through parameters to a record of power through one sag.

    Parameters
    ----------
    power_w : array_like
        Power at the point of interconnection, one value per tick [W].
    tick_s : float
        [s]
    sag_index : int
        First tick of the sag [-].
    duration_s : float
        Length of the sag [s].
    pre_s, settle_s : float
        Windows before the sag and at the end levels [s].

    Raises
    ------
    AnalysisError
        When the record does not hold ``pre_s`` before the sag and at least ``4 settle_s``
        after it, or the power before it is not positive.
    """
    x = np.asarray(power_w, dtype=float)
    n_pre, n_set = max(1, round(pre_s / tick_s)), max(1, round(settle_s / tick_s))
    a, b = int(sag_index), int(sag_index) + max(1, round(duration_s / tick_s))
    if a < n_pre or len(x) - b < 4 * n_set or not np.isfinite(x).all():
        raise AnalysisError(f"the record needs {pre_s:g} s before the sag and "
                            f"{4 * settle_s:g} s after it, finite values")
    p0 = float(x[a - n_pre:a].mean())
    if not p0 > 0:
        raise AnalysisError("the power before the sag must be positive")
    y = x / p0
    during = float(y[a:b].mean())
    after = float(y[b:b + n_set].mean())
    end = float(y[-n_set:].mean())
    tripped = float(np.clip(1.0 - end, 0.0, 1.0))
    tail = y[b:]
    delay, ramp, rms = _ramp_fit(tail, tick_s, after, end)
    flat = float(np.sqrt(np.mean((tail - end) ** 2)))
    return SagFit(p_before_w=p0, p_during_pu=during, p_after_pu=after,
                  ceased_pu=float(np.clip(1.0 - during - tripped, 0.0, 1.0)),
                  tripped_pu=tripped, return_delay_s=delay, return_s=ramp, rms_pu=rms,
                  flat_rms_pu=flat)


def _ramp_fit(tail: np.ndarray, tick_s: float, lo: float, hi: float
              ) -> tuple[float, float, float]:
    """Least-squares delay and ramp time of ``lo -> hi`` over ``tail`` on a tick grid
    (NaN, NaN and the flat residual when nothing rises) [s], [s], [pu]."""
    t = np.arange(len(tail)) * tick_s
    if hi - lo <= 1e-9:
        return math.nan, math.nan, float(np.sqrt(np.mean((tail - hi) ** 2)))
    step = max(1, len(tail) // 400)            # at most ~400 x 400 candidates
    cand, ts, ys = t[::step], t[::step], tail[::step]
    best = (math.inf, math.nan, math.nan)
    for d in cand:
        r = np.maximum(cand[cand + d <= t[-1]], tick_s)[:, None]
        model = lo + (hi - lo) * np.clip((ts[None, :] - d) / r, 0.0, 1.0)
        err = np.mean((model - ys[None, :]) ** 2, axis=1)
        k = int(np.argmin(err))
        if err[k] < best[0]:
            best = (float(err[k]), float(d), float(r[k, 0]))
    return best[1], best[2], math.sqrt(best[0])
