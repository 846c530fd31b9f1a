"""A power-capped H100 fleet for validating straggler detection -- deliberately NOT the
package's twin (:mod:`powerlab.throughput.synth`), written independently of it.

Physics, per GPU and sample (all GPUs busy, power-capped):

- inlet air: site inlet (diurnal swing) + per-host offset (N(0, 1 degC)) + a hot host
  (``hot_host_c`` extra), + per-board position (downstream GPUs of a tray are hotter);
- die temperature: inlet + position + per-GPU heatsink offset (N(0, 1.2 degC)) + thermal
  resistance x power;
- SM clock at the cap: nominal 1755 MHz + per-GPU leakage offset (standard deviation
  across the fleet drawn from 20-25 MHz per fleet, ``leak_sd_mhz`` to fix it) - 1.2 MHz per degC above the reference (hotter silicon leaks
  more, leaving less dynamic power under the cap) + a fleet-wide workload term (kernels
  differ in activity) + per-sample jitter, quantised to the 15 MHz clock bins;
- power: the cap minus a heavy-tailed per-GPU offset (Student t, 3 degrees of freedom:
  board and sensor differences) and heavy-tailed per-sample noise, clipped below the cap
  plus 2 %;
- throttle bits: SwPowerCap when power is within 3 % of the cap, SwThermalSlowdown above
  87 degC (the hot host reaches it now and then).

A straggler is one GPU slower by ``slowdown_pct`` through one cause:

- ``thermal``: a fouled heatsink, +8 degC; the leakage this adds plus thermal slowdown
  events (SwThermalSlowdown set in ``bit_share`` of its samples) make up the deficit;
- ``power``: a lower enforced power limit (``power_limit_w`` shows it);
- ``hw_slowdown``: HwSlowdown asserted in ``bit_share`` of its samples (external
  slowdown signal), with the whole deficit in those samples;
- ``silent``: the clock is lower and nothing else shows it (a fail-slow with no telemetry
  cause).

It starts at ``onset_h`` and lasts ``duration_h`` (default: to the end).

**Chips that outlive a record.**  With ``chip_seed`` the chips' own properties -- leakage
bin (and the fleet's leakage spread), heatsink offset, power offset -- come from that seed,
one chip at a time (``numpy.random.default_rng([chip_seed, chip])``), and everything else
(inlet, workload, noise, the hot host) from ``seed``: a burn-in record and a later record
with the same ``chip_seed`` hold the same chips.  ``chips`` places chip numbers in the
slots (host-major, ``n_hosts * gpus_per_host``; default ``0, 1, ...``), so a later record
can swap, replace or add chips; ``gpu_uuid`` is then the chip's (``GPU-c<chip_seed>-<chip>``),
not the slot's.  Without ``chip_seed`` the run seed draws everything, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from powerlab.telemetry.schema import THROTTLE_REASONS

F0_MHZ = 1755.0
CAP_W = 700.0
KAPPA_MHZ_PER_C = 1.2
T_SLOWDOWN_C = 87.0


@dataclass
class Straggler:
    host: int = 0
    gpu: int = 0
    slowdown_pct: float = 2.0
    cause: str = "thermal"
    onset_h: float = 0.0
    duration_h: float | None = None
    bit_share: float = 0.4


@dataclass
class Fleet:
    telemetry: pd.DataFrame
    stragglers: list = field(default_factory=list)
    leak_sd_mhz: float = 0.0
    host_names: list = field(default_factory=list)


def _chip(chip_seed: int, chip: int) -> tuple[float, float, float]:
    """One chip's own properties: leakage (in units of the fleet's spread), heatsink
    offset [degC], power offset below the cap [W]."""
    r = np.random.default_rng([chip_seed, chip])
    return (float(r.normal()), float(r.normal(0, 1.2)),
            float(min(abs(r.standard_t(3)) * 6.0, 60.0)))


def simulate_fleet(seed: int, *, hours: float = 24.0, interval_s: float = 60.0,
                   n_hosts: int = 8, gpus_per_host: int = 8,
                   stragglers: list[Straggler] | None = None,
                   hot_host: int | None = None, hot_host_c: float = 7.0,
                   leak_sd_mhz: float | None = None,
                   start: str = "2025-07-01", chip_seed: int | None = None,
                   chips: np.ndarray | list | None = None) -> Fleet:
    rng = np.random.default_rng(seed)
    n_t = round(hours * 3600 / interval_s)
    n_g = n_hosts * gpus_per_host
    t_s = np.arange(n_t) * interval_s
    host = np.repeat(np.arange(n_hosts), gpus_per_host)
    pos = np.tile(np.arange(gpus_per_host), n_hosts)

    # inlet and structure
    site = 24.0 + 2.0 * np.sin(2 * np.pi * (t_s / 86400.0 - 0.3)) \
        + np.cumsum(rng.normal(0, 0.02, n_t))
    host_off = rng.normal(0, 1.0, n_hosts)
    if hot_host is not None:
        host_off[hot_host] += hot_host_c
    host_wander = np.cumsum(rng.normal(0, 0.03, (n_t, n_hosts)), axis=0)
    pos_c = 0.5 * (pos // 2) + rng.normal(0, 0.2, gpus_per_host)[pos]
    sink = rng.normal(0, 1.2, n_g)
    leak = rng.normal(0, 1, n_g)
    leak_sd = rng.uniform(20.0, 25.0) if leak_sd_mhz is None else leak_sd_mhz
    leak = leak_sd * (leak - leak.mean()) / leak.std()
    p_off = np.minimum(np.abs(rng.standard_t(3, n_g)) * 6.0, 60.0)
    if chip_seed is not None:
        chips = np.arange(n_g) if chips is None else np.asarray(chips, dtype=np.int64)
        if chips.shape != (n_g,):
            raise ValueError(f"chips: need {n_g} chip numbers, one per slot")
        leak_sd = (np.random.default_rng([chip_seed, 1 << 30]).uniform(20.0, 25.0)
                   if leak_sd_mhz is None else leak_sd_mhz)
        props = np.array([_chip(chip_seed, int(c)) for c in chips])
        leak, sink, p_off = leak_sd * props[:, 0], props[:, 1], props[:, 2]
    limit = np.full((n_t, n_g), CAP_W)

    # workload: phases common to the fleet (kernel mix), shared by all GPUs of the job
    work = np.repeat(rng.normal(0, 12.0, n_t // 10 + 1), 10)[:n_t] + rng.normal(0, 4, n_t)

    extra_t = np.zeros((n_t, n_g))
    extra_f = np.zeros((n_t, n_g))
    bits_extra = np.zeros((n_t, n_g), dtype=np.uint64)
    for s in stragglers or []:
        g = s.host * gpus_per_host + s.gpu
        end = hours if s.duration_h is None else s.onset_h + s.duration_h
        on = (t_s >= s.onset_h * 3600) & (t_s < end * 3600)
        deficit = s.slowdown_pct / 100 * F0_MHZ
        if s.cause == "thermal":
            extra_t[on, g] += 8.0
            rest = deficit - KAPPA_MHZ_PER_C * 8.0
            ev = on & (rng.random(n_t) < s.bit_share)
            extra_f[ev, g] -= rest / s.bit_share
            bits_extra[ev, g] |= np.uint64(THROTTLE_REASONS["sw_thermal_slowdown"])
        elif s.cause == "power":
            # clock ~ power^(1/3) near the cap's operating point: dP/P = 3 df/f
            limit[on, g] = CAP_W * (1 - 3 * s.slowdown_pct / 100)
            extra_f[on, g] -= deficit
        elif s.cause == "hw_slowdown":
            ev = on & (rng.random(n_t) < s.bit_share)
            extra_f[ev, g] -= deficit / s.bit_share
            bits_extra[ev, g] |= np.uint64(THROTTLE_REASONS["hw_slowdown"])
        elif s.cause == "silent":
            extra_f[on, g] -= deficit
        else:
            raise ValueError(s.cause)

    inlet = site[:, None] + host_off[host][None, :] + host_wander[:, host]
    power = np.minimum(limit - p_off[None, :] + rng.standard_t(3, (n_t, n_g)) * 4.0,
                       limit * 1.02)
    temp = inlet + pos_c[None, :] + sink[None, :] + 0.065 * power + extra_t \
        + rng.normal(0, 0.6, (n_t, n_g))
    clock = F0_MHZ + leak[None, :] - KAPPA_MHZ_PER_C * (temp - 70.0) + work[:, None] \
        + extra_f + rng.normal(0, 6.0, (n_t, n_g))
    clock = 15.0 * np.round(clock / 15.0)
    bits = np.where(power >= 0.97 * limit, np.uint64(THROTTLE_REASONS["sw_power_cap"]),
                    np.uint64(0))
    bits |= np.where(temp > T_SLOWDOWN_C,
                     np.uint64(THROTTLE_REASONS["sw_thermal_slowdown"]), np.uint64(0))
    bits |= bits_extra

    names = [f"node{h:03d}" for h in range(n_hosts)]
    uuids = (np.array([f"GPU-{names[h]}-{p}" for h, p in zip(host, pos)])
             if chip_seed is None else np.array([f"GPU-c{chip_seed}-{c}" for c in chips]))
    ts = pd.Timestamp(start, tz="UTC") + pd.to_timedelta(t_s, unit="s")
    tel = pd.DataFrame({
        "timestamp": np.repeat(ts.to_numpy(), n_g),
        "host": pd.array(np.tile(np.array(names)[host], n_t), dtype="string"),
        "scope": "gpu",
        "gpu_index": pd.array(np.tile(pos, n_t), dtype="Int16"),
        "gpu_uuid": pd.array(np.tile(uuids, n_t), dtype="string"),
        "power_w": power.ravel(),
        "clock_sm_mhz": clock.ravel(),
        "temp_gpu_c": temp.ravel(),
        "util_gpu_pct": 100.0,
        "power_limit_w": limit.ravel(),
        "throttle_reasons": pd.array(bits.ravel(), dtype="UInt64"),
    })
    tel["timestamp"] = pd.DatetimeIndex(tel["timestamp"]).tz_localize("UTC") \
        if tel["timestamp"].dt.tz is None else tel["timestamp"]
    return Fleet(telemetry=tel, stragglers=list(stragglers or []),
                 leak_sd_mhz=leak_sd, host_names=names)
