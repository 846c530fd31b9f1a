"""Which GPU each row of an nvidia-smi log belongs to (part of
:mod:`powerlab.iotools.nvidia_smi`): from the ``pci.bus_id`` or ``uuid`` field where the
log has one, else from the row's place in its query (:func:`index_from_order`), where a
row whose GPU the timestamps do not prove is dropped and counted, never shifted to
another GPU."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..exceptions import ParseError
from ._common import warn_quality

#: the most GPUs one query of a node prints
_MAX_GPUS = 64


def _factorized(arr: pa.Array) -> tuple[np.ndarray, list]:
    """``pandas.factorize`` of text without nulls (codes in order of first appearance,
    the distinct values), by pyarrow's dictionary encoding: no Python string per row."""
    enc = pc.dictionary_encode(arr)
    return (enc.indices.to_numpy(zero_copy_only=False).astype(np.intp, copy=False),
            enc.dictionary.to_pylist())


def index_from_bus_id(bus: pa.Array, path, row_line) -> np.ndarray:
    """GPU index from the PCI bus id: NVML (and so nvidia-smi) numbers the GPUs of a
    node in PCI bus order, so the index is the rank of the bus id among those in the
    log.  Every row names its GPU: nothing is inferred from row order."""
    # (factorised once as written, then the few distinct ids upper-cased and ranked:
    # the codes of pandas.factorize(upper-cased ids, sort=True))
    first, written = _factorized(bus)
    upper = [u.upper() for u in written]
    uniques = sorted(set(upper))
    rank = {u: k for k, u in enumerate(uniques)}
    codes = np.array([rank[u] for u in upper], dtype=np.int64)[first]
    bad = [i for i, u in enumerate(uniques) if not u or u.startswith("[") or u in ("N/A",)]
    if bad:
        r = int(np.flatnonzero(np.isin(codes, bad))[0])
        raise ParseError(f"cannot read {bus[r].as_py()!r} as a PCI bus id (expected e.g. "
                         "00000000:18:00.0)", path=path, line=row_line(r),
                         column="pci.bus_id")
    return codes.astype(np.int64)


def index_from_uuid(uuids: pa.Array, seg_id, path, row_line) -> np.ndarray:
    codes, uniques = _factorized(uuids)
    n = len(uniques)
    pos = _position_in_segment(seg_id) % n
    # each UUID must always appear at the same position of its query
    first = np.full(n, -1)
    first[codes[::-1]] = pos[::-1]
    bad = first[codes] != pos
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise ParseError("GPU UUIDs do not repeat in a fixed order per query; add 'index' "
                         "to the query", path=path, line=row_line(r), column="uuid")
    return pos


def _position_in_segment(seg_id: np.ndarray) -> np.ndarray:
    n = len(seg_id)
    if n and seg_id[0] == seg_id[-1]:  # one segment (seg_id is non-decreasing)
        return np.arange(n)
    starts = np.flatnonzero(np.r_[True, seg_id[1:] != seg_id[:-1]]) if n else np.array([], int)
    pos = np.arange(n)
    if len(starts):
        pos = pos - np.repeat(starts, np.diff(np.r_[starts, n]))
    return pos


def _gap_threshold(d: np.ndarray, path) -> int | None:
    """The smallest time step [ns] that can separate two queries, from the data.

    Rows of one query are a few milliseconds apart; consecutive queries are separated by
    nvidia-smi's sleep (``-lms``), so every step between queries is at least that
    interval.  The steps split into these two clusters (a threshold on log time, Otsu's
    rule); any step below 0.8 times the lower edge of the upper cluster cannot be a sleep
    and proves its two rows belong to one query.  Returns ``0`` when all steps are alike
    and at least 5 ms (one row per query), ``None`` when all are alike and shorter (the
    whole segment is one query).
    """
    x = d[d >= 0][: _MAX_GPUS * 1024].astype(np.float64) / 1e6  # [ms]
    if not len(x):
        return None
    y = np.log1p(x)
    if y.max() - y.min() < np.log(2.0):
        return 0 if np.median(x) >= 5.0 else None
    hist, edges = np.histogram(y, bins=256)
    w = np.cumsum(hist)
    m = np.cumsum(hist * 0.5 * (edges[1:] + edges[:-1]))
    w0, w1 = w[:-1], w[-1] - w[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        between = w0 * w1 * (m[:-1] / w0 - (m[-1] - m[:-1]) / w1) ** 2
    cut = edges[1:-1][int(np.nanargmax(between))]
    lower, upper = x[y <= cut], x[y > cut]
    lo, hi = np.quantile(lower, 0.95), np.quantile(upper, 0.05)
    if (hi + 1.0) < 3.0 * (lo + 1.0):
        raise ParseError("cannot tell the queries apart: the log has no 'index', 'uuid' or "
                         "'pci.bus_id' field and its time steps do not split into steps "
                         f"within a query and sleeps between queries (95 % of the short steps "
                         f"< {lo:g} ms, 5 % of the long ones < {hi:g} ms); add 'index' to the "
                         "--query-gpu list", path=path)
    return int(0.8 * hi * 1e6)


def repeated_rows(raw: list) -> np.ndarray:
    """``out[i]``: rows ``i`` and ``i + 1`` hold identical cells (a duplicated line, or two
    GPUs that happened to print the same values in the same millisecond)."""
    n = len(raw[0]) if raw else 0
    if n < 2:
        return np.zeros(max(n - 1, 0), dtype=bool)
    eq = None
    for col in raw:
        e = pc.equal(col.slice(1), col.slice(0, n - 1))
        eq = e if eq is None else pc.and_(eq, e)
    return eq.to_numpy(zero_copy_only=False)


def _steps_sample(d: np.ndarray, same_seg: np.ndarray | None) -> np.ndarray:
    """The time steps :func:`_gap_threshold` looks at: the first ``_MAX_GPUS * 1024``
    non-negative steps within segments (``same_seg``; ``None``: one segment), taken
    from a prefix of ``d`` as short as gives them all."""
    want = _MAX_GPUS * 1024
    m = want
    while True:
        x = d[:m] if same_seg is None else d[:m][same_seg[:m]]
        x = x[x >= 0]
        if len(x) >= want or m >= len(d):
            return x[:want]
        m *= 2


def index_from_order(t_ns: np.ndarray, seg_id: np.ndarray, n_gpus, path, row_line,
                      repeats: np.ndarray | None = None):
    """GPU index of each row of a log without a GPU field, ``-1`` where not proven.

    nvidia-smi prints one row per GPU per query, in index order.  Rows closer in time
    than the shortest possible sleep between queries (:func:`_gap_threshold`) belong to
    one query; such a run of rows is a *chunk*.  A chunk of exactly ``n`` rows, time never
    going backwards and no two identical adjacent lines is a whole query: its rows are
    GPUs ``0..n-1``.  Every other chunk is dropped and counted in one
    DataQualityWarning: a query with a row lost or duplicated, rows out of order, a
    trailing partial query, identical lines (a duplicated line plus a lost one looks the
    same as two GPUs printing the same values), and a query split by a GPU answering
    later than the sleep between queries (its parts cannot be told from the remains of
    two damaged queries).  No row is ever placed by counting across a damaged part.

    ``n`` is the commonest chunk length (by rows), or ``n_gpus``; an ``n_gpus`` the
    chunks contradict is an error.
    """
    n_gpus = _checked_n_gpus(n_gpus, path)
    n_rows = len(t_ns)
    if n_rows == 0:
        return np.zeros(0, dtype=np.int64)
    d = np.diff(t_ns)
    one_seg = seg_id[0] == seg_id[-1]  # (seg_id is non-decreasing)
    same_seg = np.ones(n_rows - 1, dtype=bool) if one_seg else seg_id[1:] == seg_id[:-1]
    try:
        thr = _gap_threshold(_steps_sample(d, None if one_seg else same_seg), path)
    except ParseError:
        if n_gpus == 1:  # the caller says one GPU: no attribution to prove
            return np.zeros(n_rows, dtype=np.int64)
        raise
    if thr is None:
        brk = ~same_seg
    else:
        brk = d >= thr
        if not one_seg:
            brk |= ~same_seg
    starts = np.flatnonzero(np.r_[True, brk])
    lens = np.diff(np.r_[starts, n_rows])
    n = _query_size(lens, n_rows, n_gpus, path)
    back = d < 0
    if not one_seg:
        back &= same_seg
    # two identical lines in one query: a duplicated line (with another line of the
    # query perhaps lost) cannot be told from two GPUs printing the same values
    rep = _flagged_chunks(None if repeats is None else repeats & same_seg, starts)
    bad = _flagged_chunks(back, starts) | rep
    ok = (lens == n) & ~bad
    gpu = _place_in_chunk(starts, lens, n_rows)
    okr = np.repeat(ok, lens)
    n_drop = int(n_rows - np.count_nonzero(okr))
    if n_drop:
        gpu[~okr] = -1
        _warn_dropped(_Dropped(n, n_drop, n_rows, lens, ok, bad, rep, starts), path,
                      row_line)
    return gpu


def _checked_n_gpus(n_gpus, path) -> int | None:
    if n_gpus is not None:
        n_gpus = int(n_gpus)
        if n_gpus < 1:
            raise ParseError(f"n_gpus must be a positive integer, got {n_gpus}", path=path)
    return n_gpus


def _query_size(lens: np.ndarray, n_rows: int, n_gpus: int | None, path) -> int:
    """The rows of one query: the commonest chunk length (by rows), which must hold half
    the rows, agree with ``n_gpus`` and not give way to another steady size."""
    by_rows = np.bincount(lens, weights=lens)
    n = int(np.argmax(by_rows))
    if n_gpus is not None and n_gpus != n:
        raise ParseError(f"n_gpus={n_gpus} was given, but the timestamps show queries of "
                         f"{n} rows ({int(by_rows[n]):,} of {n_rows:,} rows lie in "
                         f"{n}-row queries separated by the logging interval); the "
                         "log has no 'index' field to settle it", path=path)
    if n > _MAX_GPUS or by_rows[n] < 0.5 * n_rows:
        raise ParseError("cannot tell how many GPUs each query covers: the log has no "
                         "'index', 'uuid' or 'pci.bus_id' field and its timestamps show no "
                         f"consistent query size (the commonest, {n} rows, holds "
                         f"{int(by_rows[n]):,} of {n_rows:,} rows); add 'index' to the "
                         "--query-gpu list", path=path)
    # another steady query size (three or more chunks of one other size in a row: a GPU
    # lost or added) is not a damaged query here and there: nothing tells which GPU
    run_start = np.r_[True, lens[1:] != lens[:-1]]
    run_id = np.cumsum(run_start) - 1
    run_len = np.bincount(run_id)
    steady = (run_len[run_id] >= 3) & (lens != n)
    if lens[steady].sum() > 0.1 * n_rows:
        m = int(np.bincount(lens[steady], weights=lens[steady]).argmax())
        raise ParseError(f"the queries change size: {int(by_rows[n]):,} rows lie in {n}-row "
                         f"queries and {int(lens[steady][lens[steady] == m].sum()):,} in "
                         f"runs of {m}-row ones (a GPU lost or added during the log?); "
                         "without an 'index' field the GPU of a row cannot be told; add "
                         "'index' to the --query-gpu list", path=path)
    return n


def _flagged_chunks(steps: np.ndarray | None, starts: np.ndarray) -> np.ndarray:
    """Per chunk: whether a flagged step ``i`` of ``steps`` (from row ``i`` to row
    ``i + 1``) leads into it."""
    out = np.zeros(len(starts), dtype=bool)
    if steps is not None and steps.any():
        out[np.searchsorted(starts, np.flatnonzero(steps) + 1, side="right") - 1] = True
    return out


def _place_in_chunk(starts: np.ndarray, lens: np.ndarray, n_rows: int) -> np.ndarray:
    """The place of each row in its chunk: a running count restarted at each chunk."""
    gpu = np.ones(n_rows, dtype=np.int64)
    gpu[0] = 0
    gpu[starts[1:]] = 1 - lens[:-1]
    np.cumsum(gpu, out=gpu)
    return gpu


@dataclass(frozen=True)
class _Dropped:
    """What :func:`index_from_order` dropped: query size ``n``, rows dropped of all, and
    per chunk its length, whether kept, damaged, holding identical lines, first row."""

    n: int
    n_drop: int
    n_rows: int
    lens: np.ndarray
    ok: np.ndarray
    bad: np.ndarray
    rep: np.ndarray
    starts: np.ndarray


def _warn_dropped(x: _Dropped, path, row_line) -> None:
    """One DataQualityWarning counting the dropped chunks by kind (pointing at the
    caller of the nvidia-smi reader)."""
    n = x.n
    bad_chunks = np.flatnonzero(~x.ok)
    bad, rep, lens = x.bad[bad_chunks], x.rep[bad_chunks], x.lens[bad_chunks]
    fewer = int(np.count_nonzero((lens < n) & ~bad))
    more = int(np.count_nonzero((lens > n) & ~bad))
    twins = int(np.count_nonzero(rep))
    backwards = int(np.count_nonzero(bad & ~rep))
    first_line = row_line(int(x.starts[bad_chunks[0]]))
    warn_quality(f"{path or 'nvidia-smi output'}: no GPU index/uuid field, so a row's "
                 f"GPU comes from its place in a {n}-row query; dropped {x.n_drop:,} of "
                 f"{x.n_rows:,} rows whose GPU the timestamps do not prove ({fewer} "
                 f"run(s) of fewer than {n} rows: a lost line or a GPU answering later "
                 f"than the sleep between queries; "
                 f"{more} with more than {n} rows, {backwards} with time going "
                 f"backwards, {twins} holding two identical lines, which a duplicated "
                 f"line and two GPUs printing the same values both give; first at "
                 f"line {first_line})", stacklevel=5)
