"""Readers against libraries doing the same work, measured in the same run (issue 37).

Baselines parse to the same types (issue 37: a bare ``pandas.read_csv`` of these logs
reads text without a number or a time, so it is not the same work):

* ``read_nvidia_smi`` on the real 8-GPU H100 trace
  (``../shared/data/nvidia-smi-h100-100ms/h100-traces_ckpt100.csv``, 54,432 rows;
  ``$POWERLAB_SHARED_DATA`` names the folder elsewhere, e.g. from a worktree; skipped
  where it is absent) against the pandas typed parse (:func:`pandas_typed_smi`): <= 1x;
* ``read_nvidia_smi`` on realistic synthetic logs (``--rows``, default 2M and 6M rows,
  8 GPUs, the query ``timestamp, index, uuid, power.draw, utilization.gpu, memory.used,
  temperature.gpu, clocks.sm``, units in values) against the pandas typed parse (units
  stripped, times parsed, ``uuid`` a category): <= 1x; and against polars reading it
  fully typed, sorted by GPU and time, ``to_pandas`` (:func:`polars_typed_smi`; skipped
  without polars): <= 1.2x;
* ``read_dcgm_dmon`` on synthetic ``dcgmi dmon`` output (``--dmon-rows``, default 1M
  rows, 8 GPUs, 7 fields) against ``pandas.read_csv(sep=r"\\s+")`` with every value
  typed float64 (:func:`pandas_typed_dmon`): <= 1.2x;
* ``read_mlperf_power`` on a folder of MLPerf node power logs (the real 64-node GPT-3 run
  in ``../shared/data``, else the bundled copy) against a bare script that ``json``-decodes
  the ``power_reading`` lines and builds a pyarrow table converted to pandas: <= 1.5x.

The readers' fast paths read their logs in pieces on ``_workers()`` threads (the cores
available); pandas reads a path on one thread here, polars on all cores.  The ratio
(the target) is of wall-clock minima; the CPU-time ratio is printed beside it (on the
shared, loaded development machine the wall ratio moves with the load; the load
average is printed with each case).

The readers do all their checks (GPU attribution, units, impossible values, the schema);
their DataQualityWarnings are silenced here, not skipped.  Each case runs ``--repeat``
times (>= 3), baseline and reader interleaved; the ratio is of the minima, min and median
are printed.  Exits 1 on a missed target; the last line is ``RESULT {json}``
(benchmarks/run_all.py).  ``--profile`` adds a cProfile breakdown of the nvidia-smi
reader on the synthetic log.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import json
import os
import pstats
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's powerlab

from powerlab.exceptions import DataQualityWarning
from powerlab.iotools import read_dcgm_dmon, read_mlperf_power, read_nvidia_smi

SHARED = Path(os.environ.get("POWERLAB_SHARED_DATA", REPO.parent / "shared" / "data"))
CKPT100 = SHARED / "nvidia-smi-h100-100ms" / "h100-traces_ckpt100.csv"
MLPERF_REAL = (SHARED / "mlperf-training-v4.0-smc" / "smc-ac-power" / "results"
               / "64xSMC-H100-SXM-80GB" / "gpt3" / "power" / "result_5848-240517221859825376616_2")
MLPERF_BUNDLED = REPO / "data" / "mlperf-gpt3-64node" / "power"
_NODE = re.compile(r"^node_(\d+)\.txt(\.gz)?$")


#: GPU UUIDs as nvidia-smi prints them (``GPU-`` and a dashed 128-bit hex id)
def _uuids(n_gpus: int, rng) -> list[str]:
    out = []
    for _ in range(n_gpus):
        h = "".join(f"{b:02x}" for b in rng.integers(0, 256, 16))
        out.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return out


def synthetic_smi(path: Path, rows: int, n_gpus: int = 8, seed: int = 0,
                  ids: bool = True) -> None:
    """Write an nvidia-smi log like a real multi-GPU trace: with ``ids`` (the realistic
    query) ``timestamp, index, uuid, power.draw [W], utilization.gpu [%],
    memory.used [MiB], temperature.gpu, clocks.sm [MHz]`` (GPU 0 has index 0, every
    UUID has dashes, values with units); without, the real H100 trace's columns
    ``timestamp, power.draw [W], utilization.gpu [%], memory.used [MiB]``.  Rows of
    one query 0-2 ms apart, queries 100-101 ms apart."""
    rng = np.random.default_rng(seed)
    q = -(-rows // n_gpus)
    start = np.datetime64("2025-07-27T00:00:00.000", "ms").astype(np.int64)
    base = start + np.cumsum(rng.integers(100, 102, q))
    within = np.cumsum(rng.integers(0, 3, (q, n_gpus)), axis=1)
    t = (base[:, None] + within).ravel()[:rows]
    ts = pc.strftime(pa.array(t.astype("datetime64[ms]")), "%Y/%m/%d %H:%M:%S")
    cw = rng.integers(7000, 70000, rows)
    watts = pc.binary_join_element_wise(
        pa.array((cw // 100).astype(str)),
        pc.utf8_lpad(pa.array((cw % 100).astype(str)), 2, "0"), ".")
    util = pa.array(rng.integers(0, 101, rows).astype(str))
    mem = pa.array(rng.integers(17, 81000, rows).astype(str))
    if ids:
        gpu = np.arange(rows) % n_gpus
        index = pa.array(gpu.astype(str))
        uuid = pa.array(np.array(_uuids(n_gpus, rng))[gpu])
        temp = pa.array(rng.integers(25, 85, rows).astype(str))
        sm = pa.array(rng.integers(345, 1981, rows).astype(str))
        header = (b"timestamp, index, uuid, power.draw [W], utilization.gpu [%], "
                  b"memory.used [MiB], temperature.gpu, clocks.sm [MHz]\n")
        line = pc.binary_join_element_wise(ts, ", ", index, ", ", uuid, ", ", watts,
                                           " W, ", util, " %, ", mem, " MiB, ", temp,
                                           ", ", sm, " MHz\n", "")
    else:
        header = b"timestamp, power.draw [W], utilization.gpu [%], memory.used [MiB]\n"
        line = pc.binary_join_element_wise(ts, ", ", watts, " W, ", util, " %, ", mem,
                                           " MiB\n", "")
    with open(path, "wb") as f:
        f.write(header)
        for chunk in (line.chunks if isinstance(line, pa.ChunkedArray) else [line]):
            chunk = chunk.cast(pa.large_string())
            _, offsets, data = chunk.buffers()
            off = np.frombuffer(offsets, dtype=np.int64, count=len(chunk) + 1,
                                offset=chunk.offset * 8)
            f.write(memoryview(data)[off[0]:off[-1]])


#: the realistic log's unit columns: field -> its unit token
SMI_UNITS = {"power.draw [W]": " W", "utilization.gpu [%]": " %",
             "memory.used [MiB]": " MiB", "clocks.sm [MHz]": " MHz"}
SMI_TIME = "%Y/%m/%d %H:%M:%S%.3f"


def pandas_typed_smi(path: Path) -> pd.DataFrame:
    """Baseline: pandas' C parser reading the realistic log to the same types (numbers
    with their units stripped as float64, the times parsed, ``uuid`` a category)."""
    df = pd.read_csv(path, skipinitialspace=True, dtype={"uuid": "category"})
    for col, unit in SMI_UNITS.items():
        if col in df:
            df[col] = pd.to_numeric(df[col].str.removesuffix(unit)).astype("float64")
    df["timestamp"] = pd.to_datetime(df["timestamp"], format="%Y/%m/%d %H:%M:%S.%f")
    return df


def polars_typed_smi(path: Path) -> pd.DataFrame:
    """Baseline: polars reading the realistic log fully typed (units stripped, times
    parsed, ``uuid`` categorical), sorted by GPU and time as the reader's frame is, then
    ``to_pandas``."""
    import polars as pl  # optional baseline

    lf = pl.scan_csv(path, infer_schema=False)
    lf = lf.rename({c: c.strip() for c in lf.collect_schema().names()})
    exprs = [pl.col("timestamp").str.to_datetime(SMI_TIME, time_unit="ns", time_zone="UTC"),
             pl.col("index").str.strip_chars().cast(pl.Int16),
             pl.col("uuid").str.strip_chars().cast(pl.Categorical),
             pl.col("temperature.gpu").str.strip_chars().cast(pl.Float64)]
    exprs += [pl.col(c.strip()).str.strip_chars().str.strip_suffix(u).cast(pl.Float64)
              for c, u in SMI_UNITS.items()]
    return lf.select(exprs).sort(["index", "timestamp"]).collect().to_pandas()


DMON_FIELDS = ["POWER", "TOTEC", "SMCLK", "MMCLK", "TMPTR", "MMTMP", "GPUTL"]


def synthetic_dmon(path: Path, rows: int, n_gpus: int = 8, seed: int = 0) -> None:
    """Write ``dcgmi dmon -e 155,156,100,101,150,140,203 -d 100`` output: one header and
    units line, then ``GPU k`` rows (no time prefix: the reader takes ``start=`` and
    ``delay_ms=``)."""
    rng = np.random.default_rng(seed)
    g = pa.array((np.arange(rows) % n_gpus).astype(str))
    cw = rng.integers(70000, 700000, rows)
    watts = pc.binary_join_element_wise(
        pa.array((cw // 1000).astype(str)),
        pc.utf8_lpad(pa.array((cw % 1000).astype(str)), 3, "0"), ".")
    ints = [pa.array(rng.integers(lo, hi, rows).astype(str))
            for lo, hi in ((10 ** 12, 2 * 10 ** 12), (345, 1981), (2619, 2620), (30, 80),
                           (35, 85), (0, 101))]
    line = pc.binary_join_element_wise("GPU ", g, "     ", watts, "     ", ints[0], "  ",
                                       ints[1], "  ", ints[2], "  ", ints[3], "  ", ints[4],
                                       "  ", ints[5], "\n", "")
    with open(path, "w") as f:
        f.write("#Entity   " + "  ".join(DMON_FIELDS) + "\n")
        f.write("ID        W  mJ   C  C\n")
        f.writelines("".join(chunk.to_pylist()) for chunk in
                     (line.chunks if isinstance(line, pa.ChunkedArray) else [line]))


def pandas_typed_dmon(path: Path, names: list[str]) -> pd.DataFrame:
    """Baseline: pandas' C parser reading the ``dcgmi dmon`` rows to the same types
    (every value float64, the GPU id an integer, the entity a category)."""
    return pd.read_csv(path, sep=r"\s+", skiprows=2, header=None, names=names,
                       dtype={n: "float64" for n in DMON_FIELDS} | {"entity": "category"})


def _has_polars() -> bool:
    try:
        import polars  # noqa: F401  (optional baseline)
    except ImportError:
        return False
    return True


def bare_mlperf(folder: Path) -> pd.DataFrame:
    """The baseline: json-decode each node's power_reading lines into a pyarrow table."""
    tables = []
    for f in sorted(folder.iterdir()):
        m = _NODE.match(f.name)
        if not m:
            continue
        t, w = [], []
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                i = line.find(":::MLLOG")
                if i < 0:
                    continue
                ev = json.loads(line[i + 8:])
                if ev.get("key") == "power_reading":
                    t.append(ev["time_ms"])
                    w.append(ev["value"])
        host = f.name.split(".", 1)[0]
        tables.append(pa.table({
            "timestamp": pa.array(t, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
            "host": pa.array([host] * len(t), pa.string()),
            "power_w": pa.array(w, pa.float64())}))
    return pa.concat_tables(tables).to_pandas()


def timed(fns: dict, repeat: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each function, the functions interleaved."""
    out: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            out[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    return out, cpu


def peak_mib(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


def case(rows: list, name: str, size: str, base_name: str, fns: dict, target: float,
         repeat: int, memory: bool) -> bool:
    t, cpu = timed(fns, repeat)
    (bk, bt), (rk, rt) = [(k, t[k]) for k in fns]
    ratio = min(rt) / min(bt)
    cpu_ratio = min(cpu[rk]) / min(cpu[bk])
    passed = ratio <= target
    print(f"{name} ({size}), {repeat} runs, load {os.getloadavg()[0]:.1f}")
    for k, v in t.items():
        print(f"  {k:<34s} min {min(v):8.3f} s  median {statistics.median(v):8.3f} s  "
              f"CPU min {min(cpu[k]):8.3f} s")
    print(f"  ratio {rk} / {bk}: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU "
          f"(target <= {target}x): {'PASS' if passed else 'MISS'}")
    rows.append({"case": name, "size": size, "time_s_min": min(rt),
                 "time_s_median": statistics.median(rt),
                 "peak_mib": peak_mib(fns[rk]) if memory else None,
                 "baseline_s": min(bt), "ratio": ratio, "cpu_ratio": cpu_ratio, "target": f"<= {target}x "
                 f"{base_name}", "pass": passed})
    return passed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", default="2e6,6e6",
                    help="rows of the synthetic nvidia-smi logs, comma-separated "
                         "(default 2e6,6e6)")
    ap.add_argument("--dmon-rows", default="1e6",
                    help="rows of the synthetic dcgmi dmon output (default 1e6)")
    ap.add_argument("--memory", action="store_true",
                    help="also measure the readers' peak traced memory (slow)")
    ap.add_argument("--profile", action="store_true",
                    help="also print a cProfile breakdown (by own time) of one "
                         "read_nvidia_smi of the synthetic log")
    args = ap.parse_args(argv)
    repeat = max(3, args.repeat)
    warnings.simplefilter("ignore", DataQualityWarning)
    rows: list[dict] = []
    ok = True

    if CKPT100.is_file():
        ok &= case(rows, "nvidia-smi, real H100 trace", "54,432 rows", "pandas typed parse", {
            "pandas typed parse": lambda: pandas_typed_smi(CKPT100),
            "read_nvidia_smi": lambda: read_nvidia_smi(CKPT100, tz="America/Los_Angeles"),
        }, 1.0, repeat, args.memory)
    else:
        print(f"skipped the real trace: {CKPT100} not found")

    for n in (int(float(r)) for r in args.rows.split(",")):
        with tempfile.TemporaryDirectory(prefix="powerlab-bench-") as tmp:
            f = Path(tmp) / "smi.csv"
            synthetic_smi(f, n)
            size = f"{n:,} rows, index + uuid"
            ok &= case(rows, "nvidia-smi, synthetic 8-GPU log", size,
                       "pandas typed parse", {
                           "pandas typed parse": lambda f=f: pandas_typed_smi(f),
                           "read_nvidia_smi": lambda f=f: read_nvidia_smi(f, tz="UTC"),
                       }, 1.0, repeat, args.memory)
            if _has_polars():
                ok &= case(rows, "nvidia-smi, synthetic 8-GPU log", size,
                           "polars typed + sort + to_pandas", {
                               "polars typed + sort": lambda f=f: polars_typed_smi(f),
                               "read_nvidia_smi": lambda f=f: read_nvidia_smi(f, tz="UTC"),
                           }, 1.2, repeat, False)
            else:
                print("skipped the polars baseline: polars is not installed")
            if args.profile:
                prof = cProfile.Profile()
                prof.runcall(read_nvidia_smi, f, tz="UTC")
                pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(15)

    n = int(float(args.dmon_rows))
    with tempfile.TemporaryDirectory(prefix="powerlab-bench-") as tmp:
        f = Path(tmp) / "dmon.txt"
        synthetic_dmon(f, n)
        names = ["entity", "id"] + DMON_FIELDS
        ok &= case(rows, "dcgmi dmon, synthetic 8-GPU output", f"{n:,} rows",
                   "pandas typed parse", {
                       "pandas typed parse": lambda: pandas_typed_dmon(f, names),
                       "read_dcgm_dmon": lambda: read_dcgm_dmon(
                           f, start="2025-07-27T00:00:00Z", delay_ms=100),
                   }, 1.2, repeat, args.memory)

    folder = MLPERF_REAL if MLPERF_REAL.is_dir() else MLPERF_BUNDLED
    n_files = sum(1 for p in folder.iterdir() if _NODE.match(p.name))
    where = "real 64-node run" if folder == MLPERF_REAL else "bundled copy, .gz"
    ok &= case(rows, "MLPerf node power logs", f"{n_files} files ({where})",
               "json + pyarrow", {
                   "json + pyarrow": lambda: bare_mlperf(folder),
                   "read_mlperf_power": lambda: read_mlperf_power(folder),
               }, 1.5, repeat, args.memory)

    print("RESULT " + json.dumps({"benchmark": "readers", "rows": rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
