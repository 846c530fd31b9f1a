"""Calibrate a scenario job from a recording: :func:`calibrate_job`.

From one job's node (or GPU) power telemetry and, optionally, its training log, this
fits the job's power profile (:func:`powerlab.calibration.profile.fit_profile`: levels with
their uncertainty, step period, duty cycle, step dip, evaluations) and its start-up, and
turns it into a scenario ``jobs:`` entry plus the ``hardware:`` block it implies
(:meth:`Calibration.scenario_spec`, :meth:`Calibration.to_yaml`), commented with where
each number came from and what is a prior.  ``powerlab forecast`` runs the YAML unchanged:
it replays the recorded job (same start, duration, GPUs) through the calibrated model.

Rules (the same for every recording; nothing is tuned per workload)
------------------------------------------------------------------
- **Job start**: the log's ``run_start`` (else the first reading of the window).
- **Start-up**: from the job start until the summed node power first reaches 90 % of its
  median over the window (the job's training level); its mean power is the start-up
  level.  Shorter than one meter interval: no start-up.
- **Training**: ``fit_profile`` on the readings from the end of the start-up to the end
  of the window, with the log's evaluations inside the window; the meter interval is the
  readings' median spacing (``attrs["meter_interval_s"]`` of
  :func:`powerlab.iotools.read_mlperf_power`) unless given.
- **Evaluations too short for the meter** (no reading wholly inside one): their level is
  the mean of the readings that overlap them, which is what the meter shows of them.
- **Node power is not split** into GPU and non-GPU parts without evidence (an idle period,
  hardware data): per-GPU levels are the node's shares, ``node_overhead_w: 0``, and
  ``gpu_tdp_w`` is set just high enough for the shares to validate (it is then not a
  TDP).  :meth:`Calibration.notes` says so.
- **Periodic step**: claimed only when Fisher's exact g-test [1]_ on the periodogram of
  the summed training readings finds a line (p < 0.01), the fitted step has a dip
  (positive dip energy) and the window holds at least 8 steps; otherwise the step
  period, duty cycle and dip are not evidence of anything and the notes say so
  (``has_periodic_step``).  (Real power has more slow variation than white noise, so the
  g-test alone finds "lines" at periods of minutes.)
- **One-time costs** (:func:`~powerlab.calibration.profile.fit_profile`, *One-time costs*): with
  two or more evaluations in the window, the evaluation duration and level come from the
  evaluations after the first (the first may carry set-up); when the training after the
  first evaluation holds enough readings, the training levels come from there (the first
  block includes warm-up).  The start-up is still measured from the first block.  The
  YAML comments say where a rule applied.
- **A single evaluation** in the window: the evaluation interval is the training time
  before it (from the end of the start-up or of the previous evaluation), a prior that
  evaluations are periodic; the source says so.

References
----------
.. [1] R. A. Fisher, "Tests of significance in harmonic analysis", Proc. Royal Society
   A 125, 54-59, 1929.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import signal

from .._summary import Summary
from ..exceptions import AnalysisError, PowerlabError
from .profile import eval_intervals, fit_profile
from .profile_fit import ProfileFit

__all__ = ["Calibration", "calibrate_job", "fisher_g_test", "run_window", "summed_readings"]

#: Fraction of the training level at which the start-up ends [-].
STARTUP_LEVEL_FRACTION = 0.9
#: Significance level of the periodic-step test [-].
PERIODIC_ALPHA = 0.01
#: Steps the calibration window must hold for a periodic step to be claimed [-].
MIN_STEPS = 8
#: grid of the summed readings for the start-up [s]
_GRID_S = 0.1


def summed_readings(telemetry: pd.DataFrame, *, every_s: float = 0.1, start=None,
                    end=None) -> pd.Series:
    """Sum over devices of each device's last reading, on a ``every_s`` grid [W].

    What a SCADA adding the node meters shows (see :func:`powerlab.calibration.meter.sum_meters`,
    which this calls with one meter per host and GPU).
    """
    from .meter import sum_meters

    df = telemetry[["timestamp", "host", "power_w"]].copy()
    if "gpu_index" in telemetry and telemetry["gpu_index"].notna().any():
        df["host"] = (telemetry["host"].astype(str) + "/"
                      + telemetry["gpu_index"].astype("string").fillna(""))
    return sum_meters(df, every_s=every_s, start=start, end=end)


def fisher_g_test(x: np.ndarray) -> tuple[float, int]:
    """Fisher's exact test for a periodic component in an evenly sampled series.

    ``g = max_k I(f_k) / sum_k I(f_k)`` over the Fourier frequencies ``0 < f_k < 1/2``;
    under Gaussian white noise ``P(g > x) = sum_{j=1}^{b} (-1)^(j-1) C(m, j)
    (1 - j x)^(m-1)``, ``m`` the number of frequencies and ``b = floor(1/x)`` [1]_.

    Returns
    -------
    p_value : float
    k : int
        Index of the largest ordinate (frequency ``k / len(x)``).
    """
    x = np.asarray(x, float)
    x = signal.detrend(x[np.isfinite(x)])
    n = len(x)
    if n < 8:
        return 1.0, 0
    m = (n - 1) // 2
    i = np.abs(np.fft.rfft(x)[1:m + 1]) ** 2
    if i.sum() <= 0:
        return 1.0, 0
    g = float(i.max() / i.sum())
    b = math.floor(1.0 / g)
    p = 0.0
    for j in range(1, min(b, m) + 1):
        term = math.comb(m, j) * (1.0 - j * g) ** (m - 1)
        p += term if j % 2 else -term
        if term < 1e-300:
            break
    return float(min(max(p, 0.0), 1.0)), int(np.argmax(i)) + 1


@dataclass
class Calibration:
    """A job calibrated from a recording (see :func:`calibrate_job`).

    Attributes
    ----------
    fit : ProfileFit
        The training profile.
    job_start : Timestamp
        When the job started (UTC).
    job_end : Timestamp
        End of the calibration window (UTC).
    training_start : Timestamp
        End of the start-up (UTC).
    startup_s : float
        Start-up duration [s].
    device_startup_w : float
        Mean power of one device (node) during the start-up [W]; ``nan`` without one.
    devices : int
        Nodes (or GPUs, for GPU scope) in the recording.
    meter_interval_s : float
        Interval of the readings [s].
    periodic_p_value : float
        Fisher's g-test p-value for a periodic step in the summed training readings.
    eval_source : str
        Where the evaluation level came from.
    sources : dict
        Field -> where its value comes from (written as YAML comments).
    """

    fit: ProfileFit
    job_start: pd.Timestamp
    job_end: pd.Timestamp
    training_start: pd.Timestamp
    startup_s: float
    device_startup_w: float
    devices: int
    meter_interval_s: float
    periodic_p_value: float
    eval_source: str
    device_eval_w: float
    sources: dict = field(default_factory=dict)

    @property
    def has_periodic_step(self) -> bool:
        """Whether the readings show a periodic step: the g-test's p < 0.01, a dip (the
        step's energy below its compute level is positive) and at least
        :data:`MIN_STEPS` steps in the training part of the window."""
        f = self.fit
        train_s = (self.job_end - self.training_start).total_seconds()
        return bool(self.periodic_p_value < PERIODIC_ALPHA and f.step_dip_energy_j > 0
                    and train_s >= MIN_STEPS * f.step_time_s)

    @property
    def gpus(self) -> int:
        """GPUs of the job [-]."""
        f = self.fit
        return self.devices * (f.gpus_per_node if f.scope == "node" else 1)

    def hardware(self) -> dict:
        """The scenario ``hardware:`` block this calibration implies."""
        hw = {k: float(v) if k != "gpus_per_node" else int(v)
              for k, v in self.fit.hardware_kwargs().items()}
        job = self.job()
        top = max(job["power"].values())
        # with node power shared among the GPUs, a share can exceed a GPU's TDP; the
        # scenario caps levels at 1.5 x gpu_tdp_w, so the TDP is set to let them pass
        hw["gpu_tdp_w"] = float(max(700.0, math.ceil(top / 1.5 / 10.0) * 10.0))
        hw["gpu_idle_w"] = float(min(job["power"].get("startup_w", 75.0), hw["gpu_tdp_w"]))
        return hw

    def job(self, *, name: str = "calibrated", start=None, duration_s: float | None = None
            ) -> dict:
        """The scenario ``jobs:`` entry (per-GPU levels as the node's shares without a
        split)."""
        f = self.fit
        kw = f.job_kwargs()
        share = f.gpus_per_node if (f.scope == "node" and not f.has_split) else 1
        over = 0.0 if not f.has_split or f.scope == "gpu" else f.node_overhead_w
        out = {"name": name, "gpus": self.gpus,
               "start_utc": pd.Timestamp(start if start is not None else self.job_start
                                         ).isoformat(),
               "duration_s": float(duration_s if duration_s is not None else
                                   (self.job_end - self.job_start).total_seconds()),
               "step_time_s": float(kw["step_time_s"]),
               "compute_fraction": float(min(kw["compute_fraction"], 1.0)),
               "power": {k: float(v) for k, v in kw["power"].items()}}
        if not self.has_periodic_step:
            # no step to model: a flat training level on a short step, so that intervals
            # (rounded to whole steps by the engine) keep their length
            flat = float((f.device_train_mean_w - over) / share)
            out["step_time_s"] = float(min(f.step_time_s, max(1.0, self.meter_interval_s)))
            out["compute_fraction"] = 1.0
            out["power"].update(compute_w=flat, comm_w=flat)
        if self.startup_s > 0:
            out["startup_s"] = float(self.startup_s)
            out["power"]["startup_w"] = float((self.device_startup_w - over) / share)
        if np.isfinite(self.device_eval_w) and np.isfinite(f.eval_interval_s) \
                and f.eval_interval_s >= f.step_time_s:
            out["power"]["eval_w"] = float((self.device_eval_w - over) / share)
            out["eval"] = {"interval_s": float(f.eval_interval_s),
                           "duration_s": float(f.eval_duration_s)}
        else:
            out["power"].pop("eval_w", None)
        return out

    def scenario_spec(self, *, name: str = "calibrated", start=None,
                      duration_s: float | None = None, horizon=None,
                      tick_s: float | None = None) -> dict:
        """A whole scenario (PUE 1, no losses, no base load: IT power is what the node
        meters measure) replaying the job.

        Default ``tick_s`` 0.1 s and a horizon on whole minutes around the job, so that
        the facilities export (``powerlab forecast``) can cut it into clock intervals;
        the engine then rounds the step to whole ticks (a backtest passes a tick that
        cuts the step into whole ticks)."""
        job = self.job(name=name, start=start, duration_s=duration_s)
        tick = tick_s if tick_s is not None else 0.1
        if horizon is None:
            a = pd.Timestamp(job["start_utc"])
            horizon = (a.floor("1min"),
                       (a + pd.Timedelta(seconds=job["duration_s"])).ceil("1min"))
        spec = {"name": f"{name}-replay",
                "horizon": {"start_utc": pd.Timestamp(horizon[0]).isoformat(),
                            "end_utc": pd.Timestamp(horizon[1]).isoformat()},
                "simulation": {"tick_s": float(tick)},
                "site": {"pue": 1.0, "electrical_loss_fraction": 0.0},
                "hardware": {**self.hardware(), "cluster_gpus": self.gpus},
                "jobs": [job]}
        return spec

    def notes(self) -> list[str]:
        """What the data could not tell, in words."""
        out = list(self.fit.notes())
        if not self.has_periodic_step:
            f = self.fit
            steps = (self.job_end - self.training_start).total_seconds() / f.step_time_s
            why = []
            if self.periodic_p_value >= PERIODIC_ALPHA:
                why.append(f"no significant line (Fisher g-test p = "
                           f"{self.periodic_p_value:.2g})")
            if steps < MIN_STEPS:
                why.append(f"only {steps:.1f} steps of {f.step_time_s:.3g} s in the window "
                           f"(< {MIN_STEPS})")
            if not f.step_dip_energy_j > 0:
                why.append("no dip below the compute level")
            out.append(f"no periodic step claimed: {'; '.join(why)}. The job is modelled "
                       "at its flat training mean: energy and levels hold, swings and "
                       "ramps from a step are not forecast.")
        if self.eval_source.startswith("overlapping"):
            out.append("evaluations are shorter than the meter can show: their level is the "
                       "mean of the readings that overlap them, a blurred value.")
        if self.startup_s == 0:
            out.append("no start-up seen (the readings start at training level).")
        return out

    def summary_frame(self) -> pd.DataFrame:
        """The profile fit's table (:meth:`ProfileFit.summary_frame`) and the start-up,
        meter interval and periodic-step test as rows (``value`` and ``unit``)."""
        extra = pd.DataFrame(
            {"value": [self.startup_s, self.device_startup_w, self.meter_interval_s,
                       self.periodic_p_value],
             "unit": ["s", "W", "s", "-"], "source": "calibration"},
            index=["startup_s", "device_startup_w", "meter_interval_s", "periodic_p_value"])
        return pd.concat([self.fit.summary_frame(), extra])

    def summary(self) -> Summary:
        """Summary: the fit, the start-up and the notes."""
        lines = [(f"Calibrated job: {self.gpus} GPUs ({self.devices} {self.fit.scope}s), "
                  f"from {self.job_start} to {self.job_end}"),
                 (f"start-up {self.startup_s:.1f} s at {self.device_startup_w:,.0f} W per "
                  f"{self.fit.scope}; meter interval {self.meter_interval_s:g} s; periodic "
                  f"step p = {self.periodic_p_value:.2g}")]
        s = Summary(float_format="{:,.4g}", width=120)
        s.add_text(lines)
        s.blocks += self.fit.summary().blocks
        notes = [f"Note: {n}" for n in self.notes() if n not in self.fit.notes()]
        if notes:
            s.add_text(notes)
        return s

    def _repr_html_(self) -> str:
        return self.summary().as_html()

    def to_yaml(self, *, name: str = "calibrated", source: str = "telemetry") -> str:
        """The scenario as YAML text, each number commented with its source."""
        spec = self.scenario_spec(name=name)
        src = self.sources
        f = self.fit

        def row(key, val, comment, indent=4):
            v = f"{val:.6g}" if isinstance(val, float) else (
                f'"{val}"' if isinstance(val, str) else str(val))
            return f"{' ' * indent}{key}: {v}" + (f"  # {comment}" if comment else "")

        hw = spec["hardware"]
        job = spec["jobs"][0]
        split = ("node power not split (no idle period or hardware data): per-GPU "
                 f"levels are 1/{f.gpus_per_node} of node power"
                 if f.scope == "node" and not f.has_split else f"split: {f.split}")
        out = [f"# Calibrated by powerlab calibrate from {source}",
               f"# {split}",
               *[f"# NOTE: {n}" for n in self.notes()],
               f"name: {spec['name']}",
               "horizon:",
               row("start_utc", spec["horizon"]["start_utc"], "the job's minute", 2),
               row("end_utc", spec["horizon"]["end_utc"], "", 2),
               "simulation:",
               row("tick_s", spec["simulation"]["tick_s"],
                   "the engine rounds the step to whole ticks", 2),
               "site:",
               row("pue", 1.0, "prior: the recording is IT (node AC) power", 2),
               row("electrical_loss_fraction", 0.0, "prior: none behind the node meters",
                   2),
               "hardware:",
               row("gpus_per_node", hw["gpus_per_node"], "prior: GPUs per node", 2),
               row("node_overhead_w", hw["node_overhead_w"], src.get("node_overhead_w",
                                                                      split), 2),
               row("gpu_tdp_w", hw["gpu_tdp_w"], "not a TDP: lets the per-GPU shares "
                                                 "validate (levels <= 1.5 x tdp)", 2),
               row("gpu_idle_w", hw["gpu_idle_w"], "prior: start-up share (idle is not "
                                                   "measured)", 2),
               row("cluster_gpus", hw["cluster_gpus"], "the job's GPUs", 2),
               "jobs:",
               f"  - name: {job['name']}",
               row("gpus", job["gpus"], src.get("gpus"), 4),
               row("start_utc", job["start_utc"], src.get("start_utc"), 4),
               row("duration_s", job["duration_s"], src.get("duration_s"), 4)]
        if "startup_s" in job:
            out.append(row("startup_s", job["startup_s"], src.get("startup_s"), 4))
        if self.has_periodic_step:
            out += [row("step_time_s", job["step_time_s"], _param_src(f, "step_time_s"), 4),
                    row("compute_fraction", job["compute_fraction"],
                        _param_src(f, "compute_fraction"), 4)]
        else:
            out += [row("step_time_s", job["step_time_s"], "no periodic step: a short "
                        "step at a flat level (see NOTE)", 4),
                    row("compute_fraction", 1.0, "no periodic step: no dip modelled", 4)]
        if "eval" in job:
            out += ["    eval:",
                    row("interval_s", job["eval"]["interval_s"],
                        src.get("eval_interval_s") or _param_src(f, "eval_interval_s"), 6),
                    row("duration_s", job["eval"]["duration_s"],
                        _param_src(f, "eval_duration_s"), 6)]
        out.append("    power:")
        flat = "no periodic step: the training mean, " + _param_src(f, "device_train_mean_w")
        psrc = {"compute_w": _param_src(f, "device_compute_w") if self.has_periodic_step
                else flat,
                "comm_w": _param_src(f, "device_comm_w") if self.has_periodic_step
                else flat,
                "eval_w": self.eval_source, "startup_w": src.get("startup_w")}
        for k, v in job["power"].items():
            out.append(row(k, v, psrc.get(k), 6))
        return "\n".join(out) + "\n"


def _param_src(fit: ProfileFit, name: str) -> str:
    try:
        r = fit.params.loc[name]
    except KeyError:
        return ""
    se = r["std_err"]
    return f"{r['source']}" + (f"; +- {se:.3g} {r['unit']} (1 s.e.)"
                               if np.isfinite(se) else "")


def _run_bounds(events) -> tuple[pd.Timestamp | None, pd.Timestamp | None]:
    ev = getattr(events, "events", events)
    if not isinstance(ev, pd.DataFrame) or "key" not in ev:
        return None, None

    def first(key):
        s = ev.loc[ev["key"] == key, "timestamp"]
        return None if s.empty else s.min()

    return first("run_start"), first("run_stop")


def run_window(telemetry: pd.DataFrame, events=None, *, name: str = "the telemetry",
               events_source: str | None = None) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The run's window: ``run_start`` .. ``run_stop`` of the events where the readings
    cover them (within 30 s), else the readings' span.

    Raises
    ------
    AnalysisError
        The events do not overlap the readings: a log of another run.
    """
    t_lo, t_hi = telemetry["timestamp"].min(), telemetry["timestamp"].max()
    r0, r1 = _run_bounds(events)
    if events is not None:
        evi = eval_intervals(events)
        marks = [t for t in (r0, r1) if t is not None] + list(evi["start_utc"])
        if marks and (max(marks) < t_lo or min(marks) > t_hi):
            what = events_source or getattr(events, "path", None) or "the events log"
            raise AnalysisError(f"{what}: its events ({min(marks)} .. {max(marks)}) do not "
                                f"overlap the readings of {name} ({t_lo} .. {t_hi}): a log "
                                "of another run?")
    a = r0 if r0 is not None and r0 >= t_lo - pd.Timedelta(seconds=30) else t_lo
    b = r1 if r1 is not None and r1 <= t_hi + pd.Timedelta(seconds=30) else t_hi
    return a, b


def calibrate_job(telemetry: pd.DataFrame, *, events=None, start=None, end=None,
                  meter_interval_s: float | None = None, gpus_per_node: int = 8,
                  source: str | None = None, events_source: str | None = None,
                  training_start=None) -> Calibration:
    """Calibrate a scenario job (profile, start-up, evaluations) from a recording.

    Parameters
    ----------
    telemetry : DataFrame
        Canonical node- (or GPU-) scope telemetry of one job.
    events : MLLogResult or DataFrame, optional
        The training log (``read_mllog``) or its events: ``run_start`` sets the job start
        and evaluations the eval timing; only evaluations inside the window are used.
    start, end : timestamp, optional
        Calibration window (UTC).  Default: ``run_start`` .. ``run_stop`` of the events,
        else the readings' span.
    meter_interval_s : float, optional
        Interval of the readings [s]; default from ``telemetry.attrs["meter_interval_s"]``
        or the readings' median spacing.
    gpus_per_node : int, default 8
    source, events_source : str, optional
        Names of the recording and of the events log (error messages).
    training_start : timestamp, optional
        End of the start-up when known (several runs calibrated together); default:
        detected from the summed readings.

    Returns
    -------
    Calibration

    Raises
    ------
    AnalysisError
        The events do not overlap the readings (a log of another run), or the window
        holds too few readings.
    """
    name = source or "the telemetry"
    df, scope = _job_rows(telemetry, name)
    r0, r1 = _run_bounds(events)
    job_start, job_end = run_window(df, events, name=name, events_source=events_source)
    job_start = pd.Timestamp(start) if start is not None else job_start
    job_end = pd.Timestamp(end) if end is not None else job_end
    if job_end <= job_start:
        raise PowerlabError(f"{name}: the window {job_start} .. {job_end} is empty")
    w = _meter_interval(telemetry, df, scope, meter_interval_s, name)
    devices, t_train, startup_s, dev_startup = _startup(df, scope, job_start, job_end, w,
                                                        training_start, name)
    fit = fit_profile(df, events=events, scope=scope, start=t_train, end=job_end,
                      gpus_per_node=gpus_per_node, meter_interval_s=w)
    p_value = _periodic_step_test(df, events, t_train, job_end, w)
    dev_eval, eval_src = _eval_level(fit, df, events, t_train, job_end, w)
    fit, eval_interval_src = _single_eval_interval(fit, events, t_train, job_end)
    sources = {
        "gpus": f"{devices} {scope}s in the recording"
                + (f" x {gpus_per_node} GPUs (prior)" if scope == "node" else ""),
        "start_utc": "events: run_start" if job_start == r0 else "first reading",
        "duration_s": "window: run_start .. run_stop" if (job_start == r0 and job_end == r1)
        else "calibration window",
        "startup_s": f"measured: until summed power reaches {STARTUP_LEVEL_FRACTION:.0%} of "
                     "its median",
        "startup_w": f"measured: mean over the start-up, shared among {gpus_per_node} GPUs"
        if scope == "node" else "measured: mean over the start-up",
    }
    if eval_interval_src:
        sources["eval_interval_s"] = eval_interval_src
    return Calibration(fit=fit, job_start=job_start, job_end=job_end,
                       training_start=t_train, startup_s=startup_s,
                       device_startup_w=dev_startup, devices=devices, meter_interval_s=w,
                       periodic_p_value=p_value, eval_source=eval_src,
                       device_eval_w=float(dev_eval), sources=sources)


def _job_rows(telemetry, name) -> tuple[pd.DataFrame, str]:
    """The readings with power, of the node scope when there is one."""
    if not isinstance(telemetry, pd.DataFrame) or "power_w" not in telemetry:
        raise PowerlabError(f"{name}: no power readings")
    df = telemetry[telemetry["power_w"].notna()]
    if df.empty:
        raise PowerlabError(f"{name}: no power readings")
    scopes = df["scope"].dropna().unique().tolist()
    scope = "node" if "node" in scopes else str(scopes[0])
    return df[df["scope"] == scope], scope


def _meter_interval(telemetry, df, scope, meter_interval_s, name) -> float:
    """The readings' interval [s]: given, from ``attrs``, or each device's median
    spacing."""
    if meter_interval_s is None:
        iv = telemetry.attrs.get("meter_interval_s")
        if isinstance(iv, dict) and iv:
            meter_interval_s = float(np.median(list(iv.values())))
        else:  # the median spacing of each device's readings
            keys = ["host"] + (["gpu_index"] if scope == "gpu" else [])
            t = df.sort_values("timestamp").groupby(keys, observed=True)["timestamp"]
            meter_interval_s = float(np.nanmedian(t.diff().dt.total_seconds()))
    if not (np.isfinite(meter_interval_s) and meter_interval_s > 0):
        raise PowerlabError(f"{name}: cannot tell the readings' interval "
                            f"({meter_interval_s!r} s); give meter_interval_s")
    return float(meter_interval_s)


def _startup(df, scope, job_start, job_end, w, training_start, name):
    """Devices, the end of the start-up (summed power reaching
    ``STARTUP_LEVEL_FRACTION`` of its median), its length [s] and per-device level [W]."""
    inwin = df[(df["timestamp"] >= job_start) & (df["timestamp"] <= job_end)]
    if inwin["timestamp"].nunique() < 20:
        raise AnalysisError(f"{name}: only {inwin['timestamp'].nunique()} reading instants "
                            f"between {job_start} and {job_end}; a calibration needs "
                            "several steps")
    devices = int(df.groupby(["host"] + (["gpu_index"] if scope == "gpu" else []),
                             observed=True).ngroups)
    y = summed_readings(inwin, every_s=_GRID_S)
    level = float(np.nanmedian(y))
    t = y.index
    reached = np.flatnonzero(y.to_numpy() >= STARTUP_LEVEL_FRACTION * level)
    t_train = t[reached[0]] if len(reached) else t[0]
    if training_start is not None:
        t_train = pd.Timestamp(training_start)
    startup_s = max(0.0, (t_train - job_start).total_seconds())
    if startup_s < w:
        startup_s, t_train = 0.0, job_start
    su = y[(t >= job_start) & (t < t_train)]
    dev_startup = float(su.mean() / devices) if len(su) else np.nan
    return devices, t_train, startup_s, dev_startup


def _periodic_step_test(df, events, t_train, job_end, w) -> float:
    """Fisher's g-test on the summed training readings at the meter rate (evaluations
    and the two meter intervals after them left out)."""
    yt = summed_readings(df[(df["timestamp"] >= t_train) & (df["timestamp"] <= job_end)],
                         every_s=max(w, _GRID_S))
    if events is not None:
        evi = eval_intervals(events)
        keep = np.ones(len(yt), bool)
        for a, b in zip(evi["start_utc"], evi["stop_utc"]):
            keep &= ~((yt.index >= a) & (yt.index < b + pd.Timedelta(seconds=2 * w)))
        yt = yt[keep]
    return fisher_g_test(yt.to_numpy())[0]


def _eval_level(fit, df, events, t_train, job_end, w) -> tuple[float, str]:
    """Evaluation level: readings inside evaluations; for short ones, the overlapping
    ones."""
    dev_eval, eval_src = fit.device_eval_w, _param_src(fit, "device_eval_w")
    if fit.evals_used and not np.isfinite(dev_eval):
        evi = eval_intervals(events)
        evi = evi[(evi["start_utc"] >= t_train) & (evi["stop_utc"] <= job_end)]
        first = len(evi) >= 2  # the first carries one-time set-up (see fit_profile)
        evi = evi.sort_values("start_utc").iloc[1:] if first else evi
        ts = df["timestamp"]
        over = np.zeros(len(df), bool)
        for a, b in zip(evi["start_utc"], evi["stop_utc"]):
            over |= ((ts > a) & (ts - pd.Timedelta(seconds=w) < b)).to_numpy()
        if over.any():
            dev_eval = float(df.loc[over].groupby("host", observed=True)["power_w"].mean()
                             .mean())
            eval_src = (f"overlapping readings ({int(over.sum())}): evaluations shorter "
                        "than the meter" + ("; those after the first (the first may carry "
                                            "set-up)" if first else ""))
    return dev_eval, eval_src


def _single_eval_interval(fit, events, t_train, job_end):
    """With one evaluation in the window, the training time before it as the evaluation
    interval (a prior: evaluations assumed periodic); the fit with it, and its source."""
    if events is None or fit.evals_used != 1 or np.isfinite(fit.eval_interval_s):
        return fit, None
    evi = eval_intervals(events)
    evi = evi[(evi["start_utc"] >= t_train) & (evi["stop_utc"] <= job_end)]
    before = eval_intervals(events)
    before = before[before["stop_utc"] <= evi["start_utc"].iloc[0]]
    origin = before["stop_utc"].max() if len(before) else t_train
    gap = (evi["start_utc"].iloc[0] - origin).total_seconds()
    if gap < fit.step_time_s:
        return fit, None
    src = ("prior: one evaluation in the window; the training time before it, assuming "
           "evaluations are periodic")
    return dataclasses.replace(fit, eval_interval_s=float(gap)), src
