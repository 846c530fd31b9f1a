"""One-time costs in a job's power profile (fit_profile, calibrate_job; issue 21).

The rule (``powerlab.calibration.profile`` module doc, *One-time costs*): "with two or more
evaluations in the window, the evaluation duration and level come from the evaluations
after the first; with at least one evaluation in the window and MIN_LEVEL_READINGS
training readings of every device after the first evaluation's end, the training levels
come from the training after the first evaluation."  And: "the evaluation level of a
device is the mean of its readings inside evaluations".  Known answers on metered
synthetic node power with a warm-up block and a long first evaluation; the null case
(no warm-up, equal evaluations) must give the same numbers with or without the rule.
"""

import numpy as np
import pandas as pd
import pytest

from powerlab.calibration.calibrate import calibrate_job
from powerlab.calibration.profile import MIN_LEVEL_READINGS, fit_profile

T0 = pd.Timestamp("2026-01-01T00:00:00Z")
#: first evaluation 40 s (set-up), later ones 30 s: 20 s idle-ish then 10 s near training
EVALS = ((150.0, 190.0), (290.0, 320.0), (420.0, 450.0))


def _readings(*, warm_w=9500.0, train_w=10000.0, first_eval_w=4000.0, evals=EVALS,
              split_eval=True, nodes=4, dur_s=600.0, noise=10.0, seed=0):
    """Node readings every 1 s (at k + 0.5 s), each the mean of the node's power over
    the second before it (10-ms brute force).  Training at ``warm_w`` until the first
    evaluation, ``train_w`` after; the first evaluation flat at ``first_eval_w``; later
    ones at 3700 W for all but their last 10 s, then 9500 W (``split_eval``), else flat
    at 5000 W."""
    fine = 0.01
    tt = (np.arange(round(dur_s / fine)) + 0.5) * fine
    p = np.where(tt < evals[0][0], warm_w, train_w)
    for i, (a, b) in enumerate(evals):
        inside = (tt >= a) & (tt < b)
        if i == 0:
            p = np.where(inside, first_eval_w, p)
        elif split_eval:
            p = np.where(inside, np.where(tt < b - 10.0, 3700.0, 9500.0), p)
        else:
            p = np.where(inside, 5000.0, p)
    t_read = np.arange(1.5, dur_s, 1.0)
    i1 = np.round(t_read / fine).astype(int)
    val = np.array([p[j - 100:j].mean() for j in i1])
    rng = np.random.default_rng(seed)
    df = pd.concat([pd.DataFrame({
        "timestamp": T0 + pd.to_timedelta(t_read, unit="s"), "host": f"node_{n}",
        "scope": "node", "gpu_index": pd.NA,
        "power_w": val + rng.normal(0, noise, len(val))}) for n in range(nodes)],
        ignore_index=True)
    df["timestamp"] = df["timestamp"].astype("datetime64[ns, UTC]")
    ev = pd.DataFrame({"start_utc": [T0 + pd.Timedelta(seconds=a) for a, _ in evals],
                       "stop_utc": [T0 + pd.Timedelta(seconds=b) for _, b in evals]})
    return df, ev


def _fit(df, ev, end_s=600.0):
    return fit_profile(df, events=ev, meter_interval_s=1.0, start=T0,
                       end=T0 + pd.Timedelta(seconds=end_s))


def test_first_evaluation_and_first_block_are_left_out():
    df, ev = _readings()
    f = _fit(df, ev)
    assert f.evals_used == 3
    assert f.eval_duration_s == pytest.approx(30.0)  # not 40 (the first), not 33.3
    # the mean of the readings inside (291.5 .. 319.5 s): (19.5 * 3700 + 9.5 * 9500) / 29;
    # a median would say 3700
    assert f.device_eval_w == pytest.approx((19.5 * 3700 + 9.5 * 9500) / 29, rel=0.005)
    assert f.device_train_mean_w == pytest.approx(10000.0, abs=5.0)  # not the warm-up
    assert "after the first" in f.params.loc["device_train_mean_w", "source"]
    assert "after the first" in f.params.loc["eval_duration_s", "source"]


def test_one_evaluation_gives_its_duration_and_the_level_after_it():
    df, ev = _readings()
    f = _fit(df, ev, end_s=260.0)  # only the first evaluation in the window
    assert f.evals_used == 1
    assert f.eval_duration_s == pytest.approx(40.0)  # the only one there is
    assert f.device_eval_w == pytest.approx(4000.0, abs=5.0)
    assert f.device_train_mean_w == pytest.approx(10000.0, abs=5.0)


def test_too_little_training_after_the_first_evaluation_keeps_all_of_it():
    df, ev = _readings()
    end_s = 190.0 + MIN_LEVEL_READINGS - 3  # fewer than MIN_LEVEL_READINGS after it
    f = _fit(df, ev, end_s=end_s)
    assert f.device_train_mean_w < 9600.0  # mostly the first block, at 9500
    assert "after the first" not in f.params.loc["device_train_mean_w", "source"]


def test_null_no_one_time_costs_changes_nothing():
    df, ev = _readings(warm_w=10000.0, first_eval_w=5000.0, split_eval=False,
                       evals=((150.0, 180.0), (290.0, 320.0), (420.0, 450.0)))
    f = _fit(df, ev)
    assert f.eval_duration_s == pytest.approx(30.0)
    assert f.device_eval_w == pytest.approx(5000.0, abs=5.0)
    assert f.device_train_mean_w == pytest.approx(10000.0, abs=5.0)


def test_calibrated_yaml_says_where_the_rule_applied():
    df, ev = _readings()
    cal = calibrate_job(df, events=ev, meter_interval_s=1.0)
    text = cal.to_yaml()
    assert "the first may carry set-up" in text
    assert cal.fit.eval_duration_s == pytest.approx(30.0)


def test_split_rule_holds_two_evaluations_when_the_run_has_three():
    """split_rule: "the middle of the run, unless fewer than k complete evaluations of
    the run end before it, k = 2 when the run has three or more evaluations, else k = 1;
    then the middle of the training block after the k-th evaluation"."""
    from powerlab.calibration.backtest import split_rule

    r1 = T0 + pd.Timedelta(seconds=1000)

    def ev(*pairs):
        return pd.DataFrame({"start_utc": pd.DatetimeIndex(
            [T0 + pd.Timedelta(seconds=a) for a, _ in pairs], tz="UTC"),
            "stop_utc": pd.DatetimeIndex(
            [T0 + pd.Timedelta(seconds=b) for _, b in pairs], tz="UTC")})

    # RetinaNet-like: one evaluation before the middle, three in the run
    three = ev((300, 340), (640, 670), (970, 990))
    assert split_rule(three, T0, r1) == pytest.approx((670 + 970) / 2 / 1000)
    # two evaluations already before the middle: the middle
    assert split_rule(ev((100, 110), (200, 210), (800, 810)), T0, r1) == 0.5
    # two evaluations in the run: one before the middle is enough
    assert split_rule(ev((100, 110), (800, 810)), T0, r1) == 0.5
    assert split_rule(ev((600, 610), (800, 810)), T0, r1) == pytest.approx(0.705)
    # none, or evaluations after the run (offline evaluation): the middle
    assert split_rule(ev(), T0, r1) == 0.5
    assert split_rule(ev((1100, 1110), (1200, 1210), (1300, 1310)), T0, r1) == 0.5
