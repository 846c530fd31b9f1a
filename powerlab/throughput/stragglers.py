"""Straggler GPUs: persistent deviations from peers that slow every synchronous step.

In synchronous data-parallel training every step waits for the slowest GPU, so one GPU
with a fouled heatsink, a lowered power limit, a stuck hardware slowdown or a silent
fail-slow costs the whole job.  Single samples say little (a power-capped fleet's clocks
spread by 20-25 MHz from leakage alone, and jitter by a 15 MHz bin); persistent offsets
aggregated over time do.  :func:`find_stragglers`:

1. **Offsets against peers at the same moments**: per timestamp, each GPU's clock and
   power relative to the fleet median [%] and its temperature minus the median [degC].
2. **Window aggregation**: per GPU and time window (``window_s``), the mean of the
   per-moment offsets after clipping far outliers (a Huber-type location: robust to
   spikes, and not stuck on the 15 MHz clock bins as a median of few samples is); then
   each window is centred on the GPU's host (a hot host or its inlet drift is not a
   straggler) and, with three hosts or more, on the board position (downstream GPUs run
   hotter by design).
3. **Persistent offset and its uncertainty**: the median over windows, with standard
   error ``1.2533 MAD / sqrt(n_windows)``; robust z against the spread of the other GPUs'
   persistent offsets (``scipy.stats.median_abs_deviation(scale="normal")``) [1]_.
4. **Evidence** beyond a low clock: die temperature above host and position peers,
   slowing throttle bits (thermal, hardware slowdown, power brake) in excess of the
   host's share *with a measured clock drop while they are set*, an enforced power limit
   below the fleet's, and fail-slow onsets (:mod:`~powerlab.throughput.failslow`: CUSUM
   on the GPU's window offsets against its own baseline) with onset time and duration.
5. A GPU is flagged on any of: clock low (``z < -z_threshold``), hot
   (``z > z_threshold``), throttled (excess slowing-bit share ``>= min_throttle_share``
   and a clock drop of at least ``min_shift_pct / 2`` while throttled), power limit low
   (``>= 2 %`` below the fleet median), fail-slow episode (drop ``>= min_shift_pct``).
   The ``evidence_z`` column is the strongest evidence in robust-sigma units.
6. **Cost to the job** from the measured clock deficit: each flagged GPU's clock is
   raised by its deficit (its persistent offset below the fleet's median, or if larger
   the clock it loses while throttled or a third of its power limit's deficit -- dynamic
   power goes as f^3 near the cap -- or its episode's drop during the episode only),
   and the step time
   ``t = t0 (phi f_ref / f_slowest + 1 - phi)`` (``phi`` the compute-bound share) of the
   fleet as measured is compared with that of the repaired fleet.

A GPU slower from before the record starts with no other evidence (a "silent" straggler)
is indistinguishable from a slow leakage bin unless its deficit exceeds ``z_threshold``
times the fleet's spread -- within one record.  :func:`straggler_baseline` learns each
chip's offset from an earlier healthy record (keyed by ``gpu_uuid``, else by host and
``gpu_index``), and ``find_stragglers(telemetry, baseline=...)`` then tests the *change*
of each chip's offset, centred on the change of its host's other chips, so a chip that was
always slow is not flagged and one that became slower before the record starts is.
docs/throughput_methods.md gives the measured recall per cause, with and without one.

References
----------
.. [1] P. J. Rousseeuw and C. Croux, "Alternatives to the median absolute deviation",
   Journal of the American Statistical Association 88(424), 1993.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import median_abs_deviation, norm

from .._summary import Summary
from ..exceptions import AnalysisError, SchemaError, Violation
from ..telemetry.schema import THROTTLE_REASONS
from ._robust import group_median, nanmad
from .chip_baseline import (
    CHANGE_TESTS,
    StragglerBaseline,
    baseline_change,
    chip_keys,
    match_baseline,
)
from .evidence import (
    BIT_GROUPS,
    bit_share_z,
    cause_of,
    combine_evidence,
    expected_share_given_temp,
)
from .failslow import cusum_episodes, drop_episodes, drop_shared
from .fleet_levels import group_stragglers
from .straggler_cost import job_cost

__all__ = ["StragglerBaseline", "StragglerResult", "find_stragglers",
           "straggler_baseline"]

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
class StragglerResult:
    """Result of :func:`find_stragglers`.

    Attributes
    ----------
    flags : pandas.DataFrame
        One row per flagged GPU: host, gpu_index, gpu_uuid, reasons, evidence_z (strongest
        evidence [robust sigma]), ``<metric>_offset`` (persistent offset against peers,
        host- and position-centred; clock and power [%], temperatures [degC]),
        ``<metric>_se`` (its standard error across windows), ``<metric>_z`` (robust z
        against the other GPUs), clock_deficit_mhz and clock_deficit_pct (the deficit the
        cost is computed from), throttle_excess_share, throttled_clock_drop_pct,
        power_limit_offset_pct, top_throttle_reason and its share, episodes (number of
        fail-slow episodes), cost_step_pct (job step-time increase due to this GPU alone)
        [%], evidence_z (the combined score [robust sigma], :mod:`~.evidence`), p_value
        (Sidak over the channels), expected_false_alarms (``n_gpus * p_value``),
        best_evidence (the channel or pair that gives the score), cause (thermal, power
        cap, hardware slowdown, unexplained), ``thermal_bits_*`` and ``hw_bits_*``
        (excess share of those bits, thermal beyond what the GPU's temperature explains,
        and its z), power_limit_z, identifiable ("flagged", "not identifiable without a
        baseline" for an unflagged GPU whose clock is low but within the spread).  With
        a ``baseline`` also: baseline (which test the GPU had: ``baseline``,
        ``baseline, moved to other peers``, ``peer test: not in baseline``, ``peer test:
        too few baseline chips on host``), baseline_flagged (a straggler in the baseline
        record), clock_change_pct (change of its clock offset since the baseline, centred
        on its host's other baseline chips) [%], clock_change_se_pct [%], clock_change_z,
        and temp_change_c, temp_change_se_c [degC], temp_change_z for the die
        temperature.
    scores : pandas.DataFrame
        The same evidence for every GPU (``flagged`` column).
    episodes : pandas.DataFrame
        Fail-slow episodes: host, gpu_index, onset, detected, end (UTC), duration_s,
        ongoing (still slow at the end of the record), shift_pct [%].
    cost_step_pct_total : float
        Job step-time increase due to all flagged GPUs together [%].
    params : dict
        The thresholds used, ``host_z_threshold`` (the host test's, for the same expected
        false alarms per GPU of fleet), ``clock_spread_pct`` and ``silent_limit_pct``
        (the smallest silent from-the-start deficit identifiable without a baseline).
    hosts, racks : pandas.DataFrame
        Hosts (and racks, with a ``rack`` column) against the fleet, beyond what their
        temperature explains (:func:`~powerlab.throughput.fleet_levels.group_stragglers`).
    lost : pandas.DataFrame
        GPU-hours and step time lost by cause
        (:func:`~powerlab.throughput.straggler_cost.job_cost`).
    """

    flags: pd.DataFrame
    scores: pd.DataFrame
    episodes: pd.DataFrame
    cost_step_pct_total: float
    params: dict
    hosts: pd.DataFrame = None
    racks: pd.DataFrame = None
    lost: pd.DataFrame = None

    def summary_frame(self) -> pd.DataFrame:
        """The flagged GPUs (a copy of :attr:`flags`)."""
        return self.flags.copy()

    def summary(self) -> Summary:
        """Summary: one line per flagged GPU with its evidence and cost, and their table."""
        n = len(self.scores)
        p = self.params
        lines = [(f"Straggler GPUs: {len(self.flags)} of {n} flagged (persistent offsets "
                  f"over {p['window_s']:g} s windows, |z| > {p['z_threshold']:g}; "
                  f"fail-slow drops >= {p['min_shift_pct']:g} %)")]
        if "baseline_chips" in p:
            lines.append(f"  baseline ({p['baseline_key']}): {p['baseline_chips']} GPUs "
                         f"tested on the change of their clock offset, "
                         f"{p['peer_test_chips']} against today's peers only")
        for _, r in self.flags.iterrows():
            lines.append(
                f"  {r['host']} GPU {r['gpu_index']} ({r['gpu_uuid']}): {r['reasons']}; "
                f"clock {r['clock_sm_mhz_offset']:+.2f} % (z {r['clock_sm_mhz_z']:+.1f}), "
                f"temp z {r['temp_gpu_c_z']:+.1f}, power z {r['power_w_z']:+.1f}; top "
                f"throttle {r['top_throttle_reason']} "
                f"({100 * r['top_throttle_share']:.0f} %); cost {r['cost_step_pct']:.2f} % "
                "of step time" + (
                    f"; change vs baseline {r['clock_change_pct']:+.2f} % (z "
                    f"{r['clock_change_z']:+.1f})" if np.isfinite(
                        r.get("clock_change_pct", np.nan)) else "")
                + (f" [{r['baseline']}]" if "baseline" in r else ""))
        for _, e in self.episodes.iterrows():
            lines.append(f"  fail-slow {e['host']} GPU {e['gpu_index']}: {e['shift_pct']:+.2f}"
                         f" % from {e['onset']:%Y-%m-%d %H:%M} UTC for "
                         f"{e['duration_s'] / 3600:.1f} h"
                         f"{' (ongoing)' if e['ongoing'] else ''}")
        for level, tbl in (("host", self.hosts), ("rack", self.racks)):
            if tbl is None or not len(tbl):
                continue
            for _, h in tbl[tbl["flagged"]].iterrows():
                lines.append(
                    f"  slow {level} {h['group']}: clock {h['clock_residual_pct']:+.2f} % "
                    f"beyond its temperature ({h['temp_offset_c']:+.1f} degC explains "
                    f"{h['clock_explained_pct']:+.2f} %), score {h['score']:.1f} "
                    f"({h['best_evidence']}), cause {h['cause']}")
        if self.lost is not None and len(self.lost) > 1:
            for _, r in self.lost.iterrows():
                lines.append(f"  lost to {r['cause']}: {r['gpu_hours_own']:.2f} GPU-h own, "
                             f"step time +{r['step_cost_pct']:.2f} % = "
                             f"{r['job_gpu_hours']:.1f} job GPU-h")
        if len(self.flags):
            lines.append(f"All flagged GPUs together cost {self.cost_step_pct_total:.2f} % "
                         "of step time")
        if "silent_limit_pct" in p:
            lines.append(
                f"A GPU slower than its peers by less than {p['silent_limit_pct']:.2f} % "
                f"({p['z_threshold']:g} x the clock spread of "
                f"{p['clock_spread_pct']:.2f} %) from before the record starts, with no "
                "heat, throttle-bit, power-limit or onset evidence, is not identifiable "
                "without a baseline (straggler_baseline)")
        s = Summary()
        s.add_text(lines, pre=True)
        if len(self.flags):
            cols = ["host", "gpu_index", "reasons", "evidence_z", "clock_deficit_mhz",
                    "temp_gpu_c_z", "power_w_z", "top_throttle_reason", "cost_step_pct"]
            s.add_df(self.flags[cols], "Flagged GPUs", index=False)
        return s

    def _repr_html_(self) -> str:
        return self.summary().as_html()


def _check(telemetry, metrics, z_threshold, compute_fraction, window_s):
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


def _busy(tel):
    keep = np.ones(len(tel), dtype=bool)
    if "scope" in tel.columns:
        keep &= (tel["scope"] == "gpu").fillna(False).to_numpy(dtype=bool)
    bits = (tel["throttle_reasons"].to_numpy(dtype=np.uint64, na_value=0)
            if "throttle_reasons" in tel.columns else np.zeros(len(tel), np.uint64))
    keep &= (bits & _IDLE_BIT) == 0
    if "util_gpu_pct" in tel.columns:
        keep &= ~(tel["util_gpu_pct"].to_numpy(dtype=float, na_value=np.nan) <= 0)
    return tel[keep]


def _center(win, host_code, pos_code, *, loo=False, exclude=None):
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


def straggler_baseline(telemetry: pd.DataFrame, *, window_s: float = 900.0,
                       z_threshold: float = 4.0, min_peers: int = 4,
                       min_samples: int = 10) -> StragglerBaseline:
    """Learn each chip's persistent clock offset from an earlier, healthy record.

    Within one record a GPU slower from before the record starts, with no other
    evidence, looks like a chip binned at the slow end of the leakage spread.  An
    earlier record of the same chips (burn-in, last week's store) tells the two apart:
    :func:`find_stragglers` with ``baseline=`` tests how each chip's offset has *changed*.

    Parameters
    ----------
    telemetry : pandas.DataFrame
        The earlier record, canonical schema as for :func:`find_stragglers`.  Chips are
        keyed by ``gpu_uuid`` when every busy row has one, else by ``host`` and
        ``gpu_index``.
    window_s, z_threshold, min_peers, min_samples
        As in :func:`find_stragglers` (also used to mark stragglers in this record).

    Returns
    -------
    StragglerBaseline

    Notes
    -----
    The offset is the median over windows of the chip's clock against the fleet median
    at the same moments [%]; its standard error ``1.2533 MAD / sqrt(n_windows)`` of its
    host-centred windows.  A straggler in the baseline record is kept and marked
    (``flagged``): its offsets become its norm, so a silent slowdown that was already
    there is not found later by its change -- :func:`find_stragglers` therefore still
    applies the peer clock test to it (its temperature is judged by its change only).
    """
    ms = ("clock_sm_mhz", "temp_gpu_c") if "temp_gpu_c" in telemetry.columns else \
        ("clock_sm_mhz",)
    res, raw = _find(telemetry, metrics=ms + (("power_w",) if "power_w" in
                                              telemetry.columns else ()),
                     z_threshold=z_threshold, window_s=window_s, min_shift_pct=1.0,
                     min_throttle_share=0.05, cusum_h=8.0, compute_fraction=0.8,
                     min_peers=min_peers, min_samples=min_samples, baseline=None)
    gu, uuid = raw["gu"], raw["uuid"]
    cols = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for m in ms:
            n_win = np.isfinite(raw["win"][m]).sum(axis=0)
            cols[f"{m}_offset"] = np.nanmedian(raw["win_raw"][m], axis=0)
            cols[f"{m}_se"] = 1.2533 * nanmad(raw["win"][m]) / np.sqrt(
                np.maximum(n_win, 1))
        n_win = np.isfinite(raw["win"]["clock_sm_mhz"]).sum(axis=0)
    sc = res.scores
    ok = np.isfinite(cols["clock_sm_mhz_offset"]) & (
        sc["n_samples"].to_numpy() >= min_samples)
    has_uuid = not pd.isna(uuid).any()
    key = "gpu_uuid" if has_uuid else "host/gpu_index"
    keys = chip_keys(key, gu, uuid)
    if pd.Index(keys).has_duplicates:
        raise AnalysisError("straggler_baseline: the same gpu_uuid on two slots; chips "
                            "need a unique identity")
    chips = pd.DataFrame({
        "chip_key": pd.array(keys, dtype="string"), "host": sc["host"],
        "gpu_index": sc["gpu_index"], "gpu_uuid": sc["gpu_uuid"],
        **cols, "n_windows": n_win,
        "flagged": sc["flagged"].to_numpy(), "reasons": sc["reasons"]})[ok]
    ref = {}
    for m in ms:
        hosts = chips.groupby("host")[f"{m}_offset"].median()
        ref[m] = float(median_abs_deviation(hosts, scale="normal") if len(hosts) >= 3
                       else median_abs_deviation(chips[f"{m}_offset"], scale="normal"))
    ts = telemetry["timestamp"]
    return StragglerBaseline(chips=chips.reset_index(drop=True), key=key,
                             host_ref_sd=ref, start=ts.min(), end=ts.max(),
                             params={"window_s": window_s, "z_threshold": z_threshold,
                                     "min_peers": min_peers, "min_samples": min_samples})


def find_stragglers(telemetry: pd.DataFrame, *,
                    metrics: tuple[str, ...] = ("clock_sm_mhz", "temp_gpu_c", "power_w"),
                    z_threshold: float = 4.0, window_s: float = 900.0,
                    min_shift_pct: float = 1.0, min_throttle_share: float = 0.05,
                    cusum_h: float = 8.0, compute_fraction: float = 0.8,
                    min_peers: int = 4, min_samples: int = 10,
                    baseline: StragglerBaseline | None = None) -> StragglerResult:
    """Flag GPUs that deviate persistently from their peers, and fail-slow episodes.

    Parameters
    ----------
    telemetry : pandas.DataFrame
        GPU telemetry in the canonical schema (``timestamp``, ``host``, ``gpu_index``,
        the metrics; ``throttle_reasons``, ``power_limit_w`` and ``util_gpu_pct`` when
        present).  Only busy GPU rows are compared (no GpuIdle bit, utilisation above
        zero); peers are the GPUs sampled at the same timestamp.
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
    baseline : StragglerBaseline, optional
        Each chip's persistent clock offset learned from an earlier healthy record
        (:func:`straggler_baseline`).  A chip found in it is tested on the *change* of its
        offset since then ("clock dropped vs baseline": z of the change below
        ``-z_threshold`` and a drop of at least ``min_shift_pct``) instead of on its offset
        against today's peers, so a chip that was always slow is not flagged and one that
        became slower before this record starts is.  Chips not in the baseline (or on a
        host with fewer than four chips in it) keep the peer test; the ``baseline`` column
        of :attr:`StragglerResult.flags` says which test each GPU had.  Throttle,
        temperature, power-limit and fail-slow evidence apply to every GPU either way.

    Returns
    -------
    StragglerResult

    Raises
    ------
    powerlab.exceptions.SchemaError
        Missing columns or naive timestamps.
    powerlab.exceptions.AnalysisError
        Too few GPUs or samples, or bad options.
    """
    return _find(telemetry, metrics=metrics, z_threshold=z_threshold, window_s=window_s,
                 min_shift_pct=min_shift_pct, min_throttle_share=min_throttle_share,
                 cusum_h=cusum_h, compute_fraction=compute_fraction, min_peers=min_peers,
                 min_samples=min_samples, baseline=baseline)[0]


def _find(telemetry, *, metrics, z_threshold, window_s, min_shift_pct, min_throttle_share,
          cusum_h, compute_fraction, min_peers, min_samples, baseline, _exclude=None):
    """find_stragglers, also returning the clock window matrices the baseline learns.

    Two passes: GPUs flagged on persistent evidence in the first are left out of their
    hostmates' references in the second (:func:`_center`)."""
    _check(telemetry, metrics, z_threshold, compute_fraction, window_s)
    tel = _busy(telemetry)
    if tel.empty:
        raise AnalysisError("telemetry has no busy GPU rows")

    t = pd.DatetimeIndex(tel["timestamp"]).tz_convert("UTC").as_unit("ns").asi8
    tcode, tu = pd.factorize(t, sort=True)
    hc, hu = pd.factorize(tel["host"].astype("string").to_numpy(), sort=True)
    gi = tel["gpu_index"].to_numpy(dtype=np.int64, na_value=-1)
    span = int(gi.max()) + 2
    gcode, gkey = pd.factorize(hc.astype(np.int64) * span + gi + 1, sort=True)
    gu = pd.MultiIndex.from_arrays([np.asarray(hu)[gkey // span], gkey % span - 1])
    n_t, n_g = len(tu), len(gu)
    if n_g < min_peers + 1:
        raise AnalysisError(f"{n_g} GPUs in the telemetry; need more than {min_peers} to "
                            "compare each GPU with its peers")
    host_code = pd.factorize(gu.get_level_values(0))[0]
    pos_code = np.asarray(gu.get_level_values(1), dtype=np.int64)

    uuid = (tel.groupby(gcode)["gpu_uuid"].first().reindex(range(n_g)).to_numpy()
            if "gpu_uuid" in tel.columns else np.full(n_g, pd.NA))
    bl = match_baseline(baseline, gu, uuid, host_code, min_peers, metrics)

    def matrix(col, fill=np.nan, dtype=float):
        a = np.full((n_t, n_g), fill, dtype=dtype)
        a[tcode, gcode] = tel[col].to_numpy(dtype=dtype, na_value=fill)
        return a

    rows = np.bincount(tcode, minlength=n_t) >= min_peers
    # compute phases only: moments where the fleet's median power (or utilisation) is
    # well below its usual level are checkpoints or evaluation, where clocks float up to
    # each chip's boost headroom and say nothing about stragglers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for col, frac in (("power_w", 0.85), ("util_gpu_pct", 0.9)):
            if col in tel.columns:
                med = np.nanmedian(matrix(col), axis=1)
                typical = np.nanmedian(med[rows]) if rows.any() else np.nan
                if np.isfinite(typical) and typical > 0:
                    rows &= ~(med < frac * typical)
    tu_ok = tu[rows]
    wcode = (tu_ok - tu_ok[0]) // int(window_s * 1e9) if len(tu_ok) else tu_ok
    n_w = int(wcode.max()) + 1 if len(tu_ok) else 0
    wstart = tu_ok[0] + np.arange(n_w) * int(window_s * 1e9) if n_w else np.array([])
    out, win_clock, win_raw, win_loo = {}, None, {}, {}
    chan, change_hit = {}, {}
    mat = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for m in dict.fromkeys(["clock_sm_mhz", *metrics]):
            direction, floor, rel = _METRICS[m]
            x = matrix(m)[rows]
            mat[m] = x
            med = np.nanmedian(x, axis=1, keepdims=True)
            o = 100.0 * (x / med - 1.0) if rel else x - med
            # clip far outliers per GPU (spikes), then window means
            c = np.nanmedian(o, axis=0)
            s = np.maximum(nanmad(o), floor)
            o = np.clip(o, c - 8 * s, c + 8 * s)
            frame = pd.DataFrame(o)
            grp = frame.groupby(wcode)
            win = grp.mean().to_numpy().copy()
            cnt = grp.count().to_numpy()
            full = np.nanmedian(np.where(cnt > 0, cnt, np.nan))
            win[cnt < max(2, 0.5 * full)] = np.nan
            win_raw[m] = win.copy()
            win = _center(win, host_code, pos_code, loo=True, exclude=_exclude)
            n_valid = np.isfinite(o).sum(axis=0)
            n_win = np.isfinite(win).sum(axis=0)
            loc = np.nanmedian(win, axis=0)
            se = 1.2533 * nanmad(win) / np.sqrt(np.maximum(n_win, 1))
            spread = max(float(median_abs_deviation(loc, scale="normal",
                                                    nan_policy="omit")), floor)
            z = (loc - np.nanmedian(loc)) / np.sqrt(spread ** 2 + se ** 2)
            out[f"{m}_offset"], out[f"{m}_se"], out[f"{m}_z"] = loc, se, z
            win_loo[m] = win
            if m == "clock_sm_mhz":
                # episodes on the leave-one-out host-centred windows: centring on a
                # median that includes the GPU itself follows its own drop part of the way
                win_clock, o_clock = win, o
                out["n_samples"] = n_valid
            ok = n_valid >= min_samples
            harm = {"low": -z, "high": z, "both": np.abs(z)}[direction]
            if m in metrics and m != "power_w":
                h = np.where(ok, harm, 0.0)
                if bl is not None and m in bl["offset"]:
                    # chips tested against their own baseline leave the peer test; a
                    # chip that was a straggler in the baseline record already keeps the
                    # clock test (a deficit it always had still costs the job), while
                    # its heat, if no greater than then, is its norm
                    h = np.where(~bl["use"] | (bl["suspect"] & (m == "clock_sm_mhz")),
                                 h, 0.0)
                chan[_CHANNEL[m]] = h

        if bl is not None:
            out.update(baseline=bl["status"], baseline_flagged=bl["suspect"])
            for m in bl["offset"]:
                col, floor, least, sign, label = CHANGE_TESTS[m]
                least = min_shift_pct if least is None else least
                ch, se, z = baseline_change(bl, m, win_raw[m], host_code, floor=floor)
                stem, unit = col.rsplit("_", 1)
                out[col], out[f"{stem}_se_{unit}"], out[f"{stem}_z"] = ch, se, z
                move = sign * (ch - np.nanmedian(ch))
                h = np.where((out["n_samples"] >= min_samples) & bl["use"]
                             & (move >= least), np.nan_to_num(sign * z), 0.0)
                key = _CHANNEL[m]
                chan[key] = np.fmax(chan.get(key, 0.0), h)
                change_hit[key] = h > z_threshold

        clock = mat["clock_sm_mhz"]
        row_med = np.nanmedian(clock, axis=1)
        f_ref = float(np.nanmedian(row_med))
        gpu_ok = out["n_samples"] >= min_samples

        # slowing throttle bits: their share of samples against the host's other GPUs
        # (evidence on their own; the clock drop while set is reported, not required)
        b = matrix("throttle_reasons", 0, np.uint64)[rows] if "throttle_reasons" in \
            tel.columns else np.zeros_like(clock, dtype=np.uint64)
        present = np.isfinite(clock)
        slow = ((b & _SLOWING) != 0) & present
        _, excess, _ = bit_share_z(b, present, wcode, host_code, _SLOWING)
        drop = (np.nanmean(np.where(slow, o_clock, np.nan), axis=0)
                - np.nanmean(np.where(~slow & present, o_clock, np.nan), axis=0))
        out["throttle_excess_share"], out["throttled_clock_drop_pct"] = excess, drop
        bit_share = {}
        for name, mask in BIT_GROUPS.items():
            # thermal bits beyond what the GPU's own temperatures explain (a hot host
            # throttles more); the heat itself is the temperature channel's evidence
            exp = (expected_share_given_temp(((b & mask) != 0) & present,
                                             mat["temp_gpu_c"])
                   if name == "thermal_bits" and "temp_gpu_c" in mat else None)
            sh, ex, zb = bit_share_z(b, present, wcode, host_code, mask, expected=exp)
            bit_share[name] = sh
            out[f"{name}_excess_share"] = ex
            out[f"{name}_z"] = zb
            # a bit share below min_throttle_share over the host's is not evidence
            chan[name] = np.where(gpu_ok & (ex >= min_throttle_share), zb, 0.0)

        # enforced power limit below the fleet's
        if "power_limit_w" in tel.columns:
            lim = matrix("power_limit_w")[rows]
            lmed = np.nanmedian(lim, axis=1, keepdims=True)
            loff = np.nanmedian(100.0 * (lim / lmed - 1.0), axis=0)
            lz = -loff / max(float(nanmad(loff)), 0.5)
            chan["power_limit"] = np.where(gpu_ok, np.nan_to_num(lz), 0.0)
            out["power_limit_z"] = lz
        else:
            loff = np.full(n_g, np.nan)
            out["power_limit_z"] = loff
        out["power_limit_offset_pct"] = loff

    chan.setdefault("clock", np.zeros(n_g))
    score, p_value, best = combine_evidence(chan)
    flagged = gpu_ok & (score > z_threshold)
    reasons = [[] for _ in range(n_g)]
    for key, label in _CHANNEL_LABEL.items():
        if key not in chan:
            continue
        for i in np.flatnonzero(flagged & (chan[key] > z_threshold)):
            reasons[i].append(change_hit.get(key, np.zeros(n_g, bool))[i]
                              and _CHANGE_LABEL[key] or label)
    for i in np.flatnonzero(flagged):
        if not reasons[i]:
            other = best[i].split("+")[-1]
            reasons[i].append(f"clock low + {_CHANNEL_LABEL[other]} (combined)")
    cause = cause_of(chan)

    # fail-slow onsets (CUSUM against the first windows) and intermittent episodes
    # (runs below the GPU's own median level)
    eps, n_eps = [], np.zeros(n_g, dtype=int)
    repair = np.zeros_like(clock)
    win_end = np.append(wstart[1:], tu_ok[-1] + 1) if n_w else wstart
    found_by = {}
    for g in range(n_g):
        if not gpu_ok[g]:
            continue
        found = [dict(e, kind="onset") for e in cusum_episodes(
            win_clock[:, g], min_shift_pct=min_shift_pct, h=cusum_h)]
        covered = np.zeros(n_w, dtype=bool)
        for e in found:
            covered[e["onset"]:e["end"]] = True
        for e in drop_episodes(win_clock[:, g], min_shift_pct=min_shift_pct):
            if not covered[e["onset"]:e["end"]].any():
                found.append(dict(e, kind="episode", detected=e["end"] - 1))
        found_by[g] = found
    found_by = drop_shared(found_by, host_code, n_w)
    for g, found in found_by.items():
        for e in sorted(found, key=lambda e: e["onset"]):
            n_eps[g] += 1
            end_ns = win_end[e["end"] - 1] if e["ongoing"] else wstart[e["end"]]
            eps.append({"host": gu[g][0], "gpu_index": gu[g][1], "kind": e["kind"],
                        "onset": wstart[e["onset"]],
                        "detected": win_end[e["detected"]], "end": end_ns,
                        "duration_s": (end_ns - wstart[e["onset"]]) / 1e9,
                        "ongoing": e["ongoing"], "shift_pct": e["shift_pct"]})
            inside = (wcode >= e["onset"]) & (wcode < e["end"])
            repair[inside, g] = -e["shift_pct"]
    has_ep = n_eps > 0
    for i in np.flatnonzero(has_ep & ~flagged):
        kinds = {e["kind"] for e in eps if (e["host"], e["gpu_index"]) == gu[i]}
        reasons[i].append("intermittent" if kinds == {"episode"} and n_eps[i] > 1
                          else "fail-slow")
    score = np.where(has_ep & ~flagged, np.fmax(score, z_threshold), score)
    flagged |= has_ep
    if _exclude is None and flagged.any() and n_g > 2 * min_peers:
        return _find(telemetry, metrics=metrics, z_threshold=z_threshold,
                     window_s=window_s, min_shift_pct=min_shift_pct,
                     min_throttle_share=min_throttle_share, cusum_h=cusum_h,
                     compute_fraction=compute_fraction, min_peers=min_peers,
                     min_samples=min_samples, baseline=baseline, _exclude=flagged)

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
    deficit = np.where(flagged & ~has_ep, np.maximum(
        np.nanmedian(out["clock_sm_mhz_offset"]) - out["clock_sm_mhz_offset"], lost), 0.0)
    repair = np.where(has_ep[None, :], repair, deficit[None, :])
    out["episodes"] = n_eps
    out["clock_deficit_pct"] = np.where(has_ep, -np.array(
        [min([e["shift_pct"] for e in eps if (e["host"], e["gpu_index"]) == gu[g]] or [0])
         for g in range(n_g)]), deficit)
    out["clock_deficit_mhz"] = out["clock_deficit_pct"] / 100 * f_ref
    out["evidence_z"] = score
    out["p_value"] = p_value
    out["expected_false_alarms"] = np.minimum(n_g * p_value, n_g)
    out["best_evidence"] = best
    out["cause"] = np.where(flagged, cause, "")

    # top throttle reason: the largest share in excess of the fleet's median GPU
    top_name = np.array(["none"] * n_g, dtype=object)
    top_share = np.zeros(n_g)
    top_ex = np.zeros(n_g)
    for name, bit in _REASONS.items():
        sh = ((b & np.uint64(bit)) != 0).sum(axis=0) / np.maximum(present.sum(axis=0), 1)
        ex = sh - np.median(sh)
        better = ex > top_ex
        top_name[better], top_share[better], top_ex[better] = name, sh[better], ex[better]
    out["top_throttle_reason"] = top_name
    out["top_throttle_share"] = top_share

    # slow hosts (and racks) against the fleet, beyond what their temperature explains
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        raw_off = {m: np.nanmedian(win_raw[m], axis=0) if m in win_raw else None
                   for m in ("clock_sm_mhz", "temp_gpu_c", "power_w")}
    n_hosts = len(np.unique(host_code))
    # the same expected false alarms per GPU of fleet as the GPU test
    z_group = float(norm.isf(min(norm.sf(z_threshold) * n_g / max(n_hosts, 1), 0.5)))
    levels = {}
    if raw_off["temp_gpu_c"] is not None and n_hosts >= 3:
        kw = {"clock_off": raw_off["clock_sm_mhz"], "temp_off": raw_off["temp_gpu_c"],
                  "power_off": raw_off["power_w"],
                  "limit_off": loff if np.isfinite(loff).any() else None,
                  "hw_share": bit_share["hw_bits"]}
        levels["host"] = group_stragglers(np.asarray(gu.get_level_values(0)), pos_code,
                                          z_threshold=z_group, **kw)
        if "rack" in tel.columns:
            rack = tel.groupby(gcode)["rack"].first().reindex(range(n_g)).astype(str)
            n_racks = rack.nunique()
            if n_racks >= 3:
                z_rack = float(norm.isf(min(norm.sf(z_threshold) * n_g / n_racks, 0.5)))
                levels["rack"] = group_stragglers(rack.to_numpy(), pos_code,
                                                  z_threshold=z_rack, **kw)
    host_deficit = np.zeros(n_g)
    if "host" in levels:
        hl = levels["host"].set_index("group")
        bad = hl.index[hl["flagged"]]
        hosts_arr = np.asarray(gu.get_level_values(0)).astype(str)
        for h in bad:
            host_deficit[hosts_arr == h] = max(-hl.loc[h, "clock_residual_pct"], 0.0)

    cost, total, lost_tbl = job_cost(clock, row_med, repair, flagged, host_deficit,
                                     np.where(has_ep, np.where(cause == "unexplained",
                                                               "fail-slow", cause),
                                              np.where(flagged, cause, "")),
                                     f_ref=f_ref, compute_fraction=compute_fraction,
                                     interval_s=_interval_s(tu_ok))
    out["cost_step_pct"] = cost
    # a GPU slower than its peers from before the record starts, with nothing else to
    # show it, is found only beyond z_threshold times the leakage spread
    spread_pct = float(median_abs_deviation(out["clock_sm_mhz_offset"], scale="normal",
                                            nan_policy="omit"))
    silent_limit = z_threshold * max(spread_pct, _METRICS["clock_sm_mhz"][1])
    out["identifiable"] = np.where(
        flagged, "flagged", np.where(-out["clock_sm_mhz_z"] > 1.0,
                                     "not identifiable without a baseline", ""))

    scores = pd.DataFrame({
        "host": pd.array(gu.get_level_values(0), dtype="string"),
        "gpu_index": pd.array(gu.get_level_values(1), dtype="Int16"),
        "gpu_uuid": pd.array(uuid, dtype="string"),
        "flagged": flagged,
        "reasons": [", ".join(dict.fromkeys(r)) for r in reasons],
        **out,
    })
    for m in ("clock_sm_mhz", "temp_gpu_c", "power_w"):
        for suf in ("offset", "se", "z"):
            if f"{m}_{suf}" not in scores.columns:
                scores[f"{m}_{suf}"] = np.nan
    flags = scores[scores["flagged"]].drop(columns="flagged")
    flags = flags.sort_values("cost_step_pct", ascending=False).reset_index(drop=True)
    episodes = pd.DataFrame(eps, columns=["host", "gpu_index", "kind", "onset",
                                          "detected", "end", "duration_s", "ongoing",
                                          "shift_pct"])
    for c in ("onset", "detected", "end"):
        episodes[c] = pd.to_datetime(episodes[c].astype("int64"), utc=True)
    episodes["host"] = episodes["host"].astype("string")
    episodes["gpu_index"] = episodes["gpu_index"].astype("Int16")
    params = {"metrics": tuple(metrics), "z_threshold": z_threshold, "window_s": window_s,
              "min_shift_pct": min_shift_pct, "min_throttle_share": min_throttle_share,
              "cusum_h": cusum_h, "compute_fraction": compute_fraction,
              "min_peers": min_peers, "min_samples": min_samples,
              "host_z_threshold": z_group, "silent_limit_pct": silent_limit,
              "clock_spread_pct": spread_pct}
    if bl is not None:
        params.update(baseline_key=baseline.key, baseline_chips=int(bl["use"].sum()),
                      peer_test_chips=int((~bl["use"]).sum()))
    empty = pd.DataFrame(columns=["group", "flagged"])
    result = StragglerResult(flags=flags, scores=scores, episodes=episodes,
                             cost_step_pct_total=float(total), params=params,
                             hosts=levels.get("host", empty), racks=levels.get("rack", empty),
                             lost=lost_tbl)
    return result, {"win_raw": win_raw, "win": win_loo, "gu": gu, "uuid": uuid}


def _interval_s(tu_ok) -> float:
    return float(np.median(np.diff(tu_ok)) / 1e9) if len(tu_ok) > 1 else 0.0
