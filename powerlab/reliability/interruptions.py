"""Training interruptions by root cause: rates, recovery, checkpoint interval.

A job's interruptions are a marked Poisson process: every root cause ``c`` strikes at
``gpus * rate_c`` per hour (``rates_per_gpu_h``), and planned interruptions (firmware
updates, configuration or data-set changes the operators start) at
``gpus * planned_rate_per_gpu_h``.  The engine draws the superposed process (one Poisson
process at the total rate, :func:`powerlab.site.randomness.job_randomness`) and marks each
arrival with its cause from a separate stream
(:func:`powerlab.reliability.interruption_draws.interruption_marks`), so that adding causes
never changes a draw's per-GPU timing offsets.

Rules the engine follows (:func:`powerlab.site.jobplan.job_plan`)
-----------------------------------------------------------------
* **Unexpected interruption** at ``t``: training since the last completed checkpoint is
  lost; the job's GPUs idle through *detection* (``detection_s``: watchdog or health
  check notices the fault), *drain* (``drain_s``: processes killed, nodes released) and
  *reschedule* (``reschedule_s``: faulty node swapped for a spare, job requeued), then run
  the job's *start-up* (``startup_s``: load the checkpoint, initialise NCCL), then resume.
* **Planned interruption** at ``t``: the job first writes an on-demand checkpoint
  (``checkpoint.duration_s``, at checkpoint power; no work is lost), then drains and is
  rescheduled (no detection), then starts up.
* **Interruptions during downtime are not lost**: an arrival while the job is already
  down (detecting, draining, rescheduling, or writing the on-demand checkpoint of a
  planned stop) is counted and extends the downtime so that it ends no earlier than its
  own restart time after the arrival (the new fault must be found and worked around
  too).  An arrival during start-up aborts the start-up like any failure of a running
  job.  Arrivals during the final shutdown are not counted (the allocation ends).
* **Effective training time** = (training time - training lost to interruptions) /
  allocation time.  Checkpoints, evaluations, start-ups and downtime are not training.

Checkpoint interval
-------------------
:func:`young_interval_s` and :func:`daly_interval_s` give the interval that minimises the
expected waste ``C/tau + (tau + C)/(2 M) + R/M`` (Young 1974; Daly 2006, higher-order
form) for checkpoint cost ``C``, mean time between interruptions ``M`` and restart time
``R``; :func:`checkpoint_report` compares the scenario's interval with them, in training
throughput and in power (energy per day spent in checkpoints and in lost work, and the
MW swing each checkpoint causes).

References
----------
.. [1] A. Grattafiori et al., "The Llama 3 Herd of Models", arXiv:2407.21783, 2024,
   section 3.3.4 and Table 5 (419 unexpected and 47 planned interruptions in 54 days on
   16,384 H100 GPUs; over 90 % effective training time).
.. [2] J. W. Young, "A first order approximation to the optimum checkpoint interval",
   Communications of the ACM 17(9), 530-531, 1974.
.. [3] J. T. Daly, "A higher order estimate of the optimum checkpoint interval for
   restart dumps", Future Generation Computer Systems 22(3), 303-312, 2006.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._options import choice
from ..limits.yamlspec import Section
from ..telemetry.events import LLAMA3_SNAPSHOT, ROOT_CAUSES

__all__ = [
    "PLANNED",
    "InterruptionModel",
    "checkpoint_report",
    "checkpoint_waste_fraction",
    "daly_interval_s",
    "llama3_model",
    "parse_interruptions",
    "young_interval_s",
]

#: Cause name of planned interruptions.
PLANNED = "planned"

#: GPU-hours of the Llama 3 snapshot behind :data:`~powerlab.telemetry.events.ROOT_CAUSES`.
LLAMA3_GPU_H = LLAMA3_SNAPSHOT["days"] * 24.0 * LLAMA3_SNAPSHOT["gpus"]

#: Default recovery split for ``model: llama3`` [s].  Meta does not publish it; these are
#: assumptions (stated in ``data/scenarios/llama3_54d_16k_h100.yaml``) under which the
#: reported > 90 % effective training time holds.
LLAMA3_RECOVERY_S = {"detection_s": 60.0, "drain_s": 30.0, "reschedule_s": 120.0}

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class InterruptionModel:
    """Interruption rates by cause and the recovery split.

    Attributes
    ----------
    causes : tuple of str
        Root-cause names of unexpected interruptions.
    rates_per_gpu_h : tuple of float
        Rate of each cause per GPU-hour [1/(GPU h)].
    planned_rate_per_gpu_h : float
        Rate of planned interruptions per GPU-hour [1/(GPU h)].
    detection_s, drain_s, reschedule_s : float
        The parts of the downtime before the job's start-up [s].
    model : str
        Where the rates come from (``llama3`` or ``explicit``).
    """

    causes: tuple[str, ...]
    rates_per_gpu_h: tuple[float, ...]
    planned_rate_per_gpu_h: float = 0.0
    detection_s: float = 0.0
    drain_s: float = 0.0
    reschedule_s: float = 0.0
    model: str = "explicit"

    @property
    def unexpected_rate_per_gpu_h(self) -> float:
        """Summed rate of unexpected interruptions [1/(GPU h)]."""
        return float(sum(self.rates_per_gpu_h))

    @property
    def total_rate_per_gpu_h(self) -> float:
        """Rate of all interruptions, planned included [1/(GPU h)]."""
        return self.unexpected_rate_per_gpu_h + self.planned_rate_per_gpu_h

    @property
    def restart_s(self) -> float:
        """Downtime of an unexpected interruption before start-up [s]."""
        return self.detection_s + self.drain_s + self.reschedule_s

    @property
    def planned_restart_s(self) -> float:
        """Downtime of a planned interruption after its on-demand checkpoint and before
        start-up (no detection) [s]."""
        return self.drain_s + self.reschedule_s

    @property
    def all_causes(self) -> tuple[str, ...]:
        """Unexpected causes then :data:`PLANNED` (index order of the marks)."""
        return self.causes + (PLANNED,)

    def probabilities(self) -> np.ndarray:
        """Probability of each of :attr:`all_causes` for one arrival [-]."""
        r = np.array(self.rates_per_gpu_h + (self.planned_rate_per_gpu_h,), float)
        tot = r.sum()
        return r / tot if tot > 0 else r


def llama3_model(scale: float = 1.0, planned: bool = True, **recovery: float
                 ) -> InterruptionModel:
    """Rates per GPU-hour from the Llama 3 paper's Table 5 (counts / 54 d / 16,384 GPUs).

    Parameters
    ----------
    scale : float, default 1
        Multiplies every rate (e.g. 0.5 for a fleet twice as reliable) [-].
    planned : bool, default True
        Include the 47 planned interruptions.
    **recovery
        ``detection_s``, ``drain_s``, ``reschedule_s`` overriding
        :data:`LLAMA3_RECOVERY_S` [s].
    """
    rec = {**LLAMA3_RECOVERY_S, **recovery}
    return InterruptionModel(
        causes=tuple(rc.name for rc in ROOT_CAUSES),
        rates_per_gpu_h=tuple(scale * rc.llama3_count / LLAMA3_GPU_H for rc in ROOT_CAUSES),
        planned_rate_per_gpu_h=(scale * LLAMA3_SNAPSHOT["planned"] / LLAMA3_GPU_H
                                if planned else 0.0),
        model="llama3", **rec)


def parse_interruptions(s: Section) -> InterruptionModel:
    """Read an ``interruptions:`` mapping (job- or scenario-level).

    Keys: ``model`` (``llama3`` or ``none``: start from no rates), ``scale`` (multiplies
    the model's rates), ``rates_per_gpu_h`` (mapping cause -> rate; with ``model: llama3``
    only :data:`~powerlab.telemetry.events.ROOT_CAUSES` names, replacing the model's
    rate), ``planned_rate_per_gpu_h``, ``restart: {detection_s, drain_s, reschedule_s}``.
    Errors name the key path (``jobs[0].interruptions.rates_per_gpu_h.faulty_gpu``).
    """
    model = s.string("model", "none")
    choice(model, None, ("llama3", "none"), error=lambda m: s.error("model", m))
    scale = s.number("scale", 1.0, hi=1e4)
    rec = s.section("restart")
    defaults = LLAMA3_RECOVERY_S if model == "llama3" else {}
    recovery = {k: rec.number(k, defaults.get(k, 0.0), hi=30 * 86400.0)
                for k in ("detection_s", "drain_s", "reschedule_s")}
    rec.finish()
    if model == "llama3":
        base = llama3_model(scale, **recovery)
        rates = dict(zip(base.causes, base.rates_per_gpu_h))
        planned = base.planned_rate_per_gpu_h
    else:
        rates, planned = {}, 0.0
    raw = s.raw("rates_per_gpu_h")
    if raw is not None:
        sec = s.section("rates_per_gpu_h")
        known = [rc.name for rc in ROOT_CAUSES]
        for key in sec.data:
            name = str(key)
            if model == "llama3" and name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else \
                    f"; known causes: {', '.join(known)}"
                raise sec.error(name, f"not a Llama 3 root cause{hint}")
            if not _NAME.match(name) or name == PLANNED:
                raise sec.error(name, "a cause name is lower-case letters, digits and "
                                "'_' (and not 'planned': use planned_rate_per_gpu_h)")
            rates[name] = sec.number(name, hi=1.0)
        sec.finish()
    planned = s.number("planned_rate_per_gpu_h", planned, hi=1.0)
    s.finish()
    if model == "none" and not rates and planned == 0:
        raise s.error("rates_per_gpu_h", "give model: llama3 or at least one rate")
    return InterruptionModel(causes=tuple(rates), rates_per_gpu_h=tuple(rates.values()),
                             planned_rate_per_gpu_h=planned, model=model, **recovery)


# --------------------------------------------------------------------------- checkpoints


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's optimum checkpoint interval ``sqrt(2 C M)`` [s].

    Parameters
    ----------
    checkpoint_s : float
        Time to write one checkpoint, ``C`` [s].
    mtbf_s : float
        Mean time between interruptions of the job, ``M`` [s].
    """
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum checkpoint interval [s].

    ``sqrt(2 C M) * (1 + sqrt(C / (2 M)) / 3 + C / (18 M)) - C`` for ``C < 2 M``, else
    ``M`` (Daly 2006, eq. 37).
    """
    c, m = float(checkpoint_s), float(mtbf_s)
    if c >= 2.0 * m:
        return m
    x = c / (2.0 * m)
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - c


def checkpoint_waste_fraction(interval_s: float, checkpoint_s: float, mtbf_s: float,
                              restart_s: float = 0.0) -> float:
    """First-order expected share of wall-clock time not spent on kept training [-].

    ``C / (tau + C) + ((tau + C) / 2 + R) / M``: checkpoint writing, the work lost to an
    interruption (on average half a checkpoint period) and the restart, per unit time.
    """
    tau, c = float(interval_s), float(checkpoint_s)
    return c / (tau + c) + ((tau + c) / 2.0 + restart_s) / mtbf_s


def checkpoint_report(scenario, job=None) -> pd.DataFrame:
    """Optimal checkpoint interval and the cost of the chosen one, per job.

    Jobs without interruptions or checkpoints are left out.  Columns: ``mtbf_s`` (all
    interruptions), ``checkpoint_duration_s``, ``interval_s`` (chosen),
    ``young_interval_s``, ``daly_interval_s``, ``waste_chosen``/``waste_daly``
    (:func:`checkpoint_waste_fraction`, unexpected interruptions lose work),
    ``throughput_cost`` (``waste_chosen - waste_daly``: training time lost by the chosen
    interval against Daly's) [-], ``checkpoint_energy_megawatt_hours_per_day`` (GPU energy
    spent writing checkpoints), ``lost_work_energy_megawatt_hours_per_day`` (GPU energy
    of training that interruptions throw away), ``checkpoint_swing_w`` (GPU power step
    at each checkpoint, training to checkpoint level) and ``checkpoints_per_day``.
    """
    rows = {}
    jobs = [job] if job is not None else scenario.jobs
    for j in jobs:
        rate = j.gpus * j.failure_rate_per_gpu_h / 3600.0  # per second
        c = j.checkpoint_duration_s
        tau = j.checkpoint_interval_s
        if rate <= 0 or c <= 0 or tau <= 0:
            continue
        m = 1.0 / rate
        im = j.interruptions
        unexpected = (im.unexpected_rate_per_gpu_h / im.total_rate_per_gpu_h
                      if im is not None and im.total_rate_per_gpu_h > 0 else 1.0)
        restart = (im.restart_s if im is not None else j.restart_s) + j.startup_s
        m_u = m / unexpected if unexpected > 0 else math.inf
        daly = daly_interval_s(c, m_u)
        w_ch = checkpoint_waste_fraction(tau, c, m_u, restart)
        w_da = checkpoint_waste_fraction(daly, c, m_u, restart)
        train_w = j.compute_fraction * j.compute_w + (1 - j.compute_fraction) * j.comm_w
        day = 86400.0
        per_day = day / (tau + c)
        ck_j = per_day * c * j.gpus * j.checkpoint_w
        lost_s = day / m_u * (tau + c) / 2.0
        rows[j.name] = {
            "mtbf_s": m, "unexpected_mtbf_s": m_u, "checkpoint_duration_s": c,
            "interval_s": tau, "young_interval_s": young_interval_s(c, m_u),
            "daly_interval_s": daly, "waste_chosen": w_ch, "waste_daly": w_da,
            "throughput_cost": w_ch - w_da, "checkpoints_per_day": per_day,
            "checkpoint_swing_w": j.gpus * (train_w - j.checkpoint_w),
            "checkpoint_energy_megawatt_hours_per_day": ck_j / 3.6e9,
            "lost_work_energy_megawatt_hours_per_day": lost_s * j.gpus * train_w / 3.6e9,
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("job")
