"""Derive the prior power-throughput curves (``powerlab.levers.curve.PRIORS``) from the
published power-limit sweeps bundled in ``data/zeus-nsdi23`` (You, Chung, Chowdhury,
"Zeus", USENIX NSDI 2023; Apache-2.0).

Rule (stated before looking at any H100 figure; no H100, A100 or B200 sweep is public):

1. A *job* is one (GPU, dataset, network, batch size, optimizer) swept over the power
   limits; ``r = t(L_top) / t(L)`` (epoch time), ``u = log(P / P(L_top))`` (measured mean
   power).  Jobs whose power varies by less than 10 % never bind and are left out.
2. Per job, least squares through the origin of ``log r = b1 u + b2 u^2``; a negative
   ``b1`` (a rate that *rises* as power falls near the top: measurement scatter, each
   point is measured once) is refitted with ``b1 = 0``.
3. Per GPU model with a sweep: the mean of its jobs' ``(b1, b2)`` and their covariance
   (the job-to-job spread: the band a new job of that GPU falls in), and the lowest
   relative power any of its jobs reached (below it the prior is an extrapolation).
4. GPU models without a sweep (H100, A100, B200): the equal-weight mixture of the four
   generations: the mean of their means, covariance = mean within-GPU covariance + the
   covariance between the GPU means (so the band spans the generations).

Usage: ``python benchmarks/derive_curve_priors.py`` prints the PRIORS numbers and a
``RESULT {json}`` line; ``tests/flex/test_curve_priors.py`` re-derives them and checks the
package's constants.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from powerlab.iotools import read_zeus_power_trace  # noqa: E402

ZEUS = Path(__file__).resolve().parents[1] / "data" / "zeus-nsdi23"
GPUS = ("a40", "p100", "rtx6000", "v100")
KEY = ["gpu_model", "dataset", "network", "batch_size", "optimizer"]


def job_fits(points: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per binding job: ``b1``, ``b2``, the lowest relative power ``y_min`` (rule 1-2)."""
    if points is None:
        points = pd.concat([read_zeus_power_trace(ZEUS / f"summary_power_{g}.csv")
                            for g in GPUS], ignore_index=True)
    rows = []
    for key, g in points.groupby(KEY, sort=True):
        g = g.sort_values("power_limit_w", ascending=False)
        u = np.minimum(np.log(g["power_w"].to_numpy() / g["power_w"].iloc[0]), 0.0)
        if np.ptp(u) < np.log(1 / 0.9):
            continue
        y = np.log(g["epoch_time_s"].iloc[0] / g["epoch_time_s"].to_numpy())
        b = np.linalg.lstsq(np.column_stack([u, u * u]), y, rcond=None)[0]
        if b[0] < 0:
            b = np.array([0.0, float((u * u) @ y / ((u * u) @ (u * u)))])
        rows.append({**dict(zip(KEY, key, strict=True)), "b1": float(b[0]),
                     "b2": float(b[1]), "y_min": float(np.exp(u.min()))})
    return pd.DataFrame(rows)


def priors(fits: pd.DataFrame | None = None) -> dict[str, dict]:
    """Per swept GPU and the pooled ``"unswept"`` prior: ``b``, ``cov``, ``y_min``, ``jobs``."""
    fits = job_fits() if fits is None else fits
    out = {}
    for gpu, d in fits.groupby("gpu_model", sort=True):
        bb = d[["b1", "b2"]].to_numpy()
        out[str(gpu)] = {"b": bb.mean(axis=0).tolist(), "cov": np.cov(bb.T).tolist(),
                         "y_min": float(d["y_min"].min()), "jobs": int(len(d))}
    means = np.array([v["b"] for v in out.values()])
    within = np.mean([np.array(v["cov"]) for v in out.values()], axis=0)
    out["unswept"] = {"b": means.mean(axis=0).tolist(),
                      "cov": (within + np.cov(means.T)).tolist(),
                      "y_min": float(min(v["y_min"] for v in out.values())),
                      "jobs": int(sum(v["jobs"] for v in out.values()))}
    return out


def cost(b, cov, y: float, z: float = 1.6448536269514722) -> tuple[float, float, float]:
    """Throughput cost ``1 - r`` at relative power ``y``: mean and the 90 % band."""
    u = np.log(y)
    x = np.array([u, u * u])
    m, se = float(x @ np.asarray(b)), float(np.sqrt(x @ np.asarray(cov) @ x))
    return 1 - np.exp(m), 1 - np.exp(min(m + z * se, 0.0)), 1 - np.exp(m - z * se)


if __name__ == "__main__":
    pr = priors()
    for name, v in pr.items():
        c46, c80 = cost(v["b"], v["cov"], 0.46), cost(v["b"], v["cov"], 0.8)
        print(f"{name:8s} jobs {v['jobs']:3d} b1 {v['b'][0]:.4f} b2 {v['b'][1]:.4f} "
              f"cov {np.round(v['cov'], 4).tolist()} y_min {v['y_min']:.3f}  "
              f"cost at y=0.46 {c46[0]:.1%} (90 % {c46[1]:.1%}-{c46[2]:.1%}), "
              f"at y=0.8 {c80[0]:.1%}")
    print("RESULT " + json.dumps(pr))
