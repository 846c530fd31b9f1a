"""Slow ranks and slow links from per-rank step or section times.

Telemetry cannot see a degraded NVLink or NIC: every GPU of a synchronous job waits alike,
at full utilisation inside the collective.  Per-rank section times can
(:func:`~powerlab.iotools.ranktimes.read_rank_times`, or PyTorch's NCCL flight recorder,
:func:`~powerlab.iotools.ranktimes.read_flight_recorder`).  :func:`find_slow_ranks`:

1. **Sections by kind** from their names: communication (collectives, send/recv,
   barriers, waits), data loading, or compute (everything else).
2. **Each step against the other ranks**: per step and section, each rank's duration
   over the median rank's [%] (removes what all ranks share: a slow batch, a checkpoint).
3. **Persistent excess**: per rank and section the median over steps, its standard error
   ``1.2533 MAD / sqrt(n_steps)``, and a robust z against the other ranks (scale: the
   ranks' normal-consistent MAD, floored at ``floor_pct`` and combined with the rank's
   own standard error).  The threshold is Sidak-corrected for the number of ranks x
   sections tested (``alpha``), never below ``z_threshold``.
4. **Findings**: a rank whose *compute* (or data) sections take longer is a slow rank
   (the others then wait for it: its communication sections are *shorter*, reported as
   support; with communication sections only, one rank that waits much less than every
   other is the slow one).  Ranks whose *communication* takes longer while their compute
   is normal sit on a slow link: with a ``peer`` column the (rank, peer) pair is scored
   directly; without one, the ranks slow in the same communication section form one
   finding -- two ranks name the link, all ranks of one host name its network (NIC or
   PCIe), a larger set names the group whose collective is slow (the slow link is
   inside it).

References
----------
.. [1] T. Wu et al., "Falcon: Pinpointing and mitigating stragglers for large-scale
   hybrid-parallel training", arXiv:2410.12588, 2024 (per-rank step-time profiling;
   computation vs communication stragglers).
.. [2] P. J. Rousseeuw and C. Croux, "Alternatives to the median absolute deviation",
   JASA 88(424), 1993.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from .._options import Options
from .._summary import Results, Summary
from ..exceptions import AnalysisError

__all__ = ["RankTimesOptions", "RankTimesResult", "find_slow_ranks", "section_kind"]

_COMM = re.compile(r"nccl|gather|scatter|reduce|all.?to.?all|broadcast|"
                   r"\bsend|\brecv|p2p|comm|collective|barrier|\bwait|\bsync|exchange|"
                   r"\bgrad.?sync|\bdp\b|\btp\b|\bpp\b", re.I)
_DATA = re.compile(r"data|load|input|fetch|\bio\b|prefetch|batch", re.I)


def section_kind(name: str) -> str:
    """``"comm"``, ``"data"`` or ``"compute"`` from a section's name."""
    s = str(name)
    if _COMM.search(s):
        return "comm"
    if _DATA.search(s):
        return "data"
    return "compute"


@dataclass(frozen=True)
class RankTimesOptions(Options):
    """Options of :func:`find_slow_ranks`.

    Parameters
    ----------
    z_threshold : float
        Smallest robust z of a finding (raised by the Sidak correction) [-].
    alpha : float
        Family-wise false-alarm probability per job over all ranks x sections [-].
    min_excess_pct : float
        Smallest excess of a finding over the median rank [%].
    floor_pct : float
        Floor of the between-rank scale [%].
    min_steps : int
        Fewest steps a rank and section need.
    """

    z_threshold: float = 4.0
    alpha: float = 0.01
    min_excess_pct: float = 1.0
    floor_pct: float = 0.2
    min_steps: int = 5


@dataclass(frozen=True, repr=False)
class RankTimesResult(Results):
    """Result of :func:`find_slow_ranks`.

    Attributes
    ----------
    ranks : pandas.DataFrame
        One row per rank (or, for point-to-point sections with a ``peer``, per
        ``rank->peer`` pair: ``unit``) and section (``all compute``: the rank's compute
        sections together): unit, rank, section, kind, excess_pct (median over steps
        of its duration over the median rank's), se_pct, z, n_steps, and the rank's
        host, gpu_index, gpu_uuid where the times or the rank map give them.
    findings : pandas.DataFrame
        kind (``slow rank``, ``slow data loading``, ``slow link``), ranks (list), hosts,
        gpus (``host/gpu_index``), section, excess_pct, z, detail.
    params : dict
        z_threshold (after the Sidak correction), n_ranks, n_steps, sections and their
        kinds, ``min_detectable_pct`` per kind (the smallest excess that reaches the
        threshold at this job's noise).
    """

    ranks: pd.DataFrame
    findings: pd.DataFrame
    params: dict

    def summary_frame(self) -> pd.DataFrame:
        """The findings (a copy)."""
        return self.findings.copy()

    def summary(self) -> Summary:
        """One line per finding, then what was tested."""
        p = self.params
        lines = [f"Per-rank times: {p['n_ranks']} ranks, {p['n_steps']} steps, sections "
                 + ", ".join(f"{s} ({k})" for s, k in p["sections"].items())
                 + f"; threshold z > {p['z_threshold']:.2f}"]
        for _, f in self.findings.iterrows():
            lines.append(f"  {f['kind']}: ranks {f['ranks']} ({', '.join(f['gpus'])}), "
                         f"{f['section']} {f['excess_pct']:+.2f} % (z {f['z']:.1f}); "
                         f"{f['detail']}")
        if not len(self.findings):
            lines.append("  no slow rank or link")
        lines.append("  smallest excess detectable: " + ", ".join(
            f"{k} {v:.2f} %" for k, v in p["min_detectable_pct"].items()))
        s = Summary()
        s.add_text(lines, pre=True)
        return s


def _units(times: pd.DataFrame) -> pd.DataFrame:
    """The times with ``unit`` (the rank, or ``rank->peer`` for a point-to-point row:
    pairs are compared with the other pairs of the same section), and per step each
    rank's total compute time (``all compute``: forward, backward, ... together have
    a smaller relative noise than each)."""
    t = times[[c for c in ("rank", "step", "section", "duration_s", "peer")
               if c in times.columns]].copy()
    t["section"] = t["section"].astype(str)
    t["unit"] = t["rank"].astype(str)
    if "peer" in t.columns:
        has = t["peer"].notna().to_numpy()
        t.loc[has, "unit"] = (t.loc[has, "rank"].astype(str) + "->"
                              + t.loc[has, "peer"].astype("Int64").astype(str))
    kind = t["section"].map(section_kind)
    comp = t[(kind == "compute").to_numpy()]
    if comp["section"].nunique() > 1:
        tot = comp.groupby(["rank", "step"], as_index=False)["duration_s"].sum()
        tot["section"], tot["unit"] = "all compute", tot["rank"].astype(str)
        t = pd.concat([t, tot], ignore_index=True)
    return t


def _excess(t: pd.DataFrame) -> pd.DataFrame:
    """Per unit (rank or pair) and section: median excess over the median unit [%],
    se, steps."""
    t = t.groupby(["unit", "step", "section"], observed=True, as_index=False).agg(
        duration_s=("duration_s", "sum"), rank=("rank", "first"))
    med = t.groupby(["step", "section"], observed=True)["duration_s"].transform("median")
    with np.errstate(divide="ignore", invalid="ignore"):
        t["x"] = 100.0 * np.log(t["duration_s"] / med)
    t = t[np.isfinite(t["x"])]
    g = t.groupby(["unit", "section"], observed=True)
    out = g["x"].median().rename("excess_pct").to_frame()
    out["rank"] = g["rank"].first()
    mad = g["x"].apply(lambda v: 1.4826 * np.median(np.abs(v - np.median(v))))
    out["n_steps"] = g.size()
    out["se_pct"] = 1.2533 * mad / np.sqrt(out["n_steps"])
    return out.reset_index()


def _scored(ex: pd.DataFrame, o: RankTimesOptions) -> pd.DataFrame:
    parts = []
    for _, d in ex.groupby("section", observed=True):
        d = d.copy()
        v = d["excess_pct"].to_numpy()
        c = np.median(v)
        spread = max(1.4826 * np.median(np.abs(v - c)), o.floor_pct)
        d["z"] = (v - c) / np.sqrt(spread ** 2 + d["se_pct"].to_numpy() ** 2)
        d["excess_pct"] = v - c
        d["scale_pct"] = spread
        parts.append(d)
    return pd.concat(parts, ignore_index=True)


def find_slow_ranks(times: pd.DataFrame, options: RankTimesOptions | None = None,
                    **option_kw) -> RankTimesResult:
    """Slow ranks and links from per-rank section times (module docstring).

    Parameters
    ----------
    times : pandas.DataFrame
        ``rank, step, section, duration_s`` (and ``peer``, ``host``, ``gpu_index``,
        ``gpu_uuid``), as :func:`~powerlab.iotools.ranktimes.read_rank_times` returns.
    options : RankTimesOptions, optional
    **option_kw
        Fields of :class:`RankTimesOptions`.

    Returns
    -------
    RankTimesResult

    Raises
    ------
    powerlab.exceptions.AnalysisError
        Missing columns, fewer than 4 ranks, or too few steps.
    """
    o = RankTimesOptions.from_kwargs(options, **option_kw)
    missing = [c for c in ("rank", "step", "section", "duration_s") if c not in times]
    if missing:
        raise AnalysisError(f"rank times need columns {missing} (read_rank_times)")
    n_ranks = times["rank"].nunique()
    if n_ranks < 4:
        raise AnalysisError(f"{n_ranks} ranks; need at least 4 to compare each with "
                            "the others")
    t = _units(times)
    ex = _excess(t)
    ex = ex[ex["n_steps"] >= o.min_steps]
    if ex.empty:
        raise AnalysisError(f"no rank has {o.min_steps} steps of any section")
    sc = _scored(ex, o)
    sc["kind"] = sc["section"].astype(str).map(section_kind)
    sc["pair"] = sc["unit"].str.contains("->")
    z_thr = max(o.z_threshold, float(norm.isf(o.alpha / max(len(sc), 1))))
    sc = _with_gpus(sc, times)
    findings = _findings(sc, z_thr, o.min_excess_pct)
    kinds = dict(zip(sc["section"].astype(str), sc["kind"]))
    detect = {k: float(max(o.min_excess_pct, z_thr * np.median(d["scale_pct"])))
              for k, d in sc.groupby("kind")}
    params = {"z_threshold": z_thr, "n_ranks": int(n_ranks),
              "n_steps": int(times["step"].nunique()), "sections": kinds,
              "min_detectable_pct": detect, **o.as_dict()}
    return RankTimesResult(ranks=sc.drop(columns=["scale_pct", "pair"]), findings=findings,
                           params=params)


def _with_gpus(sc: pd.DataFrame, times: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in ("host", "gpu_index", "gpu_uuid") if c in times.columns]
    if not cols:
        return sc
    m = times.groupby("rank")[cols].first().reset_index()
    return sc.merge(m, on="rank", how="left", validate="many_to_one")


def _gpu(r: pd.Series) -> str:
    if "host" in r and not pd.isna(r["host"]):
        return f"{r['host']}/{r.get('gpu_index', '?')}"
    return f"rank {r['rank']}"


def _findings(sc: pd.DataFrame, z_thr: float, min_ex: float) -> pd.DataFrame:
    rows = []
    slow = set()
    # (a rank's shorter waits in its collectives follow from its longer compute: the
    # same evidence, reported as support, never added to it)
    hit = (sc["z"] > z_thr) & (sc["excess_pct"] >= min_ex)
    for kind, label in (("compute", "slow rank"), ("data", "slow data loading")):
        for rank, d in sc[hit & (sc["kind"] == kind)].groupby("rank"):
            r = d.loc[d["z"].idxmax()]
            comm = sc[(sc["rank"] == rank) & (sc["kind"] == "comm") & ~sc["pair"]]
            waits = (f"; waits {comm['excess_pct'].min():+.2f} % in communication "
                     "(the others wait for it)" if len(comm) else "")
            rows.append(_row(label, [rank], d, r, f"{kind} longer than the other "
                             f"ranks'{waits}"))
            slow.add(rank)
    comm = sc[(sc["kind"] == "comm")]
    if not (sc["kind"] != "comm").any() and len(comm):
        # communication only (a flight recorder): one rank that waits much less than
        # every other is the one they wait for
        low = comm[(comm["z"] < -z_thr) & (comm["excess_pct"] <= -min_ex)]
        for rank, d in low.groupby("rank"):
            if low["rank"].nunique() <= max(1, comm["rank"].nunique() // 8):
                r = d.loc[d["z"].idxmin()]
                rows.append(_row("slow rank", [rank], d, r, "waits less than every other "
                                 "rank in its collectives: the others wait for it"))
                slow.add(rank)
    hot = comm[hit.loc[comm.index] & ~comm["rank"].isin(slow)]
    hot = _absorb_waits(hot, sc, slow, rows)
    for _, r in hot[hot["pair"]].iterrows():
        a, b = (int(x) for x in r["unit"].split("->"))
        rows.append(_row("slow link", [a, b], hot[hot["unit"] == r["unit"]], r,
                         f"{r['section']} from rank {a} to rank {b} longer than the "
                         "other pairs'"))
    for section, d in hot[~hot["pair"]].groupby("section"):
        ranks = sorted(d["rank"].unique().tolist())
        r = d.loc[d["z"].idxmax()]
        rows.append(_row("slow link", ranks, d, r, _link_detail(ranks, d, sc)))
    return pd.DataFrame(rows, columns=["kind", "ranks", "hosts", "gpus", "section",
                                       "excess_pct", "z", "detail"])


def _absorb_waits(hot: pd.DataFrame, sc: pd.DataFrame, slow: set, rows: list
                  ) -> pd.DataFrame:
    """Longer collectives on the hostmates of a slow rank are their wait for it (tensor
    parallelism inside a host: they meet it after every layer), not a slow link: noted
    on the slow rank's finding and dropped."""
    if not slow or "host" not in sc or not len(hot):
        return hot
    slow_hosts = set(sc.loc[sc["rank"].isin(slow), "host"].dropna())
    waits = hot["host"].isin(slow_hosts).to_numpy()
    if waits.any():
        for row in rows:
            if row["kind"] == "slow rank" and set(row["hosts"]) & slow_hosts:
                n = int(hot.loc[waits, "rank"].nunique())
                row["detail"] += (f"; {n} hostmates wait for it in "
                                  + ", ".join(sorted(set(hot.loc[waits, "section"]))))
    return hot[~waits]


def _row(kind, ranks, d, r, detail) -> dict:
    gpus = [_gpu(x) for _, x in d.drop_duplicates("rank").iterrows()]
    hosts = sorted({g.split("/")[0] for g in gpus if "/" in g})
    return {"kind": kind, "ranks": [int(x) for x in ranks], "hosts": hosts, "gpus": gpus,
            "section": str(r["section"]), "excess_pct": float(r["excess_pct"]),
            "z": float(r["z"]), "detail": detail}


def _link_detail(ranks, d, sc) -> str:
    hosts = d["host"].dropna().unique().tolist() if "host" in d else []
    if len(ranks) == 2:
        where = ("NVLink/NVSwitch path inside " + hosts[0] if len(hosts) == 1 else
                 "inter-node link between " + " and ".join(map(str, hosts)) if hosts
                 else "the link between them")
        return f"communication longer on these two ranks only: {where}"
    if len(hosts) == 1 and "host" in sc:
        n_host = sc.loc[sc["host"] == hosts[0], "rank"].nunique()
        if len(ranks) >= n_host // 2:
            return f"communication longer on the ranks of {hosts[0]}: its network (NIC, PCIe)"
    return ("communication longer on these ranks alone: the slow link is inside the group "
            "they form (durations cannot say which of its links)")
