"""The evidence steps of the straggler search
(:mod:`~powerlab.throughput.straggler_scoring`), each GPU against its peers:
:func:`peer_offsets` (window offsets against the fleet at the same moments, host- and
position-centred by :func:`center_windows`, persistent offset and robust z),
:func:`baseline_changes` (with a baseline: each chip's change since then) and
:func:`throttle_evidence` (slowing throttle bits against the host's other GPUs, an
enforced power limit below the fleet's).  Each fills evidence channels of a
:class:`~powerlab.throughput.fleet_matrix.FleetWork`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import median_abs_deviation

from ..telemetry.schema import THROTTLE_REASONS
from ._robust import group_median, nanmad
from .chip_baseline import CHANGE_TESTS, baseline_change
from .evidence import BIT_GROUPS, bit_share_z, expected_share_given_temp, host_heat_c
from .fleet_matrix import METRICS, FleetWork

__all__ = ["baseline_changes", "center_windows", "peer_offsets", "throttle_evidence"]

#: metric -> evidence channel (evidence.combine_evidence)
_CHANNEL = {"clock_sm_mhz": "clock", "temp_gpu_c": "temp", "temp_mem_c": "hbm"}
# the reasons that are faults rather than the fleet's normal operating point (a
# power-capped fleet sits at SwPowerCap)
_SLOWING = np.uint64(sum(THROTTLE_REASONS[k] for k in (
    "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
    "hw_power_brake_slowdown")))


def center_windows(win, host_code, pos_code, *, loo=False, exclude=None):
    """Centre window offsets (windows x GPUs) on each host, then on board position.

    With ``loo`` each GPU is centred on the median of the *other* GPUs of its host (and
    of its position): the residual spread is then not shrunk by the GPU's own weight in
    the median, so the robust z keeps its normal-theory tail.  GPUs in ``exclude``
    (stragglers of a first pass) are centred but left out of the others' references: on
    a 4-GPU host one straggler whose clock dips 60 % of the time would otherwise move
    its hostmates' reference and make their normal periods look like episodes."""
    win = win.copy()
    ref = win.copy()
    ex = np.zeros(win.shape[1], bool) if exclude is None else np.asarray(exclude, bool)
    for h in np.unique(host_code):
        cols = np.flatnonzero(host_code == h)
        if len(cols) < 4:
            continue
        if ex[cols].any() and (~ex[cols]).sum() >= 3:
            for i in cols:
                others = [j for j in cols if j != i and not ex[j]]
                win[:, i] -= np.nanmedian(ref[:, others], axis=1)
        else:
            win[:, cols] -= group_median(ref[:, cols], loo)
    loc = np.nanmedian(win, axis=0)
    if len(np.unique(host_code)) >= 3:
        for p in np.unique(pos_code):
            cols = np.flatnonzero((pos_code == p) & ~ex)
            if len(cols) < 3:
                continue
            if loo:
                med = np.array([np.nanmedian(loc[[j for j in cols if j != i]])
                                for i in np.flatnonzero(pos_code == p)])
            else:
                med = np.nanmedian(loc[cols])
            win[:, pos_code == p] -= med
    return win


def peer_offsets(w: FleetWork) -> None:
    """Per metric: offsets against the fleet at the same moments, clipped, window means,
    host- and position-centred; persistent offset, its se and robust z; the evidence
    channels of the peer test."""
    opts, bl = w.opts, w.bl
    out = w.out
    for m in dict.fromkeys(["clock_sm_mhz", *opts.metrics]):
        direction, floor, rel = METRICS[m]
        x = w.matrix(m)[w.rows]
        w.mat[m] = x
        med = np.nanmedian(x, axis=1, keepdims=True)
        o = 100.0 * (x / med - 1.0) if rel else x - med
        # clip far outliers per GPU (spikes), then window means
        c = np.nanmedian(o, axis=0)
        s = np.maximum(nanmad(o), floor)
        o = np.clip(o, c - 8 * s, c + 8 * s)
        grp = pd.DataFrame(o).groupby(w.wcode)
        win = grp.mean().to_numpy().copy()
        cnt = grp.count().to_numpy()
        full = np.nanmedian(np.where(cnt > 0, cnt, np.nan))
        win[cnt < max(2, 0.5 * full)] = np.nan
        w.win_raw[m] = win.copy()
        win = center_windows(win, w.host_code, w.pos_code, loo=True, exclude=w.exclude)
        n_valid = np.isfinite(o).sum(axis=0)
        n_win = np.isfinite(win).sum(axis=0)
        loc = np.nanmedian(win, axis=0)
        se = 1.2533 * nanmad(win) / np.sqrt(np.maximum(n_win, 1))
        spread = max(float(median_abs_deviation(loc, scale="normal",
                                                nan_policy="omit")), floor)
        z = (loc - np.nanmedian(loc)) / np.sqrt(spread ** 2 + se ** 2)
        out[f"{m}_offset"], out[f"{m}_se"], out[f"{m}_z"] = loc, se, z
        w.win_loo[m] = win
        if m == "clock_sm_mhz":
            # episodes on the leave-one-out host-centred windows: centring on a
            # median that includes the GPU itself follows its own drop part of the way
            w.win_clock, w.o_clock = win, o
            out["n_samples"] = n_valid
        ok = n_valid >= opts.min_samples
        harm = {"low": -z, "high": z, "both": np.abs(z)}[direction]
        if m in opts.metrics and m != "power_w":
            h = np.where(ok, harm, 0.0)
            if bl is not None and m in bl["offset"]:
                # chips tested against their own baseline leave the peer test; a
                # chip that was a straggler in the baseline record already keeps the
                # clock test (a deficit it always had still costs the job), while
                # its heat, if no greater than then, is its norm
                h = np.where(~bl["use"] | (bl["suspect"] & (m == "clock_sm_mhz")),
                             h, 0.0)
            w.chan[_CHANNEL[m]] = h


def baseline_changes(w: FleetWork) -> None:
    """Each chip's change of offset since the baseline, centred on its host's."""
    opts, bl, out = w.opts, w.bl, w.out
    out.update(baseline=bl["status"], baseline_flagged=bl["suspect"])
    for m in bl["offset"]:
        col, floor, least, sign, _label = CHANGE_TESTS[m]
        least = opts.min_shift_pct if least is None else least
        ch, se, z = baseline_change(bl, m, w.win_raw[m], w.host_code, floor=floor)
        stem, unit = col.rsplit("_", 1)
        out[col], out[f"{stem}_se_{unit}"], out[f"{stem}_z"] = ch, se, z
        move = sign * (ch - np.nanmedian(ch))
        h = np.where((out["n_samples"] >= opts.min_samples) & bl["use"]
                     & (move >= least), np.nan_to_num(sign * z), 0.0)
        key = _CHANNEL[m]
        w.chan[key] = np.fmax(w.chan.get(key, 0.0), h)
        w.change_hit[key] = h > opts.z_threshold


def throttle_evidence(w: FleetWork) -> None:
    """Slowing throttle bits against the host's other GPUs, and an enforced power limit
    below the fleet's."""
    opts, out, chan = w.opts, w.out, w.chan
    clock = w.clock = w.mat["clock_sm_mhz"]
    w.row_med = np.nanmedian(clock, axis=1)
    w.f_ref = float(np.nanmedian(w.row_med))
    gpu_ok = w.gpu_ok = out["n_samples"] >= opts.min_samples

    # slowing throttle bits: their share of samples against the host's other GPUs
    # (evidence on their own; the clock drop while set is reported, not required)
    b = w.bits = (w.matrix("throttle_reasons", 0, np.uint64)[w.rows]
                  if "throttle_reasons" in w.tel.columns
                  else np.zeros_like(clock, dtype=np.uint64))
    present = w.present = np.isfinite(clock)
    slow = ((b & _SLOWING) != 0) & present
    _, w.excess, _ = bit_share_z(b, present, w.wcode, w.host_code, _SLOWING)
    w.drop = (np.nanmean(np.where(slow, w.o_clock, np.nan), axis=0)
              - np.nanmean(np.where(~slow & present, w.o_clock, np.nan), axis=0))
    out["throttle_excess_share"], out["throttled_clock_drop_pct"] = w.excess, w.drop
    temp = w.mat.get("temp_gpu_c")
    heat = host_heat_c(temp, w.host_code) if temp is not None else None
    for name, mask in BIT_GROUPS.items():
        # thermal bits beyond what the GPU's own temperatures and its host's heat explain
        # (a hot host throttles more, and a die held at its slowdown temperature no
        # longer shows its heat); the GPU's own heat is the temperature channel's evidence
        exp = (expected_share_given_temp(((b & mask) != 0) & present, temp,
                                         host_heat=heat)
               if name == "thermal_bits" and temp is not None else None)
        sh, ex, zb = bit_share_z(b, present, w.wcode, w.host_code, mask, expected=exp)
        w.bit_share[name] = sh
        out[f"{name}_excess_share"] = ex
        out[f"{name}_z"] = zb
        # a bit share below min_throttle_share over the host's is not evidence
        chan[name] = np.where(gpu_ok & (ex >= opts.min_throttle_share), zb, 0.0)

    # enforced power limit below the fleet's
    if "power_limit_w" in w.tel.columns:
        lim = w.matrix("power_limit_w")[w.rows]
        lmed = np.nanmedian(lim, axis=1, keepdims=True)
        loff = np.nanmedian(100.0 * (lim / lmed - 1.0), axis=0)
        lz = -loff / max(float(nanmad(loff)), 0.5)
        chan["power_limit"] = np.where(gpu_ok, np.nan_to_num(lz), 0.0)
        out["power_limit_z"] = lz
    else:
        loff = np.full(w.n_g, np.nan)
        out["power_limit_z"] = loff
    out["power_limit_offset_pct"] = w.loff = loff
