"""Step 8 of the demo, the report: one self-contained HTML report
(:class:`powerlab.viz.report.Report`, renders offline) with a section per step, the
charts of the forecast and the twin, and the licences of the bundled data.  The sections
only draw what the steps computed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import viz
from ..limits.ramps import ramp_label
from ..viz.report import Report, interconnection_section
from .forecast import violation_probabilities

__all__ = ["NOTICES", "ReportInputs", "build_report"]

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


@dataclass(frozen=True)
class ReportInputs:
    """What the demo's HTML report draws (built by :func:`powerlab.demo.run_demo`).

    Attributes
    ----------
    profile : ProfileFit
        The calibrated job power profile (split by :data:`powerlab.demo.NODE_OVERHEAD_PRIOR`).
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


def build_report(r: ReportInputs) -> Report:
    """The demo's HTML report: one section per step, then the data licences."""
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


def _report_calibration(rep: Report, r: ReportInputs) -> None:
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


def _report_forecast(rep: Report, r: ReportInputs) -> None:
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


def _report_mitigations(rep: Report, r: ReportInputs) -> None:
    mit, fig, ic = r.mitigations, r.figures, r.interconnection
    rep.heading("3. Mitigations and their cost")
    rep.chart(viz.mitigation_chart(mit))
    cols = [c for c in mit.columns if not c.endswith("_reduction_pct")]
    rep.table(mit[cols].reset_index(), "Median over draws; costs against no mitigation.")
    if ic is not None:
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


def _report_time_of_day(rep: Report, r: ReportInputs) -> None:
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
