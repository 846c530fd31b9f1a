"""Summarise a campaign folder of the blind CLI fuzzer.

    python -m tests.blind.fuzz.report DIR [--top 10] [--failures-out FILE]

Prints the counts per outcome and per command, and the most informative failing cases:
one per distinct (outcome, command, message), the most severe outcomes first, the shortest
command line of each group.  ``--failures-out`` writes those groups as JSON lines.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

from tests.blind.fuzz.cli_fuzz import FAILING, OUTCOMES

SEVERITY = ["overwritten_input", "native_crash", "hang", "traceback", "messy_error"]


def _norm(msg: str) -> str:
    msg = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", msg or "")
    msg = re.sub(r"'[^']*'", "'…'", msg)
    return msg[:120]


def groups(records: list[dict]) -> list[dict]:
    g: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in records:
        if r["outcome"] not in FAILING:
            continue
        key = (r["outcome"], r["command"], _norm(r.get("exception") or r.get("stderr_last", "")))
        g[key].append(r)
    out = []
    for (outcome, cmd, msg), rs in g.items():
        best = min(rs, key=lambda r: len(" ".join(r["argv"])))
        out.append(
            {
                "outcome": outcome,
                "command": cmd,
                "message": msg,
                "count": len(rs),
                "example_id": best["id"],
                "argv": best["argv"],
                "notes": best["notes"],
                "duration_s": best["duration_s"],
                "stderr_last": (best.get("exception") or best["stderr_last"])[:300],
            }
        )
    out.sort(key=lambda x: (SEVERITY.index(x["outcome"]), -x["count"]))
    return out


def _short(argv: list[str]) -> str:
    return " ".join(a if len(a) < 60 else a[:40] + f"…({len(a)} chars)" for a in argv)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--failures-out", type=Path)
    a = ap.parse_args(argv)
    recs = [json.loads(x) for x in (a.dir / "cases.jsonl").read_text().splitlines() if x.strip()]
    c = collections.Counter(r["outcome"] for r in recs)
    print(f"{len(recs)} cases")
    print("per outcome: " + ", ".join(f"{o} {c.get(o, 0)}" for o in OUTCOMES))
    per = collections.defaultdict(collections.Counter)
    for r in recs:
        per[r["command"]][r["outcome"]] += 1
    print(f"{'command':16}" + "".join(f"{o[:11]:>12}" for o in OUTCOMES) + f"{'total':>8}")
    for cmd in sorted(per):
        print(
            f"{cmd:16}"
            + "".join(f"{per[cmd].get(o, 0):>12}" for o in OUTCOMES)
            + f"{sum(per[cmd].values()):>8}"
        )
    gs = groups(recs)
    print(f"\n{len(gs)} distinct failures; the {min(a.top, len(gs))} most informative:")
    # one per (outcome, command) first, then the rest by severity
    seen, picked = set(), []
    for g in gs:
        if (g["outcome"], g["command"]) not in seen:
            seen.add((g["outcome"], g["command"]))
            picked.append(g)
    picked += [g for g in gs if g not in picked]
    for g in picked[: a.top]:
        print(
            f"- [{g['outcome']}] x{g['count']} case {g['example_id']}: {_short(g['argv'])}\n"
            f"    {'; '.join(g['notes'])[:200]}\n    -> {g['stderr_last'][:200]}"
        )
    if a.failures_out:
        a.failures_out.write_text("".join(json.dumps(g) + "\n" for g in gs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
