"""The main job on an embedded default: ``powerlab demo``.

:func:`run_demo` needs no input.  On the data bundled in ``data/`` it

1. reads the real MLPerf Training v4.0 GPT-3 power logs (64 nodes x 8 H100, Apache-2.0)
   and the training log, and calibrates a job power profile through the logs' 2-s meters
   (:func:`powerlab.calibration.calibrate.calibrate_job`, what ``powerlab calibrate`` runs, on
   :func:`powerlab.calibration.profile.fit_profile`: step time, node power while computing and
   in the step dip, with their uncertainties); the log has no idle period, so node power
   is split into GPU and non-GPU parts by a stated prior (:data:`NODE_OVERHEAD_PRIOR`), and
   the scenario's node power equals the measured node power whatever the split;
2. forecasts a 16,384-GPU site (``data/scenarios/llama3_16k_h100.yaml``) running one
   synchronous job that starts on all GPUs at once, with checkpoints and failures, using
   the calibrated profile (:func:`powerlab.site.engine.forecast`), checks the utility limits
   and compares mitigations (power floor, GPU ramp limit, battery);
3. runs the time-of-day analysis (:func:`powerlab.throughput.dvfs.fit_time_of_day`) and the
   straggler search (:func:`powerlab.throughput.stragglers.find_stragglers`) on the synthetic twin
   (:func:`powerlab.throughput.synth.simulate_training`) driven by the real weather of a station
   next to the MGHPCC datacenter (MIT);
4. writes the facilities CSV with its JSON sidecar (:func:`powerlab.site.export.
   write_facilities_csv`) and one self-contained HTML report with the charts
   (:class:`powerlab.viz.report.Report`) that renders offline.

Progress goes to ``progress`` (standard error by default), one line per step with its
duration.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from .calibration.profile_fit import Prior
from .exceptions import DataQualityWarning, PowerlabError, StoreError

__all__ = ["NODE_OVERHEAD_PRIOR", "NOTICES", "DemoResult", "ReportInputs", "demo_scenario",
           "run_demo"]

#: Attribution of the bundled real data (shown in the report).
NOTICES = (
    ("MLPerf Training v4.0 results, Supermicro power submission (GPT-3 175B, 64 nodes x 8 "
     "H100-SXM5-80GB), copyright MLCommons and the submitter, licensed under the Apache "
     "License, Version 2.0; excerpt from LambdaLabsML/training_results_v4.0 (commit "
     "6fe95437), gzip-compressed, otherwise unchanged."),
    ("Weather station KMAHIGHL4 (Holyoke, MA), copyright (c) 2025 Harvard University "
     "Faculty of Arts & Sciences Research Computing, MIT licence; from "
     "fasrc/hpc_sustainability_dataset (commit ed7de4fb)."),
)

SITE_GPUS = 16_384
_SCENARIO = "llama3_16k_h100.yaml"

#: Node power besides the 8 GPUs (CPUs, memory, NICs, NVSwitch, PSU losses) of an H100
#: node: an assumption, not a measurement.  The bundled scenario assumes 2.5 kW for a
#: DGX/HGX H100 node; NVIDIA gives 10.2 kW as the DGX H100's maximum, 4.6 kW above its
#: GPUs at their 700 W TDP; the MLPerf nodes are immersion-cooled (no fans), and their
#: lowest reading during training (4.3 kW, median over nodes) bounds it from above.
#: The demo's per-GPU levels, and the depth of swings between training and idle, carry
#: this uncertainty; node power while training does not [W].
NODE_OVERHEAD_PRIOR = Prior(2500.0, 700.0, "H100 node besides its GPUs, 2.5 +- 0.7 kW "
                                           "(assumption)")


@dataclass
class DemoResult:
    """What :func:`run_demo` produced.

    Attributes
    ----------
    out : pathlib.Path
        Output folder.
    report : pathlib.Path
        The HTML report.
    csv, sidecar : pathlib.Path
        The facilities CSV and its JSON sidecar.
    figures : dict
        Key numbers (floats, in the units their names carry).
    timings_s : dict
        Seconds per step [s].
    profile, forecast, limits, mitigations, time_of_day, stragglers : object
        The intermediate results (ProfileFit, ForecastResult, violations frame,
        mitigation table, TimeOfDayResult, StragglerResult).
    """

    out: Path
    report: Path
    csv: Path
    sidecar: Path
    figures: dict[str, float]
    timings_s: dict[str, float]
    profile: Any = field(repr=False, default=None)
    forecast: Any = field(repr=False, default=None)
    limits: Any = field(repr=False, default=None)
    mitigations: Any = field(repr=False, default=None)
    time_of_day: Any = field(repr=False, default=None)
    interconnection: Any = field(repr=False, default=None)
    stragglers: Any = field(repr=False, default=None)
    study_package: Any = field(repr=False, default=None)


class _Progress:
    def __init__(self, stream: IO[str] | None, n_steps: int):
        self.stream = stream
        self.n = n_steps
        self.i = 0
        self.timings: dict[str, float] = {}
        self._t0 = time.perf_counter()

    def step(self, key: str, text: str):
        self.i += 1
        return _Step(self, key, f"[{self.i}/{self.n}] {text}")

    def say(self, text: str) -> None:
        if self.stream is not None:
            print(text, file=self.stream, flush=True)


class _Step:
    def __init__(self, prog: _Progress, key: str, text: str):
        self.prog, self.key, self.text = prog, key, text

    def __enter__(self):
        if self.prog.stream is not None:
            print(f"{self.text} ...", end="", file=self.prog.stream, flush=True)
        self.t = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        dt = time.perf_counter() - self.t
        self.prog.timings[self.key] = dt
        if self.prog.stream is not None:
            status = f" {dt:.1f} s" if exc_type is None else " failed"
            print(status, file=self.prog.stream, flush=True)
        return False


def demo_scenario(profile=None, *, hours: float = 6.0) -> Any:
    """The demo's 16,384-GPU scenario, with a calibrated job profile when given.

    Starts from ``data/scenarios/llama3_16k_h100.yaml`` (one synchronous job on every
    GPU, 30-minute checkpoints, failures at the Llama 3 rate) shortened to ``hours``;
    with ``profile`` (a node-scope :class:`powerlab.calibration.profile.ProfileFit`), the job's
    step time and duty cycle come from the fit, and so does node power: the scenario's
    node overhead is the fit's non-GPU power and the GPU levels are the rest, so that a
    node draws the measured node power while computing and in the step dip.  A fit without
    a split is split with :data:`NODE_OVERHEAD_PRIOR`.

    Parameters
    ----------
    profile : ProfileFit, optional
    hours : float, default 6
        Horizon from 00:00 UTC [h].

    Returns
    -------
    powerlab.site.scenario.Scenario
    """
    import yaml

    from .data import bundled_path
    from .site.scenario import parse_scenario

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


def _writable_folder(out: str | Path) -> Path:
    """Create ``out`` (with its parents) and check that files can be written in it."""
    import tempfile

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise StoreError(f"output folder {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out, prefix=".powerlab-demo-probe-"):
            pass
    except OSError as exc:
        raise StoreError(f"cannot write to the output folder {out}: "
                         f"{exc.strerror or exc}") from exc
    return out


def run_demo(out: str | Path = "powerlab-demo", *, progress: IO[str] | None = sys.stderr,
             hours: float = 6.0, draws: int = 10, twin_days: float = 10.0,
             seed: int = 1) -> DemoResult:
    """Run the demo on the bundled data and write the CSV, sidecar and HTML report.

    Parameters
    ----------
    out : path-like, default "powerlab-demo"
        Output folder (created with its parents; files of the same names in it are
        replaced).
    progress : text stream or None, default sys.stderr
        Where progress lines go; None is silent.
    hours : float, default 6
        Forecast horizon [h].
    draws : int, default 10
        Monte Carlo draws of the forecast [-].
    twin_days : float, default 10
        Length of the twin's training run for the time-of-day analysis [days].
    seed : int, default 1
        Seed of the forecast and the twin.

    Returns
    -------
    DemoResult

    Raises
    ------
    powerlab.exceptions.StoreError
        When ``out`` cannot be created or written to (checked before any work).
    """
    from . import viz
    from .site.export import write_facilities_csv
    from .site.export_reader import read_facilities_csv

    out = _writable_folder(out)  # before minutes of work, not after
    prog = _Progress(progress, 9)
    fig: dict[str, float] = {}
    with prog.step("read", "reading the MLPerf GPT-3 power logs (64 nodes) and training log"):
        power, mllog = _read_mlperf()
    with prog.step("calibrate", "calibrating the job power profile (powerlab calibrate)"):
        prof = _calibrate(power, mllog)
    fig.update(_profile_figures(prof))
    with prog.step("forecast", f"forecasting a {SITE_GPUS:,}-GPU site, {hours:g} h at "
                               f"100 ms, {draws} draws"):
        scen, res, violations, fac = _forecast(prof, hours, draws, seed)
    fig.update(_forecast_figures(prof, scen, res, violations, fac))
    with prog.step("mitigations", "comparing mitigations (floor, ramp limit, battery) and "
                                  "the flexibility offer"):
        mit = _mitigations(scen, seed)
        fig.update(flex_figures(scen, draws=min(draws, 3), seed=seed))
    with prog.step("interconnection", "checking interconnection requirements, sizing the "
                                      "cheapest mitigation, screening resonance"):
        ic = interconnection_study(res, seed=seed)
    fig.update(ic.figures)
    with prog.step("time_of_day", f"time-of-day analysis on the twin ({twin_days:g} days, "
                                  "real Holyoke weather)"):
        run, tod, strag = _time_of_day(twin_days, seed)
    fig.update(_time_of_day_figures(run, tod, strag))
    with prog.step("export", "writing the facilities CSV and JSON sidecar"):
        csv, sidecar = write_facilities_csv(res, out / "facilities_forecast.csv",
                                            resolution="1min")
        back = read_facilities_csv(csv)
    fig["csv_rows"] = float(len(back))
    with prog.step("report", "building the HTML report (charts and JavaScript inline)"):
        fc = viz.forecast_charts(res)
        tc = viz.time_of_day_charts(tod)
        tc["stragglers"] = viz.stragglers_chart(strag)
        rep = _build_report(ReportInputs(
            profile=prof, power=power, scenario=scen, forecast=res, limits=violations,
            mitigations=mit, twin=run, time_of_day=tod, stragglers=strag,
            forecast_charts=fc, time_of_day_charts=tc, figures=fig, csv=csv,
            interconnection=ic))
        report = rep.write(out / "powerlab_demo_report.html")
    with prog.step("study_package", "writing the large-load study package of the bundled "
                                    "16k-GPU scenario"):
        pkg, pkg_files = study_package_step(out / "study_package", hours=hours,
                                            draws=draws, seed=seed)
    fig.update(study_peak_megawatts=float(pkg.per_draw["peak_power_megawatts"].max()),
               study_ride_through_sags_losing_load=float(
                   (pkg.ride_through["load_lost_megawatts_during_sag_max"] > 0).sum()))
    prog.say(f"wrote {report}\n      {csv}\n      {sidecar}\n      {pkg_files['page']}")
    return DemoResult(out=out, report=report, csv=csv, sidecar=sidecar, figures=fig,
                      timings_s=prog.timings, profile=prof, forecast=res, limits=violations,
                      mitigations=mit, time_of_day=tod, stragglers=strag,
                      interconnection=ic, study_package=pkg)


def _read_mlperf():
    """The bundled MLPerf GPT-3 node power logs and training log."""
    from .data import bundled_path
    from .iotools import read_mllog, read_mlperf_power

    with warnings.catch_warnings():
        # known and kept: 30 pairs of the 64 node logs hold identical readings, as
        # published (the submitter's total energy counts both of each pair)
        warnings.filterwarnings("ignore", ".*node logs with identical readings",
                                DataQualityWarning)
        power = read_mlperf_power(bundled_path("mlperf-gpt3-64node", "power"))
    mllog = read_mllog(bundled_path("mlperf-gpt3-64node",
                                    "result_5848-240517221859825376616_2.txt.gz"))
    return power, mllog


def _calibrate(power, mllog):
    """What ``powerlab calibrate`` does; the log has no idle period, so node power is
    then split by the stated prior."""
    from .calibration.calibrate import calibrate_job

    cal = calibrate_job(power, events=mllog)
    return cal.fit.with_split(NODE_OVERHEAD_PRIOR)


def _profile_figures(prof) -> dict[str, float]:
    return {"step_time_s": prof.step_time_s, "compute_fraction": prof.compute_fraction,
            "node_compute_w": prof.device_compute_w, "node_comm_w": prof.device_comm_w,
            "node_train_mean_w": prof.device_train_mean_w,
            "node_overhead_w": prof.node_overhead_w,
            "node_overhead_sd_w": prof.node_overhead_sd_w,
            "gpu_compute_w": prof.compute_w, "gpu_comm_w": prof.comm_w}


def _forecast(prof, hours: float, draws: int, seed: int):
    """The demo scenario with the calibrated profile, its forecast, the utility limits'
    violations and the facility metrics per draw."""
    from .site.engine import forecast
    from .site.swings import check_limits

    scen = demo_scenario(prof, hours=hours)
    res = forecast(scen, draws=draws, seed=seed)
    violations = check_limits(res)
    m = res.metrics
    return scen, res, violations, m[m["boundary"] == "facility"]


def _forecast_figures(prof, scen, res, violations, fac) -> dict[str, float]:
    """The forecast's key numbers: scenario node power, swings, ramps, planner figures and
    the probability of a limit violation."""
    from .site.planner import PLANNER_FIGURES, planner_summary

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


def _mitigations(scen, seed: int):
    """Power floor, GPU ramp limit and battery compared on three draws."""
    from .site.mitigations import compare_mitigations
    from .site.scenario import Battery, Mitigations

    variants = {
        "power floor 60% TDP": Mitigations(gpu_power_floor_pct_tdp=60.0),
        "GPU ramp limit 2 kW/s": Mitigations(gpu_ramp_limit_w_per_s=2000.0),
        "battery 15 MW / 5 MWh": Mitigations(battery=Battery(
            power_megawatts=15.0, energy_megawatt_hours=5.0, window_s=120.0)),
    }
    return compare_mitigations(scen, variants, draws=3, seed=seed)


def _time_of_day(twin_days: float, seed: int):
    """The twin's training run under the real Holyoke weather, its time-of-day analysis
    and the straggler search on its telemetry."""
    from .data import bundled_path
    from .iotools import read_weather
    from .throughput.dvfs import fit_time_of_day
    from .throughput.stragglers import find_stragglers
    from .throughput.synth import simulate_training

    with warnings.catch_warnings():
        # the bundled weather files are damaged as recorded; the reader counts them
        warnings.simplefilter("ignore", DataQualityWarning)
        weather = read_weather(bundled_path("weather-kmahighl4-2025"))
    run = simulate_training("2025-06-05", days=twin_days, ambient=weather,
                            amplitude_pct=1.5, n_hosts=4, gpus_per_host=8, stragglers=2,
                            telemetry_interval_s=300.0, seed=seed)
    tod = fit_time_of_day(run.steps, site_tz="America/New_York",
                          telemetry=run.telemetry, ambient=weather)
    return run, tod, find_stragglers(run.telemetry)


def _time_of_day_figures(run, tod, strag) -> dict[str, float]:
    lo, hi = tod.amplitude_ci_pct
    return {"tod_amplitude_pct": float(tod.amplitude_pct), "tod_amplitude_ci_low_pct": lo,
            "tod_amplitude_ci_high_pct": hi, "tod_trough_hour": float(tod.trough_hour),
            "tod_true_amplitude_pct": float(run.truth.amplitude_pct),
            "tod_true_trough_hour": float(run.truth.trough_hour),
            "tod_gpu_hours_lost_per_day": float(tod.gpu_hours_lost_per_day),
            "stragglers_flagged": float(len(strag.flags)),
            "stragglers_injected": float(len(run.truth.stragglers))}


def study_package_step(out: Path, *, hours: float, draws: int, seed: int):
    """The large-load study package of the bundled 16k-GPU scenario
    (``data/scenarios/llama3_16k_h100.yaml``, its first ``hours``) against the bundled
    requirement spec, written into ``out`` (issue 20 section 2)."""
    from .data import bundled_path
    from .interconnect.studypackage import RideThrough, study_package
    from .site.scenario import read_scenario

    scen = read_scenario(bundled_path("scenarios", "llama3_16k_h100.yaml"))
    scen = scen.replace(horizon_end_utc=scen.start_utc + pd.Timedelta(hours=hours))
    pkg = study_package(scen, bundled_path("requirements", REQUIREMENTS), draws=draws,
                        seed=seed, ride_through=RideThrough(draws=2))
    return pkg, pkg.write(out)


def flex_figures(scen, *, draws: int = 3, seed: int = 1) -> dict[str, float]:
    """The cheapest power cap shedding >= 25 % of IT power within 30 s over the demo's
    hold window (up to 3 h; :func:`powerlab.flex.offer.flex_offer`, prior curve)."""
    from .flex.offer import default_window, flex_offer

    w0, w1 = default_window(scen, 3 * 3600.0)
    hold = (w1 - w0).total_seconds()
    off = flex_offer(scen, hold_s=hold, levels_w=[500, 400, 300, 250, 200], draws=draws,
                     seed=seed)
    b = off.best(30.0, hold, 25.0)
    if b is None:
        return {"flex_hold_s": hold, "flex_shed_megawatts": 0.0}
    return {"flex_hold_s": hold, "flex_shed_megawatts": float(b["shed_megawatts"]),
            "flex_shed_pct_of_it": float(b["shed_pct_of_it"]),
            "flex_power_limit_w": float(b["power_limit_w"]),
            "flex_step_rate_loss_pct": float(b["step_rate_loss_pct"])}


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


@dataclass(frozen=True)
class ReportInputs:
    """What the demo's HTML report draws (built by :func:`run_demo`).

    Attributes
    ----------
    profile : ProfileFit
        The calibrated job power profile (split by :data:`NODE_OVERHEAD_PRIOR`).
    power : pandas.DataFrame
        The MLPerf node power readings (canonical telemetry).
    scenario : Scenario
        The demo scenario.
    forecast : ForecastResult
        Its forecast.
    limits : pandas.DataFrame
        Limit violations (:func:`powerlab.site.swings.check_limits`).
    mitigations : pandas.DataFrame
        The mitigation comparison.
    twin : object
        The twin's training run (``steps``, ``telemetry``, ``truth``).
    time_of_day : TimeOfDayResult
    stragglers : StragglerResult
    forecast_charts, time_of_day_charts : dict
        Charts by name (:func:`powerlab.viz.forecast_charts`,
        :func:`powerlab.viz.time_of_day_charts` plus ``stragglers``).
    figures : dict
        Key numbers (floats, in the units their names carry).
    csv : pathlib.Path
        The facilities CSV written beside the report.
    interconnection : InterconnectionStudy, optional
        The interconnection section (left out when None).
    """

    profile: Any
    power: pd.DataFrame
    scenario: Any
    forecast: Any
    limits: pd.DataFrame
    mitigations: pd.DataFrame
    twin: Any
    time_of_day: Any
    stragglers: Any
    forecast_charts: dict
    time_of_day_charts: dict
    figures: dict
    csv: Path
    interconnection: Any = None


def _build_report(r: ReportInputs):
    """The demo's HTML report: one section per step, then the data licences."""
    from .viz.report import Report

    rep = Report("powerlab demo: a 16,384-GPU site, calibrated on real data",
                 "Facility power swings, mitigations, and the time-of-day effect on "
                 "training throughput")
    _report_calibration(rep, r)
    _report_forecast(rep, r)
    _report_mitigations(rep, r)
    _report_time_of_day(rep, r)
    rep.heading("5. Facilities export")
    rep.text(f"{r.csv.name} (one row per minute; UTC and site-local times a spreadsheet "
             "reads as dates; facility and IT power side by side in MW, energy in MWh, "
             "ramps over 1-s and 1-min means; docs/facilities_csv.md) "
             f"and {r.csv.with_suffix('.json').name} (units, assumptions, scenario hash, "
             "powerlab version) were written beside this report.")
    rep.heading("Data and licences")
    for n in NOTICES:
        rep.text(n)
    return rep


def _report_calibration(rep, r: ReportInputs) -> None:
    from . import viz

    prof, fig = r.profile, r.figures
    rep.heading("1. Calibration on a real trace")
    rep.text("Question: what power profile does a large synchronous training job have? "
             "Method: powerlab calibrate (fit_profile) on the MLPerf Training v4.0 GPT-3 "
             "power logs (64 nodes "
             "x 8 H100, node AC power averaged by each node's meter over ~2 s) with the "
             "evaluation intervals of its training log: step period from the periodogram "
             "and the evaluation cadence, node power while computing from the readings "
             "away from the step dip, the dip's energy from the training mean. Intervals "
             "are 95 % over the 64 nodes.")
    pf = prof.summary_frame()

    def ci(name, unit="W", scale=1.0, fmt="{:,.0f}"):
        row = pf.loc[name]
        txt = fmt.format(row["value"] * scale) + f" {unit}"
        if np.isfinite(row["ci_lower"]):
            txt += (" [" + fmt.format(row["ci_lower"] * scale) + ", "
                    + fmt.format(row["ci_upper"] * scale) + "]")
        return txt

    rep.figures({"step time": f"{prof.step_time_s:.2f} s",
                 "node power, computing": ci("device_compute_w"),
                 "node power, training mean": ci("device_train_mean_w"),
                 "energy of a step's dip (per node)": ci("step_dip_energy_j", "J"),
                 "node power besides the GPUs (prior)": f"{prof.node_overhead_w:,.0f} "
                                                       f"+- {prof.node_overhead_sd_w:,.0f} W",
                 "GPU power, computing": ci("compute_w"),
                 "GPU power in the step dip": ci("comm_w")})
    rep.text("What the data cannot tell: the log has no idle period, so the split of node "
             "power between the GPUs and the rest is a stated prior "
             f"({prof.split}); the scenario's node power while training is the measured "
             "one whatever the split, but the depth of a swing between training and idle "
             "moves with it, by +-"
             f"{fig['swing_prior_sd_it_megawatts']:.1f} MW of IT power per standard "
             "deviation of the prior. The step dip is shorter than the 2-s meter interval: "
             "its energy is measured, its depth is a lower bound (dip taken as long as the "
             "meter interval).")
    rep.chart(viz.telemetry_chart(r.power, "power_w", by="fleet",
                                  title="MLPerf GPT-3, node AC power (64 nodes)"),
              "Mean over the 64 nodes; band: lowest to highest node reading in each bin.")


def _report_forecast(rep, r: ReportInputs) -> None:
    from .limits.ramps import ramp_label

    scen, res, fig, fc = r.scenario, r.forecast, r.figures, r.forecast_charts
    rep.heading(f"2. Forecast: {scen.hardware.cluster_gpus:,} GPUs, one synchronous job")
    rep.text(f"Question: what will the facility draw, second by second, and how deep and "
             f"fast are the swings? Method: the scenario {scen.name!r} "
             f"({len(scen.jobs)} job starting on all GPUs at once, checkpoints every "
             f"{scen.jobs[0].checkpoint_interval_s / 60:g} min, failures at the Llama 3 "
             f"rate) with the calibrated profile, {res.draws} Monte Carlo draws at "
             f"{res.tick_s:g} s.")
    rep.figures({"peak facility power": f"{fig['peak_megawatts']:.1f} MW",
                 "largest swing in 1 s": f"{fig['swing_1s_megawatts']:.1f} MW "
                                         f"(IT part +- {fig['swing_prior_sd_it_megawatts']:.1f}"
                                         " MW from the split prior)",
                 "node power while computing (scenario / measured)":
                     f"{fig['scenario_node_compute_w']:,.0f} / "
                     f"{fig['node_compute_w']:,.0f} W",
                 "largest swing in 60 s": f"{fig['swing_60s_megawatts']:.1f} MW",
                 ramp_label("ramp_up_megawatts_per_s_1s"):
                     f"{fig['ramp_up_megawatts_per_s_1s']:.1f} MW/s",
                 ramp_label("ramp_down_megawatts_per_s_1s"):
                     f"{fig['ramp_down_megawatts_per_s_1s']:.1f} MW/s",
                 "dominant oscillation": f"{fig['dominant_frequency_hz']:.3f} Hz",
                 "P(a limit is violated), per draw":
                     f"{fig['limit_violation_probability_per_draw']:.0%}"},
                caption="Facility boundary, median over draws.")
    rep.figures({"15-min peak demand": f"{fig['peak_demand_megawatts_15min']:.1f} MW",
                 "energy": f"{fig['energy_megawatt_hours']:,.0f} MWh",
                 ramp_label("ramp_megawatts_per_min_1min"):
                     f"{fig['ramp_megawatts_per_min_1min']:.1f} MW/min",
                 "load factor": f"{fig['load_factor']:.2f}"},
                caption="Planner figures: facility boundary, median over draws; demand over "
                        "clock-aligned 15-min intervals, load factor = mean / 15-min peak "
                        "demand.")
    rep.chart(fc["timeline"])
    rep.chart(fc["ramps"])
    rep.chart(fc["spectrum"])
    viol = violation_probabilities(r.limits, res)
    if len(viol):
        rep.table(viol, "Limit violations by limit: the probability that a draw (one "
                        "possible course of the horizon) violates it, the expected number "
                        "of violation episodes per day, and the worst value over draws.")


def _report_mitigations(rep, r: ReportInputs) -> None:
    from . import viz

    mit, fig, ic = r.mitigations, r.figures, r.interconnection
    rep.heading("3. Mitigations and their cost")
    rep.chart(viz.mitigation_chart(mit))
    cols = [c for c in mit.columns if not c.endswith("_reduction_pct")]
    rep.table(mit[cols].reset_index(), "Median over draws; costs against no mitigation.")
    if ic is not None:
        from .viz.report import interconnection_section

        interconnection_section(rep, ic.compliance, ic.sizing, ic.resonance,
                                heading="3b. Interconnection requirements", note=ic.note)
    if fig.get("flex_shed_megawatts"):
        rep.heading("3c. Flexibility: what the site can shed")
        rep.text("Question: can the site shed a quarter of its IT power within 30 s when the "
                 "grid asks, and at what training cost? Method: powerlab.flex.flex_offer "
                 "(the forecast engine with every GPU power-capped, same draws as the "
                 "baseline; step-rate cost from the H100 prior curve, an assumption; "
                 "docs/flexibility.md). The full offer: powerlab flex offer SCENARIO.")
        rep.figures({"cheapest cap shedding >= 25 % within 30 s":
                         f"{fig['flex_power_limit_w']:.0f} W per GPU",
                     "shed over the window": f"{fig['flex_shed_megawatts']:.2f} MW "
                                             f"({fig['flex_shed_pct_of_it']:.1f} % of IT)",
                     "held (window)": f"{fig['flex_hold_s'] / 3600:.1f} h",
                     "step rate lost": f"{fig['flex_step_rate_loss_pct']:.1f} %"})


def _report_time_of_day(rep, r: ReportInputs) -> None:
    tod, run, strag, tc = r.time_of_day, r.twin, r.stragglers, r.time_of_day_charts
    lo, hi = tod.amplitude_ci_pct
    rep.heading("4. Time-of-day effect (synthetic twin, real weather)")
    rep.text("Question: does throughput depend on the time of day, by how much, and "
             "through what? Method: fit_time_of_day (segment levels plus daily Fourier "
             "terms chosen by BIC, AR errors with HAC) on the per-step log of the twin, a "
             "physically grounded simulation of a 32-GPU training run whose inlet "
             "temperature follows the real weather next to the MGHPCC datacenter, its "
             "coupling set for a 1.5 % effect (the size Llama 3 reported); the twin knows "
             "the true answer.")
    rep.figures({"amplitude (peak to trough)": f"{tod.amplitude_pct:.2f} % "
                                               f"[{lo:.2f}, {hi:.2f}]",
                 "true amplitude": f"{run.truth.amplitude_pct:.2f} %",
                 "trough (local)": f"{tod.trough_hour:.1f} h",
                 "true trough": f"{run.truth.trough_hour:.1f} h",
                 "p-value (no effect)": f"{tod.pvalue:.2g}",
                 "GPU-hours lost per day": f"{tod.gpu_hours_lost_per_day:.1f}"})
    for key in ("profile", "throttle"):
        if key in tc:
            rep.chart(tc[key])
    rep.preformatted(tod.summary())
    rep.text(f"Stragglers: find_stragglers scores every GPU against its peers at the same "
             f"moments; it flagged {len(strag.flags)} of {len(strag.scores)} GPUs (the twin "
             f"injected {len(run.truth.stragglers)}).")
    rep.chart(tc["stragglers"])
    rep.preformatted(strag.summary())


# --------------------------------------------------------------------- interconnection
# (owned by the interconnect developer; computes, the report section only draws)

#: Requirement spec of the demo's interconnection section.
REQUIREMENTS = "choukse2025_forms.yaml"


@dataclass
class InterconnectionStudy:
    """Compliance, cheapest mitigation and resonance of one forecast (demo section)."""

    compliance: Any
    sizing: Any
    resonance: Any
    note: str
    figures: dict[str, float]


def interconnection_study(res, *, spec=None, seed: int = 1, draws: int = 3,
                          sizing_draws: int = 1) -> InterconnectionStudy:
    """Check a forecast against a requirement spec, size the cheapest mitigation on the
    requirements its tick can assess (a small search grid), and screen resonance.

    Parameters
    ----------
    res : ForecastResult
        The forecast (its first ``draws`` draws are checked; no engine rerun).
    spec : RequirementSpec or path-like, optional
        Default: the bundled ``data/requirements/choukse2025_forms.yaml``.
    seed, draws, sizing_draws : int
        Seed and draws of the mitigation search, draws checked [-].
    """

    from .interconnect.compliance import Compliance, comply
    from .interconnect.resonance import screen_resonance
    from .interconnect.sizing import SearchGrid, size_mitigation
    from .limits.requirements import read_requirements

    if spec is None:
        from .data import bundled_path

        spec = bundled_path("requirements", REQUIREMENTS)
    if not hasattr(spec, "requirements"):
        spec = read_requirements(spec)
    chk = comply(res, spec, draws=draws)
    tick = float(res.tick_s)
    sub, dropped = Compliance(spec).assessable(tick, tick, res.n_ticks * tick)
    keep = sub.requirements
    grid = SearchGrid(floor_pct_tdp=(0, 90), ramp_w_per_s=(0, 60, 15, 8, 4),
                      hysteresis_ms=(0,), filler=(False,), stagger_s=(0,),
                      battery_power_fraction=(0.4, 0.8, 1.0), battery_duration_h=(0.05,),
                      battery_window_s=(60,))
    sz = size_mitigation(res.scenario, sub, draws=sizing_draws, seed=seed, grid=grid)
    note = ""
    if dropped:
        note = (f"The mitigation search here covers the {len(keep)} requirements a "
                f"{tick:g}-s forecast can assess; {', '.join(dropped)} cannot be shown met "
                f"at this tick: run powerlab size-mitigation with --tick-s 0.01. Small "
                "search grid (floor 0/90 %, ramp 60-4 W/s, storage 40-100 % of peak), "
                f"{sizing_draws} draw(s).")
    rz = screen_resonance(chk.trace, spec) if spec.grid_modes else None
    figs = {"requirements_failed": float(len(chk.failed)),
            "requirements_total": float(len(spec.requirements))}
    if sz.found:
        c = sz.cheapest
        figs.update(mitigation_cost_usd_per_day=float(c["cost_usd_per_day"]),
                    mitigation_extra_energy_megawatt_hours_per_day=float(
                        c["extra_energy_megawatt_hours_per_day"]),
                    mitigation_throughput_loss_pct=float(c["throughput_loss_pct"]),
                    mitigation_storage_megawatt_hours=float(c["storage_megawatt_hours"]))
    return InterconnectionStudy(chk, sz, rz, note, figs)
