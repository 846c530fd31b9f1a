"""capgen -- independent generator of a data-parallel training job under GPU power limits.

Written by helper session "hgen" (2026-12-03) from a physical description only, without
reading powerlab's power-capping/flexibility code (``powerlab/flex``,
``powerlab/throughput/synth.py``) or its tests.  ``CAPGEN_SPEC.md`` beside this file states
the physics, every number and every assumption; this docstring is the short version.

Model (H100-SXM-like GPUs, one synchronous data-parallel job on 8-GPU hosts)
------------------------------------------------------------------------------
* Voltage-frequency curve: ``V(f) = max(V_FLOOR, V_FLOOR + k (f - F_KNEE) + dV_chip)``
  with V_FLOOR = 0.70 V below F_KNEE = 1095 MHz and 1.05 V at F_MAX = 1980 MHz.
* Board power ``P = P_BOARD + P_leak + P_hbm + P_dyn``:
  ``P_dyn = DYN_REF c_chip a (V/V_MAX)^2 (f/F_MAX)`` (C V^2 f x SM activity ``a``),
  ``P_leak = LEAK_REF g_chip (V/V_MAX)^2 exp(K_T (T - 65 degC))``,
  ``P_hbm = HBM_IDLE + HBM_FULL u`` with ``u`` the HBM bandwidth utilisation, which
  follows the *rate of work*, not the SM clock directly.
* Die temperature ``T = inlet_host + slot offset + R_TH * (step-mean power)`` with a
  first-order lag (TAU_TH = 60 s).
* Power limit: the controller picks, per step phase, the highest SM clock whose power is
  <= limit (1 - CTRL_MARGIN); phases are long (>= 0.1 s) against its loop, so phases
  that draw less than the limit (communication, waiting) run at F_MAX.  After a limit
  change the applied clock relaxes to the new target with TAU_CTRL = 1.5 s (power
  overshoots a lowered limit for a few seconds).  ``controller="step"`` is a
  sensitivity variant only (a limiter averaging over more than a step: one clock per
  GPU per step, step-mean power <= limit).
* Step of a GPU: host gap (idle SMs, clock independent) -> compute (time ~ 1/f) ->
  memory-bound work (share ``s`` clock independent) -> wait for the slowest GPU of the
  whole job -> exposed all-reduce (clock independent).  The step ends for everyone when
  the all-reduce ends, so step time = host + max_i(work_i) + comm.
* Chip spread: leakage ``g ~ lognormal(0, LEAK_SD)``, V-f offset ``dV ~ N(0, DV_SD)``,
  switched capacitance ``c ~ N(1, CDYN_SD)``: at the same limit chips reach different
  clocks and the leakiest one sets the pace.
* Noise: common per-step work jitter (normal, mean 1), all-reduce jitter (gamma, mean
  1), telemetry power noise, integer temperature, 15 MHz clock bins (dithered),
  0.1 % missing rows; checkpoints every ``checkpoint_every_steps`` steps (GPU idle).

Telemetry is one row per GPU per sample: ``power_w`` is the exact mean over the
sample interval (plus sensor noise), ``clock_sm_mhz``, ``throttle_reasons`` and
``temp_gpu_c`` are read at the sampling instant (as NVML does), ``util_gpu_pct`` is the
share of the interval a kernel was running, ``power_limit_w`` the limit in effect at the
instant.  ``SwPowerCap`` (0x4) is set when, at the instant, the GPU is in a phase whose
clock the controller holds below F_MAX; ``GpuIdle`` (0x1) during checkpoints.

Public API: :func:`generate`, :func:`truth`, :func:`truth_state`, :data:`JOBS`,
:class:`Workload`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

# ---- hardware (H100 SXM5-like) -------------------------------------------------------
F_MAX = 1980.0        # max boost SM clock [MHz]
F_IDLE = 345.0        # idle SM clock [MHz]
F_FLOOR = 510.0       # lowest clock the power controller will set [MHz]
F_BIN = 15.0          # SM clock bin [MHz]
F_KNEE = 1095.0       # below this the voltage sits at its floor [MHz]
V_FLOOR = 0.70        # floor voltage [V]
V_MAX = 1.05          # voltage at F_MAX for a typical chip [V]
P_BOARD = 38.0        # VR losses, NVLink/PCIe PHYs, misc, constant [W]
LEAK_REF = 85.0       # leakage of a typical chip at V_MAX and 65 degC [W]
K_T = 0.018           # leakage temperature coefficient [1/degC]
HBM_IDLE = 22.0       # HBM3 background/refresh power [W]
HBM_FULL = 105.0      # extra HBM + PHY power at 100 % bandwidth (~3.35 TB/s x ~4 pJ/bit) [W]
DYN_REF = 520.0       # dynamic power of a typical chip, activity 1, V_MAX, F_MAX [W]
R_TH = 0.070          # die-to-inlet thermal resistance, air-cooled SXM heat sink [degC/W]
TAU_TH = 60.0         # thermal time constant of die + heat sink [s]
TAU_CTRL = 1.5        # settling time constant of the power controller [s]
CTRL_MARGIN = 0.003   # controller holds power at limit * (1 - margin)
DEFAULT_LIMIT_W = 700.0
LEAK_SD = 0.18        # lognormal sd of chip leakage
DV_SD = 0.008         # sd of chip V-f offset [V]
CDYN_SD = 0.015       # sd of chip switched capacitance (relative)

BIT_GPU_IDLE = 0x1
BIT_SW_POWER_CAP = 0x4

START = pd.Timestamp("2026-05-04 00:00:00", tz="UTC")

# phase codes in a step
_HOST, _COMP, _MEM, _WAIT, _COMM, _IDLE = range(6)


@dataclass(frozen=True)
class Workload:
    """Per-step work of one GPU at F_MAX and the SM/HBM activity of each phase.

    Times in [s] at F_MAX; activities are SM switching activity (0..1) and HBM bandwidth
    utilisation (0..1) at F_MAX.
    """

    name: str
    host_s: float            # host-side gap (data loader, launch), GPU idle, clock independent
    compute_s: float         # GEMM/attention work, time ~ 1/f
    compute_fixed: float     # share of compute time not scaling with f (latency-bound)
    compute_act: float
    compute_hbm: float
    memory_s: float          # element-wise / optimizer work
    memory_fixed: float      # share of memory-phase time independent of the SM clock
    memory_act: float
    memory_hbm: float
    comm_s: float            # exposed all-reduce time (not hidden under compute)
    comm_act: float
    comm_hbm: float
    wait_act: float = 0.06   # NCCL kernel spinning while waiting for the slowest GPU
    host_act: float = 0.02
    work_cv: float = 0.01    # common per-step jitter of the work (normal, mean 1)
    comm_cv: float = 0.15    # per-step jitter of the all-reduce (gamma, mean 1)


COMPUTE_BOUND = Workload(
    name="compute_bound", host_s=0.03, compute_s=1.20, compute_fixed=0.03,
    compute_act=0.90, compute_hbm=0.30, memory_s=0.25, memory_fixed=0.70,
    memory_act=0.40, memory_hbm=0.85, comm_s=0.10, comm_act=0.15, comm_hbm=0.25,
    comm_cv=0.10)

COMM_HEAVY = Workload(
    name="comm_heavy", host_s=0.03, compute_s=0.50, compute_fixed=0.03,
    compute_act=0.88, compute_hbm=0.35, memory_s=0.15, memory_fixed=0.70,
    memory_act=0.40, memory_hbm=0.85, comm_s=0.70, comm_act=0.15, comm_hbm=0.30,
    comm_cv=0.20)

#: preset jobs: workload and size
JOBS = {
    "compute_bound": {"workload": COMPUTE_BOUND, "n_hosts": 1},
    "comm_heavy": {"workload": COMM_HEAVY, "n_hosts": 2},
}


# ---- fleet ---------------------------------------------------------------------------
def _fleet(seed, n_hosts, gpus_per_host, leak_sd, dv_sd, cdyn_sd, inlet_c):
    """Static chip and placement draws from their own stream (``truth`` replays them)."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xCA9]))
    n = n_hosts * gpus_per_host
    g = rng.lognormal(0.0, leak_sd, n)
    dv = rng.normal(0.0, dv_sd, n)
    c = rng.normal(1.0, cdyn_sd, n)
    host_in = inlet_c + rng.normal(0.0, 1.0, n_hosts)
    slot = np.tile(np.linspace(0.0, 4.0, gpus_per_host), n_hosts)  # rear slots hotter
    slot = slot + rng.normal(0.0, 0.7, n)
    tin = np.repeat(host_in, gpus_per_host) + slot
    uu = rng.integers(0, 2**32, (n, 4))
    uuids = [f"GPU-{a:08x}-{b >> 16:04x}-{b & 0xffff:04x}-{c_ >> 16:04x}-{c_ & 0xffff:04x}{d:08x}"
             for a, b, c_, d in uu]
    return {"g": g, "dv": dv, "c": c, "tin": tin, "uuids": uuids}


# ---- physics -------------------------------------------------------------------------
def _volt(f, dv):
    k = (V_MAX - V_FLOOR) / (F_MAX - F_KNEE)
    return np.maximum(V_FLOOR, V_FLOOR + k * (f - F_KNEE) + dv)


def _rate(f, fixed):
    """Work rate at clock f relative to F_MAX for a phase with clock-independent share."""
    return 1.0 / (fixed + (1.0 - fixed) * F_MAX / f)


def _power(f, T, act, hbm, fixed, fl):
    """Board power [W] of a GPU running a phase at SM clock f [MHz] and die temp T [degC]."""
    v = _volt(f, fl["dv"])
    vr = (v / V_MAX) ** 2
    leak = LEAK_REF * fl["g"] * vr * np.exp(K_T * (T - 65.0))
    dyn = DYN_REF * fl["c"] * act * vr * (f / F_MAX)
    mem = HBM_IDLE + HBM_FULL * hbm * _rate(f, fixed)
    return P_BOARD + leak + mem + dyn


def _solve_clock(limit_w, T, act, hbm, fixed, fl):
    """Highest clock with power <= limit (1 - margin); F_MAX when the limit does not bind."""
    target = np.asarray(limit_w, float) * (1.0 - CTRL_MARGIN)
    shape = np.broadcast(T, fl["g"], target).shape
    lo = np.full(shape, F_FLOOR)
    hi = np.full(shape, F_MAX)
    if np.all(_power(hi, T, act, hbm, fixed, fl) <= target):
        return hi
    for _ in range(32):
        mid = 0.5 * (lo + hi)
        ok = _power(mid, T, act, hbm, fixed, fl) <= target
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    free = _power(np.full(shape, F_MAX), T, act, hbm, fixed, fl) <= target
    return np.where(free, F_MAX, lo)


def _phase_times(w, fc, fm):
    tc = w.compute_s * (w.compute_fixed + (1 - w.compute_fixed) * F_MAX / fc)
    tm = w.memory_s * (w.memory_fixed + (1 - w.memory_fixed) * F_MAX / fm)
    return tc, tm


def _phase_powers(w, fc, fm, T, fl, fo=F_MAX):
    """Powers of the compute, memory, wait, all-reduce and host-gap phases [W].

    ``fo`` is the clock of the wait / all-reduce / host phases (F_MAX under the
    phase-wise controller); their HBM traffic does not follow the SM clock (fixed=1).
    """
    pc = _power(fc, T, w.compute_act, w.compute_hbm, w.compute_fixed, fl)
    pm = _power(fm, T, w.memory_act, w.memory_hbm, w.memory_fixed, fl)
    pw = _power(fo, T, w.wait_act, 0.0, 1.0, fl)
    pk = _power(fo, T, w.comm_act, w.comm_hbm, 1.0, fl)
    ph = _power(fo, T, w.host_act, 0.0, 1.0, fl)
    return pc, pm, pw, pk, ph


def _step_energy(w, fc, fm, fo, T, fl, W=None):
    """Energy of one step per GPU [J], its work time and the step's wait-inclusive W."""
    tc, tm = _phase_times(w, fc, fm)
    work = tc + tm
    W = work.max() if W is None else np.maximum(W, work)
    pc, pm, pw, pk, ph = _phase_powers(w, fc, fm, T, fl, fo)
    e = ph * w.host_s + pc * tc + pm * tm + pw * (W - work) + pk * w.comm_s
    return e, work, W


def _clocks(limit_w, T, w, fl, controller, W):
    """Capped clocks (compute, memory, other phases) of every GPU [MHz].

    ``controller="phase"``: one clock per phase, each phase's power <= limit.
    ``controller="step"``: the limiter averages over a window longer than a step, so one
    clock per GPU for the whole step, with the step-mean power <= limit; ``W`` is the
    slowest GPU's work time (the wait of the faster GPUs).
    """
    if controller == "phase":
        fc = _solve_clock(limit_w, T, w.compute_act, w.compute_hbm, w.compute_fixed, fl)
        fm = _solve_clock(limit_w, T, w.memory_act, w.memory_hbm, w.memory_fixed, fl)
        return fc, fm, np.full_like(fc, F_MAX)
    target = float(limit_w) * (1.0 - CTRL_MARGIN)

    def mean_power(f):
        e, _work, Wi = _step_energy(w, f, f, f, T, fl, W)
        return e / (w.host_s + Wi + w.comm_s)

    shape = np.broadcast(T, fl["g"]).shape
    hi = np.full(shape, F_MAX)
    if np.all(mean_power(hi) <= target):
        return hi, hi, hi
    lo = np.full(shape, F_FLOOR)
    for _ in range(32):
        mid = 0.5 * (lo + hi)
        ok = mean_power(mid) <= target
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    f = np.where(mean_power(np.full(shape, F_MAX)) <= target, F_MAX, lo)
    return f, f, f


def _steady(limit_w, w, fl, controller="phase"):
    """Steady state at a limit: clocks, temperatures, powers, step time (noise-free)."""
    if controller not in ("phase", "step"):
        raise ValueError(f"controller must be 'phase' or 'step', not {controller!r}")
    T = fl["tin"] + R_TH * 450.0
    tc, tm = _phase_times(w, F_MAX, F_MAX)
    W = tc + tm
    for _ in range(60):
        fc, fm, fo = _clocks(limit_w, T, w, fl, controller, W)
        e, work, _ = _step_energy(w, fc, fm, fo, T, fl)
        W_new = work.max()
        T_new = fl["tin"] + R_TH * e / (w.host_s + W_new + w.comm_s)
        done = np.max(np.abs(T_new - T)) < 1e-7 and abs(W_new - W) < 1e-9
        T, W = T_new, W_new
        if done:
            break
    fc, fm, fo = _clocks(limit_w, T, w, fl, controller, W)
    tc, tm = _phase_times(w, fc, fm)
    # sensitivity of the capped clocks to die temperature (for thermal transients)
    fc2, fm2, fo2 = _clocks(limit_w, T + 1.0, w, fl, controller, W)
    return {"fc": fc, "fm": fm, "fo": fo, "T": T, "dfc_dT": fc2 - fc, "dfm_dT": fm2 - fm,
            "dfo_dT": fo2 - fo, "step_s": w.host_s + (tc + tm).max() + w.comm_s}


def _setup(job, seed, n_hosts, gpus_per_host, leak_sd, dv_sd, cdyn_sd, inlet_c, workload):
    if isinstance(job, Workload):
        w, nh = job, 1
    else:
        if job not in JOBS:
            raise ValueError(f"unknown job {job!r}; one of {sorted(JOBS)}")
        w, nh = JOBS[job]["workload"], JOBS[job]["n_hosts"]
    if workload:
        w = replace(w, **workload)
    nh = int(n_hosts) if n_hosts is not None else nh
    fl = _fleet(seed, nh, int(gpus_per_host), leak_sd, dv_sd, cdyn_sd, inlet_c)
    return w, nh, fl


def truth(limit_w, *, job="compute_bound", seed=0, n_hosts=None, gpus_per_host=8,
          leak_sd=LEAK_SD, dv_sd=DV_SD, cdyn_sd=CDYN_SD, inlet_c=27.0, workload=None,
          controller="phase"):
    """True mean train step time [s] of the job at a power limit (steady state, noise-free).

    The same job arguments as :func:`generate` give the same chips.  The jitters have mean
    1 and scale all GPUs alike, so this is the expectation of the logged train-step
    duration away from limit changes.  ``limit_w`` may be a scalar or a sequence.
    """
    w, _nh, fl = _setup(job, seed, n_hosts, gpus_per_host, leak_sd, dv_sd, cdyn_sd,
                        inlet_c, workload)
    lim = np.atleast_1d(np.asarray(limit_w, float))
    out = np.array([_steady(L, w, fl, controller)["step_s"] for L in lim])
    return float(out[0]) if np.ndim(limit_w) == 0 else out


def truth_state(limit_w, **job_kw):
    """Steady state at a limit: per-GPU compute/memory clocks [MHz] and die temps [degC]."""
    keys = ("job", "seed", "n_hosts", "gpus_per_host", "leak_sd", "dv_sd", "cdyn_sd",
            "inlet_c", "workload")
    d = {"job": "compute_bound", "seed": 0, "n_hosts": None, "gpus_per_host": 8,
         "leak_sd": LEAK_SD, "dv_sd": DV_SD, "cdyn_sd": CDYN_SD, "inlet_c": 27.0,
         "workload": None}
    unknown = set(job_kw) - set(keys) - {"controller"}
    if unknown:
        raise TypeError(f"unknown job arguments {sorted(unknown)}")
    d.update({k: v for k, v in job_kw.items() if k in keys})
    w, _nh, fl = _setup(*(d[k] for k in keys))
    return _steady(float(limit_w), w, fl, job_kw.get("controller", "phase"))


# ---- campaign ------------------------------------------------------------------------
def _schedule(limits_w, hold_s, n_rounds):
    lims = list(np.asarray(limits_w, float)) * int(n_rounds)
    holds = np.broadcast_to(np.asarray(hold_s, float), (len(limits_w),))
    holds = list(holds) * int(n_rounds)
    edges = np.concatenate([[0.0], np.cumsum(holds)])
    return np.array(lims), edges


def _segment(w, fl, ss, t0, t_change, t_end, f_old, T_change, ctr0, ck_every, ck_s, rng,
             last, ev_every=None, ev_s=0.0):
    """Train steps of one constant-limit segment, starting at t0 (>= t_change)."""
    n = int(np.ceil((t_end - t0) / ss["step_s"] * 1.15)) + 8
    eps = rng.normal(0.0, w.work_cv, n)
    k = 1.0 / w.comm_cv ** 2
    comm = w.comm_s * rng.gamma(k, 1.0 / k, n)
    ctr = ctr0 + np.arange(1, n + 1)
    ckx = np.where(ctr % ck_every == 0, ck_s, 0.0) if ck_every else np.zeros(n)
    is_ev = (ctr % ev_every == 0) if ev_every else np.zeros(n, bool)
    evx = np.zeros(n)
    extra = ckx + evx
    # first pass: steady clocks to place the steps in time
    fc0, fm0 = ss["fc"][None, :], ss["fm"][None, :]

    def relax(key, k_old):
        tgt = np.clip(ss[key] + ss["d" + key + "_dT"] * (Tk - ss["T"]), F_FLOOR, F_MAX)
        tgt0 = np.clip(ss[key] + ss["d" + key + "_dT"] * (T_change - ss["T"]), F_FLOOR,
                       F_MAX)
        return np.clip(tgt + (f_old[k_old] - tgt0) * decay, F_FLOOR, F_MAX)

    tc, tm = _phase_times(w, fc0, fm0)
    dur = w.host_s + (1 + eps) * (tc + tm).max(axis=1) + comm
    for _ in range(2):
        starts = t0 + np.concatenate([[0.0], np.cumsum(dur + extra)[:-1]])
        dt = (starts - t_change + 0.5 * ss["step_s"])[:, None]
        Tk = ss["T"] + (T_change - ss["T"]) * np.exp(-dt / TAU_TH)
        decay = np.exp(-dt / TAU_CTRL)
        fc, fm, fo = relax("fc", 0), relax("fm", 1), relax("fo", 2)
        tc, tm = _phase_times(w, fc, fm)
        tc = tc * (1 + eps)[:, None]
        tm = tm * (1 + eps)[:, None]
        W = (tc + tm).max(axis=1)
        dur = w.host_s + W + comm
        # eval (forward passes only, no all-reduce) paced by the slowest compute clock
        evx = np.where(is_ev, ev_s * tc.max(axis=1) / ((1 + eps) * w.compute_s), 0.0)
        extra = ckx + evx
    starts = t0 + np.concatenate([[0.0], np.cumsum(dur + extra)[:-1]])
    keep = (starts + dur <= t_end) if last else (starts < t_end)
    m = int(keep.sum())
    sl = slice(0, m)
    return {"start": starts[sl], "dur": dur[sl], "extra": extra[sl], "evx": evx[sl],
            "ckx": ckx[sl], "tc": tc[sl],
            "tm": tm[sl], "W": W[sl], "comm": comm[sl], "fc": fc[sl], "fm": fm[sl],
            "fo": fo[sl], "T": Tk[sl], "ctr": ctr0 + m}


def generate(job="compute_bound", seed=0, *, limits_w=(700.0, 600.0, 500.0, 400.0, 300.0),
             hold_s=3600.0, n_rounds=2, interval_s=15.0, n_hosts=None, gpus_per_host=8,
             leak_sd=LEAK_SD, dv_sd=DV_SD, cdyn_sd=CDYN_SD, inlet_c=27.0, workload=None,
             checkpoint_every_steps=1000, checkpoint_s=25.0, missing_frac=0.001,
             power_noise_w=2.0, controller="phase", eval_every_steps=None, eval_s=60.0,
             start=START):
    """Simulate a power-limit campaign of one data-parallel training job.

    Parameters
    ----------
    job : str or Workload
        ``"compute_bound"`` (1 host) or ``"comm_heavy"`` (2 hosts), or a :class:`Workload`.
    seed : int
        Seeds the chips (shared with :func:`truth`) and, separately, all noise.
    limits_w : sequence of float
        Power limits the operator sets in turn on every GPU [W].
    hold_s : float or sequence of float
        How long each limit is held [s].
    n_rounds : int
        How often the whole sequence is repeated.
    interval_s : float
        Telemetry sample interval [s].
    workload : dict, optional
        Field overrides of the job's :class:`Workload`.
    eval_every_steps, eval_s : int or None, float
        Every ``eval_every_steps`` train steps an evaluation of ``eval_s`` seconds at F_MAX
        (forward passes, no all-reduce, power-capped like the compute phase) [s].
    controller : {"phase", "step"}
        ``"phase"`` (default, the modelled physics): the limiter acts within a phase,
        each phase's power <= limit, low-power phases run at F_MAX.  ``"step"``
        (sensitivity variant only): the limiter averages over more than a step, one clock
        per GPU for the whole step with the step-mean power <= limit.

    Returns
    -------
    telemetry : DataFrame
        ``timestamp, host, scope, gpu_index, gpu_uuid, power_w, power_limit_w,
        clock_sm_mhz, util_gpu_pct, throttle_reasons, temp_gpu_c``.
    steps : DataFrame
        ``timestamp`` (end of step, UTC), ``duration_s``, ``phase`` ("train" or
        "checkpoint"), ``step``.
    info : dict
        ``truth`` (callable limit_w -> true step time [s]), ``schedule`` (DataFrame of
        limit segments), ``workload``, ``n_gpus``.
    """
    w, nh, fl = _setup(job, seed, n_hosts, gpus_per_host, leak_sd, dv_sd, cdyn_sd,
                        inlet_c, workload)
    G = nh * int(gpus_per_host)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5EC]))
    lims, edges = _schedule(limits_w, hold_s, n_rounds)
    cache = {}

    def steady(L):
        if L not in cache:
            cache[L] = _steady(L, w, fl, controller)
        return cache[L]

    segs = []
    ss0 = steady(lims[0])
    f_old = (ss0["fc"], ss0["fm"], ss0["fo"])
    T_last = ss0["T"]
    t = 0.0
    ctr = 0
    for j, L in enumerate(lims):
        ss = steady(L)
        seg = _segment(w, fl, ss, t, edges[j], edges[j + 1], f_old, T_last, ctr,
                       checkpoint_every_steps, checkpoint_s, rng, j == len(lims) - 1,
                       eval_every_steps, eval_s)
        seg["limit"] = L
        segs.append(seg)
        if len(seg["dur"]):
            f_old = (seg["fc"][-1], seg["fm"][-1], seg["fo"][-1])
            T_last = seg["T"][-1]
            t = seg["start"][-1] + seg["dur"][-1] + seg["extra"][-1]
        ctr = seg["ctr"]
    cat = {k: np.concatenate([s[k] for s in segs]) for k in
           ("start", "dur", "extra", "evx", "ckx", "tc", "tm", "W", "comm", "fc", "fm",
            "fo", "T")}
    lim_step = np.concatenate([np.full(len(s["dur"]), s["limit"]) for s in segs])
    n = len(cat["dur"])
    st = cat["start"][:, None]
    # ---- per-GPU timeline: 7 intervals per step (host, comp, mem, wait, comm, eval,
    # checkpoint idle) -------------------------------------------------------------------
    NP = 7
    b = np.empty((n, NP + 1, G))
    b[:, 0] = st
    b[:, 1] = st + w.host_s
    b[:, 2] = b[:, 1] + cat["tc"]
    b[:, 3] = b[:, 2] + cat["tm"]
    b[:, 4] = st + w.host_s + cat["W"][:, None]
    b[:, 5] = b[:, 4] + cat["comm"][:, None]
    b[:, 6] = b[:, 5] + cat["evx"][:, None]
    b[:, 7] = b[:, 6] + cat["ckx"][:, None]
    T = cat["T"]
    fo = cat["fo"]
    pc, pm, pw, pk, ph = _phase_powers(w, cat["fc"], cat["fm"], T, fl, fo)
    pidle = _power(np.full_like(T, F_IDLE), T - 15.0, 0.0, 0.0, 0.0, fl)
    P = np.stack([ph, pc, pm, pw, pk, pc, pidle], axis=1)         # (n, NP, G)
    clk = np.stack([fo, cat["fc"], cat["fm"], fo, fo, cat["fc"], np.full_like(T, F_IDLE)],
                   axis=1)
    busy = np.array([0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    capped = np.zeros((n, NP, G), bool)
    capped[:, 1] = cat["fc"] < F_MAX - 1.0
    capped[:, 2] = cat["fm"] < F_MAX - 1.0
    capped[:, [0, 3, 4]] = (fo < F_MAX - 1.0)[:, None, :]
    capped[:, 5] = cat["fc"] < F_MAX - 1.0
    idle = np.zeros((n, NP, G), bool)
    idle[:, 6] = True
    t_end = edges[-1]
    ts = np.arange(interval_s, t_end + 1e-9, interval_s)
    nt = len(ts)
    pw_out = np.empty((nt, G))
    clk_out = np.empty((nt, G))
    bits = np.zeros((nt, G), np.uint64)
    util = np.empty((nt, G))
    temp = np.empty((nt, G))
    p_idle0 = _power(np.full(G, F_IDLE), fl["tin"] + 5.0, 0.0, 0.0, 0.0, fl)
    for i in range(G):
        bb = np.concatenate([[min(0.0, b[0, 0, i])], b[:, :NP, i].ravel(),
                             [b[-1, NP, i], max(t_end, b[-1, NP, i]) + interval_s]])
        lens = np.diff(bb)
        # interval k of bb: 0 = before first step, then (step, phase), last 2 = idle
        pp = np.concatenate([[p_idle0[i]], P[:, :, i].ravel(), [p_idle0[i]]])
        bz = np.concatenate([[0.0], np.tile(busy, n), [0.0]])
        E = np.concatenate([[0.0], np.cumsum(pp * lens)])
        Bc = np.concatenate([[0.0], np.cumsum(bz * lens)])
        pw_out[:, i] = (np.interp(ts, bb, E) - np.interp(ts - interval_s, bb, E)) / interval_s
        util[:, i] = (np.interp(ts, bb, Bc) - np.interp(ts - interval_s, bb, Bc)) / interval_s
        k = np.clip(np.searchsorted(bb, ts, side="right") - 1, 0, len(pp) - 1)
        inside = (k >= 1) & (k <= NP * n)
        ki = np.clip(k - 1, 0, NP * n - 1)
        ck = np.where(inside, clk[:, :, i].ravel()[ki], F_IDLE)
        cp = inside & capped[:, :, i].ravel()[ki]
        idl = ~inside | idle[:, :, i].ravel()[ki]
        bits[:, i] = (np.where(cp, BIT_SW_POWER_CAP, 0) | np.where(idl, BIT_GPU_IDLE, 0)
                      ).astype(np.uint64)
        clk_out[:, i] = ck
        stp = np.clip(ki // NP, 0, n - 1)
        Ti = T[stp, i]
        # cooling toward idle during a checkpoint / after the run
        tcool = np.where(idl, ts - np.where(k == 0, ts, bb[np.clip(k, 0, len(bb) - 1)]), 0.0)
        T_idle = fl["tin"][i] + R_TH * p_idle0[i]
        temp[:, i] = np.where(idl, T_idle + (Ti - T_idle) * np.exp(-tcool / TAU_TH), Ti)
    # ---- measurement: noise, clock bins (dither), integer temperature ----------------
    pw_out = pw_out + rng.normal(0.0, 1.0, pw_out.shape) * (power_noise_w + 0.004 * pw_out)
    lo = np.floor(clk_out / F_BIN) * F_BIN
    clk_out = lo + F_BIN * (rng.random(clk_out.shape) < (clk_out - lo) / F_BIN)
    clk_out = np.minimum(clk_out, F_MAX)
    temp = np.round(temp + rng.normal(0.0, 0.4, temp.shape))
    util = np.clip(np.round(100.0 * util), 0, 100)
    seg_idx = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, len(lims) - 1)
    lim_t = lims[seg_idx]
    hosts = np.repeat([f"node{h:03d}" for h in range(nh)], gpus_per_host)
    tel = pd.DataFrame({
        "timestamp": np.repeat(start + pd.to_timedelta(ts, unit="s"), G).as_unit("ns"),
        "host": pd.array(np.tile(hosts, nt), dtype="string"),
        "scope": pd.array(["gpu"] * (nt * G), dtype="string"),
        "gpu_index": pd.array(np.tile(np.arange(gpus_per_host), nh * nt), dtype="Int16"),
        "gpu_uuid": pd.array(np.tile(fl["uuids"], nt), dtype="string"),
        "power_w": pw_out.ravel(),
        "power_limit_w": np.repeat(lim_t, G),
        "clock_sm_mhz": clk_out.ravel(),
        "util_gpu_pct": util.ravel(),
        "throttle_reasons": pd.array(bits.ravel(), dtype="UInt64"),
        "temp_gpu_c": temp.ravel(),
    })
    if missing_frac > 0:
        drop = rng.random(len(tel)) < missing_frac
        tel = tel.loc[~drop].reset_index(drop=True)
    # ---- training log -------------------------------------------------------------
    end = cat["start"] + cat["dur"]
    rows_t = pd.DataFrame({"t": end, "duration_s": cat["dur"], "phase": "train"})
    rows_t["step"] = np.arange(1, n + 1)
    ev = cat["evx"] > 0
    rows_e = pd.DataFrame({"t": end[ev] + cat["evx"][ev], "duration_s": cat["evx"][ev],
                           "phase": "eval", "step": np.arange(1, n + 1)[ev]})
    ck = cat["ckx"] > 0
    rows_c = pd.DataFrame({"t": end[ck] + cat["evx"][ck] + cat["ckx"][ck],
                           "duration_s": cat["ckx"][ck], "phase": "checkpoint",
                           "step": np.arange(1, n + 1)[ck]})
    steps = pd.concat([rows_t, rows_e, rows_c]).sort_values("t", kind="stable")
    steps.insert(0, "timestamp", (start + pd.to_timedelta(steps.pop("t").to_numpy(), unit="s"))
                 .as_unit("ns"))
    steps = steps.reset_index(drop=True)
    sched = pd.DataFrame({"start": (start + pd.to_timedelta(edges[:-1], unit="s")).as_unit("ns"),
                          "end": (start + pd.to_timedelta(edges[1:], unit="s")).as_unit("ns"),
                          "power_limit_w": lims})
    kw = {"job": job, "seed": seed, "n_hosts": nh, "gpus_per_host": gpus_per_host,
          "leak_sd": leak_sd, "dv_sd": dv_sd, "cdyn_sd": cdyn_sd, "inlet_c": inlet_c,
          "workload": workload, "controller": controller}
    info = {"truth": lambda limit_w: truth(limit_w, **kw), "schedule": sched,
            "workload": w, "n_gpus": G, "job_kwargs": kw, "step_limit_w": lim_step}
    return tel, steps, info


if __name__ == "__main__":  # pragma: no cover - self-check
    import time

    for name in JOBS:
        t0 = time.perf_counter()
        tel, steps, info = generate(name, 0)
        dt = time.perf_counter() - t0
        print(f"{name}: telemetry {tel.shape}, steps {steps.shape}, {dt:.2f} s")
        for L in (700, 650, 600, 500, 450, 400, 350, 300):
            s = truth_state(L, job=name)
            print(f"  {L:4d} W: step {info['truth'](L):.4f} s  "
                  f"clock comp {s['fc'].min():.0f}-{s['fc'].max():.0f} MHz  "
                  f"T {s['T'].min():.1f}-{s['T'].max():.1f} C")
        tr = steps[steps.phase == "train"]
        lim = info["step_limit_w"]
        print(tr.groupby(lim)["duration_s"].mean().round(4).to_dict())
        busy = tel[tel.util_gpu_pct > 50]
        print(busy.groupby("power_limit_w")[["power_w", "clock_sm_mhz", "temp_gpu_c"]]
              .mean().round(1))
        cap = (busy.throttle_reasons.astype("uint64") & BIT_SW_POWER_CAP) > 0
        print("  sw_power_cap share:", cap.groupby(busy.power_limit_w).mean().round(3).to_dict())
