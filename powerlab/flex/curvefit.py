"""Fitting the power-throughput curve from measurements: telemetry with power-cap
variation and a training log (:func:`fit_curve`), or operating points of a power-limit
sweep (:func:`fit_curve_points`).

The curve itself (the model, its limit map, the stated priors per GPU model) is
:mod:`powerlab.levers.curve`: the physics of the power-cap and clock-lock levers.

Fitting (:func:`curve_points`, :func:`fit_curve`): the training log's productive steps
are matched to the power limit in force (telemetry ``power_limit_w``) and cut into blocks
of ``block_s``; each block gives a mean step rate, the mean power and SM clock of its
busy GPUs and the share of samples with the ``sw_power_cap`` throttle reason.  The
coefficients are an ordinary least-squares fit (statsmodels, HC3 covariance) of
``log rate`` on ``[1, u, u^2]``, ``u = log(P / P_ref)``; the intercept absorbs the
reference rate, so the relative rate and its confidence band depend on ``b`` only.  The
fitted operating points also give the curve's *limit map*: the mean busy power per
fitted limit, made monotone in the limit by weighted isotonic regression
(:func:`_limit_map`; how a planner uses it: :mod:`powerlab.levers.curve`).

References
----------
.. [1] J. You, J.-W. Chung, M. Chowdhury, "Zeus: Understanding and Optimizing GPU Energy
   Consumption of DNN Training", USENIX NSDI 2023 (training throughput against the GPU
   power limit).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy.optimize import isotonic_regression

from ..exceptions import AnalysisError, PowerlabError
from ..levers.curve import PowerThroughputCurve, prior_for
from ..telemetry.schema import THROTTLE_REASONS
from ..telemetry.timeutil import series_to_utc, to_epoch_ns

__all__ = ["CAPPED_BELOW_REF", "curve_points", "fit_curve", "fit_curve_points"]


def curve_points(telemetry: pd.DataFrame, steps: pd.DataFrame, *, block_s: float = 600.0
                 ) -> pd.DataFrame:
    """Blocks of productive steps with their power limit, power, clock and step rate.

    Parameters
    ----------
    telemetry : pandas.DataFrame
        Canonical GPU telemetry with ``power_w``, ``power_limit_w`` and, where recorded,
        ``clock_sm_mhz``, ``throttle_reasons``, ``util_gpu_pct``.
    steps : pandas.DataFrame
        Training log: ``timestamp`` (UTC, end of step), ``duration_s`` and, optionally,
        ``phase`` (only ``train`` steps are used).
    block_s : float
        Block length [s].

    Returns
    -------
    pandas.DataFrame
        ``start, power_limit_w, power_w, clock_sm_mhz, power_cap_share, step_time_s,
        step_rate_per_s, n_steps``, one row per block with at least 5 steps.
    """
    need = {"timestamp", "power_w", "power_limit_w"}
    if not need <= set(telemetry.columns):
        raise AnalysisError(f"telemetry needs columns {sorted(need)}; missing "
                            f"{sorted(need - set(telemetry.columns))}")
    if not {"timestamp", "duration_s"} <= set(steps.columns):
        raise AnalysisError("steps need 'timestamp' and 'duration_s' columns")
    tel = telemetry
    busy = np.ones(len(tel), bool)
    if "throttle_reasons" in tel:
        bits = tel["throttle_reasons"].fillna(0).to_numpy(dtype=np.uint64)
        busy &= (bits & np.uint64(THROTTLE_REASONS["gpu_idle"])) == 0
        cap = ((bits & np.uint64(THROTTLE_REASONS["sw_power_cap"])) != 0).astype(float)
    else:
        cap = np.full(len(tel), np.nan)
    if "util_gpu_pct" in tel:
        busy &= tel["util_gpu_pct"].fillna(0).to_numpy(float) > 0
    t_ns = to_epoch_ns(series_to_utc(tel["timestamp"], what="telemetry timestamp",
                                     error=AnalysisError))
    blk = (t_ns // int(block_s * 1e9))
    tf = pd.DataFrame({"block": blk, "power_w": tel["power_w"].to_numpy(float),
                       "power_limit_w": tel["power_limit_w"].to_numpy(float),
                       "clock_sm_mhz": (tel["clock_sm_mhz"].to_numpy(float)
                                        if "clock_sm_mhz" in tel else np.nan),
                       "cap": cap})[busy]
    tb = tf.groupby("block").agg(power_w=("power_w", "mean"),
                                 power_limit_w=("power_limit_w", "median"),
                                 limit_spread_w=("power_limit_w", lambda s: s.max() - s.min()),
                                 clock_sm_mhz=("clock_sm_mhz", "mean"),
                                 power_cap_share=("cap", "mean"))
    st = steps
    if "phase" in st:
        st = st[st["phase"].astype(str) == "train"]
    s_ns = to_epoch_ns(series_to_utc(st["timestamp"], what="steps timestamp",
                                     error=AnalysisError))
    sb = pd.DataFrame({"block": s_ns // int(block_s * 1e9),
                       "duration_s": st["duration_s"].to_numpy(float)})
    sb = sb.groupby("block").agg(step_time_s=("duration_s", "mean"),
                                 n_steps=("duration_s", "size"))
    out = tb.join(sb, how="inner")
    # a block where the limit changed is not one operating point
    out = out[(out["n_steps"] >= 5) & (out["limit_spread_w"] <= 1.0)]
    out = out.drop(columns="limit_spread_w")
    out["step_rate_per_s"] = 1.0 / out["step_time_s"]
    out.insert(0, "start", pd.to_datetime(out.index * int(block_s * 1e9), unit="ns", utc=True))
    return out.reset_index(drop=True)


def fit_curve(telemetry: pd.DataFrame, steps: pd.DataFrame, *, gpu_model: str = "",
              block_s: float = 600.0, min_limits: int = 3) -> PowerThroughputCurve:
    """Fit the power-throughput curve from telemetry with power-cap variation.

    The blocks of :func:`curve_points` are the operating points of
    :func:`fit_curve_points` (one implementation of the fit).

    Parameters
    ----------
    telemetry, steps : pandas.DataFrame
        See :func:`curve_points`.
    gpu_model : str, optional
        Model name; sets the limit range from :data:`PRIORS` when known.
    block_s : float
        Block length [s].
    min_limits : int
        Distinct power limits needed (fewer: :class:`AnalysisError`; use
        :func:`prior_curve`).

    Returns
    -------
    PowerThroughputCurve
    """
    pts = curve_points(telemetry, steps, block_s=block_s)
    return _fit_points(pts, gpu_model, min_limits, f"blocks of {block_s:g} s")


#: Without throttle reasons, an operating point counts as power-capped (for ``kappa``)
#: when its power is more than this share below the reference power [-].
CAPPED_BELOW_REF = 0.05


def fit_curve_points(points: pd.DataFrame, *, gpu_model: str = "", min_limits: int = 3
                     ) -> PowerThroughputCurve:
    """Fit the power-throughput curve from operating points, without telemetry.

    Each row is one operating point: a power limit held long enough to measure the mean
    power and the step rate under it (a power-limit sweep such as Zeus's profiles [1]_,
    read by :func:`powerlab.iotools.read_zeus_power_trace`, or the blocks of
    :func:`curve_points`).  The fit is the one :func:`fit_curve` makes: OLS (HC3) of
    ``log rate`` on ``[1, u, u^2]``, ``u = log(P / P_ref)``, ``P_ref`` the mean power at
    the highest limit.

    Parameters
    ----------
    points : pandas.DataFrame
        ``power_limit_w`` [W], ``power_w`` (mean power under it) [W] and the rate:
        ``step_rate_per_s`` [1/s], or the time of a fixed amount of work, ``step_time_s``
        or ``epoch_time_s`` [s] (only rates relative to the reference enter the curve).
        Optional: ``power_cap_share`` (share of samples with the ``sw_power_cap``
        throttle reason) [-], ``clock_sm_mhz`` [MHz].
    gpu_model : str, optional
        Model name; sets the limit range from :data:`PRIORS` when known.
    min_limits : int
        Distinct power limits needed (fewer: :class:`AnalysisError`; so are fewer than 4
        distinct power levels at or below ``P_ref``, and power varying by less than 10 %).

    Returns
    -------
    PowerThroughputCurve

    Notes
    -----
    ``kappa`` (power drawn per watt of a binding limit) is the median ``power_w /
    power_limit_w`` over the points where the cap binds: ``power_cap_share > 0.5`` where
    the throttle reasons were recorded; otherwise (no ``power_cap_share``, or all NaN)
    where the power is more than :data:`CAPPED_BELOW_REF` (5 %) below ``P_ref`` (the
    limit visibly lowered it).  No such point: ``kappa = 1``.

    References
    ----------
    .. [1] J. You, J.-W. Chung, M. Chowdhury, "Zeus: Understanding and Optimizing GPU
       Energy Consumption of DNN Training", USENIX NSDI 2023.
    """
    if not isinstance(points, pd.DataFrame):
        raise AnalysisError(f"points must be a DataFrame, got {type(points).__name__}")
    need = {"power_limit_w", "power_w"}
    if not need <= set(points.columns):
        raise AnalysisError(f"points need columns {sorted(need)}; missing "
                            f"{sorted(need - set(points.columns))}")
    rate_col = next((c for c in ("step_rate_per_s", "step_time_s", "epoch_time_s")
                     if c in points.columns), None)
    if rate_col is None:
        raise AnalysisError("points need a rate: step_rate_per_s [1/s], or step_time_s or "
                            "epoch_time_s [s]")
    pts = points.copy()
    for col in ("power_limit_w", "power_w", rate_col):
        v = pd.to_numeric(pts[col], errors="coerce").to_numpy(float)
        if not (np.isfinite(v) & (v > 0)).all():
            raise AnalysisError(f"points column {col!r} must hold positive finite numbers")
        pts[col] = v
    if rate_col != "step_rate_per_s":
        pts["step_rate_per_s"] = 1.0 / pts[rate_col]
    return _fit_points(pts.reset_index(drop=True), gpu_model, min_limits,
                       "operating points")


def _fit_points(pts: pd.DataFrame, gpu_model: str, min_limits: int, what: str
                ) -> PowerThroughputCurve:
    """The fit shared by :func:`fit_curve` and :func:`fit_curve_points`."""
    n_lim = pts["power_limit_w"].round().nunique() if len(pts) else 0
    if n_lim < min_limits:
        raise AnalysisError(f"the data show {n_lim} distinct power limit(s) with enough "
                            f"steps; a fit needs at least {min_limits} (use prior_curve "
                            "for a GPU model without power-cap variation)")
    top = pts["power_limit_w"].round().max()
    p_ref = float(pts.loc[pts["power_limit_w"].round() == top, "power_w"].mean())
    u = np.minimum(np.log(pts["power_w"].to_numpy() / p_ref), 0.0)
    if np.ptp(u) < np.log(1 / 0.9):
        raise AnalysisError("the GPUs' power varies by less than 10 % across the power "
                            "limits (the limits do not bind): the data cannot show the "
                            "curve; use prior_curve")
    n_lev = np.unique(np.round(u, 9)).size
    if n_lev < 4:
        # 3 coefficients: with fewer distinct powers (P >= P_ref counts as P_ref) a point
        # has leverage 1 and the HC3 covariance is undefined
        raise AnalysisError(f"{n_lev} distinct power levels at or below P_ref; the fit "
                            "(3 coefficients and their covariance) needs at least 4 "
                            "(use prior_curve)")
    x = np.column_stack([np.ones(len(u)), u, u * u])
    y = np.log(pts["step_rate_per_s"].to_numpy())
    res = sm.OLS(y, x).fit(cov_type="HC3")
    share = pts.get("power_cap_share")
    if share is not None and share.notna().any():
        capped = share > 0.5
    else:
        capped = pts["power_w"] < (1.0 - CAPPED_BELOW_REF) * p_ref
    kappa = float(np.median(pts.loc[capped, "power_w"] / pts.loc[capped, "power_limit_w"])
                  ) if capped.any() else 1.0
    clock = None
    if "clock_sm_mhz" in pts and pts["clock_sm_mhz"].notna().all():
        cres = sm.OLS(np.log(pts["clock_sm_mhz"].to_numpy(float)),
                      np.column_stack([np.ones(len(u)), u])).fit()
        clock = (float(cres.params[0]), float(cres.params[1]))
    try:
        pr = prior_for(gpu_model)
        lo, hi = pr.min_limit_w, pr.max_limit_w
    except PowerlabError:
        lo, hi = float(pts["power_limit_w"].min()), float(pts["power_limit_w"].max())
    return PowerThroughputCurve(np.asarray(res.params[1:]), np.asarray(res.cov_params())[1:, 1:],
                                p_ref, kappa, lo, hi,
                                f"fit: OLS (HC3) on {len(pts)} {what} at "
                                f"{n_lim} power limits", gpu_model, pts, clock,
                                float(res.rsquared),
                                (float(pts["power_w"].min()), float(pts["power_w"].max())),
                                _limit_map(pts, p_ref))


def _limit_map(pts: pd.DataFrame, p_ref: float) -> pd.DataFrame:
    """Per fitted limit: the mean busy power relative to ``P_ref``, and its error.

    The per-limit means are made monotone (non-decreasing) in the limit by isotonic
    regression weighted by the points per limit (a lower limit cannot raise the power;
    noise can) and capped at ``P_ref`` (1 at the highest limit, by definition).  The
    standard error of a limit's mean is the sd of its points over the root of their
    number (0 with a single point per limit: the interpolation term then carries the
    band).
    """
    g = (pd.DataFrame({"limit": pts["power_limit_w"].round().to_numpy(float),
                       "power_w": pts["power_w"].to_numpy(float)})
         .groupby("limit")["power_w"].agg(["mean", "std", "size"]).sort_index())
    n = g["size"].to_numpy(float)
    power_rel = np.minimum(isotonic_regression(g["mean"].to_numpy(), weights=n).x / p_ref,
                           1.0)
    power_rel[-1] = 1.0
    return pd.DataFrame({"limit_rel": g.index.to_numpy(float) / p_ref,
                         "power_rel": power_rel,
                         "power_se_rel": g["std"].fillna(0.0).to_numpy() / np.sqrt(n) / p_ref,
                         "n": g["size"].to_numpy()})
