"""The synthetic twin's parameters and physics (see :mod:`powerlab.throughput.synth`).

:class:`TwinParameters` holds every physical and log parameter with its unit; the
functions here are the model of :mod:`powerlab.throughput.synth`'s docstring: first-order
thermal lags, the DVFS clock law with its throttle bits, the fleet of GPUs with their
thermal resistance spread and stragglers, the pre-computed state table (inlet ->
temperature, clock, power) and the per-GPU step time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import signal, special

from ..exceptions import ScenarioError
from ..telemetry.schema import THROTTLE_REASONS

__all__ = ["Fleet", "StateTable", "TwinParameters", "checked_parameters", "dvfs_clock",
           "expected_max", "first_order_lag", "gpu_states", "gpu_step_time", "make_fleet",
           "softplus", "state_table"]

_STRAGGLER_KINDS = ("thermal", "power", "clock")
# parameters that must be >= 0 / > 0 (a negative standard deviation, warm-up length or
# time constant would silently give nonsense, e.g. a warm-up growing without bound)
_NON_NEGATIVE = ("inlet_tau_s", "gpu_tau_s", "r_th_spread", "jitter_pct", "noise_pct",
                 "noise_corr_s", "segment_level_pct", "downtime_s", "startup_s",
                 "warmup_steps", "warmup_extra", "checkpoint_every", "checkpoint_s",
                 "eval_every", "eval_s", "straggler_severity", "telemetry_noise",
                 "inlet_ambient_coef", "clock_temp_slope_mhz_per_c",
                 "sw_thermal_slope_mhz_per_c", "leakage_per_c")
_POSITIVE = ("r_th_c_per_w", "r_hbm_c_per_w", "clock_max_mhz", "clock_min_mhz",
             "clock_step_mhz", "power_dynamic_w", "power_limit_w", "tokens_per_step",
             "mtbf_s")


@dataclass(frozen=True)
class TwinParameters:
    """Physical and operational parameters of the twin (H100-SXM-like defaults).

    Attributes
    ----------
    ambient_mean_c, ambient_swing_c, ambient_peak_hour : float
        Sinusoidal ambient used when no series is given: daily mean [degC], peak-to-trough
        swing [K] and the local civil hour of the maximum [h].
    ambient_ref_c : float
        Ambient at which the inlet sits at ``inlet_base_c`` [degC].
    inlet_base_c : float
        Inlet (cold-aisle / coolant supply) temperature at the reference ambient [degC].
    inlet_ambient_coef : float
        Economiser coupling: inlet change per degree of ambient change [K/K].
    inlet_tau_s : float
        Facility thermal time constant from ambient to inlet [s].
    gpu_tau_s : float
        Die thermal time constant [s].
    r_th_c_per_w, r_hbm_c_per_w : float
        Thermal resistance die-to-inlet and HBM-to-inlet [K/W].
    r_th_spread : float
        Relative standard deviation of thermal resistance across GPUs [-].
    clock_max_mhz, clock_min_mhz, clock_idle_mhz, clock_step_mhz : float
        Maximum boost, lowest load clock, idle clock and reporting bin of the SM clock
        [MHz].
    clock_mem_mhz : float
        HBM clock [MHz].
    clock_temp_slope_mhz_per_c, clock_temp_knee_c : float
        GPU Boost clock reduction per degree above the knee [MHz/K] and the knee [degC].
    sw_thermal_c, sw_thermal_slope_mhz_per_c, hw_thermal_c, hbm_slowdown_c : float
        Software thermal slowdown threshold [degC] and its extra slope [MHz/K]; hardware
        thermal slowdown threshold (clock halved) [degC]; HBM temperature above which the
        hardware slowdown bit is set [degC].
    power_static_w, leakage_per_c, power_dynamic_w, power_idle_w, power_limit_w : float
        Static power at 60 degC [W], its relative growth per degree [1/K], dynamic power
        at maximum clock [W], idle power [W], enforced power limit [W].
    step_time_s : float
        Step time of a GPU at maximum clock [s].
    compute_fraction : float
        Share of the step that scales with 1 / clock (compute bound) [-].
    jitter_pct : float
        Per-GPU, per-step jitter of the step time (standard deviation) [%].
    noise_pct, noise_corr_s : float
        AR(1) noise of the job step time: marginal standard deviation [%] and correlation
        time [s] (AR coefficient ``exp(-step / noise_corr_s)``).
    segment_level_pct : float
        Standard deviation of the per-segment level (a restart may land on other nodes) [%].
    tokens_per_step : float
        Tokens processed per step [-].
    mtbf_s, downtime_s : float
        Mean time between job failures [s] and mean restart downtime [s].
    startup_s, warmup_steps, warmup_extra : float
        First-step start-up time after a restart [s], e-folding length of the warm-up
        [steps], and the warm-up's initial relative slowdown [-].
    checkpoint_every, checkpoint_s, eval_every, eval_s : float
        Steps between checkpoints, extra time of a checkpoint step [s], steps between
        evaluations, extra time of an evaluation step [s].
    straggler_severity : float
        Scales the injected straggler faults (1 = defaults below) [-]: thermal straggler
        ``r_th`` x (1 + 0.3 s), power straggler limit x (1 - 0.2 s), clock straggler clock
        x (1 - 0.15 s).
    telemetry_noise : float
        Standard deviation of telemetry read noise: temperatures in [K], power in [%].
    """

    ambient_mean_c: float = 24.0
    ambient_swing_c: float = 12.0
    ambient_peak_hour: float = 15.0
    ambient_ref_c: float = 24.0
    inlet_base_c: float = 25.0
    inlet_ambient_coef: float = 0.5
    inlet_tau_s: float = 1800.0
    gpu_tau_s: float = 60.0
    r_th_c_per_w: float = 0.07
    r_hbm_c_per_w: float = 0.06
    r_th_spread: float = 0.03
    clock_max_mhz: float = 1980.0
    clock_min_mhz: float = 1095.0
    clock_idle_mhz: float = 345.0
    clock_step_mhz: float = 15.0
    clock_mem_mhz: float = 2619.0
    clock_temp_slope_mhz_per_c: float = 8.0
    clock_temp_knee_c: float = 45.0
    sw_thermal_c: float = 80.0
    sw_thermal_slope_mhz_per_c: float = 30.0
    hw_thermal_c: float = 92.0
    hbm_slowdown_c: float = 95.0
    power_static_w: float = 90.0
    leakage_per_c: float = 0.03
    power_dynamic_w: float = 700.0
    power_idle_w: float = 70.0
    power_limit_w: float = 700.0
    step_time_s: float = 10.0
    compute_fraction: float = 0.8
    jitter_pct: float = 0.3
    noise_pct: float = 0.5
    noise_corr_s: float = 600.0
    segment_level_pct: float = 0.5
    tokens_per_step: float = 3_145_728.0
    mtbf_s: float = 3.0 * 86400.0
    downtime_s: float = 1200.0
    startup_s: float = 120.0
    warmup_steps: float = 10.0
    warmup_extra: float = 0.5
    checkpoint_every: int = 500
    checkpoint_s: float = 60.0
    eval_every: int = 2000
    eval_s: float = 180.0
    straggler_severity: float = 1.0
    telemetry_noise: float = 0.5


def checked_parameters(p: TwinParameters, overrides: Mapping[str, object]) -> TwinParameters:
    """``p`` with ``overrides`` applied, every parameter checked (the key named on error)."""
    names = {f.name for f in dataclasses.fields(TwinParameters)}
    for k in overrides:
        if k not in names:
            raise ScenarioError(f"unknown twin parameter {k!r}", key=k)
    if overrides:
        p = dataclasses.replace(p, **overrides)
    for k in _NON_NEGATIVE:
        v = getattr(p, k)
        if not (isinstance(v, (int, float, np.integer, np.floating)) and v >= 0):
            raise ScenarioError(f"{k} must be a non-negative number, got {v!r}", key=k)
    for k in _POSITIVE:
        v = getattr(p, k)
        if not (isinstance(v, (int, float, np.integer, np.floating)) and v > 0):
            raise ScenarioError(f"{k} must be a positive number, got {v!r}", key=k)
    return p


def first_order_lag(x: np.ndarray, dt: float, tau: float) -> np.ndarray:
    """First-order lag along axis 0, starting in equilibrium with the first sample."""
    if tau <= 0:
        return x
    a = np.exp(-dt / tau)
    zi_shape = (1,) + x.shape[1:]
    zi = (a * x[:1]).reshape(zi_shape)
    y, _ = signal.lfilter([1 - a], [1, -a], x, axis=0, zi=zi)
    return y


def softplus(x: np.ndarray, width: float) -> np.ndarray:
    return width * np.logaddexp(0.0, x / width)


def dvfs_clock(temp, p: TwinParameters, limit, clock_factor):
    """Clock, power and throttle bits for die temperature ``temp`` (broadcast arrays)."""
    f_th = (p.clock_max_mhz
            - p.clock_temp_slope_mhz_per_c * softplus(temp - p.clock_temp_knee_c, 2.0)
            - p.sw_thermal_slope_mhz_per_c * softplus(temp - p.sw_thermal_c, 1.0))
    hw = temp > p.hw_thermal_c
    f_th = np.where(hw, np.minimum(f_th, 0.5 * p.clock_max_mhz), f_th)
    p_static = p.power_static_w * (1.0 + p.leakage_per_c * (temp - 60.0))
    room = np.clip((limit - p_static) / p.power_dynamic_w, 1e-3, None)
    f_cap = p.clock_max_mhz * np.cbrt(room)
    f_th = f_th * clock_factor            # hardware slowdown (clock straggler)
    capped = f_cap < f_th
    f = np.minimum(f_th, f_cap)
    f = np.clip(f, p.clock_min_mhz * 0.5, p.clock_max_mhz)
    power = p_static + p.power_dynamic_w * (f / p.clock_max_mhz) ** 3
    return f, power, capped, hw


@dataclass
class Fleet:
    hosts: np.ndarray          # (G,) str
    gpu_index: np.ndarray      # (G,) int
    uuids: np.ndarray          # (G,) str
    r_th: np.ndarray           # (G,)
    limit: np.ndarray          # (G,)
    clock_factor: np.ndarray   # (G,)
    kind: np.ndarray           # (G,) '' or kind


def make_fleet(n_hosts, gpus_per_host, stragglers, p: TwinParameters, rng) -> Fleet:
    g = n_hosts * gpus_per_host
    hosts = np.repeat([f"node{h:03d}" for h in range(n_hosts)], gpus_per_host)
    gidx = np.tile(np.arange(gpus_per_host), n_hosts)
    raw = rng.integers(0, 2**32, size=(g, 4), dtype=np.uint64)
    uuids = np.array([f"GPU-{a:08x}-{b & 0xffff:04x}-{c & 0xffff:04x}-{(c >> 16) & 0xffff:04x}"
                      f"-{d:08x}{b >> 16 & 0xffff:04x}" for a, b, c, d in raw.tolist()])
    r_th = p.r_th_c_per_w * (1.0 + p.r_th_spread * rng.standard_normal(g))
    limit = np.full(g, p.power_limit_w)
    factor = np.ones(g)
    kind = np.array([""] * g, dtype=object)
    if not isinstance(stragglers, (int, np.integer, Sequence)) or isinstance(
            stragglers, (bool, str)):
        raise ScenarioError("stragglers must be a count or a sequence of (fleet position, "
                            f"kind) pairs, got {stragglers!r}", key="stragglers")
    if isinstance(stragglers, (int, np.integer)):
        if not 0 <= stragglers <= g:
            raise ScenarioError(f"stragglers must be between 0 and the fleet size {g}",
                                key="stragglers")
        where = rng.choice(g, size=int(stragglers), replace=False)
        kinds = [_STRAGGLER_KINDS[i % 3] for i in range(int(stragglers))]
        spec = list(zip(where.tolist(), kinds))
    else:
        spec = []
        for item in stragglers:
            try:
                gi, k = int(item[0]), str(item[1])
            except (TypeError, ValueError, IndexError) as exc:
                raise ScenarioError("stragglers items must be (fleet position, kind) "
                                    f"pairs, got {item!r}", key="stragglers") from exc
            if not 0 <= gi < g or k not in _STRAGGLER_KINDS:
                raise ScenarioError(f"bad straggler {item!r}: position in [0, {g}) and "
                                    f"kind in {_STRAGGLER_KINDS} expected", key="stragglers")
            spec.append((gi, k))
    s = p.straggler_severity
    for gi, k in spec:
        kind[gi] = k
        if k == "thermal":
            r_th[gi] *= 1.0 + 0.3 * s
        elif k == "power":
            limit[gi] *= 1.0 - 0.2 * s
        else:
            factor[gi] *= 1.0 - 0.15 * s
    return Fleet(hosts, gidx, uuids, r_th, limit, factor, kind)


@dataclass
class StateTable:
    """Quasi-steady busy state of every GPU as a function of inlet temperature."""
    tin: np.ndarray        # (n,) uniform inlet grid [degC]
    temp: np.ndarray       # (n, G) die temperature [degC]
    clock: np.ndarray      # (n, G) SM clock [MHz]
    step: np.ndarray       # (n, G) GPU step time [s]
    job_step: np.ndarray   # (n,) expected slowest GPU's step time, jitter included [s]

    def index(self, inlet: np.ndarray):
        x = (inlet - self.tin[0]) / (self.tin[1] - self.tin[0])
        i = np.clip(np.floor(x).astype(np.int64), 0, len(self.tin) - 2)
        return i, np.clip(x - i, 0.0, 1.0)

    def rows(self, arr: np.ndarray, inlet: np.ndarray) -> np.ndarray:
        i, w = self.index(inlet)
        if arr.ndim == 1:
            return arr[i] * (1 - w) + arr[i + 1] * w
        return arr[i] * (1 - w)[:, None] + arr[i + 1] * w[:, None]


def state_table(fleet: Fleet, p: TwinParameters, lo: float = -30.0, hi: float = 80.0,
           n: int = 1101) -> StateTable:
    """Solve the power <-> temperature feedback on a grid of inlet temperatures."""
    tin = np.linspace(lo, hi, n)
    t_in = tin[:, None]
    r = fleet.r_th[None, :]
    lim = fleet.limit[None, :]
    cf = fleet.clock_factor[None, :]
    temp = t_in + r * 0.9 * p.power_limit_w
    for _ in range(8):
        _, power, _, _ = dvfs_clock(temp, p, lim, cf)
        temp = t_in + r * power
    f, _, _, _ = dvfs_clock(temp, p, lim, cf)
    step = gpu_step_time(f, p)
    return StateTable(tin, temp, f, step, expected_max(step, p.jitter_pct / 100.0))


def expected_max(d: np.ndarray, rel_sd: float, n_x: int = 96, every: int = 10,
                  top: int = 16):
    """E[max_i d_i (1 + s z_i)] per row, z_i iid standard normal.

    ``E[M] = x_0 + int_{x_0}^inf (1 - prod_i Phi((x - d_i) / (s d_i))) dx`` evaluated on
    a grid of ``n_x`` points per row over the ``top`` slowest GPUs, for every
    ``every``-th row (then interpolated): when GPUs are nearly tied the jitter raises
    the expected maximum, which the noise-free maximum would miss.
    """
    dmax = d.max(axis=1)
    if rel_sd <= 0:
        return dmax
    rows = np.unique(np.r_[np.arange(0, len(d), every), len(d) - 1])
    sub = d[rows]
    if sub.shape[1] > top:
        sub = np.partition(sub, sub.shape[1] - top, axis=1)[:, -top:]
    sd = rel_sd * sub
    x0 = sub.max(axis=1) - 6 * sd.max(axis=1)
    x1 = sub.max(axis=1) + 6 * sd.max(axis=1)
    u = np.linspace(0.0, 1.0, n_x)
    x = x0[:, None] + (x1 - x0)[:, None] * u[None, :]     # (r, n_x)
    cdf = special.ndtr((x[:, :, None] - sub[:, None, :]) / sd[:, None, :]).prod(axis=2)
    em = x0 + np.trapezoid(1.0 - cdf, x, axis=1)
    return np.interp(np.arange(len(d)), rows, em)


def gpu_states(inlet: np.ndarray, busy: np.ndarray, fleet: Fleet, table: StateTable,
                p: TwinParameters, dt: float):
    """Temperatures, clocks, power and bits on the grid, shape (n_t, G)."""
    t_in = inlet[:, None]
    r = fleet.r_th[None, :]
    lim = fleet.limit[None, :]
    cf = fleet.clock_factor[None, :]
    b = busy[:, None]
    temp_ss = np.where(b, table.rows(table.temp, inlet), t_in + r * p.power_idle_w)
    temp = first_order_lag(temp_ss, dt, p.gpu_tau_s)
    f, power, capped, hw = dvfs_clock(temp, p, lim, cf)
    f = np.where(b, f, p.clock_idle_mhz)
    power = np.where(b, power, p.power_idle_w + 0.2 * (temp - 35.0))
    hbm = first_order_lag(t_in + p.r_hbm_c_per_w * power, dt, p.gpu_tau_s)
    zero = np.uint64(0)
    bits = np.where(b & capped, np.uint64(THROTTLE_REASONS["sw_power_cap"]), zero)
    bits |= np.where(b & (temp > p.sw_thermal_c),
                     np.uint64(THROTTLE_REASONS["sw_thermal_slowdown"]), zero)
    bits |= np.where(b & hw, np.uint64(THROTTLE_REASONS["hw_thermal_slowdown"]), zero)
    bits |= np.where(b & ((cf < 1.0) | (hbm > p.hbm_slowdown_c)),
                     np.uint64(THROTTLE_REASONS["hw_slowdown"]), zero)
    bits |= np.where(~b, np.uint64(THROTTLE_REASONS["gpu_idle"]), zero)
    return temp, hbm, f, power, bits


def gpu_step_time(f: np.ndarray, p: TwinParameters) -> np.ndarray:
    return p.step_time_s * (p.compute_fraction * p.clock_max_mhz / f
                            + 1.0 - p.compute_fraction)
