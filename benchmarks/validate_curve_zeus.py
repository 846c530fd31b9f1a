"""Validation of the power-throughput curve on real power-capped data (Zeus NSDI'23).

Data: ``data/zeus-nsdi23/summary_power_{a40,v100,rtx6000,p100}.csv``: per GPU model,
workload, batch size, optimizer and power limit, the time of one training epoch and the
GPU's average power, each measured once (You, Chung, Chowdhury, NSDI 2023).  Per group
(one job swept over the limits), :func:`powerlab.flex.fit_curve_points` is fitted on a
subset of the limits and predicts the throughput cost ``1 - r(L) / r(L_top)`` at the
others (rules in ``tests/support/curve_holdout.py``):

- interleaved: limits sorted from the highest, fit on every other one, always the highest
  (the reference) and the lowest; the rest held out (all inside the fitted range);
- extrapolation: fit on the highest half, predict every lower limit.

Printed: error distributions (absolute, percentage points of step rate; relative, where
the true cost is >= 2 %, and the share within 10 %) for the curve at the measured power,
at ``power_at_limit`` (the power it predicts at the limit: the limit map; before
2026-12-03 ``min(kappa L, P_ref)``: 2.01 pp median, 6.55 pp p90 on the interleaved split) and for the stated prior slope; the
same by GPU model and by cost band; the repeatability of one measurement (sd of log rate
where the limit does not bind); the real slopes against the prior (``PRIORS``).

Usage: python benchmarks/validate_curve_zeus.py   (last line: ``RESULT {json}``)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from powerlab.levers import PRIORS
from tests.support.curve_holdout import (
    error_stats,
    holdout,
    noise_floor,
    slopes,
    split_extrapolate,
    split_interleaved,
    split_interleaved_odd,
    zeus_points,
)

PRED = {"cost_at_power": "curve at measured power",
        "cost_at_limit": "curve at power_at_limit (limit map)",
        "cost_prior": "prior slope 0.30"}


def _line(label: str, st: dict) -> str:
    return (f"| {label} | {st['n']} | {st['median_abs_pp']:.2f} | {st['p90_abs_pp']:.2f} | "
            f"{st['max_abs_pp']:.1f} | {st['bias_pp']:+.2f} | {st['n_rel']} | "
            f"{100 * st['median_rel']:.1f} % | {100 * st['share_within_10pct']:.0f} % |")


HEAD = ("| rows | n | median abs err [pp] | p90 [pp] | max [pp] | median signed [pp] | "
        "n cost >= 2 % | median rel err | within 10 % |\n|---|---|---|---|---|---|---|---|---|")


def main() -> int:
    pts = zeus_points()
    res: dict = {}
    rows, skipped = holdout(pts, split_interleaved)
    ngroups = rows.groupby(["gpu_model", "dataset", "network", "batch_size",
                            "optimizer"]).ngroups
    print(f"Zeus NSDI'23 power traces: {len(pts)} operating points; interleaved split: "
          f"{ngroups} groups eligible, {len(rows)} held-out limits; not eligible: "
          f"{skipped}\n")
    print("## Interleaved split, all held-out limits\n" + HEAD)
    for col, lab in PRED.items():
        st = error_stats(rows, col)
        res[f"interleaved_{col}"] = st
        print(_line(lab, st))
    print("\n## Interleaved split, curve at measured power, by GPU model\n" + HEAD)
    for gpu, r in rows.groupby("gpu_model"):
        st = error_stats(r, "cost_at_power")
        res[f"interleaved_{gpu}"] = st
        print(_line(gpu, st))
    print("\n## Interleaved split, by true cost band\n" + HEAD)
    bands = [(-np.inf, 0.02), (0.02, 0.10), (0.10, 0.20), (0.20, np.inf)]
    for lo, hi in bands:
        r = rows[(rows["cost_true"] >= lo) & (rows["cost_true"] < hi)]
        for col in ("cost_at_power", "cost_at_limit"):
            st = error_stats(r, col)
            lab = (f"cost < {hi:.0%}" if lo == -np.inf else
                   f"cost >= {lo:.0%}" if hi == np.inf else f"{lo:.0%}-{hi:.0%}")
            res[f"band_{lab}_{col}"] = st
            print(_line(f"{lab}, {PRED[col]}", st))
    pw = 100 * (rows["power_pred_w"] / rows["power_w"] - 1)
    pi = 100 * (rows["power_interp_w"] / rows["power_w"] - 1)
    st = error_stats(rows, "cost_interp")
    res["interleaved_cost_interp"] = st
    print("\n(the limit map's rule written out independently: power interpolated linearly "
          "in the limit between the fitted limits)\n" + HEAD + "\n" + _line("curve via interpolated "
                                                                 "power", st))
    print(f"\nPower predicted by power_at_limit vs measured at held-out limits: median "
          f"|err| {pw.abs().median():.1f} %, p90 {pw.abs().quantile(0.9):.1f} %, median "
          f"signed {pw.median():+.1f} %; interpolated: median |err| {pi.abs().median():.1f} %")
    res["power_err_pct_median_abs"] = float(pw.abs().median())

    ro, sko = holdout(pts, split_interleaved_odd)
    print(f"\n## Interleaved split, other parity (fit on positions 1, 3, 5, ... with top and "
          f"bottom; {len(ro)} held-out limits; not eligible: {sko})\n" + HEAD)
    for col in ("cost_at_power", "cost_at_limit"):
        st = error_stats(ro, col)
        res[f"odd_{col}"] = st
        print(_line(PRED[col], st))
    for gpu, r in ro.groupby("gpu_model"):
        print(_line(f"{gpu}, {PRED['cost_at_power']}", error_stats(r, "cost_at_power")))
    st = error_stats(ro[ro["cost_true"] >= 0.20], "cost_at_power")
    res["odd_cost>=20%_cost_at_power"] = st
    print(_line(f"cost >= 20%, {PRED['cost_at_power']}", st))

    rx, skx = holdout(pts, split_extrapolate)
    print(f"\n## Extrapolation split (fit on the highest half; {len(rx)} limits below the "
          f"fitted range; not eligible: {skx})\n" + HEAD)
    for s, r in rx.groupby(np.minimum(rx["steps_below"], 3)):
        lab = f"{s} limit{'s' if s > 1 else ''} below" + (" or more" if s == 3 else "")
        st = error_stats(r, "cost_at_power")
        res[f"extrapolate_{s}"] = st
        print(_line(lab, st))
        st = error_stats(r, "cost_at_limit")
        res[f"extrapolate_{s}_cost_at_limit"] = st
        print(_line(lab + ", " + PRED["cost_at_limit"] + ", flagged extrapolated", st))

    nf = noise_floor(pts)
    print(f"\n## Repeatability of one measurement ({len(nf)} groups where the limit never "
          "binds: power within 5 % at every limit, >= 5 limits): sd of log step rate")
    for gpu, s in nf.groupby(level=0):
        print(f"  {gpu}: median {100 * s.median():.1f} % ({len(s)} groups)")
    print(f"  all: median {100 * nf.median():.1f} %; a cost (difference of two single "
          f"measurements) then scatters by about {100 * nf.median() * np.sqrt(2):.1f} pp")
    res["noise_sd_log_rate"] = float(nf.median())
    sl = slopes(pts)
    print("  where the limits bind (power varies >= 10 %), residual sd of log rate about "
          "the quadratic fit on all limits (scatter plus misfit): "
          + ", ".join(f"{g} {100 * s.median():.1f} %"
                      for g, s in sl.groupby("gpu_model")["resid_sd"]))
    res["resid_sd_log_rate"] = {g: float(s.median())
                                for g, s in sl.groupby("gpu_model")["resid_sd"]}

    pr = PRIORS["H100"]
    lo, hi = pr.b1 - 2 * pr.b1_sd, pr.b1 + 2 * pr.b1_sd
    c80 = 1 - 0.8 ** pr.b1
    print(f"\n## Real slopes against the prior (b1 = {pr.b1} +- {pr.b1_sd}, b2 = 0; "
          f"+-2 sd: {lo:.2f}-{hi:.2f}; cost at 80 % of P_ref {100 * c80:.1f} %)\n")
    print("| GPU | groups (limits bind) | b1 (b2 = 0) median | IQR | share in prior +-2 sd | "
          "cost at 80 % of P_ref, median | lowest y, median |\n|---|---|---|---|---|---|---|")
    for gpu, s in sl.groupby("gpu_model"):
        inside = ((s["b1"] >= lo) & (s["b1"] <= hi)).mean()
        q1, q3 = s["b1"].quantile([0.25, 0.75])
        res[f"slope_{gpu}"] = {"n": len(s), "b1_median": float(s["b1"].median()),
                               "share_in_prior": float(inside),
                               "cost_at_80pct_median": float(s["cost_at_80pct"].median())}
        print(f"| {gpu} | {len(s)} | {s['b1'].median():.2f} | {q1:.2f}-{q3:.2f} | "
              f"{100 * inside:.0f} % | {100 * s['cost_at_80pct'].median():.1f} % | "
              f"{s['y_min'].median():.2f} |")
    print("(No H100, A100 or B200 in the Zeus data: the priors of those models are not "
          "checked by it.)")
    print("RESULT " + json.dumps(res, default=float))
    return 0


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    sys.exit(main())
