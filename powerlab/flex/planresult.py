"""The curtailment plan as a results object: targets met, lost training, the levers, the
ramp requirements, and the files powerlab flex plan writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .._format import safe_frame
from .._options import renamed_attribute
from .._summary import Results, Summary
from ..outputs import output_folder

__all__ = ["CurtailmentPlan"]


class CurtailmentPlan(Results):
    """A curtailment plan and its simulation (results object).

    Attributes
    ----------
    schedule : pandas.DataFrame
        Per tick: ``timestamp``, ``planned_it_power_megawatts``,
        ``planned_facility_power_megawatts`` (from the GPUs' planned IT power, less the
        battery at the point of connection), ``pue_steady_w_per_w`` (the steady-state
        PUE it is computed with; caps at the facility boundary are planned at its
        highest), ``storage_discharge_megawatts`` (at the targets' boundary),
        ``storage_soc_fraction``, ``shed_megawatts[LEVER]`` (planned, IT), then per job
        ``lever[JOB]`` (``power_cap``, ``clock_lock``, ``pause``, ``shift_start`` or
        empty), its setting ``power_limit_w[JOB]`` (a cap) or ``clock_sm_mhz[JOB]`` (a
        clock lock), NaN otherwise, and ``paused[JOB]``.
    targets : pandas.DataFrame
        Per target: ``start_utc, end_utc, cap_megawatts``, ``met_share`` (of draws),
        ``met`` (in every draw), ``worst_overshoot_megawatts``, ``response_time_s`` (worst
        draw), ``lost_gpu_hours``, ``delayed_gpu_hours``, ``throttle_lever`` (``none``
        where no cap or lock sheds), the mean planned shed per lever ``shed_megawatts[LEVER]`` and ``storage_soc_fraction``
        at the target's end.
    levers : pandas.DataFrame
        Per lever (:meth:`lever_frame`).
    ramps : pandas.DataFrame
        Per ramp requirement and direction: limit, allowed plan rate, plan-caused
        violations (windows, all draws) and the worst such ramp.
    boundary : str
        ``"it"`` or ``"facility"``: the targets' boundary, where the plan is judged
        (``scope`` is its deprecated name).
    lever_schedule : LeverSchedule
        The levers chosen per tick (:class:`powerlab.levers.shedstate.LeverSchedule`).
    cost : PlanCost
        Lost and delayed training, per lever and tick
        (:class:`powerlab.flex.planschedule.PlanCost`).
    """

    scope = renamed_attribute("boundary")     # the old name, for one release

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @property
    def simulated(self) -> bool:
        """Whether the plan was simulated over the draws (``simulate=True``): only then
        are the targets and the ramp requirements judged."""
        return "met" in self.targets

    @property
    def share_met(self) -> float:
        """Share of targets met in every draw [-]; NaN for a plan not simulated."""
        if not self.simulated:
            return float("nan")
        return float(self.targets["met"].mean()) if len(self.targets) else 1.0

    @property
    def ramp_violations(self) -> int:
        return int(self.ramps["violations"].sum()) if len(self.ramps) else 0

    @property
    def all_met(self) -> bool:
        """Every target met in every draw and no ramp requirement violated by the plan."""
        return bool(self.share_met == 1.0 and self.ramp_violations == 0)

    def summary_frame(self) -> pd.DataFrame:
        """Per-target results (see :attr:`targets`)."""
        return self.targets.copy()

    def lever_frame(self) -> pd.DataFrame:
        """Per lever: ``lever, jobs, peak_shed_megawatts, shed_megawatt_hours,
        lost_gpu_hours, delayed_gpu_hours, restart_gpu_hours, min_power_limit_w`` (the
        lowest power limit of a cap), ``min_clock_sm_mhz`` (the lowest clock of a lock),
        ``storage_soc_fraction`` (the lowest state of charge),
        ``storage_discharge_megawatt_hours`` (at the targets' boundary; the shed columns
        are IT power) and ``storage_recharge_megawatt_hours`` (grid energy to restore the
        battery)."""
        return self.levers.copy()

    def _verdict_lines(self) -> list[str]:
        t = self.targets
        return [(f"Targets met in every draw: {t['met'].sum()} of {len(t)} "
                 f"({100 * self.share_met:.1f} %); target-draw pairs met: "
                 f"{100 * t['met_share'].mean():.2f} %"),
                (f"Worst overshoot: {t['worst_overshoot_megawatts'].max():.3f} MW; worst "
                 f"response time: {t['response_time_s'].max():.0f} s")]

    def summary(self) -> Summary:
        """Targets met, overshoot, lost training, levers, ramp requirements, verdict."""
        t = self.targets
        lines = [
            (f"Curtailment plan: {len(t)} targets ({self.boundary} power), {self.draws} draws, "
            f"response {self.response_s:g} s, trailing {self.averaging_s:g}-s means; "
            f"levers {', '.join(self.levers_allowed)}"),
            *(self._verdict_lines() if self.simulated else [
                "Not simulated (simulate=False): whether the targets and the ramp "
                "requirements are met is judged only by the simulation over the draws"]),
            (f"Lost training: {self.lost_gpu_hours:.0f} GPU-h (curve band "
            f"{self.lost_gpu_hours_lower:.0f}-{self.lost_gpu_hours_upper:.0f}), of which "
            f"{self.restart_gpu_hours:.0f} GPU-h restarting paused jobs; delayed (shifted "
            f"starts, not lost): {self.delayed_gpu_hours:.0f} GPU-h"),
            (f"Planned ramp rates (IT): down {self.rate_down_w_per_s * 60 / 1e6:.2f} MW/min, "
            f"up {self.rate_up_w_per_s * 60 / 1e6:.2f} MW/min"),
            (f"Planned facility power (plan_schedule.csv) with the steady-state PUE "
            f"{self.schedule['pue_steady_w_per_w'].min():.3f}-"
            f"{self.schedule['pue_steady_w_per_w'].max():.3f}"
            + (" (facility caps planned at the highest)" if self.boundary == "facility"
               else "")),
        ]
        if "planned_at_floor" in t and t["planned_at_floor"].any():
            lines.append(
                f"{int(t['planned_at_floor'].sum())} target(s) within the planning margin "
                "of the site's floor (every job paused): planned at the floor, no margin "
                "kept (planned_it_level_megawatts, planned_at_floor)")
        s = Summary(float_format="{:.3f}")
        s.add_text(lines)
        s.add_df(self.levers[["lever", "jobs", "peak_shed_megawatts", "shed_megawatt_hours",
                              "lost_gpu_hours", "delayed_gpu_hours"]],
                 "Levers in merit order (planned shed, IT):", index=False)
        if len(self.ramps):
            s.add_df(self.ramps, "Ramp requirements (plan-caused violations over all "
                     "draws):", index=False)
        fast = (self.ramps[self.ramps["lever_ramp_over_plan_rate"]]
                if "lever_ramp_over_plan_rate" in self.ramps else self.ramps.iloc[:0])
        for q in fast.itertuples():
            s.add_text(
                f"Warning: the levers' own planned power ramps {q.direction} "
                f"{q.worst_lever_ramp_it_megawatts_per_min:.2f} MW/min (IT, "
                f"{q.window_s:g}-s means, at {q.worst_lever_ramp_utc}), faster than the "
                f"allowed {q.plan_rate_it_megawatts_per_min:.2f} MW/min of "
                f"{q.requirement} (a pause's step to idle); the draws found "
                f"{q.violations} violation(s), a step coinciding with the baseline's own "
                "ramp would make one")
        if not self.simulated:
            s.add_text("Verdict: none (not simulated)")
            return s
        s.add_text("Verdict: " + ("every target met, no ramp violated" if self.all_met
                                  else "NOT all targets met or a ramp violated")
                   + (" in the draws; the levers' planned steps exceed the allowed ramp "
                      "rate (plan_ramps.csv: lever_ramp_over_plan_rate)" if len(fast)
                      else ""))
        return s

    def timeline(self, every_s: float = 10.0) -> pd.DataFrame:
        """Tidy frame for a chart: ``timestamp, series, power_megawatts`` (baseline mean,
        planned mean and 90th percentile over draws, the cap) every ``every_s``."""
        k = max(1, round(every_s / self.tick_s))
        ts = self.times[::k]
        parts = {"baseline mean": self.baseline_w.mean(axis=0)[::k],
                 "plan mean": self.plan_w.mean(axis=0)[::k],
                 "plan p90": np.quantile(self.plan_w[:, ::k], 0.9, axis=0),
                 "cap": self.cap_w[::k]}
        return pd.concat([pd.DataFrame({"timestamp": ts, "series": name,
                                        "power_megawatts": v / 1e6})
                          for name, v in parts.items()], ignore_index=True)

    def write(self, out_dir) -> list[Path]:
        """Write ``plan_targets.csv``, ``plan_schedule.csv`` (every 10 s),
        ``plan_levers.csv``, ``plan_ramps.csv`` and ``plan_summary.txt``; returns the
        paths."""
        out = output_folder(out_dir)
        k = max(1, round(10.0 / self.tick_s))
        paths = [out / "plan_targets.csv", out / "plan_schedule.csv",
                 out / "plan_levers.csv", out / "plan_ramps.csv", out / "plan_summary.txt"]
        safe_frame(self.targets).to_csv(paths[0], index=False, float_format="%.6g")
        safe_frame(self.schedule.iloc[::k]).to_csv(paths[1], index=False, float_format="%.6g")
        safe_frame(self.levers).to_csv(paths[2], index=False, float_format="%.6g")
        safe_frame(self.ramps).to_csv(paths[3], index=False, float_format="%.6g")
        paths[4].write_text(str(self.summary()) + "\n", encoding="utf-8")
        return paths
