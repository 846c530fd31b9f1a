"""Tests of powerlab.iotools.nvidia_smi on constructed excerpts and the real H100 traces."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import parse_nvidia_smi, read_nvidia_smi
from powerlab.telemetry import schema

from ..conftest import SHARED_DATA, TEST_DATA

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


def test_noheader_nounits_infers_gpu_count_and_drops_partial_query():
    fields = "timestamp,power.draw,utilization.gpu,memory.used"
    with pytest.warns(DataQualityWarning, match=r"dropped 2 of 14 rows.*line 13"):
        df = read_nvidia_smi(D / "nvidia_smi_noheader_nounits.csv", tz="UTC", fields=fields)
    assert sorted(df["gpu_index"].unique().tolist()) == [0, 1, 2]
    # the trailing query has 2 of 3 rows: which GPU is missing is not proven, so dropped
    assert df.groupby("gpu_index").size().tolist() == [4, 4, 4]
    g0 = df[df["gpu_index"] == 0]
    assert g0["power_w"].tolist() == [72.36, 72.41, 302.18, 455.77]
    assert g0["memory_used_bytes"].iloc[-1] == 6100 * 2 ** 20


def test_noheader_needs_fields():
    with pytest.raises(ParseError, match="fields="):
        read_nvidia_smi(D / "nvidia_smi_noheader_nounits.csv", tz="UTC")


@pytest.mark.bad_input("readers")
def test_n_gpus_given_is_used_and_a_wrong_one_is_caught():
    fields = ["timestamp", "power.draw", "utilization.gpu", "memory.used"]
    path = D / "nvidia_smi_noheader_nounits.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)   # the partial last query
        given = read_nvidia_smi(path, tz="UTC", fields=fields, n_gpus=3)
        inferred = read_nvidia_smi(path, tz="UTC", fields=fields)
    pd.testing.assert_frame_equal(given, inferred)
    # the timestamps show 3-row queries: 1 or 6 GPUs per query is refused, not applied
    for wrong in (1, 6):
        with pytest.raises(ParseError, match=f"n_gpus={wrong} .* queries of 3 rows"):
            read_nvidia_smi(path, tz="UTC", fields=fields, n_gpus=wrong)


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
    # 13 queries hold two identical adjacent lines (a duplicated line plus a lost one
    # would look the same) and 38 are split by a GPU answering > 80 ms late (their parts
    # look like the remains of damaged queries): their 408 rows are dropped, and said so
    with pytest.warns(DataQualityWarning, match=r"dropped 408 of 54,432 rows.* 13 holding "
                      r"two identical lines") as rec:
        df = read_nvidia_smi(CKPT100, tz="America/Los_Angeles", host="h100-node")
    assert len(rec) == 1
    return df


def test_real_ckpt100_counts_units_and_gpu_assignment(ckpt100):
    df = ckpt100
    assert len(df) == 54_432 - 408
    assert df.groupby("gpu_index").size().to_dict() == {g: 6_753 for g in range(8)}
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


# --- logs without a GPU field: a row's GPU only where the timestamps prove it --------------
# Each row carries its own row number k (in memory.used), and row k of the undamaged log is
# GPU k mod n: after deleting, duplicating or moving rows, every row the reader keeps must
# still carry GPU k mod n, and every other row must be counted in the warning.

HEAD = "timestamp, power.draw [W], utilization.gpu [%], memory.used [MiB]\n"


def _synthetic_rows(n_gpus: int, n_queries: int, seed: int, stall_every: int = 7) -> list[str]:
    """An nvidia-smi log body of ``n_queries`` queries: rows 0-3 ms apart within a query,
    a 100-102 ms sleep between queries, and every ``stall_every``-th query with one GPU
    answering 100-900 ms late (as in the real H100 traces)."""
    rng = np.random.default_rng(seed)
    t = np.datetime64("2025-07-27T00:00:00.000", "ms")
    rows = []
    for q in range(n_queries):
        stall_at = rng.integers(1, n_gpus) if (n_gpus > 1 and q % stall_every == 3) else -1
        for g in range(n_gpus):
            if g:
                t += np.timedelta64(int(rng.integers(0, 4)), "ms")
            if g == stall_at:
                t += np.timedelta64(int(rng.integers(100, 900)), "ms")
            k = len(rows)
            stamp = str(t).replace("-", "/").replace("T", " ")
            rows.append(f"{stamp}, {100 + g}.00 W, {g} %, {k} MiB\n")
        t += np.timedelta64(int(rng.integers(100, 103)), "ms")
    return rows


def _real_rows(n: int) -> list[str]:
    """The first ``n`` rows of the real 8-GPU trace, memory.used replaced by the row number."""
    if not CKPT100.is_file():
        pytest.skip(f"real nvidia-smi traces not found at {CKPT100}")
    with open(CKPT100, encoding="utf-8") as f:
        f.readline()
        lines = [next(f) for _ in range(n)]
    return [ln.rsplit(",", 1)[0] + f", {k} MiB\n" for k, ln in enumerate(lines)]


def _check_attribution(rows: list[str], n_gpus: int, **kw) -> tuple[pd.DataFrame, int]:
    """Parse ``rows``; assert every kept row has GPU (row number) mod n_gpus and that the
    rows not kept are the number the warning reports.  Returns (frame, dropped)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DataQualityWarning)
        df = parse_nvidia_smi(HEAD + "".join(rows), tz="UTC", **kw)
    k = (df["memory_used_bytes"] / 2 ** 20).round().astype(int).to_numpy()
    bad = df["gpu_index"].to_numpy(dtype=int) != k % n_gpus
    assert not bad.any(), f"{bad.sum()} rows mislabelled, e.g. row {k[bad][:5]}"
    dropped = len(rows) - len(df)
    msgs = [str(w.message) for w in caught if issubclass(w.category, DataQualityWarning)]
    if dropped:
        assert len(msgs) == 1 and f"dropped {dropped:,} of {len(rows):,} rows" in msgs[0], msgs
    else:
        assert not msgs, msgs
    return df, dropped


def _rows(source: str, seed: int) -> list[str]:
    return _synthetic_rows(8, 400, seed=seed) if source == "synthetic" else _real_rows(4_000)


def _kept(rows: list[str], n_gpus: int = 8) -> set[int]:
    df, _ = _check_attribution(rows, n_gpus)
    return set((df["memory_used_bytes"] / 2 ** 20).round().astype(int).tolist())


@pytest.mark.parametrize("source", ["synthetic", "real"])
def test_undamaged_log_drops_only_queries_split_by_a_late_gpu(source):
    rows = _rows(source, 1)
    kept = _kept(rows)
    lost = sorted(set(range(len(rows))) - kept)
    # what is not kept are whole queries, each with one step longer than 80 ms inside
    assert len(lost) % 8 == 0 and {k // 8 for k in lost} == {k // 8 for k in lost[::8]}
    t = pd.to_datetime([r[:23] for r in rows], format="%Y/%m/%d %H:%M:%S.%f")
    step = np.diff(t.as_unit("ns").asi8.reshape(-1, 8), axis=1).max(axis=1)
    split = np.flatnonzero(step >= 80e6)
    assert sorted({k // 8 for k in lost}) == split.tolist()
    if source == "synthetic":
        assert len(split) == len(range(3, 400, 7))   # one late GPU every 7th query


def _already_dropped(base: set[int], row: int) -> bool:
    q = row // 8
    return not set(range(8 * q, 8 * q + 8)) <= base


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("source", ["synthetic", "real"])
@pytest.mark.parametrize("where", [0, 1, 7, 8, 13, 29, 30, 31, 1003, 2571])
def test_deleted_row_drops_its_query_only(source, where):
    rows = _rows(source, 2)
    base = _kept(rows)
    base_drop = len(rows) - len(base)
    del rows[where]
    _, dropped = _check_attribution(rows, 8)
    # the 7 other rows of the damaged query; every later row kept on its own GPU
    assert dropped == (base_drop - 1 if _already_dropped(base, where) else base_drop + 7)


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("source", ["synthetic", "real"])
@pytest.mark.parametrize("where", [0, 5, 7, 8, 30, 2001])
def test_duplicated_row_drops_its_query_only(source, where):
    rows = _rows(source, 3)
    base = _kept(rows)
    base_drop = len(rows) - len(base)
    rows.insert(where + 1, rows[where])
    _, dropped = _check_attribution(rows, 8)
    assert dropped == (base_drop + 1 if _already_dropped(base, where) else base_drop + 9)


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("source", ["synthetic", "real"])
@pytest.mark.parametrize(("src", "dst"), [(3, 40), (40, 3), (7, 9), (9, 7), (100, 2500),
                                          (15, 16), (0, 1)])
def test_moved_row_never_lands_on_another_gpu(source, src, dst):
    rows = _rows(source, 4)
    base = _kept(rows)
    if rows[src][:23] == rows[dst][:23]:
        pytest.skip("same timestamp: no reader can tell such a swap (documented limit)")
    rows.insert(dst, rows.pop(src))
    _, dropped = _check_attribution(rows, 8)
    assert len(rows) - len(base) < dropped <= len(rows) - len(base) + 3 * 8


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_gpus", [2, 3, 8])
def test_random_damage_never_mislabels(seed, n_gpus):
    rng = np.random.default_rng(100 + seed)
    rows = _synthetic_rows(n_gpus, 500, seed=seed)
    for _ in range(12):
        i = int(rng.integers(0, len(rows) - 1))
        op = rng.integers(0, 3)
        if op == 0:
            del rows[i]
        elif op == 1:
            rows.insert(i + 1, rows[i])
        else:
            j = int(rng.integers(0, len(rows) - 1))
            if rows[i][:23] != rows[j][:23]:
                rows.insert(j, rows.pop(i))
    _, dropped = _check_attribution(rows, n_gpus)
    assert 0 < dropped < len(rows) // 4


@pytest.mark.bad_input("readers")
@pytest.mark.parametrize("wrong", [16, 4, 7, 1])
def test_wrong_n_gpus_on_real_excerpt_is_an_error(wrong):
    text = HEAD + "".join(_real_rows(4_000))
    with pytest.raises(ParseError, match=f"n_gpus={wrong} .* queries of 8 rows"):
        parse_nvidia_smi(text, tz="UTC", n_gpus=wrong)
    with pytest.warns(DataQualityWarning, match="dropped 48 of 4,000"):   # 6 late GPUs
        assert len(parse_nvidia_smi(text, tz="UTC", n_gpus=8)) == 4_000 - 48


@pytest.mark.bad_input("readers")
def test_real_ckpt100_one_row_deleted_or_n_gpus_16():
    if not CKPT100.is_file():
        pytest.skip(f"real nvidia-smi traces not found at {CKPT100}")
    raw = CKPT100.read_bytes().splitlines(keepends=True)
    with pytest.raises(ParseError, match="n_gpus=16"):
        parse_nvidia_smi(b"".join(raw), tz="UTC", n_gpus=16)
    del raw[1 + 20_001]                        # one row deep in the file
    with pytest.warns(DataQualityWarning, match=r"dropped 415 of 54,431 rows"):
        df = parse_nvidia_smi(b"".join(raw), tz="UTC")   # 408 as undamaged + 7
    assert len(df) == 54_431 - 415
    sizes = df.groupby("gpu_index").size()
    assert sizes.to_dict() == {g: 6_752 for g in range(8)}


@pytest.mark.bad_input("readers")
def test_no_query_structure_is_an_error_not_a_guess():
    # steps spread evenly from 0 to 150 ms: neither rows of a query nor sleeps between
    rng = np.random.default_rng(5)
    t = np.datetime64("2025-07-27T00:00:00.000", "ms")
    lines = []
    for k in range(400):
        t += np.timedelta64(int(rng.integers(0, 150)), "ms")
        lines.append(str(t).replace("-", "/").replace("T", " ") + f", 1.0 W, 0 %, {k} MiB\n")
    with pytest.raises(ParseError, match="add 'index'"):
        parse_nvidia_smi(HEAD + "".join(lines), tz="UTC")


@pytest.mark.bad_input("readers")
def test_impossible_date_is_a_parse_error_naming_the_line():
    text = ("timestamp, index, power.draw [W]\n"
            "2025/02/28 00:00:00.000, 0, 10.0 W\n"
            "2025/02/29 00:00:00.000, 0, 11.0 W\n")
    with pytest.raises(ParseError, match="2025/02/29") as exc:
        parse_nvidia_smi(text, tz="UTC")
    assert exc.value.line == 3


@pytest.mark.bad_input("readers")
def test_pci_bus_id_names_the_gpu_whatever_rows_are_lost_or_moved():
    # GPUs numbered in PCI bus order; rows deleted, duplicated-free and out of order:
    # every row keeps the GPU its bus id names, no timestamp structure needed
    bus = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0"]
    rows = []
    for q in range(5):
        for g in range(3):
            rows.append(f"2025/07/27 00:00:{q:02d}.{g:03d}, {bus[g]}, {100 * g + q}.0 W\n")
    del rows[4]                                   # GPU 1 of query 1
    rows[7], rows[2] = rows[2], rows[7]           # two rows of other queries swapped
    text = "timestamp, pci.bus_id, power.draw [W]\n" + "".join(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataQualityWarning)
        df = parse_nvidia_smi(text, tz="UTC")
    assert len(df) == 14
    assert ((df["power_w"] // 100).astype(int) == df["gpu_index"].astype(int)).all()
    with pytest.raises(ParseError, match="PCI bus id") as exc:
        parse_nvidia_smi(text.replace(bus[2], "[N/A]", 1), tz="UTC")
    assert exc.value.column == "pci.bus_id"


@pytest.mark.bad_input("readers")
def test_logs_appended_with_a_header_between_keep_their_own_queries():
    # a logger killed mid-query, restarted with >>: the partial query before the repeated
    # header is dropped; the next run's queries start again at GPU 0
    rows = _synthetic_rows(8, 30, seed=9, stall_every=1000)
    first, second = rows[:8 * 12 + 5], rows[8 * 12 + 8:]
    late = len(rows) - len(_kept(rows))             # queries split by a late GPU (query 3)
    text = HEAD + "".join(first) + HEAD + "".join(second)
    with pytest.warns(DataQualityWarning, match=f"dropped {late + 5} of"):
        df = parse_nvidia_smi(text, tz="UTC")
    k = (df["memory_used_bytes"] / 2 ** 20).round().astype(int)
    assert (df["gpu_index"].astype(int) == k % 8).all()
    assert len(df) == len(first) + len(second) - 5 - late


@pytest.mark.parametrize("blank", ["", "\n", "\r\n"])
def test_error_line_numbers_count_repeated_headers_and_empty_lines(blank):
    text = ("timestamp, index, power.draw [W]\n" + blank +
            "2025/07/27 00:00:00.000, 0, 10.0 W\n"
            "timestamp, index, power.draw [W]\n" + blank +
            "2025/07/27 00:00:01.000, 0, 11.0 W\n"
            "2025/07/27 00:00:02.000, 0, 1x.0 W\n")
    with pytest.raises(ParseError, match="1x.0") as exc:
        parse_nvidia_smi(text, tz="UTC")
    assert exc.value.line == 5 + (2 if blank else 0)


@pytest.mark.bad_input("readers")
def test_queries_changing_size_are_an_error_not_relabelled():
    # 8 GPUs, then one drops out of every query: which one is not in the data
    rows = _synthetic_rows(8, 60, seed=11, stall_every=1000)
    rows = rows[:8 * 30] + [r for i, r in enumerate(rows[8 * 30:]) if i % 8 != 3]
    with pytest.raises(ParseError, match="queries change size"):
        parse_nvidia_smi(HEAD + "".join(rows), tz="UTC")


def _parse_both_ways(monkeypatch, text: str, **kw):
    """``parse_nvidia_smi(text)`` on one thread and on several (thresholds set to 0):
    the frames, or the errors, and the warnings of the two runs."""
    from powerlab.iotools import nvidia_smi

    out = []
    for parallel in (False, True):
        monkeypatch.setattr(nvidia_smi, "_PARALLEL_ROWS", 0 if parallel else 10 ** 12)
        monkeypatch.setattr(nvidia_smi, "_PARALLEL_BYTES", 0 if parallel else 10 ** 12)
        monkeypatch.setattr(nvidia_smi, "_workers", lambda: 4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DataQualityWarning)
            try:
                res = parse_nvidia_smi(text, tz="UTC", **kw)
            except ParseError as exc:
                res = exc
        out.append((res, [str(w.message) for w in caught]))
    return out


def test_threaded_conversion_gives_the_same_frame_warnings_and_first_error(monkeypatch):
    # the same frame and warning, without a GPU field (attribution by row order)
    rows = _synthetic_rows(4, 60, seed=3)
    del rows[41]
    (seq, w_seq), (par, w_par) = _parse_both_ways(monkeypatch, HEAD + "".join(rows))
    assert 0 < len(seq) < len(rows) and len(seq) % 4 == 0
    pd.testing.assert_frame_equal(seq, par)
    assert w_seq == w_par and len(w_seq) == 1 and "dropped" in w_seq[0]
    # bad cells in two fields: both runs name the first field in the sequential order
    # (timestamp before power.draw), whichever thread finishes first
    lines = "".join(rows[:30]).splitlines(keepends=True)
    lines[20] = lines[20].replace(" W,", " Q,")                  # power.draw, line 22
    lines[25] = "2025/07/27 00:00:99.000" + lines[25][23:]      # timestamp, line 27
    (e_seq, _), (e_par, _) = _parse_both_ways(monkeypatch, HEAD + "".join(lines))
    assert isinstance(e_seq, ParseError) and isinstance(e_par, ParseError)
    assert str(e_seq) == str(e_par) and e_par.column == "timestamp" and e_par.line == 27
    # a malformed row found by pyarrow's threaded CSV reader still names its line
    lines = "".join(rows[:30]).splitlines(keepends=True)
    lines[17] = lines[17].rstrip("\n") + ", 5\n"
    (e_seq, _), (e_par, _) = _parse_both_ways(monkeypatch, HEAD + "".join(lines))
    assert str(e_seq) == str(e_par) and e_par.line == 19 and "5 field(s)" in str(e_par)


@pytest.mark.parametrize("cells, unit", [
    ([" 72.5 W", " 1e3 W", " nan W", " +5 W", " .5 W"], "W"), ([" inf", " 5."], None),
    ([" NA"], None), ([" N/A"], None), ([" -"], None), ([" [N/A]", " 1 W"], "W"),
    (["72.5 W"], "W"), (["  72.5 W"], "W"), ([" 72.5"], "W"), ([" 1 W", " 2"], "W"),
    ([" W"], "W"), ([" "], None), ([" 72.5  W"], "W"), ([" 0x1F"], None),
])
def test_fast_float_cells_agree_with_the_general_path(cells, unit):
    """The one-slice-one-cast path takes only cells it reads exactly as the general
    path does (values equal, NaN where NaN); everything else goes the general way."""
    import pyarrow as pa

    from powerlab.iotools import _common

    arr = pa.array(cells)
    fast = _common._float_cells_fast(arr, " " + unit if unit else "")
    try:
        general = _common.strings_to_float(arr, unit=unit, path=None, column="c",
                                           row_line=lambda r: r + 2, expected="a number",
                                           allow_empty=False)
    except ParseError:
        general = None
    if fast is not None:
        assert general is not None
        np.testing.assert_array_equal(fast, general)
    # the cases the fast path must leave alone: sentinels, other spacing, no unit, errors
    takes = all(c.startswith(" ") and not c.startswith("  ") and c.strip() not in
                ("NA", "N/A", "-", "", "W") and not c.strip().startswith(("[", "0x"))
                and c.endswith(" " + unit if unit else "") and "  " not in c for c in cells)
    assert (fast is not None) == takes


def test_threads_are_counted_when_a_file_is_read_not_at_import(monkeypatch):
    """Issue 26 §6: the cores a parse may use follow the process's CPU affinity at the
    time of the call (a container or ``taskset`` may change it after import)."""
    import os

    from powerlab.iotools import nvidia_smi

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert nvidia_smi._workers() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert nvidia_smi._workers() == nvidia_smi._MAX_WORKERS == 4
