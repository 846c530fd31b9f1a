"""One regular power series of a site: a forecast draw or a measured trace.

:class:`PowerTrace` has the fields of the engine's per-draw ``DrawPower`` (TEAM.md
contract 3: ``draw, tick_s, start_utc, it_w, facility_w, events``) plus what a measured
trace needs (``native_interval_s``, ``description``), so the requirement checks, the
resonance screening and the grid-study exports take either.

- :func:`trace_from_telemetry` resamples measured telemetry (a canonical frame, a store
  folder or a Parquet file) onto a regular grid, honestly (see its docstring);
- :func:`for_each_draw` is the **one** place that reaches into the forecast engine for
  per-draw series; :func:`forecast_trace` builds on it;
- :func:`telemetry_path` checks the path of measured telemetry on disk (a store folder or
  a canonical Parquet file).

What an entry point was given (a forecast, a scenario, a trace, telemetry or a path) is
sorted out once, by :func:`powerlab.interconnect.sources.resolve`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._lazy import lazy_exports
from .._options import choice, renamed_keywords
from .._progress import Progress
from ..exceptions import AnalysisError, PowerlabError, ScenarioError
from ..site.engine import forecast
from ..telemetry.sources import read_parquet_telemetry
from ..telemetry.store import read_store
from ..telemetry.timeutil import to_epoch_ns, to_utc

__all__ = [
    "SAMPLINGS",
    "PowerTrace",
    "band_visibility",
    "for_each_draw",
    "forecast_trace",
    "read_telemetry",
    "telemetry_path",
    "trace_from_telemetry",
]

#: How the values of a trace were sampled (see :attr:`PowerTrace.sampling`).
SAMPLINGS = ("interval_mean", "instantaneous")
#: How each sampling is named in a trace's description.
_READ_AS = {"interval_mean": "interval means", "instantaneous": "instantaneous values"}

_NICE_TICKS_S = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def _no_events() -> pd.DataFrame:
    return pd.DataFrame({"timestamp": pd.Series([], dtype="datetime64[ns, UTC]"),
                         "event": pd.Series([], dtype="string"),
                         "duration_s": pd.Series([], dtype=float)})


@dataclass(frozen=True)
class PowerTrace:
    """A site's power on a regular tick grid (one forecast draw or a measured trace).

    Attributes
    ----------
    draw : int
        Monte Carlo draw (0 for a measured trace).
    tick_s : float
        Sample spacing [s].
    start_utc : pandas.Timestamp
        Time of the first sample (UTC).
    it_w : ndarray
        IT power per tick [W], read-only.
    facility_w : ndarray or None
        Power at the point of interconnection per tick (after any battery) [W],
        read-only; None for a measured IT trace without a PUE to convert it.
    events : DataFrame
        Events of the draw (``timestamp``, ``event``, ``duration_s``, ...); voltage sags
        are rows with ``event == "voltage_sag"`` and a ``residual_voltage_pu`` column.
    native_interval_s : float
        Spacing of the data the series was made from (the tick for a forecast; the
        measured sample interval for telemetry); nothing faster than it is resolved [s].
    description : str
        Where the series comes from and how it was resampled.
    sampling : str
        ``interval_mean`` (each value is the mean power over its interval, as the
        engine's ticks are) or ``instantaneous`` (each value is the power at one moment,
        as NVML's power readings are): instantaneous samples fold content above the
        Nyquist frequency into the bands below it at full strength (aliasing), interval
        means attenuate it (:func:`band_visibility`).
    without_sags : PowerTrace or None
        The same draw forecast without the scenario's voltage sags (the ride-through
        counterfactual, :func:`powerlab.site.disturbances.sag_load_loss_vs_baseline`);
        None for measured telemetry, whose baseline is the power before the sag.
    """

    draw: int
    tick_s: float
    start_utc: pd.Timestamp
    it_w: np.ndarray
    facility_w: np.ndarray | None
    events: pd.DataFrame = field(default_factory=_no_events)
    native_interval_s: float = math.nan
    description: str = ""
    sampling: str = "interval_mean"
    without_sags: PowerTrace | None = None

    def __post_init__(self):
        choice(self.sampling, "sampling", SAMPLINGS)
        for name in ("it_w", "facility_w"):
            a = getattr(self, name)
            if a is None:
                continue
            a = np.asarray(a, dtype=float)
            if a.flags.writeable:
                a = a.copy()
                a.setflags(write=False)
            object.__setattr__(self, name, a)
        if not math.isfinite(self.native_interval_s):
            object.__setattr__(self, "native_interval_s", float(self.tick_s))

    @property
    def n_ticks(self) -> int:
        """Samples in the series [-]."""
        return len(self.it_w)

    @property
    def duration_s(self) -> float:
        """Length of the series [s]."""
        return self.n_ticks * self.tick_s

    @renamed_keywords(scope="boundary")
    def power_w(self, boundary: str = "facility") -> np.ndarray:
        """The series of one boundary, ``"facility"`` or ``"it"`` [W]."""
        choice(boundary, "boundary", ("facility", "it"))
        if boundary == "it":
            return self.it_w
        if boundary == "facility":
            if self.facility_w is None:
                raise PowerlabError(
                    "this trace measures IT power only (node or GPU power); facility power "
                    "needs a PUE (facility = IT x PUE + base load): pass pue=... "
                    "(--pue on the command line) or use boundary 'it'")
            return self.facility_w

    def times(self) -> pd.DatetimeIndex:
        """Time of each sample (UTC)."""
        return pd.date_range(self.start_utc, periods=self.n_ticks,
                             freq=pd.Timedelta(seconds=self.tick_s), name="timestamp")

    def with_sags(self, sags: pd.DataFrame | None) -> PowerTrace:
        """A copy whose events also hold voltage sags (``timestamp``, ``duration_s``,
        ``residual_voltage_pu``, e.g. from a power-quality recorder)."""
        if sags is None or len(sags) == 0:
            return self
        need = ["timestamp", "duration_s", "residual_voltage_pu"]
        missing = [c for c in need if c not in sags.columns]
        if missing:
            raise PowerlabError(f"voltage sags need columns {need}; missing {missing}")
        s = sags[need].copy()
        try:
            s["timestamp"] = pd.to_datetime(s["timestamp"], utc=True)
            s["duration_s"] = pd.to_numeric(s["duration_s"]).astype(float)
            s["residual_voltage_pu"] = pd.to_numeric(s["residual_voltage_pu"]).astype(float)
        except (ValueError, TypeError) as exc:
            raise PowerlabError(f"cannot read the voltage sags: {exc}") from None
        bad = ~((s["duration_s"] > 0) & (s["residual_voltage_pu"] >= 0)
                & (s["residual_voltage_pu"] < 1) & s["timestamp"].notna())
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise PowerlabError(f"voltage sag row {i}: needs a time, duration_s > 0 and "
                                "0 <= residual_voltage_pu < 1")
        s["event"] = "voltage_sag"
        ev = pd.concat([self.events, s], ignore_index=True) if len(self.events) else s
        return PowerTrace(self.draw, self.tick_s, self.start_utc, self.it_w, self.facility_w,
                          ev, self.native_interval_s, self.description, self.sampling,
                          self.without_sags)


def band_visibility(band_hz: tuple[float, float], interval_s: float,
                    sampling: str) -> str:
    """What samples every ``interval_s`` can show of a frequency band, in words ('' when
    nothing needs saying: interval means that resolve the whole band).

    Samples every ``dt`` resolve up to the Nyquist frequency ``fs / 2`` (``fs = 1 / dt``).
    Content at ``f`` above it reappears at ``|f - k fs|`` (the nearest multiple ``k``):
    into a resolved band ``[lo, hi]`` fold ``k fs - hi .. k fs - lo`` and
    ``k fs + lo .. k fs + hi``.  Instantaneous samples fold it at full strength (a
    10.5-Hz oscillation sampled every 0.1 s reads as 0.5 Hz); a mean over each interval
    first multiplies its amplitude by ``|sin(pi f dt) / (pi f dt)|``, which the text gives
    as the largest factor over the first folded ranges.

    Parameters
    ----------
    band_hz : (float, float)
        ``(lo, hi)`` [Hz].
    interval_s : float
        Sample spacing of the data (the larger of the tick and the native interval) [s].
    sampling : {'interval_mean', 'instantaneous'}
    """
    lo, hi = float(band_hz[0]), float(band_hz[1])
    fs = 1.0 / interval_s
    nyq = 0.5 * fs
    if lo >= nyq:
        return ""                         # not resolved at all: the plan says so
    top = min(hi, nyq)
    shown = (f"samples every {interval_s:g} s show {lo:g}-{top:g} Hz of the band "
             f"(Nyquist {nyq:g} Hz)")
    folds = (f"content at {fs - top:g}-{fs - lo:g} Hz and {fs + lo:g}-{fs + top:g} Hz "
             f"(and around every multiple of {fs:g} Hz) folds into {lo:g}-{top:g} Hz")
    if sampling == "instantaneous":
        return (f"aliasing: {shown}; the readings are instantaneous, so {folds} at full "
                "strength and is counted as in-band content")
    f = np.linspace(fs - top, fs + top, 201)
    f = f[np.abs(f - fs) >= lo]
    gain = float(np.max(np.abs(np.sinc(f * interval_s))))
    if top < hi or gain > 0.05:
        return (f"{shown}; interval means: {folds} reduced to at most {gain:.0%} of its "
                "amplitude (aliasing)")
    return ""


# --------------------------------------------------------------------------- forecast


def for_each_draw(scenario, fn: Callable[[PowerTrace], Mapping[str, float]], *,
                  draws: int = 20, seed: int = 0, tick_s: float | None = None,
                  progress=False) -> pd.DataFrame:
    """Call ``fn`` on every Monte Carlo draw of a forecast; one row per draw.

    This is the single adapter between the interconnection checks and the forecast
    engine.  It mirrors TEAM.md contract 3, ``forecast(scenario, draws=, seed=, tick_s=,
    on_draw=fn).draw_metrics``: ``fn`` is called once per draw, in draw order, with a
    ``DrawPower``-like :class:`PowerTrace`, and returns a mapping of floats.  Until the
    engine offers ``on_draw`` it runs the forecast once and slices the per-draw series
    out of the result (``res.power_w("facility")[d]``, ``res.it_w[d]``).

    Parameters
    ----------
    scenario : Scenario
    fn : callable
        ``fn(draw_power) -> mapping of str to float``.
    draws : int, default 20
        Monte Carlo draws [-].
    seed : int, default 0
    tick_s : float, optional
        Engine tick (default: the scenario's) [s].
    progress : bool or None, default False
        The forecast's size, estimate and progress (``forecast(progress=...)``), then
        the draws ``fn`` has done (:mod:`powerlab._progress`): ``True`` always, ``None``
        when the forecast's estimate is 2 s or more, ``False`` never.

    Returns
    -------
    DataFrame
        One row per draw, in draw order, columns from ``fn``'s mappings.
    """
    res = forecast(scenario, draws=draws, seed=seed, tick_s=tick_s, progress=progress)
    fac = res.power_w("facility")
    it = res.it_w
    ev = res.events
    base = None
    if getattr(scenario, "disturbances", ()):   # ride-through counterfactual (issue 20.3)
        base = forecast(scenario.replace(disturbances=()), draws=draws, seed=seed,
                        tick_s=tick_s)
    rows = []
    big = res.n_ticks * res.draws / 5e6 >= 2.0     # the forecast's own rule (5e6 tick-draws/s)
    bar = Progress(res.draws, "per-draw checks", "draw",
                   enabled=big if progress is None else bool(progress))
    for d in range(res.draws):
        b0 = None if base is None else PowerTrace(
            d, res.tick_s, res.start_utc, base.it_w[d], base.power_w("facility")[d])
        dp = PowerTrace(draw=d, tick_s=res.tick_s, start_utc=res.start_utc, it_w=it[d],
                        facility_w=fac[d],
                        events=ev[ev["draw"] == d].reset_index(drop=True),
                        description=f"forecast of scenario {scenario.name!r}, draw {d}",
                        without_sags=b0)
        rows.append(dict(fn(dp)))
        bar.update()
    bar.close()
    return pd.DataFrame(rows, index=pd.RangeIndex(len(rows), name="draw"))


def forecast_trace(scenario, *, draw: int = 0, seed: int = 0,
                   tick_s: float | None = None) -> PowerTrace:
    """The power of one forecast draw as a :class:`PowerTrace` (via :func:`for_each_draw`).

    Parameters
    ----------
    scenario : Scenario
    draw : int, default 0
        Which Monte Carlo draw [-].
    seed : int, default 0
    tick_s : float, optional
        Engine tick [s].
    """
    if isinstance(draw, bool) or not isinstance(draw, (int, np.integer)) or draw < 0:
        raise ScenarioError(f"draw must be an integer >= 0, got {draw!r}", key="draw")
    kept: list[PowerTrace] = []

    def keep(dp):
        if dp.draw == draw:
            kept.append(dp)
        return {}

    for_each_draw(scenario, keep, draws=int(draw) + 1, seed=seed, tick_s=tick_s)
    return kept[0]


# --------------------------------------------------------------------------- telemetry


def telemetry_path(path: str | Path) -> Path:
    """The path of measured telemetry on disk, checked: a store folder or one canonical
    Parquet file that exists.

    Raises
    ------
    PowerlabError
        No such file or folder, or a file that is not ``.parquet``.
    """
    p = Path(path)
    if p.is_dir():
        return p
    if not p.exists():
        raise PowerlabError(f"{p}: no such file or folder")
    if p.suffix.lower() != ".parquet":
        raise PowerlabError(f"{p}: expected a scenario (.yaml), a store folder or a "
                            "canonical telemetry Parquet file (.parquet); import other "
                            "formats first with 'powerlab import'")
    return p


def read_telemetry(path: str | Path, *, start=None, end=None) -> pd.DataFrame:
    """Measured power from a store folder or a canonical Parquet file.

    Parameters
    ----------
    path : str or Path
        A store folder (:func:`powerlab.telemetry.store.read_store`) or one Parquet file
        in the canonical schema.
    start, end : datetime-like, optional
        Time range to keep.
    """
    p = telemetry_path(path)
    start, end = (to_utc(start, what="start", optional=True),
                  to_utc(end, what="end", optional=True))
    if p.is_dir():
        return read_store(p, start=start, end=end, columns=["power_w"])
    df = read_parquet_telemetry(p)      # the telemetry wing's one reader of such files
    if start is not None:
        df = df[df["timestamp"] >= start]
    if end is not None:
        df = df[df["timestamp"] < end]
    return df


def _nice_tick(interval_s: float) -> float:
    ok = [t for t in _NICE_TICKS_S if t <= interval_s * (1 + 1e-9)]
    return ok[-1] if ok else _NICE_TICKS_S[0]


#: Most ticks of a measured trace (about 0.8 GiB of arrays at _BYTES_PER_TICK); the
#: number of ticks is computed from the span and checked before anything is allocated.
MAX_TRACE_TICKS = 20_000_000
_BYTES_PER_TICK = 40       # grid (int64), its float copy, the interpolated sum, IT, facility


def trace_from_telemetry(data, *, tick_s: float | None = None, scope: str = "auto",
                         max_gap_s: float | None = None, start=None, end=None,
                         pue: float | None = None, base_load_w: float = 0.0,
                         sampling: str = "instantaneous") -> PowerTrace:
    """Resample measured power onto a regular grid and add the devices up.

    How, honestly:

    1. Rows: node-scope rows (node AC power) when the data have any, else GPU rows
       (GPU power only: no CPUs, fans or PSU losses); never both, which would count the
       GPUs twice.  Rows without a power reading are dropped.
    2. Each device's readings are taken as the power *at* their timestamps (duplicate
       timestamps averaged) and linearly interpolated onto the grid
       ``t0, t0 + tick_s, ...``; nothing is extrapolated: the grid covers only the span
       where every device has readings.
    3. A gap between two readings of a device longer than ``max_gap_s`` is refused
       (:class:`~powerlab.exceptions.AnalysisError` naming the device and the time):
       a missing reading is not a load drop.  Choose a clean span with ``start``/``end``.
    4. The slowest device's median sampling interval is kept as ``native_interval_s``:
       interpolation invents nothing faster, so ramps over shorter windows and
       oscillation above ``1 / (2 native_interval_s)`` are not assessable from it.

    Parameters
    ----------
    data : DataFrame or path-like
        Canonical telemetry (:mod:`powerlab.telemetry.schema`), a store folder or a
        canonical Parquet file.
    tick_s : float, optional
        Grid spacing; default the largest of 1 ms, 2 ms, 5 ms, ... 0.5 s, 1 s that is not
        above the native interval [s].
    scope : {'auto', 'node', 'gpu'}
        Which rows to add (``auto``: node rows if any).
    max_gap_s : float, optional
        Longest gap bridged by interpolation; default 3 x the device's median interval [s].
    start, end : datetime-like, optional
        Time range to use (tz-aware).
    pue : float, optional
        When given, ``facility_w = it_w * pue + base_load_w``; else ``facility_w`` is None.
    base_load_w : float, default 0
        Non-IT load added to facility power [W].
    sampling : {'instantaneous', 'interval_mean'}
        What each reading is: the power at its time (default: NVML power readings are
        instantaneous; content above the Nyquist frequency then folds into the bands
        at full strength, and the compliance notes name the aliasing) or the mean over
        the interval before it (e.g. from energy-counter differences).

    Returns
    -------
    PowerTrace
    """
    choice(sampling, "sampling", SAMPLINGS, error=PowerlabError)
    start, end = (to_utc(start, what="start", optional=True),
                  to_utc(end, what="end", optional=True))
    df, scope = _power_rows(data, scope, start, end)
    _check_conversion(pue, base_load_w)
    devices = _device_readings(df, scope)
    intervals = [float(np.median(np.diff(t))) / 1e9 for _, t, _ in devices]
    native = max(intervals)
    tick = float(tick_s) if tick_s is not None else _nice_tick(native)
    if not (math.isfinite(tick) and tick > 0):
        raise PowerlabError(f"tick_s must be > 0, got {tick_s!r}")
    grid = _common_grid(devices, tick)
    total = _interpolated_sum(devices, intervals, grid, max_gap_s)
    kind = "node AC power" if scope == "node" else "GPU power only"
    desc = (f"measured: {len(devices)} {scope}-scope devices ({kind}), readings every "
            f"{native:g} s (median, slowest device) linearly interpolated to {tick:g}-s "
            "ticks and summed")
    fac = None
    if pue is not None:
        fac = total * pue + base_load_w
        desc += f"; facility = IT x {pue:g} + {base_load_w:g} W"
    return PowerTrace(draw=0, tick_s=tick, start_utc=pd.Timestamp(int(grid[0]), tz="UTC"),
                      it_w=total, facility_w=fac, native_interval_s=native,
                      description=desc + "; readings taken as " + _READ_AS[sampling],
                      sampling=sampling)


def _check_conversion(pue: float | None, base_load_w: float) -> None:
    """Refuse a PUE outside 1-10 or a base load outside 0-10 GW."""
    if pue is not None and not (math.isfinite(pue) and 1.0 <= pue <= 10.0):
        raise PowerlabError(f"pue must be a number from 1 to 10, got {pue!r}")
    if not (math.isfinite(base_load_w) and 0 <= base_load_w <= 10e9):
        raise PowerlabError(f"base_load_w must be from 0 to 10 GW (1e10 W), got "
                            f"{base_load_w!r}")


def _interpolated_sum(devices: list[tuple], intervals: list[float], grid: np.ndarray,
                      max_gap_s: float | None) -> np.ndarray:
    """The devices' readings interpolated onto ``grid`` [ns] and summed [W], each
    device's gaps checked first (default longest gap: 3 x its median interval)."""
    total = np.zeros(len(grid))
    for (key, t, p), iv in zip(devices, intervals):
        _check_gaps(key, t, grid, (max_gap_s if max_gap_s is not None else 3.0 * iv) * 1e9)
        total += np.interp(grid.astype(float), t.astype(float), p)
    return total


def _power_rows(data, scope: str, start, end) -> tuple[pd.DataFrame, str]:
    """The telemetry's power readings of one scope within ``[start, end)`` (read from a
    path when not a frame), and that scope (``auto``: node if there are node rows)."""
    if not isinstance(data, pd.DataFrame):
        data = read_telemetry(data, start=start, end=end)
    need = {"timestamp", "host", "power_w"}
    if not need <= set(data.columns):
        raise PowerlabError(f"telemetry needs columns {sorted(need)}; missing "
                            f"{sorted(need - set(data.columns))}")
    df = data
    ts = df["timestamp"]
    if not (isinstance(ts.dtype, pd.DatetimeTZDtype)):
        raise PowerlabError(f"telemetry timestamps must be tz-aware UTC datetimes, got "
                            f"{ts.dtype}; see powerlab.telemetry.schema.conform")
    if start is not None:
        df = df[df["timestamp"] >= start]
    if end is not None:
        df = df[df["timestamp"] < end]
    sc = df["scope"].astype("string").fillna("gpu") if "scope" in df.columns else \
        pd.Series("gpu", index=df.index, dtype="string")
    choice(scope, "scope", ("auto", "node", "gpu"), error=PowerlabError)
    if scope == "auto":
        scope = "node" if (sc == "node").any() else "gpu"
    df = df[(sc == scope).to_numpy() & df["power_w"].notna().to_numpy()]
    if df.empty:
        raise AnalysisError(f"no {scope}-scope power readings in the telemetry (and range)")
    return df, scope


def _device_readings(df: pd.DataFrame, scope: str) -> list[tuple]:
    """Per device (host, and GPU index at GPU scope): ``(key, t [ns], power [W])`` with
    duplicate timestamps averaged, in key order."""
    t_ns = to_epoch_ns(pd.to_datetime(df["timestamp"], utc=True))
    keys = ["host"] + (["gpu_index"] if scope == "gpu" and "gpu_index" in df.columns else [])
    frame = pd.DataFrame({"t": t_ns,
                          "p": df["power_w"].to_numpy(float)})
    for k in keys:
        frame[k] = df[k].to_numpy()
    devices = []
    for key, g in frame.groupby(keys, sort=True, dropna=False):
        g = g.groupby("t", sort=True)["p"].mean()
        t = g.index.to_numpy(np.int64)
        if len(t) < 2:
            raise AnalysisError(f"device {key} has fewer than two power readings")
        devices.append((key, t, g.to_numpy(float)))
    return devices


def _common_grid(devices: list[tuple], tick: float) -> np.ndarray:
    """The whole ticks [ns] within the span where every device has readings (its size
    checked before it is allocated)."""
    t_lo = max(int(t[0]) for _, t, _ in devices)
    t_hi = min(int(t[-1]) for _, t, _ in devices)
    tick_ns = round(tick * 1e9)
    first = -(-t_lo // tick_ns) * tick_ns     # the first whole tick in the span
    n = (t_hi - first) // tick_ns + 1 if t_hi >= first else 0
    if n < 2:
        raise AnalysisError("the devices' readings do not overlap in time for two ticks")
    if n > MAX_TRACE_TICKS:     # checked before the grid is allocated (issue 24)
        raise PowerlabError(
            f"tick_s {tick:g} over the {(t_hi - first) / 1e9:,.0f}-s span makes {n:,} ticks "
            f"(about {n * _BYTES_PER_TICK / 2**30:,.1f} GiB); at most {MAX_TRACE_TICKS:,}: "
            "use a larger tick or a shorter span (start/end)")
    return first + np.arange(n, dtype=np.int64) * tick_ns


def _check_gaps(key, t: np.ndarray, grid: np.ndarray, gap_max: float) -> None:
    """Refuse a gap between two of a device's readings longer than ``gap_max`` [ns]
    where the grid falls into it: a missing reading is not a load drop."""
    dt = np.diff(t)
    used = (t[1:] > grid[0]) & (t[:-1] < grid[-1])   # intervals the grid falls into
    if used.any() and dt[used].max() > gap_max:
        j = int(np.flatnonzero(used & (dt == dt[used].max()))[0])
        raise AnalysisError(
            f"device {key}: no reading for {dt[j] / 1e9:g} s after "
            f"{pd.Timestamp(t[j], tz='UTC')} (longest gap bridged: {gap_max / 1e9:g} s); "
            "choose a span without it (start/end) or raise max_gap_s")


# the name moved to the resolver (issue 31); the old path warns for one release
_, __getattr__, _ = lazy_exports(__name__, {}, moved={
    "powerlab.interconnect.sources": ("open_source",)})
