"""Fleet-scale aggregation: pandas, Dask-frame and store (Dask) paths give identical answers."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from powerlab.cli import main as cli_main
from powerlab.exceptions import PowerlabError, SchemaError, StoreError
from powerlab.telemetry import aggregate as ag
from powerlab.telemetry import jobs as jobs_mod
from powerlab.telemetry import quality
from powerlab.telemetry.schema import conform
from powerlab.telemetry.store import read_store, write_store

REPO = Path(__file__).resolve().parents[2]
UTC = "UTC"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_aggregate",
                                                  REPO / "benchmarks" / "bench_aggregate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _gpu_frame(host, gpu, t, power, energy, seed=0):
    rng = np.random.default_rng(seed)
    n = len(t)
    return pd.DataFrame({
        "timestamp": t, "host": host, "scope": "gpu", "gpu_index": gpu,
        "gpu_uuid": f"GPU-{abs(hash(host)) % 10**8:08d}-{gpu:04d}",
        "power_w": power, "energy_j": energy,
        "clock_sm_mhz": rng.choice([1755.0, 1980.0], n), "clock_mem_mhz": 2619.0,
        "temp_gpu_c": 40 + 10 * rng.random(n), "temp_mem_c": 50.0,
        "util_gpu_pct": 90.0, "power_limit_w": 700.0,
        "throttle_reasons": rng.choice(np.array([0, 4, 2**40], dtype=np.uint64), n),
    })


def _edges() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Telemetry with every edge: midnight, gaps, stale runs, resets, NaN, absent days.

    Returns the frame and the duplicate samples (other values) appended later.
    """
    t = pd.date_range("2024-05-17T23:58:00Z", periods=270, freq="1s")
    rng = np.random.default_rng(1)
    frames = []
    for h, host in enumerate(["n1", "rack b/n 2"]):
        for g in range(3):
            p = 200 + 100 * rng.random(len(t)) + 10 * g
            e = 5e5 + np.cumsum(p)
            keep = np.ones(len(t), dtype=bool)
            if (h, g) == (0, 0):                      # gap across midnight
                keep &= ~((t >= "2024-05-17T23:59:50Z") & (t < "2024-05-18T00:00:20Z"))
                p[5:8] = np.nan                        # missing readings
                e[100:104] = np.nan
            if (h, g) == (0, 1):                      # stale run across midnight
                p[(t >= "2024-05-17T23:59:55Z") & (t < "2024-05-18T00:00:05Z")] = 250.0
            if (h, g) == (0, 2):                      # resets at midnight and mid-bin
                e[t >= "2024-05-18T00:00:00Z"] -= 4.9e5
                e[t >= "2024-05-18T00:01:30Z"] -= 5e4
            frames.append(_gpu_frame(host, g, t[keep], p[keep], e[keep], seed=h * 3 + g))
    # a GPU absent a whole day, back two days later (counter went on)
    t2 = pd.date_range("2024-05-20T00:00:03Z", periods=80, freq="1s")
    frames.append(_gpu_frame("rack b/n 2", 0, t2, np.full(80, 310.0),
                             9e5 + 310.0 * np.arange(80), seed=9))
    # node-level row of one host (must not be added to GPU sums)
    node = _gpu_frame("n1", 0, t[::10], np.full(27, 3000.0), np.nan)
    node["scope"], node["gpu_index"], node["gpu_uuid"] = "node", pd.NA, pd.NA
    node["energy_j"] = np.nan
    frames.append(node)
    df = conform(pd.concat(frames, ignore_index=True))
    dup_sel = (df["host"] == "n1") & (df["gpu_index"] == 0) & (df["scope"] == "gpu") & (
        df["timestamp"] >= "2024-05-18T00:01:00Z") & (df["timestamp"] < "2024-05-18T00:01:10Z")
    dups = df[dup_sel.to_numpy(dtype=bool)].copy()
    dups["power_w"] += 7.0
    return df, dups


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("agg") / "store"
    df, dups = _edges()
    write_store(df, root, fsync=False)
    write_store(dups, root, fsync=False)          # later file: duplicates come second
    return root


@pytest.fixture(scope="module")
def frame(store):
    return read_store(store)


def _three(fn, store, frame, engine="pandas"):
    """The same call on a pandas frame, a store path (on ``engine`` where the call takes
    one) and a Dask frame, all computed."""
    with dask.config.set(scheduler="sync"):
        a = fn(frame)
        b = fn(store, engine=engine)
        c = fn(dd.from_pandas(frame, npartitions=3))
    return a, b, c


CALLS = {
    "resample_1s": lambda x, **kw: ag.resample_gpu(x, "1s"),
    "resample_1min": lambda x, **kw: ag.resample_gpu(x, "1min", partition_rows=500),
    "cluster": lambda x, **kw: ag.power_sums(x, "1min", **kw),
    "host": lambda x, **kw: ag.power_sums(x, "1min", by="host", **kw),
    "rack": lambda x, **kw: ag.power_sums(x, "15s", by="rack",
                                          racks={"n1": "r1", "rack b/n 2": "r2"}, **kw),
    "node": lambda x, **kw: ag.power_sums(x, "1min", by="host", scope="node", **kw),
    "peer": lambda x, **kw: ag.peer_stats(x, "10s"),
    "masks": lambda x, **kw: ag.quality_masks(x, 1.5, stale_min_run=5, partition_rows=500),
    "jobs": lambda x, **kw: jobs_mod.job_power(x, _jobs(), "30s", **kw),
    "range": lambda x, **kw: ag.power_sums(x, "1s", by="host", hosts=["rack b/n 2"],
                                           start=pd.Timestamp("2024-05-17T23:59:30Z"),
                                           end=pd.Timestamp("2024-05-18T00:00:40Z"), **kw),
}
#: the calls with a DuckDB form (the default engine of a store)
DUCKDB_CALLS = ["cluster", "host", "rack", "node", "jobs", "range"]


def _jobs() -> pd.DataFrame:
    ts = pd.Timestamp
    return pd.DataFrame({
        "host": ["n1", "n1", "n1", "rack b/n 2", "rack b/n 2"],
        "gpu_index": [0, 0, 1, 1, 2],
        "job_id": ["A", "B", "A", "C", "C"],
        "start": [ts("2024-05-17T23:00Z"), ts("2024-05-18T00:00:45Z"), ts("2024-05-17T23:00Z"),
                  ts("2024-05-17T23:59:00Z"), ts("2024-05-17T23:00Z")],
        "end": [ts("2024-05-18T00:00:45Z"), ts("2024-05-19T00:00Z"), ts("2024-05-19T00:00Z"),
                ts("2024-05-19T00:00Z"), ts("2024-05-19T00:00Z")],
    })


@pytest.mark.parametrize("name", list(CALLS))
def test_pandas_store_and_dask_frame_paths_identical(name, store, frame):
    a, b, c = _three(CALLS[name], store, frame)
    assert len(a) > 0
    assert isinstance(a.index, pd.RangeIndex)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    pd.testing.assert_frame_equal(a, c, check_exact=True)


@pytest.mark.parametrize("name", DUCKDB_CALLS)
def test_duckdb_engine_gives_the_same_answers(name, store, frame):
    """DuckDB (the default engine of a store) gives the pandas engine's keys, bins,
    n_gpus, dtypes and row order exactly, and its power to 1e-12 relative (DuckDB adds
    in another order); the store holds every edge of _edges (NaN readings, a gap and
    counter resets across midnight, node rows, duplicates written later)."""
    ref = CALLS[name](frame)
    auto = CALLS[name](store)                      # engine="auto" is DuckDB
    duck = CALLS[name](store, engine="duckdb")
    assert len(ref) > 0
    pd.testing.assert_frame_equal(auto, duck, check_exact=True)
    pd.testing.assert_frame_equal(duck.drop(columns="power_w"), ref.drop(columns="power_w"),
                                  check_exact=True)
    np.testing.assert_allclose(duck["power_w"].to_numpy(), ref["power_w"].to_numpy(),
                               rtol=1e-12, atol=0)
    assert duck["power_w"].isna().tolist() == ref["power_w"].isna().tolist()


def test_resample_against_plain_pandas(frame):
    out = ag.resample_gpu(frame, "1min")
    gpu = frame.drop_duplicates(["host", "scope", "gpu_index", "timestamp"], keep="first")
    gpu = gpu.assign(bin=gpu["timestamp"].dt.floor("1min"))
    ref = gpu.groupby(["host", "scope", "gpu_index", "bin"], dropna=False, observed=True)
    ref = ref.agg(power_w=("power_w", "mean"), temp_gpu_c=("temp_gpu_c", "mean"),
                  n=("power_w", "size")).reset_index()
    ref = ref.sort_values(["host", "scope", "gpu_index", "bin"], na_position="first")
    assert list(out["timestamp"]) == list(ref["bin"])
    assert out["n_samples"].tolist() == ref["n"].tolist()
    np.testing.assert_allclose(out["power_w"], ref["power_w"], rtol=1e-13)
    np.testing.assert_allclose(out["temp_gpu_c"], ref["temp_gpu_c"], rtol=1e-13)
    # the duplicates (power + 7 W) were dropped: the first sample was kept
    assert out["n_samples"].max() == 60
    assert out.dtypes["gpu_index"] == "Int16" and out.dtypes["throttle_reasons"] == "UInt64"
    assert out["timestamp"].dt.tz is not None


def test_energy_delta_adds_up_per_device(frame):
    out = ag.resample_gpu(frame, "1min")
    gpu = frame[frame["scope"] == "gpu"].drop_duplicates(
        ["host", "scope", "gpu_index", "timestamp"])
    for (host, g), d in gpu.groupby(["host", "gpu_index"]):
        e = d["energy_j"].dropna().to_numpy()
        diffs = np.diff(e)
        expected = diffs[diffs >= 0].sum()           # resets count as zero
        got = out[(out["host"] == host) & (out["gpu_index"] == g)]["energy_delta_j"].sum()
        assert got == pytest.approx(expected, rel=1e-12)
    # the GPU that came back two days later: its first bin spans the missing day
    back = out[(out["host"] == "rack b/n 2") & (out["gpu_index"] == 0)
               & (out["timestamp"] == pd.Timestamp("2024-05-20T00:00Z"))]
    last_before = gpu[(gpu["host"] == "rack b/n 2") & (gpu["gpu_index"] == 0)
                      & (gpu["timestamp"] < "2024-05-19")]["energy_j"].iloc[-1]
    assert back["energy_delta_j"].iloc[0] == pytest.approx(9e5 + 310.0 * 56 - last_before)


def test_quality_masks_match_quality_module_across_midnight(store, frame):
    masks = ag.quality_masks(store, 1.5, stale_min_run=5, partition_rows=500)
    assert masks["gap"].to_numpy().tolist() == quality.gaps(frame, 1.5).tolist()
    assert masks["stale_power_w"].tolist() == quality.stale(frame, "power_w", 5).tolist()
    assert masks["reset_energy_j"].tolist() == quality.counter_resets(frame).tolist()
    midnight = pd.Timestamp("2024-05-18T00:00:00Z")
    flagged = masks[masks["gap"]]
    assert (flagged["timestamp"] == midnight + pd.Timedelta(seconds=20)).any()
    assert (flagged["timestamp"] == pd.Timestamp("2024-05-20T00:00:03Z")).any()
    stale = masks[masks["stale_power_w"]]
    assert stale["timestamp"].min() < midnight <= stale["timestamp"].max()
    resets = masks[masks["reset_energy_j"]]
    assert midnight in set(resets["timestamp"])


def test_sums_are_sums_of_device_means(frame):
    res = ag.resample_gpu(frame, "1min")
    gpu = res[res["scope"] == "gpu"]
    cl = ag.power_sums(frame, "1min")
    ref = gpu.groupby("timestamp")["power_w"].agg(["sum", "count"])
    np.testing.assert_allclose(cl["power_w"], ref["sum"].to_numpy(), rtol=1e-13)
    assert cl["n_gpus"].tolist() == ref["count"].tolist()
    racks = ag.power_sums(frame, "1min", by="rack", racks={"n1": "r", "rack b/n 2": "r"})
    np.testing.assert_allclose(racks["power_w"], cl["power_w"], rtol=1e-13)
    node = ag.power_sums(frame, "1min", by="host", scope="node")
    assert set(node["host"]) == {"n1"} and np.allclose(node["power_w"], 3000.0)


def test_job_power_plus_idle_is_cluster(frame):
    jobs = _jobs()
    jp = jobs_mod.job_power(frame, jobs, "30s")
    cl = ag.power_sums(frame, "30s").set_index("timestamp")["power_w"]
    res = ag.resample_gpu(frame, "30s")
    res = res[res["scope"] == "gpu"]
    assigned = {("n1", 0), ("n1", 1), ("rack b/n 2", 1), ("rack b/n 2", 2)}
    idle = res[[(h, g) not in assigned for h, g in zip(res["host"], res["gpu_index"])]]
    idle_w = idle.groupby("timestamp")["power_w"].sum()
    # rack b/n 2 GPU 1 joins job C at 23:59:00 only
    early = res[(res["host"] == "rack b/n 2") & (res["gpu_index"] == 1)
                & (res["timestamp"] < "2024-05-17T23:59Z")].set_index("timestamp")["power_w"]
    total = jp.groupby("timestamp")["power_w"].sum().add(idle_w, fill_value=0)
    total = total.add(early, fill_value=0)
    np.testing.assert_allclose(total.reindex(cl.index).to_numpy(), cl.to_numpy(), rtol=1e-12)
    # GPU 0 of n1 switches from A to B at 00:00:45, mid-bin: both jobs share that bin
    b = jp[(jp["job_id"] == "B")]
    assert b["timestamp"].min() == pd.Timestamp("2024-05-18T00:00:30Z")
    assert set(jp["job_id"]) == {"A", "B", "C"}


@pytest.mark.parametrize("day,skipped,doubled", [("2024-03-10", 2, None),
                                                 ("2024-11-03", None, 1)])
def test_hour_of_day_on_dst_days(tmp_path, day, skipped, doubled):
    tz = "America/New_York"
    local0 = pd.Timestamp(day, tz=tz)
    t0 = local0.tz_convert(UTC)
    t = pd.date_range(t0, t0 + pd.Timedelta(hours=30), freq="1min", inclusive="left")
    t = t[t.tz_convert(tz).normalize() == local0]        # exactly the local day
    hour = t.tz_convert(tz).hour
    df = conform(_gpu_frame("n1", 0, t, 100.0 + hour, 1e6 + np.arange(len(t))))
    write_store(df, tmp_path, fsync=False)
    a = ag.hour_of_day(df, tz)
    with dask.config.set(scheduler="sync"):
        b = ag.hour_of_day(tmp_path, tz)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    counts = dict(zip(a["hour"], a["count"]))
    if skipped is not None:
        assert skipped not in counts and len(counts) == 23
    if doubled is not None:
        assert counts[doubled] == 120
    assert all(c == 60 for h, c in counts.items() if h != doubled)
    np.testing.assert_array_equal(a["mean_w"], 100.0 + a["hour"])
    assert len(t) == sum(counts.values())  # the UTC day split across two store dates


def test_store_reading_is_pruned_and_projected(store, frame):
    full = ag.open_store(store)
    day2 = ag.open_store(store, start=pd.Timestamp("2024-05-18T00:00Z"),
                         end=pd.Timestamp("2024-05-19T00:00Z"), hosts=["n1"])
    assert day2.npartitions < full.npartitions
    cols = ["timestamp", "host", "scope", "gpu_index", "power_w"]
    got = ag.collect(day2[cols].compute())
    exp = frame[(frame["host"] == "n1") & (frame["timestamp"] >= "2024-05-18")
                & (frame["timestamp"] < "2024-05-19")][cols]
    pd.testing.assert_frame_equal(got, ag.collect(exp))
    # projection reaches the reader: only the asked columns are read from Parquet
    from dask.dataframe.dask_expr.io.io import FromMapProjectable

    expr = full[["timestamp", "power_w"]].optimize(fuse=False).expr
    readers = [e for e in expr.walk() if isinstance(e, FromMapProjectable)]
    assert readers and list(readers[0].operand("columns")) == ["timestamp", "power_w"]
    assert list(full[["timestamp", "power_w"]].partitions[0].compute().columns) == [
        "timestamp", "power_w"]


def test_bad_input_raises_clear_errors(store, frame):
    with pytest.raises(PowerlabError, match="divide one day"):
        ag.power_sums(frame, "7min")
    with pytest.raises(StoreError, match="time zone"):
        ag.power_sums(store, start="2024-05-18 00:00")
    with pytest.raises(SchemaError, match="power_w"):
        ag.power_sums(frame.drop(columns="power_w"))
    with pytest.raises(PowerlabError, match="rack"):
        ag.power_sums(frame, by="rack")
    with pytest.raises(SchemaError, match="no rack for host"):
        ag.power_sums(frame, by="rack", racks={"n1": "r1"})
    bad = _jobs()
    bad.loc[1, "start"] = pd.Timestamp("2024-05-18T00:00:00Z")
    with pytest.raises(SchemaError, match="overlap"):
        jobs_mod.job_power(frame, bad)
    naive = _jobs().assign(start=lambda j: j["start"].dt.tz_localize(None))
    with pytest.raises(SchemaError, match="tz-aware"):
        jobs_mod.job_power(frame, naive)
    with pytest.raises(PowerlabError, match="IANA"):
        ag.hour_of_day(frame, "Mars/Olympus")
    with pytest.raises(StoreError, match="no store"):
        ag.power_sums(store.parent / "nope")


def test_cli_aggregate_writes_what_the_functions_return(store, frame, tmp_path, capsys):
    out = tmp_path / "host.parquet"
    assert cli_main(["aggregate", str(store), "--by", "host", "--freq", "30s",
                     "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out),
                                  ag.power_sums(frame, "30s", by="host"))
    jobs_csv = tmp_path / "jobs.csv"
    j = _jobs()
    j.assign(start=j["start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
             end=j["end"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")).to_csv(jobs_csv, index=False)
    csv = tmp_path / "jobs_out.csv"
    assert cli_main(["aggregate", str(store), "--by", "job", "--jobs", str(jobs_csv),
                     "--out", str(csv), "--no-progress"]) == 0
    back = pd.read_csv(csv)
    exp = jobs_mod.job_power(frame, j, "1min")
    np.testing.assert_allclose(back["power_w"], exp["power_w"], rtol=1e-12)
    assert back["job_id"].tolist() == exp["job_id"].tolist()
    assert "wrote" in capsys.readouterr().out
    assert cli_main(["aggregate", str(store), "--by", "job", "--out", str(csv)]) == 2
    assert cli_main(["aggregate", str(store), "--start", "2024-05-18",
                     "--out", str(csv)]) == 2
    assert "no time zone" in capsys.readouterr().err


# ----------------------------------------------------------- real distributed cluster

WORKER_LIMIT = 480 * 2**20


# A worker over its memory limit must fail the test, never stall it: with Dask's default
# pause threshold (80 %) a paused worker stops taking tasks and the client waits forever
# (CI once hung here for 300 s). Pausing and spilling are off, so the only memory action
# left is the nanny's kill at 95 %, which the test detects as a changed worker set.
NO_PAUSE = {"distributed.worker.memory.pause": False,
            "distributed.worker.memory.spill": False,
            "distributed.worker.memory.target": False}
#: Dask's NVML monitor would initialise NVML in this process and keep it initialised:
#: with the fake libnvidia-ml of the collector tests loaded, a later test's scenario
#: would then never be read (tests/telemetry/test_store_readers.py failed after these).
NO_NVML = {"distributed.diagnostics.nvml": False}


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with dask.config.set({**NO_PAUSE, **NO_NVML}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     memory_limit=WORKER_LIMIT, dashboard_address=None,
                                     silence_logs=40) as lc, distributed.Client(lc) as c:
        c.wait_for_workers(2)
        yield c


def test_cli_scheduler_option_runs_on_an_existing_cluster(store, frame, tmp_path, capsys):
    """`powerlab aggregate --scheduler ADDRESS` connects to that running scheduler and the
    work is done there (not on a default client or the local threads)."""
    distributed = pytest.importorskip("distributed")
    with dask.config.set(NO_NVML), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                     dashboard_address=None, silence_logs=40) as other:
        before = other.scheduler.transition_counter
        out = tmp_path / "cluster.parquet"
        assert cli_main(["aggregate", str(store), "--by", "cluster", "--freq", "1min",
                         "--scheduler", other.scheduler_address, "--out", str(out),
                         "--no-progress"]) == 0
        assert other.scheduler.transition_counter > before  # tasks ran on that scheduler
    pd.testing.assert_frame_equal(pd.read_parquet(out), ag.power_sums(frame, "1min"),
                                  check_exact=True)
    assert "wrote" in capsys.readouterr().out


@pytest.mark.slow
def test_local_cluster_with_worker_processes_matches_pandas(client, store, frame):
    assert len(client.scheduler_info()["workers"]) == 2
    for name in ("resample_1min", "host", "masks", "peer"):
        got = CALLS[name](store, engine="dask")   # runs on the cluster (the default client)
        pd.testing.assert_frame_equal(got, CALLS[name](frame), check_exact=True)
    lazy = ag.power_sums(store, "1min", compute=False, engine="dask")
    pd.testing.assert_frame_equal(ag.collect(lazy, client=client), CALLS["cluster"](frame))


class _WorkerMemoryPeak:
    """Largest process memory each worker reported to the scheduler while in the block."""

    def __init__(self, client, every_s: float = 0.1):
        self.client, self.every_s, self.peak = client, every_s, {}
        self._stop = threading.Event()

    def _poll(self):
        while not self._stop.is_set():
            for addr, w in self.client.scheduler_info()["workers"].items():
                self.peak[addr] = max(self.peak.get(addr, 0), w["metrics"]["memory"])
            self._stop.wait(self.every_s)

    def __enter__(self):
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def mib(self) -> dict:
        return {a: round(v / 2**20, 1) for a, v in self.peak.items()}


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_memory_bounded_on_store_several_times_worker_memory(client, tmp_path):
    """Scaled down from the issue's 2 GiB workers: 480 MiB workers, a >=3x larger store."""
    bench = _bench()
    n_hosts, seconds = 205, 12_240            # 20.1 M rows, 8 GPUs per host
    gen = bench.generate_store(tmp_path, n_hosts, seconds)
    one = read_store(tmp_path, hosts=["node00000"])
    in_memory = gen["rows"] * one.memory_usage(deep=True).sum() / len(one)
    workers = client.scheduler_info()["workers"]
    total_limit = sum(w["memory_limit"] for w in workers.values())
    assert in_memory >= 3 * total_limit, (in_memory, total_limit)
    before = set(workers)
    # the workers run with pausing off (see NO_PAUSE): an overrun kills, never stalls
    assert all(v is False for v in client.run(
        lambda: __import__("dask").config.get("distributed.worker.memory.pause")).values())
    peak = _WorkerMemoryPeak(client)
    with peak:
        res = ag.power_sums(tmp_path, "1min", partition_rows=250_000)
    assert set(client.scheduler_info()["workers"]) == before, \
        ("a worker was killed", peak.mib(), client.get_worker_logs())
    assert max(peak.mib().values()) < 0.95 * WORKER_LIMIT / 2**20, peak.mib()
    assert (res["n_gpus"] == n_hosts * 8).all()
    truth = gen["truth_full_minutes"]
    got = res.set_index("timestamp")["power_w"].reindex(truth.index)
    np.testing.assert_allclose(got.to_numpy(), truth.to_numpy(), rtol=1e-12)


# ------------------------------------------------- streamed store sums (issue 16)

@pytest.mark.parametrize("scope", ["gpu", "node", "all"])
@pytest.mark.parametrize("by", ["cluster", "host", "rack"])
def test_store_sums_streamed_equal_frame_path_for_every_engine_and_partitioning(
        store, frame, by, scope):
    """The streamed store path (folder by folder, chained per date on Dask) gives the
    frame path's bits, whatever the partition size and engine."""
    racks = {"n1": "r1", "rack b/n 2": "r2"} if by == "rack" else None
    kw = {"by": by, "racks": racks, "scope": scope}
    ref = ag.power_sums(frame, "30s", **kw)
    assert len(ref) > 0
    got = [ag.power_sums(store, "30s", engine="pandas", **kw)]
    with dask.config.set(scheduler="sync"):
        for rows in (500, 2_000_000):
            got.append(ag.power_sums(store, "30s", engine="dask", partition_rows=rows, **kw))
    for g in got:
        pd.testing.assert_frame_equal(g, ref, check_exact=True)


def test_store_sums_streamed_hosts_and_range_and_missing_rack(store, frame):
    kw = {"hosts": ["n1"], "start": pd.Timestamp("2024-05-17T23:59:30Z"),
              "end": pd.Timestamp("2024-05-18T00:01:40Z")}
    ref = ag.power_sums(frame, "10s", by="host", **kw)
    assert set(ref["host"]) == {"n1"} and len(ref) == 13
    pd.testing.assert_frame_equal(ag.power_sums(store, "10s", by="host", engine="pandas",
                                                **kw), ref, check_exact=True)
    for engine in ("pandas", "dask", "duckdb"):
        with dask.config.set(scheduler="sync"), \
                pytest.raises(SchemaError, match=r"no rack for host\(s\) \['rack b/n 2'\]"):
            ag.power_sums(store, by="rack", racks={"n1": "r1"}, engine=engine)


def _kahan_reference(values_by_cell):
    out = {}
    for cell, vals in values_by_cell.items():
        s = c = 0.0
        n = 0
        for x in vals:
            if np.isnan(x):
                continue
            n += 1
            y = x - c
            t = s + y
            c = (t - s) - y
            s = t
        out[cell] = (s if n else np.nan, n)
    return out


def test_kahan_add_is_ordered_and_continues_exactly_across_calls():
    from powerlab.telemetry.binning import kahan_add

    rng = np.random.default_rng(16)
    n, n_cells = 20_000, 37
    cells = rng.integers(0, n_cells, n)
    vals = rng.choice([1e16, 1.0, -1e16, 3.3, 1e-5, np.nan, 2.5e8], n) * rng.random(n)
    per_cell: dict[int, list] = {}
    for c, v in zip(cells.tolist(), vals.tolist()):
        per_cell.setdefault(c, []).append(v)
    ref = _kahan_reference(per_cell)
    one = [np.zeros(n_cells), np.zeros(n_cells), np.zeros(n_cells, np.int64)]
    kahan_add(*one, cells, vals)
    split = [np.zeros(n_cells), np.zeros(n_cells), np.zeros(n_cells, np.int64)]
    for a, b in [(0, 7), (7, 7), (7, 5_000), (5_000, 12_345), (12_345, n)]:
        kahan_add(*split, cells[a:b], vals[a:b])
    for c, (s, k) in ref.items():
        assert one[2][c] == k == split[2][c]
        assert one[0][c] == s == split[0][c] or (np.isnan(s) and k == 0)
    # plain left-to-right addition loses what compensation keeps
    plain = {c: sum(v for v in vs if not np.isnan(v)) for c, vs in per_cell.items()}
    assert any(plain[c] != one[0][c] for c in plain)


def test_device_means_unsorted_files_duplicates_and_absent_columns(tmp_path):
    """A folder whose files are out of order, repeat samples and lack optional columns:
    the streamed kernel matches resample_gpu on the frame read_store returns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from powerlab.telemetry.storefiles import file_crc

    t = pd.date_range("2024-05-18T00:00:00Z", periods=200, freq="1s")
    rng = np.random.default_rng(3)
    df = conform(pd.concat([_gpu_frame("h", g, t, 300 + 50 * rng.random(200), np.nan,
                                       seed=g) for g in range(3)], ignore_index=True))
    write_store(df.sample(frac=1.0, random_state=1), tmp_path, fsync=False)
    # a second file by hand: an earlier sample of GPU 1 repeated (other power), GPU 7
    # only here, and no power_limit_w column; rows in reverse time order
    extra = df[(df["gpu_index"] == 1) & (df["timestamp"] < t[50])].copy()
    extra["power_w"] += 9.0
    g7 = df[df["gpu_index"] == 0].assign(gpu_index=7, gpu_uuid="GPU-7")
    g7 = conform(g7).astype({"gpu_index": "Int16"})
    more = pd.concat([extra, g7], ignore_index=True).iloc[::-1].drop(columns="power_limit_w")
    folder = next(p.parent for p in tmp_path.rglob("part-*.parquet"))
    tmp = folder / "x.tmp"
    pq.write_table(pa.Table.from_pandas(more, preserve_index=False), tmp)
    tmp.rename(folder / f"part-20240518T000000000000Z-zzzz-c{file_crc(tmp):08x}.parquet")
    frame = read_store(tmp_path)
    assert frame["gpu_index"].nunique() == 4
    for freq in ("1s", "8s", "1min"):
        ref = ag.power_sums(frame, freq, by="host")
        got = ag.power_sums(tmp_path, freq, by="host", engine="pandas")
        pd.testing.assert_frame_equal(got, ref, check_exact=True)
        assert (got["n_gpus"] == 4).all()
        # DuckDB: the files overlap in time, so it keeps the first of each repeated sample
        _same_but_last_bits(ag.power_sums(tmp_path, freq, by="host", engine="duckdb"), ref)


def _same_but_last_bits(got: pd.DataFrame, ref: pd.DataFrame) -> None:
    """Equal keys, bins, counts, dtypes and order; power to 1e-12 relative."""
    assert len(ref) > 0
    pd.testing.assert_frame_equal(got.drop(columns="power_w"), ref.drop(columns="power_w"),
                                  check_exact=True)
    np.testing.assert_allclose(got["power_w"].to_numpy(), ref["power_w"].to_numpy(),
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("scope", ["gpu", "node", "all"])
def test_duckdb_one_file_per_folder_skips_deduplication_and_agrees(tmp_path, scope):
    """A store written in one go (one file per date/host folder, no overlap: DuckDB's
    direct path) gives the frame path's answer for every grouping; a second, disjoint
    file in a folder keeps the direct path; an overlapping one with repeated samples
    (other values) switches to first-kept de-duplication, so the repeats change nothing."""
    from powerlab.telemetry import duck

    df, _ = _edges()
    write_store(df, tmp_path, fsync=False)
    files = sorted(str(p) for p in tmp_path.rglob("part-*.parquet"))
    assert not duck._overlapping(files)
    racks = {"n1": "r1", "rack b/n 2": "r2"}
    for by in ("cluster", "host", "rack"):
        ref = ag.power_sums(df, "20s", by=by, racks=racks, scope=scope)
        _same_but_last_bits(ag.power_sums(tmp_path, "20s", by=by, racks=racks, scope=scope,
                                          engine="duckdb"), ref)
    later = df[df["timestamp"] >= "2024-05-20T00:00:30Z"]
    assert len(later) and later["host"].nunique() == 1
    import pyarrow as pa
    import pyarrow.parquet as pq

    from powerlab.telemetry.storefiles import file_crc

    folder = next(p.parent for p in tmp_path.rglob("part-*.parquet") if "2024-05-20" in str(p))
    tmp = folder / "x.tmp"
    pq.write_table(pa.Table.from_pandas(later.assign(power_w=later["power_w"] + 50.0),
                                        preserve_index=False), tmp)
    tmp.rename(folder / f"part-20240520T235959000000Z-zzzz-c{file_crc(tmp):08x}.parquet")
    files = sorted(str(p) for p in tmp_path.rglob("part-*.parquet"))
    assert duck._overlapping(files)
    ref = ag.power_sums(df, "20s", by="host", scope=scope)
    _same_but_last_bits(ag.power_sums(tmp_path, "20s", by="host", scope=scope,
                                      engine="duckdb"), ref)


def test_store_sums_read_one_folder_at_a_time_and_only_needed_columns(store, frame,
                                                                      monkeypatch):
    """The pandas engine never holds more than one date/host folder of telemetry: each
    read is one folder's files, projected to the five columns the sums need, and the
    folder's device means are folded before the next folder is read."""
    from powerlab.telemetry import binning, engines
    from powerlab.telemetry.storefiles import partition_of

    calls, live, peak = [], set(), [0]
    real_read, real_add = engines.read_tables, binning.BinSums.add

    def read(files, **kw):
        calls.append(([partition_of(f) for f in files], list(kw["columns"])))
        live.add(len(calls))
        peak[0] = max(peak[0], len(live))
        return real_read(files, **kw)

    def add(self, *a):
        live.clear()                      # the folder read last is folded now
        return real_add(self, *a)

    monkeypatch.setattr(engines, "read_tables", read)
    monkeypatch.setattr(binning.BinSums, "add", add)
    got = ag.power_sums(store, "1min", engine="pandas")
    pd.testing.assert_frame_equal(got, ag.power_sums(frame, "1min"), check_exact=True)
    folders = [set(parts) for parts, _ in calls]
    assert all(len(f) == 1 for f in folders)                   # one folder per read
    assert len(calls) == len({next(iter(f)) for f in folders}) == 5   # each read once
    assert all(cols == ["timestamp", "host", "scope", "gpu_index", "power_w"]
               for _, cols in calls)
    assert peak[0] == 1


@pytest.mark.bad_input("aggregate")
def test_store_sums_refuse_a_file_with_rows_without_timestamp(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from powerlab.telemetry.storefiles import file_crc

    t = pd.date_range("2024-05-18T00:00:00Z", periods=4, freq="1s")
    df = conform(_gpu_frame("h", 0, t, np.full(4, 300.0), np.nan))
    write_store(df, tmp_path, fsync=False)
    table = pa.Table.from_pandas(df, preserve_index=False)
    ts = pa.array([None, *t[1:].as_unit("ns")], type=table.schema.field("timestamp").type)
    table = table.set_column(0, "timestamp", ts)
    folder = tmp_path / "2024-05-18" / "h"
    tmp = folder / "x.tmp"
    pq.write_table(table, tmp)
    tmp.rename(folder / f"part-20240518T000000000000Z-nots-c{file_crc(tmp):08x}.parquet")
    for engine in ("pandas", "dask", "duckdb"):
        with dask.config.set(scheduler="sync"), \
                pytest.raises(StoreError, match=r"without a timestamp .*2024-05-18.h"):
            ag.power_sums(tmp_path, "1min", engine=engine)
