"""Bad input to every reader: cut last lines, damaged .gz, wrong encodings, unknown time
zones, unreadable files in an MLPerf folder.  Each ends in one ParseError naming the file
or in a counted DataQualityWarning, never in a traceback or in different numbers."""

from __future__ import annotations

import gzip
import warnings

import numpy as np
import pytest

from powerlab.cli import main
from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import (
    read_dcgm_dmon,
    read_dcgm_prometheus,
    read_mllog,
    read_mlperf_power,
    read_nvidia_smi,
    read_weather,
)

from ..conftest import TEST_DATA

D = TEST_DATA / "iotools"
pytestmark = pytest.mark.bad_input("readers")

#: reader name -> (test file, reader call)
READERS = {
    "nvidia-smi": ("nvidia_smi_constructed.csv",
                   lambda p: read_nvidia_smi(p, tz="UTC")),
    "dcgm-dmon": ("dcgmi_dmon_constructed.txt",
                  lambda p: read_dcgm_dmon(p, start="2025-07-27 10:00Z", delay_ms=1000)),
    "dcgm-prom": ("dcgm_exporter_constructed.prom",
                  lambda p: read_dcgm_prometheus(p, timestamp="2025-07-27 10:00")),
    "mlperf-power": ("mlperf_gpt3_node_7_excerpt.txt", read_mlperf_power),
    "mllog": ("mlperf_gpt3_result_excerpt.txt", read_mllog),
    "weather": ("weather_2025-06-04_excerpt.txt", lambda p: read_weather(p)),
}


def _quiet(fn, *a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        return fn(*a)


# --- a last line cut off while the file was written ---------------------------------------

def test_dcgm_exporter_value_cut_to_69_is_dropped_not_69_watts(tmp_path):
    text = (D / "dcgm_exporter_constructed.prom").read_text()
    cut = text[:text.index("699.120000") + 2]          # ... } 69
    f = tmp_path / "scrape.prom"
    f.write_text(cut)
    with pytest.warns(DataQualityWarning, match="dropped 1 truncated last line"):
        df = read_dcgm_prometheus(f, timestamp="2025-07-27 10:00")
    p1 = df.loc[df["gpu_index"] == 1, "power_w"]
    assert len(p1) == 1 and np.isnan(p1.iloc[0])       # not 69 W
    assert df.loc[df["gpu_index"] == 0, "power_w"].iloc[0] == 612.803


def test_dmon_temperature_cut_to_5_is_dropped_not_5_degrees(tmp_path):
    text = (D / "dcgmi_dmon_constructed.txt").read_text()
    text = text.rstrip("\n") + "\nGPU 0     650.1         1284572995331         1980       2619 " \
        "      51       68       100        0\n"
    cut = text[:text.rindex("51") + 1]                  # ... 2619       5
    f = tmp_path / "dmon.txt"
    f.write_text(cut)
    with pytest.warns(DataQualityWarning, match="dropped 1 truncated last line"):
        df = read_dcgm_dmon(f, start="2025-07-27 10:00Z", delay_ms=1000)
    assert len(df) == 6 and 5 not in df["temp_gpu_c"].tolist()


def test_nvidia_smi_power_cut_to_69_is_dropped(tmp_path):
    text = (D / "nvidia_smi_constructed.csv").read_text()
    cut = text[:text.index("699.12 W") + 2]
    f = tmp_path / "smi.csv"
    f.write_text(cut)
    with pytest.warns(DataQualityWarning, match="dropped 1 truncated last line"):
        df = read_nvidia_smi(f, tz="UTC")
    assert len(df) == 3 and 69.0 not in df["power_w"].tolist()


def test_mlperf_reading_cut_is_counted_not_read(tmp_path):
    text = (D / "mlperf_gpt3_node_7_excerpt.txt").read_text()
    lines = text.splitlines(keepends=True)
    last = next(i for i in range(len(lines) - 1, -1, -1) if '"power_reading"' in lines[i])
    body = "".join(lines[:last]) + lines[last][:lines[last].index('"value": ') + 11]
    f = tmp_path / "node_1.txt"
    f.write_text(body)
    full = _quiet(read_mlperf_power, D / "mlperf_gpt3_node_7_excerpt.txt")
    with pytest.warns(DataQualityWarning, match="truncated last line"):
        df = read_mlperf_power(f)
    assert len(df) == len(full) - 1                  # the cut reading only
    assert df["power_w"].tolist() == full["power_w"].iloc[:-1].tolist()


def test_weather_cut_last_line_is_counted(tmp_path):
    text = (D / "weather_2025-06-04_excerpt.txt").read_text()
    f = tmp_path / "w.txt"
    f.write_text(text.rstrip("\n")[:-3])
    with pytest.warns(DataQualityWarning, match="1 truncated last line"):
        df = read_weather(f)
    assert len(df) == len(_quiet(read_weather, D / "weather_2025-06-04_excerpt.txt")) - 1


# --- unreadable input: one ParseError naming the file -------------------------------------

@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("damage", ["not-gzip", "cut-gzip", "utf16", "latin1", "binary"])
def test_unreadable_file_is_one_parse_error_naming_it(tmp_path, reader, damage):
    name, read = READERS[reader]
    raw = (D / name).read_bytes()
    if damage == "not-gzip":
        f, data = tmp_path / (name + ".gz"), raw
    elif damage == "cut-gzip":
        f, data = tmp_path / (name + ".gz"), gzip.compress(raw)[:-30]
    elif damage == "utf16":
        f, data = tmp_path / name, raw.decode("utf-8").encode("utf-16")
    elif damage == "latin1":
        f = tmp_path / name
        cut = raw.index(b"\n", len(raw) // 2) + 1
        data = raw[:cut] + "caf\u00e9 \u00b0C\n".encode("latin-1") + raw[cut:]
    else:
        f, data = tmp_path / name, bytes(range(256)) * 4
    f.write_bytes(data)
    with pytest.raises(ParseError) as exc:
        _quiet(read, f)
    assert str(f) in str(exc.value)
    expected = {"not-gzip": "gzip", "cut-gzip": "gzip", "utf16": "UTF-16",
                "latin1": "not UTF-8", "binary": "NUL"}[damage]
    assert expected in str(exc.value)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_utf8_bom_is_read_like_the_plain_file(tmp_path, reader):
    name, read = READERS[reader]
    f = tmp_path / name
    f.write_bytes(b"\xef\xbb\xbf" + (D / name).read_bytes())
    a, b = _quiet(read, f), _quiet(read, D / name)
    if hasattr(a, "events"):
        assert a.events.drop(columns="line").equals(b.events.drop(columns="line"))
    else:
        assert a.equals(b)


@pytest.mark.parametrize("reader", ["nvidia-smi", "dcgm-dmon", "weather"])
@pytest.mark.parametrize("tz", ["Mars/Olympus_Mons", "PST8PDTX", "not a zone"])
def test_unknown_time_zone_is_a_parse_error(reader, tz):
    name = READERS[reader][0]
    with pytest.raises(ParseError, match="unknown time zone") as exc:
        if reader == "nvidia-smi":
            read_nvidia_smi(D / name, tz=tz)
        elif reader == "dcgm-dmon":
            read_dcgm_dmon(D / name, start="2025-07-27 10:00", delay_ms=1000, tz=tz)
        else:
            read_weather(D / name, tz=tz)
    assert name in str(exc.value)


# --- an MLPerf folder with unreadable node logs ------------------------------------------

def _mixed_folder(tmp_path):
    good = (D / "mlperf_gpt3_node_7_excerpt.txt").read_bytes()
    folder = tmp_path / "power"
    folder.mkdir()
    (folder / "node_1.txt").write_bytes(good)
    (folder / "node_2.txt").write_bytes(b"\x89PNG garbage \xff\xfe\x00 not a power log" * 10)
    (folder / "node_3.txt").write_bytes(good.decode().encode("utf-16"))
    (folder / "node_4.txt").write_text("just some shell output\nno readings here\n")
    return folder, len(_quiet(read_mlperf_power, D / "mlperf_gpt3_node_7_excerpt.txt"))


def test_mlperf_folder_names_every_unreadable_file(tmp_path):
    folder, n_good = _mixed_folder(tmp_path)
    with pytest.warns(DataQualityWarning, match="skipped 3 of 4 node power logs") as rec:
        df = read_mlperf_power(folder)
    msg = str(rec[0].message)
    for name, why in [("node_2.txt", "NUL"), ("node_3.txt", "UTF-16"),
                      ("node_4.txt", "no power_reading")]:
        assert f"{name} (" in msg and why in msg.split(name, 1)[1].split(";")[0]
    assert len(df) == n_good and set(df["host"]) == {"node_1"}
    assert df.attrs["unreadable_files"] == ["node_2.txt", "node_3.txt", "node_4.txt"]


def test_mlperf_folder_of_only_unreadable_files_is_an_error(tmp_path):
    folder, _ = _mixed_folder(tmp_path)
    (folder / "node_1.txt").unlink()
    with pytest.raises(ParseError, match="none of the 3 node power logs"):
        read_mlperf_power(folder)


def test_import_summary_names_unreadable_files(tmp_path, capsys):
    folder, n_good = _mixed_folder(tmp_path)
    rc = main(["import", str(folder), "--out", str(tmp_path / "store")])
    assert rc == 0
    cap = capsys.readouterr()
    out = cap.out
    assert "warning:" in cap.err and "skipped 3 of 4 node power logs" in cap.err
    last = out.strip().splitlines()[-1]
    assert f"imported {n_good:,} rows" in last
    assert "3 unreadable file(s) skipped" in last
    for name in ("node_2.txt", "node_3.txt", "node_4.txt"):
        assert name in last


# --- impossible values: masked and counted, never stored -----------------------------------

SMI = ("timestamp, index, power.draw [W], temperature.gpu, memory.used [MiB]\n"
       "2025/07/27 00:00:00.000, 0, 100.00 W, 40, 17 MiB\n"
       "2025/07/27 00:00:00.001, 1, {p1} W, {t1}, 17 MiB\n"
       "2025/07/27 00:00:01.000, 0, 101.00 W, 41, 17 MiB\n"
       "2025/07/27 00:00:01.001, 1, 102.00 W, 42, {m1} MiB\n")


@pytest.mark.parametrize(("p1", "t1", "m1", "masked"), [
    ("inf", "43", "17", {"power_w": 1}),
    ("1e308", "-999", "17", {"power_w": 1, "temp_gpu_c": 1}),
    ("-5.00", "43", "1e308", {"power_w": 1, "memory_used_bytes": 1}),
    ("nan", "43", "17", {}),                       # NaN is missing, not impossible
])
def test_nvidia_smi_impossible_values_masked_and_counted(p1, t1, m1, masked):
    from powerlab.iotools import parse_nvidia_smi

    text = SMI.format(p1=p1, t1=t1, m1=m1)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always", DataQualityWarning)
        df = parse_nvidia_smi(text, tz="UTC")
    msgs = [str(w.message) for w in rec]
    if masked:
        assert len(msgs) == 1
        assert f"masked {sum(masked.values())} impossible value(s)" in msgs[0]
        for col, n in masked.items():
            assert f"{n} {col}" in msgs[0]
    else:
        assert not msgs
    assert np.isfinite(df[["power_w", "temp_gpu_c", "memory_used_bytes"]].to_numpy()
                       [~np.isnan(df[["power_w", "temp_gpu_c", "memory_used_bytes"]]
                                  .to_numpy())]).all()
    g1 = df[df["gpu_index"] == 1]
    assert g1["power_w"].isna().sum() == (0 if p1 not in ("inf", "1e308", "-5.00", "nan")
                                          else 1)
    assert df.loc[df["gpu_index"] == 0, "power_w"].tolist() == [100.0, 101.0]


def test_nvidia_smi_unit_error_is_still_an_error_not_masked():
    from powerlab.exceptions import SchemaError
    from powerlab.iotools import parse_nvidia_smi

    text = ("timestamp, index, temperature.gpu\n"
            "2025/07/27 00:00:00.000, 0, 313\n2025/07/27 00:00:01.000, 0, 315\n")
    with pytest.raises(SchemaError, match="kelvin"):
        parse_nvidia_smi(text, tz="UTC")


def _prom(value: str, metric="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", ts="1753600000000"):
    """Two scrapes of GPU 0; ``metric`` holds ``value`` in the first one."""
    normal = {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "1000000", "DCGM_FI_DEV_GPU_TEMP": "45",
              "DCGM_FI_DEV_POWER_USAGE": "301.5"}
    first = {"DCGM_FI_DEV_POWER_USAGE": "300.5", "DCGM_FI_DEV_GPU_TEMP": "44", metric: value}
    second = {"DCGM_FI_DEV_POWER_USAGE": "301.5", "DCGM_FI_DEV_GPU_TEMP": "45",
              metric: normal[metric]}
    return "".join(f'{m}{{gpu="0"}} {v} {t}\n' for t, d in ((ts, first),
                                                          ("1753600001000", second))
                   for m, v in d.items())


@pytest.mark.parametrize(("metric", "value"), [
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "18446744073709551615"),   # -1 as uint64
    ("DCGM_FI_DEV_GPU_TEMP", "-999"),
    ("DCGM_FI_DEV_GPU_TEMP", "+Inf"),
    ("DCGM_FI_DEV_POWER_USAGE", "1e308"),
])
def test_dcgm_exporter_impossible_values_masked_and_counted(metric, value):
    from powerlab.iotools import parse_dcgm_prometheus

    text = _prom(value, metric)
    with pytest.warns(DataQualityWarning, match="masked 1 impossible"):
        df = parse_dcgm_prometheus(text)
    col = {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "energy_j",
           "DCGM_FI_DEV_GPU_TEMP": "temp_gpu_c", "DCGM_FI_DEV_POWER_USAGE": "power_w"}[metric]
    assert np.isnan(df[col].iloc[0]) and np.isfinite(df[col].iloc[1])


@pytest.mark.parametrize("ts", ["-5", "100000000000000000000", "1"])
def test_dcgm_exporter_impossible_sample_times_dropped_and_counted(ts):
    from powerlab.iotools import parse_dcgm_prometheus

    with pytest.warns(DataQualityWarning, match="dropped 3 sample"):
        df = parse_dcgm_prometheus(_prom("5000", ts=ts))
    assert len(df) == 1 and df["power_w"].tolist() == [301.5]


def test_dmon_counter_minus_one_masked_and_counted():
    from powerlab.iotools import parse_dcgm_dmon

    text = ("#Entity   POWER    TOTEC                  TMPTR\n"
            "ID        W        mJ                     C\n"
            "GPU 0     72.4     1284571093352          33\n"
            "GPU 0     72.5     18446744073709551615   -999\n"
            "GPU 0     72.6     1284571193352          34\n")
    with pytest.warns(DataQualityWarning, match=r"masked 2 impossible.*1 energy_j.*1 temp_gpu_c"):
        df = parse_dcgm_dmon(text, start="2025-07-27 10:00Z", delay_ms=100)
    assert df["energy_j"].isna().tolist() == [False, True, False]
    assert df["temp_gpu_c"].isna().tolist() == [False, True, False]


@pytest.mark.parametrize(("field", "value"), [
    ("time_ms", "-1715960310916"), ("time_ms", "1e20"), ("time_ms", "Infinity"),
    ("time_ms", "NaN"), ("value", "1e308"), ("value", "-999"), ("value", "Infinity"),
])
def test_mlperf_impossible_time_or_power_masked_and_counted(field, value):
    from powerlab.iotools import parse_mlperf_power

    good = ('{"namespace": "", "time_ms": %s, "event_type": "POINT_IN_TIME", '
            '"key": "power_reading", "value": %s, "metadata": ""}')
    lines = [":::MLLOG " + good % (1715960308910 + 2000 * k, 4000 + k) for k in range(4)]
    lines[2] = ":::MLLOG " + (good % (value, 4002) if field == "time_ms"
                              else good % (1715960312910, value))
    with pytest.warns(DataQualityWarning, match="malformed|masked 1 impossible"):
        df = parse_mlperf_power("\n".join(lines) + "\n")
    if field == "time_ms":
        assert df["power_w"].tolist() == [4000.0, 4001.0, 4003.0]
    else:
        assert np.isnan(df["power_w"].iloc[2]) and df["power_w"].notna().sum() == 3


@pytest.mark.parametrize(("col", "value"), [(1, "-999"), (3, "250"), (8, "inf"),
                                           (7, "1e308")])
def test_weather_impossible_values_masked_and_counted(tmp_path, col, value):
    lines = (D / "weather_2025-06-04_excerpt.txt").read_text().splitlines(keepends=True)
    cells = lines[3].rstrip("\n").split(",")
    cells[col] = value
    lines[3] = ",".join(cells) + "\n"
    f = tmp_path / "w.txt"
    f.write_text("".join(lines))
    with pytest.warns(DataQualityWarning, match="impossible value.* masked as missing: 1 "):
        df = read_weather(f)
    good = _quiet(read_weather, D / "weather_2025-06-04_excerpt.txt")
    assert len(df) == len(good)
    assert df.isna().sum().sum() == good.isna().sum().sum() + 1
    assert np.isfinite(df.to_numpy()[~np.isnan(df.to_numpy())]).all()


# --- random damage: a clean error or counted warnings, never a traceback -------------------

@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("seed", range(3))
def test_random_byte_damage_ends_in_a_powerlab_error_or_a_frame(tmp_path, reader, seed):
    from powerlab.exceptions import PowerlabError

    name, read = READERS[reader]
    raw = bytearray((D / name).read_bytes())
    rng = np.random.default_rng(seed)
    outcomes = set()
    for trial in range(25):
        data = bytearray(raw)
        for _ in range(int(rng.integers(1, 4))):
            op = rng.integers(0, 4)
            i = int(rng.integers(0, len(data)))
            if op == 0:
                data[i] = int(rng.integers(0, 256))
            elif op == 1:
                del data[i:i + int(rng.integers(1, 40))]
            elif op == 2:
                data = data[:i]
            else:
                data[i:i] = bytes(rng.choice(list(b"0123456789.,-e []NA\n:x"), 5))
        f = tmp_path / f"{trial}_{name}"
        f.write_bytes(bytes(data))
        try:
            _quiet(read, f)
            outcomes.add("read")
        except PowerlabError as exc:
            assert str(f) in str(exc) or exc.__class__.__name__ == "SchemaError", exc
            outcomes.add("error")
    assert outcomes
