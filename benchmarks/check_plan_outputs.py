"""Check ``powerlab flex plan``'s output files independently, as a facilities engineer.

Runs the CLI on the cases of ``tests/flex/test_plan_outputs_indep.py`` (and the issue's
200 random 5-min caps at the issue's 20 draws) and prints, per case, what was recomputed
from the CSVs and every disagreement with the definitions of docs/flexibility.md.

    python benchmarks/check_plan_outputs.py [--draws 20] [--n 200] [--seed 11]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support import plancheck as pc


def _df(rows):
    d = pd.DataFrame(rows)
    for c in d.columns:
        if c.endswith("_utc"):
            d[c] = pd.to_datetime(d[c], utc=True)
    return d


def _print_findings(title, f):
    bad = {k: v for k, v in f.items() if v}
    print(f"  checks: {', '.join(f)}")
    if not bad:
        print("  -> all agree")
    for k, v in bad.items():
        for line in v[:5]:
            print(f"  FINDING [{k}] {line}")
        if len(v) > 5:
            print(f"  FINDING [{k}] ... {len(v) - 5} more")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", default="20")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="plancheck_"))
    s16 = pc.site_from_yaml(pc.SCENARIO_16K)
    small = pc.site_from_yaml(pc.SCENARIO_SMALL)
    print(f"16k site from its YAML: IT {s16.full_it_megawatts:.4f} MW training, max "
          f"{s16.max_it_megawatts:.4f}, floor {s16.floor_it_megawatts:.4f}, PUE max "
          f"{s16.pue_max:.4f}; small: IT {small.full_it_megawatts:.4f}, PUE max "
          f"{small.pue_max:.4f}")

    def run(name, scen, targets, req, site, *extra, response_s=30.0):
        path = pc.write_targets(targets, tmp / f"{name}.csv")
        t0 = time.perf_counter()
        r = pc.run_plan(scen, path, req, tmp / name, "--draws", a.draws, *extra,
                        targets_in=targets)
        r.response_s = response_s
        el = time.perf_counter() - t0
        t = r.targets
        print(f"\n[{name}] exit {r.rc} ({el:.1f} s): {int(t.met.sum())} of {len(t)} targets "
              f"met, ramp violations {int(r.ramps.violations.sum())}, lost "
              f"{pc.summary_total_lost(r):.0f} GPU-h, delayed "
              f"{r.levers.delayed_gpu_hours.sum():.1f} GPU-h")
        f = pc.check_all(r, site)
        f["units in names"] = pc.unitless_numeric_columns(r)
        dr = pc.delivered_ramps(r, site)
        rates = r.ramps.groupby("direction").plan_rate_it_megawatts_per_min.min()
        notch = sum(j["gpus"] for j in site.jobs.values()) * pc.NOTCH_W / 1e6
        f["levers' 1-min ramps"] = [
            f"{d}: {dr[d]:.3f} MW/min at {dr[d + '_at']} > plan rate {rates[d]:.3f} + notch "
            f"{notch:.3f}" for d in ("down", "up") if dr[d] > rates[d] + notch]
        if r.levers.loc["power_cap", "lost_gpu_hours"] > 0:
            lo = pc.prior_cap_lost(r, site, bracket="low")
            hi = pc.prior_cap_lost(r, site, bracket="high")
            rep = float(r.levers.loc["power_cap", "lost_gpu_hours"])
            f["cap lost GPU-h vs prior"] = [] if 0.9 * lo <= rep <= hi * 1.001 else [
                (f"power_cap lost {rep:.2f} GPU-h, the stated prior on the schedule's limits "
                f"gives [{lo:.2f}, {hi:.2f}] ({100 * (rep / hi - 1):+.1f} % over the top)")]
        _, caps = pc.check_caps(r, site)
        print("  worst trailing-mean margin to cap: reported "
              f"{caps.reported_overshoot.max():+.4f} MW (simulated), planned "
              f"{caps.planned_overshoot.max():+.4f}, levers {caps.lever_overshoot.max():+.4f}")
        _, rt = pc.check_ramps(r, site)
        for _, q in rt.iterrows():
            print(f"  {q.requirement} {q.direction}: planned IT ramp "
                  f"{q.planned_it_worst_megawatts_per_min:.4f} MW/min vs plan rate "
                  f"{q.plan_rate_it_megawatts_per_min:.4f}; recomputed rate "
                  f"{pc.ramp_rates(r, site).set_index(['requirement', 'direction']).loc[(q.requirement, q.direction), 'my_rate_it_megawatts_per_min']:.4f}")
        return r, f

    r, f = run("a_random", pc.SCENARIO_16K, pc.random_targets(s16, a.n, a.seed),
               pc.REQ_ERCOT, s16)
    _print_findings("a", f)

    s = yaml.safe_load(pc.SCENARIO_16K.read_text())
    s["mitigations"]["battery"] = {"power_megawatts": 2.0, "energy_megawatt_hours": 0.5,
                                       "round_trip_efficiency": 0.9, "window_s": 120,
                                       "initial_soc_fraction": 0.9, "soc_min_fraction": 0.2}
    bpath = tmp / "battery.yaml"
    bpath.write_text(yaml.safe_dump(s))
    bsite = pc.site_from_yaml(bpath)
    tb = _df([{"start_utc": "2025-07-01T01:00:00Z", "end_utc": "2025-07-01T01:05:00Z",
                   "cap_megawatts": 11.0},
              {"start_utc": "2025-07-01T01:30:00Z", "end_utc": "2025-07-01T01:35:00Z",
                   "cap_megawatts": 9.5}])
    r, f = run("b_battery", bpath, tb, pc.REQ_ERCOT, bsite)
    fb, m = pc.check_battery(r, bsite)
    f["battery"] = fb
    print("  battery: " + ", ".join(f"{k} {v:.4f}" for k, v in m.items()))
    _print_findings("b", f)

    tc = _df([{"start_utc": "2025-06-02T12:03:00Z", "end_utc": "2025-06-02T12:20:00Z",
                   "cap_megawatts": 0.6}])
    r, f = run("c_shift", pc.SCENARIO_SMALL, tc, pc.REQ_SMALL, small)
    fs, d = pc.check_shift(r, small)
    f["shifted starts"] = fs
    f.pop("levers' 1-min ramps")  # the nominal baseline does not know the shifted ends
    print(d.to_string(index=False))
    print(f"  plan_levers delayed {r.levers.delayed_gpu_hours.sum():.3f} GPU-h, mine "
          f"{d.delayed_gpu_hours.sum():.3f}; plan_targets delayed "
          f"{r.targets.delayed_gpu_hours.sum():.3f}")
    _print_findings("c", f)

    td = _df([{"start_utc": "2025-07-01T01:00:00Z", "end_utc": "2025-07-01T01:05:00Z",
                   "cap_megawatts": 13.0, "notice_utc": "2025-07-01T01:00:00Z"}])
    r, f = run("d_short_notice", pc.SCENARIO_16K, td, pc.REQ_ERCOT, s16, "--response-s", "3",
               response_s=3.0)
    print(f"  throttle_lever {r.targets.throttle_lever.iloc[0]}, first planned move "
          f"{pc.first_move(r, s16)}, response {r.targets.response_time_s.iloc[0]} s")
    _print_findings("d", f)

    te = _df([{"start_utc": "2025-07-01T01:00:00Z", "end_utc": "2025-07-01T01:05:00Z",
                   "cap_megawatts": 7.0}])
    r, f = run("e_pause", pc.SCENARIO_16K, te, pc.REQ_ERCOT, s16)
    fp, m = pc.check_pause_lost(r, s16)
    f["pause lost GPU-h"] = fp
    print(f"  pause: {m}")
    _print_findings("e", f)

    tf = _df([{"start_utc": "2025-07-01T01:00:00Z", "end_utc": "2025-07-01T01:05:00Z",
                   "cap_megawatts": round(s16.floor_it_megawatts, 4)}])
    r, f = run("f_cap_at_floor", pc.SCENARIO_16K, tf, pc.REQ_ERCOT, s16)
    print(f"  planned IT power min {r.schedule.planned_it_power_megawatts.min():.4f} MW vs "
          f"floor {s16.floor_it_megawatts:.4f}")
    _print_findings("f", f)

    print("\n[bad input] exit 2 with one line expected:")
    cases = {
        "above max": ("2025-07-01T01:00:00Z,2025-07-01T01:05:00Z,17.0", []),
        "below floor": ("2025-07-01T01:00:00Z,2025-07-01T01:05:00Z,6.0", []),
        "in the past": ("2025-06-30T01:00:00Z,2025-06-30T01:05:00Z,12.0", []),
        "overlapping": (("2025-07-01T01:00:00Z,2025-07-01T01:05:00Z,12.0\n"
                        "2025-07-01T01:03:00Z,2025-07-01T01:08:00Z,12.0"), []),
        "unknown tz (--tz)": ("2025-07-01T01:00:00,2025-07-01T01:05:00,12.0",
                              ["--tz", "Mars/Olympus_Mons"]),
        "unknown lever": ("2025-07-01T01:00:00Z,2025-07-01T01:05:00Z,12.0",
                          ["--levers", "power_cap,teleport"]),
    }
    for name, (rows, extra) in cases.items():
        p = tmp / "bad.csv"
        p.write_text("start_utc,end_utc,cap_megawatts\n" + rows + "\n")
        r = pc.run_plan(pc.SCENARIO_16K, p, pc.REQ_ERCOT, tmp / "bad", "--draws", "1", *extra)
        err = pc.bad_input_error(r)
        print(f"  {name}: exit {r.rc}: {r.stderr.strip()[:160]}"
              + ("" if err is None else f"  FINDING {err}"))
    print(f"\noutputs under {tmp}")


if __name__ == "__main__":
    main()
