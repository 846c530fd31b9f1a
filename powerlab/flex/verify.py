"""Measurement and verification of a curtailment event: credited MW = baseline - measured.

The baseline is what the site would have drawn without the event; it is never measured,
so it is estimated by a *named method*, with its uncertainty stated:

``high_10_of_10``
    The mean over the event window's clock times of the 10 highest-consumption of the
    last 10 similar days (same day type, weekday or weekend, in the site's time zone,
    before the event day, with no event of their own and at least 90 % of the window
    recorded) — the "10-in-10" customer baseline of utility demand-response programmes.
``high_4_of_5``
    The same with the 4 highest of the last 5 similar days (the "high 4 of 5" form).
``pre_event_mean``
    The mean over the ``lookback_s`` before the event (meter before / meter after).
``forecast_counterfactual``
    The forecast engine's site power without the event over the window (mean of the
    draws), given the scenario; its 5-95 % range over draws is the band.

Uncertainty: for the day-matching methods, a 90 % prediction band
``t(0.95, x-1) s sqrt(1 + 1/x)`` around the mean of the ``x`` day means (``s`` their
standard deviation: a new day differs from the average of ``x`` days by that much); for
``pre_event_mean``, ``1.645 s_b`` with ``s_b`` the standard deviation of its 5-minute
block means; for the forecast, the draws' quantiles.  The credited MW carries the band of
its baseline (the meter's own error is taken as negligible beside it).

References
----------
.. [1] NAESB WEQ Business Practice Standards, Measurement and Verification of Demand
   Response (WEQ-015): baseline types (Maximum Base Load, Meter Before/Meter After,
   Baseline Type-I: interval meter, similar days).
.. [2] California ISO, "10 in 10 non-event day selection" customer load baseline
   (Business Practice Manual for Metering, Demand Response); PJM Manual 11, "High 4 of
   5" customer baseline load.
"""

from __future__ import annotations

import os
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from .._format import safe_frame
from .._options import choice, renamed_keywords
from .._summary import Results, Summary
from ..exceptions import AnalysisError, ParseError, PowerlabError
from ..interconnect.sources import resolve
from ..outputs import output_folder

__all__ = ["BASELINE_METHODS", "Verification", "read_site_power", "verify_event"]

BASELINE_METHODS = ("high_10_of_10", "high_4_of_5", "pre_event_mean",
                    "forecast_counterfactual")


def read_site_power(source, *, freq: str = "1min", scope: str = "gpu") -> pd.Series:
    """Site power per ``freq`` bin [W], indexed by UTC time.

    ``source`` is a meter's readings (a series, a frame with ``timestamp`` and
    ``power_w`` and no ``gpu_index``, or a meter CSV with ``timestamp`` and ``power_w`` or
    ``power_megawatts``), or measured power as
    :func:`~powerlab.interconnect.sources.resolve` takes it: canonical telemetry, a store
    folder or a canonical Parquet file (summed over the devices of ``scope``,
    :func:`powerlab.telemetry.power_sums`), or a trace.  Anything else is refused with the
    resolver's error."""
    if isinstance(source, pd.Series):
        s = source
    elif isinstance(source, pd.DataFrame) and "timestamp" in source and \
            "power_w" in source and "gpu_index" not in source:
        s = source.set_index("timestamp")["power_w"]
    elif isinstance(source, (str, os.PathLike)) and Path(source).suffix.lower() == ".csv":
        s = _read_meter_csv(Path(source))
    else:
        s = resolve(source).site_power(freq, scope=scope)
    if not isinstance(s.index, pd.DatetimeIndex) or s.index.tz is None:
        raise PowerlabError("site power must be indexed by tz-aware timestamps")
    s = s.astype(float).sort_index()
    if len(s) and (s.index[-1] - s.index[0]) / pd.Timedelta(freq) > MAX_BINS:
        raise PowerlabError(f"site power from {s.index[0]} to {s.index[-1]} makes more "
                            f"than {MAX_BINS:,} bins of {freq} (a damaged time?)")
    return s.tz_convert("UTC").resample(freq).mean().rename("power_w")


#: Most bins of site power (10 years of minutes, 42 MB; a year-202 time asked 7 GiB).
MAX_BINS = 5_300_000
#: Largest site power a meter CSV may hold [W] (10 GW: beyond any site).
MAX_METER_W = 1e10


def _read_meter_csv(path: Path) -> pd.Series:
    """A meter CSV: ``timestamp`` (ISO 8601 with a zone) and ``power_w`` or
    ``power_megawatts``; errors name the file and column."""
    try:
        df = pd.read_csv(path)
    except FileNotFoundError:
        raise ParseError("no such file", path=path) from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ParseError(f"cannot read as CSV: {exc}", path=path) from None
    if "timestamp" not in df:
        raise ParseError("no 'timestamp' column", path=path, line=1)
    if "power_w" in df:
        v = pd.to_numeric(df["power_w"], errors="coerce")
    elif "power_megawatts" in df:
        v = pd.to_numeric(df["power_megawatts"], errors="coerce") * 1e6
    else:
        raise ParseError("no 'power_w' or 'power_megawatts' column", path=path, line=1)
    with np.errstate(invalid="ignore"):     # -5 MW or inf gave credited MW (issue 38)
        out = np.flatnonzero(np.isinf(v) | (v < 0) | (v > MAX_METER_W))
    if len(out):
        raise ParseError(f"power {df[v.name].iloc[out[0]]} is negative, infinite or "
                         f"above {MAX_METER_W / 1e9:g} GW", path=path, line=int(out[0]) + 2,
                         column=str(v.name))
    try:
        ts = pd.to_datetime(df["timestamp"], utc=False)
    except (ValueError, TypeError) as exc:
        raise ParseError(f"timestamps not ISO 8601: {exc}", path=path,
                         column="timestamp") from None
    if getattr(ts.dt, "tz", None) is None:
        raise ParseError("timestamps have no time zone (write them in UTC with a 'Z')",
                         path=path, column="timestamp")
    return pd.Series(v.to_numpy(), index=ts.dt.tz_convert("UTC"))


def _band_t(values: np.ndarray) -> tuple[float, float]:
    x = len(values)
    sd = float(np.std(values, ddof=1)) if x > 1 else float("nan")
    half = float(stats.t.ppf(0.95, x - 1) * sd * np.sqrt(1 + 1 / x)) if x > 1 else np.nan
    return sd, half


def _similar_days(power: pd.Series, start, end, *, x: int, y: int, site_tz: str,
                  event_days: set) -> tuple[float, float, list]:
    loc0 = start.tz_convert(site_tz)
    weekend = loc0.day_of_week >= 5
    off0 = start - loc0.normalize().tz_convert("UTC")
    length = end - start
    bins = power.index
    dt = (bins[1] - bins[0]) if len(bins) > 1 else pd.Timedelta(minutes=1)
    need = max(1, int(0.9 * length / dt))
    picks = []
    day = loc0.normalize()
    for _ in range(60):
        day = (day - pd.Timedelta(days=1)).normalize()
        day = day.tz_localize(None).tz_localize(site_tz, ambiguous=True,
                                                 nonexistent="shift_forward")
        if (day.day_of_week >= 5) != weekend or day.date() in event_days:
            continue
        w0 = day.tz_convert("UTC") + off0
        seg = power[(power.index >= w0) & (power.index < w0 + length)].dropna()
        if len(seg) < need:
            continue
        picks.append((str(day.date()), float(seg.mean())))
        if len(picks) == y:
            break
    if len(picks) < y:
        raise AnalysisError(f"only {len(picks)} similar days (same day type, no event, "
                            f"window recorded) before {loc0.date()}; the method needs {y}")
    top = sorted(picks, key=lambda p: -p[1])[:x]
    vals = np.array([p[1] for p in top])
    _sd, half = _band_t(vals)
    return float(vals.mean()), half, [p[0] for p in top]


class Verification(Results):
    """Credited MW of each event interval under each baseline method (results object).

    Attributes
    ----------
    frame : pandas.DataFrame
        ``start_utc, end_utc, cap_megawatts, method, baseline_megawatts,
        baseline_band_megawatts, measured_megawatts, credited_megawatts,
        credited_megawatts_lower, credited_megawatts_upper, cap_met, days``.
    """

    def __init__(self, frame: pd.DataFrame, notes: dict):
        self.frame = frame
        self.notes = notes

    def summary_frame(self) -> pd.DataFrame:
        return self.frame.copy()

    def summary(self) -> Summary:
        """Credited power per method and the per-interval table."""
        f = self.frame
        lines = [("Measurement and verification: credited MW = baseline - measured "
                 "(90 % band of the baseline)")]
        for m, g in f.groupby("method", sort=False):
            lines.append(f"{m}: credited {g['credited_megawatts'].mean():.3f} MW on average "
                         f"over {len(g)} interval(s), band "
                         f"[{g['credited_megawatts_lower'].mean():.3f}, "
                         f"{g['credited_megawatts_upper'].mean():.3f}] MW")
        for m, why in self.notes.items():
            lines.append(f"{m}: not computed: {why}")
        cols = ["start_utc", "method", "baseline_megawatts", "measured_megawatts",
                "credited_megawatts", "credited_megawatts_lower", "credited_megawatts_upper",
                "cap_met"]
        s = Summary(float_format="{:.3f}")
        s.add_text(lines)
        s.add_df(f[cols], index=False)
        return s

    def write(self, out_dir) -> list[Path]:
        out = output_folder(out_dir)
        p1, p2 = out / "verification.csv", out / "verification_summary.txt"
        safe_frame(self.frame).to_csv(p1, index=False, float_format="%.6g")
        p2.write_text(str(self.summary()) + "\n", encoding="utf-8")
        return [p1, p2]


@dataclass(frozen=True)
class _Event:
    """What the baselines of one event read: the measured power, the site's day types,
    the lookback, the forecast (run on first use) and its boundary."""

    power: pd.Series
    site_tz: str
    lookback_s: float
    event_days: set
    forecast: Callable
    boundary: str


@renamed_keywords(forecast_scope="forecast_boundary")
def verify_event(power, events: pd.DataFrame, *, methods=("high_10_of_10", "pre_event_mean"),
                 site_tz: str = "UTC", lookback_s: float = 3600.0, scenario=None,
                 forecast_boundary: str = "it", draws: int = 20, seed: int = 0
                 ) -> Verification:
    """Credited MW of each event interval by each named baseline method.

    Parameters
    ----------
    power : pandas.Series or source
        Measured site power [W] on a regular UTC grid, or what :func:`read_site_power`
        reads it from (a meter CSV, telemetry, a store folder, a Parquet file; 1-min
        bins of GPU power).
    events : pandas.DataFrame
        ``start_utc, end_utc, cap_w`` (e.g. :attr:`powerlab.flex.targets.Targets.frame`).
    methods : sequence of str
        Names from :data:`BASELINE_METHODS`.
    site_tz : str
        Site time zone (day types of the similar days).
    lookback_s : float
        Window of ``pre_event_mean`` [s].
    scenario : Scenario, ForecastResult or path-like, optional
        Needed by ``forecast_counterfactual``: a scenario (or its YAML), forecast at a
        1-s tick with ``draws`` and ``seed``, or a forecast already run
        (:func:`~powerlab.interconnect.sources.resolve`).
    forecast_boundary : {'it', 'facility'}
        Which forecast power the measured power is compared with (where the meter is;
        ``forecast_scope`` is its deprecated name).
    draws, seed : int
        Forecast draws and seed.

    Returns
    -------
    Verification
    """
    choice(forecast_boundary, "forecast_boundary", ("it", "facility"))
    bad = [m for m in methods if m not in BASELINE_METHODS]
    if bad:
        raise PowerlabError(f"unknown baseline method(s) {bad}; known: {BASELINE_METHODS}")
    try:
        zoneinfo.ZoneInfo(site_tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise PowerlabError(f"unknown time zone {site_tz!r}") from None
    if not isinstance(power, pd.Series):
        power = read_site_power(power)
    ev = events.sort_values("start_utc")
    ctx = _Event(power, site_tz, lookback_s,
                 {t.tz_convert(site_tz).date() for t in ev["start_utc"]},
                 _forecast_once(scenario, draws, seed), forecast_boundary)
    rows, notes = [], {}
    for r in ev.itertuples():
        meas = _measured_mean(power, r)
        for m in methods:
            try:
                b, lo, hi, half, days = _BASELINES[m](ctx, r, m)
            except AnalysisError as exc:
                notes[m] = str(exc)
                continue
            rows.append({"start_utc": r.start_utc, "end_utc": r.end_utc,
                         "cap_megawatts": r.cap_w / 1e6, "method": m,
                         "baseline_megawatts": b / 1e6,
                         "baseline_band_megawatts": half / 1e6,
                         "measured_megawatts": meas / 1e6,
                         "credited_megawatts": (b - meas) / 1e6,
                         "credited_megawatts_lower": (lo - meas) / 1e6,
                         "credited_megawatts_upper": (hi - meas) / 1e6,
                         "cap_met": bool(meas <= r.cap_w), "days": days})
    if not rows:
        raise AnalysisError("no baseline method could be computed: " + "; ".join(
            f"{k}: {v}" for k, v in notes.items()))
    return Verification(pd.DataFrame(rows), notes)


def _measured_mean(power: pd.Series, r) -> float:
    """Mean measured power over the event ``r`` [W]."""
    seg = power[(power.index >= r.start_utc) & (power.index < r.end_utc)].dropna()
    if seg.empty:
        raise AnalysisError(f"no measured power in the event {r.start_utc} - {r.end_utc}")
    return float(seg.mean())


def _forecast_once(scenario, draws: int, seed: int) -> Callable:
    """The forecast counterfactual's forecast, run on first use (1-s tick)."""
    kept = []

    def get():
        if scenario is None:
            raise AnalysisError("needs the scenario (--scenario)")
        if not kept:
            kept.append(resolve(scenario).forecast(draws=draws, seed=seed, tick_s=1.0))
        return kept[0]

    return get


def _similar_day_baseline(ctx: _Event, r, m: str):
    """``high_10_of_10`` / ``high_4_of_5``: the mean of the highest similar days, with a
    90 % prediction band."""
    x, y = (10, 10) if m == "high_10_of_10" else (4, 5)
    b, half, dl = _similar_days(ctx.power, r.start_utc, r.end_utc, x=x, y=y,
                                site_tz=ctx.site_tz, event_days=ctx.event_days)
    return b, b - half, b + half, half, " ".join(dl)


def _pre_event_baseline(ctx: _Event, r, m: str):
    """``pre_event_mean``: the mean over the lookback, band 1.645 x the SD of its
    5-minute means."""
    t0 = r.start_utc - pd.Timedelta(seconds=ctx.lookback_s)
    pre = ctx.power[(ctx.power.index >= t0) & (ctx.power.index < r.start_utc)].dropna()
    if len(pre) < 2:
        raise AnalysisError("no measured power in the lookback window")
    b = float(pre.mean())
    blocks = pre.resample("5min").mean().dropna()
    half = 1.645 * float(blocks.std(ddof=1)) if len(blocks) > 1 else np.nan
    return b, b - half, b + half, half, ""


def _forecast_baseline(ctx: _Event, r, m: str):
    """``forecast_counterfactual``: the draws' mean over the window, band their 5-95 %."""
    res = ctx.forecast()
    tt = res.times
    sel = (tt >= r.start_utc) & (tt < r.end_utc)
    if not sel.any():
        raise AnalysisError("the event is outside the scenario's horizon")
    wm = res.power_w(ctx.boundary)[:, sel].mean(axis=1)
    lo, hi = float(np.quantile(wm, 0.05)), float(np.quantile(wm, 0.95))
    return float(wm.mean()), lo, hi, (hi - lo) / 2, ""


#: Baseline method -> its step: ``(baseline, lower, upper, half band [W], days)``.
_BASELINES = {"high_10_of_10": _similar_day_baseline, "high_4_of_5": _similar_day_baseline,
              "pre_event_mean": _pre_event_baseline,
              "forecast_counterfactual": _forecast_baseline}
