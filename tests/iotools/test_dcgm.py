"""Tests of powerlab.iotools.dcgm (dcgmi dmon text and dcgm-exporter exposition)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import (
    parse_dcgm_dmon,
    parse_dcgm_prometheus,
    read_dcgm_dmon,
    read_dcgm_prometheus,
)

from ..conftest import TEST_DATA

D = TEST_DATA / "iotools"
T0 = pd.Timestamp("2025-07-27 10:00:00", tz="UTC")


def test_dmon_constructed_with_start_and_delay():
    df = read_dcgm_dmon(D / "dcgmi_dmon_constructed.txt", start=T0, delay_ms=1000,
                        host="n1")
    assert len(df) == 6 and set(df["gpu_index"]) == {0, 1}
    g1 = df[df["gpu_index"] == 1].reset_index(drop=True)
    assert g1["timestamp"].tolist() == [T0 + pd.Timedelta(seconds=s) for s in (0, 1, 2)]
    assert g1["power_w"].tolist() == [70.512, 699.120, 701.402]
    assert np.isnan(g1["temp_mem_c"].iloc[0])                        # N/A
    assert g1["energy_j"].iloc[0] == pytest.approx(1279034411.920)    # mJ -> J
    assert g1["throttle_reasons"].tolist() == [1, 4, 36]
    assert str(df["throttle_reasons"].dtype) == "UInt64"
    assert (df["host"] == "n1").all()


def test_dmon_needs_time():
    with pytest.raises(ParseError, match="start="):
        read_dcgm_dmon(D / "dcgmi_dmon_constructed.txt")


def test_dmon_line_timestamps_and_repeated_header():
    lines = (D / "dcgmi_dmon_constructed.txt").read_text().splitlines()
    stamped = [f"2025-07-27 12:00:0{i // 2}.000 {ln}" if ln.startswith("GPU") else ln
               for i, ln in enumerate(lines[2:])]
    text = "\n".join(lines[:2] + stamped[:2] + lines[:2] + stamped[2:]) + "\n"
    with pytest.raises(ParseError, match="tz="):
        parse_dcgm_dmon(text)
    df = parse_dcgm_dmon(text, tz="Europe/Berlin")
    assert len(df) == 6
    assert df["timestamp"].min() == pd.Timestamp("2025-07-27 10:00:00", tz="UTC")


def test_dmon_broken_names_line_and_column():
    with pytest.raises(ParseError) as exc:
        read_dcgm_dmon(D / "dcgmi_dmon_broken.txt", start=T0, delay_ms=100)
    assert exc.value.line == 6 and exc.value.column == "TOTEC" and "mJ" in str(exc.value)


def test_dmon_skips_and_counts_other_entities():
    text = (D / "dcgmi_dmon_constructed.txt").read_text() + \
        "GPU-I 3   10.0  N/A  N/A  N/A  N/A  N/A  N/A  N/A\n"
    with pytest.warns(DataQualityWarning, match="skipped 1 row"):
        df = parse_dcgm_dmon(text, start=T0, delay_ms=1000)
    assert len(df) == 6


def test_prometheus_constructed():
    df = read_dcgm_prometheus(D / "dcgm_exporter_constructed.prom", timestamp=T0)
    assert len(df) == 2
    assert df["host"].tolist() == ["gpu-node-017"] * 2
    assert df["gpu_uuid"].tolist() == ["GPU-3f2a9c1e-6b4d-4e2f-9a1b-0c7d8e9f1a2b",
                                       "GPU-9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"]
    assert df["power_w"].tolist() == [612.803, 699.12]
    assert df["energy_j"].tolist() == pytest.approx([1284571705.120, 1279035110.984])
    assert df["temp_mem_c"].iloc[0] == 66 and np.isnan(df["temp_mem_c"].iloc[1])  # blank
    assert df["throttle_reasons"].tolist() == [0, 4]
    assert df["memory_used_bytes"].iloc[0] == 61234 * 2 ** 20
    assert (df["timestamp"] == T0).all()


def test_prometheus_needs_timestamp_or_sample_times():
    with pytest.raises(ParseError, match="timestamp="):
        read_dcgm_prometheus(D / "dcgm_exporter_constructed.prom")
    text = ('DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} 100.5 1753610400000\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} 120.5 1753610401000\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 50 1753610401000\n')
    df = parse_dcgm_prometheus(text, host="h")
    assert df["power_w"].tolist() == [100.5, 120.5]
    assert df["timestamp"].iloc[1] == pd.Timestamp(1753610401000, unit="ms", tz="UTC")
    assert np.isnan(df["temp_gpu_c"].iloc[0]) and df["temp_gpu_c"].iloc[1] == 50


def test_prometheus_broken_names_line_and_metric():
    with pytest.raises(ParseError) as exc:
        read_dcgm_prometheus(D / "dcgm_exporter_broken.prom", timestamp=T0)
    assert exc.value.line == 20 and exc.value.column == "DCGM_FI_DEV_POWER_USAGE"
    assert "699.1.2" in str(exc.value) and "in W" in str(exc.value)


def test_prometheus_power_in_milliwatts_is_refused_by_validation():
    from powerlab.exceptions import SchemaError
    text = 'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 612803\n'
    with pytest.raises(SchemaError, match="power_w"):
        parse_dcgm_prometheus(text, timestamp=T0)


def test_prometheus_parsed_by_prometheus_client_escapes_counters_and_types():
    # label escapes, a counter without _total (the parser appends it), HELP text with
    # braces, an untyped metric, spaces around labels: values as dcgm-exporter meant them
    text = ('# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy {in mJ}.\n'
            '# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n'
            'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",Hostname="n\\"1\\\\x"} 5000 '
            '1753610400000\n'
            'DCGM_FI_DEV_POWER_USAGE{ gpu = "0" , Hostname="n\\"1\\\\x", } 250.25 '
            '1753610400000\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="n\\"1\\\\x"} NaN 1753610400000\n')
    df = parse_dcgm_prometheus(text)
    assert df["host"].tolist() == ['n"1\\x']
    assert df["energy_j"].tolist() == [5.0] and df["power_w"].tolist() == [250.25]
    assert np.isnan(df["temp_gpu_c"].iloc[0])
    assert df["timestamp"].iloc[0] == pd.Timestamp(1753610400000, unit="ms", tz="UTC")


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize(("line", "match"), [
    ('DCGM_FI_DEV_POWER_USAGE{gpu="0"} 7O0.5', "'7O0.5' as a number in W"),
    ('DCGM_FI_DEV_POWER_USAGE{gpu="0} 700.5', "not a Prometheus sample line"),
    ("# TYPE", "not a Prometheus sample line"),
])
def test_prometheus_unparseable_line_is_named(line, match):
    text = ('DCGM_FI_DEV_POWER_USAGE{gpu="1"} 100 1753610400000\n' + line + "\n")
    with pytest.raises(ParseError, match=match) as exc:
        parse_dcgm_prometheus(text, timestamp=T0)
    assert exc.value.line == 2
