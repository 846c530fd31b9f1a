"""Benchmark of the power-swing forecast engine.

Target (issue 4): 24 h at 100 ms for 100,000 GPUs in 20 jobs with 20 Monte Carlo draws
in under 10 s on a 2-core machine, with time flat as the GPU count grows 1k -> 1M, and
the speed-up over the brute-force per-GPU reference (tests/reference_sim.py) at a size
the reference can handle, all measured in this run.

    python benchmarks/bench_forecast.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from powerlab.grid.forecast import forecast
from powerlab.grid.scenario import parse_scenario


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
    end = f"2025-01-0{1 + int(hours) // 24}T{int(hours) % 24:02d}:{int(hours * 60) % 60:02d}:00Z"
    return parse_scenario({
        "name": f"bench-{total_gpus}", "simulation": {"tick_s": tick_s},
        "horizon": {"start_utc": "2025-01-01T00:00:00Z", "end_utc": end},
        "site": {"pue": 1.25, "base_load_w": 1e6}, "hardware": {}, "jobs": jobs})


def timed(fn, repeat=1):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the 1M-GPU point")
    args = ap.parse_args()
    draws = 20
    print("powerlab forecast benchmark: 24 h at 100 ms (864,000 ticks), 20 jobs, "
          f"{draws} draws")
    sc = scenario(100_000)
    t_main, res = timed(lambda: forecast(sc, draws=draws, seed=0))
    print(f"  100,000 GPUs: forecast {t_main:6.2f} s  (target < 10 s) "
          f"-> {'OK' if t_main < 10 else 'MISSED'}")
    t_sf, _ = timed(res.summary_frame)
    print(f"  summary_frame('1min') of it: {t_sf:.2f} s")
    del res
    print("scaling with the GPU count (same jobs, same horizon):")
    sizes = [1_000, 10_000, 100_000] + ([] if args.quick else [1_000_000])
    times = {}
    for n in sizes:
        sc_n = scenario(n)
        times[n], r = timed(lambda sc_n=sc_n: forecast(sc_n, draws=draws, seed=0))
        del r
        print(f"  {n:>9,} GPUs: {times[n]:6.2f} s  ({times[n] / times[sizes[0]]:.2f} x the "
              f"1k time)")
    print(f"  ratio largest/smallest: {times[sizes[-1]] / times[sizes[0]]:.2f} "
          f"for {sizes[-1] // sizes[0]:,} x the GPUs")

    from tests.reference_sim import simulate

    small = scenario(64, n_jobs=2, hours=0.5, failure_rate_per_gpu_h=0.02)
    t_ref, ref = timed(lambda: simulate(small, draws=2, seed=0))
    t_eng, eng = timed(lambda: forecast(small, draws=2, seed=0), repeat=3)
    err = float(abs(eng.it_w / ref["it_w"] - 1).max())
    ticks = eng.n_ticks
    print("brute-force per-GPU reference (tests/reference_sim.py), 64 GPUs, 2 jobs, 30 min:")
    print(f"  reference {t_ref:.3f} s, engine {t_eng:.4f} s: engine {t_ref / t_eng:,.0f} x "
          f"faster; max relative difference {err:.1e}")
    per_gpu_tick = t_ref / (64 * ticks * 2)
    est = per_gpu_tick * 100_000 * 864_000 * draws
    print(f"  reference extrapolated to the 100,000-GPU day ({per_gpu_tick * 1e9:.0f} ns per "
          f"GPU-tick): ~{est / 3600:,.0f} h vs {t_main:.1f} s ({est / t_main:,.0f} x)")


if __name__ == "__main__":
    main()
