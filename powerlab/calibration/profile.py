"""Calibrate a job's power profile from measured telemetry, claiming only what the data show.

:func:`fit_profile` estimates, from a trace in the canonical schema (GPU scope, e.g.
nvidia-smi at 100 ms, or node scope, e.g. MLPerf node AC power every 2 s):

- the step period, from the periodogram (:func:`scipy.signal.periodogram`, Hann window,
  zero-padded, linear detrend) of each device resampled onto a regular grid at its median
  sampling interval, averaged over devices, with parabolic refinement of the peak; with
  evaluation intervals, the period is refined so that a whole number of steps fits the
  training time between evaluations;
- the compute level, the training mean, and from them the **energy of the step dip**
  ``T * (compute - mean)`` [J per step]; the dip's duration and depth, when the readings
  can tell them apart (see *Meters* below).  For instantaneous samples the compute level
  is the median of the upper level of a two-level Otsu split of each device's training
  readings, the dip level the mean of the lower one and the duty cycle the share of
  samples in the upper one; through a meter, see below;
- evaluation level, duration and interval, and the depth of the evaluation dip, from the
  evaluation intervals inside the calibration window (e.g. from ``read_mllog``).  The
  evaluation level of a device is the **mean** of its readings inside evaluations: the
  forecast models an evaluation as one flat block, and only the mean gives that block the
  evaluation's energy (a real evaluation is not flat: in RetinaNet on B200 the GPUs idle
  at ~3.7 kW for ~20 s and are back near the training level for the last ~10 s before
  ``eval_stop``, where a median would keep only the idle part).

One-time costs (the same rule for every trace)
----------------------------------------------
A job's first evaluation may carry one-time set-up (building the evaluation graph, loading
and caching the evaluation data) and its first training block warm-up (clocks, caches and
temperatures settling, data loaders filling): neither recurs (in the MLPerf logs the
first RetinaNet evaluation on B200 lasts 39 s, the later ones 29-33 s; the first LoRA
block on H100 is ~5 % below the later ones).  Where there is no such cost, leaving the
first out only costs some data.  So

- with **two or more evaluations** in the window, the evaluation duration and level come
  from the evaluations **after the first**;
- with at least one evaluation in the window and :data:`MIN_LEVEL_READINGS` training
  readings of every device after the first evaluation's end (the later blocks are long
  enough to give a level), the training levels (training mean, compute level, dip
  level) come from the training **after the first evaluation**.  The first block still
  gives the step's shape (period from the periodogram, duty cycle) and, in
  :func:`~powerlab.calibration.calibrate.calibrate_job`, the start-up.

The parameter table's ``source`` column says when a rule applied.

Every level is the mean over devices with its standard error (spread across devices,
``sd / sqrt(n)``) and a confidence interval (Student t); :meth:`ProfileFit.summary_frame`
lists them with their unit and where each number comes from.

Node power and the GPUs
-----------------------
A node meter measures GPUs and everything else together; :func:`fit_profile` splits node
power into a per-GPU part and a constant non-GPU part **only from evidence**
(``node_overhead_w`` as hardware data or a :class:`Prior`, or ``idle`` periods), else it
keeps node-level levels: the rules are in :mod:`powerlab.calibration.profile_fit`.

Meters
------
Node meters often report interval averages (``meter_interval_s``; 2 s for the MLPerf
logs, see :mod:`powerlab.calibration.meter`).  Averaging keeps the training mean and the
compute level (the compute phase is much longer than the interval) but blurs a step dip
shorter than the interval into one of the same energy ``A``, ``W + D`` seconds wide
(:mod:`powerlab.calibration.step_shape`).  Then:

- when the dip seen by the meter is clearly longer than the interval (at least
  1.5 ``W``), its duration is measured;
- otherwise ``dip_duration_s`` (hardware data or a prior) sets it, or, without it, the
  fit takes ``D = W``: the longest, shallowest dip the readings allow, so the step dip
  depth is a **lower bound** (source ``'bound'``, no standard error).

The dip is located by a least-squares fit of the metered two-level step to the training
readings folded on the steps (:func:`~powerlab.calibration.step_shape.fold_dip`, which
also gives each device's compute level); the dip level follows from the energy:
``compute - A / D``.

References
----------
.. [1] N. Otsu, "A threshold selection method from gray-level histograms",
   IEEE Trans. Systems, Man, and Cybernetics 9(1), 62-66, 1979.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._options import Options, choice
from ..exceptions import AnalysisError, PowerlabError, SchemaError, Violation
from ..telemetry.timeutil import to_epoch_ns
from .profile_fit import (
    GPU_IDLE_PRIOR,
    Prior,
    ProfileFit,
    apply_split,
    as_prior,
    param_rows,
    split_label,
)
from .step_shape import otsu_threshold, step_dip, step_period
from .windows import eval_intervals, inside, intervals, overlaps

__all__ = ["GPU_IDLE_PRIOR", "Prior", "ProfileFit", "ProfileOptions", "eval_intervals",
           "fit_profile", "otsu_threshold"]  # results re-exported from profile_fit


#: Training readings every device must have after the first evaluation for the training
#: levels to come from there (the minimum :func:`fit_profile` asks of any device) [-].
MIN_LEVEL_READINGS = 10


# --------------------------------------------------------------------------- helpers
def _stat(values) -> tuple[float, float, int]:
    """Mean over devices, its standard error (``sd / sqrt(n)``) and ``n``."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    n = len(v)
    if n == 0:
        return np.nan, np.nan, 0
    se = float(v.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
    return float(v.mean()), se, n


# --------------------------------------------------------------------------- the fit


@dataclass(frozen=True)
class ProfileOptions(Options):
    """Options of :func:`fit_profile` (and :func:`~powerlab.calibration.calibrate.calibrate_job`):
    the meter, the evidence that splits node power, and the search.

    Parameters
    ----------
    gpus_per_node : int, default 8
        For node scope: GPUs per node [-].
    meter_interval_s : float, optional
        The readings are means over this interval (2 for the MLPerf node logs) [s];
        default: instantaneous samples.
    node_overhead_w : float or Prior, optional
        Node power besides the GPUs: a number is hardware data (exact), a :class:`Prior`
        carries its uncertainty into the per-GPU levels [W].
    gpu_idle_w : float or Prior, default GPU_IDLE_PRIOR (75 +- 25 W)
        GPU idle power, used with ``idle`` only [W].
    dip_duration_s : float or Prior, optional
        Duration of the step dip when the meter cannot resolve it [s].
    period_range_s : (float, float)
        Step periods searched [s]; the upper frequency is also capped at half the median
        sampling rate.
    max_devices : int, default 64
        Devices used for the periodogram (cost control) [-].
    alpha : float, default 0.05
        Confidence intervals are ``1 - alpha`` [-].
    """

    gpus_per_node: int = 8
    meter_interval_s: float | None = None
    node_overhead_w: float | Prior | None = None
    gpu_idle_w: float | Prior = GPU_IDLE_PRIOR
    dip_duration_s: float | Prior | None = None
    period_range_s: tuple[float, float] = (2.0, 120.0)
    max_devices: int = 64
    alpha: float = 0.05


@dataclass
class _ProfileWork:
    """What the steps of :func:`fit_profile` read and write."""

    opts: ProfileOptions
    scope: str = ""
    w_s: float = 0.0
    overhead_prior: Prior | None = None
    idle_prior: Prior | None = None
    dip_prior: Prior | None = None
    df: pd.DataFrame = None
    lo_ns: int = 0
    hi_ns: int = 0
    ev_s: np.ndarray = None
    ev_e: np.ndarray = None
    evi: pd.DataFrame | None = None
    per: pd.DataFrame = None
    dt: float = 0.0
    samples: list = field(default_factory=list)
    spectra: list = field(default_factory=list)
    period: float = np.nan
    period_se: float = np.nan
    period_src: str = ""
    freqs: np.ndarray = None
    acc: np.ndarray = None
    n_ev: int = 0
    ev_dur: float = np.nan
    ev_dur_se: float = np.nan
    ev_int: float = np.nan
    ev_int_se: float = np.nan
    dip_src: str = ""
    dip_sd: float = 0.0
    center: float = np.nan
    late_levels: bool = False


def fit_profile(telemetry: pd.DataFrame, *, events=None, scope: str | None = None,
                start=None, end=None, idle=None, options: ProfileOptions | None = None,
                **option_kw) -> ProfileFit:
    """Calibrate job power levels, step period, duty cycle and dip depths from a trace.

    A chain of named steps: the rows in the window, readings marked as training,
    evaluation or idle, each device's levels, the step period (periodogram), the
    evaluations' timing (which refines the period), the step dip, the parameter table,
    and the GPU / non-GPU split of node power when there is evidence for one.

    Parameters
    ----------
    telemetry : DataFrame
        Canonical telemetry (``timestamp``, ``host``, ``scope``, ``gpu_index``,
        ``power_w``) of one job, GPU or node scope.
    events : DataFrame or MLLogResult, optional
        Evaluation intervals (see :func:`eval_intervals`).  Only evaluations that start
        and end inside the calibration window are used for timing and levels, so a log
        of the whole run can be passed without its future leaking into the fit; without
        events the evaluation fields are ``nan`` and all readings count as training.
    scope : {'gpu', 'node'}, optional
        Which rows to use (required when both are present).
    start, end : str or Timestamp, optional
        Calibration window (UTC); readings (and, with a meter, their whole averaging
        interval) outside are ignored.
    idle : sequence of (start, end) or DataFrame, optional
        Periods (UTC) when the nodes ran no job: their readings give the node idle level,
        and ``node_overhead = node_idle - gpus_per_node * gpu_idle_w``.
    options : ProfileOptions, optional
        ``gpus_per_node``, ``meter_interval_s``, ``node_overhead_w``, ``gpu_idle_w``,
        ``dip_duration_s``, ``period_range_s``, ``max_devices``, ``alpha`` (see
        :class:`ProfileOptions`); default: the defaults.
    **option_kw
        Fields of :class:`ProfileOptions` replacing those of ``options``
        (``fit_profile(df, meter_interval_s=2.0)``).

    Returns
    -------
    ProfileFit

    Raises
    ------
    SchemaError
        Columns missing.
    PowerlabError
        Bad arguments, too few readings.
    AnalysisError
        Evidence that contradicts the data (a non-GPU power above the lowest reading) or
        idle periods without readings.
    """
    w = _ProfileWork(opts=ProfileOptions.from_kwargs(options, **option_kw))
    _select_rows(w, telemetry, scope, start, end, idle)
    marks = _mark_readings(w, events, idle, start, end)
    _after_first_eval(w, marks, start)
    _device_levels(w, marks, start)
    _step_period(w)
    _eval_timing(w)
    _step_dip(w)
    fit, rows_p, node_idle = _profile_table(w, idle)
    if w.scope == "node" and w.overhead_prior is not None:
        return apply_split(fit, w.overhead_prior.mean, w.overhead_prior.sd,
                            split_label(w.overhead_prior), np.nan)
    if idle is not None:
        g, idle_prior = w.opts.gpus_per_node, w.idle_prior
        overhead = node_idle - g * idle_prior.mean
        sd = float(np.hypot(np.nan_to_num(rows_p["node_idle_w"][1]), g * idle_prior.sd))
        label = f"idle periods (node idle measured; GPU idle {split_label(idle_prior)})"
        return apply_split(fit, overhead, sd, label, node_idle)
    return fit


def _select_rows(w: _ProfileWork, telemetry, scope, start, end, idle) -> None:
    """Check the arguments; the scope's rows with power inside the window."""
    need = ["timestamp", "host", "scope", "power_w"]
    miss = [c for c in need if c not in telemetry.columns]
    if miss:
        raise SchemaError([Violation(c, "required by fit_profile") for c in miss])
    df = telemetry
    scopes = df["scope"].dropna().unique().tolist()
    if scope is None:
        if len(scopes) != 1:
            raise PowerlabError(f"telemetry holds scopes {scopes}; pass scope='gpu' or "
                                "scope='node'")
        scope = str(scopes[0])
    choice(scope, "scope", ("gpu", "node"), error=PowerlabError)
    o = w.opts
    w.w_s = w_s = float(o.meter_interval_s or 0.0)
    if not (np.isfinite(w_s) and w_s >= 0):
        raise PowerlabError(f"meter_interval_s must be >= 0 seconds, got "
                            f"{o.meter_interval_s!r}")
    if not 0 < o.alpha < 1:
        raise PowerlabError(f"alpha must be in (0, 1), got {o.alpha!r}")
    w.overhead_prior = as_prior(o.node_overhead_w, "node_overhead_w", "hardware data")
    w.idle_prior = as_prior(o.gpu_idle_w, "gpu_idle_w", "hardware data")
    w.dip_prior = as_prior(o.dip_duration_s, "dip_duration_s", "hardware data")
    if w.overhead_prior is not None and idle is not None:
        raise PowerlabError("give either node_overhead_w or idle periods, not both")
    if scope == "gpu" and (w.overhead_prior is not None or idle is not None):
        raise PowerlabError("GPU-scope telemetry needs no split: node_overhead_w and idle "
                            "apply to node scope")
    df = df[df["scope"] == scope]
    if start is not None:
        df = df[df["timestamp"] >= pd.Timestamp(start)]
    if end is not None:
        df = df[df["timestamp"] < pd.Timestamp(end)]
    df = df[df["power_w"].notna()]
    if len(df) < 20:
        raise PowerlabError(f"only {len(df)} {scope}-scope samples with power in the "
                            "window; fit_profile needs a trace of several steps")
    w.df, w.scope = df, scope


def _mark_readings(w: _ProfileWork, events, idle, start, end) -> pd.DataFrame:
    """Each reading marked as training, evaluation or idle, with its device number;
    evaluations wholly inside the window kept for their timing."""
    df, w_s = w.df, w.w_s
    keys = ["host"] + (["gpu_index"] if w.scope == "gpu" and "gpu_index" in df else [])
    t_ns = to_epoch_ns(df["timestamp"])
    w_ns = round(w_s * 1e9)
    w.lo_ns = lo_ns = pd.Timestamp(start).value if start is not None else int(t_ns.min())
    w.hi_ns = hi_ns = pd.Timestamp(end).value if end is not None else int(t_ns.max()) + 1
    # evaluations: all mark readings; only those wholly inside the window are used
    ev_s = ev_e = np.zeros(0, np.int64)
    if events is not None:
        evi = eval_intervals(events)
        if len(evi):
            ev_s, ev_e = intervals(evi, "events")
        whole = (ev_s >= lo_ns) & (ev_e <= hi_ns)
        w.evi = pd.DataFrame({"start_utc": pd.to_datetime(ev_s[whole], utc=True),
                              "stop_utc": pd.to_datetime(ev_e[whole], utc=True)})
    w.ev_s, w.ev_e = ev_s, ev_e
    id_s, id_e = intervals(idle, "idle") if idle is not None else (ev_s[:0], ev_e[:0])
    train = ~overlaps(t_ns, w_ns, ev_s, ev_e) & ~overlaps(t_ns, w_ns, id_s, id_e)
    marks = pd.DataFrame({"t": t_ns, "p": df["power_w"].to_numpy(float),
                          "tr": train, "ev": inside(t_ns, w_ns, ev_s, ev_e),
                          "idle": inside(t_ns, w_ns, id_s, id_e),
                          "first_ok": t_ns - w_ns >= (lo_ns if start is not None
                                                      else -(2 ** 62))})
    marks["dev"] = df.groupby(keys, sort=True, observed=True).ngroup().to_numpy()
    return marks


def _after_first_eval(w: _ProfileWork, marks: pd.DataFrame, start) -> None:
    """Which readings give the levels (see *One-time costs*): ``lvl`` the training
    readings after the first evaluation when every device has :data:`MIN_LEVEL_READINGS`
    of them, else all training readings; ``ev_lvl`` the readings inside evaluations after
    the first when the window holds two or more, else inside any."""
    marks["lvl"], marks["ev_lvl"] = marks["tr"], marks["ev"]
    if w.evi is None or not len(w.evi):
        return
    w_ns = round(w.w_s * 1e9)
    after = (marks["t"] - w_ns >= w.evi["stop_utc"].iloc[0].value).to_numpy()
    if len(w.evi) >= 2:
        marks["ev_lvl"] = marks["ev"] & after
    usable = marks["tr"] & (marks["first_ok"] if start is not None else True)
    n_tr = usable.groupby(marks["dev"]).sum()
    n_late = (usable & after).groupby(marks["dev"]).sum()
    counted = n_tr >= MIN_LEVEL_READINGS  # the devices that give levels at all
    if counted.any() and n_late[counted].min() >= MIN_LEVEL_READINGS:
        w.late_levels = True
        marks["lvl"] = marks["tr"] & after


def _device_levels(w: _ProfileWork, marks: pd.DataFrame, start) -> None:
    """Per device: compute level (Otsu upper level), training mean, duty, evaluation and
    idle levels; its training samples for the periodogram and the dip."""
    w_ns = round(w.w_s * 1e9)
    first_ok = marks["first_ok"].to_numpy()
    rows, dt_all = [], []
    for dev, g in marks.groupby("dev", sort=True):
        g = g.sort_values("t")
        # a meter's first reading averages time before the trace: not usable
        ok = g["tr"].to_numpy() & (first_ok[g.index] if start is not None
                                   else g["t"].to_numpy() - w_ns >= g["t"].iloc[0])
        tr = g[ok]
        if len(tr) < 10:
            continue
        p = tr.loc[tr["lvl"], "p"].to_numpy()  # the levels: see _after_first_eval
        thr = otsu_threshold(p)
        hi, lo = p[p > thr], p[p <= thr]
        # the duty is the step's shape, not a level: from all training readings
        p_all = tr["p"].to_numpy()
        duty = float(np.mean(p_all > otsu_threshold(p_all)))
        ev_p = g.loc[g["ev_lvl"], "p"].to_numpy()
        id_p = g.loc[g["idle"], "p"].to_numpy()
        rows.append({"dev": dev, "compute_w": np.median(hi), "low_cluster_w": lo.mean(),
                     "duty_raw": duty, "train_mean_w": p.mean(),
                     "eval_w": ev_p.mean() if len(ev_p) else np.nan,
                     "idle_w": np.median(id_p) if len(id_p) else np.nan,
                     "lowest_w": g["p"].min()})
        dt_all.append(np.median(np.diff(tr["t"].to_numpy())) / 1e9)
        w.samples.append((tr["t"].to_numpy(), tr["p"].to_numpy()))
        if len(w.spectra) < w.opts.max_devices:
            w.spectra.append(w.samples[-1])
    if not rows:
        raise PowerlabError("no device has ten training samples in the window")
    w.per = pd.DataFrame(rows)
    w.dt = float(np.median(dt_all))


def _step_period(w: _ProfileWork) -> None:
    """The step period from the periodogram (:func:`step_period`) and its spread over
    devices."""
    w.period, peaks, w.freqs, w.acc = step_period(w.spectra, w.dt, w.opts.period_range_s)
    w.period_se = _stat(peaks)[1]
    w.period_src = f"periodogram ({len(w.spectra)} devices)"


def _eval_timing(w: _ProfileWork) -> None:
    """Evaluation duration and interval from the evaluations inside the window; the
    period refined so that whole steps fit between them."""
    evi = w.evi
    w.n_ev = n_ev = 0 if evi is None else len(evi)
    if not n_ev:
        return
    d = (evi["stop_utc"] - evi["start_utc"]).dt.total_seconds().to_numpy()
    d = d[1:] if n_ev >= 2 else d  # the first carries one-time set-up
    w.ev_dur, w.ev_dur_se = float(np.median(d)), _stat(d)[1]
    if n_ev > 1:
        gaps = (evi["start_utc"].iloc[1:].to_numpy() - evi["stop_utc"].iloc[:-1]
                .to_numpy()) / np.timedelta64(1, "s")
        w.ev_int, w.ev_int_se = float(np.median(gaps)), _stat(gaps)[1]
        # evaluations come after whole steps: refine the period to fit them
        n_steps = max(1, round(w.ev_int / w.period))
        w.period = w.ev_int / n_steps
        w.period_se = w.ev_int_se / n_steps
        w.period_src = f"{n_steps} steps between evaluations ({n_ev} evaluations)"


def _step_dip(w: _ProfileWork) -> None:
    """The step dip (:func:`~powerlab.calibration.step_shape.step_dip`), the steps counted
    from the ends of the evaluations before the window's end."""
    ev_e = w.ev_e
    origins = ev_e[ev_e <= w.hi_ns] if len(ev_e) else np.zeros(0, np.int64)
    try:
        cols, w.dip_src, w.dip_sd, w.center = step_dip(w.per, w.samples, w.period, w.w_s,
                                                       w.dip_prior, origins)
    except AnalysisError as exc:   # e.g. too few readings after an evaluation: no dip
        m = w.per["train_mean_w"]
        cols = {"compute_w": m, "dip_energy_j": 0.0 * m, "comm_w": m, "duty": 1.0 + 0 * m}
        w.dip_src, w.dip_sd, w.center = f"not measured ({exc})", np.nan, 0.0
    for name, values in cols.items():
        w.per[name] = values


def _profile_table(w: _ProfileWork, idle) -> tuple[ProfileFit, dict, float]:
    """Levels over devices with their errors, the parameter rows and the fit (before
    any split); the node idle level from the idle periods."""
    per, scope = w.per, w.scope
    rows_p = {**_step_rows(w), **_eval_rows(w)}
    lowest = float(np.median(per["lowest_w"]))
    if scope == "node":
        rows_p["node_lowest_w"] = (lowest, np.nan, "measured: upper bound on non-GPU power",
                                   np.inf)
    node_idle = np.nan
    if idle is not None:
        node_idle, idle_se, n_id = _stat(per["idle_w"])
        if n_id == 0:
            raise AnalysisError("no reading lies wholly inside the idle periods given")
        rows_p["node_idle_w"] = (node_idle, idle_se, f"idle periods ({n_id} nodes)",
                                 max(n_id - 1, 0))
    fit = _unsplit_fit(w, rows_p, lowest)
    # the parameter table reads the fit's fields: built from them, then set in a copy
    fit = dataclasses.replace(fit, params=param_rows(fit, rows_p))
    return fit, rows_p, node_idle


def _level_source(w: _ProfileWork) -> tuple[str, str, str]:
    """Where the levels come from: measured over the devices, with the one-time-cost
    rules (module doc) said where they applied (training levels, evaluation levels)."""
    meas = f"measured ({len(w.per)} devices)"
    lvl = (meas + ", training after the first evaluation (the first block may include "
           "warm-up)") if w.late_levels else meas
    ev_meas = (meas + ", evaluations after the first (the first may carry set-up)"
               if w.n_ev >= 2 else meas)
    return meas, lvl, ev_meas


def _step_rows(w: _ProfileWork) -> dict:
    """Parameter rows of the step: period, duty, levels, the dip's energy, centre and
    depth (value, standard error, source, degrees of freedom)."""
    per, period, w_s, dip_src = w.per, w.period, w.w_s, w.dip_src
    meas, lvl, _ = _level_source(w)
    c, c_se, _ = _stat(per["compute_w"])
    m, m_se, _ = _stat(per["comm_w"])
    u, u_se, _ = _stat(per["duty"])
    a, a_se, _ = _stat(per["dip_energy_j"])
    if dip_src == "bound" or dip_src.startswith("not measured"):
        m_se = u_se = np.nan
    elif w_s > 0 and dip_src != "measured":
        dur = (1.0 - u) * period
        m_se = float(np.hypot(m_se, a / dur ** 2 * w.dip_sd))
        u_se = w.dip_sd / period
    dof = len(per) - 1
    center = w.center
    return {
        "step_time_s": (period, w.period_se, w.period_src, np.inf),
        "compute_fraction": (u, u_se, f"dip duration {dip_src}"
                             if w_s > 0 else lvl, dof),
        "device_compute_w": (c, c_se, lvl, dof),
        "device_comm_w": (m, m_se, f"compute level - dip energy / dip duration ({dip_src})"
                          if w_s > 0 else lvl, dof),
        "device_train_mean_w": (*_stat(per["train_mean_w"])[:2], lvl, dof),
        "step_dip_energy_j": (a, a_se, lvl, dof),
        "step_dip_center_s": (center, np.nan, "fit of the metered steps after evaluations"
                              if np.isfinite(center) else "no evaluation to count steps from",
                              np.inf),
        "step_dip_depth_w": (c - m, m_se if dip_src != "measured" or w_s == 0 else
                             _stat(per["compute_w"] - per["comm_w"])[1],
                             "bound (lower)" if dip_src == "bound" else meas, dof),
    }


def _eval_rows(w: _ProfileWork) -> dict:
    """Parameter rows of the evaluations: level, dip depth, duration and interval."""
    per = w.per
    _, _, ev_meas = _level_source(w)
    dof = len(per) - 1
    has_ev = per["eval_w"].notna().any()
    ev_w, ev_w_se, _ = _stat(per["eval_w"])
    return {
        "device_eval_w": (ev_w, ev_w_se, ev_meas if has_ev else "no evaluations", dof),
        "eval_dip_depth_w": (*_stat(per["train_mean_w"] - per["eval_w"])[:2],
                             ev_meas if has_ev else "no evaluations", dof),
        "eval_duration_s": (w.ev_dur, w.ev_dur_se, f"events ({w.n_ev} in the window"
                            + ("; those after the first: the first may carry set-up)"
                               if w.n_ev >= 2 else ")"), np.inf),
        "eval_interval_s": (w.ev_int, w.ev_int_se,
                            "events: training time between evaluations", np.inf),
    }


def _unsplit_fit(w: _ProfileWork, rows_p: dict, lowest: float) -> ProfileFit:
    """The fit's fields from the parameter rows, node power not split (an empty
    parameter table)."""
    per, scope, w_s = w.per, w.scope, w.w_s
    c, m = rows_p["device_compute_w"][0], rows_p["device_comm_w"][0]
    u, a = rows_p["compute_fraction"][0], rows_p["step_dip_energy_j"][0]
    has_ev = per["eval_w"].notna().any()
    ev_w = rows_p["device_eval_w"][0]
    gpu = scope == "gpu"
    return ProfileFit(
        scope=scope, devices=len(per), step_time_s=float(w.period), compute_fraction=u,
        device_compute_w=c, device_comm_w=m, device_eval_w=ev_w if has_ev else np.nan,
        device_train_mean_w=rows_p["device_train_mean_w"][0],
        compute_w=c if gpu else np.nan, comm_w=m if gpu else np.nan,
        eval_w=(ev_w if has_ev else np.nan) if gpu else np.nan,
        step_dip_depth_w=c - m, eval_dip_depth_w=rows_p["eval_dip_depth_w"][0],
        step_dip_energy_j=a, eval_duration_s=w.ev_dur, eval_interval_s=w.ev_int,
        node_overhead_w=0.0 if gpu else np.nan,
        node_overhead_sd_w=0.0 if gpu else np.nan,
        split="gpu telemetry" if gpu else "none",
        node_lowest_w=lowest if scope == "node" else np.nan, meter_interval_s=w_s,
        dip_source=w.dip_src, evals_used=w.n_ev, step_dip_center_s=w.center,
        gpus_per_node=w.opts.gpus_per_node, alpha=w.opts.alpha,
        params=pd.DataFrame(), periodogram=pd.DataFrame(
            {"period_s": 1.0 / w.freqs, "power": w.acc}), per_device=per)
