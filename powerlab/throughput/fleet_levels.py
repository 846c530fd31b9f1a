"""Slow hosts and racks: groups of GPUs slower than the fleet, beyond what their inlet
temperature explains.

The GPU-level test centres each GPU on its host's other GPUs, so a whole host slowed by
a host power cap or a slower host link is invisible to it (issue 22).  Here each group
(host, or rack with a ``rack`` column) is compared with the fleet:

1. Per GPU, its persistent offsets against the fleet median at the same moments (clock
   [%], die temperature [degC], power [%]), with the board-position effect (median over
   hosts of each position) removed when there are at least three groups.
2. **Temperature explains part of the clock.**  Under a power cap a hotter chip leaks
   more and clocks lower; the slope is fitted across all GPUs by a robust (Huber)
   regression of clock offset on temperature offset (statsmodels ``RLM``), constrained
   to be non-positive.  A hot host's clock deficit is the slope times its excess
   temperature and is *explained*, not flagged.
3. Per group the median over its GPUs (one straggler GPU does not move it) of the
   residual clock, of power and of the enforced power limit, and the share of hardware
   slowdown bits.  Robust z of each against the other groups (normal-consistent MAD,
   floored at the GPU-level spread over :math:`\\sqrt{n}` and by the slope's
   uncertainty times the group's temperature offset), combined as for GPUs
   (:func:`~powerlab.throughput.evidence.combine_evidence`).
4. A group is flagged when its score exceeds ``z_threshold``, chosen by the caller so
   that the expected false alarms per GPU of fleet equal the GPU-level test's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import median_abs_deviation
from statsmodels.robust.norms import HuberT
from statsmodels.robust.robust_linear_model import RLM
from statsmodels.tools.tools import add_constant

from .evidence import combine_evidence

__all__ = ["group_stragglers", "temperature_slope"]


def temperature_slope(clock_off: np.ndarray, temp_off: np.ndarray) -> tuple[float, float]:
    """Robust slope of clock offset [%] on temperature offset [degC] across GPUs, and its
    standard error; clipped at 0 (a hotter chip never clocks higher under a cap)."""
    ok = np.isfinite(clock_off) & np.isfinite(temp_off)
    if ok.sum() < 8 or np.std(temp_off[ok]) == 0:
        return 0.0, 0.0
    X = add_constant(temp_off[ok])
    fit = RLM(clock_off[ok], X, M=HuberT()).fit()
    return min(float(fit.params[1]), 0.0), float(fit.bse[1])


def _robust_z(v: np.ndarray, floor: np.ndarray) -> np.ndarray:
    med = np.nanmedian(v)
    spread = float(median_abs_deviation(v, scale="normal", nan_policy="omit")) \
        if np.isfinite(v).sum() >= 3 else 0.0
    return (v - med) / np.sqrt(spread ** 2 + floor ** 2)


def group_stragglers(group: np.ndarray, pos_code: np.ndarray, *, clock_off, temp_off,
                     power_off=None, limit_off=None, hw_share=None, util_off=None,
                     z_threshold: float = 3.5) -> pd.DataFrame:
    """Score groups of GPUs (hosts, racks) against the fleet.

    Parameters
    ----------
    group : numpy.ndarray
        Group label of each GPU.
    pos_code : numpy.ndarray
        Board position of each GPU.
    clock_off, temp_off : numpy.ndarray
        Each GPU's persistent offset against the fleet median: clock [%], die
        temperature [degC] (not host-centred).
    power_off, limit_off : numpy.ndarray, optional
        Power and enforced power-limit offsets against the fleet median [%].
    hw_share : numpy.ndarray, optional
        Share of each GPU's samples with hardware slowdown / power-brake bits [-].
    util_off : numpy.ndarray, optional
        Utilisation offset against the fleet median at the same moments [points].  In a
        synchronous job every GPU looks busy (the others wait inside collectives, which
        are kernels); a host whose GPUs idle on data stalls (PCIe, NIC, storage) has
        lower utilisation than every other host.
    z_threshold : float
        Score above which a group is flagged [-] (a group needs 2 GPUs or more).

    Returns
    -------
    pandas.DataFrame
        One row per group: group, n_gpus, clock_offset_pct (median raw clock offset),
        temp_offset_c, clock_explained_pct (by its temperature), clock_residual_pct,
        clock_z, power_z, power_limit_z, hw_bits_z, util_z (utilisation low), util_offset
        (its median offset) [points], clock_scale_pct (the scale of its clock z: the
        other groups' spread and its own uncertainty) [%], score, p_value, best_evidence, flagged, cause.
    """
    labels, gcode = np.unique(np.asarray(group).astype(str), return_inverse=True)
    n_grp = len(labels)
    chans = _fleet_channels(clock_off, temp_off, power_off, limit_off, hw_share, pos_code,
                            n_grp)
    if util_off is not None and np.isfinite(util_off).sum() >= 3:
        chans["util"] = np.asarray(util_off, float)
    slope, slope_se = temperature_slope(chans["clock"], chans["temp"])
    resid = chans["clock"] - slope * chans["temp"]
    n = np.bincount(gcode, minlength=n_grp)
    t_g = _per_group(chans["temp"], gcode, n_grp)
    c_g = _per_group(chans["clock"], gcode, n_grp)
    r_g = _per_group(resid, gcode, n_grp)
    z = _group_z(chans, resid, r_g, t_g, slope_se, gcode, n)
    scale = z.pop("_clock_scale")
    score, p, best = _group_score(z)
    flagged = (n >= 2) & (score > z_threshold)
    cause = _group_cause(z, n_grp)
    return pd.DataFrame({
        "group": labels, "n_gpus": n, "clock_offset_pct": c_g, "temp_offset_c": t_g,
        "clock_explained_pct": slope * t_g, "clock_residual_pct": r_g,
        **{f"{k}_z": v for k, v in z.items()}, "score": score,
        "p_value": np.minimum(p * 1.0, 1.0), "best_evidence": best,
        "flagged": flagged, "cause": np.where(flagged, cause, ""),
        "util_offset": _per_group(chans["util"], gcode, n_grp) if "util" in chans
        else np.nan, "clock_scale_pct": scale, "temp_slope_pct_per_c": slope})


def _fleet_channels(clock_off, temp_off, power_off, limit_off, hw_share, pos_code,
                    n_grp: int) -> dict:
    """Each GPU's offsets by channel, the board-position effect removed from clock,
    temperature and power when there are at least three groups."""
    chans = {"clock": np.asarray(clock_off, float).copy(),
             "temp": np.asarray(temp_off, float).copy()}
    for name, v in (("power", power_off), ("power_limit", limit_off),
                    ("hw_bits", hw_share)):
        if v is not None:
            chans[name] = np.asarray(v, float).copy()
    if n_grp >= 3:
        for p in np.unique(pos_code):
            cols = pos_code == p
            if cols.sum() >= 3:
                for k in ("clock", "temp", "power"):
                    if k in chans:
                        chans[k][cols] -= np.nanmedian(chans[k][cols])
    return chans


def _per_group(v: np.ndarray, gcode: np.ndarray, n_grp: int) -> np.ndarray:
    """Median over each group's GPUs (NaN for a group without a value)."""
    return np.array([np.nanmedian(v[gcode == g]) if np.isfinite(v[gcode == g]).any()
                     else np.nan for g in range(n_grp)])


def _group_z(chans: dict, resid, r_g, t_g, slope_se: float, gcode, n) -> dict:
    """Robust z of each group's residual clock, power, power limit and hardware bits
    against the other groups (floors: the GPU-level spread over sqrt(n), the slope's
    uncertainty times the group's temperature offset)."""
    n_grp = len(n)
    gpu_sd = max(float(median_abs_deviation(resid, scale="normal", nan_policy="omit")),
                 0.05)
    # median of n: 1.2533 sigma / sqrt(n)
    floor = 1.2533 * gpu_sd / np.sqrt(np.maximum(n, 1))
    floor = np.sqrt(floor ** 2 + (slope_se * (t_g - np.nanmedian(t_g))) ** 2)
    z = {"clock": -_robust_z(r_g, floor)}
    spread = float(median_abs_deviation(r_g, scale="normal", nan_policy="omit")) \
        if np.isfinite(r_g).sum() >= 3 else 0.0
    z["_clock_scale"] = np.sqrt(spread ** 2 + floor ** 2)
    if "power" in chans:
        p_sd = max(float(median_abs_deviation(chans["power"], scale="normal",
                                              nan_policy="omit")), 0.1)
        z["power"] = -_robust_z(_per_group(chans["power"], gcode, n_grp),
                                1.2533 * p_sd / np.sqrt(np.maximum(n, 1)))
    if "power_limit" in chans:
        z["power_limit"] = -_robust_z(_per_group(chans["power_limit"], gcode, n_grp),
                                      np.full(n_grp, 0.5))
    if "hw_bits" in chans:
        z["hw_bits"] = _robust_z(_per_group(chans["hw_bits"], gcode, n_grp),
                                 np.full(n_grp, 0.02))
    if "util" in chans:
        # floors: the GPU spread over sqrt(n), and 0.5 point (a utilisation counter's
        # resolution; smaller host differences are not a stall worth a flag)
        u_sd = float(median_abs_deviation(chans["util"], scale="normal",
                                          nan_policy="omit"))
        floor = np.sqrt((1.2533 * u_sd / np.sqrt(np.maximum(n, 1))) ** 2 + 0.5 ** 2)
        z["util"] = -_robust_z(_per_group(chans["util"], gcode, n_grp), floor)
    return z


def _group_score(z: dict):
    """The combined score, its p-value and the evidence that gives it; power alone is
    not evidence (a host that draws less is not slower): it only joins the clock."""
    score, p, best = combine_evidence({k: v for k, v in z.items() if k != "power"})
    if "power" in z:
        pair = np.where((z["clock"] > 0) & (z["power"] > 0),
                        (z["clock"] + z["power"]) / np.sqrt(2), -np.inf)
        better = pair > score
        score = np.where(better, pair, score)
        best = np.where(better, "clock+power", best)
        if "util" in z:
            # a data-stalled host idles: lower utilisation and lower power together
            pair = np.where((z["util"] > 0) & (z["power"] > 0),
                            (z["util"] + z["power"]) / np.sqrt(2), -np.inf)
            better = pair > score
            score = np.where(better, pair, score)
            best = np.where(better, "util+power", best)
    return score, p, best


def _group_cause(z: dict, n_grp: int) -> np.ndarray:
    """Power cap (power limit z >= 2), else hardware slowdown (bits z >= 2), else data
    stall (utilisation z >= 2), else unexplained."""
    zero = np.zeros(n_grp)
    return np.where(np.nan_to_num(z.get("power_limit", zero)) >= 2, "power cap", np.where(
        np.nan_to_num(z.get("hw_bits", zero)) >= 2, "hardware slowdown", np.where(
            np.nan_to_num(z.get("util", zero)) >= 2, "data stall (utilisation low)",
            "unexplained")))
