"""Failure rates of a GPU fleet: per root cause per GPU-hour, with exact Poisson intervals,
and the mean time between failures of a job as a function of its GPU count.

The input is an events table (:mod:`powerlab.iotools.xid` readers,
:data:`powerlab.telemetry.events.EVENT_COLUMNS`) and the exposure in GPU-hours.  The output
:attr:`FailureRates.rates_per_gpu_h` is the per-category mapping the forecast's
``interruptions:`` section takes, so a planner goes from their own logs to a forecast.

Method
------
Failures of category :math:`c` are a Poisson count :math:`k_c` over exposure :math:`T`
GPU-hours; the rate is :math:`\\hat\\lambda_c = k_c / T` and its exact (Garwood [1]_)
interval at level :math:`1-\\alpha` is

.. math::
   \\left[\\tfrac{1}{2T}\\chi^2_{\\alpha/2}(2k),\\;
          \\tfrac{1}{2T}\\chi^2_{1-\\alpha/2}(2k+2)\\right].

A synchronous job on :math:`N` GPUs stops at any GPU's failure: its failure rate is
:math:`N\\lambda` and its MTBF :math:`1/(N\\lambda)` [h]; the interval is the total rate's,
inverted.  On the Llama 3 snapshot [2]_ (419 interruptions, 54 d x 16,384 GPUs) this gives
:math:`1.97\\times10^{-5}` per GPU-hour [1.79, 2.17] and a job MTBF of 3.09 h [2.81, 3.41].

References
----------
.. [1] F. Garwood, "Fiducial limits for the Poisson distribution", Biometrika 28 (1936)
   437-442.
.. [2] A. Grattafiori et al., "The Llama 3 Herd of Models", arXiv:2407.21783, 2024,
   Table 5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import chi2

from .._options import choice
from .._summary import Results, Summary
from ..exceptions import AnalysisError
from ..telemetry.events import LLAMA3_SNAPSHOT, ROOT_CAUSES

__all__ = ["INCIDENT_WINDOW_S", "FailureRates", "failure_rates", "garwood_interval",
           "incidents", "job_mtbf", "llama3_rates"]

#: Events of one GPU closer than this are one incident [s]: NVIDIA's Fleet Intelligence
#: groups a node's Xids into one "burst" until three minutes pass without one (NVIDIA,
#: "XID Bursts", https://docs.nvidia.com/fleet-intel/user-guide/xid-bursts).
INCIDENT_WINDOW_S = 180.0


def incidents(events: pd.DataFrame, *, by: str = "root_cause",
              window_s: float = INCIDENT_WINDOW_S) -> pd.DataFrame:
    """One row per incident: failure events of one GPU less than ``window_s`` after the
    previous one are one incident, counted under its first event's category.

    A GPU is its ``gpu_uuid``, else (``host``, ``pci_bus_id``), else (``host``,
    ``gpu_index``).  Events without a category (informational and application Xids) are
    not failures and start no incident; events without a time (or a table without
    ``timestamp`` or GPU columns) are each their own.
    """
    ev = events[events[by].notna()].copy()
    cols = [c for c in ("gpu_uuid", "host", "pci_bus_id", "gpu_index") if c in ev.columns]
    if ev.empty or window_s <= 0 or "timestamp" not in ev.columns or not cols:
        return ev          # no time or no GPU to merge on: each event is its own
    key = pd.Series(["|".join(map(str, r)) for r in ev[cols].astype(object).itertuples(
        index=False)], index=ev.index)
    if "gpu_uuid" in ev.columns:
        key = ev["gpu_uuid"].astype(object).where(ev["gpu_uuid"].notna(), key)
    ev["_gpu"] = key
    ev = ev.sort_values(["_gpu", "timestamp"], kind="stable")
    gap = ev.groupby("_gpu", sort=False)["timestamp"].diff().dt.total_seconds()
    first = ~(gap < window_s)          # NaN (first of a GPU, or no time) starts one
    return ev[first.to_numpy()].drop(columns="_gpu").sort_values("timestamp",
                                                                  kind="stable")


def garwood_interval(count, exposure, conf: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Garwood) confidence interval of a Poisson rate.

    Parameters
    ----------
    count : int or array-like
        Events observed [-].
    exposure : float or array-like
        Exposure the events were observed over [GPU-h].
    conf : float, default 0.95
        Confidence level [-].

    Returns
    -------
    lower, upper : numpy.ndarray
        Bounds of the rate [1/GPU-h]; the lower bound is 0 when ``count`` is 0.
    """
    k = np.asarray(count, dtype=float)
    t = np.asarray(exposure, dtype=float)
    if np.any(k < 0) or np.any(~np.isfinite(k)):
        raise ValueError("counts must be finite and non-negative")
    if np.any(~(t > 0)):
        raise ValueError("exposure must be positive [GPU-h]")
    if not 0 < conf < 1:
        raise ValueError("conf must lie in (0, 1)")
    a = 1.0 - conf
    lower = np.where(k > 0, chi2.ppf(a / 2, 2 * np.maximum(k, 1e-300)) / 2, 0.0) / t
    upper = chi2.ppf(1 - a / 2, 2 * k + 2) / 2 / t
    return lower, upper


@dataclass(frozen=True, repr=False)
class FailureRates(Results):
    """Failure rates per category per GPU-hour (see :func:`failure_rates`).

    Attributes
    ----------
    counts : pandas.Series
        Failures per category [-].
    gpu_hours : float
        Exposure [GPU-h].
    conf : float
        Confidence level of the intervals [-].
    by : str
        The events column the categories come from.
    """

    counts: pd.Series
    gpu_hours: float
    conf: float = 0.95
    by: str = "root_cause"

    @property
    def total(self) -> int:
        """Failures in all categories [-]."""
        return int(self.counts.sum())

    @property
    def rates_per_gpu_h(self) -> dict[str, float]:
        """Rate per category [1/GPU-h]: the forecast's ``interruptions`` mapping."""
        return {str(k): float(v) / self.gpu_hours for k, v in self.counts.items()}

    @property
    def total_rate_per_gpu_h(self) -> float:
        """Rate of all categories together [1/GPU-h]."""
        return self.total / self.gpu_hours

    def summary_frame(self) -> pd.DataFrame:
        """One row per category: ``failures``, ``gpu_hours``, ``rate_per_gpu_h`` and its
        exact interval ``lower``/``upper`` [1/GPU-h], ``share`` of all failures [-]; a last
        row ``total``."""
        k = np.append(self.counts.to_numpy(dtype=float), self.total)
        lo, hi = garwood_interval(k, self.gpu_hours, self.conf)
        idx = [*map(str, self.counts.index), "total"]
        out = pd.DataFrame({"failures": k.astype(int), "gpu_hours": self.gpu_hours,
                            "rate_per_gpu_h": k / self.gpu_hours, "lower": lo, "upper": hi,
                            "share": k / max(self.total, 1)},
                           index=pd.Index(idx, name=self.by))
        return out

    def interruptions_section(self, *, bound: str = "mean", include_zero: bool = False,
                              planned_rate_per_gpu_h: float | None = None,
                              restart: dict | None = None) -> dict:
        """The rates as a scenario's ``interruptions:`` mapping (powerlab.reliability.interruptions):
        ``{"model": "none", "rates_per_gpu_h": {category: rate}, ...}``.

        Parameters
        ----------
        bound : {"mean", "upper", "lower"}
            Which rate to write: the estimate or a bound of its exact interval (``upper``
            for a conservative plan) [1/GPU-h].
        include_zero : bool, default False
            Keep categories without failures (their estimate is 0).
        planned_rate_per_gpu_h : float, optional
            Planned interruptions [1/GPU-h].
        restart : dict, optional
            ``{detection_s, drain_s, reschedule_s}`` [s].
        """
        choice(bound, "bound", ("mean", "upper", "lower"))
        f = self.summary_frame().drop(index="total")
        col = "rate_per_gpu_h" if bound == "mean" else bound
        rates = {str(k): float(v) for k, v in f[col].items()
                 if include_zero or f.loc[k, "failures"] > 0}
        out: dict = {"model": "none", "rates_per_gpu_h": rates}
        if planned_rate_per_gpu_h is not None:
            out["planned_rate_per_gpu_h"] = float(planned_rate_per_gpu_h)
        if restart is not None:
            out["restart"] = {k: float(v) for k, v in restart.items()}
        return out

    def summary(self) -> Summary:
        """Rates per category with their exact intervals [1/1e6 GPU-h]."""
        f = self.summary_frame()
        lines = [(f"Failure rates by {self.by}: {self.total} failures over "
                 f"{self.gpu_hours:,.0f} GPU-h ({self.conf:.0%} exact Poisson intervals)"),
                 f"{'category':32s} {'n':>5s} {'per 1e6 GPU-h':>14s} {'interval':>22s}"]
        for name, r in f.iterrows():
            lines.append(f"{name:32s} {int(r.failures):5d} {r.rate_per_gpu_h * 1e6:14.3f} "
                         f"[{r.lower * 1e6:8.3f}, {r.upper * 1e6:8.3f}]")
        s = Summary()
        s.add_text(lines, pre=True)
        return s


def failure_rates(events: pd.DataFrame, gpu_hours: float, *, by: str = "root_cause",
                  categories=None, conf: float = 0.95, dropna: bool = True,
                  window_s: float = INCIDENT_WINDOW_S) -> FailureRates:
    """Failure rates per category per GPU-hour from an events table, counting incidents.

    Parameters
    ----------
    events : pandas.DataFrame
        Events table (``root_cause`` or another category column ``by``).  Events whose
        category is missing (application or informational XIDs) are not failures and are
        dropped unless ``dropna=False`` (then counted as ``"unclassified"``).
    gpu_hours : float
        Exposure: GPU-hours the fleet was observed over [GPU-h].
    by : str, default "root_cause"
        Column of ``events`` naming the category (``kind`` for XID kinds).
    categories : sequence of str, optional
        Categories to report even when none occurred (e.g. every name of
        :data:`~powerlab.telemetry.events.ROOT_CAUSES`); their rate is 0 with a finite
        upper bound.
    conf : float, default 0.95
        Confidence level [-].
    window_s : float, default 180
        Failure events of one GPU closer than this are one incident (:func:`incidents`;
        0 counts every event) [s].

    Returns
    -------
    FailureRates
    """
    if by not in events.columns:
        raise AnalysisError(f"events table has no column {by!r} to count failures by")
    if not np.isfinite(gpu_hours) or gpu_hours <= 0:
        raise AnalysisError(f"gpu_hours must be positive, got {gpu_hours!r} [GPU-h]")
    if not dropna:
        events = events.assign(**{by: events[by].astype(object).where(
            events[by].notna(), "unclassified")})
    cat = incidents(events, by=by, window_s=window_s)[by].astype(object)
    counts = cat.dropna().value_counts()
    if categories is not None:
        cats = list(categories)
        extra = [c for c in counts.index if c not in cats]
        counts = counts.reindex(cats + extra, fill_value=0)
    counts = counts.astype(int)
    counts.index.name = by
    return FailureRates(counts, float(gpu_hours), conf, by)


def llama3_rates(conf: float = 0.95) -> FailureRates:
    """The Llama 3 snapshot's rates: Table 5's counts over 54 d x 16,384 GPUs."""
    counts = pd.Series({r.name: r.llama3_count for r in ROOT_CAUSES}, name="failures")
    counts.index.name = "root_cause"
    gpu_h = LLAMA3_SNAPSHOT["days"] * 24 * LLAMA3_SNAPSHOT["gpus"]
    return FailureRates(counts, gpu_h, conf, "root_cause")


def job_mtbf(rates: FailureRates, n_gpus, *, categories=None) -> pd.DataFrame:
    """Mean time between failures of a synchronous job on ``n_gpus`` GPUs.

    Parameters
    ----------
    rates : FailureRates
    n_gpus : int or array-like
        GPUs of the job [-].
    categories : sequence of str, optional
        Categories that interrupt the job (default: all).

    Returns
    -------
    pandas.DataFrame
        Per GPU count: ``n_gpus``, ``failures_per_h`` [1/h], ``mtbf_h`` and its interval
        ``lower_h``/``upper_h`` [h] (from the total rate's exact interval).
    """
    counts = rates.counts if categories is None else rates.counts.reindex(categories,
                                                                          fill_value=0)
    k = int(counts.sum())
    n = np.atleast_1d(np.asarray(n_gpus, dtype=float))
    if np.any(~(n > 0)):
        raise AnalysisError("n_gpus must be positive")
    lam = k / rates.gpu_hours
    lo, hi = garwood_interval(k, rates.gpu_hours, rates.conf)
    with np.errstate(divide="ignore"):
        return pd.DataFrame({"n_gpus": n.astype(int), "failures_per_h": n * lam,
                             "mtbf_h": 1 / (n * lam), "lower_h": 1 / (n * hi),
                             "upper_h": 1 / (n * lo)})
