"""Clocks of a recording: each node's clock offset and the power log's offset against the
training log (:func:`align_recording`).

Rules (the same for every recording)
------------------------------------
- **Node clocks**: each node's readings interpolated onto a 0.5-s grid over the whole
  recording and cross-correlated with the median of all nodes (as
  :func:`powerlab.iotools.clocksync.clock_offsets` does), relative lags within
  +-2 x :data:`MAX_LAG_S` (clocks each within +-30 s of the truth), the peak refined by
  a parabola, three times against the median of the series aligned by the previous
  estimate; offsets relative to their median.  The uncertainty is half the difference between the offsets
  found on the first and the second half of the run, plus half the grid (0.05 s).
  Offsets larger than one meter interval are applied (``timestamp - offset``) and warned
  about; smaller ones are within what a meter's own reading phase explains and are only
  reported.
- **Power log against training log**: the summed power (1-s grid) is cross-correlated
  with the log's evaluation indicator (-1 inside ``eval_start`` .. ``eval_stop``, 0
  elsewhere, between ``run_start`` and ``run_stop``), lags within +-1.5 x
  :data:`MAX_LAG_S`; then, within +-:data:`REFINE_S` of that lag, its 1-s differences
  with the evaluations' edges (-1 at each ``eval_start``, +1 at each ``eval_stop``):
  the level match finds the right evaluation, the edges the time (the power inside an
  evaluation need not follow its logged interval; its edges do).
  It needs at least :data:`MIN_EVALS` evaluations each at least one meter interval long
  (shorter ones are not seen by the meter); the uncertainty is the spread of the lags
  found on each half of the evaluations.  The readings' own lag (an interval mean held
  until the next reading: one meter interval on average) is subtracted.  An offset
  larger than :data:`LOG_APPLY_MIN_S`, one meter interval and twice its uncertainty is
  applied to the events (their timestamps move by it) and warned about; otherwise only
  reported.  The estimate follows a known shift to within a meter interval, but its
  zero depends on how the workload's power follows the logged evaluations (a few
  seconds on real runs), hence the threshold.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..exceptions import DataQualityWarning, PowerlabError
from ..telemetry.timeutil import to_epoch_ns
from .meter import sum_meters
from .windows import eval_intervals

__all__ = ["MAX_LAG_S", "Alignment", "align_recording", "log_offset"]

#: Widest clock offset searched [s].
MAX_LAG_S = 30.0
#: Evaluations the log alignment needs [-].
MIN_EVALS = 2
#: Smallest power-log offset applied to the events [s]: the power within an evaluation
#: need not follow its logged interval (B200 RetinaNet's power is back at the training
#: level ~10 s before eval_stop, which alone reads as -5.5 s), so only offsets beyond
#: this are taken as a clock's; smaller ones are reported.
LOG_APPLY_MIN_S = 10.0
#: Half-width of the edge search around the level match [s].
REFINE_S = 5


@dataclass(frozen=True)
class Alignment:
    """Clock offsets found in a recording.

    ``node_offsets_s`` (host -> s) and ``node_offset_sd_s``: node clocks against their
    median; ``nodes_shifted``: hosts whose offset was applied; ``log_offset_s`` and
    ``log_offset_sd_s``: the power log's clock minus the training log's (``nan`` when not
    measurable, ``log_note`` says why); ``log_applied``: whether the events were moved."""

    node_offsets_s: dict = field(default_factory=dict)
    node_offset_sd_s: float = float("nan")
    nodes_shifted: tuple = ()
    log_offset_s: float = float("nan")
    log_offset_sd_s: float = float("nan")
    log_applied: bool = False
    log_note: str = ""

    def notes(self, meter_interval_s: float) -> list[str]:
        """The offsets in words (a summary, backtest notes and YAML comments)."""
        out = []
        if self.node_offsets_s:
            v = np.array(list(self.node_offsets_s.values()))
            out.append(f"node clocks: offsets {v.min():+.2f} .. {v.max():+.2f} s against "
                       f"their median over {len(v)} nodes (+- {self.node_offset_sd_s:.2f} s)"
                       + (f"; applied to {len(self.nodes_shifted)} node(s) beyond the "
                          f"{meter_interval_s:g}-s meter interval: "
                          + ", ".join(f"{h} {self.node_offsets_s[h]:+.1f} s"
                                      for h in self.nodes_shifted[:8])
                          if self.nodes_shifted else "; none beyond the meter interval, "
                          "none applied"))
        if np.isfinite(self.log_offset_s):
            out.append(f"power log vs training log: {self.log_offset_s:+.2f} +- "
                       f"{self.log_offset_sd_s:.2f} s ("
                       + ("applied to the events" if self.log_applied else
                          "within the meter interval or its uncertainty: not applied")
                       + ")")
        elif self.log_note:
            out.append(f"power log vs training log: not measured ({self.log_note})")
        return out


#: Grid of the node clock search [s].
_NODE_GRID_S = 0.5


def _xcorr_lag(v: np.ndarray, x: np.ndarray, k: int, near: float | None = None,
               within: int = 0) -> float:
    """The lag (grid steps, within +-k, parabola-refined) at which ``x`` shifted best
    matches ``v``: positive when ``v`` changes later than ``x``.  With ``near``, only
    lags within ``within`` steps of it are considered."""
    v = v - v.mean()
    x = x - x.mean()
    n = len(v)
    m = 1 << int(np.ceil(np.log2(2 * n)))
    cc = np.fft.irfft(np.fft.rfft(v, m) * np.conj(np.fft.rfft(x, m)), m)
    win = np.concatenate([cc[m - k:], cc[:k + 1]])   # lags -k..k
    if near is not None:
        lags = np.arange(-k, k + 1)
        win = np.where(np.abs(lags - near) <= within, win, -np.inf)
    j = int(np.argmax(win))
    frac = 0.0
    if 0 < j < 2 * k and np.isfinite(win[j - 1]) and np.isfinite(win[j + 1]):
        den = win[j - 1] - 2 * win[j] + win[j + 1]
        frac = 0.5 * (win[j - 1] - win[j + 1]) / den if den else 0.0
    return j - k + frac


def clock_offsets_wide(run: pd.DataFrame, max_lag_s: float = 2 * MAX_LAG_S,
                       iterations: int = 3) -> pd.Series:
    """Each host's clock offset against the median of all hosts [s] (module rules).

    Clocks each within +-:data:`MAX_LAG_S` of the truth are up to twice that apart, so
    the search spans +-``max_lag_s`` (default 60 s).  With many nodes off, the median of
    the raw series is a smeared reference; the offsets are refined ``iterations`` times
    against the median of the series aligned by the previous estimate."""
    t_ns = to_epoch_ns(run["timestamp"])
    t0 = t_ns.min()
    grid = np.arange(0.0, (t_ns.max() - t0) / 1e9, _NODE_GRID_S)
    hosts, tt_all, pw_all = [], [], []
    for h, g in run.groupby("host", sort=True, observed=True):
        tt = (to_epoch_ns(g["timestamp"]) - t0) / 1e9
        o = np.argsort(tt)
        hosts.append(str(h))
        tt_all.append(tt[o])
        pw_all.append(g["power_w"].to_numpy(float)[o])
    rows = [np.interp(grid, tt, pw) for tt, pw in zip(tt_all, pw_all)]
    k = min(round(max_lag_s / _NODE_GRID_S), max(1, len(grid) // 4))
    off = np.zeros(len(rows))
    for _ in range(max(1, iterations)):
        aligned = [np.interp(grid, tt - o, pw) for tt, pw, o in zip(tt_all, pw_all, off)]
        ref = np.median(np.vstack(aligned), axis=0)
        off = np.array([_xcorr_lag(r, ref, k) * _NODE_GRID_S for r in rows])
        off -= np.median(off)
    return pd.Series(off, index=hosts, name="clock_offset_s")


def _node_offsets(df, r0, r1, meter_interval_s):
    """Offsets per host, their uncertainty, and the hosts to shift."""
    run = df   # the whole recording: its start and end edges are unique features
    if run["host"].nunique() < 2 or len(run) < 40:
        return {}, float("nan"), ()
    full = clock_offsets_wide(run)
    mid = r0 + (r1 - r0) / 2
    halves = [run[run["timestamp"] < mid], run[run["timestamp"] >= mid]]
    sd = float("nan")
    if all(h["host"].nunique() == run["host"].nunique() and len(h) >= 40 for h in halves):
        a, b = (clock_offsets_wide(h).reindex(full.index) for h in halves)
        sd = float(np.nanmedian(np.abs(a - b)) / 2 + 0.05)
    offs = {str(h): float(v) for h, v in full.items()}
    shifted = tuple(h for h, v in offs.items() if abs(v) > meter_interval_s)
    return offs, sd, shifted


def log_offset(summed: pd.Series, evals: pd.DataFrame, r0, r1, meter_interval_s: float
               ) -> tuple[float, float, str]:
    """``(offset, uncertainty, why-not)`` of the power log against the training log [s]
    (module rules); a positive offset: the power changes later than the log says."""
    ev = evals[(evals["start_utc"] >= r0) & (evals["stop_utc"] <= r1)]
    long = ev[[(b - a).total_seconds() >= meter_interval_s
               for a, b in zip(ev["start_utc"], ev["stop_utc"])]]
    if len(long) < MIN_EVALS:
        return float("nan"), float("nan"), (f"{len(long)} evaluation(s) at least one meter "
                                            f"interval long; {MIN_EVALS} needed")
    y = summed[(summed.index >= r0) & (summed.index <= r1)].dropna()
    y = y.resample("1s").mean().interpolate(limit_direction="both")
    if len(y) < 4 * MAX_LAG_S:
        return float("nan"), float("nan"), "the run is too short for the search"

    k = int(1.5 * MAX_LAG_S)   # a 1-s grid; the log's clock and each node's may differ
    v = y.to_numpy(float)
    dv = np.diff(v, prepend=v[0])
    t = y.index

    def best(sel):
        x = np.zeros(len(y))   # the evaluations as a level (coarse) ...
        e = np.zeros(len(y))   # ... and as edges: power falls at eval_start, rises at stop
        for a, b in zip(sel["start_utc"], sel["stop_utc"]):
            x[(t >= a) & (t < b)] = -1.0
            for u, sign in ((a, -1.0), (b, 1.0)):
                i = t.searchsorted(u)
                if 0 < i < len(e):
                    e[i] = sign
        coarse = _xcorr_lag(v, x, k)
        return _xcorr_lag(dv, e, k, near=coarse, within=REFINE_S)

    # an interval-mean reading at t is the mean over [t - w, t] and the summed series holds
    # it until the next one: the readings lag the power by one meter interval on average
    off = best(long) - meter_interval_s
    parts = [long.iloc[0::2], long.iloc[1::2]]
    sd = float(np.std([best(p) for p in parts if len(p)])) + 0.5   # half a grid step
    return float(off), sd, ""


def align_recording(df: pd.DataFrame, events, r0, r1, meter_interval_s: float,
                    *, name: str = "the recording"):
    """The recording with its clocks aligned: ``(readings, events, Alignment)``.

    Node offsets beyond one meter interval are subtracted from their readings; a log
    offset beyond one meter interval and twice its uncertainty is added to the events'
    timestamps (module rules).  Each applied offset raises a DataQualityWarning."""
    offs, sd, shifted = _node_offsets(df, r0, r1, meter_interval_s)
    out = df
    if shifted:
        out = df.copy()
        sh = out["host"].astype(str).map(offs).fillna(0.0).where(
            out["host"].astype(str).isin(shifted), 0.0)
        out["timestamp"] = out["timestamp"] - pd.to_timedelta(sh.to_numpy(), unit="s")
        warnings.warn(f"{name}: node clock offsets beyond the {meter_interval_s:g}-s meter "
                      f"interval applied: " + ", ".join(f"{h} {offs[h]:+.1f} s"
                                                        for h in shifted[:8]),
                      DataQualityWarning, stacklevel=3)
    lo, lsd, why, applied = float("nan"), float("nan"), "no training log", False
    if events is not None:
        try:
            evi = eval_intervals(events)
        except PowerlabError:
            evi = pd.DataFrame(columns=["start_utc", "stop_utc"])
        summed = sum_meters(out[["timestamp", "host", "power_w"]], every_s=1.0)
        lo, lsd, why = log_offset(summed, evi, r0, r1, meter_interval_s)
        if np.isfinite(lo) and abs(lo) > max(LOG_APPLY_MIN_S, meter_interval_s, 2 * lsd):
            ev = getattr(events, "events", events)
            if isinstance(ev, pd.DataFrame) and "timestamp" in ev:
                events = ev.assign(timestamp=ev["timestamp"] + pd.Timedelta(seconds=lo))
                applied = True
                warnings.warn(f"{name}: the power log runs {lo:+.1f} +- {lsd:.1f} s against "
                              "the training log; the events were moved by it",
                              DataQualityWarning, stacklevel=3)
    return out, events, Alignment(offs, sd, shifted, lo, lsd, applied, why)
