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
            startup_s, shutdown_s, jitter_s,
            checkpoint: {interval_s, duration_s}, eval: {interval_s, duration_s},
            failures: {rate_per_gpu_h, restart_s} | interruptions: {...},
            power: {compute_w, comm_w, startup_w, checkpoint_w, eval_w, shutdown_w}}]
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
    limits: {boundary, ramp_up_megawatts_per_s, ramp_down_megawatts_per_s,
             swing_1s_megawatts, swing_10s_megawatts, swing_60s_megawatts,
             band_0p1_2hz_megawatts, band_2_20hz_megawatts}
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._options import choice, renamed_attribute, renamed_keywords
from ..exceptions import ScenarioError
from ..limits.yamlspec import Section, load_yaml
from ..reliability.interruptions import InterruptionModel, parse_interruptions
from .disturbances import VoltageSag, parse_disturbances

__all__ = [
    "BOUNDARIES",
    "Battery",
    "CoolingModel",
    "Hardware",
    "Job",
    "Limits",
    "Mitigations",
    "Scenario",
    "Site",
    "parse_scenario",
    "read_scenario",
]


# --------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class CoolingModel:
    """PUE that rises with the outdoor (ambient) temperature.

    ``pue(T) = pue_at_reference + pue_per_c * max(0, T - reference_temp_c)`` with a daily
    cosine ambient temperature peaking at ``ambient_peak_hour_local`` (site local time).

    Attributes
    ----------
    pue_at_reference : float
        PUE at or below the reference temperature [-].
    reference_temp_c : float
        Ambient temperature above which free cooling stops being enough [degC].
    pue_per_c : float
        PUE increase per degree above the reference [1/degC].
    ambient_mean_c : float
        Daily mean ambient temperature [degC].
    ambient_amplitude_c : float
        Half the daily peak-to-trough swing of the ambient temperature [degC].
    ambient_peak_hour_local : float
        Local hour of the daily maximum [h].
    """

    pue_at_reference: float = 1.15
    reference_temp_c: float = 18.0
    pue_per_c: float = 0.01
    ambient_mean_c: float = 20.0
    ambient_amplitude_c: float = 5.0
    ambient_peak_hour_local: float = 15.0

    def ambient_temp_c(self, timestamps: pd.DatetimeIndex, tz: str) -> np.ndarray:
        """Ambient temperature at ``timestamps`` (tz-aware) [degC]."""
        local = timestamps.tz_convert(tz)
        hour = np.asarray(local.hour + local.minute / 60.0 + local.second / 3600.0, float)
        return self.ambient_mean_c + self.ambient_amplitude_c * np.cos(
            2 * np.pi * (hour - self.ambient_peak_hour_local) / 24.0)

    def pue(self, timestamps: pd.DatetimeIndex, tz: str) -> np.ndarray:
        """PUE at ``timestamps`` [-]."""
        temp = self.ambient_temp_c(timestamps, tz)
        return self.pue_at_reference + self.pue_per_c * np.maximum(
            0.0, temp - self.reference_temp_c)


@dataclass(frozen=True)
class Site:
    """The datacenter: time zone, cooling overhead and non-IT base load.

    Attributes
    ----------
    tz : str
        IANA time zone of the site (for the cooling model's daily cycle).
    pue : float or None
        Constant power usage effectiveness [-]; ``None`` when ``cooling`` is given.
    cooling : CoolingModel or None
        Temperature-dependent PUE.
    base_load_w : float
        Non-IT load that does not scale with IT power (offices, lighting, UPS idle) [W].
    electrical_loss_fraction : float
        UPS, transformer and distribution losses as a fraction of IT power, following
        it instantly [-]; part of the PUE.
    cooling_time_constant_s : float
        First-order time constant of the cooling plant's power following the heat load
        (chillers, pumps, CRAH fans: minutes) [s].

    The PUE (``pue`` or ``cooling``) is the *steady-state* ratio at a constant IT load;
    the facility model (:mod:`powerlab.site.facility`) splits it into instantaneous
    electrical losses and a cooling power that lags the heat, and reports the realised
    PUE as an output.
    """

    tz: str = "UTC"
    pue: float | None = 1.2
    cooling: CoolingModel | None = None
    base_load_w: float = 0.0
    electrical_loss_fraction: float = 0.04
    cooling_time_constant_s: float = 300.0

    def pue_at(self, timestamps: pd.DatetimeIndex) -> np.ndarray:
        """PUE at each timestamp [-]."""
        if self.cooling is not None:
            return self.cooling.pue(timestamps, self.tz)
        return np.full(len(timestamps), float(self.pue))


@dataclass(frozen=True)
class Hardware:
    """GPU power levels and node composition.

    Attributes
    ----------
    gpu_model : str
        Name, for reports.
    gpu_idle_w, gpu_compute_w, gpu_comm_w, gpu_tdp_w : float
        Per-GPU power when idle, in the compute part of a step, waiting on
        communication, and the thermal design power [W].
    gpus_per_node : int
        GPUs in one node.
    node_overhead_w : float
        Node power besides its GPUs (CPUs, NICs, fans, PSU losses) [W].
    cluster_gpus : int
        GPUs in the cluster; those in no job draw idle power (default: jobs' sum).
    gpu_rise_time_constant_s, gpu_fall_time_constant_s : float
        First-order time constants of a GPU's power rising and falling between levels
        (0: instantaneous steps); defaults and sources in
        :mod:`powerlab.site.transients` [s].
    """

    gpu_model: str = "H100-SXM"
    gpu_idle_w: float = 75.0
    gpu_compute_w: float = 650.0
    gpu_comm_w: float = 250.0
    gpu_tdp_w: float = 700.0
    gpus_per_node: int = 8
    node_overhead_w: float = 2500.0
    cluster_gpus: int = 0
    gpu_rise_time_constant_s: float = 0.03
    gpu_fall_time_constant_s: float = 0.03

    @property
    def nodes(self) -> int:
        """Number of nodes powered [-]."""
        return math.ceil(self.cluster_gpus / self.gpus_per_node)


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
    jitter_s : float
        Standard deviation of the per-GPU timing offset (desynchronisation), at most
        ``step_time_s`` [s].
    checkpoint_interval_s, checkpoint_duration_s : float
        Training time between checkpoints (0: none) and their length [s].
    eval_interval_s, eval_duration_s : float
        Training time between evaluations (0: none) and their length [s].
    failure_rate_per_gpu_h : float
        Interruptions per GPU-hour; the job fails at ``gpus`` times this rate [1/h].
    restart_s : float
        Time from a failure to the start of re-initialisation [s].
    interruptions : InterruptionModel or None
        Rates by cause, planned interruptions and the recovery split
        (:mod:`powerlab.reliability.interruptions`); when given, ``failure_rate_per_gpu_h`` is
        its total rate and ``restart_s`` its detection + drain + reschedule.
    compute_w, comm_w, startup_w, checkpoint_w, eval_w, shutdown_w : float
        Per-GPU power in each phase [W].
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
    jitter_s: float = 0.0
    checkpoint_interval_s: float = 0.0
    checkpoint_duration_s: float = 0.0
    eval_interval_s: float = 0.0
    eval_duration_s: float = 0.0
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


#: Where the power of a site is taken (issue 26: ``boundary``, not ``scope``, which names
#: telemetry rows): ``"facility"``, the point of interconnection (IT load, its electrical
#: losses, cooling and base load), or ``"it"``, the IT load alone.
BOUNDARIES = ("facility", "it")


@dataclass(frozen=True)
class Limits:
    """Limits the utility or the site sets; 0 means no limit.

    Attributes
    ----------
    boundary : str
        ``"facility"`` (the point of interconnection) or ``"it"``: which power the limits
        apply to (YAML key ``boundary``; the old name ``scope`` is accepted, deprecated).
    ramp_up_megawatts_per_s, ramp_down_megawatts_per_s : float
        Largest allowed rise and fall rates [MW/s].
    swing_1s_megawatts, swing_10s_megawatts, swing_60s_megawatts : float
        Largest allowed max-minus-min within any 1 s, 10 s, 60 s window [MW].
    band_0p1_2hz_megawatts, band_2_20hz_megawatts : float
        Largest allowed RMS amplitude of the oscillation in the 0.1-2 Hz and 2-20 Hz
        bands [MW].
    """

    boundary: str = "facility"
    ramp_up_megawatts_per_s: float = 0.0
    ramp_down_megawatts_per_s: float = 0.0
    swing_1s_megawatts: float = 0.0
    swing_10s_megawatts: float = 0.0
    swing_60s_megawatts: float = 0.0
    band_0p1_2hz_megawatts: float = 0.0
    band_2_20hz_megawatts: float = 0.0

    scope = renamed_attribute("boundary")     # the old name, for one release


Limits.__init__ = renamed_keywords(scope="boundary")(Limits.__init__)

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

#: Bounds on sizes that no real site reaches, so that a typo fails before any allocation.
MAX_NAME_CHARS = 200            # a job or scenario name (it lands in CSV cells and reports)
MAX_GPUS = 10_000_000          # the largest announced sites hold ~1M GPUs
MAX_SPAN_S = 366 * 86400.0     # a forecast horizon or job allocation of at most a year
# Upper bounds that catch typos (a unit slip of 1000x), far above any real site:
MAX_SITE_W = 10e9               # 10 GW: the largest announced AI campuses are ~1-5 GW
MAX_GPU_W = 5000.0              # one accelerator package (B200/GB200: 1.0-1.2 kW)
MAX_GPUS_PER_NODE = 1024        # a "node" may be a whole rack (NVL72: 72 GPUs)
MAX_NODE_OVERHEAD_W = 200_000.0  # non-GPU power of one node or rack (NVL72 rack ~ 20-30 kW)
YEARS = (1970, 2200)           # timestamps of a forecast


def _time(s: Section, name: str, required: bool = True) -> pd.Timestamp | None:
    """A UTC timestamp between the years of :data:`YEARS`."""
    try:
        ts = s.timestamp(name, required=required)
    except (OverflowError, pd.errors.OutOfBoundsDatetime):
        ts = pd.Timestamp(f"{YEARS[1] + 1}-01-01", tz="UTC")
    if ts is not None and not YEARS[0] <= ts.year <= YEARS[1]:
        raise s.error(name, f"the year must be between {YEARS[0]} and {YEARS[1]}, got "
                      f"{s.data.get(name)!r}")
    return ts



def _site(s: Section) -> Site:
    tz = s.string("tz", "UTC")
    try:
        pd.Timestamp("2024-01-01", tz=tz)
    except Exception:  # noqa: BLE001 - pandas raises several types for bad zones
        raise s.error("tz", f"unknown time zone {tz!r}; use an IANA name such as "
                      "'America/New_York'") from None
    cooling = None
    pue = None
    if s.has("cooling"):
        if s.has("pue"):
            raise s.error("pue", "give either a constant 'pue' or a 'cooling' model, "
                          "not both")
        c = s.section("cooling")
        cooling = CoolingModel(
            pue_at_reference=c.number("pue_at_reference", 1.15, lo=1.0),
            reference_temp_c=c.number("reference_temp_c", 18.0, lo=-50.0, hi=60.0),
            pue_per_c=c.number("pue_per_c", 0.01, lo=0.0, hi=1.0),
            ambient_mean_c=c.number("ambient_mean_c", 20.0, lo=-60.0, hi=60.0),
            ambient_amplitude_c=c.number("ambient_amplitude_c", 5.0, lo=0.0, hi=40.0),
            ambient_peak_hour_local=c.number("ambient_peak_hour_local", 15.0, lo=0.0,
                                             hi=24.0),
        )
        c.finish()
    else:
        pue = s.number("pue", 1.2, lo=1.0, hi=5.0)
    lowest = cooling.pue_at_reference if cooling is not None else pue
    # default 0.04, but never more than the PUE's overhead (pue: 1.0 means IT only)
    loss = s.number("electrical_loss_fraction", min(0.04, lowest - 1.0), lo=0.0, hi=0.5)
    if lowest < 1.0 + loss - 1e-12:
        raise s.error("electrical_loss_fraction",
                      f"electrical losses of {loss:g} x IT do not fit in a PUE of "
                      f"{lowest:g}; set site.electrical_loss_fraction <= {lowest - 1:g}")
    site = Site(tz=tz, pue=pue, cooling=cooling,
                base_load_w=s.number("base_load_w", 0.0, hi=MAX_SITE_W),
                electrical_loss_fraction=loss,
                cooling_time_constant_s=s.number("cooling_time_constant_s", 300.0,
                                                 lo=0.0, hi=86400.0))
    s.finish()
    return site


def _hardware(s: Section) -> dict:
    hw = {
        "gpu_model": s.string("gpu_model", "H100-SXM"),
        "gpu_idle_w": s.number("gpu_idle_w", 75.0),
        "gpu_compute_w": s.number("gpu_compute_w", 650.0),
        "gpu_comm_w": s.number("gpu_comm_w", 250.0),
        "gpu_tdp_w": s.number("gpu_tdp_w", 700.0, lo=0.0, lo_open=True, hi=MAX_GPU_W),
        "gpus_per_node": s.integer("gpus_per_node", 8, hi=MAX_GPUS_PER_NODE),
        "node_overhead_w": s.number("node_overhead_w", 2500.0, hi=MAX_NODE_OVERHEAD_W),
        "cluster_gpus": s.integer("cluster_gpus", 0, lo=0, hi=MAX_GPUS),
        "gpu_rise_time_constant_s": s.number("gpu_rise_time_constant_s", 0.03, lo=0.0,
                                             hi=10.0),
        "gpu_fall_time_constant_s": s.number("gpu_fall_time_constant_s", 0.03, lo=0.0,
                                             hi=10.0),
    }
    for k in ("gpu_idle_w", "gpu_compute_w", "gpu_comm_w"):
        if hw[k] > 1.5 * hw["gpu_tdp_w"]:
            raise s.error(k, f"{hw[k]:g} W is above 1.5 x gpu_tdp_w ({hw['gpu_tdp_w']:g} W)")
    s.finish()
    return hw


def _pause(s: Section, name: str, step: float) -> tuple[float, float]:
    """A periodic pause of training (``checkpoint``, ``eval``): ``interval_s`` of training
    between pauses (0: none; at least one step) and ``duration_s`` of each [s]."""
    sec = s.section(name)
    interval = sec.number("interval_s", 0.0)
    duration = sec.number("duration_s", 0.0)
    if interval and interval < step:
        raise sec.error("interval_s", f"{interval:g} s is shorter than one step "
                        f"(step_time_s = {step:g} s)")
    sec.finish()
    return interval, duration


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


def _job(s: Section, hw: dict, index: int,
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
    if startup + shutdown >= duration:
        raise s.error("duration_s", f"{duration:g} s leaves no training time after "
                      f"startup_s ({startup:g}) and shutdown_s ({shutdown:g})")
    jitter = s.number("jitter_s", 0.0)
    if jitter > step:
        # every step ends in a collective, so GPUs of a synchronous job cannot drift a
        # step apart; the engine's offset kernel spans +-4 jitter_s
        raise s.error("jitter_s", f"{jitter:g} s is more than one step (step_time_s = "
                      f"{step:g} s); GPUs of a synchronous job stay within a step")
    ck_int, ck_dur = _pause(s, "checkpoint", step)
    ev_int, ev_dur = _pause(s, "eval", step)
    inter, rate, restart = _job_interruptions(s, site_interruptions)
    pw = s.section("power")
    tdp = hw["gpu_tdp_w"]
    levels = {}
    for key, default in (("compute_w", hw["gpu_compute_w"]), ("comm_w", hw["gpu_comm_w"]),
                         ("startup_w", hw["gpu_idle_w"]),
                         ("checkpoint_w", hw["gpu_idle_w"]),
                         ("eval_w", 0.5 * (hw["gpu_compute_w"] + hw["gpu_comm_w"])),
                         ("shutdown_w", hw["gpu_idle_w"])):
        levels[key] = pw.number(key, default, hi=1.5 * tdp)
    pw.finish()
    job = Job(name=name, gpus=gpus, start_utc=start, duration_s=duration, step_time_s=step,
              compute_fraction=frac, startup_s=startup, shutdown_s=shutdown,
              jitter_s=jitter, checkpoint_interval_s=ck_int, checkpoint_duration_s=ck_dur,
              eval_interval_s=ev_int, eval_duration_s=ev_dur,
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


def _limits(s: Section) -> Limits:
    s.renamed("scope", "boundary")
    boundary = s.string("boundary", "facility")
    choice(boundary, None, BOUNDARIES, error=lambda m: s.error("boundary", m))
    kw = {f.name: s.number(f.name, 0.0, hi=MAX_SITE_W / 1e6) for f in dataclasses.fields(Limits)
          if f.name != "boundary"}
    s.finish()
    return Limits(boundary=boundary, **kw)


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
    """
    src = None if path is None else str(path)
    if isinstance(source, str):
        data = load_yaml(source, source=src)
    else:
        data = source
    top = Section(data, "", src)
    name = top.string("name", "scenario")
    if not name.isprintable() or len(name) > MAX_NAME_CHARS:
        raise top.error("name", f"expected at most {MAX_NAME_CHARS} printable characters, "
                        f"got {name[:60]!r}")
    description = top.string("description", "")
    site = _site(top.section("site"))
    hw = _hardware(top.section("hardware"))
    jobs_raw = top.raw("jobs")
    if not isinstance(jobs_raw, list) or not jobs_raw:
        raise ScenarioError("expected a non-empty list of jobs", key="jobs", path=src)
    site_inter = (parse_interruptions(top.section("interruptions"))
                  if top.has("interruptions") else top.raw("interruptions"))
    jobs = []
    for i, j in enumerate(jobs_raw):
        jobs.append(_job(Section(j, f"jobs[{i}]", src), hw, i, site_inter))
    names = [j.name for j in jobs]
    for i, n in enumerate(names):
        if names.index(n) != i:
            raise ScenarioError(f"duplicate job name {n!r}", key=f"jobs[{i}].name", path=src)
    total = sum(j.gpus for j in jobs)
    if hw["cluster_gpus"] == 0:
        hw["cluster_gpus"] = total
    elif hw["cluster_gpus"] < total:
        raise ScenarioError(f"{hw['cluster_gpus']} GPUs cannot hold the jobs' {total} GPUs "
                            "(jobs occupy disjoint GPUs)", key="hardware.cluster_gpus",
                            path=src)
    hardware = Hardware(**hw)
    mit = _mitigations(top.section("mitigations"))
    lim = _limits(top.section("limits"))
    hz = top.section("horizon")
    h0 = _time(hz, "start_utc", required=False)
    h1 = _time(hz, "end_utc", required=False)
    if h0 is not None and h1 is not None and h1 <= h0:
        raise hz.error("end_utc", f"{h1} is not after horizon.start_utc {h0}")
    hz.finish()
    sim = top.section("simulation")
    tick = sim.number("tick_s", 0.1, lo=0.001, hi=60.0)
    sim.finish()
    for i, j in enumerate(jobs):
        if j.step_time_s < 2 * tick:
            raise ScenarioError(f"step_time_s = {j.step_time_s:g} s needs at least two "
                                f"engine ticks (simulation.tick_s = {tick:g} s)",
                                key=f"jobs[{i}].step_time_s", path=src)
    dist = parse_disturbances(top.raw("disturbances"), src)
    top.finish()
    scen = Scenario(disturbances=dist, name=name, description=description, site=site, hardware=hardware,
                    jobs=tuple(jobs), mitigations=mit, limits=lim, horizon_start_utc=h0,
                    horizon_end_utc=h1, tick_s=tick, source=src)
    if scen.end_utc <= scen.start_utc:
        raise ScenarioError("the horizon is empty", key="horizon", path=src)
    for i, sag in enumerate(dist):
        if not scen.start_utc <= sag.at_utc < scen.end_utc:
            raise ScenarioError(f"{sag.at_utc} is outside the horizon ({scen.start_utc} "
                                f"to {scen.end_utc})", key=f"disturbances[{i}].at_utc",
                                path=src)
    span = (scen.end_utc - scen.start_utc).total_seconds()
    if span > MAX_SPAN_S:
        raise ScenarioError(f"the horizon spans {span / 86400:,.0f} days, more than "
                            f"{MAX_SPAN_S / 86400:.0f}; set horizon.start_utc/end_utc",
                            key="horizon", path=src)
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
    from ..limits.yamlspec import read_yaml_text

    p = Path(path)
    return parse_scenario(read_yaml_text(p, what="scenario file"), path=p)
