"""powerlab.collect.nvml against the fake libnvidia-ml.so.1, loaded by the real pynvml bindings."""

# ruff: noqa: F811  (pytest fixtures imported from tests/support/fake_nvml_util.py)
from __future__ import annotations

import math
import re
import time
from pathlib import Path

import pytest

from powerlab.collect import nvml
from powerlab.exceptions import GPULostError, NVMLError, NVMLUnavailableError, PowerlabError

from ..support.fake_nvml_util import CALL_COLUMNS, fake_libdir, fake_nvml  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[2]

WAVES = {
    "gpus": 2,
    "gpu*.power_mw": "0:150000 0.05:420000 0.12:260000 @0.17",
    "gpu*.power_avg_mw": "0:250000 0.07:310000 @0.13",
    "gpu*.temp_mem_c": "0:50 0.06:55 @0.11",
    "gpu*.temp_gpu_c": "0:40 0.09:44 @0.2",
    "gpu*.clock_sm_mhz": "0:1980 0.1:1410 @0.2",
    "gpu*.clock_mem_mhz": "0:2619 0.15:1593 @0.3",
    "gpu*.throttle": "0:0 0.1:0x8000000000000044 @0.2",
    "gpu*.util_gpu_pct": "0:100 0.1:0 @0.2",
    "gpu*.util_mem_pct": "0:40 0.1:5 @0.2",
    "gpu*.power_limit_mw": "0:700000 0.1:650000 @0.2",
    "gpu1.energy0_mj": 5000000,
    "energy_step_s": 0.02,
}


def test_pynvml_is_imported_only_by_the_nvml_module():
    offenders = []
    for path in (REPO / "powerlab").rglob("*.py"):
        text = path.read_text()
        if re.search(r"^\s*(import pynvml|from pynvml)", text, re.MULTILINE):
            offenders.append(path.relative_to(REPO).as_posix())
    assert offenders == ["powerlab/collect/nvml.py"]


def test_static_facts_and_capabilities(fake_nvml):
    fake_nvml({"gpus": 2, "driver_version": "555.42.06", "gpu1.name": "Fake A100-SXM4-40GB",
               "gpu1.uuid": "GPU-11111111-2222-3333-4444-555555555555",
               "gpu1.serial": "1324021000001", "gpu1.tdp_mw": 400000})
    assert nvml.is_available()
    assert nvml.device_count() == 2
    assert nvml.driver_version() == "555.42.06"
    devs = nvml.open_devices([1])
    info = devs[0].info
    assert (info.index, info.name, info.uuid, info.serial, info.tdp_w, info.driver_version) == (
        1, "Fake A100-SXM4-40GB", "GPU-11111111-2222-3333-4444-555555555555",
        "1324021000001", 400.0, "555.42.06")
    caps = info.capabilities
    assert {c: caps[c] for c in ("power_w", "power_avg_w", "energy_j", "temp_mem_c")} == {
        c: "field" for c in ("power_w", "power_avg_w", "energy_j", "temp_mem_c")}
    assert set(caps) == set(nvml.SAMPLE_COLUMNS)
    assert all(caps[c] == "call" for c in ("temp_gpu_c", "clock_sm_mhz", "clock_mem_mhz",
                                            "throttle_reasons", "util_gpu_pct",
                                            "power_limit_w"))


def test_read_matches_the_scenario_exactly(fake_nvml):
    sc = fake_nvml(WAVES)
    dev = nvml.open_devices()
    checked = ambiguous = 0
    deadline = time.time() + 0.6
    # reads until 0.6 s have passed (the waves move) and 250 values were checked exactly
    # (counted: a loaded machine makes fewer reads in 0.6 s, not other values)
    for _ in range(20_000):
        if time.time() >= deadline and checked > 250:
            break
        for d in dev:
            g = d.index
            before = time.time_ns() // 1000 - sc.init_us
            vals, ts = d.read()
            after = time.time_ns() // 1000 - sc.init_us + 1
            v = dict(zip(nvml.SAMPLE_COLUMNS, vals))
            t = dict(zip(nvml.TIMESTAMP_COLUMNS, ts))
            # field values: exact at NVML's own timestamp, which lies within the call
            tp = t["nvml_time_power"] - sc.init_us
            assert before <= tp <= after
            assert t["nvml_time_energy"] == t["nvml_time_power"]
            assert v["power_w"] == sc.wave(g, "power_mw").at(tp) * 1e-3
            assert v["power_avg_w"] == sc.wave(g, "power_avg_mw").at(tp) * 1e-3
            assert v["temp_mem_c"] == sc.wave(g, "temp_mem_c").at(tp)
            assert v["energy_j"] == sc.energy_mj(g, tp) * 1e-3
            # individual calls: exact whenever the scenario is constant over the call
            for col, key, scale in CALL_COLUMNS:
                options = sc.wave(g, key).values_between(before, after)
                expected = [o if scale is None else o * scale for o in options]
                if len(expected) > 1:  # the value changed during the call
                    ambiguous += 1
                    assert v[col] in expected, col
                    continue
                assert v[col] == expected[0], col
                checked += 1
        time.sleep(0.003)
    assert checked > 250 and ambiguous < checked / 5


def test_unsupported_values_are_nan_never_zero(fake_nvml):
    fake_nvml({"gpus": 1,
               "gpu0.unsupported": "power_mw,temp_mem_c,energy,clock_sm_mhz,throttle,"
                                   "util_gpu_pct,power_limit_mw"})
    (d,) = nvml.open_devices()
    caps = d.info.capabilities
    for c in ("power_w", "temp_mem_c", "energy_j", "clock_sm_mhz", "throttle_reasons",
              "util_gpu_pct", "util_mem_pct", "power_limit_w"):
        assert caps[c] == "unsupported", c
    vals, ts = d.read()
    v = dict(zip(nvml.SAMPLE_COLUMNS, vals))
    for c in ("power_w", "temp_mem_c", "energy_j", "clock_sm_mhz", "util_gpu_pct",
              "util_mem_pct", "power_limit_w"):
        assert math.isnan(v[c]), c
    assert v["throttle_reasons"] is None
    assert v["power_avg_w"] == 300.0 and v["temp_gpu_c"] == 45.0 and v["clock_mem_mhz"] == 2619
    assert ts[0] is None and ts[1] is not None


def test_field_values_call_unsupported_falls_back_to_individual_calls(fake_nvml):
    sc = fake_nvml({"gpus": 1, "gpu0.unsupported": "fields", "energy_step_s": 0.01,
                    "gpu0.power_mw": "0:200000 0.02:400000 @0.04"})
    (d,) = nvml.open_devices()
    caps = d.info.capabilities
    assert (caps["power_w"], caps["power_avg_w"], caps["energy_j"], caps["temp_mem_c"]) == (
        "unsupported", "call", "call", "unsupported")
    before = time.time_ns() // 1000 - sc.init_us
    vals, ts = d.read()
    after = time.time_ns() // 1000 - sc.init_us + 1
    v = dict(zip(nvml.SAMPLE_COLUMNS, vals))
    assert math.isnan(v["power_w"]) and math.isnan(v["temp_mem_c"])
    assert v["power_avg_w"] == 300.0
    assert ts == [None, None, None, None]
    possible = {sc.energy_mj(0, t) * 1e-3 for t in range(before, after + 1, 100)}
    possible.add(sc.energy_mj(0, after) * 1e-3)
    assert v["energy_j"] in possible


def test_throttle_reasons_fall_back_to_the_legacy_call(fake_nvml):
    fake_nvml({"gpus": 1, "gpu0.unsupported": "event_reasons",
               "gpu0.throttle": "0x8000000000000044"})
    (d,) = nvml.open_devices()
    assert d.info.capabilities["throttle_reasons"] == "call"
    assert d._throttle_fn.__name__ == "nvmlDeviceGetCurrentClocksThrottleReasons"
    vals, _ = d.read()
    assert vals[nvml.SAMPLE_COLUMNS.index("throttle_reasons")] == 0x8000000000000044


def test_signal_groups_select_what_is_read(fake_nvml):
    fake_nvml({"gpus": 1})
    (d,) = nvml.open_devices()
    vals, ts = d.read(nvml.group_mask(["power"]))
    v = dict(zip(nvml.SAMPLE_COLUMNS, vals))
    assert v["power_w"] == 300.0 and v["energy_j"] >= 1000.0
    assert all(math.isnan(v[c]) for c in ("temp_gpu_c", "temp_mem_c", "clock_sm_mhz",
                                          "util_gpu_pct", "power_limit_w"))
    assert v["throttle_reasons"] is None and ts[3] is None
    vals, ts = d.read(nvml.group_mask(["temperature"]))
    v = dict(zip(nvml.SAMPLE_COLUMNS, vals))
    assert (v["temp_gpu_c"], v["temp_mem_c"]) == (45.0, 50.0) and math.isnan(v["power_w"])
    with pytest.raises(PowerlabError, match="signal group must be one of 'power', .*, got 'fans'"):
        nvml.group_mask(["fans"])


@pytest.mark.parametrize("kind, exc_type", [("lost", GPULostError), ("timeout", NVMLError),
                                            ("unknown", NVMLError)])
def test_faults_map_to_powerlab_errors(fake_nvml, kind, exc_type):
    fake_nvml({"gpus": 2, "gpu1.fault": f"{kind}@0.15-0.3"})
    d0, d1 = nvml.open_devices()
    d1.read()
    time.sleep(0.16)
    with pytest.raises(exc_type) as info:
        d1.read()
    assert info.value.kind == kind
    assert isinstance(info.value, PowerlabError)
    assert (kind == "lost") == isinstance(info.value, GPULostError)
    d0.read()  # the other GPU is unaffected
    with pytest.raises(exc_type):
        nvml.Device(1)  # opening fails the same way
    time.sleep(0.3 - 0.16)
    nvml.Device(1).read()  # and it is back after the window


def test_missing_driver_is_unavailable_and_probe_is_cached(fake_nvml):
    fake_nvml({"init_error": 9}, init=False)
    assert nvml.is_available() is False
    with pytest.raises(NVMLUnavailableError, match="driver is not loaded"):
        nvml.init()
    hits = nvml._probe.cache_info().hits
    nvml.is_available()
    assert nvml._probe.cache_info().hits == hits + 1


def test_no_gpu_and_bad_index(fake_nvml):
    fake_nvml({"gpus": 0})
    with pytest.raises(NVMLUnavailableError, match="no GPU"):
        nvml.open_devices()
    fake_nvml({"gpus": 2})
    with pytest.raises(NVMLError, match=r"GPU index \[5\] not found; this host has 2 GPU"):
        nvml.open_devices([0, 5])


def test_field_values_fast_path_and_public_wrapper_agree(fake_nvml):
    # Device.read calls the library's nvmlDeviceGetFieldValues on a copied template array;
    # pynvml's public wrapper is the fallback: both must give the scenario's values
    sc = fake_nvml({"gpus": 1, "gpu0.power_mw": 123456, "gpu0.power_avg_mw": 234567,
                    "gpu0.temp_mem_c": 61})
    (d,) = nvml.open_devices()
    assert d._fv_fn is not None
    results = [d.read(), d.read(nvml.group_mask(["temperature"]))]
    d._fv_fn = None
    results += [d.read(), d.read(nvml.group_mask(["temperature"]))]
    for i, (vals, ts) in enumerate(results):
        v = dict(zip(nvml.SAMPLE_COLUMNS, vals))
        t = dict(zip(nvml.TIMESTAMP_COLUMNS, ts))
        assert v["temp_mem_c"] == 61 and t["nvml_time_temp_mem"] is not None
        if i % 2:  # temperature only: no power fields requested
            assert math.isnan(v["power_w"]) and t["nvml_time_power"] is None
            continue
        assert (v["power_w"], v["power_avg_w"]) == (123.456, 234.567)
        te = t["nvml_time_energy"] - sc.init_us
        assert v["energy_j"] == sc.energy_mj(0, te) * 1e-3
