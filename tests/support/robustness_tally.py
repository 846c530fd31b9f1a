"""Tally of the bad-input cases the test suite feeds each component, for docs/robustness.md.

Every test case marked ``@pytest.mark.bad_input("<component>")`` feeds one bad input and
asserts a clean outcome: one ``powerlab`` error (exit code 2 and one line at the command
line) or a counted ``DataQualityWarning`` with the damaged part left out — never a
traceback, never a silent different result, and (under ``pytest-timeout``) never a hang.
So when the suite passes, each component's "clean" column equals its "tried" column and
the silent/traceback/hang columns are 0 by construction: the table below is regenerated
from the suite itself, and ``tests/system/test_robustness_doc.py`` fails if the document and the
suite disagree.

Regenerate::

    python -m tests.support.robustness_tally --write
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "robustness.md"
START, END = "<!-- tally:start -->", "<!-- tally:end -->"

#: What each component is and what a crash can cost (from the tests named there).
COMPONENTS = {
    "readers": (("nvidia-smi, DCGM, MLPerf, weather, Slurm and event-log readers; "
                "`powerlab import`"), "nothing stored from an unreadable file"),
    "store": ("the Parquet store: writes, reads, locks, checksums, upgrade",
              "none: a killed writer loses only its unrenamed temporary file"),
    "collector": ("the NVML collector and its /metrics endpoint",
                  ("at most F + 2 W_max + 2 T seconds of samples (flush interval, longest "
                   "write measured, sampling interval), stated in samples by the run's "
                   "report")),
    "scenario": ("scenario YAML and the forecast's size bounds", "n/a (read only)"),
    "requirements": ("utility requirement specs and `powerlab comply`", "n/a (read only)"),
    "export": ("the facilities CSV and its sidecar", ("none: the CSV/sidecar pair is never "
               "mismatched (a killed writer leaves the old pair or a CSV without sidecar)")),
    "aggregate": ("`powerlab aggregate` and the fleet aggregations", "n/a (read only)"),
    "cli": ("every subcommand's argument and path mistakes",
            "n/a (refused before any write)"),
    "flex": ("curtailment targets (CSV, OpenADR 3 events), meter CSVs and the flex "
             "commands' outputs", "n/a (read only; outputs through the one output guard)"),
    "reliability": ("failure rates, MTBF, hazard model and cross-device quality checks",
                    "n/a (read only)"),
}


def tally() -> dict[str, list[str]]:
    """Collect the suite (only files that use the marker) and return the cases by component."""
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py")
                   if "bad_input" in p.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tally.json"
        env = dict(os.environ, POWERLAB_TALLY_FILE=str(out))
        proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                               "-p", "no:cacheprovider", *files], cwd=REPO, env=env,
                              capture_output=True, text=True, check=False, timeout=600)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError("collection failed:\n" + proc.stdout[-3000:] + proc.stderr[-3000:])
        return json.loads(out.read_text(encoding="utf-8"))


def render(cases: dict[str, list[str]]) -> str:
    lines = [("| component | what it covers | inputs tried | clean errors or counted "
             "warnings | silent wrong results | tracebacks | hangs | data lost on a crash |"),
             "|---|---|---|---|---|---|---|---|"]
    names = list(COMPONENTS) + sorted(set(cases) - set(COMPONENTS))
    for name in names:
        what, lost = COMPONENTS.get(name, ("(undocumented component)", "?"))
        n = len(cases.get(name, []))
        lines.append(f"| {name} | {what} | {n} | {n} | 0 | 0 | 0 | {lost} |")
    total = sum(len(v) for v in cases.values())
    lines.append(f"| **all** | | **{total}** | **{total}** | **0** | **0** | **0** | |")
    return "\n".join(lines)


def block(cases: dict[str, list[str]]) -> str:
    return f"{START}\n{render(cases)}\n{END}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the table in the doc")
    args = ap.parse_args()
    cases = tally()
    text = block(cases)
    if args.write:
        doc = DOC.read_text(encoding="utf-8")
        a, b = doc.index(START), doc.index(END) + len(END)
        DOC.write_text(doc[:a] + text + doc[b:], encoding="utf-8")
        print(f"wrote {DOC}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
