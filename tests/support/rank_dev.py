"""Development per-rank section times (issue 35): the job that
:func:`powerlab.throughput.rank_times.find_slow_ranks` was tuned on (the blind generator
in ``tests/blind/fleet/`` only scores it).

A data-parallel job of ``n_hosts`` x 8 ranks.  Per step and rank: ``data`` (20 ms),
``forward`` (300 ms) and ``backward`` (600 ms) scaled by the rank's chip speed (sd 0.4 %)
and 1.5 % log-normal noise per step, a common per-step factor (batch content), then
``allreduce``: 150 ms of transfer (3 % noise) plus the wait for the slowest rank's
compute, then ``optimizer`` (40 ms).  Cases: ``clean``; ``slow_rank`` (one rank's
forward and backward ``slow_pct`` slower: the others wait for it inside ``allreduce``);
``slow_link`` (the transfer of two ranks -- the endpoints of one degraded link, on two
hosts -- takes ``link_factor`` times longer); ``slow_p2p`` (pipeline sends with a ``peer``
column; one (rank, peer) pair ``link_factor`` slower); ``hybrid_slow_rank`` (tensor
parallel inside each host: after each compute phase the 8 ranks of a host meet in a
``tp_gather`` collective -- the slow rank's hostmates wait for it there -- and the hosts
then in ``grad_allreduce``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CASES = ("clean", "slow_rank", "slow_link", "slow_p2p", "hybrid_slow_rank")


def generate(seed: int, case: str = "clean", *, n_hosts: int = 4, n_steps: int = 60,
             slow_pct: float = 3.0, link_factor: float = 1.3):
    rng = np.random.default_rng([seed, 35])
    n = n_hosts * 8
    bad = int(rng.integers(n))
    other = int((bad + 8 + rng.integers(8)) % n)
    speed = rng.normal(1, 0.004, n)
    common = rng.lognormal(0, 0.02, n_steps)
    comp = {s: b * common[:, None] * speed[None, :] * rng.lognormal(0, 0.015, (n_steps, n))
            for s, b in (("data", 0.02), ("forward", 0.30), ("backward", 0.60))}
    if case == "hybrid_slow_rank":
        return _hybrid(rng, n, n_steps, bad, speed, common, slow_pct)
    if case == "slow_rank":
        for s in ("forward", "backward"):
            comp[s][:, bad] *= 1 + slow_pct / 100
    end = sum(comp.values())
    xfer = 0.15 * rng.lognormal(0, 0.03, (n_steps, n))
    if case == "slow_link":
        xfer[:, [bad, other]] *= link_factor
    comm = xfer + (end.max(axis=1, keepdims=True) - end)
    secs = {**comp, "allreduce": comm,
            "optimizer": 0.04 * rng.lognormal(0, 0.02, (n_steps, n))}
    rows = []
    step, rank = np.meshgrid(np.arange(n_steps), np.arange(n), indexing="ij")
    for s, v in secs.items():
        rows.append(pd.DataFrame({"rank": rank.ravel(), "step": step.ravel(),
                                  "section": s, "duration_s": v.ravel()}))
    if case == "slow_p2p":
        peer = (np.arange(n) + 1) % n
        p2p = 0.05 * rng.lognormal(0, 0.03, (n_steps, n))
        p2p[:, bad] *= link_factor
        rows.append(pd.DataFrame({"rank": rank.ravel(), "step": step.ravel(),
                                  "section": "send", "duration_s": p2p.ravel(),
                                  "peer": np.tile(peer, n_steps)}))
    times = pd.concat(rows, ignore_index=True)
    rmap = pd.DataFrame({"rank": np.arange(n),
                         "host": [f"node{r // 8:03d}" for r in range(n)],
                         "gpu_index": np.arange(n) % 8})
    truth = {"case": case,
             "slow_ranks": [bad] if case == "slow_rank" else [],
             "slow_link": ([bad, other] if case == "slow_link" else
                           [bad, (bad + 1) % n] if case == "slow_p2p" else [])}
    return times, rmap, truth


def _hybrid(rng, n, n_steps, bad, speed, common, slow_pct):
    host = np.arange(n) // 8
    secs = {}
    t_end = np.zeros((n_steps, n))
    for name, base in (("fwd_compute", 0.3), ("bwd_compute", 0.6)):
        c = base * common[:, None] * speed[None, :] * rng.lognormal(0, 0.015, (n_steps, n))
        c[:, bad] *= 1 + slow_pct / 100
        secs[name] = c
        t_end = t_end + c
        # the host's ranks meet: each waits for its slowest hostmate
        grp = pd.DataFrame(t_end.T).groupby(host).transform("max").to_numpy().T
        secs[f"tp_gather_{name[:3]}"] = 0.03 * rng.lognormal(0, 0.03, (n_steps, n)) + \
            (grp - t_end)
        t_end = grp + secs[f"tp_gather_{name[:3]}"] - (grp - t_end)
    xfer = 0.15 * rng.lognormal(0, 0.03, (n_steps, n))
    secs["grad_allreduce"] = xfer + (t_end.max(axis=1, keepdims=True) - t_end)
    rows = []
    step, rank = np.meshgrid(np.arange(n_steps), np.arange(n), indexing="ij")
    for s, v in secs.items():
        rows.append(pd.DataFrame({"rank": rank.ravel(), "step": step.ravel(),
                                  "section": s, "duration_s": v.ravel()}))
    rmap = pd.DataFrame({"rank": np.arange(n), "host": [f"node{h:03d}" for h in host],
                         "gpu_index": np.arange(n) % 8})
    return (pd.concat(rows, ignore_index=True), rmap,
            {"case": "hybrid_slow_rank", "slow_ranks": [bad], "slow_link": []})
