"""Tests of powerlab.grid.profile.fit_profile, and the MLPerf GPT-3 backtest of the forecast.

Run ``python -m tests.test_profile`` to print the backtest numbers quoted in
docs/forecast_validation.md.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import PowerlabError, SchemaError
from powerlab.grid.forecast import forecast
from powerlab.grid.profile import eval_intervals, fit_profile, otsu_threshold
from powerlab.grid.scenario import parse_scenario

MLPERF = Path(__file__).parents[1] / "data" / "mlperf-gpt3-64node"
T0 = pd.Timestamp("2025-01-01T00:00:00Z")


def _square_trace(period_s=7.3, duty=0.7, hi=650.0, lo=250.0, n_gpus=8, dur_s=300.0,
                  dt=0.1, noise=5.0, seed=0, evals=()):
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(n_gpus):
        t = np.arange(0, dur_s, dt) + rng.uniform(0, dt) + rng.normal(0, 0.003, int(dur_s / dt))
        t = np.sort(t)
        p = np.where(((t + 0.01 * g) % period_s) < duty * period_s, hi, lo)
        for a, b, level in evals:
            p = np.where((t >= a) & (t < b), level, p)
        p = p + rng.normal(0, noise, len(t))
        rows.append(pd.DataFrame({"timestamp": T0 + pd.to_timedelta(t, unit="s"),
                                  "host": "n1", "scope": "gpu", "gpu_index": g,
                                  "power_w": p}))
    df = pd.concat(rows, ignore_index=True)
    df["timestamp"] = df["timestamp"].astype("datetime64[ns, UTC]")
    return df


def test_recovers_known_gpu_profile():
    f = fit_profile(_square_trace())
    assert f.scope == "gpu" and f.devices == 8
    assert f.step_time_s == pytest.approx(7.3, rel=0.01)
    assert f.compute_fraction == pytest.approx(0.7, abs=0.02)
    assert f.compute_w == pytest.approx(650, rel=0.01)
    assert f.comm_w == pytest.approx(250, rel=0.02)
    assert f.step_dip_depth_w == pytest.approx(400, rel=0.03)
    assert np.isnan(f.eval_w)
    kw = f.job_kwargs()
    assert kw["step_time_s"] == f.step_time_s and "eval" not in kw
    assert "step_time_s" in f.summary() and "<table" in f._repr_html_()


def test_null_constant_power_has_no_real_dip():
    f = fit_profile(_square_trace(hi=500.0, lo=500.0, noise=5.0))
    assert f.step_dip_depth_w < 0.05 * 500  # only noise, no step structure


def test_node_scope_with_evaluations():
    ev = [(60.0, 75.0, 400.0), (160.0, 175.0, 400.0), (260.0, 275.0, 400.0)]
    df = _square_trace(period_s=10.0, duty=0.8, hi=7000.0, lo=6000.0, dt=2.0, noise=20,
                       dur_s=330, evals=ev, n_gpus=16)
    df["scope"] = "node"
    df["host"] = "node_" + df["gpu_index"].astype(str)
    df["gpu_index"] = pd.NA
    df["power_w"] = np.where(df["power_w"] < 1000, 6400.0, df["power_w"])
    events = pd.DataFrame({"start_utc": [T0 + pd.Timedelta(seconds=a) for a, _, _ in ev],
                           "stop_utc": [T0 + pd.Timedelta(seconds=b) for _, b, _ in ev]})
    f = fit_profile(df, events=events, node_overhead_w=2400.0)
    assert f.device_eval_w == pytest.approx(6400, rel=0.01)
    assert f.eval_duration_s == pytest.approx(15.0)
    assert f.eval_interval_s == pytest.approx(85.0)
    # the period is refined so that whole steps fit between evaluations
    assert 85.0 / f.step_time_s == pytest.approx(round(85.0 / f.step_time_s))
    assert f.step_time_s == pytest.approx(10.0, rel=0.07)
    assert f.compute_w == pytest.approx((7000 - 2400) / 8, rel=0.01)
    assert f.eval_dip_depth_w == pytest.approx(0.8 * 7000 + 0.2 * 6000 - 6400, rel=0.1)


def test_bad_input():
    with pytest.raises(SchemaError):
        fit_profile(pd.DataFrame({"timestamp": [T0]}))
    df = _square_trace(dur_s=20)
    both = pd.concat([df, df.assign(scope="node")])
    with pytest.raises(PowerlabError, match="scope"):
        fit_profile(both)
    with pytest.raises(PowerlabError, match="samples"):
        fit_profile(df, end=T0 + pd.Timedelta(seconds=0.1))
    with pytest.raises(PowerlabError, match="events"):
        eval_intervals(pd.DataFrame({"x": [1]}))
    assert 0.0 <= otsu_threshold(np.r_[np.zeros(50), np.ones(50)]) < 1.0


# ----------------------------------------------------------------------------- backtest

def _readers():
    from powerlab.iotools import read_mllog, read_mlperf_power

    return read_mlperf_power, read_mllog


def backtest(calibration_s: float = 1400.0) -> dict:
    """Calibrate on the first ``calibration_s`` of the 64-node GPT-3 run, forecast the
    rest, and compare with what was measured."""
    read_mlperf_power, read_mllog = _readers()
    power = read_mlperf_power(MLPERF / "power")
    log = read_mllog(next(MLPERF.glob("result_*.txt*")))
    run0, run1 = log.run_start, log.run_stop
    split = run0 + pd.Timedelta(seconds=calibration_s)
    fit = fit_profile(power, events=log, start=run0, end=split)
    nodes = power["host"].nunique()
    sc = parse_scenario({
        "name": "mlperf-gpt3-backtest",
        "horizon": {"start_utc": split.ceil("1min").isoformat(),
                    "end_utc": run1.floor("1min").isoformat()},
        # 10 ms ticks: steps rounded to ticks must not drift the evaluation cadence
        "simulation": {"tick_s": 0.01},
        "site": {"pue": 1.0},
        "hardware": {"gpus_per_node": 8, "node_overhead_w": fit.node_overhead_w,
                     "gpu_idle_w": 75.0, "gpu_compute_w": fit.compute_w,
                     "gpu_comm_w": fit.comm_w},
        "jobs": [{"name": "gpt3", "gpus": 8 * nodes, "start_utc": run0.isoformat(),
                  "duration_s": (run1 - run0).total_seconds(), **fit.job_kwargs()}],
    })
    res = forecast(sc, draws=1, seed=0)
    pred = res.summary_frame("1min", scope="it").set_index("interval_start_utc")
    # measured: per node 1-minute means, summed over nodes
    p = power[(power["timestamp"] >= split) & (power["timestamp"] < run1)]
    minute = p["timestamp"].dt.floor("1min")
    meas = p.groupby([minute, p["host"]])["power_w"].mean().groupby(level=0).sum()
    counts = p.groupby([minute, p["host"]]).size().groupby(level=0).size()
    common = pred.index.intersection(meas.index[counts[meas.index] == nodes])
    common = common[(common >= split.ceil("1min"))
                    & (common + pd.Timedelta(minutes=1) <= run1.floor("1min"))]
    y, yhat = meas[common].to_numpy(), pred.loc[common, "power_w_mean"].to_numpy()
    out = {"minutes": len(common), "mape_1min_pct": 100 * np.mean(np.abs(yhat - y) / y),
           "bias_1min_pct": 100 * np.mean((yhat - y) / y),
           "rmse_1min_kw": np.sqrt(np.mean((yhat - y) ** 2)) / 1e3,
           "mean_measured_kw": y.mean() / 1e3, "fit": fit}
    # evaluation dips: measured (MLLOG intervals) against forecast (its own events)
    ev = eval_intervals(log)
    ev = ev[(ev["start_utc"] > split + pd.Timedelta(seconds=60))
            & (ev["stop_utc"] < run1.floor("1min"))].reset_index(drop=True)
    t_ns = p["timestamp"].to_numpy("datetime64[ns]")

    def measured_dip(a, b):
        sel_e = (t_ns >= np.datetime64((a + pd.Timedelta(seconds=2)).tz_convert(None)))
        sel_e &= t_ns < np.datetime64((b - pd.Timedelta(seconds=2)).tz_convert(None))
        sel_t = (t_ns >= np.datetime64((a - pd.Timedelta(seconds=60)).tz_convert(None)))
        sel_t &= t_ns < np.datetime64(a.tz_convert(None))
        return (p.loc[sel_t, "power_w"].mean() - p.loc[sel_e, "power_w"].mean()) * nodes

    fev = res.events[res.events["event"] == "eval"]
    x = res.it_w[0]
    tick = res.tick_s
    dm, dp, dt = [], [], []
    for a, b in zip(ev["start_utc"], ev["stop_utc"]):
        j = np.argmin(np.abs((fev["timestamp"] - a).dt.total_seconds().to_numpy()))
        fa = fev["tick"].iloc[j]
        fb = fa + round(fev["duration_s"].iloc[j] / tick)
        dt.append((fev["timestamp"].iloc[j] - a).total_seconds())
        dm.append(measured_dip(a, b))
        dp.append(x[max(fa - int(60 / tick), 0):fa].mean()
                  - x[fa + int(2 / tick):fb - int(2 / tick)].mean())
    dm, dp, dt = map(np.asarray, (dm, dp, dt))
    out.update({"evals": len(ev), "eval_dip_measured_kw": dm.mean() / 1e3,
                "eval_dip_forecast_kw": dp.mean() / 1e3,
                "eval_dip_error_pct": 100 * (dp.mean() - dm.mean()) / dm.mean(),
                "eval_timing_mae_s": np.mean(np.abs(dt)),
                "eval_timing_max_s": np.max(np.abs(dt))})
    return out


@pytest.fixture(scope="module")
def mlperf_backtest():
    assert (MLPERF / "power").is_dir(), f"bundled MLPerf excerpt missing at {MLPERF}"
    return backtest()


def test_mlperf_backtest(mlperf_backtest):
    b = mlperf_backtest
    f = b["fit"]
    assert f.scope == "node" and f.devices == 64
    assert 10.0 < f.step_time_s < 11.5  # MLLOG train_step_timing: ~10.4-10.7 s
    assert b["minutes"] >= 25
    assert b["mape_1min_pct"] < 1.5
    assert b["evals"] >= 10
    assert b["eval_timing_max_s"] < 3.0
    assert abs(b["eval_dip_error_pct"]) < 15


if __name__ == "__main__":  # pragma: no cover - prints the numbers for the docs
    r = backtest()
    print(r.pop("fit").summary())
    for k, v in r.items():
        print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")
