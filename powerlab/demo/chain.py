"""The demo's chain of named steps (pvlib's ``ModelChain``): :func:`run_demo` runs them in
order, each timed by a progress line and adding its key figures, and returns what they
produced as a :class:`DemoResult`."""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .. import viz
from ..exceptions import StoreError
from ..site.export import write_facilities_csv
from ..site.export_reader import read_facilities_csv
from .calibrate import calibrate_profile, profile_figures, read_mlperf
from .flexibility import flex_figures
from .forecast import SITE_GPUS, forecast_figures, forecast_site
from .interconnection import interconnection_study, study_package_figures, study_package_step
from .mitigations import mitigation_table
from .report import ReportInputs, build_report
from .time_of_day import time_of_day_figures, twin_time_of_day

__all__ = ["DemoResult", "run_demo"]


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


def _writable_folder(out: str | Path) -> Path:
    """Create ``out`` (with its parents) and check that files can be written in it."""
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
    out = _writable_folder(out)  # before minutes of work, not after
    chain = _Chain(out, _Progress(progress, 9), hours=hours, draws=draws,
                   twin_days=twin_days, seed=seed)
    for step in (chain.calibrate, chain.forecast_site, chain.compare_mitigations,
                 chain.study_interconnection, chain.analyse_time_of_day, chain.export_csv,
                 chain.write_report, chain.write_study_package):
        step()
    return chain.result()


@dataclass
class _Chain:
    """The demo's state between its steps: the settings, the key figures so far and
    each step's results.  A step is one or two progress lines (``prog.step``: key, text)
    and adds its figures to ``fig``."""

    out: Path
    prog: _Progress
    hours: float
    draws: int
    twin_days: float
    seed: int
    fig: dict[str, float] = field(default_factory=dict)
    power: Any = None               # the MLPerf node power readings
    profile: Any = None             # ProfileFit, split by NODE_OVERHEAD_PRIOR
    scenario: Any = None
    forecast: Any = None            # ForecastResult
    limits: Any = None              # limit violations
    mitigations: Any = None         # the mitigation table
    interconnection: Any = None     # InterconnectionStudy
    twin: Any = None                # the twin's training run
    time_of_day: Any = None         # TimeOfDayResult
    stragglers: Any = None          # StragglerResult
    csv: Path | None = None
    sidecar: Path | None = None
    report: Path | None = None
    study_package: Any = None       # StudyPackage
    study_files: dict | None = None

    def calibrate(self) -> None:
        with self.prog.step("read", "reading the MLPerf GPT-3 power logs (64 nodes) and "
                                    "training log"):
            self.power, mllog = read_mlperf()
        with self.prog.step("calibrate", "calibrating the job power profile (powerlab "
                                         "calibrate)"):
            self.profile = calibrate_profile(self.power, mllog)
        self.fig.update(profile_figures(self.profile))

    def forecast_site(self) -> None:
        with self.prog.step("forecast", f"forecasting a {SITE_GPUS:,}-GPU site, "
                                        f"{self.hours:g} h at 100 ms, {self.draws} draws"):
            self.scenario, self.forecast, self.limits, fac = forecast_site(
                self.profile, self.hours, self.draws, self.seed)
        self.fig.update(forecast_figures(self.profile, self.scenario, self.forecast,
                                         self.limits, fac))

    def compare_mitigations(self) -> None:
        with self.prog.step("mitigations", "comparing mitigations (floor, ramp limit, "
                                           "battery) and the flexibility offer"):
            self.mitigations = mitigation_table(self.scenario, self.seed)
            self.fig.update(flex_figures(self.scenario, draws=min(self.draws, 3),
                                         seed=self.seed))

    def study_interconnection(self) -> None:
        with self.prog.step("interconnection", "checking interconnection requirements, "
                                               "sizing the cheapest mitigation, screening "
                                               "resonance"):
            self.interconnection = interconnection_study(self.forecast, seed=self.seed)
        self.fig.update(self.interconnection.figures)

    def analyse_time_of_day(self) -> None:
        with self.prog.step("time_of_day", f"time-of-day analysis on the twin "
                                           f"({self.twin_days:g} days, real Holyoke "
                                           "weather)"):
            self.twin, self.time_of_day, self.stragglers = twin_time_of_day(self.twin_days,
                                                                            self.seed)
        self.fig.update(time_of_day_figures(self.twin, self.time_of_day, self.stragglers))

    def export_csv(self) -> None:
        with self.prog.step("export", "writing the facilities CSV and JSON sidecar"):
            self.csv, self.sidecar = write_facilities_csv(
                self.forecast, self.out / "facilities_forecast.csv", resolution="1min")
            back = read_facilities_csv(self.csv)
        self.fig["csv_rows"] = float(len(back))

    def write_report(self) -> None:
        with self.prog.step("report", "building the HTML report (charts and JavaScript "
                                      "inline)"):
            fc = viz.forecast_charts(self.forecast)
            tc = viz.time_of_day_charts(self.time_of_day)
            tc["stragglers"] = viz.stragglers_chart(self.stragglers)
            rep = build_report(ReportInputs(
                profile=self.profile, power=self.power, scenario=self.scenario,
                forecast=self.forecast, limits=self.limits, mitigations=self.mitigations,
                twin=self.twin, time_of_day=self.time_of_day, stragglers=self.stragglers,
                forecast_charts=fc, time_of_day_charts=tc, figures=self.fig, csv=self.csv,
                interconnection=self.interconnection))
            self.report = rep.write(self.out / "powerlab_demo_report.html")

    def write_study_package(self) -> None:
        with self.prog.step("study_package", "writing the large-load study package of the "
                                             "bundled 16k-GPU scenario"):
            self.study_package, self.study_files = study_package_step(
                self.out / "study_package", hours=self.hours, draws=self.draws,
                seed=self.seed)
        self.fig.update(study_package_figures(self.study_package))

    def result(self) -> DemoResult:
        """The outputs and results, once the progress has said where the files are."""
        self.prog.say(f"wrote {self.report}\n      {self.csv}\n      {self.sidecar}\n"
                      f"      {self.study_files['page']}")
        return DemoResult(out=self.out, report=self.report, csv=self.csv,
                          sidecar=self.sidecar, figures=self.fig, timings_s=self.prog.timings,
                          profile=self.profile, forecast=self.forecast, limits=self.limits,
                          mitigations=self.mitigations, time_of_day=self.time_of_day,
                          stragglers=self.stragglers, interconnection=self.interconnection,
                          study_package=self.study_package)
