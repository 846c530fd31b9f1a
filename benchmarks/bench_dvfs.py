"""Benchmark: time-of-day (DVFS) fit, linear in the span and in the number of restarts.

Training logs from the synthetic twin (64 GPUs, steps of ~10 s: 8.2 s at maximum clock,
1.5 % time-of-day amplitude) with two restarts a day, at 54, 182 and 365 days (730
restarts); ``fit_time_of_day`` with its defaults (GLS with AR(1) errors + HAC, 1-4
harmonics by BIC, level-shift search, day-block test, 2,000 bootstrap draws, MSTL for
spans of two weeks or more).  Each size is fitted in its own subprocess, which loads the
log and times ``--runs`` fits (min / median; at least 5 for the shortest logs, the
denominators of the linearity ratios); its peak resident memory (``ru_maxrss``,
log included; ``VmHWM``) is the memory figure.  Data generation is not timed.

Same-run baseline: the explicit-dummy path (one dense dummy column per segment, fitted
by statsmodels; ``tests/support/dvfs_reference.py``) at 54 days, which is also the reference
the estimates must equal to 1e-6.

Targets (issue 16): 365 days with two restarts a day < 15 s and < 2 GiB peak; time
linear in the span (365 d / 54 d <= 1.25 x the span ratio) and in the restarts (10 a day
vs 2 a day over 54 days < 1.5 x); estimates equal to the explicit-dummy path to 1e-6.
Exits 1 on a miss; the last line is ``RESULT {json}``.

Usage: python benchmarks/bench_dvfs.py [--runs 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TZ = "America/New_York"
TOL = 1e-6


def make_log(days: float, per_day: int, path: Path) -> dict:
    """Simulate a run with ``per_day`` restarts a day; pickle its step log to ``path``."""
    import pandas as pd

    from powerlab.throughput.synth import simulate_training
    start = pd.Timestamp("2025-06-03", tz="UTC")
    restarts = [start + pd.Timedelta(hours=24 / per_day * (i + 0.5))
                for i in range(int(days * per_day))]
    t0 = time.perf_counter()
    run = simulate_training(start, days=days, amplitude_pct=1.5, seed=1, n_hosts=8,
                            gpus_per_host=8, step_time_s=8.2, stragglers=3,
                            restarts=restarts, telemetry=False, telemetry_interval_s=300.0)
    run.steps.to_pickle(path)
    return {"steps": len(run.steps), "restarts": len(restarts),
            "generate_s": time.perf_counter() - t0}


def peak_rss_mib() -> float:
    """This process's peak resident memory [MiB]: ``VmHWM`` (``ru_maxrss`` can carry the
    parent's peak across fork + exec on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(path: str, runs: int, reference: bool) -> None:
    """Load one log, time ``runs`` fits, print one JSON line."""
    import contextlib

    import pandas as pd

    from powerlab.throughput.dvfs import fit_time_of_day
    sys.path.insert(0, str(REPO))
    from tests.support.dvfs_reference import explicit_dummy_path
    steps = pd.read_pickle(path)
    rss_data = peak_rss_mib()
    times = []
    for _ in range(runs):
        ctx = explicit_dummy_path() if reference else contextlib.nullcontext()
        with ctx:
            t0 = time.perf_counter()
            res = fit_time_of_day(steps, site_tz=TZ)
            times.append(time.perf_counter() - t0)
    est = {"amplitude": [res.amplitude_pct, *res.amplitude_ci_pct],
           "pvalues": [res.pvalue, res.pvalue_model, res.wald_chi2],
           "coef": res.coef.tolist(), "cov": res.cov.ravel().tolist(),
           "bic": list(res.ic_values.values()),
           "profile": res.profile.to_numpy().ravel().tolist()}
    print(json.dumps({"times": times,
                      "peak_mib": peak_rss_mib(),
                      "data_mib": rss_data, "intervals": res.counts["n_intervals"],
                      "segments": int(res.intervals["segment"].nunique()),
                      "timings": res.timings, "estimates": est}))


def run_child(path: Path, runs: int, reference: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--child", str(path), "--runs", str(runs)]
    if reference:
        cmd.append("--reference")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode != 0:
        raise SystemExit(f"child failed for {path.name}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def max_rel_diff(a: dict, b: dict) -> float:
    """Largest difference relative to each reference value (floor: 1e-9 of the largest)."""
    worst = 0.0
    for k, v in a.items():
        x, y = np.asarray(v, float), np.asarray(b[k], float)
        floor = 1e-9 * np.max(np.abs(y))
        worst = max(worst, float(np.max(np.abs(x - y) / np.maximum(np.abs(y), floor))))
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="15 / 30 / 60 days (targets scaled) for development")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.runs, args.reference)
        return 0
    runs = max(3, args.runs)
    small, mid, big = (15, 30, 60) if args.quick else (54, 182, 365)
    target_s = 15.0 * big / 365
    rows, ok_all = [], True

    def row(case, size, tmin, tmed, peak, base, target, ok):
        nonlocal ok_all
        ok_all &= bool(ok)
        rows.append({"case": case, "size": size, "time_s_min": round(tmin, 4),
                     "time_s_median": round(tmed, 4),
                     "peak_mib": None if peak is None else round(peak, 1),
                     "baseline_s": round(base, 4), "ratio": round(tmin / base, 3),
                     "target": target, "pass": bool(ok)})
        pk = "" if peak is None else f"  peak {peak:7.0f} MiB"
        print(f"  {case:<52} min {tmin:7.3f} s  median {tmed:7.3f} s{pk}  baseline "
              f"{base:7.3f} s ({tmin / base:6.3f} x)  [{target}] {'OK' if ok else 'MISSED'}",
              flush=True)

    print(f"powerlab DVFS benchmark: fit_time_of_day defaults, 64 GPUs, ~10-s steps, "
          f"{runs} runs per size, load {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        logs = {}
        for days, per_day in ((small, 2), (small, 10), (mid, 2), (big, 2)):
            path = Path(tmp) / f"steps_{days}_{per_day}.pkl"
            info = make_log(days, per_day, path)
            logs[(days, per_day)] = (path, info)
            print(f"  log {days} d, {per_day} restarts/day: {info['steps']:,} steps, "
                  f"{info['restarts']} restarts (generated in {info['generate_s']:.1f} s, "
                  "not timed)", flush=True)
        # the short logs take about a second a fit: more runs steady the linearity ratios
        out = {k: run_child(p, runs if k[0] != small else max(runs, 5))
               for k, (p, _) in logs.items()}
        ref = run_child(logs[(small, 2)][0], runs, reference=True)

    def size(k):
        o, info = out[k], logs[k][1]
        return (f"{k[0]} d, {info['steps']:,} steps, {o['intervals']:,} intervals, "
                f"{info['restarts']} restarts")

    def tm(o):
        return min(o["times"]), statistics.median(o["times"])

    base = min(ref["times"])
    info = logs[(small, 2)][1]
    row(f"{small} d, explicit dummies (old path, baseline)",
        f"{small} d, {info['steps']:,} steps, {ref['intervals']:,} intervals, "
        f"{info['restarts']} restarts", *tm(ref), ref["peak_mib"], base, "reference point",
        True)
    for k in ((small, 2), (mid, 2)):
        row(f"{k[0]} d, 2 restarts/day", size(k), *tm(out[k]), out[k]["peak_mib"], base,
            "reference point", True)
    o = out[(big, 2)]
    tmin, tmed = tm(o)
    row(f"{big} d, 2 restarts/day", size((big, 2)), tmin, tmed, o["peak_mib"], base,
        f"< {target_s:g} s, < 2048 MiB", tmin < target_s and o["peak_mib"] < 2048)
    t_small = min(out[(small, 2)]["times"])
    allowed = 1.25 * big / small
    row(f"linearity in span: {big} d / {small} d", f"{big / small:.2f} x the span", tmin,
        tmin, None, t_small, f"<= {allowed:.2f} x", tmin / t_small <= allowed)
    o10 = out[(small, 10)]
    row(f"linearity in restarts: {small} d, 10 vs 2 restarts/day",
        f"{logs[(small, 10)][1]['restarts']} vs {logs[(small, 2)][1]['restarts']} restarts",
        *tm(o10), o10["peak_mib"], t_small, "< 1.5 x", min(o10["times"]) / t_small < 1.5)
    err = max_rel_diff(out[(small, 2)]["estimates"], ref["estimates"])
    print(f"  estimates at {small} d vs the explicit-dummy path: max relative difference "
          f"{err:.1e} (coefficients, covariance, amplitude and CI, p-values, BIC, profile)")
    row("agreement with the explicit-dummy path", f"{small} d", t_small, t_small, None,
        base, f"relative difference < {TOL:g} (got {err:.1e})", err < TOL)
    print(f"  peak memory at {big} d: {o['peak_mib']:.0f} MiB, of which {o['data_mib']:.0f} MiB "
          "interpreter, imports and the loaded log")
    print(f"  where the time goes at {big} d (last run): " + ", ".join(
        f"{k} {v:.2f} s" for k, v in o["timings"].items() if k != "total"))
    print(f"  load at the end: {os.getloadavg()[0]:.2f}")
    print("all targets met" if ok_all else "TARGET MISSED")
    print("RESULT " + json.dumps({"benchmark": "dvfs", "rows": rows}))
    return 0 if ok_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
