"""docs/robustness.md states what the suite tries: its table equals the tally of the
bad-input cases (regenerate with ``python -m tests.support.robustness_tally --write``)."""

from __future__ import annotations

import pytest

from ..support.robustness_tally import COMPONENTS, DOC, END, START, block, tally


@pytest.mark.slow
def test_robustness_table_matches_the_suite():
    cases = tally()
    assert sum(len(v) for v in cases.values()) > 50
    assert set(cases) <= set(COMPONENTS), f"undocumented components: {set(cases) - set(COMPONENTS)}"
    doc = DOC.read_text(encoding="utf-8")
    assert START in doc and END in doc
    current = doc[doc.index(START):doc.index(END) + len(END)]
    assert current == block(cases), ("docs/robustness.md is stale: run "
                                     "`python -m tests.support.robustness_tally --write`")


def test_the_fuzz_table_comes_from_a_long_run_with_no_failure():
    """benchmarks/fuzz.py --write rewrites the fuzz block from a run's own counts: at
    least 2,000 generated cases, and 0 tracebacks, hangs, MemoryErrors and broken exits."""
    import re

    doc = DOC.read_text(encoding="utf-8")
    a, b = doc.index("<!-- fuzz:start -->"), doc.index("<!-- fuzz:end -->")
    total = next(ln for ln in doc[a:b].splitlines() if ln.startswith("| **all**"))
    cells = [c.strip().strip("*") for c in total.strip("|").split("|")]
    tried, ok, warned, error, tb, hang, mem, badexit = map(int, cells[2:10])
    assert tried >= 2000
    assert ok + warned + error == tried
    assert tb == hang == mem == badexit == 0
    assert re.search(r"hypothesis seed \d+", doc[a:b])
