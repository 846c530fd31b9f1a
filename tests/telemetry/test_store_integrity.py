"""Store integrity: checksums, foreign files, no duplicate samples, one writer per
partition, temporary files of killed writers (issue 11, "Store, format v2")."""

from __future__ import annotations

import gzip
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from powerlab.exceptions import DataQualityWarning, StoreError
from powerlab.telemetry.store import list_files, read_store, write_store
from powerlab.telemetry.storefiles import release_locks

from ..conftest import REPO, make_telemetry

MLPERF_RUN = ("mlperf-training-v4.0-smc/smc-ac-power/results/64xSMC-H100-SXM-80GB/gpt3/"
              "power/result_5848-240517221859825376616_2")


def _flip(path: Path, offset: int) -> bytes:
    data = bytearray(path.read_bytes())
    old = bytes(data)
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    return old


# ---------------------------------------------------------------- checksums

@pytest.mark.bad_input("store")
def test_a_flipped_byte_anywhere_is_an_error_naming_the_file(tmp_path):
    df = make_telemetry(1, 2, 300, seed=3)
    files = write_store(df, tmp_path)
    f = files[0]
    exp = read_store(tmp_path)
    size = f.stat().st_size
    offsets = sorted(set(np.linspace(0, size - 1, 80).astype(int)) | set(range(size - 64, size)))
    for off in offsets:
        old = _flip(f, int(off))
        try:
            with pytest.raises(StoreError, match=f.name):
                read_store(tmp_path)
        finally:
            f.write_bytes(old)
    pd.testing.assert_frame_equal(read_store(tmp_path), exp)


@pytest.mark.bad_input("store")
def test_page_checksums_catch_flips_in_the_data_pages(tmp_path):
    """Without the whole-file CRC (a file renamed by hand, or read by another tool), the
    Parquet page checksums still refuse every flip inside a page's data."""
    df = make_telemetry(1, 2, 300, seed=4)
    f = write_store(df, tmp_path)[0]
    plain = f.with_name(f.name.split("-c")[0] + ".parquet")  # no CRC in the name
    f.rename(plain)
    exp = read_store(tmp_path)
    md = pq.read_metadata(plain)
    caught = 0
    for i in range(md.num_columns):
        col = md.row_group(0).column(i)
        start = col.dictionary_page_offset or col.data_page_offset
        end = start + col.total_compressed_size
        # the page data are the chunk's last bytes (after the page header)
        for off in (end - 1, end - 2, end - 5):
            old = _flip(plain, off)
            try:
                with pytest.raises(StoreError, match=plain.name):
                    read_store(tmp_path)
                caught += 1
            finally:
                plain.write_bytes(old)
    assert caught == 3 * md.num_columns
    pd.testing.assert_frame_equal(read_store(tmp_path), exp)
    assert md.row_group(0).column(0).statistics is not None


@pytest.mark.bad_input("store")
def test_foreign_parquet_files_are_skipped_with_a_warning_or_refused(tmp_path, telemetry):
    write_store(telemetry, tmp_path)
    part = list_files(tmp_path)[0].parent
    pq.write_table(pa.table({"x": [1, 2, 3]}), tmp_path / "stray.parquet")
    pq.write_table(pa.table({"x": [1, 2, 3]}), part / "notes.parquet")
    with pytest.warns(DataQualityWarning) as rec:
        back = read_store(tmp_path)
    msgs = " ".join(str(w.message) for w in rec)
    assert "stray.parquet" in msgs and "notes.parquet" in msgs
    pd.testing.assert_frame_equal(back, telemetry)
    assert back["host"].notna().all()
    # named like telemetry but not telemetry: refused, never rows with NA host
    pq.write_table(pa.table({"power_w": [1.0, 2.0]}), part / "part-foreign.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataQualityWarning)
        with pytest.raises(StoreError, match="part-foreign.parquet.*not a powerlab"):
            read_store(tmp_path)


@pytest.mark.bad_input("store")
def test_a_file_in_another_hosts_folder_is_refused(tmp_path, telemetry):
    files = write_store(telemetry, tmp_path)
    a = next(f for f in files if f.parent.name == "node-00")
    b = next(f for f in files if f.parent.name == "node-01")
    shutil.copy(a, b.parent / a.name)
    with pytest.raises(StoreError, match=r"folder of host 'node-01' but holds rows of "
                                         r"'node-00'"):
        read_store(tmp_path)


# ---------------------------------------------------------------- duplicates

def _import(store: Path, *src: Path, extra: tuple[str, ...] = ()) -> str:
    r = subprocess.run([sys.executable, "-m", "powerlab.cli", "import", *map(str, src),
                        "--out", str(store), *extra], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _summary_samples(store: Path) -> int:
    r = subprocess.run([sys.executable, "-m", "powerlab.cli", "summary", str(store)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    return int(last.split(" samples")[0].replace(",", ""))


@pytest.mark.slow
@pytest.mark.bad_input("store")
def test_reimporting_the_same_samples_never_duplicates(tmp_path, shared_data):
    src = shared_data / MLPERF_RUN / "node_8.txt"
    n = len(read_store_of(src, tmp_path / "ref"))
    assert n == 1702
    store = tmp_path / "store"
    _import(store, src)
    other = tmp_path / "elsewhere" / "node_8.txt"            # another path, same node
    other.parent.mkdir()
    shutil.copy(src, other)
    gz = tmp_path / "node_8.txt.gz"                          # compressed
    gz.write_bytes(gzip.compress(src.read_bytes()))
    _import(store, other)
    _import(store, gz)
    _import(store, src, extra=("--tz", "Europe/Berlin"))     # an option MLPerf ignores
    _import(store, src, extra=("--force",))
    assert len(read_store(store)) == n
    assert _summary_samples(store) == n


@pytest.mark.slow
@pytest.mark.bad_input("store")
def test_a_grown_log_adds_only_its_new_samples(tmp_path, shared_data):
    lines = (shared_data / MLPERF_RUN / "node_8.txt").read_text().splitlines(keepends=True)
    log = tmp_path / "logs" / "node_8.txt"
    log.parent.mkdir()
    log.write_text("".join(lines[:800]))
    store = tmp_path / "store"
    _import(store, log)
    first = len(read_store(store))
    assert 700 < first < 800
    log.write_text("".join(lines))                           # the log has grown
    out = _import(store, log)
    back = read_store(store)
    assert len(back) == 1702 and not back.duplicated(["host", "timestamp"]).any()
    assert f"{1702 - first:,} rows" in out                   # only the new rows reported
    assert _summary_samples(store) == 1702


def read_store_of(src: Path, store: Path) -> pd.DataFrame:
    _import(store, src)
    return read_store(store)


def test_write_drops_only_samples_already_in_the_partition(tmp_path):
    a = make_telemetry(1, 2, 40, start="2024-05-17T10:00:00Z")
    write_store(a, tmp_path)
    overlap = make_telemetry(1, 2, 40, start="2024-05-17T10:00:10Z")  # half new
    files = write_store(overlap, tmp_path)
    assert sum(pq.read_metadata(f).num_rows for f in files) == 2 * 20
    back = read_store(tmp_path)
    assert len(back) == 2 * 60
    assert not back.duplicated(["host", "gpu_index", "timestamp"]).any()
    # the rows kept are the first written
    first = back[back["timestamp"] < pd.Timestamp("2024-05-17T10:00:20Z")]
    pd.testing.assert_frame_equal(first.reset_index(drop=True), a)
    assert write_store(a, tmp_path) == []                       # nothing new at all
    # same timestamps on another GPU are other samples
    other = make_telemetry(1, 3, 40, start="2024-05-17T10:00:00Z")
    before = len(read_store(tmp_path))
    write_store(other, tmp_path)
    assert len(read_store(tmp_path)) == before + 40


# ---------------------------------------------------------------- one writer

WRITER = """
import sys, time
from powerlab.telemetry.store import write_store
from tests.conftest import make_telemetry
write_store(make_telemetry(1, 1, 5, start="2024-05-17T10:00:00Z"), sys.argv[1])
print("WROTE", flush=True)
time.sleep(60)
"""


@pytest.mark.bad_input("store")
def test_a_second_writer_of_a_partition_gets_a_clear_error(tmp_path):
    store = tmp_path / "s"
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(store)], cwd=REPO,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "WROTE"
        with pytest.raises(StoreError, match="being written by another process.*pid "
                                             f"{p.pid}"):
            write_store(make_telemetry(1, 1, 5, start="2024-05-17T11:00:00Z"), store)
        # another host (another partition) is free
        other = make_telemetry(1, 1, 5, start="2024-05-17T11:00:00Z")
        other["host"] = "node-99"
        assert len(write_store(other, store)) == 1
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # the lock dies with its process
    assert len(write_store(make_telemetry(1, 1, 5, start="2024-05-17T11:00:00Z"), store)) == 1
    assert len(read_store(store)) == 15
    release_locks()


KILLED = """
import os, sys
import pyarrow.parquet as pq
from powerlab.telemetry.store import write_store
from tests.conftest import make_telemetry
real = pq.write_table
def dying(table, where, **kw):
    real(table, where, **kw)
    os.kill(os.getpid(), 9)       # killed after the temporary file, before the rename
pq.write_table = dying
write_store(make_telemetry(1, 1, 5, start="2024-05-17T10:00:00Z"), sys.argv[1])
"""


def test_temporary_files_of_a_killed_writer_are_removed_by_the_next_write(tmp_path):
    store = tmp_path / "s"
    r = subprocess.run([sys.executable, "-c", KILLED, str(store)], cwd=REPO, check=False)
    assert r.returncode == -9
    tmps = list(store.rglob(".tmp-*"))
    assert len(tmps) == 1 and tmps[0].stat().st_size > 0
    assert read_store(store).empty                      # invisible to readers
    write_store(make_telemetry(1, 1, 5, start="2024-05-17T10:00:00Z"), store)
    assert not list(store.rglob(".tmp-*"))
    assert len(read_store(store)) == 5
    release_locks()


def test_threads_of_one_process_take_turns(tmp_path):
    import threading

    frames = [make_telemetry(1, 2, 20, start=f"2024-05-17T0{i}:00:00Z", seed=i)
              for i in range(4)] * 2                       # each frame written twice
    errors = []

    def run(f):
        try:
            write_store(f, tmp_path)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f,)) for f in frames]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    assert len(read_store(tmp_path)) == 4 * 40               # no duplicates either
    release_locks()
