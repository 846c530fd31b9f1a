"""The synthetic twin: schema, physics chain, calibration, restarts, DST, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import ScenarioError
from powerlab.telemetry.schema import validate
from powerlab.throughput.synth import THROTTLE_REASONS, simulate_training
from powerlab.throughput.twin_ambient import sinusoidal_ambient

REPO = Path(__file__).resolve().parents[2]
WEATHER = REPO / "data" / "weather-kmahighl4-2025"
TZ = "America/New_York"


@pytest.fixture(scope="module")
def run():
    # two straggler kinds, forced restarts, telemetry every 5 min
    return simulate_training("2025-06-03", days=3, amplitude_pct=1.5, seed=7,
                             n_hosts=2, gpus_per_host=8, step_time_s=20,
                             stragglers=[(3, "power"), (12, "clock")],
                             restarts=["2025-06-04T06:00Z", "2025-06-05T13:30Z"],
                             telemetry_interval_s=300)


def test_throttle_reason_bits_are_nvmls():
    pynvml = pytest.importorskip("pynvml")
    names = {"gpu_idle": "GpuIdle",
             "applications_clocks_setting": "ApplicationsClocksSetting",
             "sw_power_cap": "SwPowerCap", "hw_slowdown": "HwSlowdown",
             "sync_boost": "SyncBoost", "sw_thermal_slowdown": "SwThermalSlowdown",
             "hw_thermal_slowdown": "HwThermalSlowdown",
             "hw_power_brake_slowdown": "HwPowerBrakeSlowdown",
             "display_clock_setting": "DisplayClockSetting"}
    for ours, nvml in names.items():
        assert THROTTLE_REASONS[ours] == getattr(pynvml, f"nvmlClocksThrottleReason{nvml}")


def test_telemetry_is_canonical(run):
    tel = run.telemetry
    validate(tel)
    assert tel["host"].nunique() == 2 and tel["gpu_uuid"].nunique() == 16
    assert str(tel["throttle_reasons"].dtype) == "UInt64"
    busy = tel["util_gpu_pct"] > 0
    # die hotter than HBM's inlet, clocks within the DVFS range while busy
    assert tel.loc[busy, "clock_sm_mhz"].between(1000, 1980).all()
    assert tel.loc[busy, "temp_gpu_c"].between(30, 100).all()
    assert (tel.loc[busy, "power_w"] > tel.loc[~busy, "power_w"].max()).all()
    # energy is a monotone counter per GPU
    e = tel.groupby("gpu_uuid")["energy_j"].diff().dropna()
    assert (e > 0).all()


def test_stragglers_carry_their_throttle_bits(run):
    tel = run.telemetry
    busy = tel[tel["util_gpu_pct"] > 0]
    bits = busy["throttle_reasons"].to_numpy(dtype=np.uint64)
    pos = busy["host"].eq("node001").to_numpy() * 8 + busy["gpu_index"].to_numpy(dtype=int)
    cap = (bits & np.uint64(THROTTLE_REASONS["sw_power_cap"])) != 0
    hw = (bits & np.uint64(THROTTLE_REASONS["hw_slowdown"])) != 0
    assert cap[pos == 3].all() and not cap[(pos != 3)].any()
    assert hw[pos == 12].all() and not hw[pos != 12].any()
    truth = run.truth.stragglers.set_index("kind")
    assert truth.loc["clock", "slowdown_pct"] > truth.loc["power", "slowdown_pct"] > 0
    # the slowest clock belongs to the clock straggler
    med = busy.groupby(pos)["clock_sm_mhz"].median()
    assert med.idxmin() == 12


def test_idle_between_segments(run):
    tel = run.telemetry
    seg = run.truth.segments
    assert len(seg) == 3
    gap = (tel["timestamp"] > seg["end"][0] + pd.Timedelta("1min")) & (
        tel["timestamp"] < seg["start"][1] - pd.Timedelta("1min"))
    assert gap.any()
    idle = tel.loc[gap]
    assert (idle["util_gpu_pct"] == 0).all()
    assert ((idle["throttle_reasons"].to_numpy(dtype=np.uint64) & np.uint64(1)) == 1).all()


def test_steps_log(run):
    st = run.steps
    assert list(st.columns) == ["timestamp", "step", "segment", "phase", "duration_s",
                                "throughput_tokens_per_s"]
    assert st["timestamp"].is_monotonic_increasing
    assert str(st["timestamp"].dtype) == "datetime64[ns, UTC]"
    np.testing.assert_allclose(st["throughput_tokens_per_s"] * st["duration_s"],
                               run.truth.params.tokens_per_step)
    # each restart resumes from the step after the last checkpoint before the failure
    every = run.truth.params.checkpoint_every
    for s in (1, 2):
        prev = st[st["segment"] == s - 1]
        # (a step can be both checkpoint and evaluation; it is logged as "eval")
        last_ckpt = prev.loc[prev["step"] % every == 0, "step"].max()
        first = st.loc[st["segment"] == s, "step"].iloc[0]
        assert first == last_ckpt + 1
        assert prev["step"].iloc[-1] >= last_ckpt
    # checkpoint and eval steps are slow, warm-up steps at the start of each segment
    ph = st.groupby("phase")["duration_s"].median()
    assert ph["checkpoint"] > ph["train"] + 0.8 * run.truth.params.checkpoint_s
    assert ph["eval"] > ph["train"] + 0.8 * run.truth.params.eval_s
    assert set(st.groupby("segment")["phase"].first()) == {"warmup"}
    assert run.truth.counts == st["phase"].value_counts().to_dict() | {
        k: 0 for k in run.truth.counts if k not in set(st["phase"])}


def test_job_waits_for_the_slowest_gpu():
    # one clock straggler (HW slowdown, clock x 0.85) sets the pace of the whole job
    kw = {"days": 1, "seed": 3, "n_hosts": 1, "step_time_s": 30, "mtbf_s": 1e12, "noise_pct": 0.0,
              "jitter_pct": 0.0, "telemetry_interval_s": 600}
    fast = simulate_training(stragglers=0, **kw)
    slow = simulate_training(stragglers=[(5, "clock")], **kw)

    def train_step(r):
        st = r.steps
        return st.loc[st.phase == "train", "duration_s"].median()

    def slowest_clock(r):
        tel = r.telemetry
        return tel[tel.util_gpu_pct > 0].groupby("gpu_index")["clock_sm_mhz"].median().min()

    ratio = train_step(slow) / train_step(fast)
    # step time model: 0.8 of the step scales with 1 / clock of the slowest GPU
    p = fast.truth.params
    model = ((p.compute_fraction * p.clock_max_mhz / slowest_clock(slow)
              + 1 - p.compute_fraction)
             / (p.compute_fraction * p.clock_max_mhz / slowest_clock(fast)
                + 1 - p.compute_fraction))
    assert ratio > 1.05
    assert ratio == pytest.approx(model, abs=0.01)   # 15 MHz clock bins


@pytest.mark.parametrize("target", [0.5, 2.0])
def test_amplitude_calibration(target):
    r = simulate_training(days=4, amplitude_pct=target, seed=1, n_hosts=1, step_time_s=30,
                          telemetry=False)
    assert r.truth.amplitude_pct == pytest.approx(target, abs=0.05)
    # throughput is lowest in the hot afternoon, after the 15:00 ambient peak (lag)
    assert 15.0 <= r.truth.trough_hour <= 18.5
    assert r.truth.peak_hour < 8 or r.truth.peak_hour > 22
    prof = r.truth.profile
    assert prof.max() - prof.min() == pytest.approx(r.truth.amplitude_pct)
    # GPU-hours lost: n_gpus x 24 h x mean shortfall from the peak
    assert 0 < r.truth.gpu_hours_lost_per_day < 8 * 24 * target / 100


def test_no_effect_when_decoupled():
    r = simulate_training(days=2, amplitude_pct=0.0, seed=2, n_hosts=1, telemetry=False)
    assert r.truth.params.inlet_ambient_coef == 0
    assert r.truth.amplitude_pct < 1e-6


def test_ambient_follows_civil_clock_across_dst():
    idx = pd.date_range("2025-03-07", "2025-03-12", freq="1min", tz="UTC")
    amb = sinusoidal_ambient(idx, peak_hour=15.0, site_tz=TZ)
    daily_peak_utc = amb.groupby(amb.index.tz_convert(TZ).date).idxmax()
    hours = [t.hour for t in daily_peak_utc.iloc[1:-1]]
    # 15:00 EST = 20:00 UTC before 9 March, 15:00 EDT = 19:00 UTC after
    assert hours[0] == 20 and hours[-1] == 19


def test_truth_profile_is_local_time_across_dst():
    r = simulate_training("2025-03-02", days=14, amplitude_pct=1.5, seed=4, n_hosts=1,
                          step_time_s=60, telemetry=False, stragglers=0)
    # DST began on 9 March; the true effect stays sharp in local time
    assert r.truth.amplitude_pct == pytest.approx(1.5, abs=0.06)


def test_series_ambient_and_result_throughput():
    idx = pd.date_range("2025-06-01", periods=24 * 6, freq="h", tz="UTC")
    amb = pd.Series(20 + 8 * np.sin(np.arange(len(idx)) * 2 * np.pi / 24), index=idx)
    r = simulate_training("2025-06-02", days=2, ambient=amb, seed=0, n_hosts=1,
                          telemetry=False)
    got = r.truth.ambient
    assert got.index[0] == pd.Timestamp("2025-06-02", tz="UTC")
    np.testing.assert_allclose(got.iloc[:3].to_numpy(),
                               np.interp(got.index[:3].as_unit("ns").asi8, idx.as_unit("ns").asi8,
                                         amb.to_numpy()))
    thr = r.throughput
    assert thr.index.tz is not None and len(thr) == len(r.steps)


def test_real_weather_drives_the_twin():
    from powerlab.iotools.weather import read_weather

    assert WEATHER.is_dir(), f"bundled weather data missing at {WEATHER}"
    with pytest.warns(Warning):  # the bundled month has truncated lines, counted
        w = read_weather(WEATHER, tz=TZ)
    r = simulate_training("2025-06-05", days=5, ambient=w, seed=0, n_hosts=1,
                          telemetry=True, telemetry_interval_s=600, step_time_s=60)
    amb = r.truth.ambient
    assert amb.between(w["temp_air_c"].min(), w["temp_air_c"].max()).all()
    # hot afternoons slow the job: the real-weather twin has a clear daily effect
    assert r.truth.amplitude_pct > 0.5
    assert 12.0 <= r.truth.trough_hour <= 20.0
    tel = r.telemetry
    hot = tel["timestamp"].dt.tz_convert(TZ).dt.hour.between(14, 17)
    cool = tel["timestamp"].dt.tz_convert(TZ).dt.hour.between(3, 6)
    assert tel.loc[hot, "temp_gpu_c"].mean() > tel.loc[cool, "temp_gpu_c"].mean() + 1.0
    assert tel.loc[hot, "clock_sm_mhz"].mean() < tel.loc[cool, "clock_sm_mhz"].mean()


@pytest.mark.parametrize("kwargs,key", [
    ({"warp_factor": 9}, "warp_factor"),
    ({"days": 0}, "days"),
    ({"site_tz": "Mars/Olympus"}, "site_tz"),
    ({"amplitude_pct": -1}, "amplitude_pct"),
    ({"stragglers": [(999, "clock")]}, "stragglers"),
    ({"stragglers": [(0, "gremlin")]}, "stragglers"),
    ({"ambient": pd.Series([20.0, 21.0], index=pd.date_range("2025-06-01", periods=2,
                                                              freq="h"))}, "ambient"),
    ({"ambient": pd.Series([20.0, 21.0], index=pd.date_range("2020-01-01", periods=2,
                                                              freq="h", tz="UTC"))},
     "ambient"),
    ({"ambient": pd.DataFrame({"t": [1.0]})}, "ambient"),
    ({"start": "yesterday-ish"}, "start"),
    ({"restarts": ["2025-06-03T12:00"], "start": "2025-06-03"}, "restarts"),
    ({"stragglers": 2.5}, "stragglers"),
    ({"n_hosts": 1.5}, "n_hosts"),
    ({"jitter_pct": -1.0}, "jitter_pct"),
    ({"warmup_steps": -1.0}, "warmup_steps"),
    ({"mtbf_s": 0.0}, "mtbf_s"),
])
def test_bad_input_names_the_key(kwargs, key):
    with pytest.raises(ScenarioError) as exc:
        simulate_training(**{"days": 1, "telemetry": False, **kwargs})
    assert exc.value.key == key


def test_twin_run_keywords_and_object_agree():
    """The run's options (restarts, telemetry, its interval, seed) as a TwinRun or as the
    keywords that predate it give the same run; a TwinRun field overrides the object's."""
    from powerlab.throughput.synth import TwinRun

    restarts = ["2025-06-03T20:00Z"]
    kw = {"days": 1.5, "n_hosts": 1, "gpus_per_host": 4, "stragglers": 0}
    a = simulate_training(restarts=restarts, telemetry=False, seed=3, **kw)
    b = simulate_training(run=TwinRun(restarts=restarts, telemetry=False, seed=3), **kw)
    pd.testing.assert_frame_equal(a.steps, b.steps)
    assert a.telemetry is None and b.telemetry is None
    assert a.steps["segment"].nunique() == 2          # the restart splits the run
    c = simulate_training(run=TwinRun(restarts=restarts, telemetry=False, seed=3), seed=4,
                          **kw)
    assert not c.steps["duration_s"].equals(a.steps["duration_s"])
    with pytest.raises(TypeError, match="must be a TwinRun"):
        simulate_training(run={"seed": 3}, **kw)
