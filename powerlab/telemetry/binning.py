"""Per-device time-binning kernels shared by the aggregations (pandas and Dask alike).

Each kernel works on one frame that holds whole device-days: rows are ordered by device
then time (:class:`SortedDevices`, duplicates of a (device, timestamp) dropped, first
kept), cut at bin edges, and reduced with ``numpy.ufunc.reduceat``.  The energy kernel
integrates the cumulative counter across resets and leaves what it needs from the previous
partition in private columns that :func:`energy_fix` stitches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError

__all__ = ["DAY_NS", "DEVICE_KEY", "SortedDevices", "bin_width_ns", "energy_fix", "energy_kernel",
           "energy_tail", "factor", "merge_tail", "resample_kernel", "utc_series"]

#: A device: one (host, scope, gpu_index).
DEVICE_KEY = ["host", "scope", "gpu_index"]
DAY_NS = 86_400 * 10**9


def bin_width_ns(freq: str | pd.Timedelta) -> int:
    try:
        td = pd.Timedelta(freq)
    except (ValueError, TypeError) as exc:
        raise PowerlabError(f"freq {freq!r} is not a time span (expected e.g. '1s', '1min', "
                            "'1h')") from exc
    ns = int(td.value)
    if ns <= 0 or DAY_NS % ns:
        raise PowerlabError(f"freq {freq!r} must be positive and divide one day "
                            "(e.g. '1s', '1min', '15min', '1h') so bins never straddle "
                            "a UTC midnight")
    return ns


def factor(s: pd.Series) -> tuple[np.ndarray, pd.api.extensions.ExtensionArray]:
    """Codes ordered like the sorted values (-1 for NA) and the "string" uniques."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = np.asarray(s.cat.categories.astype(str), dtype=object)
        order = np.argsort(cats, kind="stable")
        rank = np.empty(len(cats), dtype=np.int64)
        rank[order] = np.arange(len(cats))
        raw = s.array.codes.astype(np.int64)   # (int8 fancy indices are slow)
        if (order == np.arange(len(cats))).all():  # categories already sorted
            codes = raw                             # code -1 (NA) stays -1
        else:
            codes = np.append(rank, -1)[raw]
        return codes, pd.array(cats[order], dtype="string")
    codes, uniq = pd.factorize(s.astype("string"), sort=True, use_na_sentinel=True)
    return codes.astype(np.int64), pd.array(uniq, dtype="string")


def _int_or_minus_one(s: pd.Series) -> np.ndarray:
    """int64 values of an integer column, NA as -1 (without a pandas round trip)."""
    if isinstance(s.array, pd.arrays.IntegerArray):
        return s.to_numpy(dtype=np.int64, na_value=-1)
    return s.astype("Int64").fillna(-1).to_numpy(dtype=np.int64)


def _device_time_order(code, ts, hc, sc, gi) -> np.ndarray:
    """Stable order by device, then time.

    Store files hold each device's rows in time order, so a stable sort by device alone
    usually suffices: with fewer than 65,536 devices that is a radix sort of 16-bit keys
    (about twice as fast as a two-key lexsort); the time order is then checked, and the
    lexsort is the fallback.
    """
    n_s = int(sc.max()) + 2 if len(sc) else 1
    n_g = int(gi.max()) + 2 if len(gi) else 1
    dense = ((hc + 1) * n_s + (sc + 1)) * n_g + (gi + 1)
    if len(dense) and dense.max() < 2**16:
        pos = np.argsort(dense.astype(np.uint16), kind="stable")
        c, t = code[pos], ts[pos]
        if np.all((c[1:] != c[:-1]) | (t[1:] >= t[:-1])):
            return pos
    return np.lexsort((ts, code))


class SortedDevices:
    """Rows of a frame sorted by device then time (stable), duplicates dropped."""

    def __init__(self, df: pd.DataFrame):
        n = len(df)
        hc, self._hosts = factor(df["host"])
        sc, self._scopes = factor(df["scope"])
        gi = _int_or_minus_one(df["gpu_index"])
        code = ((hc + 1) * 4 + (sc + 1)) * 2048 + (gi + 1)
        ts = df["timestamp"].to_numpy(dtype="datetime64[ns]").view(np.int64) if n \
            else np.zeros(0, np.int64)
        if n < 2 or np.all((code[1:] > code[:-1])
                           | ((code[1:] == code[:-1]) & (ts[1:] >= ts[:-1]))):
            pos = np.arange(n)
        else:
            pos = _device_time_order(code, ts, hc, sc, gi)
            code, ts = code[pos], ts[pos]
        keep = np.ones(n, dtype=bool)
        keep[1:] = (code[1:] != code[:-1]) | (ts[1:] != ts[:-1])
        if not keep.all():
            pos, code, ts = pos[keep], code[keep], ts[keep]
        self.df, self.pos, self.code, self.ts = df, pos, code, ts
        self._hc, self._sc, self._gi = hc, sc, gi

    def __len__(self) -> int:
        return len(self.pos)

    def values(self, column: str) -> np.ndarray:
        """float64 values of a column in sorted order (NA as NaN)."""
        return self.df[column].to_numpy(dtype=np.float64, na_value=np.nan)[self.pos]

    def column(self, column: str) -> pd.Series:
        return self.df[column].take(self.pos).reset_index(drop=True)

    def keys(self, rows: np.ndarray, uuid_rows: np.ndarray | None = None) -> dict:
        """host, scope, gpu_index (and gpu_uuid) of the sorted rows ``rows``."""
        p = self.pos[rows]
        gi = self._gi[p]
        out = {
            "host": pd.Series(self._hosts.take(self._hc[p], allow_fill=True)),
            "scope": pd.Series(self._scopes.take(self._sc[p], allow_fill=True)),
            "gpu_index": pd.Series(pd.arrays.IntegerArray(gi.astype(np.int16), gi < 0)),
        }
        if uuid_rows is not None:
            uc, uu = factor(self.df["gpu_uuid"])
            out["gpu_uuid"] = pd.Series(uu.take(uc[self.pos[uuid_rows]], allow_fill=True))
        return out


def utc_series(ns: np.ndarray) -> pd.Series:
    return pd.Series(ns.astype("datetime64[ns]")).dt.tz_localize("UTC")


def resample_kernel(df: pd.DataFrame, bin_ns: int, means: Sequence[str],
                     energy: bool, throttle: bool) -> pd.DataFrame:
    """Per (device, bin) aggregates of one partition holding whole device-days.

    Energy needs the last valid counter reading before the partition for the first bin
    of each device; those rows carry ``_e_first``, ``_e_end1`` and ``_s_rest`` for
    :func:`energy_fix`.
    """
    srt = SortedDevices(df)
    code, ts = srt.code, srt.ts
    n = len(srt)
    b = ts // bin_ns
    new = np.ones(n, dtype=bool)
    if n:
        new[1:] = (code[1:] != code[:-1]) | (b[1:] != b[:-1])
    starts = np.flatnonzero(new)
    ng = len(starts)
    last = np.append(starts[1:], n) - 1 if ng else starts
    out = {"timestamp": utc_series(b[starts] * bin_ns)}
    out.update(srt.keys(starts, uuid_rows=last if "gpu_uuid" in df.columns else None))
    out["n_samples"] = pd.Series(np.diff(np.append(starts, n)), dtype="int64")
    with np.errstate(invalid="ignore", divide="ignore"):
        for c in means:
            v = srt.values(c)
            ok = ~np.isnan(v)
            s = np.add.reduceat(np.where(ok, v, 0.0), starts) if ng else np.zeros(0)
            k = np.add.reduceat(ok.astype(np.int64), starts) if ng else np.zeros(0, np.int64)
            out[c] = pd.Series(s / k, dtype="float64")
    if throttle:
        t = srt.column("throttle_reasons").astype("UInt64")
        ok = ~t.isna().to_numpy()
        raw = t.to_numpy(dtype=np.uint64, na_value=0)
        acc = np.bitwise_or.reduceat(raw, starts) if ng else np.zeros(0, np.uint64)
        k = np.add.reduceat(ok.astype(np.int64), starts) if ng else np.zeros(0, np.int64)
        out["throttle_reasons"] = pd.Series(pd.arrays.IntegerArray(acc, k == 0))
    if energy:
        out.update(energy_kernel(srt.values("energy_j"), code, starts, new, ng))
    return pd.DataFrame(out)


def energy_kernel(e, code, starts, new, ng) -> dict[str, pd.Series]:
    gid = np.cumsum(new) - 1
    idx = np.flatnonzero(~np.isnan(e))
    ev, ec, g = e[idx], code[idx], gid[idx]
    m = len(ev)
    last_e = np.full(ng, np.nan)
    delta = np.full(ng, np.nan)
    e_first = np.full(ng, np.nan)
    e_end1 = np.full(ng, np.nan)
    s_rest = np.full(ng, np.nan)
    if m:
        grp_start = np.ones(m, dtype=bool)
        grp_start[1:] = g[1:] != g[:-1]
        reset = np.zeros(m, dtype=bool)
        reset[1:] = (ec[1:] == ec[:-1]) & (ev[1:] < ev[:-1])
        seg_start = grp_start | reset
        seg_first = np.flatnonzero(seg_start)
        seg_last = np.append(seg_first[1:], m) - 1
        seg_id = np.cumsum(seg_start) - 1
        contrib = np.where(grp_start[seg_first], 0.0, ev[seg_last] - ev[seg_first])
        grp_seg0 = seg_id[grp_start]            # first segment of each group
        rest = np.add.reduceat(contrib, grp_seg0)
        first_pos = np.flatnonzero(grp_start)
        end1 = ev[seg_last[grp_seg0]]
        has_pred = np.zeros(len(first_pos), dtype=bool)
        fp = first_pos[first_pos > 0]
        has_pred[first_pos > 0] = ec[fp - 1] == ec[fp]
        pred = np.where(has_pred, ev[np.maximum(first_pos - 1, 0)], np.nan)
        use_pred = has_pred & (ev[first_pos] >= pred)
        start1 = np.where(use_pred, pred, ev[first_pos])
        gg = g[first_pos]
        delta[gg] = (end1 - start1) + rest
        last_end = np.append(first_pos[1:], m) - 1
        last_e[gg] = ev[last_end]
        pending = gg[~has_pred]
        pend_sel = ~has_pred
        e_first[pending] = ev[first_pos][pend_sel]
        e_end1[pending] = end1[pend_sel]
        s_rest[pending] = rest[pend_sel]
    return {"energy_j": pd.Series(last_e), "energy_delta_j": pd.Series(delta),
            "_e_first": pd.Series(e_first), "_e_end1": pd.Series(e_end1),
            "_s_rest": pd.Series(s_rest)}


def energy_fix(part: pd.DataFrame, carry: pd.DataFrame | None) -> pd.DataFrame:
    """Stitch each device's first energy bin to its last reading before the partition."""
    if "_e_first" not in part.columns:
        return part
    part = part.copy()
    if carry is not None and len(carry) and len(part):
        pend = part["_e_first"].notna().to_numpy()
        if pend.any():
            left = part.loc[pend, DEVICE_KEY].reset_index()
            m = left.merge(carry[[*DEVICE_KEY, "energy_j"]], on=DEVICE_KEY, how="left")
            m = m[m["energy_j"].notna()]
            if len(m):
                rows = m["index"].to_numpy()
                p = m["energy_j"].to_numpy(dtype=np.float64)
                ef = part.loc[rows, "_e_first"].to_numpy()
                ok = ef >= p
                rows, p = rows[ok], p[ok]
                part.loc[rows, "energy_delta_j"] = (
                    part.loc[rows, "_e_end1"].to_numpy() - p) + part.loc[rows, "_s_rest"].to_numpy()
    return part.drop(columns=["_e_first", "_e_end1", "_s_rest"])


def energy_tail(part: pd.DataFrame) -> pd.DataFrame:
    """Per device: the last valid counter reading of a resampled partition."""
    p = part.loc[part["energy_j"].notna(), [*DEVICE_KEY, "timestamp", "energy_j"]]
    return p.groupby(DEVICE_KEY, dropna=False, observed=True, sort=False).tail(1)


def merge_tail(prev: pd.DataFrame | None, *tails: pd.DataFrame) -> pd.DataFrame:
    frames = [t for t in ((prev,) + tails) if t is not None and len(t)]
    if not frames:
        return tails[0].iloc[:0] if tails else pd.DataFrame()
    c = pd.concat(frames, ignore_index=True).sort_values("timestamp", kind="stable")
    return c.groupby(DEVICE_KEY, dropna=False, observed=True, sort=False).tail(1)
