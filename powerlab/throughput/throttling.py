"""Fleet clock and throttle state from telemetry, for the time-of-day attribution:
the slowest GPUs' clock per sample time, the mediators on the regression's intervals
(that clock, the die temperature and the ambient temperature), and the share of GPU time
under each NVML throttle reason by local hour."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..exceptions import AnalysisError, SchemaError, Violation
from ..telemetry.schema import THROTTLE_REASONS
from ..telemetry.timeutil import to_epoch_ns
from .diurnal import check_site_tz

__all__ = ["mediator_series", "slowest_clock", "throttle_share_by_hour"]


def _busy_gpu_rows(telemetry: pd.DataFrame) -> pd.DataFrame:
    need = {"timestamp", "clock_sm_mhz"}
    missing = need - set(telemetry.columns)
    if missing:
        raise SchemaError([Violation(c, "missing column (telemetry in the canonical "
                                        "schema expected)") for c in sorted(missing)])
    ts = telemetry["timestamp"]
    if not isinstance(ts.dtype, pd.DatetimeTZDtype):
        raise SchemaError([Violation("timestamp", "timestamps must be tz-aware UTC")])
    tel = telemetry
    if "scope" in tel.columns:
        tel = tel[(tel["scope"] == "gpu").fillna(False).to_numpy(dtype=bool)]
    keep = np.ones(len(tel), dtype=bool)
    if "throttle_reasons" in tel.columns:
        bits = tel["throttle_reasons"].to_numpy(dtype=np.uint64, na_value=0)
        keep &= (bits & np.uint64(THROTTLE_REASONS["gpu_idle"])) == 0
    if "util_gpu_pct" in tel.columns:
        u = tel["util_gpu_pct"].to_numpy(dtype=float, na_value=np.nan)
        keep &= ~(u <= 0)
    return tel[keep]


def slowest_clock(telemetry: pd.DataFrame, *, quantile: float = 0.05) -> pd.DataFrame:
    """Per-moment clock of the slowest GPUs and fleet temperature from telemetry.

    A synchronous step waits for the slowest GPU, so the relevant clock is the minimum
    (``quantile=0``) or a low quantile across busy GPUs at each timestamp.

    Parameters
    ----------
    telemetry : pandas.DataFrame
        Telemetry in the canonical schema; only busy GPU rows (no GpuIdle bit, utilisation
        above zero) are used.
    quantile : float
        Quantile across GPUs (0 = minimum) [-].

    Returns
    -------
    pandas.DataFrame
        Indexed by UTC timestamp: ``clock_slow_mhz`` [MHz], ``temp_gpu_c`` (mean across
        busy GPUs) [degC], ``n_gpus``.
    """
    if not 0 <= quantile <= 0.5:
        raise AnalysisError(f"quantile must be in [0, 0.5], got {quantile}")
    tel = _busy_gpu_rows(telemetry)
    if tel.empty:
        raise AnalysisError("telemetry has no busy GPU rows")
    t = to_epoch_ns(tel["timestamp"])
    codes, uniq = pd.factorize(t, sort=True)
    gcodes, gu = _gpu_codes(tel)
    clock = np.full((len(uniq), len(gu)), np.nan)
    clock[codes, gcodes] = tel["clock_sm_mhz"].to_numpy(dtype=float, na_value=np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if quantile == 0:
            slow = np.nanmin(clock, axis=1)
        else:   # row-wise linear-interpolated quantile over the GPUs present (vectorised)
            srt = np.sort(clock, axis=1)                 # NaN last
            nv = np.isfinite(srt).sum(axis=1)
            pos = quantile * np.maximum(nv - 1, 0)
            lo = np.floor(pos).astype(np.int64)
            hi = np.minimum(lo + 1, np.maximum(nv - 1, 0))
            r = np.arange(len(srt))
            slow = srt[r, lo] + (pos - lo) * (srt[r, hi] - srt[r, lo])
            slow[nv == 0] = np.nan
        temp = np.full(len(uniq), np.nan)
        if "temp_gpu_c" in tel.columns:
            tv = tel["temp_gpu_c"].to_numpy(dtype=float, na_value=np.nan)
            s = np.bincount(codes, weights=np.nan_to_num(tv), minlength=len(uniq))
            c = np.bincount(codes, weights=np.isfinite(tv), minlength=len(uniq))
            temp = np.where(c > 0, s / np.maximum(c, 1), np.nan)
    n = np.isfinite(clock).sum(axis=1)
    return pd.DataFrame({"clock_slow_mhz": slow, "temp_gpu_c": temp, "n_gpus": n},
                        index=pd.DatetimeIndex(uniq, tz="UTC", name="timestamp"))


def mediator_series(t_ns: np.ndarray, interval_ns: int, telemetry: pd.DataFrame | None,
                    ambient, *, clock_quantile: float) -> tuple[dict, dict]:
    """The attribution's mediators at the regression's interval times ``t_ns``: the
    slowest GPUs' clock [MHz] and the mean die temperature [degC] per interval of
    ``interval_ns`` (from ``telemetry``, where it has values), and the ambient
    temperature [degC] interpolated (a Series, or a frame with ``temp_air_c``).

    Returns ``(name -> values, name -> unit)``.
    """
    med = {}
    units = {}
    tbin = t_ns // interval_ns
    if telemetry is not None:
        sc = slowest_clock(telemetry, quantile=clock_quantile)
        b = to_epoch_ns(sc.index) // interval_ns
        g = sc.groupby(b).mean()
        for col, label, unit in (("clock_slow_mhz", "clock_slow_mhz", "MHz"),
                                 ("temp_gpu_c", "temp_gpu_c", "degC")):
            v = g[col].reindex(tbin).to_numpy()
            if np.isfinite(v).sum() > 0:
                med[label] = v
                units[label] = unit
    if ambient is not None:
        if isinstance(ambient, pd.DataFrame) and "temp_air_c" not in ambient.columns:
            raise SchemaError([Violation("temp_air_c", "an ambient DataFrame needs a "
                                                       "'temp_air_c' column [degC]")])
        a = ambient["temp_air_c"] if isinstance(ambient, pd.DataFrame) else ambient
        if not isinstance(a.index, pd.DatetimeIndex) or a.index.tz is None:
            raise SchemaError([Violation("temp_air_c", "ambient must be indexed by "
                                                       "tz-aware timestamps")])
        a = pd.to_numeric(a, errors="coerce").dropna().sort_index()
        at = to_epoch_ns(a.index)
        med["temp_air_c"] = np.interp(t_ns, at, a.to_numpy(), left=np.nan, right=np.nan)
        units["temp_air_c"] = "degC"
    return med, units


def _gpu_codes(tel: pd.DataFrame):
    """Integer code per (host, gpu_index) pair, and the number of pairs."""
    if "host" not in tel.columns:
        return np.zeros(len(tel), dtype=np.int64), np.zeros(1)
    hc = pd.factorize(tel["host"].to_numpy())[0].astype(np.int64)
    gi = (tel["gpu_index"].to_numpy(dtype="float64", na_value=-1).astype(np.int64) + 1
          if "gpu_index" in tel.columns else np.zeros(len(tel), dtype=np.int64))
    return pd.factorize(hc * 4096 + gi)


def throttle_share_by_hour(telemetry: pd.DataFrame, *, site_tz: str) -> pd.DataFrame:
    """Share of GPU-time under each NVML throttle (clock-event) reason by local hour.

    Parameters
    ----------
    telemetry : pandas.DataFrame
        Telemetry in the canonical schema with ``throttle_reasons`` (regularly sampled,
        so a share of samples is a share of GPU-time).
    site_tz : str
        IANA time zone of the site.

    Returns
    -------
    pandas.DataFrame
        Index ``local_hour`` 0..23; one column per reason of
        :data:`powerlab.telemetry.schema.THROTTLE_REASONS` (share of GPU samples with that bit set)
        [-], plus ``any_slowdown`` (any bit other than GpuIdle) and ``n_samples``.
    """
    check_site_tz(site_tz)
    if "throttle_reasons" not in telemetry.columns or "timestamp" not in telemetry.columns:
        raise SchemaError([Violation("throttle_reasons", "missing column")])
    if not isinstance(telemetry["timestamp"].dtype, pd.DatetimeTZDtype):
        raise SchemaError([Violation("timestamp", "timestamps must be tz-aware UTC")])
    tel = telemetry
    if "scope" in tel.columns:
        tel = tel[(tel["scope"] == "gpu").fillna(False).to_numpy(dtype=bool)]
    bits = tel["throttle_reasons"].to_numpy(dtype=np.uint64, na_value=0)
    ok = tel["throttle_reasons"].notna().to_numpy()
    bits = bits[ok]
    t = to_epoch_ns(tel["timestamp"][ok])
    codes, uniq = pd.factorize(t)
    hour = pd.DatetimeIndex(uniq, tz="UTC").tz_convert(site_tz).hour.to_numpy()[codes]
    n = np.bincount(hour, minlength=24).astype(float)
    out = {}
    for name, bit in THROTTLE_REASONS.items():
        hit = (bits & np.uint64(bit)) != 0
        out[name] = np.bincount(hour, weights=hit, minlength=24) / np.maximum(n, 1)
    slow = (bits & ~np.uint64(THROTTLE_REASONS["gpu_idle"])) != 0
    out["any_slowdown"] = np.bincount(hour, weights=slow, minlength=24) / np.maximum(n, 1)
    out["n_samples"] = n.astype(np.int64)
    df = pd.DataFrame(out, index=pd.Index(np.arange(24), name="local_hour"))
    df.loc[n == 0, list(THROTTLE_REASONS) + ["any_slowdown"]] = np.nan
    return df
