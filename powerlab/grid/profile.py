"""Calibrate a job's power profile from measured telemetry.

:func:`fit_profile` estimates, from a trace in the canonical schema (GPU scope, e.g.
nvidia-smi at 100 ms, or node scope, e.g. MLPerf node AC power every 2 s):

- the step period, from the periodogram (:func:`scipy.signal.periodogram`, Hann
  window, zero-padded, linear detrend) of each device resampled onto a regular grid at
  its median sampling interval (real collectors' clocks jitter), averaged over devices,
  with parabolic refinement of the peak; with evaluation intervals, the period is then
  refined so that a whole number of steps fits the training time between evaluations;
- the compute and communication-wait levels and the duty cycle (compute share of a
  step), from a two-level (Otsu) split of each device's training samples: with sampling
  incommensurate with the step, the share of samples in the high level estimates the
  duty cycle and ``duty * high + (1 - duty) * low`` equals the measured mean;
- evaluation level, duration and interval, and the depths of the step dip and of the
  evaluation dip, when evaluation intervals are given (e.g. from ``read_mllog``).

Node-scope levels are turned into per-GPU levels with
``gpu_w = (node_w - node_overhead_w) / gpus_per_node``.

References
----------
.. [1] N. Otsu, "A threshold selection method from gray-level histograms",
   IEEE Trans. Systems, Man, and Cybernetics 9(1), 62-66, 1979.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import signal

from ..exceptions import PowerlabError, SchemaError, Violation

__all__ = ["ProfileFit", "eval_intervals", "fit_profile", "otsu_threshold"]


def otsu_threshold(values: np.ndarray, bins: int = 128) -> float:
    """Threshold that best splits ``values`` into two levels (Otsu's method)."""
    v = np.asarray(values, float)
    hist, edges = np.histogram(v, bins=bins)
    centers = 0.5 * (edges[1:] + edges[:-1])
    w0 = np.cumsum(hist)
    w1 = w0[-1] - w0
    m0 = np.cumsum(hist * centers)
    mu0 = m0 / np.maximum(w0, 1)
    mu1 = (m0[-1] - m0) / np.maximum(w1, 1)
    between = w0 * w1 * (mu0 - mu1) ** 2
    return float(edges[1:][np.argmax(between[:-1])]) if len(between) > 1 else float(v.mean())


def eval_intervals(events) -> pd.DataFrame:
    """Evaluation intervals (``start_utc``, ``stop_utc``) from MLLOG-style events.

    Parameters
    ----------
    events : DataFrame or object with ``.events``
        Rows with ``timestamp`` and ``key`` in ``eval_start`` / ``eval_stop`` (the
        ``events`` table of :func:`powerlab.iotools.read_mllog`), or already a frame with
        ``start_utc`` and ``stop_utc``.
    """
    ev = getattr(events, "events", events)
    if isinstance(ev, pd.DataFrame) and {"start_utc", "stop_utc"} <= set(ev.columns):
        return ev[["start_utc", "stop_utc"]].reset_index(drop=True)
    if not isinstance(ev, pd.DataFrame) or not {"timestamp", "key"} <= set(ev.columns):
        raise PowerlabError("events must be a frame with 'timestamp' and 'key' columns "
                            "(read_mllog(...).events) or with 'start_utc' and 'stop_utc'")
    starts = ev.loc[ev["key"] == "eval_start", "timestamp"].drop_duplicates().sort_values()
    stops = ev.loc[ev["key"] == "eval_stop", "timestamp"].drop_duplicates().sort_values()
    rows = []
    for s in starts:
        after = stops[stops > s]
        if len(after):
            rows.append((s, after.iloc[0]))
    return pd.DataFrame(rows, columns=["start_utc", "stop_utc"])


@dataclass
class ProfileFit:
    """A job power profile calibrated from telemetry (see :func:`fit_profile`).

    Attributes
    ----------
    scope : str
        ``'gpu'`` or ``'node'``: what the device-level numbers measure.
    devices : int
        Devices (GPUs or nodes) used.
    step_time_s : float
        Step period [s].
    compute_fraction : float
        Compute share of a step (duty cycle) [-].
    device_compute_w, device_comm_w, device_eval_w : float
        Median over devices of the device's levels [W] (``nan`` when unknown).
    compute_w, comm_w, eval_w : float
        The same per GPU [W].
    step_dip_depth_w, eval_dip_depth_w : float
        Device-level depth of the step dip (compute minus comm level) and of the
        evaluation dip (training mean minus evaluation level) [W].
    eval_duration_s, eval_interval_s : float
        Median evaluation length and training time between evaluations [s].
    node_overhead_w : float
        Node power besides the GPUs used for the per-GPU conversion [W].
    gpus_per_node : int
    periodogram : DataFrame
        ``period_s`` and periodogram ``power`` [W^2/Hz] averaged over devices.
    per_device : DataFrame
        Levels and duty cycle of each device.
    """

    scope: str
    devices: int
    step_time_s: float
    compute_fraction: float
    device_compute_w: float
    device_comm_w: float
    device_eval_w: float
    compute_w: float
    comm_w: float
    eval_w: float
    step_dip_depth_w: float
    eval_dip_depth_w: float
    eval_duration_s: float
    eval_interval_s: float
    node_overhead_w: float
    gpus_per_node: int
    device_train_mean_w: float
    periodogram: pd.DataFrame = field(repr=False)
    per_device: pd.DataFrame = field(repr=False)

    def job_kwargs(self) -> dict:
        """Scenario YAML fields of a job with this profile (``power``, ``eval`` ...)."""
        out = {"step_time_s": self.step_time_s, "compute_fraction": self.compute_fraction,
               "power": {"compute_w": self.compute_w, "comm_w": self.comm_w}}
        if np.isfinite(self.eval_w):
            out["power"]["eval_w"] = self.eval_w
            out["eval"] = {"interval_s": self.eval_interval_s,
                           "duration_s": self.eval_duration_s}
        return out

    def summary_frame(self) -> pd.DataFrame:
        """The fitted values as a one-column table with units."""
        rows = {
            "scope": (self.scope, ""), "devices": (self.devices, ""),
            "step_time_s": (self.step_time_s, "s"),
            "compute_fraction": (self.compute_fraction, "-"),
            "device_compute_w": (self.device_compute_w, "W"),
            "device_comm_w": (self.device_comm_w, "W"),
            "device_eval_w": (self.device_eval_w, "W"),
            "device_train_mean_w": (self.device_train_mean_w, "W"),
            "step_dip_depth_w": (self.step_dip_depth_w, "W"),
            "eval_dip_depth_w": (self.eval_dip_depth_w, "W"),
            "eval_duration_s": (self.eval_duration_s, "s"),
            "eval_interval_s": (self.eval_interval_s, "s (training time)"),
            "node_overhead_w": (self.node_overhead_w, "W"),
            "compute_w (per GPU)": (self.compute_w, "W"),
            "comm_w (per GPU)": (self.comm_w, "W"),
            "eval_w (per GPU)": (self.eval_w, "W"),
        }
        return pd.DataFrame({"value": [v for v, _ in rows.values()],
                             "unit": [u for _, u in rows.values()]}, index=list(rows))

    def summary(self) -> str:
        """Text summary of the fit."""
        return "Job power profile fit\n" + self.summary_frame().to_string()

    def _repr_html_(self) -> str:
        return "<h4>Job power profile fit</h4>" + self.summary_frame().to_html(
            float_format=lambda v: html.escape(f"{v:,.3f}"))


def fit_profile(telemetry: pd.DataFrame, *, events=None, scope: str | None = None,
                start=None, end=None, gpus_per_node: int = 8,
                node_overhead_w: float | None = None, gpu_idle_w: float = 75.0,
                period_range_s: tuple[float, float] = (2.0, 120.0),
                max_devices: int = 64) -> ProfileFit:
    """Calibrate job power levels, step period, duty cycle and dip depths from a trace.

    Parameters
    ----------
    telemetry : DataFrame
        Canonical telemetry (``timestamp``, ``host``, ``scope``, ``gpu_index``,
        ``power_w``) of one job, GPU or node scope.
    events : DataFrame or MLLogResult, optional
        Evaluation intervals (see :func:`eval_intervals`); without them the
        evaluation fields are ``nan`` and all samples count as training.
    scope : {'gpu', 'node'}, optional
        Which rows to use (required when both are present).
    start, end : str or Timestamp, optional
        Calibration window (UTC); samples outside are ignored.
    gpus_per_node : int, default 8
        For node scope: GPUs per node.
    node_overhead_w : float, optional
        For node scope: node power besides the GPUs [W].  Default: the median over nodes
        of their lowest reading minus ``gpus_per_node * gpu_idle_w`` (the lowest readings are
        the GPUs near idle during initialisation), at least 0.
    gpu_idle_w : float, default 75
        GPU idle power used by that default [W].
    period_range_s : (float, float)
        Step periods searched [s]; the upper frequency is also capped at half the median
        sampling rate.
    max_devices : int, default 64
        Devices used for the periodogram (cost control).

    Returns
    -------
    ProfileFit
    """
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
    if scope not in ("gpu", "node"):
        raise PowerlabError(f"scope must be 'gpu' or 'node', got {scope!r}")
    df = df[df["scope"] == scope]
    if start is not None:
        df = df[df["timestamp"] >= pd.Timestamp(start)]
    if end is not None:
        df = df[df["timestamp"] < pd.Timestamp(end)]
    df = df[df["power_w"].notna()]
    if len(df) < 20:
        raise PowerlabError(f"only {len(df)} {scope}-scope samples with power in the "
                            "window; fit_profile needs a trace of several steps")
    keys = ["host"] + (["gpu_index"] if scope == "gpu" and "gpu_index" in df else [])
    evi = eval_intervals(events) if events is not None else None
    t_ns = df["timestamp"].to_numpy("datetime64[ns]").astype(np.int64)
    in_eval = np.zeros(len(df), bool)
    if evi is not None and len(evi):
        s_ns = evi["start_utc"].to_numpy("datetime64[ns]").astype(np.int64)
        e_ns = evi["stop_utc"].to_numpy("datetime64[ns]").astype(np.int64)
        idx = np.searchsorted(s_ns, t_ns, side="right") - 1
        in_eval = (idx >= 0) & (t_ns < e_ns[np.clip(idx, 0, None)])
    work = pd.DataFrame({"t": t_ns, "p": df["power_w"].to_numpy(float), "ev": in_eval})
    work["dev"] = df.groupby(keys, sort=True, observed=True).ngroup().to_numpy()
    rows = []
    spectra = []
    dt_all = []
    for dev, g in work.groupby("dev", sort=True):
        g = g.sort_values("t")
        tr = g[~g["ev"]]
        if len(tr) < 10:
            continue
        p = tr["p"].to_numpy()
        thr = otsu_threshold(p)
        hi, lo = p[p > thr], p[p <= thr]
        ev_p = g.loc[g["ev"], "p"].to_numpy()
        rows.append({"dev": dev, "compute_w": np.median(hi), "comm_w": lo.mean(),
                     "duty": len(hi) / len(p), "train_mean_w": p.mean(),
                     "eval_w": np.median(ev_p) if len(ev_p) else np.nan,
                     "low_w": g["p"].min()})
        dt_all.append(np.median(np.diff(tr["t"].to_numpy())) / 1e9)
        if len(spectra) < max_devices:
            spectra.append((tr["t"].to_numpy(), p))
    if not rows:
        raise PowerlabError("no device has ten training samples in the window")
    per = pd.DataFrame(rows)
    dt = float(np.median(dt_all))
    f_hi = min(1.0 / period_range_s[0], 0.5 / dt)
    f_lo = 1.0 / period_range_s[1]
    if f_hi <= f_lo:
        raise PowerlabError(f"sampling every {dt:g} s cannot resolve periods in "
                            f"{period_range_s} s")
    # periodogram of each device resampled on a regular grid (sampling clocks jitter),
    # zero-padded for a fine frequency grid, averaged over devices
    t0 = min(t[0] for t, _ in spectra)
    t1 = max(t[-1] for t, _ in spectra)
    grid = np.arange(0.0, (t1 - t0) / 1e9, dt)
    nfft = int(2 ** np.ceil(np.log2(len(grid) * 16)))
    acc = None
    for t, p in spectra:
        y = np.interp(grid, (t - t0) / 1e9, p)
        f, pxx = signal.periodogram(y, fs=1.0 / dt, window="hann", nfft=nfft,
                                    detrend="linear")
        acc = pxx if acc is None else acc + pxx
    acc = acc / len(spectra)
    band = (f >= f_lo) & (f <= f_hi)
    freqs, acc = f[band], acc[band]
    k = int(np.argmax(acc))
    # parabolic refinement of the peak
    if 0 < k < len(freqs) - 1:
        a, b, c = acc[k - 1], acc[k], acc[k + 1]
        den = a - 2 * b + c
        shift = 0.5 * (a - c) / den if den != 0 else 0.0
        f_peak = freqs[k] + shift * (freqs[1] - freqs[0])
    else:
        f_peak = freqs[k]
    period = 1.0 / f_peak
    # evaluation timing
    ev_dur = ev_int = np.nan
    if evi is not None and len(evi):
        d = (evi["stop_utc"] - evi["start_utc"]).dt.total_seconds().to_numpy()
        ev_dur = float(np.median(d))
        if len(evi) > 1:
            gaps = (evi["start_utc"].iloc[1:].to_numpy() - evi["stop_utc"].iloc[:-1]
                    .to_numpy()) / np.timedelta64(1, "s")
            ev_int = float(np.median(gaps))
            # evaluations come after whole steps: refine the period to fit them
            n_steps = max(1, round(ev_int / period))
            period = ev_int / n_steps
    dc, dm, de = (float(np.median(per[c])) for c in ("compute_w", "comm_w", "eval_w")) \
        if per["eval_w"].notna().any() else (float(np.median(per["compute_w"])),
                                             float(np.median(per["comm_w"])), np.nan)
    duty = float(np.median(per["duty"]))
    train_mean = float(np.median(per["train_mean_w"]))
    if scope == "node":
        if node_overhead_w is None:
            node_overhead_w = max(0.0, float(np.median(per["low_w"]))
                                  - gpus_per_node * gpu_idle_w)
        conv = lambda v: (v - node_overhead_w) / gpus_per_node
    else:
        node_overhead_w = float(node_overhead_w or 0.0)
        conv = lambda v: v
    spec = pd.DataFrame({"period_s": 1.0 / freqs, "power": acc})
    return ProfileFit(
        scope=scope, devices=len(per), step_time_s=float(period), compute_fraction=duty,
        device_compute_w=dc, device_comm_w=dm, device_eval_w=de,
        compute_w=conv(dc), comm_w=conv(dm), eval_w=conv(de) if np.isfinite(de) else np.nan,
        step_dip_depth_w=dc - dm, eval_dip_depth_w=(train_mean - de) if np.isfinite(de)
        else np.nan, eval_duration_s=ev_dur, eval_interval_s=ev_int,
        node_overhead_w=float(node_overhead_w), gpus_per_node=gpus_per_node,
        device_train_mean_w=train_mean, periodogram=spec, per_device=per)
