"""Self-test of the blind CLI fuzz harness (tests/blind/fuzz/cli_fuzz.py).

The classifier is checked on a stand-in script with known outcomes (not powerlab); one
slow test runs a 20-case campaign against powerlab and checks the records' shape only (a
campaign's findings are scored elsewhere, not asserted here).
"""

import json
import sys
from pathlib import Path

import pytest

from tests.blind.fuzz.cli_fuzz import OUTCOMES, Case, child_env, classify, execute, main
from tests.blind.fuzz.helpspec import discover

STANDIN = [sys.executable, str(Path(__file__).with_name("standin.py"))]


def _run(tmp_path, argv, hashed=(), timeout=30.0, verdicts=frozenset()):
    case = Case(id=0, command=argv[0], strategy="selftest", argv=list(argv), hashed=list(hashed))
    return execute(case, STANDIN, tmp_path, timeout, child_env(), verdicts)


def test_known_traceback(tmp_path):
    rec = _run(tmp_path, ["traceback"])
    assert rec["outcome"] == "traceback"
    assert rec["exception"].startswith("KeyError")


def test_known_clean_error(tmp_path):
    rec = _run(tmp_path, ["error"])
    assert rec["outcome"] == "clean_error" and rec["rc"] == 2
    assert "bad value" in rec["stderr_last"]
    # argparse's own usage error is clean too
    assert _run(tmp_path, ["error", "--draws", "nan"])["outcome"] == "clean_error"


def test_known_overwritten_input(tmp_path):
    (tmp_path / "s.yaml").write_text("name: x\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep.csv").write_text("a\n1\n")
    rec = _run(tmp_path, ["overwrite", "s.yaml", "--out", "o"], hashed=["s.yaml", "data"])
    assert rec["outcome"] == "overwritten_input"
    assert rec["changed_inputs"] == ["s.yaml"]
    # the same input, not hashed: the run itself is ok
    (tmp_path / "t.yaml").write_text("name: y\n")
    assert _run(tmp_path, ["overwrite", "t.yaml", "--out", "o"])["outcome"] == "ok"


def test_other_outcomes(tmp_path):
    assert _run(tmp_path, ["ok"])["outcome"] == "ok"
    assert _run(tmp_path, ["bare"])["outcome"] == "messy_error"
    assert _run(tmp_path, ["silent"])["outcome"] == "messy_error"
    assert _run(tmp_path, ["silent"], verdicts=frozenset({3}))["outcome"] == "ok"
    assert _run(tmp_path, ["crash"])["outcome"] == "native_crash"
    rec = _run(tmp_path, ["hang", "--seconds", "30"], timeout=1.0)
    assert rec["outcome"] == "hang" and rec["duration_s"] < 20
    assert rec["cpu_s_at_timeout"] is not None and rec["cpu_s_at_timeout"] < 1.0  # blocked


def test_classify_rules():
    assert classify(-11, False, "", []) == "native_crash"
    assert classify(139, False, "", []) == "native_crash"
    assert classify(135, False, "", []) == "native_crash"  # SIGBUS as 128+7
    assert classify(0, True, "", []) == "hang"
    assert classify(0, False, "", ["a.yaml"]) == "overwritten_input"
    assert (
        classify(2, False, "x\nTraceback (most recent call last):\n  ...\nValueError: x", [])
        == "traceback"
    )
    assert classify(2, False, "powerlab forecast: error: x.yaml, line 3: bad", []) == "clean_error"
    assert classify(2, False, "powerlab forecast: error: KeyError: 'met'", []) == "messy_error"
    assert classify(1, False, "", [], frozenset({1})) == "ok"


def test_help_discovery_on_standin():
    cmds = {c.name: c for c in discover(STANDIN)}
    assert {"ok", "error", "overwrite", "hang"} <= set(cmds)
    ow = cmds["overwrite"]
    roles = {o.dest: o.role for o in ow.options}
    assert (
        roles["scenario"] == "in_scenario"
        and roles["out"] == "out"
        and roles["tick_s"] == "numeric"
    )
    assert ow.opt("out").required and ow.opt("out").out_kind == "dir"
    assert cmds["error"].opt("draws").role == "numeric"


@pytest.mark.slow
def test_small_campaign_against_powerlab(tmp_path):
    out = tmp_path / "camp"
    assert (
        main(
            ["--out", str(out), "--cases", "20", "--seed", "3", "--timeout-s", "60", "--jobs", "2"]
        )
        == 0
    )
    recs = [json.loads(x) for x in (out / "cases.jsonl").read_text().splitlines()]
    assert len(recs) == 20
    assert all(r["outcome"] in OUTCOMES and r["argv"][0] == "powerlab" for r in recs)
    summ = json.loads((out / "summary.json").read_text())
    assert summ["cases"] == 20 and sum(summ["per_outcome"].values()) == 20
    assert sum(v["total"] for v in summ["per_command"].values()) == 20


def test_replay_reruns_kept_cases(tmp_path):
    """--replay reruns a kept case (inputs, hard links, command line) and classifies it again."""
    case = tmp_path / "old" / "repro" / "case00007"
    case.mkdir(parents=True)
    (case / "s.yaml").write_text("name: x\n")
    import os

    os.link(case / "s.yaml", case / "link.yaml")
    (case / "links.json").write_text(json.dumps([["s.yaml", "link.yaml"]]))
    (case / "rerun.sh").write_text("#!/bin/sh\n")
    rec = {
        "id": 7,
        "command": "overwrite",
        "strategy": "alias",
        "outcome": "overwritten_input",
        "argv": ["powerlab", "overwrite", "link.yaml", "--out", "o"],
        "files": [{"arg": "scenario", "path": "s.yaml", "mutation": "alias:hardlink"}],
        "changed_inputs": ["s.yaml"],
    }
    (case / "case.json").write_text(json.dumps(rec))
    prog = " ".join(STANDIN)
    assert (
        main(
            [
                "--out",
                str(tmp_path / "new"),
                "--replay",
                str(tmp_path / "old"),
                "--program",
                prog,
                "--timeout-s",
                "30",
            ]
        )
        == 0
    )
    new = [json.loads(x) for x in (tmp_path / "new" / "cases.jsonl").read_text().splitlines()]
    assert [(r["id"], r["previous_outcome"], r["outcome"]) for r in new] == [
        (7, "overwritten_input", "overwritten_input")
    ]
    summ = json.loads((tmp_path / "new" / "summary.json").read_text())
    assert summ["transitions"] == {"overwritten_input -> overwritten_input": 1}
