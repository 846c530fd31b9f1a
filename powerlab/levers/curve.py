"""Power-throughput curve of a training job: step rate as a function of GPU power (the
physics of the power-cap and clock-lock levers, :mod:`powerlab.levers.throttle`).

A job slowed by a power limit (or a locked clock) draws less power and steps more
slowly.  The curve relates the two *relative* to the job's unconstrained operating point:

.. math:: \\log r(y) = b_1 \\log y + b_2 (\\log y)^2, \\qquad y = P / P_{ref} \\le 1,

where ``P`` is the mean power a busy GPU draws [W], ``P_ref`` the power it draws at the
highest (least binding) limit seen, and ``r`` the step rate relative to the rate there
(``r = 1`` for ``y >= 1``: a limit above what the job draws changes nothing).  It is a
smooth, data-driven shape (a quadratic in log-log coordinates), deliberately not a
physical DVFS law: the coefficients come from the fleet's own telemetry where it has
power-cap variation (:func:`powerlab.flex.fit_curve`, :mod:`powerlab.flex.curvefit`),
otherwise from a stated prior per GPU model (:func:`prior_curve`, :data:`PRIORS`).

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
from scipy import stats
from scipy.interpolate import PchipInterpolator

from .._summary import Results, Summary
from ..exceptions import AnalysisError, PowerlabError

__all__ = ["PRIORS", "CurvePrior", "PowerThroughputCurve", "prior_curve", "prior_for"]


@dataclass(frozen=True)
class CurvePrior:
    """A stated prior curve for a GPU model when the fleet has no power-cap variation.

    Attributes
    ----------
    b : tuple of float
        ``(b1, b2)`` of ``log r = b1 u + b2 u^2`` [-].
    cov : tuple of tuple of float
        Their 2 x 2 covariance: the job-to-job spread of the sweeps it rests on (the
        band a new job falls in, not the standard error of the mean) [-].
    y_min : float
        Lowest relative power ``P / P_ref`` the sweeps reached: below it the prior is an
        extrapolation, and rows there are flagged ``extrapolated`` [-].
    min_limit_w, max_limit_w : float
        The power-limit range the driver accepts [W].
    source : str
        Where the numbers come from, and whether the GPU model itself was measured.
    measured : bool
        True where a published sweep of this GPU model exists.
    """

    b: tuple[float, float]
    cov: tuple[tuple[float, float], tuple[float, float]]
    y_min: float
    min_limit_w: float
    max_limit_w: float
    source: str
    measured: bool = False

    @property
    def b1(self) -> float:
        """Log-log slope at the reference point [-]."""
        return float(self.b[0])

    @property
    def b1_sd(self) -> float:
        """Standard deviation of ``b1`` [-]."""
        return float(np.sqrt(self.cov[0][0]))


_ZEUS = ("power-limit sweeps of You, Chung, Chowdhury, 'Zeus', USENIX NSDI 2023 "
         "(data/zeus-nsdi23; derivation: benchmarks/derive_curve_priors.py)")
_UNSWEPT = (
    "NO published power-limit sweep of this GPU model is known to us: the shape is the "
    "equal-weight mixture of the four generations Zeus swept (V100, A40, RTX 6000, P100; "
    "147 jobs), band = their job-to-job spread plus the spread between generations; at "
    "46 % of P_ref it costs 50 % of step rate (90 % band 0-79 %), where the sweeps measure "
    "34 % (V100), 46 % (RTX 6000), 70 % (A40); the prior's mean and band are an assumption "
    "until this GPU is measured (" + _ZEUS + ")")

#: Priors by GPU model (matched by prefix of the scenario's ``hardware.gpu_model``): the
#: mean shape and job-to-job spread of published power-limit sweeps (Zeus, NSDI 2023),
#: per swept GPU model; models never swept in public take the mixture of the four
#: (:data:`_UNSWEPT`).  The numbers are re-derived from the bundled data by
#: ``tests/flex/test_curve_priors.py``.
PRIORS: dict[str, CurvePrior] = {
    "H100": CurvePrior((0.0515, -1.0878), ((0.0062, 0.0262), (0.0262, 0.8425)), 0.3658,
                       200.0, 700.0, _UNSWEPT + "; H100 SXM limit range 200-700 W "
                       "(nvidia-smi -q, Power Limits)"),
    "A100": CurvePrior((0.0515, -1.0878), ((0.0062, 0.0262), (0.0262, 0.8425)), 0.3658,
                       100.0, 400.0, _UNSWEPT + "; A100 SXM limit range 100-400 W "
                       "(nvidia-smi -q)"),
    "B200": CurvePrior((0.0515, -1.0878), ((0.0062, 0.0262), (0.0262, 0.8425)), 0.3658,
                       200.0, 1000.0, _UNSWEPT + "; limit range assumed 200-1000 W"),
    "V100": CurvePrior((0.0816, -0.5780), ((0.0046, 0.0030), (0.0030, 0.2828)), 0.4260,
                       100.0, 250.0, "48 V100 jobs of the " + _ZEUS, measured=True),
    "A40": CurvePrior((0.0067, -2.0142), ((0.0016, -0.0152), (-0.0152, 0.9574)), 0.3658,
                      100.0, 300.0, "37 A40 jobs of the " + _ZEUS, measured=True),
    "RTX6000": CurvePrior((0.0164, -1.0091), ((0.0039, 0.0123), (0.0123, 0.1415)),
                          0.3946, 100.0, 260.0, "35 RTX 6000 jobs of the " + _ZEUS,
                          measured=True),
    "P100": CurvePrior((0.1012, -0.7499), ((0.0059, 0.0102), (0.0102, 0.3368)), 0.6570,
                       125.0, 250.0, "27 P100 jobs of the " + _ZEUS, measured=True),
}


def prior_for(gpu_model: str) -> CurvePrior:
    """The prior of a GPU model (prefix-matched against :data:`PRIORS`)."""
    for key, pr in PRIORS.items():
        if str(gpu_model).upper().startswith(key):
            return pr
    raise PowerlabError(f"no prior power-throughput curve for GPU model {gpu_model!r} "
                        f"(known: {', '.join(PRIORS)}); fit one from telemetry with "
                        "power-cap variation (powerlab.flex.fit_curve)")


@dataclass(repr=False)
class PowerThroughputCurve(Results):
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
        Lowest and highest mean power of the points fitted (for a prior: of the sweeps it
        rests on, relative to ``P_ref``) [W].  Below
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
        extrapolation rule applies); for a prior, where the power under the limit lies
        below the lowest relative power its sweeps reached (``fit_power_w[0]``)."""
        lim = np.atleast_1d(np.asarray(limit_w, float))
        if self.limit_map is None:
            if self.fit_power_w is None:
                return np.zeros(lim.shape, bool)
            return self.power_at_limit(lim) < self.fit_power_w[0] * (1 - 1e-9)
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

    def _repr_line(self) -> str:
        return (f"<PowerThroughputCurve {self.source.split(':')[0]}: P_ref "
                f"{self.p_ref_w:.0f} W, b1 {self.b[0]:.4f}, b2 {self.b[1]:.4f}>")


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
    pr = prior_for(gpu_model)
    if not p_ref_w > 0:
        raise PowerlabError(f"p_ref_w must be positive, got {p_ref_w}")
    return PowerThroughputCurve(np.array(pr.b, float), np.array(pr.cov, float),
                                float(p_ref_w), 1.0, pr.min_limit_w, pr.max_limit_w,
                                "prior: " + pr.source, str(gpu_model),
                                clock=(np.log(1980.0), 1.0 / 3.0),
                                fit_power_w=(pr.y_min * float(p_ref_w), float(p_ref_w)))
