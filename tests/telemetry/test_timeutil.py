"""The one time parser (powerlab.telemetry.to_utc) and its former callers.

Before issue 26 twelve private copies read times; they differed in what a naive time
meant, in whether numbers or ``07/02/2025`` were accepted and in the error class.  These
tests hold every former caller, through its public entry point, to the one rule: the same
UTC instant for a readable time, an error of the powerlab family naming the same problem
for a bad one.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from powerlab.exceptions import (
    DataQualityWarning,
    ParseError,
    PowerlabError,
    ScenarioError,
    SchemaError,
    StoreError,
)
from powerlab.telemetry import series_to_utc, time_bound, to_utc

ROOT = Path(__file__).parents[2]
T = pd.Timestamp("2025-07-01T10:00:00Z")        # every readable input below means this
CHICAGO = "America/Chicago"                     # UTC-5 in July

# (value, what the rule makes of it without tz: an instant or the words of the error)
STRINGS = [
    ("2025-07-01T10:00:00Z", T),
    ("2025-07-01T10:00Z", T),
    ("2025-07-01 10:00:00 UTC", T),
    ("2025-07-01T12:00:00+02:00", T),
    ("2025-07-01T05:00:00-0500", T),
    ("2025-07-01T10:00:00.000Z", T),
    ("2025-07-01T10:00:00", "no time zone"),
    ("2025-07-01 10:00", "no time zone"),
    ("07/01/2025 10:00", "ISO 8601"),            # July 1 or January 7: never guessed
    ("yesterday", "ISO 8601"),
    ("now", "ISO 8601"),                           # depends on when it runs
    ("1751364000", "ISO 8601"),                    # epoch seconds as text
    ("2025-02-30T10:00:00Z", "not a valid time"),  # no such day
    ("", "missing"),
]
OBJECTS = [
    (pd.Timestamp("2025-07-01T12:00", tz="Europe/Berlin"), T),
    (dt.datetime(2025, 7, 1, 10, tzinfo=dt.UTC), T),
    (pd.Timestamp("2025-07-01T10:00"), "no time zone"),
    (np.datetime64("2025-07-01T10:00"), "no time zone"),
    (dt.datetime(2025, 7, 1, 10), "no time zone"),
    (1751364000, "number"),
    (1751364000.0, "number"),
    (True, "not a time"),
    (pd.NaT, "missing"),
    (float("nan"), "missing"),
    ([2025, 7, 1], "not a time"),
]
ALL = STRINGS + OBJECTS


def _ids(cases):
    return [repr(v)[:40] for v, _ in cases]


# --------------------------------------------------------------------------- the rule
@pytest.mark.parametrize("value, expect", ALL, ids=_ids(ALL))
def test_the_rule_without_tz(value, expect):
    if isinstance(expect, pd.Timestamp):
        got = to_utc(value)
        assert got == expect and str(got.tz) == "UTC"
    else:
        with pytest.raises(PowerlabError, match=expect) as e:
            to_utc(value, what="--start")
        assert str(e.value).startswith("--start") and "\n" not in str(e.value)


@pytest.mark.parametrize("value", ["2025-07-01T05:00:00", "2025-07-01 05:00",
                                   pd.Timestamp("2025-07-01T05:00"),
                                   np.datetime64("2025-07-01T05:00")], ids=repr)
def test_a_naive_time_is_read_in_the_zone_given(value):
    assert to_utc(value, tz=CHICAGO) == T
    # an explicit offset wins over tz (it says what it means)
    assert to_utc("2025-07-01T10:00:00Z", tz=CHICAGO) == T


def test_daylight_saving_gaps_and_overlaps_are_refused_not_shifted():
    # 2025-03-09 02:30 does not exist in Chicago; 2025-11-02 01:30 happens twice
    for text in ("2025-03-09T02:30:00", "2025-11-02T01:30:00"):
        with pytest.raises(PowerlabError, match=f"in {CHICAGO}"):
            to_utc(text, tz=CHICAGO)
    with pytest.raises(PowerlabError, match="Mars/Olympus"):
        to_utc("2025-07-01T10:00", tz="Mars/Olympus")


def test_epoch_numbers_only_when_the_unit_is_named():
    assert to_utc(1751364000, epoch_unit="s") == T
    assert to_utc(1751364000000, epoch_unit="ms") == T
    assert to_utc(np.int64(1751364000), epoch_unit="s") == T
    with pytest.raises(PowerlabError, match="number"):
        to_utc(1751364000)
    with pytest.raises(PowerlabError, match="finite"):
        to_utc(float("inf"), epoch_unit="s")
    with pytest.raises(ValueError, match="epoch_unit"):
        to_utc(1, epoch_unit="days")


def test_none_is_an_open_bound_only_where_asked():
    assert to_utc(None, optional=True) is None
    assert time_bound(None) is None
    with pytest.raises(PowerlabError, match="--end is missing"):
        to_utc(None, what="--end")


def test_the_caller_chooses_the_error_and_the_hint():
    with pytest.raises(StoreError, match="time bound"):
        time_bound("2025-07-01 10:00")
    with pytest.raises(ParseError, match="line 3") as e:
        to_utc("x", error=lambda m: ParseError(m, path="t.csv", line=3))
    assert "t.csv" in str(e.value)
    with pytest.raises(PowerlabError, match="or pass --tz$"):
        to_utc("2025-07-01 10:00", hint="pass --tz")


def test_series_to_utc():
    aware = pd.Series(pd.date_range("2025-07-01T12:00", periods=3, freq="1s",
                                    tz="Europe/Berlin"), name="timestamp")
    naive = pd.Series(pd.date_range("2025-07-01T05:00", periods=3, freq="1s"))
    assert series_to_utc(aware).iloc[0] == T
    assert series_to_utc(naive, tz=CHICAGO).iloc[0] == T
    assert str(series_to_utc(aware).dt.tz) == "UTC"
    with pytest.raises(PowerlabError, match="no time zone"):
        series_to_utc(naive)
    with pytest.raises(PowerlabError, match="got int64"):
        series_to_utc(pd.Series([1, 2]), what="t")
    with pytest.raises(PowerlabError, match="in America/Chicago"):
        series_to_utc(pd.Series(pd.to_datetime(["2025-03-09T02:30"])), tz=CHICAGO)


# ------------------------------------------------------- the former callers agree
def _via_scenario(value):
    from powerlab.site.scenario import parse_scenario

    doc = yaml.safe_load((ROOT / "data" / "scenarios" / "small.yaml").read_text())
    doc["horizon"] = {"start_utc": value, "end_utc": "2025-07-01T12:00:00Z"}
    for job in doc["jobs"]:
        job["start_utc"] = "2025-07-01T10:00:00Z"
    try:
        return parse_scenario(doc).start_utc
    except ScenarioError as exc:
        assert exc.key == "horizon.start_utc", exc      # the key is named
        raise


def _via_sacct(tmp_path, value, tz="UTC"):
    from powerlab.iotools.slurm import read_sacct

    f = tmp_path / "sacct.txt"
    f.write_text("JobID|JobName|State|Start|End|NNodes|NodeList|AllocTRES\n"
                 f"100|train|RUNNING|{value}|Unknown|1|n1|gres/gpu=8\n")
    try:
        return read_sacct(f, tz=tz)["start"].iloc[0]
    except ParseError as exc:
        assert "line 2" in str(exc) and "Start" in str(exc), exc
        raise


def _via_targets(tmp_path, value, tz=None):
    from powerlab.flex import read_targets

    f = tmp_path / "t.csv"
    f.write_text(f"start_utc,end_utc,cap_megawatts\n{value},2025-07-01T23:00:00Z,10\n")
    try:
        return read_targets(f, floor_w=6e6, max_w=17e6, now=pd.Timestamp("2025-07-01T00:00Z"),
                            tz=tz).frame["start_utc"].iloc[0]
    except ParseError as exc:
        assert "t.csv" in str(exc) and "line 2" in str(exc), exc
        raise


def _via_meter(value):
    from powerlab.calibration.meter import meter_readings

    r = meter_readings(np.ones(4), tick_s=1.0, start_utc=value, interval_s=1.0)
    return r.index[0] - pd.Timedelta(1, "s")     # a reading closes its interval


def _via_dcgm_health(value):
    from powerlab.iotools.xid import parse_dcgm_health
    from tests.iotools.test_xid import DCGM_HEALTH

    return parse_dcgm_health(DCGM_HEALTH, timestamp=value, host="n1")["timestamp"].iloc[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from powerlab.telemetry import write_store
    from tests.conftest import make_telemetry

    root = tmp_path_factory.mktemp("store")
    write_store(make_telemetry(n_hosts=1, n_gpus=1, n_samples=8,
                               start="2025-07-01T09:59:58Z", period_s=1.0), root)
    return root


def _via_store(root, value):
    from powerlab.telemetry import read_store

    return read_store(root, start=value)["timestamp"].min()


def _via_powertrace(root, value):
    from powerlab.interconnect.powertrace import read_telemetry

    return read_telemetry(root, start=value)["timestamp"].min()


def _outcome(fn, *args):
    """The instant, or the error (of the powerlab family: anything else fails)."""
    try:
        return fn(*args)
    except PowerlabError as exc:
        return exc
    # anything else (a bare ValueError, a traceback) fails the test


KINDS = ("no time zone", "missing", "not a valid time", "number", "not an ISO 8601",
         "not a time")


def _kind(exc: Exception) -> str:
    """Which problem an error names (the first of :data:`KINDS` in its message)."""
    return next(k for k in KINDS if k in str(exc))


def _check(got, expect, caller):
    if isinstance(expect, pd.Timestamp):
        assert isinstance(got, pd.Timestamp), f"{caller}: {got!r}"
        assert got == expect and str(got.tz) == "UTC", f"{caller}: {got} != {expect}"
    else:
        assert isinstance(got, PowerlabError), f"{caller}: accepted, gave {got!r}"
        assert expect in str(got), f"{caller}: {got}"


@pytest.mark.parametrize("value, expect", STRINGS, ids=_ids(STRINGS))
def test_text_callers_agree(tmp_path, store, value, expect):
    """Scenario keys, sacct columns, target files, meter, store, trace and health-check
    times: one rule, one instant."""
    reference = _outcome(to_utc, value)
    _check(reference, expect, "to_utc")
    callers = {
        "scenario": lambda: _via_scenario(value),
        "targets": lambda: _via_targets(tmp_path, value),
        "meter": lambda: _via_meter(value),
        "store": lambda: _via_store(store, value),
        "powertrace": lambda: _via_powertrace(store, value),
        "prometheus": lambda: _via_prometheus(value),
    }
    for name, call in callers.items():
        if name == "prometheus" and isinstance(expect, pd.Timestamp):
            continue             # a readable time goes on to the network
        _check(_outcome(call), expect, name)


@pytest.mark.parametrize("value, expect", STRINGS, ids=_ids(STRINGS))
def test_callers_with_a_zone_agree(tmp_path, value, expect):
    """sacct (its tz), targets (tz=) and DCGM health checks (UTC by definition) read a
    naive time in their zone, exactly as ``to_utc(value, tz=...)`` does.  One deliberate
    difference: an empty sacct ``Start`` is sacct's way of saying "not started" (NaT)."""
    if value == "":
        with pytest.warns(DataQualityWarning, match="not started"):
            assert _via_sacct(tmp_path, value) is pd.NaT
    for name, call, tz in [
            *([("sacct", lambda: _via_sacct(tmp_path, value, tz="UTC"), "UTC"),
               ("sacct/Chicago", lambda: _via_sacct(tmp_path, value, tz=CHICAGO), CHICAGO)]
              if value else []),
            ("targets/Chicago", lambda: _via_targets(tmp_path, value, tz=CHICAGO), CHICAGO),
            ("dcgm health", lambda: _via_dcgm_health(value), "UTC")]:
        ref = _outcome(lambda v, z: to_utc(v, tz=z), value, tz)
        _check(_outcome(call), ref if isinstance(ref, pd.Timestamp) else _kind(ref), name)
    if expect == "no time zone":     # the zone really was applied: 5 h apart in July
        assert _via_sacct(tmp_path, value, tz=CHICAGO) - _via_sacct(tmp_path, value) \
            == pd.Timedelta(5, "h")


def _via_prometheus(value):
    from powerlab.iotools.prometheus import read_prometheus

    return read_prometheus("http://127.0.0.1:9", value, "2025-07-01T11:00:00Z", step=1)


@pytest.mark.parametrize("value, expect", OBJECTS, ids=_ids(OBJECTS))
def test_python_api_callers_agree_on_objects(store, value, expect):
    """Times given as objects to the Python API (store bounds, trace bounds, meters,
    health-check times): tz-aware objects in UTC, naive ones and numbers refused."""
    _check(_outcome(to_utc, value), expect, "to_utc")
    for name, call in {"meter": lambda: _via_meter(value),
                       "store": lambda: _via_store(store, value),
                       "powertrace": lambda: _via_powertrace(store, value)}.items():
        _check(_outcome(call), expect, name)
    if not (isinstance(expect, pd.Timestamp)):
        with pytest.raises(PowerlabError, match=expect):
            _via_prometheus(value)


@pytest.mark.parametrize("command", ["aggregate", "comply", "calibrate", "study-package"])
@pytest.mark.parametrize("value, words", [("2025-07-01 10:00", "no time zone"),
                                          ("07/01/2025", "ISO 8601")])
def test_commands_refuse_the_same_times(tmp_path, capsys, command, value, words):
    """``--start`` of every command: one line naming the option, exit status 2."""
    from powerlab.cli import main

    out = tmp_path / ("a.csv" if command == "aggregate" else
                      "j.yaml" if command == "calibrate" else "o")
    req = str(ROOT / "data" / "requirements" / "small_site_example.yaml")
    args = {"aggregate": [str(tmp_path)],
            "comply": [str(tmp_path), "--requirements", req],
            "calibrate": [str(tmp_path)],
            "study-package": [str(tmp_path), "--requirements", req],
            }[command]
    assert main([command, *args, "--start", value, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--start '{value}'" in err and words in err, err


def test_chart_times_are_tz_aware_utc():
    from powerlab.viz.prepare import as_utc

    s = pd.Series(pd.date_range("2025-07-01T12:00", periods=2, freq="1s", tz="Europe/Berlin"),
                  name="timestamp")
    assert as_utc(s).iloc[0] == T
    with pytest.raises(SchemaError, match="column 'timestamp': timestamps must be tz-aware"):
        as_utc(s.dt.tz_localize(None))


# values the Python API takes, and what the rule makes of them without a zone given
API = [("2025-07-01T12:00:00+02:00", T), (pd.Timestamp("2025-07-01T10:00Z"), T),
       ("2025-07-01T10:00:00", "no time zone"), ("07/01/2025 10:00", "not an ISO 8601"),
       (1751364000, "number")]


def _via_dmon(value, tz=None):
    from powerlab.iotools.dcgm import read_dcgm_dmon

    from ..conftest import TEST_DATA

    df = read_dcgm_dmon(TEST_DATA / "iotools" / "dcgmi_dmon_constructed.txt", start=value,
                        tz=tz, delay_ms=1000, host="n1")
    return df["timestamp"].min()


def _via_comtrade(tmp_path, value):
    from powerlab.interconnect.comtrade import read_comtrade, write_comtrade

    r = write_comtrade(tmp_path / "r", {"P": np.array([1.0, 2.0])}, 0.1, value)
    return pd.Timestamp(read_comtrade(r["cfg"]).attrs["start_utc"])


def _via_kernel_log(value):
    from powerlab.iotools.xid import parse_kernel_xid

    text = "[   10.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=p, fallen off the bus\n"
    ev = parse_kernel_xid(text, host="n1", boot_time=value)   # tz="UTC" by default
    return ev["timestamp"].iloc[0] - pd.Timedelta(10, "s")


def _via_job_map(value):
    from powerlab.telemetry import gpu_job_map

    jobs = pd.DataFrame({"job_id": ["1"], "step": [pd.NA], "start": [T - pd.Timedelta(1, "h")],
                         "end": [pd.NaT], "hosts": [("n1",)], "gpus": [8]})
    return gpu_job_map(jobs, 8, until=value)["end"].iloc[0]      # a running job ends then


@pytest.mark.parametrize("value, expect", API, ids=_ids(API))
def test_api_callers_agree(tmp_path, value, expect):
    """dcgmi dmon ``start=``, COMTRADE ``start_utc``, ``gpu_job_map(until=)`` and a
    kernel log's ``boot_time`` (read in UTC when naive, as that reader documents)."""
    _check(_outcome(to_utc, value), expect, "to_utc")
    _check(_outcome(_via_dmon, value), expect, "dcgmi dmon")
    _check(_outcome(_via_comtrade, tmp_path, value), expect, "comtrade")
    _check(_outcome(_via_job_map, value), expect, "gpu_job_map until")
    ref_utc = _outcome(lambda v: to_utc(v, tz="UTC"), value)
    _check(_outcome(_via_kernel_log, value),
           ref_utc if isinstance(ref_utc, pd.Timestamp) else _kind(ref_utc), "kernel log")
    if expect == "no time zone":         # dmon with tz= reads the naive start there
        assert _via_dmon(value, tz=CHICAGO) == T + pd.Timedelta(5, "h")


@pytest.mark.parametrize("value, named", [
    (" 2025-07-01 10:00 ", "'2025-07-01 10:00'"),          # stripped
    ("2025-07-01 10:00:00,5", "'2025-07-01 10:00:00.5'"),  # the decimal comma as read
])
def test_messages_name_the_time_as_read(value, named):
    """The steps of to_utc pass on the text as read: a zone-less or nonexistent time is
    named stripped, its decimal comma a point."""
    with pytest.raises(PowerlabError, match=f"^time {named} has no time zone"):
        to_utc(value)
    with pytest.raises(PowerlabError, match=f"^start {named} in Mars/Base: "):
        to_utc(value, tz="Mars/Base", what="start")
