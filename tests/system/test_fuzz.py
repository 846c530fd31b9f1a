"""The standing fuzz harness in the suite (issue 24): every public reader and every CLI
subcommand on generated bad input, with a small fixed budget (``derandomize=True``: the
same cases every run, no example database).  The long run is ``benchmarks/fuzz.py``
(>= 2,000 cases; it regenerates the fuzz table of docs/robustness.md).  Property: a
valid result (possibly with a counted DataQualityWarning) or a powerlab error; at the
command line exit 0/1, or 2 with one stderr line; never a traceback, a hang or a
MemoryError (see tests/support/fuzz_harness.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from ..support.fuzz_harness import _PROM, CLEAN, all_targets, run_case

#: Examples per target in the suite (readers are fast; a CLI case may run a forecast).
READER_EXAMPLES = 40
CLI_EXAMPLES = 6


def _targets():
    from pathlib import Path

    return all_targets(Path("/nonexistent"))   # names only; rebuilt per test below


@pytest.fixture(scope="module", autouse=True)
def _stop_fake_prometheus():
    yield
    while _PROM:
        _PROM.pop().close()


@pytest.mark.parametrize("name", [
    # the demo runs the whole chain; openadr builds documents of 20,000 intervals
    pytest.param(t.name, marks=[pytest.mark.slow] if t.name in ("cli demo", "openadr")
                 else [])
    for t in _targets()])
def test_fuzz_target(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = next(t for t in all_targets(tmp_path) if t.name == name)
    cli = target.component == "cli"

    n = 2 if name == "cli demo" else CLI_EXAMPLES if cli else READER_EXAMPLES  # a demo runs
    @settings(max_examples=n, derandomize=True,
              database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(value=target.strategy())
    def prop(value):
        out = run_case(lambda: target.call(value, tmp_path), 60.0 if cli else 20.0)
        assert out.kind in CLEAN, f"{target.name}: {out.kind}\n{value!r:.600}\n{out.detail}"

    prop()
