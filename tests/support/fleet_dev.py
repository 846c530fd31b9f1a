"""Development fleets for host, rack, regime and sampling work (issue 35) -- the tuning
generator; the blind generators in ``tests/blind/fleet/`` only score.

Physics (per GPU and 30-s instant, then aggregated to ``interval_s``):

- inlet: site diurnal swing + rack offset + host offset + slow wander; ``rack_pm`` adds
  ``fault_c`` to one rack's inlet from 13:00 to 18:00 UTC every day (ramped over 30
  min): a cooling fault in the afternoons;
- die temperature: inlet + board position + heatsink + 0.065 degC/W x power + noise;
- SM clock at the cap: 1755 MHz x (limit / 700 W)^(1/3) (dynamic power ~ f^3), with a
  per-chip response to the limit (its leakage share: +-10 % of the cap's effect), + leakage
  offset (20-25 MHz sd) - 1.2 MHz/degC + fleet-wide workload phases + jitter; thermal
  slowdown above 87 degC (-12 MHz per degC above, SwThermalSlowdown bit);
- utilisation ~99.5 % (NCCL waits are kernels), power at the limit less a heavy-tailed
  per-GPU offset;
- sampling: ``averaged=True`` means over the interval (DCGM averages), clocks of each
  instant in 15 MHz bins; ``averaged=False`` the instant at the sample (binned clocks).

Cases: ``clean``, ``hot_host`` (+7 degC inlet, not a fault), ``host_slow`` (every GPU of
one host ``slowdown_pct`` slower in clock, its power lower as f^3 -- a host power cap
that NVML's limit does not show), ``data_stall`` (one host's GPUs idle on data stalls:
utilisation ~97 %, power and throughput 3 % lower, clocks unchanged), ``rack_pm`` (a rack
cooling fault in the afternoons), ``cap_change`` (the fleet's limit 700 -> 600 W at
``hours / 2``, rolled out host by host over 40 min), ``clock_lock`` (application
clocks locked at 1680 MHz fleet-wide from ``hours / 2``, nothing recorded), ``gpu_silent`` (one GPU 2 % slower in
clock only, from hours / 3), ``host_slow_quiet`` (as ``host_slow`` with power
unchanged: only the clock shows it).  ``baseline=True`` gives a healthy earlier record of the
same chips (same leakage, heatsinks, power offsets, host and rack offsets).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from powerlab.telemetry.schema import THROTTLE_REASONS

CASES = ("clean", "hot_host", "host_slow", "data_stall", "rack_pm", "cap_change",
         "clock_lock", "gpu_silent", "host_slow_quiet")
F0, CAP, KAPPA, T_SLOW = 1755.0, 700.0, 1.2, 87.0
_BASE_S = 30.0


def generate(seed: int, case: str = "clean", *, interval_s: float = 60.0,
             hours: float = 48.0, n_hosts: int = 16, gpus_per_host: int = 8,
             hosts_per_rack: int = 4, slowdown_pct: float = 2.0, averaged: bool = True,
             baseline: bool = False, fault_c: float = 15.0, rollout_s: float = 2400.0,
             resp_sd: float = 0.1):
    if case not in CASES:
        raise ValueError(case)
    static = np.random.default_rng([seed, 1])
    rng = np.random.default_rng([seed, 2, int(baseline)])
    n_g = n_hosts * gpus_per_host
    host = np.repeat(np.arange(n_hosts), gpus_per_host)
    pos = np.tile(np.arange(gpus_per_host), n_hosts)
    rack = host // hosts_per_rack
    n_racks = int(rack.max()) + 1
    leak = static.normal(0, 1, n_g) * static.uniform(20, 25)
    sink = static.normal(0, 1.2, n_g)
    p_off = np.minimum(np.abs(static.standard_t(3, n_g)) * 6.0, 60.0)
    resp = 1 + resp_sd * static.normal(0, 1, n_g)
    rack_off = static.normal(0, 0.7, n_racks)
    host_off = static.normal(0, 0.8, n_hosts)
    pos_c = 0.5 * (pos // 2) + static.normal(0, 0.2, gpus_per_host)[pos]
    bad_host = int(static.integers(n_hosts))
    bad_rack = int(static.integers(n_racks))
    bad_gpu = int(static.integers(n_g))
    if case == "hot_host":
        host_off[bad_host] += 7.0
    if baseline:
        case = "clean"

    n_t = round(hours * 3600 / _BASE_S)
    t_s = np.arange(n_t) * _BASE_S
    start = pd.Timestamp("2026-03-02", tz="UTC") - (pd.Timedelta(days=9) if baseline
                                                    else pd.Timedelta(0))
    hod = ((start.hour * 3600 + t_s) % 86400) / 3600
    site = 24 + 2 * np.sin(2 * np.pi * (hod / 24 - 0.3)) + np.cumsum(
        rng.normal(0, 0.015, n_t))
    inlet = (site[:, None] + rack_off[rack] + host_off[host]
             + np.cumsum(rng.normal(0, 0.02, (n_t, n_hosts)), axis=0)[:, host])
    if case == "rack_pm":
        ramp = np.clip(np.minimum(hod - 13, 18 - hod) / 0.5, 0, 1)
        inlet[:, rack == bad_rack] += fault_c * ramp[:, None]
    limit = np.full((n_t, n_g), CAP)
    t0 = None
    if case == "cap_change":
        t0 = hours / 2 * 3600 + rng.uniform(0, 3600)
        lag = rng.uniform(0, rollout_s, n_hosts)[host]
        limit[t_s[:, None] >= t0 + lag[None, :]] = 600.0
    work = np.repeat(rng.normal(0, 10, n_t // 20 + 1), 20)[:n_t] + rng.normal(0, 3, n_t)
    util = np.clip(99.5 + rng.normal(0, 0.4, (n_t, n_g)), 0, 100)
    f_cap = F0 * (1 + resp[None, :] * ((limit / CAP) ** (1 / 3) - 1))
    power = np.minimum(limit - p_off + rng.standard_t(3, (n_t, n_g)) * 4.0, limit * 1.02)
    extra_f = np.zeros((n_t, n_g))
    slow = []
    if case in ("host_slow", "host_slow_quiet"):
        g = host == bad_host
        extra_f[:, g] -= slowdown_pct / 100 * F0
        if case == "host_slow":
            power[:, g] *= (1 - slowdown_pct / 100) ** 3
        slow = [f"node{bad_host:03d}"]
    elif case == "data_stall":
        g = host == bad_host
        util[:, g] = np.clip(97.0 + rng.normal(0, 0.8, (n_t, g.sum())), 0, 100)
        power[:, g] *= 0.97
        slow = [f"node{bad_host:03d}"]
    elif case == "gpu_silent":
        extra_f[t_s >= hours / 3 * 3600, bad_gpu] -= slowdown_pct / 100 * F0
    temp = (inlet + pos_c + sink + 0.065 * power + rng.normal(0, 0.5, (n_t, n_g)))
    over = np.maximum(temp - T_SLOW, 0)
    clock = (f_cap + leak - KAPPA * (temp - 70) + work[:, None] + extra_f - 12 * over
             + rng.normal(0, 6, (n_t, n_g)))
    if case == "clock_lock":
        t0 = hours / 2 * 3600 + rng.uniform(0, 3600)
        # application clocks locked fleet-wide at 1680 MHz (no limit change recorded)
        clock = np.where(t_s[:, None] >= t0, np.minimum(clock, 1680.0), clock)
    clock = 15 * np.round(clock / 15)
    bits = np.where(power >= 0.97 * limit, np.uint64(THROTTLE_REASONS["sw_power_cap"]),
                    np.uint64(0)) | np.where(over > 0, np.uint64(
                        THROTTLE_REASONS["sw_thermal_slowdown"]), np.uint64(0))
    k = max(1, round(interval_s / _BASE_S))
    n_s = n_t // k

    def agg(a):
        a = a[:n_s * k].reshape(n_s, k, n_g)
        return a.mean(axis=1) if averaged else a[:, -1]
    cols = {"power_w": agg(power), "clock_sm_mhz": agg(clock), "temp_gpu_c": agg(temp),
            "util_gpu_pct": agg(util), "power_limit_w": agg(limit)}
    bits = bits[:n_s * k].reshape(n_s, k, n_g)[:, -1]
    names = np.array([f"node{h:03d}" for h in range(n_hosts)])
    ts = start + pd.to_timedelta(np.arange(n_s) * k * _BASE_S, unit="s")
    tel = pd.DataFrame({
        "timestamp": np.repeat(ts, n_g),
        "host": pd.array(np.tile(names[host], n_s), dtype="string"),
        "rack": pd.array(np.tile(np.array([f"rack{r:02d}" for r in rack]), n_s),
                         dtype="string"),
        "scope": "gpu", "gpu_index": pd.array(np.tile(pos, n_s), dtype="Int16"),
        "gpu_uuid": pd.array(np.tile(np.array([f"GPU-{seed}-{i}" for i in range(n_g)]),
                                     n_s), dtype="string"),
        **{c: v.ravel() for c, v in cols.items()},
        "throttle_reasons": pd.array(bits.ravel(), dtype="UInt64")})
    truth = {"case": case, "slow_hosts": slow,
             "slow_racks": [f"rack{bad_rack:02d}"] if case == "rack_pm" else [],
             "rack_hours_utc": (13, 18) if case == "rack_pm" else None,
             "slow_gpus": ([f"GPU-{seed}-{bad_gpu}"] if case == "gpu_silent" else []),
             "regime_break": (pd.Timestamp(start) + pd.Timedelta(seconds=float(t0))
                              if t0 is not None else None),
             "interval_s": k * _BASE_S}
    return tel, truth
