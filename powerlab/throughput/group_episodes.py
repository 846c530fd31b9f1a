"""Episodes of whole hosts and racks: a rack whose cooling fails in the afternoons, a
host whose GPUs stall on data now and then.  One finding per group with its hours, not
one flag per GPU.

Per group (host, or rack with a ``rack`` column), per window: the median over its GPUs of
their window offsets against the fleet at the same moments (clock [%], utilisation
[points]; not host-centred, board position removed), re-levelled within each fleet-wide
regime (:mod:`~powerlab.throughput.regimes`), and of their die temperature [degC].  Runs
of windows below the group's own level (above it, for the temperature: a cooling fault
shows first as heat) are found by :func:`~powerlab.throughput.failslow.drop_episodes` (the group's
persistent offset is the persistent test's business).  An episode of a group that is
hot throughout whose temperature offset does not rise during it, while its thermal
slowdown bits do, is the inlet it always has meeting the warm hours of the day (a hot
host, not a fault): reported (``explained``), not flagged.

Each group's episodes are classed ``time of day`` when at least two of them, on
different days, start within ``tod_tol_h`` hours of the same hour of the day (their
circular spread), else ``on/off``; ``hours_utc`` gives the typical start and end.  A
rack episode absorbs the overlapping episodes of its hosts, and a host or rack episode
those of its GPUs (:func:`overlaps`), so the finding is reported once, at its level.

References
----------
.. [1] Y. Deng et al., "Minder: Faulty machine detection for large-scale distributed
   model training", NSDI 2025 (continuity of a deviation from the machines' common
   behaviour).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .failslow import drop_episodes

__all__ = ["EPISODE_COLUMNS", "group_episodes", "overlaps", "summarise_episodes"]

EPISODE_COLUMNS = ["level", "group", "metric", "onset", "end", "duration_s", "shift",
                   "temp_rise_c", "thermal_bits_rise", "explained", "w_on", "w_off"]


def _centred(win: np.ndarray, pos_code: np.ndarray) -> np.ndarray:
    """Window offsets with each board position's median across the fleet removed."""
    win = win.copy()
    for p in np.unique(pos_code):
        cols = pos_code == p
        if cols.sum() >= 3:
            win[:, cols] -= np.nanmedian(win[:, cols], axis=1, keepdims=True)
    return win


def group_episodes(level: str, labels: np.ndarray, pos_code: np.ndarray, *,
                   windows: dict, wstart: np.ndarray, win_ns: int,
                   min_shift: dict, hot_c: float = 2.0, min_gpus: int = 3
                   ) -> pd.DataFrame:
    """Episodes of each group (module docstring).

    Parameters
    ----------
    level : str
        ``"host"`` or ``"rack"`` (a label in the output).
    labels : numpy.ndarray
        Group of each GPU.
    pos_code : numpy.ndarray
        Board position of each GPU.
    windows : dict
        Metric -> window offsets against the fleet (windows x GPUs), re-levelled within
        regimes: ``clock`` [%] (required), ``util`` [points], ``temp`` [degC],
        ``thermal_bits`` (share of samples) [-].
    wstart : numpy.ndarray
        Start of each window [ns since the epoch]; ``win_ns`` its length.
    min_shift : dict
        Metric -> smallest mean drop of an episode (clock [%], util [points]).
    hot_c : float
        A group this much hotter than the fleet throughout is "hot" [degC].
    min_gpus : int
        Fewest GPUs of a group.

    Returns
    -------
    pandas.DataFrame
        One row per episode, columns :data:`EPISODE_COLUMNS` (``w_on``/``w_off`` the
        window positions, ``end`` exclusive).
    """
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        cen = {m: _centred(v, pos_code) for m, v in windows.items() if v is not None}
        groups = [g for g in np.unique(labels) if (labels == g).sum() >= min_gpus]
        sers = {g: {m: np.nanmedian(v[:, labels == g], axis=1) for m, v in cen.items()}
                for g in groups}
        for metric in ("clock", "util", "temp"):
            if metric not in cen or metric not in min_shift:
                continue
            sign = -1.0 if metric == "temp" else 1.0
            harm = {g: drop_episodes(sign * sers[g][metric],
                                     min_shift_pct=min_shift[metric]) for g in groups}
            # the null: the same runs in the harmless direction (a group's own jitter
            # makes both; a fault only one), over all groups of the level
            null = max((e["z"] for g in groups for e in drop_episodes(
                -sign * sers[g][metric], min_shift_pct=min_shift[metric])), default=0.0)
            for g in groups:
                for e in harm[g]:
                    if e["z"] <= null:
                        continue
                    e = dict(e, shift_pct=sign * e["shift_pct"])
                    row = _episode_row(level, g, metric, e, sers[g], wstart, win_ns,
                                       hot_c)
                    # a clock drop alone, under twice the smallest shift, needs heat
                    # (temperature or thermal bits up) to be a group's fault
                    if metric == "clock" and e["shift_pct"] > -2 * min_shift[metric] \
                            and not (np.nan_to_num(row["temp_rise_c"]) >= 1.0
                                     or np.nan_to_num(row["thermal_bits_rise"]) > 0.02):
                        continue
                    rows.append(row)
    return pd.DataFrame(rows, columns=EPISODE_COLUMNS)


def _episode_row(level, g, metric, e, ser, wstart, win_ns, hot_c) -> dict:
    a, b = e["onset"], e["end"]
    inside = np.zeros(len(ser["clock"]), bool)
    inside[a:b] = True

    def rise(m):
        if m not in ser or not np.isfinite(ser[m][inside]).any():
            return np.nan
        return float(np.nanmedian(ser[m][inside]) - np.nanmedian(ser[m][~inside]))

    t_rise, b_rise = rise("temp"), rise("thermal_bits")
    hot = "temp" in ser and np.nanmedian(ser["temp"][~inside]) >= hot_c
    explained = bool(metric == "clock" and hot and np.nan_to_num(t_rise) < 1.0
                     and np.nan_to_num(b_rise) > 0.02)
    end = int(wstart[min(b, len(wstart)) - 1]) + win_ns
    return {"level": level, "group": str(g), "metric": metric,
            "onset": pd.Timestamp(int(wstart[a]), tz="UTC"),
            "end": pd.Timestamp(end, tz="UTC"), "duration_s": (end - wstart[a]) / 1e9,
            "shift": e["shift_pct"], "temp_rise_c": t_rise, "thermal_bits_rise": b_rise,
            "explained": explained, "w_on": a, "w_off": b}


def overlaps(a_on: int, a_off: int, eps: pd.DataFrame, share: float = 0.5) -> bool:
    """Whether at least ``share`` of the windows ``a_on..a_off`` lie in ``eps``."""
    if not len(eps) or a_off <= a_on:
        return False
    cover = np.zeros(a_off - a_on, bool)
    for on, off in zip(eps["w_on"], eps["w_off"]):
        lo, hi = max(on, a_on), min(off, a_off)
        if hi > lo:
            cover[lo - a_on:hi - a_on] = True
    return bool(cover.mean() >= share)


def _hhmm(h: float) -> str:
    m = int(round(h * 60)) % 1440
    return f"{m // 60:02d}:{m % 60:02d}"


def summarise_episodes(eps: pd.DataFrame, tod_tol_h: float = 2.0) -> pd.DataFrame:
    """Per group: number of (flagged) episodes, their class (``time of day`` or
    ``on/off``), typical hours [UTC] and the share of the record they cover."""
    out = []
    keep = ~eps["explained"].to_numpy(dtype=bool)
    for (level, g), d in eps.loc[keep].groupby(["level", "group"], sort=False):
        h0 = (d["onset"].dt.hour + d["onset"].dt.minute / 60).to_numpy()
        h1 = (d["end"].dt.hour + d["end"].dt.minute / 60).to_numpy()
        ang = np.exp(2j * np.pi * h0 / 24)
        spread_h = 24 / (2 * np.pi) * np.sqrt(max(-2 * np.log(abs(ang.mean())), 0))
        days = d["onset"].dt.floor("D").nunique()
        tod = len(d) >= 2 and days >= 2 and spread_h <= tod_tol_h
        mean_h = (np.angle(ang.mean()) * 24 / (2 * np.pi)) % 24
        end_h = (np.angle(np.exp(2j * np.pi * h1 / 24).mean()) * 24 / (2 * np.pi)) % 24
        out.append({"level": level, "group": g, "episodes": len(d),
                    "episode_kind": "time of day" if tod else "on/off",
                    "hours_utc": f"{_hhmm(mean_h)}-{_hhmm(end_h)}",
                    "episode_shift": float(d["shift"].median()),
                    "episode_metric": ",".join(sorted(set(d["metric"])))})
    return pd.DataFrame(out, columns=["level", "group", "episodes", "episode_kind",
                                      "hours_utc", "episode_shift", "episode_metric"])
