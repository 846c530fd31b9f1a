"""fleetgen_A -- independent GPU-fleet telemetry generator (generator "A").

Physical model and assumptions (generator A)
--------------------------------------------
Hardware: H100-SXM-like, TDP / default enforced power limit 700 W, HBM clock 2619 MHz,
boost ceiling 1980 MHz, SM clock bins of 15 MHz (an interval mean of a clock that dithers
between bins is continuous, so means are reported as floats).

* Power capped job.  Every GPU runs at its enforced power limit (700 W) most of the time;
  the SM clock is the *free variable* that DVFS adjusts so that power == limit.  The
  sustained clock of a chip is therefore
      f = f0 (1740 MHz) + leakage offset (per chip, N(0, 20 MHz) -- fleet spread sd 20 MHz)
          + workload-intensity term (common to all GPUs; phases of the job mix, +-25 MHz)
          - 1.2 MHz per degC of die temperature above 65 degC (hotter -> more leakage
            power -> less dynamic-power budget under the cap)
          + sensor / interval-averaging noise (sd ~3 MHz at 60 s, scales 1/sqrt(interval)).
  Rare checkpoint phases (common to the whole fleet) drop utilisation/power and let the
  clock rise toward boost.
* Power: P ~ f^2.7 near the cap, so a clock reduction of x relative gives a power
  reduction of ~2.7 x when the limiter is NOT the power cap.
* Temperature: temp = inlet(t, host) + slot offset + 0.054 degC/W * power + noise.
  Inlet has a diurnal swing (+-3 degC, peak mid-afternoon), per-host offsets (sd 1 degC)
  and a slow random-walk drift; slots have fixed offsets (sd 1.5 degC, slots 4..7 +1 degC).
  HBM temperature = die + 4 degC + own noise.
* Utilisation is ~98-100 % for every GPU (synchronous job: fast GPUs wait inside
  collectives, which still counts as "busy"), common dips during checkpoints.
* Clock-event reason bits: SwPowerCap (0x4) set at ~92 % of sampling instants while
  power-capped.  Healthy GPUs get very rare SwThermalSlowdown (0x20) transients whose
  probability rises with temperature (so a hot-inlet host shows a few more), with a
  negligible (0.3 %) clock effect in that sample.
* EVIDENCE COINCIDES IN TIME WITH THE SLOWDOWN (central assumption of generator A):
  - gpu_thermal: cooling fault, die +4 degC vs. its healthy self.  The thermal bit 0x20 is
    set in the hottest ~60 % of its samples (the bit follows temperature), and the clock
    dips EXACTLY in those samples (normal otherwise) by 2 %/share so the record average
    is exactly 2 % slow; power falls in those samples (thermal is the limiter, 0x4 off).
  - gpu_throttle_bits: HwSlowdown 0x8 set in a random ~40 % of samples (short bursts),
    clock dips exactly there by 2 %/share; power drops accordingly, 0x4 off there.
  - gpu_power_limit: enforced power limit lowered so the clock is 2 % lower
    (700 * 0.98^2.7 ~= 664 W); power tracks the lower limit, 0x4 still set.
  - gpu_low_clock: only the SM clock is 2 % lower (power/temp/bits unchanged).
  - host_slow: host-level power cap -> all 8 GPUs of the host get a lower enforced limit
    (700 * 0.99^2.7 ~= 681 W) and a 1 % lower clock.
  - intermittent: 1.5 % clock dip during ~1 h episodes (random onsets, ~30 % coverage);
    partial-overlap samples get the fractional dip; power drops by 2.7x the dip;
    no bits.
  - silent_from_start: a chip from the FAST end of the spread (+1 sd) gets a 1.5 % clock
    loss, landing inside the normal spread; no other evidence.  Needs a baseline.
* Missing data: ~0.1 % random rows dropped plus one host-wide gap of ~10 min.
  energy_j is the true cumulative energy (it keeps counting across missing rows).

Second deliverable: survival-analysis generators `generate_failures` (Weibull shape 1.3
baseline, log-linear temperature effect, optional per-host gamma frailty, classical
measurement error on temperature, administrative + ~10 % random decommission censoring)
and `generate_failure_counts` (Poisson counts per GPU x period with per-GPU gamma frailty).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

START = pd.Timestamp("2026-03-02 00:00:00", tz="UTC")
F0 = 1740.0
CLOCK_SD = 20.0
PCAP = 700.0
BOOST = 1980.0
MEM_CLK = 2619.0
POWER_EXP = 2.7
LEAK_MHZ_PER_C = 1.2
R_TH = 0.054  # degC per W

CASES = ("clean", "clean_hot_host", "gpu_thermal", "gpu_throttle_bits", "gpu_power_limit",
         "gpu_low_clock", "host_slow", "intermittent", "silent_from_start")


def _uuids(rng: np.random.Generator, n: int) -> list[str]:
    out = []
    for _ in range(n):
        h = "".join(f"{b:02x}" for b in rng.integers(0, 256, 16))
        out.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return out


def _episodes(rng, T_s: float, target_frac: float = 0.30, mean_len_s: float = 3600.0):
    """Non-overlapping episodes (start, end) in seconds covering ~target_frac of [0, T_s]."""
    eps: list[tuple[float, float]] = []
    covered = 0.0
    tries = 0
    while covered < target_frac * T_s and tries < 10000:
        tries += 1
        L = float(np.clip(rng.normal(mean_len_s, 0.25 * mean_len_s), 0.4 * mean_len_s,
                          1.8 * mean_len_s))
        s = float(np.round(rng.uniform(0, T_s - L)))
        L = float(np.round(L))
        e = s + L
        if any(s < b + 600 and e > a - 600 for a, b in eps):
            continue
        eps.append((s, e))
        covered += L
    eps.sort()
    return eps


def baseline_start(hours: float) -> pd.Timestamp:
    """Start of the baseline (burn-in) record: a whole number of days before START, at
    least 7 days and such that the baseline ends >= 1 day before the main record starts."""
    days = max(7, int(np.ceil(hours / 24.0)) + 1)
    return START - pd.Timedelta(days=days)


def generate(seed: int, case: str, *, interval_s: float = 60.0, hours: float = 72.0,
             n_hosts: int = 16, gpus_per_host: int = 8, baseline: bool = False
             ) -> tuple[pd.DataFrame, dict]:
    """Main record of `case` (baseline=False) or its baseline (burn-in) record.

    baseline=True returns the healthy record of the SAME fleet a week (at least; see
    `baseline_start`) earlier: same hosts, slots, gpu_uuid, leakage offsets (`leak`),
    host inlet offsets and slot offsets, healthy 700 W limits; no fault; its own
    inlet drift, workload phases, checkpoints, sensor noise, thermal transients, energy
    counter offset and missing rows, drawn from SeedSequence([seed, 0xBA5E]).  The main
    stream is replayed through the static draws so they are exactly those of the main
    record, and the main record itself is unchanged.  Physical choices (generator A):
    * clean_hot_host: the hot inlet is the host's rack position (hot-aisle
      recirculation), a fleet property -> the baseline shares it (truth["hot_host"]).
    * silent_from_start / gpu_low_clock / every other fault: the fault appeared after
      the burn-in, so the baseline shows the chip healthy (truth["baseline_shows_fault"]
      = False); for silent_from_start that is what makes it identifiable with a baseline.
    * The time-varying stream does not depend on the case: cases that share the fleet
      share the baseline record (same fleet, same week).
    """
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}")
    rng = np.random.default_rng(seed)
    rbase = np.random.default_rng(np.random.SeedSequence([int(seed), 0xBA5E])) if baseline else None

    def tv(draw):
        """Time-varying draw: for a baseline, replay it on the main stream (to keep the
        later static draws) and take the values from the baseline stream."""
        if not baseline:
            return draw(rng)
        draw(rng)
        return draw(rbase)

    t_start = baseline_start(hours) if baseline else START
    dt = float(interval_s)
    T = int(round(hours * 3600.0 / dt))
    H, S = n_hosts, gpus_per_host
    G = H * S
    t_s = np.arange(T) * dt                     # sample start (s since START)
    t_mid = t_s + dt / 2
    hosts = [f"node{i + 1:03d}" for i in range(H)]
    host_of = np.repeat(np.arange(H), S)
    slot_of = np.tile(np.arange(S), H)
    uuids = _uuids(rng, G)
    noise_scale = np.sqrt(60.0 / dt)

    # ---------------- environment ----------------
    hour = (t_mid / 3600.0) % 24.0
    diurnal = 3.0 * np.sin(2 * np.pi * (hour - 9.0) / 24.0)          # peak ~15:00
    host_off = rng.normal(0, 1.0, H)
    drift = np.cumsum(tv(lambda r: r.normal(0, 0.05 * np.sqrt(dt / 60.0), (H, T))), axis=1)
    drift -= drift.mean(axis=1, keepdims=True)
    drift = np.clip(drift, -1.5, 1.5)
    inlet_h = 22.0 + diurnal[None, :] + host_off[:, None] + drift     # (H, T)
    hot_host = None
    if case == "clean_hot_host":
        hot_host = int(rng.integers(H))
        inlet_h[hot_host] += rng.uniform(5.0, 8.0)
    slot_off = rng.normal(0, 1.5, G) + np.where(slot_of >= S // 2, 1.0, 0.0)

    # workload phases (common): intensity random-walk-ish piecewise, checkpoints
    n_ph = max(1, int(hours * 3600 / 1800))                           # ~30 min phases
    ph_edges = np.sort(tv(lambda r: r.uniform(0, T * dt, n_ph)))
    ph_val = tv(lambda r: r.normal(0, 12.0, n_ph + 1))
    phase_mhz = ph_val[np.searchsorted(ph_edges, t_mid)]
    phase_mhz = np.clip(phase_mhz + 8.0 * np.sin(2 * np.pi * t_mid / 5400.0), -25, 25)
    ckpt = np.zeros(T, bool)
    ck_every = 2 * 3600.0
    for c0 in np.arange(tv(lambda r: r.uniform(0, ck_every)), T * dt, ck_every):
        ckpt |= (t_s < c0 + 240.0) & (t_s + dt > c0)                  # 4 min checkpoint

    # ---------------- chips ----------------
    leak = rng.normal(0, CLOCK_SD, G)
    fault = case
    if baseline:                 # last static draw done: the rest is the baseline's own
        rng, fault = rbase, "clean"
    plimit = np.full(G, PCAP)

    # healthy power (W) at cap, with small interval noise; checkpoint ~ 330 W
    power = PCAP - np.abs(rng.normal(3.0, 3.0 * noise_scale, (G, T)))
    power[:, ckpt] = rng.normal(330.0, 25.0, (G, int(ckpt.sum())))
    temp = (inlet_h[host_of] + slot_off[:, None] + R_TH * power + 2.0
            + rng.normal(0, 0.3 * noise_scale, (G, T)))
    clock = (F0 + leak[:, None] + phase_mhz[None, :]
             - LEAK_MHZ_PER_C * (temp - 65.0)
             + rng.normal(0, 3.0 * noise_scale, (G, T)))
    clock[:, ckpt] = np.minimum(BOOST, 1950.0 + leak[:, None] / 4
                                + rng.normal(0, 5, (G, int(ckpt.sum()))))
    util = np.clip(rng.normal(99.0, 0.6 * noise_scale, (G, T)), 90, 100)
    util[:, ckpt] = np.clip(rng.normal(35.0, 4.0, (G, int(ckpt.sum()))), 0, 100)
    bits = np.where(rng.random((G, T)) < 0.92, 0x4, 0x0).astype(np.uint64)
    bits[:, ckpt] = 0
    # rare thermal transients, more likely when hot
    p_th = np.clip(0.002 * np.exp((temp - 65.0) / 3.0), 0, 0.05)
    tr = (rng.random((G, T)) < p_th) & ~ckpt[None, :]
    bits[tr] |= np.uint64(0x20)
    clock[tr] *= 0.997

    # ---------------- faults ----------------
    slow_gpus: list[str] = []
    slow_hosts: list[str] = []
    episodes: list = []
    slowdown = 0.0
    cause = None
    ident = True
    victim = int(rng.integers(G))
    if fault == "silent_from_start":
        # choose a chip from the fast end of the spread (~ +1 sd) as victim
        victim = int(np.argmin(np.abs(leak - CLOCK_SD)))

    def dip(mask_gpu_t_factor, g):
        """Apply multiplicative clock factor (array over T) to GPU g, power follows."""
        nonlocal clock, power
        fac = mask_gpu_t_factor
        clock[g] *= fac
        power[g] *= fac ** POWER_EXP

    if fault == "gpu_thermal":
        slowdown, cause = 2.0, "thermal"
        g = victim
        temp[g] += 4.0
        # bit set in hottest ~60 % of its (non-checkpoint) samples
        work = ~ckpt
        thr = np.quantile(temp[g, work], 0.40)
        m = (temp[g] >= thr) & work
        # in the checkpoint samples there's no thermal pressure; to keep the record
        # average exactly 2 %, those samples are also dipped only via m (none), and the
        # depth is computed over all samples
        share = m.mean()
        d = 0.02 / share
        fac = np.where(m, 1.0 - d, 1.0)
        dip(fac, g)
        temp[g, m] -= R_TH * PCAP * (1 - (1 - d) ** POWER_EXP) * 0.5   # partial cooling
        bits[g, m] = (bits[g, m] & ~np.uint64(0x4)) | np.uint64(0x20)
        bits[g, ~m] &= ~np.uint64(0x20)
        slow_gpus = [uuids[g]]
    elif fault == "gpu_throttle_bits":
        slowdown, cause = 2.0, "throttle"
        g = victim
        # bursty: 2-state Markov chain with ~40 % occupancy, mean burst ~5 samples
        p_on, p_off = 0.4 / 0.6 * 0.2, 0.2
        m = np.zeros(T, bool)
        state = rng.random() < 0.4
        u = rng.random(T)
        for i in range(T):
            state = (u[i] < p_on) if not state else (u[i] >= p_off)
            m[i] = state
        if m.sum() == 0:
            m[rng.integers(T)] = True
        share = m.mean()
        d = 0.02 / share
        dip(np.where(m, 1.0 - d, 1.0), g)
        temp[g, m] -= R_TH * PCAP * (1 - (1 - d) ** POWER_EXP) * 0.6
        bits[g, m] = (bits[g, m] & ~np.uint64(0x4)) | np.uint64(0x8)
        slow_gpus = [uuids[g]]
    elif fault == "gpu_power_limit":
        slowdown, cause = 2.0, "power_limit"
        g = victim
        newlim = PCAP * 0.98 ** POWER_EXP
        plimit[g] = newlim
        clock[g] *= 0.98
        work = ~ckpt
        power[g, work] *= newlim / PCAP
        temp[g, work] -= R_TH * (PCAP - newlim)
        slow_gpus = [uuids[g]]
    elif fault == "gpu_low_clock":
        slowdown, cause = 2.0, "clock"
        clock[victim] *= 0.98
        slow_gpus = [uuids[victim]]
    elif fault == "silent_from_start":
        slowdown, cause = 1.5, "clock"
        ident = False
        clock[victim] *= 0.985
        slow_gpus = [uuids[victim]]
    elif fault == "host_slow":
        slowdown, cause = 1.0, "host"
        h = int(rng.integers(H))
        gs = np.where(host_of == h)[0]
        newlim = PCAP * 0.99 ** POWER_EXP
        plimit[gs] = newlim
        clock[gs] *= 0.99
        work = ~ckpt
        power[np.ix_(gs, np.where(work)[0])] *= newlim / PCAP
        temp[np.ix_(gs, np.where(work)[0])] -= R_TH * (PCAP - newlim)
        slow_hosts = [hosts[h]]
        slow_gpus = [uuids[g] for g in gs]
    elif fault == "intermittent":
        slowdown, cause = 1.5, "clock"
        g = victim
        eps = _episodes(rng, T * dt)
        frac = np.zeros(T)
        for a, b in eps:
            ov = np.clip(np.minimum(t_s + dt, b) - np.maximum(t_s, a), 0, dt) / dt
            frac = np.maximum(frac, ov)
        fac = 1.0 - 0.015 * frac
        dip(fac, g)
        temp[g] -= R_TH * PCAP * (1 - fac ** POWER_EXP) * 0.7
        episodes = [(uuids[g], t_start + pd.Timedelta(seconds=a), t_start + pd.Timedelta(seconds=b))
                    for a, b in eps]
        slow_gpus = [uuids[g]]

    # ---------------- finalize ----------------
    temp_mem = temp + 4.0 + rng.normal(0, 0.4 * noise_scale, (G, T))
    energy = np.cumsum(power * dt, axis=1) + rng.uniform(1e9, 5e9, G)[:, None]
    clock = np.round(np.minimum(clock, BOOST), 1)
    power = np.round(power, 2)
    temp = np.round(temp, 1)
    temp_mem = np.round(temp_mem, 1)

    keep = rng.random((G, T)) >= 0.001
    gap_h = int(rng.integers(H))
    g0 = int(rng.integers(T // 4, 3 * T // 4))
    glen = max(1, int(round(600.0 / dt)))
    keep[host_of == gap_h, g0:g0 + glen] = False
    flat_keep = keep.ravel()

    ts = (t_start + pd.to_timedelta(t_s, unit="s")).as_unit("ns")
    ts_idx = np.tile(np.arange(T), G)[flat_keep]
    gidx = np.repeat(np.arange(G), T)[flat_keep]
    host_arr = np.array(hosts, dtype=object)[host_of]
    uuid_arr = np.array(uuids, dtype=object)
    n = int(flat_keep.sum())
    df = pd.DataFrame({
        "timestamp": ts[ts_idx],
        "host": host_arr[gidx],
        "scope": np.full(n, "gpu", dtype=object),
        "gpu_index": pd.array(slot_of[gidx].astype(np.int16), dtype="Int16"),
        "gpu_uuid": uuid_arr[gidx],
        "power_w": power.ravel()[flat_keep].astype(np.float64),
        "energy_j": energy.ravel()[flat_keep].astype(np.float64),
        "clock_sm_mhz": clock.ravel()[flat_keep].astype(np.float64),
        "clock_mem_mhz": np.full(n, MEM_CLK, dtype=np.float64),
        "temp_gpu_c": temp.ravel()[flat_keep].astype(np.float64),
        "temp_mem_c": temp_mem.ravel()[flat_keep].astype(np.float64),
        "util_gpu_pct": np.round(util.ravel()[flat_keep], 1).astype(np.float64),
        "power_limit_w": np.repeat(plimit, T)[flat_keep].astype(np.float64),
        "throttle_reasons": pd.array(bits.ravel()[flat_keep], dtype="UInt64"),
    })
    truth = {
        "case": case,
        "slow_gpus": slow_gpus,
        "slow_hosts": slow_hosts,
        "episodes": episodes,
        "slowdown_pct": float(slowdown),
        "cause": cause if case != "intermittent" else "clock",
        "identifiable_without_baseline": bool(ident),
        "interval_s": interval_s,
    }
    if case in ("clean", "clean_hot_host"):
        truth["cause"] = None
    if hot_host is not None:
        truth["hot_host"] = hosts[hot_host]
    if baseline:
        truth.update(baseline_of=case, cause=None, baseline_shows_fault=False,
                     main_record_start=START)
    return df, truth


# ======================================================================================
# Survival-analysis generators
# ======================================================================================
WEIBULL_SHAPE = 1.3
YEAR_S = 365.25 * 86400.0


def generate_failures(seed: int, *, n_gpus: int = 2000, days: float = 180.0,
                      hazard_ratio_per_10c: float = 1.5, temp_noise_sd_c: float = 3.0,
                      frailty_var: float = 0.0, base_rate_per_gpu_year: float = 0.05
                      ) -> tuple[pd.DataFrame, dict]:
    """One row per GPU; Weibull(shape 1.3) proportional hazards in true temperature.

    h(t | T, Z) = h0(t) * exp(beta (T - 65)) * Z, H0(t) = (t / lam)^1.3 with lam chosen so
    that H0(1 year) = base_rate_per_gpu_year.  Z ~ Gamma(mean 1, var frailty_var) shared
    per host (8 GPUs/host, 8 hosts/rack).  True temperature = 65 + host N(0, 3) +
    GPU N(0, 4) (total sd 5).  Measured = true + N(0, temp_noise_sd_c).  Censoring at
    `days`, and ~10 % of GPUs decommissioned uniformly within the window.
    """
    rng = np.random.default_rng(seed)
    gph, hpr = 8, 8
    n_hosts = int(np.ceil(n_gpus / gph))
    host_of = np.arange(n_gpus) // gph
    slot = np.arange(n_gpus) % gph
    hosts = np.array([f"node{i + 1:04d}" for i in range(n_hosts)], dtype=object)
    racks = np.array([f"rack{i // hpr + 1:03d}" for i in range(n_hosts)], dtype=object)
    t_host = rng.normal(0, 3.0, n_hosts)
    t_true = 65.0 + t_host[host_of] + rng.normal(0, 4.0, n_gpus)
    t_meas = t_true + (rng.normal(0, temp_noise_sd_c, n_gpus) if temp_noise_sd_c > 0 else 0.0)
    beta = np.log(hazard_ratio_per_10c) / 10.0
    if frailty_var > 0:
        z_host = rng.gamma(1.0 / frailty_var, frailty_var, n_hosts)
    else:
        z_host = np.ones(n_hosts)
    mult = np.exp(beta * (t_true - 65.0)) * z_host[host_of]
    lam = YEAR_S / base_rate_per_gpu_year ** (1.0 / WEIBULL_SHAPE)
    e = rng.exponential(1.0, n_gpus)
    t_fail = lam * (e / mult) ** (1.0 / WEIBULL_SHAPE)
    end_s = days * 86400.0
    cens = np.full(n_gpus, end_s)
    dec = rng.random(n_gpus) < 0.10
    cens[dec] = rng.uniform(0, end_s, int(dec.sum()))
    failed = t_fail <= cens
    dur = np.where(failed, t_fail, cens)
    df = pd.DataFrame({
        "gpu_uuid": _uuids(rng, n_gpus),
        "host": hosts[host_of],
        "rack": racks[host_of],
        "gpu_index": pd.array(slot.astype(np.int16), dtype="Int16"),
        "temp_gpu_c_measured": t_meas.astype(np.float64),
        "temp_gpu_c_true": t_true.astype(np.float64),
        "duration_s": dur.astype(np.float64),
        "failed": failed.astype(bool),
    })
    truth = {"log_hr_per_c": float(beta), "frailty_var": float(frailty_var),
             "temp_noise_sd_c": float(temp_noise_sd_c),
             "weibull_shape": WEIBULL_SHAPE, "weibull_scale_s": float(lam),
             "base_rate_per_gpu_year": float(base_rate_per_gpu_year)}
    return df, truth


def generate_failure_counts(seed: int, *, n_gpus: int = 5000, periods: int = 26,
                            frailty_var: float = 0.0, rate_per_gpu_period: float = 0.002
                            ) -> tuple[pd.DataFrame, dict]:
    """One row per GPU x period: count ~ Poisson(rate * Z_gpu), Z ~ Gamma(1, frailty_var).

    Marginal per-GPU totals are negative binomial (overdispersed) when frailty_var > 0.
    Returns (df, truth) with df columns gpu_uuid, host, period, exposure_periods, count.
    """
    rng = np.random.default_rng(seed)
    if frailty_var > 0:
        z = rng.gamma(1.0 / frailty_var, frailty_var, n_gpus)
    else:
        z = np.ones(n_gpus)
    counts = rng.poisson(rate_per_gpu_period * z[:, None], (n_gpus, periods))
    uu = np.array(_uuids(rng, n_gpus), dtype=object)
    host = np.array([f"node{i // 8 + 1:04d}" for i in range(n_gpus)], dtype=object)
    df = pd.DataFrame({
        "gpu_uuid": np.repeat(uu, periods),
        "host": np.repeat(host, periods),
        "period": np.tile(np.arange(periods), n_gpus).astype(np.int64),
        "exposure_periods": np.ones(n_gpus * periods),
        "count": counts.ravel().astype(np.int64),
    })
    truth = {"frailty_var": float(frailty_var), "rate_per_gpu_period": float(rate_per_gpu_period)}
    return df, truth


if __name__ == "__main__":
    import time
    for c in CASES:
        t0 = time.time()
        d, tr = generate(1, c)
        print(f"{c:18s} {d.shape} {time.time() - t0:5.2f}s slow={len(tr['slow_gpus'])} "
              f"hosts={tr['slow_hosts']} eps={len(tr['episodes'])} "
              f"pct={tr['slowdown_pct']} cause={tr['cause']} ident={tr['identifiable_without_baseline']}")
    f, tr = generate_failures(1)
    print("failures", f.shape, int(f.failed.sum()), tr)
    cnt, tr = generate_failure_counts(1, frailty_var=0.5)
    print("counts", cnt.shape, int(cnt["count"].sum()), tr)

    # baseline (burn-in) records, seed 1: same fleet, healthy, own time-varying draws
    for c in ("clean", "clean_hot_host", "silent_from_start", "gpu_low_clock"):
        t0 = time.time()
        b, tb = generate(1, c, baseline=True)
        m, tm = generate(1, c)
        ref = m if c in ("clean", "clean_hot_host") else generate(1, "clean")[0]
        same = (sorted(set(zip(b.host, b.gpu_index, b.gpu_uuid)))
                == sorted(set(zip(m.host, m.gpu_index, m.gpu_uuid))))
        med_b = b.groupby("gpu_uuid").clock_sm_mhz.median()
        med_m = ref.groupby("gpu_uuid").clock_sm_mhz.median().reindex(med_b.index)
        d = med_b - med_m
        print(f"baseline {c:18s} {b.shape} {time.time() - t0:5.2f}s "
              f"{b.timestamp.min():%Y-%m-%d} .. {b.timestamp.max():%Y-%m-%d %H:%M} "
              f"(main from {m.timestamp.min():%Y-%m-%d}) uuids/hosts/slots match: {same} "
              f"dtypes match: {bool((b.dtypes == m.dtypes).all())} hot_host={tb.get('hot_host')}")
        print(f"   per-chip median clock, baseline vs clean main: fleet sd {med_m.std():.1f} "
              f"MHz, corr {np.corrcoef(med_b, med_m)[0, 1]:.3f}, common shift "
              f"{d.median():+.1f} MHz, sd of differences {d.std():.2f} MHz, "
              f"max |diff - shift| {np.abs(d - d.median()).max():.1f} MHz")
        if tm["slow_gpus"]:
            v = tm["slow_gpus"][0]
            mv = m[m.gpu_uuid == v].clock_sm_mhz.median()
            print(f"   victim {v[:12]}: main {mv:.1f} MHz, baseline {med_b[v]:.1f} MHz, "
                  f"clean main {med_m[v]:.1f} MHz, fleet rank in main "
                  f"{int((m.groupby('gpu_uuid').clock_sm_mhz.median() < mv).sum())}/{len(med_b)}")
