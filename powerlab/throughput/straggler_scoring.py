"""The steps of the straggler search (:func:`powerlab.throughput.stragglers.find_stragglers`).

One pass is a short chain of named steps, as pvlib's ``ModelChain.run_model``: each
reads and writes a :class:`~powerlab.throughput.fleet_matrix.FleetWork` (the fleet's
matrices and the evidence so far), so each can be read and tested on its own:

``index_fleet`` (timestamps x GPUs, compute-phase rows, windows;
:mod:`~powerlab.throughput.fleet_matrix`) -> ``peer_offsets`` (window offsets against
peers, host- and position-centred, robust z) -> ``baseline_changes`` (with a baseline)
-> ``throttle_evidence`` (slowing bits, power limit; these three in
:mod:`~powerlab.throughput.peer_evidence`) -> ``flag_gpus`` (combined evidence, reasons)
-> ``failslow_episodes`` (CUSUM onsets and intermittent episodes).  When the first pass
flags GPUs, the search reruns with them left out of their hostmates' references; then
``clock_deficits``, ``top_throttle`` and ``group_levels`` (slow hosts and racks) and
``score_table`` give what :class:`~powerlab.throughput.stragglers.StragglerResult` holds.

The options are one :class:`~powerlab.throughput.fleet_matrix.StragglerOptions`, shared
with :func:`~powerlab.throughput.stragglers.straggler_baseline`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.stats import median_abs_deviation

from ..exceptions import AnalysisError
from ..telemetry.schema import THROTTLE_REASONS
from ._robust import nanmad
from .evidence import cause_of, combine_evidence
from .failslow import cusum_episodes, drop_episodes, drop_shared
from .fleet_matrix import (
    METRICS,
    FleetWork,
    StragglerOptions,
    busy_rows,
    check_inputs,
    index_fleet,
)
from .group_episodes import EPISODE_COLUMNS, summarise_episodes
from .group_step import absorb_gpu_episodes, group_levels, level_episodes
from .peer_evidence import baseline_changes, peer_offsets, throttle_evidence
from .regime_step import drop_fleet_shared, regime_breaks, regime_persistence, relevel
from .regimes import REGIME_COLUMNS
from .straggler_cost import job_cost

__all__ = ["score_fleet", "score_table"]


# the reasons that slow a busy GPU down
_REASONS = {k: THROTTLE_REASONS[k] for k in ("sw_power_cap", "hw_slowdown",
                                              "sw_thermal_slowdown", "hw_thermal_slowdown",
                                              "hw_power_brake_slowdown")}
_CHANNEL_LABEL = {"clock": "clock low", "temp": "hot", "hbm": "HBM hot",
                  "thermal_bits": "throttled", "hw_bits": "throttled",
                  "power_limit": "power limit low"}
_CHANGE_LABEL = {"clock": "clock dropped vs baseline", "temp": "hotter than baseline"}


def score_fleet(telemetry, opts: StragglerOptions, baseline=None, _exclude=None):
    """One search (two passes when the first flags GPUs): the finished
    :class:`~powerlab.throughput.fleet_matrix.FleetWork`, from which :func:`score_table`
    builds the tables."""
    check_inputs(telemetry, opts)
    tel = busy_rows(telemetry)
    if tel.empty:
        raise AnalysisError("telemetry has no busy GPU rows")
    w = FleetWork(tel=tel, opts=opts, exclude=_exclude)
    index_fleet(w, baseline)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        peer_offsets(w)
        if w.bl is not None:
            baseline_changes(w)
        throttle_evidence(w)
    regime_breaks(w)
    regime_persistence(w)
    flag_gpus(w)
    failslow_episodes(w)
    if _exclude is None and w.flagged.any() and w.n_g > 2 * opts.min_peers:
        return score_fleet(telemetry, opts, baseline, _exclude=w.flagged)
    clock_deficits(w)
    top_throttle(w)
    group_levels(w)
    job_costs(w)
    return w


def flag_gpus(w: FleetWork) -> None:
    """Combine the evidence channels; flag and name the reasons."""
    z_threshold, n_g, chan = w.opts.z_threshold, w.n_g, w.chan
    chan.setdefault("clock", np.zeros(n_g))
    w.score, w.p_value, w.best = combine_evidence(chan)
    flagged = w.flagged = w.gpu_ok & (w.score > z_threshold)
    reasons = w.reasons = [[] for _ in range(n_g)]
    for key, label in _CHANNEL_LABEL.items():
        if key not in chan:
            continue
        for i in np.flatnonzero(flagged & (chan[key] > z_threshold)):
            reasons[i].append(w.change_hit.get(key, np.zeros(n_g, bool))[i]
                              and _CHANGE_LABEL[key] or label)
    for i in np.flatnonzero(flagged):
        if not reasons[i]:
            other = w.best[i].split("+")[-1]
            reasons[i].append(f"clock low + {_CHANNEL_LABEL[other]} (combined)")
    w.cause = cause_of(chan)


def failslow_episodes(w: FleetWork) -> None:
    """Fail-slow onsets (CUSUM against the first windows) and intermittent episodes
    (runs below the GPU's own median level); a GPU with one is flagged."""
    opts, n_g, n_w, gu = w.opts, w.n_g, w.n_w, w.gu
    eps, n_eps = w.eps, np.zeros(n_g, dtype=int)
    repair = np.zeros_like(w.clock)
    wstart = w.wstart
    win_end = np.append(wstart[1:], w.tu_ok[-1] + 1) if n_w else wstart
    found_by = {}
    # cut at fleet-wide regime breaks: each regime its own level, transitions left out
    win_clock = relevel(w.win_clock, w.regime_code)
    for g in range(n_g):
        if not w.gpu_ok[g]:
            continue
        found = [dict(e, kind="onset") for e in cusum_episodes(
            win_clock[:, g], min_shift_pct=opts.min_shift_pct, h=opts.cusum_h)]
        covered = np.zeros(n_w, dtype=bool)
        for e in found:
            covered[e["onset"]:e["end"]] = True
        for e in drop_episodes(win_clock[:, g], min_shift_pct=opts.min_shift_pct):
            if not covered[e["onset"]:e["end"]].any():
                found.append(dict(e, kind="episode", detected=e["end"] - 1))
        found_by[g] = found
    found_by = drop_shared(found_by, w.host_code, n_w)
    found_by = drop_fleet_shared(found_by, n_g, w.regime_code)
    level_episodes(w)
    found_by = absorb_gpu_episodes(w, found_by)
    for g, found in found_by.items():
        for e in sorted(found, key=lambda e: e["onset"]):
            n_eps[g] += 1
            end_ns = win_end[e["end"] - 1] if e["ongoing"] else wstart[e["end"]]
            eps.append({"host": gu[g][0], "gpu_index": gu[g][1], "kind": e["kind"],
                        "onset": wstart[e["onset"]],
                        "detected": win_end[e["detected"]], "end": end_ns,
                        "duration_s": (end_ns - wstart[e["onset"]]) / 1e9,
                        "ongoing": e["ongoing"], "shift_pct": e["shift_pct"]})
            inside = (w.wcode >= e["onset"]) & (w.wcode < e["end"])
            repair[inside, g] = -e["shift_pct"]
    has_ep = n_eps > 0
    for i in np.flatnonzero(has_ep & ~w.flagged):
        kinds = {e["kind"] for e in eps if (e["host"], e["gpu_index"]) == gu[i]}
        w.reasons[i].append("intermittent" if kinds == {"episode"} and n_eps[i] > 1
                            else "fail-slow")
    w.score = np.where(has_ep & ~w.flagged, np.fmax(w.score, opts.z_threshold), w.score)
    w.flagged = w.flagged | has_ep
    w.n_eps, w.has_ep, w.repair = n_eps, has_ep, repair


def clock_deficits(w: FleetWork) -> None:
    """Each flagged GPU's measured clock deficit [%] (what the cost repairs)."""
    out, bl, has_ep, n_g = w.out, w.bl, w.has_ep, w.n_g
    drop, excess, loff = w.drop, w.excess, w.loff
    # measured deficit: the persistent offset below the fleet's median GPU, or the clock
    # lost while throttled (drop x excess share) where that is larger -- a throttled GPU
    # on a fast leakage bin still loses what its throttling costs
    lost = np.where(np.isfinite(drop), np.maximum(-drop * np.maximum(excess, 0), 0), 0)
    # a lower power limit: near the cap's operating point dynamic power goes as f^3
    # (P ~ C V^2 f with V ~ f), so the clock lost is a third of the power limit's deficit
    lost = np.fmax(lost, np.where(np.isfinite(loff), np.maximum(-loff, 0) / 3, 0))
    if bl is not None and bl["use"].any():
        # a chip slower than its own baseline loses at least the drop
        ch = out["clock_change_pct"]
        lost = np.fmax(lost, np.where(bl["use"] & np.isfinite(ch),
                                      np.maximum(np.nanmedian(ch) - ch, 0), 0))
    deficit = np.where(w.flagged & ~has_ep, np.maximum(
        np.nanmedian(out["clock_sm_mhz_offset"]) - out["clock_sm_mhz_offset"], lost), 0.0)
    w.repair = np.where(has_ep[None, :], w.repair, deficit[None, :])
    out["episodes"] = w.n_eps
    out["clock_deficit_pct"] = np.where(has_ep, -np.array(
        [min([e["shift_pct"] for e in w.eps if (e["host"], e["gpu_index"]) == w.gu[g]]
             or [0]) for g in range(n_g)]), deficit)
    out["clock_deficit_mhz"] = out["clock_deficit_pct"] / 100 * w.f_ref
    out["evidence_z"] = w.score
    out["p_value"] = w.p_value
    out["expected_false_alarms"] = np.minimum(n_g * w.p_value, n_g)
    out["best_evidence"] = w.best
    out["cause"] = np.where(w.flagged, w.cause, "")


def top_throttle(w: FleetWork) -> None:
    """Top throttle reason: the largest share in excess of the fleet's median GPU."""
    top_name = np.array(["none"] * w.n_g, dtype=object)
    top_share = np.zeros(w.n_g)
    top_ex = np.zeros(w.n_g)
    for name, bit in _REASONS.items():
        sh = (((w.bits & np.uint64(bit)) != 0).sum(axis=0)
              / np.maximum(w.present.sum(axis=0), 1))
        ex = sh - np.median(sh)
        better = ex > top_ex
        top_name[better], top_share[better], top_ex[better] = name, sh[better], ex[better]
    w.out["top_throttle_reason"] = top_name
    w.out["top_throttle_share"] = top_share


def job_costs(w: FleetWork) -> None:
    """Step time lost to each flagged GPU and host, and by cause."""
    host_deficit = np.zeros(w.n_g)
    if "host" in w.levels:
        hl = w.levels["host"].set_index("group")
        hosts_arr = np.asarray(w.gu.get_level_values(0)).astype(str)
        for h in hl.index[hl["flagged"]]:
            host_deficit[hosts_arr == h] = max(-hl.loc[h, "clock_residual_pct"], 0.0)
    has_ep, cause, flagged = w.has_ep, w.cause, w.flagged
    cost, w.cost_total, w.lost_tbl = job_cost(
        w.clock, w.row_med, w.repair, flagged, host_deficit,
        np.where(has_ep, np.where(cause == "unexplained", "fail-slow", cause),
                 np.where(flagged, cause, "")),
        f_ref=w.f_ref, compute_fraction=w.opts.compute_fraction,
        interval_s=_interval_s(w.tu_ok))
    w.out["cost_step_pct"] = cost


def score_table(w: FleetWork, baseline=None) -> dict:
    """The :class:`~powerlab.throughput.stragglers.StragglerResult` fields of a
    finished search."""
    opts, out, gu = w.opts, w.out, w.gu
    # a GPU slower than its peers from before the record starts, with nothing else to
    # show it, is found only beyond z_threshold times the leakage spread
    spread_pct = float(median_abs_deviation(out["clock_sm_mhz_offset"], scale="normal",
                                            nan_policy="omit"))
    silent_limit = opts.z_threshold * max(spread_pct, METRICS["clock_sm_mhz"][1])
    out["identifiable"] = np.where(
        w.flagged, "flagged", np.where(-out["clock_sm_mhz_z"] > 1.0,
                                       "not identifiable without a baseline", ""))
    scores = pd.DataFrame({
        "host": pd.array(gu.get_level_values(0), dtype="string"),
        "gpu_index": pd.array(gu.get_level_values(1), dtype="Int16"),
        "gpu_uuid": pd.array(w.uuid, dtype="string"),
        "flagged": w.flagged,
        "reasons": [", ".join(dict.fromkeys(r)) for r in w.reasons],
        **out,
    })
    for m in ("clock_sm_mhz", "temp_gpu_c", "power_w"):
        for suf in ("offset", "se", "z"):
            if f"{m}_{suf}" not in scores.columns:
                scores[f"{m}_{suf}"] = np.nan
    flags = scores[scores["flagged"]].drop(columns="flagged")
    flags = flags.sort_values("cost_step_pct", ascending=False).reset_index(drop=True)
    episodes = pd.DataFrame(w.eps, columns=["host", "gpu_index", "kind", "onset",
                                            "detected", "end", "duration_s", "ongoing",
                                            "shift_pct"])
    for c in ("onset", "detected", "end"):
        episodes[c] = pd.to_datetime(episodes[c].astype("int64"), unit="ns", utc=True)
    episodes["host"] = episodes["host"].astype("string")
    episodes["gpu_index"] = episodes["gpu_index"].astype("Int16")
    episodes["episode_kind"] = _gpu_episode_kinds(episodes)
    params = {**opts.as_dict(), "metrics": tuple(opts.metrics),
              "host_z_threshold": w.z_group, "silent_limit_pct": silent_limit,
              "clock_spread_pct": spread_pct,
              **{f"{k}_silent_limit_pct": v for k, v in w.silent_limit.items()},
              "communication_identifiable": False, **_detectable(w, silent_limit)}
    if w.bl is not None:
        params.update(baseline_key=baseline.key, baseline_chips=int(w.bl["use"].sum()),
                      peer_test_chips=int((~w.bl["use"]).sum()))
    empty = pd.DataFrame(columns=["group", "flagged"])
    return {"flags": flags, "scores": scores, "episodes": episodes,
            "cost_step_pct_total": float(w.cost_total), "params": params,
            "hosts": w.levels.get("host", empty), "racks": w.levels.get("rack", empty),
            "lost": w.lost_tbl,
            "regimes": w.regimes[REGIME_COLUMNS].reset_index(drop=True),
            "group_episodes": (w.group_eps if w.group_eps is not None else pd.DataFrame(
                columns=EPISODE_COLUMNS)).drop(columns=["w_on", "w_off"])}


def _gpu_episode_kinds(episodes: pd.DataFrame) -> np.ndarray:
    """Each GPU episode's class, as for hosts and racks: ``time of day`` when the GPU's
    episodes recur at the same hours on two days or more, else ``on/off``."""
    if not len(episodes):
        return np.array([], dtype=object)
    key = episodes["host"].astype(str) + "/" + episodes["gpu_index"].astype(str)
    summ = summarise_episodes(pd.DataFrame({
        "level": "gpu", "group": key, "onset": episodes["onset"],
        "end": episodes["end"], "metric": "clock", "shift": episodes["shift_pct"],
        "explained": False})).set_index("group")
    return key.map(summ["episode_kind"]).fillna("on/off").to_numpy(dtype=object)


def _detectable(w: FleetWork, silent_limit: float) -> dict:
    """The sampling, the window used and the smallest slowdown each test detects at
    them: an episode needs a mean drop of ``min_shift_pct`` and windows ``2.5 sigma``
    below the GPU's level (sigma: the median GPU's window noise at this sampling)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sig = float(np.nanmedian(nanmad(np.diff(w.win_clock, axis=0)) / np.sqrt(2))) \
            if w.win_clock is not None and len(w.win_clock) > 2 else np.nan
    det = {"gpu_episode": float(max(w.opts.min_shift_pct, 2.5 * np.nan_to_num(sig))),
           "gpu_without_baseline": float(silent_limit)}
    det.update({f"{k}_without_baseline": v for k, v in w.silent_limit.items()})
    return {"sampling_s": _interval_s(w.tu), "window_s_used": w.win_ns / 1e9,
            "window_noise_pct": sig, "min_detectable_pct": det}


def _interval_s(tu_ok) -> float:
    return float(np.median(np.diff(tu_ok)) / 1e9) if len(tu_ok) > 1 else 0.0
