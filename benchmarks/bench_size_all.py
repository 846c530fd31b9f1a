"""Benchmark: ``powerlab size-mitigation`` on every bundled scenario x requirement pair.

Issue 20 ("Done when"): on every pair of ``data/scenarios/*.yaml`` x
``data/requirements/*.yaml`` the command either lists passing options or stops in under
10 s with the reason and the command that can assess it.  Each pair runs the real CLI in
a fresh process (``python -m powerlab.cli size-mitigation ... --quiet``, as a user would;
interpreter start-up included), and the table gives wall time, exit code and status.

Baseline, measured in the same run: the interpreter with ``import powerlab.cli`` alone
(what any command costs before it does anything); the ratio column is each pair's time
over it.  Targets: a pair that stops (exit 3, not assessable) takes < 10 s and prints a
``run:`` command; a pair that searches (exit 0 or 1) is only reported (``--search`` runs
them; without it a searching pair is still run, its time reported, no target).

    python benchmarks/bench_size_all.py [--draws 3] [--timeout 900]

Exits 1 on a missed target; the last line is ``RESULT {json}`` (see benchmarks/run_all.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STOP_TARGET_S = 10.0
STATUS = {0: "options_found", 1: "none_passes", 2: "bad input", 3: "not_assessable"}


def _run(argv: list[str], timeout: float) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True,
                           text=True, timeout=timeout, check=False)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        rc, out = -1, f"timed out after {timeout:g} s"
    return time.perf_counter() - t0, rc, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="per pair [s] (a search of a 24-h site can take minutes)")
    args = ap.parse_args()
    base_s, rc, out = _run(["-c", "import powerlab.cli"], 60)
    if rc != 0:
        print(out)
        return 1
    scenarios = sorted((ROOT / "data" / "scenarios").glob("*.yaml"))
    reqs = sorted((ROOT / "data" / "requirements").glob("*.yaml"))
    rows, ok = [], True
    print(f"baseline: python -c 'import powerlab.cli' {base_s:.2f} s")
    print(f"{'scenario':<28}{'requirements':<36}{'time_s':>8}{'x base':>8}  rc  status")
    with tempfile.TemporaryDirectory() as tmp:
        for sc in scenarios:
            for rq in reqs:
                outdir = Path(tmp) / f"{sc.stem}__{rq.stem}"
                argv = ["-m", "powerlab.cli", "size-mitigation", str(sc.relative_to(ROOT)),
                        "--requirements", str(rq.relative_to(ROOT)), "--out", str(outdir),
                        "--draws", str(args.draws), "--quiet"]
                dt, rc, out = _run(argv, args.timeout)
                status = next((ln.split("status: ", 1)[1].split(";")[0]
                               for ln in out.splitlines() if ln.startswith("status: ")),
                              STATUS.get(rc, f"error ({out.strip().splitlines()[-1:]})"))
                hit = True
                if rc == 3:
                    hit = dt < STOP_TARGET_S and "run: powerlab size-mitigation" in out
                elif rc not in (0, 1):
                    hit = False
                ok &= hit
                cmd = next((ln.split("run: ", 1)[1] for ln in out.splitlines()
                            if "run: powerlab" in ln), "")
                rows.append({"case": f"{sc.stem} x {rq.stem}", "size": status,
                             "time_s_min": dt, "time_s_median": dt, "peak_mib": None,
                             "baseline_s": base_s, "ratio": dt / base_s,
                             "target": (f"stop < {STOP_TARGET_S:g} s" if rc == 3
                                        else "report"), "pass": hit,
                             "scenario": sc.name, "requirements": rq.name, "time_s": dt,
                             "rc": rc, "command": cmd})
                print(f"{sc.name:<28}{rq.name:<36}{dt:8.2f}{dt / base_s:8.1f}  {rc:>2}  "
                      f"{status}{'' if hit else '  <-- MISSED'}")
                if cmd:
                    print(f"{'':<28}-> {cmd}")
    stops = [r["time_s"] for r in rows if r["rc"] == 3]
    print(f"pairs: {len(rows)}; stopped (not assessable): {len(stops)}, slowest stop "
          f"{max(stops, default=0):.2f} s (target < {STOP_TARGET_S:g} s); searched: "
          f"{sum(r['rc'] in (0, 1) for r in rows)}")
    print("RESULT " + json.dumps({"bench": "size_all", "ok": bool(ok), "baseline_s": base_s,
                                  "rows": rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
