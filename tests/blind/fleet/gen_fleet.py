"""Generator A (blind): GPU-fleet telemetry from a physical description, with ground truth.

Written for scoring fleet and straggler detectors, without reading powerlab's
detectors or its own fleet simulators. Column names are powerlab's canonical
telemetry columns (README "Canonical telemetry"): ``timestamp`` (tz-aware UTC),
``host``, ``scope`` ("gpu"), ``gpu_index`` (Int16), ``gpu_uuid``, ``power_w``,
``energy_j``, ``clock_sm_mhz``, ``clock_mem_mhz``, ``temp_gpu_c``, ``temp_mem_c``,
``util_gpu_pct``, ``power_limit_w``, ``throttle_reasons`` (UInt64, NVML
clock-event bits), plus ``rack`` (named in docs/throughput_methods.md) and
``temp_inlet_c`` [°C], the host's cold-aisle inlet temperature -- the docs name no
column for it; this is our choice.

Physics (H100-SXM-like board, all per sample, samples are instantaneous):

* Inlet: per rack ``22 °C + A sin(2 pi (h_local - 9) / 24)`` (peak 15:00 local,
  A = 2.5 °C), a rack offset N(0, 0.7), a host offset N(0, 0.4) and an AR(1)
  wander (0.3 °C, 2 h correlation).
* Die temperature: ``T = T_inlet + position offset + R_th * P`` (steady state;
  sampling is >= 1 min, the heatsink settles in ~1 min). Rear board positions 4-7
  run 3 °C warmer (pre-heated air); chip R_th ~ N(0.060, 0.004) °C/W.
* Power: ``P(f, T) = P_leak(T) + a * P_dyn * (f / f_max)^3``, leakage
  ``P_leak = L_chip * 150 W * (1 + 0.02 (T - 60))`` with L_chip ~ logN(0, 0.10)
  (process/leakage bin), activity a ~ N(1, 0.01) per chip times a slow job
  intensity wander; ``P_dyn = 650 W``, ``f_max`` = 1980 MHz.
* DVFS: the firmware runs at ``f_max`` unless ``P(f_max) > power_limit_w``, then
  at the clock where ``P = power_limit_w`` (SwPowerCap bit 0x4); if the die would
  exceed 87 °C it slows until T = 87 °C (SwThermalSlowdown bit 0x20). Fixed point
  in (f, T) solved by iteration; clocks reported in 15 MHz bins. A hotter inlet
  raises leakage, so a capped chip clocks lower: about 0.2 % per °C.
* Training job: utilisation ~99.5 % in compute; a checkpoint of
  ``checkpoint_min`` every ``checkpoint_every_h`` hours (GPU idle: util ~5 %,
  ~120 W, clocks at f_max, GpuIdle bit 0x1).
* Noise: power +-1.5 % (t3), die temperature N(0, 0.4), util N(0, 0.3).
* The fleet (inlet, chips, noise) depends on ``seed`` only, the injection on a
  second stream: the same seed gives the same fleet in every case, so each
  case has a clean twin (``case="clean"``, same seed).

Cases (``case=``), each returned with a ground-truth dict:

* ``"clean"``: nothing injected. Truth: no straggler, no slow host.
* ``"slow_host"``: every GPU of one host runs 2 % (``slow_pct``) below the clock
  it would have (a host-level clock ceiling, e.g. a BIOS/BMC power-brake
  setting); its power falls accordingly (less dynamic power). No throttle bit.
* ``"data_stall"``: one host's GPUs idle on PCIe/NIC stalls a fraction
  ``stall_frac`` (3 % +- 1 %) of the time: util ~97 %, mean power lower by the
  stall share (stall power ~40 % of busy), clocks unchanged. In the synchronous
  job every *other* GPU waits the same time in spinning NCCL kernels: util stays
  ~99.5 %, power lower by stall_frac x 35 %. Truth: the stall host, no clock
  straggler.
* ``"rack_cooling"``: one rack's inlet is 8-10 °C hotter 13:00-18:00 local time
  (``site_tz``) every day (ramps 12:40-13:00 up and 17:40-18:00 down); its GPUs are hotter and, capped,
  clock lower then (thermal slowdown where they reach 87 °C). Truth: rack, its
  hosts, the local window and the UTC intervals; the cause is the inlet, not the
  GPUs.
* ``"power_limit_change"``: at ``change_at`` (default: the record's midpoint,
  UTC) every GPU's limit goes 700 -> 600 W (``power_limit_w``); clocks drop
  fleet-wide. Truth: time, old and new limit.

Usage::

    df, truth = generate_fleet(n_hosts=8, days=2, interval_s=300, case="slow_host", seed=3)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["generate_fleet", "CASES", "BITS", "F_MAX_MHZ"]

CASES = ("clean", "slow_host", "data_stall", "rack_cooling", "power_limit_change")
BITS = {"GpuIdle": 0x1, "SwPowerCap": 0x4, "HwSlowdown": 0x8, "SwThermalSlowdown": 0x20}
F_MAX_MHZ = 1980.0
F_MIN_MHZ = 345.0
CLOCK_BIN_MHZ = 15.0
P_DYN_W = 650.0
P_LEAK_W = 150.0
LEAK_PER_C = 0.02
T_SLOW_C = 87.0
IDLE_W = 120.0
MEM_CLOCK_MHZ = 2619.0


def _ar1(rng, n, sigma, corr_steps, size=()):
    """AR(1) series with stationary sd ``sigma`` along axis 0."""
    phi = np.exp(-1.0 / max(corr_steps, 1e-9))
    e = rng.normal(0, sigma * np.sqrt(1 - phi * phi), size=(n, *size))
    x = np.empty_like(e)
    x[0] = rng.normal(0, sigma, size=size)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x


def _solve_dvfs(t_base, r_th, leak, act, limit, ceiling):
    """Clock [MHz], die temperature [°C], power [W], bits for busy GPUs.

    t_base: inlet + position [°C]; r_th [°C/W]; leak: chip leakage factor;
    act: activity; limit: power limit [W]; ceiling: clock ceiling factor.
    All arrays broadcast to (T, G).
    """
    f = np.full(np.broadcast(t_base, r_th, leak, act, limit).shape, F_MAX_MHZ)
    temp = t_base + r_th * 600.0
    for _ in range(30):
        p_leak = leak * P_LEAK_W * (1 + LEAK_PER_C * (temp - 60.0))
        head = np.clip((limit - p_leak) / (act * P_DYN_W), 1e-6, None)
        f_cap = F_MAX_MHZ * np.cbrt(head)
        # thermal: largest power that keeps T <= T_SLOW
        p_therm = (T_SLOW_C - t_base) / r_th
        head_t = np.clip((p_therm - p_leak) / (act * P_DYN_W), 1e-6, None)
        f_th = F_MAX_MHZ * np.cbrt(head_t)
        f_new = np.minimum(np.minimum(F_MAX_MHZ, f_cap), f_th) * ceiling
        f_new = np.clip(f_new, F_MIN_MHZ, F_MAX_MHZ)
        power = p_leak + act * P_DYN_W * (f_new / F_MAX_MHZ) ** 3
        temp_new = t_base + r_th * power
        if np.max(np.abs(f_new - f)) < 0.01 and np.max(np.abs(temp_new - temp)) < 0.001:
            f, temp = f_new, temp_new
            break
        f, temp = f_new, 0.5 * temp + 0.5 * temp_new
    p_leak = leak * P_LEAK_W * (1 + LEAK_PER_C * (temp - 60.0))
    power = p_leak + act * P_DYN_W * (f / F_MAX_MHZ) ** 3
    capped = (f_cap < F_MAX_MHZ) & (f_cap <= f_th)
    thermal = (f_th < F_MAX_MHZ) & (f_th < f_cap)
    bits = np.where(capped, BITS["SwPowerCap"], 0) | np.where(thermal, BITS["SwThermalSlowdown"], 0)
    return f, temp, power, bits


def generate_fleet(n_hosts=8, gpus_per_host=8, hosts_per_rack=4, days=2.0, interval_s=60,
                   case="clean", seed=0, start="2026-06-01T00:00:00Z", site_tz="America/Chicago",
                   power_limit_w=700.0, checkpoint_every_h=4.0, checkpoint_min=4.0,
                   slow_pct=2.0, stall_frac=0.03, cooling_delta_c=None, change_at=None,
                   new_limit_w=600.0, target=None):
    """Fleet telemetry frame and its ground truth.

    Parameters
    ----------
    n_hosts, gpus_per_host, hosts_per_rack : int
    days : float
        Record length [d].
    interval_s : int
        Sampling interval [s]: 60, 300 or 900 (any positive value works).
    case : str
        One of :data:`CASES`.
    seed : int
    start : str
        First timestamp (UTC).
    site_tz : str
        IANA zone of the site, for the diurnal inlet and the afternoon fault.
    power_limit_w : float
        Enforced limit [W] (before a ``power_limit_change``).
    slow_pct : float
        ``slow_host`` clock deficit [%].
    stall_frac : float
        ``data_stall`` mean stall share [-].
    cooling_delta_c : float or None
        ``rack_cooling`` inlet rise [°C]; None: uniform 8-10.
    change_at : str or None
        ``power_limit_change`` time (UTC); None: the record's midpoint (rounded
        to the sampling grid).
    new_limit_w : float
        Limit after the change [W].
    target : str, int or None
        The host (``slow_host``, ``data_stall``) or rack (``rack_cooling``) to
        affect; None: drawn from the seed.

    Returns
    -------
    df : pandas.DataFrame
        One row per GPU and sample, sorted by timestamp, host, gpu_index.
    truth : dict
        What was injected (see module docstring), JSON-serialisable.
    """
    if case not in CASES:
        raise ValueError(f"case must be one of {CASES}")
    rng = np.random.default_rng(seed)  # the fleet: inlet, chips, noise (same for every case)
    rng_case = np.random.default_rng([int(seed), 7919])  # what the case injects
    n_t = int(round(days * 86400 / interval_s))
    ts = pd.date_range(pd.Timestamp(start), periods=n_t, freq=pd.Timedelta(seconds=interval_s))
    if ts.tz is None:
        ts = ts.tz_localize("UTC")
    local = ts.tz_convert(site_tz)
    hour_local = (local.hour + local.minute / 60 + local.second / 3600).to_numpy(dtype=float)

    n_g = n_hosts * gpus_per_host
    hosts = [f"node{h:03d}" for h in range(n_hosts)]
    racks = [f"rack{h // hosts_per_rack:02d}" for h in range(n_hosts)]
    host_of = np.repeat(np.arange(n_hosts), gpus_per_host)
    pos = np.tile(np.arange(gpus_per_host), n_hosts)
    rack_idx = np.array([h // hosts_per_rack for h in range(n_hosts)])
    n_racks = int(rack_idx.max()) + 1

    # --- inlet [°C], (T, hosts)
    steps_2h = 7200 / interval_s
    rack_off = rng.normal(0, 0.7, n_racks)
    host_off = rng.normal(0, 0.4, n_hosts)
    diurnal = 2.5 * np.sin(2 * np.pi * (hour_local - 9.0) / 24.0)
    wander = _ar1(rng, n_t, 0.3, steps_2h, size=(n_racks,))
    inlet = 22.0 + diurnal[:, None] + (rack_off + wander)[:, rack_idx] + host_off[None, :]

    truth = {"case": case, "seed": int(seed), "interval_s": int(interval_s), "site_tz": site_tz,
             "n_hosts": n_hosts, "gpus_per_host": gpus_per_host, "start": str(ts[0]),
             "end": str(ts[-1]), "stragglers": [], "slow_hosts": [], "stall_hosts": [],
             "hot_rack": None, "power_limit_change": None}

    if case == "rack_cooling":
        r = int(rng_case.integers(n_racks)) if target is None else int(str(target).replace("rack", ""))
        delta = float(rng_case.uniform(8, 10)) if cooling_delta_c is None else float(cooling_delta_c)
        ramp_h = 20 / 60
        up = np.clip((hour_local - 13.0) / ramp_h + 1, 0, 1)  # reaches full at 13:00
        down = np.clip((18.0 - hour_local) / ramp_h, 0, 1)  # leaves full at 17:40, 0 at 18:00
        shape = np.minimum(up, down)
        rack_hosts = np.flatnonzero(rack_idx == r)
        inlet[:, rack_hosts] += delta * shape[:, None]
        days_local = sorted({d for d in local.normalize().unique()})
        intervals = []
        for d in days_local:
            a = (d + pd.Timedelta(hours=13)).tz_convert("UTC")
            b = (d + pd.Timedelta(hours=18)).tz_convert("UTC")
            if b > ts[0] and a < ts[-1]:
                intervals.append([str(a), str(b)])
        truth.update(hot_rack=f"rack{r:02d}", hot_hosts=[hosts[h] for h in rack_hosts],
                     inlet_delta_c=delta, hot_window_local=["13:00", "18:00"],
                     hot_intervals_utc=intervals, cause="inlet")

    # --- chips
    r_th = rng.normal(0.060, 0.004, n_g)
    leak = np.exp(rng.normal(0, 0.10, n_g))
    act_chip = rng.normal(1.0, 0.01, n_g)
    job = 1.0 + _ar1(rng, n_t, 0.01, 3 * 3600 / interval_s)  # fleet-wide workload intensity
    act = job[:, None] * act_chip[None, :]
    pos_off = np.where(pos >= gpus_per_host // 2, 3.0, 0.0) + rng.normal(0, 0.3, n_g)
    t_base = inlet[:, host_of] + pos_off[None, :]

    limit = np.full((n_t, n_g), float(power_limit_w))
    if case == "power_limit_change":
        if change_at is None:
            t_change = ts[n_t // 2]
        else:
            t_change = pd.Timestamp(change_at)
            t_change = t_change.tz_localize("UTC") if t_change.tz is None else t_change.tz_convert("UTC")
        limit[ts >= t_change, :] = float(new_limit_w)
        truth["power_limit_change"] = {"time": str(t_change), "from_w": float(power_limit_w),
                                       "to_w": float(new_limit_w)}

    ceiling = np.ones(n_g)
    target_host = None
    if case in ("slow_host", "data_stall"):
        target_host = int(rng_case.integers(n_hosts)) if target is None else hosts.index(str(target))
    if case == "slow_host":
        ceiling[host_of == target_host] = 1.0 - slow_pct / 100.0
        truth.update(slow_hosts=[hosts[target_host]], slow_pct=float(slow_pct),
                     stragglers=[[hosts[target_host], int(g)] for g in range(gpus_per_host)],
                     cause="host clock ceiling")

    f, temp, power, bits = _solve_dvfs(t_base, r_th[None, :], leak[None, :], act, limit, ceiling[None, :])
    if case == "slow_host":
        bits = np.where(ceiling[None, :] < 1, bits & ~BITS["SwPowerCap"], bits)
    util = np.full((n_t, n_g), 99.5)

    if case == "data_stall":
        s = np.clip(rng_case.normal(stall_frac, 0.01, (n_t, 1)), 0.005, 0.2)
        on = host_of == target_host
        busy = power.copy()
        power = np.where(on[None, :], busy * (1 - s) + 0.40 * busy * s, busy * (1 - 0.35 * s))
        util = np.where(on[None, :], 100.0 * (1 - s), util)
        truth.update(stall_hosts=[hosts[target_host]], stall_frac=float(stall_frac),
                     cause="data stall (PCIe/NIC)", stragglers=[])

    # --- checkpoints (idle GPUs)
    if checkpoint_every_h:
        sec = (ts - ts[0]).total_seconds().to_numpy()
        period = checkpoint_every_h * 3600
        ckpt = ((sec - 7 * 60) % period) < checkpoint_min * 60
        ckpt &= sec >= 7 * 60
        if ckpt.any():
            t_idle = t_base[ckpt] + r_th[None, :] * IDLE_W
            power[ckpt] = IDLE_W * leak[None, :] * (1 + LEAK_PER_C * (t_idle - 60.0))
            temp[ckpt] = t_base[ckpt] + r_th[None, :] * power[ckpt]
            f[ckpt] = F_MAX_MHZ
            util[ckpt] = 5.0
            bits[ckpt] = BITS["GpuIdle"]
        truth["checkpoints_utc"] = [str(t) for t in ts[ckpt]]

    # --- measurement noise and quantisation
    power = power * (1 + 0.015 * np.clip(rng.standard_t(3, size=power.shape) / np.sqrt(3), -4, 4))
    power = np.minimum(power, limit * 1.02)
    temp_meas = np.round(temp + rng.normal(0, 0.4, temp.shape))
    clock = np.round(f / CLOCK_BIN_MHZ) * CLOCK_BIN_MHZ
    util = np.clip(np.round(util + rng.normal(0, 0.3, util.shape)), 0, 100)
    energy = np.cumsum(power * interval_s, axis=0) + rng.uniform(1e9, 5e9, n_g)[None, :]

    uuids = [f"GPU-{seed:04x}{h:04x}-{g:04x}-4{rng.integers(0, 4096):03x}-a{rng.integers(0, 4096):03x}-"
             f"{rng.integers(0, 2**48):012x}" for h in range(n_hosts) for g in range(gpus_per_host)]
    df = pd.DataFrame({
        "timestamp": np.repeat(ts.to_numpy(), n_g),
        "host": pd.array(np.tile(np.array(hosts)[host_of], n_t), dtype="string"),
        "scope": pd.array(["gpu"] * (n_t * n_g), dtype="string"),
        "gpu_index": pd.array(np.tile(pos, n_t), dtype="Int16"),
        "gpu_uuid": pd.array(np.tile(np.array(uuids), n_t), dtype="string"),
        "rack": pd.array(np.tile(np.array(racks)[host_of], n_t), dtype="string"),
        "power_w": power.ravel(),
        "energy_j": energy.ravel(),
        "clock_sm_mhz": clock.ravel(),
        "clock_mem_mhz": np.full(n_t * n_g, MEM_CLOCK_MHZ),
        "temp_gpu_c": temp_meas.ravel(),
        "temp_mem_c": np.round(temp + 4.0 + rng.normal(0, 0.4, temp.shape)).ravel(),
        "util_gpu_pct": util.ravel(),
        "power_limit_w": limit.ravel(),
        "throttle_reasons": pd.array(bits.ravel().astype("uint64"), dtype="UInt64"),
        "temp_inlet_c": np.round(inlet[:, host_of], 1).ravel(),
    })
    df["timestamp"] = pd.DatetimeIndex(df["timestamp"]).as_unit("ns")
    if df["timestamp"].dt.tz is None:
        df["timestamp"] = df["timestamp"].dt.tz_localize("UTC")
    truth["hosts"] = hosts
    truth["racks"] = {h: r for h, r in zip(hosts, racks)}
    truth["uuids"] = {f"{hosts[i // gpus_per_host]}/{i % gpus_per_host}": u for i, u in enumerate(uuids)}
    return df, truth
