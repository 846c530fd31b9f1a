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
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import PowerlabError, StoreError
from .timeutil import to_epoch_ns

__all__ = ["DAY_NS", "DEVICE_KEY", "BinSums", "DeviceMeans", "SortedDevices", "bin_width_ns",
           "energy_fix", "energy_kernel", "energy_tail", "factor", "kahan_add", "merge_tail",
           "resample_kernel", "utc_series"]

#: A device: one (host, scope, gpu_index).
DEVICE_KEY = ["host", "scope", "gpu_index"]
DAY_NS = 86_400 * 10**9
#: Narrowest bin [ns]: 10 ms (the collector's finest useful interval); narrower bins
#: allocate arrays of span / width values (issue 24: '1ns' asked for 67 GiB).
MIN_BIN_NS = 10**7


def bin_width_ns(freq: str | pd.Timedelta) -> int:
    try:
        td = pd.Timedelta(freq)
    except (ValueError, TypeError) as exc:
        raise PowerlabError(f"freq {freq!r} is not a time span (expected e.g. '1s', '1min', "
                            "'1h')") from exc
    ns = int(td.value)
    if 0 < ns < MIN_BIN_NS:
        per_day = DAY_NS // ns
        raise PowerlabError(f"freq {freq!r} makes {per_day:,} bins per day (about "
                            f"{per_day * 8 / 2**30:,.1f} GiB per array and day); the "
                            f"narrowest bin is {MIN_BIN_NS / 1e6:g} ms")
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
        ts = to_epoch_ns(df["timestamp"]) if n \
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


# ------------------------------------------------- streaming sums of device means (stores)

class DeviceMeans:
    """Per (device, bin) means of one host's telemetry read straight from Arrow tables.

    The tables are one store folder's files (one date, one host) in file order.  Rows are
    put in device-then-time order (stable, so a duplicate (device, timestamp) keeps its
    first sample), and each device's bins are reduced exactly as :func:`resample_kernel`
    reduces them (the same ``numpy.add.reduceat`` over the same values), so the means are
    bit for bit those of the pandas path.

    Attributes: ``scopes`` (sorted scope names), per device ``dev_scope`` (index into
    ``scopes``) and ``dev_gpu`` (gpu_index, -1 for NA), ``dev_bounds`` (offsets of each
    device's bins), and per (device, bin) ``bins`` (bin numbers since the epoch) and
    ``means`` (NaN where no valid reading) [W].
    """

    def __init__(self, tables, bin_ns: int, column: str = "power_w",
                 scope: str | None = None):
        batches = [rb for t in tables for rb in t.to_batches() if rb.num_rows]
        cols = [_batch_columns(rb, column) for rb in batches]
        names = {v for c in cols for v in c[1]}
        self.scopes = sorted(names - {None})
        if None in names:
            self.scopes.insert(0, None)                     # NA sorts first, as in pandas
        rank = {s: i for i, s in enumerate(self.scopes)}
        want = rank.get(scope, -1)
        ts_parts, code_parts, val_parts = [], [], []
        for ts, dict_names, sc_idx, gi, val in cols:
            lut = np.array([rank[s] for s in dict_names] or [0], np.int64)
            sco = lut[sc_idx]
            code = sco * 65_536 + (gi.astype(np.int64) + 1)
            if scope is not None:
                keep = sco == want
                if not keep.all():
                    code, ts, val = code[keep], ts[keep], val[keep]
            ts_parts.append(ts)
            code_parts.append(code)
            val_parts.append(val)

        def cat(parts, dtype):
            return np.concatenate(parts) if len(parts) != 1 else parts[0] if parts \
                else np.zeros(0, dtype)

        ts = cat(ts_parts, np.int64)
        code = cat(code_parts, np.int64)
        val = cat(val_parts, np.float64)
        n = len(ts)
        if n > 1:
            dc, dt = np.diff(code), np.diff(ts)
            if not np.all((dc > 0) | ((dc == 0) & (dt >= 0))):
                pos = np.lexsort((ts, code))
                ts, code, val = ts[pos], code[pos], val[pos]
                dc, dt = np.diff(code), np.diff(ts)
            dup = (dc == 0) & (dt == 0)
            if dup.any():
                keep = np.append(True, ~dup)
                ts, code, val = ts[keep], code[keep], val[keep]
                n = len(ts)
        b = ts // bin_ns
        new = np.ones(n, dtype=bool)
        new[1:] = (code[1:] != code[:-1]) | (b[1:] != b[:-1])
        starts = np.flatnonzero(new)
        if len(starts):
            with np.errstate(invalid="ignore", divide="ignore"):
                ok = ~np.isnan(val)
                if ok.all():
                    s = np.add.reduceat(val, starts)
                    k = np.diff(np.append(starts, n))
                else:
                    s = np.add.reduceat(np.where(ok, val, 0.0), starts)
                    k = np.add.reduceat(ok.astype(np.int64), starts)
                self.means = s / k
        else:
            self.means = np.zeros(0)
        self.bins = b[starts]
        gcode = code[starts]
        dnew = np.ones(len(gcode), dtype=bool)
        dnew[1:] = gcode[1:] != gcode[:-1]
        first = np.flatnonzero(dnew)
        self.dev_bounds = np.append(first, len(gcode))
        self.dev_scope = gcode[first] // 65_536
        self.dev_gpu = gcode[first] % 65_536 - 1
        self.rows = n

    def __len__(self) -> int:
        return len(self.dev_scope)


def _batch_columns(rb, column: str):
    """(timestamps [ns], scope dictionary, scope indices, gpu_index (-1 for NA), values)
    of one record batch; absent optional columns read as NA, as :func:`read_files` does."""
    n = rb.num_rows
    names = rb.schema.names
    ts = rb.column("timestamp")
    if ts.null_count:
        raise StoreError("a store file holds rows without a timestamp")
    ts = ts.cast(pa.int64()).to_numpy(zero_copy_only=False)
    if "scope" in names:
        sc = rb.column("scope")
        if not pa.types.is_dictionary(sc.type):
            sc = pc.dictionary_encode(sc)
        dict_names = sc.dictionary.to_pylist()
        idx = sc.indices
        if sc.null_count:
            dict_names = [*dict_names, None]
            idx = pc.fill_null(idx, len(dict_names) - 1)
        idx = idx.to_numpy(zero_copy_only=False).astype(np.intp, copy=False)
    else:
        dict_names, idx = [None], np.zeros(n, np.intp)
    gi = (pc.fill_null(rb.column("gpu_index"), -1).to_numpy(zero_copy_only=False)
          if "gpu_index" in names else np.full(n, -1, np.int64))
    val = (rb.column(column).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
           if column in names else np.full(n, np.nan))
    return ts, dict_names, idx, gi, val


def kahan_add(s: np.ndarray, c: np.ndarray, k: np.ndarray, cells: np.ndarray,
              values: np.ndarray) -> None:
    """Add ``values`` into cells ``cells`` of the running compensated sums ``s`` (with
    compensations ``c`` and counts ``k``), in the order given; NaN values are skipped.

    The order matters in floating point: the j-th value of a cell is added in round j, so
    every cell sees its values in input order whatever the partitioning, and a later call
    continues exactly where an earlier one stopped.
    """
    ok = ~np.isnan(values)
    if not ok.all():
        cells, values = cells[ok], values[ok]
    n = len(cells)
    if not n:
        return
    order = np.argsort(cells, kind="stable")
    sc = cells[order]
    first = np.ones(n, dtype=bool)
    first[1:] = sc[1:] != sc[:-1]
    run_start = np.flatnonzero(first)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - np.repeat(run_start, np.diff(np.append(run_start, n)))
    if rank.max() == 0:
        rounds = [np.arange(n)]
    else:
        by_rank = np.argsort(rank, kind="stable")
        bounds = np.searchsorted(rank[by_rank], np.arange(rank.max() + 2))
        rounds = [by_rank[bounds[r]:bounds[r + 1]] for r in range(len(bounds) - 1)]
    for sel in rounds:
        i, v = cells[sel], values[sel]
        k[i] += 1
        si = s[i]
        y = v - c[i]
        t = si + y
        with np.errstate(invalid="ignore"):
            comp = (t - si) - y
        comp[np.isnan(comp)] = 0.0                   # an infinite value: keep it
        c[i] = comp
        s[i] = t


class BinSums:
    """Sums of device means per (key, bin), added device by device in device order.

    Each cell adds its values with :func:`kahan_add` in the order the devices are added,
    so adding devices in (host, scope, gpu_index) order gives bit for bit what the frame
    path's ``aggregate._sum_kernel`` gives (the same compensated sum over the same order;
    pandas' own ``groupby().sum()`` rounds differently and is not used).
    Memory is one span of bins per key, not the input.
    """

    def __init__(self):
        self._cells: dict[tuple, list] = {}

    def _span(self, key: tuple, lo: int, hi: int) -> list:
        cell = self._cells.get(key)
        if cell is None:
            cell = [lo, np.zeros(hi - lo), np.zeros(hi - lo), np.zeros(hi - lo, np.int64),
                    np.zeros(hi - lo, bool)]
            self._cells[key] = cell
            return cell
        old_lo, old_n = cell[0], len(cell[1])
        if lo >= old_lo and hi <= old_lo + old_n:
            return cell
        new_lo, new_hi = min(lo, old_lo), max(hi, old_lo + old_n)
        grow = max(new_hi - new_lo, 2 * old_n)           # amortised growth
        new_hi = new_lo + grow if hi > old_lo + old_n else new_hi
        new_lo = new_hi - grow if lo < old_lo else new_lo
        off = old_lo - new_lo
        for j in range(1, 5):
            arr = np.zeros(new_hi - new_lo, dtype=cell[j].dtype)
            arr[off:off + old_n] = cell[j]
            cell[j] = arr
        cell[0] = new_lo
        return cell

    def add(self, key: tuple, bins: np.ndarray, values: np.ndarray) -> None:
        """Add device bin means in device order (a bin repeats once per device; NaN adds
        nothing but the cell)."""
        if not len(bins):
            return
        lo, s, c, k, seen = self._span(key, int(bins.min()), int(bins.max()) + 1)
        i = bins - lo
        seen[i] = True
        kahan_add(s, c, k, i, values)

    def frame(self, key_names: Sequence[str], bin_ns: int) -> pd.DataFrame:
        """``[*key_names], timestamp, power_w, n_gpus`` of every cell with a device bin."""
        cols: dict[str, list] = {c: [] for c in [*key_names, "timestamp", "power_w", "n_gpus"]}
        for key in sorted(self._cells, key=lambda k: tuple((x is not None, x) for x in k)):
            lo, s, _, k, seen = self._cells[key]
            idx = np.flatnonzero(seen)
            for name, v in zip(key_names, key):
                cols[name].append(np.full(len(idx), v, dtype=object))
            cols["timestamp"].append((idx + lo) * bin_ns)
            cols["power_w"].append(np.where(k[idx] >= 1, s[idx], np.nan))
            cols["n_gpus"].append(k[idx])
        cat = (lambda p, dt: np.concatenate(p) if p else np.zeros(0, dt))
        out = {name: pd.array(cat(cols[name], object), dtype="string") for name in key_names}
        out["timestamp"] = utc_series(cat(cols["timestamp"], np.int64))
        out["power_w"] = pd.Series(cat(cols["power_w"], np.float64))
        out["n_gpus"] = pd.Series(cat(cols["n_gpus"], np.int64))
        return pd.DataFrame({k: (v if isinstance(v, pd.Series) else pd.Series(v))
                             for k, v in out.items()})

    def copy(self) -> BinSums:
        new = BinSums()
        new._cells = {k: [c[0], *(a.copy() for a in c[1:])] for k, c in self._cells.items()}
        return new

    def __len__(self) -> int:
        return len(self._cells)
