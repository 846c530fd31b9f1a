"""Target trajectories (powerlab.flex.targets): CSV and OpenADR 3 event JSON, and the
one-line errors for targets that cannot be planned."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from powerlab.exceptions import ParseError, PowerlabError
from powerlab.flex import parse_openadr_event, read_targets

NOW = pd.Timestamp("2025-07-01T00:00Z")
KW = {"floor_w": 6e6, "max_w": 17e6, "now": NOW}


def _csv(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_targets_and_trajectory(tmp_path):
    t = read_targets(_csv(tmp_path, "start_utc,end_utc,cap_megawatts\n"
                                    "2025-07-01T02:00Z,2025-07-01T02:05Z,12\n"
                                    "2025-07-01T01:00Z,,10\n".replace(",,10", ",2025-07-01T01:10Z,10")),
                     **KW)
    f = t.frame
    assert list(f["cap_w"]) == [10e6, 12e6]                  # sorted by start
    assert f["start_utc"].iloc[0] == pd.Timestamp("2025-07-01T01:00Z")
    tr = read_targets(_csv(tmp_path, "timestamp,cap_megawatts\n"
                                     "2025-07-01T01:00Z,11\n2025-07-01T01:05Z,9\n"
                                     "2025-07-01T01:10Z,\n", "tr.csv"), **KW)
    assert list(tr.frame["cap_w"]) == [11e6, 9e6]
    assert tr.frame["end_utc"].iloc[-1] == pd.Timestamp("2025-07-01T01:10Z")
    loc = read_targets(_csv(tmp_path, "start_utc,duration_s,cap_megawatts\n"
                                      "2025-07-01 03:00,300,12\n", "loc.csv"),
                       tz="America/Chicago", **KW)
    assert loc.frame["start_utc"].iloc[0] == pd.Timestamp("2025-07-01T08:00Z")  # CDT


EVENT = {
    "objectType": "EVENT", "programID": "ercot-lel", "eventName": "curtail",
    "createdDateTime": "2025-07-01T00:30:00Z",
    "payloadDescriptors": [{"objectType": "EVENT_PAYLOAD_DESCRIPTOR",
                            "payloadType": "IMPORT_CAPACITY_LIMIT", "units": "KW"}],
    "intervalPeriod": {"start": "2025-07-01T01:00:00Z", "duration": "PT5M"},
    "intervals": [{"id": 0, "payloads": [{"type": "IMPORT_CAPACITY_LIMIT", "values": [11000]}]},
                  {"id": 1, "payloads": [{"type": "IMPORT_CAPACITY_LIMIT", "values": [10000]}]},
                  {"id": 2, "intervalPeriod": {"start": "2025-07-01T02:00:00Z",
                                               "duration": "PT10M"},
                   "payloads": [{"type": "IMPORT_CAPACITY_LIMIT", "values": [12000]}]}],
}


def test_openadr3_event_intervals_follow_the_event_period(tmp_path):
    """OpenADR 3: an event's intervalPeriod sets the start and duration of intervals that
    have none; intervals follow one another in order."""
    f = parse_openadr_event(json.dumps(EVENT))
    assert list(f["cap_w"]) == [11e6, 10e6, 12e6]             # KW -> W
    assert list(f["start_utc"]) == [pd.Timestamp("2025-07-01T01:00Z"),
                                    pd.Timestamp("2025-07-01T01:05Z"),
                                    pd.Timestamp("2025-07-01T02:00Z")]
    assert f["end_utc"].iloc[2] == pd.Timestamp("2025-07-01T02:10Z")
    assert (f["notice_utc"] == pd.Timestamp("2025-07-01T00:30Z")).all()
    p = tmp_path / "ev.json"
    p.write_text(json.dumps({"program": {"programName": "x"}, "events": [EVENT]}))
    assert len(read_targets(p, **KW)) == 3


@pytest.mark.parametrize("text,match", [
    ("start_utc,end_utc,cap_megawatts\n2025-07-01T01:00Z,2025-07-01T01:05Z,5\n",
     "below the site's floor"),
    ("start_utc,end_utc,cap_megawatts\n2025-06-30T01:00Z,2025-06-30T01:05Z,10\n",
     "in the past"),
    (("start_utc,end_utc,cap_megawatts\n2025-07-01T01:00Z,2025-07-01T01:10Z,10\n"
     "2025-07-01T01:05Z,2025-07-01T01:15Z,11\n"), "overlap"),
    ("start_utc,end_utc,cap_megawatts\n2025-07-01 01:00 Mars/Olympus,2025-07-01T01:05Z,10\n",
     "unknown time zone"),
    ("start_utc,end_utc,cap_megawatts\n2025-07-01 01:00,2025-07-01 01:05,10\n",
     "no time zone"),
    ("start_utc,end_utc,cap_megawatts\n2025-07-01T01:00Z,2025-07-01T01:05Z,\n",
     "missing cap"),
    ("start_utc,end_utc,cap_mw\n2025-07-01T01:00Z,2025-07-01T01:05Z,10\n",
     "units are spelled out"),
])
def test_bad_targets_are_one_line_errors(tmp_path, text, match):
    with pytest.raises(ParseError, match=match) as e:
        read_targets(_csv(tmp_path, text), **KW)
    assert "\n" not in str(e.value) and "t.csv" in str(e.value)


def test_bad_openadr_events(tmp_path):
    bad = dict(EVENT)
    bad.pop("programID")
    with pytest.raises(ParseError, match="not an OpenADR 3 event"):
        parse_openadr_event(json.dumps(bad))
    mixed = json.loads(json.dumps(EVENT))
    mixed["intervals"][1]["payloads"][0]["type"] = "PRICE"
    from powerlab.exceptions import DataQualityWarning

    with pytest.warns(DataQualityWarning, match=r"intervals \[1\] carry no"):
        assert len(parse_openadr_event(json.dumps(mixed))) == 2
    price = json.loads(json.dumps(EVENT))
    for iv in price["intervals"]:
        iv["payloads"][0]["type"] = "PRICE"
    with pytest.raises(ParseError, match="no IMPORT_CAPACITY_LIMIT"):
        parse_openadr_event(json.dumps(price))
    with pytest.raises(ParseError, match="unknown time zone"):
        read_targets(_csv(tmp_path, "start_utc,end_utc,cap_megawatts\n"), tz="Nowhere/X", **KW)


def _error(fn):
    with pytest.raises(ParseError) as e:
        fn()
    return e.value


def test_csv_errors_name_file_line_and_column(tmp_path):
    """ParseError (powerlab.exceptions) carries ``path``, ``line`` (1-based line in the
    file) and ``column`` (the column concerned) and reads "<file>, line <n>, column
    '<name>': <message>".  A target the plan cannot take is located at the value at fault:
    the cap's line and cap_megawatts, an end by end_utc or duration_s, a trajectory's end
    by the next row's timestamp, an overlap by the second target's start; the line is the
    physical one, comments and blank lines counted."""
    p = _csv(tmp_path, "start_utc,end_utc,cap_megawatts\n"
                       "2025-07-01T01:00Z,2025-07-01T01:05Z,5\n")
    e = _error(lambda: read_targets(p, **KW))
    assert (e.path, e.line, e.column) == (str(p), 2, "cap_megawatts")
    assert str(e) == (f"{p}, line 2, column 'cap_megawatts': cap 5.000 MW is below the "
                      "site's floor 6.000 MW (every job paused)")
    p = _csv(tmp_path, "# caps from the utility\n\nstart_utc,end_utc,cap_megawatts\n"
                       "# the first\n2025-07-01T01:00Z,2025-07-01T01:05Z,10\n\n"
                       "2025-07-01T02:00Z,2025-07-01T01:55Z,10\n")
    e = _error(lambda: read_targets(p, **KW))
    assert str(e) == f"{p}, line 7, column 'end_utc': target ends before it starts"
    p = _csv(tmp_path, "# header follows\nstart_utc,end_utc,cap_mw\n")
    assert _error(lambda: read_targets(p, **KW)).line == 2
    p = _csv(tmp_path, "start_utc,duration_s,cap_megawatts\n2025-06-30T01:00Z,300,10\n")
    e = _error(lambda: read_targets(p, **KW))
    assert (e.line, e.column) == (2, "duration_s") and "in the past" in str(e)
    p = _csv(tmp_path, "timestamp,cap_megawatts\n2025-07-01T01:00Z,11\n"
                       "2025-07-01T00:55Z,9\n2025-07-01T01:10Z,\n")
    e = _error(lambda: read_targets(p, **KW))
    assert (e.line, e.column) == (3, "timestamp") and "ends before it starts" in str(e)
    p = _csv(tmp_path, "start_utc,end_utc,cap_megawatts\n"
                       "2025-07-01T01:00Z,2025-07-01T01:10Z,10\n"
                       "2025-07-01T01:05Z,2025-07-01T01:15Z,11\n")
    e = _error(lambda: read_targets(p, **KW))
    assert (e.line, e.column) == (3, "start_utc")
    assert str(e).startswith(f"{p}, line 3, column 'start_utc': targets overlap: t.csv:2 (")


def test_openadr_errors_name_file_and_json_path(tmp_path):
    """In OpenADR JSON the column is the JSON path of the value at fault (the payload's
    values for a cap, the intervalPeriod for a time); a syntax error has its line."""
    big = json.loads(json.dumps(EVENT))
    big["intervals"][1]["payloads"] = [{"type": "PRICE", "values": [1]},
                                       {"type": "IMPORT_CAPACITY_LIMIT", "values": [5000]}]
    p = tmp_path / "ev.json"
    p.write_text(json.dumps(big))
    e = _error(lambda: read_targets(p, **KW))
    assert (e.path, e.line, e.column) == (str(p), None,
                                          "events[0]/intervals[1]/payloads[1]/values")
    assert str(e) == (f"{p}, column 'events[0]/intervals[1]/payloads[1]/values': cap "
                      "5.000 MW is below the site's floor 6.000 MW (every job paused)")
    late = json.loads(json.dumps(EVENT))
    late["intervals"][2]["intervalPeriod"]["start"] = "2025-07-01T01:07:00"
    e = _error(lambda: parse_openadr_event(json.dumps(late), path=p))
    assert e.column == "events[0]/intervals[2]/intervalPeriod/start"
    p.write_text('{"programID": "x",\n "intervals" []}')
    e = _error(lambda: read_targets(p, **KW))
    assert (e.line, e.column) == (2, None)
    assert str(e) == f"{p}, line 2: not JSON: Expecting ':' delimiter (character 14 of the line)"


def test_targets_not_read_from_a_file_are_named_by_source():
    """check_targets on a frame built in code: no file position to give, so the message
    names the target by its ``source``; the column field stays empty."""
    from powerlab.flex import random_targets
    from powerlab.flex.targets import check_targets

    f = random_targets("2025-07-01T01:00Z", "2025-07-01T03:00Z", 20e6, n=3).frame
    e = _error(lambda: check_targets(f, floor_w=30e6, max_w=40e6, now=NOW))
    assert (e.line, e.column) == (None, None)
    assert str(e).startswith("target random[") and "below the site's floor" in str(e)


def test_a_cap_above_the_site_maximum_binds_nothing(tmp_path):
    """Issue 33 item 4: a target above the site's maximum was refused; a cap the site
    cannot reach binds nothing, so it is kept, counted in a warning."""
    import warnings as w

    from powerlab.exceptions import DataQualityWarning

    p = _csv(tmp_path, "start_utc,end_utc,cap_megawatts\n"
                       "2025-07-01T01:00Z,2025-07-01T01:05Z,18\n"
                       "2025-07-01T02:00Z,2025-07-01T02:05Z,10\n")
    with w.catch_warnings(record=True) as got:
        w.simplefilter("always")
        t = read_targets(p, **KW)
    assert len(t) == 2 and list(t.frame["cap_w"]) == [18e6, 10e6]
    msgs = [str(x.message) for x in got if issubclass(x.category, DataQualityWarning)]
    assert len(msgs) == 1 and msgs[0].startswith("1 target(s) cap the site above its "
                                                 "maximum power 17.000 MW")


def test_openadr_without_jsonschema_names_the_extra(monkeypatch):
    """jsonschema comes with the 'openadr' extra; without it reading an event is one clean
    PowerlabError that says what to install (not an ImportError), before any parsing."""
    monkeypatch.setitem(__import__("sys").modules, "jsonschema", None)   # import fails
    with pytest.raises(PowerlabError, match=r"needs jsonschema \(pip install "
                                            r"'powerlab\[openadr\]'\)") as e:
        parse_openadr_event(json.dumps(EVENT))
    assert not isinstance(e.value, ParseError)
