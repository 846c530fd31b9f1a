"""Tests of powerlab.limits.yamlspec: the safe loader every planner-written YAML file goes
through (duplicate keys, alias bombs, deep nesting, exponent numbers)."""


import pytest

from powerlab.exceptions import ScenarioError
from powerlab.limits.yamlspec import MAX_DEPTH, Section, load_yaml
from powerlab.site.scenario import parse_scenario


@pytest.mark.bad_input("scenario")
def test_duplicate_keys_are_refused_naming_both_lines():
    with pytest.raises(ScenarioError, match=r"duplicate key 'gpus' on lines 2 and 4"):
        load_yaml("job:\n  gpus: 8\n  name: a\n  gpus: 800\n", source="s.yaml")
    with pytest.raises(ScenarioError, match=r"duplicate key 'jobs' on lines 1 and 3"):
        load_yaml("jobs:\n  - {name: a}\njobs:\n  - {name: b}\n")
    # the same key in different mappings is fine
    assert load_yaml("a: {x: 1}\nb: {x: 2}\n") == {"a": {"x": 1}, "b": {"x": 2}}


@pytest.mark.bad_input("scenario")
def test_a_second_jobs_block_in_a_scenario_is_refused():
    text = ("site: {tz: UTC}\njobs:\n  - {name: a, gpus: 8, start_utc: '2025-01-01T00:00:00Z',"
            " duration_s: 600, step_time_s: 1}\njobs:\n  - {name: b, gpus: 800, "
            "start_utc: '2025-01-01T00:00:00Z', duration_s: 600, step_time_s: 1}\n")
    with pytest.raises(ScenarioError, match="duplicate key 'jobs'"):
        parse_scenario(text)


@pytest.mark.bad_input("scenario")
def test_billion_laughs_is_refused_fast():
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(ScenarioError, match="billion laughs"):
            load_yaml("\n".join(lines))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # refused before expanding: 9**9 strings would need gigabytes (memory, not time,
    # is the measure: it does not depend on the machine's load)
    assert peak < 50 * 2**20
    # a few honest aliases still work
    assert load_yaml("base: &b {x: 1}\nc: *b\n") == {"base": {"x": 1}, "c": {"x": 1}}


@pytest.mark.bad_input("scenario")
@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "a:\n" + "".join(
    f"{' ' * (2 * i)}k{i}:\n" for i in range(1, 200))])
def test_deep_nesting_is_a_clear_error_not_a_recursion_error(text):
    with pytest.raises(ScenarioError, match=f"deeper than {MAX_DEPTH}"):
        load_yaml(text)


def test_exponent_numbers_are_numbers_and_timestamps_stay_text():
    d = load_yaml("a: 1e9\nb: 4.9e6\nc: -2.5E-3\nd: 1_000\ne: 2025-01-01T00:00:00Z\n"
                  "f: '1e9'\ng: e9\n")
    assert d["a"] == 1e9 and isinstance(d["a"], float)
    assert d["b"] == 4.9e6 and d["c"] == -2.5e-3 and d["d"] == 1000
    assert d["e"] == "2025-01-01T00:00:00Z"
    assert d["f"] == "1e9" and d["g"] == "e9"   # quoted and non-numbers stay strings


@pytest.mark.bad_input("scenario")
def test_invalid_yaml_names_the_line():
    with pytest.raises(ScenarioError, match="not valid YAML at line 2"):
        load_yaml("a: 1\nb: : 2\n", source="bad.yaml")


def test_section_integer_accepts_whole_floats_and_bounds():
    s = Section({"n": 1e4, "m": 2.5, "big": 10**13}, "top", "f.yaml")
    assert s.integer("n") == 10_000
    with pytest.raises(ScenarioError, match="top.m"):
        s.integer("m")
    with pytest.raises(ScenarioError, match="must be <= "):
        s.integer("big", hi=10**9)
