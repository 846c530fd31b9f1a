"""Requirement specs: the shipped examples, and every bad spec refused with its key path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from powerlab.exceptions import ScenarioError
from powerlab.limits.requirements import KINDS, parse_requirements, read_requirements

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "data" / "requirements").glob("*.yaml"))

GOOD = """
name: t
requirements:
  - {name: r1, kind: ramp, window_s: 1, limit: 2, unit: MW/s, source: s, illustrative: true}
  - {name: r2, kind: ramp, window_s: 60, direction: down, limit: 10, unit: MW/min,
     source: s, illustrative: false}
  - {name: d, kind: deviation, window_s: 10, limit: 3, unit: MW, source: s,
     illustrative: true}
  - {name: o, kind: oscillation, band_hz: [0.1, 2], measure: rms, limit: 500, unit: kW,
     source: s, illustrative: true}
  - {name: s, kind: step, within_s: 1, limit: 5, unit: MW, source: s, illustrative: true}
  - {name: rt, kind: ride_through, residual_voltage_pu: 0.7, sag_duration_s: 0.5,
     limit: 1, unit: MW, source: s, illustrative: true}
grid_modes:
  - {name: m, band_hz: [0.1, 2], min_amplitude_megawatts: 0.5, source: s,
     illustrative: true}
"""


def test_shipped_examples_read_and_carry_sources():
    assert len(EXAMPLES) >= 2
    kinds = set()
    for path in EXAMPLES:
        spec = read_requirements(path)
        assert spec.requirements, path
        for r in spec.requirements:
            kinds.add(r.kind)
            assert r.source.strip() and isinstance(r.illustrative, bool)
            assert r.limit_si == pytest.approx(r.limit * r.unit_factor)
        for m in spec.grid_modes:
            assert m.source.strip() and m.band_hz[0] < m.band_hz[1]
    assert kinds == set(KINDS)          # the examples show every kind


def test_units_convert_to_si_and_metric_names():
    spec = parse_requirements(GOOD)
    assert spec["r1"].limit_si == 2e6                       # MW/s -> W/s
    assert spec["r2"].limit_si == pytest.approx(10e6 / 60)  # MW/min -> W/s
    assert spec["o"].limit_si == 5e5 and spec["o"].band_hz == (0.1, 2.0)
    assert spec["s"].window_s == 1.0 and spec["rt"].window_s == 0.5
    assert spec["o"].window_s == 60.0                       # the stated default
    assert spec["r2"].metric == "ramp_down_of_60s_means"
    assert spec["o"].metric == "band_rms_0.1_2hz_worst_60s_window"
    assert spec.boundary == "facility" and spec.max_exceed_probability == 0.0
    assert len(spec.hash()) == 64 and spec.hash() == parse_requirements(GOOD).hash()


def _doc(**changes):
    """GOOD with the first requirement's keys changed (None deletes a key)."""
    d = yaml.safe_load(GOOD)
    for k, v in changes.items():
        if v is None:
            d["requirements"][0].pop(k)
        else:
            d["requirements"][0][k] = v
    return d


BAD = [
    (_doc(kind="ramps"), "requirements[0].kind", "one of"),
    (_doc(unit="MW"), "requirements[0].unit", "not a unit of a ramp"),
    (_doc(limit="two"), "requirements[0].limit", "expected a number"),
    (_doc(limit=-1), "requirements[0].limit", ">= 0"),
    (_doc(window_s=0), "requirements[0].window_s", "> 0"),
    (_doc(window_s=None), "requirements[0].window_s", "required"),
    (_doc(source=None), "requirements[0].source", "public source"),
    (_doc(source="  "), "requirements[0].source", "empty"),
    (_doc(illustrative=None), "requirements[0].illustrative", "required"),
    (_doc(illustrative="yes"), "requirements[0].illustrative", "true or false"),
    (_doc(direction="sideways"), "requirements[0].direction", "one of"),
    (_doc(windw_s=1), "requirements[0].windw_s", "did you mean 'window_s'"),
    (_doc(kind="oscillation", unit="MW", band_hz=[2, 0.1], measure="rms", window_s=None),
     "requirements[0].band_hz", "low < high"),
    (_doc(kind="oscillation", unit="MW", band_hz=[0, 2], measure="rms", window_s=None),
     "requirements[0].band_hz", "0 < low"),
    (_doc(kind="oscillation", unit="MW", band_hz="0.1-2", measure="rms", window_s=None),
     "requirements[0].band_hz", "[low, high]"),
    (_doc(kind="oscillation", unit="MW", band_hz=[0.1, 2], measure="max", window_s=None),
     "requirements[0].measure", "expected 'rms' or 'peak_to_peak', got 'max'"),
    (_doc(kind="ride_through", unit="MW", residual_voltage_pu=1.0, sag_duration_s=1,
          window_s=None), "requirements[0].residual_voltage_pu", "below 1 pu"),
    ({**yaml.safe_load(GOOD), "requirements": []}, "requirements", "non-empty list"),
    ({**yaml.safe_load(GOOD), "boundary": "site"}, "boundary", "expected 'facility' or 'it'"),
    ({**yaml.safe_load(GOOD), "max_exceed_probability": 1}, "max_exceed_probability",
     "below 1"),
    ({**yaml.safe_load(GOOD), "grid_modes": {"name": "m"}}, "grid_modes", "list"),
    ({**yaml.safe_load(GOOD), "grid_modes": [{"name": "m", "band_hz": [0.1, 2],
                                              "source": "s", "illustrative": True}]},
     "grid_modes[0].min_amplitude_megawatts", "required"),
    # memory bombs (issue 24): bounded before anything is allocated, the cost named
    (_doc(kind="oscillation", unit="MW", band_hz=[0.1, 1e9], measure="rms", window_s=None),
     "requirements[0].band_hz", "samples per hour"),
    (_doc(kind="oscillation", unit="MW", band_hz=[1e-9, 2], measure="rms", window_s=None),
     "requirements[0].band_hz", "segment of"),
    (_doc(window_s=1e12), "requirements[0].window_s", "<= 86400"),
    (_doc(kind="step", unit="MW", within_s=1e12, window_s=None), "requirements[0].within_s",
     "<= 86400"),
    (_doc(kind="ride_through", unit="MW", residual_voltage_pu=0.5, sag_duration_s=1e15,
          window_s=None), "requirements[0].sag_duration_s", "<= 600"),
    (_doc(kind="ride_through", unit="MW", residual_voltage_pu=0.5, sag_duration_s=1,
          observe_s=1e15, window_s=None), "requirements[0].observe_s", "<= 600"),
]


@pytest.mark.parametrize("doc,key,words", [
    pytest.param(d, k, w, marks=pytest.mark.bad_input("requirements"), id=f"{i}-{k}")
    for i, (d, k, w) in enumerate(BAD)])
def test_bad_spec_names_the_key(doc, key, words):
    with pytest.raises(ScenarioError) as ei:
        parse_requirements(doc, path="spec.yaml")
    assert ei.value.key == key
    assert words in str(ei.value) and "spec.yaml" in str(ei.value)


@pytest.mark.bad_input("requirements")
def test_duplicate_requirement_names_refused():
    d = yaml.safe_load(GOOD)
    d["requirements"][1]["name"] = "r1"
    with pytest.raises(ScenarioError, match="duplicate name 'r1'") as ei:
        parse_requirements(d)
    assert ei.value.key == "requirements[1].name"


@pytest.mark.bad_input("requirements")
def test_duplicate_yaml_key_refused_with_both_lines():
    text = GOOD.replace("name: t\n", "name: t\nboundary: it\nboundary: facility\n")
    with pytest.raises(ScenarioError, match="duplicate key 'boundary' on lines 3 and 4"):
        parse_requirements(text)


@pytest.mark.bad_input("requirements")
def test_unreadable_spec_file(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read requirement spec"):
        read_requirements(tmp_path / "missing.yaml")
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        read_requirements(bad)


@pytest.mark.bad_input("cli")
def test_comply_cli_bad_spec_is_one_line(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(GOOD.replace("band_hz: [0.1, 2]", "band_hz: [2, 0.1]", 1))
    r = subprocess.run([sys.executable, "-m", "powerlab.cli", "comply",
                        str(REPO / "data" / "scenarios" / "small.yaml"),
                        "--requirements", str(spec), "--out", str(tmp_path / "out")],
                       check=False, capture_output=True, text=True,
                       cwd=REPO)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert "requirements[3].band_hz" in r.stderr
    assert not (tmp_path / "out").exists()
