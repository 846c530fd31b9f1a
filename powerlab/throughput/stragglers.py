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

import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import median_abs_deviation

from .._summary import Results, Summary
from ..exceptions import AnalysisError
from ._robust import nanmad
from .chip_baseline import StragglerBaseline, chip_keys
from .fleet_matrix import StragglerOptions
from .straggler_scoring import score_fleet, score_table

__all__ = ["StragglerBaseline", "StragglerOptions", "StragglerResult", "find_stragglers",
           "straggler_baseline"]


@dataclass(frozen=True, repr=False)
class StragglerResult(Results):
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
        ongoing (still slow at the end of the record), shift_pct [%], episode_kind
        (``time of day`` when the GPU's episodes recur at the same hours on two days or
        more, else ``on/off``; as for hosts and racks).
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
    regimes : pandas.DataFrame
        Fleet-wide regime breaks (:mod:`~powerlab.throughput.regimes`): kind, start and
        end of the transition (UTC), before, after, share_gpus, detail.  Each GPU's
        episode tests run within regimes, so a fleet-wide change is never a straggler.
    group_episodes : pandas.DataFrame
        Episodes of whole hosts and racks (:mod:`~powerlab.throughput.group_episodes`):
        level, group, metric (clock or util), onset, end, duration_s, shift (mean drop
        against the group's level) [% or points], temp_rise_c, thermal_bits_rise,
        explained (a hot group's warm hours: reported, not flagged).  ``hosts`` and
        ``racks`` count them (episodes, episode_kind ``time of day`` or ``on/off``,
        hours_utc).
    """

    flags: pd.DataFrame
    scores: pd.DataFrame
    episodes: pd.DataFrame
    cost_step_pct_total: float
    params: dict
    hosts: pd.DataFrame = None
    racks: pd.DataFrame = None
    lost: pd.DataFrame = None
    regimes: pd.DataFrame = None
    group_episodes: pd.DataFrame = None

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
        lines += self._level_lines()
        for _, b in (self.regimes if self.regimes is not None else []).iterrows():
            lines.append(f"  regime break ({b['kind']}): {b['detail']}, "
                         f"{b['start']:%Y-%m-%d %H:%M} to {b['end']:%H:%M} UTC -- fleet-wide, "
                         "not scored as stragglers")
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
        lines += self._limit_lines()
        s = Summary()
        s.add_text(lines, pre=True)
        if len(self.flags):
            cols = ["host", "gpu_index", "reasons", "evidence_z", "clock_deficit_mhz",
                    "temp_gpu_c_z", "power_w_z", "top_throttle_reason", "cost_step_pct"]
            s.add_df(self.flags[cols], "Flagged GPUs", index=False)
        return s

    def _level_lines(self) -> list[str]:
        """Summary lines of the flagged hosts and racks."""
        lines = []
        for level, tbl in (("host", self.hosts), ("rack", self.racks)):
            if tbl is None or not len(tbl):
                continue
            for _, h in tbl[tbl["flagged"]].iterrows():
                if h.get("episodes", 0) and h["best_evidence"] == "episodes":
                    lines.append(
                        f"  {level} {h['group']}: {h['episodes']} {h['episode_kind']} "
                        f"episodes ({h['episode_metric']}), {h['hours_utc']} UTC, median "
                        f"drop {h['episode_shift']:+.2f}; cause {h['cause']}")
                    continue
                lines.append(
                    f"  slow {level} {h['group']}: clock {h['clock_residual_pct']:+.2f} % "
                    f"beyond its temperature ({h['temp_offset_c']:+.1f} degC explains "
                    f"{h['clock_explained_pct']:+.2f} %), score {h['score']:.1f} "
                    f"({h['best_evidence']}), cause {h['cause']}")
        return lines

    def _limit_lines(self) -> list[str]:
        """Summary lines: what a record without a baseline, or telemetry alone, cannot
        identify."""
        p, lines = self.params, []
        if "min_detectable_pct" in p:
            d = p["min_detectable_pct"]
            lines.append(
                f"At {p['sampling_s']:g}-s sampling ({p['window_s_used']:g}-s windows, "
                f"window noise {p['window_noise_pct']:.2f} %) the smallest GPU slowdown "
                f"episode detected is {d['gpu_episode']:.2f} %")
        for level in ("host", "rack"):
            if f"{level}_silent_limit_pct" in p and "baseline_chips" not in p:
                lines.append(
                    f"A {level} slower than the other {level}s by less than "
                    f"{p[f'{level}_silent_limit_pct']:.2f} % in clock alone (no power, "
                    "limit, bit or utilisation evidence) is not identifiable without a "
                    "baseline (straggler_baseline)")
        lines.append("Communication-only slowness (a degraded NVLink or NIC makes every "
                     "GPU wait alike) is not identifiable from telemetry: give per-rank "
                     "step or section times (powerlab.throughput.rank_times)")
        return lines


def straggler_baseline(telemetry: pd.DataFrame, options: StragglerOptions | None = None,
                       **option_kw) -> StragglerBaseline:
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
    options : StragglerOptions, optional
        As in :func:`find_stragglers` (also used to mark stragglers in this record); the
        metrics are the clock and, when present, the die temperature and power.
    **option_kw
        Fields of :class:`StragglerOptions` (``window_s``, ``z_threshold``,
        ``min_peers``, ``min_samples``, ...) replacing those of ``options``.

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
    opts = StragglerOptions.from_kwargs(options, **option_kw)
    ms = ("clock_sm_mhz", "temp_gpu_c") if "temp_gpu_c" in telemetry.columns else \
        ("clock_sm_mhz",)
    opts = dataclasses.replace(opts, metrics=ms + (("power_w",) if "power_w" in
                                                   telemetry.columns else ()))
    work = score_fleet(telemetry, opts)
    sc = score_table(work)["scores"]
    cols, n_win = _chip_offsets(work, ms)
    ok = np.isfinite(cols["clock_sm_mhz_offset"]) & (
        sc["n_samples"].to_numpy() >= opts.min_samples)
    key = "gpu_uuid" if not pd.isna(work.uuid).any() else "host/gpu_index"
    keys = chip_keys(key, work.gu, work.uuid)
    if pd.Index(keys).has_duplicates:
        raise AnalysisError("straggler_baseline: the same gpu_uuid on two slots; chips "
                            "need a unique identity")
    chips = pd.DataFrame({
        "chip_key": pd.array(keys, dtype="string"), "host": sc["host"],
        "gpu_index": sc["gpu_index"], "gpu_uuid": sc["gpu_uuid"],
        **cols, "n_windows": n_win,
        "flagged": sc["flagged"].to_numpy(), "reasons": sc["reasons"]})[ok]
    ts = telemetry["timestamp"]
    return StragglerBaseline(chips=chips.reset_index(drop=True), key=key,
                             host_ref_sd=_host_ref_sd(chips, ms), start=ts.min(),
                             end=ts.max(),
                             params={"window_s": opts.window_s,
                                     "z_threshold": opts.z_threshold,
                                     "min_peers": opts.min_peers,
                                     "min_samples": opts.min_samples})


def _chip_offsets(work, ms) -> tuple[dict, np.ndarray]:
    """Per metric each chip's offset (median of its windows against the fleet, not
    host-centred) and its standard error (of its host-centred windows); the clock's
    window count."""
    cols = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for m in ms:
            n_win = np.isfinite(work.win_loo[m]).sum(axis=0)
            cols[f"{m}_offset"] = np.nanmedian(work.win_raw[m], axis=0)
            cols[f"{m}_se"] = 1.2533 * nanmad(work.win_loo[m]) / np.sqrt(
                np.maximum(n_win, 1))
        n_win = np.isfinite(work.win_loo["clock_sm_mhz"]).sum(axis=0)
    return cols, n_win


def _host_ref_sd(chips: pd.DataFrame, ms) -> dict:
    """Per metric the spread of the hosts' median offsets (all chips' with fewer than
    three hosts): the moved-chip uncertainty."""
    ref = {}
    for m in ms:
        hosts = chips.groupby("host")[f"{m}_offset"].median()
        ref[m] = float(median_abs_deviation(hosts, scale="normal") if len(hosts) >= 3
                       else median_abs_deviation(chips[f"{m}_offset"], scale="normal"))
    return ref


def find_stragglers(telemetry: pd.DataFrame, options: StragglerOptions | None = None, *,
                    baseline: StragglerBaseline | None = None,
                    **option_kw) -> StragglerResult:
    """Flag GPUs that deviate persistently from their peers, and fail-slow episodes.

    Parameters
    ----------
    telemetry : pandas.DataFrame
        GPU telemetry in the canonical schema (``timestamp``, ``host``, ``gpu_index``,
        the metrics; ``throttle_reasons``, ``power_limit_w`` and ``util_gpu_pct`` when
        present).  Only busy GPU rows are compared (no GpuIdle bit, utilisation above
        zero); peers are the GPUs sampled at the same timestamp.
    options : StragglerOptions, optional
        The search's options (:class:`StragglerOptions`: ``metrics``, ``z_threshold``,
        ``window_s``, ``min_shift_pct``, ``min_throttle_share``, ``cusum_h``,
        ``compute_fraction``, ``min_peers``, ``min_samples``); default: the defaults.
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
    **option_kw
        Fields of :class:`StragglerOptions` replacing those of ``options``
        (``find_stragglers(tel, z_threshold=5.0)``).

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
    opts = StragglerOptions.from_kwargs(options, **option_kw)
    return StragglerResult(**score_table(score_fleet(telemetry, opts, baseline), baseline))
