"""Score hosts, racks, regimes, sampling and per-rank times ONCE on the blind generators
(issue 35).

``tests/blind/fleet/gen_fleet.py`` (telemetry) and ``tests/blind/fleet/gen_ranks.py``
(per-rank section times) were written by another helper who had not read powerlab's
code (``tests/blind/README.md``).  They are used here to score only: nothing was tuned
on them (the rules were tuned on ``tests/support/fleet_dev.py`` and
``tests/support/rank_dev.py``, ``benchmarks/validate_fleet_levels.py``).

Telemetry: 16 hosts x 8 GPUs, 4 hosts a rack (4 racks), 2 days, at 60-, 300- and 900-s
sampling; :func:`~powerlab.throughput.stragglers.find_stragglers` without a baseline
(the generator offers none).  Scored:

- ``slow_host``: a host in ``truth["slow_hosts"]`` flagged in ``result.hosts``, or --
  when not flagged -- the record's ``host_silent_limit_pct`` above the slowdown and the
  host marked "not identifiable without a baseline" (counted apart, not as a hit);
- ``data_stall``: a host in ``truth["stall_hosts"]`` flagged;
- ``rack_cooling``: ``truth["hot_rack"]`` flagged in ``result.racks`` (found as a rack),
  and whether its episodes are classed ``time of day``;
- ``power_limit_change``: a regime break within 1 h of ``truth["power_limit_change"]
  ["time"]``; every flag is a false alarm;
- every case: flagged GPUs, hosts and racks not in the truth are false alarms (per
  1,000 GPU-days).

Per-rank times: ``generate_ranks`` with dp 4 x tp 8 (32 ranks), 100 steps, cases
``clean``, ``slow_rank``, ``slow_link`` (DP links for even seeds, TP links for odd);
:func:`~powerlab.throughput.rank_times.find_slow_ranks`.  A slow rank is a hit when a
``slow rank`` finding names exactly it; a slow link when a ``slow link`` finding holds
both of its ranks and at most a quarter of the ranks (``pair exact`` also counted).

Usage: python benchmarks/validate_blind_fleet.py [--seeds 10] [--jobs 2]
[--out benchmarks/results_validate_blind_fleet.json]; prints tables and ``RESULT``.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "blind" / "fleet"))

FLEET_CASES = ("clean", "slow_host", "data_stall", "rack_cooling", "power_limit_change")
RANK_CASES = ("clean", "slow_rank", "slow_link")
INTERVALS = (60, 300, 900)
SHAPE = {"n_hosts": 16, "gpus_per_host": 8, "hosts_per_rack": 4, "days": 2.0}


def _flagged(tbl) -> set:
    return set(tbl.loc[tbl["flagged"], "group"].astype(str)) if len(tbl) else set()


def run_fleet(case: str, interval_s: int, seed: int) -> dict:
    import gen_fleet

    from powerlab.throughput.stragglers import find_stragglers

    tel, truth = gen_fleet.generate_fleet(case=case, seed=seed, interval_s=interval_s,
                                          **SHAPE)
    res = find_stragglers(tel)
    hosts, racks = _flagged(res.hosts), _flagged(res.racks)
    gpus = set(res.flags["gpu_uuid"].astype(str))
    slow_h = set(map(str, truth.get("slow_hosts") or [])) | set(
        map(str, truth.get("stall_hosts") or []))
    slow_r = {str(truth["hot_rack"])} if truth.get("hot_rack") is not None else set()
    slow_g = set()
    for s in truth.get("stragglers") or []:
        slow_g.add(str(s.get("gpu_uuid", s)) if isinstance(s, dict) else str(s))
    n_gpus = int(tel["gpu_uuid"].nunique())
    out = {"case": case, "interval_s": interval_s, "seed": seed,
           "gpu_days": n_gpus * SHAPE["days"],
           "false_gpus": len(gpus - slow_g), "false_hosts": len(hosts - slow_h),
           "false_racks": len(racks - slow_r), "regimes": len(res.regimes)}
    if case in ("slow_host", "data_stall"):
        out["hit"] = bool(slow_h & hosts)
        if case == "slow_host" and not out["hit"]:
            h = res.hosts.set_index("group").reindex(sorted(slow_h))
            out["not_identifiable_reported"] = bool(
                (h["identifiable"] == "not identifiable without a baseline").any())
            out["host_silent_limit_pct"] = res.params.get("host_silent_limit_pct")
    if case == "rack_cooling":
        out["hit"] = bool(slow_r & racks)
        r = res.racks.set_index("group") if len(res.racks) else None
        out["time_of_day"] = bool(out["hit"] and r is not None and "time of day" in str(
            r.loc[sorted(slow_r)[0], "episode_kind"]))
        out["gpu_flags_in_rack"] = len(gpus)
    chg = truth.get("power_limit_change")
    if chg:
        t = pd.Timestamp(chg["time"])
        t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
        reg = res.regimes
        out["regime_found"] = bool(len(reg) and (
            (reg["start"] - pd.Timedelta(hours=1) <= t)
            & (reg["end"] + pd.Timedelta(hours=1) >= t)).any())
    return out


def run_ranks(case: str, seed: int) -> dict:
    import gen_ranks

    from powerlab.iotools.ranktimes import read_rank_times
    from powerlab.throughput.rank_times import find_slow_ranks

    link = "dp" if seed % 2 == 0 else "tp"
    times, rmap, truth = gen_ranks.generate_ranks(dp=4, tp=8, n_steps=100, case=case,
                                                  seed=seed, link=link)
    res = find_slow_ranks(read_rank_times(times, rank_map=rmap[["rank", "host",
                                                                "gpu_index"]]))
    f = res.findings
    out = {"case": case, "seed": seed, "link": link, "n_findings": len(f)}
    world = times["rank"].nunique()
    if case == "slow_rank":
        want = sorted(int(r["rank"]) for r in truth["slow_ranks"])
        ok = [k == "slow rank" and sorted(r) == want for k, r in zip(f["kind"], f["ranks"])]
    elif case == "slow_link":
        want = set(int(r) for r in truth["slow_link"]["ranks"])
        ok = [k == "slow link" and want <= set(r) and len(r) <= world // 4
              for k, r in zip(f["kind"], f["ranks"])]
        out["pair_exact"] = any(k == "slow link" and set(r) == want
                                for k, r in zip(f["kind"], f["ranks"]))
    else:
        ok = []
    out["hit"] = any(ok) if case != "clean" else None
    out["false_findings"] = len(f) - int(any(ok))
    return out


def _summ_fleet(rows) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    out = []
    for (case, iv), d in df.groupby(["case", "interval_s"], sort=False):
        fa = int(d[["false_gpus", "false_hosts", "false_racks"]].sum().sum())
        r = {"case": case, "interval_s": iv, "n": len(d), "gpu_days": d["gpu_days"].sum(),
             "false_alarms": fa, "false_per_1000_gpu_days": 1000 * fa / d["gpu_days"].sum()}
        for c in ("hit", "time_of_day", "regime_found", "not_identifiable_reported"):
            if c in d and d[c].notna().any():
                r[c] = float(d[c].fillna(False).mean())
        out.append(r)
    return pd.DataFrame(out)


def _summ_ranks(rows) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    out = []
    for case, d in df.groupby("case", sort=False):
        r = {"case": case, "n": len(d), "false_findings": int(d["false_findings"].sum())}
        if d["hit"].notna().any():
            r["hit"] = float(d["hit"].fillna(False).mean())
        if "pair_exact" in d and d["pair_exact"].notna().any():
            r["pair_exact"] = float(d["pair_exact"].fillna(False).mean())
        out.append(r)
    return pd.DataFrame(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--intervals", nargs="+", type=int, default=list(INTERVALS))
    ap.add_argument("--cases", nargs="+", default=list(FLEET_CASES))
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    ft = [(c, iv, s) for c in a.cases for iv in a.intervals for s in range(a.seeds)]
    rt = [(c, s) for c in RANK_CASES for s in range(a.seeds)]
    with ProcessPoolExecutor(a.jobs) as ex:
        rank_rows = list(ex.map(run_ranks, *zip(*rt)))
        fleet_rows = list(ex.map(run_fleet, *zip(*ft), chunksize=2))
    fs, rs = _summ_fleet(fleet_rows), _summ_ranks(rank_rows)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(fs.to_string(index=False))
        print(rs.to_string(index=False))
    res = {"fleet": fs.to_dict(orient="records"), "ranks": rs.to_dict(orient="records")}
    if a.out:
        a.out.write_text(json.dumps({**res, "fleet_rows": fleet_rows,
                                     "rank_rows": rank_rows}, default=str, indent=0))
    print("RESULT " + json.dumps(res, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
