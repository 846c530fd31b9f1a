"""The long fuzz run (issue 24): every public reader and every CLI subcommand on
generated bad input (tests/support/fuzz_harness.py), with a per-case deadline and a capped address
space; prints the outcome counts per target and component and, with ``--write``,
regenerates the fuzz table of docs/robustness.md from this run's counts.

Property per case: a valid result (possibly with a counted DataQualityWarning) or a
powerlab error; at the command line exit 0/1, or 2 with one stderr line.  A traceback, a
hang (no answer within the deadline), a MemoryError or a broken exit contract is a
failure: the first few of each are printed with the generated input, and the run exits 1.

Usage::

    python benchmarks/fuzz.py                      # 400 cases per reader, 30 per command
    python benchmarks/fuzz.py --write              # ... and rewrite docs/robustness.md
    python benchmarks/fuzz.py --readers 20 --cli 3 # quick
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hypothesis import HealthCheck, given, seed, settings

from tests.support.fuzz_harness import _PROM, CLEAN, all_targets, run_case

DOC = REPO / "docs" / "robustness.md"
START, END = "<!-- fuzz:start -->", "<!-- fuzz:end -->"
KINDS = ("ok", "warned", "error", "traceback", "hang", "memory", "badexit")


def _cap_memory(extra_gib: float) -> None:
    """Cap the address space at what is mapped now plus ``extra_gib`` (a bomb then ends
    in MemoryError, counted, instead of swapping the machine)."""
    with open("/proc/self/status") as fh:
        vm = next(int(ln.split()[1]) for ln in fh if ln.startswith("VmSize:")) * 1024
    limit = int(vm + extra_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))


def _warm_chart_engine() -> None:
    """Start vl-convert's JavaScript engine before the address space is capped: V8
    reserves its heap cage (gigabytes of address space, not memory) once per process,
    and under the cap that reservation is a fatal "out of memory" of the whole run
    (seen at the first backtest chart, issue 38), not a MemoryError of one case."""
    try:
        import vl_convert as vlc
    except ImportError:
        return
    vlc.vegalite_to_svg({"mark": "point", "data": {"values": [{"x": 1}]},
                         "encoding": {"x": {"field": "x", "type": "quantitative"}}})


def _one(target, n, counts, failures, work, seed_, deadline_s) -> None:
    if not n:
        return

    @seed(seed_)
    @settings(max_examples=n, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(value=target.strategy())
    def prop(value):
        out = run_case(lambda: target.call(value, work), deadline_s)
        counts[out.kind] += 1
        if out.kind not in CLEAN and len(failures) < 3:
            failures.append(f"{out.kind}: {value!r:.400}\n{out.detail}")

    prop()


def run(n_readers: int, n_cli: int, n_demo: int, work: Path, seed_: int,
        only: str | None = None) -> dict:
    results: dict[str, dict] = {}
    for target in all_targets(work):
        if only and only not in target.name:
            continue
        cli = target.component == "cli"
        n = n_demo if target.name == "cli demo" else n_cli if cli else n_readers
        counts: Counter = Counter()
        failures: list[str] = []
        t0 = time.perf_counter()

        # the demo runs the whole chain (minutes on a loaded machine: a 60-s deadline
        # called one of them a hang in the issue-38 run)
        deadline = 300.0 if target.name == "cli demo" else 60.0 if cli else 20.0
        _one(target, n, counts, failures, work, seed_, deadline)
        results[target.name] = {"component": target.component, "counts": dict(counts),
                                "failures": failures,
                                "seconds": round(time.perf_counter() - t0, 1)}
        bad = sum(v for k, v in counts.items() if k not in CLEAN)
        print(f"{target.name:18s} {sum(counts.values()):5d} cases "
              + " ".join(f"{k}={counts[k]}" for k in KINDS if counts[k])
              + f"  ({results[target.name]['seconds']} s)" + ("  FAILURES" if bad else ""),
              flush=True)
        for f in failures:
            print("   " + f.replace("\n", "\n   "))
    while _PROM:
        _PROM.pop().close()
    return results


WHAT = {
    "readers": ("nvidia-smi, dcgmi dmon, dcgm-exporter, MLPerf power and MLLOG, weather, "
                "sacct (parsable2 and JSON), kernel/DCGM XID and dcgmi health files; "
                "read_prometheus against a local fake server"),
    "scenario": "scenario YAML (read_scenario)",
    "requirements": "requirement spec YAML (read_requirements)",
    "export": "facilities CSV and its sidecar (read_facilities_csv)",
    "flex": ("curtailment targets CSV and OpenADR 3 event JSON (read_targets; hostile "
             "documents: nesting 100,000 deep, 20,000 intervals, values of every JSON type, "
             "durations of months and years, NaN) and meter CSVs (read_site_power)"),
    "reliability": ("failure analytics (kaplan_meier, fit_weibull) on generated durations "
                    "and event flags: NaN, inf, negative, huge, wrong types"),
    "cli": ("every subcommand, in process, with generated arguments and paths (half the "
            "cases valid but one value: NaN, +-inf, 1e18, negative, empty, 400 digits); a "
            "case also fails when a file it names as an input is changed"),
}


def _provenance() -> str:
    """The date (UTC) and the commit the run was made at (+ when the tree had changes)."""
    import datetime
    import subprocess

    def git(*a):
        r = subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True)
        return r.stdout.strip()
    import os

    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if os.environ.get("POWERLAB_FUZZ_COMMIT"):     # a run from an exported snapshot
        return f"run {when} at commit {os.environ['POWERLAB_FUZZ_COMMIT']}"
    dirty = "+" if git("status", "--porcelain", "--untracked-files=no") else ""
    return f"run {when} at commit {git('rev-parse', '--short', 'HEAD')}{dirty}"


def table(results: dict, seed_: int) -> str:
    by: dict[str, Counter] = {}
    for r in results.values():
        by.setdefault(r["component"], Counter()).update(r["counts"])
    lines = [("| component | what is generated | cases tried | valid result | counted "
             "warning | powerlab error | tracebacks | hangs | memory | broken exit |"),
             "|---|---|---|---|---|---|---|---|---|---|"]
    total: Counter = Counter()
    for comp, c in by.items():
        total.update(c)
        lines.append(f"| {comp} | {WHAT.get(comp, '')} | {sum(c.values())} | {c['ok']} | "
                     f"{c['warned']} | {c['error']} | {c['traceback']} | {c['hang']} | "
                     f"{c['memory']} | {c['badexit']} |")
    lines.append(f"| **all** | | **{sum(total.values())}** | **{total['ok']}** | "
                 f"**{total['warned']}** | **{total['error']}** | **{total['traceback']}** | "
                 f"**{total['hang']}** | **{total['memory']}** | **{total['badexit']}** |")
    per = ", ".join(f"{name} {sum(r['counts'].values())}" for name, r in results.items())
    return (f"{START}\n" + "\n".join(lines)
            + f"\n\nCases per target (hypothesis seed {seed_}; {_provenance()}): {per}.\n"
            f"{END}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readers", type=int, default=400, help="cases per reader target")
    ap.add_argument("--cli", type=int, default=30, help="cases per subcommand")
    ap.add_argument("--demo", type=int, default=4, help="cases of `powerlab demo`")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--only", help="targets whose name contains this (no --write)")
    # 4 GiB: the readers now parse on threads, and glibc gives each thread a malloc
    # arena that reserves 64 MiB of address space (up to 8 per core), so by the demo
    # cases the process had reserved ~1 GiB more than before without using it; the valid
    # demo alone peaks at 2.5 GB of address space and 0.6 GB resident (measured
    # 2026-12-03, the same before and after the reader change).  A memory bomb still
    # ends in MemoryError well before the machine's 24 GiB.
    ap.add_argument("--memory-gib", type=float, default=4.0,
                    help="address space allowed beyond what is mapped at the start")
    ap.add_argument("--write", action="store_true", help="rewrite the table in the doc")
    ap.add_argument("--json", type=Path, help="also write the raw counts here")
    args = ap.parse_args()
    _warm_chart_engine()
    _cap_memory(args.memory_gib)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        import os
        os.chdir(work)            # `demo` writes ./powerlab-demo by default
        results = run(args.readers, args.cli, args.demo, work, args.seed, args.only)
        os.chdir(REPO)
    text = table(results, args.seed)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.write and not args.only:
        doc = DOC.read_text(encoding="utf-8")
        a, b = doc.index(START), doc.index(END) + len(END)
        DOC.write_text(doc[:a] + text + doc[b:], encoding="utf-8")
        print(f"wrote {DOC}")
    bad = sum(v for r in results.values() for k, v in r["counts"].items() if k not in CLEAN)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
