"""The same instants held at any resolution give the same numbers (the rule of
:mod:`powerlab.telemetry.timeutil`).

pandas keeps times at ``s``, ``ms``, ``us`` or ``ns`` resolution (pandas 3 parses text
and builds ranges at ``us``), and the raw integers of a time column count that unit.  A
site that reads them as nanoseconds gives times 1,000x off, wrong blocks and bins, or
nothing at all.  This is a sweep, not a hand list: :data:`CASES` registers every public
entry point that takes a frame with a ``timestamp`` column or a DatetimeIndex (with a
small frame builder), and each runs with all its time inputs cast to each unit; the
outputs (frames, numbers, chart data) must equal the nanosecond run's.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

from ..conftest import make_telemetry

UNITS = ("s", "ms", "us", "ns")
#: Data with millisecond times (MLPerf logs): not representable in whole seconds.
MS_UP = ("ms", "us", "ns")


# ------------------------------------------------------------------ casting and comparing

def _is_time(dtype) -> bool:
    return isinstance(dtype, pd.DatetimeTZDtype) or getattr(dtype, "kind", "") == "M"


def _exact(old, new):
    """``new`` (``old`` at another unit), after checking it holds the same instants: a cast
    that rounded would compare different inputs."""
    back = new.as_unit("ns") if hasattr(new, "as_unit") else new.dt.as_unit("ns")
    ref = old.as_unit("ns") if hasattr(old, "as_unit") else old.dt.as_unit("ns")
    same = (back == ref) if isinstance(old, pd.Timestamp) else \
        bool(((np.asarray(back == ref)) | np.asarray(pd.isna(ref))).all())
    assert same, "test data not representable at this unit: round it first"
    return new


#: Units "mixed" rotates through (set per case to those its data allow).
_MIXED = {"units": UNITS, "next": 0}


def _unit(unit: str) -> str:
    """``unit``, or for ``"mixed"`` the next unit in turn: each input (and each time
    column of a frame) of one call at another resolution."""
    if unit != "mixed":
        return unit
    units = _MIXED["units"]
    _MIXED["next"] += 1
    return units[_MIXED["next"] % len(units)]


def cast(obj, unit: str):
    """``obj`` with every datetime inside it (columns, index, Series values) at ``unit``
    (``"mixed"``: a different unit for each column, index or value in turn)."""
    if isinstance(obj, pd.DataFrame):
        out = obj.copy()
        for c in out.columns:
            if _is_time(out[c].dtype):
                out[c] = _exact(out[c], out[c].dt.as_unit(_unit(unit)))
        out.index = cast(out.index, unit)
        return out
    if isinstance(obj, pd.Series):
        out = obj.copy()
        if _is_time(out.dtype):
            out = _exact(out, out.dt.as_unit(_unit(unit)))
        out.index = cast(out.index, unit)
        return out
    if isinstance(obj, (pd.DatetimeIndex, pd.Timestamp)):
        return _exact(obj, obj.as_unit(_unit(unit)))
    return obj


def _whole_s(frame: pd.DataFrame, col: str = "timestamp") -> pd.DataFrame:
    """``frame`` with its times rounded to whole seconds (representable at every unit)."""
    return frame.assign(**{col: frame[col].dt.round("s")})


def canon(x):
    """A comparable form of a result: frames with times at ns, results as their fields."""
    if isinstance(x, (pd.DataFrame, pd.Series, pd.DatetimeIndex, pd.Timestamp)):
        return cast(x, "ns")
    if isinstance(x, np.ndarray) and x.dtype.kind == "M":
        return x.astype("datetime64[ns]")
    if isinstance(x, dict):
        return {k: canon(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(canon(v) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: canon(getattr(x, f.name)) for f in dataclasses.fields(x)
                if not f.name.startswith("_")}
    return x


def assert_same(a, b, path="result"):
    """``a`` equals ``b`` (frames exactly up to float rounding, times as instants)."""
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9, obj=path)
    elif isinstance(a, pd.Series):
        pd.testing.assert_series_equal(a, b, check_exact=False, rtol=1e-9, obj=path)
    elif isinstance(a, pd.Index):
        pd.testing.assert_index_equal(a, b, obj=path)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (u, v) in enumerate(zip(a, b)):
            assert_same(u, v, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=1e-9, err_msg=path)
        else:
            np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, nan_ok=True), path
    else:
        assert a == b, path


# ------------------------------------------------------------------------------ the data

T0 = pd.Timestamp("2024-05-17T23:58:00Z")


def _tel(unit: str, **kw) -> pd.DataFrame:
    """Canonical telemetry (2 hosts x 4 GPUs, 1-s samples crossing midnight) at ``unit``."""
    kw = {"n_samples": 240, "period_s": 1.0, "start": "2024-05-17T23:58:00Z"} | kw
    return cast(make_telemetry(**kw), unit)


def _jobs() -> pd.DataFrame:
    ts = pd.Timestamp
    return pd.DataFrame({
        "host": ["node-00", "node-00", "node-01"], "gpu_index": [0, 1, 2],
        "job_id": ["A", "B", "C"],
        "start": [ts("2024-05-17T23:58:30Z"), ts("2024-05-17T23:57:00Z"),
                  ts("2024-05-18T00:00:10Z")],
        "end": [ts("2024-05-18T00:01:00Z"), ts("2024-05-18T00:03:00Z"),
                ts("2024-05-18T00:05:00Z")]})


def _node_tel(unit: str) -> pd.DataFrame:
    """Node-scope meters of 2 hosts read every 2 s, offset by 1 s (an irregular site)."""
    from powerlab.telemetry import conform

    t = np.arange(0, 600, 2.0)
    rows = [pd.DataFrame({"timestamp": T0 + pd.to_timedelta(t + off, unit="s"), "host": h,
                          "scope": "node",
                          "power_w": 5000.0 + 800.0 * np.sin(2 * np.pi * (t + off) / 120.0)})
            for h, off in (("n0", 0.0), ("n1", 1.0))]
    return cast(conform(pd.concat(rows, ignore_index=True)), unit)


def _site(unit: str) -> pd.Series:
    rng = np.random.default_rng(0)
    idx = pd.date_range("2025-07-01", periods=12 * 1440, freq="1min", tz="UTC")
    h = idx.hour + idx.minute / 60
    p = pd.Series(14e6 + 1e6 * np.sin(2 * np.pi * h / 24) + rng.normal(0, 2e5, len(idx)),
                  index=idx)
    return cast(p, unit)


_EV = pd.DataFrame({"start_utc": [pd.Timestamp("2025-07-10T14:00Z")],
                    "end_utc": [pd.Timestamp("2025-07-10T17:00Z")], "cap_w": [11e6]})


def _events(unit: str) -> pd.DataFrame:
    from powerlab.telemetry.events import EVENT_DTYPES

    ev = pd.DataFrame({"timestamp": [T0 + pd.Timedelta(seconds=30),
                                     T0 + pd.Timedelta(seconds=150)],
                       "host": ["node-00", "node-01"], "gpu_index": [1, 3],
                       "gpu_uuid": [pd.NA, pd.NA], "pci_bus_id": [pd.NA, pd.NA],
                       "xid": [79, 48], "kind": ["hardware", "hardware"],
                       "root_cause": ["gpu_fell_off_bus", "dbe"],
                       "message": ["x", "y"], "source": ["kernel_log", "kernel_log"]})
    return cast(ev.astype({k: v for k, v in EVENT_DTYPES.items() if k != "timestamp"}), unit)


_CACHE: dict = {}


def _once(key, build):
    if key not in _CACHE:
        _CACHE[key] = build()
    return _CACHE[key]


def _twin():
    from powerlab.throughput.synth import simulate_training

    def build():
        tw = simulate_training("2025-06-03", days=2, n_hosts=2, gpus_per_host=4,
                               stragglers=1, amplitude_pct=2.0, telemetry_interval_s=600.0,
                               seed=4)
        steps = _whole_s(tw.steps).drop_duplicates(["segment", "timestamp"])
        return dataclasses.replace(tw, steps=steps, telemetry=_whole_s(tw.telemetry)) \
            if dataclasses.is_dataclass(tw) else (steps, _whole_s(tw.telemetry))
    return _once("twin", build)


def _campaign():
    from powerlab.flex import twin_capping_campaign

    def build():
        tel, steps = twin_capping_campaign([700.0, 550.0, 400.0], hours_each=1.0, rounds=1,
                                           seed=0)
        return _whole_s(tel), _whole_s(steps)
    return _once("campaign", build)


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


# ------------------------------------------------------------------------ the registry

def _store_roundtrip(u, tmp):
    from powerlab.telemetry import read_store, store_summary, write_store

    root = tmp / f"store_{u}"
    write_store(_tel(u), root)
    import re

    import pyarrow.parquet as pq

    paths = sorted(root.rglob("*.parquet"))
    # file names hold a random uuid4 (kept out) and the CRC-32 of the bytes (kept in)
    files = [re.sub(r"-[0-9a-f]{12}-c", "-<uuid>-c", p.relative_to(root).as_posix())
             for p in paths]
    on_disk = {str(pq.read_schema(p).field("timestamp").type) for p in paths}
    return {"files": files, "on_disk": on_disk, "read": read_store(root),
            "window": read_store(root, start="2024-05-17T23:59:30Z",
                                 end="2024-05-18T00:00:30Z"),
            "summary": store_summary(root)}


def _agg(fn_name, **kw):
    def run(u, tmp):
        from powerlab.telemetry import aggregate

        return _quiet(lambda: getattr(aggregate, fn_name)(_tel(u), **kw))
    return run


def _t(fn):
    """A case taking only the unit."""
    return lambda u, tmp: fn(u)


def _flex_curve_us(u):
    from powerlab.flex import fit_curve

    tel, steps = _campaign()
    c = fit_curve(cast(tel, u), cast(steps, u))
    return c.summary_frame() if hasattr(c, "summary_frame") else canon(c)


def _curve_points(u):
    from powerlab.flex import curve_points

    tel, steps = _campaign()
    return curve_points(cast(tel, u), cast(steps, u))


def _verify(u):
    from powerlab.flex import verify_event

    return verify_event(_site(u), cast(_EV, u), methods=["high_10_of_10",
                                                         "pre_event_mean"]).frame


def _sum_meters(u):
    from powerlab.calibration import sum_meters

    return sum_meters(_node_tel(u), every_s=1.0)


def _meter_readings(u):
    from powerlab.calibration import meter_readings

    x = np.repeat([1000.0, 3000.0], 300)
    times = cast(pd.DatetimeIndex(T0 + pd.to_timedelta([10.0, 31.0, 44.0, 58.0],
                                                       unit="s")), u)
    return meter_readings(x, tick_s=0.1, start_utc=cast(T0, u), times=times)


def _trace(u):
    from powerlab.interconnect import trace_from_telemetry

    tr = trace_from_telemetry(_node_tel(u), tick_s=0.5)
    return {"it_w": np.asarray(tr.it_w), "start": getattr(tr, "start_utc", None),
            "tick_s": tr.tick_s}


def _playback(u):
    from powerlab.interconnect import playback_frame, trace_from_telemetry

    return playback_frame(trace_from_telemetry(_node_tel(u), tick_s=0.5), step_s=1.0,
                          boundary="it")


def _stragglers(u):
    from powerlab.throughput import find_stragglers

    tw = _twin()
    r = find_stragglers(cast(tw.telemetry, u))
    return {"scores": r.scores, "flags": r.flags}


def _straggler_baseline(u):
    from powerlab.throughput import straggler_baseline

    return canon(straggler_baseline(cast(_twin().telemetry, u)))


def _time_of_day(u):
    from powerlab.throughput import fit_time_of_day

    tw = _twin()
    r = fit_time_of_day(cast(tw.steps, u), site_tz="America/New_York",
                        telemetry=cast(tw.telemetry, u), n_boot=20, seed=0)
    return {"profile": r.profile, "amp": r.amplitude_pct, "peak": r.peak_hour}


def _slowest(u):
    from powerlab.throughput import slowest_clock

    return slowest_clock(cast(_twin().telemetry, u))


def _throttle(u):
    from powerlab.throughput import throttle_share_by_hour

    return throttle_share_by_hour(cast(_twin().telemetry, u), site_tz="America/New_York")


def _exposure(u):
    from powerlab.reliability import exposure_table

    return exposure_table(_tel(u), _events(u), period="1h")


def _downsample(u):
    from powerlab.viz import downsample

    return downsample(_tel(u), "power_w", by=["host"], max_points=50)


def _chart_data(chart) -> dict:
    """The chart's Vega-Lite spec: its data sets (named by a hash of their rows) and
    encodings, as plain JSON values."""
    return chart.to_dict()


def _tel_chart(u):
    from powerlab import viz

    return _chart_data(viz.telemetry_chart(_tel(u), max_points=60))


def _gpu_job_map(u):
    from powerlab.telemetry import gpu_job_map

    ts = pd.Timestamp
    sacct = pd.DataFrame({
        "job_id": ["11", "12"], "step": [pd.NA, pd.NA],
        "start": [ts("2024-05-17T23:58:30Z"), ts("2024-05-18T00:00:10Z")],
        "end": [ts("2024-05-18T00:01:00Z"), pd.NaT],
        "hosts": [["node-00"], ["node-01"]], "gpus": [4, 4]})
    return _quiet(lambda: gpu_job_map(cast(sacct, u), 4,
                                      until=cast(ts("2024-05-18T00:03:00Z"), u)))


def _job_power(u, tmp):
    from powerlab.telemetry import job_power

    return _quiet(lambda: job_power(_tel(u), cast(_jobs(), u), "30s"))


def _mlperf_run(u, tmp):
    """The known-answer MLPerf-layout run of tests/calibration/test_backtest.py (ms times):
    ``(node power, MLLogResult)`` at ``u``."""
    from powerlab.iotools import read_mllog, read_mlperf_power

    from ..calibration.test_backtest import _write_run

    def build():
        pdir, log = _write_run(tmp / "mlperf")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return read_mlperf_power(pdir), read_mllog(log)
    power, log = _once("mlperf", build)
    return cast(power, u), dataclasses.replace(log, events=cast(log.events, u),
                                               steps=cast(log.steps, u))


def _calibrate(u, tmp):
    from powerlab.calibration import calibrate_job

    power, log = _mlperf_run(u, tmp)
    c = _quiet(lambda: calibrate_job(power, events=log))
    return {"fit": c.summary_frame(), "p": c.periodic_p_value}


def _fit_profile(u, tmp):
    from powerlab.calibration import fit_profile

    power, log = _mlperf_run(u, tmp)
    return _quiet(lambda: fit_profile(power, events=log)).summary_frame()


def _backtest(u, tmp):
    from powerlab.calibration import backtest_split

    power, log = _mlperf_run(u, tmp)
    return _quiet(lambda: backtest_split(power, log, split=0.5)).summary_frame()


class _Draw:
    """One forecast draw as the engine hands it to ``on_draw`` (tests/calibration/test_meter.py)."""
    draw, tick_s = 0, 0.05
    it_w = 5e5 + 1e5 * np.sin(np.arange(3600) / 40.0)
    facility_w = 1.3 * it_w

    def __init__(self, start_utc):
        self.start_utc = start_utc


def _meter_forecast(u):
    from powerlab.calibration import Meter, meter_forecast

    return meter_forecast(_Draw(cast(T0, u)), Meter(interval_s=2.0, phase_s=1.0),
                          boundary="it")


def _pmu(u):
    from powerlab.interconnect import pmu_power

    x = 5e5 + 1e5 * np.sin(np.arange(2000) / 40.0)
    return pmu_power(x, 1 / 600, cast(T0, u), classes=("P",))


def _comply(u):
    from powerlab.interconnect import comply
    from powerlab.limits import read_requirements

    from ..conftest import REPO

    spec = read_requirements(REPO / "data" / "requirements" / "small_site_example.yaml")
    return _quiet(lambda: comply(_node_tel(u), spec, pue=1.3, draws=2)).summary_frame()


def _random_targets(u):
    from powerlab.flex import random_targets

    return random_targets(cast(pd.Timestamp("2025-07-01T01:00Z"), u),
                          cast(pd.Timestamp("2025-07-01T03:00Z"), u), 20e6, n=5).frame


def _read_targets(u, tmp):
    from powerlab.flex import read_targets

    f = tmp / "targets.csv"
    f.write_text("start_utc,end_utc,cap_megawatts\n2025-07-01T02:00Z,2025-07-01T02:05Z,12\n"
                 "2025-07-01T01:00Z,2025-07-01T01:10Z,10\n")
    t = read_targets(f, floor_w=6e6, max_w=17e6,
                     now=cast(pd.Timestamp("2025-07-01T00:00Z"), u),
                     horizon_end=cast(pd.Timestamp("2025-07-01T06:00Z"), u))
    return t.frame


def _seasonal(u):
    from powerlab.throughput import decompose_seasonal

    idx = pd.date_range("2025-06-02", periods=24 * 21, freq="1h", tz="UTC")
    y = pd.Series(1000 + 20 * np.sin(2 * np.pi * np.arange(len(idx)) / 24)
                  + np.random.default_rng(0).normal(0, 3, len(idx)), index=idx)
    return decompose_seasonal(cast(y.drop(idx[50:60]), u))


def _job_energy(u, tmp):
    from powerlab.telemetry import job_energy

    return _quiet(lambda: job_energy(cast(_job_power("ns", tmp), u), "1min"))


def _events_store(u, tmp):
    from powerlab.telemetry import read_events, write_events

    root = tmp / f"events_{u}"
    _, n = write_events(_events(u), root)
    return {"n": n, "read": read_events(root)}


def _stragglers_chart(u):
    from powerlab import viz
    from powerlab.throughput import find_stragglers

    return _chart_data(viz.stragglers_chart(find_stragglers(cast(_twin().telemetry, u))))


def _tel_overview(u):
    from powerlab import viz

    return _chart_data(viz.telemetry_overview(_tel(u), site_tz="America/Chicago"))


def _facility_chart(u):
    from powerlab import viz

    ts = pd.date_range("2025-06-01", periods=4000, freq="1s", tz="UTC")
    p = 30 + 5 * np.sin(np.arange(4000) / 300)
    tl = pd.DataFrame({"timestamp": ts, "boundary": "it", "power_megawatts": p,
                       "power_megawatts_lower": p - 1, "power_megawatts_upper": p + 1})
    ev = pd.DataFrame({"timestamp": ts[[100, 2000]], "event": ["start", "failure"]})
    return _chart_data(viz.facility_chart(cast(tl, u), cast(ev, u)))


CASES = {
    "telemetry.validate": _t(lambda u: _tel(u).pipe(__import__(
        "powerlab.telemetry", fromlist=["validate"]).validate).shape),
    "telemetry.conform": _t(lambda u: __import__(
        "powerlab.telemetry", fromlist=["conform"]).conform(_tel(u))),
    "telemetry.write_store/read_store/store_summary": _store_roundtrip,
    "telemetry.gaps": _t(lambda u: __import__(
        "powerlab.telemetry", fromlist=["gaps"]).gaps(_tel(u).iloc[::3], 2.5)),
    "telemetry.stale": _t(lambda u: __import__(
        "powerlab.telemetry", fromlist=["stale"]).stale(_tel(u), "clock_mem_mhz", 5)),
    "telemetry.counter_resets": _t(lambda u: __import__(
        "powerlab.telemetry", fromlist=["counter_resets"]).counter_resets(_tel(u))),
    "telemetry.quality_report": _t(lambda u: __import__(
        "powerlab.telemetry", fromlist=["quality_report"]).quality_report(
            _tel(u).iloc[::3], max_gap_s=2.5, stale_min_run=5)),
    "telemetry.power_sums": _agg("power_sums", freq="30s"),
    "telemetry.power_sums(by=host)": _agg("power_sums", freq="30s", by="host"),
    "telemetry.resample_gpu": _agg("resample_gpu", freq="30s"),
    "telemetry.peer_stats": _agg("peer_stats", freq="30s"),
    "telemetry.quality_masks": _agg("quality_masks", max_gap_s=2.5, stale_min_run=5),
    "telemetry.hour_of_day": _agg("hour_of_day", site_tz="America/Chicago", freq="1min"),
    "telemetry.gpu_job_map": _t(_gpu_job_map),
    "telemetry.job_power": _job_power,
    "calibration.sum_meters": _t(_sum_meters),
    "calibration.meter_readings": _t(_meter_readings),
    "interconnect.trace_from_telemetry": _t(_trace),
    "interconnect.playback_frame": _t(_playback),
    "throughput.find_stragglers": _t(_stragglers),
    "throughput.straggler_baseline": _t(_straggler_baseline),
    "throughput.fit_time_of_day": _t(_time_of_day),
    "throughput.slowest_clock": _t(_slowest),
    "throughput.throttle_share_by_hour": _t(_throttle),
    "throughput.exposure_table": _t(_exposure),
    "flex.fit_curve": _t(_flex_curve_us),
    "flex.curve_points": _t(_curve_points),
    "flex.verify_event": _t(_verify),
    "viz.downsample": _t(_downsample),
    "viz.telemetry_chart": _t(_tel_chart),
    "viz.telemetry_overview": _t(_tel_overview),
    "viz.stragglers_chart": _t(_stragglers_chart),
    "viz.facility_chart": _t(_facility_chart),
    "calibration.calibrate_job": (_calibrate, MS_UP),
    "calibration.fit_profile": (_fit_profile, MS_UP),
    "calibration.backtest_split": (_backtest, MS_UP),
    "calibration.meter_forecast": _t(_meter_forecast),
    "interconnect.pmu_power": _t(_pmu),
    "interconnect.comply": _t(_comply),
    "flex.random_targets": _t(_random_targets),
    "flex.read_targets": _read_targets,
    "throughput.decompose_seasonal": _t(_seasonal),
    "telemetry.job_energy": _job_energy,
    "telemetry.write_events/read_events": _events_store,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_resolution_gives_the_same_result(name, tmp_path):
    """Each public entry point, its time inputs at s, ms, us and ns (those units that
    hold its data's instants exactly), and at mixed units (each input, each column at
    another): equal outputs."""
    run, units = CASES[name] if isinstance(CASES[name], tuple) else (CASES[name], UNITS)
    ref = canon(run("ns", tmp_path))
    for unit in units[:-1]:
        assert_same(canon(run(unit, tmp_path)), ref, f"{name} at {unit}")
    _MIXED["units"], _MIXED["next"] = units, 0
    assert_same(canon(run("mixed", tmp_path)), ref, f"{name} at mixed units")


def test_the_inputs_really_differ_in_resolution():
    """The sweep is no sweep if casting did nothing: raw integers differ by 1000x."""
    a, b = _tel("us")["timestamp"], _tel("ns")["timestamp"]
    assert a.dtype.unit == "us" and b.dtype.unit == "ns"
    assert int(b.astype("int64").iloc[0]) == 1000 * int(a.astype("int64").iloc[0])


def test_to_epoch_ns_counts_nanoseconds_at_any_unit():
    """``to_epoch_ns``: int64 ns since 1970-01-01T00:00Z for Series, Index, arrays of any
    unit, tz-aware or naive; NaT stays the int64 minimum; non-times (integers, text,
    objects) and out-of-range times refused with a powerlab error."""
    from powerlab.exceptions import PowerlabError
    from powerlab.telemetry import to_epoch_ns

    s = pd.Series(pd.to_datetime(["2025-01-01T00:00:01Z", None], utc=True))
    want = np.array([1_735_689_601_000_000_000, np.iinfo(np.int64).min])
    for u in UNITS:
        su = s.dt.as_unit(u)
        np.testing.assert_array_equal(to_epoch_ns(su), want)
        np.testing.assert_array_equal(to_epoch_ns(pd.DatetimeIndex(su)), want)
        np.testing.assert_array_equal(to_epoch_ns(su.dt.tz_convert("Asia/Tokyo")), want)
        np.testing.assert_array_equal(
            to_epoch_ns(su.dt.tz_localize(None).to_numpy()), want)
    out = to_epoch_ns(s.dt.as_unit("ns"))
    with pytest.raises(ValueError):   # shares the column's memory: read-only
        out[0] = 0
    assert s.iloc[0] == pd.Timestamp("2025-01-01T00:00:01Z")
    for bad in (np.arange(3), pd.Series(["2025-01-01T00:00Z"], name="start"),
                pd.Series([pd.Timestamp("2025-01-01T00:00Z")], dtype=object)):
        with pytest.raises(PowerlabError, match="must be datetime64"):
            to_epoch_ns(bad)
    with pytest.raises(PowerlabError, match="nanosecond range"):
        to_epoch_ns(pd.Series(pd.to_datetime(["2300-01-01"])).dt.as_unit("s"))
