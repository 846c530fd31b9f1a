"""The straggler search's inputs (:func:`powerlab.throughput.stragglers.find_stragglers`):
its options (:class:`StragglerOptions`, shared with
:func:`~powerlab.throughput.stragglers.straggler_baseline`), the checks, the busy GPU
rows, and the fleet as timestamps x GPUs matrices (:class:`FleetWork`, filled by
:func:`index_fleet`: the compute-phase rows and their windows) that every step of the
search (:mod:`~powerlab.throughput.straggler_scoring`) reads and writes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._options import Options
from ..exceptions import AnalysisError, SchemaError, Violation
from ..telemetry.schema import THROTTLE_REASONS
from ..telemetry.timeutil import to_epoch_ns
from .chip_baseline import match_baseline

__all__ = ["METRICS", "FleetWork", "StragglerOptions", "busy_rows", "check_inputs",
           "index_fleet"]

#: metric -> (harmful direction, floor of the between-GPU scale, relative offset?)
METRICS = {
    "clock_sm_mhz": ("low", 0.5, True),      # about half a 15 MHz clock bin
    "temp_gpu_c": ("high", 0.5, False),
    "power_w": ("both", 0.5, True),
    "temp_mem_c": ("high", 0.5, False),
}
_IDLE_BIT = np.uint64(THROTTLE_REASONS["gpu_idle"])


@dataclass(frozen=True)
class StragglerOptions(Options):
    """Options of the straggler search, shared by
    :func:`~powerlab.throughput.stragglers.find_stragglers` and
    :func:`~powerlab.throughput.stragglers.straggler_baseline`.

    Parameters
    ----------
    metrics : tuple of str
        Metrics to score; any of ``clock_sm_mhz``, ``temp_gpu_c``, ``power_w``,
        ``temp_mem_c``.  Power is evidence only (per-GPU power is heavy-tailed in a
        healthy fleet); it never flags a GPU by itself.
    z_threshold : float
        Robust z of a persistent offset beyond which a GPU is flagged [-].
    window_s : float
        Aggregation window [s].
    min_shift_pct : float
        Smallest clock drop reported as a fail-slow episode; half of it is the smallest
        clock drop that makes excess throttle bits a flag [%].
    min_throttle_share : float
        Excess share of samples with slowing throttle bits (over the host's median GPU)
        that counts as evidence [-].
    cusum_h : float
        Alarm threshold of the fail-slow CUSUM [-].
    compute_fraction : float
        Share of the step time that scales with 1 / clock, for the cost estimate [-].
    min_peers : int
        Fewest GPUs at a timestamp for it to be scored.
    min_samples : int
        Fewest scored samples for a GPU to be judged.
    """

    metrics: tuple = ("clock_sm_mhz", "temp_gpu_c", "power_w")
    z_threshold: float = 4.0
    window_s: float = 900.0
    min_shift_pct: float = 1.0
    min_throttle_share: float = 0.05
    cusum_h: float = 8.0
    compute_fraction: float = 0.8
    min_peers: int = 4
    min_samples: int = 10

    def __post_init__(self):
        object.__setattr__(self, "metrics", tuple(self.metrics))


@dataclass
class FleetWork:
    """What the steps of one pass read and write (timestamps x GPUs matrices of the
    compute-phase rows, per-GPU evidence)."""

    tel: pd.DataFrame
    opts: StragglerOptions
    exclude: np.ndarray | None = None
    # index_fleet
    tu: np.ndarray = None
    tcode: np.ndarray = None
    gcode: np.ndarray = None
    gu: pd.MultiIndex = None
    n_g: int = 0
    host_code: np.ndarray = None
    pos_code: np.ndarray = None
    uuid: np.ndarray = None
    bl: dict | None = None
    rows: np.ndarray = None
    tu_ok: np.ndarray = None
    wcode: np.ndarray = None
    n_w: int = 0
    win_ns: int = 0
    wstart: np.ndarray = None
    # peer_offsets and the evidence steps
    out: dict = field(default_factory=dict)
    chan: dict = field(default_factory=dict)
    change_hit: dict = field(default_factory=dict)
    mat: dict = field(default_factory=dict)
    win_raw: dict = field(default_factory=dict)
    win_loo: dict = field(default_factory=dict)
    win_clock: np.ndarray = None
    o_clock: np.ndarray = None
    clock: np.ndarray = None
    row_med: np.ndarray = None
    f_ref: float = np.nan
    gpu_ok: np.ndarray = None
    bits: np.ndarray = None
    present: np.ndarray = None
    excess: np.ndarray = None
    drop: np.ndarray = None
    bit_share: dict = field(default_factory=dict)
    loff: np.ndarray = None
    # flag_gpus, failslow_episodes
    score: np.ndarray = None
    p_value: np.ndarray = None
    best: np.ndarray = None
    flagged: np.ndarray = None
    reasons: list = None
    cause: np.ndarray = None
    eps: list = field(default_factory=list)
    n_eps: np.ndarray = None
    has_ep: np.ndarray = None
    repair: np.ndarray = None
    # regime_breaks (fleet-wide changes), group_levels, costs
    regimes: pd.DataFrame = None
    group_eps: pd.DataFrame = None
    regime_code: np.ndarray = None
    levels: dict = field(default_factory=dict)
    silent_limit: dict = field(default_factory=dict)
    z_group: float = np.nan
    cost_total: float = np.nan
    lost_tbl: pd.DataFrame = None

    def matrix(self, col, fill=np.nan, dtype=float):
        """Column ``col`` as a timestamps x GPUs matrix (all rows)."""
        a = np.full((len(self.tu), self.n_g), fill, dtype=dtype)
        a[self.tcode, self.gcode] = self.tel[col].to_numpy(dtype=dtype, na_value=fill)
        return a


def check_inputs(telemetry, opts: StragglerOptions) -> None:
    """Options and columns, checked before any work."""
    metrics, z_threshold = opts.metrics, opts.z_threshold
    compute_fraction, window_s = opts.compute_fraction, opts.window_s
    for m in metrics:
        if m not in METRICS:
            raise AnalysisError(f"unknown metric {m!r}; expected some of {tuple(METRICS)}")
    if not z_threshold > 0 or not 0 < compute_fraction <= 1 or not window_s > 0:
        raise AnalysisError("need z_threshold > 0, window_s > 0 and compute_fraction in "
                            "(0, 1]")
    need = ["timestamp", "host", "gpu_index", "clock_sm_mhz", *metrics]
    missing = [c for c in dict.fromkeys(need) if c not in telemetry.columns]
    if missing:
        raise SchemaError([Violation(c, "missing column (canonical telemetry expected)")
                           for c in missing])
    if not isinstance(telemetry["timestamp"].dtype, pd.DatetimeTZDtype):
        raise SchemaError([Violation("timestamp", "timestamps must be tz-aware UTC")])


def busy_rows(tel):
    """The busy GPU rows (no GpuIdle bit, utilisation above zero)."""
    keep = np.ones(len(tel), dtype=bool)
    if "scope" in tel.columns:
        keep &= (tel["scope"] == "gpu").fillna(False).to_numpy(dtype=bool)
    bits = (tel["throttle_reasons"].to_numpy(dtype=np.uint64, na_value=0)
            if "throttle_reasons" in tel.columns else np.zeros(len(tel), np.uint64))
    keep &= (bits & _IDLE_BIT) == 0
    if "util_gpu_pct" in tel.columns:
        keep &= ~(tel["util_gpu_pct"].to_numpy(dtype=float, na_value=np.nan) <= 0)
    return tel[keep]


def index_fleet(w: FleetWork, baseline) -> None:
    """Timestamps x GPUs codes, the baseline matched to the GPUs, the compute-phase rows
    and their windows."""
    tel, opts = w.tel, w.opts
    t = to_epoch_ns(tel["timestamp"])
    w.tcode, w.tu = pd.factorize(t, sort=True)
    hc, hu = pd.factorize(tel["host"].astype("string").to_numpy(), sort=True)
    gi = tel["gpu_index"].to_numpy(dtype=np.int64, na_value=-1)
    span = int(gi.max()) + 2
    w.gcode, gkey = pd.factorize(hc.astype(np.int64) * span + gi + 1, sort=True)
    w.gu = gu = pd.MultiIndex.from_arrays([np.asarray(hu)[gkey // span], gkey % span - 1])
    n_t, w.n_g = len(w.tu), len(gu)
    if w.n_g < opts.min_peers + 1:
        raise AnalysisError(f"{w.n_g} GPUs in the telemetry; need more than "
                            f"{opts.min_peers} to compare each GPU with its peers")
    w.host_code = pd.factorize(gu.get_level_values(0))[0]
    w.pos_code = np.asarray(gu.get_level_values(1), dtype=np.int64)
    w.uuid = (tel.groupby(w.gcode)["gpu_uuid"].first().reindex(range(w.n_g)).to_numpy()
              if "gpu_uuid" in tel.columns else np.full(w.n_g, pd.NA))
    w.bl = match_baseline(baseline, gu, w.uuid, w.host_code, opts.min_peers, opts.metrics)

    rows = np.bincount(w.tcode, minlength=n_t) >= opts.min_peers
    # compute phases only: moments where the fleet's median power (or utilisation) is
    # well below its usual level are checkpoints or evaluation, where clocks float up to
    # each chip's boost headroom and say nothing about stragglers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for col, frac in (("power_w", 0.85), ("util_gpu_pct", 0.9)):
            if col in tel.columns:
                med = np.nanmedian(w.matrix(col), axis=1)
                typical = np.nanmedian(med[rows]) if rows.any() else np.nan
                if np.isfinite(typical) and typical > 0:
                    rows &= ~(med < frac * typical)
    w.rows = rows
    tu_ok = w.tu_ok = w.tu[rows]
    # a window holds at least 4 samples whatever the sampling (a 15-min record has
    # 1-h windows), so that window means and their noise exist at every interval
    step_ns = np.median(np.diff(w.tu)) if len(w.tu) > 1 else 0
    win_ns = w.win_ns = int(max(opts.window_s * 1e9, 4 * step_ns))
    w.wcode = (tu_ok - tu_ok[0]) // win_ns if len(tu_ok) else tu_ok
    w.n_w = int(w.wcode.max()) + 1 if len(tu_ok) else 0
    w.wstart = tu_ok[0] + np.arange(w.n_w) * win_ns if w.n_w else np.array([])
