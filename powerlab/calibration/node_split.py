"""The hardware behind a recording: the GPU model and the GPU / non-GPU split of node power.

:func:`gpu_model_of` reads the model from an MLPerf system description
(``<submitter>/systems/<system>.json``, key ``accelerator_model_name``), found beside or
above the power folder (:func:`find_system_json`), or takes it from the user.
:func:`idle_level` measures a node's idle power on the readings before ``run_start`` and
after ``run_stop`` of the nodes that have them; :func:`node_split` turns that, or the
hardware prior of the model (:data:`GPU_PRIORS`), into the node's non-GPU power with its
source, which :func:`powerlab.calibration.calibrate.calibrate_job` carries into the
scenario (``hardware.node_overhead_w``, ``gpu_idle_w``) and its YAML comments.

Rules (the same for every recording)
------------------------------------
- **Idle readings**: a node's readings more than one meter interval before
  ``run_start`` or more than two after ``run_stop``; a node counts when it has at least
  :data:`MIN_IDLE_READINGS` of them and their 10th percentile is below
  :data:`IDLE_MAX_FRACTION` of its training median (pre-run readings at the training
  level are initialisation, not idle).  The node idle level is the median over those
  nodes of that percentile; its uncertainty the spread over nodes (or 10 % with one).
- **Split**: ``node_overhead = node_idle - gpus_per_node x gpu_idle`` with the model's
  prior GPU idle power; without idle readings, the model's prior non-GPU power; without
  a known model, no split (per-GPU levels are the node's shares, overhead 0), as before.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["GPU_PRIORS", "GpuPrior", "IdleLevel", "find_system_json", "gpu_model_of",
           "idle_level", "node_split", "prior_for"]

#: Idle readings a node needs to count [-].
MIN_IDLE_READINGS = 3
#: Idle readings' 10th percentile must lie below this fraction of the training median [-].
IDLE_MAX_FRACTION = 0.6


@dataclass(frozen=True)
class GpuPrior:
    """What is known of a GPU model without measuring it.

    ``tdp_w``: the board power limit of the datasheet; ``idle_w`` (``idle_sd_w``): one
    idle GPU; ``overhead_w`` (``overhead_sd_w``): an idle node besides its GPUs (CPUs,
    memory, NICs, fans, PSU losses), a wide prior; ``source``: where these come from."""

    tdp_w: float
    idle_w: float
    idle_sd_w: float
    overhead_w: float
    overhead_sd_w: float
    source: str


#: Priors per GPU model (matched by substring of the normalised model name, first match).
#: H100/H200 SXM: 700 W TDP (NVIDIA H100 Tensor Core GPU datasheet, 2023; H200 datasheet
#: 2024); DGX H100 system power 10.2 kW max (DGX H100 datasheet), i.e. at most 4.6 kW
#: besides 8 x 700 W.  B200: 1,000 W TDP per GPU in HGX B200 (NVIDIA HGX B200 datasheet,
#: 2024); DGX B200 14.3 kW max (datasheet), at most 6.3 kW besides the GPUs.  Idle GPU
#: power and the idle non-GPU power are priors (powerlab's hardware defaults, 75 W and
#: 2.5 kW for H100), deliberately wide.
GPU_PRIORS: dict[str, GpuPrior] = {
    "H100": GpuPrior(700.0, 75.0, 25.0, 2500.0, 1000.0,
                     "prior for H100 nodes: 75 +- 25 W per idle GPU, 2.5 +- 1.0 kW non-GPU "
                     "(DGX H100 datasheet: 10.2 kW max, 8 x 700 W GPUs)"),
    "H200": GpuPrior(700.0, 75.0, 25.0, 2500.0, 1000.0,
                     "prior for H200 nodes: as H100 (700 W TDP, H200 datasheet)"),
    "B200": GpuPrior(1000.0, 140.0, 50.0, 3000.0, 1500.0,
                     "prior for B200 nodes: 140 +- 50 W per idle GPU, 3.0 +- 1.5 kW non-GPU "
                     "(DGX B200 datasheet: 14.3 kW max, 8 x 1,000 W GPUs)"),
}


def prior_for(gpu_model: str | None) -> GpuPrior | None:
    """The prior of a model name (substring match, case-insensitive), None if unknown."""
    if not gpu_model:
        return None
    name = gpu_model.upper()
    return next((p for k, p in GPU_PRIORS.items() if k in name), None)


def find_system_json(power_path) -> Path | None:
    """The MLPerf system description of a power folder: ``systems/<system>.json`` of the
    submission (``<sub>/results/<system>/<benchmark>/power/...``), or a ``system*.json``
    in the power folder or one of its three parents; None when there is none."""
    p = Path(power_path).resolve()
    parts = p.parts
    if "results" in parts:
        i = len(parts) - 1 - parts[::-1].index("results")
        if i + 1 < len(parts):
            cand = Path(*parts[:i]) / "systems" / f"{parts[i + 1]}.json"
            if cand.is_file():
                return cand
    for d in [p if p.is_dir() else p.parent, *list(p.parents)[:3]]:
        hits = sorted(d.glob("system*.json")) if d.is_dir() else []
        if hits:
            return hits[0]
    return None


def gpu_model_of(system_json) -> tuple[str | None, int | None, str]:
    """``(gpu model, accelerators per node, source)`` from an MLPerf system JSON
    (``accelerator_model_name`` without the vendor prefix, ``accelerators_per_node``);
    ``(None, None, why)`` when the file does not say."""
    path = Path(system_json)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, None, f"{path}: unreadable system description ({exc})"
    model = str(d.get("accelerator_model_name") or "").strip()
    for vendor in ("NVIDIA ", "AMD ", "Nvidia "):
        model = model.removeprefix(vendor)
    inner = re.search(r"\(([^()]+)\)", model)   # "Blackwell GPU (B200-SXM-180GB)"
    if inner:
        model = inner.group(1).strip()
    try:
        per = int(str(d.get("accelerators_per_node", "")).strip())
    except ValueError:
        per = None
    if not model:
        return None, per, f"{path}: no accelerator_model_name"
    return model, per, f"system description {path.name}: accelerator_model_name"


@dataclass(frozen=True)
class IdleLevel:
    """A node's idle power measured on idle readings [W], its uncertainty, the nodes it
    rests on and the readings used."""

    node_idle_w: float
    sd_w: float
    nodes: int
    readings: int


def idle_level(df: pd.DataFrame, run_start, run_stop, meter_interval_s: float
               ) -> IdleLevel | None:
    """Node idle level from the readings outside the run (module rules); None when no
    node has idle readings."""
    if run_start is None and run_stop is None:
        return None
    w = pd.Timedelta(seconds=meter_interval_s)
    ts = df["timestamp"]
    out = pd.Series(False, index=df.index)
    if run_start is not None:
        out |= ts < run_start - w
    if run_stop is not None:
        out |= ts > run_stop + 2 * w
    inside = df[~out]
    lv, n = [], 0
    for h, g in df[out].groupby("host", observed=True):
        x = g["power_w"].to_numpy(float)
        x = x[np.isfinite(x)]
        train = inside.loc[inside["host"] == h, "power_w"].median()
        if len(x) < MIN_IDLE_READINGS:
            continue
        q = float(np.percentile(x, 10))
        if np.isfinite(train) and q < IDLE_MAX_FRACTION * train:
            lv.append(q)
            n += len(x)
    if not lv:
        return None
    lvl = float(np.median(lv))
    sd = float(np.std(lv, ddof=1)) if len(lv) > 1 else 0.1 * lvl
    return IdleLevel(lvl, max(sd, 0.02 * lvl), len(lv), n)


def node_split(gpu_model: str | None, idle: IdleLevel | None, gpus_per_node: int
               ) -> tuple[float, float, float, str] | None:
    """``(node_overhead_w, its sd, gpu_idle_w, source)`` of node power, or None without a
    known model (no split).  With idle readings: ``node_idle - gpus_per_node x prior
    GPU idle`` (never below 0); else the model's prior non-GPU power."""
    pr = prior_for(gpu_model)
    if pr is None:
        return None
    if idle is not None:
        over = max(0.0, idle.node_idle_w - gpus_per_node * pr.idle_w)
        sd = math.hypot(idle.sd_w, gpus_per_node * pr.idle_sd_w)
        gpu_idle = (idle.node_idle_w - over) / gpus_per_node
        src = (f"idle readings: node idle {idle.node_idle_w:,.0f} W (median over "
               f"{idle.nodes} nodes with readings outside the run, {idle.readings} "
               f"readings) - {gpus_per_node} x {pr.idle_w:g} W idle GPU ({pr.source})")
        return over, sd, gpu_idle, src
    return (pr.overhead_w, pr.overhead_sd_w, pr.idle_w,
            f"hardware prior (no idle readings before or after the run): {pr.source}")
