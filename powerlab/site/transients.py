"""GPU power transients: a finite rise and fall between power levels.

A GPU does not jump from one power level to the next: its power follows the demand with
a first-order lag, with one time constant for rises and one for falls.  The engine gives
each GPU's power as the *exact mean over each tick* of that continuous response to a
piecewise-constant demand, so that every tick length sees the same continuous power and
interval means, swings and ramps over named windows converge as the tick shrinks.

Model (per GPU, demand ``x(t)`` piecewise constant)::

    dy/dt = (x - y) / tau,   tau = rise_s if x > y else fall_s

Within a run of constant demand ``x`` starting from ``y0`` the response is
``y(t) = x + (y0 - x) exp(-t / tau)``; its mean over tick ``j`` of the run is
``x + (y0 - x) exp(-j h / tau) (tau / h) (1 - exp(-h / tau))`` with ``h`` the tick.  A time
constant of 0 gives the old instantaneous steps.

Default time constants (``hardware.gpu_rise_time_constant_s = 0.03`` and
``hardware.gpu_fall_time_constant_s = 0.03``; equal, so that the response is linear and
the engine applies it once per draw, see :func:`first_order_ticks`) are *assumptions*
of the order that public descriptions give: Choukse et al. (2025) describe training-step power swinging between
its levels at sub-second time scales, much faster than the facility can follow; no
number from that paper is used here.
The bundled 100-ms nvidia-smi H100 traces (``../shared/data/nvidia-smi-h100-100ms``)
cannot resolve it: in ``h100-traces_ckpt100.csv`` the ``power.draw`` of GPU 0 never
moves by more than 150 W between consecutive 100-ms samples (the reading is probably
averaged), so they bound nothing below 100 ms.  Set the constants from your own fast (1 kHz, shunt or PDU) measurement
where you have one.

A ramp limiter (GPU power smoothing, ``mitigations.gpu_ramp_limit_w_per_s``) replaces the
lag: the GPU's power moves towards the demand by at most the limit per tick
(:func:`slew_rle`); the natural transient, faster than any practical limit, is not added
on top.

References
----------
.. [1] E. Choukse et al., "Power Stabilization for AI Training Datacenters",
   2025.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import signal

__all__ = ["first_order_rle", "first_order_ticks", "run_start_states", "slew_rle"]

#: A transient older than this many time constants is below 1e-13 of its step.
_SETTLED_TAUS = 30.0


def _decay(lengths: np.ndarray, tick_s: float, tau: np.ndarray) -> np.ndarray:
    """``exp(-L h / tau)`` with ``tau = 0`` giving 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.exp(-lengths * tick_s / np.where(tau > 0, tau, 1.0))
    return np.where(tau > 0, r, 0.0)


def run_start_states(values: np.ndarray, lengths: np.ndarray, tick_s: float,
                     rise_s: float, fall_s: float, y_start: float | None = None
                     ) -> np.ndarray:
    """Power at the start of each run of a run-length encoded demand [W].

    ``y0[i+1] = x[i] + (y0[i] - x[i]) exp(-L[i] h / tau[i])`` with ``y0[0] = y_start``
    (default ``x[0]``: steady).  Solved by vectorised sweeps; a run longer than 30 time
    constants settles, so chains of dependence are short and few sweeps are needed.  A
    long chain (runs all much shorter than the time constants) falls back to a loop.
    """
    x = np.asarray(values, float)
    n = len(x)
    y0 = np.empty(n)
    y0[0] = x[0] if y_start is None else float(y_start)
    y0[1:] = x[:-1]
    scale = float(np.ptp(x)) + 1.0
    for _ in range(40):
        tau = np.where(x > y0, rise_s, fall_s)
        y_end = x + (y0 - x) * _decay(lengths, tick_s, tau)
        new = np.empty(n)
        new[0] = y0[0]
        new[1:] = y_end[:-1]
        done = np.max(np.abs(new - y0)) <= 1e-13 * scale
        y0 = new
        if done:
            return y0
    vals = x.tolist()
    lens = np.asarray(lengths).tolist()
    y = y0[0]
    for i in range(n):
        y0[i] = y
        tau = rise_s if vals[i] > y else fall_s
        y = vals[i] + (y - vals[i]) * (math.exp(-lens[i] * tick_s / tau) if tau > 0 else 0.0)
    return y0


def first_order_rle(values: np.ndarray, lengths: np.ndarray, tick_s: float,
                    rise_s: float, fall_s: float) -> np.ndarray:
    """Per-tick mean power of a first-order response to a run-length encoded demand [W].

    Parameters
    ----------
    values : ndarray
        Demand of each run [W].
    lengths : ndarray of int
        Ticks in each run [-].
    tick_s : float
        Engine tick [s].
    rise_s, fall_s : float
        Time constants of rises and falls (0: instantaneous) [s].

    Returns
    -------
    ndarray
        Mean power over each tick, ``lengths.sum()`` values [W].
    """
    x = np.asarray(values, float)
    lengths = np.asarray(lengths, np.int64)
    y = np.repeat(x, lengths)
    if (rise_s <= 0 and fall_s <= 0) or len(x) < 2:
        return y
    y0 = run_start_states(x, lengths, tick_s, rise_s, fall_s)
    d = y0 - x
    moving = np.flatnonzero(d != 0.0)
    if not len(moving):
        return y
    up = x[moving] > y0[moving]
    tables = []
    for tau in (fall_s, rise_s):
        if tau > 0:
            k = max(1, math.ceil(_SETTLED_TAUS * tau / tick_s))
            j = np.arange(k)
            tables.append(np.exp(-j * tick_s / tau) * (tau / tick_s)
                          * -math.expm1(-tick_s / tau))
        else:
            tables.append(np.zeros(1))
    m = np.minimum(lengths[moving], np.where(up, len(tables[1]), len(tables[0])))
    starts = (np.cumsum(lengths) - lengths)[moving]
    run = np.repeat(np.arange(len(moving)), m)
    pos = np.arange(int(m.sum())) - np.repeat(np.cumsum(m) - m, m)
    fac = np.where(up[run], tables[1][np.minimum(pos, len(tables[1]) - 1)],
                   tables[0][np.minimum(pos, len(tables[0]) - 1)])
    y[starts[run] + pos] += d[moving][run] * fac
    return y


def first_order_ticks(demand_w: np.ndarray, tick_s: float, tau_s: float,
                      overwrite: bool = False) -> np.ndarray:
    """Per-tick mean of a symmetric first-order response to a demand held over each tick
    [W].

    With one time constant for rises and falls the response is linear and
    time-invariant, so it commutes with the per-GPU shifts and with the sum over GPUs:
    the engine applies it once to a draw's summed demand.  The state at tick starts is
    ``s[k+1] = a s[k] + (1 - a) v[k]`` (``a = exp(-h / tau)``, ``s[0] = v[0]``) and the
    tick mean ``g s[k] + (1 - g) v[k]`` with ``g = (tau / h)(1 - a)``.

    Parameters
    ----------
    demand_w : ndarray
        Demand per tick, along the last axis [W].
    tick_s : float
        Tick [s].
    tau_s : float
        Time constant (0: the demand itself) [s].
    overwrite : bool, default False
        Reuse ``demand_w`` (a float64 array) for the result.
    """
    v = np.asarray(demand_w, float)
    if tau_s <= 0 or v.shape[-1] < 2:
        return v if overwrite else v.copy()
    a = math.exp(-tick_s / tau_s)
    g = tau_s / tick_s * -math.expm1(-tick_s / tau_s)
    # s[k] for k >= 1 from v[k-1]; s[0] = v[0] (steady)
    s = np.empty_like(v)
    s[..., 0] = v[..., 0]
    zi = (a * v[..., :1])  # so that the first output is a v[0] + (1 - a) v[0] = v[0]
    s[..., 1:], _ = signal.lfilter([1.0 - a], [1.0, -a], v[..., :-1], axis=-1, zi=zi)
    s *= g
    out = v if overwrite else v.copy()
    out *= 1.0 - g
    out += s
    return out


def slew_rle(values: np.ndarray, lengths: np.ndarray, step_w: float) -> np.ndarray:
    """Ramp-limit a run-length encoded series tick by tick; returns the painted series.

    ``y[k] = clip(x[k], y[k-1] - step_w, y[k-1] + step_w)`` with ``y[-1] = x[0]``; the
    loop runs over runs, not ticks.
    """
    n = len(values)
    y0 = np.empty(n)
    y = float(values[0])
    vals = values.tolist()
    lens = lengths.tolist()
    for i in range(n):
        y0[i] = y
        x = vals[i]
        reach = step_w * lens[i]
        if x > y:
            y = min(x, y + reach)
        elif x < y:
            y = max(x, y - reach)
    d = values - y0
    idx = np.repeat(np.arange(n), lengths)
    pos = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return y0[idx] + np.sign(d)[idx] * np.minimum(step_w * (pos + 1), np.abs(d)[idx])
