"""Generator B (blind): per-rank step and section times of a DP x TP training job.

Written for scoring rank-level straggler / slow-link detectors, without reading
powerlab's code. Output: a long frame with columns ``rank, step, section,
duration_s`` (CSV-ready), a rank map ``rank, host, gpu_index, dp_rank, tp_rank``,
and a ground-truth dict.

Physics of one training step (synchronous data parallel x tensor parallel):

* Ranks: ``rank = dp_rank * tp + tp_rank``; ``host = rank // gpus_per_host``,
  ``gpu_index = rank % gpus_per_host``. A TP group is ``tp`` consecutive ranks
  (inside one host when tp divides gpus_per_host, over NVLink); a DP group is the
  ranks with the same ``tp_rank`` (one per replica, over the network).
* Sections, in order: ``data`` (loader wait, local), ``forward`` (compute),
  ``tp_comm_fwd`` (TP all-reduce), ``backward`` (compute), ``tp_comm_bwd``,
  ``dp_allreduce`` (gradient all-reduce in the DP group), ``optimizer`` (local).
* Compute: nominal time x the rank's chip speed factor (N(1, 0.4 %)) x
  per-step noise (N(1, 0.8 %)).
* Collectives are blocking: each rank enters when its previous section ends; the
  collective ends for all members at ``max(arrival) + transfer``; a member's
  duration is ``end - its arrival`` (wait + transfer). The transfer of a ring
  all-reduce is set by its slowest link: nominal x (1 + N(0, 2 %)) per instance,
  x ``link_factor`` when the group's ring contains the slow link.
* Each rank's clock runs on: a rank that is late makes its TP and DP peers wait
  at the next collective, which is how a straggler shows up everywhere.

Cases (``case=``):

* ``"clean"``.
* ``"slow_rank"``: one rank's compute is 3-5 % slower (``slow_factor``); its
  collectives are the shortest of their groups (it arrives last, never waits),
  its peers' collectives longer. Truth: rank, host, gpu_index, factor.
* ``"slow_link"``: the link between two ranks adjacent in one DP ring (different
  hosts, same tp_rank; ``link="dp"``) or in one TP ring (``link="tp"``) is
  ``link_factor`` (1.5) slower: only that group's collective transfers are
  longer (every member of the group sees the same longer minimum). Truth: the
  pair, the group kind and its members.

``write_ranks(outdir, ...)`` writes ``sections.csv``, ``rank_map.csv`` and
``truth.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["generate_ranks", "write_ranks", "SECTIONS", "CASES"]

SECTIONS = ("data", "forward", "tp_comm_fwd", "backward", "tp_comm_bwd", "dp_allreduce", "optimizer")
CASES = ("clean", "slow_rank", "slow_link")
NOMINAL_S = {"data": 0.004, "forward": 0.30, "tp_comm_fwd": 0.025, "backward": 0.60,
             "tp_comm_bwd": 0.050, "dp_allreduce": 0.12, "optimizer": 0.02}


def rank_map(dp, tp, gpus_per_host=8):
    ranks = np.arange(dp * tp)
    return pd.DataFrame({
        "rank": ranks,
        "host": [f"node{r // gpus_per_host:03d}" for r in ranks],
        "gpu_index": ranks % gpus_per_host,
        "dp_rank": ranks // tp,
        "tp_rank": ranks % tp,
    })


def generate_ranks(dp=4, tp=8, n_steps=100, case="clean", seed=0, gpus_per_host=8,
                   slow_factor=None, link_factor=1.5, link="dp", target=None):
    """Section times, rank map and truth for one job.

    Parameters
    ----------
    dp, tp : int
        Data- and tensor-parallel degrees (world size dp * tp).
    n_steps : int
    case : {"clean", "slow_rank", "slow_link"}
    seed : int
    gpus_per_host : int
    slow_factor : float or None
        ``slow_rank`` compute factor; None: uniform 1.03-1.05.
    link_factor : float
        ``slow_link`` transfer factor of the slow link's collectives.
    link : {"dp", "tp"}
        Which kind of group the slow link belongs to.
    target : int or tuple or None
        The slow rank, or the pair (a, b) for ``slow_link``; None: drawn.

    Returns
    -------
    times : DataFrame [rank, step, section, duration_s]
    ranks : DataFrame [rank, host, gpu_index, dp_rank, tp_rank]
    truth : dict
    """
    if case not in CASES:
        raise ValueError(f"case must be one of {CASES}")
    if dp < 2 and case == "slow_link" and link == "dp":
        raise ValueError("a DP slow link needs dp >= 2")
    rng = np.random.default_rng(seed)
    rng_case = np.random.default_rng([int(seed), 104729])
    world = dp * tp
    rmap = rank_map(dp, tp, gpus_per_host)
    tp_groups = [list(range(d * tp, (d + 1) * tp)) for d in range(dp)]
    dp_groups = [list(range(k, world, tp)) for k in range(tp)]
    speed = rng.normal(1.0, 0.004, world)
    truth = {"case": case, "seed": int(seed), "dp": dp, "tp": tp, "n_steps": n_steps,
             "slow_ranks": [], "slow_link": None}

    compute_factor = np.ones(world)
    slow_groups = set()  # ("tp"|"dp", group index)
    if case == "slow_rank":
        r = int(rng_case.integers(world)) if target is None else int(target)
        fac = float(rng_case.uniform(1.03, 1.05)) if slow_factor is None else float(slow_factor)
        compute_factor[r] = fac
        row = rmap.iloc[r]
        truth["slow_ranks"] = [{"rank": r, "host": row.host, "gpu_index": int(row.gpu_index),
                                "factor": fac}]
    elif case == "slow_link":
        if target is not None:
            a, b = sorted(int(x) for x in target)
        elif link == "dp":
            k = int(rng_case.integers(tp))
            d = int(rng_case.integers(dp - 1))
            a, b = d * tp + k, (d + 1) * tp + k
        else:
            d = int(rng_case.integers(dp))
            k = int(rng_case.integers(tp - 1))
            a, b = d * tp + k, d * tp + k + 1
        kind = "dp" if (a % tp == b % tp) else "tp"
        if kind == "tp" and a // tp != b // tp:
            raise ValueError("the pair shares no collective group")
        g = a % tp if kind == "dp" else a // tp
        slow_groups.add((kind, g))
        members = dp_groups[g] if kind == "dp" else tp_groups[g]
        truth["slow_link"] = {"ranks": [a, b], "hosts": [rmap.host[a], rmap.host[b]], "group": kind,
                              "group_index": g, "members": members, "factor": float(link_factor)}

    clock = np.zeros(world)
    rows_rank, rows_step, rows_sec, rows_dur = [], [], [], []

    def record(step, sec, dur):
        rows_rank.append(np.arange(world))
        rows_step.append(np.full(world, step))
        rows_sec.append(np.full(world, sec, dtype=object))
        rows_dur.append(dur.copy())

    def collective(groups, kind, sec, step):
        dur = np.empty(world)
        for gi, grp in enumerate(groups):
            arr = clock[grp]
            transfer = NOMINAL_S[sec] * (1 + rng.normal(0, 0.02))
            if (kind, gi) in slow_groups:
                transfer *= link_factor
            end = arr.max() + transfer
            dur[grp] = end - arr
            clock[grp] = end
        record(step, sec, dur)

    for step in range(n_steps):
        for sec in SECTIONS:
            if sec in ("tp_comm_fwd", "tp_comm_bwd"):
                collective(tp_groups, "tp", sec, step)
            elif sec == "dp_allreduce":
                collective(dp_groups, "dp", sec, step)
            else:
                noise = rng.normal(1.0, 0.008, world)
                dur = NOMINAL_S[sec] * noise
                if sec in ("forward", "backward"):
                    dur = dur * speed * compute_factor
                clock += dur
                record(step, sec, dur)

    times = pd.DataFrame({
        "rank": np.concatenate(rows_rank).astype(int),
        "step": np.concatenate(rows_step).astype(int),
        "section": pd.array(np.concatenate(rows_sec).astype(str), dtype="string"),
        "duration_s": np.concatenate(rows_dur),
    })
    truth["wall_s"] = float(clock.max())
    truth["chip_speed"] = speed.tolist()
    return times, rmap, truth


def write_ranks(outdir, **kw):
    """Write sections.csv, rank_map.csv, truth.json under ``outdir``; returns the paths."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    times, rmap, truth = generate_ranks(**kw)
    paths = {"sections": out / "sections.csv", "rank_map": out / "rank_map.csv", "truth": out / "truth.json"}
    times.to_csv(paths["sections"], index=False)
    rmap.to_csv(paths["rank_map"], index=False)
    paths["truth"].write_text(json.dumps(truth, indent=1))
    return paths
