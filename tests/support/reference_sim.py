"""Brute-force, GPU-by-GPU reference simulation of a forecast scenario.

Written independently of :mod:`powerlab.site.engine`: a tick-by-tick state machine per job
(not the engine's run-length plan), then every GPU simulated on its own (its own shifted
timeline, its own ramp limiter stepped tick by tick), summed GPU by GPU, and a
sequential battery.  The only thing shared with the engine is the randomness protocol
(:func:`powerlab.site.engine.job_randomness`), so that the same seed gives the same failures
and the same per-GPU offsets.  Cost: O(GPUs x ticks) - use small clusters and horizons.

GPU power transients (first-order rise/fall, exact tick means) are stepped tick by tick
per GPU; the facility (losses, lagging cooling, base load) is stepped tick by tick.

Known difference by design: each GPU's ramp limiter starts at the first tick of the
horizon; the engine starts it a little earlier.  The two agree whenever GPUs are steady
(e.g. idle before their job starts) over the first ticks.
"""

from __future__ import annotations

import math

import numpy as np

from powerlab.site.randomness import job_randomness

IDLE, STARTUP, COMPUTE, COMM, CKPT, EVAL, DOWN, SHUTDOWN = range(8)


def _ticks(seconds, tick):
    return math.floor(seconds / tick + 0.5 + 1e-9)


def job_states(job, tick, s, e, failure_ticks, n):
    """Per-tick state of a job's (unshifted) GPU over ticks [lo, hi) with a tick loop.

    Returns (states over ticks s..e-1, train_ticks, lost_ticks, events).
    """
    P = max(2, _ticks(job.step_time_s, tick))
    C = math.floor(job.compute_fraction * P + 0.5)
    n_su = _ticks(job.startup_s, tick)
    n_sd = _ticks(job.shutdown_s, tick)
    n_rs = _ticks(job.restart_s, tick)
    n_ck = _ticks(job.checkpoint_duration_s, tick)
    n_ev = _ticks(job.eval_duration_s, tick)
    ck_every = (max(1, math.floor(job.checkpoint_interval_s / job.step_time_s + 0.5))
                if job.checkpoint_interval_s > 0 else 0)
    ev_every = (max(1, math.floor(job.eval_interval_s / job.step_time_s + 0.5))
                if job.eval_interval_s > 0 else 0)
    fails = {s + int(f) for f in failure_ticks}
    out = np.empty(e - s, dtype=np.int64)
    mode, remaining = "startup", n_su
    phase = steps_ck = steps_ev = 0
    pending_eval = False
    since_ckpt = train = lost = 0
    events = []
    for k in range(s, e):
        if k >= e - n_sd:
            out[k - s] = SHUTDOWN
            continue
        # pass 0: leave finished phases; pass 1: a failure at this tick, then leave
        # the zero-length phases it starts
        for _pass in (0, 1):
            if _pass == 1:
                if k in fails and mode != "down":
                    events.append((k, "failure"))
                    lost += since_ckpt
                    since_ckpt = 0
                    mode, remaining = "down", n_rs
                    pending_eval = False
                elif k in fails:
                    # a failure while down is not lost: the downtime lasts at least a
                    # full restart from it
                    events.append((k, "failure"))
                    remaining = max(remaining, n_rs)
                    break
                else:
                    break
            # transitions out of finished (or zero-length) phases
            while True:
                if mode == "startup" and remaining == 0:
                    mode, phase = "train", 0
                elif mode == "ckpt" and remaining == 0:
                    since_ckpt = 0
                    if pending_eval:
                        mode, remaining, pending_eval = "eval", n_ev, False
                    else:
                        mode, phase = "train", 0
                elif mode == "eval" and remaining == 0:
                    mode, phase = "train", 0
                elif mode == "down" and remaining == 0:
                    mode, remaining = "startup", n_su
                    steps_ck = steps_ev = 0
                    events.append((k, "restart"))
                else:
                    break
        if mode == "down":
            out[k - s] = DOWN
            remaining -= 1
        elif mode == "startup":
            out[k - s] = STARTUP
            remaining -= 1
        elif mode == "ckpt":
            out[k - s] = CKPT
            remaining -= 1
        elif mode == "eval":
            out[k - s] = EVAL
            remaining -= 1
        else:
            out[k - s] = COMPUTE if phase < C else COMM
            train += 1
            since_ckpt += 1
            phase += 1
            if phase == P:
                phase = 0
                steps_ck += 1
                steps_ev += 1
                ck_due = ck_every and steps_ck >= ck_every
                ev_due = ev_every and steps_ev >= ev_every
                if ck_due:
                    steps_ck = 0
                    events.append((k + 1, "checkpoint"))
                    mode, remaining = "ckpt", n_ck
                if ev_due:
                    steps_ev = 0
                    events.append((k + 1, "eval"))
                    if ck_due:
                        pending_eval = True
                    else:
                        mode, remaining = "eval", n_ev
    return out, train, lost, events


def simulate(scenario, draws=1, seed=0, tick_s=None):
    """IT and facility power per draw and tick, GPU by GPU.

    Returns
    -------
    dict with ``it_w`` and ``facility_w`` (draws x ticks) [W], ``train_s`` and
    ``lost_s`` per (draw, job).
    """
    tick = float(tick_s or scenario.tick_s)
    t0 = scenario.start_utc
    n = _ticks((scenario.end_utc - t0).total_seconds(), tick)
    hw = scenario.hardware
    mit = scenario.mitigations
    floor = mit.gpu_power_floor_pct_tdp / 100.0 * hw.gpu_tdp_w
    step = mit.gpu_ramp_limit_w_per_s * tick
    it = np.zeros((draws, n))
    train, lost = {}, {}
    seen = {}
    starts = []
    for job in scenario.jobs:
        s = _ticks((job.start_utc - t0).total_seconds(), tick)
        e = s + _ticks(job.duration_s, tick)
        delay = 0
        if mit.stagger_starts_s > 0:
            key = round((job.start_utc - t0).total_seconds())
            rank = seen.get(key, 0)
            seen[key] = rank + 1
            delay = min(_ticks(rank * mit.stagger_starts_s, tick),
                        max(0, e - s - _ticks(job.startup_s + job.shutdown_s, tick) - 1))
        starts.append((s + delay, e))
    for d in range(draws):
        total = np.zeros(n)
        for ji, job in enumerate(scenario.jobs):
            s, e = starts[ji]
            rnd = job_randomness(job, tick, seed, d, ji, s, e)
            st, tr, lo, _ = job_states(job, tick, s, e, rnd.failure_ticks, n)
            train[(d, job.name)] = tr * tick
            lost[(d, job.name)] = lo * tick
            level = {IDLE: hw.gpu_idle_w, STARTUP: job.startup_w, COMPUTE: job.compute_w,
                     COMM: job.comm_w, CKPT: job.checkpoint_w, EVAL: job.eval_w,
                     DOWN: hw.gpu_idle_w, SHUTDOWN: job.shutdown_w}
            # every GPU on its own: its offset, its timeline, its limiter
            offsets = np.repeat(rnd.offset_ticks, rnd.offset_counts)
            lv = np.array([level[i] for i in range(8)], float)
            if floor > 0:
                lv[1:] = np.maximum(lv[1:], floor)
            x = np.empty((len(offsets), n))
            ks = np.arange(n)
            for g, off in enumerate(offsets):
                u = ks - off  # this GPU's own clock
                inside = (u >= s) & (u < e)
                x[g] = hw.gpu_idle_w
                x[g, inside] = lv[st[u[inside] - s]]
            if step > 0:
                y = np.empty_like(x)
                prev = x[:, 0].copy()
                for k in range(n):
                    prev = np.clip(x[:, k], prev - step, prev + step)
                    y[:, k] = prev
                x = y
            elif hw.gpu_rise_time_constant_s > 0 or hw.gpu_fall_time_constant_s > 0:
                x = _first_order(x, tick, hw.gpu_rise_time_constant_s,
                                 hw.gpu_fall_time_constant_s)
            for g in range(len(offsets)):
                total += x[g]
        idle = hw.cluster_gpus - sum(j.gpus for j in scenario.jobs)
        for _ in range(idle):
            total += hw.gpu_idle_w
        for _ in range(hw.nodes):
            total += hw.node_overhead_w
        it[d] = total
    import pandas as pd

    times = pd.date_range(t0, periods=n, freq=pd.Timedelta(seconds=tick))
    fac = _facility(it, tick, scenario.site.pue_at(times), scenario.site)
    if mit.battery is not None:
        fac = np.vstack([fac[d] - _battery(fac[d], tick, mit.battery) for d in range(draws)])
    return {"it_w": it, "facility_w": fac, "train_s": train, "lost_s": lost}


def _first_order(x, tick, rise, fall):
    """Each GPU (row) on its own: exact mean over every tick of dy/dt = (x - y) / tau,
    tau = rise when the demand is above the power, else fall; y starts at x[:, 0]."""
    y = x[:, 0].copy()
    out = np.empty_like(x)

    def coef(tau):
        if tau <= 0:
            return 0.0, 0.0
        return math.exp(-tick / tau), tau / tick * (1 - math.exp(-tick / tau))

    (a_r, g_r), (a_f, g_f) = coef(rise), coef(fall)
    for k in range(x.shape[1]):
        up = x[:, k] > y
        a = np.where(up, a_r, a_f)
        g = np.where(up, g_r, g_f)
        out[:, k] = x[:, k] + (y - x[:, k]) * g
        y = x[:, k] + (y - x[:, k]) * a
    return out


def _facility(it, tick, pue, site):
    """IT + losses + cooling lagging its target tick by tick + base load."""
    loss = site.electrical_loss_fraction
    tau = site.cooling_time_constant_s
    a = math.exp(-tick / tau) if tau > 0 else 0.0
    out = np.empty_like(it)
    for d in range(it.shape[0]):
        target = it[d] * np.maximum(pue - 1 - loss, 0.0)
        c = target[0]
        for k in range(it.shape[1]):
            c = a * c + (1 - a) * target[k]
            out[d, k] = it[d, k] * (1 + loss) + c + site.base_load_w
    return out


def _battery(p, tick, bat):
    """Sequential battery: follow a trailing mean within power and SoC limits."""
    p_max = bat.power_megawatts * 1e6
    cap = bat.energy_megawatt_hours * 3.6e9
    eff = bat.round_trip_efficiency
    w = max(1, _ticks(bat.window_s, tick))
    soc = bat.initial_soc_fraction * cap
    out = np.zeros(len(p))
    for k in range(len(p)):
        lo = max(0, k - w)
        target = p[0] if k == 0 else float(np.mean(p[lo:k]))
        b = min(max(p[k] - target, -p_max), p_max)
        if b > 0:
            b = min(b, soc / tick)
            soc -= b * tick
        else:
            b = max(b, -(cap - soc) / (eff * tick))
            soc -= b * eff * tick
        out[k] = b
    return out
