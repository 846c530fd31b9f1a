"""Benchmark: the collector's own CPU cost per GPU-sample, against the fake NVML library.

Run:  python benchmarks/bench_collector.py [--gpus 8] [--seconds 5]

What is measured (CPU time of this process, all threads, ``time.process_time``):

1. baseline -- a bare loop of the same pynvml calls the collector makes per GPU-sample
   (one nvmlDeviceGetFieldValues for 4 fields, GPU temperature, SM and memory clocks,
   clock-event reasons, utilisation, power limit).  This is the "NVML time": the pynvml
   bindings plus the fake library.  The fake's own C time per call is shown separately.
2. ``Device.read`` -- powerlab's NVML boundary (error mapping, unit conversion).  It
   calls the library's nvmlDeviceGetFieldValues on a prebuilt request instead of
   pynvml's wrapper (which fills the request field by field), so it can cost less than
   the baseline: a negative ``device_read_overhead_us``.
3. ``Collector`` at 100 Hz on N GPUs, writing to a Parquet store every flush interval
   (default 10 s, the collector's default; the stop at the end flushes too): total CPU
   per GPU-sample, and the collector's own share = total - baseline.  Target: 8 GPUs at
   100 Hz on < 5 % of one core, i.e. <= 60 us of collector CPU per GPU-sample.
4. The highest sustainable rate: the collector asked for 2 kHz on N GPUs; the achieved tick
   rate is the ceiling on this machine.

Figures depend on the machine and its load; ratios against the baseline measured in the
same run are the comparable numbers.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fake_nvml_util import build_fake_nvml, use_in_process, write_scenario


def _scenario(n_gpus: int, folder: Path) -> Path:
    return write_scenario(folder / "bench.txt", {
        "gpus": n_gpus,
        "gpu*.power_mw": "0:150000 0.2:420000 0.5:260000 @0.7",
        "gpu*.clock_sm_mhz": "0:1980 0.25:1410 @0.5",
        "gpu*.throttle": "0:0 0.25:4 @0.5",
    })


def bench_fake_c(lib: ctypes.CDLL, n: int) -> float:
    """The fake's own time per call [us] (ctypes call overhead included)."""
    h = ctypes.c_void_p()
    lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
    out = ctypes.c_uint()
    f = lib.nvmlDeviceGetClockInfo
    t0 = time.process_time()
    for _ in range(n):
        f(h, 1, ctypes.byref(out))
    return (time.process_time() - t0) / n * 1e6


def bench_baseline(pynvml, n_gpus: int, n: int) -> float:
    """CPU per GPU-sample [us] of the bare pynvml calls the collector makes."""
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n_gpus)]
    ids = [186, 185, 83, 82]
    reps = max(1, n // n_gpus)
    t0 = time.process_time()
    for _ in range(reps):
        for h in handles:
            pynvml.nvmlDeviceGetFieldValues(h, ids)
            pynvml.nvmlDeviceGetTemperature(h, 0)
            pynvml.nvmlDeviceGetClockInfo(h, 1)
            pynvml.nvmlDeviceGetClockInfo(h, 2)
            pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
            pynvml.nvmlDeviceGetUtilizationRates(h)
            pynvml.nvmlDeviceGetEnforcedPowerLimit(h)
    return (time.process_time() - t0) / (reps * n_gpus) * 1e6


def bench_device_read(nvml, n_gpus: int, n: int) -> float:
    """CPU per GPU-sample [us] of powerlab.collect.nvml.Device.read."""
    devs = nvml.open_devices()
    reps = max(1, n // n_gpus)
    t0 = time.process_time()
    for _ in range(reps):
        for d in devs:
            d.read()
    return (time.process_time() - t0) / (reps * n_gpus) * 1e6


def bench_collector(Collector, interval_s: float, seconds: float, store: Path,
                    flush_interval_s: float) -> dict:
    c = Collector(store, interval_s=interval_s, flush_interval_s=flush_interval_s,
                  host="bench")
    c.start()
    time.sleep(1.0)  # settle: start-up (probe, first imports) is not per-sample cost
    n0 = int(c.rates()["samples"].sum())
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(seconds)
    # steady state: sampling, buffering and the periodic flushes within the window
    steady_cpu = time.process_time() - cpu0
    steady_wall = time.perf_counter() - wall0
    steady_n = int(c.rates()["samples"].sum()) - n0
    rep = c.stop()
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    samples = int(rep.gpus["samples"].sum()) - n0
    return {
        "steady_cpu_us_per_gpu_sample": steady_cpu / max(steady_n, 1) * 1e6,
        "steady_core_pct": 100 * steady_cpu / steady_wall,
        "target_hz": 1 / interval_s,
        "achieved_tick_hz": rep.ticks / rep.duration_s,
        "gpu_samples": samples,
        "missed_ticks": rep.missed_ticks,
        "cpu_s": cpu,
        "wall_s": wall,
        "core_pct": 100 * cpu / wall,
        "cpu_us_per_gpu_sample": cpu / max(samples, 1) * 1e6,
        "jitter_ms_median": float(rep.gpus["jitter_ms"].median()),
        "rows_written": rep.rows_written,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--flush-interval-s", type=float, default=10.0,
                    help="the collector's flush interval (its default: 10 s)")
    ap.add_argument("--calls", type=int, default=40000)
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench_collector_"))
    libdir = build_fake_nvml()
    os.environ["FAKE_NVML_SCENARIO"] = str(_scenario(args.gpus, tmp))
    lib = use_in_process(libdir)

    import pynvml

    from powerlab.collect import nvml
    from powerlab.collect.collector import Collector

    nvml.init()
    fake_us = bench_fake_c(lib, args.calls)
    base_us = bench_baseline(pynvml, args.gpus, args.calls // 4)
    read_us = bench_device_read(nvml, args.gpus, args.calls // 4)
    bench_collector(Collector, 0.01, 0.3, tmp / "warmup", 0.1)  # imports, first writes
    at100 = bench_collector(Collector, 0.01, args.seconds, tmp / "store100",
                            args.flush_interval_s)
    fast = bench_collector(Collector, 0.0005, min(args.seconds, 3.0), tmp / "storefast",
                           args.flush_interval_s)

    # headline: steady state of a running collector (sampling, buffering, periodic
    # flushes); the run including its stop (final flush, report) is shown beside it
    own_us = at100["steady_cpu_us_per_gpu_sample"] - base_us
    own_core_pct = own_us * 1e-6 * 100 * args.gpus * 100  # at 100 Hz on N GPUs
    own_with_stop_us = at100["cpu_us_per_gpu_sample"] - base_us
    results = {
        "gpus": args.gpus,
        "flush_interval_s": args.flush_interval_s,
        "fake_c_us_per_call": round(fake_us, 2),
        "baseline_pynvml_us_per_gpu_sample": round(base_us, 1),
        "device_read_us_per_gpu_sample": round(read_us, 1),
        "device_read_overhead_us": round(read_us - base_us, 1),
        "collector_100hz": {k: (round(v, 3) if isinstance(v, float) else v)
                            for k, v in at100.items()},
        "collector_own_us_per_gpu_sample": round(own_us, 1),
        "collector_own_us_per_gpu_sample_incl_stop": round(own_with_stop_us, 1),
        "collector_own_core_pct_at_100hz": round(own_core_pct, 2),
        "ratio_collector_total_to_baseline": round(
            at100["steady_cpu_us_per_gpu_sample"] / base_us, 2),
        "target_us_per_gpu_sample": 60.0,
        "meets_target": own_us <= 60.0,
        "max_sustainable": {
            "asked_hz": fast["target_hz"],
            "achieved_tick_hz": round(fast["achieved_tick_hz"], 1),
            "gpu_samples_per_s": round(fast["gpu_samples"] / fast["wall_s"], 1),
            "core_pct": round(fast["core_pct"], 1),
            "cpu_us_per_gpu_sample": round(fast["cpu_us_per_gpu_sample"], 1),
        },
    }
    print(json.dumps(results, indent=2))
    print(f"\ncollector own CPU per GPU-sample, steady state: {own_us:.1f} us (target <= 60 "
          f"us; {own_with_stop_us:.1f} us counting the stop's final flush and report "
          f"over a {args.seconds:g} s run); "
          f"total {at100['steady_cpu_us_per_gpu_sample']:.1f} us = "
          f"{results['ratio_collector_total_to_baseline']:.2f} x bare pynvml "
          f"({base_us:.1f} us); {args.gpus} GPUs at 100 Hz use {at100['steady_core_pct']:.1f} % of "
          f"one core in all ({own_core_pct:.2f} % for the collector itself); highest "
          f"sustainable rate for {args.gpus} GPUs here: "
          f"{fast['achieved_tick_hz']:.0f} Hz")
    nvml.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
