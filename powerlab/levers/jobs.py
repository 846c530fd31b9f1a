"""What a lever setting does to a job of a scenario, and the site's power range.

- a power limit ``L`` on every GPU of a job (the power-cap and clock-lock levers,
  :mod:`powerlab.levers.throttle`): compute power ``min(P_c, P(L))``, ``P(L)`` the
  curve's power under the limit (its limit map, or ``kappa L``), other phases
  ``min(P, L)``; the step stretches by the curve's relative rate
  (:mod:`powerlab.levers.curve`), communication time unchanged (:func:`capped_scenario`,
  :func:`job_power_w`, :func:`job_rate_frame`);
- a pause (:mod:`powerlab.levers.pause`): the job's GPUs idle (:func:`paused_scenario`),
  and a restart risks a failure while starting (:func:`restart_risk`);
- what no lever moves: node overhead and GPUs in no job (:func:`site_constant_w`,
  :func:`site_power_range_w`).

:func:`capped_scenario` and :func:`paused_scenario` turn a lever setting into a
:class:`~powerlab.site.scenario.Scenario` the forecast engine simulates (every Monte
Carlo draw): the job keeps its randomness (failures, timing offsets), so a draw of the
curtailed scenario is the same world as the baseline's draw, with the lever applied.
Checkpoints stay every N steps (the interval in seconds stretches with the step).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError
from ..site.scenario import Job, Scenario
from .curve import PowerThroughputCurve, prior_curve

__all__ = ["capped_scenario", "job_curves", "job_power_w", "job_rate", "job_rate_frame",
           "paused_scenario", "restart_risk", "site_constant_w", "site_power_range_w"]


def job_curves(scenario: Scenario, curves: Mapping[str, PowerThroughputCurve] |
               PowerThroughputCurve | None = None) -> dict[str, PowerThroughputCurve]:
    """One curve per job, re-anchored at the job's compute power.

    A fitted curve is relative (rate against ``P / P_ref``), so it transfers to a job by
    setting ``P_ref`` to the job's unconstrained compute power
    (:meth:`~powerlab.levers.curve.PowerThroughputCurve.reanchored`: the limit map follows,
    its highest fitted limit kept at or below the GPU's highest); jobs without a curve get
    the prior of the scenario's GPU model (:func:`powerlab.levers.curve.prior_curve`).
    """
    out = {}
    for job in scenario.jobs:
        c = curves.get(job.name) if isinstance(curves, Mapping) else curves
        if c is None:
            c = prior_curve(scenario.hardware.gpu_model, job.compute_w)
        else:
            c = c.reanchored(float(job.compute_w))
        out[job.name] = c
    return out


def _cap_job(job: Job, limit_w: float, rate: float, curve: PowerThroughputCurve) -> Job:
    p_c = float(min(job.compute_w, curve.power_at_limit(limit_w)))
    t0 = job.step_time_s
    t1 = t0 / rate
    comm_t = (1.0 - job.compute_fraction) * t0
    cf = 1.0 - comm_t / t1
    stretch = t1 / t0
    return dataclasses.replace(
        job, compute_w=p_c, comm_w=min(job.comm_w, limit_w),
        eval_w=min(job.eval_w, limit_w), startup_w=min(job.startup_w, limit_w),
        checkpoint_w=min(job.checkpoint_w, limit_w), shutdown_w=min(job.shutdown_w, limit_w),
        step_time_s=t1, compute_fraction=cf,
        checkpoint_interval_s=job.checkpoint_interval_s * stretch,
        eval_interval_s=job.eval_interval_s * stretch)


def job_rate_frame(curve: PowerThroughputCurve, job: Job, limit_w) -> pd.DataFrame:
    """The curve's :meth:`~powerlab.levers.curve.PowerThroughputCurve.rate_at_limit` for
    ``job`` under power limit(s) ``limit_w`` [W]: ``power_w`` (at most the job's compute
    power), ``rate_mean``, ``rate_lower``, ``rate_upper``, ``extrapolated``."""
    lim = np.atleast_1d(np.asarray(limit_w, float))
    rr = curve.rate_at_limit(lim)
    over = rr["power_w"].to_numpy() > job.compute_w
    if over.any():
        alt = curve.relative_rate(np.full(int(over.sum()), float(job.compute_w)))
        for col in ("power_w", "rate_mean", "rate_lower", "rate_upper"):
            rr.loc[over, col] = alt[col].to_numpy()
    return rr


def job_rate(curve: PowerThroughputCurve, job: Job, limit_w, which: str = "rate_mean"
             ) -> np.ndarray:
    """Relative step rate of ``job`` under power limit(s) ``limit_w`` [-]."""
    return job_rate_frame(curve, job, limit_w)[which].to_numpy()


def job_power_w(job: Job, curve: PowerThroughputCurve, limit_w, which: str = "rate_lower"
                ) -> np.ndarray:
    """Mean per-GPU power of a training job under power limit(s) ``limit_w``, over whole
    steps [W].  ``which`` picks the rate used for the step stretch; the lower bound gives
    the most compute time per step, so the highest power (the safe side for a cap)."""
    lim = np.atleast_1d(np.asarray(limit_w, float))
    r = job_rate(curve, job, lim, which)
    p_c = np.minimum(job.compute_w, curve.power_at_limit(lim))
    cf = 1.0 - (1.0 - job.compute_fraction) * r
    return cf * p_c + (1.0 - cf) * np.minimum(job.comm_w, lim)


def capped_scenario(scenario: Scenario, limits_w: Mapping[str, float | None],
                    curves: Mapping[str, PowerThroughputCurve], which: str = "rate_mean"
                    ) -> Scenario:
    """The scenario with each named job under its GPU power limit (None: unchanged)."""
    jobs = []
    for job in scenario.jobs:
        lim = limits_w.get(job.name)
        if lim is None:
            jobs.append(job)
            continue
        r = float(job_rate(curves[job.name], job, lim, which)[0])
        jobs.append(_cap_job(job, float(lim), r, curves[job.name]))
    return scenario.replace(jobs=tuple(jobs))


def paused_scenario(scenario: Scenario, paused: set[str] | None = None) -> Scenario:
    """The scenario with the named jobs (default: all) holding their GPUs idle."""
    idle = scenario.hardware.gpu_idle_w
    names = {j.name for j in scenario.jobs} if paused is None else set(paused)
    unknown = names - {j.name for j in scenario.jobs}
    if unknown:
        raise PowerlabError(f"no job named {sorted(unknown)} in the scenario")
    jobs = tuple(dataclasses.replace(j, compute_w=idle, comm_w=idle, eval_w=idle,
                                     startup_w=idle, checkpoint_w=idle, shutdown_w=idle)
                 if j.name in names else j for j in scenario.jobs)
    return scenario.replace(jobs=jobs)


def site_constant_w(scenario: Scenario) -> float:
    """IT power that no lever moves: node overhead and GPUs in no job [W]."""
    hw = scenario.hardware
    idle_gpus = max(hw.cluster_gpus - sum(j.gpus for j in scenario.jobs), 0)
    return float(hw.nodes * hw.node_overhead_w + idle_gpus * hw.gpu_idle_w)


def _job_peak_w(job: Job, hw) -> float:
    """Highest per-GPU power a job's phases can draw: its highest level or the GPU's
    TDP, whichever is higher (a calibrated ``gpu_tdp_w`` may lie below the measured
    levels: it is then no bound) [W]."""
    levels = [job.compute_w, job.comm_w, job.eval_w, job.startup_w, job.checkpoint_w,
              job.shutdown_w]
    return float(max(hw.gpu_tdp_w, *(x for x in levels if np.isfinite(x))))


def site_power_range_w(scenario: Scenario) -> tuple[float, float, float]:
    """``(floor, full, maximum)`` IT power [W]: every job's GPUs idle; every job
    training unconstrained (mean over a step); every GPU at the higher of its TDP and
    its job's highest power level (issue 33: one site envelope; a maximum below the
    forecast's own peak refused targets the site could not exceed anyway)."""
    hw = scenario.hardware
    c = site_constant_w(scenario)
    floor = c + sum(j.gpus * hw.gpu_idle_w for j in scenario.jobs)
    full = c + sum(j.gpus * (j.compute_fraction * j.compute_w
                             + (1 - j.compute_fraction) * j.comm_w) for j in scenario.jobs)
    in_jobs = sum(j.gpus for j in scenario.jobs)
    top = (hw.nodes * hw.node_overhead_w + sum(j.gpus * _job_peak_w(j, hw)
                                               for j in scenario.jobs)
           + max(hw.cluster_gpus - in_jobs, 0) * hw.gpu_tdp_w)
    return float(floor), float(full), float(top)


def restart_risk(job: Job) -> float:
    """Probability that a paused job fails while restarting: its failure rate over the
    start-up (``1 - exp(-gpus x rate x startup_s / 3600)``) [-]."""
    rate = job.failure_rate_per_gpu_h
    if job.interruptions is not None:
        rate = max(rate, getattr(job.interruptions, "total_rate_per_gpu_h", 0.0) or 0.0)
    return float(1.0 - math.exp(-job.gpus * rate * job.startup_s / 3600.0))
