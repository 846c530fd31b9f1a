"""The fast path of the mitigation search: a forecast's per-job series, ready for options.

:class:`SiteModel` runs the engine once per job and filler setting (and once more without
the scenario's voltage sags when it has any: the ride-through counterfactual), then
evaluates a :class:`~powerlab.interconnect.searchspace.MitigationOption` on one draw by
array arithmetic: each mitigation (:data:`powerlab.levers.registry.MITIGATIONS`) acts on
each job's per-GPU power in turn, in the order of its ``job_stage``
(:meth:`~powerlab.levers.lever.Mitigation.job_power`),
the facility model turns IT power into facility power, and each acts on that
(:meth:`~powerlab.levers.lever.Mitigation.grid_power`).  See
:mod:`powerlab.interconnect.sizing` for the method and its accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError
from ..levers.filler import Filler
from ..levers.lever import JobOnSite
from ..levers.registry import MITIGATIONS
from ..levers.smoothing import smoothing_support
from ..levers.stagger import Stagger
from ..site.disturbances import ups_transfer_w
from ..site.engine import forecast
from ..site.facility import facility_power
from ..site.scenario import Mitigations
from .powertrace import PowerTrace

__all__ = ["SiteModel"]


@dataclass
class SiteModel:
    """Per-draw, per-job series of a forecast, ready for fast option evaluation."""

    scenario: object
    tick_s: float
    start_utc: pd.Timestamp
    pue: np.ndarray
    base_load_w: float
    constant_w: float
    gpu_mean_w: dict            # (job index, filler) -> array (draws, ticks)
    active: list                # per job: bool array (ticks) while the job holds GPUs
    engine_runs: int = 0
    draws: int = 0
    evaluations: int = 0
    cache: dict = field(default_factory=dict)
    sag_events: list = field(default_factory=list)   # per draw: voltage_sag event rows
    notes: list = field(default_factory=list)
    #: the same per-job series without the scenario's voltage sags (ride-through
    #: counterfactual); empty without disturbances
    gpu_mean_no_sag_w: dict = field(default_factory=dict)
    smoothing_ok: bool = True

    @staticmethod
    def runs_needed(scenario, filler: bool) -> int:
        """Engine runs :meth:`build` makes: per job, per filler setting, and once more
        without the voltage sags when the scenario has any [-]."""
        has_sags = bool(getattr(scenario, "disturbances", ()))
        return len(scenario.jobs) * (2 if filler else 1) * (2 if has_sags else 1)

    @classmethod
    def build(cls, scenario, *, draws: int, seed: int, tick_s: float | None,
              filler: bool, progress=False) -> SiteModel:
        """Run the engine once per job (and per filler setting).

        ``progress`` is passed to every :func:`~powerlab.site.engine.forecast` (a
        :class:`powerlab._progress.Progress` of ``runs_needed x draws`` engine draws is
        updated once per draw and left open)."""
        sc0 = scenario.replace(mitigations=Mitigations(),
                               horizon_start_utc=scenario.start_utc,
                               horizon_end_utc=scenario.end_utc)
        hw = sc0.hardware
        used = sum(j.gpus for j in sc0.jobs)
        constant = (hw.cluster_gpus - used) * hw.gpu_idle_w + hw.nodes * hw.node_overhead_w
        series, no_sag, active, runs = {}, {}, [], 0
        pue = start = tick = None
        sags: list = []
        has_sags = bool(getattr(sc0, "disturbances", ()))
        for ji, job in enumerate(sc0.jobs):
            for fill in ((False, True) if filler else (False,)):
                j = Filler.filled(job) if fill else job
                sub = sc0.replace(jobs=(j,))
                own = (hw.cluster_gpus - j.gpus) * hw.gpu_idle_w + hw.nodes * hw.node_overhead_w
                for with_sags in ((True, False) if has_sags else (True,)):
                    run = sub if with_sags else sub.replace(disturbances=())
                    res = forecast(run, draws=draws, seed=seed, tick_s=tick_s,
                                   progress=progress)
                    runs += 1
                    (series if with_sags else no_sag)[(ji, fill)] = (
                        np.asarray(res.it_w) - own) / j.gpus
                    if pue is None:
                        pue, start, tick = np.asarray(res.pue, float), res.start_utc, \
                            res.tick_s
                        sags = _sag_rows(res.events, draws)
            t = start + pd.to_timedelta(np.arange(len(pue)) * tick, unit="s")
            active.append(np.asarray((t >= job.start_utc) & (
                t < job.start_utc + pd.Timedelta(seconds=job.duration_s))))
        notes = []
        if len(sc0.jobs) > 1 and any(d.trip_fraction > 0
                                     for d in getattr(sc0, "disturbances", ())):
            notes.append("voltage sags that trip nodes are drawn per job run: with several "
                         "jobs the tripped nodes differ from a whole-site forecast's, so "
                         "ride-through values are approximate (re-check the chosen option "
                         "with comply)")
        ok, why = smoothing_support(hw.gpu_model)
        if not ok:
            notes.append(why)
        return cls(sc0, float(tick), start, pue, float(sc0.site.base_load_w), constant,
                   series, active, engine_runs=runs, draws=draws, sag_events=sags,
                   notes=notes, gpu_mean_no_sag_w=no_sag, smoothing_ok=ok)

    def grid_power(self, opt, fac: np.ndarray) -> tuple[np.ndarray, float]:
        """(power at the point of interconnection before UPS transfer [W], its energy with
        the mitigations' own additions, the storage's recharge [J]): each mitigation on
        the facility power in turn."""
        grid, extra = fac, 0.0
        for m in MITIGATIONS.objects():
            grid, e = m.grid_power(opt, grid, self.tick_s)
            extra += e
        return grid, float(grid.sum() * self.tick_s + extra)

    def grid_w(self, fac: np.ndarray, it: np.ndarray, opt
               ) -> tuple[np.ndarray, float]:
        """(power at the point of interconnection [W], its energy with storage recharge
        [J]): the mitigations on the facility power (storage dispatch), then load carried
        by UPS batteries during voltage sags, as the engine does
        (``ForecastResult.facility_w``)."""
        grid, e_j = self.grid_power(opt, fac)
        ups = ups_transfer_w(self.scenario, it[None, :], self.start_utc, self.tick_s,
                             fac[None, :])
        if ups is None:
            return grid, e_j
        return grid - ups[0], e_j - float(ups[0].sum() * self.tick_s)

    def trace(self, opt, d: int, filler_loss_pct: float,
              description: str = "") -> tuple[PowerTrace, float, float]:
        """(power trace with the draw's sag events, grid energy [J], throughput loss [%])
        of one option in draw ``d``."""
        fac, it, loss_pct = self.facility(opt, d, filler_loss_pct)
        grid, e_j = self.grid_w(fac, it, opt)
        ev = self.sag_events[d] if self.sag_events else None
        kw = {"events": ev} if ev is not None else {}
        if self.gpu_mean_no_sag_w:
            # the same option on the same draw without the sags: the ride-through
            # counterfactual (no UPS transfer either: that is the sag's doing)
            fac0, it0, _ = self.facility(opt, d, filler_loss_pct, no_sag=True)
            kw["without_sags"] = PowerTrace(d, self.tick_s, self.start_utc, it0,
                                            self.grid_power(opt, fac0)[0])
        return (PowerTrace(d, self.tick_s, self.start_utc, it, grid, description=description,
                           **kw), e_j, loss_pct)

    @property
    def days(self) -> float:
        """Horizon length [d]."""
        return len(self.pue) * self.tick_s / 86400.0

    def stagger_delays_s(self, stagger_s: float) -> list[float]:
        """Start delay of each job under a stagger of ``stagger_s`` [s]: the engine's rule
        (:func:`powerlab.site.stagger.stagger_delay_ticks`, through
        :meth:`powerlab.levers.stagger.Stagger.delays_s`), capped as the engine caps it."""
        return Stagger.delays_s(self.scenario, self.start_utc, self.tick_s, stagger_s)

    def facility(self, opt, d: int, filler_loss_pct: float,
                 no_sag: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
        """(facility power before storage [W], IT power [W], throughput loss [%]) of one
        option in draw ``d`` (``no_sag``: of the same draw without the voltage sags)."""
        gpu_model = self.scenario.hardware.gpu_model
        for m in MITIGATIONS.objects():
            why = m.refuse(opt, gpu_model)
            if why:
                raise PowerlabError(why)
        src = self.gpu_mean_no_sag_w if no_sag else self.gpu_mean_w
        sc = self.scenario
        it = np.full(len(self.pue), self.constant_w)
        lost_gpu_s = total_gpu_s = 0.0
        chain = MITIGATIONS.by("job_stage")
        for ji, job in enumerate(sc.jobs):
            y = src[(ji, bool(opt.filler))][d]
            on = JobOnSite(sc, ji, job, self.active[ji], self.tick_s, self.start_utc,
                           filler_loss_pct)
            frac = 0.0
            for m in chain:
                y, f = m.job_power(opt, y, on)
                frac += f
            it += job.gpus * y
            alloc_s = job.duration_s
            lost_gpu_s += job.gpus * alloc_s * frac
            total_gpu_s += job.gpus * alloc_s
        loss_pct = 100.0 * lost_gpu_s / total_gpu_s if total_gpu_s else 0.0
        site = sc.site
        fac = facility_power(it, self.tick_s, self.pue,
                             electrical_loss_fraction=site.electrical_loss_fraction,
                             cooling_time_constant_s=site.cooling_time_constant_s,
                             base_load_w=site.base_load_w).facility_w
        return fac, it, loss_pct


def _sag_rows(events: pd.DataFrame, draws: int) -> list:
    """Per draw, the forecast's ``voltage_sag`` event rows (empty list without sags)."""
    if events is None or not len(events) or "residual_voltage_pu" not in events.columns:
        return []
    sag = events[events["event"] == "voltage_sag"]
    if not len(sag):
        return []
    return [sag[sag["draw"] == d].reset_index(drop=True) for d in range(draws)]
