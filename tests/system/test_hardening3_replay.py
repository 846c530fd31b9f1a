"""Hardening, round three (issue 38): the cases the independent fuzzer's campaign still
broke on main, each as the smallest input that showed it (a traceback before the fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from powerlab import cli
from powerlab.exceptions import PowerlabError, ScenarioError
from powerlab.limits.yamlspec import Section
from powerlab.telemetry.timeutil import to_utc

REPO = Path(__file__).resolve().parents[2]


def _rc(argv) -> int:
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:          # a usage error: argparse exits 2 while parsing
        return exc.code


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_400_digit_integer_in_a_scenario_is_one_error_naming_the_key():
    sec = Section({"pue_per_c": 10 ** 400}, "site.cooling", source="s.yaml")
    with pytest.raises(ScenarioError, match="site.cooling.pue_per_c.*401 digits"):
        sec.number("pue_per_c", 0.01)


@pytest.mark.parametrize("text", ["2262-04-12T00:00:00Z", "9999-12-31T23:59:59Z",
                                  "1600-01-01T00:00:00Z"])
def test_times_outside_pandas_range_are_refused(text):
    with pytest.raises(PowerlabError, match="outside the times powerlab reads"):
        to_utc(text, what="--end")
    assert to_utc("2261-06-01T00:00:00Z").year == 2261


def test_an_epoch_time_outside_pandas_range_is_refused():
    with pytest.raises(PowerlabError, match="outside the times"):
        to_utc(9_500_000_000, epoch_unit="s")   # year 2271
