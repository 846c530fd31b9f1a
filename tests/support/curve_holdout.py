"""Held-out validation of the power-throughput curve on the Zeus NSDI'23 power traces.

Shared by ``tests/flex/test_curve_zeus.py`` and ``benchmarks/validate_curve_zeus.py``.

Data: ``data/zeus-nsdi23/summary_power_{a40,v100,rtx6000,p100}.csv`` (real power-limit
sweeps; the source defines ``power_limit`` "The power limit of the GPU in Watts",
``time_per_epoch`` "The duration of training one epoch in seconds", ``average_power`` "The
average power consumption of the GPU in Watts", each "only measured once").

A *group* is one (GPU model, dataset, network, batch size, optimizer): one job swept over
the power limits.  Its limits sorted from the highest down, the **interleaved** split fits
on positions 0, 2, 4, ... and always on the highest (the reference) and the lowest limit;
the others are held out, so every held-out limit lies inside the fitted range (the
**odd** split, positions 1, 3, 5, ... with top and bottom, is the same rule's other
parity: a check that the result does not hang on which limits were held out).  The
**extrapolation** split fits on the highest ceil(n / 2) limits and holds out every lower
one.  A group is eligible when :func:`powerlab.flex.fit_curve_points` accepts its fitted
limits (at least 3 limits, 4 distinct power levels, power varying by at least 10 %:
the limits bind).

Truth at a held-out limit ``L``: the measured throughput cost ``1 - r(L) / r(L_top)``,
``r = 1 / time_per_epoch`` (the same work per epoch at every limit of a group).
Predictions: the curve at the power measured under ``L`` (the curve's shape alone), and
the curve at the power it predicts under ``L`` (``power_at_limit``: the limit map, i.e.
the fitted limits' measured powers interpolated linearly, proportional to the limit below
the lowest; what the planner uses; until 2026-12-03 ``min(kappa L, P_ref)``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from powerlab.exceptions import AnalysisError
from powerlab.flex import fit_curve_points
from powerlab.iotools import read_zeus_power_trace
from powerlab.levers import prior_curve

ZEUS = Path(__file__).resolve().parents[2] / "data" / "zeus-nsdi23"
GPUS = ("a40", "v100", "rtx6000", "p100")
KEY = ["gpu_model", "dataset", "network", "batch_size", "optimizer"]


def zeus_points(gpus=GPUS) -> pd.DataFrame:
    """All bundled Zeus operating points."""
    return pd.concat([read_zeus_power_trace(ZEUS / f"summary_power_{g}.csv") for g in gpus],
                     ignore_index=True)


def groups(points: pd.DataFrame):
    """Yield ``(key, frame)`` per group, the frame sorted by limit from the highest."""
    for key, g in points.groupby(KEY, sort=True):
        yield key, g.sort_values("power_limit_w", ascending=False).reset_index(drop=True)


def split_interleaved(n: int) -> np.ndarray:
    """Fit mask over limits sorted from the highest: every other one, top and bottom."""
    i = np.arange(n)
    return (i % 2 == 0) | (i == n - 1)


def split_interleaved_odd(n: int) -> np.ndarray:
    """The other parity: positions 1, 3, 5, ... with the top and the bottom limit."""
    i = np.arange(n)
    return (i % 2 == 1) | (i == 0) | (i == n - 1)


def split_extrapolate(n: int) -> np.ndarray:
    """Fit mask: the highest ceil(n / 2) limits."""
    return np.arange(n) < -(-n // 2)


def holdout(points: pd.DataFrame, split=split_interleaved) -> tuple[pd.DataFrame, dict]:
    """Held-out predictions for every eligible group.

    Returns
    -------
    rows : pandas.DataFrame
        One row per held-out limit: the group's key, ``power_limit_w``, ``lowest_fit_w``,
        ``steps_below`` (held-out limits between it and the fitted range, itself included;
        0 inside the range), ``cost_true``, ``cost_at_power`` (curve at the measured
        power), ``cost_at_limit`` (curve at ``power_at_limit``, the planner's path),
        ``cost_prior`` (the stated
        prior slope at the measured power), ``cost_interp`` (curve at the power
        interpolated linearly in the limit between the fitted limits, clamped outside
        them: the limit map's rule inside the fitted range, written out independently), ``power_w``, ``power_pred_w``, ``power_interp_w`` [W].
    skipped : dict
        Reason -> number of groups not eligible.
    """
    rows, skipped = [], {}
    for key, g in groups(points):
        fit = split(len(g))
        if (~fit).sum() == 0:
            skipped["no held-out limit"] = skipped.get("no held-out limit", 0) + 1
            continue
        try:
            c = fit_curve_points(g[fit])
        except AnalysisError as exc:
            msg = str(exc)
            why = ("limits do not bind" if "less than 10 %" in msg else
                   "fewer than 4 distinct power levels" if "power levels" in msg else
                   "too few fitted limits")
            skipped[why] = skipped.get(why, 0) + 1
            continue
        ho = g[~fit]
        r = 1.0 / g["epoch_time_s"].to_numpy()
        lowest = g.loc[fit, "power_limit_w"].min()
        below = ho["power_limit_w"].to_numpy() < lowest
        steps = np.where(below, np.cumsum(below), 0)
        p_pred = c.power_at_limit(ho["power_limit_w"].to_numpy())
        f = g[fit].sort_values("power_limit_w")
        p_interp = np.interp(ho["power_limit_w"], f["power_limit_w"], f["power_w"])
        prior = prior_curve("H100", c.p_ref_w)
        rows.append(pd.DataFrame({
            **{k: v for k, v in zip(KEY, key, strict=True)},
            "power_limit_w": ho["power_limit_w"].to_numpy(),
            "lowest_fit_w": lowest,
            "steps_below": steps,
            "cost_true": 1.0 - r[~fit] / r[0],
            "cost_at_power": 1.0 - c.relative_rate(ho["power_w"])["rate_mean"].to_numpy(),
            "cost_at_limit": 1.0 - c.relative_rate(p_pred)["rate_mean"].to_numpy(),
            "cost_interp": 1.0 - c.relative_rate(p_interp)["rate_mean"].to_numpy(),
            "cost_prior": 1.0 - prior.relative_rate(ho["power_w"])["rate_mean"].to_numpy(),
            "power_w": ho["power_w"].to_numpy(),
            "power_pred_w": p_pred,
            "power_interp_w": p_interp,
        }))
    return pd.concat(rows, ignore_index=True), skipped


def error_stats(rows: pd.DataFrame, pred: str, min_cost: float = 0.02) -> dict:
    """Error distribution of one prediction column against ``cost_true``.

    ``abs_pp``: absolute error in percentage points of step rate (all held-out limits);
    ``rel``: ``|pred - true| / true`` where the true cost is at least ``min_cost``.
    """
    e = 100.0 * (rows[pred] - rows["cost_true"])
    big = rows["cost_true"] >= min_cost
    rel = (rows.loc[big, pred] - rows.loc[big, "cost_true"]).abs() / rows.loc[big, "cost_true"]
    return {"n": len(rows), "median_abs_pp": float(e.abs().median()),
            "p90_abs_pp": float(e.abs().quantile(0.9)), "max_abs_pp": float(e.abs().max()),
            "bias_pp": float(e.median()), "n_rel": int(big.sum()),
            "median_rel": float(rel.median()) if big.any() else float("nan"),
            "share_within_10pct": float((rel <= 0.10).mean()) if big.any() else float("nan")}


def noise_floor(points: pd.DataFrame) -> pd.Series:
    """Repeatability of one measurement: per group whose power stays within 5 % at every
    limit (at least 5 limits; the limit does not bind), the sd of log step rate."""
    out = {}
    for key, g in groups(points):
        p = g["power_w"].to_numpy()
        if len(g) >= 5 and np.log(p.max() / p.min()) < 0.05:
            out[key] = float(np.std(np.log(1.0 / g["epoch_time_s"]), ddof=1))
    return pd.Series(out, dtype=float)


def slopes(points: pd.DataFrame) -> pd.DataFrame:
    """Per group whose power varies by at least 10 % over all its limits: the log-log
    slope ``b1`` of the prior's form (``b2 = 0``, least squares through the top limit)
    the cost at 80 % of the reference power from the quadratic fit on all limits
    (NaN where the group's power never fell to 80 %) and the residual sd of log rate
    about that fit (measurement scatter plus misfit)."""
    out = []
    for key, g in groups(points):
        u = np.minimum(np.log(g["power_w"].to_numpy() / g["power_w"].iloc[0]), 0.0)
        if np.ptp(u) < np.log(1 / 0.9):
            continue
        y = np.log(g["epoch_time_s"].iloc[0] / g["epoch_time_s"].to_numpy())
        b1 = float(u @ y / (u @ u))
        x = np.column_stack([np.ones(len(u)), u, u * u])
        resid = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
        resid_sd = float(np.sqrt(resid @ resid / (len(u) - 3))) if len(u) > 3 else np.nan
        try:
            c = fit_curve_points(g)
            reach = u.min() <= np.log(0.8)
            cost80 = (1 - float(c.relative_rate(0.8 * c.p_ref_w)["rate_mean"].iloc[0])
                      if reach else np.nan)
        except AnalysisError:
            cost80 = np.nan
        out.append({**dict(zip(KEY, key, strict=True)), "b1": b1, "cost_at_80pct": cost80,
                    "resid_sd": resid_sd, "y_min": float(np.exp(u.min()))})
    return pd.DataFrame(out)
