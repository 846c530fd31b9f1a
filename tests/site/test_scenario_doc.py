"""docs/scenarios.md stays true to the scenario parser and the shipped scenarios.

* every key path of the shipped scenarios is documented;
* every documented key path is read by the parser (a string literal of its sources, or a
  ``Limits`` field, which the parser reads by field name) and is used by an example that
  parses (the doc's examples or the shipped scenarios);
* every YAML example in the doc parses when it replaces its sections of ``small.yaml``;
* unknown keys are refused with a ScenarioError naming their key path, as documented.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from powerlab.exceptions import ScenarioError
from powerlab.limits import scenario_limits as limits_module
from powerlab.limits.scenario_limits import Limits
from powerlab.reliability import interruptions as interruptions_module
from powerlab.site import disturbances as disturbances_module
from powerlab.site import facility as facility_module
from powerlab.site import hardware as hardware_module
from powerlab.site import scenario as scenario_module
from powerlab.site.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "scenarios.md"
SCENARIOS = sorted((ROOT / "data" / "scenarios").glob("*.yaml"))
#: The modules that read a scenario's sections (parse_scenario and the section readers).
PARSER_SOURCES = [Path(m.__file__) for m in (scenario_module, facility_module,
                                              hardware_module, limits_module,
                                              interruptions_module, disturbances_module)]
SHIPPED = ("small.yaml", "llama3_16k_h100.yaml", "llama3_54d_16k_h100.yaml")
#: Mappings whose keys are names chosen by the user, written ``<cause>`` in the doc.
OPEN_MAPPINGS = {"rates_per_gpu_h": "<cause>"}
JOB_INTER = "jobs[].interruptions."

_TEXT = DOC.read_text(encoding="utf-8")
_SMALL = yaml.safe_load((ROOT / "data" / "scenarios" / "small.yaml").read_text())


def _key_paths(node, prefix: str = "") -> set[str]:
    """Leaf key paths of a parsed YAML document, list indices written ``[]``."""
    out: set[str] = set()
    if isinstance(node, dict):
        open_name = OPEN_MAPPINGS.get(prefix.rsplit(".", 1)[-1]) if prefix else None
        for k, v in node.items():
            name = open_name or str(k)
            out |= _key_paths(v, f"{prefix}.{name}" if prefix else name)
    elif isinstance(node, list) and any(isinstance(v, (dict, list)) for v in node):
        for v in node:
            out |= _key_paths(v, f"{prefix}[]")
    else:
        out.add(prefix)
    return out


def _documented() -> set[str]:
    """Key paths in the first column of the doc's 'Key path' tables; the scenario-level
    ``interruptions.*`` keys are also documented under ``jobs[].interruptions.*``."""
    paths: set[str] = set()
    in_table = False
    for line in _TEXT.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        first = line.split("|")[1].strip()
        if first == "Key path":
            in_table = True
            continue
        if in_table:
            paths.update(re.findall(r"`([^`]+)`", first))
    paths |= {JOB_INTER + p[len("interruptions."):] for p in paths
              if p.startswith("interruptions.")}
    return paths


def _examples() -> list[dict]:
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", _TEXT, re.DOTALL)]


def _literals() -> set[str]:
    out: set[str] = set()
    for p in PARSER_SOURCES:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return out


def test_the_three_shipped_scenarios_are_there():
    assert {p.name for p in SCENARIOS} >= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_key_of_a_shipped_scenario_is_documented(name):
    data = yaml.safe_load((ROOT / "data" / "scenarios" / name).read_text())
    missing = sorted(_key_paths(data) - _documented())
    assert not missing, f"{name}: key paths not in docs/scenarios.md: {missing}"


def test_every_documented_key_is_read_by_the_parser():
    literals = _literals() | {f.name for f in dataclasses.fields(Limits)}
    unread = []
    for path in sorted(_documented()):
        leaf = path.rsplit(".", 1)[-1].removesuffix("[]")
        if leaf.startswith("<"):
            continue
        if leaf not in literals:
            unread.append(path)
    assert not unread, f"documented but not read by the parser: {unread}"


def test_every_documented_leaf_is_used_by_a_parsing_example():
    """Every documented key (mapping rows aside) appears in an example that parses, so
    the parser accepts it where the doc puts it."""
    used: set[str] = set()
    for ex in _examples():
        used |= _key_paths(ex)
    for p in SCENARIOS:
        used |= _key_paths(yaml.safe_load(p.read_text()))
    used |= {JOB_INTER + p[len("interruptions."):] for p in used
             if p.startswith("interruptions.")}
    mappings = {"site.cooling", "mitigations.battery", "jobs[].interruptions"}
    missing = sorted(_documented() - used - mappings)
    assert not missing, f"documented keys no example uses: {missing}"


def test_every_shipped_scenario_parses():
    for p in SCENARIOS:
        parse_scenario(p.read_text(), path=p)


@pytest.mark.parametrize("index", range(len(_examples())))
def test_each_doc_example_parses_in_small_yaml(index):
    example = _examples()[index]
    assert isinstance(example, dict) and example
    data = copy.deepcopy(_SMALL)
    data.update(copy.deepcopy(example))
    scen = parse_scenario(data)
    assert scen.jobs


def test_no_key_spells_megawatts_mw():
    tokens = re.findall(r"`([^`]+)`", _TEXT)
    bad = [t for t in tokens if re.search(r"_mw(_|$)", t) and "unknown" not in t]
    # the doc names `ramp_up_mw_per_s` once, as an example of a refused key
    assert set(bad) <= {"ramp_up_mw_per_s"}, bad
    assert not [p for p in _documented() if re.search(r"_mw(_|$)", p)]


def _section(data: dict, path: str) -> dict:
    node = data
    for part in path.split("."):
        m = re.fullmatch(r"(\w+)\[(\d+)\]", part)
        node = node[m.group(1)][int(m.group(2))] if m else node.setdefault(part, {})
    return node


@pytest.mark.parametrize("where", [
    "", "horizon", "simulation", "site", "site.cooling", "hardware", "jobs[0]",
    "jobs[0].checkpoint", "jobs[0].failures", "jobs[1].eval", "jobs[1].power",
    "interruptions", "interruptions.restart", "mitigations", "mitigations.battery",
    "disturbances[0]", "limits"])
def test_an_unknown_key_is_refused_naming_its_path(where):
    assert "Unknown keys are refused" in _TEXT
    data = copy.deepcopy(_SMALL)
    data["interruptions"] = {"model": "llama3"}
    data["mitigations"]["battery"] = {"power_megawatts": 1, "energy_megawatt_hours": 1}
    data["disturbances"] = [{"at_utc": "2025-06-02T13:00:00Z", "residual_voltage_pu": 0.5,
                             "duration_s": 0.2}]
    parse_scenario(data)  # valid before the unknown key
    target = _section(data, where) if where else data
    target["unknown_key_xyz"] = 1
    with pytest.raises(ScenarioError, match="unknown key") as err:
        parse_scenario(data)
    path = f"{where}.unknown_key_xyz" if where else "unknown_key_xyz"
    assert err.value.key == path
    assert f"key '{path}'" in str(err.value)


def test_a_near_miss_gets_a_hint_and_the_file_name():
    text = (ROOT / "data" / "scenarios" / "small.yaml").read_text()
    text = text.replace("interval_s: 1200", "interval: 1200")
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, path="small.yaml")
    assert err.value.key == "jobs[0].checkpoint.interval"
    assert str(err.value).startswith("small.yaml, key 'jobs[0].checkpoint.interval'")
    assert "did you mean 'interval_s'?" in str(err.value)


@pytest.mark.parametrize("change, drop", [
    (lambda d: d["site"].update(cooling=None), lambda d: d["site"].pop("cooling")),
    (lambda d: d["site"].update(pue=None), lambda d: None),
    (lambda d: (d.update(interruptions={"model": "llama3"}),
                d["jobs"][1].update(failures=None)),
     lambda d: (d.update(interruptions={"model": "llama3"}), d["jobs"][1].pop("failures",
                                                                           None))),
])
def test_documented_empty_keys_read_as_absent(change, drop):
    """docs/scenarios.md 'Surprises': an empty known key reads as if it were left out."""
    empty, absent = copy.deepcopy(_SMALL), copy.deepcopy(_SMALL)
    change(empty)
    drop(absent)
    assert parse_scenario(empty) == parse_scenario(absent)


def test_duplicate_yaml_keys_are_refused_with_their_lines():
    with pytest.raises(ScenarioError, match="duplicate key 'name' on lines 1 and 2"):
        parse_scenario("name: a\nname: b\n")
