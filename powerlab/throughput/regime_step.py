"""The regime step of the straggler search (:mod:`~powerlab.throughput.straggler_scoring`):
fleet-wide breaks found by :func:`~powerlab.throughput.regimes.find_regimes` on a
:class:`~powerlab.throughput.fleet_matrix.FleetWork`, and each GPU's window series
re-levelled within each regime (transitions left out) for the episode tests."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ._robust import nanmad
from .fleet_matrix import METRICS, FleetWork
from .regimes import REGIME_COLUMNS, find_regimes, regime_codes

__all__ = ["drop_fleet_shared", "regime_breaks", "regime_persistence", "relevel"]

#: peer-test channel of each metric, and its harmful direction
_PEER = {"clock_sm_mhz": ("clock", -1.0), "temp_gpu_c": ("temp", 1.0),
         "temp_mem_c": ("hbm", 1.0)}

_SETTING_COLUMNS = ("driver_version", "clock_policy")


def regime_breaks(w: FleetWork) -> None:
    """Fill ``w.regimes`` (the breaks) and ``w.regime_code`` (regime of each window
    that has rows, as the window arrays hold them; -1 in a transition)."""
    n_w = w.n_w
    if n_w < 2:
        w.regimes = pd.DataFrame(columns=REGIME_COLUMNS + ["w0", "w1"])
        w.regime_code = np.zeros(len(np.unique(w.wcode)), dtype=np.int64)
        return
    lim = (w.matrix("power_limit_w")[w.rows] if "power_limit_w" in w.tel.columns
           else None)
    settings = {}
    for col in _SETTING_COLUMNS:
        if col in w.tel.columns:
            codes, labels = pd.factorize(w.tel[col].astype("string"))
            a = np.full((len(w.tu), w.n_g), -1, dtype=np.int64)
            a[w.tcode, w.gcode] = codes
            settings[col] = (a[w.rows], [str(x) for x in labels])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        row_med = np.nanmedian(w.mat["clock_sm_mhz"], axis=1)
        level = pd.Series(100.0 * (row_med / np.nanmedian(row_med) - 1.0)).groupby(
            w.wcode).median().reindex(range(n_w)).to_numpy()
        # the window arrays hold the windows that have rows; place them on 0..n_w-1
        keys = np.unique(w.wcode)
        full = np.full((n_w, w.n_g), np.nan)
        full[keys] = w.win_clock
        w.regimes = find_regimes(wcode=w.wcode, n_w=n_w, wstart=w.wstart,
                                 win_ns=w.win_ns, win_clock=full,
                                 level_pct=level, limit=lim, settings=settings)
    w.regime_code = regime_codes(w.regimes, n_w)[keys]


def relevel(x: np.ndarray, code: np.ndarray | None) -> np.ndarray:
    """A window series (windows, or windows x GPUs) minus its median within each regime;
    NaN in transitions.  Unchanged without breaks."""
    if code is None or not (code != 0).any():
        return x
    x = np.array(x, dtype=float)
    x[code < 0] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for r in np.unique(code[code >= 0]):
            sel = code == r
            x[sel] -= np.nanmedian(x[sel], axis=0)
    return x


def regime_persistence(w: FleetWork, min_windows: int = 4) -> None:
    """With fleet-wide breaks, a GPU's persistent peer evidence must hold in every
    regime: each peer channel becomes the smallest of its per-regime robust z (a chip
    that responds more than others to a lower cap is not a straggler of the old regime;
    one that becomes slow within a regime is its episode tests' business)."""
    code = w.regime_code
    if code is None or not (code != 0).any():
        return
    regs = [r for r in np.unique(code[code >= 0]) if (code == r).sum() >= min_windows]
    if len(regs) < 2:
        return
    for m, (chan, sign) in _PEER.items():
        if chan not in w.chan or m not in w.win_loo:
            continue
        floor = METRICS[m][1]
        harm = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for r in regs:
                win = w.win_loo[m][code == r]
                loc = np.nanmedian(win, axis=0)
                n = np.isfinite(win).sum(axis=0)
                se = 1.2533 * nanmad(win) / np.sqrt(np.maximum(n, 1))
                spread = max(float(nanmad(loc[np.isfinite(loc)])), floor)
                z = (loc - np.nanmedian(loc)) / np.sqrt(spread ** 2 + se ** 2)
                harm.append(np.nan_to_num(sign * z))
        peer = np.ones(w.n_g, dtype=bool)
        if w.bl is not None and m in w.bl["offset"]:
            # chips tested on their change since the baseline keep that evidence
            peer = ~w.bl["use"] | (w.bl["suspect"] & (m == "clock_sm_mhz"))
        w.chan[chan] = np.where(peer, np.minimum(w.chan[chan], np.min(harm, axis=0)),
                                w.chan[chan])


def drop_fleet_shared(found_by: dict, n_g: int, code: np.ndarray | None,
                      share: float = 0.1, near: int = 2) -> dict:
    """GPU episodes that are the fleet's, not the GPU's: those starting within ``near``
    windows of a regime break (a chip settling into the new regime), and those that at
    least ``share`` of the fleet's GPUs (3 or more) have at the same time for at least
    half of their windows (what many machines show at once is a fleet event, Minder)."""
    if not found_by:
        return found_by
    n_w = len(code) if code is not None else max(
        (e["end"] for f in found_by.values() for e in f), default=0)
    edge = np.zeros(n_w + 1, dtype=bool)
    if code is not None and (code != 0).any():
        for k in np.flatnonzero(np.diff(code) != 0) + 1:
            edge[max(k - near, 0):k + near + 1] = True
    count = np.zeros(n_w + 1)
    for found in found_by.values():
        for e in found:
            count[e["onset"]:e["end"]] += 1
    crowd = count >= max(3, share * n_g)
    return {g: [e for e in found if not edge[min(e["onset"], n_w)]
                and not crowd[e["onset"]:e["end"]].mean() >= 0.5]
            for g, found in found_by.items()}
