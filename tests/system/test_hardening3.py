"""Hardening, round three (issue 38): no input overwritten by any command, every number
typed bounded and finite from one table, reads that survive other programs.

Each test is one case of the issue, seen failing on the tree before the fix."""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import pytest

from powerlab import cli
from powerlab._cli._bounds import BOUNDS, apply
from powerlab.exceptions import PowerlabError
from powerlab.outputs import check_write, protect_inputs

pytestmark = pytest.mark.bad_input("cli")

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "data/scenarios/small.yaml"
ERCOT = REPO / "data/requirements/ercot_large_load_illustrative.yaml"


def _md5(p: Path) -> str:
    return hashlib.md5(p.read_bytes()).hexdigest()


def _rc(argv) -> int:
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:          # a usage error: argparse exits 2 while parsing
        return exc.code


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


# --------------------------------------------------------------------- the output guard
def test_flex_plan_refuses_to_write_over_its_target_file(tmp_path, capsys):
    """``flex plan S --target D/plan_targets.csv --out D`` replaced the target file with
    the plan's output and exited 0."""
    tg = tmp_path / "plan_targets.csv"
    tg.write_text("start_utc,end_utc,cap_megawatts\n"
                  "2025-06-02T12:30:00Z,2025-06-02T12:40:00Z,0.5\n")
    before = _md5(tg)
    rc = _rc(["flex", "plan", SMALL, "--target", tg, "--requirements", ERCOT,
              "--out", tmp_path, "--draws", "1"])
    err = _one_line(capsys)
    assert rc == 2 and "refusing to write over an input" in err and "plan_targets" in err
    assert _md5(tg) == before


def test_flex_offer_refuses_to_write_over_its_scenario(tmp_path, capsys):
    """``flex offer D/flex_offer.csv --out D`` replaced the scenario and exited 0."""
    sc = tmp_path / "flex_offer.csv"
    sc.write_bytes(SMALL.read_bytes())
    rc = _rc(["flex", "offer", sc, "--out", tmp_path, "--draws", "1"])
    err = _one_line(capsys)
    assert rc == 2 and "flex_offer.csv is the input" in err
    assert sc.read_bytes() == SMALL.read_bytes()


def test_the_guard_sees_hard_links_renames_removals_and_input_folders(tmp_path):
    """The one guard: every write in the process while a command runs (open for writing,
    os.replace, os.remove, a hard link of an input, a file inside an input folder)."""
    src = tmp_path / "in.csv"
    src.write_text("a\n")
    link = tmp_path / "link.csv"
    os.link(src, link)
    folder = tmp_path / "store"
    (folder / "date=2025-01-01").mkdir(parents=True)
    part = folder / "date=2025-01-01" / "p.parquet"
    part.write_text("x")
    other = tmp_path / "tmp.txt"
    other.write_text("t")
    with protect_inputs([src, folder, tmp_path / "missing"]):
        for attempt in (lambda: link.write_text("b"),                # hard link
                        lambda: open(src, "a").close(),               # append
                        lambda: os.replace(other, src),               # rename over
                        lambda: os.remove(src),                       # removal
                        lambda: os.truncate(src, 0),
                        lambda: part.write_text("y")):                # inside a folder
            with pytest.raises(PowerlabError, match="refusing to write over an input"):
                attempt()
        (folder / "new.csv").write_text("new")        # a new file in an input folder
        (tmp_path / "out.csv").write_text("ok")       # any other output
        src.read_text()                               # reading is fine
    assert src.read_text() == "a\n" and part.read_text() == "x"
    check_write(src)                                  # inactive again: a no-op
    link.write_text("c")                              # and writes pass
    assert src.read_text() == "c"


# ------------------------------------------------------------------ the bounds table
def _numeric_actions():
    """``(command, action)`` for every numeric option of the real parser."""
    found = []

    def walk(p, cmd):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, f"{cmd} {name}".strip())
            elif getattr(a.type, "bound", None) is not None:
                found.append((cmd, a))
    walk(cli.build_parser(), "")
    return found


def test_every_numeric_option_has_a_declared_bound():
    """Derived from the parser: every option whose value is a number has its entry in
    the one table (apply() reports none missing), and there are many of them."""
    assert apply(cli.build_parser()) == []
    acts = _numeric_actions()
    assert len(acts) >= 40
    assert all(a.type.bound in BOUNDS.values() for _, a in acts)


EXTREMES = ["nan", "NaN", "inf", "-inf", "1e18", "-1e18", "-1", "", " ", "true", "1e400",
            "9" * 400, "0x10", "1_000"]


def test_every_numeric_option_refuses_extremes_or_stays_in_range():
    """NaN, +-inf, 1e18, negative, empty, booleans and a 400-digit number, for every
    numeric option of every command: refused while parsing, or a finite value inside
    the option's declared range."""
    import math

    tried = 0
    for cmd, a in _numeric_actions():
        b = a.type.bound
        for text in EXTREMES:
            tried += 1
            try:
                v = a.type(text)
            except (argparse.ArgumentTypeError, ValueError):
                continue
            v = v[-1] if isinstance(v, tuple) else v
            assert math.isfinite(v) and b.low <= v <= b.high, (cmd, a.dest, text, v)
    assert tried >= 40 * len(EXTREMES)


@pytest.mark.parametrize("argv, words", [
    (["flex", "offer", SMALL, "--out", "o", "--hold-s", "nan"], "'nan' is not a finite"),
    (["flex", "offer", SMALL, "--out", "o", "--hold-s", "1e18"], "outside 1 to 2,592,000 s"),
    (["flex", "plan", SMALL, "--target", "t.csv", "--requirements", ERCOT, "--out", "o",
      "--averaging-s", "1e12"], "outside 0.1 to 86400 s"),
    (["study-package", SMALL, "--requirements", ERCOT, "--out", "o",
      "--short-window-s", "1e12"], "10^14"),
    (["forecast", SMALL, "--out", "f.csv", "--draws", "true"], "yes/no word"),
])
def test_extreme_option_values_are_one_line_usage_errors(tmp_path, monkeypatch, capsys,
                                                         argv, words):
    """``flex offer --hold-s nan`` / ``1e18`` were tracebacks; ``--averaging-s 1e12``
    was accepted; ``study-package --short-window-s 1e12`` hung."""
    monkeypatch.chdir(tmp_path)
    assert _rc(argv) == 2
    err = _one_line(capsys)
    assert words in err, err
