"""Forecast scenarios: the site, the hardware, the jobs and the mitigations, from YAML.

A scenario is a small YAML file (see ``data/scenarios/*.yaml`` for annotated examples)
read by :func:`read_scenario` (path) or :func:`parse_scenario` (text or mapping) into
frozen dataclasses whose field names carry their units.  Every problem is reported as a
:class:`~powerlab.exceptions.ScenarioError` that names the key path, e.g.
``jobs[2].checkpoint.interval_s``, and says what was expected.

Layout of the YAML document::

    name: str
    horizon: {start_utc, end_utc}           # optional; default: span of the jobs
    simulation: {tick_s}                    # engine time step [s], default 0.1
    site: {tz, pue | cooling{...}, base_load_w, electrical_loss_fraction,
           cooling_time_constant_s}
    hardware: {gpu_model, gpu_idle_w, gpu_compute_w, gpu_comm_w, gpu_tdp_w,
               gpus_per_node, node_overhead_w, cluster_gpus,
               gpu_rise_time_constant_s, gpu_fall_time_constant_s}
    jobs: [{name, gpus, start_utc, duration_s, step_time_s, compute_fraction,
            startup_s, warmup_s, shutdown_s, jitter_s,
            checkpoint: {interval_s, duration_s},
            eval: {interval_s, duration_s, first_s},
            failures: {rate_per_gpu_h, restart_s} | interruptions: {...},
            power: {compute_w, comm_w, startup_w, warmup_w, checkpoint_w, eval_w,
                    shutdown_w}}]
    interruptions: {model, scale, rates_per_gpu_h{cause: rate}, planned_rate_per_gpu_h,
                    restart: {detection_s, drain_s, reschedule_s}}  # every job without
                                            # its own (powerlab.reliability.interruptions)
    mitigations: {gpu_power_floor_pct_tdp, gpu_ramp_limit_w_per_s, stagger_starts_s,
                  battery: {power_megawatts, energy_megawatt_hours,
                            round_trip_efficiency, window_s, initial_soc_fraction,
                            soc_min_fraction, soc_max_fraction,
                            converter_response_s}}
    disturbances: [{name, type: voltage_sag, at_utc, residual_voltage_pu, duration_s,
                    trip_fraction, ups_fraction, ups_return_s, outage_s}]
                                            # (powerlab.site.disturbances)
    equipment: {psu: {...}, ups: {...}, auxiliaries: {...}, protection: {...}, poi: {...}}
                                            # (powerlab.interconnect.equipment)
    limits: {boundary, ramp_up_megawatts_per_s, ramp_down_megawatts_per_s,
             swing_1s_megawatts, swing_10s_megawatts, swing_60s_megawatts,
             band_0p1_2hz_megawatts, band_2_20hz_megawatts}
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..exceptions import ScenarioError
from ..limits.scenario_limits import Limits, parse_limits
from ..limits.yamlspec import Section, load_yaml, read_yaml_text
from ..reliability.interruptions import InterruptionModel, parse_interruptions
from .disturbances import VoltageSag, parse_disturbances
from .facility import MAX_SITE_W, Site, parse_site
from .hardware import MAX_GPU_W, MAX_GPUS, Hardware, parse_hardware

__all__ = [
    "Battery",
    "Job",
    "Mitigations",
    "Scenario",
    "parse_scenario",
    "read_scenario",
]


# --------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class Job:
    """One training job and its power behaviour.

    Intervals of checkpoints and evaluations count *training* time and are rounded to
    whole steps.  Per-GPU power levels default to the hardware levels.

    Attributes
    ----------
    name : str
    gpus : int
        GPUs the job occupies [-].
    start_utc : pandas.Timestamp
        Allocation start (tz-aware UTC).
    duration_s : float
        Allocation length, start-up and shutdown included [s].
    step_time_s : float
        Training step period [s].
    compute_fraction : float
        Share of a step spent computing; the rest waits on communication [-].
    startup_s, shutdown_s : float
        Initialisation before the first step and teardown at the end [s].
    warmup_s : float
        Training time after each start-up at the flat ``warmup_w`` level (the first block
        of a real run draws less than the later ones); counted as training for
        checkpoints and evaluations, rounded to whole steps [s].
    jitter_s : float
        Standard deviation of the per-GPU timing offset (desynchronisation), at most
        ``step_time_s`` [s].
    checkpoint_interval_s, checkpoint_duration_s : float
        Training time between checkpoints (0: none) and their length [s].
    eval_interval_s, eval_duration_s : float
        Training time between evaluations (0: none) and their length [s].
    eval_first_s : float
        Training time before the first evaluation of a (re)started job (0: one
        ``eval_interval_s``, the default); real runs evaluate first at their own offset
        (``eval.first_s``, rounded to whole steps like the interval) [s].
    failure_rate_per_gpu_h : float
        Interruptions per GPU-hour; the job fails at ``gpus`` times this rate [1/h].
    restart_s : float
        Time from a failure to the start of re-initialisation [s].
    interruptions : InterruptionModel or None
        Rates by cause, planned interruptions and the recovery split
        (:mod:`powerlab.reliability.interruptions`); when given, ``failure_rate_per_gpu_h`` is
        its total rate and ``restart_s`` its detection + drain + reschedule.
    compute_w, comm_w, startup_w, checkpoint_w, eval_w, shutdown_w, warmup_w : float
        Per-GPU power in each phase [W] (``warmup_w`` default: the mean of a step).
    """

    name: str
    gpus: int
    start_utc: pd.Timestamp
    duration_s: float
    step_time_s: float
    compute_fraction: float
    compute_w: float
    comm_w: float
    startup_w: float
    checkpoint_w: float
    eval_w: float
    shutdown_w: float
    startup_s: float = 0.0
    shutdown_s: float = 0.0
    warmup_s: float = 0.0
    warmup_w: float = 0.0
    jitter_s: float = 0.0
    checkpoint_interval_s: float = 0.0
    checkpoint_duration_s: float = 0.0
    eval_interval_s: float = 0.0
    eval_duration_s: float = 0.0
    eval_first_s: float = 0.0
    failure_rate_per_gpu_h: float = 0.0
    restart_s: float = 0.0
    interruptions: InterruptionModel | None = None

    @property
    def end_utc(self) -> pd.Timestamp:
        """End of the allocation (UTC)."""
        return self.start_utc + pd.Timedelta(seconds=self.duration_s)


@dataclass(frozen=True)
class Battery:
    """A battery that shaves swings around a moving-average target.

    Attributes
    ----------
    power_megawatts : float
        Maximum charge/discharge power [MW].
    energy_megawatt_hours : float
        Usable capacity [MWh].
    round_trip_efficiency : float
        Energy out / energy in [-].
    window_s : float
        Length of the trailing moving average the battery holds the grid to [s].
    initial_soc_fraction : float
        State of charge at the start of the horizon [-].
    soc_min_fraction, soc_max_fraction : float
        State-of-charge bounds the dispatch keeps (a Li-ion system is usually held
        within 10-90 %, a supercapacitor above a quarter of its energy, where its
        voltage halves) [-].
    converter_response_s : float
        Time constant of the power converter's first-order response to a new power
        command (0: instantaneous) [s].
    """

    power_megawatts: float
    energy_megawatt_hours: float
    round_trip_efficiency: float = 0.9
    window_s: float = 60.0
    initial_soc_fraction: float = 0.5
    soc_min_fraction: float = 0.0
    soc_max_fraction: float = 1.0
    converter_response_s: float = 0.0


@dataclass(frozen=True)
class Mitigations:
    """Swing mitigations.

    Attributes
    ----------
    gpu_power_floor_pct_tdp : float
        While a job holds a GPU, its power never falls below this share of TDP [%]
        (0: off).
    gpu_ramp_limit_w_per_s : float
        Largest per-GPU power change per second, up and down, as GPU power smoothing
        enforces [W/s] (0: off).
    stagger_starts_s : float
        Jobs that would start together start this far apart, in file order [s] (0: off).
    battery : Battery or None
    """

    gpu_power_floor_pct_tdp: float = 0.0
    gpu_ramp_limit_w_per_s: float = 0.0
    stagger_starts_s: float = 0.0
    battery: Battery | None = None

    @property
    def active(self) -> bool:
        """Whether any mitigation is switched on."""
        return bool(self.gpu_power_floor_pct_tdp or self.gpu_ramp_limit_w_per_s
                    or self.stagger_starts_s or self.battery is not None)


@dataclass(frozen=True)
class Scenario:
    """A complete forecast scenario."""

    name: str
    site: Site
    hardware: Hardware
    jobs: tuple[Job, ...]
    mitigations: Mitigations = field(default_factory=Mitigations)
    limits: Limits = field(default_factory=Limits)
    horizon_start_utc: pd.Timestamp | None = None
    horizon_end_utc: pd.Timestamp | None = None
    tick_s: float = 0.1
    description: str = ""
    source: str | None = None
    disturbances: tuple[VoltageSag, ...] = ()
    equipment: dict | None = field(default=None, hash=False)   # interconnect.equipment

    def to_dict(self) -> dict:
        """Plain, JSON-ready dictionary of the scenario (timestamps as ISO strings)."""
        def conv(o):
            if isinstance(o, pd.Timestamp):
                return o.isoformat()
            if isinstance(o, dict):
                return {k: conv(v) for k, v in o.items()}
            if isinstance(o, (list, tuple)):
                return [conv(v) for v in o]
            return o
        d = dataclasses.asdict(self)
        d.pop("source", None)
        return conv(d)

    def hash(self) -> str:
        """SHA-256 of the canonical JSON of the scenario (its identity in exports)."""
        text = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def replace(self, **changes) -> Scenario:
        """A copy with some fields replaced (e.g. ``mitigations=...``)."""
        return dataclasses.replace(self, **changes)

    @property
    def start_utc(self) -> pd.Timestamp:
        """Start of the forecast horizon (UTC)."""
        if self.horizon_start_utc is not None:
            return self.horizon_start_utc
        return min(j.start_utc for j in self.jobs)

    @property
    def end_utc(self) -> pd.Timestamp:
        """End of the forecast horizon (UTC)."""
        if self.horizon_end_utc is not None:
            return self.horizon_end_utc
        stagger = self.mitigations.stagger_starts_s * max(len(self.jobs) - 1, 0)
        return max(j.end_utc for j in self.jobs) + pd.Timedelta(seconds=stagger)

    @property
    def gpus(self) -> int:
        """GPUs in the cluster [-]."""
        return self.hardware.cluster_gpus


# --------------------------------------------------------------------------- parsing

#: Bounds on sizes no real site reaches, so that a typo fails before any allocation (the
#: site's and the hardware's in :mod:`~powerlab.site.facility` and :mod:`~powerlab.site.hardware`).
MAX_NAME_CHARS = 200            # a job or scenario name (it lands in CSV cells and reports)
MAX_SPAN_S = 366 * 86400.0     # a forecast horizon or job allocation of at most a year
YEARS = (1970, 2200)           # timestamps of a forecast


def _time(s: Section, name: str, required: bool = True) -> pd.Timestamp | None:
    """A UTC timestamp between the years of :data:`YEARS`."""
    try:
        ts = s.timestamp(name, required=required)
    except (OverflowError, pd.errors.OutOfBoundsDatetime, ScenarioError) as exc:
        if isinstance(exc, ScenarioError) and "outside the times powerlab" not in str(exc):
            raise   # (to_utc's refusal of a time beyond pandas' range: said with YEARS)
        ts = pd.Timestamp(f"{YEARS[1] + 1}-01-01", tz="UTC")
    if ts is not None and not YEARS[0] <= ts.year <= YEARS[1]:
        raise s.error(name, f"the year must be between {YEARS[0]} and {YEARS[1]}, got "
                      f"{s.data.get(name)!r}")
    return ts


def _pause(s: Section, name: str, step: float) -> tuple[float, float, float]:
    """A periodic pause of training (``checkpoint``, ``eval``): ``interval_s`` of training
    between pauses (0: none; at least one step), ``duration_s`` of each and, for
    evaluations, ``first_s``: the training before the first (0: one interval) [s]."""
    sec = s.section(name)
    interval = sec.number("interval_s", 0.0)
    duration = sec.number("duration_s", 0.0)
    first = sec.number("first_s", 0.0) if name == "eval" else 0.0
    if interval and interval < step:
        raise sec.error("interval_s", f"{interval:g} s is shorter than one step "
                        f"(step_time_s = {step:g} s)")
    if first and not interval:
        raise sec.error("first_s", "needs interval_s (the evaluations after the first)")
    sec.finish()
    return interval, duration, first


def _job_interruptions(s: Section, site_interruptions: InterruptionModel | None
                       ) -> tuple[InterruptionModel | None, float, float]:
    """``failures:`` (one rate) or ``interruptions:`` (by cause; the scenario-level one
    when the job has neither): (model, total rate [1/(GPU h)], restart [s])."""
    if s.has("interruptions"):
        if s.has("failures"):
            raise s.error("failures", "give either 'failures' or 'interruptions', not both")
        s.raw("failures")
        inter = parse_interruptions(s.section("interruptions"))
    elif s.has("failures") or site_interruptions is None:
        s.raw("interruptions")
        fl = s.section("failures")
        rate = fl.number("rate_per_gpu_h", 0.0, hi=1.0)
        restart = fl.number("restart_s", 600.0 if rate else 0.0)
        fl.finish()
        return None, rate, restart
    else:
        s.raw("interruptions")
        inter = site_interruptions
    return inter, inter.total_rate_per_gpu_h, inter.restart_s


def _job(s: Section, hw: Hardware, index: int,
         site_interruptions: InterruptionModel | None = None) -> Job:
    name = s.string("name", f"job{index}")
    if not name.isprintable() or len(name) > MAX_NAME_CHARS:
        raise s.error("name", f"expected at most {MAX_NAME_CHARS} printable characters (no "
                      f"control characters such as tab, line breaks or escapes), got "
                      f"{name[:60]!r}")
    gpus = s.integer("gpus", hi=MAX_GPUS)
    start = _time(s, "start_utc")
    duration = s.number("duration_s", required=True, lo=0.0, lo_open=True, hi=MAX_SPAN_S)
    step = s.number("step_time_s", required=True, lo=0.0, lo_open=True)
    frac = s.number("compute_fraction", 0.8, lo=0.0, hi=1.0)
    startup = s.number("startup_s", 0.0)
    shutdown = s.number("shutdown_s", 0.0)
    warmup = s.number("warmup_s", 0.0)
    if startup + shutdown >= duration:
        raise s.error("duration_s", f"{duration:g} s leaves no training time after "
                      f"startup_s ({startup:g}) and shutdown_s ({shutdown:g})")
    jitter = s.number("jitter_s", 0.0)
    if jitter > step:
        # every step ends in a collective, so GPUs of a synchronous job cannot drift a
        # step apart; the engine's offset kernel spans +-4 jitter_s
        raise s.error("jitter_s", f"{jitter:g} s is more than one step (step_time_s = "
                      f"{step:g} s); GPUs of a synchronous job stay within a step")
    ck_int, ck_dur, _ = _pause(s, "checkpoint", step)
    ev_int, ev_dur, ev_first = _pause(s, "eval", step)
    inter, rate, restart = _job_interruptions(s, site_interruptions)
    pw = s.section("power")
    tdp = hw.gpu_tdp_w
    levels = {}
    for key, default in (("compute_w", hw.gpu_compute_w), ("comm_w", hw.gpu_comm_w),
                         ("startup_w", hw.gpu_idle_w),
                         ("checkpoint_w", hw.gpu_idle_w),
                         ("eval_w", 0.5 * (hw.gpu_compute_w + hw.gpu_comm_w)),
                         ("shutdown_w", hw.gpu_idle_w)):
        levels[key] = pw.number(key, default, hi=1.5 * tdp)
    levels["warmup_w"] = pw.number(
        "warmup_w", frac * levels["compute_w"] + (1 - frac) * levels["comm_w"], hi=1.5 * tdp)
    pw.finish()
    job = Job(name=name, gpus=gpus, start_utc=start, duration_s=duration, step_time_s=step,
              compute_fraction=frac, startup_s=startup, shutdown_s=shutdown, warmup_s=warmup,
              jitter_s=jitter, checkpoint_interval_s=ck_int, checkpoint_duration_s=ck_dur,
              eval_interval_s=ev_int, eval_duration_s=ev_dur, eval_first_s=ev_first,
              failure_rate_per_gpu_h=rate, restart_s=restart, interruptions=inter,
              **levels)
    s.finish()
    return job


def _mitigations(s: Section) -> Mitigations:
    battery = None
    if s.has("battery"):
        b = s.section("battery")
        battery = Battery(
            power_megawatts=b.number("power_megawatts", required=True, lo=0.0, lo_open=True,
                                     hi=MAX_SITE_W / 1e6),
            energy_megawatt_hours=b.number("energy_megawatt_hours", required=True, lo=0.0,
                                           lo_open=True, hi=MAX_SITE_W / 1e6 * 24 * 7),
            round_trip_efficiency=b.number("round_trip_efficiency", 0.9, lo=0.0,
                                           lo_open=True, hi=1.0),
            window_s=b.number("window_s", 60.0, lo=0.0, lo_open=True, hi=86400.0),
            initial_soc_fraction=b.number("initial_soc_fraction", 0.5, hi=1.0),
            soc_min_fraction=b.number("soc_min_fraction", 0.0, hi=1.0),
            soc_max_fraction=b.number("soc_max_fraction", 1.0, hi=1.0),
            converter_response_s=b.number("converter_response_s", 0.0, hi=60.0),
        )
        if not (battery.soc_min_fraction <= battery.initial_soc_fraction
                <= battery.soc_max_fraction) or battery.soc_min_fraction >= \
                battery.soc_max_fraction:
            raise b.error("initial_soc_fraction", "needs soc_min_fraction <= "
                          "initial_soc_fraction <= soc_max_fraction, with min < max")
        b.finish()
    else:
        s.raw("battery")
    m = Mitigations(
        gpu_power_floor_pct_tdp=s.number("gpu_power_floor_pct_tdp", 0.0, hi=100.0),
        gpu_ramp_limit_w_per_s=s.number("gpu_ramp_limit_w_per_s", 0.0, hi=MAX_GPU_W * 1000),
        stagger_starts_s=s.number("stagger_starts_s", 0.0, hi=MAX_SPAN_S),
        battery=battery,
    )
    s.finish()
    return m


def _title(top: Section) -> tuple[str, str]:
    """Step: the scenario's ``name`` (printable, bounded) and ``description``."""
    name = top.string("name", "scenario")
    if not name.isprintable() or len(name) > MAX_NAME_CHARS:
        raise top.error("name", f"expected at most {MAX_NAME_CHARS} printable characters, "
                        f"got {name[:60]!r}")
    return name, top.string("description", "")


def _jobs(top: Section, hw: Hardware, src: str | None) -> list[Job]:
    """Step: the ``jobs:`` list (each with the scenario-level ``interruptions:`` unless
    it has its own), names unique."""
    jobs_raw = top.raw("jobs")
    if not isinstance(jobs_raw, list) or not jobs_raw:
        raise ScenarioError("expected a non-empty list of jobs", key="jobs", path=src)
    site_inter = (parse_interruptions(top.section("interruptions"))
                  if top.has("interruptions") else top.raw("interruptions"))
    jobs = [_job(Section(j, f"jobs[{i}]", src), hw, i, site_inter)
            for i, j in enumerate(jobs_raw)]
    names = [j.name for j in jobs]
    for i, n in enumerate(names):
        if names.index(n) != i:
            raise ScenarioError(f"duplicate job name {n!r}", key=f"jobs[{i}].name", path=src)
    return jobs


def _cluster(hw: Hardware, jobs: list[Job], src: str | None) -> Hardware:
    """Step: the hardware with ``cluster_gpus`` (default: the jobs' GPUs, which occupy
    disjoint GPUs and must fit)."""
    total = sum(j.gpus for j in jobs)
    if hw.cluster_gpus == 0:
        return dataclasses.replace(hw, cluster_gpus=total)
    if hw.cluster_gpus < total:
        raise ScenarioError(f"{hw.cluster_gpus} GPUs cannot hold the jobs' {total} GPUs "
                            "(jobs occupy disjoint GPUs)", key="hardware.cluster_gpus",
                            path=src)
    return hw


def _horizon(hz: Section) -> tuple[pd.Timestamp | None, pd.Timestamp | None]:
    """Step: the ``horizon:`` section's start and end (None: the span of the jobs)."""
    h0 = _time(hz, "start_utc", required=False)
    h1 = _time(hz, "end_utc", required=False)
    if h0 is not None and h1 is not None and h1 <= h0:
        raise hz.error("end_utc", f"{h1} is not after horizon.start_utc {h0}")
    hz.finish()
    return h0, h1


def _tick(sim: Section, jobs: list[Job], src: str | None) -> float:
    """Step: the engine tick (``simulation.tick_s``), at most half of every step."""
    tick = sim.number("tick_s", 0.1, lo=0.001, hi=60.0)
    sim.finish()
    for i, j in enumerate(jobs):
        if j.step_time_s < 2 * tick:
            raise ScenarioError(f"step_time_s = {j.step_time_s:g} s needs at least two "
                                f"engine ticks (simulation.tick_s = {tick:g} s)",
                                key=f"jobs[{i}].step_time_s", path=src)
    return tick


def _check_span(scen: Scenario, src: str | None) -> None:
    """Step: the horizon is not empty, holds every disturbance and spans at most
    :data:`MAX_SPAN_S`."""
    if scen.end_utc <= scen.start_utc:
        raise ScenarioError("the horizon is empty", key="horizon", path=src)
    for i, sag in enumerate(scen.disturbances):
        if not scen.start_utc <= sag.at_utc < scen.end_utc:
            raise ScenarioError(f"{sag.at_utc} is outside the horizon ({scen.start_utc} "
                                f"to {scen.end_utc})", key=f"disturbances[{i}].at_utc",
                                path=src)
    span = (scen.end_utc - scen.start_utc).total_seconds()
    if span > MAX_SPAN_S:
        raise ScenarioError(f"the horizon spans {span / 86400:,.0f} days, more than "
                            f"{MAX_SPAN_S / 86400:.0f}; set horizon.start_utc/end_utc",
                            key="horizon", path=src)


def parse_scenario(source: str | Mapping, *, path: str | Path | None = None) -> Scenario:
    """Build a :class:`Scenario` from YAML text or an already-parsed mapping.

    Parameters
    ----------
    source : str or mapping
        YAML document text, or the mapping it parses to.
    path : str or Path, optional
        File the text came from, for error messages.

    Returns
    -------
    Scenario

    Raises
    ------
    ScenarioError
        Naming the key path (``jobs[2].checkpoint.interval_s``) and what was expected.

    Notes
    -----
    The sections are read in this order, each by the module of its concept: ``name``,
    ``site`` (:func:`~powerlab.site.facility.parse_site`), ``hardware``
    (:func:`~powerlab.site.hardware.parse_hardware`), ``jobs`` and ``interruptions``
    (:func:`~powerlab.reliability.interruptions.parse_interruptions`), ``mitigations``,
    ``limits`` (:func:`~powerlab.limits.scenario_limits.parse_limits`), ``horizon``,
    ``simulation``, ``disturbances`` (:func:`~powerlab.site.disturbances.parse_disturbances`).
    """
    src = None if path is None else str(path)
    data = load_yaml(source, source=src) if isinstance(source, str) else source
    top = Section(data, "", src)
    name, description = _title(top)
    site = parse_site(top.section("site"))
    hw = parse_hardware(top.section("hardware"))
    jobs = _jobs(top, hw, src)
    hardware = _cluster(hw, jobs, src)
    mit = _mitigations(top.section("mitigations"))
    lim = parse_limits(top.section("limits"))
    h0, h1 = _horizon(top.section("horizon"))
    tick = _tick(top.section("simulation"), jobs, src)
    dist = parse_disturbances(top.raw("disturbances"), src)
    equipment = Section(top.raw("equipment"), "equipment", src).data or None  # a mapping
    top.finish()
    scen = Scenario(disturbances=dist, equipment=equipment, name=name, description=description, site=site,
                    hardware=hardware, jobs=tuple(jobs), mitigations=mit, limits=lim,
                    horizon_start_utc=h0, horizon_end_utc=h1, tick_s=tick, source=src)
    _check_span(scen, src)
    return scen


def read_scenario(path: str | Path) -> Scenario:
    """Read a scenario YAML file.

    Parameters
    ----------
    path : str or Path
        The YAML file.

    Returns
    -------
    Scenario
    """
    p = Path(path)
    return parse_scenario(read_yaml_text(p, what="scenario file"), path=p)
