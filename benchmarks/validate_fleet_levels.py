"""Hosts, racks, regimes and sampling on the DEVELOPMENT fleet generator (issue 35).

``tests/support/fleet_dev.py`` is the generator the host, rack, episode, regime and
sampling rules were tuned on (the blind generators in ``tests/blind/fleet/`` score them
once, ``benchmarks/validate_blind_fleet.py``).  For each case, sampling and seed this
runs :func:`powerlab.throughput.stragglers.find_stragglers` (with the generator's healthy
earlier record through ``straggler_baseline`` for ``host_slow_quiet``) and scores:

- ``host_slow``, ``host_slow_quiet``, ``data_stall``: the slow host flagged in
  ``result.hosts``; any other flagged host, rack or GPU is a false alarm;
- ``rack_pm``: the rack flagged in ``result.racks`` (and whether its episodes are classed
  ``time of day``); GPU flags are false alarms;
- ``cap_change``, ``clock_lock``: a regime break within 1 h of the truth; every flag is a
  false alarm (none may fall inside a fleet-wide change);
- ``clean``, ``hot_host``: every flag is a false alarm;
- ``gpu_silent``: the GPU flagged (its onset at a third of the record).

Samplings: 60 s and 300 s interval means, 300 s instants (binned clocks), 900 s means.

Usage: python benchmarks/validate_fleet_levels.py [--seeds 10] [--jobs 2]
[--cases ...] [--samplings ...] [--out results.json]; prints a table and ``RESULT {json}``.
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
sys.path.insert(0, str(ROOT / "tests" / "support"))

CASES = ("clean", "hot_host", "host_slow", "host_slow_quiet", "data_stall", "rack_pm",
         "cap_change", "clock_lock", "gpu_silent")
SAMPLINGS = {"60s": (60.0, True), "300s": (300.0, True), "300s-instant": (300.0, False),
             "900s": (900.0, True)}


def score(res, truth: dict, case: str, n_gpus: int, days: float) -> dict:
    """Hits and false alarms of one result against the generator's truth."""
    flagged = set(res.flags["gpu_uuid"].astype(str))
    hosts = set(res.hosts.loc[res.hosts["flagged"], "group"]) if len(res.hosts) else set()
    racks = set(res.racks.loc[res.racks["flagged"], "group"]) if len(res.racks) else set()
    slow_h, slow_r = set(truth.get("slow_hosts", [])), set(truth.get("slow_racks", []))
    slow_g = set(truth.get("slow_gpus", []))
    out = {"gpu_days": n_gpus * days, "false_gpus": len(flagged - slow_g),
           "false_hosts": len(hosts - slow_h), "false_racks": len(racks - slow_r)}
    if slow_h:
        out["hit"] = bool(slow_h & hosts)
    if slow_r:
        out["hit"] = bool(slow_r & racks)
        r = res.racks.set_index("group")
        out["time_of_day"] = bool(out["hit"] and "time of day" in str(
            r.loc[list(slow_r)[0], "episode_kind"]))
    if slow_g:
        out["hit"] = bool(slow_g & flagged)
    brk = truth.get("regime_break")
    if brk is not None:
        reg = res.regimes
        out["regime_found"] = bool(len(reg) and (
            (reg["start"] - pd.Timedelta(hours=1) <= brk)
            & (reg["end"] + pd.Timedelta(hours=1) >= brk)).any())
    else:
        out["false_regimes"] = len(res.regimes)
    return out


def run_one(case: str, sampling: str, seed: int) -> dict:
    import fleet_dev

    from powerlab.throughput.stragglers import find_stragglers, straggler_baseline

    interval_s, averaged = SAMPLINGS[sampling]
    kw = {"interval_s": interval_s, "averaged": averaged, "hours": 48.0}
    tel, truth = fleet_dev.generate(seed, case, **kw)
    base = None
    if case == "host_slow_quiet":
        base = straggler_baseline(fleet_dev.generate(seed, case, baseline=True, **kw)[0])
    res = find_stragglers(tel, baseline=base)
    out = score(res, truth, case, int(tel["gpu_uuid"].nunique()), kw["hours"] / 24)
    return {"case": case, "sampling": sampling, "seed": seed, **out}


def summarise(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    out = []
    for (case, sampling), d in df.groupby(["case", "sampling"], sort=False):
        fa = int(d[["false_gpus", "false_hosts", "false_racks"]].sum().sum())
        r = {"case": case, "sampling": sampling, "n": len(d),
             "gpu_days": float(d["gpu_days"].sum()), "false_alarms": fa,
             "false_per_1000_gpu_days": 1000 * fa / d["gpu_days"].sum()}
        for c in ("hit", "time_of_day", "regime_found"):
            if c in d and d[c].notna().any():
                r[c] = float(d[c].fillna(False).mean())
        if "false_regimes" in d and d["false_regimes"].notna().any():
            r["false_regimes"] = int(d["false_regimes"].fillna(0).sum())
        out.append(r)
    return pd.DataFrame(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    ap.add_argument("--samplings", nargs="+", default=list(SAMPLINGS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    tasks = [(c, s, k) for c in a.cases for s in a.samplings
             for k in range(a.first_seed, a.first_seed + a.seeds)]
    with ProcessPoolExecutor(a.jobs) as ex:
        rows = list(ex.map(run_one, *zip(*tasks), chunksize=2))
    summ = summarise(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(summ.to_string(index=False))
    if a.out:
        a.out.write_text(json.dumps({"rows": rows, "summary": summ.to_dict(
            orient="records")}, default=str, indent=0))
    print("RESULT " + json.dumps(summ.to_dict(orient="records"), default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
