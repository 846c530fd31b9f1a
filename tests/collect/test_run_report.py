"""powerlab.collect.run_report: a collector run's report is a powerlab Results object."""

from __future__ import annotations

import pandas as pd

from powerlab._summary import Results
from powerlab.collect.run_report import CollectorReport


def _report(error=None) -> CollectorReport:
    gpus = pd.DataFrame({"gpu_index": [0, 1], "samples": [100, 98],
                         "achieved_rate_hz": [10.0, 9.8], "jitter_ms": [0.1, 0.2],
                         "max_gap_s": [0.1, 0.3], "energy_counter_j": [50.0, 49.0],
                         "energy_integrated_j": [50.5, 48.5],
                         "energy_disagreement_pct": [1.0, -1.02]})
    return CollectorReport(gpus=gpus, interval_s=0.1, duration_s=10.0, ticks=100,
                           missed_ticks=2, lateness_mean_ms=0.05, lateness_max_ms=1.5,
                           rows_written=198, files_written=3, events=pd.DataFrame(),
                           error=error)


def test_display_comes_from_the_results_base():
    r = _report()
    assert isinstance(r, Results)
    assert "__str__" not in vars(CollectorReport) and "_repr_html_" not in vars(CollectorReport)
    text = str(r)
    assert text == r.summary().as_text()
    assert text.startswith("collected 10.0 s at a target of 10 Hz: 100 ticks (2 missed)")
    assert "198 samples in 3 file(s)" in text
    assert r._repr_html_() == r.summary().as_html()
    assert repr(r) == "<CollectorReport: 2 GPU(s), 10.0 s at 10 Hz, 198 samples in 3 file(s)>"
    assert r.summary_frame().equals(r.gpus) and r.summary_frame() is not r.gpus


def test_an_error_shows_in_the_summary_and_the_repr():
    r = _report(error="disk full")
    assert str(r).endswith("error: disk full")
    assert repr(r).endswith(", error: disk full>")
