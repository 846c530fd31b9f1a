"""The one source of randomness of a forecast: each job's failures and per-GPU timing
offsets in each Monte Carlo draw.

:func:`job_randomness` draws them from ``numpy.random.default_rng([seed, draw, job])``:
failures first (a Poisson count at ``gpus * failure_rate_per_gpu_h`` over the
allocation, then uniform ticks), then the histogram of the GPUs' timing offsets (one
multinomial draw over the discretised normal jitter, :func:`jitter_probabilities`).
Any simulation that calls it sees the same randomness: a brute-force per-GPU simulation
(``tests/support/reference_sim.py``) reproduces an engine draw exactly, and
:mod:`powerlab.site.interruption_sim` the engine's interruption process.  The causes of
the arrivals come from a stream of their own
(:func:`powerlab.reliability.interruption_draws.interruption_marks`).

**Parameter uncertainty** (issue 34.8): failures and timing jitter alone make exceedance
probabilities seed noise (draws differ by 0.01-0.1 %).  :func:`draw_parameters` draws the
uncertain *parameters* of a draw within stated bands (:class:`ParameterBands`), from a
stream of their own (``default_rng([seed, draw, PARAMETER_STREAM])``): each job's power
levels (compute, communication, evaluation, checkpoint, start-up and shutdown, one factor
per job), the site's PUE, each job's start (the stagger between jobs) and its timing
jitter.  Equipment settings of the site's electrical front end are not varied yet (no
equipment model in this tree).  :func:`powerlab.site.parameterdraws.parameter_draws` runs
one forecast per draw of them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from .._options import Options
from ..exceptions import ScenarioError
from .scenario import Job, Scenario
from .timebase import to_ticks

__all__ = ["PARAMETER_STREAM", "JobDraw", "ParameterBands", "draw_parameters",
           "jitter_probabilities", "job_randomness"]

#: Third element of the parameter stream's seed (job streams use the job's index).
PARAMETER_STREAM = 2 ** 31 - 1


@dataclass(frozen=True)
class ParameterBands(Options):
    """Half-widths of the uniform bands of the uncertain parameters (0: fixed).

    Attributes
    ----------
    job_power_fraction : float, default 0.05
        Each job's per-GPU power levels are multiplied by ``1 + u``, ``u ~ U(-a, a)``, one
        ``u`` per job and draw (how well a calibrated or assumed level is known) [-].
    pue_fraction : float, default 0.03
        The site's PUE overhead ``PUE - 1`` (of the constant PUE, or of the cooling
        model's PUE at its reference) times ``1 + u``, one ``u`` per draw, so the PUE
        stays >= 1 [-].
    start_shift_s : float, default 0
        Each job's start is moved by ``U(-s, s)`` (the stagger between jobs that start
        together is not known to the second) [s].
    jitter_fraction : float, default 0
        Each job's timing jitter times ``1 + u`` [-].
    """

    job_power_fraction: float = 0.05
    pue_fraction: float = 0.03
    start_shift_s: float = 0.0
    jitter_fraction: float = 0.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ScenarioError(f"{f.name} must be a number >= 0, got {v!r}",
                                    key=f.name)
        for name in ("job_power_fraction", "pue_fraction", "jitter_fraction"):
            if getattr(self, name) >= 1:
                raise ScenarioError(f"{name} must be below 1, got {getattr(self, name)!r}",
                                    key=name)

    def varied(self) -> list[str]:
        """The parameters that vary, in words."""
        out = []
        if self.job_power_fraction:
            out.append(f"job power levels +-{self.job_power_fraction:.0%} (one factor per "
                       "job)")
        if self.pue_fraction:
            out.append(f"PUE overhead +-{self.pue_fraction:.0%}")
        if self.start_shift_s:
            out.append(f"job starts +-{self.start_shift_s:g} s")
        if self.jitter_fraction:
            out.append(f"timing jitter +-{self.jitter_fraction:.0%}")
        return out


_LEVELS = ("compute_w", "comm_w", "startup_w", "checkpoint_w", "eval_w", "shutdown_w")


def draw_parameters(scenario: Scenario, bands: ParameterBands, seed: int, draw: int
                    ) -> tuple[Scenario, dict]:
    """The scenario of one draw with its uncertain parameters drawn within ``bands``,
    and the drawn values (``job_power_factor_<job>``, ``pue_factor``,
    ``start_shift_s_<job>``, ``jitter_factor_<job>``)."""
    rng = np.random.default_rng([int(seed), int(draw), PARAMETER_STREAM])
    vals: dict[str, float] = {}
    jobs = []
    for j in scenario.jobs:
        f = 1.0 + rng.uniform(-1, 1) * bands.job_power_fraction
        shift = rng.uniform(-1, 1) * bands.start_shift_s + 0.0
        jf = 1.0 + rng.uniform(-1, 1) * bands.jitter_fraction
        vals.update({f"job_power_factor_{j.name}": f, f"start_shift_s_{j.name}": shift,
                     f"jitter_factor_{j.name}": jf})
        jobs.append(dataclasses.replace(
            j, **{k: getattr(j, k) * f for k in _LEVELS},
            start_utc=j.start_utc + pd.Timedelta(seconds=shift), jitter_s=j.jitter_s * jf))
    pf = 1.0 + rng.uniform(-1, 1) * bands.pue_fraction
    vals["pue_factor"] = pf
    site = scenario.site
    if site.cooling is not None:
        c = site.cooling
        site = dataclasses.replace(site, cooling=dataclasses.replace(
            c, pue_at_reference=1.0 + (c.pue_at_reference - 1.0) * pf))
    else:
        site = dataclasses.replace(site, pue=1.0 + (site.pue - 1.0) * pf)
    return scenario.replace(jobs=tuple(jobs), site=site), vals


@dataclass(frozen=True)
class JobDraw:
    """The random parts of one job in one Monte Carlo draw.

    Attributes
    ----------
    failure_ticks : ndarray of int64
        Ticks (from the job start) at which failures strike, sorted.
    offset_ticks : ndarray of int64
        The possible per-GPU timing offsets ``-J..J`` [ticks].
    offset_counts : ndarray of int64
        How many of the job's GPUs have each offset (sums to ``gpus``).
    """

    failure_ticks: np.ndarray
    offset_ticks: np.ndarray
    offset_counts: np.ndarray


def jitter_probabilities(jitter_s: float, tick_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Offsets ``-J..J`` [ticks] and their probabilities for a normal jitter.

    The normal distribution of standard deviation ``jitter_s`` is truncated at 4 sigma
    and discretised on ticks (offset ``j`` gets the mass of ``[(j-1/2), (j+1/2)) * tick``).
    """
    offs, p = _jitter_table(float(jitter_s), float(tick_s))
    return offs.copy(), p.copy()


@functools.lru_cache(maxsize=64)
def _jitter_table(jitter_s: float, tick_s: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`jitter_probabilities`, computed once per (jitter, tick): every job of
    every draw asks for it."""
    if jitter_s <= 0:
        return np.zeros(1, np.int64), np.ones(1)
    big_j = math.ceil(4.0 * jitter_s / tick_s)
    offs = np.arange(-big_j, big_j + 1, dtype=np.int64)
    edges = (np.append(offs, big_j + 1) - 0.5) * tick_s / jitter_s
    cdf = special.ndtr(np.clip(edges, -4.0, 4.0))
    p = np.diff(cdf)
    return offs, p / p.sum()


def job_randomness(job: Job, tick_s: float, seed: int, draw: int, job_index: int,
                   start_tick: int | None = None, end_tick: int | None = None) -> JobDraw:
    """Draw the failures and the offset histogram of one job in one draw.

    The generator is ``numpy.random.default_rng([seed, draw, job_index])``; failures are
    drawn first (a Poisson count, then uniform ticks over the allocation), then the
    offset histogram (one multinomial draw), so that any simulation calling this
    function sees the same randomness.

    Parameters
    ----------
    job : Job
    tick_s : float
        Engine tick [s].
    seed, draw, job_index : int
        Identify the stream.
    start_tick, end_tick : int, optional
        The allocation in ticks (default: from the job's duration).

    Returns
    -------
    JobDraw
    """
    rng = np.random.default_rng([int(seed), int(draw), int(job_index)])
    n_alloc = (end_tick - start_tick) if start_tick is not None else to_ticks(
        job.duration_s, tick_s)
    lam = job.gpus * job.failure_rate_per_gpu_h * n_alloc * tick_s / 3600.0
    n_fail = int(rng.poisson(lam)) if lam > 0 else 0
    fails = np.sort(rng.integers(0, n_alloc, n_fail)) if n_fail else np.zeros(0, np.int64)
    offs, p = jitter_probabilities(job.jitter_s, tick_s)
    counts = rng.multinomial(job.gpus, p) if len(p) > 1 else np.array([job.gpus])
    return JobDraw(fails.astype(np.int64), offs, counts.astype(np.int64))
