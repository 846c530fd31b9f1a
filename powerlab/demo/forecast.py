"""Step 2 of the demo, forecast: a 16,384-GPU site (``data/scenarios/llama3_16k_h100.yaml``)
running one synchronous job that starts on all GPUs at once, with checkpoints and
failures, using the calibrated profile (:func:`powerlab.site.engine.forecast`); the
utility limits checked, and their violations as probabilities."""

from __future__ import annotations

from typing import Any

import pandas as pd
import yaml

from ..data import bundled_path
from ..exceptions import PowerlabError
from ..site.engine import forecast
from ..site.planner import PLANNER_FIGURES, planner_summary
from ..site.scenario import parse_scenario
from ..site.swings import check_limits
from .calibrate import NODE_OVERHEAD_PRIOR

__all__ = ["SITE_GPUS", "demo_scenario", "forecast_figures", "forecast_site",
           "violation_probabilities"]

SITE_GPUS = 16_384
_SCENARIO = "llama3_16k_h100.yaml"


def demo_scenario(profile=None, *, hours: float = 6.0) -> Any:
    """The demo's 16,384-GPU scenario, with a calibrated job profile when given.

    Starts from ``data/scenarios/llama3_16k_h100.yaml`` (one synchronous job on every
    GPU, 30-minute checkpoints, failures at the Llama 3 rate) shortened to ``hours``;
    with ``profile`` (a node-scope :class:`powerlab.calibration.profile.ProfileFit`), the job's
    step time and duty cycle come from the fit, and so does node power: the scenario's
    node overhead is the fit's non-GPU power and the GPU levels are the rest, so that a
    node draws the measured node power while computing and in the step dip.  A fit without
    a split is split with :data:`powerlab.demo.NODE_OVERHEAD_PRIOR`.

    Parameters
    ----------
    profile : ProfileFit, optional
    hours : float, default 6
        Horizon from 00:00 UTC [h].

    Returns
    -------
    powerlab.site.scenario.Scenario
    """
    path = bundled_path("scenarios", _SCENARIO)
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    start = pd.Timestamp(spec["horizon"]["start_utc"])
    end = start + pd.Timedelta(hours=hours)
    spec["horizon"] = {"start_utc": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "end_utc": end.strftime("%Y-%m-%dT%H:%M:%SZ")}
    job = spec["jobs"][0]
    job_start = pd.Timestamp(job["start_utc"])
    job["duration_s"] = float((end - job_start).total_seconds() - 120.0)
    if job["duration_s"] <= job.get("startup_s", 0) + job.get("shutdown_s", 0):
        raise PowerlabError(f"hours={hours} leaves the demo job no training time")
    if profile is not None:
        if profile.scope != "node":
            raise PowerlabError("demo_scenario needs a node-scope profile (node power "
                                "measured by the nodes' meters)")
        if not profile.has_split:
            profile = profile.with_split(NODE_OVERHEAD_PRIOR)
        kw = profile.job_kwargs()
        job["step_time_s"] = float(kw["step_time_s"])
        job["compute_fraction"] = float(kw["compute_fraction"])
        job.setdefault("power", {})
        job["power"]["compute_w"] = float(kw["power"]["compute_w"])
        job["power"]["comm_w"] = float(kw["power"]["comm_w"])
        spec["hardware"]["gpus_per_node"] = int(profile.gpus_per_node)
        spec["hardware"]["node_overhead_w"] = float(profile.node_overhead_w)
        spec["name"] = spec["name"] + "-calibrated"
        spec["description"] = (spec.get("description", "") + " Job profile calibrated on "
                               "the MLPerf GPT-3 64-node power trace (node power as "
                               f"measured; GPU / non-GPU split: {profile.split}).")
    return parse_scenario(spec, path=path)


def forecast_site(prof, hours: float, draws: int, seed: int):
    """The demo scenario with the calibrated profile, its forecast, the utility limits'
    violations and the facility metrics per draw."""
    scen = demo_scenario(prof, hours=hours)
    res = forecast(scen, draws=draws, seed=seed)
    violations = check_limits(res)
    m = res.metrics
    return scen, res, violations, m[m["boundary"] == "facility"]


def forecast_figures(prof, scen, res, violations, fac) -> dict[str, float]:
    """The forecast's key numbers: scenario node power, swings, ramps, planner figures and
    the probability of a limit violation."""
    hw, job = scen.hardware, scen.jobs[0]
    node_compute = hw.node_overhead_w + hw.gpus_per_node * job.compute_w
    node_comm = hw.node_overhead_w + hw.gpus_per_node * job.comm_w
    plan = planner_summary(res)["median"]
    viol = violation_probabilities(violations, res)
    return {
        "scenario_node_compute_w": node_compute,
        "scenario_node_train_mean_w": job.compute_fraction * node_compute
        + (1 - job.compute_fraction) * node_comm,
        # a swing between training and idle moves by the split's error on every node: one
        # standard deviation of the prior, at the IT level (the facility adds its losses)
        "swing_prior_sd_it_megawatts": float(hw.nodes * prof.node_overhead_sd_w / 1e6),
        "peak_megawatts": float(fac["peak_w"].median() / 1e6),
        "swing_1s_megawatts": float(fac["swing_1s_w"].median() / 1e6),
        "swing_60s_megawatts": float(fac["swing_60s_w"].median() / 1e6),
        "ramp_up_megawatts_per_s_1s": float(fac["ramp_up_w_per_s_1s"].median() / 1e6),
        "ramp_down_megawatts_per_s_1s": float(fac["ramp_down_w_per_s_1s"].median() / 1e6),
        "dominant_frequency_hz": float(fac["dominant_frequency_hz"].median()),
        "limit_violations": float(len(violations)),
        "peak_demand_megawatts_15min": float(plan["15-min peak demand [MW]"]),
        "energy_megawatt_hours": float(plan["energy [MWh]"]),
        "ramp_megawatts_per_min_1min": float(
            plan[PLANNER_FIGURES["ramp_megawatts_per_min_1min"][0]]),
        "load_factor": float(plan["load factor [-]"]),
        "limit_violation_probability_per_draw": (
            float(viol["probability_per_draw"].max()) if len(viol) else 0.0)}


def violation_probabilities(violations: pd.DataFrame, res) -> pd.DataFrame:
    """Limit violations as probabilities: per limit, the share of draws with at least
    one violation, the expected violation episodes per day, and the worst value."""
    cols = ["limit", "probability_per_draw", "episodes_per_day", "worst", "limit_value",
            "unit"]
    if not len(violations):
        return pd.DataFrame(columns=cols)
    days = res.n_ticks * res.tick_s / 86400.0
    g = violations.groupby("limit")
    out = pd.DataFrame({
        "probability_per_draw": g["draw"].nunique() / res.draws,
        "episodes_per_day": g.size() / res.draws / days,
        "worst": g["worst"].max(), "limit_value": g["limit_value"].first(),
        "unit": g["unit"].first()}).reset_index()
    return out[cols]
