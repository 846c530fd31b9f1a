"""What every lever and mitigation says about itself, and what the planners ask of it.

A *lever* (:class:`CurtailmentLever`) sheds site power when the grid asks: a power cap,
a clock lock, a pause, a held job start, the site battery.  A *mitigation*
(:class:`Mitigation`) shapes the power the utility sees: NVML power smoothing, a filler
workload, staggered starts, storage of a technology class.  Each one is one class that
holds its physics in one place:

==========  ===========================================================================
shed        what it takes off the site's power (a lever's :meth:`~CurtailmentLever.allocate`
            step and :meth:`~CurtailmentLever.offer_rows`; a mitigation's
            :meth:`~Mitigation.job_power` and :meth:`~Mitigation.grid_power`)
ramp        how the power gets there and back (the allowed rates the plan hands it)
response    :meth:`~CurtailmentLever.response_s` (its :class:`LeverAssumptions` field)
cost        lost and delayed training (:meth:`~CurtailmentLever.cost`), extra energy,
            capital (:meth:`~Mitigation.capital_usd_per_day`)
hardware    :attr:`Lever.hardware`, :meth:`Mitigation.requires`
==========  ===========================================================================

The planners iterate over the registered objects (:mod:`powerlab.levers.registry`) and
never branch on a lever's name: the flexibility offer (:mod:`powerlab.flex.offer`), the
curtailment plan (:mod:`powerlab.flex.plan`) and the mitigation search
(:mod:`powerlab.interconnect.sizing`).  Levers that share their physics form a *family*
(a power cap and a clock lock reach the same operating points of the job's
power-throughput curve): the family's shared steps (offer rows per setting, the split of
a shed, the simulation) run once, on its first registered member, which is handed the
members.

Adding a lever is one module with one subclass, registered with
:func:`powerlab.levers.registry.register_lever` (docs/contributing.md, "Adding a lever").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import numpy as np

if TYPE_CHECKING:                 # the state the plan's hooks read (modules above this)
    from .operating import Merit
    from .shedstate import Allocation, LeverSchedule

__all__ = ["CurtailmentLever", "JobOnSite", "Lever", "LeverAssumptions", "LeverCost",
           "Mitigation", "OfferContext", "OfferRow", "SimContext"]


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
    levers : tuple of str or None
        The levers the site lets a curtailment plan use (None, the default: every
        registered lever, :data:`powerlab.levers.registry.LEVERS`).
    """

    power_cap_response_s: float = 5.0
    clock_lock_response_s: float = 2.0
    pause_drain_s: float = 10.0
    storage_response_s: float = 1.0
    shift_max_hold_s: float = 3600.0
    levers: tuple[str, ...] | None = None


class LeverCost(NamedTuple):
    """What a lever of a plan costs in training.

    Attributes
    ----------
    lost_per_tick : ndarray
        Training lost per tick, curve mean [GPU-h].
    lost_band : ndarray
        Lost training in all, ``(mean, lower, upper)`` (the curve's band) [GPU-h],
        restarts not included.
    restart_gpu_hours : float
        Training spent restarting what the lever stopped [GPU-h].
    delayed_per_tick : ndarray or None
        Training delayed, not lost, per tick [GPU-h] (None: none).
    """

    lost_per_tick: np.ndarray
    lost_band: np.ndarray
    restart_gpu_hours: float = 0.0
    delayed_per_tick: np.ndarray | None = None

    @classmethod
    def none(cls, n: int) -> LeverCost:
        """No cost over ``n`` ticks."""
        return cls(np.zeros(n), np.zeros(3))


@dataclass(frozen=True)
class OfferContext:
    """What the flexibility offer hands each lever family (:func:`powerlab.flex.flex_offer`).

    Attributes
    ----------
    scenario : Scenario
    curves : dict
        Power-throughput curve per job (re-anchored at the job's power).
    assumptions : LeverAssumptions
    window : tuple of pandas.Timestamp
        The hold window the sheds are measured over.
    hold_s : float
        Its asked length [s].
    hold_max_s : float
        From its start to the horizon's end: the longest a setting can be held [s].
    levels_w : sequence of float or None
        Power limits offered (None: each throttling lever's default levels) [W].
    shed_of : callable
        ``shed_of(scenario) -> (mean, p05, p95)``: the shed over the window of a
        scenario's forecast on the baseline's seed [MW].
    """

    scenario: object
    curves: Mapping
    assumptions: LeverAssumptions
    window: tuple
    hold_s: float
    hold_max_s: float
    levels_w: object
    shed_of: Callable


@dataclass(frozen=True, kw_only=True)
class OfferRow:
    """One row of ``flex_offer.csv`` (the columns of :class:`powerlab.flex.FlexOffer`, in
    this order; ``shed_pct_of_it`` is added by the offer).

    Attributes
    ----------
    lever : str
    power_limit_w, clock_sm_mhz : float
        The setting offered (NaN: not a power limit, not a clock) [W], [MHz].
    shed_megawatts, shed_megawatts_p05, shed_megawatts_p95 : float
        Shed over the hold window: mean and 5-95 % range over draws [MW].
    notice_s, ramp_time_s, hold_max_s : float
        Notice needed, time to the shed, longest hold [s].
    step_rate_loss_pct, step_rate_loss_pct_lower, step_rate_loss_pct_upper : float
        Step rate lost (curve mean and band) [%].
    lost_gpu_hours_per_hour, restart_gpu_hours : float
        Training lost per hour held, and restarting after [GPU-h].
    extra_checkpoint_writes : int
    restart_risk_probability : float
        [-]
    note : str
    """

    lever: str
    power_limit_w: float = math.nan
    clock_sm_mhz: float = math.nan
    shed_megawatts: float = 0.0
    shed_megawatts_p05: float = 0.0
    shed_megawatts_p95: float = 0.0
    notice_s: float = 0.0
    ramp_time_s: float = 0.0
    hold_max_s: float = 0.0
    step_rate_loss_pct: float = 0.0
    step_rate_loss_pct_lower: float = 0.0
    step_rate_loss_pct_upper: float = 0.0
    lost_gpu_hours_per_hour: float = 0.0
    restart_gpu_hours: float = 0.0
    extra_checkpoint_writes: int = 0
    restart_risk_probability: float = 0.0
    note: str = ""

    @classmethod
    def of(cls, lever: str, shed: tuple[float, float, float], **columns) -> OfferRow:
        """A row with the shed ``(mean, p05, p95)`` [MW] (``OfferContext.shed_of``)."""
        m, lo, hi = shed
        return cls(lever=lever, shed_megawatts=m, shed_megawatts_p05=lo,
                   shed_megawatts_p95=hi, **columns)

    def as_dict(self) -> dict:
        """The row's columns, in order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class SimContext:
    """What the plan's simulation hands each lever family (every draw, one seed).

    Attributes
    ----------
    scenario : Scenario
        The scenario simulated (with the levers' :meth:`simulated_scenario` changes).
    base : ForecastResult
        Its forecast.
    merit : Merit
        The jobs' operating points (:class:`powerlab.levers.operating.Merit`).
    curves : dict
    schedule : LeverSchedule
        The levers chosen per tick (:class:`powerlab.levers.shedstate.LeverSchedule`).
    draws, seed : int
    tick_s : float
    """

    scenario: object
    base: object
    merit: object
    curves: Mapping
    schedule: object
    draws: int
    seed: int
    tick_s: float


class JobOnSite(NamedTuple):
    """One job of a forecast as the mitigation search's fast path sees it
    (:class:`powerlab.interconnect.sitemodel.SiteModel`).

    Attributes
    ----------
    scenario : Scenario
    index : int
        The job's position in the scenario.
    job : Job
    active : ndarray of bool
        Ticks at which the job holds its GPUs.
    tick_s : float
        [s]
    start_utc : pandas.Timestamp
        The forecast's first tick.
    filler_loss_pct : float
        Throughput a filler workload costs (the cost model's) [%].
    """

    scenario: object
    index: int
    job: object
    active: np.ndarray
    tick_s: float
    start_utc: object
    filler_loss_pct: float

    @property
    def hardware(self):
        """The scenario's hardware."""
        return self.scenario.hardware


class Lever:
    """Base of levers and mitigations: a name and the hardware it needs."""

    #: The name in every output (``flex_offer.csv``'s ``lever``, ``--levers``).
    name: ClassVar[str] = ""
    #: Hardware the lever needs (``""``: any site).
    hardware: ClassVar[str] = ""
    #: Its place among the curtailment levers (the offer's rows, ``--levers``) and among
    #: the mitigations (an option's description): lower first, registration order among
    #: equals.  The built-in ones use 10 to 50; a new one comes after them by default.
    offer_order: ClassVar[float] = 100.0
    search_order: ClassVar[float] = 100.0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class CurtailmentLever(Lever):
    """A lever of the flexibility offer and the curtailment plan.

    Subclasses set :attr:`name`, :attr:`merit_order` and :attr:`plan_phase` and implement
    what they take part in; every hook has a default that does nothing (no row, no shed,
    no cost), so a lever implements only its own physics.
    """

    #: Position in the plan's table of levers (merit order: least lost training per MW
    #: first).
    merit_order: ClassVar[float] = math.inf
    #: When its step runs in the plan's split of the shed (lower first): a lever that
    #: weighs what the later ones would cost (a pause, against caps) runs before them.
    plan_phase: ClassVar[float] = math.inf
    #: Levers with the same family share their steps (``""``: its own family).
    family: ClassVar[str] = ""
    #: It acts through the job's power limit (the plan's throttling levers).
    throttles: ClassVar[bool] = False
    #: Its shed lowers the GPUs' IT power (False: it carries load at the boundary, as a
    #: battery does, and the GPUs draw on).
    reduces_it: ClassVar[bool] = True
    #: Response when the assumptions name none for it [s].
    default_response_s: ClassVar[float] = 0.0

    @property
    def family_key(self) -> str:
        """The family (its own name without one)."""
        return self.family or self.name

    # -- what it states --------------------------------------------------------------
    def response_s(self, assumptions: LeverAssumptions) -> float:
        """From the command to the shed [s]."""
        return self.default_response_s

    def response_text(self, assumptions: LeverAssumptions) -> str | None:
        """Its response in the offer's summary (None: not listed)."""
        return None

    # -- the offer ---------------------------------------------------------------------
    def offer_rows(self, offer: OfferContext, members: tuple) -> list[OfferRow]:
        """The family's rows of the offer, run on its first member."""
        return []

    # -- the plan ----------------------------------------------------------------------
    def prepare(self, scenario) -> tuple[object, object]:
        """``(scenario to forecast, equipment the lever dispatches itself)`` when the plan
        may use it (default: the scenario, none)."""
        return scenario, None

    def allocate(self, state: Allocation, members: tuple) -> None:
        """The family's step of the split of the shed, run on its first member with the
        members the plan may use: take a part of ``state.need`` [IT W] and record it as
        ``state.shed[name]`` (:class:`powerlab.levers.shedstate.Allocation`)."""

    def job_ticks(self, merit: Merit, ls: LeverSchedule, ji: int) -> np.ndarray:
        """Ticks at which job ``ji`` is under this lever (bool)."""
        return np.zeros(ls.limits_w.shape[1], bool)

    def jobs_using(self, merit: Merit, ls: LeverSchedule) -> list[str]:
        """Names of the jobs it acts on at some tick."""
        return [j.name for ji, j in enumerate(merit.jobs) if self.job_ticks(merit, ls, ji).any()]

    def site_columns(self, ls: LeverSchedule) -> dict:
        """Site-wide columns of the plan's schedule, per tick (after the planned power)."""
        return {}

    def schedule_columns(self, merit: Merit, ls: LeverSchedule, ji: int,
                         lever_col: np.ndarray) -> dict:
        """Job ``ji``'s setting columns of the schedule (``lever_col``: its lever per
        tick)."""
        return {}

    def target_columns(self, ls: LeverSchedule, i0: int, i1: int) -> dict:
        """Columns of a target's row (its ticks ``[i0, i1)``)."""
        return {}

    def cost(self, merit: Merit, ls: LeverSchedule, share, tick_s: float) -> LeverCost:
        """Lost and delayed training (``share``: each job's share of time training)."""
        return LeverCost.none(ls.limits_w.shape[1])

    def lever_row(self, merit: Merit, ls: LeverSchedule, equipment: Mapping,
                  tick_s: float) -> dict:
        """Its setting and state columns in the plan's table of levers."""
        return {}

    def site_offset_w(self, ls: LeverSchedule) -> np.ndarray | None:
        """Power it takes off the site at the targets' boundary, outside the GPUs (a
        battery's output) [W] (None: none)."""
        return None

    def simulated_scenario(self, scenario, ls: LeverSchedule):
        """The scenario the plan's simulation forecasts with this lever's schedule."""
        return scenario

    def simulate(self, sim: SimContext, ji: int, it: np.ndarray) -> None:
        """Add to ``it`` (IT power of every draw, draws x ticks [W], in place) the change
        the family's settings of job ``ji`` make; run on the family's first member."""


class Mitigation(Lever):
    """A mitigation of the mitigation search (:func:`powerlab.interconnect.size_mitigation`).

    An option (:class:`powerlab.interconnect.MitigationOption`) carries every
    mitigation's settings under their own names (:attr:`fields`); each hook reads its own.
    """

    #: The option fields that set it.
    fields: ClassVar[tuple[str, ...]] = ()
    #: When it acts on a job's power in the search's fast path (lower first; its
    #: throughput cost adds in the same order): the GPU's controller, then the start.
    job_stage: ClassVar[float] = math.inf

    def is_on(self, opt) -> bool:
        """Whether the option switches it on."""
        return False

    def label(self, opt) -> str:
        """Its part of the option's description."""
        return self.name

    def requires(self, opt) -> str:
        """Hardware the option needs for it (``""``: any site)."""
        return ""

    def refuse(self, opt, gpu_model: str) -> str | None:
        """Why the option cannot run on this GPU model (None: it can)."""
        return None

    def job_power(self, opt, power_w: np.ndarray, job) -> tuple[np.ndarray, float]:
        """``(per-GPU power of a job with it [W], throughput lost [share of the job's
        allocation])``; ``job``: :class:`JobOnSite`."""
        return power_w, 0.0

    def grid_power(self, opt, facility_w: np.ndarray, tick_s: float
                   ) -> tuple[np.ndarray, float]:
        """``(power at the point of interconnection [W], grid energy to add [J])``."""
        return facility_w, 0.0

    def capital_usd_per_day(self, opt) -> float:
        """Capital cost per day of life [$/d] (illustrative)."""
        return 0.0

    def storage_size(self, opt) -> tuple[float, float]:
        """``(MW, MWh)`` of storage it installs."""
        return 0.0, 0.0

    def tidy_row(self, opt, row: dict) -> None:
        """Put its columns of an evaluated option's row in their reported form."""

    def restore_fields(self, kw: dict) -> None:
        """Undo :meth:`tidy_row` on an option's fields read back from a row."""
