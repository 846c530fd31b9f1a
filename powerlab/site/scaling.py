"""From a calibrated job to a site scenario: N GPUs, a job mix, staggered starts,
failures, PUE and a disturbance, every assumption stated.

``powerlab calibrate`` writes the scenario of the *recorded* job: the GPUs of the
recording, the minutes of its run, no cooling, no failures.  A power planner wants the
site: the same job physics on tens of thousands of GPUs over a day or more.  This module
makes that step one documented function (:func:`scale_scenario`) and one command
(``powerlab scale``), instead of five YAML keys edited by hand (issue 33).

What carries over from the calibrated job unchanged: the GPU model, the per-GPU power
levels of every phase, the node composition and non-GPU power, the step time, duty cycle
and evaluation rhythm, the GPU power time constants.  What the recording cannot tell, and
is therefore an assumption written into the scenario as a YAML comment with its source:

- the site's size (``gpus``) and how it splits into jobs (``job_mix``);
- the job's length: each job runs from its (staggered) start to the end of the horizon,
  repeating the recorded training phase (a benchmark run lasts minutes);
- checkpoints (an MLPerf run writes none): every ``checkpoint_interval_s`` for
  ``checkpoint_duration_s`` at ``checkpoint_w`` (default: the GPUs' idle power);
- failures: ``failure_rate_per_gpu_h``, default the Llama 3 405B run's unexpected
  interruptions, 419 in 54 days on 16,384 GPUs [1]_ (``419 / (54 x 24 x 16,384) =
  1.97e-5`` per GPU-hour), each costing ``restart_s``;
- the facility: a constant ``pue`` and ``electrical_loss_fraction``, a ``base_load_w``;
- one voltage sag (``sag``) for the ride-through and interconnection studies.

References
----------
.. [1] Llama Team, AI @ Meta, "The Llama 3 Herd of Models", arXiv:2407.21783 (2024),
   section 3.3.4 and Table 5.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import pandas as pd
import yaml

from .._options import Options
from ..exceptions import ScenarioError
from ..limits.yamlspec import load_yaml, read_yaml_text
from .scenario import parse_scenario

__all__ = ["LLAMA3_FAILURE_RATE_PER_GPU_H", "SiteAssumptions", "scale_scenario",
           "scale_scenario_file"]

#: Unexpected interruptions of the Llama 3 405B pre-training per GPU-hour: 419 in 54
#: days on 16,384 H100 (Llama 3 report, Table 5) [1/(GPU h)].
LLAMA3_FAILURE_RATE_PER_GPU_H = 419 / (54 * 24 * 16384)


@dataclass(frozen=True)
class SiteAssumptions(Options):
    """What a site scenario assumes beyond the calibrated job (see the module docstring).

    Attributes
    ----------
    gpus : int
        GPUs training on the site, all jobs together [-].
    job_mix : tuple of float
        Shares of ``gpus`` per job (normalised; default one job) [-].
    stagger_s : float
        Delay between consecutive jobs' starts [s].
    horizon_h : float
        Length of the forecast [h].
    start_utc : str or None
        Start of the horizon (default: midnight UTC of the recorded job's day).
    lead_s : float
        Time from the horizon's start to the first job's start [s].
    tz : str
        The site's IANA time zone (site-local times in exports).
    pue : float
        Power usage effectiveness, facility / IT [-].
    electrical_loss_fraction : float
        Losses of the electrical chain, as a share of IT power [-].
    base_load_w : float
        Site load besides the GPU nodes (offices, storage, network) [W].
    failure_rate_per_gpu_h : float
        Job interruptions per GPU-hour [1/(GPU h)].
    restart_s : float
        Time from an interruption to training again [s].
    checkpoint_interval_s, checkpoint_duration_s : float
        Checkpoint rhythm and length [s] (interval 0: none).
    checkpoint_w : float or None
        Per-GPU power while checkpointing [W] (None: the GPUs' idle power).
    sag : tuple or None
        ``(residual_voltage_pu, duration_s, offset_h)``: one voltage sag ``offset_h``
        hours into the horizon (None: no disturbance).
    gpu_model : str or None
        The GPU model, where the calibrated scenario does not name it (it decides which
        mitigations exist, e.g. NVML power smoothing on Blackwell: never guessed).
    """

    gpus: int = 16384
    job_mix: tuple = (1.0,)
    stagger_s: float = 0.0
    horizon_h: float = 24.0
    start_utc: str | None = None
    lead_s: float = 600.0
    tz: str = "UTC"
    pue: float = 1.2
    electrical_loss_fraction: float = 0.04
    base_load_w: float = 0.0
    failure_rate_per_gpu_h: float = LLAMA3_FAILURE_RATE_PER_GPU_H
    restart_s: float = 900.0
    checkpoint_interval_s: float = 1800.0
    checkpoint_duration_s: float = 60.0
    checkpoint_w: float | None = None
    sag: tuple | None = None
    gpu_model: str | None = None

    def check(self) -> None:
        """Refuse values no site can have (one line naming the option)."""
        def bad(name, why):
            return ScenarioError(f"{name}: {why}", key=name)

        if not (isinstance(self.gpus, int) and 1 <= self.gpus <= 10_000_000):
            raise bad("gpus", f"expected an integer in [1, 10,000,000], got {self.gpus!r}")
        shares = [float(x) for x in self.job_mix]
        if not shares or not all(math.isfinite(x) and x > 0 for x in shares):
            raise bad("job_mix", f"expected positive shares, got {self.job_mix!r}")
        if len(shares) > self.gpus:
            raise bad("job_mix", f"{len(shares)} jobs for {self.gpus} GPUs")
        for name, lo, hi in (("stagger_s", 0, 30 * 86400), ("horizon_h", 1 / 60, 24 * 366),
                             ("lead_s", 0, 30 * 86400), ("pue", 1.0, 3.0),
                             ("electrical_loss_fraction", 0.0, 0.5),
                             ("base_load_w", 0.0, 5e9),
                             ("failure_rate_per_gpu_h", 0.0, 1.0),
                             ("restart_s", 0.0, 30 * 86400),
                             ("checkpoint_interval_s", 0.0, 30 * 86400),
                             ("checkpoint_duration_s", 0.0, 86400)):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and lo <= v <= hi):
                raise bad(name, f"expected a number in [{lo:g}, {hi:g}], got {v!r}")
        if self.sag is not None:
            pu, dur, off = (float(x) for x in self.sag)
            if not (0 <= pu < 1 and 0 < dur <= 60 and 0 <= off < self.horizon_h):
                raise bad("sag", "expected residual voltage in [0, 1) pu, duration in "
                          f"(0, 60] s and an offset inside the horizon, got {self.sag!r}")


def _job_power_keys(job: dict) -> dict:
    return dict(job.get("power") or {})


def _split(gpus: int, shares, per_node: int) -> list[int]:
    """GPUs per job: shares of ``gpus`` in whole nodes where possible, summing to gpus."""
    w = [float(x) / sum(float(y) for y in shares) for x in shares]
    unit = per_node if gpus >= per_node * len(w) else 1
    counts = [max(unit, int(round(gpus * x / unit)) * unit) for x in w]
    counts[-1] = gpus - sum(counts[:-1])
    if counts[-1] <= 0:
        raise ScenarioError(f"job_mix {tuple(shares)} leaves no GPU for the last job of "
                            f"{gpus}", key="job_mix")
    return counts


def _horizon(job_spec: dict, tpl: dict, a: SiteAssumptions
             ) -> tuple[pd.Timestamp, pd.Timestamp]:
    start = (pd.Timestamp(a.start_utc) if a.start_utc else
             pd.Timestamp(tpl.get("start_utc") or
                          (job_spec.get("horizon") or {}).get("start_utc")).floor("D"))
    start = start.tz_localize("UTC") if start.tzinfo is None else start.tz_convert("UTC")
    return start, start + pd.Timedelta(hours=a.horizon_h)


def _site_job(tpl: dict, hw: dict, a: SiteAssumptions, i: int, n: int, n_jobs: int,
              span: tuple, source: str) -> tuple[dict, dict]:
    """Job ``i`` of the site (``n`` GPUs) from the calibrated template, with comments."""
    start, end = span
    j0 = start + pd.Timedelta(seconds=a.lead_s + i * a.stagger_s)
    if j0 >= end:
        raise ScenarioError(f"job {i + 1} would start at {j0}, after the horizon ends "
                            f"({end}): shorten stagger_s or lead_s", key="stagger_s")
    job = copy.deepcopy({k: v for k, v in tpl.items() if k not in ("eval_times_s",)})
    job.update(name=tpl.get("name", "job") + (f"-{i + 1}" if n_jobs > 1 else ""), gpus=n,
               start_utc=j0.isoformat(), duration_s=float((end - j0).total_seconds()))
    pre = f"jobs[{i}]"
    share = float(a.job_mix[i]) / sum(map(float, a.job_mix))
    c = {f"{pre}.gpus": f"assumption: {a.gpus:,} site GPUs x share {share:.3g}",
         f"{pre}.start_utc": (f"assumption: {a.lead_s:g} s after the horizon starts"
                              + (f" + {i} x {a.stagger_s:g} s stagger" if i else "")),
         f"{pre}.duration_s": ("assumption: runs to the horizon's end, repeating the "
                               f"recorded training phase ({source})")}
    if a.checkpoint_interval_s > 0:
        job["checkpoint"] = {"interval_s": a.checkpoint_interval_s,
                             "duration_s": a.checkpoint_duration_s}
        c[f"{pre}.checkpoint"] = "assumption: the recording writes no checkpoint"
        job["power"] = {**_job_power_keys(job), "checkpoint_w": (
            a.checkpoint_w if a.checkpoint_w is not None
            else float(hw.get("gpu_idle_w", 75.0)))}
        c[f"{pre}.power.checkpoint_w"] = (
            "assumption" if a.checkpoint_w is not None else
            "assumption: GPUs idle while the checkpoint is written (hardware.gpu_idle_w)")
    job["failures"] = {"rate_per_gpu_h": a.failure_rate_per_gpu_h, "restart_s": a.restart_s}
    c[f"{pre}.failures"] = (
        "Llama 3 405B: 419 unexpected interruptions in 54 days on 16,384 GPUs "
        "(arXiv:2407.21783, Table 5)"
        if a.failure_rate_per_gpu_h == LLAMA3_FAILURE_RATE_PER_GPU_H else "assumption")
    return job, c


def _site_hardware(hw: dict, a: SiteAssumptions) -> dict:
    """Sets the GPU model (never guessed) and the site's GPU count; returns comments."""
    c = {"hardware.cluster_gpus": "assumption: every site GPU is in a job"}
    if a.gpu_model:
        if hw.get("gpu_model") and str(hw["gpu_model"]) != a.gpu_model:
            raise ScenarioError(f"gpu_model: the calibrated scenario names "
                                f"{hw['gpu_model']!r}, not {a.gpu_model!r}", key="gpu_model")
        hw["gpu_model"] = a.gpu_model
        c["hardware.gpu_model"] = "given (powerlab scale --gpu-model)"
    elif not hw.get("gpu_model"):
        raise ScenarioError("the calibrated scenario names no hardware.gpu_model and none "
                            "was given: the model decides which mitigations exist (e.g. "
                            "Blackwell power smoothing), so it is never guessed; pass "
                            "--gpu-model", key="gpu_model")
    hw["cluster_gpus"] = a.gpus
    return c


def scale_scenario(job_spec: dict, a: SiteAssumptions, *, source: str = "the job"
                   ) -> tuple[dict, dict]:
    """The site scenario of a calibrated job under stated assumptions.

    Parameters
    ----------
    job_spec : dict
        A scenario mapping with (at least) one job: the calibrated job (its first job
        is the template).
    a : SiteAssumptions
        What the site assumes.
    source : str
        Name of the calibrated scenario, for the comments.

    Returns
    -------
    spec : dict
        The site scenario (``parse_scenario`` accepts it).
    comments : dict
        ``{dotted key: source or assumption}`` for every value set here.
    """
    a.check()
    jobs = job_spec.get("jobs") or []
    if not jobs or not isinstance(jobs[0], dict):
        raise ScenarioError("the calibrated scenario has no job to scale", key="jobs")
    tpl, hw = dict(jobs[0]), copy.deepcopy(dict(job_spec.get("hardware") or {}))
    span = _horizon(job_spec, tpl, a)
    counts = _split(a.gpus, a.job_mix, int(hw.get("gpus_per_node", 8)))
    c = _site_hardware(hw, a)
    out_jobs = []
    for i, n in enumerate(counts):
        job, jc = _site_job(tpl, hw, a, i, n, len(counts), span, source)
        out_jobs.append(job)
        c.update(jc)
    c["site"] = ("assumption: a constant PUE and loss share (a temperature-dependent "
                 "cooling model is written by hand: docs/scenarios.md, site.cooling)")
    spec = {"name": f"{job_spec.get('name', 'calibrated')}-site-{a.gpus}",
            "description": (f"{a.gpus:,} GPUs running the job calibrated in {source}, "
                            "scaled by powerlab scale (assumptions in the comments)"),
            "horizon": {"start_utc": span[0].isoformat(), "end_utc": span[1].isoformat()},
            "simulation": copy.deepcopy(dict(job_spec.get("simulation") or {})),
            "site": {"tz": a.tz, "pue": a.pue,
                     "electrical_loss_fraction": a.electrical_loss_fraction,
                     "base_load_w": a.base_load_w},
            "hardware": hw, "jobs": out_jobs}
    if a.sag is not None:
        pu, dur, off = (float(x) for x in a.sag)
        spec["disturbances"] = [{"name": "sag1", "type": "voltage_sag",
                                 "at_utc": (span[0] + pd.Timedelta(hours=off)).isoformat(),
                                 "residual_voltage_pu": pu, "duration_s": dur}]
        c["disturbances"] = "assumption: one voltage sag for the ride-through studies"
    parse_scenario(spec, path=source)          # the result must be a valid scenario
    return spec, c


def _scalar(v) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return f"{v:.1f}"
    if isinstance(v, float):
        return repr(v)
    return yaml.safe_dump(v, default_flow_style=True, width=10**6).strip().removesuffix(
        "\n...").removesuffix("...").strip()


def _emit(obj: dict, path: str, indent: int, comments: dict, lines: list[str],
          first_prefix: str = "") -> None:
    """Block YAML of a mapping, each key's comment (by dotted path) after it."""
    for n, (k, v) in enumerate(obj.items()):
        dotted = f"{path}.{k}" if path else str(k)
        lead = " " * indent + (first_prefix if n == 0 else " " * len(first_prefix))
        note = f"  # {comments[dotted]}" if dotted in comments else ""
        if isinstance(v, dict) and v:
            lines.append(f"{lead}{k}:{note}")
            _emit(v, dotted, indent + len(first_prefix) + 2, comments, lines)
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            lines.append(f"{lead}{k}:{note}")
            for i, item in enumerate(v):
                _emit(item, f"{dotted}[{i}]", indent + len(first_prefix) + 2, comments,
                      lines, first_prefix="- ")
        else:
            lines.append(f"{lead}{k}: {_scalar(v)}{note}")


def _commented_yaml(spec: dict, comments: dict, header: list[str]) -> str:
    """YAML text of ``spec`` with each commented key's source after it."""
    lines = [f"# {h}" for h in header]
    _emit(spec, "", 0, comments, lines)
    return "\n".join(lines) + "\n"


def scale_scenario_file(path, a: SiteAssumptions) -> tuple[str, dict]:
    """:func:`scale_scenario` of a scenario YAML file; returns the commented YAML text of
    the site scenario and its mapping."""
    text = read_yaml_text(path, what="calibrated scenario")
    spec = load_yaml(text, source=str(path))
    if not isinstance(spec, dict):
        raise ScenarioError("expected a scenario mapping", path=path)
    out, comments = scale_scenario(spec, a, source=str(path))
    header = [f"Site scenario scaled by powerlab scale from {path}.",
              "Every value set by scaling says where it comes from; the rest is the "
              "calibrated job's, unchanged.",
              *[f"carried from the calibration: {ln[2:].strip()}"
                for ln in text.splitlines() if ln.startswith("# NOTE:")]]
    return _commented_yaml(out, comments, header), out
