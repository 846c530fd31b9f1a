"""The steps of the straggler search (:func:`powerlab.throughput.stragglers.find_stragglers`).

One pass is a short chain of named steps, as pvlib's ``ModelChain.run_model``: each
reads and writes a :class:`FleetWork` (the fleet's matrices and the evidence so far),
so each can be read and tested on its own:

``index_fleet`` (timestamps x GPUs, compute-phase rows, windows) -> ``peer_offsets``
(window offsets against peers, host- and position-centred, robust z) ->
``baseline_changes`` (with a baseline) -> ``throttle_evidence`` (slowing bits, power
limit) -> ``flag_gpus`` (combined evidence, reasons) -> ``failslow_episodes`` (CUSUM
onsets and intermittent episodes).  When the first pass flags GPUs, the search reruns
with them left out of their hostmates' references; then ``clock_deficits``,
``top_throttle`` and ``group_levels`` (slow hosts and racks) and ``score_table`` give
what :class:`~powerlab.throughput.stragglers.StragglerResult` holds.

The options are one :class:`StragglerOptions`, shared with
:func:`~powerlab.throughput.stragglers.straggler_baseline`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import median_abs_deviation, norm

from .._options import Options
from ..exceptions import AnalysisError, SchemaError, Violation
from ..telemetry.schema import THROTTLE_REASONS
from ..telemetry.timeutil import to_epoch_ns
from ._robust import group_median, nanmad
from .chip_baseline import CHANGE_TESTS, baseline_change, match_baseline
from .evidence import (
    BIT_GROUPS,
    bit_share_z,
    cause_of,
    combine_evidence,
    expected_share_given_temp,
    host_heat_c,
)
from .failslow import cusum_episodes, drop_episodes, drop_shared
from .fleet_levels import group_stragglers
from .straggler_cost import job_cost

__all__ = ["FleetWork", "StragglerOptions", "score_fleet"]


#: metric -> (harmful direction, floor of the between-GPU scale, relative offset?)
_METRICS = {
    "clock_sm_mhz": ("low", 0.5, True),      # about half a 15 MHz clock bin
    "temp_gpu_c": ("high", 0.5, False),
    "power_w": ("both", 0.5, True),
    "temp_mem_c": ("high", 0.5, False),
}
_IDLE_BIT = np.uint64(THROTTLE_REASONS["gpu_idle"])
# the reasons that slow a busy GPU down
_REASONS = {k: THROTTLE_REASONS[k] for k in ("sw_power_cap", "hw_slowdown",
                                              "sw_thermal_slowdown", "hw_thermal_slowdown",
                                              "hw_power_brake_slowdown")}
# the reasons that are faults rather than the fleet's normal operating point (a
# power-capped fleet sits at SwPowerCap)
_SLOWING = np.uint64(sum(THROTTLE_REASONS[k] for k in (
    "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
    "hw_power_brake_slowdown")))
_LABEL = {"clock_sm_mhz": "clock low", "temp_gpu_c": "hot", "temp_mem_c": "HBM hot",
          "power_w": "power off-peer"}
#: metric -> evidence channel (evidence.combine_evidence)
_CHANNEL = {"clock_sm_mhz": "clock", "temp_gpu_c": "temp", "temp_mem_c": "hbm"}
_CHANNEL_LABEL = {"clock": "clock low", "temp": "hot", "hbm": "HBM hot",
                  "thermal_bits": "throttled", "hw_bits": "throttled",
                  "power_limit": "power limit low"}
_CHANGE_LABEL = {"clock": "clock dropped vs baseline", "temp": "hotter than baseline"}


@dataclass(frozen=True)
class StragglerOptions(Options):
    """Options of the straggler search, shared by
    :func:`~powerlab.throughput.stragglers.find_stragglers` and
    :func:`~powerlab.throughput.stragglers.straggler_baseline`.

    Parameters
    ----------
    metrics : tuple of str
        Metrics to score; any of ``clock_sm_mhz``, ``temp_gpu_c``, ``power_w``,
        ``temp_mem_c``.  Power is evidence only (per-GPU power is heavy-tailed in a
        healthy fleet); it never flags a GPU by itself.
    z_threshold : float
        Robust z of a persistent offset beyond which a GPU is flagged [-].
    window_s : float
        Aggregation window [s].
    min_shift_pct : float
        Smallest clock drop reported as a fail-slow episode; half of it is the smallest
        clock drop that makes excess throttle bits a flag [%].
    min_throttle_share : float
        Excess share of samples with slowing throttle bits (over the host's median GPU)
        that counts as evidence [-].
    cusum_h : float
        Alarm threshold of the fail-slow CUSUM [-].
    compute_fraction : float
        Share of the step time that scales with 1 / clock, for the cost estimate [-].
    min_peers : int
        Fewest GPUs at a timestamp for it to be scored.
    min_samples : int
        Fewest scored samples for a GPU to be judged.
    """

    metrics: tuple = ("clock_sm_mhz", "temp_gpu_c", "power_w")
    z_threshold: float = 4.0
    window_s: float = 900.0
    min_shift_pct: float = 1.0
    min_throttle_share: float = 0.05
    cusum_h: float = 8.0
    compute_fraction: float = 0.8
    min_peers: int = 4
    min_samples: int = 10

    def __post_init__(self):
        object.__setattr__(self, "metrics", tuple(self.metrics))


@dataclass
class FleetWork:
    """What the steps of one pass read and write (timestamps x GPUs matrices of the
    compute-phase rows, per-GPU evidence)."""

    tel: pd.DataFrame
    opts: StragglerOptions
    exclude: np.ndarray | None = None
    # index_fleet
    tu: np.ndarray = None
    tcode: np.ndarray = None
    gcode: np.ndarray = None
    gu: pd.MultiIndex = None
    n_g: int = 0
    host_code: np.ndarray = None
    pos_code: np.ndarray = None
    uuid: np.ndarray = None
    bl: dict | None = None
    rows: np.ndarray = None
    tu_ok: np.ndarray = None
    wcode: np.ndarray = None
    n_w: int = 0
    wstart: np.ndarray = None
    # peer_offsets and the evidence steps
    out: dict = field(default_factory=dict)
    chan: dict = field(default_factory=dict)
    change_hit: dict = field(default_factory=dict)
    mat: dict = field(default_factory=dict)
    win_raw: dict = field(default_factory=dict)
    win_loo: dict = field(default_factory=dict)
    win_clock: np.ndarray = None
    o_clock: np.ndarray = None
    clock: np.ndarray = None
    row_med: np.ndarray = None
    f_ref: float = np.nan
    gpu_ok: np.ndarray = None
    bits: np.ndarray = None
    present: np.ndarray = None
    excess: np.ndarray = None
    drop: np.ndarray = None
    bit_share: dict = field(default_factory=dict)
    loff: np.ndarray = None
    # flag_gpus, failslow_episodes
    score: np.ndarray = None
    p_value: np.ndarray = None
    best: np.ndarray = None
    flagged: np.ndarray = None
    reasons: list = None
    cause: np.ndarray = None
    eps: list = field(default_factory=list)
    n_eps: np.ndarray = None
    has_ep: np.ndarray = None
    repair: np.ndarray = None
    # group_levels, costs
    levels: dict = field(default_factory=dict)
    z_group: float = np.nan
    cost_total: float = np.nan
    lost_tbl: pd.DataFrame = None

    def matrix(self, col, fill=np.nan, dtype=float):
        """Column ``col`` as a timestamps x GPUs matrix (all rows)."""
        a = np.full((len(self.tu), self.n_g), fill, dtype=dtype)
        a[self.tcode, self.gcode] = self.tel[col].to_numpy(dtype=dtype, na_value=fill)
        return a


def check_inputs(telemetry, opts: StragglerOptions) -> None:
    """Options and columns, checked before any work."""
    metrics, z_threshold = opts.metrics, opts.z_threshold
    compute_fraction, window_s = opts.compute_fraction, opts.window_s
    for m in metrics:
        if m not in _METRICS:
            raise AnalysisError(f"unknown metric {m!r}; expected some of {tuple(_METRICS)}")
    if not z_threshold > 0 or not 0 < compute_fraction <= 1 or not window_s > 0:
        raise AnalysisError("need z_threshold > 0, window_s > 0 and compute_fraction in "
                            "(0, 1]")
    need = ["timestamp", "host", "gpu_index", "clock_sm_mhz", *metrics]
    missing = [c for c in dict.fromkeys(need) if c not in telemetry.columns]
    if missing:
        raise SchemaError([Violation(c, "missing column (canonical telemetry expected)")
                           for c in missing])
    if not isinstance(telemetry["timestamp"].dtype, pd.DatetimeTZDtype):
        raise SchemaError([Violation("timestamp", "timestamps must be tz-aware UTC")])


def busy_rows(tel):
    """The busy GPU rows (no GpuIdle bit, utilisation above zero)."""
    keep = np.ones(len(tel), dtype=bool)
    if "scope" in tel.columns:
        keep &= (tel["scope"] == "gpu").fillna(False).to_numpy(dtype=bool)
    bits = (tel["throttle_reasons"].to_numpy(dtype=np.uint64, na_value=0)
            if "throttle_reasons" in tel.columns else np.zeros(len(tel), np.uint64))
    keep &= (bits & _IDLE_BIT) == 0
    if "util_gpu_pct" in tel.columns:
        keep &= ~(tel["util_gpu_pct"].to_numpy(dtype=float, na_value=np.nan) <= 0)
    return tel[keep]


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


def score_fleet(telemetry, opts: StragglerOptions, baseline=None, _exclude=None):
    """One search (two passes when the first flags GPUs): the finished
    :class:`FleetWork`, from which :func:`score_table` builds the tables."""
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
    flag_gpus(w)
    failslow_episodes(w)
    if _exclude is None and w.flagged.any() and w.n_g > 2 * opts.min_peers:
        return score_fleet(telemetry, opts, baseline, _exclude=w.flagged)
    clock_deficits(w)
    top_throttle(w)
    group_levels(w)
    job_costs(w)
    return w


def index_fleet(w: FleetWork, baseline) -> None:
    """Timestamps x GPUs codes, the baseline matched to the GPUs, the compute-phase rows
    and their windows."""
    tel, opts = w.tel, w.opts
    t = to_epoch_ns(tel["timestamp"])
    w.tcode, w.tu = pd.factorize(t, sort=True)
    hc, hu = pd.factorize(tel["host"].astype("string").to_numpy(), sort=True)
    gi = tel["gpu_index"].to_numpy(dtype=np.int64, na_value=-1)
    span = int(gi.max()) + 2
    w.gcode, gkey = pd.factorize(hc.astype(np.int64) * span + gi + 1, sort=True)
    w.gu = gu = pd.MultiIndex.from_arrays([np.asarray(hu)[gkey // span], gkey % span - 1])
    n_t, w.n_g = len(w.tu), len(gu)
    if w.n_g < opts.min_peers + 1:
        raise AnalysisError(f"{w.n_g} GPUs in the telemetry; need more than "
                            f"{opts.min_peers} to compare each GPU with its peers")
    w.host_code = pd.factorize(gu.get_level_values(0))[0]
    w.pos_code = np.asarray(gu.get_level_values(1), dtype=np.int64)
    w.uuid = (tel.groupby(w.gcode)["gpu_uuid"].first().reindex(range(w.n_g)).to_numpy()
              if "gpu_uuid" in tel.columns else np.full(w.n_g, pd.NA))
    w.bl = match_baseline(baseline, gu, w.uuid, w.host_code, opts.min_peers, opts.metrics)

    rows = np.bincount(w.tcode, minlength=n_t) >= opts.min_peers
    # compute phases only: moments where the fleet's median power (or utilisation) is
    # well below its usual level are checkpoints or evaluation, where clocks float up to
    # each chip's boost headroom and say nothing about stragglers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for col, frac in (("power_w", 0.85), ("util_gpu_pct", 0.9)):
            if col in tel.columns:
                med = np.nanmedian(w.matrix(col), axis=1)
                typical = np.nanmedian(med[rows]) if rows.any() else np.nan
                if np.isfinite(typical) and typical > 0:
                    rows &= ~(med < frac * typical)
    w.rows = rows
    tu_ok = w.tu_ok = w.tu[rows]
    win_ns = int(opts.window_s * 1e9)
    w.wcode = (tu_ok - tu_ok[0]) // win_ns if len(tu_ok) else tu_ok
    w.n_w = int(w.wcode.max()) + 1 if len(tu_ok) else 0
    w.wstart = tu_ok[0] + np.arange(w.n_w) * win_ns if w.n_w else np.array([])


def peer_offsets(w: FleetWork) -> None:
    """Per metric: offsets against the fleet at the same moments, clipped, window means,
    host- and position-centred; persistent offset, its se and robust z; the evidence
    channels of the peer test."""
    opts, bl = w.opts, w.bl
    out = w.out
    for m in dict.fromkeys(["clock_sm_mhz", *opts.metrics]):
        direction, floor, rel = _METRICS[m]
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
    for g in range(n_g):
        if not w.gpu_ok[g]:
            continue
        found = [dict(e, kind="onset") for e in cusum_episodes(
            w.win_clock[:, g], min_shift_pct=opts.min_shift_pct, h=opts.cusum_h)]
        covered = np.zeros(n_w, dtype=bool)
        for e in found:
            covered[e["onset"]:e["end"]] = True
        for e in drop_episodes(w.win_clock[:, g], min_shift_pct=opts.min_shift_pct):
            if not covered[e["onset"]:e["end"]].any():
                found.append(dict(e, kind="episode", detected=e["end"] - 1))
        found_by[g] = found
    found_by = drop_shared(found_by, w.host_code, n_w)
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


def group_levels(w: FleetWork) -> None:
    """Slow hosts (and racks) against the fleet, beyond what their temperature
    explains."""
    z_threshold, n_g, gu = w.opts.z_threshold, w.n_g, w.gu
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        raw_off = {m: np.nanmedian(w.win_raw[m], axis=0) if m in w.win_raw else None
                   for m in ("clock_sm_mhz", "temp_gpu_c", "power_w")}
    n_hosts = len(np.unique(w.host_code))
    # the same expected false alarms per GPU of fleet as the GPU test
    w.z_group = float(norm.isf(min(norm.sf(z_threshold) * n_g / max(n_hosts, 1), 0.5)))
    if raw_off["temp_gpu_c"] is None or n_hosts < 3:
        return
    kw = {"clock_off": raw_off["clock_sm_mhz"], "temp_off": raw_off["temp_gpu_c"],
          "power_off": raw_off["power_w"],
          "limit_off": w.loff if np.isfinite(w.loff).any() else None,
          "hw_share": w.bit_share["hw_bits"]}
    w.levels["host"] = group_stragglers(np.asarray(gu.get_level_values(0)), w.pos_code,
                                        z_threshold=w.z_group, **kw)
    if "rack" in w.tel.columns:
        rack = w.tel.groupby(w.gcode)["rack"].first().reindex(range(n_g)).astype(str)
        n_racks = rack.nunique()
        if n_racks >= 3:
            z_rack = float(norm.isf(min(norm.sf(z_threshold) * n_g / n_racks, 0.5)))
            w.levels["rack"] = group_stragglers(rack.to_numpy(), w.pos_code,
                                                z_threshold=z_rack, **kw)


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
    silent_limit = opts.z_threshold * max(spread_pct, _METRICS["clock_sm_mhz"][1])
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
    params = {**opts.as_dict(), "metrics": tuple(opts.metrics),
              "host_z_threshold": w.z_group, "silent_limit_pct": silent_limit,
              "clock_spread_pct": spread_pct}
    if w.bl is not None:
        params.update(baseline_key=baseline.key, baseline_chips=int(w.bl["use"].sum()),
                      peer_test_chips=int((~w.bl["use"]).sum()))
    empty = pd.DataFrame(columns=["group", "flagged"])
    return {"flags": flags, "scores": scores, "episodes": episodes,
            "cost_step_pct_total": float(w.cost_total), "params": params,
            "hosts": w.levels.get("host", empty), "racks": w.levels.get("rack", empty),
            "lost": w.lost_tbl}


def _interval_s(tu_ok) -> float:
    return float(np.median(np.diff(tu_ok)) / 1e9) if len(tu_ok) > 1 else 0.0
