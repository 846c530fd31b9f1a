"""Benchmark: nvidia-smi reader and Parquet store against bare baselines, same run.

Prints rows/s for

* ``powerlab.iotools.read_nvidia_smi`` on the real 8-GPU H100 trace
  (``../shared/data/nvidia-smi-h100-100ms/h100-traces_ckpt100.csv``) against a plain
  ``pandas.read_csv`` of the same file (target: ratio <= 2), with the share of the
  reader's time spent in ``schema.validate``;
* ``powerlab.telemetry.store.write_store`` / ``read_store`` against bare ``pyarrow.parquet``
  ``write_table`` / ``read_table`` of the same table.

Each figure is the best of ``--repeat`` runs, baselines and candidates interleaved.
Run: ``python benchmarks/bench_readers.py [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from powerlab.iotools import read_nvidia_smi
from powerlab.telemetry import schema
from powerlab.telemetry.store import read_store, write_store

REPO = Path(__file__).resolve().parents[1]
CKPT100 = REPO.parent / "shared" / "data" / "nvidia-smi-h100-100ms" / "h100-traces_ckpt100.csv"


def best(fn, repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out


def interleaved(fns: dict, repeat: int) -> dict:
    times = {k: float("inf") for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k] = min(times[k], time.perf_counter() - t)
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    if not CKPT100.is_file():
        print(f"skipped: {CKPT100} not found (the real trace is not bundled)")
        return 0

    df = read_nvidia_smi(CKPT100, tz="America/Los_Angeles", host="h100")
    n = len(df)
    t = interleaved({
        "pandas.read_csv": lambda: pd.read_csv(CKPT100),
        "read_nvidia_smi": lambda: read_nvidia_smi(CKPT100, tz="America/Los_Angeles",
                                                   host="h100"),
        "schema.validate": lambda: schema.validate(df),
    }, args.repeat)
    print(f"nvidia-smi reader, {CKPT100.name}: {n:,} rows, best of {args.repeat}")
    for k in ("pandas.read_csv", "read_nvidia_smi", "schema.validate"):
        print(f"  {k:<28s} {t[k] * 1e3:8.1f} ms  {n / t[k]:>12,.0f} rows/s")
    ratio = t["read_nvidia_smi"] / t["pandas.read_csv"]
    parse_only = (t["read_nvidia_smi"] - t["schema.validate"]) / t["pandas.read_csv"]
    print(f"  ratio read_nvidia_smi / read_csv: {ratio:.2f}x (target <= 2x); without the "
          f"schema.validate share: {parse_only:.2f}x")

    table = pa.Table.from_pandas(df, preserve_index=False)
    tmp = Path(tempfile.mkdtemp(prefix="powerlab-bench-"))
    try:
        k = iter(range(10 ** 6))

        def w_store():
            write_store(df, tmp / f"store{next(k)}")

        def w_pq():
            pq.write_table(table, tmp / f"bare{next(k)}.parquet", compression="zstd")

        tw = interleaved({"write_store": w_store, "pyarrow write_table": w_pq}, args.repeat)
        store = tmp / "store_read"
        write_store(df, store)
        pq.write_table(table, tmp / "bare_read.parquet", compression="zstd")
        tr = interleaved({
            "read_store": lambda: read_store(store),
            "pyarrow read_table": lambda: pq.read_table(tmp / "bare_read.parquet").to_pandas(),
        }, args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"store, same {n:,} rows ({df['host'].nunique()} host, "
          f"{df['timestamp'].dt.date.nunique()} date), best of {args.repeat}")
    for k, v in {**tw, **tr}.items():
        print(f"  {k:<28s} {v * 1e3:8.1f} ms  {n / v:>12,.0f} rows/s")
    w_ratio = tw["write_store"] / tw["pyarrow write_table"]
    r_ratio = tr["read_store"] / tr["pyarrow read_table"]
    print(f"  ratio write_store / write_table: {w_ratio:.2f}x; "
          f"read_store / read_table: {r_ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
