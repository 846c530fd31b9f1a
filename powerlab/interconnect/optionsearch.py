"""The structured search of the mitigation space: options evaluated on a
:class:`~powerlab.interconnect.sitemodel.SiteModel` (cached) against a
:class:`~powerlab.interconnect.compliance.Compliance`, and the search's steps.

Each step bisects chains of options ordered from weak to strong, assuming a stronger
option never fails where a weaker one passes (:meth:`OptionSearch.first_passing`):

2. per-GPU options (:func:`per_gpu_step`): for every (floor, hysteresis, filler,
   stagger) of the grid, the fastest ramp rate (same up and down) that passes;
2b. ramp-up and ramp-down apart (:func:`ramps_apart_step`) for the cheapest of these;
3. storage alone (:func:`storage_step`): per technology class the site can have, and
   per (duration within the class's range, control window), the smallest power;
4. smoothing with storage (:func:`hybrid_step`): each weak smoothing setting that fails
   on its own and costs less than the cheapest passing option so far, with the smallest
   storage that then passes.

Step 1, the site as it is, is :func:`powerlab.interconnect.sizing.size_mitigation`'s.
What an option does and costs comes from the mitigations it switches on
(:data:`powerlab.levers.registry.MITIGATIONS`), through the site model.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError
from ..levers.registry import MITIGATIONS
from ..levers.storage import TECHNOLOGIES, available_storage
from .compliance import Compliance
from .searchspace import CostModel, MitigationOption, SearchGrid, capital_usd_per_day
from .sitemodel import SiteModel

__all__ = ["OptionSearch", "SearchAxes", "hybrid_step", "per_gpu_step", "ramps_apart_step",
           "run_search", "storage_step"]


class OptionSearch:
    """Evaluates options on a :class:`SiteModel` (cached) against a :class:`Compliance`."""

    def __init__(self, model: SiteModel, check: Compliance, cost: CostModel):
        self.m, self.check, self.cost = model, check, cost
        self.rows: dict[MitigationOption, dict] = {}
        self._base_energy = None
        self.progress = None   # progress hook: a Progress updated once per new option

    def evaluate(self, opt: MitigationOption) -> dict:
        """The option's row: its description and hardware, its fields, its costs, its
        verdicts (cached; the unmitigated option first)."""
        if opt in self.rows:
            return self.rows[opt]
        m = self.m
        vals, energy, loss = [], [], []
        for d in range(m.draws):
            dp, e_j, loss_pct = m.trace(opt, d, self.cost.filler_throughput_loss_pct)
            vals.append(self.check.evaluate(dp))
            energy.append(e_j)
            loss.append(loss_pct)
            m.evaluations += 1
        res = self.check.result(pd.DataFrame(vals), tick_s=m.tick_s,
                                native_interval_s=m.tick_s, duration_s=len(m.pue) * m.tick_s)
        if self._base_energy is None:
            if opt != MitigationOption():
                raise PowerlabError("the unmitigated option is evaluated first")
            self._base_energy = np.array(energy)
        extra_mwh_day = float(np.mean(np.array(energy) - self._base_energy)) / 3.6e9 / m.days
        row = self._row(opt, res, extra_mwh_day, float(np.mean(loss)))
        self.rows[opt] = row
        if self.progress is not None:
            self.progress.update()
        return row

    def _row(self, opt: MitigationOption, res, extra_mwh_day: float, loss_pct: float
             ) -> dict:
        v = res.verdicts
        sf = res.summary_frame().set_index("requirement")
        mits = MITIGATIONS.objects()
        row = {"option": opt.label(), "requires": opt.requires(), **dataclasses.asdict(opt),
               "extra_energy_megawatt_hours_per_day": extra_mwh_day,
               "throughput_loss_pct": loss_pct,
               "storage_megawatt_hours": sum(mt.storage_size(opt)[1] for mt in mits),
               "storage_megawatts": sum(mt.storage_size(opt)[0] for mt in mits),
               "passes": bool(res.passed),
               "requirements_passed": ";".join(v.index[v == "pass"]),
               "requirements_failed": ";".join(v.index[v == "fail"]),
               "requirements_not_shown": ";".join(res.not_assessed),
               "_values": sf["value"].to_dict()}
        gpus = sum(j.gpus for j in self.m.scenario.jobs)
        c = self.cost
        row["cost_usd_per_day"] = (
            max(extra_mwh_day, 0.0) * c.energy_usd_per_megawatt_hour
            + row["throughput_loss_pct"] / 100 * gpus * 24 * c.gpu_hour_usd
            + capital_usd_per_day(opt))
        for mt in mits:
            mt.tidy_row(opt, row)
        return row

    def passes(self, opt: MitigationOption) -> bool:
        """Whether the option meets every requirement."""
        return self.evaluate(opt)["passes"]

    def cost_of(self, opt: MitigationOption) -> float:
        """The option's cost [$/d]."""
        return float(self.evaluate(opt)["cost_usd_per_day"])

    def cheapest_passing_cost(self) -> float:
        """The cheapest passing option's cost so far [$/d] (inf: none)."""
        costs = [r["cost_usd_per_day"] for r in self.rows.values() if r["passes"]]
        return min(costs) if costs else math.inf

    def first_passing(self, options: list[MitigationOption]) -> MitigationOption | None:
        """Bisection for the first passing option of a list ordered from weakest to
        strongest, assuming a stronger option never fails where a weaker one passes."""
        if not options or not self.passes(options[-1]):
            return None
        lo, hi = -1, len(options) - 1         # options[hi] passes; lo fails or is -1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.passes(options[mid]):
                hi = mid
            else:
                lo = mid
        return options[hi]


class SearchAxes(NamedTuple):
    """The grid's settings the site can have: floors, hysteresis, ramp rates (fast to
    slow; NVML power smoothing only where the GPUs have it) and staggers (only where jobs
    start together)."""

    floors: list
    hysts: list
    rates: list
    staggers: list

    @classmethod
    def of(cls, model: SiteModel, grid: SearchGrid) -> SearchAxes:
        """The axes for ``model``'s site."""
        jobs = model.scenario.jobs
        together = len({j.start_utc for j in jobs}) < len(jobs)
        ok = model.smoothing_ok
        rates = [r for r in grid.ramp_w_per_s if r > 0] if ok else []
        return cls(sorted(set(grid.floor_pct_tdp)) if ok else [0.0],
                   sorted(set(grid.hysteresis_ms)) if ok else [0.0],
                   sorted(set(rates), reverse=True),        # fast (weak) to slow (strong)
                   sorted(set(grid.stagger_s)) if together else [0.0])


def run_search(s: OptionSearch, model: SiteModel, grid: SearchGrid, *,
               refine_rates: int = 5, hybrid_storage: int = 2, phase=lambda text: None
               ) -> None:
    """Steps 2 to 4 of the search (module docstring)."""
    axes = SearchAxes.of(model, grid)
    hits = per_gpu_step(s, grid, axes, phase)
    ramps_apart_step(s, hits, axes.rates, refine_rates, phase)
    techs, stores, chain = storage_step(s, model, grid, phase)
    if model.smoothing_ok and techs:
        hybrid_step(s, grid, axes, techs, stores, chain, hybrid_storage, phase)


def per_gpu_step(s: OptionSearch, grid: SearchGrid, axes: SearchAxes, phase
                 ) -> list[MitigationOption]:
    """Per (floor, hysteresis, filler, stagger), the fastest symmetric ramp rate that
    passes; returns the passing options with a ramp limit."""
    fillers = sorted(set(grid.filler))
    phase(f"2. per-GPU options: the fastest passing ramp rate for "
          f"{len(axes.floors) * len(axes.hysts) * len(set(grid.filler)) * len(axes.staggers)}"
          " settings")
    hits = []
    for fl in axes.floors:
        for h in axes.hysts:
            for fill in fillers:
                for st in axes.staggers:
                    base = MitigationOption(percent_tmp_floor=float(fl),
                                            ramp_down_hysteresis_ms=float(h),
                                            filler=bool(fill), stagger_starts_s=float(st))
                    chain = [base] + [dataclasses.replace(base, ramp_up_rate_w_per_s=float(r),
                                                          ramp_down_rate_w_per_s=float(r))
                                      for r in axes.rates]
                    hit = s.first_passing(chain)
                    if hit is not None and hit.ramp_up_rate_w_per_s > 0:
                        hits.append(hit)
    return hits


def _rate_chain(base: MitigationOption, field_name: str, rates: list[float]
                ) -> list[MitigationOption]:
    """``base`` with one rate set to off, then each rate from fast (weak) to slow (strong)."""
    return [dataclasses.replace(base, **{field_name: float(r)}) for r in [0.0, *rates]]


def ramps_apart_step(s: OptionSearch, hits: list, rates: list, refine_rates: int,
                     phase) -> None:
    """For the cheapest symmetric hits, the fastest ramp-up that passes with the
    ramp-down kept (the ramp-up limit delays work), then the fastest ramp-down with that
    ramp-up (the ramp-down limit burns energy): a coordinate search."""
    if hits:
        phase(f"2b. ramp-up and ramp-down apart for the {min(len(hits), refine_rates)} "
              "cheapest")
    for hit in sorted(hits, key=s.cost_of)[:refine_rates]:
        r = hit.ramp_up_rate_w_per_s
        faster = [x for x in rates if x >= r]         # off, then fast ... r (passes)
        up = s.first_passing(_rate_chain(hit, "ramp_up_rate_w_per_s", faster))
        s.first_passing(_rate_chain(up, "ramp_down_rate_w_per_s", faster))


class StorageChain(NamedTuple):
    """Storage of one class, from the smallest power fraction of the site's peak to the
    largest, at a duration and control window."""

    peak_w: float
    powers: list

    def __call__(self, base: MitigationOption, tech: str, dur: float, win: float
                 ) -> list[MitigationOption]:
        out = []
        for f in self.powers:
            p_mw = round(f * self.peak_w / 1e6, 3)
            if p_mw <= 0:
                continue
            out.append(dataclasses.replace(
                base, storage_technology=tech, battery_power_megawatts=p_mw,
                battery_energy_megawatt_hours=p_mw * dur,
                battery_round_trip_efficiency=TECHNOLOGIES[tech].round_trip_efficiency,
                battery_window_s=float(win)))
        return out


def storage_step(s: OptionSearch, model: SiteModel, grid: SearchGrid, phase
                 ) -> tuple[list, list, StorageChain]:
    """Storage alone, per technology class the site can have: the smallest power that
    passes, per (duration within the class's range, control window); returns the
    classes, the passing storage ``(cost, class, duration, window)`` and the chain."""
    peak = max(float(np.max(model.facility(MitigationOption(), d, 0.0)[0]))
               for d in range(model.draws))
    chain = StorageChain(peak, sorted(set(grid.battery_power_fraction)))
    techs, why = available_storage(model.scenario.hardware.gpu_model)
    techs = [t for t in grid.storage if t in techs]
    for n in why:
        if n not in model.notes:
            model.notes.append(n)
    stores = []
    if techs:
        phase(f"3. storage alone: {', '.join(techs)}")
    for tech in techs:
        for dur in grid.durations_h(tech):
            for win in sorted(set(grid.battery_window_s)):
                hit = s.first_passing(chain(MitigationOption(), tech, dur, win))
                if hit is not None:
                    stores.append((s.cost_of(hit), tech, dur, win))
    return techs, stores, chain


def hybrid_step(s: OptionSearch, grid: SearchGrid, axes: SearchAxes, techs: list,
                stores: list, chain: StorageChain, hybrid_storage: int, phase) -> None:
    """Smoothing together with storage: a weak (cheap) smoothing setting that fails on
    its own, with the smallest storage that then passes.  Only combinations that can
    still beat the cheapest passing option are tried: a base whose own cost is already
    higher is skipped, and the storage chain is cut where storage capital alone would
    make the pair dearer (so the CSV's Pareto set is complete near the cheapest option,
    not far from it)."""
    pairs = [(t, d, w) for _, t, d, w in sorted(stores)[:hybrid_storage]] or [
        (techs[0], grid.durations_h(techs[0])[-1], min(set(grid.battery_window_s)))]
    bases = [MitigationOption(percent_tmp_floor=float(f)) for f in axes.floors if f > 0]
    bases += [MitigationOption(ramp_down_rate_w_per_s=float(r)) for r in axes.rates]
    phase(f"4. smoothing with storage: {len(bases)} weak smoothing settings")
    for base in bases:
        best = s.cheapest_passing_cost()
        row = s.evaluate(base)
        if row["passes"] or row["cost_usd_per_day"] >= best:
            continue
        for tech, dur, win in pairs:
            s.first_passing([o for o in chain(base, tech, dur, win)
                             if row["cost_usd_per_day"] + capital_usd_per_day(o) < best])
