"""Independent GPU-fleet telemetry generator, variant B.

Simulates interval-mean telemetry (DCGM/nvidia-smi style averages) of a fleet of
H100-SXM-like GPUs running one synchronous data-parallel training job, with a known
ground truth of slow GPUs / hosts.  numpy + pandas only.

Physical model (variant B assumptions)
--------------------------------------
* Sampling: each row is the mean over its interval (default ``interval_s=300``, i.e. 5-min
  averages).  Fast common signals (workload phases, episode edges) are simulated on a
  fine grid and averaged into the interval, so a partially covered interval shows a
  fractional effect.  ``throttle_reasons`` are the bits seen at the sampling instant.
* Fleet: ``n_hosts=32`` hosts of ``gpus_per_host=4`` GPUs by default.
* Clock: every chip runs power-capped at 700 W; its sustained SM clock under the cap is
  set by manufacturing leakage: N(1740, 30 MHz) across the fleet (clipped 1620..1860).
  Interval-mean clock = healthy chip clock x (1 - slowdown)
  + workload-phase offset common to all GPUs (lighter phases -> more clock headroom)
  + host-correlated jitter (AR(1), sd ~8 MHz, shared by all GPUs of a host:
    host power delivery / host-side input pipeline)
  - leakage/temperature coupling (~0.8 MHz per degC above the fleet reference,
    computed from the *healthy* die temperature)
  + per-sample noise (instantaneous 15-MHz-binned jitter averaged over the interval).
* Power: drawn power ~ 97 % of the enforced limit in compute phases (per-GPU offset sd 1 %),
  drops in checkpoint/eval phases.  P ~ f^2.5 along the DVFS curve, so a 1 % clock
  loss via a power cap needs ~2.5 % less power.
* Temperature: die = inlet (25 degC + diurnal +-2.5 degC swing + per-host offset) +
  per-slot offset (downstream slots hotter) + per-GPU offset + 0.062 degC/W x power + noise;
  HBM = die + ~6 degC.  SwThermalSlowdown appears with a probability that is logistic in the
  die temperature (threshold ~82 degC), so hot hosts show it a little more.
* Evidence vs clock (key variant-B assumption): a slow GPU's clock is lower by a
  persistent offset throughout the record, while its evidence (thermal-bit share, HW
  slowdown bits, hotter die) appears in a random subset of samples that is statistically
  independent of the clock series (evidence does NOT coincide with clock dips).
* Utilisation is common to all GPUs (synchronous job: fast GPUs wait at all-reduce but
  NVML still reports the kernel as busy), so it does not reveal stragglers.

Cases
-----
clean            : nothing.
clean_hot_host   : one host has +5..8 degC inlet; its GPUs are hotter, a bit slower via
                   leakage coupling and show a little more SwThermalSlowdown; NOT a fault.
gpu_thermal      : one GPU x0.98 clock throughout; in a random ~60 % of samples it carries
                   SwThermalSlowdown (0x20) and runs ~+6.3 degC, else ~+2.8 degC over its own healthy
                   temperature (~+4 degC above host peers on average);
                   power ~2 % lower; fewer SwPowerCap bits when thermally limited.
gpu_throttle_bits: one GPU x0.98 clock; HwSlowdown (0x8) set in a random ~35 % of samples;
                   power ~3 % lower.
gpu_power_limit  : one GPU x0.98 clock; enforced power_limit_w ~ 700*(0.98^2.5) ~ 665 W;
                   draws ~ its lower cap, SwPowerCap set in most samples.
gpu_low_clock    : one GPU x0.98 clock, nothing else (power -1 % from the dynamic part,
                   well within per-GPU power spread; bits normal).  The victim chip's
                   healthy clock is set to its host peers' median (+-5 MHz), so it sits
                   ~2 % below its peers.
host_slow        : host-level power cap: each GPU of one host gets power_limit_w lowered
                   ~2.5 % (~682 W) and runs x0.99 clock.  slow_hosts=[host] and slow_gpus
                   lists that host's GPUs.
intermittent     : one GPU x0.985 clock during ~30 % of the record in ~1 h episodes with
                   random onsets (no other evidence), cause "clock".
silent_from_start: one GPU x0.98 clock, with its healthy clock chosen so the slowed clock
                   lies inside the normal fleet spread (mean-1sd .. mean+0.5sd); power,
                   bits and temperature are those of any chip at the cap;
                   identifiable_without_baseline=False.

Nuisances: diurnal inlet swing, host/slot temperature offsets, common workload phases
(periodic checkpoint/eval dips), host-correlated clock jitter, sensor noise, rare
background HwSlowdown blips on random healthy GPUs, ~0.2 % missing rows plus one
fleet-wide missing timestamp.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

CASES = ("clean", "clean_hot_host", "gpu_thermal", "gpu_throttle_bits", "gpu_power_limit",
         "gpu_low_clock", "host_slow", "intermittent", "silent_from_start")

TDP_W = 700.0
CLK_MEAN = 1740.0
CLK_SD = 30.0
CLK_MAX = 1980.0
MEM_CLK = 2619.0
T_REF = 69.0          # fleet reference die temperature for leakage coupling
K_T_MHZ = 0.8         # MHz lost per degC of die temperature (leakage under power cap)
R_TH = 0.062          # degC per W

B_IDLE, B_APP, B_SWPC, B_HWS, B_SYNC, B_SWTH, B_HWTH, B_BRAKE = (
    0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80)

START = pd.Timestamp("2026-01-05 00:00:00", tz="UTC")


def _ar1(rng, n_series, n_t, phi, sd):
    """Stationary AR(1) series, shape (n_series, n_t), marginal sd `sd`."""
    e = rng.normal(0.0, sd * np.sqrt(1 - phi ** 2), size=(n_series, n_t))
    out = np.empty_like(e)
    out[:, 0] = rng.normal(0.0, sd, n_series)
    for t in range(1, n_t):
        out[:, t] = phi * out[:, t - 1] + e[:, t]
    return out


def _interval_mean(fine, per):
    n = fine.shape[-1] // per
    return fine[..., : n * per].reshape(fine.shape[:-1] + (n, per)).mean(-1)


def _baseline_start(hours: float) -> pd.Timestamp:
    # whole days before START (>= 7), ending at least one day before the main record
    return START - pd.Timedelta(days=max(7, int(np.ceil(hours / 24.0)) + 1))


def generate(seed: int, case: str, *, interval_s: float = 300.0, hours: float = 72.0,
             n_hosts: int = 32, gpus_per_host: int = 4, baseline: bool = False
             ) -> tuple[pd.DataFrame, dict]:
    """Main record of `case`, or with ``baseline=True`` its baseline (burn-in) record.

    Baseline (variant B): the healthy record of the same fleet >= 7 whole days earlier
    (ending >= 1 day before START): same hosts/slots/gpu_uuid, same healthy chip clocks
    ``clk0`` (including the case's choice of the victim's healthy clock, e.g. the host
    median for gpu_low_clock or the fast healthy clock for silent_from_start), same
    power offsets, host/slot/chip temperature offsets and HBM offsets, 700 W limits; no
    fault (slow_factor 1, no extra bits/heat, healthy limits).  Workload phases, load
    wobble, inlet wander, host jitter, noise, bits, energy offset and missing rows are
    drawn from SeedSequence([seed, 0xBA5E]); the main stream is replayed through all
    static and case draws, so the main record is unchanged.
    Choices: clean_hot_host -- the +5..8 degC inlet is the host's place in the room
    (rack/aisle), a fleet property, so the baseline shares it; silent_from_start -- the
    fault came after the burn-in, so the baseline shows the chip healthy (that is why it
    needs a baseline); gpu_low_clock likewise healthy.  truth["baseline_shows_fault"]
    is False for every case.
    """
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; expected one of {CASES}")
    rng = np.random.default_rng(seed)
    rb = np.random.default_rng(np.random.SeedSequence([int(seed), 0xBA5E])) if baseline else None

    def tv(draw):
        # time-varying block: the baseline replays it on the main stream, keeps its own
        if rb is None:
            return draw(rng)
        draw(rng)
        return draw(rb)
    interval_s = float(interval_s)
    T = int(round(hours * 3600.0 / interval_s))
    H, P = int(n_hosts), int(gpus_per_host)
    G = H * P
    ts = (_baseline_start(hours) if baseline else START) + pd.to_timedelta(
        np.arange(T) * interval_s, unit="s")
    t_h = np.arange(T) * interval_s / 3600.0  # hours since start (interval start)

    hosts = np.array([f"node{h + 1:03d}" for h in range(H)])
    host_of = np.repeat(np.arange(H), P)
    slot_of = np.tile(np.arange(P), H)
    uu = rng.integers(0, 16, size=(G, 32))
    hexd = np.array(list("0123456789abcdef"))
    uuids = np.array(["GPU-" + "".join(hexd[r[:8]]) + "-" + "".join(hexd[r[8:12]]) + "-"
                      + "".join(hexd[r[12:16]]) + "-" + "".join(hexd[r[16:20]]) + "-"
                      + "".join(hexd[r[20:32]]) for r in uu])

    # ---------------- common workload phases (fine grid, then interval mean) -------------
    fine_dt = min(60.0, interval_s)
    per = max(1, int(round(interval_s / fine_dt)))
    Tf = T * per
    def _load(r):
        load_f = np.ones(Tf)
        # periodic checkpoint / eval phases every ~2-4 h lasting 5-20 min at reduced load
        tpos = r.uniform(0.5, 2.0) * 3600.0
        while tpos < Tf * fine_dt:
            dur = r.uniform(5, 20) * 60.0
            i0, i1 = int(tpos / fine_dt), int((tpos + dur) / fine_dt)
            load_f[i0:i1] = r.uniform(0.45, 0.75)
            tpos += dur + r.uniform(2.0, 4.0) * 3600.0
        # slow data-dependent wobble in load (all GPUs together)
        load_f *= 1.0 - 0.015 * np.abs(_ar1(r, 1, Tf, 0.98, 1.0)[0])
        return load_f
    load_f = tv(_load)
    load = _interval_mean(load_f, per)                     # (T,)
    light = 1.0 - load                                     # 0 in compute, up to ~0.5
    util_common = 99.0 * load_f
    util_common = _interval_mean(util_common, per)
    phase_clk = 200.0 * light                              # headroom -> clock rises
    # instantaneous phase at the sampling instant (for bits): last fine sample of interval
    load_inst = load_f[per - 1:: per][:T]

    # ---------------- per-chip / per-host static properties ------------------------------
    clk0 = np.clip(rng.normal(CLK_MEAN, CLK_SD, G), CLK_MEAN - 4 * CLK_SD, CLK_MEAN + 4 * CLK_SD)
    plimit = np.full(G, TDP_W)
    pw_off = rng.normal(0.0, 0.01, G)
    host_inlet_off = rng.normal(0.0, 1.5, H)
    slot_temp_off = np.linspace(0.0, 3.0, P)
    gpu_temp_off = rng.normal(0.0, 1.2, G)
    mem_off = rng.normal(6.0, 1.5, G)

    # ---------------- truth / fault configuration -----------------------------------------
    slow_factor = np.ones((G, T))          # multiplicative clock factor (truth)
    pw_factor = np.ones((G, T))            # extra multiplicative power factor
    temp_extra = np.zeros((G, T))          # fault-driven extra die temperature
    extra_bits = np.zeros((G, T), dtype=np.uint64)
    suppress_pc = np.zeros((G, T), dtype=bool)
    force_pc = np.zeros(G)                 # extra SwPowerCap probability
    inlet_extra = np.zeros(H)

    truth = {"case": case, "slow_gpus": [], "slow_hosts": [], "episodes": [],
             "slowdown_pct": 0.0, "cause": None, "identifiable_without_baseline": True,
             "interval_s": interval_s}
    victim = int(rng.integers(G))
    vhost = int(rng.integers(H))

    if case == "clean_hot_host":
        inlet_extra[vhost] = rng.uniform(5.0, 8.0)
    elif case == "gpu_thermal":
        slow_factor[victim] = 0.98
        # neutralise its static slot/chip temperature offset to its host peers' mean, so the
        # fault-driven extra below is what makes it hotter than its peers (~+4 degC on average)
        peers = np.where((host_of == host_of[victim]) & (np.arange(G) != victim))[0]
        if peers.size:
            gpu_temp_off[victim] = np.mean(slot_temp_off[slot_of[peers]] + gpu_temp_off[peers]) \
                - slot_temp_off[slot_of[victim]]
        m = rng.random(T) < 0.60                     # independent of the clock series
        temp_extra[victim] = 2.8 + 3.5 * m + rng.normal(0, 0.4, T)
        extra_bits[victim, m] |= np.uint64(B_SWTH)
        suppress_pc[victim] = m & (rng.random(T) < 0.7)
        pw_factor[victim] = 0.98
        truth.update(slow_gpus=[uuids[victim]], slowdown_pct=2.0, cause="thermal")
    elif case == "gpu_throttle_bits":
        slow_factor[victim] = 0.98
        m = rng.random(T) < 0.35
        extra_bits[victim, m] |= np.uint64(B_HWS)
        pw_factor[victim] = 0.97
        truth.update(slow_gpus=[uuids[victim]], slowdown_pct=2.0, cause="throttle")
    elif case == "gpu_power_limit":
        slow_factor[victim] = 0.98
        plimit[victim] = round(TDP_W * 0.98 ** 2.5)  # ~665 W
        force_pc[victim] = 0.12
        truth.update(slow_gpus=[uuids[victim]], slowdown_pct=2.0, cause="power_limit")
    elif case == "gpu_low_clock":
        peers = np.where((host_of == host_of[victim]) & (np.arange(G) != victim))[0]
        base = np.median(clk0[peers]) if peers.size else CLK_MEAN
        clk0[victim] = base + rng.normal(0.0, 5.0)   # typical chip for its host
        slow_factor[victim] = 0.98
        pw_factor[victim] = 0.99
        truth.update(slow_gpus=[uuids[victim]], slowdown_pct=2.0, cause="clock")
    elif case == "host_slow":
        idx = np.where(host_of == vhost)[0]
        slow_factor[idx] = 0.99
        plimit[idx] = np.round(TDP_W * 0.99 ** 2.5 + rng.normal(0, 1.0, idx.size))  # ~682 W
        force_pc[idx] = 0.10
        truth.update(slow_gpus=[uuids[i] for i in idx], slow_hosts=[hosts[vhost]],
                     slowdown_pct=1.0, cause="host")
    elif case == "intermittent":
        total = hours * 3600.0
        target = 0.30 * total
        covered = np.zeros(Tf, dtype=bool)
        eps = []
        tries = 0
        while covered.sum() * fine_dt < target and tries < 10000:
            tries += 1
            dur = float(np.clip(rng.normal(3600.0, 900.0), 1800.0, 5400.0))
            s = rng.uniform(0.0, total - dur)
            i0, i1 = int(s / fine_dt), int((s + dur) / fine_dt)
            if covered[max(0, i0 - 1): i1 + 1].any():
                continue  # keep episodes disjoint
            covered[i0:i1] = True
            eps.append((i0 * fine_dt, i1 * fine_dt))
        frac = _interval_mean(covered.astype(float), per)
        slow_factor[victim] = 1.0 - 0.015 * frac
        eps.sort()
        truth["episodes"] = [(uuids[victim], START + pd.Timedelta(seconds=a),
                              START + pd.Timedelta(seconds=b)) for a, b in eps]
        truth.update(slow_gpus=[uuids[victim]], slowdown_pct=1.5, cause="clock")
    elif case == "silent_from_start":
        slowed = rng.uniform(CLK_MEAN - CLK_SD, CLK_MEAN + 0.5 * CLK_SD)
        clk0[victim] = slowed / 0.98
        slow_factor[victim] = 0.98
        truth.update(slow_gpus=[uuids[victim]], slowdown_pct=2.0, cause="clock",
                     identifiable_without_baseline=False)

    if baseline:
        # healthy burn-in of the same chips: keep clk0 / offsets / hot inlet, drop the fault
        slow_factor[:] = 1.0
        pw_factor[:] = 1.0
        temp_extra[:] = 0.0
        extra_bits[:] = 0
        suppress_pc[:] = False
        force_pc[:] = 0.0
        plimit = np.full(G, TDP_W)
        truth = {"case": case, "slow_gpus": [], "slow_hosts": [], "episodes": [],
                 "slowdown_pct": 0.0, "cause": None, "identifiable_without_baseline": True,
                 "interval_s": interval_s, "baseline_of": case, "baseline_shows_fault": False,
                 "main_record_start": START}
        if case == "clean_hot_host":
            truth["hot_host"] = str(hosts[vhost])
        rng = rb              # every later draw is time-varying: the baseline's own

    # ---------------- power -----------------------------------------------------------------
    pw_noise = rng.normal(0.0, 0.006, (G, T)) * np.sqrt(60.0 / interval_s) ** 0.5
    power_frac = 0.97 * (1.0 + pw_off)[:, None] * (0.55 + 0.45 * load)[None, :] ** 1.3
    power = plimit[:, None] * power_frac * pw_factor * (1.0 + pw_noise)
    power = np.minimum(power, plimit[:, None] * 1.01)

    # ---------------- temperatures ------------------------------------------------------------
    diurnal = 2.5 * np.sin(2 * np.pi * (t_h - 9.0) / 24.0)   # peak mid-afternoon
    inlet = 25.0 + diurnal[None, :] + (host_inlet_off + inlet_extra)[host_of][:, None]
    inlet = inlet + _ar1(rng, H, T, 0.9, 0.3)[host_of]
    tnoise = rng.normal(0.0, 0.5, (G, T))
    # healthy die temperature (same power without the fault's power factor)
    healthy_power = power / pw_factor
    temp_healthy = inlet + (slot_temp_off[slot_of] + gpu_temp_off)[:, None] + R_TH * healthy_power
    temp_gpu = inlet + (slot_temp_off[slot_of] + gpu_temp_off)[:, None] + R_TH * power \
        + temp_extra + tnoise
    temp_mem = temp_gpu + mem_off[:, None] + rng.normal(0.0, 0.6, (G, T))

    # ---------------- clocks ------------------------------------------------------------------
    host_jit = _ar1(rng, H, T, np.exp(-interval_s / 1800.0), 8.0)[host_of]
    clk_noise = rng.normal(0.0, 20.0, (G, T)) / np.sqrt(max(interval_s / 10.0, 1.0))
    healthy_clk = (clk0[:, None] + phase_clk[None, :] + host_jit
                   - K_T_MHZ * (temp_healthy - T_REF))
    healthy_clk = np.minimum(healthy_clk, CLK_MAX)
    clock = healthy_clk * slow_factor + clk_noise
    clock = np.minimum(clock, CLK_MAX)

    # ---------------- utilisation ------------------------------------------------------------
    util = np.clip(util_common[None, :] + rng.normal(0.0, 0.4, (G, T)), 0.0, 100.0)

    # ---------------- throttle bits at sampling instant -----------------------------------------
    u = rng.random((G, T))
    p_pc = np.clip(0.15 + 0.75 * ((load_inst - 0.5) / 0.5) ** 2, 0.0, 0.92)[None, :] + force_pc[:, None]
    p_pc = np.where(load_inst[None, :] < 0.8, 0.05, p_pc)
    bits = np.where((u < p_pc) & ~suppress_pc, np.uint64(B_SWPC), np.uint64(0)).astype(np.uint64)
    p_th = 1.0 / (1.0 + np.exp(-(temp_gpu - 82.0) / 1.5))
    bits |= np.where(rng.random((G, T)) < p_th, np.uint64(B_SWTH), np.uint64(0)).astype(np.uint64)
    idle = (load_inst[None, :] < 0.8) & (rng.random((G, T)) < 0.3)
    bits |= np.where(idle, np.uint64(B_IDLE), np.uint64(0)).astype(np.uint64)
    blip = rng.random((G, T)) < 0.0004
    bits |= np.where(blip, np.uint64(B_HWS), np.uint64(0)).astype(np.uint64)
    bits |= extra_bits

    # ---------------- energy (cumulative, includes missing samples) ----------------------------
    energy = rng.uniform(1e9, 5e10, G)[:, None] + np.cumsum(power * interval_s, axis=1)

    # ---------------- assemble -----------------------------------------------------------------
    df = pd.DataFrame({
        "timestamp": np.tile(ts.values, G),
        "host": np.repeat(hosts[host_of], T),
        "scope": "gpu",
        "gpu_index": pd.array(np.repeat(slot_of, T), dtype="Int16"),
        "gpu_uuid": np.repeat(uuids, T),
        "power_w": np.round(power.ravel(), 2),
        "energy_j": np.round(energy.ravel(), 1),
        "clock_sm_mhz": np.round(clock.ravel(), 1),
        "clock_mem_mhz": np.full(G * T, MEM_CLK),
        "temp_gpu_c": np.round(temp_gpu.ravel(), 1),
        "temp_mem_c": np.round(temp_mem.ravel(), 1),
        "util_gpu_pct": np.round(util.ravel(), 1),
        "power_limit_w": np.repeat(plimit, T).astype(np.float64),
        "throttle_reasons": pd.array(bits.ravel(), dtype="UInt64"),
    })
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True).astype("datetime64[ns, UTC]")
    keep = rng.random(len(df)) >= 0.002
    if T > 10:
        gap_t = ts[int(rng.integers(5, T - 5))]
        keep &= (df["timestamp"] != gap_t).to_numpy()
    df = df[keep].reset_index(drop=True)
    for c in ("power_w", "energy_j", "clock_sm_mhz", "clock_mem_mhz", "temp_gpu_c",
              "temp_mem_c", "util_gpu_pct", "power_limit_w"):
        df[c] = df[c].astype(np.float64)
    truth["slow_gpus"] = [str(x) for x in truth["slow_gpus"]]
    truth["slow_hosts"] = [str(x) for x in truth["slow_hosts"]]
    truth["episodes"] = [(str(g), a, b) for g, a, b in truth["episodes"]]
    return df, truth


if __name__ == "__main__":
    import time
    for c in CASES:
        t0 = time.time()
        d, tr = generate(0, c)
        print(f"{c:18s} rows={d.shape[0]:7d} cols={d.shape[1]} {time.time() - t0:5.2f}s "
              f"slow={len(tr['slow_gpus'])} hosts={tr['slow_hosts']} cause={tr['cause']} "
              f"eps={len(tr['episodes'])} ident={tr['identifiable_without_baseline']}")
    t0 = time.time()
    d, _ = generate(1, "clean", interval_s=60.0, n_hosts=16, gpus_per_host=8)
    print(f"big: {d.shape} in {time.time() - t0:.2f}s")
    print(d.dtypes)

    # baseline self-check, seed 0: same chips, healthy, independent time-varying draws
    for c in ("clean", "clean_hot_host", "gpu_low_clock", "silent_from_start"):
        t0 = time.time()
        b, tb = generate(0, c, baseline=True)
        dt_b = time.time() - t0
        m, tm = generate(0, c)
        ref = m[~m.gpu_uuid.isin(tm["slow_gpus"])]    # same chips; the victim is shown apart
        key = lambda x: sorted(set(zip(x.host, x.gpu_index, x.gpu_uuid)))
        mb = b.groupby("gpu_uuid").clock_sm_mhz.median()
        mr = ref.groupby("gpu_uuid").clock_sm_mhz.median()
        mb = mb.reindex(mr.index)
        dd = mb - mr
        print(f"baseline {c:18s} rows={b.shape[0]} cols={b.shape[1]} {dt_b:5.2f}s "
              f"{b.timestamp.min():%Y-%m-%d} .. {b.timestamp.max():%Y-%m-%d %H:%M} "
              f"(main from {m.timestamp.min():%Y-%m-%d}) ids match={key(b) == key(m)} "
              f"dtypes match={bool((b.dtypes == m.dtypes).all())} hot_host={tb.get('hot_host')}")
        print(f"   chip median clock baseline vs main (healthy chips): "
              f"fleet sd {mr.std():.1f} MHz, corr {np.corrcoef(mb, mr)[0, 1]:.3f}, shift "
              f"{dd.median():+.1f} MHz, sd of diff {dd.std():.2f} MHz, "
              f"max |diff-shift| {np.abs(dd - dd.median()).max():.1f} MHz")
        if tm["slow_gpus"]:
            v = tm["slow_gpus"][0]
            mv = m[m.gpu_uuid == v].clock_sm_mhz.median()
            bv = b[b.gpu_uuid == v].clock_sm_mhz.median()
            print(f"   victim {v[:12]}: main {mv:.1f} MHz, baseline {bv:.1f} MHz "
                  f"({100 * (1 - mv / bv):.2f} % lower in main), rank in main "
                  f"{int((m.groupby('gpu_uuid').clock_sm_mhz.median() < mv).sum())}/{len(mr) + 1}")
