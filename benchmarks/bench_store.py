"""Benchmark: ``read_store`` against a bare pyarrow read + ``to_pandas`` of the same files.

Writes a synthetic store with :func:`powerlab.telemetry.store.write_store` (format 2, page
checksums, zstd): ``--rows`` samples over ``--hosts`` hosts of 8 GPUs at 10 Hz, every core
column filled. Then, each ``--repeat`` times, alternating:

* baseline: ``pyarrow.parquet.read_table`` of each file, ``concat_tables``, ``to_pandas``;
* ``read_store(STORE)``: all columns (checksums verified, canonical dtypes, sorted);
* projected baseline: the same pyarrow read of the columns ``read_store`` returns for
  ``columns=["power_w"]`` (the identity columns and ``power_w``), ``to_pandas``;
* ``read_store(STORE, columns=["power_w"])``: identity columns and one measurement.

Write (issue 37): ``write_store`` against :func:`pyarrow_write` (the same partitions, page
checksums, fsync, CRC-32 names; bare pyarrow), interleaved, each into a fresh folder;
target <= 1.2x (``--write-target``).

Targets (issue 25 section 3): ``read_store`` <= 1.3x the baseline and the projected
``read_store`` <= 1.3x the projected baseline (ratios of the minima over runs).  Also
printed: projected / full ``read_store`` (projection pushed down: well under 1), the CPU
time of each step (all threads; steadier than wall time on a shared machine) and the
load average before and after.  Prints min and median of
each, exits 1 on a miss; last line ``RESULT {json}``.

Usage::

    python benchmarks/bench_store.py                # 5,000,000 rows
    python benchmarks/bench_store.py --rows 5e5     # quick run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

GPUS = 8


def make_frame(rows: int, hosts: int, seed: int = 0) -> pd.DataFrame:
    from powerlab.telemetry.schema import conform

    rng = np.random.default_rng(seed)
    per = max(1, rows // (hosts * GPUS))
    t = pd.Timestamp("2024-05-17T08:00:00Z") + pd.to_timedelta(np.arange(per) * 100,
                                                                  unit="ms")
    n = per * hosts * GPUS
    host = np.repeat([f"node-{h:03d}" for h in range(hosts)], GPUS * per)
    gpu = np.tile(np.repeat(np.arange(GPUS), per), hosts)
    p = 300 + 50 * rng.standard_normal(n)
    df = pd.DataFrame({
        "timestamp": np.tile(t, hosts * GPUS),
        "host": host,
        "scope": "gpu",
        "gpu_index": gpu,
        "gpu_uuid": [f"GPU-{h}-{g}" for h, g in zip(host[::per], gpu[::per])
                     for _ in range(per)],
        "power_w": p,
        "energy_j": 1e6 + 0.1 * np.cumsum(p),
        "clock_sm_mhz": rng.choice([1755.0, 1980.0], n),
        "clock_mem_mhz": 2619.0,
        "temp_gpu_c": 40 + 5 * rng.random(n),
        "temp_mem_c": 45 + 5 * rng.random(n),
        "util_gpu_pct": rng.integers(0, 101, n).astype(float),
        "power_limit_w": 700.0,
        "throttle_reasons": rng.choice(np.array([0, 4], dtype=np.uint64), n),
    })
    return conform(df)


def pyarrow_write(df: pd.DataFrame, root: Path, fsync: bool = True) -> list[Path]:
    """The write baseline (issue 37): what ``write_store`` writes, done with bare
    pyarrow: one Arrow table of the frame, one file per (date, host) partition in the
    same folders, page checksums, zstd, fsync, the CRC-32 of the bytes in the name, an
    atomic rename.  No validation, no duplicate check, no lock."""
    import uuid
    import zlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    ts = pd.DatetimeIndex(df["timestamp"]).as_unit("ns").asi8
    day = ts // (86_400 * 10**9)
    host_codes, host_names = pd.factorize(df["host"], sort=True)
    key = day * len(host_names) + host_codes
    order = np.argsort(key, kind="stable")
    bounds = np.flatnonzero(np.diff(key[order])) + 1
    out = []
    for rows in np.split(order, bounds):
        first = int(rows[0])
        date = np.datetime64(int(day[first]), "D").astype(str)
        folder = root / date / str(host_names[host_codes[first]])
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".tmp-{uuid.uuid4().hex[:12]}.partial"
        pq.write_table(table.take(pa.array(rows)), tmp, compression="zstd",
                       write_page_checksum=True)
        with open(tmp, "rb") as fh:
            if fsync:
                os.fsync(fh.fileno())
            crc = zlib.crc32(fh.read())
        target = folder / f"part-{uuid.uuid4().hex[:12]}-c{crc:08x}.parquet"
        os.replace(tmp, target)
        out.append(target)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=5e6)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--target", type=float, default=1.3,
                    help="most read_store / pyarrow, full and projected (default 1.3)")
    ap.add_argument("--write-target", type=float, default=1.2,
                    help="most write_store / pyarrow write (default 1.2, issue 37)")
    args = ap.parse_args(argv)
    if args.repeat < 3:
        ap.error("--repeat must be at least 3")

    import pyarrow as pa
    import pyarrow.parquet as pq

    from powerlab.telemetry.store import list_files, read_store, write_store
    from powerlab.telemetry.storefiles import release_locks

    load_before = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench_store-"))
    try:
        df = make_frame(int(args.rows), args.hosts)
        write_store(df, tmp, fsync=False)
        release_locks()
        files = list_files(tmp)
        n = len(df)
        # write: write_store against the bare pyarrow write, interleaved, each into a
        # fresh folder, fsync on in both
        wt: dict[str, list[float]] = {"pyarrow write": [], "write_store": []}
        wc: dict[str, list[float]] = {k: [] for k in wt}
        for r in range(args.repeat):
            for name in wt:
                dest = tmp.parent / f"{tmp.name}-w{r}-{len(wt[name])}"
                c0, t0 = time.process_time(), time.perf_counter()
                got = (pyarrow_write(df, dest) if name == "pyarrow write"
                       else write_store(df, dest))
                wt[name].append(time.perf_counter() - t0)
                wc[name].append(time.process_time() - c0)
                release_locks()
                assert len(got) == len(files), (name, len(got), len(files))
                shutil.rmtree(dest, ignore_errors=True)
        del df

        few = ["timestamp", "host", "scope", "gpu_index", "gpu_uuid", "power_w"]

        def baseline(columns=None):
            return pa.concat_tables([pq.read_table(f, columns=columns)
                                     for f in files]).to_pandas()

        steps = {"pyarrow+to_pandas": baseline,
                 "read_store": lambda: read_store(tmp),
                 "pyarrow[power_w]+to_pandas": lambda: baseline(few),
                 "read_store[power_w]": lambda: read_store(tmp, columns=["power_w"])}
        times: dict[str, list[float]] = {k: [] for k in steps}
        cpu: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(args.repeat):
            for name, fn in steps.items():
                c0, t0 = time.process_time(), time.perf_counter()
                out = fn()
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
                assert len(out) == n, (name, len(out), n)
                del out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    stat = {k: {"min_s": round(min(v), 4), "median_s": round(float(np.median(v)), 4),
                "cpu_min_s": round(min(cpu[k]), 4)} for k, v in times.items()}
    load_after = os.getloadavg()[0]
    base = stat["pyarrow+to_pandas"]["min_s"]
    ratio = stat["read_store"]["min_s"] / base
    ratio_p = stat["read_store[power_w]"]["min_s"] / stat["pyarrow[power_w]+to_pandas"]["min_s"]
    few = stat["read_store[power_w]"]["min_s"] / stat["read_store"]["min_s"]
    print(f"{n:,} rows in {len(files)} files, {args.repeat} runs each; load average "
          f"{load_before:.1f} before, {load_after:.1f} after ({os.cpu_count()} CPUs)")
    for k, v in stat.items():
        print(f"  {k:26s} min {v['min_s']:.3f} s  median {v['median_s']:.3f} s  "
              f"({v['min_s'] / base:.2f}x baseline)  CPU (all threads) min "
              f"{v['cpu_min_s']:.3f} s")
    ok_ratio = ratio <= args.target
    ok_proj = ratio_p <= args.target
    print(f"read_store / pyarrow = {ratio:.2f}x (target <= {args.target}x): "
          f"{'ok' if ok_ratio else 'MISS'}")
    print(f"read_store[power_w] / pyarrow[power_w] = {ratio_p:.2f}x (target <= "
          f"{args.target}x): {'ok' if ok_proj else 'MISS'}")
    print(f"read_store[power_w] / read_store = {few:.2f}x (projection pushed down)")
    cpu_full = stat["read_store"]["cpu_min_s"] / stat["pyarrow+to_pandas"]["cpu_min_s"]
    cpu_proj = (stat["read_store[power_w]"]["cpu_min_s"]
                / stat["pyarrow[power_w]+to_pandas"]["cpu_min_s"])
    print(f"CPU time, for a loaded machine: full {cpu_full:.2f}x, projected "
          f"{cpu_proj:.2f}x (not the target: wall time is)")
    w_ratio = min(wt["write_store"]) / min(wt["pyarrow write"])
    w_cpu = min(wc["write_store"]) / min(wc["pyarrow write"])
    for k in wt:
        print(f"  {k:26s} min {min(wt[k]):.3f} s  median {np.median(wt[k]):.3f} s  CPU "
              f"min {min(wc[k]):.3f} s")
    ok_write = w_ratio <= args.write_target
    print(f"write_store / pyarrow write = {w_ratio:.2f}x, CPU {w_cpu:.2f}x (target <= "
          f"{args.write_target}x, wall): {'ok' if ok_write else 'MISS'}")
    result = {"benchmark": "store", "rows": n, "files": len(files), **{
        f"{k}_{m}": v[m] for k, v in stat.items() for m in v},
        "ratio_vs_pyarrow": round(ratio, 3), "ratio_projected_vs_pyarrow": round(ratio_p, 3),
        "ratio_few_vs_all": round(few, 3), "cpu_ratio_vs_pyarrow": round(cpu_full, 3),
        "cpu_ratio_projected_vs_pyarrow": round(cpu_proj, 3), "target": args.target,
        "load_avg_1min": [round(load_before, 2), round(load_after, 2)],
        "write_store_min_s": round(min(wt["write_store"]), 4),
        "pyarrow_write_min_s": round(min(wt["pyarrow write"]), 4),
        "ratio_write_vs_pyarrow": round(w_ratio, 3), "cpu_ratio_write_vs_pyarrow":
        round(w_cpu, 3), "write_target": args.write_target,
        "ok": bool(ok_ratio and ok_proj and ok_write)}
    print("RESULT " + json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
