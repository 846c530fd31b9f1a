"""Fleet-wide regime breaks: moments where the whole fleet changes its operating point
(a power limit lowered from 700 to 600 W, a clock policy, a driver, a fleet-wide level
shift), found from the recorded ``power_limit_w`` (and ``driver_version`` /
``clock_policy`` columns where present) and from the data.

A fleet-wide change is not a straggler: every GPU changes at once.  It still moves each
GPU's offset against its peers a little (chips respond to a lower cap by their own
leakage), which a GPU's own change-point test would take for a fail-slow onset.  The
straggler search therefore cuts each GPU's window series at the breaks, re-levels it
within each regime and leaves the transition (a rollout host by host) out, and reports
the breaks in ``result.regimes``.

Detection, on the compute-phase windows:

1. **Recorded limit** -- the fleet's median enforced limit per window; a change of at
   least 1 % is a break.  Its transition runs from the first to the last window in which
   GPUs' limits moved towards the new value (a rollout host by host).
2. **Simultaneous shifts** -- per window boundary and GPU, the median of the next
   ``span`` windows minus the median of the previous ``span`` (host-centred clock offsets,
   so a host's own change is not counted), standardised by the GPU's window noise.  A
   boundary where at least ``min_share`` (half) of the GPUs shift by more than 4 sigma (a share
   a handful of stragglers cannot reach) is a break: a clock policy or driver that
   changed the spread.
3. **Fleet level** -- the same on the fleet's median clock: a step of at least
   ``min_level_pct`` between the medians of ``span`` windows either side.  It moves
   every GPU alike, so it is reported but does not cut the GPU tests (the others do,
   :data:`CUT_KINDS`).

References
----------
.. [1] Y. Deng et al., "Minder: Faulty machine detection for large-scale distributed
   model training", NSDI 2025 (what all machines share at once is not a machine fault).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._options import Options
from ._robust import nanmad

__all__ = ["CUT_KINDS", "REGIME_COLUMNS", "RegimeOptions", "find_regimes", "regime_codes"]

REGIME_COLUMNS = ["kind", "start", "end", "before", "after", "share_gpus", "detail"]
_SETTING_COLUMNS = ("driver_version", "clock_policy")


def _windows_of(x: np.ndarray, wcode: np.ndarray, n_w: int) -> np.ndarray:
    """Window medians of a per-row series (NaN for empty windows)."""
    out = np.full(n_w, np.nan)
    s = pd.Series(x).groupby(wcode).median()
    out[s.index.to_numpy()] = s.to_numpy()
    return out


def _limit_breaks(lim: np.ndarray, wcode, n_w: int) -> list[dict]:
    med = np.nanmedian(lim, axis=1)
    wmed = _windows_of(med, wcode, n_w)
    per_gpu = pd.DataFrame(lim).groupby(wcode).median().reindex(range(n_w)).to_numpy()
    out = []
    ok = np.flatnonzero(np.isfinite(wmed))
    done = -1
    for a, b in zip(ok[:-1], ok[1:]):
        if a < done or not abs(wmed[b] / wmed[a] - 1) >= 0.01:
            continue
        # the level the fleet settles at: the first window after which it holds
        settle = b
        while settle + 1 < n_w and np.isfinite(wmed[settle + 1]) and \
                abs(wmed[settle + 1] / wmed[settle] - 1) >= 0.01:
            settle += 1
        before, after = wmed[a], wmed[settle]
        # the rollout: windows where some GPUs already sit at the new value
        new = np.abs(per_gpu - after) < np.abs(per_gpu - before)
        share = np.nanmean(np.where(np.isfinite(per_gpu), new, np.nan), axis=1)
        lo, hi = a, b
        while lo > 0 and not share[lo] <= 0.02:
            lo -= 1
        while hi < n_w - 1 and not share[hi] >= 0.98:
            hi += 1
        done = hi
        out.append({"kind": "power limit", "w0": lo, "w1": hi, "before": before,
                    "after": after, "share_gpus": float(np.nanmax(share)),
                    "detail": f"fleet power limit {before:.0f} -> {after:.0f} W"})
    return out


def _setting_breaks(codes: np.ndarray, wcode, n_w: int, name: str, labels) -> list[dict]:
    mode = pd.DataFrame(codes).groupby(wcode).agg(
        lambda c: np.bincount(c[c >= 0]).argmax() if (c >= 0).any() else -1)
    fleet = pd.Series(np.apply_along_axis(
        lambda r: np.bincount(r[r >= 0]).argmax() if (r >= 0).any() else -1, 1,
        mode.to_numpy()), index=mode.index).reindex(range(n_w)).ffill()
    out = []
    for w in np.flatnonzero(fleet.diff().fillna(0).to_numpy() != 0):
        out.append({"kind": name.replace("_", " "), "w0": int(w) - 1, "w1": int(w),
                    "before": labels[int(fleet.iloc[w - 1])],
                    "after": labels[int(fleet.iloc[w])], "share_gpus": 1.0,
                    "detail": f"{name} {labels[int(fleet.iloc[w - 1])]} -> "
                              f"{labels[int(fleet.iloc[w])]}"})
    return out


def _shift_breaks(win: np.ndarray, level: np.ndarray, span: int, min_share: float,
                  min_level_pct: float) -> list[dict]:
    """Boundaries where many GPUs (or the fleet's level) shift at once."""
    n_w = win.shape[0]
    if n_w < 2 * span + 1:
        return []
    d = np.full(win.shape, np.nan)
    step = np.zeros(n_w)
    for k in range(span, n_w - span + 1):
        d[k] = np.nanmedian(win[k:k + span], axis=0) - np.nanmedian(win[k - span:k], axis=0)
        step[k] = np.nanmedian(level[k:k + span]) - np.nanmedian(level[k - span:k])
    # each GPU's shifts against its own typical shift across all boundaries (its slow
    # wander and autocorrelation included), floored at the window noise
    sigma = np.maximum(nanmad(np.diff(win, axis=0)) / np.sqrt(2), 0.05)
    se = np.fmax(nanmad(d), 1.2533 * sigma * np.sqrt(2.0 / span))
    zd = np.abs(d) / se
    share = np.nan_to_num(np.nanmean(zd > 4, axis=1))
    size = np.nan_to_num(np.nanmean(zd, axis=1))
    out = []
    for score, where, thr, kind in (
            (share, size, min_share, "simultaneous shifts"),
            (np.abs(step), np.abs(step), min_level_pct, "fleet level shift")):
        k = 0
        while k < n_w:
            if score[k] >= thr:
                j = k
                while j + 1 < n_w and score[j + 1] >= thr:
                    j += 1
                # the boundary where the shifts are largest; the window on either side
                # of it may straddle the change and is left out
                b = (_best_split(win, k - span, j + span) if kind ==
                     "simultaneous shifts" else k + int(np.argmax(where[k:j + 1])))
                out.append({"kind": kind, "w0": b - 2, "w1": b + 1,
                            "before": float(np.nanmedian(level[b - span:b])),
                            "after": float(np.nanmedian(level[b:b + span])),
                            "share_gpus": float(share[b]),
                            "detail": (f"{100 * share[b]:.0f} % of GPUs shifted at once"
                                       if kind == "simultaneous shifts" else
                                       f"fleet clock level {step[b]:+.2f} %")})
                k = j + 1
            else:
                k += 1
    return out


def _best_split(win: np.ndarray, a: int, b: int) -> int:
    """The single boundary in windows ``a..b`` that leaves the least squared deviation
    of every GPU's windows from their level on each side (least-squares break)."""
    a, b = max(a, 0), min(b, win.shape[0])
    seg = win[a:b]
    seg = np.where(np.isfinite(seg), seg, np.nanmedian(seg, axis=0))
    seg = np.nan_to_num(seg)
    best, arg = np.inf, a + 1
    for k in range(1, len(seg)):
        sse = (((seg[:k] - seg[:k].mean(axis=0)) ** 2).sum()
               + ((seg[k:] - seg[k:].mean(axis=0)) ** 2).sum())
        if sse < best:
            best, arg = sse, a + k
    return arg


@dataclass(frozen=True)
class RegimeOptions(Options):
    """Knobs of :func:`find_regimes`.

    Parameters
    ----------
    span : int
        Windows either side of a boundary compared.
    min_share : float
        Share of GPUs shifting at once that makes a break [-].
    min_level_pct : float
        Step of the fleet's median clock that makes a break [%].
    """

    span: int = 8
    min_share: float = 0.5
    min_level_pct: float = 2.0


def find_regimes(*, wcode: np.ndarray, n_w: int, wstart: np.ndarray, win_ns: int,
                 win_clock: np.ndarray, level_pct: np.ndarray, limit=None,
                 settings: dict | None = None,
                 options: RegimeOptions | None = None) -> pd.DataFrame:
    """Fleet-wide regime breaks (module docstring).

    Parameters
    ----------
    wcode, n_w, wstart, win_ns
        Window number of each compute-phase row, the number of windows, their starts
        [ns since the epoch] and length [ns].
    win_clock : numpy.ndarray
        Host-centred window clock offsets, windows x GPUs [%].
    level_pct : numpy.ndarray
        The fleet's median clock per window, relative to its median [%].
    limit : numpy.ndarray, optional
        Enforced power limit, rows x GPUs [W].
    settings : dict, optional
        Name -> (codes rows x GPUs, labels): recorded settings such as the driver.
    options : RegimeOptions, optional
        ``span``, ``min_share``, ``min_level_pct``.

    Returns
    -------
    pandas.DataFrame
        One row per break: kind, start and end of the transition (UTC), before, after,
        share_gpus, detail; and (not shown) ``w0``/``w1``, the windows either side.
    """
    o = options or RegimeOptions()
    span = o.span
    found = []
    if limit is not None and np.isfinite(limit).any():
        found += _limit_breaks(limit, wcode, n_w)
    for name, (codes, labels) in (settings or {}).items():
        found += _setting_breaks(codes, wcode, n_w, name, labels)
    for b in _shift_breaks(win_clock, level_pct, span, o.min_share, o.min_level_pct):
        # a recorded break explains what the data show near it
        if not any(abs(b["w1"] - f["w1"]) <= span or f["w0"] <= b["w1"] <= f["w1"] + 1
                   for f in found):
            found.append(b)
    found.sort(key=lambda f: f["w1"])
    rows = [{**f, "start": pd.Timestamp(int(wstart[max(f["w0"], 0)]) + win_ns, tz="UTC"),
             "end": pd.Timestamp(int(wstart[min(f["w1"], n_w - 1)]), tz="UTC")}
            for f in found]
    return pd.DataFrame(rows, columns=REGIME_COLUMNS + ["w0", "w1"])


#: breaks that change GPUs' offsets against each other (a fleet level shift alone moves
#: every GPU alike: reported, not cut at)
CUT_KINDS = ("power limit", "driver version", "clock policy", "simultaneous shifts")


def regime_codes(regimes: pd.DataFrame, n_w: int) -> np.ndarray:
    """Regime number of each window; -1 inside a transition (left out).  Only the
    breaks in :data:`CUT_KINDS` cut."""
    code = np.zeros(n_w, dtype=np.int64)
    regimes = regimes[regimes["kind"].isin(CUT_KINDS)]
    for i, (_, r) in enumerate(regimes.iterrows()):
        code[int(r["w1"]):] = i + 1
        code[max(int(r["w0"]) + 1, 0):int(r["w1"])] = -1
    return code
