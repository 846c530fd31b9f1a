"""A job calibrated from a recording (:class:`Calibration`, what
:func:`powerlab.calibration.calibrate.calibrate_job` returns): the scenario ``jobs:``
entry and ``hardware:`` block it implies, the scenario as YAML with each number's source
as a comment, whether the readings show a periodic step, and what the data could not
tell (:meth:`Calibration.notes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._summary import Results, Summary
from .alignment import Alignment
from .profile_fit import ProfileFit

__all__ = ["MIN_STEPS", "PERIODIC_ALPHA", "Calibration", "HardwareInfo", "param_source"]

#: Significance level of the periodic-step test [-].
PERIODIC_ALPHA = 0.01
#: Steps the calibration window must hold for a periodic step to be claimed [-].
MIN_STEPS = 8
#: Largest relative difference of the step periods of the two halves (and of their mean
#: from the calibrated step) for a periodic step to be claimed [-].
HALVES_TOLERANCE = 0.15


@dataclass(frozen=True)
class HardwareInfo:
    """The hardware a calibration carries into the scenario: the GPU model and where it
    came from, the node's non-GPU power (``nan``: not split) with its sd and source, one
    idle GPU's power with its source, and the model's TDP (``nan``: unknown)."""

    gpu_model: str | None = None
    gpu_model_source: str = "not given"
    node_overhead_w: float = float("nan")
    node_overhead_sd_w: float = float("nan")
    split_source: str = ""
    gpu_idle_w: float = float("nan")
    idle_source: str = ""
    tdp_w: float = float("nan")


@dataclass(repr=False)
class Calibration(Results):
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
    hw : HardwareInfo
        GPU model and the node split (:mod:`powerlab.calibration.node_split`).
    phases : dict
        First-evaluation offset and end-of-run phase (:mod:`powerlab.calibration.phases`).
    alignment : Alignment
        Clock offsets found and applied (:mod:`powerlab.calibration.alignment`).
    data_notes : list of str
        What was dropped or repaired in the readings.
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
    hw: HardwareInfo = field(default_factory=HardwareInfo)
    phases: dict = field(default_factory=dict)
    alignment: Alignment = field(default_factory=Alignment)
    data_notes: list = field(default_factory=list)
    step_halves: tuple = ()

    @property
    def halves_agree(self) -> bool:
        """Whether the step shows in both halves of the training readings: the g-test
        significant on each and their periods within :data:`HALVES_TOLERANCE` of each
        other and of the calibrated step (True when the halves were not tested)."""
        if not self.step_halves:
            return True
        (p1, t1), (p2, t2) = self.step_halves
        step = self.fit.step_time_s
        return bool(max(p1, p2) < PERIODIC_ALPHA and np.isfinite(t1) and np.isfinite(t2)
                    and abs(t1 - t2) <= HALVES_TOLERANCE * step
                    and abs(0.5 * (t1 + t2) - step) <= HALVES_TOLERANCE * step)

    @property
    def has_periodic_step(self) -> bool:
        """Whether the readings show a periodic step: the g-test's p < 0.01, a dip (the
        step's energy below its compute level is positive), at least :data:`MIN_STEPS`
        steps in the training part of the window, and the same step in both halves
        (:attr:`halves_agree`)."""
        f = self.fit
        train_s = (self.job_end - self.training_start).total_seconds()
        return bool(self.periodic_p_value < PERIODIC_ALPHA and f.step_dip_energy_j > 0
                    and train_s >= MIN_STEPS * f.step_time_s and self.halves_agree)

    @property
    def gpus(self) -> int:
        """GPUs of the job [-]."""
        f = self.fit
        return self.devices * (f.gpus_per_node if f.scope == "node" else 1)

    def hardware(self) -> dict:
        """The scenario ``hardware:`` block this calibration implies (never a NaN: an
        unmeasured number falls back to its prior, the YAML comment says which)."""
        hw = {k: float(v) if k != "gpus_per_node" else int(v)
              for k, v in self.fit.hardware_kwargs().items()}
        job = self.job()
        top = max(job["power"].values())
        # with node power shared among the GPUs, a share can exceed a GPU's TDP; the
        # scenario caps levels at 1.5 x gpu_tdp_w, so the TDP is then raised to let them
        # pass (and the comment says it is not a TDP)
        tdp = self.hw.tdp_w
        if np.isfinite(tdp) and top <= 1.5 * tdp:
            hw["gpu_tdp_w"] = float(tdp)
        else:
            hw["gpu_tdp_w"] = float(max(700.0, math.ceil(top / 1.5 / 10.0) * 10.0))
        idle = self.hw.gpu_idle_w
        if not np.isfinite(idle):
            idle = job["power"].get("startup_w", 75.0)
        hw["gpu_idle_w"] = float(min(idle if np.isfinite(idle) else 75.0, hw["gpu_tdp_w"]))
        if self.hw.gpu_model:
            hw["gpu_model"] = str(self.hw.gpu_model)
        return {k: (v if not isinstance(v, float) or np.isfinite(v) else 0.0)
                for k, v in hw.items()}

    def tdp_is_real(self) -> bool:
        """Whether ``hardware.gpu_tdp_w`` is the model's TDP (not a validation bound)."""
        return bool(np.isfinite(self.hw.tdp_w)
                    and self.hardware()["gpu_tdp_w"] == float(self.hw.tdp_w))

    def job(self, *, name: str = "calibrated", start=None, duration_s: float | None = None
            ) -> dict:
        """The scenario ``jobs:`` entry (per-GPU levels as the node's shares without a
        split)."""
        f = self.fit
        kw = f.job_kwargs()
        share = f.gpus_per_node if f.scope == "node" else 1
        over = 0.0 if not f.has_split or f.scope == "gpu" else f.node_overhead_w

        def gpu(device_w):   # a device (node) level as one GPU's level [W]
            return float(max(0.0, (device_w - over) / share))

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
            flat = gpu(f.device_train_mean_w)
            out["step_time_s"] = float(min(f.step_time_s, max(1.0, self.meter_interval_s)))
            out["compute_fraction"] = 1.0
            out["power"].update(compute_w=flat, comm_w=flat)
        if self.startup_s > 0 and np.isfinite(self.device_startup_w):
            out["startup_s"] = float(self.startup_s)
            out["power"]["startup_w"] = gpu(self.device_startup_w)
        has_eval = (np.isfinite(self.device_eval_w) and np.isfinite(f.eval_interval_s)
                    and f.eval_interval_s >= f.step_time_s)
        if has_eval:
            out["power"]["eval_w"] = gpu(self.device_eval_w)
            out["eval"] = {"interval_s": float(f.eval_interval_s),
                           "duration_s": float(f.eval_duration_s)}
            first = self.phases.get("eval_first_s", float("nan"))
            if np.isfinite(first) and first >= out["step_time_s"]:
                out["eval"]["first_s"] = float(first)
        else:
            out["power"].pop("eval_w", None)
        wu = float(self.phases.get("warmup_s", 0.0))
        if wu > 0 and np.isfinite(self.phases.get("warmup_device_w", np.nan)):
            out["warmup_s"] = wu
            out["power"]["warmup_w"] = gpu(self.phases["warmup_device_w"])
        end_s = float(self.phases.get("end_s", 0.0))
        end_w = self.phases.get("end_device_w", float("nan"))
        end_w = end_w if np.isfinite(end_w) else self.device_eval_w
        if end_s > 0 and np.isfinite(end_w) and end_s < out["duration_s"] - \
                out.get("startup_s", 0.0) - out["step_time_s"]:
            out["shutdown_s"] = end_s
            out["power"]["shutdown_w"] = gpu(end_w)
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
            if not self.halves_agree:
                (p1, t1), (p2, t2) = self.step_halves
                why.append(f"not resolved by this meter: the halves of the run give "
                           f"{t1:.3g} s (p = {p1:.2g}) and {t2:.3g} s (p = {p2:.2g}) "
                           f"against a {f.step_time_s:.3g}-s step")
            out.append(f"no periodic step claimed: {'; '.join(why)}. The job is modelled "
                       "at its flat training mean: energy and levels hold, swings and "
                       "ramps from a step are not forecast.")
        if self.eval_source.startswith("overlapping"):
            out.append("evaluations are shorter than the meter can show: their level is the "
                       "mean of the readings that overlap them, a blurred value.")
        if self.startup_s == 0:
            out.append("no start-up seen (the readings start at training level).")
        out += list(self.data_notes)
        out += self.alignment.notes(self.meter_interval_s)
        h = self.hw
        if not h.gpu_model:
            out.append("GPU model unknown (give --gpu-model or an MLPerf system "
                       "description): no hardware prior, so node power is split only by "
                       "idle readings, if any; mitigations that depend on the model are "
                       "not offered for this scenario.")
        if h.idle_source.startswith("split refused"):
            out.append(f"node power not split: {h.idle_source}")
        if np.isfinite(h.node_overhead_w):
            out.append(f"node power split: {h.node_overhead_w:,.0f} +- "
                       f"{h.node_overhead_sd_w:,.0f} W non-GPU per node ({h.split_source}).")
        ph = self.phases
        if ph.get("end_s", 0) > 0:
            out.append(f"end of run: {ph['end_s']:.1f} s ({ph.get('end_source', '')}).")
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

    def _hardware_rows(self, row, hw: dict, split: str) -> list:
        """The ``hardware:`` rows of :meth:`to_yaml`, each with its source."""
        h = self.hw
        tdp_src = (f"{h.gpu_model} datasheet TDP" if self.tdp_is_real() else
                   "not a TDP: lets the per-GPU shares validate (levels <= 1.5 x tdp)")
        idle_src = (h.idle_source if np.isfinite(h.gpu_idle_w) else
                    "prior: start-up share (idle is not measured)")
        out = [row("gpu_model", hw["gpu_model"], h.gpu_model_source, 2)] \
            if "gpu_model" in hw else []
        return out + [
            row("gpus_per_node", hw["gpus_per_node"], "prior: GPUs per node", 2),
            row("node_overhead_w", hw["node_overhead_w"],
                self.sources.get("node_overhead_w", split), 2),
            row("gpu_tdp_w", hw["gpu_tdp_w"], tdp_src, 2),
            row("gpu_idle_w", hw["gpu_idle_w"], idle_src, 2),
            row("cluster_gpus", hw["cluster_gpus"], "the job's GPUs", 2)]

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
        h = self.hw
        split = (f"node power split: non-GPU {h.node_overhead_w:,.0f} +- "
                 f"{h.node_overhead_sd_w:,.0f} W per node; source: {h.split_source}"
                 if f.scope == "node" and f.has_split and np.isfinite(h.node_overhead_w)
                 else "node power not split (no GPU model prior, no hardware data): "
                 f"per-GPU levels are 1/{f.gpus_per_node} of node power"
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
               "hardware:"]
        out += self._hardware_rows(row, hw, split)
        out += [
               "jobs:",
               f"  - name: {job['name']}",
               row("gpus", job["gpus"], src.get("gpus"), 4),
               row("start_utc", job["start_utc"], src.get("start_utc"), 4),
               row("duration_s", job["duration_s"], src.get("duration_s"), 4)]
        if "startup_s" in job:
            out.append(row("startup_s", job["startup_s"], src.get("startup_s"), 4))
        if "warmup_s" in job:
            out.append(row("warmup_s", job["warmup_s"], "warm-up: "
                           + self.phases.get("warmup_source", ""), 4))
        if "shutdown_s" in job:
            out.append(row("shutdown_s", job["shutdown_s"], "end of run: "
                           + self.phases.get("end_source", ""), 4))
        if self.has_periodic_step:
            out += [row("step_time_s", job["step_time_s"], param_source(f, "step_time_s"), 4),
                    row("compute_fraction", job["compute_fraction"],
                        param_source(f, "compute_fraction"), 4)]
        else:
            out += [row("step_time_s", job["step_time_s"], "no periodic step: a short "
                        "step at a flat level (see NOTE)", 4),
                    row("compute_fraction", 1.0, "no periodic step: no dip modelled", 4)]
        if "eval" in job:
            out += ["    eval:",
                    row("interval_s", job["eval"]["interval_s"],
                        src.get("eval_interval_s") or param_source(f, "eval_interval_s"), 6),
                    row("duration_s", job["eval"]["duration_s"],
                        param_source(f, "eval_duration_s")
                        + f"; meter interval {self.meter_interval_s:g} s", 6)]
            if "first_s" in job["eval"]:
                out.append(row("first_s", job["eval"]["first_s"],
                               self.phases.get("eval_first_source", ""), 6))
        out.append("    power:")
        flat = "no periodic step: the training mean, " + param_source(f, "device_train_mean_w")
        psrc = {"compute_w": param_source(f, "device_compute_w") if self.has_periodic_step
                else flat,
                "comm_w": param_source(f, "device_comm_w") if self.has_periodic_step
                else flat,
                "eval_w": self.eval_source, "startup_w": src.get("startup_w"),
                "shutdown_w": "end of run: " + self.phases.get("end_source", ""),
                "warmup_w": "warm-up: " + self.phases.get("warmup_source", "")}
        for k, v in job["power"].items():
            out.append(row(k, v, psrc.get(k), 6))
        return "\n".join(out) + "\n"


def param_source(fit: ProfileFit, name: str) -> str:
    """Where the fit's parameter ``name`` came from, with its standard error (a YAML
    comment); empty for a parameter the fit does not have."""
    try:
        r = fit.params.loc[name]
    except KeyError:
        return ""
    se = r["std_err"]
    return f"{r['source']}" + (f"; +- {se:.3g} {r['unit']} (1 s.e.)"
                               if np.isfinite(se) else "")
