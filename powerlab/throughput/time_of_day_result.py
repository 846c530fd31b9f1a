"""What :func:`powerlab.throughput.dvfs.fit_time_of_day` reports: :class:`TimeOfDayResult`.

The estimates with their intervals (:meth:`TimeOfDayResult.summary_frame`), the data
cleaning counts, the model chosen, the level shifts and the attribution, shown by
:meth:`TimeOfDayResult.summary` (text, and HTML in JupyterLab) and in one line by its
``repr``.  The method and its references are in :mod:`powerlab.throughput.dvfs`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._summary import Results, Summary

__all__ = ["TimeOfDayResult"]


class TimeOfDayResult(Results):
    """Result of :func:`fit_time_of_day`; read-only properties, statsmodels-like.

    Attributes
    ----------
    amplitude_pct : float
        Peak-to-trough of the fitted local-time profile, % of mean throughput [%].
    amplitude_ci_pct : tuple of float
        Confidence interval of the amplitude (bias-corrected parametric bootstrap; its
        lower bound is 0 where the test does not reject "no effect" at ``alpha``) [%].
    change_points : pandas.DataFrame
        Gapless level shifts found and used as segment boundaries: ``timestamp`` (UTC),
        ``local_time``, ``shift_pct`` (level after minus before, % of mean), ``pvalue``.
    peak_hour, trough_hour : float
        Local hours of the profile's maximum and minimum [h].
    pvalue : float
        Test of "no time-of-day effect" (all Fourier coefficients zero): the larger of
        ``pvalue_model`` and ``pvalue_day`` (``pvalue_method`` says which were used).
    pvalue_model : float
        Wald test with the model's covariance (GLS with AR errors + HAC by default).
    pvalue_day : float
        Day-block test: cluster-robust (by local day) Wald statistic ``day_block_t2``
        referred to Hotelling's F with ``n_days``; NaN with too few days.
    profile : pandas.DataFrame
        By local hour (15-min grid): ``effect`` [throughput unit], ``effect_pct``,
        ``lower_pct``, ``upper_pct`` (pointwise interval) [%].
    order : int
        Number of Fourier harmonics (chosen by the information criterion).
    counts : dict
        Steps in, dropped as warm-up, as outliers (checkpoint / evaluation), as missing,
        used; intervals used; segments.
    attribution : pandas.DataFrame or None
        Mediation of the effect per mediator (see :func:`fit_time_of_day`).
    throttle_by_hour : pandas.DataFrame or None
        Share of GPU-time under each throttle reason by local hour.
    gpu_hours_lost_per_day, gpu_hours_lost_ci : float, tuple
        GPU-hours per day lost relative to running all day at the peak hour's throughput.
    decomposition : pandas.DataFrame or None
        MSTL decomposition (series of two weeks or more).
    timings : dict
        Seconds spent per stage.
    results : powerlab.throughput.absorb.AbsorbedFit
        The selected fit: Fourier coefficients and covariance, one level per segment,
        AR coefficients, log-likelihood and BIC -- the numbers of statsmodels' fit with one
        dummy column per segment, with the levels absorbed (linear in the span and in the
        number of segments).
    """

    def __init__(self, **kw):
        self._d = kw

    def __getattr__(self, name):
        d = self.__dict__.get("_d", {})
        if name in d:
            return d[name]
        raise AttributeError(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._d))

    def summary_frame(self) -> pd.DataFrame:
        """Key estimates with their intervals as a tidy frame (estimate, lower, upper)."""
        a = self._d
        rows = [
            ("amplitude_pct", a["amplitude_pct"], *a["amplitude_ci_pct"], "%"),
            ("peak_hour", a["peak_hour"], np.nan, np.nan, "h (local)"),
            ("trough_hour", a["trough_hour"], np.nan, np.nan, "h (local)"),
            ("pvalue", a["pvalue"], np.nan, np.nan, ""),
            ("gpu_hours_lost_per_day", a["gpu_hours_lost_per_day"],
             *a["gpu_hours_lost_ci"], "GPU h/day"),
        ]
        df = pd.DataFrame(rows, columns=["quantity", "estimate", "lower", "upper", "unit"])
        return df.set_index("quantity")

    def summary(self) -> Summary:
        """Summary: estimates, data cleaning counts, model, attribution."""
        a = self._d
        c = a["counts"]
        lo, hi = a["amplitude_ci_pct"]
        lines = [
            f"Site time zone:        {a['site_tz']}",
            f"Span:                  {a['span'][0]} .. {a['span'][1]}",
            (f"Steps in / used:       {c['n_in']} / {c['n_used']}  (warm-up {c['n_warmup']},"
            f" outliers {c['n_outliers']}, missing {c['n_missing']})"),
            (f"Intervals / segments:  {c['n_intervals']} x {a['interval']} / "
            f"{c['n_segments']}"),
            f"Model:                 levels per segment + {a['order']} daily harmonic(s) "
            f"({a['ic'].upper()}), errors={a['errors']!r}"
            + (f", AR({a['ar_order']}) rho={np.round(a['rho'], 3).tolist()}"
               if a["rho"] is not None else ""),
            "-" * 64,
            (f"Amplitude (peak-trough): {a['amplitude_pct']:.3f} %  "
            f"[{lo:.3f}, {hi:.3f}] ({100 * (1 - a['alpha']):.0f} % CI)"),
            f"Peak / trough (local):   {_hhmm(a['peak_hour'])} / {_hhmm(a['trough_hour'])}",
            f"Level shifts (no gap):   {len(a['change_points'])}" + "".join(
                f"; {r.local_time:%Y-%m-%d %H:%M} {r.shift_pct:+.2f} %"
                for r in a["change_points"].itertuples()),
            (f"p-value (no effect):     {a['pvalue']:.3g}  [{a['pvalue_method']}: model "
             f"{a['pvalue_model']:.3g}, day-block {a['pvalue_day']:.3g} over "
             f"{a['n_days']} days]"),
        ]
        if np.isfinite(a["gpu_hours_lost_per_day"]):
            gl, gh = a["gpu_hours_lost_ci"]
            lines.append(f"GPU-hours lost per day:  {a['gpu_hours_lost_per_day']:.2f} "
                         f"[{gl:.2f}, {gh:.2f}] ({a['n_gpus']} GPUs)")
        att = a.get("attribution")
        if att is not None and len(att):
            lines += ["-" * 64, "Attribution (share of the profile mediated):"]
            for name, r in att.iterrows():
                weak = "" if r["identified"] else "  (not identified)"
                lines.append(f"  {name:<16} share {r['share_mediated']:6.2f}   coef "
                             f"{r['coef']:.4g} (se {r['se']:.2g}) per {r['unit']}{weak}")
            if not att["identified"].all():
                lines.append("  not identified: |coef/se| < 2 -- the mediator hardly varies "
                             "apart from the time of day (e.g. a purely periodic ambient), "
                             "so its effect cannot be told from the daily profile")
        s = Summary("Time-of-day throughput effect")
        s.add_text(lines, pre=True)
        s.add_df(self.summary_frame(), "Estimates")
        return s

    def _repr_line(self) -> str:
        """``<TimeOfDayResult amplitude=... [lo, hi] trough=HH:MM p=...>``."""
        lo, hi = self.amplitude_ci_pct
        return (f"<TimeOfDayResult amplitude={self.amplitude_pct:.3f}% [{lo:.3f}, {hi:.3f}]"
                f" trough={_hhmm(self.trough_hour)} p={self.pvalue:.3g}>")


def _hhmm(h: float) -> str:
    if not np.isfinite(h):
        return "--:--"
    m = round(h * 60) % 1440
    return f"{m // 60:02d}:{m % 60:02d}"
