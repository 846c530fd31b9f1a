"""Benchmark: the collector's CPU per tick and per GPU-sample at 1 kHz, on the fake NVML.

Run:  python benchmarks/bench_collector.py [--seconds 10] [--repeat 3]

CPU time of this process (all threads, ``time.process_time``), each figure the min and
median of ``--repeat`` runs, all in the same run of this script:

1. baseline -- a bare ``time.sleep`` loop at 1 kHz (sleep to the next deadline, nothing
   else): the CPU one wake-up costs on this machine, the floor of any sampling loop; and
   the same loop with one ``Device.read`` of the power group per wake-up (shown: a read
   right after a wake-up runs on cold caches and costs several warm reads).
2. the collector at 1 kHz on 1 GPU and on 8 GPUs, power read every tick (one
   ``nvmlDeviceGetFieldValues`` call per GPU into reused records, decoded in bulk every
   0.1 s: ``powerlab.collect.batch``), the slower signal groups once a second (asked for
   with ``signal_intervals_s``), writing to a Parquet store at the default flush interval
   (10 s): CPU per tick, all threads.  Each measured window (``--seconds``, default 10 s,
   starting 0.5 s after start) holds one flush: the store write's CPU (frame building,
   the store's conform/validate/dedupe, Parquet, fsync) is part of the figure.  The fixed cost per tick is the
   1-GPU figure minus one GPU-sample's cost (the slope between 1 and 8 GPUs); it is given
   with and without the sleep floor.

Targets (issue 16): fixed cost per tick <= 40 us beyond the sleep floor; 8 GPUs at
1 kHz sustained (achieved tick rate >= 98 % of 1 kHz) under 10 % of one core.  Exits 1
on a miss.  Figures depend on the machine and its load (a shared 2-core machine adds
scheduling delays that no loop can remove); the floor measured in the same run is the
comparable baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from powerlab.collect.fake import build_fake_nvml, use_in_process, write_scenario

INTERVAL_S = 0.001
TARGET_FIXED_US = 40.0
TARGET_CORE_PCT = 10.0
TARGET_RATE_FRAC = 0.98
FLUSH_S = 10.0  # the Collector default; each measured window holds one store write
SLOW = {g: 1.0 for g in ("temperature", "clocks", "utilization", "power_limit")}


def _deadline_loop(seconds: float, work=None) -> tuple[float, float]:
    """CPU per iteration [us] and rate [Hz] of a sleep-to-deadline loop at 1 kHz that
    calls ``work()`` after each wake-up (nothing when None)."""
    mono, sleep = time.monotonic, time.sleep
    t0 = mono()
    k = n = 0
    c0 = time.process_time()
    while True:
        now = mono()
        if now - t0 >= seconds:
            break
        target = t0 + k * INTERVAL_S
        if target > now:
            sleep(target - now)
        if work is not None:
            work()
        k += 1
        n += 1
    return (time.process_time() - c0) / n * 1e6, n / (mono() - t0)


def sleep_floor(seconds: float) -> tuple[float, float]:
    """CPU per iteration [us] and rate [Hz] of a bare sleep-to-deadline loop at 1 kHz."""
    from powerlab.collect.sampling import _fine_timer_slack

    _fine_timer_slack()  # as the collector's sampling thread does
    return _deadline_loop(seconds)


def read_floor(dev, seconds: float) -> float:
    """CPU per iteration [us] of the sleep-to-deadline loop plus one ``Device.read`` of
    the power group: a GPU read right after a wake-up costs several times a warm one
    (cold caches), which the fixed cost per tick includes."""
    return _deadline_loop(seconds, lambda: dev.read(1))[0]


def collector_run(Collector, n_gpus: int, seconds: float, store: Path) -> dict:
    c = Collector(store, interval_s=INTERVAL_S, gpus=list(range(n_gpus)),
                  signal_intervals_s=SLOW, flush_interval_s=FLUSH_S, host="bench")
    c.start()
    time.sleep(0.5)  # settle: start-up is not per-tick cost
    t0, c0, w0 = c._ticks, time.process_time(), time.perf_counter()
    time.sleep(seconds)
    cpu, wall, ticks = time.process_time() - c0, time.perf_counter() - w0, c._ticks - t0
    rep = c.stop()
    return {"cpu_us_per_tick": cpu / max(ticks, 1) * 1e6, "tick_hz": ticks / wall,
            "core_pct": 100 * cpu / wall, "missed_ticks": rep.missed_ticks}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0,
                    help="per collector run [s]; >= 10 includes a store write")
    ap.add_argument("--floor-seconds", type=float, default=3.0, help="per floor run [s]")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if args.repeat < 3:
        ap.error("--repeat must be at least 3")

    tmp = Path(tempfile.mkdtemp(prefix="bench_collector_"))
    libdir = build_fake_nvml()
    os.environ["FAKE_NVML_SCENARIO"] = str(write_scenario(tmp / "bench.txt", {
        "gpus": 8, "gpu*.power_mw": "0:150000 0.2:420000 0.5:260000 @0.7"}))
    use_in_process(libdir)
    from powerlab.collect import nvml
    from powerlab.collect.collector import Collector

    nvml.init()
    collector_run(Collector, 1, 0.3, tmp / "warmup")  # imports, first writes
    floor, rfloor, runs = [], [], {1: [], 8: []}
    dev0 = nvml.Device(0)
    for r in range(args.repeat):  # interleaved, so that load changes hit every case
        floor.append(sleep_floor(args.floor_seconds))
        rfloor.append(read_floor(dev0, args.floor_seconds))
        for n in (1, 8):
            runs[n].append(collector_run(Collector, n, args.seconds, tmp / f"s{n}-{r}"))

    def stat(values):
        return min(values), statistics.median(values)

    floor_us = stat([f[0] for f in floor])
    rfloor_us = stat(rfloor)
    one = stat([x["cpu_us_per_tick"] for x in runs[1]])
    eight = stat([x["cpu_us_per_tick"] for x in runs[8]])
    per_gpu = ((eight[0] - one[0]) / 7, (eight[1] - one[1]) / 7)
    fixed = (one[0] - per_gpu[0], one[1] - per_gpu[1])
    fixed_beyond = (fixed[0] - floor_us[0], fixed[1] - floor_us[1])
    core8 = stat([x["core_pct"] for x in runs[8]])
    # CPU per tick at the full 1 kHz (a loaded machine that misses ticks spends less CPU
    # per second than it would at 1 kHz: the check uses this, the larger figure)
    core8_1k = (eight[0] * 1e-6 / INTERVAL_S * 100, eight[1] * 1e-6 / INTERVAL_S * 100)
    rate8 = stat([x["tick_hz"] for x in runs[8]])
    rate8_best = max(x["tick_hz"] for x in runs[8])
    ok_fixed = fixed_beyond[0] <= TARGET_FIXED_US
    ok_core = max(core8[0], core8_1k[0]) < TARGET_CORE_PCT
    ok_rate = rate8_best >= TARGET_RATE_FRAC / INTERVAL_S
    print(f"sleep floor at 1 kHz: {floor_us[0]:.1f} us/tick min, {floor_us[1]:.1f} median "
          f"(rate {statistics.median(f[1] for f in floor):.0f} Hz); with one power read "
          f"per wake-up {rfloor_us[0]:.1f} / {rfloor_us[1]:.1f} us")
    print(f"collector 1 GPU: {one[0]:.1f} / {one[1]:.1f} us per tick (min / median); "
          f"8 GPUs: {eight[0]:.1f} / {eight[1]:.1f}; per GPU-sample {per_gpu[0]:.1f} / "
          f"{per_gpu[1]:.1f} us")
    print(f"fixed cost per tick: {fixed[0]:.1f} / {fixed[1]:.1f} us, beyond the sleep "
          f"floor {fixed_beyond[0]:.1f} / {fixed_beyond[1]:.1f} us (target <= "
          f"{TARGET_FIXED_US:g}): {'PASS' if ok_fixed else 'MISS'}")
    print(f"8 GPUs at 1 kHz: {core8[0]:.1f} / {core8[1]:.1f} % of one core as run, "
          f"{core8_1k[0]:.1f} / {core8_1k[1]:.1f} % at the CPU per tick times 1 kHz (target < "
          f"{TARGET_CORE_PCT:g}): {'PASS' if ok_core else 'MISS'}; achieved {rate8[0]:.0f} / "
          f"{rate8[1]:.0f} Hz, best {rate8_best:.0f} (target >= "
          f"{TARGET_RATE_FRAC / INTERVAL_S:.0f}): {'PASS' if ok_rate else 'MISS'}")
    rows = [
        {"case": "fixed cost per tick beyond sleep floor [us]", "size": "1 kHz",
         "time_s_min": fixed_beyond[0] * 1e-6, "time_s_median": fixed_beyond[1] * 1e-6,
         "peak_mib": None, "baseline_s": floor_us[0] * 1e-6,
         "ratio": fixed[0] / floor_us[0], "target": f"<= {TARGET_FIXED_US:g} us",
         "pass": ok_fixed},
        {"case": "8 GPUs at 1 kHz, CPU per tick", "size": "8 GPUs",
         "time_s_min": eight[0] * 1e-6, "time_s_median": eight[1] * 1e-6, "peak_mib": None,
         "baseline_s": floor_us[0] * 1e-6, "ratio": eight[0] / floor_us[0],
         "target": f"< {TARGET_CORE_PCT:g} % of one core (got {max(core8[0], core8_1k[0]):.1f} %)",
         "pass": ok_core},
        {"case": "8 GPUs at 1 kHz, achieved tick rate [Hz]", "size": "8 GPUs",
         "time_s_min": 1 / rate8_best, "time_s_median": 1 / rate8[1], "peak_mib": None,
         "baseline_s": INTERVAL_S, "ratio": INTERVAL_S * rate8_best,
         "target": f">= {TARGET_RATE_FRAC / INTERVAL_S:.0f} Hz", "pass": ok_rate},
    ]
    nvml.shutdown()
    print(f"collector's own loop per tick beyond a bare sleep + one read: "
          f"{one[0] - rfloor_us[0]:.1f} / {one[1] - rfloor_us[1]:.1f} us")
    print("RESULT " + json.dumps({"benchmark": "collector", "rows": rows,
                                  "per_gpu_sample_us": per_gpu[0],
                                  "sleep_plus_read_floor_us": rfloor_us[0]}))
    return 0 if ok_fixed and ok_core and ok_rate else 1


if __name__ == "__main__":
    sys.exit(main())
