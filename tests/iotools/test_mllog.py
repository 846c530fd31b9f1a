"""Tests of powerlab.iotools.mllog: MLLOG lines and MLPerf training result logs."""

from __future__ import annotations

import pandas as pd
import pytest

from powerlab._summary import Results
from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import MLLogResult, parse_mllog, read_any, read_mllog, sniff_format

from ..conftest import TEST_DATA

D = TEST_DATA / "iotools"


def test_result_log_excerpt_events_and_steps():
    r = read_mllog(D / "mlperf_gpt3_result_excerpt.txt")
    events, steps = r
    assert len(events) == 72
    assert events["rank"].notna().all() and set(events["rank"].dropna()) >= {0, 208}
    assert r.run_start == pd.Timestamp(1715960307022, unit="ms", tz="UTC")
    assert r.run_stop == pd.Timestamp(1715963719692, unit="ms", tz="UTC")
    assert r.status == "success"
    assert len(steps) == 44
    train = steps["train_step_timing_s"].dropna()
    assert len(train) > 30 and train.between(10.3, 10.7).all()
    assert steps["step"].is_monotonic_increasing
    ev = r.evals
    acc = ev.dropna(subset=["eval_accuracy"])
    assert acc["epoch_num"].iloc[0] == 50331648
    assert acc["eval_accuracy"].iloc[0] == pytest.approx(2.7505922317504883)
    assert "train_step_timing_s" in r.summary()


def test_malformed_mllog_lines_are_counted_not_silent():
    text = ('0: :::MLLOG {"time_ms": 1715960308001, "key": "run_start", "value": null, "metadata": {}}\n'
            'some shell output\n'
            '0: :::MLLOG {"time_ms": 1715960308002, "key": "tracked_stats", "value": {"train_step_timing '
            'in s": 1.5}, "metadata": {"step": 8}}\n'
            '0: :::MLLOG {"time_ms": 1715960308003, "key": "run_st\n'
            '+ echo \':::MLLOG {"time_ms": 1715960308004}\'\n')
    with pytest.warns(DataQualityWarning, match="skipped 2 malformed"):
        r = parse_mllog(text)
    assert r.steps["train_step_timing_s"].tolist() == [1.5]
    assert r.steps["step"].tolist() == [8]
    assert r.run_stop is None


def test_the_result_is_a_results_object_with_one_display():
    r = read_mllog(D / "mlperf_gpt3_result_excerpt.txt")
    assert isinstance(r, Results) and isinstance(r, MLLogResult)
    text = r.summary().as_text()
    assert text.startswith("MLLOG ") and "tracked steps: 44" in text
    assert str(r) == repr(r) == text
    assert r._repr_html_() == r.summary().as_html() and "<pre>" in r._repr_html_()
    row = r.summary_frame().iloc[0]
    assert row["events"] == 72 and row["tracked_steps"] == 44 and row["status"] == "success"
    assert "MLLogResult" not in repr(r)                 # not the dataclass' generated repr


def test_a_training_log_is_recognised_and_read_by_read_any():
    f = D / "mlperf_gpt3_result_excerpt.txt"
    assert sniff_format(f) == "mllog"
    got = read_any(f, tz="UTC", host="x")               # options it does not take: dropped
    pd.testing.assert_frame_equal(got.events, read_mllog(f).events)


def test_a_log_without_mllog_events_is_refused():
    with pytest.raises(ParseError, match="no MLLOG events"):
        parse_mllog("just shell output\n")
