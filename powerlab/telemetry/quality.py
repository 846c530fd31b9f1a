"""Data-quality masks for telemetry (in the manner of pvanalytics ``quality``).

Each per-sample check (:func:`gaps`, :func:`stale`, :func:`counter_resets`,
:func:`implausible`) returns a boolean :class:`pandas.Series` aligned to the input frame's
index, ``True`` where the flagged condition holds, so masks can be combined (``|``, ``&``) and
counted.  Series are evaluated per device: per (host, scope, gpu_index), in time order.

Cross-device checks compare devices with each other: :func:`duplicate_devices` (series that
copy another device's, also shifted in time) returns groups of devices, and
:func:`clock_drift` (hosts whose clocks run off against the others) a table per host.
Methods and validation: ``docs/reliability_analytics.md``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from scipy.signal import correlate

from .._summary import Results, Summary
from ..exceptions import AnalysisError, SchemaError, Violation
from .schema import device_codes
from .timeutil import to_epoch_ns

__all__ = ["DEVICE_MODELS", "DuplicateDevices", "clock_drift", "counter_resets",
           "duplicate_devices", "gaps", "implausible", "quality_report", "stale"]

_KEY = ["host", "scope", "gpu_index"]


def _device_order(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row positions sorted by device then time, the device code of each sorted row and
    its time [ns since 1970]."""
    missing = [c for c in [*_KEY, "timestamp"] if c not in df.columns]
    if missing:
        raise SchemaError([Violation(c, "missing column needed for quality checks")
                           for c in missing])
    codes = device_codes(df)
    ts = to_epoch_ns(df["timestamp"])
    order = np.lexsort((ts, codes))
    return order, codes[order], ts[order]


def gaps(df: pd.DataFrame, max_gap_s: float) -> pd.Series:
    """Flag samples that follow a gap longer than ``max_gap_s`` in their device's series.

    Parameters
    ----------
    df : pandas.DataFrame
        Telemetry in the canonical schema.
    max_gap_s : float
        Largest normal spacing between consecutive samples of one device [s].

    Returns
    -------
    pandas.Series of bool
        ``True`` on the first sample after each gap.
    """
    if not max_gap_s > 0:  # also refuses NaN
        raise ValueError("max_gap_s must be positive [s]")
    order, codes, ts = _device_order(df)
    flag = np.zeros(len(df), dtype=bool)
    if len(df) > 1:
        same = codes[1:] == codes[:-1]
        dt_s = (ts[1:] - ts[:-1]) / 1e9
        flag[order[1:][same & (dt_s > max_gap_s)]] = True
    return pd.Series(flag, index=df.index, name="gap")


def stale(df: pd.DataFrame, column: str, min_run: int = 10, *, atol: float = 0.0) -> pd.Series:
    """Flag readings stuck at the same value for at least ``min_run`` consecutive samples.

    Parameters
    ----------
    df : pandas.DataFrame
        Telemetry in the canonical schema.
    column : str
        Measurement column to check (e.g. ``"power_w"``).
    min_run : int, default 10
        Shortest run of identical consecutive readings that counts as stale [samples].
    atol : float, default 0
        Readings closer than this are treated as identical [unit of the column].

    Returns
    -------
    pandas.Series of bool
        ``True`` on every sample of each stale run (NaN readings are never stale).
    """
    if column not in df.columns:
        raise SchemaError([Violation(column, "missing column for the stale check")])
    if min_run < 2:
        raise ValueError("min_run must be at least 2 [samples]")
    order, codes, _ = _device_order(df)
    vals = df[column].astype("float64").to_numpy()[order]
    n = len(vals)
    flag_sorted = np.zeros(n, dtype=bool)
    if n:
        with np.errstate(invalid="ignore"):
            same = np.zeros(n, dtype=bool)
            same[1:] = (codes[1:] == codes[:-1]) & (np.abs(vals[1:] - vals[:-1]) <= atol)
        # run ids: a new run starts wherever `same` is False
        run_id = np.cumsum(~same)
        run_len = np.bincount(run_id)[run_id]
        flag_sorted = (run_len >= min_run) & ~np.isnan(vals)
    flag = np.zeros(n, dtype=bool)
    flag[order] = flag_sorted
    return pd.Series(flag, index=df.index, name=f"stale_{column}")


def counter_resets(df: pd.DataFrame, column: str = "energy_j") -> pd.Series:
    """Flag samples where a cumulative counter (``energy_j``) went down.

    A decrease means the counter was reset (driver reload, GPU reset) or wrapped; energy
    computed by differencing must not span these samples.

    Returns
    -------
    pandas.Series of bool
        ``True`` on the first sample after each reset.
    """
    if column not in df.columns:
        raise SchemaError([Violation(column, "missing column for the counter-reset check")])
    order, codes, _ = _device_order(df)
    vals = df[column].astype("float64").to_numpy()[order]
    flag = np.zeros(len(df), dtype=bool)
    if len(df) > 1:
        # compare against the last valid (non-NaN) reading of the same device
        s = pd.Series(vals)
        valid_prev = s.groupby(codes).ffill().groupby(codes).shift(1).to_numpy()
        with np.errstate(invalid="ignore"):
            dec = vals < valid_prev
        flag[order[dec]] = True
    return pd.Series(flag, index=df.index, name=f"reset_{column}")


def quality_report(df: pd.DataFrame, *, max_gap_s: float, stale_min_run: int = 10,
                   stale_columns=("power_w", "temp_gpu_c")) -> pd.DataFrame:
    """Count flagged samples per device: gaps, stale readings and counter resets."""
    masks = {"gap": gaps(df, max_gap_s)}
    for c in stale_columns:
        if c in df.columns:
            masks[f"stale_{c}"] = stale(df, c, stale_min_run)
    if "energy_j" in df.columns:
        masks["reset_energy_j"] = counter_resets(df)
    m = pd.DataFrame(masks)
    m[_KEY] = df[_KEY]
    out = m.groupby(_KEY, observed=True, dropna=False).sum()
    out["samples"] = m.groupby(_KEY, observed=True, dropna=False).size()
    return out.reset_index()


# --------------------------------------------------------------------------- cross-device
def _device_label(host, scope, gpu_index) -> str:
    if gpu_index is None or pd.isna(gpu_index):
        return f"{host}/{scope}"
    return f"{host}/gpu{int(gpu_index)}"


class DuplicateDevices(Results):
    """Devices whose series copy another device's (see :func:`duplicate_devices`).

    Attributes
    ----------
    pairs : pandas.DataFrame
        One row per matching pair: ``device_a``, ``device_b`` (labels ``host/gpuN``),
        ``match`` (``identical``: same values at the same times; ``shifted``: same values,
        times shifted by ``shift_s``; ``near-identical``: equal within tolerance at the
        same times), ``shift_s`` [s], ``share`` (fraction of the shorter series matched).
    groups : list of list of str
        Connected groups of devices (each sorted), largest first.
    column : str
    """

    def __init__(self, pairs: pd.DataFrame, column: str):
        self.pairs = pairs
        self.column = column
        self.groups = _connected_groups(pairs)

    def __bool__(self) -> bool:
        return bool(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

    def lines(self) -> list[str]:
        """One line per group, naming its members and the word ``identical``."""
        out = []
        for g in self.groups:
            sub = self.pairs[self.pairs["device_a"].isin(g) | self.pairs["device_b"].isin(g)]
            notes = []
            for k in sorted(set(sub["match"]) - {"identical"}):
                if k == "shifted":
                    shift = sub.loc[sub["match"] == "shifted", "shift_s"].iloc[0]
                    notes.append(f"shifted by {shift:g} s")
                else:
                    notes.append(k)
            how = "identical" + (f" ({', '.join(notes)})" if notes else "")
            out.append(f"{len(g)} devices with {how} {self.column} series: {', '.join(g)}")
        return out

    def summary_frame(self) -> pd.DataFrame:
        """The matching pairs (:attr:`pairs`) with a ``group`` number."""
        gid = {d: i for i, g in enumerate(self.groups) for d in g}
        return self.pairs.assign(group=self.pairs["device_a"].map(gid))

    def summary(self) -> Summary:
        """One line per group of devices with identical series."""
        s = Summary()
        s.add_text(self.lines() if self.groups else
                   f"no devices with identical {self.column} series")
        return s

    def _repr_line(self) -> str:
        return (f"<DuplicateDevices {self.column}: {len(self.groups)} group(s), "
                f"{len(self.pairs)} pair(s)>")


def _connected_groups(pairs: pd.DataFrame) -> list[list[str]]:
    parent: dict[str, str] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(pairs["device_a"], pairs["device_b"]):
        parent[find(a)] = find(b)
    groups: dict[str, list[str]] = {}
    for d in parent:
        groups.setdefault(find(d), []).append(d)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g))


def duplicate_devices(df: pd.DataFrame, column: str = "power_w", *, window: int = 8,
                      min_share: float = 0.5, decimals: int = 3, rtol: float = 0.002,
                      atol: float = 0.5, near_share: float = 0.95,
                      min_samples: int = 20) -> DuplicateDevices:
    """Find devices whose series are copies of another device's.

    Two checks:

    * **Copies, also shifted in time.** Each device's series (rounded to ``decimals``) is
      cut into overlapping windows of ``window`` consecutive readings; windows that vary
      (not all equal) are hashed.  Two devices sharing at least ``min_share`` of the
      shorter series' windows are copies; the most common time difference between shared
      windows is the shift (0: ``identical``, else ``shifted``).  Constant stretches (idle
      GPUs at one reading) never match.
    * **Near-identical.** Devices sampled at the same times whose readings agree within
      ``max(atol, rtol*|x|)`` in at least ``near_share`` of their common samples
      (a copy with rounding or tiny noise).  GPUs of one synchronous job differ by watts to
      tens of watts and are not flagged.

    Parameters
    ----------
    df : pandas.DataFrame
        Telemetry in the canonical schema.
    column : str, default "power_w"
    window : int, default 8
        Readings per hashed window [samples].
    min_share : float, default 0.5
        Share of the shorter series' windows two copies must share [-].
    decimals : int, default 3
        Readings are compared after rounding to this many decimals.
    rtol, atol : float
        Tolerance of the near-identical check [-], [unit of the column].
    near_share : float, default 0.95
    min_samples : int, default 20
        Devices with fewer readings are not compared.

    Returns
    -------
    DuplicateDevices

    Notes
    -----
    The near-identical check aligns all devices on one time index; beyond 50 million
    cells (1,000 GPUs x 14 h at 1 s) it is left out and only copies are looked for.
    """
    if column not in df.columns:
        raise SchemaError([Violation(column, "missing column for the duplicate check")])
    order, codes, ts = _device_order(df)
    vals = df[column].astype("float64").to_numpy()[order]
    keys = df[_KEY].iloc[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else []
    bounds = list(zip(starts, [*starts[1:], len(codes)]))
    labels, series = [], []
    for a, b in bounds:
        v, t = vals[a:b], ts[a:b]
        ok = ~np.isnan(v)
        if ok.sum() < min_samples:
            continue
        k = keys.iloc[a]
        labels.append(_device_label(k["host"], k["scope"], k["gpu_index"]))
        series.append((t[ok], v[ok]))
    rows = _copy_pairs(labels, series, window, min_share, decimals)
    seen = {(r["device_a"], r["device_b"]) for r in rows}
    rows += [r for r in _near_pairs(labels, series, rtol, atol, near_share, min_samples)
             if (r["device_a"], r["device_b"]) not in seen]
    pairs = pd.DataFrame(rows, columns=["device_a", "device_b", "match", "shift_s", "share"])
    return DuplicateDevices(pairs, column)


def _copy_pairs(labels, series, window, min_share, decimals) -> list[dict]:
    rng = np.random.default_rng(12345)
    mult = rng.integers(1, 2**63 - 1, size=window, dtype=np.int64).astype(np.uint64) | 1
    hs, devs, tss, n_windows = [], [], [], []
    for i, (t, v) in enumerate(series):
        if len(v) < window:
            n_windows.append(0)
            continue
        q = np.round(v * 10.0**decimals).astype(np.int64).astype(np.uint64)
        w = sliding_window_view(q, window)
        varying = (w != w[:, :1]).any(axis=1)
        with np.errstate(over="ignore"):
            h = (w * mult).sum(axis=1, dtype=np.uint64)
        h = h[varying]
        n_windows.append(len(h))
        hs.append(h)
        devs.append(np.full(len(h), i))
        tss.append(t[: len(varying)][varying])
    if not hs:
        return []
    g = pd.DataFrame({"h": np.concatenate(hs), "dev": np.concatenate(devs),
                      "t": np.concatenate(tss)}).drop_duplicates(["h", "dev"])
    multi = g["h"].duplicated(keep=False)
    g = g[multi]
    if g.empty:
        return []
    m = g.merge(g, on="h", suffixes=("_a", "_b"))
    m = m[m["dev_a"] < m["dev_b"]]
    if m.empty:
        return []
    m["shift"] = m["t_b"] - m["t_a"]
    out = []
    for (a, b), grp in m.groupby(["dev_a", "dev_b"]):
        share = len(grp) / max(min(n_windows[a], n_windows[b]), 1)
        if share < min_share:
            continue
        shift_s = float(grp["shift"].mode().iloc[0]) / 1e9
        out.append({"device_a": labels[a], "device_b": labels[b],
                    "match": "identical" if shift_s == 0 else "shifted",
                    "shift_s": shift_s, "share": float(share)})
    return out


def _near_pairs(labels, series, rtol, atol, near_share, min_samples,
                max_cells=50_000_000) -> list[dict]:
    if len(series) < 2 or sum(len(t) for t, _ in series) > max_cells:
        return []
    wide = pd.DataFrame({i: pd.Series(v, index=t) for i, (t, v) in enumerate(series)
                         if not pd.Index(t).has_duplicates})
    if wide.shape[1] < 2 or wide.size > max_cells:
        return []
    x = wide.to_numpy()
    cols = list(wide.columns)
    out = []
    # candidates first: devices whose means agree within tolerance
    means = np.nanmean(x, axis=0)
    for j in range(len(cols)):
        tol_j = max(atol, rtol * abs(means[j]))
        cand = np.flatnonzero((np.arange(len(cols)) > j)
                              & (np.abs(means - means[j]) <= 2 * tol_j))
        for k in cand:
            both = ~np.isnan(x[:, j]) & ~np.isnan(x[:, k])
            n = both.sum()
            if n < min_samples:
                continue
            a, b = x[both, j], x[both, k]
            if np.all(a == a[0]):        # a constant reading is no fingerprint
                continue
            close = np.abs(a - b) <= np.maximum(atol, rtol * np.abs(a))
            if close.mean() >= near_share:
                out.append({"device_a": labels[cols[j]], "device_b": labels[cols[k]],
                            "match": "identical" if np.all(a == b) else "near-identical",
                            "shift_s": 0.0, "share": float(close.mean())})
    return out


def clock_drift(df: pd.DataFrame, column: str = "power_w", *, grid_s: float | None = None,
                window_s: float = 900.0, max_lag_s: float = 120.0,
                min_corr: float = 0.5, max_offset_s: float | None = None) -> pd.DataFrame:
    """Hosts whose clocks run off against the others.

    Synchronous work (a training job's steps, checkpoints, restarts) moves every host's
    power at the same true moments.  Per window, each host's total ``column`` is
    cross-correlated (first differences, on a common grid) with the median of the other
    hosts; the lag of the peak is the host's clock offset in that window.  A linear fit of
    offset against time gives the drift.

    Parameters
    ----------
    grid_s : float, optional
        Grid spacing [s] (default: the median sampling interval).
    window_s : float, default 900
        Window length [s]; the drift within one window should stay below a grid step.
    max_lag_s : float, default 120
        Largest offset searched [s].
    min_corr : float, default 0.5
        Windows whose peak correlation is below this carry no timing and are left out.
    max_offset_s : float, optional
        Offset beyond which a host is flagged (default: two grid steps).

    Returns
    -------
    pandas.DataFrame
        Per host: ``windows`` used, ``offset_s`` (median offset; positive: the host's
        clock runs ahead) [s], ``drift_s_per_h`` [s/h], ``flagged``.
    """
    hosts = df["host"].astype(str)
    t = df["timestamp"]
    if grid_s is None:
        dt = t.sort_values().groupby(hosts.loc[t.sort_values().index]).diff()
        grid_s = float(np.nanmedian(dt.dt.total_seconds()[dt.dt.total_seconds() > 0]))
    if max_offset_s is None:
        max_offset_s = 2 * grid_s
    wide = (df.assign(_t=t.dt.floor(pd.Timedelta(seconds=grid_s)), _h=hosts)
            .groupby(["_t", "_h"])[column].mean().unstack("_h"))
    full = pd.date_range(wide.index.min(), wide.index.max(), freq=pd.Timedelta(seconds=grid_s))
    wide = wide.reindex(full).interpolate(limit=3)
    names = list(wide.columns)
    if len(names) < 3:
        raise AnalysisError(f"clock drift needs at least 3 hosts, got {len(names)}")
    x = wide.diff().to_numpy()
    L = round(max_lag_s / grid_s)
    per = max(int(window_s / grid_s), 4 * L + 8)
    rows = {h: [] for h in names}
    for s0 in range(0, len(x) - per + 1, per):
        seg = x[s0:s0 + per]
        for j, h in enumerate(names):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)   # all-NaN grid rows
                ref = np.nanmedian(np.delete(seg, j, axis=1), axis=1)
            lag, corr = _best_lag(seg[:, j], ref, L)
            if corr >= min_corr:
                # lag > 0: the host stamps events early, i.e. its clock is behind
                rows[h].append((s0 + per / 2, -lag * grid_s))
    out = []
    for h in names:
        r = np.array(rows[h]) if rows[h] else np.empty((0, 2))
        off = float(np.median(r[:, 1])) if len(r) else np.nan
        slope = np.nan
        if len(r) >= 3 and np.ptp(r[:, 0]) > 0:
            slope = float(np.polyfit(r[:, 0] * grid_s / 3600.0, r[:, 1], 1)[0])
        span_h = len(x) * grid_s / 3600.0
        worst = max(abs(off) if np.isfinite(off) else 0.0,
                    abs(slope) * span_h if np.isfinite(slope) else 0.0)
        out.append({"host": h, "windows": len(r), "offset_s": off, "drift_s_per_h": slope,
                    "flagged": bool(len(r) and worst > max_offset_s)})
    return pd.DataFrame(out)


def _best_lag(a: np.ndarray, b: np.ndarray, L: int) -> tuple[int, float]:
    """Lag [samples] in ``[-L, L]`` maximising the correlation of ``a[i]`` with
    ``b[i + lag]``, and that correlation (NaN readings count as the mean)."""
    def z(x):
        x = np.where(np.isnan(x), np.nanmean(x), x)
        sd = x.std()
        return (x - x.mean()) / sd if sd > 0 else None

    za, zb = z(a), z(b)
    if za is None or zb is None:
        return 0, -np.inf
    n = len(za)
    c = correlate(zb, za, mode="full", method="fft") / n     # index n-1+lag: sum a[i] b[i+lag]
    lags = np.arange(-L, L + 1)
    c = c[n - 1 + lags]
    i = int(np.argmax(c))
    return int(lags[i]), float(c[i])


#: Upper limits of plausible readings per device model: board power [W] (the maximum
#: power limit), SM clock [MHz] (maximum boost).  Names match nvidia-smi's ``name``.
DEVICE_MODELS = {
    "NVIDIA H100 80GB HBM3": {"power_w": 700.0, "clock_sm_mhz": 1980.0},
    "NVIDIA H100 PCIe": {"power_w": 350.0, "clock_sm_mhz": 1755.0},
    "NVIDIA H200": {"power_w": 700.0, "clock_sm_mhz": 1980.0},
    "NVIDIA A100-SXM4-80GB": {"power_w": 400.0, "clock_sm_mhz": 1410.0},
    "NVIDIA A100-SXM4-40GB": {"power_w": 400.0, "clock_sm_mhz": 1410.0},
    "NVIDIA A100 80GB PCIe": {"power_w": 300.0, "clock_sm_mhz": 1410.0},
    "NVIDIA B200": {"power_w": 1000.0, "clock_sm_mhz": 1965.0},
    "NVIDIA L40S": {"power_w": 350.0, "clock_sm_mhz": 2520.0},
    "Tesla V100-SXM2-32GB": {"power_w": 300.0, "clock_sm_mhz": 1530.0},
}


def implausible(df: pd.DataFrame, model: str | None = None, *,
                power_margin: float = 1.5, clock_margin: float = 1.02,
                temp_range_c: tuple[float, float] = (5.0, 110.0)) -> pd.Series:
    """Flag GPU readings impossible for the device model.

    A reading is implausible when power is negative or above ``power_margin`` times the
    model's maximum power limit (or the row's ``power_limit_w``; transients exceed the limit
    briefly, not by half), the SM clock is above ``clock_margin`` times the model's maximum
    boost clock, or the GPU temperature lies outside ``temp_range_c`` (a running GPU is
    above ambient; hardware shutdown is below 110 °C).

    Parameters
    ----------
    df : pandas.DataFrame
        Telemetry in the canonical schema (node rows are not checked).
    model : str, optional
        A key of :data:`DEVICE_MODELS`; without it only ``power_limit_w`` and the
        temperature range are used.

    Returns
    -------
    pandas.Series of bool
    """
    if model is not None and model not in DEVICE_MODELS:
        raise ValueError(f"unknown device model {model!r}; known: {sorted(DEVICE_MODELS)}")
    lim = DEVICE_MODELS.get(model, {})
    gpu = (df["scope"] == "gpu").to_numpy() if "scope" in df.columns else np.ones(len(df), bool)
    flag = np.zeros(len(df), dtype=bool)
    with np.errstate(invalid="ignore"):
        if "power_w" in df.columns:
            p = df["power_w"].astype("float64").to_numpy()
            cap = np.full(len(df), lim.get("power_w", np.nan))
            if "power_limit_w" in df.columns:
                pl = df["power_limit_w"].astype("float64").to_numpy()
                cap = np.where(np.isnan(cap), pl, np.fmax(cap, pl))
            flag |= (p < 0) | (p > power_margin * cap)
        if "clock_sm_mhz" in df.columns and "clock_sm_mhz" in lim:
            flag |= df["clock_sm_mhz"].astype("float64").to_numpy() > \
                clock_margin * lim["clock_sm_mhz"]
        if "temp_gpu_c" in df.columns:
            tc = df["temp_gpu_c"].astype("float64").to_numpy()
            flag |= (tc < temp_range_c[0]) | (tc > temp_range_c[1])
    return pd.Series(flag & gpu, index=df.index, name="implausible")
