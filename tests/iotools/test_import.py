"""Tests of format sniffing, read_any and the ``powerlab import`` command."""

from __future__ import annotations

import pandas as pd
import pytest

from powerlab.cli import main
from powerlab.exceptions import ParseError
from powerlab.iotools import read_any, read_dcgm_prometheus, sniff_format

from ..conftest import REPO, TEST_DATA

D = TEST_DATA / "iotools"


@pytest.mark.parametrize("name, fmt", [
    ("nvidia_smi_constructed.csv", "nvidia-smi"),
    ("nvidia_smi_noheader_nounits.csv", "nvidia-smi"),
    ("dcgmi_dmon_constructed.txt", "dcgm-dmon"),
    ("dcgm_exporter_constructed.prom", "dcgm-prom"),
    ("mlperf_gpt3_node_7_excerpt.txt", "mlperf-power"),
    ("mlperf_gpt3_result_excerpt.txt", "mllog"),
    ("weather_2025-06-04_excerpt.txt", "weather"),
    ("weather_other_format.txt", "weather"),
])
def test_sniff(name, fmt):
    assert sniff_format(D / name) == fmt


def test_sniff_directory_and_unknown(tmp_path):
    assert sniff_format(REPO / "data" / "mlperf-gpt3-64node" / "power") == "mlperf-power"
    assert sniff_format(REPO / "data" / "weather-kmahighl4-2025") == "weather"
    (tmp_path / "x.txt").write_text("hello world\n")
    with pytest.raises(ParseError, match="cannot tell the format"):
        sniff_format(tmp_path / "x.txt")


def test_read_any_passes_only_the_options_a_reader_takes():
    a = read_any(D / "dcgm_exporter_constructed.prom", tz="UTC", n_gpus=8,
                 timestamp="2025-07-27 10:00")
    b = read_dcgm_prometheus(D / "dcgm_exporter_constructed.prom",
                             timestamp="2025-07-27 10:00")
    pd.testing.assert_frame_equal(a, b)


def test_cli_import_round_trip(tmp_path, capsys):
    from powerlab.telemetry.store import read_store

    store = tmp_path / "store"
    rc = main(["import", str(D / "nvidia_smi_constructed.csv"),
               str(D / "mlperf_gpt3_node_7_excerpt.txt"),
               "--out", str(store), "--tz", "Europe/Berlin", "--host", "n1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "nvidia_smi_constructed.csv: 6 rows (nvidia-smi)" in out
    assert "mlperf_gpt3_node_7_excerpt.txt: 43 rows (mlperf-power)" in out
    back = read_store(store)
    assert len(back) == 49
    assert set(back["scope"]) == {"gpu", "node"}
    assert back.loc[back["scope"] == "gpu", "power_w"].max() == 701.40


def test_cli_import_refuses_non_telemetry(tmp_path, capsys):
    rc = main(["import", str(D / "weather_2025-06-04_excerpt.txt"), "--out",
               str(tmp_path / "s")])
    assert rc == 2
    assert "not GPU telemetry" in capsys.readouterr().err


def test_cli_import_help_lists_options(capsys):
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    out = capsys.readouterr().out
    for opt in ("--out", "--format", "--tz", "--host", "--n-gpus"):
        assert opt in out


def test_cli_import_twice_does_not_duplicate_samples(tmp_path, capsys):
    from powerlab.telemetry.schema import validate
    from powerlab.telemetry.store import read_store

    store = tmp_path / "store"
    args = ["import", str(D / "nvidia_smi_constructed.csv"), "--out", str(store),
            "--tz", "UTC", "--host", "n1"]
    assert main(args) == 0
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "already imported into this store" in out and "skipped" in out
    back = read_store(store)
    assert len(back) == 6
    validate(back)  # no duplicate samples
    # other options give other samples: imported again
    assert main([*args[:-1], "n2"]) == 0
    assert len(read_store(store)) == 12
    # --force reads the source again, but the store keeps each sample once (docs/store.md)
    assert main([*args, "--force"]) == 0
    assert "0 rows" in capsys.readouterr().out
    back = read_store(store)
    assert len(back) == 12
    validate(back)
