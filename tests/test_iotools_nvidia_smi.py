"""Tests of powerlab.iotools.nvidia_smi on constructed excerpts and the real H100 traces."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import parse_nvidia_smi, read_nvidia_smi
from powerlab.telemetry import schema

from .conftest import SHARED_DATA, TEST_DATA

D = TEST_DATA / "iotools"
CKPT100 = SHARED_DATA / "nvidia-smi-h100-100ms" / "h100-traces_ckpt100.csv"


def test_constructed_all_fields_units_and_sentinels():
    df = read_nvidia_smi(D / "nvidia_smi_constructed.csv", tz="Europe/Berlin", host="n1")
    assert len(df) == 6
    pd.testing.assert_frame_equal(schema.conform(df, sort=False), df)
    assert str(df["timestamp"].dtype) == "datetime64[ns, UTC]"
    # 12:34:56.789 CEST (UTC+2) -> 10:34:56.789 UTC
    assert df["timestamp"].iloc[0] == pd.Timestamp("2025-07-27 10:34:56.789", tz="UTC")
    g1 = df[df["gpu_index"] == 1].reset_index(drop=True)
    assert g1["gpu_uuid"].iloc[0] == "GPU-9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"
    assert g1["power_w"].tolist() == [70.51, 699.12, 701.40]
    assert np.isnan(g1["temp_mem_c"].iloc[0]) and g1["temp_mem_c"].iloc[1] == 70
    assert df["fan_speed_pct"].isna().all()                      # [Not Supported]
    assert (df["power_limit_w"] == 700.0).all()
    assert g1["clock_sm_mhz"].tolist() == [345, 1755, 1710]
    assert df["memory_used_bytes"].max() == 61234 * 1024 ** 2   # MiB -> bytes
    assert str(df["throttle_reasons"].dtype) == "UInt64"
    # hex bitmask with the top bit set survives exactly (unknown bits preserved)
    assert int(g1["throttle_reasons"].iloc[2]) == 0x8000000000000024
    assert int(g1["throttle_reasons"].iloc[1]) == 4


def test_noheader_nounits_infers_gpu_count_and_keeps_partial_query():
    fields = "timestamp,power.draw,utilization.gpu,memory.used"
    with pytest.warns(DataQualityWarning, match="2 of 3 GPU rows"):
        df = read_nvidia_smi(D / "nvidia_smi_noheader_nounits.csv", tz="UTC", fields=fields)
    assert sorted(df["gpu_index"].unique().tolist()) == [0, 1, 2]
    assert df.groupby("gpu_index").size().tolist() == [5, 5, 4]
    g0 = df[df["gpu_index"] == 0]
    assert g0["power_w"].tolist() == [72.36, 72.41, 302.18, 455.77, 460.02]
    assert df[df["gpu_index"] == 1]["power_w"].isna().sum() == 1   # [N/A]
    assert g0["memory_used_bytes"].iloc[-1] == 6100 * 2 ** 20


def test_noheader_needs_fields():
    with pytest.raises(ParseError, match="fields="):
        read_nvidia_smi(D / "nvidia_smi_noheader_nounits.csv", tz="UTC")


def test_n_gpus_given_is_used_and_a_wrong_one_is_caught():
    from powerlab.exceptions import SchemaError
    fields = ["timestamp", "power.draw", "utilization.gpu", "memory.used"]
    path = D / "nvidia_smi_noheader_nounits.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)   # the partial last query
        given = read_nvidia_smi(path, tz="UTC", fields=fields, n_gpus=3)
        inferred = read_nvidia_smi(path, tz="UTC", fields=fields)
    pd.testing.assert_frame_equal(given, inferred)
    # one GPU per query would put two samples of "GPU 0" at the same millisecond
    with pytest.raises(SchemaError, match="duplicate samples"):
        read_nvidia_smi(path, tz="UTC", fields=fields, n_gpus=1)


def test_naive_timestamps_require_tz():
    with pytest.raises(ParseError, match="tz="):
        read_nvidia_smi(D / "nvidia_smi_constructed.csv")


def test_zoned_timestamps_need_no_tz():
    text = ("timestamp, index, power.draw [W]\n"
            "2025-07-27T12:00:00.000+02:00, 0, 100.00 W\n"
            "2025-07-27T12:00:01.000+02:00, 0, 101.00 W\n")
    df = parse_nvidia_smi(text)
    assert df["timestamp"].iloc[0] == pd.Timestamp("2025-07-27 10:00:00", tz="UTC")


def test_broken_file_names_line_column_and_unit():
    with pytest.raises(ParseError) as exc:
        read_nvidia_smi(D / "nvidia_smi_broken.csv", tz="UTC", n_gpus=2)
    e = exc.value
    assert e.line == 5 and e.column == "power.draw"
    assert "72.7B W" in str(e) and "in W" in str(e) and "nvidia_smi_broken.csv" in str(e)


def test_wrong_field_count_and_unit_mix_are_errors():
    head = "timestamp, index, power.draw [W]\n"
    with pytest.raises(ParseError, match="2 field") as exc:
        parse_nvidia_smi(head + "2025/07/27 00:00:00.000, 0, 1.0 W\n"
                         "2025/07/27 00:00:01.000, 0\n", tz="UTC")
    assert exc.value.line == 3
    with pytest.raises(ParseError, match="lacks the unit") as exc:
        parse_nvidia_smi(head + "2025/07/27 00:00:00.000, 0, 1.0 W\n"
                         "2025/07/27 00:00:01.000, 0, 2.0\n", tz="UTC")
    assert exc.value.line == 3
    with pytest.raises(ParseError, match=r"\[mW\]"):
        parse_nvidia_smi("timestamp, index, power.draw [mW]\n", tz="UTC")


def test_truncated_last_line_and_repeated_header():
    text = ("timestamp, index, power.draw [W]\n"
            "2025/07/27 00:00:00.000, 0, 10.0 W\n"
            "2025/07/27 00:00:00.001, 1, 20.0 W\n"
            "timestamp, index, power.draw [W]\n"
            "2025/07/27 00:00:01.000, 0, 11.0 W\n"
            "2025/07/27 00:00:01.001, 1, 2")
    with pytest.warns(DataQualityWarning, match="truncated last line"):
        df = parse_nvidia_smi(text, tz="UTC")
    assert df["power_w"].tolist() == [10.0, 11.0, 20.0]


def test_dst_fall_back_resolved_by_file_order():
    # 2025-11-02 01:30 happens twice in New York; file order says which is which
    text = ("timestamp, index, power.draw [W]\n"
            "2025/11/02 01:30:00.000, 0, 10.0 W\n"
            "2025/11/02 01:59:59.000, 0, 11.0 W\n"
            "2025/11/02 01:30:00.000, 0, 12.0 W\n")
    with pytest.warns(DataQualityWarning, match="3 ambiguous"):
        df = parse_nvidia_smi(text, tz="America/New_York")
    t = df["timestamp"]
    assert t.iloc[0] == pd.Timestamp("2025-11-02 05:30", tz="UTC")   # EDT
    assert t.iloc[2] == pd.Timestamp("2025-11-02 06:30", tz="UTC")   # EST, one hour later
    assert t.is_monotonic_increasing


@pytest.fixture(scope="module")
def ckpt100():
    if not CKPT100.is_file():
        pytest.skip(f"real nvidia-smi traces not found at {CKPT100}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataQualityWarning)   # a clean file: no warnings
        return read_nvidia_smi(CKPT100, tz="America/Los_Angeles", host="h100-node")


def test_real_ckpt100_counts_units_and_gpu_assignment(ckpt100):
    df = ckpt100
    assert len(df) == 54_432
    assert df.groupby("gpu_index").size().to_dict() == {g: 6_804 for g in range(8)}
    # first query of the file: row k is GPU k; the first row shows 131 MiB on GPU 0
    first = df[df["timestamp"] == df["timestamp"].min()]
    assert first["gpu_index"].tolist() == [0]
    assert first["memory_used_bytes"].iloc[0] == 131 * 2 ** 20
    assert first["power_w"].iloc[0] == 72.36
    # units: watts of an H100 (idle ~70 W, loaded < 700 W), percent within 0..100
    assert 60 < df["power_w"].min() and df["power_w"].max() < 700
    assert df["util_gpu_pct"].between(0, 100).all()
    # time zone: 00:34:45 local (PDT, UTC-7) -> 07:34:45 UTC; span ~11.6 min
    assert df["timestamp"].min() == pd.Timestamp("2025-07-27 07:34:45.155", tz="UTC")
    span = (df["timestamp"].max() - df["timestamp"].min()).total_seconds()
    assert 690 < span < 700
    # the node alternates between ~4.3-4.5 kW and ~1.2 kW plateaus (README of the data)
    node = df.set_index("timestamp").groupby("gpu_index")["power_w"].resample("1s").mean()
    node_w = node.groupby(level=1).sum()
    node_w = node_w[node.groupby(level=1).count() == 8]
    assert node_w.quantile(0.95) > 4000 and node_w.quantile(0.3) < 1500


def test_repeated_header_with_indent_and_header_text_inside_a_cell():
    # the body is searched for the header's first cell before the cells are: an indented
    # repeated header is still one, and a cell merely containing that text is not
    text = ("timestamp, index, power.draw [W]\n"
            "2025/07/27 00:00:00.000, 0, 10.0 W\n"
            "  timestamp , index, power.draw [W]\n"
            "2025/07/27 00:00:01.000, 0, 11.0 W\n")
    df = parse_nvidia_smi(text, tz="UTC")
    assert df["power_w"].tolist() == [10.0, 11.0]
    with pytest.raises(ParseError, match="timestamp") as exc:
        parse_nvidia_smi(text.replace("  timestamp ,", "xtimestamp,"), tz="UTC")
    assert exc.value.line == 3


def test_missing_throttle_field_gives_all_na_uint64():
    text = ("timestamp, index, power.draw [W]\n"
            "2025/07/27 00:00:00.000, 1, 10.0 W\n"
            "2025/07/27 00:00:00.001, 0, 20.0 W\n")
    df = parse_nvidia_smi(text, tz="UTC")
    assert str(df["throttle_reasons"].dtype) == "UInt64"
    assert df["throttle_reasons"].isna().all() and len(df) == 2
    assert df["gpu_index"].tolist() == [0, 1]


def test_preferred_field_wins_whatever_the_header_order():
    # the module documents: power.draw over power.draw.instant, the enforced limit over the
    # requested one, the SM clock over the graphics clock -- independent of column order
    text = ("timestamp, index, power.draw.instant [W], power.limit [W], clocks.gr [MHz], "
            "power.draw [W], enforced.power.limit [W], clocks.sm [MHz]\n"
            "2025/01/01 00:00:00.000, 0, 100 W, 300 W, 1000 MHz, 200 W, 400 W, 1500 MHz\n")
    df = parse_nvidia_smi(text, tz="UTC")
    assert df["power_w"].iloc[0] == 200.0
    assert df["power_limit_w"].iloc[0] == 400.0
    assert df["clock_sm_mhz"].iloc[0] == 1500.0


@pytest.mark.parametrize("index", ["65539", "70000", "1024"])
def test_gpu_index_out_of_range_is_an_error_not_wrapped(index):
    # 65539 used to wrap to GPU 3 in the int16 cast and pass validation silently
    text = ("timestamp, index, power.draw [W]\n"
            f"2025/01/01 00:00:00.000, {index}, 5 W\n")
    with pytest.raises(ParseError) as exc:
        parse_nvidia_smi(text, tz="UTC")
    assert exc.value.line == 2 and exc.value.column == "index"
