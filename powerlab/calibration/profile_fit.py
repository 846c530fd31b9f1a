"""Results of :func:`powerlab.calibration.profile.fit_profile`: the fitted profile, its
uncertainties, and the evidence for splitting node power into GPU and non-GPU parts.

:class:`ProfileFit` holds every fitted quantity with its standard error and where it
comes from (``summary_frame()``); :class:`Prior` is a number known from outside the data
with its uncertainty (a node's non-GPU power, a GPU's idle power, a dip's duration).

Node power and the GPUs
-----------------------
A node meter measures GPUs and everything else (CPUs, memory, NICs, fans, PSU losses)
together.  :func:`~powerlab.calibration.profile.fit_profile` splits node power into a
per-GPU part and a constant non-GPU part **only from evidence**:

- ``node_overhead_w=<float>``: hardware data (a BMC or PDU reading of the node without
  its GPUs, a vendor figure you trust): taken as exact;
- ``node_overhead_w=Prior(mean, sd, source)``: a prior, whose uncertainty is carried into
  the per-GPU levels;
- ``idle=[(start, end), ...]``: periods in which the nodes ran no job; the node idle
  level is measured there and ``node_overhead = node_idle - gpus_per_node * gpu_idle``
  with ``gpu_idle_w`` (hardware data or a prior).

Without any of these the fit keeps **node-level levels** (per-GPU levels are ``nan``;
:meth:`ProfileFit.job_kwargs` then shares node power equally among the node's GPUs, with
no node overhead, which reproduces node power while the job runs but says nothing about
a node's idle power).  A node's lowest reading is *not* evidence of its idle power: in
the MLPerf GPT-3 log it is a transient at an evaluation's start (4.3 kW in the first half
of the run, 5.2 kW in the second, median over nodes).  It is reported (``node_lowest_w``)
as an upper bound on the non-GPU part.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from .._summary import Results, Summary
from ..exceptions import AnalysisError, PowerlabError

__all__ = ["GPU_IDLE_PRIOR", "Prior", "ProfileFit"]


@dataclass(frozen=True)
class Prior:
    """A number known from outside the data, with its uncertainty.

    Attributes
    ----------
    mean : float
        Best value, in the unit of the parameter it is given for.
    sd : float
        Standard deviation (one sigma), same unit.
    source : str
        Where the number comes from (shown in summaries).
    """

    mean: float
    sd: float
    source: str = "prior"

    def __post_init__(self):
        if not (np.isfinite(self.mean) and np.isfinite(self.sd) and self.sd >= 0):
            raise PowerlabError(f"a Prior needs a finite mean and sd >= 0, got "
                                f"mean={self.mean!r}, sd={self.sd!r}")


#: H100-SXM idle power: ~70 W with no process and ~120 W while a process holds a CUDA
#: context, in public nvidia-smi 100-ms traces of an 8 x H100 node
#: (grantwilkins/training_profile, h100-traces) [W].
GPU_IDLE_PRIOR = Prior(75.0, 25.0, "H100-SXM idle: ~70 W bare, ~120 W with a CUDA context "
                                   "(nvidia-smi traces)")


def as_prior(value, what: str, given: str) -> Prior | None:
    """``value`` as a :class:`Prior`: None and Priors as they are, a number as an exact
    prior from ``given`` (a :class:`~powerlab.exceptions.PowerlabError` naming ``what``
    otherwise).  Shared with :func:`~powerlab.calibration.profile.fit_profile`."""
    if value is None or isinstance(value, Prior):
        return value
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PowerlabError(f"{what} must be a number or a Prior, got {value!r}") from None
    if not np.isfinite(v) or v < 0:
        raise PowerlabError(f"{what} must be a finite number >= 0, got {value!r}")
    return Prior(v, 0.0, given)


_UNITS = {"_w": "W", "_s": "s", "_j": "J", "fraction": "-"}


def _unit(name: str) -> str:
    for suffix, u in _UNITS.items():
        if name.endswith(suffix):
            return u
    return ""


@dataclass(repr=False)
class ProfileFit(Results):
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
    device_compute_w, device_comm_w, device_eval_w, device_train_mean_w : float
        Mean over devices of the device's compute, step-dip and evaluation levels and of
        its mean power while training [W] (``nan`` when unknown).
    compute_w, comm_w, eval_w : float
        The same per GPU [W]: for node scope only with a GPU / non-GPU split, else ``nan``.
    step_dip_depth_w, eval_dip_depth_w : float
        Device-level depth of the step dip (compute minus dip level) and of the
        evaluation dip (training mean minus evaluation level) [W].
    step_dip_energy_j : float
        Device-level energy missing in each step's dip, ``step_time * (compute - mean)``
        [J].
    eval_duration_s, eval_interval_s : float
        Median evaluation length and training time between evaluations [s].
    node_overhead_w, node_overhead_sd_w : float
        Node power besides the GPUs and its standard deviation [W] (``nan`` without a
        split; 0 for GPU scope).
    split : str
        Evidence for the GPU / non-GPU split: ``'none'``, ``'hardware data'``,
        ``'prior: ...'``, ``'idle periods'``, or ``'gpu telemetry'`` (GPU scope).
    node_lowest_w : float
        Median over nodes of each node's lowest reading in the window, an upper bound on
        the node's power besides the GPUs [W] (node scope).
    meter_interval_s : float
        Averaging interval of the readings assumed by the fit (0: instantaneous) [s].
    dip_source : str
        How the step dip's duration was set: ``'measured'``, ``'hardware data'``,
        ``'prior: ...'`` or ``'bound'`` (the meter cannot resolve it).
    evals_used : int
        Complete evaluations inside the calibration window.
    gpus_per_node : int
    alpha : float
        Confidence intervals are ``1 - alpha``.
    params : DataFrame
        ``value, std_err, ci_lower, ci_upper, unit, source`` per fitted quantity.
    periodogram : DataFrame
        ``period_s`` and periodogram ``power`` [W^2/Hz] averaged over devices.
    per_device : DataFrame
        Levels and duty cycle of each device.
    node_idle_w : float
        Node power in the idle periods given (``nan`` without) [W].
    step_dip_center_s : float
        With a meter and evaluations: centre of the step dip after the end of each step,
        steps counted from the last evaluation's end [s].  The forecast engine ends its
        dip with the step (centre at ``-step_dip_duration_s / 2``), so its dips lead the
        measured ones by ``step_dip_center_s + step_dip_duration_s / 2``.
    """

    scope: str
    devices: int
    step_time_s: float
    compute_fraction: float
    device_compute_w: float
    device_comm_w: float
    device_eval_w: float
    device_train_mean_w: float
    compute_w: float
    comm_w: float
    eval_w: float
    step_dip_depth_w: float
    eval_dip_depth_w: float
    step_dip_energy_j: float
    eval_duration_s: float
    eval_interval_s: float
    node_overhead_w: float
    node_overhead_sd_w: float
    split: str
    node_lowest_w: float
    meter_interval_s: float
    dip_source: str
    evals_used: int
    gpus_per_node: int
    alpha: float
    params: pd.DataFrame = field(repr=False)
    periodogram: pd.DataFrame = field(repr=False)
    per_device: pd.DataFrame = field(repr=False)
    node_idle_w: float = np.nan
    step_dip_center_s: float = np.nan

    @property
    def step_dip_duration_s(self) -> float:
        """Duration of the step dip, ``(1 - compute_fraction) * step_time_s`` [s]."""
        return (1.0 - self.compute_fraction) * self.step_time_s

    # -- scenario fields -----------------------------------------------------------------
    @property
    def has_split(self) -> bool:
        """Whether per-GPU levels rest on evidence (a split, or GPU-scope data)."""
        return self.split != "none"

    def job_kwargs(self) -> dict:
        """Scenario YAML fields of a job with this profile (``power``, ``eval`` ...).

        Per-GPU levels come from the split; without one (node scope), node levels are
        shared equally among the node's GPUs, to be used with
        :meth:`hardware_kwargs` (node overhead 0) so that node power is reproduced.
        """
        if self.has_split:
            c, m, e = self.compute_w, self.comm_w, self.eval_w
        else:
            g = self.gpus_per_node
            c, m, e = self.device_compute_w / g, self.device_comm_w / g, \
                self.device_eval_w / g
        out = {"step_time_s": self.step_time_s, "compute_fraction": self.compute_fraction,
               "power": {"compute_w": c, "comm_w": m}}
        if np.isfinite(e):
            out["power"]["eval_w"] = e
            if np.isfinite(self.eval_interval_s):
                out["eval"] = {"interval_s": self.eval_interval_s,
                               "duration_s": self.eval_duration_s}
        return out

    def hardware_kwargs(self) -> dict:
        """Scenario ``hardware`` fields that go with :meth:`job_kwargs`.

        ``gpus_per_node`` and ``node_overhead_w`` (0 without a split: node power is then
        all in the GPUs' shares); with idle periods, also ``gpu_idle_w`` so that a node's
        idle power is the one measured.
        """
        out = {"gpus_per_node": self.gpus_per_node,
               "node_overhead_w": self.node_overhead_w if self.has_split else 0.0}
        if self.scope == "gpu":
            out["node_overhead_w"] = 0.0
        if np.isfinite(self.node_idle_w) and self.has_split:
            out["gpu_idle_w"] = (self.node_idle_w - self.node_overhead_w) / self.gpus_per_node
        return out

    def with_split(self, node_overhead_w: float | Prior) -> ProfileFit:
        """The same fit with node power split by ``node_overhead_w`` (hardware data as a
        number, or a :class:`Prior`) [W]."""
        if self.scope != "node":
            raise PowerlabError("only node-scope fits are split into GPU and non-GPU power")
        prior = as_prior(node_overhead_w, "node_overhead_w", "hardware data")
        return apply_split(self, prior.mean, prior.sd, split_label(prior), np.nan)

    # -- tables ----------------------------------------------------------------------------
    def summary_frame(self) -> pd.DataFrame:
        """Fitted quantities: ``value, std_err, ci_lower, ci_upper, unit, source``.

        ``std_err`` is the spread across devices over ``sqrt(n)`` (and, for per-GPU
        levels, the split's uncertainty); ``nan`` where a number is a bound or given.
        """
        return self.params.drop(columns="dof")

    def summary(self) -> Summary:
        """Summary of the fit, its evidence and what it could not tell."""
        head = [(f"Job power profile fit ({self.scope} scope, {self.devices} devices, "
                 f"{self.evals_used} evaluations)"),
                (f"meter interval assumed: {self.meter_interval_s:g} s; confidence "
                 f"intervals {100 * (1 - self.alpha):g} % (spread across devices)"),
                f"GPU / non-GPU split: {self.split}"]
        s = Summary(float_format="{:,.4g}", width=120)
        s.add_text(head)
        s.add_df(self.summary_frame())
        notes = self.notes()
        if notes:
            s.add_text([f"Note: {n}" for n in notes])
        return s

    def notes(self) -> list[str]:
        """What the data could not tell, in words."""
        out = []
        if self.scope == "node" and not self.has_split:
            out.append("no idle period, hardware data or prior: node power is not split; "
                       "per-GPU levels are nan and job_kwargs() shares node power among "
                       f"the node's {self.gpus_per_node} GPUs (node overhead 0); the node's "
                       "idle power is unknown.")
        if self.dip_source == "bound":
            out.append(f"the step dip is not longer than the {self.meter_interval_s:g} s "
                       "meter interval: only its energy is measured; its depth is a lower "
                       "bound (dip duration taken as the meter interval).")
        return out


def split_label(prior: Prior) -> str:
    """Where a node-power split's number came from, as :attr:`ProfileFit.split` says it."""
    if prior.sd == 0 and prior.source == "hardware data":
        return "hardware data"
    return f"prior: {prior.source}"


def param_rows(fit: ProfileFit, dev_rows: dict) -> pd.DataFrame:
    """The params table: device rows plus per-GPU rows from the split."""
    rows = dict(dev_rows)
    g = fit.gpus_per_node
    if fit.scope == "node":
        sd_o = fit.node_overhead_sd_w if fit.has_split else np.nan
        rows["node_overhead_w"] = (fit.node_overhead_w, sd_o, fit.split)
        for name, dev in (("compute_w", "device_compute_w"), ("comm_w", "device_comm_w"),
                          ("eval_w", "device_eval_w")):
            v, se = rows[dev][:2]
            if fit.has_split:
                se_g = np.sqrt(np.nan_to_num(se) ** 2 + sd_o ** 2) / g
                rows[name] = ((v - fit.node_overhead_w) / g, se_g,
                              f"node level and split ({fit.split})", np.inf)
            else:
                rows[name] = (np.nan, np.nan, "not split: no evidence")
    out = []
    for name, row in rows.items():
        v, se, src = row[:3]
        dof = row[3] if len(row) > 3 else np.inf
        q = float(stats.t.ppf(1 - fit.alpha / 2, dof)) if dof > 0 else np.nan
        lo, hi = (v - q * se, v + q * se) if np.isfinite(se) else (np.nan, np.nan)
        out.append({"parameter": name, "value": v, "std_err": se, "ci_lower": lo,
                    "ci_upper": hi, "unit": _unit(name), "source": src, "dof": dof})
    return pd.DataFrame(out).set_index("parameter")


def apply_split(fit: ProfileFit, overhead: float, sd: float, label: str,
                 node_idle: float) -> ProfileFit:
    """``fit`` with node power split into ``overhead`` [W] (standard error ``sd`` [W],
    source ``label``) and per-GPU power; an AnalysisError when the overhead exceeds the
    nodes' lowest reading.  Shared with :func:`~powerlab.calibration.profile.fit_profile`."""
    if np.isfinite(fit.node_lowest_w) and overhead > fit.node_lowest_w:
        raise AnalysisError(f"node power besides the GPUs of {overhead:,.0f} W is more than "
                            f"the nodes' lowest reading ({fit.node_lowest_w:,.0f} W, median "
                            "over nodes): the GPUs would draw negative power")
    g = fit.gpus_per_node
    conv = (lambda v: (v - overhead) / g)
    new = dataclasses.replace(
        fit, node_overhead_w=float(overhead), node_overhead_sd_w=float(sd), split=label,
        compute_w=conv(fit.device_compute_w), comm_w=conv(fit.device_comm_w),
        eval_w=conv(fit.device_eval_w), node_idle_w=float(node_idle))
    dev = fit.params.loc[[i for i in fit.params.index
                          if i not in ("node_overhead_w", "compute_w", "comm_w", "eval_w")]]
    return dataclasses.replace(new, params=param_rows(
        new, {k: (r["value"], r["std_err"], r["source"], r["dof"])
              for k, r in dev.iterrows()}))
