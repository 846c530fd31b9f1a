"""The host and rack step of the straggler search
(:mod:`~powerlab.throughput.straggler_scoring`): groups of GPUs against the other groups
(:func:`~powerlab.throughput.fleet_levels.group_stragglers`) with clock, power, enforced
limit, hardware bits and utilisation as evidence, net of the group's temperature; with a
baseline also each group's *change* since the baseline against the other groups' (the
GPU-level change is centred on the GPU's hostmates, so a whole host's change cancels
there); and episodes of whole groups (:mod:`~powerlab.throughput.group_episodes`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.stats import norm

from .evidence import BIT_GROUPS
from .fleet_levels import group_stragglers
from .fleet_matrix import FleetWork
from .group_episodes import EPISODE_COLUMNS, group_episodes, overlaps, summarise_episodes
from .regime_step import relevel

__all__ = ["absorb_gpu_episodes", "group_labels", "group_levels", "level_episodes",
           "raw_window_offsets"]


def raw_window_offsets(w: FleetWork, col: str, rel: bool) -> np.ndarray | None:
    """Window means of ``col`` against the fleet median at the same moments (windows x
    GPUs; relative [%] or difference), not host-centred; None without the column."""
    if col in w.win_raw:
        return w.win_raw[col]
    if col not in w.tel.columns:
        return None
    x = w.matrix(col)[w.rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(x, axis=1, keepdims=True)
        o = 100.0 * (x / med - 1.0) if rel else x - med
        win = pd.DataFrame(o).groupby(w.wcode).mean().to_numpy()
    w.win_raw[col] = win
    return win


def group_labels(w: FleetWork) -> dict:
    """Level -> group label of each GPU (hosts; racks when the telemetry has a ``rack``
    column and at least three racks)."""
    out = {"host": np.asarray(w.gu.get_level_values(0)).astype(str)}
    if "rack" in w.tel.columns:
        rack = w.tel.groupby(w.gcode)["rack"].first().reindex(range(w.n_g)).astype(str)
        if rack.nunique() >= 3:
            out["rack"] = rack.to_numpy()
    return out


def _level_z(z_threshold: float, n_g: int, n_grp: int) -> float:
    """The group test's threshold: the same expected false alarms per GPU of fleet as
    the GPU test's."""
    return float(norm.isf(min(norm.sf(z_threshold) * n_g / max(n_grp, 1), 0.5)))


def group_levels(w: FleetWork) -> None:
    """Slow hosts (and racks) against the fleet, beyond what their temperature
    explains; with a baseline, also their change since then."""
    n_g = w.n_g
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        raw = {m: (np.nanmedian(v, axis=0) if v is not None else None) for m, v in (
            ("clock_sm_mhz", raw_window_offsets(w, "clock_sm_mhz", True)),
            ("temp_gpu_c", raw_window_offsets(w, "temp_gpu_c", False)),
            ("power_w", raw_window_offsets(w, "power_w", True)),
            ("util_gpu_pct", raw_window_offsets(w, "util_gpu_pct", False)))}
    n_hosts = len(np.unique(w.host_code))
    w.z_group = _level_z(w.opts.z_threshold, n_g, n_hosts)
    if raw["temp_gpu_c"] is None or n_hosts < 3:
        return
    kw = {"clock_off": raw["clock_sm_mhz"], "temp_off": raw["temp_gpu_c"],
          "power_off": raw["power_w"],
          "limit_off": w.loff if np.isfinite(w.loff).any() else None,
          "hw_share": w.bit_share["hw_bits"], "util_off": raw["util_gpu_pct"]}
    change = _baseline_change_kw(w, raw)
    for level, labels in group_labels(w).items():
        n_grp = len(np.unique(labels))
        z_lev = w.z_group if level == "host" else _level_z(w.opts.z_threshold, n_g, n_grp)
        tbl = group_stragglers(labels, w.pos_code, z_threshold=z_lev, **kw)
        if change is not None:
            tbl = _with_change(tbl, group_stragglers(labels, w.pos_code,
                                                     z_threshold=z_lev, **change),
                               w.opts.min_shift_pct)
        tbl = _with_episodes(tbl, level, w.group_eps)
        tbl["identifiable"] = np.where(
            tbl["flagged"], "flagged", np.where(
                (tbl["clock_z"] > 1.0) & ("clock_change_pct" not in tbl.columns),
                "not identifiable without a baseline", ""))
        w.levels[level] = tbl
        w.silent_limit[level] = float(z_lev * np.nanmedian(tbl["clock_scale_pct"]))


def _with_episodes(tbl: pd.DataFrame, level: str, eps: pd.DataFrame | None
                   ) -> pd.DataFrame:
    """The level's table with its groups' episodes (count, class, hours, median shift)
    and flagged for them; an episode with its temperature up by 2 degC or more is a
    cooling fault."""
    cols = ["episodes", "episode_kind", "hours_utc", "episode_shift", "episode_metric"]
    summ = summarise_episodes(eps if eps is not None and len(eps)
                              else pd.DataFrame(columns=EPISODE_COLUMNS))
    summ = summ[summ["level"] == level].set_index("group").reindex(tbl["group"])
    tbl = tbl.copy()
    for c in cols:
        tbl[c] = summ[c].to_numpy()
    tbl["episodes"] = tbl["episodes"].fillna(0).astype(int)
    has = tbl["episodes"].to_numpy() > 0
    hot = np.zeros(len(tbl), bool)
    if has.any():
        mine = eps[(eps["level"] == level).to_numpy()
                   & ~eps["explained"].to_numpy(dtype=bool)]
        rise = mine.groupby("group")["temp_rise_c"].median().reindex(tbl["group"])
        hot = rise.fillna(0).to_numpy() >= 2.0
    new = has & ~tbl["flagged"].to_numpy()
    tbl.loc[new, "best_evidence"] = "episodes"
    tbl.loc[new, "cause"] = np.where(
        hot[new], "cooling (hot in its episodes)", np.where(
            tbl.loc[new, "episode_metric"].str.contains("util"),
            "data stall episodes (utilisation low)", "episodes (unexplained)"))
    tbl["flagged"] = tbl["flagged"].to_numpy() | has
    return tbl


def _baseline_change_kw(w: FleetWork, raw: dict) -> dict | None:
    """Each baseline chip's change of its (not host-centred) clock and temperature
    offsets since the baseline, for the group test; None without a baseline."""
    bl = w.bl
    if bl is None or not bl["use"].any() or "temp_gpu_c" not in bl["offset"]:
        return None
    # a GPU flagged on its own is left out of its host's change (one straggler is not
    # its host)
    use = bl["use"] & ~w.flagged
    return {"clock_off": np.where(use, raw["clock_sm_mhz"] - bl["offset"]["clock_sm_mhz"],
                                  np.nan),
            "temp_off": np.where(use, raw["temp_gpu_c"] - bl["offset"]["temp_gpu_c"],
                                 np.nan)}


def _with_change(tbl: pd.DataFrame, ch: pd.DataFrame, min_shift_pct: float
                 ) -> pd.DataFrame:
    """The peer table with each group's change since the baseline (``clock_change_pct``,
    its ``clock_change_z``) and flagged on either test."""
    tbl = tbl.copy()
    ch = ch.set_index("group").reindex(tbl["group"])
    tbl["clock_change_pct"] = ch["clock_residual_pct"].to_numpy()
    tbl["clock_change_z"] = ch["clock_z"].to_numpy()
    # a group's change is measured over all its chips: half the GPU's smallest shift
    hit = ch["flagged"].fillna(False).to_numpy(dtype=bool) & (
        tbl["clock_change_pct"].to_numpy() <= -min_shift_pct / 2)
    new = hit & ~tbl["flagged"].to_numpy()
    tbl.loc[new, "score"] = ch["score"].to_numpy()[new]
    tbl.loc[new, "best_evidence"] = "clock dropped vs baseline"
    tbl.loc[new, "cause"] = "unexplained"
    tbl["flagged"] = tbl["flagged"].to_numpy() | hit
    return tbl


def level_episodes(w: FleetWork) -> None:
    """Episodes of hosts and racks (``w.group_eps``); a rack's absorbs its hosts'."""
    keys = np.unique(w.wcode)
    wstart = w.wstart[keys] if len(keys) else w.wstart
    clock = raw_window_offsets(w, "clock_sm_mhz", True)
    w.group_eps = pd.DataFrame(columns=EPISODE_COLUMNS)
    if clock is None or len(keys) < 8:
        return
    hit = (((w.bits & BIT_GROUPS["thermal_bits"]) != 0) & w.present).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        bits = pd.DataFrame(np.where(w.present, hit, np.nan)).groupby(w.wcode).mean()
        bits = bits.to_numpy() - np.nanmedian(bits.to_numpy(), axis=1, keepdims=True)
    windows = {"clock": clock, "util": raw_window_offsets(w, "util_gpu_pct", False),
               "temp": raw_window_offsets(w, "temp_gpu_c", False), "thermal_bits": bits}
    windows = {k: relevel(v, w.regime_code) for k, v in windows.items() if v is not None}
    found = []
    for level, labels in group_labels(w).items():
        found.append(group_episodes(level, labels, w.pos_code, windows=windows,
                                    wstart=wstart, win_ns=w.win_ns,
                                    min_shift={"clock": w.opts.min_shift_pct,
                                               "util": 1.0, "temp": 3.0}))
    eps = pd.concat([f for f in found if len(f)] or [found[0]], ignore_index=True)
    if "rack" in set(eps["level"]):
        host_rack = w.tel.groupby("host")["rack"].first().astype(str)
        racks = eps[eps["level"] == "rack"]
        keep = np.array([not (r["level"] == "host" and overlaps(
            r["w_on"], r["w_off"], racks[racks["group"] == host_rack.get(r["group"])]))
            for _, r in eps.iterrows()], dtype=bool)
        eps = eps[keep]
    w.group_eps = eps.reset_index(drop=True)


def absorb_gpu_episodes(w: FleetWork, found_by: dict) -> dict:
    """GPU episodes that lie (at least half) inside an episode of their host or rack
    are that group's finding, not the GPU's."""
    eps = getattr(w, "group_eps", None)
    if eps is None or not len(eps):
        return found_by
    labels = group_labels(w)
    out = {}
    for g, found in found_by.items():
        mine = eps[np.zeros(len(eps), bool) | np.any([
            (eps["level"] == lv).to_numpy() & (eps["group"] == lab[g]).to_numpy()
            for lv, lab in labels.items()], axis=0)]
        out[g] = [e for e in found if not overlaps(e["onset"], e["end"], mine)]
    return out
