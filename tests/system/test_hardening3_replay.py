"""Hardening, round three (issue 38): the cases the independent fuzzer's campaign still
broke on main, each as the smallest input that showed it (a traceback before the fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from powerlab import cli
from powerlab.exceptions import PowerlabError, ScenarioError
from powerlab.limits.yamlspec import Section
from powerlab.telemetry.timeutil import to_utc

REPO = Path(__file__).resolve().parents[2]


def _rc(argv) -> int:
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:          # a usage error: argparse exits 2 while parsing
        return exc.code


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_400_digit_integer_in_a_scenario_is_one_error_naming_the_key():
    sec = Section({"pue_per_c": 10 ** 400}, "site.cooling", source="s.yaml")
    with pytest.raises(ScenarioError, match="site.cooling.pue_per_c.*401 digits"):
        sec.number("pue_per_c", 0.01)


@pytest.mark.parametrize("text", ["2262-04-12T00:00:00Z", "9999-12-31T23:59:59Z",
                                  "1600-01-01T00:00:00Z"])
def test_times_outside_pandas_range_are_refused(text):
    with pytest.raises(PowerlabError, match="outside the times powerlab reads"):
        to_utc(text, what="--end")
    assert to_utc("2261-06-01T00:00:00Z").year == 2261


def test_an_epoch_time_outside_pandas_range_is_refused():
    with pytest.raises(PowerlabError, match="outside the times"):
        to_utc(9_500_000_000, epoch_unit="s")   # year 2271


def test_duplicated_log_lines_give_one_error_not_a_division_by_zero():
    import numpy as np

    from powerlab.calibration.step_shape import step_period
    t = np.arange(100, dtype="int64") * 10 ** 9
    with pytest.raises(PowerlabError, match="median interval is 0 s"):
        step_period([(t, np.ones(100))], 0.0, (10.0, 600.0))


def test_readings_spanning_a_year_are_refused_before_any_grid_is_allocated():
    import pandas as pd

    from powerlab.calibration.calibrate import MAX_SPAN_S, check_span
    t = pd.to_datetime(["2024-05-17T00:00Z", "2025-05-17T00:00Z"])
    with pytest.raises(PowerlabError, match="span 365 days"):
        check_span(pd.DataFrame({"timestamp": t}), "log")
    ok = pd.Timestamp("2024-05-17T00:00Z") + pd.to_timedelta([0, MAX_SPAN_S], "s")
    check_span(pd.DataFrame({"timestamp": ok}), "log")     # the bound itself passes


def test_a_dcgm_exporter_gpu_id_beyond_64_bits_is_one_parse_error(tmp_path, capsys):
    p = tmp_path / "dcgm_prom.txt"
    line = ('DCGM_FI_DEV_POWER_USAGE{{gpu="{g}",UUID="GPU-0",Hostname="h1"}} 300.0 '
            '174886560{s}000\n')
    p.write_text("".join(line.format(g=g, s=s) for s in range(4)
                         for g in ("0", "9" * 40)))
    assert _rc(["summary", p]) == 2
    assert "GPU index 999999999999999999999999... (40 digits)" in _one_line(capsys)


def test_collect_signal_interval_of_dashes_is_a_usage_error(tmp_path, capsys):
    rc = _rc(["collect", "--out", tmp_path / "s", "--duration-s", "1",
              "--signal-interval-s=--"])
    assert rc in (1, 2)
    assert "--signal-interval-s" in _one_line(capsys)
    assert not (tmp_path / "s").exists()


def test_a_parquet_gpu_index_of_inf_is_a_schema_error_naming_the_column(tmp_path, capsys):
    import pandas as pd

    from powerlab.telemetry.schema import conform
    df = conform(pd.DataFrame({
        "timestamp": pd.date_range("2025-06-02", periods=3, freq="1s", tz="UTC"),
        "host": "h1", "gpu_index": [0, 0, 0], "power_w": [300.0, 301.0, 302.0]}))
    p = tmp_path / "canon.parquet"
    df.to_parquet(p)
    import pyarrow as pa
    import pyarrow.parquet as pq
    t = pq.read_table(p)
    i = t.column_names.index("gpu_index")
    t = t.set_column(i, "gpu_index", pa.array([0.0, float("inf"), -1e300]))
    pq.write_table(t, p)
    assert _rc(["summary", p]) == 2
    assert "column 'gpu_index'" in _one_line(capsys)


def test_summary_of_a_weather_log_says_it_is_not_telemetry(tmp_path, capsys):
    p = tmp_path / "weather-2025-06-03.txt"
    p.write_text("Time,Temp (°C),Dew Point (°C),Humidity (%)\n"
                 + "".join(f"2025-06-03 14:{m:02d},30,9,28\n" for m in range(10)))
    assert _rc(["summary", p]) == 2
    assert "not GPU or node telemetry" in capsys.readouterr().err


def test_a_hard_link_to_a_file_inside_an_input_folder_is_an_input(tmp_path):
    import os

    from powerlab.outputs import check_write, protect_inputs
    lock = tmp_path / "store/_meta/locks/2025-06-02/.h1.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("pid 4242\n")
    link = tmp_path / "link.csv"
    os.link(lock, link)
    (tmp_path / "other.csv").write_text("x\n")
    with protect_inputs([tmp_path / "store"]):
        with pytest.raises(PowerlabError, match="is the input .*h1.lock"):
            check_write(link)
        with pytest.raises(PowerlabError):
            link.write_text("host,power_w\n")        # through the audit hook
        check_write(tmp_path / "other.csv")          # a lone file elsewhere: allowed
    assert lock.read_text() == "pid 4242\n"
