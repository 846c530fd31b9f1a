"""GPU power smoothing as NVIDIA documents it for Blackwell and newer (NVML power smoothing).

A pure function on one power series, :func:`smooth_power` (its settings in SI units:
:class:`SmoothingOptions`), the profile it models, :class:`SmoothingProfile`, whose fields
carry NVML's parameter names and units, and the mitigation, :class:`Smoothing`.  The
mitigation search (:mod:`powerlab.interconnect.sizing`) applies it to the per-GPU mean
power of each job of a forecast draw, so that trying a profile costs array arithmetic
rather than an engine run, and offers it only on hardware that has it
(:func:`smoothing_support`, by the scenario's ``gpu_model``).

Which hardware
--------------
NVML's power-smoothing functions are documented "for Blackwell or newer fully supported
devices" ([1]_, [2]_).  Hopper (H100, H200, GH200) and older do not have them: a site of
H100s cannot be mitigated by NVML power smoothing, whatever a slide says.
:data:`NVML_PROFILE_PARAMS` says per parameter which NVML release lists it: the first four
are in every header with power smoothing (``NVML_POWER_SMOOTHING_NUM_PROFILE_PARAMS``
4, e.g. CUDA 12.9's NVML), the last four appear with 8 profile parameters (NVML API
reference R590).

Model
-----
The profile's eight parameters ([1]_; units from
``nvmlDevicePowerSmoothingUpdatePresetProfileParam``, [2]_), with powerlab's field names:

=====  ===========================================  ===============================
index  NVML parameter                               field [unit]
=====  ===========================================  ===============================
0      ``PERCENT_TMP_FLOOR``                        ``percent_tmp_floor`` [% of TMP]
1      ``RAMP_UP_RATE``                             ``ramp_up_rate_w_per_s`` [W/s]
2      ``RAMP_DOWN_RATE``                           ``ramp_down_rate_w_per_s`` [W/s]
3      ``RAMP_DOWN_HYSTERESIS``                     ``ramp_down_hysteresis_ms`` [ms]
4      ``SECONDARY_POWER_FLOOR``                    ``secondary_power_floor_w`` [W]
5      ``PRIMARY_FLOOR_ACT_WIN_MULT``               ``primary_floor_act_win_mult`` [-]
6      ``PRIMARY_FLOOR_TAR_WIN_MULT``               ``primary_floor_tar_win_mult`` [-]
7      ``PRIMARY_FLOOR_ACT_OFFSET``                 ``primary_floor_act_offset_w`` [W]
=====  ===========================================  ===============================

Modelled per tick (the first four as before; TMP, the total module power, is taken as the
GPU's TDP):

- the primary floor is ``percent_tmp_floor`` of TMP; while a job holds the GPU and the
  primary floor is engaged the target is the workload's power raised to it, otherwise the
  workload's power raised to the secondary floor (while a job holds the GPU);
- **powerlab's assumption** for the floor windows, whose base window NVML does not
  publish: the primary floor engages once the workload's mean power over the trailing
  ``primary_floor_act_win_mult x window_base_s`` reaches the primary floor plus
  ``primary_floor_act_offset_w``, and disengages once the mean over the trailing
  ``primary_floor_tar_win_mult x window_base_s`` falls below that level (or the job
  releases the GPU); multipliers 0 (default) mean the floor is engaged whenever a job
  holds the GPU (``window_base_s`` 1 s, an assumption);
- when the target is above the current power, power rises toward it at most at the
  ramp-up rate (0: unlimited);
- when the target falls below the current power, power is held for the hysteresis time,
  then falls toward the target at most at the ramp-down rate (0: unlimited); a target
  back at or above the current power restarts the hysteresis.

Power held above the workload's demand is burnt (extra energy); power withheld below the
demand by the ramp-up limit is work delayed (throughput).

References
----------
.. [1] NVIDIA, NVML API Reference, "Power Smoothing Information" (R590),
   https://docs.nvidia.com/deploy/nvml-api/group__nvmlPowerSmoothing.html
.. [2] NVIDIA cuda-python, ``cuda.bindings.nvml.device_power_smoothing_update_preset_profile_param``
   ("For Blackwell or newer fully supported devices"; PERCENT_TMP_FLOOR 0-100 %, ramp
   rates W/s, hysteresis ms).
.. [3] E. Choukse et al., "Power Stabilization for AI Training Datacenters", 2025,
   arXiv:2508.14318 (floor settable 20-90 % of TDP on GB200/GB300).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from .._options import Options
from .lever import Mitigation
from .registry import register_lever

__all__ = ["GENERATIONS", "NVML_PROFILE_PARAMS", "Smoothing", "SmoothingOptions",
           "SmoothingProfile", "gpu_generation", "smooth_power", "smoothing_support"]

#: GPU generations in order; the first name fragment of ``gpu_model`` that matches wins.
GENERATIONS = ("Volta", "Ampere", "Ada", "Hopper", "Blackwell", "Blackwell Ultra", "Rubin")
_MODEL_GENERATION = (("GB300", "Blackwell Ultra"), ("B300", "Blackwell Ultra"),
                     ("GB200", "Blackwell"), ("B200", "Blackwell"), ("B100", "Blackwell"),
                     ("RTX PRO 6000", "Blackwell"), ("VR200", "Rubin"), ("R100", "Rubin"),
                     ("R200", "Rubin"), ("RUBIN", "Rubin"), ("GH200", "Hopper"),
                     ("H200", "Hopper"), ("H100", "Hopper"), ("H800", "Hopper"),
                     ("H20", "Hopper"), ("L40", "Ada"), ("L4", "Ada"), ("A100", "Ampere"),
                     ("A800", "Ampere"), ("A40", "Ampere"), ("A30", "Ampere"),
                     ("A10", "Ampere"), ("V100", "Volta"))

#: NVML profile parameters: field -> (NVML macro, index, unit, what it needs).
NVML_PROFILE_PARAMS = {
    "percent_tmp_floor": ("NVML_POWER_SMOOTHING_PROFILE_PARAM_PERCENT_TMP_FLOOR", 0,
                          "% of TMP", "Blackwell or newer; NVML with 4 profile params"),
    "ramp_up_rate_w_per_s": ("NVML_POWER_SMOOTHING_PROFILE_PARAM_RAMP_UP_RATE", 1, "W/s",
                             "Blackwell or newer; NVML with 4 profile params"),
    "ramp_down_rate_w_per_s": ("NVML_POWER_SMOOTHING_PROFILE_PARAM_RAMP_DOWN_RATE", 2,
                               "W/s", "Blackwell or newer; NVML with 4 profile params"),
    "ramp_down_hysteresis_ms": ("NVML_POWER_SMOOTHING_PROFILE_PARAM_RAMP_DOWN_HYSTERESIS", 3,
                                "ms", "Blackwell or newer; NVML with 4 profile params"),
    "secondary_power_floor_w": ("NVML_POWER_SMOOTHING_PROFILE_PARAM_SECONDARY_POWER_FLOOR",
                                4, "W", "Blackwell or newer; NVML with 8 profile params"),
    "primary_floor_act_win_mult": (
        "NVML_POWER_SMOOTHING_PROFILE_PARAM_PRIMARY_FLOOR_ACT_WIN_MULT", 5, "-",
        "Blackwell or newer; NVML with 8 profile params"),
    "primary_floor_tar_win_mult": (
        "NVML_POWER_SMOOTHING_PROFILE_PARAM_PRIMARY_FLOOR_TAR_WIN_MULT", 6, "-",
        "Blackwell or newer; NVML with 8 profile params"),
    "primary_floor_act_offset_w": (
        "NVML_POWER_SMOOTHING_PROFILE_PARAM_PRIMARY_FLOOR_ACT_OFFSET", 7, "W",
        "Blackwell or newer; NVML with 8 profile params"),
}


def gpu_generation(gpu_model: str) -> str | None:
    """The GPU generation of a model name (``"H100-SXM-80GB"`` -> ``"Hopper"``), None
    when powerlab does not know the name."""
    m = (gpu_model or "").upper()
    for frag, gen in _MODEL_GENERATION:
        if frag in m:
            return gen
    return None


def smoothing_support(gpu_model: str) -> tuple[bool, str]:
    """(whether NVML power smoothing exists on this GPU, the reason)."""
    gen = gpu_generation(gpu_model)
    if gen is None:
        return False, (f"NVML power smoothing not offered: GPU model {gpu_model!r} is not "
                       "one powerlab knows the generation of (it needs Blackwell or newer)")
    if GENERATIONS.index(gen) < GENERATIONS.index("Blackwell"):
        return False, (f"NVML power smoothing not offered: {gpu_model} is {gen}; NVML "
                       "documents power smoothing for Blackwell or newer")
    return True, f"{gpu_model} is {gen}: NVML power smoothing available"


@dataclass(frozen=True)
class SmoothingOptions(Options):
    """Settings of :func:`smooth_power`, in SI units (fields replaceable by keyword:
    ``smooth_power(x, 0.1, floor_w=400.0)``).

    Attributes
    ----------
    floor_w : float, default 0
        Power floor while ``active`` (0: off) [W].
    ramp_up_w_per_s, ramp_down_w_per_s : float, default 0
        Largest rise and fall rates (0: unlimited) [W/s].
    hysteresis_s : float, default 0
        How long power is held after the target falls before ramping down [s].
    secondary_floor_w : float, default 0
        Floor while a job holds the GPU and the primary floor is not engaged [W].
    act_window_s, tar_window_s : float, default 0
        Engage and release windows of the primary floor (0: engaged whenever ``active``)
        [s].
    act_offset_w : float, default 0
        Engage level above the primary floor [W].
    """

    floor_w: float = 0.0
    ramp_up_w_per_s: float = 0.0
    ramp_down_w_per_s: float = 0.0
    hysteresis_s: float = 0.0
    secondary_floor_w: float = 0.0
    act_window_s: float = 0.0
    tar_window_s: float = 0.0
    act_offset_w: float = 0.0


@dataclass(frozen=True)
class SmoothingProfile:
    """One NVML power-smoothing profile (field names and units: the module docstring).

    ``tmp_w`` is the total module power the floor percentage refers to [W].
    """

    percent_tmp_floor: float = 0.0
    ramp_up_rate_w_per_s: float = 0.0
    ramp_down_rate_w_per_s: float = 0.0
    ramp_down_hysteresis_ms: float = 0.0
    secondary_power_floor_w: float = 0.0
    primary_floor_act_win_mult: float = 0.0
    primary_floor_tar_win_mult: float = 0.0
    primary_floor_act_offset_w: float = 0.0

    def options(self, tmp_w: float, window_base_s: float = 1.0) -> SmoothingOptions:
        """The profile in :func:`smooth_power`'s SI units (``tmp_w``: the total module
        power [W]; ``window_base_s``: the floor windows' base, an assumption [s])."""
        return SmoothingOptions(
            floor_w=self.percent_tmp_floor / 100.0 * tmp_w,
            ramp_up_w_per_s=self.ramp_up_rate_w_per_s,
            ramp_down_w_per_s=self.ramp_down_rate_w_per_s,
            hysteresis_s=self.ramp_down_hysteresis_ms / 1000.0,
            secondary_floor_w=self.secondary_power_floor_w,
            act_window_s=self.primary_floor_act_win_mult * window_base_s,
            tar_window_s=self.primary_floor_tar_win_mult * window_base_s,
            act_offset_w=self.primary_floor_act_offset_w)

    def apply(self, power_w: np.ndarray, tick_s: float, tmp_w: float, *,
              active: np.ndarray | None = None, window_base_s: float = 1.0) -> np.ndarray:
        """:func:`smooth_power` with this profile [W]."""
        return smooth_power(power_w, tick_s, self.options(tmp_w, window_base_s),
                            active=active)


def _trailing_mean(x: np.ndarray, n: int) -> np.ndarray:
    cs = np.concatenate([[0.0], np.cumsum(x)])
    k = np.arange(1, len(x) + 1)
    lo = np.maximum(0, k - n)
    return (cs[k] - cs[lo]) / (k - lo)


def _engaged(x, tick_s, active, level, act_window_s, tar_window_s):
    """Ticks at which the primary floor is engaged (see the module docstring)."""
    act = np.ones(len(x), bool) if active is None else np.asarray(active, bool)
    if act_window_s <= 0 and tar_window_s <= 0:
        return act
    on = act & (_trailing_mean(x, max(1, round(act_window_s / tick_s))) >= level
                if act_window_s > 0 else act)
    off = ~act
    if tar_window_s > 0:
        off = off | (_trailing_mean(x, max(1, round(tar_window_s / tick_s))) < level)
    k = np.arange(len(x))
    last_on = np.maximum.accumulate(np.where(on, k, -1))
    last_off = np.maximum.accumulate(np.where(off & ~on, k, -1))
    return (last_on > last_off) & act


def smooth_power(power_w: np.ndarray, tick_s: float, options: SmoothingOptions | None = None,
                 *, active: np.ndarray | None = None, **option_kw) -> np.ndarray:
    """Power of a GPU under NVML-style power smoothing.

    The steps: the target (the workload's power raised to the floor that is engaged,
    :func:`_floor_target`), then the ramp limits and the hysteresis, run by run of
    constant target (:func:`_ramp_runs`), painted onto the ticks (:func:`_paint`).

    Parameters
    ----------
    power_w : ndarray
        Power the workload draws without smoothing, one value per tick [W].
    tick_s : float
        Tick [s].
    options : SmoothingOptions, optional
        Floors, ramp rates, hysteresis and floor windows (default: all off).
    active : ndarray of bool, optional
        Ticks at which the floor applies (a job holds the GPU); default every tick.
    **option_kw
        Fields of :class:`SmoothingOptions` replacing those of ``options``
        (``smooth_power(x, 0.1, floor_w=400.0, ramp_up_w_per_s=300.0)``).

    Returns
    -------
    ndarray
        Smoothed power per tick [W].

    Notes
    -----
    The loop runs over runs of constant target (run-length encoding), not over ticks;
    the series is painted with array arithmetic, so a day at 0.1 s costs milliseconds
    for a piecewise-constant training load.
    """
    o = SmoothingOptions.from_kwargs(options, **option_kw)
    x = np.asarray(power_w, dtype=float)
    if len(x) == 0:
        return x.copy()
    t = _floor_target(x, tick_s, active, o)
    if o.ramp_up_w_per_s <= 0 and o.ramp_down_w_per_s <= 0 and o.hysteresis_s <= 0:
        return np.array(t, dtype=float)
    tr = np.round(t, 6)
    starts = np.flatnonzero(np.concatenate([[True], tr[1:] != tr[:-1]]))
    lens = np.diff(np.append(starts, len(x)))
    vals = tr[starts]
    return _paint(len(x), starts, lens, vals, *_ramp_runs(vals, lens, tick_s, o))


def _floor_target(x: np.ndarray, tick_s: float, active, o: SmoothingOptions) -> np.ndarray:
    """The workload's power raised to the primary floor where it is engaged, to the
    secondary floor elsewhere while a job holds the GPU [W]."""
    if not (o.floor_w > 0 or o.secondary_floor_w > 0):
        return x
    eng = _engaged(x, tick_s, active, o.floor_w + o.act_offset_w, o.act_window_s,
                   o.tar_window_s)
    held = np.ones(len(x), bool) if active is None else np.asarray(active, bool)
    return np.where(eng, np.maximum(x, o.floor_w),
                    np.where(held, np.maximum(x, o.secondary_floor_w), x))


def _ramp_runs(vals: np.ndarray, lens: np.ndarray, tick_s: float, o: SmoothingOptions):
    """Per run of constant target: the power at its start, the ticks held before it
    ramps (hysteresis), its ramp per tick and whether it rises."""
    big = math.inf
    su = o.ramp_up_w_per_s * tick_s if o.ramp_up_w_per_s > 0 else big
    sd = o.ramp_down_w_per_s * tick_s if o.ramp_down_w_per_s > 0 else big
    hold = math.floor(o.hysteresis_s / tick_s + 0.5 + 1e-9)
    m = len(vals)
    y0 = np.empty(m)
    hold0 = np.zeros(m, dtype=np.int64)
    rate = np.empty(m)
    up = np.empty(m, dtype=bool)
    y = float(vals[0])
    below = 0
    vl, ll = vals.tolist(), lens.tolist()
    for i in range(m):
        v, L = vl[i], ll[i]
        y0[i] = y
        if v >= y:
            below = 0
            up[i] = True
            rate[i] = su
            y = v if su == big else min(v, y + su * L)
        else:
            up[i] = False
            rate[i] = sd
            h = max(0, hold - below)
            hold0[i] = h
            # tick (1-based) of the run at which power reaches the target; once there,
            # the target is no longer below the power and the hysteresis restarts
            reach = h + (1 if sd == big else math.ceil((y - v) / sd - 1e-12))
            below = 0 if reach < L else below + L
            if L > h:
                y = v if sd == big else max(v, y - sd * (L - h))
    return y0, hold0, rate, up


def _paint(n: int, starts, lens, vals, y0, hold0, rate, up) -> np.ndarray:
    """The runs' ramps painted onto the ``n`` ticks [W]."""
    j = np.arange(n) - np.repeat(starts, lens) + 1            # 1..L within a run
    ramp = np.maximum(j - np.repeat(hold0, lens), 0).astype(float)
    r = np.repeat(rate, lens)
    v = np.repeat(vals, lens)
    base = np.repeat(y0, lens)
    uu = np.repeat(up, lens)
    with np.errstate(invalid="ignore"):
        step = np.where(ramp > 0, r * ramp, 0.0)                # inf * 0 avoided
    return np.where(uu, np.minimum(base + step, v), np.maximum(base - step, v))


@register_lever
class Smoothing(Mitigation):
    """NVML power smoothing on every GPU of every job: a floor, ramp limits and a
    hysteresis (:class:`SmoothingProfile`; Blackwell or newer only)."""

    name = "smoothing"
    search_order = 10
    hardware = "Blackwell or newer GPUs (NVML power smoothing)"
    fields = tuple(f.name for f in fields(SmoothingProfile))
    job_stage = 1

    def is_on(self, opt) -> bool:
        return bool(opt.percent_tmp_floor or opt.ramp_up_rate_w_per_s
                    or opt.ramp_down_rate_w_per_s or opt.ramp_down_hysteresis_ms
                    or opt.secondary_power_floor_w)

    def profile(self, opt) -> SmoothingProfile:
        """The option's profile (its fields carry the profile's NVML names)."""
        return SmoothingProfile(**{f: getattr(opt, f) for f in self.fields})

    def label(self, opt) -> str:
        s = []
        if opt.percent_tmp_floor:
            s.append(f"floor {opt.percent_tmp_floor:g} % TMP")
        if opt.ramp_up_rate_w_per_s or opt.ramp_down_rate_w_per_s:
            s.append(f"ramp {opt.ramp_up_rate_w_per_s:g}/{opt.ramp_down_rate_w_per_s:g} W/s")
        if opt.ramp_down_hysteresis_ms:
            s.append(f"hysteresis {opt.ramp_down_hysteresis_ms:g} ms")
        if opt.secondary_power_floor_w:
            s.append(f"secondary floor {opt.secondary_power_floor_w:g} W")
        return "NVML power smoothing (" + ", ".join(s) + ")"

    def requires(self, opt) -> str:
        return self.hardware if self.is_on(opt) else ""

    def refuse(self, opt, gpu_model: str) -> str | None:
        if self.is_on(opt) and not smoothing_support(gpu_model)[0]:
            return f"{gpu_model} has no NVML power smoothing (Blackwell or newer)"
        return None

    def job_power(self, opt, power_w: np.ndarray, job) -> tuple[np.ndarray, float]:
        """The profile on the job's per-GPU power while it holds its GPUs (TMP taken as
        the TDP); the work delayed by the ramp-up limit, as a share of the power above
        idle, is the throughput lost."""
        if not self.is_on(opt):
            return power_w, 0.0
        act, hw = job.active, job.hardware
        y = self.profile(opt).apply(power_w, job.tick_s, hw.gpu_tdp_w, active=act)
        above = np.maximum(power_w - hw.gpu_idle_w, 0)[act].sum()
        deficit = np.maximum(power_w - y, 0)[act].sum()
        return y, (deficit / above if above > 0 else 0.0)
