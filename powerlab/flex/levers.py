"""The curtailment levers and what each does to a job of a scenario.

=============  ===========================================================================
lever          effect on the job
=============  ===========================================================================
power_cap      every GPU's power limit set to ``L``: compute power ``min(P_c, P(L))``, ``P(L)``
               the curve's power under the limit (its limit map, or ``kappa L``),
               other phases ``min(P, L)``; the step stretches by the curve's relative rate
               (:mod:`powerlab.flex.curve`), communication time unchanged
clock_lock     SM clock locked: the same operating points as a power cap, reached
               without the power controller (the curve's clock at that power)
pause          the job checkpoints on demand, then its GPUs idle; restart costs the
               job's ``startup_s`` and risks a failure while starting
shift_start    a job that would start in the window starts after it
storage        the site battery (``mitigations.battery``) carries part of the load
=============  ===========================================================================

:func:`capped_scenario` and :func:`paused_scenario` turn a lever setting into a
:class:`~powerlab.site.scenario.Scenario` the forecast engine simulates (every Monte
Carlo draw): the job keeps its randomness (failures, timing offsets), so a draw of the
curtailed scenario is the same world as the baseline's draw, with the lever applied.
Checkpoints stay every N steps (the interval in seconds stretches with the step).
The response times are assumptions (:class:`LeverAssumptions`), stated in every output.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError
from ..site.scenario import Job, Scenario
from .curve import PowerThroughputCurve, prior_curve

__all__ = ["LEVERS", "LeverAssumptions", "capped_scenario", "job_curves", "job_power_w",
           "job_rate_frame",
           "paused_scenario", "restart_risk", "site_constant_w", "site_power_range_w"]

#: The levers, in the order of the offer.
LEVERS = ("power_cap", "clock_lock", "pause", "shift_start", "storage")


@dataclass(frozen=True)
class LeverAssumptions:
    """Response times of the levers (assumptions, stated in every output).

    Attributes
    ----------
    power_cap_response_s : float
        From the command to the fleet drawing the capped power: the limit set on every
        GPU in parallel (``nvmlDeviceSetPowerManagementLimit``) and the GPU's power
        controller settling [s].
    clock_lock_response_s : float
        The same for ``nvmlDeviceSetGpuLockedClocks`` (no controller loop) [s].
    pause_drain_s : float
        After the on-demand checkpoint, until the job's GPUs are idle [s].
    storage_response_s : float
        Battery inverter response [s].
    shift_max_hold_s : float
        Longest a job's start is held for a curtailment (the scheduler holds a job
        through a grid event, it does not re-plan the day); a longer wait is not a
        shift and the job starts on time, capped [s].
    levers : tuple of str
        The levers the site lets a curtailment plan use (default all of
        :data:`LEVERS`).
    """

    power_cap_response_s: float = 5.0
    clock_lock_response_s: float = 2.0
    pause_drain_s: float = 10.0
    storage_response_s: float = 1.0
    shift_max_hold_s: float = 3600.0
    levers: tuple[str, ...] = LEVERS


def job_curves(scenario: Scenario, curves: Mapping[str, PowerThroughputCurve] |
               PowerThroughputCurve | None = None) -> dict[str, PowerThroughputCurve]:
    """One curve per job, re-anchored at the job's compute power.

    A fitted curve is relative (rate against ``P / P_ref``), so it transfers to a job by
    setting ``P_ref`` to the job's unconstrained compute power
    (:meth:`~powerlab.flex.curve.PowerThroughputCurve.reanchored`: the limit map follows,
    its highest fitted limit kept at or below the GPU's highest); jobs without a curve get
    the prior of the scenario's GPU model (:func:`powerlab.flex.curve.prior_curve`).
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
    """The curve's :meth:`~powerlab.flex.curve.PowerThroughputCurve.rate_at_limit` for
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


def site_power_range_w(scenario: Scenario) -> tuple[float, float, float]:
    """``(floor, full, maximum)`` IT power [W]: every job's GPUs idle; every job
    training unconstrained (mean over a step); every GPU at TDP."""
    hw = scenario.hardware
    c = site_constant_w(scenario)
    floor = c + sum(j.gpus * hw.gpu_idle_w for j in scenario.jobs)
    full = c + sum(j.gpus * (j.compute_fraction * j.compute_w
                             + (1 - j.compute_fraction) * j.comm_w) for j in scenario.jobs)
    top = hw.nodes * hw.node_overhead_w + max(hw.cluster_gpus,
                                              sum(j.gpus for j in scenario.jobs)) * hw.gpu_tdp_w
    return float(floor), float(full), float(top)


def restart_risk(job: Job) -> float:
    """Probability that a paused job fails while restarting: its failure rate over the
    start-up (``1 - exp(-gpus x rate x startup_s / 3600)``) [-]."""
    rate = job.failure_rate_per_gpu_h
    if job.interruptions is not None:
        rate = max(rate, getattr(job.interruptions, "total_rate_per_gpu_h", 0.0) or 0.0)
    return float(1.0 - math.exp(-job.gpus * rate * job.startup_s / 3600.0))
