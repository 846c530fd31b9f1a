"""The one results style (issue 26 §5) and parameter sets as data (§3).

``powerlab._summary.Summary`` follows statsmodels' ``iolib.summary.Summary``: tables and
extra text, rendered by ``as_text()`` (``str``) and ``as_html()`` (``_repr_html_``).
Every results object's ``summary()`` returns one and the object has ``summary_frame()``.
Options grouped in frozen dataclasses (``powerlab._options.Options``) replace long
argument lists; the keyword calls that predate them build the same options.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab._summary import Summary
from powerlab.exceptions import AnalysisError, ScenarioError

sys.path.insert(0, str(Path(__file__).parent / "fleetgens"))


def test_summary_renders_tables_and_text_as_text_and_html():
    s = Summary("Fit", float_format="{:.2f}")
    s.add_df(pd.DataFrame({"value": [1.234]}, index=["step_time_s"]), "Levels")
    s.add_text(["Note: <b>not</b> bold", "second line"])
    text = s.as_text()
    assert text.splitlines()[:3] == ["Fit", "===", "Levels"]
    assert "1.23" in text and "1.234" not in text          # the float format is applied
    assert text.endswith("Note: <b>not</b> bold\nsecond line")
    assert str(s) == repr(s) == text and "second line" in s
    html = s.as_html()
    assert s._repr_html_() == html and html.startswith("<div><h4>Fit</h4>")
    assert "<table" in html and "1.23" in html
    assert "&lt;b&gt;not&lt;/b&gt;" in html and "<b>not</b>" not in html  # text escaped
    assert [list(t.columns) for t in s.tables] == [["value"]]
    assert s.extra_txt == ["Note: <b>not</b> bold", "second line"]


def test_summary_without_title_or_blocks():
    assert Summary().as_text() == "" and Summary().as_html() == "<div></div>"
    s = Summary()
    s.add_df(pd.DataFrame(columns=["a"]))
    assert "(none)" not in s.as_text() and "a" in s.as_text()  # an empty table: header


def _cheap_results():
    from powerlab.calibration.profile import fit_profile
    from powerlab.levers.curve import prior_curve
    from powerlab.reliability.rates import failure_rates
    from powerlab.reliability.survival import dispersion_test

    from .calibration.test_profile import _square_trace

    ev = pd.DataFrame({"root_cause": ["gpu_hw", "gpu_hw", "network"]})
    counts = pd.DataFrame({"gpu_uuid": [f"g{i}" for i in range(40)],
                           "count": np.random.default_rng(0).poisson(0.5, 40)})
    return {
        "FailureRates": lambda: failure_rates(ev, gpu_hours=1000.0),
        "PowerThroughputCurve": lambda: prior_curve("H100-SXM-80GB", 650.0),
        "ProfileFit": lambda: fit_profile(_square_trace(dur_s=60.0, n_gpus=2)),
        "DispersionResult": lambda: dispersion_test(counts, fit_nb=False),
    }


@pytest.mark.parametrize("name", ["FailureRates", "PowerThroughputCurve", "ProfileFit",
                                  "DispersionResult"])
def test_results_summary_is_the_summary_type(name):
    res = _cheap_results()[name]()
    s = res.summary()
    assert isinstance(s, Summary)
    assert len(s.as_text()) > 20 and s.as_html().startswith("<div>")
    assert isinstance(res.summary_frame(), pd.DataFrame) and len(res.summary_frame())
    if hasattr(type(res), "_repr_html_"):
        assert res._repr_html_() == s.as_html()


def test_every_results_summary_is_annotated_with_the_summary_type():
    """Static check over the package: each ``def summary(self...)`` of a class returns
    ``Summary`` (or a class derived from it) and its class has ``summary_frame``; the
    derived summaries leave the rendering to ``Summary``."""
    import ast

    pkg = Path(__file__).parents[1] / "powerlab"
    derived = {"Summary", "ForecastSummary", "ResonanceSummary", "ComplianceSummary",
               "StudySummary"}
    bad = []
    for path in pkg.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
            names = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
            if cls.name in derived - {"Summary"}:
                # one renderer: a derived summary adds tables and attributes, not output
                own = {"as_text", "as_html", "__str__", "__repr__", "_repr_html_"} & {
                    *names, *[t.id for a in cls.body if isinstance(a, ast.Assign)
                              for t in a.targets if isinstance(t, ast.Name)]}
                if own:
                    bad.append(f"{path.name}:{cls.name} renders itself ({sorted(own)})")
                continue
            if "summary" not in names or cls.name.endswith("Summary"):
                continue
            ret = names["summary"].returns
            ok_ret = (ret is not None and ast.unparse(ret) in derived) or cls.name == \
                "StudyPackage"     # returns StudySummary, unannotated (another helper's)
            if not ok_ret or "summary_frame" not in names:
                bad.append(f"{path.name}:{cls.name}")
    assert not bad, bad


# ----------------------------------------------------------------------- options as data

def test_options_from_kwargs_replaces_fields_and_names_unknown_ones():
    from powerlab.throughput.stragglers import StragglerOptions

    base = StragglerOptions(z_threshold=5.0)
    o = StragglerOptions.from_kwargs(base, window_s=600.0, metrics=["clock_sm_mhz"])
    assert (o.z_threshold, o.window_s, o.metrics) == (5.0, 600.0, ("clock_sm_mhz",))
    assert StragglerOptions.from_kwargs(base) is base
    assert StragglerOptions.from_kwargs() == StragglerOptions()
    with pytest.raises(TypeError, match="z_treshold.*expected some of"):
        StragglerOptions.from_kwargs(z_treshold=3.0)
    with pytest.raises(TypeError, match="must be a StragglerOptions"):
        StragglerOptions.from_kwargs({"z_threshold": 3.0})
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.z_threshold = 1.0


def test_stragglers_options_and_keywords_agree_and_are_shared():
    """The same search through an options object and through keywords; the baseline
    takes the same options (it repeated four of find_stragglers' defaults before)."""
    import fleetgen_A

    from powerlab.throughput.stragglers import (
        StragglerOptions,
        find_stragglers,
        straggler_baseline,
    )

    tel, _ = fleetgen_A.generate(0, "gpu_thermal", interval_s=120.0, hours=8.0, n_hosts=4,
                                 gpus_per_host=8)
    a = find_stragglers(tel, z_threshold=5.0, window_s=1800.0)
    b = find_stragglers(tel, StragglerOptions(z_threshold=5.0, window_s=1800.0))
    pd.testing.assert_frame_equal(a.scores, b.scores)
    assert a.params == b.params and a.params["z_threshold"] == 5.0
    bl = straggler_baseline(tel, StragglerOptions(window_s=1800.0), min_peers=5)
    assert bl.params == {"window_s": 1800.0, "z_threshold": 4.0, "min_peers": 5,
                         "min_samples": 10}
    with pytest.raises(AnalysisError, match="z_threshold"):
        find_stragglers(tel, z_threshold=-1.0)


def test_time_of_day_options_check_names_the_bad_option():
    from powerlab.throughput.dvfs import TimeOfDayOptions

    assert TimeOfDayOptions().check() == 300 * 10 ** 9
    for kw, word in (({"errors": "magic"}, "errors"), ({"n_boot": 0}, "n_boot"),
                     ({"interval": "soon"}, "interval"), ({"ar_order": 0}, "ar_order"),
                     ({"shift_alpha": 2.0}, "shift_alpha")):
        with pytest.raises(AnalysisError, match=word):
            TimeOfDayOptions(**kw).check()


def test_twin_fleet_keywords_and_object_agree():
    from powerlab.throughput.synth import TwinFleet, simulate_training

    kw = {"days": 1.5, "seed": 4, "telemetry": False}
    a = simulate_training(n_hosts=1, gpus_per_host=4, stragglers=1, **kw)
    b = simulate_training(fleet=TwinFleet(n_hosts=1, gpus_per_host=4, stragglers=1), **kw)
    pd.testing.assert_frame_equal(a.steps, b.steps)
    assert a.truth.n_gpus == 4 and len(a.truth.stragglers) == 1
    with pytest.raises(ScenarioError, match="n_hosts"):
        simulate_training(n_hosts=1.5, **kw)
    with pytest.raises(ScenarioError, match="no_such"):
        simulate_training(no_such=1, **kw)
