"""docs/reliability.md states what the suite tries: its table equals the tally of the
bad-input cases (regenerate with ``python -m tests.reliability_tally --write``)."""

from __future__ import annotations

import pytest

from .reliability_tally import COMPONENTS, DOC, END, START, block, tally


@pytest.mark.slow
def test_reliability_table_matches_the_suite():
    cases = tally()
    assert sum(len(v) for v in cases.values()) > 50
    assert set(cases) <= set(COMPONENTS), f"undocumented components: {set(cases) - set(COMPONENTS)}"
    doc = DOC.read_text(encoding="utf-8")
    assert START in doc and END in doc
    current = doc[doc.index(START):doc.index(END) + len(END)]
    assert current == block(cases), ("docs/reliability.md is stale: run "
                                     "`python -m tests.reliability_tally --write`")
