"""Start-up time: ``import powerlab`` and ``powerlab --help`` (target <= 0.5 s each).

Each command runs in a fresh interpreter, at least 5 times; the baseline is a bare
``python -c pass`` measured in the same run.  Exits 1 when a target is missed; the last
line is ``RESULT {json}`` (see benchmarks/run_all.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

TARGET_S = 0.5


def _time(argv: list[str], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    py = sys.executable
    base = _time([py, "-c", "pass"], args.repeat)
    cases = {
        "import powerlab": [py, "-c", "import powerlab"],
        "powerlab --help": [py, "-m", "powerlab.cli", "--help"],
        "powerlab forecast --help": [py, "-m", "powerlab.cli", "forecast", "--help"],
    }
    rows, ok = [], True
    print(f"baseline python -c pass: min {min(base):.3f} s, median {statistics.median(base):.3f} s")
    for name, argv in cases.items():
        t = _time(argv, args.repeat)
        passed = min(t) <= TARGET_S
        ok &= passed
        print(f"{name:28s} min {min(t):.3f} s  median {statistics.median(t):.3f} s  "
              f"({min(t) / min(base):.1f}x bare python)  target <= {TARGET_S} s: "
              f"{'PASS' if passed else 'MISS'}")
        rows.append({"case": name, "size": "", "time_s_min": min(t),
                     "time_s_median": statistics.median(t), "peak_mib": None,
                     "baseline_s": min(base), "ratio": min(t) / min(base),
                     "target": f"<= {TARGET_S} s", "pass": passed})
    print("RESULT " + json.dumps({"benchmark": "startup", "rows": rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
