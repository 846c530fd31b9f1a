"""Size the cheapest mitigation that makes a site meet a utility's requirements.

:func:`size_mitigation` searches the mitigation space of issue 13 — NVML-style GPU power
smoothing (:mod:`powerlab.interconnect.smoothing`: floor % of TDP, ramp-up and ramp-down W/s,
ramp-down hysteresis ms), a filler workload that holds GPU power during communication
waits, staggered starts of jobs that start together, and a battery or supercapacitor at
the point of interconnection (MW, MWh, round-trip efficiency, control window) — and
returns a :class:`SizingResult` whose ``options`` frame is the Pareto set of passing
options, cheapest first (``mitigation_options.csv``).

How an option is evaluated (fast path)
--------------------------------------
The engine is run once per job and filler setting (:func:`~powerlab.grid.forecast.forecast`,
public API, no mitigation switched on): job ``j`` alone on the cluster gives its per-GPU
mean power ``g_j = (IT_j - constant_j) / gpus_j`` per draw, with ``constant_j`` the
power of the GPUs in no job and of the nodes.  An option is then array arithmetic per
draw: :func:`~powerlab.interconnect.smoothing.smooth_power` on ``g_j`` (while the job holds its
GPUs), a shift by the job's stagger delay, ``IT = constant + sum_j gpus_j g_j``,
facility power from IT through the engine's public facility model
(:func:`~powerlab.grid.facility.facility_power`: losses, lagging cooling, base load), then
:func:`~powerlab.grid.battery.battery_dispatch`, then
:meth:`~powerlab.interconnect.compliance.Compliance.evaluate`.  Smoothing the *mean* of a job's
GPUs instead of each GPU is exact without timing jitter and an approximation with it
(the per-GPU offsets spread each edge over a few ticks); ``tests/test_sizing.py``
compares it with the engine's own per-GPU floor and ramp limit.

The search (structured, monotone)
---------------------------------
1. The option with nothing switched on; when it passes it is the answer (cost 0).
2. Per-GPU options: for every (floor, hysteresis, filler, stagger) of the grid, the
   fastest ramp rate (same up and down; the cheapest in delayed work) that passes,
   found by bisection over the sorted rates, assuming a slower ramp never hurts.
   For the five cheapest of these, ramp-up and ramp-down apart: the fastest ramp-up that
   passes with the ramp-down kept (the ramp-up limit delays work), then the fastest
   ramp-down with that ramp-up (the ramp-down limit burns energy).
3. Storage: for every (duration, control window) of the grid, the smallest battery power
   that passes, by bisection over the sorted powers.
4. Smoothing with storage: each weak smoothing setting (a floor alone, a ramp-down limit
   alone) that fails on its own and costs less than the cheapest passing option so far,
   with the smallest storage that then passes, for the two cheapest storage shapes of
   step 3.  Storage that would make the pair dearer than the cheapest option so far is
   not tried, so the Pareto set is complete near the cheapest option, not far from it.
Every evaluated option that passes is priced; the Pareto set over (extra energy,
throughput loss, storage MWh) is kept and ordered by :class:`CostModel` cost.

Costs
-----
``extra_energy_megawatt_hours_per_day``: grid energy over the unmitigated site's,
battery recharge included (mean over draws, per day of horizon).
``throughput_loss_pct``: filler (``filler_throughput_loss_pct``, 5 % after Choukse et
al. 2025) on the jobs it runs with, plus the stagger delay as a share of each job's
allocation, plus work delayed by the ramp-up limit (power withheld below the demand as a
share of the job's power above idle) — GPU-hours weighted.
The dollar weights of :class:`CostModel` are illustrative assumptions, not prices.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError
from .compliance import Compliance
from .powertrace import PowerTrace

__all__ = [
    "CostModel",
    "MitigationOption",
    "SearchGrid",
    "SiteModel",
    "SizingResult",
    "pareto_front",
    "size_mitigation",
]

OPTION_COLUMNS = ("gpu_power_floor_pct_tdp", "ramp_up_w_per_s", "ramp_down_w_per_s",
                  "ramp_down_hysteresis_ms", "filler", "stagger_starts_s",
                  "battery_power_megawatts", "battery_energy_megawatt_hours",
                  "battery_round_trip_efficiency", "battery_window_s")
COST_AXES = ("extra_energy_megawatt_hours_per_day", "throughput_loss_pct",
             "storage_megawatt_hours")


@dataclass(frozen=True)
class MitigationOption:
    """One point of the mitigation space (0 / False: off).

    Attributes
    ----------
    gpu_power_floor_pct_tdp : float
        Smoothing floor while a job holds a GPU [% of TDP].
    ramp_up_w_per_s, ramp_down_w_per_s : float
        Per-GPU smoothing rates [W/s].
    ramp_down_hysteresis_ms : float
        Hold before ramping down [ms].
    filler : bool
        A filler workload holds GPU power at the compute level during communication waits.
    stagger_starts_s : float
        Jobs that start together start this far apart, in file order [s].
    battery_power_megawatts, battery_energy_megawatt_hours : float
        Storage at the point of interconnection [MW], [MWh] (0: none).
    battery_round_trip_efficiency : float
        [-].
    battery_window_s : float
        Trailing moving average the storage holds the grid to [s].
    """

    gpu_power_floor_pct_tdp: float = 0.0
    ramp_up_w_per_s: float = 0.0
    ramp_down_w_per_s: float = 0.0
    ramp_down_hysteresis_ms: float = 0.0
    filler: bool = False
    stagger_starts_s: float = 0.0
    battery_power_megawatts: float = 0.0
    battery_energy_megawatt_hours: float = 0.0
    battery_round_trip_efficiency: float = 0.9
    battery_window_s: float = 60.0

    @property
    def smoothing(self) -> bool:
        """Whether GPU power smoothing is on."""
        return bool(self.gpu_power_floor_pct_tdp or self.ramp_up_w_per_s
                    or self.ramp_down_w_per_s or self.ramp_down_hysteresis_ms)

    @property
    def battery(self) -> bool:
        """Whether storage is on."""
        return self.battery_power_megawatts > 0 and self.battery_energy_megawatt_hours > 0

    def label(self) -> str:
        """Short human description."""
        parts = []
        if self.smoothing:
            s = []
            if self.gpu_power_floor_pct_tdp:
                s.append(f"floor {self.gpu_power_floor_pct_tdp:g} % TDP")
            if self.ramp_up_w_per_s or self.ramp_down_w_per_s:
                s.append(f"ramp {self.ramp_up_w_per_s:g}/{self.ramp_down_w_per_s:g} W/s")
            if self.ramp_down_hysteresis_ms:
                s.append(f"hysteresis {self.ramp_down_hysteresis_ms:g} ms")
            parts.append("smoothing (" + ", ".join(s) + ")")
        if self.filler:
            parts.append("filler")
        if self.stagger_starts_s:
            parts.append(f"stagger {self.stagger_starts_s:g} s")
        if self.battery:
            parts.append(f"storage {self.battery_power_megawatts:g} MW / "
                         f"{self.battery_energy_megawatt_hours:g} MWh, "
                         f"{self.battery_window_s:g}-s window")
        return " + ".join(parts) or "none"


@dataclass(frozen=True)
class CostModel:
    """Dollar weights that order the options (illustrative assumptions).

    Attributes
    ----------
    energy_usd_per_megawatt_hour : float
        Price of extra grid energy [$/MWh].
    gpu_hour_usd : float
        Value of one GPU-hour of training [$/GPU-h]; throughput loss is priced as the
        GPU-hours it wastes.
    storage_usd_per_megawatt_hour_day, storage_usd_per_megawatt_day : float
        Storage capital cost per day of life, per MWh and per MW [$/(MWh day)],
        [$/(MW day)] (e.g. $300k/MWh and $150k/MW over 10 years).
    filler_throughput_loss_pct : float
        Throughput the filler workload costs (about 5 %, Choukse et al. 2025) [%].
    """

    energy_usd_per_megawatt_hour: float = 80.0
    gpu_hour_usd: float = 2.0
    storage_usd_per_megawatt_hour_day: float = 82.0
    storage_usd_per_megawatt_day: float = 41.0
    filler_throughput_loss_pct: float = 5.0


@dataclass(frozen=True)
class SearchGrid:
    """The settings the structured search tries (see the module docstring)."""

    floor_pct_tdp: tuple[float, ...] = (0, 20, 40, 60, 80, 90)
    ramp_w_per_s: tuple[float, ...] = (0, 2000, 1000, 500, 250, 125, 60, 30, 15, 8, 4)
    hysteresis_ms: tuple[float, ...] = (0, 1000, 4000)
    filler: tuple[bool, ...] = (False, True)
    stagger_s: tuple[float, ...] = (0, 30, 120, 600)
    battery_power_fraction: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4, 0.8)
    battery_duration_h: tuple[float, ...] = (0.05, 0.25)
    battery_window_s: tuple[float, ...] = (10, 60)
    battery_round_trip_efficiency: float = 0.9

    def refined(self) -> SearchGrid:
        """A grid with a midpoint between neighbouring settings (for stability checks)."""
        def mid(vals, geometric=False):
            v = sorted(set(vals))
            out = set(v)
            for a, b in itertools.pairwise(v):
                out.add(math.sqrt(a * b) if geometric and a > 0 else (a + b) / 2)
            return tuple(sorted(out))
        rates = sorted(set(self.ramp_w_per_s) - {0})
        return dataclasses.replace(
            self, floor_pct_tdp=mid(self.floor_pct_tdp),
            ramp_w_per_s=(0, *sorted(mid(rates, True), reverse=True)),
            hysteresis_ms=mid(self.hysteresis_ms),
            battery_power_fraction=mid(self.battery_power_fraction, True))


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

    @classmethod
    def build(cls, scenario, *, draws: int, seed: int, tick_s: float | None,
              filler: bool) -> SiteModel:
        """Run the engine once per job (and per filler setting)."""
        from ..grid.forecast import forecast
        from ..grid.scenario import Mitigations

        sc0 = scenario.replace(mitigations=Mitigations(),
                               horizon_start_utc=scenario.start_utc,
                               horizon_end_utc=scenario.end_utc)
        hw = sc0.hardware
        used = sum(j.gpus for j in sc0.jobs)
        constant = (hw.cluster_gpus - used) * hw.gpu_idle_w + hw.nodes * hw.node_overhead_w
        series, active, runs = {}, [], 0
        pue = start = tick = None
        sags: list = []
        for ji, job in enumerate(sc0.jobs):
            for fill in ((False, True) if filler else (False,)):
                j = dataclasses.replace(job, comm_w=max(job.comm_w, job.compute_w)) \
                    if fill else job
                sub = sc0.replace(jobs=(j,))
                res = forecast(sub, draws=draws, seed=seed, tick_s=tick_s)
                runs += 1
                own = (hw.cluster_gpus - j.gpus) * hw.gpu_idle_w + hw.nodes * hw.node_overhead_w
                series[(ji, fill)] = (np.asarray(res.it_w) - own) / j.gpus
                if pue is None:
                    pue, start, tick = np.asarray(res.pue, float), res.start_utc, res.tick_s
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
        return cls(sc0, float(tick), start, pue, float(sc0.site.base_load_w), constant,
                   series, active, engine_runs=runs, draws=draws, sag_events=sags,
                   notes=notes)

    def grid_w(self, fac: np.ndarray, it: np.ndarray, opt: MitigationOption
               ) -> tuple[np.ndarray, float]:
        """(power at the point of interconnection [W], its energy with storage recharge
        [J]): storage dispatch on the facility power, then load carried by UPS batteries
        during voltage sags, as the engine does (``ForecastResult.facility_w``)."""
        from ..grid.disturbances import ups_transfer_w

        grid, e_j = _grid_energy(fac, self.tick_s, opt)
        ups = ups_transfer_w(self.scenario, it[None, :], self.start_utc, self.tick_s)
        if ups is None:
            return grid, e_j
        return grid - ups[0], e_j - float(ups[0].sum() * self.tick_s)

    def trace(self, opt: MitigationOption, d: int, filler_loss_pct: float,
              description: str = "") -> tuple[PowerTrace, float, float]:
        """(power trace with the draw's sag events, grid energy [J], throughput loss [%])
        of one option in draw ``d``."""
        fac, it, loss_pct = self.facility(opt, d, filler_loss_pct)
        grid, e_j = self.grid_w(fac, it, opt)
        ev = self.sag_events[d] if self.sag_events else None
        kw = {"events": ev} if ev is not None else {}
        return (PowerTrace(d, self.tick_s, self.start_utc, it, grid, description=description,
                           **kw), e_j, loss_pct)


    @property
    def days(self) -> float:
        """Horizon length [d]."""
        return len(self.pue) * self.tick_s / 86400.0

    def stagger_delays_s(self, stagger_s: float) -> list[float]:
        """Start delay of each job: rank among jobs starting together x stagger [s]."""
        seen: dict = {}
        out = []
        for job in self.scenario.jobs:
            k = seen.get(job.start_utc, 0)
            seen[job.start_utc] = k + 1
            out.append(k * stagger_s)
        return out

    def facility(self, opt: MitigationOption, d: int, filler_loss_pct: float
                 ) -> tuple[np.ndarray, np.ndarray, float]:
        """(facility power before storage [W], IT power [W], throughput loss [%]) of one
        option in draw ``d``."""
        from .smoothing import smooth_power

        sc = self.scenario
        hw = sc.hardware
        it = np.full(len(self.pue), self.constant_w)
        delays = self.stagger_delays_s(opt.stagger_starts_s)
        lost_gpu_s = total_gpu_s = 0.0
        for ji, job in enumerate(sc.jobs):
            g = self.gpu_mean_w[(ji, bool(opt.filler))][d]
            act = self.active[ji]
            if opt.smoothing:
                y = smooth_power(g, self.tick_s,
                                 floor_w=opt.gpu_power_floor_pct_tdp / 100 * hw.gpu_tdp_w,
                                 ramp_up_w_per_s=opt.ramp_up_w_per_s,
                                 ramp_down_w_per_s=opt.ramp_down_w_per_s,
                                 hysteresis_s=opt.ramp_down_hysteresis_ms / 1000, active=act)
                above = np.maximum(g - hw.gpu_idle_w, 0)[act].sum()
                deficit = np.maximum(g - y, 0)[act].sum()
                ramp_frac = deficit / above if above > 0 else 0.0
            else:
                y, ramp_frac = g, 0.0
            k = round(delays[ji] / self.tick_s)
            if k > 0:
                y = np.concatenate([np.full(min(k, len(y)), hw.gpu_idle_w), y[:len(y) - k]])
            it += job.gpus * y
            alloc_s = job.duration_s
            frac = ramp_frac + min(delays[ji], alloc_s) / alloc_s
            if opt.filler:
                frac += filler_loss_pct / 100
            lost_gpu_s += job.gpus * alloc_s * frac
            total_gpu_s += job.gpus * alloc_s
        loss_pct = 100.0 * lost_gpu_s / total_gpu_s if total_gpu_s else 0.0
        from ..grid.facility import facility_power

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


def _grid_energy(fac: np.ndarray, tick_s: float, opt: MitigationOption
                 ) -> tuple[np.ndarray, float]:
    """(grid power [W], grid energy with storage recharge [J])."""
    if not opt.battery:
        return fac, float(fac.sum() * tick_s)
    from ..grid.battery import battery_dispatch
    from ..grid.scenario import Battery

    bat = Battery(power_megawatts=opt.battery_power_megawatts,
                  energy_megawatt_hours=opt.battery_energy_megawatt_hours,
                  round_trip_efficiency=opt.battery_round_trip_efficiency,
                  window_s=opt.battery_window_s)
    b, soc = battery_dispatch(fac, tick_s, bat)
    drain = bat.initial_soc_fraction * bat.energy_megawatt_hours * 3.6e9 - soc[-1]
    recharge = max(drain, 0.0) / bat.round_trip_efficiency + min(drain, 0.0)
    grid = fac - b
    return grid, float(grid.sum() * tick_s + recharge)


def pareto_front(frame: pd.DataFrame, axes=COST_AXES) -> np.ndarray:
    """Boolean mask of the rows no other row dominates (<= on every axis, < on one)."""
    v = frame[list(axes)].to_numpy(float)
    v = np.round(v, 9)
    keep = np.ones(len(v), dtype=bool)
    for i in range(len(v)):
        le = (v <= v[i]).all(axis=1)
        lt = (v < v[i]).any(axis=1)
        if (le & lt).any():
            keep[i] = False
    # among identical cost vectors keep the first
    _, first = np.unique(v, axis=0, return_index=True)
    dup = np.zeros(len(v), dtype=bool)
    dup[first] = True
    return keep & dup


class _Search:
    """Evaluates options on a :class:`SiteModel` (cached) against a :class:`Compliance`."""

    def __init__(self, model: SiteModel, check: Compliance, cost: CostModel):
        self.m, self.check, self.cost = model, check, cost
        self.rows: dict[MitigationOption, dict] = {}
        self._base_energy = None

    def evaluate(self, opt: MitigationOption) -> dict:
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
        n = len(m.pue)
        res = self.check.result(pd.DataFrame(vals), tick_s=m.tick_s,
                                native_interval_s=m.tick_s, duration_s=n * m.tick_s)
        if self._base_energy is None:
            if opt != MitigationOption():
                raise PowerlabError("the unmitigated option is evaluated first")
            self._base_energy = np.array(energy)
        extra_mwh_day = float(np.mean(np.array(energy) - self._base_energy)) / 3.6e9 / m.days
        v = res.verdicts
        sf = res.summary_frame().set_index("requirement")
        row = {"option": opt.label(), **dataclasses.asdict(opt),
               "extra_energy_megawatt_hours_per_day": extra_mwh_day,
               "throughput_loss_pct": float(np.mean(loss)),
               "storage_megawatt_hours": opt.battery_energy_megawatt_hours if opt.battery
               else 0.0,
               "storage_megawatts": opt.battery_power_megawatts if opt.battery else 0.0,
               "passes": bool(res.passed),
               "requirements_passed": ";".join(v.index[v == "pass"]),
               "requirements_failed": ";".join(v.index[v == "fail"]),
               "requirements_not_shown": ";".join(res.not_assessed),
               "_values": sf["value"].to_dict()}
        gpus = sum(j.gpus for j in m.scenario.jobs)
        c = self.cost
        row["cost_usd_per_day"] = (
            max(extra_mwh_day, 0.0) * c.energy_usd_per_megawatt_hour
            + row["throughput_loss_pct"] / 100 * gpus * 24 * c.gpu_hour_usd
            + row["storage_megawatt_hours"] * c.storage_usd_per_megawatt_hour_day
            + row["storage_megawatts"] * c.storage_usd_per_megawatt_day)
        if not opt.battery:
            row["battery_energy_megawatt_hours"] = row["battery_power_megawatts"] = 0.0
            row["battery_round_trip_efficiency"] = row["battery_window_s"] = math.nan
        self.rows[opt] = row
        return row

    def passes(self, opt: MitigationOption) -> bool:
        return self.evaluate(opt)["passes"]

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


class SizingResult:
    """Result of :func:`size_mitigation`.

    Attributes
    ----------
    options : DataFrame
        Pareto set of passing options, cheapest first (``mitigation_options.csv``).
    evaluated : DataFrame
        Every option evaluated, passing or not.
    engine_runs : int
        Forecast engine runs [-].
    evaluations : int
        Option x draw evaluations (array arithmetic and one compliance check each) [-].
    """

    def __init__(self, spec, evaluated: pd.DataFrame, *, engine_runs: int, evaluations: int,
                 draws: int, seed: int, description: str, cost: CostModel,
                 model: SiteModel | None = None):
        self.spec = spec
        self._model = model
        self.evaluated = evaluated
        self.engine_runs = engine_runs
        self.evaluations = evaluations
        self.draws = draws
        self.seed = seed
        self.description = description
        self.cost = cost
        ok = evaluated[evaluated["passes"]]
        if len(ok):
            ok = ok[pareto_front(ok)]
            ok = ok.sort_values(["cost_usd_per_day", *COST_AXES], kind="stable")
        cols = ["option", *OPTION_COLUMNS, *COST_AXES, "storage_megawatts",
                "cost_usd_per_day", "requirements_passed"]
        self.options = ok[cols].reset_index(drop=True)

    @property
    def found(self) -> bool:
        """Whether a passing option exists."""
        return len(self.options) > 0

    @property
    def cheapest(self) -> pd.Series | None:
        """The cheapest passing option (a row of :attr:`options`), or None."""
        return self.options.iloc[0] if self.found else None

    def option(self, i: int = 0) -> MitigationOption:
        """Row ``i`` of :attr:`options` as a :class:`MitigationOption` (0: the cheapest)."""
        row = self.options.iloc[i]
        kw = {f.name: row[f.name] for f in dataclasses.fields(MitigationOption)}
        if not kw["battery_power_megawatts"] > 0:
            kw.update(battery_round_trip_efficiency=0.9, battery_window_s=60.0)
        kw = {k: (bool(v) if k == "filler" else float(v)) for k, v in kw.items()}
        return MitigationOption(**kw)

    def trace(self, option: MitigationOption | int = 0, draw: int = 0) -> PowerTrace:
        """The site's power with an option applied, one draw (for comply, resonance
        screening or a grid-study export of the mitigated site)."""
        if self._model is None:
            raise PowerlabError("this result keeps no forecast to apply options to")
        m = self._model
        opt = self.option(option) if isinstance(option, (int, np.integer)) else option
        if not 0 <= draw < m.draws:
            raise PowerlabError(f"draw must be in 0..{m.draws - 1}, got {draw}")
        return m.trace(opt, draw, self.cost.filler_throughput_loss_pct,
                       description=f"{self.description}, draw {draw}, with "
                                   f"{opt.label()}")[0]

    def summary(self) -> str:
        """Text summary."""
        base = self.evaluated.iloc[0]
        lines = ["Mitigation sizing", "=" * 17,
                 f"{'requirement spec':<24}{self.spec.name}",
                 f"{'evaluated':<24}{self.description}",
                 f"{'engine runs':<24}{self.engine_runs}",
                 (f"{'option evaluations':<24}{len(self.evaluated)} options x {self.draws} "
                 f"draws = {self.evaluations}"),
                 f"{'unmitigated fails':<24}{base['requirements_failed'] or '-'}", ""]
        if self._model is not None:
            lines[-1:-1] = [f"note: {n}" for n in self._model.notes]
        if self.found:
            c = self.cheapest
            lines.append(f"Cheapest passing option: {c['option']}")
            lines.append(f"  extra energy {c['extra_energy_megawatt_hours_per_day']:.3g} MWh/day, "
                         f"throughput loss {c['throughput_loss_pct']:.3g} %, storage "
                         f"{c['storage_megawatt_hours']:.3g} MWh, "
                         f"~${c['cost_usd_per_day']:,.0f}/day (illustrative prices)")
            lines.append(f"{len(self.options)} Pareto-optimal passing option(s) in "
                         "mitigation_options.csv")
        else:
            lines.append("NO passing option in the searched space")
            worst = self.evaluated["requirements_failed"].str.split(";").explode()
            lines.append("Requirements failed most often: " + ", ".join(
                worst.value_counts().index[:5]))
            sets = [set(x.split(";")) - {""} for x in self.evaluated["requirements_not_shown"]]
            never = set.intersection(*sets) if sets else set()
            if never:
                lines.append(
                    f"{', '.join(sorted(never))}: cannot be shown met by this forecast in "
                    "any option (a band above the tick's Nyquist frequency, or a "
                    "ride-through requirement without a voltage sag): use a finer tick "
                    "(e.g. --tick-s 0.01 for 3-30 Hz) or give --sags")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def write(self, out_dir) -> tuple[Path, Path]:
        """Write ``mitigation_options.csv`` and ``mitigation_summary.txt``."""
        from ..telemetry.store import atomic_write_bytes
        from .compliance import output_folder

        out = output_folder(out_dir)
        text = self.options.to_csv(index=False, float_format="%.6g")
        csv = atomic_write_bytes(out / "mitigation_options.csv",
                                 lambda tmp: Path(tmp).write_text(text, "utf-8"))
        summ = self.summary() + "\n"
        txt = atomic_write_bytes(out / "mitigation_summary.txt",
                                 lambda tmp: Path(tmp).write_text(summ, "utf-8"))
        return csv, txt


def size_mitigation(scenario, spec, *, draws: int = 5, seed: int = 0,
                    tick_s: float | None = None, grid: SearchGrid | None = None,
                    cost: CostModel | None = None) -> SizingResult:
    """Search the mitigation space for the cheapest options that meet a requirement spec.

    Parameters
    ----------
    scenario : Scenario or path-like
        The site (its own ``mitigations`` are ignored: the search sets them).
    spec : RequirementSpec, Compliance or path-like
    draws : int, default 5
        Monte Carlo draws every option is evaluated on; an option passes when the spec's
        ``max_exceed_probability`` holds over them [-].
    seed : int, default 0
    tick_s : float, optional
        Engine tick [s].
    grid : SearchGrid, optional
    cost : CostModel, optional

    Returns
    -------
    SizingResult
    """
    from ..grid.scenario import Scenario, read_scenario

    if isinstance(scenario, (str, Path)):
        scenario = read_scenario(scenario)
    if not isinstance(scenario, Scenario):
        raise PowerlabError("size_mitigation needs a scenario (a forecast to mitigate)")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise PowerlabError(f"draws must be an integer >= 1, got {draws!r}")
    check = spec if isinstance(spec, Compliance) else Compliance(spec)
    grid = grid or SearchGrid()
    cost = cost or CostModel()
    model = SiteModel.build(scenario, draws=int(draws), seed=seed, tick_s=tick_s,
                            filler=True in grid.filler)
    s = _Search(model, check, cost)
    none = MitigationOption()
    if not s.passes(none):
        _search(s, model, grid)
    ev = pd.DataFrame([{k: v for k, v in r.items() if k != "_values"}
                       for r in s.rows.values()])
    return SizingResult(check.spec, ev, engine_runs=model.engine_runs,
                        evaluations=model.evaluations, draws=int(draws), seed=seed,
                        description=f"forecast of scenario {scenario.name!r}, {draws} draws, "
                                    f"seed {seed}, tick {model.tick_s:g} s", cost=cost,
                        model=model)


def _rate_chain(base: MitigationOption, field_name: str, rates: list[float]
                ) -> list[MitigationOption]:
    """``base`` with one rate set to off, then each rate from fast (weak) to slow (strong)."""
    return [dataclasses.replace(base, **{field_name: float(r)}) for r in [0.0, *rates]]


def _cost_of(s: _Search, opt: MitigationOption) -> float:
    return float(s.evaluate(opt)["cost_usd_per_day"])


def _cheapest_passing_cost(s: _Search) -> float:
    costs = [r["cost_usd_per_day"] for r in s.rows.values() if r["passes"]]
    return min(costs) if costs else math.inf


def _search(s: _Search, model: SiteModel, grid: SearchGrid, *,
            refine_rates: int = 5, hybrid_storage: int = 2) -> None:
    together = len({j.start_utc for j in model.scenario.jobs}) < len(model.scenario.jobs)
    staggers = sorted(set(grid.stagger_s)) if together else [0.0]
    rates = [r for r in grid.ramp_w_per_s if r > 0]
    rates = sorted(set(rates), reverse=True)         # fast (weak) to slow (strong)
    hits = []
    # 2. per-GPU options: the fastest symmetric ramp rate that passes, per base setting
    for fl in sorted(set(grid.floor_pct_tdp)):
        for h in sorted(set(grid.hysteresis_ms)):
            for fill in sorted(set(grid.filler)):
                for st in staggers:
                    base = MitigationOption(gpu_power_floor_pct_tdp=float(fl),
                                            ramp_down_hysteresis_ms=float(h),
                                            filler=bool(fill), stagger_starts_s=float(st))
                    chain = [base] + [dataclasses.replace(base, ramp_up_w_per_s=float(r),
                                                          ramp_down_w_per_s=float(r))
                                      for r in rates]
                    hit = s.first_passing(chain)
                    if hit is not None and hit.ramp_up_w_per_s > 0:
                        hits.append(hit)
    # 2b. ramp-up and ramp-down apart (the ramp-up limit delays work, the ramp-down limit
    # burns energy): for the cheapest symmetric hits, the fastest ramp-up that passes with
    # the ramp-down kept, then the fastest ramp-down with that ramp-up (coordinate search)
    for hit in sorted(hits, key=lambda o: _cost_of(s, o))[:refine_rates]:
        r = hit.ramp_up_w_per_s
        faster = [x for x in rates if x >= r]         # off, then fast ... r (passes)
        up = s.first_passing(_rate_chain(hit, "ramp_up_w_per_s", faster))
        s.first_passing(_rate_chain(up, "ramp_down_w_per_s", faster))
    # 3. storage alone: the smallest power that passes, per (duration, control window)
    peak = max(float(np.max(model.facility(MitigationOption(), d, 0.0)[0]))
               for d in range(model.draws))
    powers = sorted(set(grid.battery_power_fraction))

    def storage_chain(base: MitigationOption, dur: float, win: float):
        out = []
        for f in powers:
            p_mw = round(f * peak / 1e6, 3)
            out.append(dataclasses.replace(
                base, battery_power_megawatts=p_mw,
                battery_energy_megawatt_hours=round(p_mw * dur, 4),
                battery_round_trip_efficiency=grid.battery_round_trip_efficiency,
                battery_window_s=float(win)))
        return out

    stores = []
    for dur in sorted(set(grid.battery_duration_h)):
        for win in sorted(set(grid.battery_window_s)):
            hit = s.first_passing(storage_chain(MitigationOption(), dur, win))
            if hit is not None:
                stores.append((_cost_of(s, hit), dur, win))
    # 4. smoothing together with storage: a weak (cheap) smoothing setting that fails on
    # its own, with the smallest storage that then passes.  Only combinations that can
    # still beat the cheapest passing option are tried: a base whose own cost is already
    # higher is skipped, and the storage chain is cut where storage capital alone would
    # make the pair dearer (so the CSV's Pareto set is complete near the cheapest option,
    # not far from it).
    pairs = [(d, w) for _, d, w in sorted(stores)[:hybrid_storage]] or [
        (d, w) for d in sorted(set(grid.battery_duration_h))[-1:]
        for w in sorted(set(grid.battery_window_s))[:1]]
    bases = [MitigationOption(gpu_power_floor_pct_tdp=float(f))
             for f in sorted(set(grid.floor_pct_tdp)) if f > 0]
    bases += [MitigationOption(ramp_down_w_per_s=float(r)) for r in rates]
    c = s.cost
    for base in bases:
        best = _cheapest_passing_cost(s)
        row = s.evaluate(base)
        if row["passes"] or row["cost_usd_per_day"] >= best:
            continue
        for dur, win in pairs:
            chain = [o for o in storage_chain(base, dur, win) if row["cost_usd_per_day"]
                     + o.battery_energy_megawatt_hours * c.storage_usd_per_megawatt_hour_day
                     + o.battery_power_megawatts * c.storage_usd_per_megawatt_day < best]
            s.first_passing(chain)
