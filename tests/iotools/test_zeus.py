"""Tests of powerlab.iotools.zeus on the bundled Zeus NSDI'23 power traces (real data,
data/zeus-nsdi23/) and on broken copies of them.

The source (ml-energy/zeus, examples/research_reproducibility/zeus_nsdi23/trace/README.md)
defines the columns: ``power_limit`` "The power limit of the GPU in Watts",
``time_per_epoch`` "The duration of training one epoch in seconds", ``average_power``
"The average power consumption of the GPU in Watts"."""

from __future__ import annotations

import gzip
import warnings

import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import parse_zeus_power_trace, read_zeus_power_trace

from ..conftest import REPO

Z = REPO / "data" / "zeus-nsdi23"
HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
ROW = "cifar100,shufflenetv2,1024,adadelta,100,27.13,106.88\n"


@pytest.mark.parametrize("gpu,rows", [("a40", 453), ("v100", 476), ("rtx6000", 410),
                                      ("p100", 270)])
def test_bundled_files_read_whole_with_unit_names(gpu, rows):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataQualityWarning)
        df = read_zeus_power_trace(Z / f"summary_power_{gpu}.csv")
    assert len(df) == rows
    assert list(df.columns) == ["gpu_model", "dataset", "network", "workload", "batch_size",
                                "optimizer", "power_limit_w", "epoch_time_s", "power_w"]
    assert (df["gpu_model"] == gpu.upper()).all()
    assert df["workload"].nunique() == 6
    assert (df["power_limit_w"] % 5 == 0).all() and df["power_limit_w"].min() >= 100


def test_first_row_of_the_a40_file_unchanged():
    """Row 2 of summary_power_a40.csv:
    cifar100,shufflenetv2,1024,adadelta,100,27.130000000000003,106.88881213499654."""
    r = read_zeus_power_trace(Z / "summary_power_a40.csv").iloc[0]
    assert (r["workload"], r["batch_size"], r["optimizer"]) == (
        "cifar100/shufflenetv2", 1024, "adadelta")
    assert r["power_limit_w"] == 100.0
    assert r["epoch_time_s"] == 27.130000000000003
    assert r["power_w"] == 106.88881213499654


def test_gzip_and_text_give_the_same_frame(tmp_path):
    src = Z / "summary_power_p100.csv"
    gz = tmp_path / "summary_power_p100.csv.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    a = read_zeus_power_trace(gz)
    b = parse_zeus_power_trace(src.read_text(), gpu_model="P100")
    assert a.equals(b)


# --- bad input: one ParseError naming file, line and column ------------------------------

pytestmark_bad = pytest.mark.bad_input("readers")


def _write(tmp_path, text, name="summary_power_a40.csv"):
    f = tmp_path / name
    f.write_text(text)
    return f


@pytestmark_bad
@pytest.mark.parametrize("cell,column,why", [
    ("abc", "time_per_epoch", "not a positive number"),
    ("-5", "power_limit", "not a positive number"),
    ("0", "average_power", "not a positive number"),
    ("inf", "average_power", "not a positive number"),
    ("12.5", "batch_size", "not a positive integer"),
])
def test_bad_value_names_file_line_and_column(tmp_path, cell, column, why):
    cols = HEADER.strip().split(",")
    bad = ROW.strip().split(",")
    bad[cols.index(column)] = cell
    f = _write(tmp_path, HEADER + ROW + ROW.replace(",100,", ",125,") + ",".join(bad) + "\n")
    with pytest.raises(ParseError, match=why) as ei:
        read_zeus_power_trace(f)
    assert (ei.value.path, ei.value.line, ei.value.column) == (str(f), 4, column)


@pytestmark_bad
def test_empty_cell_and_short_row(tmp_path):
    f = _write(tmp_path, HEADER + ROW + "cifar100,shufflenetv2,1024,adadelta,125,16.85\n")
    with pytest.raises(ParseError, match="empty cell") as ei:
        read_zeus_power_trace(f)
    assert (ei.value.line, ei.value.column) == (3, "average_power")


@pytestmark_bad
def test_too_many_fields(tmp_path):
    f = _write(tmp_path, HEADER + ROW + ROW.strip() + ",7\n")
    with pytest.raises(ParseError, match="wrong number of fields") as ei:
        read_zeus_power_trace(f)
    assert ei.value.line == 3


@pytestmark_bad
def test_missing_column(tmp_path):
    f = _write(tmp_path, HEADER.replace("average_power", "avg_power") + ROW)
    with pytest.raises(ParseError, match="missing column") as ei:
        read_zeus_power_trace(f)
    assert (ei.value.line, ei.value.column) == (1, "average_power")


@pytestmark_bad
def test_duplicate_operating_point(tmp_path):
    f = _write(tmp_path, HEADER + ROW + ROW.replace(",100,", ",125,") + ROW)
    with pytest.raises(ParseError, match="twice") as ei:
        read_zeus_power_trace(f)
    assert ei.value.line == 4


@pytestmark_bad
def test_empty_file_and_header_only(tmp_path):
    with pytest.raises(ParseError, match="empty file"):
        read_zeus_power_trace(_write(tmp_path, ""))
    with pytest.raises(ParseError, match="no data rows"):
        read_zeus_power_trace(_write(tmp_path, HEADER))


@pytestmark_bad
def test_gpu_model_not_in_the_file_name(tmp_path):
    f = _write(tmp_path, HEADER + ROW, name="power.csv")
    with pytest.raises(ParseError, match="GPU model"):
        read_zeus_power_trace(f)
    assert read_zeus_power_trace(f, gpu_model="A40")["gpu_model"].iloc[0] == "A40"


@pytestmark_bad
def test_cut_last_line_is_dropped_and_counted(tmp_path):
    f = _write(tmp_path, HEADER + ROW + ROW.replace(",100,", ",125,")[:-8])
    with pytest.warns(DataQualityWarning, match="dropped 1 truncated last line"):
        df = read_zeus_power_trace(f)
    assert len(df) == 1 and df["power_w"].iloc[0] == 106.88
