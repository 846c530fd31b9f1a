"""A store's tables as one frame in store order: host, scope, GPU, then time.

:func:`powerlab.telemetry.store.read_store` returns its rows sorted by host, scope, GPU
and time (the order :func:`~powerlab.telemetry.schema.conform` sorts into).  A store
appended to in time order mostly holds its rows in that order already, in runs: each
file is one host and one scope, sorted by GPU and time.  :func:`tables_frame` finds those
runs on the Arrow columns, before any conversion, and interleaves them (zero-copy slices,
or one index and a take when there are many), so that the full sort is needed only where
the runs of one device overlap in time.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .schema import CORE_COLUMNS, GLOSSARY, conform, na_array
from .storefiles import partition_of
from .timeutil import to_epoch_ns

__all__ = ["tables_frame"]


def tables_frame(parts: list, cols: list[str] | None) -> pd.DataFrame:
    """The tables read (``parts``, emptied here), as one conformed frame sorted by host,
    scope, GPU and time.  Only the core columns of ``cols`` that no file holds are added
    as NA; the files' own order is kept where it is sorted already."""
    runs = []  # (rows, host, the one scope or None) of each table, in order
    for f, one, t in parts:
        scope = one.get("scope")
        if scope is None and "scope" in t.column_names and not t.column("scope").null_count:
            mm = pc.min_max(t.column("scope"))
            scope = mm["min"].as_py() if mm["min"].as_py() == mm["max"].as_py() else None
        runs.append((t.num_rows, partition_of(f)[1], scope))
    tables = [t for _, _, t in parts]
    parts.clear()
    segs = _segments(tables, runs)
    take = None
    if segs:                                # sorted runs of rows, to interleave
        if len(segs) <= _MAX_SLICES:        # zero-copy slices, one copy in to_pandas
            tables = [tables[i].slice(a, b - a) for i, a, b in segs]
        else:
            starts = np.cumsum([0] + [t.num_rows for t in tables])[:-1]
            lo = np.array([starts[i] + a for i, a, _ in segs], dtype=np.int64)
            size = np.array([b - a for _, a, b in segs], dtype=np.int64)
            take = np.arange(size.sum()) + np.repeat(lo - (np.cumsum(size) - size), size)
    table = pa.concat_tables(tables, promote_options="permissive") \
        if len(tables) > 1 else tables[0]
    del tables
    # split_blocks: no copy of the float columns into one 2-D block (pandas' own layout
    # after any column operation); self_destruct: the Arrow buffers go as they are copied
    frame = table.to_pandas(split_blocks=True, self_destruct=True)
    del table
    n = len(frame)
    for c in CORE_COLUMNS:  # absent core columns, cheaply (conform's way is per row)
        if c not in frame.columns and (cols is None or c in cols):
            frame[c] = na_array(GLOSSARY[c].dtype, n)
    frame = conform(frame, sort=False, add_missing=False)
    if segs is None:
        take = _sort_order(_sort_keys(frame, runs))
    return frame if take is None else frame.take(take).reset_index(drop=True)


#: Sort key of a missing GPU index: before every Int16 value (NA first, as conform sorts).
_NA_GPU = -(2**20)
#: Most sorted runs interleaved as Arrow slices (more: one index and a take).
_MAX_SLICES = 2000


def _numpy(col: pa.ChunkedArray) -> np.ndarray:
    """A column without nulls as one NumPy array (no copy for a single chunk)."""
    return (col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()).to_numpy()


def _segments(tables: list[pa.Table], runs: list) -> list[tuple[int, int, int]] | None:
    """The rows of ``tables`` (one after the other) in the order of host, scope, GPU and
    time, as runs ``(table, first row, end row)`` (none when they come in that order
    already), when each table (one host and one
    scope) is sorted by GPU and time and each device's runs follow each other in time
    (a store appended to in time order); None otherwise (a full sort is needed).  On the
    Arrow columns, before any conversion."""
    if any(scope is None for _, _, scope in runs):
        return None
    segs = []  # (host, scope, gpu, table, first row, end row, first time, last time)
    for i, (t, (n, host, scope)) in enumerate(zip(tables, runs)):
        if "gpu_index" not in t.column_names or not pa.types.is_integer(
                t.schema.field("gpu_index").type):
            return None
        ts = t.column("timestamp")
        if not (pa.types.is_timestamp(ts.type) and ts.type.unit == "ns") or ts.null_count:
            return None
        g = t.column("gpu_index")
        if g.null_count:
            g = pc.fill_null(g.cast(pa.int32()), _NA_GPU)
        gg = _numpy(g)
        tt = _numpy(ts).view(np.int64)
        end = np.flatnonzero(gg[1:] != gg[:-1])     # last row of each GPU's run
        if (gg[end + 1] < gg[end]).any():
            return None
        down = np.flatnonzero(tt[1:] < tt[:-1])     # time going back: only between runs
        if down.size and not np.isin(down, end).all():
            return None
        cut = end + 1
        for a, b in zip([0, *cut.tolist()], [*cut.tolist(), n]):
            segs.append((host, scope, int(gg[a]), i, a, b, int(tt[a]), int(tt[b - 1])))
    segs.sort(key=lambda s: s[:4])
    for x, y in itertools.pairwise(segs):
        if x[:3] == y[:3] and x[7] > y[6]:   # one device's runs overlap in time
            return None
    out = [s[3:6] for s in segs]
    if all(x < y for x, y in itertools.pairwise(out)):
        return []   # the rows as they come are sorted already
    return out


def _sort_keys(frame: pd.DataFrame, runs: list) -> tuple:
    """Integer sort keys (host, scope, GPU, time) of the rows of ``frame``, the tables of
    ``runs`` one after the other (each of one host, that of its folder)."""
    hosts = [h for _, h, _ in runs]
    rank = {h: i for i, h in enumerate(sorted(set(hosts)))}
    host_codes = np.repeat(np.array([rank[h] for h in hosts], dtype=np.int32),
                           [n for n, _, _ in runs])
    scope = frame["scope"]
    is_node = (scope == "node").to_numpy(dtype=bool, na_value=False)
    if scope.isna().any() or not (is_node | (scope == "gpu").to_numpy(
            dtype=bool, na_value=False)).all():
        scope_codes = pd.factorize(scope, sort=True)[0]
    else:  # "gpu" < "node"
        scope_codes = is_node.astype(np.int8)
    gpu = frame["gpu_index"].array.to_numpy(dtype="int32", na_value=_NA_GPU)
    return host_codes, scope_codes, gpu, to_epoch_ns(frame["timestamp"])


def _sort_order(keys: tuple) -> np.ndarray | None:
    """Row order sorting by ``keys`` (stable; NA GPU first, as :func:`conform` sorts),
    or None when the rows are sorted already."""
    n = len(keys[-1])
    if n < 2:
        return None
    ok = np.ones(n - 1, dtype=bool)
    eq = np.ones(n - 1, dtype=bool)
    for k in keys:  # lexicographic: non-decreasing, first difference decides
        d = np.diff(k)
        ok &= ~eq | (d >= 0)
        eq &= d == 0
        if not ok.all():
            break
    else:
        return None
    return np.lexsort(keys[::-1])
