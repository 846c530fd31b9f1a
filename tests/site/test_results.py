"""Tests of powerlab.site.results: a forecast's result is a powerlab Results (issue 31)."""

from __future__ import annotations

import pytest

from powerlab._summary import Results, Summary
from powerlab.data import bundled_path
from powerlab.site.engine import forecast
from powerlab.site.results import ForecastResult, ForecastSummary
from powerlab.site.scenario import read_scenario


@pytest.fixture(scope="module")
def res():
    sc = read_scenario(bundled_path("scenarios", "small.yaml"))
    return forecast(sc, draws=2, seed=1)


def test_the_result_displays_through_the_results_base(res):
    """``repr`` is one line (``_repr_line``), ``str`` and ``print`` the summary's text, the
    HTML the summary's; the class defines none of the three itself."""
    assert isinstance(res, Results)
    assert not {"__repr__", "__str__", "_repr_html_"} & set(vars(ForecastResult))
    line = repr(res)
    assert line == res._repr_line() and "\n" not in line
    assert line == (f"<ForecastResult 'small-example': 2 draws x {res.n_ticks} ticks of "
                    f"0.1 s from {res.start_utc}>")
    text = str(res)
    assert text == res.summary().as_text()
    assert text.startswith("Power-swing forecast\n") and "small-example" in text
    assert res._repr_html_() == res.summary().as_html()


def test_the_summary_holds_its_tables_in_order(res):
    s = res.summary()
    assert isinstance(s, ForecastSummary) and isinstance(s, Summary)
    assert s.tables[0] is s.header and s.tables[1] is s.table
    assert s.header.loc["draws", "value"] == 2
    assert {"facility median", "facility worst"} <= set(s.table.columns)
    assert s.table.loc["energy [MWh]", "facility worst"] >= \
        s.table.loc["energy [MWh]", "facility median"]
    assert s.notes and all(f"Note: {n}" in s.extra_txt for n in s.notes)
