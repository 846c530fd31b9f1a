"""fleetgen_C -- physics-first GPU-fleet telemetry generator (generator letter C).

Physical model (H100-SXM-like, one synchronous data-parallel training job)
---------------------------------------------------------------------------
* Every GPU runs under an enforced power limit (700 W).  Its instantaneous power is

      P(f, T) = a * C * V(f)^2 * f  +  Lk * V(f) * exp(beta * (T - 70 C))  +  P_other(a)

  with a = workload activity factor (switching activity), C = effective switched
  capacitance (per chip, sd 0.6 %), V(f) = max(0.65, 0.65 + dV + 0.35 V * (f - 800)/1180)
  a linear V/f curve (per-chip voltage-bin offset dV, sd 3 mV), Lk = leakage
  coefficient (per chip, lognormal sd 10 %, ~75 W at 70 C), beta = 0.025 /C and
  P_other = HBM/uncore power (60 + 50 a W).
* Die temperature T = T_inlet + R * P (steady state: the die time constant is seconds,
  the samples are 60 s / 300 s means).  R = R_tim (chip's thermal interface, per chip
  sd 4 %) + R_sink (per slot: downstream slots get pre-heated air -> +8 % R_sink; the
  server's fans speed up with inlet temperature and reduce R_sink by 2.2 %/C, so a hot
  inlet is only about half transferred to the die).
* The SM clock is the frequency at which P(f, T) equals the limit (solved jointly with
  T), capped at 1980 MHz boost, and quantised DOWN to the 15 MHz clock bins.  Each
  reported sample is the mean of 4 sub-instants (sub-interval activity noise), so the
  interval-mean clock can sit between bins.  Leakage spread is what creates the
  ~15 MHz (sd) fleet clock spread at equal power.
* SwThermalSlowdown (0x20): when the die would exceed the slowdown threshold
  (operator-set GPU target temperature, 79.5 C here) the driver lowers the clock so the
  die sits 0.3 C below the threshold, i.e. the power is limited to (T_thr - 0.3 - T_in)/R.
  SwPowerCap (0x4) is set whenever the power limit binds (most samples; not during
  checkpoint dips when the clock reaches boost).  Bits are those of the last
  sub-instant ("seen at the sampling instant").
* Nuisances: diurnal inlet swing (+-2 C, peak 15:00 UTC), per-host inlet offset
  (sd 0.8 C) plus slow per-host wander, per-slot resistance, fleet-wide workload phases
  (activity levels ~ N(1, 2.5 %) lasting ~40 min, checkpoint dips every ~2 h), per
  sub-instant activity noise (fleet 1 %, per GPU 0.5 %), sensor noise on power (1.5 W),
  temperatures (0.3 C), clock (0.5 MHz), ~0.1 % randomly missing rows plus a short
  scrape outage of one host.  Utilisation is the same process for every GPU (the
  synchronous job makes the fast GPUs wait), never revealing a straggler.
* energy_j is an exact cumulative counter (random offset since driver load) of the
  true (noise-free) interval-mean power, computed before rows go missing.

Straggler mechanisms ("X % slower" = mean SM clock X % below the same chip healthy,
calibrated numerically against a healthy re-simulation of the same chip with the same
noise draws):
* gpu_thermal: degraded thermal interface (R_tim raised) -> hotter die, more leakage,
  SwThermalSlowdown when over threshold; R_tim is bisected to give 2 % loss.  The GPU
  is placed in an upstream (cool) slot; it comes out ~4-6 C hotter than its host peers
  with the bit in ~55-75 % of the samples (fleet threshold, so it varies by seed).
* gpu_throttle_bits: HW power brake (0x80).  The GPU's power delivery is marginal: a
  2-state Markov "brake-stress" process is on in ~40 % of samples (mean dwell ~5 min);
  during it the brake line is asserted (bit seen at the sampling instant) and the
  clock is clamped hard (to half) for a random fraction u of the interval; the mean of u
  is scaled for 2 % loss.  Power and temperature drop accordingly.
* gpu_power_limit: enforced power limit lowered (bisected for 2 %), visible in
  power_limit_w and power_w; the GPU runs cooler.
* gpu_low_clock: V/f shift (aged chip needs more voltage, dV raised): same power,
  same temperature, same bits, only a lower clock.  Chosen among GPUs whose healthy
  clock is not above its host median, so it is visible against host peers.
* silent_from_start: extra leakage (exactly the manufacturing-spread mechanism) giving
  2 % loss, applied to a chip whose healthy clock is ~+1.2 sd above the fleet mean,
  so it ends inside the normal spread -> identifiable_without_baseline=False.
* host_slow: a host-level power cap lowers the enforced power limit of all GPUs of one
  host (one value, bisected for 1 % mean loss), cause "host".
* intermittent: V/f-shift episodes (cause "clock") of 45-75 min, random non-
  overlapping onsets, covering ~30 % of the record, 1.5 % loss inside episodes.
* clean_hot_host: one host's inlet +5..8 C (fans compensate about half), no fault.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

F_MAX = 1980.0
F_MIN = 345.0
F_BIN = 15.0
P_TDP = 700.0
MEM_CLK = 2619.0
BETA = 0.025
T_THR = 79.5
T_HYST = 0.3
K_SUB = 4
START = pd.Timestamp("2026-03-02 00:00:00", tz="UTC")


def _volt(f, dV):
    return np.maximum(0.65, 0.65 + dV + 0.35 * (f - 800.0) / 1180.0)


def _power(f, T, a, C, Lk, dV):
    V = _volt(f, dV)
    return a * C * V * V * f + Lk * V * np.exp(BETA * (T - 70.0)) + 60.0 + 50.0 * a


def _solve_f(Ptarget, T, a, C, Lk, dV, iters=6):
    """Frequency at which power at die temperature T equals Ptarget (Newton on the
    smooth cubic; V/f curve is linear in the operating range)."""
    sl = 0.35 / 1180.0
    g = Lk * np.exp(BETA * (T - 70.0))
    aC = a * C
    rhs = Ptarget - (60.0 + 50.0 * a)
    v0 = 0.65 + dV - 800.0 * sl
    f = np.full(np.broadcast(Ptarget, T, a, C, Lk, dV).shape, 1750.0)
    for _ in range(iters):
        V = v0 + sl * f
        p = aC * V * V * f + g * V - rhs
        dp = aC * (2.0 * V * sl * f + V * V) + g * sl
        f = f - p / dp
    return np.clip(f, F_MIN, F_MAX)


def _simulate(a, C, Lk, dV, Tin, R, Plim):
    """All arrays broadcast to (K, T, n).  Returns quantised inst. clock, power, die temp,
    powercap flag, thermal flag."""
    # 1) power-capped operating point (P = Plim)
    Tcap = Tin + R * Plim
    f = _solve_f(Plim, Tcap, a, C, Lk, dV)
    # 2) uncapped (boost-limited) where even F_MAX draws less than the limit
    Pmax = _power(F_MAX, Tcap, a, C, Lk, dV)
    unc = Pmax < Plim
    Tu = np.where(unc, Tin + R * Pmax, Tcap)
    if unc.any():
        for _ in range(3):
            Pu = _power(F_MAX, Tu, a, C, Lk, dV)
            Tu = np.where(unc, Tin + R * Pu, Tu)
        f = np.where(unc, F_MAX, f)
    # 3) thermal slowdown: hold the die at T_THR - T_HYST
    therm = Tu > T_THR
    if therm.any():
        Tt = T_THR - T_HYST
        sh = f.shape
        sub = lambda x: np.broadcast_to(x, sh)[therm]
        Pth = (Tt - sub(Tin)) / sub(R)
        ft = _solve_f(Pth, Tt, sub(a), sub(C), sub(Lk), sub(dV))
        f = f.copy()
        f[therm] = np.minimum(f[therm], ft)
        Tu = np.where(therm, Tt, Tu)
    capped = ~unc
    # 4) quantise down to the 15 MHz bins, settle power/temperature once
    fq = np.floor(f / F_BIN + 1e-9) * F_BIN
    P = _power(fq, Tu, a, C, Lk, dV)
    T = Tin + R * P
    P = _power(fq, T, a, C, Lk, dV)
    T = Tin + R * P
    return fq, P, T, capped, therm


def _bisect(fun, lo, hi, target, iters=28, increasing=True):
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        v = fun(mid)
        if (v < target) == increasing:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def generate(seed: int, case: str, *, interval_s: float = 60.0, hours: float = 72.0,
             n_hosts: int = 16, gpus_per_host: int = 8, baseline: bool = False
             ) -> tuple[pd.DataFrame, dict]:
    """Main record of `case`; with ``baseline=True`` the baseline (burn-in) record of the
    fleet that the main record of `case` describes.

    Baseline: the same fleet >= 7 whole days earlier, ending >= 1 day before START.  The
    chips' manufacturing parameters (C, Lk, dV, R_tim), the per-slot heat-sink pattern,
    the per-host inlet offsets, the uuids and the 700 W limits are the SAME draws as in
    the main record of this case (C seeds its stream with the case index, so each case
    describes its own fleet and has its own baseline); the chips are simulated healthy
    (the fault's parameter change -- raised R_tim, lowered limit, dV shift, extra
    leakage, brake -- is not applied).  Inlet wander, workload phases/checkpoints,
    activity noise, sensor noise, energy offset and missing rows come from
    SeedSequence([seed, case index, 0xC, 0xBA5E]).  The main stream is replayed through
    the static draws, so the main record is unchanged.
    Choices: clean_hot_host -- the hot inlet is where the host sits (rack/aisle), a
    fleet property, so the baseline shares it (same +5..8 C, fans compensating the same
    way); silent_from_start -- the extra leakage developed after the burn-in, so the
    baseline shows the chip at its healthy (fast, ~+1.2 sd) clock, which is what makes
    the case identifiable with a baseline; gpu_low_clock -- the V/f shift came after the
    burn-in (healthy in the baseline).  truth["baseline_shows_fault"] = False throughout.
    """
    cases = ("clean", "clean_hot_host", "gpu_thermal", "gpu_throttle_bits",
             "gpu_power_limit", "gpu_low_clock", "host_slow", "intermittent",
             "silent_from_start")
    if case not in cases:
        raise ValueError(f"unknown case {case!r}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), cases.index(case), 0xC]))
    rb = (np.random.default_rng(np.random.SeedSequence([int(seed), cases.index(case), 0xC, 0xBA5E]))
          if baseline else None)

    def tv(draw):
        # time-varying draw; a baseline replays it on the main stream and keeps its own
        if rb is None:
            return draw(rng)
        draw(rng)
        return draw(rb)
    G = int(gpus_per_host)
    H = int(n_hosts)
    n = H * G
    nt = int(round(hours * 3600.0 / interval_s))
    K = K_SUB
    t_s = np.arange(nt) * float(interval_s)                      # sample start (s)
    t_sub = t_s[None, :] + (np.arange(K)[:, None] + 0.5) * interval_s / K   # (K, nt)

    hosts = [f"node{h + 1:03d}" for h in range(H)]
    host_of = np.repeat(np.arange(H), G)
    slot = np.tile(np.arange(G), H)
    downstream = (slot >= G // 2).astype(float)
    uuids = []
    for _ in range(n):
        b = rng.integers(0, 256, 16, dtype=np.uint8)
        hx = b.tobytes().hex()
        uuids.append(f"GPU-{hx[:8]}-{hx[8:12]}-{hx[12:16]}-{hx[16:20]}-{hx[20:32]}")

    # ---- per-chip manufacturing parameters
    C = 0.34 * (1.0 + 0.006 * rng.standard_normal(n))
    Lk = 80.0 * np.exp(0.10 * rng.standard_normal(n) - 0.005)
    dV = 0.003 * rng.standard_normal(n)
    R_tim = 0.033 * (1.0 + 0.04 * rng.standard_normal(n))
    slot_pat = 1.0 + 0.08 * downstream + 0.015 * rng.standard_normal(G)[slot]
    R_sink0 = 0.0345 * slot_pat
    Plim = np.full(n, P_TDP)

    # ---- inlet temperature (nt, H)
    host_off = 0.8 * rng.standard_normal(H)
    diurnal = 2.0 * np.sin(2 * np.pi * (t_s / 86400.0 - 9.0 / 24.0))      # peak 15:00
    wander = np.cumsum(tv(lambda r: r.standard_normal((nt, H))), axis=0)
    # AR(1)-like slow wander, sd ~0.3 C
    phi = np.exp(-interval_s / 3600.0)
    w = np.zeros((nt, H))
    e = tv(lambda r: r.standard_normal((nt, H))) * 0.3 * np.sqrt(1 - phi ** 2)
    w[0] = 0.3 * tv(lambda r: r.standard_normal(H))
    for i in range(1, nt):
        w[i] = phi * w[i - 1] + e[i]
    del wander
    Tin_h = 25.0 + host_off[None, :] + diurnal[:, None] + w
    hot_host = None
    if case == "clean_hot_host":
        hot_host = int(rng.integers(H))
        Tin_h[:, hot_host] += rng.uniform(5.0, 8.0)
    fault = case
    if baseline:             # static draws done: the rest of the burn-in is its own
        rng, fault = rb, "clean"
    Tin = Tin_h[:, host_of]                                           # (nt, n)
    fan = np.clip(1.0 - 0.022 * (Tin - 25.0), 0.7, 1.15)
    R_sink = R_sink0[None, :] * fan                                   # (nt, n)

    # ---- fleet-wide workload activity at sub-instants (K, nt)
    total = hours * 3600.0 + interval_s
    edges = [0.0]
    while edges[-1] < total:
        edges.append(edges[-1] + rng.exponential(2400.0) + 300.0)
    edges = np.array(edges)
    levels = 1.0 + 0.025 * rng.standard_normal(len(edges))
    a_fleet = levels[np.searchsorted(edges, t_sub, side="right") - 1]
    ck = 0.0
    ck_starts = []
    while True:
        ck += rng.uniform(6000.0, 8400.0)
        if ck > total:
            break
        ck_starts.append((ck, rng.uniform(90.0, 200.0)))
    in_ck = np.zeros_like(t_sub, dtype=bool)
    for s0, d in ck_starts:
        in_ck |= (t_sub >= s0) & (t_sub < s0 + d)
    a_fleet = np.where(in_ck, 0.55, a_fleet)
    a_fleet = a_fleet * (1.0 + 0.01 * rng.standard_normal(a_fleet.shape))
    a = a_fleet[:, :, None] * (1.0 + 0.005 * rng.standard_normal((K, nt, n)))

    # ---- case set-up
    truth = {"case": case, "slow_gpus": [], "slow_hosts": [], "episodes": [],
             "slowdown_pct": 0.0, "cause": None, "identifiable_without_baseline": True,
             "interval_s": interval_s}

    def sim_cols(idx, C_=None, Lk_=None, dV_=None, Rtim_=None, Plim_=None):
        C_ = C[idx] if C_ is None else C_
        Lk_ = Lk[idx] if Lk_ is None else Lk_
        dV_ = dV[idx] if dV_ is None else dV_
        Rt = R_tim[idx] if Rtim_ is None else Rtim_
        Pl = Plim[idx] if Plim_ is None else Plim_
        R = Rt + R_sink[:, idx]
        return _simulate(a[:, :, idx], C_, Lk_, dV_, Tin[:, idx], R, Pl)

    # healthy reference of the whole fleet (used to choose stragglers / calibrate)
    ref_out = sim_cols(np.arange(n))
    fq0 = ref_out[0]
    clk0 = fq0.mean(axis=0)                                  # (nt, n)
    chip_clk = clk0.mean(axis=0)                             # (n,)

    target = {"gpu_thermal": 2.0, "gpu_throttle_bits": 2.0, "gpu_power_limit": 2.0,
              "gpu_low_clock": 2.0, "silent_from_start": 2.0, "host_slow": 1.0,
              "intermittent": 1.5}.get(fault, 0.0)
    brake = None        # (gpu, u array (nt,))
    dV_t = None         # time-varying dV for intermittent
    sg = None

    def loss(fq_col, ref_col, mask=None):
        m = fq_col.mean(axis=0)
        if mask is not None:
            return 100.0 * (1.0 - m[mask].mean() / ref_col[mask].mean())
        return 100.0 * (1.0 - m.mean() / ref_col.mean())

    if fault == "gpu_thermal":
        cand = np.where(downstream == 0)[0]
        sg = int(rng.choice(cand))
        idx = np.array([sg])
        ref = clk0[:, sg]
        f = lambda r: loss(sim_cols(idx, Rtim_=np.array([r]))[0][:, :, 0], ref)
        R_tim[sg] = _bisect(f, R_tim[sg], R_tim[sg] * 4.0, target)
        truth["cause"] = "thermal"
    elif fault == "gpu_power_limit":
        sg = int(rng.integers(n))
        idx = np.array([sg])
        ref = clk0[:, sg]
        f = lambda p: loss(sim_cols(idx, Plim_=np.array([p]))[0][:, :, 0], ref)
        Plim[sg] = _bisect(f, 450.0, P_TDP, target, increasing=False)
        truth["cause"] = "power_limit"
    elif fault == "gpu_low_clock":
        med = np.array([np.median(chip_clk[host_of == host_of[i]]) for i in range(n)])
        cand = np.where(chip_clk <= med)[0]
        sg = int(rng.choice(cand))
        idx = np.array([sg])
        ref = clk0[:, sg]
        f = lambda d: loss(sim_cols(idx, dV_=np.array([d]))[0][:, :, 0], ref)
        dV[sg] = _bisect(f, dV[sg], dV[sg] + 0.1, target)
        truth["cause"] = "clock"
    elif fault == "silent_from_start":
        z = (chip_clk - chip_clk.mean()) / chip_clk.std()
        order = np.argsort(np.abs(z - 1.2))
        sg = int(rng.choice(order[:5]))
        idx = np.array([sg])
        ref = clk0[:, sg]
        f = lambda L: loss(sim_cols(idx, Lk_=np.array([L]))[0][:, :, 0], ref)
        Lk[sg] = _bisect(f, Lk[sg], Lk[sg] * 3.0, target)
        truth["cause"] = "clock"
        truth["identifiable_without_baseline"] = False
    elif fault == "host_slow":
        hs = int(rng.integers(H))
        idx = np.where(host_of == hs)[0]
        ref = clk0[:, idx]

        def f(p):
            fq = sim_cols(idx, Plim_=np.full(len(idx), p))[0]
            return 100.0 * (1.0 - fq.mean(axis=0).mean(axis=0) / ref.mean(axis=0)).mean()
        Plim[idx] = _bisect(f, 450.0, P_TDP, target, increasing=False)
        truth["slow_gpus"] = [uuids[i] for i in idx]
        truth["slow_hosts"] = [hosts[hs]]
        truth["cause"] = "host"
    elif fault == "intermittent":
        sg = int(rng.integers(n))
        total_rec = nt * interval_s
        want = 0.30 * total_rec
        mask = np.zeros(nt, dtype=bool)
        eps = []
        covered = 0.0
        tries = 0
        while covered < want and tries < 10000:
            tries += 1
            d = rng.uniform(45 * 60.0, 75 * 60.0)
            s0 = rng.uniform(0, total_rec - d)
            i0 = int(np.ceil(s0 / interval_s))
            i1 = int(np.ceil((s0 + d) / interval_s))
            if i1 <= i0 or mask[max(0, i0 - 1):min(nt, i1 + 1)].any():
                continue
            mask[i0:i1] = True
            covered += (i1 - i0) * interval_s
            eps.append((i0, i1))
        eps.sort()
        idx = np.array([sg])
        ref = clk0[:, sg]

        def f(d):
            dv = np.where(mask, dV[sg] + d, dV[sg])[None, :, None]
            return loss(sim_cols(idx, dV_=dv)[0][:, :, 0], ref, mask)
        dd = _bisect(f, 0.0, 0.1, target)
        dV_t = (sg, np.where(mask, dV[sg] + dd, dV[sg]))
        ts = START + pd.to_timedelta(t_s, unit="s")
        truth["episodes"] = [(uuids[sg], ts[i0], START + pd.Timedelta(seconds=i1 * interval_s))
                             for i0, i1 in eps]
        truth["cause"] = "clock"
    elif fault == "gpu_throttle_bits":
        sg = int(rng.integers(n))
        # 2-state Markov brake-stress process: stationary 40 %, mean dwell ~5 min
        dwell_on = max(1.0, 300.0 / interval_s)
        p10 = 1.0 / dwell_on
        p01 = p10 * 0.4 / 0.6
        st = np.zeros(nt, dtype=bool)
        st[0] = rng.random() < 0.4
        r = rng.random(nt)
        for i in range(1, nt):
            st[i] = (r[i] >= p10) if st[i - 1] else (r[i] < p01)
        u = np.where(st, rng.gamma(4.0, 0.25, nt), 0.0)        # mean 1 in stress
        ref = clk0[:, sg]
        # interval-mean clock factor = 1 - 0.5*u*s ; scale s for the target loss
        s = _bisect(lambda s: 100.0 * (1.0 - (ref * (1 - 0.5 * np.clip(u * s, 0, 0.9))).mean()
                                       / ref.mean()), 0.0, 1.0, target)
        brake = (sg, np.clip(u * s, 0, 0.9), st)
        truth["cause"] = "throttle"

    if sg is not None and fault != "host_slow":
        truth["slow_gpus"] = [uuids[sg]]
        truth["slow_hosts"] = []
    truth["slowdown_pct"] = float(target) if fault not in ("clean", "clean_hot_host") else 0.0

    # ---- final fleet simulation with faults applied (only changed GPUs re-simulated)
    R = R_tim[None, :] + R_sink
    fq, P, T, capped, therm = ref_out
    if fault in ("host_slow",):
        chg = np.where(host_of == hs)[0]
    elif sg is not None and fault != "gpu_throttle_bits":
        chg = np.array([sg])
    else:
        chg = np.array([], dtype=int)
    if len(chg):
        dVc = dV[chg] if dV_t is None else dV_t[1][None, :, None]
        out = sim_cols(chg, dV_=dVc)
        for full, part in zip((fq, P, T, capped, therm), out):
            full[:, :, chg] = part
    clk = fq.mean(axis=0)
    pw = P.mean(axis=0)
    tdie = T.mean(axis=0)
    bits = np.where(capped[-1], 0x4, 0) | np.where(therm[-1], 0x20, 0)
    bits = bits.astype(np.uint64)
    if brake is not None:
        g, u, st = brake
        Pb = _power(clk[:, g] * 0.5, tdie[:, g], a[:, :, g].mean(axis=0), C[g], Lk[g], dV[g])
        clk[:, g] = clk[:, g] * (1.0 - 0.5 * u)
        newp = pw[:, g] * (1.0 - u) + Pb * u
        tdie[:, g] = tdie[:, g] - R[:, g] * (pw[:, g] - newp)
        pw[:, g] = newp
        bits[:, g] = bits[:, g] | np.where(st, 0x80, 0).astype(np.uint64)

    # ---- derived / sensor outputs
    a_mean = a_fleet.mean(axis=0)                                        # (nt,)
    util_f = np.clip(100.0 * (0.99 - 1.2 * np.maximum(0.0, 0.97 - a_mean)), 0, 100)
    util = np.clip(util_f[:, None] + 0.4 * rng.standard_normal((nt, n)), 0, 100)
    util = np.round(util, 1)
    Tmem = Tin + 0.045 * (60.0 + 50.0 * a.mean(axis=0)) * 4.0 + 0.35 * (tdie - Tin) - 5.0
    e0 = rng.uniform(1e8, 5e10, n)
    energy = e0[None, :] + np.cumsum(pw * interval_s, axis=0)
    power_rep = pw + 1.5 * rng.standard_normal((nt, n))
    clk_rep = clk + 0.5 * rng.standard_normal((nt, n))
    temp_rep = tdie + 0.3 * rng.standard_normal((nt, n))
    tmem_rep = Tmem + 0.3 * rng.standard_normal((nt, n))

    t_start = START - pd.Timedelta(days=max(7, int(np.ceil(hours / 24.0)) + 1)) if baseline else START
    ts = t_start + pd.to_timedelta(t_s, unit="s")
    df = pd.DataFrame({
        "timestamp": np.repeat(ts.values, n),
        "host": np.tile(np.array(hosts, dtype=object)[host_of], nt),
        "scope": "gpu",
        "gpu_index": pd.array(np.tile(slot, nt), dtype="Int16"),
        "gpu_uuid": np.tile(np.array(uuids, dtype=object), nt),
        "power_w": power_rep.ravel(),
        "energy_j": energy.ravel(),
        "clock_sm_mhz": clk_rep.ravel(),
        "clock_mem_mhz": np.full(nt * n, MEM_CLK),
        "temp_gpu_c": temp_rep.ravel(),
        "temp_mem_c": tmem_rep.ravel(),
        "util_gpu_pct": util.ravel().astype(float),
        "power_limit_w": np.broadcast_to(Plim[None, :], (nt, n)).ravel().astype(float),
        "throttle_reasons": pd.array(bits.ravel(), dtype="UInt64"),
    })
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True).astype("datetime64[ns, UTC]")
    # ---- missing samples: ~0.1 % random rows + one short scrape outage of one host
    keep = rng.random(nt * n) >= 0.001
    oh = int(rng.integers(H))
    o0 = int(rng.integers(0, max(1, nt - 10)))
    od = int(rng.integers(2, 8))
    ti = np.repeat(np.arange(nt), n)
    hi_ = np.tile(host_of, nt)
    keep &= ~((hi_ == oh) & (ti >= o0) & (ti < o0 + od))
    df = df.loc[keep].reset_index(drop=True)
    if baseline:
        truth.update(baseline_of=case, baseline_shows_fault=False, main_record_start=START)
        if hot_host is not None:
            truth["hot_host"] = hosts[hot_host]
    return df, truth


if __name__ == "__main__":
    import time
    for c in ("clean", "clean_hot_host", "gpu_thermal", "gpu_throttle_bits",
              "gpu_power_limit", "gpu_low_clock", "host_slow", "intermittent",
              "silent_from_start"):
        t0 = time.time()
        d, tr = generate(1, c)
        print(f"{c:18s} shape={d.shape} {time.time() - t0:5.2f}s slow={tr['slow_gpus'][:1]} "
              f"hosts={tr['slow_hosts']} pct={tr['slowdown_pct']} eps={len(tr['episodes'])}")
    d, tr = generate(2, "gpu_thermal", interval_s=300.0, gpus_per_host=4)
    print("300s/4gpu", d.shape)

    # baseline (burn-in) self-check, seed 1.  C's fleet depends on the case, so each
    # baseline is compared with its own main record (the slow chips shown apart).
    for c in ("clean", "clean_hot_host", "silent_from_start", "gpu_low_clock"):
        t0 = time.time()
        b, tb = generate(1, c, baseline=True)
        tb_s = time.time() - t0
        m, tm = generate(1, c)
        ids = lambda x: sorted(set(zip(x.host, x.gpu_index, x.gpu_uuid)))
        ok = m[~m.gpu_uuid.isin(tm["slow_gpus"])]
        mm = ok.groupby("gpu_uuid").clock_sm_mhz.median()
        mb = b.groupby("gpu_uuid").clock_sm_mhz.median().reindex(mm.index)
        dd = mb - mm
        print(f"baseline {c:18s} shape={b.shape} {tb_s:5.2f}s {b.timestamp.min():%Y-%m-%d} .. "
              f"{b.timestamp.max():%Y-%m-%d %H:%M} (main from {m.timestamp.min():%Y-%m-%d}) "
              f"ids match={ids(b) == ids(m)} dtypes match={bool((b.dtypes == m.dtypes).all())} "
              f"hot_host={tb.get('hot_host')}")
        print(f"   chip median clock, baseline vs main (healthy chips): fleet sd "
              f"{mm.std():.1f} MHz, corr {np.corrcoef(mb, mm)[0, 1]:.3f}, shift "
              f"{dd.median():+.1f} MHz, sd of diff {dd.std():.2f} MHz, max |diff-shift| "
              f"{np.abs(dd - dd.median()).max():.1f} MHz")
        for v in tm["slow_gpus"]:
            mv = m[m.gpu_uuid == v].clock_sm_mhz.median()
            bv = b[b.gpu_uuid == v].clock_sm_mhz.median()
            print(f"   slow chip {v[:12]}: main {mv:.1f} MHz, baseline {bv:.1f} MHz "
                  f"({100 * (1 - mv / bv):.2f} % lower in main), rank in main "
                  f"{int((m.groupby('gpu_uuid').clock_sm_mhz.median() < mv).sum())}/{len(mm) + 1}")
