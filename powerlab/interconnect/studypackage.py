"""The large-load study package: what an interconnection study asks of a large load, from
a scenario's forecast (every Monte Carlo draw) or from measured telemetry.

:func:`study_package` returns a :class:`StudyPackage` (``summary()``,
``summary_frame()``, ``write(dir)``) holding:

- **figures**: peak power, ramps over 1-s and 1-min means, the largest step, each as
  the value exceeded with a stated probability over the draws (``summary_frame()``:
  one row per figure and probability, with its definition and source);
- **energisation schedule** (:mod:`~powerlab.interconnect.energisation`) within the
  spec's ramp and step limits;
- **oscillation spectrum** of a short window forecast at a tick that resolves 30 Hz
  (0.01 s by default), the narrow-band lines in it and those near the frequencies at
  which utilities have observed data-center oscillations (:data:`OBSERVED_LINES_HZ`);
- **PMU view**: the short window as IEEE C37.118.1 P- and M-class reference PMUs report
  it (:mod:`~powerlab.interconnect.pmu`), next to the raw values;
- **ride-through table**: residual voltage x sag duration -> load lost during and just
  after the sag and the recovery time, from the engine's disturbance model run with and
  without each sag on the same draws (:func:`ride_through_table`);
- **playback files**: PSCAD, PowerFactory (:mod:`~powerlab.interconnect.gridstudy`) and
  COMTRADE (:mod:`~powerlab.interconnect.comtrade`), and a printable HTML page
  (:mod:`~powerlab.interconnect.studypage`).

Exceedance probability: with ``D`` draws, the value "exceeded with probability p" is the
empirical ``1 - p`` quantile of the per-draw values (linear interpolation between order
statistics, :func:`numpy.quantile`), reported only where ``p D >= 1`` (with 20 draws, p
below 0.05 is not resolved); the largest draw is always reported too (``exceed_probability``
0, "largest of D draws"). A measured trace is one draw: only its value is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._options import renamed_attribute, renamed_keywords
from ..exceptions import AnalysisError, PowerlabError
from ..limits import loadmetrics as lm
from ..limits.requirements import RequirementSpec, read_requirements
from .powertrace import PowerTrace, for_each_draw, trace_from_telemetry

__all__ = [
    "ITIC_RIDE_THROUGH",
    "OBSERVED_LINES_HZ",
    "PER_DRAW_COLUMNS",
    "MeasuredOptions",
    "PmuSettings",
    "RideThrough",
    "SagAssumptions",
    "ShortWindow",
    "StudyPackage",
    "itic_rides_through",
    "ride_through_table",
    "spectrum_lines",
    "study_package",
]

#: Frequencies near which utilities have reported data-center power oscillations [Hz]
#: (as quoted in powerlab issue 20; the primary reports are not cited here).
OBSERVED_LINES_HZ = (14.7, 23.0)

#: ITIC (CBEMA) curve, no-interruption region: (longest duration [s], lowest residual
#: voltage [pu]); beyond 10 s, 0.9 pu (ITI, "ITI (CBEMA) Curve Application Note", 2000).
ITIC_RIDE_THROUGH = ((0.02, 0.0), (0.5, 0.7), (10.0, 0.8), (math.inf, 0.9))

#: Per-draw figures: column -> (unit, definition, source).
PER_DRAW_COLUMNS = {
    "peak_power_megawatts": (
        "MW", "largest value of the power at one tick over the horizon",
        "powerlab forecast engine (one value per draw)"),
    "ramp_up_megawatts_per_s_1s_means": (
        "MW/s", "largest rise between adjacent 1-s means, every alignment, per second",
        ("form: Choukse et al. 2025 (arXiv:2508.14318), ramp rate in MW/s; "
        "powerlab.limits.ramps.ramp_of_means")),
    "ramp_down_megawatts_per_s_1s_means": (
        "MW/s", "largest fall between adjacent 1-s means, every alignment, per second",
        "as above"),
    "ramp_up_megawatts_per_min_1min_means": (
        "MW/min", "largest rise between adjacent 1-min means, every alignment, per minute",
        ("form: 1-min ramp limits of large-load requirements (e.g. ERCOT studies); "
        "powerlab.limits.ramps.ramp_of_means")),
    "ramp_down_megawatts_per_min_1min_means": (
        "MW/min", "largest fall between adjacent 1-min means, every alignment, per minute",
        "as above"),
    "largest_step_megawatts_within_1s": (
        "MW", "largest change between any two samples at most 1 s apart (up or down)",
        "powerlab.limits.loadmetrics.largest_step"),
}


def itic_rides_through(residual_voltage_pu: float, duration_s: float) -> bool:
    """True when a sag lies in the ITIC curve's no-interruption region (the IT equipment
    is expected to ride through it): 0 pu up to 20 ms, 0.7 pu up to 0.5 s, 0.8 pu up to
    10 s, 0.9 pu beyond.

    References
    ----------
    .. [1] Information Technology Industry Council, "ITI (CBEMA) Curve Application
       Note", 2000.
    """
    for longest, lowest in ITIC_RIDE_THROUGH:
        if duration_s <= longest + 1e-12:
            return residual_voltage_pu >= lowest - 1e-12
    return False


# --------------------------------------------------------------------------- per draw


def _per_draw(dp: PowerTrace, boundary: str) -> dict:
    x = dp.power_w(boundary)
    tick = dp.tick_s
    out = {"peak_power_megawatts": float(x.max()) / 1e6}
    for name, w, d, scale in (("ramp_up_megawatts_per_s_1s_means", 1.0, "up", 1.0),
                              ("ramp_down_megawatts_per_s_1s_means", 1.0, "down", 1.0),
                              ("ramp_up_megawatts_per_min_1min_means", 60.0, "up", 60.0),
                              ("ramp_down_megawatts_per_min_1min_means", 60.0, "down", 60.0)):
        try:
            out[name] = lm.ramp_of_means(x, tick, w, d) * scale / 1e6
        except AnalysisError:
            out[name] = math.nan
    try:
        out["largest_step_megawatts_within_1s"] = lm.largest_step(x, tick, 1.0) / 1e6
    except AnalysisError:
        out["largest_step_megawatts_within_1s"] = math.nan
    return out


def _largest_ramp_time_s(x: np.ndarray, tick_s: float) -> float:
    """Time (from the start) of the boundary between the two 1-s windows with the
    largest rise of means [s]."""
    w = max(1, round(1.0 / tick_s))
    if len(x) < 2 * w:
        return 0.0
    c = np.concatenate([[0.0], np.cumsum(x - x[0])])
    means = (c[w:] - c[:-w]) / w
    d = means[w:] - means[:-w]
    return float((int(np.argmax(d)) + w) * tick_s)


def _envelope(per_draw: pd.DataFrame, probabilities) -> pd.DataFrame:
    rows = []
    n = len(per_draw)
    for col, (unit, definition, source) in PER_DRAW_COLUMNS.items():
        v = per_draw[col].to_numpy(float)
        ok = v[np.isfinite(v)]
        for p in probabilities:
            if n == 1 or p * n < 1 - 1e-9:
                continue    # not resolved by this many draws: the largest draw stands
            val = float(np.quantile(ok, 1 - p)) if len(ok) else math.nan
            rows.append((col, val, unit, p, f"value exceeded in {p:.0%} of draws",
                         definition, source))
        rows.append((col, float(ok.max()) if len(ok) else math.nan, unit, 0.0,
                     f"largest of {n} draw{'s' if n != 1 else ''}", definition, source))
    return pd.DataFrame(rows, columns=["figure", "value", "unit", "exceed_probability",
                                       "statistic", "definition", "source"])


# --------------------------------------------------------------------------- spectrum


def spectrum_lines(frequency_hz, psd_w2_per_hz, *, min_prominence_db: float = 10.0,
                   min_amplitude_w: float = 0.0, neighbourhood_hz: float = 1.0,
                   half_width_bins: int = 3) -> pd.DataFrame:
    """Narrow-band lines of a power spectral density.

    A line is a local maximum of the density at least ``min_prominence_db`` above the
    median density within ``+- neighbourhood_hz``; its amplitude (of the equivalent
    sinusoid) is ``sqrt(2 * sum(PSD) * df)`` over ``+- half_width_bins`` bins (a Hann
    window spreads a sinusoid over about 4 bins), and lines under ``min_amplitude_w``
    are dropped.

    Returns
    -------
    DataFrame
        ``frequency_hz``, ``amplitude_megawatts``, ``prominence_db``, strongest first.
    """
    f = np.asarray(frequency_hz, dtype=float)
    s = np.asarray(psd_w2_per_hz, dtype=float)
    if len(f) < 3:
        return pd.DataFrame(columns=["frequency_hz", "amplitude_megawatts", "prominence_db"])
    df = f[1] - f[0]
    k = max(1, round(neighbourhood_hz / df))
    from scipy.ndimage import median_filter

    floor = median_filter(s, size=2 * k + 1, mode="nearest")
    peak = np.r_[False, (s[1:-1] > s[:-2]) & (s[1:-1] >= s[2:]), False] & (f > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        prom = 10 * np.log10(s / floor)
    idx = np.flatnonzero(peak & (prom >= min_prominence_db))
    amp = np.array([math.sqrt(2 * s[max(0, i - half_width_bins):i + half_width_bins + 1]
                              .sum() * df) for i in idx])
    keep = amp >= min_amplitude_w if len(idx) else np.zeros(0, bool)
    out = pd.DataFrame({"frequency_hz": f[idx][keep], "amplitude_megawatts": amp[keep] / 1e6,
                        "prominence_db": prom[idx][keep]})
    return out.sort_values("amplitude_megawatts", ascending=False).reset_index(drop=True)


def _near(f: np.ndarray, targets, tol: float) -> list[str]:
    return ["; ".join(f"{t:g} Hz" for t in targets if abs(x - t) <= tol) for x in f]


# --------------------------------------------------------------------------- ride-through


@dataclass(frozen=True)
class SagAssumptions:
    """What a sag does to the site, as assumed by :func:`ride_through_table` (stated in
    the table's ``attrs``).

    Attributes
    ----------
    trip_fraction_outside_itic : float, default 1
        Share of the nodes' supplies that trip when the sag lies outside the ITIC
        no-interruption region [-].
    ups_fraction : float, default 0
        Share of the untripped load that moves to UPS during the sag [-].
    ups_return_s : float, default 0
        Time the UPS load takes to return to the grid after the sag [s].
    outage_s : float, default 600
        How long tripped nodes stay down (at least the sag) [s].
    """

    trip_fraction_outside_itic: float = 1.0
    ups_fraction: float = 0.0
    ups_return_s: float = 0.0
    outage_s: float = 600.0


@renamed_keywords(scope="boundary")
def ride_through_table(scenario, at_utc, *, residual_voltages_pu=(0.0, 0.5, 0.7, 0.8, 0.9),
                       durations_s=(0.02, 0.1, 0.5, 1.0, 3.0, 10.0), draws: int = 3,
                       seed: int = 0, tick_s: float | None = None,
                       boundary: str = "facility",
                       assumptions: SagAssumptions | None = None, after_s: float = 1.0,
                       recovery_tolerance: float = 0.05,
                       follow_s: float | None = None) -> pd.DataFrame:
    """Load lost and recovery for a grid of voltage sags, from the disturbance model.

    For every (residual voltage, duration) the scenario is forecast over a window around
    ``at_utc`` twice on the same draws and seed: without the sag and with it
    (:class:`~powerlab.site.disturbances.VoltageSag`; the engine's other random streams
    do not depend on the sag, so the draws are the same load).  The nodes' supplies trip
    (``assumptions.trip_fraction_outside_itic``) when the sag lies outside the ITIC
    no-interruption region (:func:`itic_rides_through`), else not;
    ``assumptions.ups_fraction`` of the untripped load moves to UPS during the sag.
    These are assumptions of the table (:class:`SagAssumptions`), stated in it.

    Per draw, with ``P0`` the power without and ``P1`` with the sag, from the sag start
    ``a`` and end ``b``: load lost **during the sag** ``max(P0 - P1)`` over ``[a, b)``;
    **after the sag** ``max(P0 - P1)`` over ``[b, b + after_s)``; **recovery time** from
    ``a`` until the first whole second ``t >= b`` at which the mean of ``P1`` over the
    next minute is within ``recovery_tolerance`` of the loss of the mean of ``P0``
    (1-min means, so the job's step rhythm, whose phase a restart changes, does not
    count); 0 when nothing is lost, NaN when not within ``follow_s`` (default: the
    outage, the longest job start-up and 600 s).  A sag with no effect reads 0 exactly.
    ``boundary``: ``facility`` or ``it`` (``scope``: its deprecated name), in ``attrs``.

    Returns
    -------
    DataFrame
        One row per sag: ``residual_voltage_pu``, ``duration_s``, ``itic_ride_through``,
        ``trip_fraction``, ``load_lost_megawatts_during_sag_median`` / ``_max``,
        ``load_lost_megawatts_after_sag_median`` / ``_max``, ``recovery_s_median`` /
        ``_max`` (over draws), ``draws``.
    """
    from ..site.disturbances import VoltageSag
    from ..site.engine import forecast

    sa = assumptions or SagAssumptions()
    at = pd.Timestamp(at_utc)
    tick = float(tick_s or scenario.tick_s)
    job_startup = max((j.startup_s for j in scenario.jobs), default=0.0)
    if follow_s is None:
        follow_s = sa.outage_s + job_startup + 600.0
    window0 = at - pd.Timedelta(seconds=120)
    window1 = at + pd.Timedelta(seconds=max(durations_s) + follow_s + 60.0)
    base = scenario.replace(horizon_start_utc=window0, horizon_end_utc=window1,
                            disturbances=())
    p0 = forecast(base, draws=draws, seed=seed, tick_s=tick).power_w(boundary)
    a = round((at - window0).total_seconds() / tick)
    rows = []
    for v in residual_voltages_pu:
        for d in durations_s:
            rides = itic_rides_through(v, d)
            trip = 0.0 if rides else float(sa.trip_fraction_outside_itic)
            sag = VoltageSag(name="sag", at_utc=at, residual_voltage_pu=float(v),
                             duration_s=float(d), trip_fraction=trip,
                             ups_fraction=float(sa.ups_fraction),
                             ups_return_s=float(sa.ups_return_s),
                             outage_s=max(float(sa.outage_s), float(d)))
            p1 = forecast(base.replace(disturbances=(sag,)), draws=draws, seed=seed,
                          tick_s=tick).power_w(boundary)
            b = a + max(1, round(d / tick))
            c = min(p0.shape[1], b + max(1, round(after_s / tick)))
            during, after, rec = _sag_effect(p0, p1, (a, b, c), tick, recovery_tolerance)
            rows.append(_sag_row(v, d, rides, trip, during, after, rec, draws))
    out = pd.DataFrame(rows)
    out.attrs.update(at_utc=at, boundary=boundary, ups_fraction=sa.ups_fraction,
                     outage_s=sa.outage_s, after_s=after_s, follow_s=follow_s,
                     trip_fraction_outside_itic=sa.trip_fraction_outside_itic)
    return out


def _sag_effect(p0: np.ndarray, p1: np.ndarray, abc: tuple[int, int, int], tick: float,
                recovery_tolerance: float) -> tuple[list, list, list]:
    """Per draw: load lost during ``[a, b)`` and after ``[b, c)`` the sag [W], and the
    recovery time from ``a`` [s] (see :func:`ride_through_table`)."""
    a, b, c = abc
    per_s = max(1, round(1.0 / tick))
    per_min = 60 * per_s
    during, after, rec = [], [], []
    for k in range(len(p0)):
        lost = p0[k] - p1[k]
        dl = max(0.0, float(lost[a:b].max()))
        al = max(0.0, float(lost[b:c].max())) if c > b else 0.0
        during.append(dl)
        after.append(al)
        loss = max(dl, al)
        if loss == 0.0:
            rec.append(0.0)
            continue
        c0 = np.concatenate([[0.0], np.cumsum(p0[k])])
        c1 = np.concatenate([[0.0], np.cumsum(p1[k])])
        starts = np.arange(b, p0.shape[1] - per_min + 1, per_s)
        gap = (c0[starts + per_min] - c0[starts] - c1[starts + per_min]
               + c1[starts]) / per_min
        ok = np.flatnonzero(gap <= recovery_tolerance * loss)
        rec.append(float((starts[ok[0]] - a) * tick) if len(ok) else math.nan)
    return during, after, rec


def _sag_row(v, d, rides: bool, trip: float, during: list, after: list, rec: list,
             draws: int) -> dict:
    """One row of the ride-through table (medians and maxima over the draws)."""
    rec_a = np.asarray(rec)
    fin = rec_a[np.isfinite(rec_a)]
    return {
        "residual_voltage_pu": float(v), "duration_s": float(d),
        "itic_ride_through": rides, "trip_fraction": trip,
        "load_lost_megawatts_during_sag_median": float(np.median(during)) / 1e6,
        "load_lost_megawatts_during_sag_max": float(np.max(during)) / 1e6,
        "load_lost_megawatts_after_sag_median": float(np.median(after)) / 1e6,
        "load_lost_megawatts_after_sag_max": float(np.max(after)) / 1e6,
        "recovery_s_median": float(np.median(rec_a)) if len(fin) == len(rec_a)
        else math.nan,
        "recovery_s_max": float(fin.max()) if len(fin) == len(rec_a) else math.nan,
        "draws": draws,
    }


# --------------------------------------------------------------------------- the package


@dataclass(repr=False)
class StudyPackage:
    """Results of :func:`study_package` (read :meth:`summary`; tables as attributes)."""

    source: str
    spec: RequirementSpec
    boundary: str
    draws: int
    seed: int
    per_draw: pd.DataFrame
    figures: pd.DataFrame
    energisation: pd.DataFrame
    short_trace: PowerTrace
    spectrum: pd.DataFrame
    lines: pd.DataFrame
    pmu: pd.DataFrame
    pmu_figures: pd.DataFrame
    ride_through: pd.DataFrame | None
    trace: PowerTrace
    notes: list = field(default_factory=list)
    timings_s: dict = field(default_factory=dict)
    pmu_gains: pd.DataFrame | None = None
    scope = renamed_attribute("boundary")     # the old name, for one release

    def __repr__(self) -> str:
        return (f"<StudyPackage of {self.source}: {len(self.figures)} figures, "
                f"{len(self.lines)} spectrum lines, ride-through "
                f"{'table' if self.ride_through is not None else 'not done'}>")

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()

    def summary_frame(self) -> pd.DataFrame:
        """Every figure with its unit, exceedance probability, definition and source."""
        return self.figures.copy()

    @property
    def ramp_envelope(self) -> pd.DataFrame:
        """The ramp, step and peak figures as a table: one row per figure, one column
        per exceedance probability (``exceed_0.5``, ..., ``largest``)."""
        f = self.figures[self.figures["figure"].isin(list(PER_DRAW_COLUMNS))]
        col = np.where(f["exceed_probability"] == 0.0, "largest",
                       "exceed_" + f["exceed_probability"].map("{:g}".format))
        wide = f.assign(column=col).pivot(index="figure", columns="column", values="value")
        order = [c for c in wide.columns if c != "largest"] + ["largest"]
        wide = wide[sorted(order[:-1], key=lambda c: -float(c.split("_")[1])) + ["largest"]]
        return wide.reindex([c for c in PER_DRAW_COLUMNS if c in wide.index])

    def summary(self):
        """Text summary (``str()``) that renders as HTML in a notebook."""
        from .studypage import StudySummary

        return StudySummary(self)

    def write(self, out) -> dict:
        """Write the package into folder ``out``; returns name -> path."""
        from .studypage import write_package

        return write_package(self, out)


StudyPackage.__init__ = renamed_keywords(scope="boundary")(StudyPackage.__init__)


def _spec(spec) -> RequirementSpec:
    return spec if isinstance(spec, RequirementSpec) else read_requirements(spec)


def _limits(spec: RequirementSpec) -> tuple[dict, float | None, float]:
    ramps, step, within = {}, None, 1.0
    for r in spec.requirements:
        if r.kind == "ramp" and r.direction in ("up", "both"):
            ramps[r.window_s] = min(ramps.get(r.window_s, math.inf), r.limit_si)
        if r.kind == "step" and r.direction in ("up", "both") and (
                step is None or r.limit_si < step):
            step, within = r.limit_si, r.window_s
    return ramps, step, within


@dataclass(frozen=True)
class ShortWindow:
    """The short window of :func:`study_package` (spectrum and PMU view).

    Attributes
    ----------
    tick_s : float, default 0.01
        Tick of the short window forecast [s]; 0.01 s resolves up to 50 Hz.
    window_s : float, default 300
        Length of the short window [s].
    start_utc : datetime-like, optional
        Start of the short window; default 30 s before draw 0's largest rise between
        1-s means (the PMU view shows that ramp; the spectrum then leaves out the first
        40 s of the window, so that it shows the steady rhythm after the ramp).
    """

    tick_s: float = 0.01
    window_s: float = 300.0
    start_utc: object = None


@dataclass(frozen=True)
class RideThrough:
    """The ride-through table of :func:`study_package` (:func:`ride_through_table`).

    Attributes
    ----------
    draws : int, default 3
        Monte Carlo draws of the table [-].
    at_utc : datetime-like, optional
        When the sags strike; default draw 0's peak.
    """

    draws: int = 3
    at_utc: object = None


@dataclass(frozen=True)
class PmuSettings:
    """The reference PMUs (IEEE C37.118.1) of the PMU view.

    Attributes
    ----------
    f0_hz : {50, 60}, default 60
        Nominal frequency [Hz].
    reporting_rate_fps : int, optional
        Reporting rate, default one frame a nominal cycle (60 or 50) [frames/s].
    """

    f0_hz: float = 60.0
    reporting_rate_fps: int | None = None

    def __post_init__(self):    # (an f0 other than 50 or 60 is refused by pmu, by name)
        if self.reporting_rate_fps is None and self.f0_hz in (50, 60):
            object.__setattr__(self, "reporting_rate_fps", int(self.f0_hz))


@dataclass(frozen=True)
class MeasuredOptions:
    """How measured telemetry becomes a trace (see
    :func:`~powerlab.interconnect.powertrace.trace_from_telemetry`).

    Attributes
    ----------
    pue : float, optional
        When given, facility power is IT power x ``pue`` + ``base_load_w`` [-].
    base_load_w : float, default 0
        Non-IT load [W].
    start, end : datetime-like, optional
        Time range to use (tz-aware).
    """

    pue: float | None = None
    base_load_w: float = 0.0
    start: object = None
    end: object = None


def study_package(source, spec, *, draws: int = 20, seed: int = 0,
                  tick_s: float | None = None, short: ShortWindow | None = None,
                  ride_through: RideThrough | bool = True, pmu: PmuSettings | None = None,
                  probabilities=(0.5, 0.1, 0.05), measured: MeasuredOptions | None = None,
                  max_block_w: float | None = None) -> StudyPackage:
    """Build the large-load study package.

    The steps: the figures of every draw over the whole horizon (``_horizon``), their
    exceedance envelope and the energisation schedule, the short window
    (``_short_scenario`` or ``_short_measured``), the spectrum and its lines
    (``_spectrum_tables``), the PMU view (``_pmu_tables``) and the ride-through
    table (:func:`ride_through_table`).

    Parameters
    ----------
    source : Scenario, PowerTrace, DataFrame or path-like
        A scenario (forecast, every draw), one trace, canonical telemetry, a store folder
        or a canonical Parquet file (measured: one "draw").
    spec : RequirementSpec or path-like
        The requirement spec (its boundary, and its ramp and step limits for the
        energisation schedule).
    draws, seed : int
        Monte Carlo draws and seed of the forecast [-].
    tick_s : float, optional
        Tick of the full-horizon forecast (default the scenario's) [s].
    short : ShortWindow, optional
        Tick, length and start of the short window for the spectrum and the PMU view
        (default ``ShortWindow()``: 300 s at 0.01 s).
    ride_through : RideThrough or bool, default True
        Build the ride-through table (scenarios only) with these draws and sag time;
        True: ``RideThrough()``; False: no table.
    pmu : PmuSettings, optional
        PMU nominal frequency and reporting rate (default 60 Hz, one frame a cycle).
    probabilities : sequence of float
        Exceedance probabilities to report [-].
    measured : MeasuredOptions, optional
        Measured telemetry only: PUE, base load and time range (see
        :func:`~powerlab.interconnect.powertrace.trace_from_telemetry`).
    max_block_w : float, optional
        Largest block of the energisation schedule [W].

    Returns
    -------
    StudyPackage
    """
    import time

    from ..site.scenario import Scenario

    spec = _spec(spec)
    boundary = spec.boundary
    short = short or ShortWindow()
    pmu = pmu or PmuSettings()
    rt_opts = RideThrough() if ride_through is True else (ride_through or None)
    if draws < 1:
        raise PowerlabError(f"draws must be >= 1, got {draws}")
    for p in probabilities:
        if not 0 < p < 1:
            raise PowerlabError(f"exceedance probabilities must lie in (0, 1), got {p!r}")
    timings: dict[str, float] = {}
    notes: list[str] = []
    t0 = time.perf_counter()
    is_scenario = isinstance(source, Scenario)
    per_draw, trace, label, draws = _horizon(source, boundary, draws, seed, tick_s,
                                             measured or MeasuredOptions(), notes)
    timings["forecast_and_metrics"] = time.perf_counter() - t0
    figures = _envelope(per_draw, probabilities)
    ramps, step, within = _limits(spec)
    peak_w = float(per_draw["peak_power_megawatts"].max()) * 1e6
    energ = _schedule_or_note(peak_w, ramps, step, within, max_block_w, notes)
    t0 = time.perf_counter()
    if is_scenario:
        short_tr, freq, psd, pmu_rows = _short_scenario(source, trace, boundary, short,
                                                        pmu, draws, seed)
    else:
        short_tr, freq, psd, pmu_rows = _short_measured(trace, boundary, pmu, notes)
    timings["short_window"] = time.perf_counter() - t0
    spectrum, lines = _spectrum_tables(freq, psd, pmu)
    pmu_view, pmu_figs, pmu_gains = _pmu_tables(short_tr, boundary, pmu_rows, pmu)
    figures = pd.concat([figures, pmu_figs], ignore_index=True)
    rt = None
    if is_scenario and rt_opts is not None:
        t0 = time.perf_counter()
        rt = _ride_through(source, trace, boundary, rt_opts, seed, tick_s)
        timings["ride_through"] = time.perf_counter() - t0
    elif not is_scenario:
        notes.append("Ride-through table: needs the disturbance model of a scenario; for "
                     "measured telemetry with recorded sags use 'powerlab comply --sags'.")
    return StudyPackage(source=label, spec=spec, boundary=boundary, draws=draws,
                        seed=seed, per_draw=per_draw, figures=figures, energisation=energ,
                        short_trace=short_tr, spectrum=spectrum, lines=lines, pmu=pmu_view,
                        pmu_figures=pmu_figs, ride_through=rt, trace=trace, notes=notes,
                        timings_s=timings, pmu_gains=pmu_gains)


def _horizon(source, boundary: str, draws: int, seed: int, tick_s, measured: MeasuredOptions,
             notes: list) -> tuple[pd.DataFrame, PowerTrace, str, int]:
    """The per-draw figures over the whole horizon, draw 0's trace (or the measured
    trace), the source's label and the number of draws (1 for measured data)."""
    from ..site.scenario import Scenario

    if isinstance(source, Scenario):
        kept: list[PowerTrace] = []

        def fn(dp):
            if dp.draw == 0:
                kept.append(dp)
            return _per_draw(dp, boundary)

        per_draw = for_each_draw(source, fn, draws=draws, seed=seed, tick_s=tick_s)
        return per_draw, kept[0], f"scenario {source.name!r} ({draws} draws, seed {seed})", \
            draws
    if isinstance(source, PowerTrace):
        trace = source
    else:
        trace = trace_from_telemetry(source, pue=measured.pue,
                                     base_load_w=measured.base_load_w,
                                     start=measured.start, end=measured.end)
    per_draw = pd.DataFrame([_per_draw(trace, boundary)], index=pd.RangeIndex(1, name="draw"))
    notes.append("Measured telemetry is one trace: exceedance probabilities over "
                 "draws do not apply; each figure is the trace's value.")
    return per_draw, trace, f"measured: {trace.description}", 1


def _short_scenario(source, trace: PowerTrace, boundary: str, short: ShortWindow,
                    pmu: PmuSettings, draws: int, seed: int):
    """The short window forecast again at ``short.tick_s`` for every draw (the cooling
    lag warmed up first): draw 0's short trace, the Welch frequencies and each draw's
    density, and each draw's PMU figures."""
    if short.start_utc is None:
        x0 = trace.power_w(boundary)
        t_ramp = _largest_ramp_time_s(x0, trace.tick_s)
        short_start = trace.start_utc + pd.Timedelta(seconds=max(0.0, t_ramp - 30.0))
    else:
        short_start = pd.Timestamp(short.start_utc)
    short_start = short_start.floor("s")
    short_window_s = min(float(short.window_s), math.floor(trace.duration_s))
    skip = 0.0 if short.start_utc is not None else 40.0
    short_end = min(short_start + pd.Timedelta(seconds=short_window_s),
                    trace.start_utc + pd.Timedelta(seconds=trace.duration_s))
    short_start = short_end - pd.Timedelta(seconds=short_window_s)
    # the cooling plant's lag starts at its steady state at a horizon's start: warm it
    # up for three time constants (5 % of the start-up error left) before the window
    warm = 3.0 * float(source.site.cooling_time_constant_s)
    warm_start = max(trace.start_utc, short_start - pd.Timedelta(seconds=warm)).floor("s")
    k0 = round((short_start - warm_start).total_seconds() / short.tick_s)
    win = source.replace(horizon_start_utc=warm_start, horizon_end_utc=short_end)
    shorts: list[PowerTrace] = []
    psds: list[np.ndarray] = []
    pmu_rows = []
    freq = None

    def short_fn(dp):
        nonlocal freq
        ev = dp.events
        if len(ev):
            ev = ev[ev["timestamp"] >= short_start].reset_index(drop=True)
        dp = PowerTrace(dp.draw, dp.tick_s, short_start, dp.it_w[k0:],
                        dp.facility_w[k0:], ev,
                        description=f"{dp.description}, tick {dp.tick_s:g} s, "
                                    f"{short_window_s:g} s from {short_start.isoformat()}")
        x = dp.power_w(boundary)
        k = round(skip / dp.tick_s) if len(x) * dp.tick_s >= 4 * skip else 0
        freq, s = lm.welch_psd(x[k:], dp.tick_s, min(64.0, short_window_s / 4))
        psds.append(s)
        if dp.draw == 0:
            shorts.append(dp)
        pmu_rows.append(_pmu_figures(x, dp.tick_s, pmu.f0_hz, pmu.reporting_rate_fps))
        return {}

    for_each_draw(win, short_fn, draws=draws, seed=seed, tick_s=short.tick_s)
    return shorts[0], freq, np.vstack(psds), pmu_rows


def _short_measured(trace: PowerTrace, boundary: str, pmu: PmuSettings, notes: list):
    """A measured trace is its own short window (the readings' Nyquist limit noted)."""
    freq, s = lm.welch_psd(trace.power_w(boundary), trace.tick_s,
                           min(64.0, trace.duration_s / 4))
    pmu_rows = [_pmu_figures(trace.power_w(boundary), trace.tick_s, pmu.f0_hz,
                             pmu.reporting_rate_fps)]
    nyq = 0.5 / max(trace.tick_s, trace.native_interval_s)
    if nyq < 30.0:
        notes.append(f"Readings every {max(trace.tick_s, trace.native_interval_s):g} s "
                     f"resolve oscillation only up to {nyq:g} Hz; lines near 30 Hz "
                     "cannot be shown present or absent.")
    return trace, freq, s[None, :], pmu_rows


def _spectrum_tables(freq, psd: np.ndarray, pmu: PmuSettings):
    """The spectrum (median and largest density over draws) and its lines from 0.1 to
    30 Hz, with the nearby observed frequencies and the PMU-reported amplitudes."""
    from .pmu import modulation_gain

    med = np.median(psd, axis=0)
    spectrum = pd.DataFrame({"frequency_hz": freq,
                             "psd_megawatts2_per_hz_median": med / 1e12,
                             "psd_megawatts2_per_hz_max": psd.max(axis=0) / 1e12})
    lines = spectrum_lines(freq, med, min_amplitude_w=1e3)
    lines = lines[(lines["frequency_hz"] >= 0.1) & (lines["frequency_hz"] <= 30.0)]
    lines = lines.reset_index(drop=True)
    lines["near_observed_hz"] = _near(lines["frequency_hz"].to_numpy(), OBSERVED_LINES_HZ,
                                      0.5)
    for c in ("P", "M"):
        g = modulation_gain(lines["frequency_hz"].to_numpy(), c, f0_hz=pmu.f0_hz,
                            reporting_rate_fps=pmu.reporting_rate_fps) if len(lines) else []
        lines[f"amplitude_megawatts_pmu_{c.lower()}_class"] = \
            lines["amplitude_megawatts"].to_numpy() * np.asarray(g)
    return spectrum, lines


def _pmu_tables(short: PowerTrace, boundary: str, pmu_rows: list, pmu: PmuSettings):
    """The PMU view of the short trace, the PMU figures' envelope over draws and the
    P- and M-class modulation gains at a few frequencies."""
    from .pmu import modulation_gain, pmu_power

    f0, fps = pmu.f0_hz, pmu.reporting_rate_fps
    view = pmu_power(short.power_w(boundary), short.tick_s, short.start_utc,
                     f0_hz=f0, reporting_rate_fps=fps)
    figs = _pmu_envelope(pd.DataFrame(pmu_rows), f0, fps)
    gain_f = np.array([0.1, 1.0, 2.0, 5.0, 10.0, *OBSERVED_LINES_HZ, 30.0])
    gains = pd.DataFrame({"frequency_hz": gain_f, **{
        f"gain_{c.lower()}_class": modulation_gain(gain_f, c, f0_hz=f0,
                                                   reporting_rate_fps=fps)
        for c in ("P", "M")}})
    return view, figs, gains


def _ride_through(source, trace: PowerTrace, boundary: str, opts: RideThrough, seed: int,
                  tick_s) -> pd.DataFrame:
    """The ride-through table at ``opts.at_utc`` (default draw 0's peak), with the UPS
    and outage assumptions of the scenario's first sag when it has one."""
    at = (pd.Timestamp(opts.at_utc) if opts.at_utc is not None else
          trace.start_utc + pd.Timedelta(
              seconds=float(np.argmax(trace.power_w(boundary))) * trace.tick_s))
    sags = getattr(source, "disturbances", ())
    sa = SagAssumptions(ups_fraction=sags[0].ups_fraction,
                        ups_return_s=sags[0].ups_return_s,
                        outage_s=sags[0].outage_s) if sags else SagAssumptions()
    return ride_through_table(source, at.floor("s"), draws=opts.draws, seed=seed,
                              tick_s=tick_s, boundary=boundary, assumptions=sa)


def _schedule_or_note(peak_w, ramps, step, within, max_block_w, notes):
    from .energisation import energisation_schedule

    if not ramps and step is None:
        notes.append("The spec sets no ramp or step limit on rises: the energisation "
                     "schedule uses blocks of a tenth of the peak, 1 s apart.")
    return energisation_schedule(peak_w, ramp_limits_w_per_s=ramps, step_limit_w=step,
                                 step_within_s=within, max_block_w=max_block_w)


def _pmu_figures(x: np.ndarray, tick_s: float, f0_hz: float, fps: int) -> dict:
    """Largest change within 1 s of the raw series and of what P/M-class PMUs report
    (both read at the PMU's frame times) [MW]."""
    from scipy.ndimage import maximum_filter1d, minimum_filter1d

    from .pmu import pmu_power

    f = pmu_power(x, tick_s, f0_hz=f0_hz, reporting_rate_fps=fps)
    out = {}
    n = fps + 1
    for col, name in (("power_megawatts_raw", "raw"), ("power_megawatts_pmu_p_class", "p"),
                      ("power_megawatts_pmu_m_class", "m")):
        y = f[col].to_numpy()
        out[name] = float((maximum_filter1d(y, n) - minimum_filter1d(y, n)).max()) \
            if len(y) >= n else math.nan
    return out


def _pmu_envelope(rows: pd.DataFrame, f0_hz: float, fps: int) -> pd.DataFrame:
    src = (f"IEEE C37.118.1-2011 Annex C reference {{}}-class filter, {f0_hz:g} Hz, "
           f"{fps} frames/s; powerlab.interconnect.pmu")
    out = []
    n = len(rows)
    for name, cls in (("raw", None), ("p", "P"), ("m", "M")):
        v = rows[name].to_numpy(float)
        what = "the forecast at the PMU's frame times" if cls is None else \
            f"the power a {cls}-class reference PMU reports"
        out.append((f"swing_megawatts_within_1s_{'raw' if cls is None else name + '_class'}",
                    float(np.nanmax(v)), "MW", 0.0,
                    f"largest of {n} draw{'s' if n != 1 else ''} (short window)",
                    f"largest max-minus-min within 1 s of {what}",
                    src.format(cls) if cls else "forecast of the short window"))
    return pd.DataFrame(out, columns=["figure", "value", "unit", "exceed_probability",
                                      "statistic", "definition", "source"])
