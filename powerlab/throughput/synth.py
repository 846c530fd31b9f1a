"""A synthetic twin of a synchronous training run on a GPU fleet, with known truth.

The twin follows the physical chain that makes training throughput depend on the time
of day [1]_:

ambient air temperature (a real weather series or a sinusoid)
  -> facility inlet / coolant temperature (economiser coupling, first-order lag)
  -> GPU die and HBM temperature (thermal resistance times power, first-order lag)
  -> DVFS: SM clock falls with temperature, is capped by the power limit, and the NVML
     clock-event (throttle) reason bits are set
  -> per-GPU step time (the compute-bound share scales with 1 / clock)
  -> job step time, set by the slowest GPU at every step (synchronous data parallelism)
  -> throughput (tokens per second).

On top of the physics it adds what a real log shows: restarts after failures (each
followed by a warm-up), checkpoint and evaluation steps, a few straggler GPUs,
autocorrelated (AR(1)) noise, and daylight-saving changes in the site's local time.

:func:`simulate_training` returns a :class:`TwinResult` with the telemetry in the
canonical schema (:mod:`powerlab.telemetry.schema`), the per-step training log, and a
:class:`TwinTruth` holding the true parameters and the true time-of-day profile, so
analyses (:mod:`powerlab.throughput.dvfs`, :mod:`powerlab.throughput.stragglers`) can be checked against it.

Model
-----
Inlet temperature ``T_in`` follows ambient ``T_a`` through an economiser coupling and the
facility's thermal mass (time constant ``inlet_tau_s``):

.. math:: T_{in}^* = T_{in,0} + c\\,(T_a - T_{a,ref}),\\qquad
          \\tau_{in}\\,\\dot T_{in} = T_{in}^* - T_{in}

The GPU die sits at ``T = T_in + R_th P`` (quasi-steady, then lagged by ``gpu_tau_s``),
where power is static (leakage, growing with temperature) plus dynamic (``~ f^3``, since
voltage scales with frequency):

.. math:: P = P_s\\,(1 + \\lambda (T - 60)) + P_d\\,(f/f_{max})^3

The clock falls ``k`` MHz per degree above a knee (GPU Boost), faster above the software
thermal slowdown threshold, halves above the hardware thermal slowdown threshold, and is
capped where the power demand would exceed the power limit.  The power <-> temperature
feedback is solved by fixed-point iteration at each sample.  The step time of GPU ``i`` is

.. math:: t_i = t_0\\,\\big(\\phi\\,f_{max}/f_i + 1 - \\phi\\big)\\,(1 + \\sigma_j z_i)

with ``phi`` the compute-bound share and ``z_i`` per-step jitter; the job waits for the
slowest GPU: ``t = max_i t_i``, times AR(1) noise and a per-segment level.

Throttle-reason bits are the NVML ``nvmlClocksEventReason*`` constants of
:data:`powerlab.telemetry.schema.THROTTLE_REASONS` (re-exported here as :data:`THROTTLE_REASONS`).

References
----------
.. [1] A. Grattafiori et al., "The Llama 3 Herd of Models", arXiv:2407.21783, 2024,
   section 3.3.4: "diurnal 1-2% throughput variation based on time-of-day ... the
   result of higher mid-day temperatures impacting GPU dynamic voltage and frequency
   scaling".
.. [2] NVIDIA, "NVML API Reference Guide", ``nvmlDeviceGetCurrentClocksEventReasons``,
   clock event reason constants (``nvml.h``; ``pynvml.nvmlClocksEventReason*``).
.. [3] J. Patterson, "The effect of data center temperature on energy efficiency",
   ITHERM 2008 (leakage power rising with die temperature).
"""

from __future__ import annotations

import dataclasses
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
from scipy import optimize

from .._options import Options
from ..exceptions import ScenarioError
from ..telemetry.schema import THROTTLE_REASONS, conform
from ..telemetry.timeutil import to_epoch_ns
from .twin_ambient import ambient_on_grid, local_hours, sinusoidal_ambient
from .twin_log import build_steps, run_segments
from .twin_physics import (
    Fleet,
    StateTable,
    TwinParameters,
    checked_parameters,
    first_order_lag,
    gpu_states,
    make_fleet,
    state_table,
)

__all__ = [
    "THROTTLE_REASONS",
    "TwinFleet",
    "TwinParameters",
    "TwinResult",
    "TwinRun",
    "TwinTruth",
    "simulate_training",
    "sinusoidal_ambient",
]

@dataclass(frozen=True)
class TwinTruth:
    """What the twin really did: parameters and the true effects.

    Attributes
    ----------
    params : TwinParameters
        Parameters used (after amplitude calibration).
    site_tz : str
        Site time zone used for local time.
    amplitude_pct : float
        True peak-to-trough of the noise-free job throughput by local time of day, as a
        percentage of its mean, over productive (non-warm-up, non-checkpoint, non-eval)
        steps [%].
    peak_hour, trough_hour : float
        Local hours of the true throughput maximum and minimum [h].
    profile : pandas.Series
        True effect by local hour (15-minute bins, bin centres) as a percentage of mean
        throughput [%].
    stragglers : pandas.DataFrame
        Injected stragglers: host, gpu_index, gpu_uuid, kind, slowdown_pct (the GPU's own
        step-time excess over the fleet median, time averaged) [%].
    segments : pandas.DataFrame
        Run segments: segment, start, end (UTC), n_steps.
    counts : dict
        Number of steps by phase ('train', 'warmup', 'checkpoint', 'eval').
    ambient : pandas.Series
        Ambient temperature on the telemetry grid [degC].
    n_gpus : int
        Fleet size.
    gpu_hours_lost_per_day : float
        GPU-hours per day lost to the time-of-day effect, relative to running all day at
        the best hour's throughput [GPU h/day].
    """

    params: TwinParameters
    site_tz: str
    amplitude_pct: float
    peak_hour: float
    trough_hour: float
    profile: pd.Series
    stragglers: pd.DataFrame
    segments: pd.DataFrame
    counts: dict
    ambient: pd.Series
    n_gpus: int
    gpu_hours_lost_per_day: float


@dataclass(frozen=True)
class TwinResult:
    """Output of :func:`simulate_training`.

    Attributes
    ----------
    telemetry : pandas.DataFrame or None
        GPU telemetry in the canonical schema (conformed), or ``None`` when not requested.
    steps : pandas.DataFrame
        Training log, one row per step: timestamp (UTC, end of step), step, segment,
        phase, duration_s, throughput_tokens_per_s.
    truth : TwinTruth
        The true parameters and effects.
    """

    telemetry: pd.DataFrame | None
    steps: pd.DataFrame
    truth: TwinTruth = field(repr=False)

    @property
    def throughput(self) -> pd.Series:
        """Per-step throughput [tokens/s] indexed by UTC timestamp."""
        s = self.steps.set_index("timestamp")["throughput_tokens_per_s"]
        return s.rename("throughput_tokens_per_s")


def _profile(local_h: np.ndarray, y: np.ndarray, n_bins: int = 96):
    """Mean of ``y`` by local-hour bin, as % of the overall mean; (centres, pct)."""
    b = np.minimum((local_h * n_bins / 24.0).astype(int), n_bins - 1)
    cnt = np.bincount(b, minlength=n_bins)
    s = np.bincount(b, weights=y, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = s / cnt
    pct = 100.0 * (m / np.mean(y) - 1.0)
    centres = (np.arange(n_bins) + 0.5) * 24.0 / n_bins
    return centres, pct


def _amplitude(pct: np.ndarray) -> float:
    ok = np.isfinite(pct)
    return float(np.max(pct[ok]) - np.min(pct[ok])) if ok.any() else float("nan")


@dataclass(frozen=True)
class TwinFleet(Options):
    """The twin's fleet: shape and stragglers (:func:`simulate_training`).

    Parameters
    ----------
    n_hosts, gpus_per_host : int
        Fleet shape.
    stragglers : int or sequence of (position, kind)
        Number of straggler GPUs placed at random (kinds cycling thermal, power, clock),
        or explicit ``(fleet position, kind)`` pairs.
    """

    n_hosts: int = 8
    gpus_per_host: int = 8
    stragglers: int | Sequence = 2


@dataclass(frozen=True)
class TwinRun(Options):
    """How the twin's run goes and is recorded (:func:`simulate_training`).

    Parameters
    ----------
    restarts : sequence of timestamps, optional
        Fixed failure times; default: Poisson failures with mean ``mtbf_s``.
    telemetry : bool
        Build the telemetry frame (the step log is always built).
    telemetry_interval_s : float
        Telemetry (and physics) grid interval [s].
    seed : int, optional
        Random seed.
    """

    restarts: Sequence | None = None
    telemetry: bool = True
    telemetry_interval_s: float = 60.0
    seed: int | None = None


def _pop_fields(cls, overrides: dict) -> dict:
    """The keywords of ``overrides`` that are fields of ``cls``, taken out of it."""
    return {k: overrides.pop(k) for k in [f.name for f in dataclasses.fields(cls)]
            if k in overrides}


@dataclass
class _TwinWork:
    """What the steps of :func:`simulate_training` read and write."""

    p: TwinParameters
    shape: TwinFleet
    site_tz: str
    rng: np.random.Generator
    t_start: pd.Timestamp = None
    dt: float = 0.0
    dt_ns: int = 0
    grid: pd.DatetimeIndex = None
    t_end_ns: int = 0
    amb: np.ndarray = None
    fleet: Fleet = None
    table: StateTable = None
    inlet: np.ndarray = None
    segs: list = None
    busy: np.ndarray = None
    steps: pd.DataFrame = None
    truth: TwinTruth = None
    telemetry: pd.DataFrame | None = None
    phases_det: np.ndarray = None
    mid_ns: np.ndarray = None


def simulate_training(start="2025-06-03", days: float = 14.0, *,
                      site_tz: str = "America/New_York",
                      ambient: pd.Series | pd.DataFrame | None = None,
                      amplitude_pct: float | None = None,
                      fleet: TwinFleet | None = None,
                      run: TwinRun | None = None,
                      params: TwinParameters | None = None,
                      **overrides) -> TwinResult:
    """Simulate a synchronous training run on a fleet, with telemetry and known truth.

    A chain of named steps: the run's grid, the ambient and inlet temperature (with the
    economiser coupling calibrated to ``amplitude_pct``), the run segments and step log,
    the known truth, and the telemetry.

    Parameters
    ----------
    start : str or pandas.Timestamp
        Start of the run; a naive value is read as UTC.
    days : float
        Length of the run [days].
    site_tz : str
        IANA time zone of the site (local civil time, with daylight saving).
    ambient : pandas.Series or pandas.DataFrame, optional
        Outdoor air temperature [degC] indexed by tz-aware timestamps (a frame needs a
        ``temp_air_c`` column, as returned by ``powerlab.iotools.read_weather``).  It is
        interpolated onto the telemetry grid and must cover the run.  Default: a sinusoid
        (``ambient_mean_c``, ``ambient_swing_c``, ``ambient_peak_hour``).
    amplitude_pct : float, optional
        Target peak-to-trough of the time-of-day throughput effect [%].  The economiser
        coupling ``inlet_ambient_coef`` is calibrated to reach it (the exact realised value
        is :attr:`TwinTruth.amplitude_pct`).  ``0`` gives no time-of-day effect at all.
    fleet : TwinFleet, optional
        Fleet shape and stragglers (``n_hosts``, ``gpus_per_host``, ``stragglers``); its
        fields may also be given as keywords (``n_hosts=2``).
    run : TwinRun, optional
        Failure times, telemetry and its interval, seed (``restarts``, ``telemetry``,
        ``telemetry_interval_s``, ``seed``); its fields may also be given as keywords
        (``seed=1``).
    params : TwinParameters, optional
        Base parameters; ``overrides`` (field names of :class:`TwinParameters`) replace
        single fields.
    **overrides
        Fields of :class:`TwinParameters`, :class:`TwinFleet` and :class:`TwinRun`.

    Returns
    -------
    TwinResult
        ``telemetry`` (canonical schema), ``steps`` (training log) and ``truth``.

    Raises
    ------
    powerlab.exceptions.ScenarioError
        For invalid parameters, naming the offending key.

    Examples
    --------
    >>> run = simulate_training("2025-06-03", days=2, amplitude_pct=1.5, seed=1)
    >>> round(run.truth.amplitude_pct, 1)  # doctest: +SKIP
    1.5
    """
    shape = TwinFleet.from_kwargs(fleet, **_pop_fields(TwinFleet, overrides))
    rec = TwinRun.from_kwargs(run, **_pop_fields(TwinRun, overrides))
    p = checked_parameters(params or TwinParameters(), overrides)
    _check_run(shape, days, p, rec.telemetry_interval_s, site_tz)
    w = _TwinWork(p=p, shape=shape, site_tz=site_tz, rng=np.random.default_rng(rec.seed))
    _run_grid(w, start, days, rec.telemetry_interval_s)
    _thermal_setting(w, ambient, amplitude_pct)
    _run_log(w, rec.restarts)
    _known_truth(w)
    if rec.telemetry:
        _twin_telemetry(w)
    return TwinResult(telemetry=w.telemetry, steps=w.steps, truth=w.truth)


def _check_run(shape: TwinFleet, days, p: TwinParameters, telemetry_interval_s,
               site_tz) -> None:
    n_hosts, gpus_per_host = shape.n_hosts, shape.gpus_per_host
    for k, v in (("n_hosts", n_hosts), ("gpus_per_host", gpus_per_host)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise ScenarioError(f"{k} must be an integer, got {v!r}", key=k)
    if not days > 0:
        raise ScenarioError(f"days must be positive, got {days}", key="days")
    if not (p.step_time_s > 0 and telemetry_interval_s > 0):
        raise ScenarioError("step_time_s and telemetry_interval_s must be positive",
                            key="step_time_s")
    if not 0 < p.compute_fraction <= 1:
        raise ScenarioError("compute_fraction must be in (0, 1]", key="compute_fraction")
    if n_hosts < 1 or gpus_per_host < 1:
        raise ScenarioError("the fleet needs at least one GPU", key="n_hosts")
    try:
        zoneinfo.ZoneInfo(site_tz)
    except Exception as exc:
        raise ScenarioError(f"unknown time zone {site_tz!r}", key="site_tz") from exc


def _run_grid(w: _TwinWork, start, days, telemetry_interval_s) -> None:
    """The physics and telemetry grid from the start (UTC) over ``days``."""
    try:
        t_start = pd.Timestamp(start)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"start {start!r} is not a timestamp", key="start") from exc
    t_start = t_start.tz_localize("UTC") if t_start.tz is None else t_start.tz_convert("UTC")
    w.t_start = t_start.as_unit("ns")
    w.dt = float(telemetry_interval_s)
    w.dt_ns = round(w.dt * 1e9)
    n_grid = int(np.ceil(days * 86400.0 / w.dt)) + 2
    w.grid = pd.date_range(w.t_start, periods=n_grid, freq=pd.Timedelta(w.dt_ns, "ns"))
    w.t_end_ns = int(w.t_start.value + days * 86400e9)


def _thermal_setting(w: _TwinWork, ambient, amplitude_pct) -> None:
    """Ambient on the grid, the fleet, and the inlet temperature (the economiser
    coupling calibrated to ``amplitude_pct`` when given)."""
    p, grid, dt = w.p, w.grid, w.dt
    w.amb = amb = ambient_on_grid(ambient, grid, p, w.site_tz)
    w.fleet = make_fleet(w.shape.n_hosts, w.shape.gpus_per_host, w.shape.stragglers, p,
                         w.rng)
    local_grid_h = local_hours(grid, w.site_tz)
    w.table = table = state_table(w.fleet, p)

    def inlet_for(coef):
        raw = p.inlet_base_c + coef * (amb - p.ambient_ref_c)
        return first_order_lag(raw, dt, p.inlet_tau_s)

    if amplitude_pct is not None:
        if not 0 <= amplitude_pct < 20:
            raise ScenarioError("amplitude_pct must be in [0, 20)", key="amplitude_pct")
        if amplitude_pct == 0:
            p = dataclasses.replace(p, inlet_ambient_coef=0.0)
        else:
            p = dataclasses.replace(
                p, inlet_ambient_coef=_calibrate(amplitude_pct, inlet_for, local_grid_h,
                                                 table, dt))
    w.p = p
    inlet = w.inlet = inlet_for(p.inlet_ambient_coef)
    if inlet.min() < table.tin[0] or inlet.max() > table.tin[-1]:
        raise ScenarioError(f"inlet temperature leaves [{table.tin[0]:g}, {table.tin[-1]:g}]"
                            " degC; check the ambient series and inlet_ambient_coef",
                            key="inlet_ambient_coef")


def _run_log(w: _TwinWork, restarts) -> None:
    """Run segments between failures, busy grid points, and the step log."""
    g0 = int(to_epoch_ns(w.grid)[0])
    w.segs = segs = run_segments(int(w.t_start.value), w.t_end_ns, w.p, w.rng, restarts)
    if not segs:
        raise ScenarioError("the run is too short for a single segment", key="days")
    w.busy = np.zeros(len(w.grid), dtype=bool)
    gt = to_epoch_ns(w.grid)
    for a, b in segs:
        w.busy[(gt >= a) & (gt < b)] = True
    w.steps, w.phases_det, w.mid_ns = build_steps(segs, w.inlet, w.table, g0, w.dt_ns,
                                                      w.p, w.rng)


def _known_truth(w: _TwinWork) -> None:
    """The truth: noise-free time-of-day profile, stragglers' slowdowns, segments."""
    steps, fleet, table = w.steps, w.fleet, w.table
    # truth from noise-free throughput over productive steps
    prod = steps["phase"].to_numpy() == "train"
    lh = local_hours(pd.DatetimeIndex(w.mid_ns[prod], tz="UTC"), w.site_tz)
    centres, pct = _profile(lh, w.phases_det[prod])
    ok = np.isfinite(pct)
    n_gpu = w.shape.n_hosts * w.shape.gpus_per_host
    gh_lost = float(n_gpu * 24.0 * np.nanmean(1.0 - (1 + pct[ok] / 100) / (1 + pct[ok].max()
                                                                        / 100)))
    d_gpu = table.rows(table.step, w.inlet[w.busy])
    med = np.median(d_gpu, axis=1, keepdims=True)
    slow = 100.0 * np.mean(d_gpu / med - 1.0, axis=0)
    sidx = np.flatnonzero(fleet.kind != "")
    strag = pd.DataFrame({
        "host": pd.array(fleet.hosts[sidx], dtype="string"),
        "gpu_index": pd.array(fleet.gpu_index[sidx], dtype="Int16"),
        "gpu_uuid": pd.array(fleet.uuids[sidx], dtype="string"),
        "kind": pd.array(fleet.kind[sidx].astype(str), dtype="string"),
        "slowdown_pct": slow[sidx],
    })
    segs = w.segs
    seg_frame = pd.DataFrame({
        "segment": np.arange(len(segs)),
        "start": pd.to_datetime([a for a, _ in segs], utc=True).as_unit("ns"),
        "end": pd.to_datetime([b for _, b in segs], utc=True).as_unit("ns"),
        "n_steps": steps.groupby("segment").size().reindex(range(len(segs)),
                                                           fill_value=0).to_numpy(),
    })
    counts = steps["phase"].value_counts().to_dict()
    counts = {k: int(counts.get(k, 0)) for k in ("train", "warmup", "checkpoint", "eval")}
    w.truth = TwinTruth(
        params=w.p, site_tz=w.site_tz, amplitude_pct=_amplitude(pct),
        peak_hour=float(centres[ok][np.argmax(pct[ok])]),
        trough_hour=float(centres[ok][np.argmin(pct[ok])]),
        profile=pd.Series(pct, index=pd.Index(centres, name="local_hour"),
                          name="effect_pct"),
        stragglers=strag, segments=seg_frame, counts=counts,
        ambient=pd.Series(w.amb, index=w.grid, name="temp_air_c"), n_gpus=n_gpu,
        gpu_hours_lost_per_day=gh_lost,
    )


def _twin_telemetry(w: _TwinWork) -> None:
    """GPU states on the grid and the telemetry frame (canonical schema)."""
    temp, hbm, clock, power, bits = gpu_states(w.inlet, w.busy, w.fleet, w.table, w.p, w.dt)
    w.telemetry = _telemetry(w.grid, w.fleet, temp, hbm, clock, power, bits, w.busy, w.p,
                             w.rng, w.dt)


def _calibrate(target, inlet_for, local_h, table: StateTable, dt) -> float:
    """Economiser coupling giving the target noise-free throughput amplitude."""
    step = max(1, round(300.0 / dt))   # every ~5 min is plenty for a daily profile
    lh = local_h[::step]

    def amp(coef):
        y = 1.0 / table.rows(table.job_step, inlet_for(coef)[::step])
        return _amplitude(_profile(lh, y)[1]) - target

    hi = 0.5
    while amp(hi) < 0:
        hi *= 2
        if hi > 16:
            raise ScenarioError(f"amplitude_pct={target} cannot be reached with this "
                                "ambient series and fleet", key="amplitude_pct")
    return float(optimize.brentq(amp, 0.0, hi, xtol=1e-5))


def _telemetry(grid, fleet: Fleet, temp, hbm, clock, power, bits, busy, p, rng, dt):
    n_t, g = temp.shape
    noise = p.telemetry_noise
    temp_r = np.round(temp + noise * rng.standard_normal(temp.shape))
    hbm_r = np.round(hbm + noise * rng.standard_normal(hbm.shape))
    clk = np.round(clock / p.clock_step_mhz) * p.clock_step_mhz
    pw = power * (1 + noise / 100.0 * rng.standard_normal(power.shape))
    energy = np.cumsum(power * dt, axis=0) + rng.uniform(1e8, 1e10, size=g)[None, :]
    util = np.where(busy[:, None],
                    np.clip(97.0 + 2.0 * rng.standard_normal((n_t, g)), 0, 100), 0.0)
    util = np.round(util)
    lim = np.broadcast_to(fleet.limit[None, :], (n_t, g))
    # GPU-major order (host, gpu_index, time): already the canonical sort order
    gpu_of_row = pa.array(np.repeat(np.arange(g, dtype=np.int32), n_t))

    def strings(values) -> pd.api.extensions.ExtensionArray:
        return pd.array(pa.array(list(values), type=pa.string()).take(gpu_of_row),
                        dtype="string")

    df = pd.DataFrame({
        "timestamp": pd.DatetimeIndex(np.tile(to_epoch_ns(grid), g),
                                      tz="UTC").as_unit("ns"),
        "host": strings(fleet.hosts),
        "scope": strings(["gpu"] * g),
        "gpu_index": pd.array(np.repeat(fleet.gpu_index, n_t).astype(np.int16),
                              dtype="Int16"),
        "gpu_uuid": strings(fleet.uuids),
        "power_w": pw.T.ravel(),
        "energy_j": energy.T.ravel(),
        "clock_sm_mhz": clk.T.ravel(),
        "clock_mem_mhz": np.full(n_t * g, float(p.clock_mem_mhz)),
        "temp_gpu_c": temp_r.T.ravel(),
        "temp_mem_c": hbm_r.T.ravel(),
        "util_gpu_pct": util.T.ravel(),
        "power_limit_w": lim.T.ravel().astype(float),
        "throttle_reasons": pd.array(bits.T.ravel(), dtype="UInt64"),
    })
    return conform(df, sort=False)
