"""What a power meter would read: interval averages of a forecast or of a fast trace.

A forecast (or a fast measurement) holds power at every engine tick; a site's or a node's
meter does not report that.  It reports, at each reading instant ``t_k``, the **mean
power over its interval** ``(t_k - interval_s, t_k]``.  The MLPerf Training power logs,
for instance, carry one node AC reading about every 2 s; a revenue meter may report
15-minute demand.  To compare a forecast with such a meter, pass the forecast through the
same averaging, at the same instants: :func:`meter_readings` does it for a per-tick
series, :func:`meter_forecast` for a :class:`~powerlab.site.results.ForecastResult` or a
per-draw ``DrawPower``, and :func:`sum_meters` adds several meters read at their own
instants (64 node meters, say) the way a SCADA system that keeps each meter's last reading
does.

Model
-----
The power ``p(t)`` is piecewise constant: each tick (or each sample of a fast trace)
holds until the next one.  With ``E(t) = integral_0^t p`` (piecewise linear, so exact
at any instant by linear interpolation of the cumulative energy at the tick edges), the
reading is

.. math:: r_k = \\frac{E(t_k) - E(t_k - W)}{W}

with ``W = interval_s``.  Reading instants are either given (``times``: the timestamps of
your own meter's log, which also carries its clock's drift) or regular,
``t_k = 1970-01-01T00:00Z + phase_s + k * interval_s``: the **phase** is where the meter's
readings fall, measured from whole multiples of the interval since the Unix epoch, so
that one meter reads at the same instants whatever horizon it is applied to.  A reading
whose interval is not fully covered by the series is ``NaN``.

Averaging preserves energy: the mean of the readings over a whole number of intervals
equals the mean power.  It removes what is shorter than the interval: a step dip of
``D <= W`` seconds and depth ``h`` watts reads as a dip of ``h * D / W`` lasting
``W + D`` seconds, so a meter cannot tell a short deep dip from a longer shallow one of
the same energy (see :func:`powerlab.calibration.profile.fit_profile`, ``meter_interval_s``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._options import choice, renamed_keywords
from ..exceptions import PowerlabError
from ..telemetry.timeutil import to_epoch_ns, to_utc

__all__ = ["Meter", "meter_forecast", "meter_readings", "sum_meters", "tick_power"]

_EPOCH = pd.Timestamp("1970-01-01", tz="UTC")


@dataclass(frozen=True)
class Meter:
    """A power meter that reports the mean power over each interval.

    Attributes
    ----------
    interval_s : float, default 2.0
        Averaging interval, also the reporting interval [s] (2 s for the node AC power
        of the MLPerf Training v4.0 logs).
    phase_s : float, default 0.0
        Reading instants are ``phase_s + k * interval_s`` seconds after
        1970-01-01T00:00:00Z, ``k`` integer; each reading averages the ``interval_s``
        before its instant [s].
    """

    interval_s: float = 2.0
    phase_s: float = 0.0

    def __post_init__(self):
        if not (np.isfinite(self.interval_s) and self.interval_s > 0):
            raise PowerlabError(f"meter interval_s must be a positive number of seconds, "
                                f"got {self.interval_s!r}")
        if not np.isfinite(self.phase_s):
            raise PowerlabError(f"meter phase_s must be finite, got {self.phase_s!r}")

    def reading_times(self, start, end) -> pd.DatetimeIndex:
        """Reading instants whose whole interval lies within ``[start, end]`` (UTC)."""
        start, end = to_utc(start, what="start"), to_utc(end, what="end")
        w = self.interval_s
        a = (start - _EPOCH).total_seconds() + w - self.phase_s
        b = (end - _EPOCH).total_seconds() - self.phase_s
        k = np.arange(np.ceil(a / w - 1e-9), np.floor(b / w + 1e-9) + 1)
        secs = self.phase_s + k * w
        return pd.DatetimeIndex(_EPOCH + pd.to_timedelta(secs, unit="s"), name="timestamp")

    def read(self, power_w, *, tick_s: float | None = None, start_utc=None,
             times=None) -> pd.Series:
        """Readings of this meter on a per-tick series (see :func:`meter_readings`)."""
        return meter_readings(power_w, interval_s=self.interval_s, phase_s=self.phase_s,
                              tick_s=tick_s, start_utc=start_utc, times=times)


def _edges_and_power(power_w, tick_s, start_utc) -> tuple[np.ndarray, np.ndarray, pd.Timestamp]:
    """Sample edges [s from t0], power of each sample [W] and t0 of a series."""
    if isinstance(power_w, pd.Series):
        if not isinstance(power_w.index, pd.DatetimeIndex):
            raise PowerlabError("a power series needs a DatetimeIndex (tz-aware UTC)")
        idx = power_w.index
        if idx.tz is None:
            raise PowerlabError("the power series' index has no time zone; use UTC")
        if len(idx) < 2 or not idx.is_monotonic_increasing or idx.has_duplicates:
            raise PowerlabError("the power series needs at least two samples at strictly "
                                "increasing times")
        t0 = idx[0].tz_convert("UTC")
        secs = (idx - idx[0]).total_seconds().to_numpy()
        last = float(tick_s) if tick_s is not None else float(np.median(np.diff(secs)))
        edges = np.append(secs, secs[-1] + last)
        p = power_w.to_numpy(float)
    else:
        p = np.asarray(power_w, float)
        if p.ndim != 1 or len(p) < 2:
            raise PowerlabError(f"power_w must be one series of at least two ticks, got "
                                f"shape {p.shape}")
        if tick_s is None or start_utc is None:
            raise PowerlabError("an array of per-tick power needs tick_s and start_utc")
        if not tick_s > 0:
            raise PowerlabError(f"tick_s must be > 0, got {tick_s!r}")
        t0 = to_utc(start_utc, what="start_utc")
        edges = np.arange(len(p) + 1) * float(tick_s)
    if not np.isfinite(p).all():
        raise PowerlabError("power_w holds NaN or infinite values; the meter averages "
                            "complete series only")
    return edges, p, t0


def meter_readings(power_w, *, interval_s: float = 2.0, phase_s: float = 0.0,
                   tick_s: float | None = None, start_utc=None, times=None) -> pd.Series:
    """Readings of a meter that averages over its interval, on a per-tick power series.

    Parameters
    ----------
    power_w : array_like or pandas.Series
        Power at each tick [W]: an array (with ``tick_s`` and ``start_utc``), or a Series
        with a tz-aware DatetimeIndex (each sample holds until the next; the last one for
        ``tick_s`` or the median sample spacing).
    interval_s : float, default 2.0
        Averaging interval of the meter [s].
    phase_s : float, default 0.0
        Where the regular reading instants fall: ``phase_s + k * interval_s`` seconds
        after 1970-01-01T00:00:00Z [s].  Ignored when ``times`` is given.
    tick_s : float, optional
        Length of each tick of an array [s].
    start_utc : str or Timestamp, optional
        Start of the first tick of an array (UTC).
    times : sequence of timestamps, optional
        Reading instants (UTC), e.g. the timestamps of your own meter's log; each reading
        averages the ``interval_s`` before its instant.

    Returns
    -------
    pandas.Series
        ``power_w`` [W] indexed by reading instant (``timestamp``, UTC).  With regular
        instants, only readings whose interval lies within the series; with ``times``,
        one value per instant, ``NaN`` where the interval is not covered.

    Examples
    --------
    A 1-s dip of 1 kW in a 10-ms series reads as a 500-W dip on a 2-s meter:

    >>> import numpy as np
    >>> p = np.full(1000, 7000.0); p[400:500] = 6000.0
    >>> r = meter_readings(p, tick_s=0.01, start_utc="2024-01-01T00:00:00Z")
    >>> float(r.min())
    6500.0
    """
    meter = Meter(interval_s, phase_s)  # validates
    edges, p, t0 = _edges_and_power(power_w, tick_s, start_utc)
    energy = np.concatenate([[0.0], np.cumsum(p * np.diff(edges))])  # [J] at the edges
    if times is None:
        inst = meter.reading_times(t0, t0 + pd.Timedelta(seconds=float(edges[-1])))
    else:
        try:
            inst = pd.DatetimeIndex(times, name="timestamp")
        except (TypeError, ValueError):
            raise PowerlabError("times must be timestamps (UTC)") from None
        if inst.tz is None:
            raise PowerlabError("times have no time zone; give UTC times")
        inst = inst.tz_convert("UTC")
    t = (inst - t0).total_seconds().to_numpy()
    w = meter.interval_s
    inside = (t - w >= -1e-9) & (t <= edges[-1] + 1e-9)
    out = np.full(len(t), np.nan)
    e1 = np.interp(t[inside], edges, energy)
    e0 = np.interp(t[inside] - w, edges, energy)
    out[inside] = (e1 - e0) / w
    return pd.Series(out, index=inst, name="power_w")


@renamed_keywords(scope="boundary")
def tick_power(forecast, *, boundary: str = "it", draw: int = 0
               ) -> tuple[np.ndarray, float, pd.Timestamp]:
    """Per-tick power of one draw of a forecast: ``(power_w, tick_s, start_utc)``.

    The one place where the meter reads a forecast's per-tick series.

    Parameters
    ----------
    forecast : ForecastResult or DrawPower
        A forecast result holding per-tick power (``power_w(boundary)``), or one draw's power
        as handed to an ``on_draw`` callback (``it_w``, ``facility_w``, ``tick_s``,
        ``start_utc``).
    boundary : {'it', 'facility'}, default 'it'
    draw : int, default 0
        Which draw of a ForecastResult [-].
    """
    choice(boundary, "boundary", ("it", "facility"))
    if hasattr(forecast, "power_w") and callable(forecast.power_w):
        try:
            x = forecast.power_w(boundary)
        except (AttributeError, TypeError, KeyError) as exc:
            raise PowerlabError("this forecast result keeps no per-tick power; run the "
                                "forecast keeping its ticks, or apply the meter per draw "
                                f"({exc})") from None
        if not 0 <= draw < x.shape[0]:
            raise PowerlabError(f"draw {draw} is not in 0..{x.shape[0] - 1}")
        return np.asarray(x[draw]), float(forecast.tick_s), forecast.start_utc
    if hasattr(forecast, f"{boundary}_w") and hasattr(forecast, "tick_s"):
        return (np.asarray(getattr(forecast, f"{boundary}_w")), float(forecast.tick_s),
                forecast.start_utc)
    raise PowerlabError(f"cannot read per-tick power from a {type(forecast).__name__}; "
                        "pass a ForecastResult or a per-draw DrawPower")


@renamed_keywords(scope="boundary")
def meter_forecast(forecast, meter: Meter | None = None, *, boundary: str = "it",
                   draws=None, times=None, share: float = 1.0) -> pd.DataFrame:
    """What a meter would read of a forecast, per draw.

    Parameters
    ----------
    forecast : ForecastResult or DrawPower
        See :func:`tick_power`.
    meter : Meter, optional
        Interval and phase (default: 2-s interval, phase 0).
    boundary : {'it', 'facility'}, default 'it'
        Which power the meter sees.
    draws : sequence of int, optional
        Draws to read (default: all of a ForecastResult; a DrawPower is one draw).
    times : sequence of timestamps, optional
        Reading instants instead of the meter's regular ones (UTC).
    share : float, default 1.0
        Fraction of the boundary's power behind this meter, e.g. ``1 / nodes`` for one node's
        meter when all nodes run the same job in step [-].

    Returns
    -------
    DataFrame
        ``draw, timestamp, power_w`` [W], one row per draw and reading.
    """
    meter = meter or Meter()
    if not (np.isfinite(share) and share > 0):
        raise PowerlabError(f"share must be a positive fraction, got {share!r}")
    if draws is None:
        n = getattr(forecast, "draws", None)
        draws = range(n) if isinstance(n, int) else [getattr(forecast, "draw", 0)]
    frames = []
    for d in draws:
        if hasattr(forecast, "power_w") and callable(forecast.power_w):
            x, tick, t0 = tick_power(forecast, boundary=boundary, draw=int(d))
        else:
            x, tick, t0 = tick_power(forecast, boundary=boundary)
        r = meter.read(x * share, tick_s=tick, start_utc=t0, times=times)
        frames.append(pd.DataFrame({"draw": int(d), "timestamp": r.index,
                                    "power_w": r.to_numpy()}))
    return pd.concat(frames, ignore_index=True)


def sum_meters(readings: pd.DataFrame, *, every_s: float = 1.0, start=None, end=None,
               by: str = "host", max_age_s: float | None = None) -> pd.Series:
    """Sum of several meters, each holding its last reading, on a regular grid.

    This is what a SCADA system or a dashboard that adds meters read at their own
    instants shows: at each grid instant, the sum over meters of each meter's latest
    reading at or before it.

    Parameters
    ----------
    readings : DataFrame
        ``timestamp`` (UTC), the meter column ``by`` and ``power_w`` [W] (canonical
        telemetry of node-scope meters has these columns).
    every_s : float, default 1.0
        Grid spacing [s].
    start, end : timestamp, optional
        Grid bounds (UTC; default: from the first instant at which every meter has
        reported to the last reading).  The grid is ``start + k * every_s < end``.
    by : str, default 'host'
        Column naming the meter.
    max_age_s : float, optional
        A reading older than this no longer counts (the sum is ``NaN`` there) [s];
        default: no limit.

    Returns
    -------
    pandas.Series
        ``power_w`` [W] indexed by grid instant (``timestamp``, UTC); ``NaN`` where a
        meter has not reported yet or its last reading is too old.
    """
    need = {"timestamp", by, "power_w"}
    if not isinstance(readings, pd.DataFrame) or not need <= set(readings.columns):
        raise PowerlabError(f"readings must be a frame with columns {sorted(need)}")
    if not every_s > 0:
        raise PowerlabError(f"every_s must be > 0, got {every_s!r}")
    r = readings[["timestamp", by, "power_w"]].dropna()
    if r.empty:
        raise PowerlabError("no readings with power to sum")
    t_ns = to_epoch_ns(r["timestamp"])
    groups = r.groupby(by, sort=True, observed=True).indices
    firsts = [t_ns[ix].min() for ix in groups.values()]
    t_start = to_utc(start, what="start") if start is not None \
        else pd.Timestamp(max(firsts), tz="UTC")
    t_end = to_utc(end, what="end") if end is not None \
        else pd.Timestamp(t_ns.max(), tz="UTC") + pd.Timedelta(1, "ns")
    n = int(np.ceil((t_end - t_start).total_seconds() / every_s - 1e-9))
    if n < 1:
        raise PowerlabError("the grid between start and end is empty")
    grid = pd.DatetimeIndex(t_start + pd.to_timedelta(np.arange(n) * every_s, unit="s"),
                            name="timestamp")
    g_ns = to_epoch_ns(grid)
    total = np.zeros(n)
    p_all = r["power_w"].to_numpy(float)
    for ix in groups.values():
        order = np.argsort(t_ns[ix], kind="stable")
        tt, pp = t_ns[ix][order], p_all[ix][order]
        k = np.searchsorted(tt, g_ns, side="right") - 1
        val = np.where(k >= 0, pp[np.clip(k, 0, None)], np.nan)
        if max_age_s is not None:
            age = (g_ns - tt[np.clip(k, 0, None)]) / 1e9
            val = np.where(age <= max_age_s, val, np.nan)
        total += val
    return pd.Series(total, index=grid, name="power_w")
