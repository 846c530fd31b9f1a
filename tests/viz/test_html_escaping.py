"""Every ``_repr_html_`` escapes text that came from input (issue 24): event categories,
host names, error messages, job names.  A ``<script>`` in the input must reach the HTML as
text, never as markup."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.bad_input("reliability")

EVIL = "<script>alert(1)</script>"


def _no_markup(text: str) -> None:
    assert "<script>" not in text and "&lt;script&gt;" in text, text[:500]


def test_failure_rates_escape_the_categories():
    from powerlab.reliability.rates import FailureRates

    fr = FailureRates(counts=pd.Series({EVIL: 3, "ok": 1}), gpu_hours=1000.0)
    _no_markup(fr._repr_html_())


def test_collector_report_escapes_the_error():
    from powerlab.collect.run_report import CollectorReport

    gpus = pd.DataFrame({c: [0.0] for c in (
        "gpu_index", "samples", "achieved_rate_hz", "jitter_ms", "max_gap_s",
        "energy_counter_j", "energy_integrated_j", "energy_disagreement_pct")})
    rep = CollectorReport(gpus=gpus, interval_s=0.1, duration_s=1.0, ticks=10,
                          missed_ticks=0, lateness_mean_ms=0.0, lateness_max_ms=0.0,
                          rows_written=0, files_written=0, events=pd.DataFrame(),
                          error=f"host {EVIL} lost")
    _no_markup(rep._repr_html_())


def test_forecast_summary_escapes_the_job_and_scenario_names():
    from powerlab.site.engine import forecast
    from powerlab.site.scenario import read_scenario
    sc = read_scenario(Path(__file__).resolve().parents[2] / "data/scenarios/small.yaml")
    import dataclasses

    job = dataclasses.replace(sc.jobs[0], name=EVIL)
    sc = dataclasses.replace(sc, name=EVIL, jobs=(job, *sc.jobs[1:]))
    res = forecast(sc, draws=1)
    _no_markup(res._repr_html_())
