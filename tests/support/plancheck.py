"""Independent checks of the files ``powerlab flex plan`` writes (issue 23).

Written from docs/flexibility.md, the issue, the scenario YAMLs and the CLI's ``--help``
only, without reading ``powerlab/flex``: every number below is recomputed from the CSVs
a facilities engineer would open (``plan_targets.csv``, ``plan_schedule.csv``,
``plan_levers.csv``, ``plan_ramps.csv``, ``plan_summary.txt``) and from the scenario's
physics as the scenario files state it.

Used by ``tests/flex/test_plan_outputs_indep.py`` and ``benchmarks/check_plan_outputs.py``.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_16K = ROOT / "data" / "scenarios" / "llama3_16k_h100.yaml"
SCENARIO_SMALL = ROOT / "data" / "scenarios" / "small.yaml"
REQ_ERCOT = ROOT / "data" / "requirements" / "ercot_large_load_illustrative.yaml"
REQ_SMALL = ROOT / "data" / "requirements" / "small_site_example.yaml"

# docs/flexibility.md, "ramp time": power cap 5 s, clock lock 2 s (LeverAssumptions).
CAP_RESPONSE_S = 5.0
LOCK_RESPONSE_S = 2.0
NOTCH_W = 5.0  # "5-W limit notches of the running jobs"

# unit suffixes a numeric column name may end with (STYLE: units in every name)
UNIT_TOKENS = ("_megawatts", "_megawatt_hours", "_megawatts_per_min", "_megawatts_per_s",
               "_s", "_w", "_mhz", "_fraction", "_gpu_hours", "_share", "_pct",
               "_probability")
COUNT_NAMES = {"violations", "jobs", "draws"}  # dimensionless counts


# ----------------------------------------------------------------------------- site


def _utc(s) -> pd.Timestamp:
    return pd.Timestamp(s).tz_convert("UTC") if pd.Timestamp(s).tzinfo else \
        pd.Timestamp(s).tz_localize("UTC")


@dataclass
class Site:
    """What the scenario file says about the site, in megawatts (IT boundary)."""

    full_it_megawatts: float      # every job training (nominal step mean)
    max_it_megawatts: float       # every GPU at TDP plus node overhead (docs: the maximum)
    floor_it_megawatts: float     # every GPU idle plus node overhead (docs: every job paused)
    pue_max: float                # highest steady-state PUE over the horizon
    jobs: dict = field(default_factory=dict)  # name -> {gpus, start, train_w, idle_w}
    start: pd.Timestamp = None
    end: pd.Timestamp = None
    battery: dict | None = None


def site_from_yaml(path) -> Site:
    """Site powers from the scenario YAML (physics as its comments and docs state it)."""
    s = yaml.safe_load(Path(path).read_text())
    hw, site = s["hardware"], s["site"]
    idle, comp, comm = hw["gpu_idle_w"], hw["gpu_compute_w"], hw["gpu_comm_w"]
    nodes = hw["cluster_gpus"] / hw["gpus_per_node"]
    overhead = nodes * hw["node_overhead_w"]
    jobs, busy = {}, 0
    for j in s["jobs"]:
        p = j.get("power", {}) or {}
        cw, mw = p.get("compute_w", comp), p.get("comm_w", comm)
        f = j["compute_fraction"]
        train = f * cw + (1 - f) * mw
        jobs[j["name"]] = {"gpus": j["gpus"], "start": _utc(j["start_utc"]), "train_w": train,
                               "idle_w": idle, "end": _utc(j["start_utc"])
                               + pd.Timedelta(seconds=j["duration_s"])}
        busy += j["gpus"]
    train_total = sum(v["gpus"] * v["train_w"] for v in jobs.values())
    full = (train_total + (hw["cluster_gpus"] - busy) * idle + overhead) / 1e6
    mx = (hw["cluster_gpus"] * hw["gpu_tdp_w"] + overhead) / 1e6
    fl = (hw["cluster_gpus"] * idle + overhead) / 1e6
    start, end = _utc(s["horizon"]["start_utc"]), _utc(s["horizon"]["end_utc"])
    c = site["cooling"]
    # ambient: a daily sinusoid peaking at ambient_peak_hour_local (my reading of the keys)
    t = pd.date_range(start, end, freq="60s")
    hours = t.tz_convert(site["tz"])
    h = hours.hour + hours.minute / 60
    amb = c["ambient_mean_c"] + c["ambient_amplitude_c"] * np.cos(
        2 * np.pi * (h - c["ambient_peak_hour_local"]) / 24)
    pue = c["pue_at_reference"] + c["pue_per_c"] * np.maximum(amb - c["reference_temp_c"], 0)
    bat = (s.get("mitigations") or {}).get("battery")
    return Site(full, mx, fl, float(pue.max()), jobs, start, end, bat)


# ----------------------------------------------------------------------------- running


@dataclass
class PlanRun:
    rc: int
    stdout: str
    stderr: str
    out: Path
    targets_in: pd.DataFrame | None = None
    scenario: Path | None = None

    def csv(self, name) -> pd.DataFrame:
        # a spreadsheet user's read: comment lines (if any) skipped, dates parsed
        return pd.read_csv(self.out / name, comment="#")

    @property
    def targets(self):
        d = self.csv("plan_targets.csv")
        for c in ("start_utc", "end_utc"):
            d[c] = pd.to_datetime(d[c])
        return d

    @property
    def schedule(self):
        d = self.csv("plan_schedule.csv")
        d["timestamp"] = pd.to_datetime(d["timestamp"])
        return d

    @property
    def levers(self):
        return self.csv("plan_levers.csv").set_index("lever")

    @property
    def ramps(self):
        return self.csv("plan_ramps.csv")

    @property
    def summary(self) -> str:
        return (self.out / "plan_summary.txt").read_text()


def run_plan(scenario, target, requirements, out, *extra, targets_in=None) -> PlanRun:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "powerlab.cli", "flex", "plan", str(scenario),
           "--target", str(target), "--requirements", str(requirements), "--out", str(out),
           "--quiet", *map(str, extra)]
    p = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=600)
    return PlanRun(p.returncode, p.stdout, p.stderr, Path(out), targets_in, Path(scenario))


def random_targets(site: Site, n, seed, first="00:30", minutes=5, lo=0.6, hi=1.0):
    """n non-overlapping `minutes`-long caps uniform in [lo, hi] x the site's IT power."""
    rng = np.random.default_rng(seed)
    t0 = site.start.normalize() + pd.Timedelta(first + ":00")
    slots = int((site.end - pd.Timedelta(minutes=30) - t0) / pd.Timedelta(minutes=minutes))
    pick = np.sort(rng.choice(slots, size=n, replace=False))
    start = t0 + pd.to_timedelta(pick * minutes, unit="min")
    caps = rng.uniform(lo, hi, n) * site.full_it_megawatts
    return pd.DataFrame({"start_utc": start, "end_utc": start + pd.Timedelta(minutes=minutes),
                         "cap_megawatts": np.round(caps, 4)})


def write_targets(df: pd.DataFrame, path) -> Path:
    d = df.copy()
    for c in d.columns:
        if c.endswith("_utc"):
            d[c] = pd.to_datetime(d[c]).dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    d.to_csv(path, index=False)
    return Path(path)


# ----------------------------------------------------------------------------- checks
# Each check returns a list of finding strings (empty = agrees with the definition).


def check_targets_kept(run: PlanRun) -> list[str]:
    """Every input target appears in plan_targets.csv (docs: 'Nothing is dropped')."""
    got, want = run.targets, run.targets_in
    out = []
    if len(got) != len(want):
        out.append(f"plan_targets.csv has {len(got)} rows for {len(want)} input targets")
    w = {(pd.Timestamp(a), pd.Timestamp(b), round(c, 4))
         for a, b, c in zip(want.start_utc, want.end_utc, want.cap_megawatts)}
    g = {(a, b, round(c, 4)) for a, b, c in zip(got.start_utc, got.end_utc, got.cap_megawatts)}
    if w - g:
        out.append(f"targets missing from plan_targets.csv: {sorted(w - g)[:3]}")
    return out


def expected_rc(run: PlanRun) -> int:
    """Exit 0 every target met in every draw and no ramp violated, 1 otherwise."""
    t, r = run.targets, run.ramps
    ok = bool(t["met"].astype(bool).all()) and int(r["violations"].sum()) == 0
    return 0 if ok else 1


def check_exit_code(run: PlanRun) -> list[str]:
    out = []
    t = run.targets
    if run.rc != expected_rc(run):
        out.append(f"exit {run.rc}, expected {expected_rc(run)} from met="
                   f"{t['met'].tolist()} and violations={run.ramps['violations'].tolist()}")
    bad = t[t["met"].astype(bool) != (t["met_share"] >= 1.0)]
    if len(bad):
        out.append(f"'met' disagrees with met_share == 1 on {len(bad)} targets")
    slow = t[t["met"].astype(bool) & (t["response_time_s"] > _response_s(run) + 1e-9)]
    if len(slow):
        out.append(f"{len(slow)} targets met with response_time_s above the response time")
    return out


def _response_s(run) -> float:
    return float(getattr(run, "response_s", 30.0))


def _averaging_s(run) -> float:
    return float(getattr(run, "averaging_s", 60.0))


def unitless_numeric_columns(run: PlanRun) -> list[str]:
    """Numeric columns whose name carries no unit, and any '_mw' name."""
    out = []
    for name in ("plan_targets.csv", "plan_schedule.csv", "plan_levers.csv",
                 "plan_ramps.csv"):
        d = run.csv(name)
        for c in d.columns:
            base = re.sub(r"\[.*\]$", "", c)
            if re.search(r"_mw($|_|\[)", c):
                out.append(f"{name}:{c} (named _mw)")
            if not pd.api.types.is_numeric_dtype(d[c]) or pd.api.types.is_bool_dtype(d[c]):
                continue
            if d[c].isna().all():
                continue
            if base in COUNT_NAMES or base.endswith(UNIT_TOKENS) or base.endswith("_share"):
                continue
            out.append(f"{name}:{c}")
    return out


def check_times(run: PlanRun) -> list[str]:
    """Timestamps: tz-aware UTC, ISO 8601, parseable by pandas without hints."""
    out = []
    for name, cols in (("plan_targets.csv", ["start_utc", "end_utc"]),
                       ("plan_schedule.csv", ["timestamp"])):
        raw = pd.read_csv(run.out / name, dtype=str)
        for c in cols:
            v = pd.to_datetime(raw[c])
            if v.dt.tz is None or str(v.dt.tz) not in ("UTC", "UTC+00:00"):
                out.append(f"{name}:{c} is not tz-aware UTC (tz={v.dt.tz})")
            if not raw[c].str.match(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?"
                                    r"(Z|\+00:00)$").all():
                out.append(f"{name}:{c} is not ISO 8601 UTC, e.g. {raw[c].iloc[0]!r}")
    return out


def grid_power(sched: pd.DataFrame) -> pd.Series:
    """The IT power the caps are judged on, as the schedule plans it."""
    return sched.set_index("timestamp")["planned_it_power_megawatts"]


def trailing_mean(p: pd.Series, window_s: float) -> pd.Series:
    """Trailing `window_s` mean of a sampled series (step-hold between samples)."""
    return p.rolling(f"{int(window_s)}s", closed="right").mean()


def baseline_nominal(site: Site, index: pd.DatetimeIndex) -> pd.Series:
    """Nominal IT power of the scenario as written [MW]: each job at its training power
    from its (original) start to its end, idle otherwise, plus node overhead. An upper
    bound during start-up (the plan counts a held job's shed from its start too)."""
    p = pd.Series(site.floor_it_megawatts, index=index)
    for j in site.jobs.values():
        on = (index >= j["start"]) & (index < j["end"])
        p[on] += j["gpus"] * (j["train_w"] - j["idle_w"]) / 1e6
    return p


def delivered_power(run: PlanRun, site: Site) -> pd.Series:
    """Baseline (nominal) less every lever's planned shed: what the levers deliver."""
    s = run.schedule.set_index("timestamp")
    sheds = [c for c in s.columns if c.startswith("shed_megawatts[")]
    return baseline_nominal(site, s.index) - s[sheds].sum(axis=1)


def check_caps(run: PlanRun, site: Site) -> tuple[list[str], pd.DataFrame]:
    """Recompute, per target, the worst trailing mean (averaging_s) after start + response
    of the schedule's planned power and of the power the levers deliver, against the cap
    and the reported 'met' (docs: 'target met')."""
    t = run.targets
    p_plan = grid_power(run.schedule)
    m_plan = trailing_mean(p_plan, _averaging_s(run))
    m_lever = trailing_mean(delivered_power(run, site), _averaging_s(run))
    rows, out = [], []
    resp = pd.Timedelta(seconds=_response_s(run))
    for _, r in t.iterrows():
        w = (m_plan.index >= r.start_utc + resp) & (m_plan.index < r.end_utc)
        over_plan = float((m_plan[w] - r.cap_megawatts).max())
        over_lever = float((m_lever[w] - r.cap_megawatts).max())
        late = m_plan.index[(m_plan.index >= r.start_utc) & (m_plan.index < r.end_utc)
                            & (m_plan > r.cap_megawatts + 1e-9)]
        resp_plan = ((late.max() - r.start_utc).total_seconds() + 10.0) if len(late) else 0.0
        rows.append({"start": r.start_utc, "cap": r.cap_megawatts, "met": bool(r.met),
                         "reported_overshoot": r.worst_overshoot_megawatts,
                         "planned_overshoot": over_plan, "lever_overshoot": over_lever,
                         "reported_response_s": r.response_time_s, "planned_response_s": resp_plan})
        if bool(r.met) and over_plan > 1e-6:
            out.append(f"target {r.start_utc} cap {r.cap_megawatts:.3f} MW reported met, "
                       f"but the schedule's planned power has a trailing mean "
                       f"{over_plan:+.4f} MW over it")
        if bool(r.met) and over_lever > 1e-3:
            out.append(f"target {r.start_utc} cap {r.cap_megawatts:.3f} MW reported met, but "
                       f"baseline - sum(shed) has a trailing mean {over_lever:+.4f} MW over it")
    return out, pd.DataFrame(rows)


def check_sheds_deliver(run: PlanRun, site: Site, notch_megawatts: float) -> list[str]:
    """Where the nominal baseline is above the planned power, the levers' sheds bring it
    down to at most the plan; where only caps, locks and the battery act on a site at full
    training, they overshoot the plan by no more than one 5-W notch of every GPU."""
    s = run.schedule.set_index("timestamp")
    plan = s["planned_it_power_megawatts"]
    dlv = delivered_power(run, site)
    gap = dlv - plan
    out = []
    if gap.max() > 1e-3:
        i = gap.idxmax()
        out.append(f"at {i} the levers leave {dlv[i]:.4f} MW, above the planned "
                   f"{plan[i]:.4f} MW ({gap[i]:+.4f})")
    fine = ((s["shed_megawatts[shift_start]"] == 0) & (s["shed_megawatts[pause]"] == 0)
            & (baseline_nominal(site, s.index) >= site.full_it_megawatts - 1e-9))
    g = -gap[fine]
    if len(g) and g.max() > notch_megawatts + 1e-3:
        i = g.idxmax()
        out.append(f"at {i} the levers shed {g[i]:.4f} MW more than planned "
                   f"(one 5-W notch of every GPU: {notch_megawatts:.4f} MW)")
    return out


def check_lever_energy(run: PlanRun) -> list[str]:
    """plan_levers peak/energy = max / integral of the schedule's shed columns;
    per-target shed = mean of the schedule over the target."""
    s, lv, t = run.schedule, run.levers, run.targets
    dt_h = s.timestamp.diff().dt.total_seconds().median() / 3600
    out = []
    for lever in lv.index:
        col = f"shed_megawatts[{lever}]"
        if col not in s:
            out.append(f"schedule has no {col}")
            continue
        pk, e = s[col].max(), s[col].sum() * dt_h
        # a 10-s sample can miss a peak held for less than 10 s: allow one sample step
        step = float(s[col].diff().abs().max()) if len(s) > 1 else 0.0
        rp = lv.loc[lever, "peak_shed_megawatts"]
        if not (pk - 1e-4 <= rp <= pk + step + 1e-4):
            out.append(f"{lever}: peak_shed {lv.loc[lever, 'peak_shed_megawatts']} vs "
                       f"schedule max {pk:.4f}")
        if abs(e - lv.loc[lever, "shed_megawatt_hours"]) > 2e-3 + 0.01 * e:
            out.append(f"{lever}: shed_megawatt_hours {lv.loc[lever, 'shed_megawatt_hours']} "
                       f"vs schedule integral {e:.4f}")
        # The schedule holds samples every 10 s of a shed that moves every second (5-W
        # notches on a ramp): if it is monotone between two samples, its mean over the
        # interval lies between them, so the target's mean lies in this bracket.
        v = s[col].to_numpy()
        lo = pd.Series(np.minimum(v, np.roll(v, -1)), index=s.index)
        hi = pd.Series(np.maximum(v, np.roll(v, -1)), index=s.index)
        for _, r in t.iterrows():
            w = (s.timestamp >= r.start_utc) & (s.timestamp < r.end_utc)
            a, b, rep = lo[w].mean(), hi[w].mean(), r[col]
            if not (a - 1e-4 <= rep <= b + 1e-4):
                out.append(f"target {r.start_utc}: {col} {rep:.4f} outside the schedule's "
                           f"bracket [{a:.4f}, {b:.4f}] (sample mean {s.loc[w, col].mean():.4f})")
    return out


def summary_total_lost(run: PlanRun) -> float:
    m = re.search(r"Lost training: ([\d,.]+) GPU-h", run.summary)
    return float(m.group(1).replace(",", ""))


def check_lost(run: PlanRun) -> list[str]:
    lv, t = run.levers, run.targets
    total = summary_total_lost(run)
    per_lever = float(lv["lost_gpu_hours"].sum())
    per_target = float(t["lost_gpu_hours"].sum())
    out = []
    if abs(per_lever - total) > 0.5 + 1e-3 * total:
        out.append(f"per-lever lost GPU-h add to {per_lever:.2f}, summary says {total}")
    if per_target > per_lever + 1e-6 + 1e-6 * per_lever:
        out.append(f"per-target lost GPU-h add to {per_target:.2f} > plan total {per_lever:.2f}")
    if (t["lost_gpu_hours"] < -1e-9).any() or (lv["lost_gpu_hours"] < -1e-9).any():
        out.append("negative lost GPU-h")
    dl = float(lv["delayed_gpu_hours"].sum())
    if float(t["delayed_gpu_hours"].sum()) > dl + 1e-6:
        out.append(f"per-target delayed {t['delayed_gpu_hours'].sum():.2f} > total {dl:.2f}")
    return out


def ramp_rates(run: PlanRun, site: Site) -> pd.DataFrame:
    """Allowed IT ramp rates recomputed from plan_ramps' limits and baseline ramps:
    max(limit - baseline ramp, 10 % of limit) / PUE_max, in MW/min (docs, plan step 1)."""
    r = run.ramps.copy()
    per_min = 1.0  # plan_ramps.csv states every ramp column in MW/min
    headroom = np.maximum(r["limit_megawatts_per_min"]
                          - r["worst_baseline_ramp_megawatts_per_min"],
                          0.1 * r["limit_megawatts_per_min"])
    r["my_rate_it_megawatts_per_min"] = headroom * per_min / site.pue_max
    return r


def check_ramps(run: PlanRun, site: Site) -> tuple[list[str], pd.DataFrame]:
    out = []
    r = ramp_rates(run, site)
    s = run.schedule
    p = grid_power(s)
    for d in ("up", "down"):
        rd = r[r.direction.isin([d, "both"])]
        mine = rd["my_rate_it_megawatts_per_min"].min()
        rep = rd["plan_rate_it_megawatts_per_min"].iloc[0]
        if abs(mine - rep) > 0.01 * rep:
            out.append(f"{d}: plan_rate_it {rep:.4f} MW/min, recomputed "
                       f"min over requirements of max(limit - baseline, 0.1 limit)/PUE_max "
                       f"({site.pue_max:.4f}) = {mine:.4f}")
    # ramps of the planned power over each requirement's window (adjacent window means)
    rows = []
    for _, q in r.iterrows():
        w = float(q.window_s)
        if w < 2 * s.timestamp.diff().dt.total_seconds().median():
            continue  # the 10-s schedule cannot resolve a 1-s window
        means = p.resample(f"{int(w)}s", origin=site.start).mean()
        dm = means.diff().dropna() * (60.0 / w)  # MW/min
        worst = float(dm.max() if q.direction == "up" else -dm.min())
        rows.append({"requirement": q.requirement, "direction": q.direction, "window_s": w,
                         "planned_it_worst_megawatts_per_min": worst,
                         "plan_rate_it_megawatts_per_min": q.plan_rate_it_megawatts_per_min,
                         "limit": q.limit_megawatts_per_min,
                         "worst_plan_ramp": q.worst_plan_ramp_megawatts_per_min})
        if worst > q.plan_rate_it_megawatts_per_min * 1.01 + 1e-6:
            out.append(f"{q.requirement} {q.direction}: the schedule's planned IT power ramps "
                       f"{worst:.4f} MW/min over {w:.0f}-s means, above its plan rate "
                       f"{q.plan_rate_it_megawatts_per_min:.4f}")
    for _, q in r.iterrows():
        q = q.rename({"limit_megawatts_per_min": "limit",
                      "worst_plan_ramp_megawatts_per_min": "worst_plan_ramp",
                      "worst_baseline_ramp_megawatts_per_min": "worst_baseline_ramp"})
        if q.worst_plan_ramp <= q.limit and q.violations > 0:
            out.append(f"{q.requirement} {q.direction}: {q.violations} violations although "
                       f"worst_plan_ramp {q.worst_plan_ramp} <= limit {q.limit}")
        if q.worst_plan_ramp > max(q.limit, q.worst_baseline_ramp) + 1e-9 and q.violations == 0:
            out.append(f"{q.requirement} {q.direction}: worst_plan_ramp {q.worst_plan_ramp} "
                       f"over the limit {q.limit} and the baseline "
                       f"{q.worst_baseline_ramp} yet 0 violations")
    return out, pd.DataFrame(rows)


def check_battery(run: PlanRun, site: Site) -> tuple[list[str], dict]:
    b = site.battery
    rating, energy = b["power_megawatts"], b["energy_megawatt_hours"]
    soc0 = b.get("initial_soc_fraction", 0.5)
    soc_min, soc_max = b.get("soc_min_fraction", 0.0), b.get("soc_max_fraction", 1.0)
    eff = b.get("round_trip_efficiency", 1.0)
    s, lv, t = run.schedule, run.levers, run.targets
    dt_h = s.timestamp.diff().dt.total_seconds().median() / 3600
    soc, dis = s["storage_soc_fraction"], s["storage_discharge_megawatts"]
    e_sched = float(dis.sum() * dt_h)
    e_soc = float((soc0 - soc.iloc[-1]) * energy)
    rep = lv.loc["storage"]
    m = {"soc_min": float(soc.min()), "soc_max": float(soc.max()),
             "discharge_max_megawatts": float(dis.max()), "energy_schedule_megawatt_hours": e_sched,
             "energy_soc_megawatt_hours": e_soc,
             "reported_discharge_megawatt_hours": float(rep.storage_discharge_megawatt_hours),
             "reported_recharge_megawatt_hours": float(rep.storage_recharge_megawatt_hours),
             "usable_megawatt_hours": (soc0 - soc_min) * energy}
    out = []
    if soc.min() < soc_min - 1e-9:
        out.append(f"state of charge {soc.min():.5f} below its minimum {soc_min}")
    if soc.max() > min(soc_max, 1.0) + 1e-9:
        out.append(f"state of charge {soc.max():.5f} above {min(soc_max, 1.0)}")
    if abs(soc.iloc[0] - soc0) > 1e-6:
        out.append(f"state of charge starts at {soc.iloc[0]}, scenario says {soc0}")
    if dis.max() > rating + 1e-9:
        out.append(f"discharge {dis.max():.4f} MW above the rating {rating}")
    if (dis < -1e-9).any():
        out.append("negative discharge (recharge) inside the horizon")
    if soc.diff().max() > 1e-9:
        out.append("state of charge rises although the plan does not recharge")
    tick_e = rating * dt_h
    if abs(e_sched - e_soc) > tick_e:
        out.append(f"energy discharged {e_sched:.4f} MWh (schedule) vs SOC drop x energy "
                   f"{e_soc:.4f} MWh")
    if abs(m["reported_discharge_megawatt_hours"] - e_soc) > tick_e:
        out.append(f"plan_levers storage_discharge {m['reported_discharge_megawatt_hours']} MWh "
                   f"vs SOC drop x energy {e_soc:.4f}")
    if m["reported_discharge_megawatt_hours"] > m["usable_megawatt_hours"] + 1e-6:
        out.append("discharged more than (initial - minimum) x energy")
    if abs(m["reported_recharge_megawatt_hours"] - m["reported_discharge_megawatt_hours"] / eff) \
            > 1e-3:
        out.append(f"recharge {m['reported_recharge_megawatt_hours']} != discharged / "
                   f"efficiency {m['reported_discharge_megawatt_hours'] / eff:.4f}")
    if abs(rep.storage_soc_fraction - soc.min()) > 1e-4:
        out.append(f"plan_levers storage_soc_fraction {rep.storage_soc_fraction} vs schedule "
                   f"lowest {soc.min():.5f}")
    # per target: SOC at its end (the last tick inside it; within one tick at the rating)
    for _, r in t.iterrows():
        w = s.timestamp <= r.end_utc
        last = float(soc[w].iloc[-1])
        if abs(last - r.storage_soc_fraction) > tick_e / energy + 1e-6:
            out.append(f"target {r.start_utc}: storage_soc_fraction {r.storage_soc_fraction} "
                       f"vs schedule {last:.5f} at its end")
    return out, m


def check_shift(run: PlanRun, site: Site) -> tuple[list[str], pd.DataFrame]:
    """Held jobs start at or after the end of the target window they were held in, and
    the plan's delayed GPU-h = sum of GPUs x hold (docs: 'gpus x hold')."""
    s, t, lv = run.schedule, run.targets, run.levers
    dt = s.timestamp.diff().dt.total_seconds().median()
    rows, out = [], []
    for name, j in site.jobs.items():
        col = f"lever[{name}]"
        held = s.timestamp[s[col] == "shift_start"]
        if held.empty:
            continue
        # the first schedule tick after the last held one: the job's start (within a tick)
        start_new = held.max() + pd.Timedelta(seconds=dt)
        hold_s = (start_new - j["start"]).total_seconds()
        win = t[(t.start_utc <= j["start"]) & (t.end_utc > j["start"])]
        if win.empty:  # held although its start is in no target (e.g. in a ramp-down)
            win_end = None
        else:
            win_end = win.end_utc.iloc[0]
        rows.append({"job": name, "gpus": j["gpus"], "start_planned": j["start"],
                         "start_new": start_new, "hold_s": hold_s, "window_end": win_end,
                         "delayed_gpu_hours": j["gpus"] * hold_s / 3600})
        if win_end is not None and start_new < win_end:
            out.append(f"{name} held for the window ending {win_end} starts at {start_new}")
        if hold_s > 3600 + dt:
            out.append(f"{name} held {hold_s:.0f} s, longer than shift_max_hold_s (1 h)")
    d = pd.DataFrame(rows)
    if len(d):
        mine = d.delayed_gpu_hours.sum()
        rep = float(lv["delayed_gpu_hours"].sum())
        tol = d.gpus.sum() * dt / 3600
        if abs(mine - rep) > tol:
            out.append(f"delayed GPU-h {rep:.3f} reported, sum of GPUs x hold from the "
                       f"schedule {mine:.3f} (tolerance one 10-s tick: {tol:.3f})")
    return out, d


def first_move(run: PlanRun, site: Site) -> pd.Timestamp:
    s = run.schedule
    below = s.timestamp[s["planned_it_power_megawatts"] < site.full_it_megawatts - 1e-4]
    return below.min()


def bad_input_error(run: PlanRun) -> str | None:
    """None if the run is an honest bad-input answer: exit 2, one line, no traceback."""
    err = run.stderr.strip()
    if run.rc != 2:
        return f"exit {run.rc} (stderr {err[-200:]!r})"
    if "Traceback" in err:
        return "traceback"
    if len(err.splitlines()) != 1:
        return f"{len(err.splitlines())} lines of stderr: {err[:300]!r}"
    return None


def check_all(run: PlanRun, site: Site) -> dict[str, list[str]]:
    notch = sum(j["gpus"] for j in site.jobs.values()) * NOTCH_W / 1e6
    f = {"targets kept": check_targets_kept(run), "exit code": check_exit_code(run),
         "times": check_times(run), "caps": check_caps(run, site)[0],
         "sheds deliver": check_sheds_deliver(run, site, notch),
         "lever energy": check_lever_energy(run), "lost GPU-h": check_lost(run),
         "ramps": check_ramps(run, site)[0]}
    return f



def delivered_ramps(run: PlanRun, site: Site, window_s: float = 60.0) -> dict:
    """Worst ramps [MW/min] of adjacent `window_s` means of the power the levers deliver
    (nominal baseline less every planned shed), down and up, away from the job's own start
    and end (the baseline's steps there are not the plan's)."""
    p = delivered_power(run, site)
    base = baseline_nominal(site, p.index)
    means = p.resample(f"{int(window_s)}s", origin=site.start).mean()
    dm = means.diff() * (60.0 / window_s)
    steps = base.index[base.diff().fillna(0).abs() > 1e-9]
    for t in steps:  # drop the window pairs around a job's own start or end
        dm[(dm.index >= t - pd.Timedelta(seconds=window_s))
           & (dm.index <= t + pd.Timedelta(seconds=2 * window_s))] = np.nan
    return {"down": float(-dm.min()), "up": float(dm.max()),
                "down_at": dm.idxmin(), "up_at": dm.idxmax()}


def check_pause_lost(run: PlanRun, site: Site) -> tuple[list[str], dict]:
    """Paused: 'gpus dt, plus gpus x (startup_s + checkpoint_s) per restart' (docs)."""
    s, lv = run.schedule, run.levers
    dt = s.timestamp.diff().dt.total_seconds().median()
    sc = yaml.safe_load(Path(run.scenario).read_text())
    out, m = [], {}
    paused_h = restart_h = 0.0
    for j in sc["jobs"]:
        col = f"paused[{j['name']}]"
        on = s[col].astype(bool).to_numpy()
        if not on.any():
            continue
        runs = int(((~np.r_[False, on[:-1]]) & on).sum())
        g = j["gpus"]
        paused_h += g * on.sum() * dt / 3600
        restart_h += runs * g * (j["startup_s"] + j.get("checkpoint", {}).get("duration_s", 0)) \
            / 3600
        m[j["name"]] = {"paused_s": on.sum() * dt, "restarts": runs}
    rep = lv.loc["pause"]
    m.update(paused_gpu_hours=paused_h, restart_gpu_hours=restart_h,
             reported_lost=float(rep.lost_gpu_hours),
             reported_restart=float(rep.restart_gpu_hours))
    tol = sum(j["gpus"] for j in sc["jobs"]) * dt / 3600
    if abs(restart_h - rep.restart_gpu_hours) > 1e-3 * max(restart_h, 1):
        out.append(f"pause restart GPU-h {rep.restart_gpu_hours} vs gpus x (startup + "
                   f"checkpoint) per restart {restart_h:.2f}")
    if abs(paused_h + restart_h - rep.lost_gpu_hours) > tol:
        out.append(f"pause lost GPU-h {rep.lost_gpu_hours} vs paused time x gpus + restarts "
                   f"{paused_h + restart_h:.2f} (one tick {tol:.2f})")
    return out, m


def prior_cap_lost(run: PlanRun, site: Site, b1: float = 0.30,
                   bracket: str | None = None) -> float:
    """Lost GPU-h of the power caps recomputed from the schedule's power_limit_w with the
    stated prior (docs): r(y) = y**b1 (b2 = 0), y = P(L)/P_ref, P(L) = min(L, P_ref)
    (kappa = 1), P_ref the job's mean busy power; lost = sum gpus x (1 - r) dt. The
    'weighted by the draws' share of time training' factor is not applied (<= 1)."""
    s = run.schedule
    dt_h = s.timestamp.diff().dt.total_seconds().median() / 3600
    total = 0.0
    for name, j in site.jobs.items():
        lim = s[f"power_limit_w[{name}]"].to_numpy(dtype=float)
        lim = np.where(np.isnan(lim), np.inf, lim)
        if bracket:  # limits monotone between 10-s samples: the interval's extreme
            nxt = np.r_[lim[1:], lim[-1:]]
            lim = np.minimum(lim, nxt) if bracket == "high" else np.maximum(lim, nxt)
        y = np.minimum(lim, j["train_w"]) / j["train_w"]
        total += float((j["gpus"] * (1 - y**b1) * dt_h).sum())
    return total
