"""Run every benchmark and regenerate docs/performance.md from their results.

Each ``benchmarks/bench_*.py`` prints, as its last line, ``RESULT {json}``: the benchmark
name and rows of ``case, size, time_s_min, time_s_median, peak_mib, baseline_s, ratio,
target, pass``.  This script runs them one after the other (never in parallel: they time
themselves), collects those lines, and writes a scaling table per benchmark with the
hardware it ran on.  A benchmark that exits non-zero (a missed target) is reported as
such; the script exits 1 if any did.

Usage::

    python benchmarks/run_all.py                      # everything, full sizes (an hour+)
    python benchmarks/run_all.py --only startup forecast
    python benchmarks/run_all.py --args aggregate="--rows 2e7"   # override a benchmark's args
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DOC = REPO / "docs" / "performance.md"


def _hardware() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": str(os.cpu_count()), "memory": mem,
            "python": platform.python_version(), "os": platform.platform(),
            "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg())}


def _commit() -> str:
    """The checkout's commit (``+`` when the work tree differs from it)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, text=True, capture_output=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _benchmarks() -> dict[str, Path]:
    return {p.stem.removeprefix("bench_"): p for p in sorted(HERE.glob("bench_*.py"))}


def _run(path: Path, extra: list[str]) -> tuple[int, dict | None, str, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(path), *extra], cwd=REPO, text=True,
                          capture_output=True, check=False)
    wall = time.perf_counter() - t0
    result = None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            break
    return proc.returncode, result, proc.stdout + proc.stderr, wall


def _fmt(v, spec: str = ".3g") -> str:
    if v is None or v == "":
        return ""
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def _table(result: dict) -> str:
    if not isinstance(result.get("rows"), list):  # a flat result: one key per figure
        lines = ["| figure | value |", "|---|---|"]
        lines += [f"| {k} | {_fmt(v)} |" for k, v in result.items() if k != "benchmark"]
        return "\n".join(lines)
    cpu = any("cpu_ratio" in r for r in result.get("rows", []))
    head = ("| case | size | time min [s] | time median [s] | peak [MiB] | baseline [s] "
            "| ratio |" + (" CPU ratio |" if cpu else "") + " target | met |\n"
            + "|---" * (10 if cpu else 9) + "|")
    lines = [head]
    for r in result.get("rows", []):
        cells = [_fmt(r.get("case")), _fmt(r.get("size")), _fmt(r.get("time_s_min")),
                 _fmt(r.get("time_s_median")), _fmt(r.get("peak_mib"), ".0f"),
                 _fmt(r.get("baseline_s")), _fmt(r.get("ratio"), ".2f")]
        if cpu:
            cells.append(_fmt(r.get("cpu_ratio"), ".2f"))
        lines.append("| " + " | ".join(cells + [_fmt(r.get("target")),
                                                 _fmt(r.get("pass"))]) + " |")
    for name, text in (result.get("queries") or {}).items():   # the baselines' queries
        lines += ["", f"Baseline query, {name} (`STORE`: the store folder):", "",
                  "```", text, "```"]
    return "\n".join(lines)


def _kept_sections(doc: Path, replaced: set[str]) -> dict[str, str]:
    """The ``## name`` sections of an existing performance.md not being re-run."""
    if not doc.exists():
        return {}
    out, name, buf = {}, None, []
    for line in doc.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("## "):
            if name:
                out[name] = "".join(buf)
            name, buf = line[3:].strip(), [line]
        elif name:
            buf.append(line)
    if name:
        out[name] = "".join(buf)
    return {k: v.rstrip("\n") + "\n" for k, v in out.items() if k not in replaced}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="benchmark names (e.g. forecast readers)")
    ap.add_argument("--args", nargs="*", default=[],
                    help="NAME='ARGS' pairs passed to one benchmark")
    ap.add_argument("--doc", default=str(DOC), help="where to write the Markdown")
    args = ap.parse_args()
    extra = {}
    for item in args.args:
        name, _, rest = item.partition("=")
        extra[name] = shlex.split(rest)
    benches = _benchmarks()
    names = args.only or list(benches)
    unknown = [n for n in names if n not in benches]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; known: {sorted(benches)}", file=sys.stderr)
        return 2
    hw = _hardware()
    sections, failed = [], []
    for name in names:
        print(f"== {name} {' '.join(extra.get(name, []))}", flush=True)
        load_before, commit = _load(), _commit()   # the code the benchmark runs
        rc, result, log, wall = _run(benches[name], extra.get(name, []))
        load_after = _load()
        print(log[-3000:], flush=True)
        status = "all targets met" if rc == 0 else f"**exit code {rc}: a target was missed**"
        if rc != 0:
            failed.append(name)
        cmd = f"python benchmarks/{benches[name].name} {' '.join(extra.get(name, []))}".strip()
        body = _table(result) if result else "_(no RESULT line: see the benchmark's output)_"
        sections.append((f"## {name}\n\n`{cmd}` — {wall:.0f} s wall, {status}.\n\n{body}\n",
                         load_before, load_after, commit))
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    keep = _kept_sections(Path(args.doc), set(names))
    stamped = [sec.replace("\n\n", f"\n\nRun on {now} at commit {commit}, load average "
                                     f"{before} before and {after} after (1, 5, 15 min; "
                                     f"{hw['cores']} cores).\n\n", 1)
               for sec, before, after, commit in sections]
    merged = {**keep, **dict(zip(names, stamped))}
    order = [n for n in benches if n in merged]
    hw_lines = "\n".join(f"- {k.replace('_', ' ')}: {v}" for k, v in hw.items()
                         if k != "load_before")
    text = (f"# Performance\n\nRegenerated by `python benchmarks/run_all.py` (last on {now}; "
            "with `--only`, the other sections are kept from earlier runs, each with its "
            "own date). Each benchmark times its own baseline in the same run (see its "
            "docstring); times are seconds, peak memory is the peak resident set of the "
            "measured process.\n\nHardware:\n\n" + hw_lines + "\n\n"
            + "\n".join(merged[n] for n in order))
    Path(args.doc).write_text(text, encoding="utf-8")
    print(f"wrote {args.doc}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
