"""Time-of-day (diurnal) effects on training throughput, and how they run through DVFS.

Llama 3's training throughput varied 1-2 % with the time of day because mid-day heat
changed GPU dynamic voltage and frequency scaling [1]_.  :func:`fit_time_of_day` asks
the same question of any training log:

1. clean: drop each run segment's warm-up and the checkpoint / evaluation outliers
   (robust z-scores against a rolling median), and count what was dropped;
2. aggregate the steps to regular intervals (default 5 min) within each segment;
3. regress throughput on one level per run segment plus Fourier terms of the local
   (daylight-saving aware) hour of day, built with
   :class:`statsmodels.tsa.deterministic.CalendarFourier`; the number of harmonics is
   chosen by an information criterion (BIC by default);
4. use standard errors that stay valid under autocorrelated noise: feasible GLS with
   AR(p) errors (:class:`statsmodels.regression.linear_model.GLSAR`) plus Newey-West
   HAC on the whitened residuals (default), or OLS with HAC [2]_ [3]_;
5. report the peak-to-trough amplitude of the fitted local-time profile as a percentage
   of mean throughput, with a 95 % interval from a parametric bootstrap of the Fourier
   coefficients (bias-corrected percentile [4]_, since the amplitude is a non-linear,
   non-negative functional of the coefficients), peak and trough hours, and the
   p-value of "no time-of-day effect": the larger of the model's Wald test and a
   day-block (cluster-by-local-day, Hotelling F) test [7]_ that stays valid when the
   noise is correlated over hours.

With telemetry it also attributes the effect (mediation by the slowest GPUs' clock and by
die temperature), tabulates the share of GPU-time under each NVML throttle reason by
local hour, converts the effect into GPU-hours lost per day, and (for series of two weeks
or more) decomposes throughput with MSTL into daily and weekly components [5]_.

Model
-----
For the interval mean ``y_t`` of segment ``s(t)`` at local hour ``h_t``:

.. math:: y_t = \\mu_{s(t)} + \\sum_{k=1}^{K} a_k \\sin(2\\pi k h_t/24)
          + b_k \\cos(2\\pi k h_t/24) + u_t

``K`` is the fewest harmonics in ``1..max_order`` whose information criterion is
within 2 of the minimum (weaker evidence than that does not buy a harmonic [6]_);
``u_t`` is AR(p) (``errors="ar"``, ``p = ar_order``, or by AIC up to 3).

The p-value of "no time-of-day effect" is the larger of two tests of
``a_k = b_k = 0``: (i) the Wald test with the model's covariance (GLS + HAC), which
relies on the AR model capturing the noise's low-frequency power and over-rejects
when the noise is correlated over hours and the AR coefficient is biased towards
zero; (ii) a day-block test: OLS with standard errors clustered by local calendar
day, with Hotelling's small-sample F reference ``T2 (G-q)/(q(G-1)) ~ F(q, G-q)`` for
``G`` days and ``q = 2K`` coefficients [7]_, valid when the noise decorrelates
within a day whatever its form.  The maximum of two valid p-values is valid
(conservative); with fewer than ``q + 2`` days only (i) is used.  The amplitude
interval uses the model covariance (i).  The amplitude is ``max_h f(h) - min_h f(h)``
of the fitted profile ``f`` divided by the mean of ``y``.  Mediation (attribution)
refits the model with the mediator ``m_t`` (slowest-GPU clock, mean die temperature,
ambient) as a regressor; the profile that remains is the direct effect, and the mediated share is
the projection of (total - direct) on the total profile.  The mediator's coefficient
is identified only by its variation apart from the time of day (day-to-day weather,
faults); ``attribution["identified"]`` is false where ``|coef / se| < 2``.  Mediation
fits use OLS in levels with HAC errors (GLS quasi-differencing would leave mostly
the mediator's measurement noise and attenuate its coefficient).

The amplitude is that of the smooth profile the selected harmonics can resolve: a
narrow feature (say, one GPU crossing its thermal slowdown threshold for an hour each
afternoon) that the data cannot distinguish from noise is smoothed, and the interval
does not include that smoothing bias.

References
----------
.. [1] A. Grattafiori et al., "The Llama 3 Herd of Models", arXiv:2407.21783, 2024,
   section 3.3.4.
.. [2] W. K. Newey and K. D. West, "A simple, positive semi-definite, heteroskedasticity
   and autocorrelation consistent covariance matrix", Econometrica 55(3), 1987.
.. [3] D. W. K. Andrews and J. C. Monahan, "An improved heteroskedasticity and
   autocorrelation consistent covariance matrix estimator", Econometrica 60(4), 1992
   (prewhitening before HAC).
.. [4] B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall,
   1993, ch. 14 (bias-corrected percentile intervals).
.. [5] K. Bandara, R. J. Hyndman and C. Bergmeir, "MSTL: A seasonal-trend decomposition
   algorithm for time series with multiple seasonal patterns", arXiv:2107.13462, 2021.
.. [6] R. E. Kass and A. E. Raftery, "Bayes factors", Journal of the American
   Statistical Association 90(430), 1995 (BIC differences below 2: weak evidence).
.. [7] C. Hansen, "Asymptotic properties of a robust variance matrix estimator for panel
   data when T is large", Journal of Econometrics 141(2), 2007 (cluster-robust Wald
   statistics with few clusters and Hotelling's F reference).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats
from threadpoolctl import threadpool_limits

from .._options import Options, choice
from ..exceptions import AnalysisError
from .changepoints import demeaned_fit, level_shifts, shift_table
from .diurnal import (
    ERRORS,
    MINUTES,
    Design,
    bc_interval,
    check_site_tz,
    clean_steps,
    day_block_test,
    fit_daily_profile,
    fourier_terms,
    grid_basis,
    info_criterion,
    interval_means,
    local_naive,
    select_ar_order,
    series_from,
)
from .seasonal import decompose_seasonal
from .throttling import mediator_series, slowest_clock, throttle_share_by_hour
from .time_of_day_result import TimeOfDayResult

__all__ = [
    "TimeOfDayOptions",
    "TimeOfDayResult",
    "decompose_seasonal",
    "fit_time_of_day",
    "slowest_clock",
    "throttle_share_by_hour",
]

# ----------------------------------------------------------------------------- options
@dataclass(frozen=True)
class TimeOfDayOptions(Options):
    """Options of :func:`fit_time_of_day` (the model, its cleaning and its intervals).

    Parameters
    ----------
    interval : str
        Aggregation interval (pandas offset) [-].
    max_order : int
        Largest number of daily harmonics considered.
    ic : {"bic", "aic"}
        Information criterion choosing the number of harmonics.
    errors : {"ar", "hac", "ols"}
        ``"ar"``: feasible GLS with AR(``ar_order``) errors + HAC on whitened residuals
        (default); ``"hac"``: OLS with Newey-West HAC; ``"ols"``: naive OLS (assumes
        independent errors, for comparison only: it overstates significance under
        autocorrelation).
    ar_order : int or "aic"
        Order of the AR error model for ``errors="ar"``; ``"aic"`` chooses it in 1..3
        by AIC on the OLS residuals of the largest model (the test's size improves
        under long noise correlation; the point estimates get noisier).
    hac_lags : int, optional
        HAC bandwidth [intervals]; default ``floor(4 (n/100)^(2/9))``.
    warmup_s : float
        Time dropped at the start of every segment [s].
    outlier_z : float
        Robust z-score (against a centred 1-hour rolling median) beyond which a step is an
        outlier (checkpoint, evaluation) [-].
    gap_s : float, optional
        Gap that starts a new segment when segments are not given [s]; default
        ``max(10 x median step interval, 300 s)``.
    clock_quantile : float
        Quantile across GPUs for the slowest clock (0 = minimum) [-].
    alpha : float
        1 - confidence level.
    n_boot : int
        Parametric bootstrap draws for the amplitude interval.
    seed : int, optional
        Seed of the bootstrap.
    decompose : bool or "auto"
        Run the MSTL decomposition ("auto": when the series spans 14 days or more).
    shift_alpha : float or None
        Level of the per-segment structural-break test that finds gapless level shifts
        (:mod:`~powerlab.throughput.changepoints`); each shift found becomes a segment
        boundary and is reported in ``change_points``.  ``None`` disables the search.

    """

    interval: str = "5min"
    max_order: int = 4
    ic: str = "bic"
    errors: str = "ar"
    ar_order: int | str = 1
    hac_lags: int | None = None
    warmup_s: float = 900.0
    outlier_z: float = 6.0
    gap_s: float | None = None
    clock_quantile: float = 0.05
    alpha: float = 0.05
    n_boot: int = 2000
    seed: int | None = 0
    decompose: bool | str = "auto"
    shift_alpha: float | None = 0.01

    def check(self) -> int:
        """Check the options (:class:`~powerlab.exceptions.AnalysisError` naming the bad
        one); returns the interval [ns]."""
        choice(self.errors, "errors", ERRORS, error=AnalysisError)
        choice(self.ic, "ic", ("bic", "aic"), error=AnalysisError)
        mo = self.max_order
        if not (isinstance(mo, (int, np.integer)) and 1 <= mo <= 12):
            raise AnalysisError(f"max_order must be an integer in 1..12, got {mo!r}")
        if not 0 < self.alpha < 1:
            raise AnalysisError(f"alpha must be in (0, 1), got {self.alpha}")
        sa = self.shift_alpha
        if sa is not None and not 0 < sa < 1:
            raise AnalysisError(f"shift_alpha must be in (0, 1) or None, got {sa}")
        nb = self.n_boot
        if not (isinstance(nb, (int, np.integer)) and nb >= 1):
            raise AnalysisError(f"n_boot must be a positive integer, got {nb!r}")
        ar = self.ar_order
        if self.errors == "ar" and ar != "aic" and not (
                isinstance(ar, (int, np.integer)) and ar >= 1):
            raise AnalysisError(f"ar_order must be a positive integer or 'aic', got {ar!r}")
        hl = self.hac_lags
        if hl is not None and not (isinstance(hl, (int, np.integer)) and hl >= 0):
            raise AnalysisError(f"hac_lags must be a non-negative integer, got {hl!r}")
        try:
            interval_ns = int(pd.Timedelta(self.interval).value)
        except (TypeError, ValueError) as exc:
            raise AnalysisError(f"interval {self.interval!r} is not a pandas offset") \
                from exc
        if interval_ns <= 0:
            raise AnalysisError("interval must be positive")
        return interval_ns


# ----------------------------------------------------------------------------- fit
def fit_time_of_day(throughput: pd.Series | pd.DataFrame, *, site_tz: str,
                    value_col: str | None = None, segment=None,
                    telemetry: pd.DataFrame | None = None,
                    ambient: pd.Series | pd.DataFrame | None = None,
                    n_gpus: int | None = None, options: TimeOfDayOptions | None = None,
                    **option_kw) -> TimeOfDayResult:
    """Estimate the time-of-day effect on training throughput, with honest uncertainty.

    Parameters
    ----------
    throughput : pandas.Series or pandas.DataFrame
        Per-step (or per-interval) throughput indexed by tz-aware timestamps [any rate
        unit, e.g. tokens/s].  A DataFrame may carry the timestamp in a ``timestamp``
        column, the throughput in ``value_col`` (default: the first column whose name
        contains "throughput", else the only float column; several float columns and
        none named so raise :class:`~powerlab.exceptions.SchemaError`) and the run segment
        in ``segment`` (default column ``segment`` when present).
    site_tz : str
        IANA time zone of the site; the profile is in local civil time (daylight saving
        handled).
    value_col : str, optional
        Throughput column of a DataFrame.
    segment : str or array-like, optional
        Segment column name (DataFrame) or per-row segment labels (Series).  Default:
        segments are split at gaps longer than ``gap_s``.
    telemetry : pandas.DataFrame, optional
        GPU telemetry (canonical schema) for attribution and throttle reasons.
    ambient : pandas.Series or pandas.DataFrame, optional
        Outdoor temperature [degC] (Series, or frame with ``temp_air_c``) as a further
        mediator.
    n_gpus : int, optional
        GPUs in the job, for GPU-hours lost; default: distinct GPUs in ``telemetry``.
    options : TimeOfDayOptions, optional
        The model's options (:class:`TimeOfDayOptions`: ``interval``, ``max_order``,
        ``ic``, ``errors``, ``ar_order``, ``hac_lags``, ``warmup_s``, ``outlier_z``,
        ``gap_s``, ``clock_quantile``, ``alpha``, ``n_boot``, ``seed``, ``decompose``,
        ``shift_alpha``); default: the defaults.
    **option_kw
        Fields of :class:`TimeOfDayOptions` replacing those of ``options``
        (``fit_time_of_day(steps, site_tz=tz, n_boot=200)``).

    Returns
    -------
    TimeOfDayResult

    Raises
    ------
    powerlab.exceptions.SchemaError
        Input without tz-aware timestamps, non-numeric or non-positive throughput.
    powerlab.exceptions.AnalysisError
        Too little data (fewer than two days of intervals or too few intervals for the
        model), unknown ``site_tz`` or bad options.

    Notes
    -----
    The model, its two tests of "no time-of-day effect", the amplitude and its interval,
    and the mediation are stated in the module's docstring (*Model*).
    """
    # the regressions are small (thousands x tens): multi-threaded BLAS only adds
    # contention, most visibly on shared CI machines
    with threadpool_limits(1, user_api="blas"):
        return _fit_time_of_day(throughput, site_tz=site_tz, value_col=value_col,
                                segment=segment, telemetry=telemetry, ambient=ambient,
                                n_gpus=n_gpus,
                                opts=TimeOfDayOptions.from_kwargs(options, **option_kw))


@dataclass
class _ToDWork:
    """What the steps of :func:`_fit_time_of_day` read and write."""

    opts: TimeOfDayOptions
    site_tz: str
    interval_ns: int
    timings: dict = field(default_factory=dict)
    # clean
    name: str = ""
    counts: dict = field(default_factory=dict)
    tu: np.ndarray = None
    yu: np.ndarray = None
    su: np.ndarray = None
    # aggregate
    ym: np.ndarray = None
    tm: np.ndarray = None
    sm: np.ndarray = None
    cnt: np.ndarray = None
    span_days: float = 0.0
    # shifts, fit
    design: Design = None
    shifts: list = field(default_factory=list)
    ar_order: int | str | None = None
    ics: dict = field(default_factory=dict)
    order: int = 0
    res: object = None
    b: np.ndarray = None
    V: np.ndarray = None
    rho: np.ndarray | None = None
    # profile
    out: dict = field(default_factory=dict)


def _fit_time_of_day(throughput, *, site_tz, value_col, segment, telemetry, ambient,
                     n_gpus, opts: TimeOfDayOptions):
    t0 = time.perf_counter()
    check_site_tz(site_tz)
    w = _ToDWork(opts=opts, site_tz=site_tz, interval_ns=opts.check())
    for key, step, args in (("clean", _clean, (throughput, value_col, segment)),
                            ("aggregate", _aggregate, ()),
                            ("level_shifts", _level_shift_step, ()),
                            ("fit", _select_order, ()),
                            ("profile", _profile_step, (telemetry, n_gpus)),
                            ("attribution", _mediation_step, (telemetry, ambient)),
                            ("decompose", _decompose_step, ())):
        t1 = t0 if key == "clean" else time.perf_counter()
        step(w, *args)
        w.timings[key] = time.perf_counter() - t1
    w.timings["total"] = time.perf_counter() - t0
    o, tm = w.out, w.tm
    return TimeOfDayResult(
        **{k: o[k] for k in ("amplitude_pct", "amplitude_ci_pct", "peak_hour", "trough_hour",
                             "pvalue", "wald_chi2", "pvalue_model", "pvalue_day",
                             "day_block_t2", "n_days", "pvalue_method")},
        ar_order=(w.ar_order if opts.errors == "ar" else None), profile=o["profile"],
        order=w.order, ic=opts.ic, ic_values=w.ics, errors=opts.errors, rho=w.rho,
        alpha=opts.alpha, counts=w.counts, mean_throughput=o["mean_throughput"],
        name=w.name, site_tz=site_tz, interval=opts.interval,
        span=(pd.Timestamp(tm[0], tz="UTC"), pd.Timestamp(tm[-1], tz="UTC")),
        coef=w.b, cov=w.V, results=w.res, amplitude_draws=o["amplitude_draws"],
        gpu_hours_lost_per_day=o["gpu_hours_lost_per_day"],
        gpu_hours_lost_ci=o["gpu_hours_lost_ci"], n_gpus=o["n_gpus"],
        attribution=o["attribution"], mediators=o["mediators"],
        throttle_by_hour=o["throttle_by_hour"], decomposition=o["decomposition"],
        change_points=o["change_points"],
        intervals=pd.DataFrame({"throughput": w.ym, "segment": w.sm, "n_steps": w.cnt},
                               index=pd.DatetimeIndex(tm, tz="UTC", name="timestamp")),
        timings=w.timings,
    )


def _clean(w: _ToDWork, throughput, value_col, segment) -> None:
    """The series; each segment's warm-up and the outliers dropped, and counted."""
    opts = w.opts
    t, y, seg, w.name, n_missing = series_from(throughput, value_col, segment)
    (w.tu, w.yu, w.su), dropped = clean_steps(t, y, seg, warmup_s=opts.warmup_s,
                                              outlier_z=opts.outlier_z, gap_s=opts.gap_s)
    w.counts = {"n_in": len(t), "n_missing": n_missing, **dropped}


def _aggregate(w: _ToDWork) -> None:
    """Interval means within segments; enough of them for the largest model."""
    max_order = w.opts.max_order
    w.ym, w.tm, w.sm, w.cnt = interval_means(w.tu, w.yu, w.su, w.interval_ns)
    w.span_days = (w.tm[-1] - w.tm[0]) / 86400e9 if len(w.tm) else 0.0
    n_seg = len(np.unique(w.sm))
    if len(w.ym) < n_seg + 2 * max_order + 10 or w.span_days < 1.0:
        raise AnalysisError(f"after cleaning, {len(w.ym)} intervals over "
                            f"{w.span_days:.2f} days remain; need at least one day and "
                            f"more than {n_seg + 2 * max_order + 10} intervals")
    w.counts["n_segments"] = n_seg


def _level_shift_step(w: _ToDWork) -> None:
    """Gapless level shifts become segment boundaries; the regression design."""
    opts = w.opts
    local = local_naive(w.tm, w.site_tz)
    seg_model, shifts = w.sm, []
    fourier_max = fourier_terms(local, opts.max_order)
    if opts.shift_alpha is not None:
        seg_model, shifts = level_shifts(
            w.ym, fourier_max, w.sm, alpha=opts.shift_alpha,
            min_size=max(3, int(3600e9 // w.interval_ns)))
    w.design = Design(y=w.ym, seg=seg_model, t_ns=w.tm, n_steps=w.cnt, local=local,
                      fourier=fourier_max)
    w.shifts = shifts
    n_seg = w.counts.pop("n_segments")
    w.counts.update(n_intervals=len(w.ym), n_segments=n_seg, n_level_shifts=len(shifts))


def _select_order(w: _ToDWork) -> None:
    """Fit 1..max_order harmonics; keep the fewest within 2 of the best criterion."""
    opts, design = w.opts, w.design
    ar_order = opts.ar_order
    if opts.errors == "ar" and ar_order == "aic":
        ar_order = select_ar_order(design, opts.max_order)
    fits = {}
    for k in range(1, opts.max_order + 1):
        fits[k] = fit_daily_profile(design, k, opts.errors, ar_order, opts.hac_lags)
        w.ics[k] = info_criterion(fits[k][0], opts.ic)
    # parsimony: the fewest harmonics whose criterion is within 2 of the best (a BIC
    # difference below 2 is "not worth more than a bare mention", Kass & Raftery 1995)
    best = min(w.ics.values())
    w.order = min(k for k, v in w.ics.items() if v <= best + 2.0)
    w.res, w.b, w.V, _, _ = fits[w.order]
    w.rho = np.atleast_1d(w.res.rho).copy() if opts.errors == "ar" else None
    w.ar_order = ar_order


def _profile_step(w: _ToDWork, telemetry, n_gpus) -> None:
    """Profile, amplitude, the two tests, the bootstrap interval, GPU-hours lost."""
    opts, alpha, b, V, o = w.opts, w.opts.alpha, w.b, w.V, w.out
    mean_y = float(np.mean(w.ym))
    G = grid_basis(w.order)
    eff = G @ b
    pct = 100.0 * eff / mean_y
    amp = float(pct.max() - pct.min())
    try:
        chi2 = float(b @ np.linalg.solve(V, b))
    except np.linalg.LinAlgError:
        chi2 = float(b @ np.linalg.pinv(V) @ b)
    q = len(b)
    pvalue_model = float(stats.chi2.sf(chi2, df=q))
    # a second, model-free test: days as replicates (see day_block_test); the reported
    # p-value is the larger of the two, valid (if conservative) when either one is
    pvalue_day, t2_day, n_days = day_block_test(w.design, w.order)
    if opts.errors == "ols" or not np.isfinite(pvalue_day):
        pvalue, pvalue_method = pvalue_model, "model"
    else:
        pvalue, pvalue_method = max(pvalue_model, pvalue_day), "max(model, day-block)"
    zq = float(stats.norm.ppf(1 - alpha / 2))
    se = np.sqrt(np.einsum("ij,jk,ik->i", G, V, G))
    # parametric bootstrap of the Fourier coefficients from their robust covariance
    rng = np.random.default_rng(opts.seed)
    ev, U = np.linalg.eigh(V)
    draws = b + rng.standard_normal((opts.n_boot, q)) @ (U * np.sqrt(np.clip(ev, 0, None))).T
    Gb = G[::5]                            # 5-minute grid is ample for max / min
    prof_d = draws @ Gb.T
    amp_d = 100.0 * (prof_d.max(axis=1) - prof_d.min(axis=1)) / mean_y
    amp_ci = bc_interval(amp_d, amp, alpha)
    # the interval agrees with the test: where "no time-of-day effect" is not rejected,
    # zero amplitude is consistent with the data and the interval reaches down to it
    # (the bootstrap of a non-negative functional never does; with the test's own
    # level this keeps coverage at a true zero at 1 - size, and only widens otherwise)
    if pvalue >= alpha:
        amp_ci = (0.0, amp_ci[1])

    n_g = n_gpus
    if n_g is None and telemetry is not None and "gpu_uuid" in telemetry.columns:
        n_g = int(telemetry["gpu_uuid"].nunique())
    if n_g is not None:
        lost = float(n_g * 24.0 * np.mean(1.0 - (mean_y + eff) / (mean_y + eff.max())))
        lost_d = n_g * 24.0 * np.mean(1.0 - (mean_y + prof_d)
                                      / (mean_y + prof_d.max(axis=1, keepdims=True)), axis=1)
        lost_ci = bc_interval(lost_d, lost, alpha)
        if pvalue >= alpha:
            lost_ci = (0.0, lost_ci[1])
    else:
        lost, lost_ci = float("nan"), (float("nan"), float("nan"))
    sel = np.arange(0, 1440, 15)
    o["profile"] = pd.DataFrame({
        "effect": eff[sel],
        "effect_pct": pct[sel],
        "lower_pct": 100.0 * (eff[sel] - zq * se[sel]) / mean_y,
        "upper_pct": 100.0 * (eff[sel] + zq * se[sel]) / mean_y,
    }, index=pd.Index(MINUTES[sel], name="local_hour"))
    o.update(amplitude_pct=amp, amplitude_ci_pct=amp_ci,
             peak_hour=float(MINUTES[np.argmax(eff)]),
             trough_hour=float(MINUTES[np.argmin(eff)]), pvalue=pvalue, wald_chi2=chi2,
             pvalue_model=pvalue_model, pvalue_day=pvalue_day, day_block_t2=t2_day,
             n_days=n_days, pvalue_method=pvalue_method, mean_throughput=mean_y,
             amplitude_draws=amp_d, gpu_hours_lost_per_day=lost, gpu_hours_lost_ci=lost_ci,
             n_gpus=n_g)
    d = w.design
    o["change_points"] = shift_table(d.y, d.terms(w.order), d.seg, d.t_ns, w.shifts,
                                     mean_y=mean_y, site_tz=w.site_tz)


def _mediation_step(w: _ToDWork, telemetry, ambient) -> None:
    """Attribution to the clock, temperature and ambient; throttle reasons by hour."""
    attribution = throttle = mediators = None
    if telemetry is not None or ambient is not None:
        attribution, mediators = _attribution(w.design, w.order, w.opts.hac_lags,
                                              telemetry, ambient, w.opts.clock_quantile,
                                              w.interval_ns)
    if telemetry is not None and "throttle_reasons" in telemetry.columns:
        throttle = throttle_share_by_hour(telemetry, site_tz=w.site_tz)
    w.out.update(attribution=attribution, mediators=mediators, throttle_by_hour=throttle)


def _decompose_step(w: _ToDWork) -> None:
    """MSTL decomposition of the cleaned steps (series of two weeks or more)."""
    decomposition = None
    d = w.opts.decompose
    if d is True or (d == "auto" and w.span_days >= 14):
        decomposition = decompose_seasonal(pd.Series(w.yu,
                                                     index=pd.DatetimeIndex(w.tu, tz="UTC")))
    w.out["decomposition"] = decomposition


def _attribution(design: Design, order, hac_lags, telemetry, ambient, clock_quantile,
                 interval_ns):
    """Mediation of the diurnal profile by clock, temperature and ambient.

    The fits are OLS in levels with HAC standard errors: GLS quasi-differencing would
    leave mostly the mediator's measurement noise (15 MHz clock bins, 1 degC steps) and
    attenuate its coefficient towards zero.
    """
    errors, ar_order = "hac", 1
    med, units = mediator_series(design.t_ns, interval_ns, telemetry, ambient,
                                 clock_quantile=clock_quantile)
    rows = []
    frame = pd.DataFrame(med, index=pd.DatetimeIndex(design.t_ns, tz="UTC",
                                                     name="timestamp"))
    G = grid_basis(order)
    for name, m in med.items():
        ok = np.isfinite(m)
        if ok.sum() < design.n_segments + 2 * order + 10 or np.nanstd(m) == 0:
            continue
        sub = Design(y=design.y[ok], seg=design.seg[ok], t_ns=design.t_ns[ok],
                     n_steps=design.n_steps[ok], local=design.local[ok],
                     fourier=design.terms(order)[ok])
        _, b_tot, _, _, _ = fit_daily_profile(sub, order, errors, ar_order, hac_lags)
        _, b_dir, _, p_all, c_all = fit_daily_profile(sub, order, errors, ar_order, hac_lags,
                                                 extra=m[ok])
        # the mediator is the first non-level column (the levels are absorbed)
        coef, se = float(p_all[0]), float(np.sqrt(c_all[0, 0]))
        tot = G @ b_tot
        dire = G @ b_dir
        share = float(np.dot(tot - dire, tot) / np.dot(tot, tot)) if np.any(tot) else np.nan
        # the mediator's own daily swing (a-path), point estimate
        a_coef, _ = demeaned_fit(m[ok], sub.terms(order), sub.seg)
        mprof = G @ a_coef
        mean_y = float(np.mean(sub.y))
        rows.append({"mediator": name, "unit": units[name], "coef": coef, "se": se,
                     "pvalue": float(2 * stats.norm.sf(abs(coef / se))) if se > 0 else np.nan,
                     "mediator_swing": float(mprof.max() - mprof.min()),
                     "total_amplitude_pct": float(100 * (tot.max() - tot.min()) / mean_y),
                     "direct_amplitude_pct": float(100 * (dire.max() - dire.min()) / mean_y),
                     "share_mediated": share,
                     "identified": bool(se > 0 and abs(coef / se) >= 2.0),
                     "n_intervals": int(ok.sum())})
    att = pd.DataFrame(rows)
    if len(att):
        att = att.set_index("mediator")
    return att, frame
