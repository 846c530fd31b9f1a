"""Size the cheapest mitigation that makes a site meet a utility's requirements.

:func:`size_mitigation` searches the mitigation space of issue 13 — NVML power smoothing
(:mod:`powerlab.interconnect.smoothing`, NVML's profile parameters under their names and
units; offered only on Blackwell or newer GPUs, by the scenario's ``gpu_model``), a filler
workload that holds GPU power during communication waits, staggered starts of jobs that
start together, and storage of a technology class (:mod:`powerlab.interconnect.storage`:
Li-ion, supercapacitor, rack power-supply storage, each with its C-rate and duration
range, state-of-charge bounds and converter response; MW, MWh, control window) — and
returns a :class:`SizingResult` whose ``options`` frame is the Pareto set of passing
options, cheapest first (``mitigation_options.csv``).

Assessability first
-------------------
Before any engine run, :func:`~powerlab.interconnect.assessability.assess` checks that a
forecast at the tick and horizon can show every requirement met (a band below the tick's
Nyquist frequency, whole-tick windows, a voltage sag in the scenario for a ride-through
requirement).  If not, the result's status is ``not_assessable``, with no engine run and
no evaluation, and it says why and which command can assess the spec (``--tick-s 0.01``,
``--hours``, a sag to add); ``tick_s='auto'`` runs at the largest tick that can.  The
status tells ``no_mitigation_needed`` (the site passes as it is) from ``options_found``
and ``none_passes``.

How an option is evaluated (fast path)
--------------------------------------
The engine is run once per job and filler setting (:func:`~powerlab.site.engine.forecast`,
public API, no mitigation switched on; :class:`~powerlab.interconnect.sitemodel.SiteModel`),
and once more without the scenario's voltage sags when it has any (the ride-through
counterfactual, :mod:`powerlab.interconnect.ridethrough`): job ``j`` alone on the cluster gives its per-GPU
mean power ``g_j = (IT_j - constant_j) / gpus_j`` per draw, with ``constant_j`` the
power of the GPUs in no job and of the nodes.  An option is then array arithmetic per
draw: :func:`~powerlab.interconnect.smoothing.smooth_power` on ``g_j`` (while the job holds its
GPUs), a shift by the job's stagger delay, ``IT = constant + sum_j gpus_j g_j``,
facility power from IT through the engine's public facility model
(:func:`~powerlab.site.facility.facility_power`: losses, lagging cooling, base load), then
:func:`~powerlab.site.battery.battery_dispatch`, then
:meth:`~powerlab.interconnect.compliance.Compliance.evaluate`.  Smoothing the *mean* of a job's
GPUs instead of each GPU is exact without timing jitter and an approximation with it
(the per-GPU offsets spread each edge over a few ticks); ``tests/interconnect/test_sizing.py``
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
3. Storage: for every technology the site can have, and every (duration within the
   class's range, control window) of the grid, the smallest power that passes, by
   bisection over the sorted powers.
4. Smoothing with storage: each weak smoothing setting (a floor alone, a ramp-down limit
   alone; Blackwell or newer only) that fails on its own and costs less than the cheapest passing option so far,
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
Storage capital per day comes from its technology class
(:data:`~powerlab.interconnect.storage.TECHNOLOGIES`).
The dollar weights of :class:`CostModel` are illustrative assumptions, not prices.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._summary import Summary
from ..exceptions import PowerlabError
from .compliance import Compliance
from .powertrace import PowerTrace
from .sitemodel import SiteModel
from .storage import TECHNOLOGIES, storage_battery

__all__ = [
    "CostModel",
    "MitigationOption",
    "SearchGrid",
    "SiteModel",
    "SizingResult",
    "pareto_front",
    "size_mitigation",
]

OPTION_COLUMNS = ("percent_tmp_floor", "ramp_up_rate_w_per_s", "ramp_down_rate_w_per_s",
                  "ramp_down_hysteresis_ms", "secondary_power_floor_w",
                  "primary_floor_act_win_mult", "primary_floor_tar_win_mult",
                  "primary_floor_act_offset_w", "filler", "stagger_starts_s",
                  "storage_technology", "battery_power_megawatts",
                  "battery_energy_megawatt_hours", "battery_round_trip_efficiency",
                  "battery_window_s")
#: What a search can end with (``SizingResult.status``).
STATUSES = ("no_mitigation_needed", "options_found", "none_passes", "not_assessable")
COST_AXES = ("extra_energy_megawatt_hours_per_day", "throughput_loss_pct",
             "storage_megawatt_hours")


@dataclass(frozen=True)
class MitigationOption:
    """One point of the mitigation space (0 / False: off).

    Attributes
    ----------
    percent_tmp_floor, ramp_up_rate_w_per_s, ramp_down_rate_w_per_s,
    ramp_down_hysteresis_ms, secondary_power_floor_w, primary_floor_act_win_mult,
    primary_floor_tar_win_mult, primary_floor_act_offset_w : float
        The NVML power-smoothing profile, NVML's names and units
        (:class:`~powerlab.interconnect.smoothing.SmoothingProfile`; the total module
        power is taken as the GPU's TDP): floor [% of TMP], ramp rates [W/s], ramp-down
        hysteresis [ms], secondary floor [W], floor window multipliers [-], activation
        offset [W].  Blackwell or newer only.
    filler : bool
        A filler workload holds GPU power at the compute level during communication waits.
    stagger_starts_s : float
        Jobs that start together start this far apart, in file order [s].
    storage_technology : str
        Class of the storage (:data:`~powerlab.interconnect.storage.TECHNOLOGIES`:
        C-rate, state-of-charge bounds, converter response); ``""`` without storage.
    battery_power_megawatts, battery_energy_megawatt_hours : float
        Storage at the point of interconnection [MW], [MWh] (0: none).
    battery_round_trip_efficiency : float
        The class's [-].
    battery_window_s : float
        Trailing moving average the storage holds the grid to [s].
    """

    percent_tmp_floor: float = 0.0
    ramp_up_rate_w_per_s: float = 0.0
    ramp_down_rate_w_per_s: float = 0.0
    ramp_down_hysteresis_ms: float = 0.0
    secondary_power_floor_w: float = 0.0
    primary_floor_act_win_mult: float = 0.0
    primary_floor_tar_win_mult: float = 0.0
    primary_floor_act_offset_w: float = 0.0
    filler: bool = False
    stagger_starts_s: float = 0.0
    storage_technology: str = ""
    battery_power_megawatts: float = 0.0
    battery_energy_megawatt_hours: float = 0.0
    battery_round_trip_efficiency: float = 0.9
    battery_window_s: float = 60.0

    @property
    def smoothing(self) -> bool:
        """Whether GPU power smoothing is on."""
        return bool(self.percent_tmp_floor or self.ramp_up_rate_w_per_s
                    or self.ramp_down_rate_w_per_s or self.ramp_down_hysteresis_ms
                    or self.secondary_power_floor_w)

    @property
    def profile(self):
        """The NVML power-smoothing profile of the option."""
        from .smoothing import SmoothingProfile

        # the option's columns carry the profile's NVML names: one list, the profile's
        return SmoothingProfile(**{f.name: getattr(self, f.name)
                                   for f in dataclasses.fields(SmoothingProfile)})

    @property
    def battery(self) -> bool:
        """Whether storage is on."""
        return self.battery_power_megawatts > 0 and self.battery_energy_megawatt_hours > 0

    def requires(self) -> str:
        """The hardware the option needs (``""``: any site)."""
        from .storage import TECHNOLOGIES

        need = []
        if self.smoothing:
            need.append("Blackwell or newer GPUs (NVML power smoothing)")
        if self.battery:
            t = TECHNOLOGIES.get(self.storage_technology or "li-ion")
            if t is not None and t.requires_gpu:
                need.append(f"{t.requires_gpu} racks ({t.name} storage)")
        return "; ".join(need)

    def label(self) -> str:
        """Short human description."""
        parts = []
        if self.smoothing:
            s = []
            if self.percent_tmp_floor:
                s.append(f"floor {self.percent_tmp_floor:g} % TMP")
            if self.ramp_up_rate_w_per_s or self.ramp_down_rate_w_per_s:
                s.append(f"ramp {self.ramp_up_rate_w_per_s:g}/"
                         f"{self.ramp_down_rate_w_per_s:g} W/s")
            if self.ramp_down_hysteresis_ms:
                s.append(f"hysteresis {self.ramp_down_hysteresis_ms:g} ms")
            if self.secondary_power_floor_w:
                s.append(f"secondary floor {self.secondary_power_floor_w:g} W")
            parts.append("NVML power smoothing (" + ", ".join(s) + ")")
        if self.filler:
            parts.append("filler")
        if self.stagger_starts_s:
            parts.append(f"stagger {self.stagger_starts_s:g} s")
        if self.battery:
            parts.append(f"{self.storage_technology or 'li-ion'} storage "
                         f"{self.battery_power_megawatts:g} MW / "
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
    filler_throughput_loss_pct : float
        Throughput the filler workload costs (about 5 %, Choukse et al. 2025) [%].
    """

    energy_usd_per_megawatt_hour: float = 80.0
    gpu_hour_usd: float = 2.0
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
    #: durations tried per technology (None: each class's own ``durations_h``); a
    #: duration outside a class's buildable range is moved to its nearest end
    battery_duration_h: tuple[float, ...] | None = None
    battery_window_s: tuple[float, ...] = (10, 60)
    storage: tuple[str, ...] = ("li-ion", "supercapacitor", "rack-psu")

    def durations_h(self, tech: str) -> list[float]:
        """Durations tried for one storage class [h]."""
        from .storage import clamp_duration_h, technology

        ds = self.battery_duration_h or technology(tech).durations_h
        return sorted({clamp_duration_h(tech, d) for d in ds})

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


def storage_cost_usd_per_day(opt: MitigationOption) -> float:
    """Capital cost per day of an option's storage, from its technology class [$/d]."""
    if not opt.battery:
        return 0.0
    t = TECHNOLOGIES[opt.storage_technology or "li-ion"]
    return (opt.battery_energy_megawatt_hours * t.usd_per_megawatt_hour_day
            + opt.battery_power_megawatts * t.usd_per_megawatt_day)


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
        self.progress = None   # progress hook: a Progress updated once per new option

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
        row = {"option": opt.label(), "requires": opt.requires(), **dataclasses.asdict(opt),
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
            + storage_cost_usd_per_day(opt))
        if not opt.battery:
            row["battery_energy_megawatt_hours"] = row["battery_power_megawatts"] = 0.0
            row["battery_round_trip_efficiency"] = row["battery_window_s"] = math.nan
            row["storage_technology"] = ""
        else:
            row["battery_round_trip_efficiency"] = storage_battery(opt).round_trip_efficiency
        self.rows[opt] = row
        if self.progress is not None:
            self.progress.update()
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
    status : str
        ``no_mitigation_needed`` (the site passes as it is), ``options_found``,
        ``none_passes`` (the search found no passing option) or ``not_assessable`` (the
        spec cannot be shown met by a forecast at this tick and horizon: the search was
        not run; :attr:`assessability` says why and what to run).
    assessability : Assessability
    interrupted : bool
        The search was stopped (Ctrl-C) before its end: :attr:`options` are the best of
        the options evaluated so far, not of the whole searched space.
    """

    def __init__(self, spec, evaluated: pd.DataFrame, *, engine_runs: int, evaluations: int,
                 draws: int, seed: int, description: str, cost: CostModel,
                 model: SiteModel | None = None, assessability=None,
                 interrupted: bool = False):
        self.spec = spec
        self.interrupted = bool(interrupted)
        self._model = model
        self.assessability = assessability
        if evaluated is None or not len(evaluated):
            evaluated = pd.DataFrame(columns=["option", "requires", *OPTION_COLUMNS, *COST_AXES,
                                              "storage_megawatts", "cost_usd_per_day",
                                              "passes", "requirements_passed",
                                              "requirements_failed",
                                              "requirements_not_shown"])
            evaluated["passes"] = evaluated["passes"].astype(bool)
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
        cols = ["option", "requires", *OPTION_COLUMNS, *COST_AXES, "storage_megawatts",
                "cost_usd_per_day", "requirements_passed"]
        self.options = ok[cols].reset_index(drop=True)

    @property
    def found(self) -> bool:
        """Whether a passing option exists."""
        return len(self.options) > 0

    @property
    def status(self) -> str:
        """See the class docstring."""
        if self.assessability is not None and not self.assessability.ok:
            return "not_assessable"
        if not self.found:
            return "none_passes"
        return ("no_mitigation_needed" if self.options.iloc[0]["option"] == "none"
                else "options_found")

    @property
    def cheapest(self) -> pd.Series | None:
        """The cheapest passing option (a row of :attr:`options`), or None."""
        return self.options.iloc[0] if self.found else None

    def option(self, i: int = 0) -> MitigationOption:
        """Row ``i`` of :attr:`options` as a :class:`MitigationOption` (0: the cheapest)."""
        row = self.options.iloc[i]
        kw = {f.name: row[f.name] for f in dataclasses.fields(MitigationOption)}
        if not kw["battery_power_megawatts"] > 0:
            kw.update(battery_round_trip_efficiency=0.9, battery_window_s=60.0,
                      storage_technology="")
        kw = {k: (bool(v) if k == "filler" else v if k == "storage_technology"
                  else float(v)) for k, v in kw.items()}
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

    def summary_frame(self) -> pd.DataFrame:
        """Every option evaluated (a copy of :attr:`evaluated`; the unmitigated site
        first)."""
        return self.evaluated.copy()

    def summary(self, **command_kw) -> Summary:
        """Summary (``command_kw``: scenario, requirements and out paths for the
        command printed when the spec cannot be assessed)."""
        lines = [f"{'requirement spec':<24}{self.spec.name}",
                 f"{'evaluated':<24}{self.description}",
                 f"{'engine runs':<24}{self.engine_runs}",
                 (f"{'option evaluations':<24}{len(self.evaluated)} options x {self.draws} "
                  f"draws = {self.evaluations}"), ""]
        if self.status == "not_assessable":
            lines[-1:-1] = ["", ("NOT ASSESSABLE: the search was not run (a forecast at this "
                                 "tick and horizon cannot show these requirements met)"),
                            self.assessability.text(**command_kw)]
            return _sizing_summary(lines)
        base = self.evaluated.iloc[0]
        lines[-1:-1] = [f"{'unmitigated fails':<24}{base['requirements_failed'] or '-'}"]
        if self._model is not None:
            lines[-1:-1] = [f"note: {n}" for n in self._model.notes]
        if self.status == "no_mitigation_needed":
            lines.append("NO MITIGATION NEEDED: the site as it is meets every requirement")
        elif self.found:
            c = self.cheapest
            lines.append(f"Cheapest passing option: {c['option']}")
            lines.append(f"  extra energy {c['extra_energy_megawatt_hours_per_day']:.3g} MWh/day, "
                         f"throughput loss {c['throughput_loss_pct']:.3g} %, storage "
                         f"{c['storage_megawatt_hours']:.3g} MWh, "
                         f"~${c['cost_usd_per_day']:,.0f}/day (illustrative prices)")
            lines.append(f"{len(self.options)} Pareto-optimal passing option(s) in "
                         "mitigation_options.csv")
        else:
            lines.append("NONE PASSES: no option in the searched space meets every "
                         "requirement")
            worst = self.evaluated["requirements_failed"].str.split(";").explode()
            lines.append("Requirements failed most often: " + ", ".join(
                worst.value_counts().index[:5]))
        return _sizing_summary(lines)

    def __repr__(self) -> str:
        return str(self.summary())

    def _repr_html_(self) -> str:
        return self.summary().as_html()

    def write(self, out_dir, **command_kw) -> tuple[Path, Path]:
        """Write ``mitigation_options.csv`` and ``mitigation_summary.txt``."""
        from ..telemetry.store import atomic_write_bytes
        from .compliance import output_folder

        out = output_folder(out_dir)
        text = self.options.to_csv(index=False, float_format="%.6g")
        csv = atomic_write_bytes(out / "mitigation_options.csv",
                                 lambda tmp: Path(tmp).write_text(text, "utf-8"))
        summ = str(self.summary(**command_kw)) + "\n"
        txt = atomic_write_bytes(out / "mitigation_summary.txt",
                                 lambda tmp: Path(tmp).write_text(summ, "utf-8"))
        return csv, txt


def _sizing_summary(lines: list[str]) -> Summary:
    s = Summary("Mitigation sizing")
    s.add_text(lines, pre=True)
    return s


def size_mitigation(scenario, spec, *, draws: int = 5, seed: int = 0,
                    tick_s: float | str | None = None, grid: SearchGrid | None = None,
                    cost: CostModel | None = None, hours: float | None = None,
                    progress=None) -> SizingResult:
    """Search the mitigation space for the cheapest options that meet a requirement spec.

    First, without running the engine, whether a forecast at the tick can show every
    requirement met (:func:`~powerlab.interconnect.assessability.assess`); when it cannot,
    the result has status ``not_assessable``, no engine run and no evaluation, and says
    why and which command can assess it.

    Parameters
    ----------
    scenario : Scenario or path-like
        The site (its own ``mitigations`` are ignored: the search sets them).
    spec : RequirementSpec, Compliance or path-like
    draws : int, default 5
        Monte Carlo draws every option is evaluated on; an option passes when the spec's
        ``max_exceed_probability`` holds over them [-].
    seed : int, default 0
    tick_s : float or 'auto', optional
        Engine tick (default the scenario's); ``'auto'``: the largest tick at which the
        spec can be assessed [s].
    grid : SearchGrid, optional
    cost : CostModel, optional
    hours : float, optional
        Search over the first ``hours`` of the scenario's horizon only [h].
    progress : bool or None, default None
        Print the size (engine runs x draws x ticks, then at most how many options x
        draws x ticks), an estimate, and then engine draws and options evaluated, rate and
        time left on standard error (:mod:`powerlab._progress`; a line per search step in
        a log): ``True`` always, ``None`` when the estimate is 2 s or more, ``False``
        never.

    Returns
    -------
    SizingResult

    Raises
    ------
    powerlab.exceptions.Interrupted
        On Ctrl-C during the search (a ``KeyboardInterrupt``): its ``partial`` is the
        result of the options evaluated so far (``interrupted`` True; its description,
        in the summary, says so).  Ctrl-C before the first option is evaluated (the
        engine runs) raises the plain ``KeyboardInterrupt``.
    """
    from ..site.scenario import Scenario, read_scenario
    from .assessability import assess

    if isinstance(scenario, (str, Path)):
        scenario = read_scenario(scenario)
    if not isinstance(scenario, Scenario):
        raise PowerlabError("size_mitigation needs a scenario (a forecast to mitigate)")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise PowerlabError(f"draws must be an integer >= 1, got {draws!r}")
    if hours is not None:
        if not (isinstance(hours, (int, float)) and math.isfinite(hours) and hours > 0):
            raise PowerlabError(f"hours must be a positive number, got {hours!r}")
        end = min(pd.Timestamp(scenario.end_utc),
                  pd.Timestamp(scenario.start_utc) + pd.Timedelta(hours=hours))
        scenario = scenario.replace(horizon_start_utc=scenario.start_utc,
                                    horizon_end_utc=end)
    check = spec if isinstance(spec, Compliance) else Compliance(spec)
    grid = grid or SearchGrid()
    cost = cost or CostModel()
    if isinstance(tick_s, str):
        if tick_s != "auto":
            raise PowerlabError(f"tick_s must be a number of seconds or 'auto', got "
                                f"{tick_s!r}")
        from .assessability import needed_tick_s

        dur = (pd.Timestamp(scenario.end_utc) - pd.Timestamp(scenario.start_utc)
               ).total_seconds()
        tick_s = needed_tick_s(check, dur, scenario.tick_s) or scenario.tick_s
    found = assess(scenario, check, tick_s)
    desc = (f"forecast of scenario {scenario.name!r}, {draws} draws, seed {seed}, tick "
            f"{found.tick_s:g} s")
    if not found.ok:
        return SizingResult(check.spec, None, engine_runs=0, evaluations=0,
                            draws=int(draws), seed=seed, description=desc, cost=cost,
                            assessability=found)
    return _run(scenario, check, grid, cost, found, desc, int(draws), seed, tick_s,
                progress)


def _run(scenario, check, grid, cost, found, desc, draws, seed, tick_s, progress
         ) -> SizingResult:
    """The engine runs and the search of :func:`size_mitigation`, with their size,
    estimate and progress, and a partial result on Ctrl-C."""
    from .._progress import Progress
    from ..site.timebase import to_ticks
    from .searchsize import max_option_evaluations, search_estimate_s

    n = to_ticks((pd.Timestamp(scenario.end_utc) - pd.Timestamp(scenario.start_utc)
                  ).total_seconds(), found.tick_s)
    runs = SiteModel.runs_needed(scenario, True in grid.filler)
    most = max_option_evaluations(scenario, grid)    # for the size and estimate
    est_s = search_estimate_s(runs, int(draws), n, most)
    on = (est_s >= 2.0) if progress is None else bool(progress)
    with Progress(runs * int(draws), "size-mitigation", "engine draw", enabled=on) as eng:
        eng.announce(f"{runs} engine runs x {draws} draws x {n:,} ticks of "
                     f"{found.tick_s:g} s, then at most {most:,} options x {draws} draws x "
                     f"{n:,} ticks = {most * draws * n:,} option-tick evaluations",
                     estimate_s=est_s)
        model = SiteModel.build(scenario, draws=int(draws), seed=seed, tick_s=tick_s,
                                filler=True in grid.filler, progress=eng)
    s = _Search(model, check, cost)

    def result(interrupted: bool = False) -> SizingResult:
        ev = pd.DataFrame([{k: v for k, v in r.items() if k != "_values"}
                           for r in s.rows.values()])
        said = desc if not interrupted else (
            f"{desc}; INTERRUPTED (Ctrl-C) after {len(ev)} options: the best of these, "
            "not of the whole searched space")
        return SizingResult(check.spec, ev, engine_runs=model.engine_runs,
                            evaluations=model.evaluations, draws=int(draws), seed=seed,
                            description=said, cost=cost, model=model,
                            assessability=found, interrupted=interrupted)

    try:
        with Progress(most, "size-mitigation", "option", enabled=on) as bar:
            s.progress = bar
            bar.phase("1. the site as it is")
            if not s.passes(MitigationOption()):
                _search(s, model, grid, phase=bar.phase)
            bar.total = bar.done       # the search ended: it evaluated this many
    except KeyboardInterrupt:
        if not s.rows:                 # not even the site as it is: nothing to report
            raise
        from ..exceptions import Interrupted

        raise Interrupted(f"size_mitigation interrupted after {len(s.rows)} options",
                          result(interrupted=True)) from None
    return result()


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
            refine_rates: int = 5, hybrid_storage: int = 2, phase=lambda text: None
            ) -> None:
    from .storage import available_storage

    together = len({j.start_utc for j in model.scenario.jobs}) < len(model.scenario.jobs)
    staggers = sorted(set(grid.stagger_s)) if together else [0.0]
    # NVML power smoothing only where the GPUs have it (Blackwell or newer)
    floors = sorted(set(grid.floor_pct_tdp)) if model.smoothing_ok else [0.0]
    hysts = sorted(set(grid.hysteresis_ms)) if model.smoothing_ok else [0.0]
    rates = [r for r in grid.ramp_w_per_s if r > 0] if model.smoothing_ok else []
    rates = sorted(set(rates), reverse=True)         # fast (weak) to slow (strong)
    hits = []
    phase(f"2. per-GPU options: the fastest passing ramp rate for "
          f"{len(floors) * len(hysts) * len(set(grid.filler)) * len(staggers)} settings")
    # 2. per-GPU options: the fastest symmetric ramp rate that passes, per base setting
    for fl in floors:
        for h in hysts:
            for fill in sorted(set(grid.filler)):
                for st in staggers:
                    base = MitigationOption(percent_tmp_floor=float(fl),
                                            ramp_down_hysteresis_ms=float(h),
                                            filler=bool(fill), stagger_starts_s=float(st))
                    chain = [base] + [dataclasses.replace(base, ramp_up_rate_w_per_s=float(r),
                                                          ramp_down_rate_w_per_s=float(r))
                                      for r in rates]
                    hit = s.first_passing(chain)
                    if hit is not None and hit.ramp_up_rate_w_per_s > 0:
                        hits.append(hit)
    # 2b. ramp-up and ramp-down apart (the ramp-up limit delays work, the ramp-down limit
    # burns energy): for the cheapest symmetric hits, the fastest ramp-up that passes with
    # the ramp-down kept, then the fastest ramp-down with that ramp-up (coordinate search)
    if hits:
        phase(f"2b. ramp-up and ramp-down apart for the {min(len(hits), refine_rates)} "
              "cheapest")
    for hit in sorted(hits, key=lambda o: _cost_of(s, o))[:refine_rates]:
        r = hit.ramp_up_rate_w_per_s
        faster = [x for x in rates if x >= r]         # off, then fast ... r (passes)
        up = s.first_passing(_rate_chain(hit, "ramp_up_rate_w_per_s", faster))
        s.first_passing(_rate_chain(up, "ramp_down_rate_w_per_s", faster))
    # 3. storage alone, per technology class the site can have: the smallest power that
    # passes, per (duration within the class's range, control window)
    peak = max(float(np.max(model.facility(MitigationOption(), d, 0.0)[0]))
               for d in range(model.draws))
    powers = sorted(set(grid.battery_power_fraction))
    techs, why = available_storage(model.scenario.hardware.gpu_model)
    techs = [t for t in grid.storage if t in techs]
    for n in why:
        if n not in model.notes:
            model.notes.append(n)

    def storage_chain(base: MitigationOption, tech: str, dur: float, win: float):
        out = []
        for f in powers:
            p_mw = round(f * peak / 1e6, 3)
            if p_mw <= 0:
                continue
            out.append(dataclasses.replace(
                base, storage_technology=tech, battery_power_megawatts=p_mw,
                battery_energy_megawatt_hours=p_mw * dur,
                battery_round_trip_efficiency=TECHNOLOGIES[tech].round_trip_efficiency,
                battery_window_s=float(win)))
        return out

    stores = []
    if techs:
        phase(f"3. storage alone: {', '.join(techs)}")
    for tech in techs:
        for dur in grid.durations_h(tech):
            for win in sorted(set(grid.battery_window_s)):
                hit = s.first_passing(storage_chain(MitigationOption(), tech, dur, win))
                if hit is not None:
                    stores.append((_cost_of(s, hit), tech, dur, win))
    # 4. smoothing together with storage: a weak (cheap) smoothing setting that fails on
    # its own, with the smallest storage that then passes.  Only combinations that can
    # still beat the cheapest passing option are tried: a base whose own cost is already
    # higher is skipped, and the storage chain is cut where storage capital alone would
    # make the pair dearer (so the CSV's Pareto set is complete near the cheapest option,
    # not far from it).
    if not model.smoothing_ok or not techs:
        return
    pairs = [(t, d, w) for _, t, d, w in sorted(stores)[:hybrid_storage]] or [
        (techs[0], grid.durations_h(techs[0])[-1], min(set(grid.battery_window_s)))]
    bases = [MitigationOption(percent_tmp_floor=float(f)) for f in floors if f > 0]
    bases += [MitigationOption(ramp_down_rate_w_per_s=float(r)) for r in rates]
    phase(f"4. smoothing with storage: {len(bases)} weak smoothing settings")
    for base in bases:
        best = _cheapest_passing_cost(s)
        row = s.evaluate(base)
        if row["passes"] or row["cost_usd_per_day"] >= best:
            continue
        for tech, dur, win in pairs:
            chain = [o for o in storage_chain(base, tech, dur, win) if row["cost_usd_per_day"]
                     + storage_cost_usd_per_day(o) < best]
            s.first_passing(chain)
