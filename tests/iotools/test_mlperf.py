"""Tests of powerlab.iotools.mlperf (node power logs) on real MLPerf excerpts and the bundled
64-node run."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import read_mllog, read_mlperf_power

from ..conftest import REPO, TEST_DATA

D = TEST_DATA / "iotools"
RUN = REPO / "data" / "mlperf-gpt3-64node"


def test_node_excerpt():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataQualityWarning)
        df = read_mlperf_power(D / "mlperf_gpt3_node_7_excerpt.txt")
    assert len(df) == 43                          # 45 lines minus start/stop events
    assert (df["scope"] == "node").all() and (df["host"] == "mlperf_gpt3_node_7_excerpt").all()
    assert df["gpu_index"].isna().all()
    assert df["power_w"].iloc[0] == 3963.0
    assert df["timestamp"].iloc[0] == pd.Timestamp(1715960308910, unit="ms", tz="UTC")
    assert df["timestamp"].is_monotonic_increasing


def test_broken_power_log_counts_skipped_lines():
    with pytest.warns(DataQualityWarning, match=r"skipped 2 malformed") as rec:
        df = read_mlperf_power(D / "mlperf_power_broken.txt", host="node_7")
    msg = str(rec[0].message)
    assert "mlperf_power_broken.txt" in msg and "line 7" in msg
    assert len(df) == 9                  # 11 readings, one cut short, one non-numeric
    assert 7144.0 in df["power_w"].tolist()     # the rank-prefixed line is read
    assert (df["host"] == "node_7").all()


@pytest.fixture(scope="module")
def run64():
    assert (RUN / "power").is_dir(), "bundled MLPerf data missing"
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always", DataQualityWarning)
        df = read_mlperf_power(RUN / "power")
    # the only warning: 30 pairs of node logs hold the same readings (byte-identical
    # files in the submission; the submitter's total_power.txt counts both)
    assert [str(w.message).count(" = ") for w in rec] == [30]
    return df


def test_64_node_run_identical_logs_and_clock_offsets(run64):
    assert ["node_1", "node_6"] in run64.attrs["identical_logs"]
    assert len(run64.attrs["identical_logs"]) == 30
    assert set(run64.attrs["meter_interval_s"].values()) <= {2.001, 2.004, 2.005, 2.006,
                                                            2.007}
    off = pd.Series(run64.attrs["clock_offsets_s"])
    assert len(off) == 64 and off.abs().max() < 2.5   # "differ by up to 2 s"
    # identical logs have identical offsets: the estimate is a function of the readings
    assert off["node_1"] == off["node_6"]
    sw = run64.attrs["switch_power"]
    assert [r["switch"] for r in sw] == ["sw_0"] and sw[0]["power_w"] == 59570.0
    assert "sw_0" not in set(run64["host"])       # a switch is never a node


def test_repeated_readings_are_dropped_or_averaged_by_rule(tmp_path):
    """MLPerf logs repeat a reading with the same time_ms (v4.0 LoRA, run 5742_5)."""
    line = (':::MLLOG {{"namespace": "", "time_ms": {t}, "event_type": "POINT_IN_TIME", '
            '"key": "power_reading", "value": {v}, "metadata": ""}}\n')
    t0 = 1715898830912
    rows = [(t0, 4000), (t0 + 2000, 5000), (t0 + 2000, 5000), (t0 + 4000, 6000),
            (t0 + 4000, 6200), (t0 + 6000, 6100)]
    f = tmp_path / "node_3.txt"
    f.write_text("".join(line.format(t=t, v=v) for t, v in rows))
    with pytest.warns(DataQualityWarning, match=r"node_3.txt: dropped 1 exactly repeated.*"
                      r"averaged 1 instant.*200 W apart"):
        df = read_mlperf_power(f)
    assert df["power_w"].tolist() == [4000.0, 5000.0, 6100.0, 6100.0]
    assert df.attrs["meter_interval_s"] == {"node_3": 2.0}
    assert df.attrs["repeated_readings"] == {"node_3": 2}


@pytest.mark.slow
def test_every_shared_mlperf_log_reads(shared_data):
    """Every power folder and training log in ../shared/data reads (v4.0 and v5.0 layouts,
    rank-prefixed or not, gzip or not)."""
    roots = sorted(shared_data.glob("mlperf-*"))
    assert roots
    folders = sorted({f.parent for r in roots for f in r.rglob("node_*.txt*")})
    logs = sorted(f for r in roots for f in r.rglob("result_*.txt*") if f.is_file())
    assert len(folders) >= 36 and len(logs) >= 36
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        for d in folders:
            df = read_mlperf_power(d)
            assert len(df) > 100 and (df["scope"] == "node").all(), d
            assert set(df.attrs["meter_interval_s"].values()) <= set(
                np.round(np.arange(0.9, 2.1, 0.001), 3)), d
        for f in logs:
            r = read_mllog(f)
            assert r.run_start is not None and r.duration_s > 100, f
            assert len(r.evals) >= 2 and r.evals["duration_s"].gt(0).all(), f
    b200 = read_mlperf_power(shared_data / "mlperf-v50-lenovo-8xb200" / "bert" / "power"
                             / "result_0")
    assert b200.attrs["meter_interval_s"] == {"node_0": 1.0}
    bert = read_mllog(shared_data / "mlperf-v50-lenovo-8xb200" / "bert" / "result_0.txt.gz")
    assert bert.steps["step"].notna().sum() == 0 or bert.steps["step"].dtype == "Int64"
    ret = read_mllog(shared_data / "mlperf-v50-lenovo-8xb200" / "retinanet"
                     / "result_0.txt.gz")
    assert ret.blocks.empty and len(ret.evals) == 4       # no block events in this log


def test_64_node_run_counts_units_and_energy(run64):
    df = run64
    sizes = df.groupby("host").size()
    assert len(sizes) == 64
    assert set(sizes.index) == {f"node_{i}" for i in range(1, 65)}
    assert sizes.value_counts().to_dict() == {1702: 52, 1701: 12}
    assert df["timestamp"].min() >= pd.Timestamp("2024-05-17 15:38", tz="UTC")
    assert df["timestamp"].max() <= pd.Timestamp("2024-05-17 16:36", tz="UTC")
    assert 3000 < df["power_w"].min() and df["power_w"].max() < 8000    # W per node
    # ground truth: integrating the 64 node logs gives the submission's total energy
    total = (RUN / "power" / "total_power.txt").read_text()
    kwh_reported = float(total.split(":")[1].split()[0])
    kwh = 0.0
    for _, g in df.groupby("host"):
        t = g["timestamp"].astype("int64").to_numpy() / 1e9
        kwh += np.trapezoid(g["power_w"].to_numpy(), t) / 3.6e6
    assert kwh == pytest.approx(kwh_reported, rel=1e-3)


def test_host_for_a_directory_is_refused():
    with pytest.raises(ParseError, match="host="):
        read_mlperf_power(RUN / "power", host="x")


def test_full_result_log(run64):
    r = read_mllog(RUN / "result_5848-240517221859825376616_2.txt.gz")
    assert r.duration_s == pytest.approx(3412.67)
    assert len(r.blocks) == 24 and len(r.evals) == 24
    assert r.blocks["duration_s"].between(120, 140).all()
    assert len(r.steps) > 300
    # the power logs cover the run: the run starts within the first readings
    assert run64["timestamp"].min() <= r.run_start + pd.Timedelta(seconds=5)


def test_one_pass_json_decoding_reads_what_the_line_by_line_parser_reads():
    """A plain log (every MLLOG line ``:::MLLOG {event}``, with LF or CRLF line ends) is
    decoded in one ``json.loads`` of all its events; the same events in lines the
    one-pass path hands to the line-by-line parser (rank prefixes, a stray key that is
    not a string, a non-numeric reading) give the same readings, and only the
    malformed line is counted."""
    from powerlab.iotools import mlperf, parse_mlperf_power

    text = (D / "mlperf_gpt3_node_7_excerpt.txt").read_text()
    assert mlperf._power_fast(text) is not None
    exp = parse_mlperf_power(text, host="n")
    assert len(exp) == 43
    crlf = text.replace("\n", "\r\n")
    assert mlperf._power_fast(crlf) is not None
    pd.testing.assert_frame_equal(parse_mlperf_power(crlf, host="n"), exp, check_exact=True)
    ranked = "".join(f"0: {ln}\n" for ln in text.splitlines())
    odd = ranked + (':::MLLOG {"time_ms": 1715960308910, "key": ["power_reading"], '
                    '"value": 1}\n')
    assert mlperf._power_fast(odd) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataQualityWarning)
        pd.testing.assert_frame_equal(parse_mlperf_power(odd, host="n"), exp,
                                      check_exact=True)
    bad = text + (':::MLLOG {"time_ms": 1715960400000, "key": "power_reading", '
                  '"value": true}\n')
    assert mlperf._power_fast(bad) is None
    with pytest.warns(DataQualityWarning, match=r"skipped 1 malformed .*line 46"):
        got = parse_mlperf_power(bad, host="n")
    pd.testing.assert_frame_equal(got, exp, check_exact=True)
