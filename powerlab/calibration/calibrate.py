"""Calibrate a scenario job from a recording: :func:`calibrate_job`.

From one job's node (or GPU) power telemetry and, optionally, its training log, this
fits the job's power profile (:func:`powerlab.calibration.profile.fit_profile`: levels with
their uncertainty, step period, duty cycle, step dip, evaluations) and its start-up, and
turns it into a scenario ``jobs:`` entry plus the ``hardware:`` block it implies
(:meth:`Calibration.scenario_spec`, :meth:`Calibration.to_yaml`), commented with where
each number came from and what is a prior.  ``powerlab forecast`` runs the YAML unchanged:
it replays the recorded job (same start, duration, GPUs) through the calibrated model.

Rules (the same for every recording; nothing is tuned per workload)
------------------------------------------------------------------
- **Job start**: the log's ``run_start`` (else the first reading of the window).
- **Start-up**: from the job start until the mean power of the nodes that have reported
  first reaches 90 % of its median over the window (the job's training level); its
  level is each node's mean over it, averaged over the nodes that read in it (a node
  without a reading there does not make it NaN).  Shorter than one meter interval: no
  start-up.
- **Training**: ``fit_profile`` on the readings from the end of the start-up to the end
  of the window, with the log's evaluations inside the window; the meter interval is the
  readings' median spacing (``attrs["meter_interval_s"]`` of
  :func:`powerlab.iotools.read_mlperf_power`) unless given.
- **Evaluations too short for the meter** (no reading wholly inside one): their level is
  the mean of the readings that overlap them, which is what the meter shows of them.
- **Readings repaired, each said in a note**: byte-identical node logs (the reader names
  them) keep one copy in the fit, the job still counts every node; meter dropouts (below
  10 % of the node's median) are dropped; node clock offsets beyond one meter interval
  and a power-log offset beyond 10 s are applied (:mod:`powerlab.calibration.alignment`).
- **Node power split** only with a GPU model (``gpu_model``: an MLPerf system
  description or the user's): from idle readings outside the run, else the model's
  prior (:mod:`powerlab.calibration.node_split`); without a model, per-GPU levels are
  the node's shares, ``node_overhead_w: 0``, and ``gpu_tdp_w`` is set just high enough
  for the shares to validate (it is then not a TDP).  :meth:`Calibration.notes` says so.
- **Phases of a real run** (:mod:`powerlab.calibration.phases`): the warm-up block, the
  first evaluation's offset and the end of the run (the final evaluation).
- **Periodic step**: claimed only when Fisher's exact g-test [1]_ on the periodogram of
  the summed training readings finds a line (p < 0.01), the fitted step has a dip
  (positive dip energy) and the window holds at least 8 steps; otherwise the step
  period, duty cycle and dip are not evidence of anything and the notes say so
  (``has_periodic_step``).  (Real power has more slow variation than white noise, so the
  g-test alone finds "lines" at periods of minutes.)
- **One-time costs** (:func:`~powerlab.calibration.profile.fit_profile`, *One-time costs*): with
  two or more evaluations in the window, the evaluation duration and level come from the
  evaluations after the first (the first may carry set-up); when the training after the
  first evaluation holds enough readings, the training levels come from there (the first
  block includes warm-up).  The start-up is still measured from the first block.  The
  YAML comments say where a rule applied.
- **A single evaluation** in the window: the evaluation interval is the training time
  before it (from the end of the start-up or of the previous evaluation), a prior that
  evaluations are periodic; the source says so.

References
----------
.. [1] R. A. Fisher, "Tests of significance in harmonic analysis", Proc. Royal Society
   A 125, 54-59, 1929.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
from scipy import signal

from .._options import Options
from ..exceptions import AnalysisError, PowerlabError
from .alignment import Alignment, align_recording
from .calibrated_job import Calibration, HardwareInfo, param_source
from .meter import sum_meters
from .node_split import idle_level, node_split, prior_for
from .phases import run_phases
from .profile import fit_profile
from .profile_fit import Prior
from .windows import eval_intervals

__all__ = ["CalibrateOptions", "Calibration", "calibrate_job", "drop_dropouts",
           "fisher_g_test", "run_window", "summed_readings"]

#: Fraction of the training level at which the start-up ends [-].
STARTUP_LEVEL_FRACTION = 0.9
#: grid of the summed readings for the start-up [s]
_GRID_S = 0.1


def summed_readings(telemetry: pd.DataFrame, *, every_s: float = 0.1, start=None,
                    end=None) -> pd.Series:
    """Sum over devices of each device's last reading, on a ``every_s`` grid [W].

    What a SCADA adding the node meters shows (see :func:`powerlab.calibration.meter.sum_meters`,
    which this calls with one meter per host and GPU).
    """
    df = telemetry[["timestamp", "host", "power_w"]].copy()
    if "gpu_index" in telemetry and telemetry["gpu_index"].notna().any():
        df["host"] = (telemetry["host"].astype(str) + "/"
                      + telemetry["gpu_index"].astype("string").fillna(""))
    return sum_meters(df, every_s=every_s, start=start, end=end)


def fisher_g_test(x: np.ndarray) -> tuple[float, int]:
    """Fisher's exact test for a periodic component in an evenly sampled series.

    ``g = max_k I(f_k) / sum_k I(f_k)`` over the Fourier frequencies ``0 < f_k < 1/2``;
    under Gaussian white noise ``P(g > x) = sum_{j=1}^{b} (-1)^(j-1) C(m, j)
    (1 - j x)^(m-1)``, ``m`` the number of frequencies and ``b = floor(1/x)`` [1]_.

    Returns
    -------
    p_value : float
    k : int
        Index of the largest ordinate (frequency ``k / len(x)``).
    """
    x = np.asarray(x, float)
    x = signal.detrend(x[np.isfinite(x)])
    n = len(x)
    if n < 8:
        return 1.0, 0
    m = (n - 1) // 2
    i = np.abs(np.fft.rfft(x)[1:m + 1]) ** 2
    if i.sum() <= 0:
        return 1.0, 0
    g = float(i.max() / i.sum())
    b = math.floor(1.0 / g)
    p = 0.0
    for j in range(1, min(b, m) + 1):
        term = math.comb(m, j) * (1.0 - j * g) ** (m - 1)
        p += term if j % 2 else -term
        if term < 1e-300:
            break
    return float(min(max(p, 0.0), 1.0)), int(np.argmax(i)) + 1


def _run_bounds(events) -> tuple[pd.Timestamp | None, pd.Timestamp | None]:
    ev = getattr(events, "events", events)
    if not isinstance(ev, pd.DataFrame) or "key" not in ev:
        return None, None

    def first(key):
        s = ev.loc[ev["key"] == key, "timestamp"]
        return None if s.empty else s.min()

    return first("run_start"), first("run_stop")


def run_window(telemetry: pd.DataFrame, events=None, *, name: str = "the telemetry",
               events_source: str | None = None) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The run's window: ``run_start`` .. ``run_stop`` of the events where the readings
    cover them (within 30 s), else the readings' span.

    Raises
    ------
    AnalysisError
        The events do not overlap the readings: a log of another run.
    """
    t_lo, t_hi = telemetry["timestamp"].min(), telemetry["timestamp"].max()
    r0, r1 = _run_bounds(events)
    if events is not None:
        evi = eval_intervals(events)
        marks = [t for t in (r0, r1) if t is not None] + list(evi["start_utc"])
        if marks and (max(marks) < t_lo or min(marks) > t_hi):
            what = events_source or getattr(events, "path", None) or "the events log"
            raise AnalysisError(f"{what}: its events ({min(marks)} .. {max(marks)}) do not "
                                f"overlap the readings of {name} ({t_lo} .. {t_hi}): a log "
                                "of another run?")
    a = r0 if r0 is not None and r0 >= t_lo - pd.Timedelta(seconds=30) else t_lo
    b = r1 if r1 is not None and r1 <= t_hi + pd.Timedelta(seconds=30) else t_hi
    return a, b


@dataclasses.dataclass(frozen=True)
class CalibrateOptions(Options):
    """Options of :func:`calibrate_job`.

    Attributes
    ----------
    meter_interval_s : float, optional
        Interval of the readings [s]; default from ``telemetry.attrs["meter_interval_s"]``
        or the readings' median spacing.
    gpus_per_node : int, default 8
    source, events_source : str, optional
        Names of the recording and of the events log (error messages, YAML comments).
    training_start : timestamp, optional
        End of the start-up when known (several runs calibrated together); default:
        detected from the readings.
    gpu_model, gpu_model_source : str, optional
        The GPU model (an MLPerf system description's ``accelerator_model_name`` or the
        user's) and where it came from; it selects the hardware prior of the node split
        (:mod:`powerlab.calibration.node_split`).  None: unknown, node power not split.
    align : bool, default True
        Estimate (and, beyond one meter interval, apply) node clock offsets and the
        power log's offset against the training log (:mod:`powerlab.calibration.alignment`).
    """

    meter_interval_s: float | None = None
    gpus_per_node: int = 8
    source: str | None = None
    events_source: str | None = None
    training_start: object = None
    gpu_model: str | None = None
    gpu_model_source: str | None = None
    align: bool = True


def calibrate_job(telemetry: pd.DataFrame, *, events=None, start=None, end=None,
                  options: CalibrateOptions | None = None, **option_kw) -> Calibration:
    """Calibrate a scenario job (profile, start-up, evaluations, end of run, node split)
    from a recording.

    Parameters
    ----------
    telemetry : DataFrame
        Canonical node- (or GPU-) scope telemetry of one job.
    events : MLLogResult or DataFrame, optional
        The training log (``read_mllog``) or its events: ``run_start`` sets the job start
        and evaluations the eval timing; only evaluations inside the window are used.
    start, end : timestamp, optional
        Calibration window (UTC).  Default: ``run_start`` .. ``run_stop`` of the events,
        else the readings' span.
    options : CalibrateOptions, optional
    **option_kw
        Fields of :class:`CalibrateOptions` replacing those of ``options``
        (``calibrate_job(df, meter_interval_s=2.0)``).

    Returns
    -------
    Calibration

    Raises
    ------
    AnalysisError
        The events do not overlap the readings (a log of another run), or the window
        holds too few readings.
    """
    o = CalibrateOptions.from_kwargs(options, **option_kw)
    name = o.source or "the telemetry"
    df, scope = _job_rows(telemetry, name)
    check_span(df, name)
    df, dropped = _drop_identical(df, telemetry)
    df, n_out = drop_dropouts(df)
    r0, r1 = _run_bounds(events)
    job_start, job_end = run_window(df, events, name=name, events_source=o.events_source)
    w = _meter_interval(telemetry, df, scope, o.meter_interval_s, name)
    align = Alignment()
    if o.align and scope == "node":
        df, events, align = align_recording(df, events, job_start, job_end, w, name=name)
        if align.log_applied:
            r0, r1 = _run_bounds(events)
            job_start, job_end = run_window(df, events, name=name,
                                            events_source=o.events_source)
    job_start = pd.Timestamp(start) if start is not None else job_start
    job_end = pd.Timestamp(end) if end is not None else job_end
    _check_window(job_start, job_end, name)
    devices, t_train, startup_s, dev_startup = _startup(df, scope, job_start, job_end, w,
                                                        o.training_start, name)
    devices += len(dropped)   # identical logs: copies of real nodes, still nodes of the job
    fit = fit_profile(df, events=events, scope=scope, start=t_train, end=job_end,
                      gpus_per_node=o.gpus_per_node, meter_interval_s=w)
    p_value, halves = _periodic_step_test(df, events, t_train, job_end, w)
    dev_eval, eval_src = _eval_level(fit, df, events, t_train, job_end, w)
    fit, eval_interval_src = _single_eval_interval(fit, events, t_train, job_end)
    fit, hw = _hardware(fit, df, scope, o, r0, r1, w)
    phases = run_phases(fit, df, events, t_train, job_end, r1, w)
    sources = _sources(devices, scope, o.gpus_per_node, (job_start, job_end), (r0, r1))
    if eval_interval_src:
        sources["eval_interval_s"] = eval_interval_src
    data_notes = _data_notes(telemetry.attrs, dropped, devices, n_out)
    if not np.isfinite(dev_startup) and startup_s > 0:
        data_notes.append("no node has a reading inside the start-up: start-up dropped")
        startup_s, t_train = 0.0, job_start
    return Calibration(fit=fit, job_start=job_start, job_end=job_end,
                       training_start=t_train, startup_s=startup_s,
                       device_startup_w=dev_startup, devices=devices, meter_interval_s=w,
                       periodic_p_value=p_value, eval_source=eval_src,
                       device_eval_w=float(dev_eval), sources=sources, hw=hw,
                       phases=phases, alignment=align, data_notes=data_notes,
                       step_halves=halves)


#: A reading below this fraction of its node's median is a meter dropout [-].
DROPOUT_FRACTION = 0.1


#: The longest recording a calibration reads [s]: one job (hours to days).  Its grids
#: (0.1 s for the meters' sum, 0.5 s for the clock alignment) grow with the span, so a
#: log whose times span years (a corrupted clock) would allocate gigabytes.
MAX_SPAN_S = 31 * 86400.0


def check_span(df: pd.DataFrame, name: str) -> None:
    """Refuse readings spanning more than :data:`MAX_SPAN_S` (AnalysisError)."""
    if df.empty or "timestamp" not in df:
        return
    span_s = (df["timestamp"].max() - df["timestamp"].min()).total_seconds()
    if span_s > MAX_SPAN_S:
        raise AnalysisError(
            f"{name}: the readings span {span_s / 86400:,.0f} days "
            f"({df['timestamp'].min()} to {df['timestamp'].max()}); a calibration reads "
            f"one job's recording, at most {MAX_SPAN_S / 86400:.0f} days (a clock "
            "error or another log mixed in?)")


def _check_window(job_start, job_end, name: str) -> None:
    """Refuse an empty window, or one longer than :data:`MAX_SPAN_S`."""
    if job_end <= job_start:
        raise PowerlabError(f"{name}: the window {job_start} .. {job_end} is empty")
    if (job_end - job_start).total_seconds() > MAX_SPAN_S:
        raise AnalysisError(f"{name}: the window {job_start} .. {job_end} (start/end) is "
                            f"longer than {MAX_SPAN_S / 86400:.0f} days; a calibration "
                            "reads one job")


def drop_dropouts(df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The readings without meter dropouts (below :data:`DROPOUT_FRACTION` of their
    device's median: a powered node reading 1-24 W, as in a v4.0 SSD run), and how many
    were dropped."""
    keys = ["host"] + (["gpu_index"] if "gpu_index" in df and df["gpu_index"].notna().any()
                       else [])
    med = df.groupby(keys, observed=True)["power_w"].transform("median")
    bad = (df["power_w"] < DROPOUT_FRACTION * med).to_numpy()
    return (df[~bad], int(bad.sum())) if bad.any() else (df, 0)


def _data_notes(attrs: dict, dropped: list, devices: int, n_out: int) -> list:
    """What was dropped or repaired in the readings, in words (notes, YAML comments)."""
    out = []
    if dropped:
        out.append(f"identical node logs: {len(dropped)} copies dropped from the fit "
                   f"({', '.join(dropped[:6])}{' ...' if len(dropped) > 6 else ''}); the "
                   f"job still counts their nodes ({devices})")
    if n_out:
        out.append(f"meter dropouts: {n_out} readings below {DROPOUT_FRACTION:.0%} of their "
                   "node's median dropped (a powered node does not read near 0 W)")
    rep = attrs.get("repeated_readings") or {}
    n_rep = int(sum(v for v in rep.values() if isinstance(v, (int, float))))
    if n_rep:
        out.append(f"repeated polls: {n_rep} readings repeated at one instant, dropped or "
                   f"averaged by the reader ({sum(1 for v in rep.values() if v)} node logs)")
    bad = attrs.get("unreadable_files") or []
    if bad:
        out.append(f"unreadable logs left out: {', '.join(map(str, bad[:6]))}")
    iv = {k: v for k, v in (attrs.get("meter_interval_s") or {}).items()
          if isinstance(v, (int, float)) and np.isfinite(v)}
    if iv and max(iv.values()) > 1.5 * min(iv.values()):
        out.append(f"mixed meter intervals: {min(iv.values()):g} .. {max(iv.values()):g} s "
                   "between nodes; the median is used")
    return out


def _sources(devices, scope, gpn, window, run) -> dict:
    """Where the job's numbers come from (YAML comments)."""
    (a, b), (r0, r1) = window, run
    return {
        "gpus": f"{devices} {scope}s in the recording"
                + (f" x {gpn} GPUs (prior)" if scope == "node" else ""),
        "start_utc": "events: run_start" if a == r0 else "first reading",
        "duration_s": "window: run_start .. run_stop" if (a == r0 and b == r1)
        else "calibration window",
        "startup_s": f"measured: until summed power reaches {STARTUP_LEVEL_FRACTION:.0%} of "
                     "its median",
        "startup_w": f"measured: mean over the start-up, shared among {gpn} GPUs"
        if scope == "node" else "measured: mean over the start-up",
    }


def _drop_identical(df, telemetry) -> tuple[pd.DataFrame, list]:
    """The readings without the copies of byte-identical node logs (the reader names them
    in ``attrs["identical_logs"]``; the first of each group is kept) and the hosts
    dropped."""
    groups = telemetry.attrs.get("identical_logs") or []
    drop = [str(h) for g in groups for h in list(g)[1:]]
    if not drop:
        return df, []
    keep = ~df["host"].astype(str).isin(drop)
    if not keep.any():
        return df, []
    return df[keep], drop


def _hardware(fit, df, scope, o, r0, r1, w):
    """The fit with node power split when the GPU model is known, and the hardware facts
    the scenario carries (:class:`~powerlab.calibration.calibrated_job.HardwareInfo`)."""
    gpn = o.gpus_per_node
    idle = idle_level(df, r0, r1, w) if scope == "node" else None
    split = node_split(o.gpu_model, idle, gpn) if scope == "node" else None
    pr = prior_for(o.gpu_model)
    model_src = o.gpu_model_source or ("given" if o.gpu_model else
                                       "not given (no --gpu-model, no system description)")
    if split is None:
        idle_src = "no GPU model: no hardware prior"
        gpu_idle = (idle.node_idle_w / gpn if idle is not None else float("nan"))
        if idle is not None:
            idle_src = (f"idle readings: node idle {idle.node_idle_w:,.0f} W over {gpn} GPUs "
                        f"({idle.nodes} nodes with readings outside the run)")
        return fit, HardwareInfo(o.gpu_model, model_src, float("nan"), float("nan"), "",
                                 gpu_idle, idle_src, pr.tdp_w if pr else float("nan"))
    over, sd, gpu_idle, src = split
    try:
        fit = fit.with_split(Prior(over, sd, src))
    except AnalysisError as exc:   # the split contradicts the readings: none, said why
        return fit, HardwareInfo(o.gpu_model, model_src, float("nan"), float("nan"), "",
                                 float("nan"), f"split refused: {exc}", pr.tdp_w)
    return fit, HardwareInfo(o.gpu_model, model_src, over, sd, src, gpu_idle, src,
                             pr.tdp_w)


def _job_rows(telemetry, name) -> tuple[pd.DataFrame, str]:
    """The readings with power, of the node scope when there is one."""
    if not isinstance(telemetry, pd.DataFrame) or "power_w" not in telemetry:
        raise PowerlabError(f"{name}: no power readings")
    df = telemetry[telemetry["power_w"].notna()]
    if df.empty:
        raise PowerlabError(f"{name}: no power readings")
    scopes = df["scope"].dropna().unique().tolist()
    scope = "node" if "node" in scopes else str(scopes[0])
    return df[df["scope"] == scope], scope


def _meter_interval(telemetry, df, scope, meter_interval_s, name) -> float:
    """The readings' interval [s]: given, from ``attrs``, or each device's median
    spacing."""
    if meter_interval_s is None:
        iv = telemetry.attrs.get("meter_interval_s")
        if isinstance(iv, dict) and iv:
            meter_interval_s = float(np.median(list(iv.values())))
        else:  # the median spacing of each device's readings
            keys = ["host"] + (["gpu_index"] if scope == "gpu" else [])
            t = df.sort_values("timestamp").groupby(keys, observed=True)["timestamp"]
            meter_interval_s = float(np.nanmedian(t.diff().dt.total_seconds()))
    if not (np.isfinite(meter_interval_s) and meter_interval_s > 0):
        raise PowerlabError(f"{name}: cannot tell the readings' interval "
                            f"({meter_interval_s!r} s); give meter_interval_s")
    return float(meter_interval_s)


def _startup(df, scope, job_start, job_end, w, training_start, name):
    """Devices, the end of the start-up (summed power reaching
    ``STARTUP_LEVEL_FRACTION`` of its median), its length [s] and per-device level [W]."""
    inwin = df[(df["timestamp"] >= job_start) & (df["timestamp"] <= job_end)]
    if inwin["timestamp"].nunique() < 20:
        raise AnalysisError(f"{name}: only {inwin['timestamp'].nunique()} reading instants "
                            f"between {job_start} and {job_end}; a calibration needs "
                            "several steps")
    devices = int(df.groupby(["host"] + (["gpu_index"] if scope == "gpu" else []),
                             observed=True).ngroups)
    y = _mean_of_reporting(inwin, scope, job_start, job_end)
    level = float(np.nanmedian(y))
    t = y.index
    reached = np.flatnonzero(y.to_numpy() >= STARTUP_LEVEL_FRACTION * level)
    t_train = t[reached[0]] if len(reached) else t[0]
    if training_start is not None:
        t_train = pd.Timestamp(training_start)
    startup_s = max(0.0, (t_train - job_start).total_seconds())
    if startup_s < w:
        startup_s, t_train = 0.0, job_start
    # each node's mean over the start-up, averaged over the nodes that read in it (a
    # node whose clock or meter phase leaves it no reading there does not make it nan)
    dev_startup = np.nan
    if startup_s > 0:
        lo = job_start - pd.Timedelta(seconds=2 * w)
        su = df[(df["timestamp"] >= lo) & (df["timestamp"] <= t_train)]
        keys = ["host"] + (["gpu_index"] if scope == "gpu" else [])
        per = [float(np.nanmean(y)) for _, g in su.groupby(keys, observed=True)
               if len(y := sum_meters(g[["timestamp", "power_w"]].assign(host="m"),
                                      every_s=_GRID_S, start=job_start, end=t_train))
               and np.isfinite(y).any()]
        dev_startup = float(np.mean(per)) if per else np.nan
    return devices, t_train, startup_s, dev_startup


def _mean_of_reporting(inwin, scope, a, b) -> pd.Series:
    """Mean over the devices that have reported of each one's last reading, on the
    start-up grid: a node whose log starts late does not hide the start-up."""
    keys = ["host"] + (["gpu_index"] if scope == "gpu" else [])
    cols = [sum_meters(g[["timestamp", "power_w"]].assign(host="m"), every_s=_GRID_S,
                       start=a, end=b) for _, g in inwin.groupby(keys, observed=True)]
    return pd.concat(cols, axis=1).mean(axis=1, skipna=True).dropna()


def _periodic_step_test(df, events, t_train, job_end, w) -> tuple[float, tuple]:
    """Fisher's g-test on the summed training readings at the meter rate (evaluations
    and the two meter intervals after them left out): its p-value, and ``(p, period)`` of
    the test on each half of those readings (:attr:`Calibration.has_periodic_step`)."""
    yt = summed_readings(df[(df["timestamp"] >= t_train) & (df["timestamp"] <= job_end)],
                         every_s=max(w, _GRID_S))
    if events is not None:
        evi = eval_intervals(events)
        keep = np.ones(len(yt), bool)
        for a, b in zip(evi["start_utc"], evi["stop_utc"]):
            keep &= ~((yt.index >= a) & (yt.index < b + pd.Timedelta(seconds=2 * w)))
        yt = yt[keep]
    x = yt.to_numpy()
    dt = max(w, _GRID_S)
    halves = []
    for part in (x[:len(x) // 2], x[len(x) // 2:]):   # the step must show in both halves
        p_h, k = fisher_g_test(part)
        n = np.isfinite(part).sum()
        halves.append((float(p_h), float(n * dt / k) if k else float("nan")))
    return fisher_g_test(x)[0], tuple(halves)


def _eval_level(fit, df, events, t_train, job_end, w) -> tuple[float, str]:
    """Evaluation level: readings inside evaluations; for short ones, the overlapping
    ones."""
    dev_eval, eval_src = fit.device_eval_w, param_source(fit, "device_eval_w")
    if fit.evals_used and not np.isfinite(dev_eval):
        evi = eval_intervals(events)
        evi = evi[(evi["start_utc"] >= t_train) & (evi["stop_utc"] <= job_end)]
        first = len(evi) >= 2  # the first carries one-time set-up (see fit_profile)
        evi = evi.sort_values("start_utc").iloc[1:] if first else evi
        ts = df["timestamp"]
        over = np.zeros(len(df), bool)
        for a, b in zip(evi["start_utc"], evi["stop_utc"]):
            over |= ((ts > a) & (ts - pd.Timedelta(seconds=w) < b)).to_numpy()
        if over.any():
            dev_eval = float(df.loc[over].groupby("host", observed=True)["power_w"].mean()
                             .mean())
            eval_src = (f"overlapping readings ({int(over.sum())}): evaluations shorter "
                        "than the meter" + ("; those after the first (the first may carry "
                                            "set-up)" if first else ""))
    return dev_eval, eval_src


def _single_eval_interval(fit, events, t_train, job_end):
    """With one evaluation in the window, the training time before it as the evaluation
    interval (a prior: evaluations assumed periodic); the fit with it, and its source."""
    if events is None or fit.evals_used != 1 or np.isfinite(fit.eval_interval_s):
        return fit, None
    evi = eval_intervals(events)
    evi = evi[(evi["start_utc"] >= t_train) & (evi["stop_utc"] <= job_end)]
    before = eval_intervals(events)
    before = before[before["stop_utc"] <= evi["start_utc"].iloc[0]]
    origin = before["stop_utc"].max() if len(before) else t_train
    gap = (evi["start_utc"].iloc[0] - origin).total_seconds()
    if gap < fit.step_time_s:
        return fit, None
    src = ("prior: one evaluation in the window; the training time before it, assuming "
           "evaluations are periodic")
    return dataclasses.replace(fit, eval_interval_s=float(gap)), src
