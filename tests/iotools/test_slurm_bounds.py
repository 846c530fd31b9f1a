"""sacct edge cases and memory bombs (issue 24): every count is bounded before anything
is allocated, every impossible row is one ParseError naming the line and field, and an
inconsistent NNodes is a counted warning."""

from __future__ import annotations

import json

import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools.slurm import expand_hostlist, read_sacct

pytestmark = pytest.mark.bad_input("readers")

HEAD = "JobID|JobName|State|Start|End|NNodes|NodeList|AllocTRES\n"
OK = "100|train|COMPLETED|2025-07-02T10:00:00|2025-07-02T11:00:00|2|n[1-2]|gres/gpu=16\n"


def _sacct(tmp_path, row: str):
    f = tmp_path / "sacct.txt"
    f.write_text(HEAD + row)
    return read_sacct(f, tz="UTC")


@pytest.mark.parametrize("expr", ["node[1-100000000]", "r[1-300]n[1-300]g[1-300]",
                                  "a[1-600000],b[1-600000]"])
def test_host_list_bomb_is_refused_before_expanding(expr):
    with pytest.raises(ValueError, match="more than 1,000,000 names"):
        expand_hostlist(expr)


def test_a_host_list_of_a_large_cluster_still_expands():
    assert len(expand_hostlist("r[1-100]n[001-100]")) == 10_000


def test_a_300_character_host_name_is_refused():
    with pytest.raises(ValueError, match="300 characters"):
        expand_hostlist("h" * 300)


@pytest.mark.parametrize("row, match", [
    (OK.replace("2025-07-02T11:00:00", "2025-07-02T09:00:00"), "before Start"),
    (OK.replace("gres/gpu=16", "gres/gpu=-4"), "not a whole number"),
    (OK.replace("gres/gpu=16", "gres/gpu=" + "9" * 5000), "not a whole number"),
    (OK.replace("2025-07-02T10:00:00", "07/02/2025 10:00"), "ISO 8601"),
    (OK.replace("2025-07-02T10:00:00", "2025-02-30T10:00:00"), "bad time"),
    (OK.replace("2|n[1-2]", "2|node[1-100000000]"), "more than"),
    (OK.replace("|2|", "|two|"), "NNodes"),
])
def test_impossible_parsable2_rows(tmp_path, row, match):
    with pytest.raises(ParseError, match=match) as e:
        _sacct(tmp_path, row)
    assert e.value.line == 2


def test_a_local_time_that_does_not_exist_is_an_error(tmp_path):
    f = tmp_path / "sacct.txt"
    f.write_text(HEAD + OK.replace("2025-07-02T10:00:00", "2025-03-09T02:30:00")
                 .replace("2025-07-02T11:00:00", "2025-03-09T04:00:00"))
    with pytest.raises(ParseError, match="America/Chicago"):
        read_sacct(f, tz="America/Chicago")


def test_nnodes_inconsistent_with_the_host_list_is_counted(tmp_path):
    with pytest.warns(DataQualityWarning, match="1 job row"):
        df = _sacct(tmp_path, OK.replace("|2|", "|5|"))
    assert df["n_nodes"].tolist() == [2]


def _json(tmp_path, job):
    f = tmp_path / "sacct.json"
    f.write_text(json.dumps({"jobs": [job]}))
    return read_sacct(f)


GOOD = {"job_id": 7, "name": "x", "state": {"current": ["COMPLETED"]},
        "time": {"start": 1751450400, "end": 1751454000}, "nodes": "n[1-2]",
        "gres_detail": ["gpu:8(IDX:0-7)", "gpu:8(IDX:0-7)"],
        "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 16}]}}


@pytest.mark.parametrize("patch, match", [
    ({"state": "COMPLETED"}, "unexpected structure"),          # string where a dict is
    ({"time": [1, 2]}, "unexpected structure"),
    ({"nodes": {"a": 1}}, "unexpected structure"),
    ({"gres_detail": ["gpu:8(IDX:0-200000000)", "gpu:8(IDX:0-7)"]}, "GPU index range"),
    ({"gres_detail": ["gpu:8(IDX:0-3,2)", "gpu:8(IDX:0-7)"]}, "twice"),
    ({"time": {"start": 1751454000, "end": 1751450400}}, "before Start"),
    ({"time": {"start": 1e300, "end": 0}}, "Unix epoch"),
    ({"tres": {"allocated": [{"type": "gres", "name": "gpu", "count": -3}]}}, "outside"),
    ({"tres": {"allocated": [{"type": "gres", "name": "gpu", "count": "8"}]}}, "whole"),
    ({"steps": ["batch"]}, "unexpected structure"),
])
def test_json_structures_that_are_not_sacct(tmp_path, patch, match):
    with pytest.raises(ParseError, match=match):
        _json(tmp_path, {**GOOD, **patch})


def test_json_deeply_nested_is_one_error(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text('{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ParseError):
        read_sacct(f)


def test_json_good_job_still_reads(tmp_path):
    df = _json(tmp_path, GOOD)
    assert df["gpus"].tolist() == [16]
    assert df["gpu_indices"].iloc[0] == {"n1": tuple(range(8)), "n2": tuple(range(8))}
