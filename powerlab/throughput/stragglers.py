"""Straggler GPUs: persistent outliers among peers that slow every synchronous step.

In synchronous data-parallel training every step waits for the slowest GPU, so one GPU
with a poor heatsink, a lowered power limit or a stuck hardware slowdown costs the whole
job.  :func:`find_stragglers` compares each GPU with its peers *at the same moments*:

1. for each timestamp and metric (SM clock, die temperature, power), a robust z-score
   against the fleet: ``z = (x - median) / (1.4826 MAD)``, with a floor on the scale
   (one 15 MHz clock bin, 1 degC, 5 W) so a uniform fleet does not make noise look
   significant [1]_;
2. per GPU, the share of its busy samples that are outlying in the harmful direction
   (clock low, temperature high, power far from peers in either direction) and the
   median z (the persistent offset);
3. a GPU is flagged when, for any metric, at least ``min_share`` of its samples are
   beyond ``z_threshold`` -- a persistent outlier, not a passing spike;
4. the cost to the job: with a step time ``t = t0 (phi f_ref / f_slowest + 1 - phi)``
   (``phi`` the compute-bound share), the step time with the fleet as measured is
   compared with the step time had the flagged GPU run at the fleet's median clock.

References
----------
.. [1] P. J. Rousseeuw and C. Croux, "Alternatives to the median absolute deviation",
   Journal of the American Statistical Association 88(424), 1993.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..exceptions import AnalysisError, SchemaError, Violation
from ..telemetry.schema import THROTTLE_REASONS

__all__ = ["StragglerResult", "find_stragglers"]

#: metric -> (harmful direction, scale floor in the metric's unit)
_METRICS = {
    "clock_sm_mhz": ("low", 15.0),
    "temp_gpu_c": ("high", 1.0),
    "power_w": ("both", 5.0),
    "temp_mem_c": ("high", 1.0),
}
_IDLE_BIT = np.uint64(THROTTLE_REASONS["gpu_idle"])
# the reasons that slow a busy GPU down
_REASONS = {k: THROTTLE_REASONS[k] for k in ("sw_power_cap", "hw_slowdown",
                                              "sw_thermal_slowdown", "hw_thermal_slowdown",
                                              "hw_power_brake_slowdown")}


@dataclass(frozen=True)
class StragglerResult:
    """Result of :func:`find_stragglers`.

    Attributes
    ----------
    flags : pandas.DataFrame
        One row per flagged GPU: host, gpu_index, gpu_uuid, reasons (metrics that are
        persistently outlying), ``<metric>_z`` (median robust z), ``<metric>_share``
        (share of samples beyond the threshold in the harmful direction), clock_deficit_mhz
        (fleet median clock minus this GPU's median clock), top_throttle_reason and its
        share, cost_step_pct (job step-time increase due to this GPU alone) [%].
    scores : pandas.DataFrame
        The same evidence for every GPU (``flagged`` column).
    cost_step_pct_total : float
        Job step-time increase due to all flagged GPUs together [%].
    params : dict
        The thresholds used.
    """

    flags: pd.DataFrame
    scores: pd.DataFrame
    cost_step_pct_total: float
    params: dict

    def summary_frame(self) -> pd.DataFrame:
        """The flagged GPUs (a copy of :attr:`flags`)."""
        return self.flags.copy()

    def summary(self) -> str:
        """Text summary: one line per flagged GPU with its evidence and cost."""
        n = len(self.scores)
        lines = [(f"Straggler GPUs: {len(self.flags)} of {n} flagged "
                 f"(|z| > {self.params['z_threshold']:g} in >= "
                 f"{100 * self.params['min_share']:.0f} % of samples)")]
        for _, r in self.flags.iterrows():
            lines.append(
                f"  {r['host']} GPU {r['gpu_index']} ({r['gpu_uuid']}): {r['reasons']}; "
                f"clock -{r['clock_deficit_mhz']:.0f} MHz, temp z {r['temp_gpu_c_z']:+.1f},"
                f" power z {r['power_w_z']:+.1f}; top throttle "
                f"{r['top_throttle_reason']} ({100 * r['top_throttle_share']:.0f} %); "
                f"cost {r['cost_step_pct']:.2f} % of step time")
        if len(self.flags):
            lines.append(f"All flagged GPUs together cost {self.cost_step_pct_total:.2f} % "
                         "of step time")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        cols = ["host", "gpu_index", "reasons", "clock_deficit_mhz", "temp_gpu_c_z",
                "power_w_z", "top_throttle_reason", "cost_step_pct"]
        table = (self.flags[cols].to_html(index=False, float_format=lambda v: f"{v:.3g}")
                 if len(self.flags) else "<p>No stragglers flagged.</p>")
        return (f"<div><h4>Straggler GPUs ({len(self.flags)} of {len(self.scores)})</h4>"
                f"{table}<p>{html.escape('Total cost: ')}"
                f"{self.cost_step_pct_total:.3g} % of step time</p></div>")


def _step_time(f_slow: np.ndarray, f_ref: float, phi: float) -> np.ndarray:
    return phi * f_ref / f_slow + 1.0 - phi


def find_stragglers(telemetry: pd.DataFrame, *,
                    metrics: tuple[str, ...] = ("clock_sm_mhz", "temp_gpu_c", "power_w"),
                    z_threshold: float = 4.0, min_share: float = 0.5,
                    compute_fraction: float = 0.8, min_peers: int = 4,
                    min_samples: int = 10) -> StragglerResult:
    """Flag GPUs that are persistent outliers against their peers.

    Parameters
    ----------
    telemetry : pandas.DataFrame
        GPU telemetry in the canonical schema (``timestamp``, ``host``, ``gpu_index``,
        the metrics; ``throttle_reasons`` and ``util_gpu_pct`` when present).  Only busy
        GPU rows are compared (no GpuIdle bit, utilisation above zero); peers are the GPUs
        sampled at the same timestamp.
    metrics : tuple of str
        Metrics to score; any of ``clock_sm_mhz``, ``temp_gpu_c``, ``power_w``,
        ``temp_mem_c``.
    z_threshold : float
        Robust z-score beyond which a sample is outlying [-].
    min_share : float
        Share of a GPU's samples that must be outlying to flag it (persistence) [-].
    compute_fraction : float
        Share of the step time that scales with 1 / clock, for the cost estimate [-].
    min_peers : int
        Fewest GPUs at a timestamp for it to be scored.
    min_samples : int
        Fewest scored samples for a GPU to be judged.

    Returns
    -------
    StragglerResult

    Raises
    ------
    powerlab.exceptions.SchemaError
        Missing columns or naive timestamps.
    powerlab.exceptions.AnalysisError
        Too few GPUs or samples, or bad options.
    """
    for m in metrics:
        if m not in _METRICS:
            raise AnalysisError(f"unknown metric {m!r}; expected some of {tuple(_METRICS)}")
    if not 0 < min_share <= 1 or not z_threshold > 0 or not 0 < compute_fraction <= 1:
        raise AnalysisError("need z_threshold > 0, min_share in (0, 1] and "
                            "compute_fraction in (0, 1]")
    need = ["timestamp", "host", "gpu_index", "clock_sm_mhz", *metrics]
    missing = [c for c in dict.fromkeys(need) if c not in telemetry.columns]
    if missing:
        raise SchemaError([Violation(c, "missing column (canonical telemetry expected)")
                           for c in missing])
    if not isinstance(telemetry["timestamp"].dtype, pd.DatetimeTZDtype):
        raise SchemaError([Violation("timestamp", "timestamps must be tz-aware UTC")])

    tel = telemetry
    keep = np.ones(len(tel), dtype=bool)
    if "scope" in tel.columns:
        keep &= (tel["scope"] == "gpu").fillna(False).to_numpy(dtype=bool)
    bits_all = (tel["throttle_reasons"].to_numpy(dtype=np.uint64, na_value=0)
                if "throttle_reasons" in tel.columns else np.zeros(len(tel), np.uint64))
    keep &= (bits_all & _IDLE_BIT) == 0
    if "util_gpu_pct" in tel.columns:
        keep &= ~(tel["util_gpu_pct"].to_numpy(dtype=float, na_value=np.nan) <= 0)
    tel = tel[keep]
    bits = bits_all[keep]
    if tel.empty:
        raise AnalysisError("telemetry has no busy GPU rows")

    t = pd.DatetimeIndex(tel["timestamp"]).tz_convert("UTC").as_unit("ns").asi8
    tcode, tu = pd.factorize(t, sort=True)
    gkey = pd.MultiIndex.from_arrays([tel["host"].astype("string").to_numpy(),
                                      tel["gpu_index"].astype("Int64").to_numpy()])
    gcode, gu = pd.factorize(gkey, sort=True)
    n_t, n_g = len(tu), len(gu)
    if n_g < min_peers + 1:
        raise AnalysisError(f"{n_g} GPUs in the telemetry; need more than {min_peers} to "
                            "compare each GPU with its peers")

    def matrix(col):
        a = np.full((n_t, n_g), np.nan)
        a[tcode, gcode] = tel[col].to_numpy(dtype=float, na_value=np.nan)
        return a

    peers_ok = np.bincount(tcode, minlength=n_t) >= min_peers
    out = {}
    flagged = np.zeros(n_g, dtype=bool)
    reasons = [[] for _ in range(n_g)]
    for m in dict.fromkeys(["clock_sm_mhz", *metrics]):
        x = matrix(m)[peers_ok]
        direction, floor = _METRICS[m]
        with np.errstate(invalid="ignore"), _quiet():
            med = np.nanmedian(x, axis=1, keepdims=True)
            mad = np.nanmedian(np.abs(x - med), axis=1, keepdims=True)
        scale = np.maximum(1.4826 * mad, floor)
        z = (x - med) / scale
        valid = np.isfinite(z)
        if direction == "low":
            bad = z < -z_threshold
        elif direction == "high":
            bad = z > z_threshold
        else:
            bad = np.abs(z) > z_threshold
        n_valid = valid.sum(axis=0)
        share = np.where(n_valid > 0, (bad & valid).sum(axis=0) / np.maximum(n_valid, 1),
                         np.nan)
        with _quiet():
            out[f"{m}_z"] = np.nanmedian(z, axis=0)
        out[f"{m}_share"] = share
        if m in metrics:
            hit = (share >= min_share) & (n_valid >= min_samples)
            flagged |= hit
            for i in np.flatnonzero(hit):
                reasons[i].append({"clock_sm_mhz": "clock low", "temp_gpu_c": "hot",
                                   "temp_mem_c": "HBM hot", "power_w": "power off-peer"}[m])
        out.setdefault("n_samples", n_valid)

    clock = matrix("clock_sm_mhz")[peers_ok]
    with _quiet():
        row_med = np.nanmedian(clock, axis=1)
        gpu_med = np.nanmedian(clock, axis=0)
        f_ref = float(np.nanmedian(row_med))
    out["clock_deficit_mhz"] = f_ref - gpu_med

    # throttle reasons per GPU
    top_name = np.array([""] * n_g, dtype=object)
    top_share = np.zeros(n_g)
    n_rows = np.bincount(gcode, minlength=n_g).astype(float)
    for name, bit in _REASONS.items():
        sh = np.bincount(gcode, weights=(bits & np.uint64(bit)) != 0,
                         minlength=n_g) / np.maximum(n_rows, 1)
        better = sh > top_share
        top_name[better], top_share[better] = name, sh[better]
    out["top_throttle_reason"] = np.where(top_share > 0, top_name, "none")
    out["top_throttle_share"] = top_share

    # cost to the job's step time
    fill = np.where(np.isfinite(clock), clock, row_med[:, None])
    rows_ok = np.isfinite(row_med)
    fill = fill[rows_ok]
    base = _step_time(fill.min(axis=1), f_ref, compute_fraction).mean()
    cost = np.zeros(n_g)
    for i in np.flatnonzero(flagged):
        alt = fill.copy()
        alt[:, i] = row_med[rows_ok]
        cost[i] = 100.0 * (base / _step_time(alt.min(axis=1), f_ref,
                                             compute_fraction).mean() - 1.0)
    alt = fill.copy()
    alt[:, flagged] = row_med[rows_ok, None]
    total = 100.0 * (base / _step_time(alt.min(axis=1), f_ref, compute_fraction).mean()
                     - 1.0) if flagged.any() else 0.0
    out["cost_step_pct"] = cost

    uuid = (tel.groupby(gcode)["gpu_uuid"].first().reindex(range(n_g)).to_numpy()
            if "gpu_uuid" in tel.columns else np.full(n_g, pd.NA))
    scores = pd.DataFrame({
        "host": pd.array(gu.get_level_values(0), dtype="string"),
        "gpu_index": pd.array(gu.get_level_values(1), dtype="Int16"),
        "gpu_uuid": pd.array(uuid, dtype="string"),
        "flagged": flagged,
        "reasons": [", ".join(r) for r in reasons],
        **out,
    })
    for m in ("clock_sm_mhz", "temp_gpu_c", "power_w"):
        if f"{m}_z" not in scores.columns:
            scores[f"{m}_z"] = np.nan
    flags = scores[scores["flagged"]].drop(columns="flagged")
    flags = flags.sort_values("cost_step_pct", ascending=False).reset_index(drop=True)
    params = {"metrics": tuple(metrics), "z_threshold": z_threshold, "min_share": min_share,
              "compute_fraction": compute_fraction, "min_peers": min_peers,
              "min_samples": min_samples}
    return StragglerResult(flags=flags, scores=scores, cost_step_pct_total=float(total),
                           params=params)


class _quiet:
    """Silence the all-NaN RuntimeWarnings of nanmedian on empty rows."""

    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)
