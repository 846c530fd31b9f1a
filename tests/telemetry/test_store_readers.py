"""Store format 2: the Parquet tools analysts use read exactly the telemetry.

pandas, pyarrow datasets (hive partitioning), DuckDB and polars are pointed at an imported
store and at a collector store (with its event and device side tables and the import
records); each must return the rows and values :func:`read_store` returns, nothing more.
"""

# ruff: noqa: F811  (pytest fixtures imported from tests/support/fake_nvml_util.py)

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from powerlab.collect.collector import Collector, read_devices, read_events
from powerlab.exceptions import StoreError
from powerlab.telemetry.store import read_store, write_store
from powerlab.telemetry.store_upgrade import upgrade_store
from powerlab.telemetry.storefiles import store_format

from ..conftest import REPO, make_telemetry
from ..support.fake_nvml_util import fake_libdir, fake_nvml  # noqa: F401  (fixtures)

KEY = ["host", "scope", "gpu_index", "timestamp"]


def _imported_store(tmp_path):
    store = tmp_path / "imported"
    src = REPO / "data" / "mlperf-gpt3-64node" / "power"
    files = sorted(src.glob("node_*.txt*"))[:3]
    r = subprocess.run([sys.executable, "-m", "powerlab.cli", "import", *map(str, files),
                        "--out", str(store)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert any((store / "_imports").iterdir())
    return store


def _collector_store(tmp_path, fake_nvml):
    fake_nvml({"gpus": 2, "gpu*.power_mw": "0:150000 0.2:420000 @0.4"})
    store = tmp_path / "collected"
    with Collector(store, interval_s=0.02, flush_interval_s=0.2, host="node-a"):
        time.sleep(0.6)
    assert len(read_events(store)) >= 2 and len(read_devices(store)) == 2
    return store


def _same(got: pd.DataFrame, exp: pd.DataFrame, *, dtypes: bool) -> None:
    assert len(got) == len(exp) and sorted(got.columns) == sorted(exp.columns)
    got = got[list(exp.columns)].sort_values(KEY).reset_index(drop=True)
    exp = exp.sort_values(KEY).reset_index(drop=True)
    if dtypes:
        pd.testing.assert_frame_equal(got, exp)
        return
    for c in exp.columns:
        if isinstance(exp[c].dtype, pd.DatetimeTZDtype):
            assert (pd.to_datetime(got[c], utc=True).astype("datetime64[ns, UTC]")
                    == exp[c]).all()
        elif exp[c].dtype.kind == "f":
            np.testing.assert_array_equal(got[c].astype("float64").to_numpy(),
                                          exp[c].to_numpy(), err_msg=c)
        else:
            a = got[c].astype(object).where(got[c].notna(), None).tolist()
            b = exp[c].astype(object).where(exp[c].notna(), None).tolist()
            assert [None if v is None else str(v) for v in a] == \
                   [None if v is None else str(v) for v in b], c


def _check_all_readers(store):
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds

    exp = read_store(store)
    assert len(exp) > 0 and exp["host"].notna().all()
    _same(pd.read_parquet(store), exp, dtypes=True)                 # canonical dtypes
    _same(pd.read_parquet(store, partitioning=None), exp, dtypes=True)
    _same(ds.dataset(store, partitioning="hive").to_table().to_pandas(), exp, dtypes=True)
    glob = f"{store}/**/*.parquet"
    _same(duckdb.sql(f"SELECT * FROM read_parquet('{glob}', hive_partitioning=true)").df(),
          exp, dtypes=False)
    _same(pl.scan_parquet(glob, hive_partitioning=True).collect().to_pandas(), exp,
          dtypes=False)


def test_four_readers_read_an_imported_store_exactly(tmp_path):
    _check_all_readers(_imported_store(tmp_path))


def test_four_readers_read_a_collector_store_exactly(tmp_path, fake_nvml):
    store = _collector_store(tmp_path, fake_nvml)
    assert store_format(store) == 2
    assert not any(p.suffix == ".parquet" for p in (store / "_meta").rglob("*"))
    _check_all_readers(store)


def _write_v1(df: pd.DataFrame, root) -> None:
    """A format-1 store as powerlab 0.x wrote it: date=/host= folders, host inside the
    files, side tables in events/."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    day = df["timestamp"].dt.strftime("%Y-%m-%d")
    for (d, h), part in df.groupby([day, df["host"]]):
        folder = root / f"date={d}" / f"host={h}"
        folder.mkdir(parents=True)
        pq.write_table(pa.Table.from_pandas(part.reset_index(drop=True),
                                            preserve_index=False),
                       folder / "part-20240517T000000Z-abc.parquet")
    (root / "events").mkdir()
    ev = pd.DataFrame({"timestamp": pd.to_datetime(["2024-05-17T10:00Z"]), "host": ["h"],
                       "kind": ["start"]})
    pq.write_table(pa.Table.from_pandas(ev), root / "events" / "events-1-x.parquet")


def test_v1_store_is_read_and_upgraded(tmp_path, telemetry):
    store = tmp_path / "v1"
    _write_v1(telemetry, store)
    assert store_format(store) == 1
    pd.testing.assert_frame_equal(read_store(store), telemetry)
    with pytest.raises(StoreError, match="store upgrade"):
        write_store(make_telemetry(1, 1, 3, start="2024-06-01T00:00:00Z"), store)
    r = subprocess.run([sys.executable, "-m", "powerlab.cli", "store", "upgrade", str(store)],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "400 rows" in r.stdout
    assert store_format(store) == 2 and not any(store.glob("date=*"))
    pd.testing.assert_frame_equal(read_store(store), telemetry)
    assert list(read_events(store)["kind"]) == ["start"]
    _check_all_readers(store)
    assert upgrade_store(store)["files"] == 0  # idempotent
    write_store(make_telemetry(1, 1, 3, start="2024-06-01T00:00:00Z"), store)
    assert len(read_store(store)) == len(telemetry) + 3


@pytest.mark.slow
@pytest.mark.bad_input("store")
@pytest.mark.parametrize("args, msg", [
    (["store", "upgrade"], "STORE"),
    (["store", "upgrade", "/nonexistent/s"], "no store"),
    (["store", "frobnicate", "x"], "invalid choice"),
])
def test_store_cli_bad_invocations(args, msg, tmp_path):
    r = subprocess.run([sys.executable, "-m", "powerlab.cli", *args], capture_output=True, check=False,
                       text=True)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and msg in r.stderr


@pytest.mark.bad_input("store")
def test_upgrade_of_a_folder_without_a_store_is_refused(tmp_path):
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(StoreError, match="holds no powerlab store"):
        upgrade_store(tmp_path)


HOLDER = """
import sys, time
import pandas as pd
from powerlab.telemetry.store import write_store
from tests.conftest import make_telemetry
df = make_telemetry(1, 1, 3, start=(pd.Timestamp.now("UTC") - pd.Timedelta(seconds=5)).isoformat())
df["host"] = "node-a"
write_store(df, sys.argv[1])
print("WROTE", flush=True)
time.sleep(60)
"""


@pytest.mark.bad_input("store")
def test_a_second_collector_of_a_host_stops_with_a_clear_error(tmp_path, fake_nvml):
    """Another process writing the host's partition (a first collector, an import):
    the collector stops at its first flush instead of interleaving two series."""
    fake_nvml({"gpus": 1})
    store = tmp_path / "s"
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(store)], cwd=REPO,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "WROTE"
        c = Collector(store, interval_s=0.02, flush_interval_s=0.2, host="node-a")
        c.start()
        time.sleep(0.6)
        assert not c.running
        with pytest.raises(StoreError, match="being written by another process"):
            c.stop()
    finally:
        p.kill()
        p.wait()
    assert len(read_store(store)) == 3  # only the first writer's samples


def test_an_interrupted_upgrade_is_finished_by_running_it_again(tmp_path, telemetry):
    """A crash after a file's rows were written in format 2 but before the format-1 file
    was removed: the re-run de-duplicates, so no sample is doubled or lost."""
    store = tmp_path / "v1"
    _write_v1(telemetry, store)
    first = min(store.glob("date=*/host=*/part-*.parquet"))
    import pyarrow.parquet as pq

    write_store(pq.read_table(first).to_pandas(), store, _upgrading=True)  # then "crash"
    assert store_format(store) == 1
    stats = upgrade_store(store)
    assert stats["files"] == 4 and stats["rows"] == len(telemetry)
    pd.testing.assert_frame_equal(read_store(store), telemetry)
    assert store_format(store) == 2
