"""Per-chip baseline for straggler detection: each chip's persistent offsets against
its peers, learned from an earlier healthy record, and the test of how they have changed.

Within one record a GPU slower from before the record starts, with no other evidence,
looks like a chip binned at the slow end of the leakage spread (20-25 MHz between
H100s).  :func:`powerlab.throughput.stragglers.straggler_baseline` learns each chip's
offsets from an earlier record into a :class:`StragglerBaseline`;
``find_stragglers(telemetry, baseline=...)`` then asks, per chip, how its offset has
changed since, centred on the change of the other baseline chips of its host (the host's
conditions then and now cancel).  :func:`match_baseline` pairs today's GPUs with the
baseline's chips (by ``gpu_uuid``, else host and ``gpu_index``) and decides which are
tested this way; :func:`baseline_change` computes the change, its standard error and its
robust z.  docs/throughput_methods.md describes the method and its validation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import median_abs_deviation

from .._summary import Results, Summary
from ..exceptions import AnalysisError
from ._robust import group_median, nanmad

__all__ = ["CHANGE_TESTS", "StragglerBaseline", "baseline_change", "chip_keys",
           "match_baseline"]

#: metrics tested on their change since a baseline: (change column, floor of the
#: between-chip scale of the change, smallest harmful change, its sign, reason)
CHANGE_TESTS = {
    "clock_sm_mhz": ("clock_change_pct", 0.1, None, -1, "clock dropped vs baseline"),
    "temp_gpu_c": ("temp_change_c", 0.25, 2.0, +1, "hotter than baseline"),
}


@dataclass(frozen=True, repr=False)
class StragglerBaseline(Results):
    """Each chip's persistent clock offset against its peers, learned from an earlier
    healthy record by :func:`~powerlab.throughput.stragglers.straggler_baseline`, for
    :func:`~powerlab.throughput.stragglers.find_stragglers`.

    Attributes
    ----------
    chips : pandas.DataFrame
        One row per chip: chip_key (its identity, see ``key``), host, gpu_index, gpu_uuid,
        clock_sm_mhz_offset (median over windows of its clock against the fleet median
        at the same moments, *not* host-centred, so that the host's conditions cancel
        against its peers' later) [%], clock_sm_mhz_se (its standard error) [%],
        temp_gpu_c_offset and temp_gpu_c_se likewise [degC] (when the record has them),
        n_windows, flagged and reasons (a straggler in the baseline record itself, by
        ``find_stragglers``).
    key : str
        ``"gpu_uuid"`` when every busy row of the record carried one, else
        ``"host/gpu_index"`` (the slot: a chip moved or replaced under the same slot is
        then taken for the old one).
    host_ref_sd : dict
        Per metric, the spread of the hosts' median offsets in the record (clock [%],
        temperature [degC]): the extra uncertainty of a chip that has moved to other peers
        since (its old host's conditions are in its offset and cannot be told apart from
        its hostmates' own offsets within one record).
    start, end : pandas.Timestamp
        The record's span (UTC).
    params : dict
        The options it was learned with.
    """

    chips: pd.DataFrame
    key: str
    host_ref_sd: dict
    start: pd.Timestamp
    end: pd.Timestamp
    params: dict

    def summary_frame(self) -> pd.DataFrame:
        """The per-chip baseline (a copy of :attr:`chips`)."""
        return self.chips.copy()

    def summary(self) -> Summary:
        """Summary: what the baseline holds and which of its chips were stragglers."""
        c = self.chips
        lines = [(f"Straggler baseline: {len(c)} chips keyed by {self.key}, "
                 f"{self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M} UTC; clock "
                 f"offsets {c['clock_sm_mhz_offset'].min():+.2f} to "
                 f"{c['clock_sm_mhz_offset'].max():+.2f} %, median se "
                 f"{c['clock_sm_mhz_se'].median():.3f} %; moved-chip reference "
                 f"sd {self.host_ref_sd['clock_sm_mhz']:.2f} %")]
        for _, r in c[c["flagged"]].iterrows():
            lines.append(f"  straggler in the baseline record: {r['chip_key']} "
                         f"({r['host']} GPU {r['gpu_index']}): {r['reasons']}")
        s = Summary()
        s.add_text(lines, pre=True)
        return s


def chip_keys(key: str, gu: pd.MultiIndex, uuid: np.ndarray) -> np.ndarray:
    """Chip identities of the GPUs ``gu`` (host, gpu_index): their ``gpu_uuid`` (None
    where missing) for ``key == "gpu_uuid"``, else ``"host/gpu_index"``."""
    if key == "gpu_uuid":
        return np.array([None if pd.isna(u) else str(u) for u in uuid], dtype=object)
    return np.array([f"{h}/{g}" for h, g in gu], dtype=object)


def match_baseline(baseline: StragglerBaseline | None, gu: pd.MultiIndex,
                   uuid: np.ndarray, host_code: np.ndarray, min_peers: int,
                   metrics: tuple[str, ...]) -> dict | None:
    """Today's GPUs (in ``gu`` order) against the baseline's chips: which are tested on
    their change (``use``: in the baseline, on a host with at least 4 baseline chips,
    and more than ``min_peers`` such GPUs in all), which have moved to other peers
    (fewer than half of their current hostmates shared their baseline host), their
    baseline offsets and standard errors per metric, the moved-chip uncertainty, the
    chips flagged in the baseline record (``suspect``) and a status line each."""
    if baseline is None:
        return None
    if not isinstance(baseline, StragglerBaseline):
        raise AnalysisError("baseline must be a StragglerBaseline (from "
                            "straggler_baseline)")
    n_g = len(gu)
    chips = baseline.chips
    ms = [m for m in baseline.host_ref_sd if m == "clock_sm_mhz" or m in metrics]
    keys = chip_keys(baseline.key, gu, uuid)
    idx = pd.Index(chips["chip_key"].astype(object)).get_indexer(
        pd.Index(keys, dtype=object))
    idx[pd.isna(keys)] = -1
    matched = idx >= 0
    n_host = np.bincount(host_code, weights=matched, minlength=host_code.max() + 1)
    use = matched & (n_host[host_code] >= 4)
    if use.sum() < min_peers + 1:
        use[:] = False
    host_b = np.where(matched, chips["host"].astype(object).to_numpy()[idx], None)
    moved = np.zeros(n_g, dtype=bool)
    for g in np.flatnonzero(use):
        peers = host_b[(host_code == host_code[g]) & use & (np.arange(n_g) != g)]
        same = np.mean(peers == host_b[g]) if len(peers) else 0.0
        moved[g] = same < 0.5
    pick = np.where(matched, idx, 0)
    status = np.where(use & ~moved, "baseline", np.where(
        use, "baseline, moved to other peers", np.where(
            matched, "peer test: too few baseline chips on host",
            "peer test: not in baseline")))
    return {
        "use": use, "moved": moved, "status": status,
        "offset": {m: np.where(matched, chips[f"{m}_offset"].to_numpy()[pick], np.nan)
                   for m in ms},
        "se": {m: np.where(matched, chips[f"{m}_se"].to_numpy()[pick], np.nan)
               for m in ms},
        "ref": {m: baseline.host_ref_sd[m] for m in ms},
        "suspect": matched & chips["flagged"].to_numpy(dtype=bool)[pick]}


def baseline_change(base: dict, metric: str, win_raw: np.ndarray, host_code: np.ndarray,
                    *, floor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each chip's change of offset since the baseline, centred on the change of the
    other baseline chips of its host (their conditions then and now cancel): change,
    its standard error and its robust z against the other chips' changes (scale
    floored at ``floor``); NaN for chips not tested this way.

    ``win_raw`` holds today's window offsets against the fleet median (windows x GPUs,
    not host-centred), in the unit of the baseline's offsets for ``metric``.
    """
    use = base["use"]
    d = win_raw - base["offset"][metric][None, :]
    d[:, ~use] = np.nan
    dc = np.full_like(d, np.nan)
    for h in np.unique(host_code[use]):
        cols = np.flatnonzero((host_code == h) & use)
        dc[:, cols] = d[:, cols] - group_median(d[:, cols], True)
    n = np.isfinite(dc).sum(axis=0)
    ch = np.nanmedian(dc, axis=0)
    se = np.sqrt((1.2533 * nanmad(dc) / np.sqrt(np.maximum(n, 1))) ** 2
                 + base["se"][metric] ** 2 + (base["moved"] * base["ref"][metric]) ** 2)
    if not use.any():
        nan = np.full(len(use), np.nan)
        return nan, nan, nan
    spread = max(float(median_abs_deviation(ch[use], scale="normal")), floor)
    z = (ch - np.nanmedian(ch[use])) / np.sqrt(spread ** 2 + se ** 2)
    return tuple(np.where(use, a, np.nan) for a in (ch, se, z))
