import os
import threading

import pandas as pd
import pyarrow.parquet as pq
import pytest

from powerlab.exceptions import SchemaError, StoreError
from powerlab.telemetry.schema import conform
from powerlab.telemetry.store import (
    atomic_write_bytes,
    list_files,
    read_store,
    store_summary,
    write_store,
)
from tests.conftest import make_telemetry


def test_round_trip_exact_with_partitions(tmp_path, telemetry):
    files = write_store(telemetry, tmp_path)
    # crosses midnight: 2 dates x 2 hosts
    dirs = sorted({(p.parent.parent.name, p.parent.name) for p in files})
    assert dirs == [("2024-05-17", "node-00"), ("2024-05-17", "node-01"),
                    ("2024-05-18", "node-00"), ("2024-05-18", "node-01")]
    back = read_store(tmp_path)
    pd.testing.assert_frame_equal(back, telemetry)


def test_appends_are_new_files_and_never_overwrite(tmp_path):
    a = make_telemetry(1, 1, 10, start="2024-05-17T10:00:00Z")
    b = make_telemetry(1, 1, 10, start="2024-05-17T11:00:00Z")
    fa = write_store(a, tmp_path)
    fb = write_store(b, tmp_path)
    assert set(fa).isdisjoint(fb)
    back = read_store(tmp_path)
    assert len(back) == 20
    assert back["timestamp"].is_monotonic_increasing


def test_time_and_host_filters_prune_files(tmp_path, telemetry):
    write_store(telemetry, tmp_path)
    start = pd.Timestamp("2024-05-18T00:00:00Z")
    assert len(list_files(tmp_path, start=start)) == 2
    got = read_store(tmp_path, start=start, end=start + pd.Timedelta(seconds=5),
                     hosts=["node-01"])
    exp = telemetry[(telemetry["timestamp"] >= start)
                    & (telemetry["timestamp"] < start + pd.Timedelta(seconds=5))
                    & (telemetry["host"] == "node-01")].reset_index(drop=True)
    assert len(got) == 4 * 10
    pd.testing.assert_frame_equal(got, exp)
    cols = read_store(tmp_path, columns=["power_w"])
    assert list(cols.columns) == ["timestamp", "host", "scope", "gpu_index", "gpu_uuid",
                                  "power_w"]


def test_naive_bounds_and_unknown_columns_refused(tmp_path, telemetry):
    write_store(telemetry, tmp_path)
    with pytest.raises(StoreError, match="time zone"):
        read_store(tmp_path, start="2024-05-18 00:00")
    with pytest.raises(StoreError, match="unknown column"):
        read_store(tmp_path, columns=["power_mw"])
    with pytest.raises(StoreError, match="no store"):
        read_store(tmp_path / "nope")


def test_invalid_frame_writes_nothing(tmp_path, telemetry):
    bad = telemetry.copy()
    bad.loc[0, "power_w"] = 1e6
    with pytest.raises(SchemaError):
        write_store(bad, tmp_path)
    assert not any(tmp_path.rglob("*.parquet"))


def test_hostile_host_names_are_escaped(tmp_path):
    df = make_telemetry(1, 1, 5)
    df["host"] = "../evil host/ä"
    files = write_store(df, tmp_path)
    assert all(tmp_path in p.parents for p in files)
    back = read_store(tmp_path, hosts=["../evil host/ä"])
    assert (back["host"] == "../evil host/ä").all() and len(back) == 5


def test_leftover_temporary_files_are_ignored(tmp_path, telemetry):
    files = write_store(telemetry, tmp_path)
    junk = files[0].parent / ".tmp-deadbeef-part-x.parquet"
    junk.write_bytes(b"PAR1 truncated")
    pd.testing.assert_frame_equal(read_store(tmp_path), telemetry)


def test_failed_write_leaves_old_file_and_no_temp(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")

    def boom(tmp):
        with open(tmp, "wb") as fh:
            fh.write(b"partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(StoreError, match="No space left"):
        atomic_write_bytes(target, boom)
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_corrupt_visible_file_is_a_clear_error(tmp_path, telemetry):
    files = write_store(telemetry, tmp_path)
    files[0].write_bytes(b"not parquet")
    with pytest.raises(StoreError, match=files[0].name):
        read_store(tmp_path)


def test_concurrent_writers_do_not_clash(tmp_path):
    frames = [make_telemetry(1, 2, 20, start=f"2024-05-17T0{i}:00:00Z", seed=i)
              for i in range(4)]
    threads = [threading.Thread(target=write_store, args=(f, tmp_path)) for f in frames]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(read_store(tmp_path)) == 4 * 40
    for p in tmp_path.rglob("*.parquet"):
        pq.read_metadata(p)


def test_store_summary(tmp_path, telemetry):
    write_store(telemetry, tmp_path)
    s = store_summary(tmp_path)
    assert list(s["host"]) == ["node-00", "node-01"]
    assert (s["n_gpus"] == 4).all() and (s["samples"] == 200).all()


def test_host_names_beyond_latin1_round_trip_through_the_host_filter(tmp_path):
    # code points above U+00FF used to be escaped with more than two hex digits and
    # decoded wrongly, so hosts= found nothing (and "œ" and "\x153" shared one folder)
    for i, h in enumerate(["nœud-1", "\x153", "ノード"]):
        df = make_telemetry(1, 1, 4, start=f"2024-05-17T1{i}:00:00Z")
        df["host"] = h
        write_store(df, tmp_path)
        back = read_store(tmp_path, hosts=[h])
        assert len(back) == 4 and set(back["host"]) == {h}
    assert len({p.parent for p in list_files(tmp_path)}) == 3


def test_single_host_name_as_string(tmp_path, telemetry):
    write_store(telemetry, tmp_path)
    one = read_store(tmp_path, hosts="node-01")
    assert len(one) == (telemetry["host"] == "node-01").sum() > 0
    assert set(one["host"]) == {"node-01"}


def test_optional_column_present_in_only_some_files(tmp_path):
    """Collector files carry power_avg_w, imported files may not: asking for it reads
    every file, with NA where a file lacks it."""
    a = make_telemetry(1, 1, 5, start="2024-05-17T10:00:00Z")
    b = make_telemetry(1, 1, 5, start="2024-05-17T11:00:00Z")
    b["power_avg_w"] = 250.0
    write_store(a, tmp_path)
    write_store(b, tmp_path)
    got = read_store(tmp_path, columns=["power_w", "power_avg_w"])
    assert len(got) == 10 and str(got["power_avg_w"].dtype) == "float64"
    assert got["power_avg_w"].isna().sum() == 5 and (got["power_avg_w"].dropna() == 250).all()
    none = read_store(tmp_path, columns=["fan_speed_pct"])  # in no file at all
    assert len(none) == 10 and none["fan_speed_pct"].isna().all()


def test_files_written_out_of_order_read_back_sorted(tmp_path):
    """read_store skips its sort when the files already come sorted; when they do not
    (later samples written first, several dates, node and GPU rows), it sorts."""
    late = make_telemetry(2, 3, 30, start="2024-05-17T12:00:00Z", seed=1)
    early = make_telemetry(2, 3, 30, start="2024-05-17T23:59:55Z", seed=2)  # 2 dates
    node = make_telemetry(1, 1, 30, start="2024-05-17T06:00:00Z", seed=3)
    node["scope"], node["gpu_index"], node["gpu_uuid"] = "node", pd.NA, pd.NA
    for part in (late, early, node):
        write_store(part, tmp_path)
    exp = conform(pd.concat([late, early, node], ignore_index=True), sort=False)
    exp = exp.sort_values(["host", "scope", "gpu_index", "timestamp"], kind="stable",
                          na_position="first").reset_index(drop=True)
    back = read_store(tmp_path)
    pd.testing.assert_frame_equal(back, exp)
    few = read_store(tmp_path, columns=["power_w"])
    pd.testing.assert_frame_equal(few, exp[list(few.columns)])


def _plain_read(root, start, end, columns):
    """What read_store must return, the slow plain way: every file whole through
    pyarrow, one concatenated frame conformed (which sorts it), then the time filter and
    the projection in pandas."""
    frames = [pq.read_table(f).to_pandas() for f in list_files(root)]
    df = conform(pd.concat(frames, ignore_index=True))
    df = df[(df["timestamp"] >= start) & (df["timestamp"] < end)].reset_index(drop=True)
    keep = ["timestamp", "host", "scope", "gpu_index", "gpu_uuid", *columns]
    return df[[c for c in df.columns if c in keep]]


@pytest.mark.parametrize("case", ["sorted", "appended", "appended-take", "unsorted"])
def test_fast_read_equals_a_plain_read(tmp_path, monkeypatch, case):
    """Several partitions (2 dates x 3 hosts x 2 GPUs), a time filter cutting into both
    dates and a projection that includes an optional column held by some files only:
    exactly the frame (values, dtypes, order) of a plain whole-file read, whether the
    files come sorted (one date, one file per host: no reordering), were appended in time
    order (2 files in some partitions: each device's runs interleaved, as Arrow slices or
    by one take) or not (node rows, two files of one partition whose samples alternate: full sort)."""
    import powerlab.telemetry.store_order as order_mod

    a = make_telemetry(3, 2, 40, start="2024-05-17T23:59:45Z", seed=5)
    b = make_telemetry(3, 2, 40, start="2024-05-18T00:00:30Z", seed=6)
    b["power_avg_w"] = b["power_w"] - 1.0
    parts = {"sorted": [b], "appended": [a, b],
             "appended-take": [a, b]}.get(case)
    if case == "unsorted":
        node = make_telemetry(1, 1, 40, start="2024-05-17T23:59:30Z", seed=7)
        node["scope"], node["gpu_index"], node["gpu_uuid"] = "node", pd.NA, pd.NA
        parts = [b, node, a.iloc[1::2], a.iloc[::2]]  # files of a overlap in time
    for p in parts:
        write_store(p, tmp_path)
    if case == "appended-take":
        monkeypatch.setattr(order_mod, "_MAX_SLICES", 1)
    seen = []
    real = order_mod._segments
    monkeypatch.setattr(order_mod, "_segments", lambda *x: seen.append(real(*x)) or seen[-1])
    start, end = pd.Timestamp("2024-05-17T23:59:55Z"), pd.Timestamp("2024-05-18T00:00:50Z")
    for cols in (None, ["power_w", "power_avg_w", "throttle_reasons"], []):
        got = read_store(tmp_path, start=start, end=end, columns=cols)
        exp = _plain_read(tmp_path, start, end, cols if cols is not None else
                          [c for c in got.columns])
        assert 0 < len(got) < len(a) + len(b)
        pd.testing.assert_frame_equal(got, exp, check_exact=True)
    how = ["sorted" if s == [] else "unsorted" if s is None else "appended" for s in seen]
    assert how == [case.split("-")[0]] * 3
    whole = read_store(tmp_path)
    pd.testing.assert_frame_equal(
        whole, _plain_read(tmp_path, pd.Timestamp.min.tz_localize("UTC"),
                           pd.Timestamp.max.tz_localize("UTC"), list(whole.columns)),
        check_exact=True)
