"""Benchmark of the power-swing forecast engine (issue 16).

Targets, each timed as min and median of >= 3 runs:

- 7 days at 100 ms, 100,000 GPUs in 20 jobs, 20 draws, reducing per interval as it goes
  (``keep_ticks=False``): < 10 s and < 1 GiB peak (traced numpy/Python allocations);
- linear in horizon: the 7-day time <= 8 x the 24-hour time;
- 24 hours at 10 ms ticks (the 3-30 Hz grid band): < 15 s;
- flat in the GPU count (1k -> 100k GPUs: < 2 x);

with a baseline measured in the same run: the *numpy floor*, the least any per-tick
engine does (per draw, one cumulative sum over the ticks and one reduction to 1-s means).
Times are the process's CPU time (the engine runs on one thread, so on an idle machine
this is its wall time; on a shared machine it leaves out other tenants' time); the wall
time is printed alongside and kept in the RESULT rows (``wall_s_min``, ``wall_s_median``).
The brute-force per-GPU reference (tests/reference_sim.py) is timed on a small case for
the speed-up.  Exits 1 on a missed target; the last line is ``RESULT {json}``.

    python benchmarks/bench_forecast.py [--quick] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from powerlab.grid.forecast import forecast
from powerlab.grid.scenario import parse_scenario
from powerlab.grid.swings import resolved_bands


def scenario(total_gpus: int, n_jobs: int = 20, hours: float = 24.0, tick_s: float = 0.1,
             jitter_s: float = 0.05, failure_rate_per_gpu_h: float = 2e-5):
    """``n_jobs`` jobs sharing ``total_gpus``, staggered by the hour, with checkpoints,
    evaluations, failures and jitter."""
    per = max(1, total_gpus // n_jobs)
    jobs = []
    for i in range(n_jobs):
        off_h = i % 6 if hours >= 12 else 0
        jobs.append({
            "name": f"job{i:02d}", "gpus": per,
            "start_utc": f"2025-01-01T{off_h:02d}:00:00Z",
            "duration_s": hours * 3600 - off_h * 3600, "step_time_s": 4.0 + 0.37 * i,
            "compute_fraction": 0.75, "startup_s": 300 if hours >= 1 else 30,
            "shutdown_s": 60 if hours >= 1 else 10, "jitter_s": jitter_s,
            "checkpoint": {"interval_s": 1800 if hours >= 1 else 300, "duration_s": 60},
            "eval": {"interval_s": 3600 if hours >= 1 else 200, "duration_s": 120
                     if hours >= 1 else 15},
            "failures": {"rate_per_gpu_h": failure_rate_per_gpu_h, "restart_s": 600
                         if hours >= 1 else 60},
        })
    day, hh = divmod(int(hours), 24)
    end = f"2025-01-{1 + day:02d}T{hh:02d}:{int(hours * 60) % 60:02d}:00Z"
    return parse_scenario({
        "name": f"bench-{total_gpus}", "simulation": {"tick_s": tick_s},
        "horizon": {"start_utc": "2025-01-01T00:00:00Z", "end_utc": end},
        "site": {"pue": 1.25, "base_load_w": 1e6}, "hardware": {}, "jobs": jobs})


def numpy_floor(n_ticks: int, draws: int, per: int) -> None:
    """The least a per-tick engine does: per draw a cumulative sum and 1-s means."""
    for d in range(draws):
        x = np.cumsum(np.full(n_ticks, 1.0 + d))
        np.add.reduceat(x, np.arange(0, n_ticks, per))


def timed(fn, runs: int, trace: bool = False):
    """(min, median, peak MiB of the first run, last result) of the process CPU time,
    with the wall-clock (min, median) in ``timed.wall``.

    The engine is single-threaded, so on an idle machine its CPU time is its wall time;
    on a shared machine the CPU time leaves out the time other tenants hold the cores.
    The first run is traced for the peak memory (not timed: tracing slows allocation).
    """
    cpu, wall, peak, out = [], [], float("nan"), None
    if trace:
        tracemalloc.start()
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out = None
    for i in range(runs):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
        if i < runs - 1:
            out = None
    timed.wall = (min(wall), statistics.median(wall))
    return min(cpu), statistics.median(cpu), peak, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (2 h and 1 day instead of 1 and 7 days)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    runs = max(3, args.runs)
    draws = 20
    short_h, long_h, fine_h = (2, 24, 2) if args.quick else (24, 168, 24)
    rows, ok_all = [], True

    def row(case, size, tmin, tmed, peak, base, target, ok, wall=None):
        nonlocal ok_all
        ok_all &= bool(ok)
        rows.append({"case": case, "size": size, "time_s_min": round(tmin, 4),
                     "time_s_median": round(tmed, 4),
                     "peak_mib": None if np.isnan(peak) else round(peak, 1),
                     "baseline_s": round(base, 4), "ratio": round(tmin / base, 2),
                     "target": target, "pass": bool(ok),
                     **({"wall_s_min": round(wall[0], 4), "wall_s_median": round(wall[1], 4)}
                        if wall else {})})
        w = f"  wall {wall[0]:6.2f}/{wall[1]:6.2f} s" if wall else ""
        print(f"  {case:<40} cpu min {tmin:6.2f} s  median {tmed:6.2f} s{w}  peak "
              f"{peak:6.1f} MiB  floor {base:5.2f} s ({tmin / base:5.1f} x)  "
              f"[{target}] {'OK' if ok else 'MISSED'}")

    import os

    print(f"powerlab forecast benchmark: 100,000 GPUs, 20 jobs, {draws} draws, "
          f"keep_ticks=False, {runs} runs each; times are process CPU seconds (wall "
          f"alongside); load average before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    res_by = {}
    for hours, tick, target_s in ((short_h, 0.1, None), (long_h, 0.1, 10.0),
                                  (fine_h, 0.01, 15.0)):
        sc = scenario(100_000, hours=hours, tick_s=tick)
        n = round(hours * 3600 / tick)
        fb = timed(lambda n=n, tick=tick: numpy_floor(n, draws, round(1 / tick)), runs)[0]
        tmin, tmed, peak, res = timed(
            lambda sc=sc: forecast(sc, draws=draws, seed=0, keep_ticks=False), runs,
            trace=True)
        wall = timed.wall
        res_by[(hours, tick)] = (tmin, res)
        case = f"{hours:g} h at {tick * 1000:g} ms"
        if target_s is None:
            row(case, f"{n:,} ticks", tmin, tmed, peak, fb, "reference point", True, wall)
        elif tick == 0.1:
            scale = args.quick and (target_s * long_h / 168) or target_s
            row(case, f"{n:,} ticks", tmin, tmed, peak, fb,
                f"< {scale:g} s, < 1024 MiB", tmin < scale and peak < 1024, wall)
        else:
            scale = args.quick and (target_s * fine_h / 24) or target_s
            row(case, f"{n:,} ticks", tmin, tmed, peak, fb, f"< {scale:g} s",
                tmin < scale, wall)
        bands = ", ".join(f"{k}: {'up to ' + format(v[1], 'g') + ' Hz' if v[1] else 'no'}"
                          for k, v in resolved_bands(tick).items())
        print(f"    tick {tick:g} s resolves {bands}")
        del res
    t_short, t_long = res_by[(short_h, 0.1)][0], res_by[(long_h, 0.1)][0]
    lin = t_long / t_short
    allowed = 8.0 * (long_h / short_h) / 7.0
    row(f"linearity {long_h:g} h / {short_h:g} h", f"{long_h / short_h:g} x the ticks",
        t_long, t_long, float("nan"), t_short, f"<= {allowed:g} x", lin <= allowed)

    print("scaling with the GPU count (2 h at 100 ms):")
    t_g = {}
    for g in (1_000, 100_000):
        sc = scenario(g, hours=2)
        t_g[g] = timed(lambda sc=sc: forecast(sc, draws=draws, keep_ticks=False), runs)[0]
    row("100k GPUs / 1k GPUs", "100 x the GPUs", t_g[100_000], t_g[100_000],
        float("nan"), t_g[1_000], "< 2 x", t_g[100_000] < 2 * t_g[1_000])

    from tests.reference_sim import simulate

    small = scenario(64, n_jobs=2, hours=0.5, failure_rate_per_gpu_h=0.02)
    t_ref = timed(lambda: simulate(small, draws=2, seed=0), 1)[0]
    t_eng, _, _, eng = timed(lambda: forecast(small, draws=2, seed=0), runs)
    ref = simulate(small, draws=2, seed=0)
    err = float(abs(eng.it_w / ref["it_w"] - 1).max())
    print(f"brute-force per-GPU reference, 64 GPUs, 2 jobs, 30 min: reference {t_ref:.2f} s, "
          f"engine {t_eng:.4f} s ({t_ref / t_eng:,.0f} x faster), max relative "
          f"difference {err:.1e}")
    row("agreement with the per-GPU reference", "64 GPUs, 30 min", t_eng, t_eng,
        float("nan"), t_ref, "relative difference < 1e-6", err < 1e-6)
    print(f"{'all targets met' if ok_all else 'TARGET MISSED'}")
    print("RESULT " + json.dumps({"benchmark": "forecast", "rows": rows}))
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
