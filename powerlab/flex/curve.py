"""Power-throughput curve of a training job: step rate as a function of GPU power.

A job slowed by a power limit (or a locked clock) draws less power and steps more
slowly.  The curve relates the two *relative* to the job's unconstrained operating point:

.. math:: \\log r(y) = b_1 \\log y + b_2 (\\log y)^2, \\qquad y = P / P_{ref} \\le 1,

where ``P`` is the mean power a busy GPU draws [W], ``P_ref`` the power it draws at the
highest (least binding) limit seen, and ``r`` the step rate relative to the rate there
(``r = 1`` for ``y >= 1``: a limit above what the job draws changes nothing).  It is a
smooth, data-driven shape (a quadratic in log-log coordinates), deliberately not a
physical DVFS law: the coefficients come from the fleet's own telemetry where it has
power-cap variation (:func:`fit_curve`), otherwise from a stated prior per GPU model
(:func:`prior_curve`, :data:`PRIORS`).

Fitting (:func:`curve_points`, :func:`fit_curve`): the training log's productive steps
are matched to the power limit in force (telemetry ``power_limit_w``) and cut into blocks
of ``block_s``; each block gives a mean step rate, the mean power and SM clock of its
busy GPUs and the share of samples with the ``sw_power_cap`` throttle reason.  The
coefficients are an ordinary least-squares fit (statsmodels, HC3 covariance) of
``log rate`` on ``[1, u, u^2]``, ``u = log(P / P_ref)``; the intercept absorbs the
reference rate, so the relative rate and its confidence band depend on ``b`` only.

Where a planner asks in power *limits* (:meth:`PowerThroughputCurve.power_at_limit`,
:meth:`PowerThroughputCurve.rate_at_limit`), a fitted curve takes the power drawn under a
limit from the measured operating points themselves (the *limit map*): the mean busy
power per fitted limit (made monotone in the limit by weighted isotonic regression),
interpolated linearly between fitted limits, ``P_ref`` at and above the highest fitted
limit (the limit no longer binds); below the lowest fitted limit it is extrapolated by a
stated rule (power proportional to the limit from the lowest fitted point) and such rows
are flagged (``extrapolated``).  The rate under the limit is the curve's at that power.
The map is stored relative to ``P_ref`` (``L / P_ref -> P / P_ref``), so a curve
re-anchored at another job's power keeps it.  Why a map and not a ratio: a limit binds
phase by phase, so the mean busy power is an affine, not proportional, function of the
limit and a limit costs throughput while still above the mean power (the independent
generator ``tests/flexgens``); on real sweeps (Zeus) the ratio power/limit falls from
~0.98 at low power to ~0.85 near ``P_ref`` (docs/flexibility.md).  ``kappa``, the median
ratio of power to limit where the power cap binds, is still reported.  Without data (the
prior) the power under a limit ``L`` is ``min(kappa L, P_ref)`` with ``kappa = 1``.

References
----------
.. [1] J. You, J.-W. Chung, M. Chowdhury, "Zeus: Understanding and Optimizing GPU Energy
   Consumption of DNN Training", USENIX NSDI 2023 (training throughput against the GPU
   power limit).
.. [2] NVIDIA, "NVML API Reference Guide": ``nvmlDeviceSetPowerManagementLimit``,
   ``nvmlDeviceSetGpuLockedClocks``, clock event reason ``SwPowerCap``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._summary import Summary
from ..exceptions import AnalysisError, PowerlabError
from ..telemetry.schema import THROTTLE_REASONS
from ..telemetry.timeutil import series_to_utc, to_epoch_ns

__all__ = ["CAPPED_BELOW_REF", "PRIORS", "CurvePrior", "PowerThroughputCurve", "curve_points",
           "fit_curve", "fit_curve_points", "prior_curve"]


@dataclass(frozen=True)
class CurvePrior:
    """A stated prior curve for a GPU model when the fleet has no power-cap variation.

    Attributes
    ----------
    b1, b1_sd : float
        Log-log slope of step rate on power and its standard deviation [-].
    min_limit_w, max_limit_w : float
        The power-limit range the driver accepts [W].
    source : str
        Where the numbers come from.
    """

    b1: float
    b1_sd: float
    min_limit_w: float
    max_limit_w: float
    source: str


#: Priors by GPU model (matched by prefix of the scenario's ``hardware.gpu_model``).
PRIORS: dict[str, CurvePrior] = {
    "H100": CurvePrior(
        0.30, 0.12, 200.0, 700.0,
        "assumption: a ~0.3 log-log slope (20 % less power costs ~7 % step rate) within "
        "the range of power-limit sweeps of training jobs (You et al., Zeus, NSDI 2023); "
        "sd 0.12 covers compute- to communication-bound jobs; H100 SXM limit range "
        "200-700 W (nvidia-smi -q, Power Limits)"),
    "A100": CurvePrior(
        0.30, 0.12, 100.0, 400.0,
        "assumption as for H100; A100 SXM limit range 100-400 W (nvidia-smi -q)"),
    "B200": CurvePrior(
        0.30, 0.15, 200.0, 1000.0,
        "assumption as for H100 with a wider sd (no published sweep known to us); "
        "limit range assumed 200-1000 W"),
}


def _prior_for(gpu_model: str) -> CurvePrior:
    for key, pr in PRIORS.items():
        if str(gpu_model).upper().startswith(key):
            return pr
    raise PowerlabError(f"no prior power-throughput curve for GPU model {gpu_model!r} "
                        f"(known: {', '.join(PRIORS)}); fit one from telemetry with "
                        "power-cap variation (powerlab.flex.fit_curve)")


@dataclass
class PowerThroughputCurve:
    """Relative step rate against GPU power, with its uncertainty (results object).

    Attributes
    ----------
    b : ndarray
        ``[b1, b2]`` [-].
    cov : ndarray
        Their 2 x 2 covariance [-].
    p_ref_w : float
        Power drawn at the reference (least binding) operating point [W].
    kappa : float
        Power drawn per watt of a binding limit [-].
    min_limit_w, max_limit_w : float
        Limit range of the GPU [W].
    source : str
        ``"fit"`` or ``"prior"``, with where the numbers come from.
    points : pandas.DataFrame
        The blocks the fit used (empty for a prior).
    clock : tuple or None
        ``(c0, c1)`` of ``log clock = c0 + c1 u`` (None: no clock data).
    fit_power_w : tuple or None
        Lowest and highest mean power of the points fitted [W] (None for a prior).  Below
        the lowest the curve is an extrapolation: on real sweeps (Zeus, docs/flexibility.md)
        its error grows from ~1.6 pp one limit step below to a median ~20 pp (cost
        understated) three or more steps below.
    limit_map : pandas.DataFrame or None
        The fitted operating points per power limit, relative to ``P_ref``:
        ``limit_rel`` (``L / P_ref``), ``power_rel`` (``P / P_ref``, the
        (mean busy power, monotone in the limit), ``power_se_rel`` (its standard error)
        and ``n`` (points per limit), sorted by limit (None for a prior:
        ``power_at_limit`` is then ``min(kappa L, P_ref)``).
    """

    b: np.ndarray
    cov: np.ndarray
    p_ref_w: float
    kappa: float
    min_limit_w: float
    max_limit_w: float
    source: str
    gpu_model: str = ""
    points: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    clock: tuple | None = None
    rsquared: float = float("nan")
    fit_power_w: tuple | None = None
    limit_map: pd.DataFrame | None = field(default=None, repr=False)

    # -- predictions --------------------------------------------------------------------
    def relative_rate(self, power_w, alpha: float = 0.1) -> pd.DataFrame:
        """Step rate relative to the reference at mean GPU power ``power_w`` [W].

        Returns a frame with ``power_w``, ``rate_mean``, ``rate_lower``, ``rate_upper``
        (a ``1 - alpha`` pointwise band from the coefficients' covariance, delta method
        in the log) [-].
        """
        from scipy import stats

        p = np.atleast_1d(np.asarray(power_w, float))
        if (p <= 0).any():
            raise AnalysisError("power must be positive to evaluate the curve")
        u = np.minimum(np.log(p / self.p_ref_w), 0.0)
        x = np.column_stack([u, u * u])
        m = x @ self.b
        se = np.sqrt(np.einsum("ij,jk,ik->i", x, self.cov, x))
        z = stats.norm.ppf(1 - alpha / 2)
        return pd.DataFrame({"power_w": p, "rate_mean": np.exp(m),
                             "rate_lower": np.exp(m - z * se),
                             "rate_upper": np.exp(np.minimum(m + z * se, 0.0))})

    def power_at_limit(self, limit_w) -> np.ndarray:
        """Mean power a busy GPU draws under a power limit [W].

        Fitted curve: the limit map (monotone interpolation of the measured mean power
        per fitted limit; ``P_ref`` at and above the highest fitted limit; below the
        lowest, proportional to the limit from the lowest fitted point).  Prior:
        ``min(kappa L, P_ref)``.
        """
        lim = np.asarray(limit_w, float)
        if self.limit_map is None:
            return np.minimum(self.kappa * lim, self.p_ref_w)
        return self._map_power_rel(lim / self.p_ref_w) * self.p_ref_w

    def reanchored(self, p_ref_w: float) -> PowerThroughputCurve:
        """The curve transferred to a job that draws ``p_ref_w`` [W] unconstrained.

        The curve and its limit map are relative to ``P_ref``, so they carry over by
        setting ``P_ref`` (power under a limit ``L``: ``P_ref`` times the map at ``L /
        P_ref``, as ``min(kappa L, P_ref)`` carries over for a prior).  A job's
        unconstrained power is what it draws at the GPU's highest limit: where the map's
        highest fitted limit would lie above ``max_limit_w`` (a job drawing more than the
        one fitted), the map ends at ``max_limit_w`` with ``P_ref`` there (fitted limits
        above it are dropped; the segment below it is interpolated to it).
        """
        out = dataclasses.replace(self, p_ref_w=float(p_ref_w))
        if self.limit_map is not None:
            m = self.limit_map
            x_max = self.max_limit_w / float(p_ref_w)
            if float(m["limit_rel"].iloc[-1]) > x_max and float(m["limit_rel"].iloc[0]) < x_max:
                keep = m[m["limit_rel"] < x_max]
                top = m.iloc[[-1]].assign(limit_rel=x_max, power_rel=1.0)
                out = dataclasses.replace(out, limit_map=pd.concat([keep, top],
                                                                   ignore_index=True))
        return out

    @property
    def binding_limit_w(self) -> float:
        """Lowest limit at and above which the limit changes nothing [W] (``P_ref /
        kappa`` for a prior, the highest fitted limit for a fitted curve)."""
        if self.limit_map is None:
            return float(self.p_ref_w / self.kappa)
        return float(self.limit_map["limit_rel"].iloc[-1] * self.p_ref_w)

    def extrapolated(self, limit_w) -> np.ndarray:
        """True where a limit lies below the lowest fitted limit (the map's stated
        extrapolation rule applies; always False for a prior, which states its own
        assumption everywhere)."""
        lim = np.atleast_1d(np.asarray(limit_w, float))
        if self.limit_map is None:
            return np.zeros(lim.shape, bool)
        return lim / self.p_ref_w < self.limit_map["limit_rel"].iloc[0] * (1 - 1e-9)

    def limit_for_power(self, power_w) -> np.ndarray:
        """Power limit that holds a busy GPU at ``power_w`` (clipped to the GPU's range)
        [W]."""
        p = np.asarray(power_w, float)
        if self.limit_map is None:
            return np.clip(p / self.kappa, self.min_limit_w, self.max_limit_w)
        m = self.limit_map
        x_lo, x_hi = float(m["limit_rel"].iloc[0]), float(m["limit_rel"].iloc[-1])
        grid = np.linspace(x_lo, x_hi, 2001)
        y = self._map_power_rel(grid)
        yq = p / self.p_ref_w
        # below the lowest fitted point: the proportional rule inverted
        x = np.where(yq < y[0], yq / y[0] * x_lo,
                     np.interp(yq, y, grid, right=x_hi))
        return np.clip(x * self.p_ref_w, self.min_limit_w, self.max_limit_w)

    def rate_at_limit(self, limit_w, alpha: float = 0.1) -> pd.DataFrame:
        """Step rate relative to the reference under power limit(s) ``limit_w`` [W].

        The power curve (:meth:`relative_rate`) at the power drawn under the limit
        (:meth:`power_at_limit`).  For a fitted curve the band adds the uncertainty of
        that power, propagated through the curve's slope (delta method in the log): the
        standard errors of the two neighbouring fitted limits' mean powers and an
        interpolation uncertainty (the distance between the linear interpolant the map
        uses and a monotone cubic, PCHIP, through the same points, taken as one standard
        deviation; between the two highest fitted limits, where the data cannot say at
        which limit the cap starts to bind, also the distance to the proportional rule
        ``min(kappa L, P_ref)``; at the lowest fitted limit for an extrapolated row,
        whose extra error is not modelled: the row is flagged ``extrapolated``).  A
        prior's band is the coefficients' alone.

        Returns
        -------
        pandas.DataFrame
            ``power_limit_w, power_w, rate_mean, rate_lower, rate_upper, extrapolated``.
        """
        from scipy import stats

        lim = np.atleast_1d(np.asarray(limit_w, float))
        if not np.isfinite(lim).all() or (lim <= 0).any():
            raise AnalysisError("power limits must be positive finite numbers [W]")
        p = np.atleast_1d(self.power_at_limit(lim))
        ext = self.extrapolated(lim)
        rr = self.relative_rate(p, alpha)
        rr.insert(0, "power_limit_w", lim)
        rr["extrapolated"] = ext
        if self.limit_map is None:
            return rr
        from scipy.interpolate import PchipInterpolator

        m = self.limit_map
        xs = m["limit_rel"].to_numpy(float)
        ys = m["power_rel"].to_numpy(float)
        ses = m["power_se_rel"].to_numpy(float)
        xc = np.clip(lim / self.p_ref_w, xs[0], xs[-1])
        j = np.clip(np.searchsorted(xs, xc, side="right") - 1, 0, len(xs) - 1)
        k = np.minimum(j + 1, len(xs) - 1)
        w = np.where(k > j, (xc - xs[j]) / np.where(k > j, xs[k] - xs[j], 1.0), 0.0)
        y_lin = np.interp(xc, xs, ys)
        y_cub = PchipInterpolator(xs, ys)(xc) if len(xs) > 1 else y_lin
        var_y = ((1 - w) * ses[j]) ** 2 + (w * ses[k]) ** 2 + (y_cub - y_lin) ** 2
        # between the two highest fitted limits the data cannot say where the limit
        # starts to bind: the band spans the proportional rule min(kappa L, P_ref) too
        # (kept within the two limits' powers)
        top = (j == len(xs) - 2) & (k == len(xs) - 1)
        if top.any():
            y_k = np.clip(self.kappa * xc, ys[-2], ys[-1])
            var_y = np.where(top, var_y + (y_k - y_lin) ** 2, var_y)
        # d log r / d log P of the power curve (0 at and above P_ref)
        u = np.minimum(np.log(p / self.p_ref_w), 0.0)
        slope = np.where(u < 0, self.b[0] + 2 * self.b[1] * u, 0.0)
        se_u = np.sqrt(var_y) / np.minimum(p / self.p_ref_w, 1.0)
        x = np.column_stack([u, u * u])
        mean = x @ self.b
        se = np.sqrt(np.einsum("ij,jk,ik->i", x, self.cov, x) + (slope * se_u) ** 2)
        z = stats.norm.ppf(1 - alpha / 2)
        rr["rate_lower"] = np.exp(mean - z * se)
        rr["rate_upper"] = np.exp(np.minimum(mean + z * se, 0.0))
        return rr

    def _map_power_rel(self, x) -> np.ndarray:
        """``P / P_ref`` at ``x = L / P_ref`` from the limit map."""
        m = self.limit_map
        xs = m["limit_rel"].to_numpy(float)
        ys = m["power_rel"].to_numpy(float)
        x = np.asarray(x, float)
        y = np.interp(np.clip(x, xs[0], xs[-1]), xs, ys)
        # below the lowest fitted limit: proportional to the limit (stated rule)
        return np.where(x < xs[0], ys[0] * x / xs[0], np.minimum(y, 1.0))

    def clock_at_power(self, power_w) -> np.ndarray:
        """SM clock at which a busy GPU draws ``power_w`` [MHz] (NaN without clock
        data)."""
        p = np.asarray(power_w, float)
        if self.clock is None:
            return np.full(p.shape, np.nan)
        u = np.minimum(np.log(p / self.p_ref_w), 0.0)
        return np.exp(self.clock[0] + self.clock[1] * u)

    def summary_frame(self, limits_w=None, alpha: float = 0.1) -> pd.DataFrame:
        """One row per power limit: power drawn, relative rate with its band and the
        step-rate loss [%] (default limits: the GPU's range in 50-W steps), from
        :meth:`rate_at_limit`; ``extrapolated`` flags limits below the lowest fitted
        one."""
        if limits_w is None:
            limits_w = np.arange(self.max_limit_w, self.min_limit_w - 1e-9, -50.0)
        rr = self.rate_at_limit(np.asarray(limits_w, float), alpha)
        rr["step_rate_loss_pct"] = 100.0 * (1.0 - rr["rate_mean"])
        rr["step_rate_loss_pct_lower"] = 100.0 * (1.0 - rr["rate_upper"])
        rr["step_rate_loss_pct_upper"] = 100.0 * (1.0 - rr["rate_lower"])
        rr["clock_sm_mhz"] = self.clock_at_power(rr["power_w"].to_numpy())
        return rr

    def summary(self) -> Summary:
        """Summary: source, coefficients with standard errors, the curve."""
        se = np.sqrt(np.diag(self.cov))
        head = [f"Power-throughput curve ({self.source})",
                (f"GPU model: {self.gpu_model or 'unknown'}   P_ref = {self.p_ref_w:.0f} W"
                f"   kappa = {self.kappa:.3f}   limits {self.min_limit_w:.0f}-"
                f"{self.max_limit_w:.0f} W"),
                f"log r = b1 log y + b2 (log y)^2:  b1 = {self.b[0]:.4f} (se {se[0]:.4f}),"
                f" b2 = {self.b[1]:.4f} (se {se[1]:.4f})"
                + (f",  R^2 = {self.rsquared:.4f}" if np.isfinite(self.rsquared) else "")
                + (f",  {len(self.points)} blocks" if len(self.points) else "")]
        if self.fit_power_w is not None:
            head.append(f"fitted on mean powers {self.fit_power_w[0]:.0f}-"
                        f"{self.fit_power_w[1]:.0f} W; below {self.fit_power_w[0]:.0f} W "
                        "the curve is extrapolated")
        if self.limit_map is not None:
            lims = self.limit_map["limit_rel"].to_numpy() * self.p_ref_w
            head.append(f"limit map: measured operating points at {len(lims)} limits "
                        f"{lims[0]:.0f}-{lims[-1]:.0f} W (linear between them; above "
                        f"{lims[-1]:.0f} W the limit does not bind; below {lims[0]:.0f} W "
                        "extrapolated: power proportional to the limit, flagged)")
        else:
            head.append("power under a limit L: min(kappa L, P_ref)")
        tab = self.summary_frame()[["power_limit_w", "power_w", "step_rate_loss_pct",
                                    "step_rate_loss_pct_lower", "step_rate_loss_pct_upper",
                                    "extrapolated"]]
        s = Summary(float_format="{:.2f}")
        s.add_text(head)
        s.add_df(tab, index=False)
        return s

    def __str__(self) -> str:
        return str(self.summary())

    def _repr_html_(self) -> str:
        return self.summary().as_html()


def prior_curve(gpu_model: str, p_ref_w: float) -> PowerThroughputCurve:
    """The stated prior curve of a GPU model around a job's unconstrained power.

    Parameters
    ----------
    gpu_model : str
        GPU model (prefix-matched against :data:`PRIORS`, e.g. ``"H100-SXM-80GB"``).
    p_ref_w : float
        Power a busy GPU of the job draws without a binding limit [W].

    Returns
    -------
    PowerThroughputCurve
    """
    pr = _prior_for(gpu_model)
    if not p_ref_w > 0:
        raise PowerlabError(f"p_ref_w must be positive, got {p_ref_w}")
    cov = np.diag([pr.b1_sd ** 2, 1e-12])
    return PowerThroughputCurve(np.array([pr.b1, 0.0]), cov, float(p_ref_w), 1.0,
                                pr.min_limit_w, pr.max_limit_w, "prior: " + pr.source,
                                str(gpu_model),
                                clock=(np.log(1980.0), 1.0 / 3.0))


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
    import statsmodels.api as sm

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
        pr = _prior_for(gpu_model)
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
    from scipy.optimize import isotonic_regression

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
