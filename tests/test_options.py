"""One vocabulary (issue 26 section 4): options checked by one helper whose one-line error
names the allowed values; renamed keywords, YAML keys and flags still work for one release
with a DeprecationWarning."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from powerlab._options import choice, renamed_keywords
from powerlab.calibration.meter import Meter, meter_forecast
from powerlab.data import bundled_path
from powerlab.exceptions import AnalysisError, OptionError, PowerlabError, ScenarioError
from powerlab.limits.requirements import parse_requirements
from powerlab.limits.scenario_limits import Limits
from powerlab.site.engine import forecast
from powerlab.site.scenario import parse_scenario, read_scenario

SPEC = ("name: l\n{key}: it\nrequirements:\n  - {{name: s, kind: step, within_s: 1, "
        "limit: 1, unit: MW, source: x, illustrative: true}}\n")


@pytest.fixture(scope="module")
def small():
    return forecast(read_scenario(bundled_path("scenarios", "small.yaml")), draws=1, seed=0)


def test_choice_names_the_allowed_values_in_one_line():
    assert choice("it", "boundary", ("facility", "it")) == "it"
    with pytest.raises(OptionError) as ei:
        choice("grid", "boundary", ("facility", "it"))
    assert str(ei.value) == "boundary must be 'facility' or 'it', got 'grid'"
    assert isinstance(ei.value, PowerlabError) and isinstance(ei.value, ValueError)
    with pytest.raises(OptionError, match=r"^by must be one of 'auto', 'gpu', 'host' or "
                                          r"'fleet', got 'rack'$"):
        choice("rack", "by", ("auto", "gpu", "host", "fleet"))
    with pytest.raises(AnalysisError, match="^expected 'rms' or 'peak_to_peak', got 3$"):
        choice(3, None, ("rms", "peak_to_peak"), error=AnalysisError)
    with pytest.raises(OptionError, match="got \\[1\\]"):      # unhashable: no TypeError
        choice([1], "x", {"a": 1})


def test_package_checks_go_through_the_helper(small):
    """A sample of the former ad-hoc checks, one per wing: same one-line form."""
    from powerlab.interconnect.powertrace import PowerTrace
    from powerlab.telemetry.engines import resolve_engine

    with pytest.raises(OptionError, match="^boundary must be 'facility' or 'it', got 'x'$"):
        small.power_w("x")
    tr = PowerTrace(0, 1.0, pd.Timestamp("2025-01-01", tz="UTC"), np.ones(4), None)
    with pytest.raises(OptionError, match="^boundary must be"):
        tr.power_w("x")
    with pytest.raises(OptionError, match="^engine must be one of .*, got 'spark'$"):
        resolve_engine("spark")
    with pytest.raises(ScenarioError, match="key 'limits.boundary': expected 'facility' "
                                            "or 'it', got 'poi'"):
        parse_scenario(_small_with_limits({"boundary": "poi"}))


def _small_with_limits(limits: dict) -> dict:
    import yaml

    d = yaml.safe_load(bundled_path("scenarios", "small.yaml").read_text())
    d["limits"] = limits
    return d


def test_renamed_keyword_warns_and_gives_the_same_answer(small):
    with pytest.warns(DeprecationWarning, match="scope= is renamed boundary="):
        old = small.power_w(scope="it")
    np.testing.assert_array_equal(old, small.power_w(boundary="it"))
    with pytest.warns(DeprecationWarning):
        a = meter_forecast(small, Meter(2.0), scope="facility")
    pd.testing.assert_frame_equal(a, meter_forecast(small, Meter(2.0), boundary="facility"))
    with pytest.raises(OptionError, match="both scope= and boundary="):
        small.power_w(scope="it", boundary="it")
    with warnings.catch_warnings():          # the new name: silent
        warnings.simplefilter("error")
        small.power_w(boundary="it")

    @renamed_keywords(old="new")
    def f(new=1):
        return new

    with pytest.warns(DeprecationWarning, match=r"f\(\): old= is renamed new="):
        assert f(old=5) == 5


def test_limits_and_spec_boundary_old_names_warn():
    with pytest.warns(DeprecationWarning):
        lim = Limits(scope="it", ramp_up_megawatts_per_s=1.0)
    assert lim.boundary == "it" and lim == Limits(boundary="it", ramp_up_megawatts_per_s=1.0)
    with pytest.warns(DeprecationWarning, match="Limits.scope is renamed"):
        assert lim.scope == "it"
    with pytest.warns(DeprecationWarning, match="'limits.scope' is renamed 'boundary'"):
        sc = parse_scenario(_small_with_limits({"scope": "it", "swing_10s_megawatts": 1}))
    assert sc.limits.boundary == "it"
    with pytest.raises(ScenarioError, match="key 'limits.scope': is the old name"):
        parse_scenario(_small_with_limits({"scope": "it", "boundary": "it"}))
    with pytest.warns(DeprecationWarning, match="'scope' is renamed 'boundary'"):
        spec = parse_requirements(SPEC.format(key="scope"))
    assert spec.boundary == "it" and spec == parse_requirements(SPEC.format(key="boundary"))
    with pytest.warns(DeprecationWarning, match="RequirementSpec.scope is renamed"):
        assert spec.scope == "it"


def test_cli_old_flag_is_a_hidden_alias(tmp_path, capsys):
    from powerlab.cli import build_parser, main

    scen = str(bundled_path("scenarios", "small.yaml"))
    args = ["export-grid", scen, "--format", "csv", "--step-s", "1", "--draw", "0"]
    assert main([*args, "--out", str(tmp_path / "new.csv"), "--boundary", "it"]) == 0
    with pytest.warns(DeprecationWarning, match="--scope is renamed --boundary"):
        assert main([*args, "--out", str(tmp_path / "old.csv"), "--scope", "it"]) == 0
    err = capsys.readouterr().err
    assert "powerlab export-grid: warning: --scope is renamed --boundary" in err
    assert (tmp_path / "new.csv").read_text() == (tmp_path / "old.csv").read_text()
    helptext = build_parser()._subparsers._group_actions[0].choices["export-grid"] \
        .format_help()
    assert "--boundary" in helptext and "--scope" not in helptext


def test_flex_and_study_package_boundary_old_names_warn(tmp_path):
    """flex and the study package (issue 26 section 4, second pass): ``scope`` and
    ``forecast_scope`` of the it/facility meaning are ``boundary`` and
    ``forecast_boundary``; the old names warn and give the same answer."""
    from powerlab.flex.plan import CurtailmentPlan
    from powerlab.flex.targets import Targets, read_targets
    from powerlab.flex.verify import verify_event
    from powerlab.interconnect.ridethrough import ride_through_table
    from powerlab.interconnect.studypackage import StudyPackage

    p = tmp_path / "t.csv"
    p.write_text("start_utc,end_utc,cap_megawatts\n2025-07-01T15:00Z,2025-07-01T15:10Z,5\n")
    kw = {"floor_w": 0.0, "max_w": 1e8, "now": pd.Timestamp("2025-07-01", tz="UTC")}
    new = read_targets(p, boundary="facility", **kw)
    with pytest.warns(DeprecationWarning, match=r"read_targets\(\): scope= is renamed "
                                                "boundary="):
        old = read_targets(p, scope="facility", **kw)
    assert old.boundary == new.boundary == "facility"
    pd.testing.assert_frame_equal(old.frame, new.frame)
    with pytest.raises(OptionError, match="^boundary must be 'it' or 'facility', got 'poi'"):
        read_targets(p, boundary="poi", **kw)
    with pytest.warns(DeprecationWarning):
        assert Targets(new.frame, scope="facility").boundary == "facility"
    with pytest.warns(DeprecationWarning, match="Targets.scope is renamed Targets.boundary"):
        assert new.scope == "facility"
    with pytest.warns(DeprecationWarning, match="CurtailmentPlan.scope is renamed"):
        assert CurtailmentPlan(boundary="it").scope == "it"
    # the old keyword reaches the check under its new name (no forecast is run)
    with pytest.warns(DeprecationWarning, match="forecast_scope= is renamed "
                                                "forecast_boundary="), \
            pytest.raises(OptionError, match="^forecast_boundary must be 'it' or "
                                             "'facility', got 'x'"):
        verify_event(pd.Series(dtype=float), new.frame, forecast_scope="x")
    with pytest.raises(OptionError, match="both forecast_scope= and forecast_boundary="):
        verify_event(pd.Series(dtype=float), new.frame, forecast_scope="it",
                     forecast_boundary="it")
    with pytest.raises(OptionError, match="both scope= and boundary="):
        ride_through_table(None, None, scope="it", boundary="it")
    assert ride_through_table.__renamed_keywords__ == {"scope": "boundary",
                                                       "assumptions": "model"}
    fields = {f: None for f in StudyPackage.__dataclass_fields__
              if f not in ("boundary", "notes", "timings_s", "pmu_gains")}
    with pytest.warns(DeprecationWarning):
        pkg = StudyPackage(scope="it", **fields)
    assert pkg.boundary == "it"
    with pytest.warns(DeprecationWarning, match="StudyPackage.scope is renamed"):
        assert pkg.scope == "it"


def test_flex_verify_old_forecast_scope_flag_is_a_hidden_alias(capsys):
    from powerlab.cli import build_parser

    parser = build_parser()
    base = ["flex", "verify", "store", "--event", "e.csv", "--out", "o"]
    assert parser.parse_args(base).forecast_boundary == "it"
    assert parser.parse_args([*base, "--forecast-boundary", "facility"]) \
        .forecast_boundary == "facility"
    with pytest.warns(DeprecationWarning, match="--forecast-scope is renamed "
                                                "--forecast-boundary"):
        args = parser.parse_args([*base, "--forecast-scope", "facility"])
    assert args.forecast_boundary == "facility" and args.scope == "gpu"
    assert "powerlab flex verify: warning: --forecast-scope is renamed --forecast-boundary" \
        in capsys.readouterr().err
    verify = parser._subparsers._group_actions[0].choices["flex"]._subparsers \
        ._group_actions[0].choices["verify"]
    helptext = verify.format_help()
    assert "--forecast-boundary" in helptext and "--forecast-scope" not in helptext
