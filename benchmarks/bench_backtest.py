"""Backtests of the forecast on every MLPerf power run in ../shared/data (issue 21 targets).

For each dataset (v4.0 H100: GPT-3 64 nodes, Llama-2-70B LoRA 8 nodes, BERT 1 node;
v5.0 8 x B200: BERT, Llama-2-70B LoRA, RetinaNet, Stable Diffusion), with one rule for
all (nothing is tuned per dataset):

* **time split** on the first run (``powerlab.calibration.backtest.backtest_split``): split at
  the middle of the run, unless fewer than ``k`` complete evaluations of the run end
  before the middle, ``k = 2`` when the run has three or more evaluations (an evaluation
  cadence is a gap between two evaluations: one evaluation cannot measure it, and the
  first evaluation carries one-time set-up, so only a second one shows a recurring
  evaluation), else ``k = 1`` (a split must leave one evaluation to calibrate on); then
  the split is at the middle of the training block after the ``k``-th evaluation
  (``powerlab.calibration.backtest.split_rule``, the default of ``powerlab backtest``).  The
  rule reads only the run's own evaluation count and times, the same for every dataset.
  Energy error, 1-min MAPE and bias, the largest 1-s ramp
  forecast / measured (a test only where the meter resolves a periodic step), and, as a
  baseline measured in the same run, the 1-min MAPE of a constant forecast at the mean of
  the calibration part;
* **run to run** (``backtest_runs``): calibrate on the first run, forecast every other
  run of the dataset from its own ``run_start``; energy error per run.

Targets: time split energy within 2 %, 1-min MAPE <= 2 %; run to run energy within 3 %;
ramp ratio in 0.7-1.3 where the meter resolves the step.  Prints the table (the one in
docs/forecast_validation.md), exits 1 on a missed target, last line ``RESULT {json}``.
Skips cleanly (exit 0) where ../shared/data is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from powerlab.calibration.backtest import backtest_runs, backtest_split, split_rule
from powerlab.calibration.calibrate import summed_readings
from powerlab.exceptions import DataQualityWarning
from powerlab.iotools import read_mllog, read_mlperf_power

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("POWERLAB_SHARED_DATA", REPO.parent / "shared" / "data"))
V40 = SHARED / "mlperf-training-v4.0-smc" / "smc-ac-power" / "results"
V50 = SHARED / "mlperf-v50-lenovo-8xb200"
DATASETS = {
    "H100 GPT-3, 64 nodes (v4.0)": V40 / "64xSMC-H100-SXM-80GB" / "gpt3",
    "H100 Llama-2-70B LoRA, 8 nodes (v4.0)": V40 / "8xSMC-H100-SXM-80GB" / "llama2_70b_lora",
    "H100 BERT, 1 node (v4.0)": V40 / "1xSMC-H100-SXM-80GB" / "bert",
    "B200 BERT, 1 node (v5.0)": V50 / "bert",
    "B200 Llama-2-70B LoRA, 1 node (v5.0)": V50 / "llama2_70b_lora",
    "B200 RetinaNet, 1 node (v5.0)": V50 / "retinanet",
    "B200 Stable Diffusion, 1 node (v5.0)": V50 / "stable_diffusion",
}


def runs_of(root: Path) -> list:
    """(name, power, log) of every run with a power folder and a training log."""
    out = []
    for pdir in sorted((root / "power").iterdir(), key=lambda p: p.name):
        logs = sorted(root.glob(pdir.name + ".txt*"))
        if logs:
            out.append((pdir.name, read_mlperf_power(pdir), read_mllog(logs[0])))
    return out


def split_for(log) -> float:
    """The split rule of ``powerlab backtest`` (:func:`powerlab.calibration.backtest.split_rule`)
    on the run's evaluations."""
    return split_rule(log, log.run_start, log.run_stop)


def constant_mape(res, power, log, split) -> float:
    """1-min MAPE of a constant forecast at the calibration part's mean summed power."""
    cut = log.run_start + (log.run_stop - log.run_start) * split
    past = summed_readings(power[(power["timestamp"] >= log.run_start)
                                 & (power["timestamp"] < cut)], every_s=0.1)
    ym = res.series["split"]["measured_w"]
    n = int(len(ym) * 0.1 // 60)
    per = 600
    a = ym.to_numpy()[:n * per].reshape(n, per).mean(axis=1)
    return float(100 * np.mean(np.abs(past.mean() - a) / a)) if n else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="substring of a dataset name")
    args = ap.parse_args(argv)
    if not SHARED.is_dir():
        print(f"skipped: no shared data at {SHARED}")
        return 0
    warnings.simplefilter("ignore", DataQualityWarning)
    rows, missed = [], []
    for name, root in DATASETS.items():
        if args.only and args.only.lower() not in name.lower():
            continue
        if not root.is_dir():
            print(f"{name}: absent, skipped")
            continue
        t0 = time.perf_counter()
        runs = runs_of(root)
        _, power, log = runs[0]
        sp = split_for(log)
        r = backtest_split(power, log, split=sp)
        m = r.metrics.set_index("metric")
        up = m.loc["ramp_up_1s_w_per_s", "forecast"] / m.loc["ramp_up_1s_w_per_s", "measured"]
        dn = (m.loc["ramp_down_1s_w_per_s", "forecast"]
              / m.loc["ramp_down_1s_w_per_s", "measured"])
        row = {"dataset": name, "runs": len(runs), "split": sp,
               "meter_s": r.calibration.meter_interval_s,
               "periodic_step": r.calibration.has_periodic_step,
               "step_s": r.calibration.fit.step_time_s,
               "energy_pct": m.loc["energy_j", "error_pct"],
               "mape_pct": m.loc["mape_1min_pct", "forecast"],
               "bias_pct": m.loc["bias_1min_pct", "forecast"],
               "constant_mape_pct": constant_mape(r, power, log, sp),
               "minutes": int(len(r.series["split"]) * 0.1 // 60),
               "ramp_resolved": r.ramp_resolved, "ramp_up_ratio": up, "ramp_down_ratio": dn,
               "eval_start_error_s": m.loc["eval_start_error_s", "forecast"]}
        if len(runs) > 1:
            rr = backtest_runs(runs[:1], runs[1:])
            e = rr.metrics.loc[rr.metrics["metric"] == "energy_j", "error_pct"].to_numpy()
            row.update(r2r_runs=len(e), r2r_energy_max_abs_pct=float(np.abs(e).max()),
                       r2r_energy_mean_pct=float(e.mean()))
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        checks = {"energy within 2 %": abs(row["energy_pct"]) <= 2.0,
                  "1-min MAPE <= 2 %": row["mape_pct"] <= 2.0,
                  "run to run within 3 %": row.get("r2r_energy_max_abs_pct", 0.0) <= 3.0}
        if row["ramp_resolved"]:
            checks["ramp ratio 0.7-1.3"] = 0.7 <= up <= 1.3 and 0.7 <= dn <= 1.3
        missed += [f"{name}: {k}" for k, ok in checks.items() if not ok]
    print("| dataset | runs | meter | split | energy | 1-min MAPE (bias) | constant "
          "MAPE | 1-s ramp up / down (f/m) | run to run energy, max abs (mean) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ramp = (f"{r['ramp_up_ratio']:.2f} / {r['ramp_down_ratio']:.2f}"
                + ("" if r["ramp_resolved"] else " (step not resolved)"))
        r2r = (f"{r['r2r_energy_max_abs_pct']:.2f} % ({r['r2r_energy_mean_pct']:+.2f} %), "
               f"{r['r2r_runs']} runs" if "r2r_runs" in r else "one run")
        print(f"| {r['dataset']} | {r['runs']} | {r['meter_s']:g} s | {r['split']:.2f} | "
              f"{r['energy_pct']:+.2f} % | {r['mape_pct']:.2f} % ({r['bias_pct']:+.2f} %), "
              f"{r['minutes']} min | {r['constant_mape_pct']:.2f} % | {ramp} | {r2r} |")
    print()
    for r in rows:
        print(f"{r['dataset']}: step {r['step_s']:.3g} s, periodic step "
              f"{'yes' if r['periodic_step'] else 'no'}, eval start error (max) "
              f"{r['eval_start_error_s']:.1f} s, {r['seconds']:.1f} s to run")
    print("\nmissed: " + ("; ".join(missed) if missed else "none"))
    print("RESULT " + json.dumps({"rows": rows, "missed": missed}, default=float))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
