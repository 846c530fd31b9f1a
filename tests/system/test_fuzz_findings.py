"""Regression tests for what the fuzz harness found (issue 24; benchmarks/fuzz.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from powerlab.exceptions import ParseError
from powerlab.iotools import read_nvidia_smi, read_weather

from ..conftest import TEST_DATA

pytestmark = pytest.mark.bad_input("readers")


def test_nvidia_smi_bitmask_with_a_non_ascii_character_is_one_parse_error(tmp_path):
    """Was UnicodeEncodeError from numpy's 'S16' cast."""
    text = (TEST_DATA / "iotools" / "nvidia_smi_constructed.csv").read_text()
    lines = text.splitlines()
    lines[1] = lines[1].rsplit(",", 1)[0] + ", 0x00\U000bff17"
    f = tmp_path / "smi.csv"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError, match="hexadecimal bitmask") as e:
        read_nvidia_smi(f, tz="UTC")
    assert e.value.line == 2


def test_weather_header_with_a_column_twice_is_one_parse_error(tmp_path):
    """Was pandas' 'Duplicate names are not allowed.'"""
    text = (TEST_DATA / "iotools" / "weather_2025-06-04_excerpt.txt").read_text()
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("Time,"))
    cols = lines[i].split(",")
    cols[-1] = cols[1]
    lines[i] = ",".join(cols)
    f = tmp_path / "w.txt"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError, match="more than once"):
        read_weather(f)


def test_dcgm_exporter_line_starting_with_a_brace_is_one_parse_error(tmp_path):
    """Was IndexError in the line locator (a sample line with no metric name)."""
    from powerlab.iotools import read_dcgm_prometheus

    text = (TEST_DATA / "iotools" / "dcgm_exporter_constructed.prom").read_text()
    i = text.index("DCGM_FI_DEV_POWER_USAGE{")
    f = tmp_path / "x.prom"
    f.write_text(text[:i] + text[i + len("DCGM_FI_DEV_POWER_USAGE"):])
    with pytest.raises(ParseError, match="not a Prometheus sample line"):
        read_dcgm_prometheus(f, timestamp="2025-07-27 10:00")


@pytest.mark.bad_input("export")
def test_facilities_csv_with_an_unknown_zone_in_the_column_name(tmp_path):
    """Was ZoneInfoNotFoundError (read with verify=False, where no checksum guards it)."""
    from powerlab.site.export_reader import read_facilities_csv

    f = tmp_path / "f.csv"
    f.write_text("interval_start_utc,interval_end_utc,interval_start_local_Amer(New_York\n")
    with pytest.raises(ParseError, match="not an IANA time zone"):
        read_facilities_csv(f, verify=False)


def test_an_empty_time_zone_is_one_parse_error(tmp_path):
    """Was IndexError inside pandas (``powerlab summary FILE --tz ''``)."""
    with pytest.raises(ParseError, match="unknown time zone"):
        read_nvidia_smi(TEST_DATA / "iotools" / "nvidia_smi_constructed.csv", tz="")


def test_weather_row_with_an_unclosed_quote_is_one_parse_error(tmp_path):
    """Was pandas.errors.ParserError ('EOF inside string')."""
    text = (TEST_DATA / "iotools" / "weather_2025-06-04_excerpt.txt").read_text()
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("Time,"))
    cells = lines[i + 2].split(",")
    cells[1] = '"' + cells[1]
    lines[i + 2] = ",".join(cells)
    f = tmp_path / "w.txt"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError, match="cannot read the rows as CSV"):
        read_weather(f)


def test_mllog_line_with_deeply_nested_json_is_skipped_and_counted():
    """Was RecursionError from json (a value nested 100,000 deep)."""
    from powerlab.exceptions import DataQualityWarning
    from powerlab.iotools.mllog import parse_mllog

    good = (TEST_DATA / "iotools" / "mlperf_gpt3_result_excerpt.txt").read_text()
    deep = ':::MLLOG {"key": "x", "value": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    with pytest.warns(DataQualityWarning, match="nested too deeply"):
        parse_mllog(deep + good)


def test_duckdb_aggregation_runs_when_no_progress_thread_can_start(tmp_path, monkeypatch):
    """Found by the long fuzz run (benchmarks/fuzz.py, capped address space): DuckDB's
    progress poller could not get a thread and `powerlab aggregate` ended in a
    RuntimeError traceback. Progress is optional: the aggregation runs without it."""
    import threading

    from powerlab.telemetry import duck

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    seen = []
    stop = duck._watch(object(), seen.append)   # would start the poller
    assert not stop.is_set() and seen == []
    stop.set()


@pytest.mark.parametrize("kw", [{"seed": -1}, {"seed": 1.5}, {"seed": True}, {"seed": 2**63},
                                {"draws": 2.5}, {"draws": 0}])
def test_forecast_api_refuses_bad_seed_and_draws(kw):
    """Issue 24 (left over from the CLI bound): forecast(seed=-1) raised numpy's
    ValueError and seed=1.5 ran silently; both are a ScenarioError naming the key."""
    from powerlab.exceptions import ScenarioError
    from powerlab.site.engine import forecast
    from powerlab.site.scenario import read_scenario

    sc = read_scenario(Path(__file__).parents[2] / "data" / "scenarios" / "small.yaml")
    with pytest.raises(ScenarioError, match=next(iter(kw))):
        forecast(sc, **kw)
