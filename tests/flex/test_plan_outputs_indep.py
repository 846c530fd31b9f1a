"""Independent check of ``powerlab flex plan``'s output files, as a facilities engineer.

Written from docs/flexibility.md ("Definitions", "Targets", "Plan"), issue 23 and the
CLI's ``--help`` only, without reading ``powerlab/flex``: the CLI is run as a subprocess
and every number is recomputed from the CSVs it writes (``tests/support/plancheck.py``).

Definitions checked (docs/flexibility.md):

- "target met: the trailing ``averaging_s`` (60 s) mean of the power at the targets'
  boundary ... is at or under the cap at every tick from ``start + response_s`` (30 s) to
  the end, in a draw; 'met' in the plan's table = in every draw";
- exit codes: "exit 0 every target met in every draw and no ramp violated, 1 not, 2 bad
  input"; "Nothing is dropped: every target appears in ``plan_targets.csv``";
- "allowed ramp rates: each ``kind: ramp`` requirement's limit less the baseline's own
  largest ramp of the same window means ..., at least 10 % of the limit, divided by the
  highest PUE";
- "storage state of charge ``soc(t) = soc0 - sum of discharge x dt`` over the energy ...
  kept at or above ``soc_min_fraction``; ... recharge needs ``discharged /
  round_trip_efficiency``";
- "delayed GPU-hours: a shifted start: ``gpus x hold``"; "a job whose start falls in a
  shed stretch is held until the stretch ends (the planned power back at full)";
- "a target's throttling lever is a power cap when the time from its notice to ``start +
  response_s`` is at least ``power_cap_response_s`` ..., a clock lock otherwise ... The
  descent starts no earlier than the notice plus that lever's response";
- bad input: "a cap ... below its floor (every job paused), a target ending before the plan starts, ...
  overlapping targets, ... an unknown zone" -> one-line errors, exit 2.
"""
from __future__ import annotations

import pandas as pd
import pytest
import yaml

from tests.support import plancheck as pc

DRAWS = "3"


def _targets_df(rows):
    d = pd.DataFrame(rows)
    for c in d.columns:
        if c.endswith("_utc"):
            d[c] = pd.to_datetime(d[c], utc=True)
    return d


def _run(tmp, name, scenario, targets, req, *extra, response_s=30.0):
    path = pc.write_targets(targets, tmp / f"{name}.csv")
    run = pc.run_plan(scenario, path, req, tmp / name, "--draws", DRAWS, *extra,
                      targets_in=targets)
    run.response_s = response_s
    assert run.rc in (0, 1), run.stderr[-2000:]
    return run


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def site16k():
    return pc.site_from_yaml(pc.SCENARIO_16K)


@pytest.fixture(scope="module")
def run_a(tmp_path_factory, site16k):
    """(a) 12 random non-overlapping 5-min caps in 60-100 % of the site's IT power."""
    tmp = tmp_path_factory.mktemp("a")
    t = pc.random_targets(site16k, n=12, seed=3)
    return _run(tmp, "a", pc.SCENARIO_16K, t, pc.REQ_ERCOT)


@pytest.fixture(scope="module")
def battery_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bat")
    s = yaml.safe_load(pc.SCENARIO_16K.read_text())
    # keys from docs/scenarios.md (mitigations.battery.*) and the 16k file's comment
    s["mitigations"]["battery"] = {"power_megawatts": 2.0, "energy_megawatt_hours": 0.5,
                                       "round_trip_efficiency": 0.9, "window_s": 120,
                                       "initial_soc_fraction": 0.9, "soc_min_fraction": 0.2}
    path = tmp / "llama3_16k_battery.yaml"
    path.write_text(yaml.safe_dump(s))
    return path, pc.site_from_yaml(path)


@pytest.fixture(scope="module")
def run_b(tmp_path_factory, battery_site):
    """(b) a 2 MW / 0.5 MWh battery (0.35 MWh usable) against two deep 5-min caps: it can
    cover only part of the shed."""
    tmp = tmp_path_factory.mktemp("b")
    t = _targets_df([
        {"start_utc": "2025-07-01T01:00:00Z", "end_utc": "2025-07-01T01:05:00Z",
             "cap_megawatts": 11.0},
        {"start_utc": "2025-07-01T01:30:00Z", "end_utc": "2025-07-01T01:35:00Z",
             "cap_megawatts": 9.5}])
    return _run(tmp, "b", battery_site[0], t, pc.REQ_ERCOT)


@pytest.fixture(scope="module")
def site_small():
    return pc.site_from_yaml(pc.SCENARIO_SMALL)


@pytest.fixture(scope="module")
def run_c(tmp_path_factory, site_small):
    """(c) small.yaml: both jobs start at 12:05, inside a 12:03-12:20 cap at 0.6 MW
    (below the site's 0.888 MW training power, above its 0.397 MW floor)."""
    tmp = tmp_path_factory.mktemp("c")
    t = _targets_df([{"start_utc": "2025-06-02T12:03:00Z", "end_utc": "2025-06-02T12:20:00Z",
                          "cap_megawatts": 0.6}])
    return _run(tmp, "c", pc.SCENARIO_SMALL, t, pc.REQ_SMALL)


@pytest.fixture(scope="module")
def run_d(tmp_path_factory):
    """(d) a cap known only at its start (notice_utc = start) with a 3-s response: no time
    for a 5-s power cap, so the fastest throttling lever (clock lock, 2 s) must act."""
    tmp = tmp_path_factory.mktemp("d")
    t = _targets_df([{"start_utc": "2025-07-01T01:00:00Z", "end_utc": "2025-07-01T01:05:00Z",
                          "cap_megawatts": 13.0, "notice_utc": "2025-07-01T01:00:00Z"}])
    return _run(tmp, "d", pc.SCENARIO_16K, t, pc.REQ_ERCOT, "--response-s", "3",
                response_s=3.0)


CASES = ["run_a", "run_b", "run_c", "run_d"]
SITES = {"run_a": "site16k", "run_b": "battery_site", "run_c": "site_small",
         "run_d": "site16k"}


def _get(request, case):
    run = request.getfixturevalue(case)
    site = request.getfixturevalue(SITES[case])
    return run, (site[1] if isinstance(site, tuple) else site)


# ----------------------------------------------------------------------------- all cases


def test_site_power_from_the_scenario_matches_the_plan(site16k, run_a):
    """The site's IT power as the scenario states it (16,384 x (0.85 x 650 + 0.15 x 300) W
    + 2,048 x 2.5 kW = 14.909 MW; docs: 'IT power 14.91 MW') is the schedule's level
    before any target."""
    assert site16k.full_it_megawatts == pytest.approx(14.90944, abs=1e-5)
    s = run_a.schedule
    first = run_a.targets.start_utc.min()
    early = s[s.timestamp < first - pd.Timedelta(minutes=10)]
    assert early["planned_it_power_megawatts"].max() == pytest.approx(
        site16k.full_it_megawatts, abs=1e-3)


@pytest.mark.parametrize("case", CASES)
def test_every_target_kept_and_exit_code(request, case):
    run, _ = _get(request, case)
    assert pc.check_targets_kept(run) == []
    assert pc.check_exit_code(run) == []


@pytest.mark.parametrize("case", CASES)
def test_timestamps_utc_iso(request, case):
    run, _ = _get(request, case)
    assert pc.check_times(run) == []


@pytest.mark.parametrize("case", CASES)
def test_no_mw_names(request, case):
    run, _ = _get(request, case)
    assert [c for c in pc.unitless_numeric_columns(run) if "_mw" in c] == []


def test_numeric_columns_carry_units(run_a):
    """STYLE: units in every name (power_megawatts, ramp_megawatts_per_min)."""
    assert pc.unitless_numeric_columns(run_a) == []


@pytest.mark.parametrize("case", CASES)
def test_caps_recomputed_from_schedule(request, case):
    """Trailing 60-s means of the schedule's planned power, and of the nominal baseline
    less every lever's planned shed, are at or under each cap reported met."""
    run, site = _get(request, case)
    findings, _ = pc.check_caps(run, site)
    assert findings == []


@pytest.mark.parametrize("case", CASES)
def test_sheds_deliver_the_planned_power(request, case):
    run, site = _get(request, case)
    notch = sum(j["gpus"] for j in site.jobs.values()) * pc.NOTCH_W / 1e6
    assert pc.check_sheds_deliver(run, site, notch) == []


@pytest.mark.parametrize("case", CASES)
def test_lever_table_matches_schedule(request, case):
    """plan_levers' peak and MWh and plan_targets' mean shed per lever are the max,
    integral and mean of the schedule's shed columns."""
    run, _ = _get(request, case)
    assert pc.check_lever_energy(run) == []


@pytest.mark.parametrize("case", CASES)
def test_lost_gpu_hours_add_up(request, case):
    run, _ = _get(request, case)
    assert pc.check_lost(run) == []


@pytest.mark.parametrize("case", CASES)
def test_ramps_recomputed(request, case):
    """Allowed IT rate = min over ramp requirements of max(limit - baseline ramp,
    0.1 limit) / PUE_max; the schedule's planned power ramps no faster over each
    requirement's window means; violations agree with worst ramps and limits."""
    run, site = _get(request, case)
    findings, table = pc.check_ramps(run, site)
    assert findings == []
    assert len(table) >= 2  # both directions of the 1-min requirement were recomputed


# ----------------------------------------------------------------------------- per case


def test_a_random_caps_all_met(run_a, site16k):
    """Docs: 200 of 200 such caps met on this site; 12 here, 3 draws."""
    t = run_a.targets
    assert t.cap_megawatts.between(0.6 * site16k.full_it_megawatts - 1e-3,
                                   site16k.full_it_megawatts + 1e-3).all()
    assert t["met"].astype(bool).all(), t[["start_utc", "cap_megawatts", "met_share"]]
    assert run_a.rc == 0


def test_b_battery_state_of_charge(run_b, battery_site):
    findings, m = pc.check_battery(run_b, battery_site[1])
    assert findings == [], m
    lv = run_b.levers
    assert bool(lv.loc["storage", "used"]) and bool(lv.loc["power_cap", "used"])
    # partly covered: the battery spends its usable 0.35 MWh, caps shed the rest
    assert m["reported_discharge_megawatt_hours"] == pytest.approx(0.35, abs=1e-3)
    assert lv.loc["power_cap", "lost_gpu_hours"] > 0


def test_c_shifted_starts(run_c, site_small):
    findings, d = pc.check_shift(run_c, site_small)
    assert findings == []
    assert set(d.job) == {"pretrain", "finetune"}
    assert (run_c.levers.loc["shift_start", "delayed_gpu_hours"] > 0)
    assert run_c.levers.loc[["power_cap", "clock_lock", "pause"], "lost_gpu_hours"].sum() == 0


def test_c_no_throttle_lever_where_none_throttles(run_c):
    """'throttle_lever' names the lever that throttles for the target: with shifted
    starts alone (no cap, no lock shed) it is 'none' (issue 23, finding 6)."""
    t = run_c.targets
    assert float(t["shed_megawatts[power_cap]"].max()) == 0.0
    assert float(t["shed_megawatts[clock_lock]"].max()) == 0.0
    assert (t.throttle_lever == "none").all(), t.throttle_lever.tolist()


def test_d_short_notice_uses_the_clock_lock(run_d, site16k):
    t = run_d.targets.iloc[0]
    assert t.throttle_lever == "clock_lock"
    assert bool(run_d.levers.loc["clock_lock", "used"])
    assert not bool(run_d.levers.loc["power_cap", "used"])
    # the descent starts no earlier than notice + 2 s (first 10-s row below full)
    assert pc.first_move(run_d, site16k) >= t.start_utc + pd.Timedelta(seconds=2)
    # a 60-s trailing mean cannot be under a cap 1.9 MW below full 3 s after notice
    assert not bool(t.met) and run_d.rc == 1
    _, rows = pc.check_caps(run_d, site16k)
    assert rows.planned_overshoot.iloc[0] > 0


# ----------------------------------------------------------------------------- bad input

BAD = {
    "below_floor": ("2025-07-01T01:00:00Z", "2025-07-01T01:05:00Z", "6.0", None),
    "in_past": ("2025-06-30T01:00:00Z", "2025-06-30T01:05:00Z", "12.0", None),
    "overlap": ("2025-07-01T01:00:00Z", "2025-07-01T01:05:00Z", "12.0",
                "2025-07-01T01:03:00Z,2025-07-01T01:08:00Z,12.0"),
    "unknown_tz_cli": ("2025-07-01T01:00:00", "2025-07-01T01:05:00", "12.0", None),
    "unknown_lever": ("2025-07-01T01:00:00Z", "2025-07-01T01:05:00Z", "12.0", None),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_one_line_exit_2(tmp_path, case, site16k):
    """Site maximum 16,384 x 700 W + 2,048 x 2.5 kW = 16.589 MW; floor (all idle)
    16,384 x 75 W + 5.12 MW = 6.349 MW; the horizon starts 2025-07-01 00:00 UTC."""
    assert site16k.max_it_megawatts == pytest.approx(16.5888)
    assert site16k.floor_it_megawatts == pytest.approx(6.3488)
    start, end, cap, extra = BAD[case]
    lines = ["start_utc,end_utc,cap_megawatts", f"{start},{end},{cap}"]
    if extra:
        lines.append(extra)
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    args = []
    if case == "unknown_tz_cli":
        args = ["--tz", "Mars/Olympus_Mons"]
    if case == "unknown_lever":
        args = ["--levers", "power_cap,teleport"]
    run = pc.run_plan(pc.SCENARIO_16K, path, pc.REQ_ERCOT, tmp_path / "o", "--draws", "1",
                      *args)
    assert pc.bad_input_error(run) is None, pc.bad_input_error(run)


def test_a_cap_above_the_site_maximum_binds_nothing(tmp_path, site16k):
    """Changed by issue 33 item 4 (this case was a bad input before): a cap above the
    site maximum (16.589 MW IT) binds nothing; the plan takes it, sheds nothing for it
    and says so in a warning."""
    path = tmp_path / "t.csv"
    path.write_text("start_utc,end_utc,cap_megawatts\n"
                    "2025-07-01T01:00:00Z,2025-07-01T01:05:00Z,17.0\n")
    run = pc.run_plan(pc.SCENARIO_16K, path, pc.REQ_ERCOT, tmp_path / "o", "--draws", "1")
    assert run.rc in (0, 1) and "Traceback" not in run.stderr, run.stderr
    assert "non-binding, nothing to shed" in run.stderr
    t = run.csv("plan_targets.csv")
    assert len(t) == 1 and bool(t["met"].iloc[0])
    shed = [c for c in t.columns if c.startswith("shed_megawatts[")]
    assert float(t[shed].to_numpy().sum()) == 0.0


def test_bad_input_unknown_zone_in_the_file(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("start_utc,end_utc,cap_megawatts\n"
                    "2025-07-01 01:00 Mars/Olympus_Mons,2025-07-01 01:05 Mars/Olympus_Mons,"
                    "12.0\n")
    run = pc.run_plan(pc.SCENARIO_16K, path, pc.REQ_ERCOT, tmp_path / "o", "--draws", "1")
    assert pc.bad_input_error(run) is None, pc.bad_input_error(run)


# ----------------------------------------------------------------------------- issue target


@pytest.mark.slow
def test_issue_target_200_random_caps(tmp_path, site16k):
    """Issue 23: 'a plan that meets >= 99 % of 200 random 5-min targets between 60 % and
    100 % of IT power, with no ramp requirement violated'; every check above on it."""
    t = pc.random_targets(site16k, n=200, seed=11)
    run = _run(tmp_path, "t200", pc.SCENARIO_16K, t, pc.REQ_ERCOT)
    f = pc.check_all(run, site16k)
    assert {k: v for k, v in f.items() if v} == {}
    assert run.targets["met"].astype(bool).mean() >= 0.99
    assert int(run.ramps["violations"].sum()) == 0


# ----------------------------------------------------------------------------- pauses


@pytest.fixture(scope="module")
def run_e(tmp_path_factory):
    """(e) a 7.0 MW cap, 0.65 MW above the site's 6.35 MW floor: below what the lowest
    power cap (200 W: 16,384 x 200 W + 5.12 MW = 8.40 MW) reaches, so only a pause
    meets it."""
    tmp = tmp_path_factory.mktemp("e")
    t = _targets_df([{"start_utc": "2025-07-01T01:00:00Z", "end_utc": "2025-07-01T01:05:00Z",
                          "cap_megawatts": 7.0}])
    return _run(tmp, "e", pc.SCENARIO_16K, t, pc.REQ_ERCOT)


def test_e_pause_met_and_lost_gpu_hours(run_e, site16k):
    """Lost GPU-h of a pause: 'paused: gpus dt, plus gpus x (startup_s + checkpoint_s)
    per restart' (16,384 x (600 + 60) s = 3,003.7 GPU-h per restart)."""
    f = pc.check_all(run_e, site16k)
    f.pop("sheds deliver")  # the pause step over-sheds the plan: see the xfail below
    assert {k: v for k, v in f.items() if v} == {}
    findings, m = pc.check_pause_lost(run_e, site16k)
    assert findings == [], m
    assert m["restart_gpu_hours"] == pytest.approx(16384 * 660 / 3600)
    assert bool(run_e.targets.met.iloc[0]) and run_e.rc == 0


def test_e_caps_only_ramps_within_the_plan_rate(run_a, site16k):
    """Where only power caps act, the levers' power (nominal baseline less planned shed)
    ramps over 1-min means no faster than the plan rate plus one 5-W notch of every GPU
    (0.082 MW) per minute."""
    r = pc.delivered_ramps(run_a, site16k)
    rates = run_a.ramps.set_index("direction").plan_rate_it_megawatts_per_min
    notch = 16384 * pc.NOTCH_W / 1e6
    assert r["down"] <= rates["down"] + notch
    assert r["up"] <= rates["up"] + notch


@pytest.mark.xfail(strict=True, reason=(
    "a pause steps the levers' power: a 7.0 MW cap on the 16k site gives 1-min-mean ramps "
    "of the planned levers (baseline - sum of schedule sheds) of 1.56 MW/min down (00:57) "
    "and 2.13 MW/min up (01:07) against the plan's own allowed IT rates 0.77 / 0.96 "
    "MW/min (x PUE 1.3: 2.0 / 2.8 MW/min at the facility, on top of the baseline's 9.0 "
    "MW/min checkpoint ramps under a 10 MW/min limit); the 2.05 MW step is the minimum "
    "limit's power (200 W) to idle (75 W) x 16,384 GPUs; plan_ramps.csv reports 0 "
    "violations in 3 draws"))
def test_e_pause_ramps_within_the_plan_rate(run_e, site16k):
    r = pc.delivered_ramps(run_e, site16k)
    rates = run_e.ramps.set_index("direction").plan_rate_it_megawatts_per_min
    notch = 16384 * pc.NOTCH_W / 1e6
    assert r["down"] <= rates["down"] + notch, r
    assert r["up"] <= rates["up"] + notch, r


def test_e_pause_step_over_the_plan_rate_is_reported(run_e, run_a, site16k):
    """Issue 23 finding 4: where the levers' own planned power (baseline less the planned
    sheds) ramps faster than the plan's allowed rate, plan_ramps.csv says so per
    direction, at least as fast as the grid-aligned 1-min means recomputed here, and the
    summary warns; with caps only (run_a) nothing is flagged."""
    r = pc.delivered_ramps(run_e, site16k)
    q = run_e.ramps.set_index("direction")
    assert q["lever_ramp_over_plan_rate"].astype(bool).all()
    for d in ("up", "down"):
        assert q.loc[d, "worst_lever_ramp_it_megawatts_per_min"] >= r[d] - 1e-3, (d, r)
    assert "faster than the allowed" in (run_e.out / "plan_summary.txt").read_text()
    assert not run_a.ramps["lever_ramp_over_plan_rate"].astype(bool).any()


def test_cap_at_the_floor_is_planned_reachably(tmp_path, site16k):
    t = _targets_df([{"start_utc": "2025-07-01T01:00:00Z", "end_utc": "2025-07-01T01:05:00Z",
                          "cap_megawatts": round(site16k.floor_it_megawatts, 4)}])
    run = _run(tmp_path, "floor", pc.SCENARIO_16K, t, pc.REQ_ERCOT)
    assert run.schedule["planned_it_power_megawatts"].min() >= \
        site16k.floor_it_megawatts - 1e-6


# ----------------------------------------------------------------------------- late notice


@pytest.fixture(scope="module")
def run_g(tmp_path_factory):
    """(g) a cap notified 2 min after its start: 'a late notice gives a late response,
    reported, not a too-fast ramp'; the planner 'never acts on a target before' notice."""
    tmp = tmp_path_factory.mktemp("g")
    t = _targets_df([{"start_utc": "2025-07-01T01:00:00Z", "end_utc": "2025-07-01T01:05:00Z",
                          "cap_megawatts": 12.0, "notice_utc": "2025-07-01T01:02:00Z"}])
    return _run(tmp, "g", pc.SCENARIO_16K, t, pc.REQ_ERCOT)


def test_g_late_notice_reported_not_rushed(run_g, site16k):
    t = run_g.targets.iloc[0]
    assert pc.first_move(run_g, site16k) >= pd.Timestamp("2025-07-01T01:02:02Z")
    assert not bool(t.met) and run_g.rc == 1
    findings, rows = pc.check_caps(run_g, site16k)
    assert findings == []
    assert rows.planned_response_s.iloc[0] == pytest.approx(t.response_time_s, abs=10)
    f = pc.check_all(run_g, site16k)
    assert {k: v for k, v in f.items() if v} == {}


def test_g_no_deeper_shed_after_the_target_ends(run_g):
    """'planned IT power = the highest trajectory under every cap ... that moves no faster
    than those rates': with no cap after the end, nothing makes it go further down."""
    s = run_g.schedule.set_index("timestamp").planned_it_power_megawatts
    end = run_g.targets.end_utc.iloc[0]
    assert s[end:end + pd.Timedelta(minutes=3)].min() >= s[end] - 1e-6


# ----------------------------------------------------------------------------- facility


def test_facility_boundary_schedule_has_facility_power(tmp_path, battery_site):
    t = _targets_df([{"start_utc": "2025-07-01T20:00:00Z", "end_utc": "2025-07-01T20:05:00Z",
                          "cap_megawatts": 15.0}])
    run = _run(tmp_path, "fac", battery_site[0], t, pc.REQ_ERCOT, "--boundary", "facility")
    findings, _ = pc.check_battery(run, battery_site[1])
    assert findings == []
    assert [c for c in run.schedule.columns if "facility" in c and "_megawatts" in c]


@pytest.mark.xfail(strict=True, reason=(
    "power_cap lost GPU-h above what the stated prior gives from the schedule's limits: "
    "(a) 12 targets, 3 draws: 3,325.67 reported vs bracket [3,103.9, 3,216.5] (+3.4 %); "
    "(b) battery: 776.72 vs [717.3, 738.3] (+5.2 %); also small.yaml, two jobs, one "
    "12:03-13:30 cap at 0.6 MW: 274.48 vs [249.8, 250.9] (+9.4 %), while o1 (same targets "
    "as b, no battery) 1,010.23 lies inside [996.8, 1,030.1]. Related: the schedule's "
    "power_cap shed is already 0.333 MW (20.3 W/GPU) at a 625-W limit, where "
    "min(kappa L, P_ref) with P_ref = 597.5 W gives none; with P_ref = 650 W (compute) "
    "the recomputed lost overshoots instead (200-target run: 18,176 vs 15,245). The same "
    "limit schedule (b, identical at 1, 3 and 5 draws) reports 812.0, 776.7, 729.8 GPU-h "
    "(10 draws 714.7, 20 draws 721.3): only the 1- and 3-draw values exceed the bracket"))
@pytest.mark.parametrize("case", ["run_a", "run_b"])
def test_cap_lost_gpu_hours_from_the_prior(request, case):
    """'lost GPU-hours: sum over jobs and time of gpus x (1 - r(L(t))) dt', r from the
    prior (b1 = 0.30, b2 = 0; power under a limit min(kappa L, P_ref), kappa = 1, P_ref
    the job's nominal busy mean, 597.5 W; the 16k scenario has no capped telemetry), from
    the schedule's power_limit_w. The limits move each second between the 10-s samples:
    taking each interval's lowest / highest sampled limit brackets the integral; the
    plan's weighting by the draws' share of time training (<= 1; checkpoints alone
    60 s per 1,800 s) may put it up to 10 % under the bracket, never over it."""
    run, site = _get(request, case)
    lo = pc.prior_cap_lost(run, site, bracket="low")
    hi = pc.prior_cap_lost(run, site, bracket="high")
    rep = float(run.levers.loc["power_cap", "lost_gpu_hours"])
    assert 0.9 * lo <= rep <= hi * 1.001, (rep, lo, hi)
