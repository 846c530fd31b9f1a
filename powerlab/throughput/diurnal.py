"""The time-of-day regression behind :func:`powerlab.throughput.dvfs.fit_time_of_day`.

Series preparation (run segments from gaps, warm-up and outlier steps dropped, interval
means within segments), the design (one level per run segment,
absorbed rather than held as dummy columns -- :mod:`powerlab.throughput.absorb` -- plus
Fourier terms of the local, daylight-saving aware hour from
:class:`statsmodels.tsa.deterministic.CalendarFourier`), fits with AR(p)/HAC/OLS errors,
the day-block (clustered by local day) test and the bias-corrected bootstrap interval.
The references are in :mod:`powerlab.throughput.dvfs`.
"""

from __future__ import annotations

import warnings
import zoneinfo
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.regression.linear_model import OLS
from statsmodels.tsa.ar_model import ar_select_order
from statsmodels.tsa.deterministic import CalendarFourier

from ..exceptions import AnalysisError, SchemaError, Violation
from ..telemetry.timeutil import to_epoch_ns
from .absorb import fit_absorbed
from .changepoints import demeaned_fit, within_segments

__all__ = ["ERRORS", "MAX_AR", "MINUTES", "Design", "bc_interval", "check_site_tz",
           "clean_steps", "day_block_test", "detect_segments", "fit_daily_profile",
           "fit_with_errors", "fourier_terms", "grid_basis", "info_criterion",
           "interval_means", "local_naive", "select_ar_order", "series_from"]

ERRORS = ("ar", "hac", "ols")
MINUTES = np.arange(1440) / 60.0   # evaluation grid of local hours



# ----------------------------------------------------------------------------- input
def series_from(throughput, value_col, segment):
    """(t_ns int64 sorted, y float64, segment codes or None, name)."""
    seg = None
    if isinstance(throughput, pd.DataFrame):
        df = throughput
        if "timestamp" in df.columns and not isinstance(df.index, pd.DatetimeIndex):
            df = df.set_index("timestamp")
        if value_col is None:
            cands = [c for c in df.columns if "throughput" in str(c)]
            if not cands:
                # a lone float column is taken as the throughput; with several (say
                # duration_s next to a rate) guessing could fit a step *time*, whose
                # profile is the throughput's upside down -- ask instead
                cands = [c for c in df.columns if pd.api.types.is_float_dtype(df[c])]
                if len(cands) > 1:
                    raise SchemaError([Violation(
                        "<frame>", "no column named like 'throughput' and several numeric "
                                   f"columns {cands}; pass value_col=")])
            if not cands:
                raise SchemaError([Violation("<frame>", "no throughput column found; pass "
                                                        "value_col=")])
            value_col = cands[0]
        if value_col not in df.columns:
            raise SchemaError([Violation(str(value_col), "column not found")])
        seg_col = segment if isinstance(segment, str) else (
            "segment" if segment is None and "segment" in df.columns else None)
        if seg_col is not None:
            if seg_col not in df.columns:
                raise SchemaError([Violation(seg_col, "segment column not found")])
            seg = df[seg_col]
        s = df[value_col]
    elif isinstance(throughput, pd.Series):
        s = throughput
        if segment is not None and not isinstance(segment, str):
            labels = np.asarray(segment)
            if labels.shape != (len(s),):
                raise SchemaError([Violation("segment", f"{labels.shape} segment labels for "
                                                        f"{len(s)} throughput values; one "
                                                        "label per value expected")])
            seg = pd.Series(labels, index=s.index)
    else:
        raise SchemaError([Violation("<input>", "throughput must be a pandas Series or "
                                                f"DataFrame, got {type(throughput).__name__}")])
    idx = s.index
    if not isinstance(idx, pd.DatetimeIndex):
        raise SchemaError([Violation("timestamp", "throughput must be indexed by a "
                                                  f"DatetimeIndex, got {type(idx).__name__}")])
    if idx.tz is None:
        raise SchemaError([Violation("timestamp", "timestamps must be tz-aware UTC (naive "
                                                  "timestamps need an explicit time zone)")])
    try:
        y = pd.to_numeric(s, errors="raise").to_numpy(dtype="float64", na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise SchemaError([Violation(str(s.name), f"throughput must be numeric: {exc}")]) \
            from exc
    t = to_epoch_ns(idx)
    codes = None
    if seg is not None:
        codes = pd.factorize(seg.to_numpy())[0].astype(np.int64)
    ok = np.isfinite(y)
    if (y[ok] <= 0).any():
        bad = np.flatnonzero(ok & (y <= 0))[:8]
        raise SchemaError([Violation(str(s.name), "throughput must be positive",
                                     tuple(idx[bad]))])
    order = np.argsort(t, kind="stable")
    t, y = t[order], y[order]
    if codes is not None:
        codes = codes[order]
    return t, y, codes, (str(s.name) if s.name is not None else "throughput"), int((~ok).sum())


def detect_segments(t: np.ndarray, gap_s: float | None) -> np.ndarray:
    dt = np.diff(t) / 1e9
    if gap_s is None:
        med = float(np.median(dt)) if len(dt) else 0.0
        gap_s = max(10.0 * med, 300.0)
    return np.concatenate([[0], np.cumsum(dt > gap_s)]).astype(np.int64)


def clean_steps(t: np.ndarray, y: np.ndarray, seg: np.ndarray | None, *, warmup_s: float,
                outlier_z: float, gap_s: float | None):
    """The steps kept for the regression: finite values, each segment's warm-up dropped
    and the outliers (robust z of log throughput against a centred 1-h rolling median
    beyond ``outlier_z``: checkpoints, evaluations).

    Returns ``((t, y, seg) of the steps kept, counts)`` with ``counts`` the steps dropped
    as warm-up (``n_warmup``), as outliers (``n_outliers``) and used (``n_used``).
    Segments are split at gaps longer than ``gap_s`` when ``seg`` is None.
    """
    fin = np.isfinite(y)
    t, y = t[fin], y[fin]
    seg = detect_segments(t, gap_s) if seg is None else seg[fin]
    if len(t) < 10:
        raise AnalysisError(f"only {len(t)} valid throughput values; need at least two "
                            "days of data")
    seg_start = pd.Series(t).groupby(seg).transform("min").to_numpy()
    warm = (t - seg_start) < warmup_s * 1e9
    logy = pd.Series(np.log(y), index=pd.DatetimeIndex(t, tz="UTC"))
    base = logy.copy()
    base[warm] = np.nan
    med = base.rolling("1h", center=True, min_periods=1).median().to_numpy()
    dev = np.log(y) - med
    ok_dev = ~warm & np.isfinite(dev)
    mad = np.median(np.abs(dev[ok_dev] - np.median(dev[ok_dev]))) if ok_dev.any() else 0.0
    scale = 1.4826 * mad if mad > 0 else np.inf
    outlier = ~warm & (np.abs(dev) > outlier_z * scale)
    use = ~warm & ~outlier
    counts = {"n_warmup": int(warm.sum()), "n_outliers": int(outlier.sum()),
              "n_used": int(use.sum())}
    return (t[use], y[use], seg[use]), counts


def interval_means(t: np.ndarray, y: np.ndarray, seg: np.ndarray, interval_ns: int):
    """Means over regular intervals within segments: ``(y, t [ns], segment, steps)`` per
    interval.  Intervals with fewer than half the median steps, and segments of fewer
    than three intervals (no information about the profile), are dropped."""
    bins = t // interval_ns
    key = seg * (int(bins.max()) + 1 if len(bins) else 1) + bins
    _uk, inv = np.unique(key, return_inverse=True)
    cnt = np.bincount(inv)
    ym = np.bincount(inv, weights=y) / cnt
    tm = (np.bincount(inv, weights=(t - t[0]).astype(float)) / cnt).astype(np.int64) \
        + (t[0] if len(t) else 0)
    sm_ = np.bincount(inv, weights=seg) / cnt
    good = cnt >= 0.5 * np.median(cnt) if len(cnt) else cnt > 0
    ym, tm, sm_, cnt = ym[good], tm[good], sm_[good].astype(np.int64), cnt[good]
    # segments with too few intervals carry no information about the profile
    sc = pd.Series(sm_).map(pd.Series(sm_).value_counts()).to_numpy()
    keep = sc >= 3
    return ym[keep], tm[keep], sm_[keep], cnt[keep]


def local_naive(t_ns: np.ndarray, site_tz: str) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(t_ns, tz="UTC").tz_convert(site_tz).tz_localize(None)


def fourier_terms(index: pd.DatetimeIndex, order: int) -> np.ndarray:
    return CalendarFourier("D", order).in_sample(index).to_numpy()


GRID_INDEX = pd.date_range("2001-01-01", periods=1440, freq="min")


def grid_basis(order: int) -> np.ndarray:
    """Fourier basis on a one-minute grid of local hours (1440 x 2K)."""
    return fourier_terms(GRID_INDEX, order)


# ----------------------------------------------------------------------------- models
def fit_with_errors(y, Z, seg, errors, ar_order, hac_lags):
    """Fit ``y`` on one level per segment + ``Z`` with the chosen errors.

    The levels are absorbed (:func:`powerlab.throughput.absorb.fit_absorbed`): the
    numbers are those of statsmodels' ``OLS`` / ``OLS(cov_type="HAC")`` /
    ``GLSAR(rho=ar_order).iterative_fit(maxiter=8)`` + ``fit(cov_type="HAC")`` on the
    explicit dummy design, at O(n q) instead of O(n (S + q)^2) per fit.
    """
    return fit_absorbed(y, Z, seg, errors, ar_order, hac_lags, maxiter=8)


MAX_AR = 3   # largest AR order considered by ar_order="aic"


def select_ar_order(design: Design, order: int, max_ar: int = MAX_AR) -> int:
    """AR order (1..max_ar) of the OLS residuals of the largest model, chosen by AIC.

    All candidate orders are compared on the same sample (``ar_select_order``), so the
    criterion is comparable across orders; order 0 is not allowed (the fit is GLS).
    """
    # the OLS residuals of the dummy regression, levels absorbed (Frisch-Waugh-Lovell)
    _, u = demeaned_fit(design.y, design.terms(order), design.seg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lags = ar_select_order(u, maxlag=max_ar, ic="aic", trend="n").ar_lags
    return max(1, max(lags) if lags else 1)


def day_block_test(design: Design, order: int):
    """Wald test of the Fourier terms with standard errors clustered by local day.

    OLS of the intervals on the segment levels and the Fourier terms; the covariance of
    the Fourier coefficients is the cluster-robust sandwich over local calendar days
    (each day's score is the day's own Fourier transform of the noise), so the days act
    as roughly independent replicates whatever the noise's correlation within a day.
    With ``G`` days and ``q`` coefficients the statistic is referred to Hotelling's
    small-sample distribution, ``T2 (G - q) / (q (G - 1)) ~ F(q, G - q)``.  Valid when
    the noise correlation time is well below a day.  Returns ``(pvalue, T2, G)``;
    ``pvalue`` is NaN with fewer than ``q + 2`` days.
    """
    F = design.terms(order)
    q = F.shape[1]
    day = to_epoch_ns(design.local.normalize())
    _, g = np.unique(day, return_inverse=True)
    n_days = int(g.max()) + 1
    if n_days < q + 2:
        return float("nan"), float("nan"), n_days
    # segment levels absorbed by within-segment demeaning (Frisch-Waugh-Lovell): the
    # Fourier coefficients, the residuals and the cluster sandwich of the Fourier block
    # are those of the dummy-variable regression, at O(n q) instead of O(n (q + S)^2).
    # statsmodels' cluster-robust sandwich without its CRV1 factor, times G / (G - 1)
    # only (the Hotelling reference below has no (N - 1) / (N - K) term)
    res = OLS(within_segments(design.y, design.seg),
              within_segments(F, design.seg)).fit(
        cov_type="cluster", cov_kwds={"groups": g, "use_correction": False})
    beta = np.asarray(res.params)
    V = np.asarray(res.cov_params()) * n_days / (n_days - 1)
    b, Vb = beta[-q:], V[-q:, -q:]
    # res.f_test would refer the Wald statistic to F(q, G - 1); Hotelling's
    # T2 (G - q) / (q (G - 1)) ~ F(q, G - q) is the better small-G reference [7]_, so the
    # statistic is formed here from statsmodels' covariance
    try:
        t2 = float(b @ np.linalg.solve(Vb, b))
    except np.linalg.LinAlgError:
        t2 = float(b @ np.linalg.pinv(Vb) @ b)
    f = t2 * (n_days - q) / (q * (n_days - 1))
    return float(stats.f.sf(f, q, n_days - q)), t2, n_days


def info_criterion(res, ic):
    return float(res.bic if ic == "bic" else res.aic)


@dataclass(frozen=True)
class Design:
    y: np.ndarray          # interval means
    seg: np.ndarray        # segment code per interval
    t_ns: np.ndarray       # interval mean time
    n_steps: np.ndarray    # steps per interval
    local: pd.DatetimeIndex
    fourier: np.ndarray | None = None   # Fourier terms up to the largest order, cached

    @property
    def n_segments(self) -> int:
        return len(np.unique(self.seg))

    def terms(self, order: int) -> np.ndarray:
        """Daily Fourier columns of ``order`` harmonics (``sin(1), cos(1), ...``)."""
        if self.fourier is not None and self.fourier.shape[1] >= 2 * order:
            return self.fourier[:, :2 * order]
        return fourier_terms(self.local, order)


def fit_daily_profile(design: Design, order: int, errors, ar_order, hac_lags, extra=None):
    """Levels per segment (absorbed) + optional ``extra`` columns + ``order`` harmonics.

    Returns ``(fit, b, V, params, cov)``: the :class:`~powerlab.throughput.absorb.AbsorbedFit`,
    the Fourier coefficients and their covariance, and coefficients and covariance of
    all non-level columns (``extra`` first, then the Fourier terms).
    """
    Z = [] if extra is None else [extra[:, None] if extra.ndim == 1 else extra]
    F = design.terms(order)
    Z = np.column_stack([*Z, F]) if Z else F
    res = fit_with_errors(design.y, Z, design.seg, errors, ar_order, hac_lags)
    k = F.shape[1]
    return res, res.params[-k:], res.cov[-k:, -k:], res.params, res.cov


def bc_interval(draws: np.ndarray, estimate: float, alpha: float) -> tuple[float, float]:
    """Bias-corrected percentile interval of bootstrap ``draws`` around ``estimate``.

    Kept by hand rather than ``scipy.stats.bootstrap(method="BCa")`` (issue 14 item 8):
    scipy's BCa resamples *data* and needs a jackknife over the observations for its
    acceleration, whereas these draws are a *parametric* bootstrap of the Fourier
    coefficients from their robust (GLS + HAC) covariance -- resampling the correlated
    intervals would ignore the noise's autocorrelation, and the jackknife over thousands
    of intervals would refit the model thousands of times.  With no acceleration
    term BCa reduces to this bias-corrected percentile interval.
    """
    d = draws[np.isfinite(draws)]
    if len(d) == 0:
        return (float("nan"), float("nan"))
    p0 = np.clip(np.mean(d < estimate), 1.0 / len(d), 1 - 1.0 / len(d))
    z0 = stats.norm.ppf(p0)
    lo = stats.norm.cdf(2 * z0 + stats.norm.ppf(alpha / 2))
    hi = stats.norm.cdf(2 * z0 + stats.norm.ppf(1 - alpha / 2))
    return float(np.quantile(d, lo)), float(np.quantile(d, hi))


def check_site_tz(site_tz: str) -> None:
    try:
        zoneinfo.ZoneInfo(site_tz)
    except Exception as exc:
        raise AnalysisError(f"unknown time zone site_tz={site_tz!r} (IANA name such as "
                            "'America/New_York' expected)") from exc
