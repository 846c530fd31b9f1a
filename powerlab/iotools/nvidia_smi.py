"""Read ``nvidia-smi --query-gpu=... --format=csv`` logs into canonical telemetry.

nvidia-smi prints one CSV row per GPU per query.  With ``-l``/``-lms`` it repeats the
query, so a log is a sequence of blocks of ``n`` rows (one per GPU, in index order).  When
the query has no ``index``, ``pci.bus_id`` (GPUs are numbered in PCI bus order) or
``uuid`` field, a row's GPU is taken from its place in its query only where the
timestamps prove the query (rows milliseconds apart, queries a sleep apart, exactly
``n`` rows, time never going backwards); rows of damaged queries are dropped and
counted, never shifted to another GPU (see :func:`~powerlab.iotools._smi_order.index_from_order`).

Variants handled: any field subset, unit-suffixed headers (``power.draw [W]``), values
with units (``72.36 W``, ``17 MiB``, ``0 %``), ``nounits``, ``noheader`` (give
``fields=``), sentinels (``[N/A]``, ``[Not Supported]`` ...) -> NaN, repeated header
lines (logs appended with ``>>``), a truncated last line (dropped), a trailing partial
query (dropped).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..exceptions import ParseError
from ..telemetry import schema
from ..telemetry.timeutil import to_epoch_ns
from . import _smi_fast, _smi_order
from ._common import (
    available_workers,
    check_tz,
    hex_to_uint64,
    line_of_row,
    mask_impossible,
    read_bytes,
    strings_to_float,
    warn_quality,
)
from ._smi_time import parse_timestamps
from .registry import ReaderEntrypoint, head_lines, register_reader

__all__ = ["VARIABLE_MAP", "parse_nvidia_smi", "read_nvidia_smi"]

#: nvidia-smi ``--query-gpu`` field -> (canonical column, unit nvidia-smi prints, factor to
#: the canonical unit).  Where several fields map to one column, the first one present
#: in this order wins (``power.draw`` over ``power.draw.instant``, the enforced power
#: limit over the requested one, the SM clock over the graphics clock).  Fields not in
#: the table (``name``, ``pstate`` ...) are read and ignored; ``pci.bus_id`` identifies the GPU.
VARIABLE_MAP: dict[str, tuple[str, str | None, float | None]] = {
    "timestamp": ("timestamp", None, None),
    "index": ("gpu_index", None, None),
    "uuid": ("gpu_uuid", None, None),
    "gpu_uuid": ("gpu_uuid", None, None),
    "pci.bus_id": ("pci_bus_id", None, None),
    "power.draw": ("power_w", "W", 1.0),
    "power.draw.instant": ("power_w", "W", 1.0),
    "power.draw.average": ("power_avg_w", "W", 1.0),
    "enforced.power.limit": ("power_limit_w", "W", 1.0),
    "power.limit": ("power_limit_w", "W", 1.0),
    "clocks.current.sm": ("clock_sm_mhz", "MHz", 1.0),
    "clocks.sm": ("clock_sm_mhz", "MHz", 1.0),
    "clocks.current.graphics": ("clock_sm_mhz", "MHz", 1.0),
    "clocks.gr": ("clock_sm_mhz", "MHz", 1.0),
    "clocks.current.memory": ("clock_mem_mhz", "MHz", 1.0),
    "clocks.mem": ("clock_mem_mhz", "MHz", 1.0),
    "temperature.gpu": ("temp_gpu_c", "C", 1.0),
    "temperature.memory": ("temp_mem_c", "C", 1.0),
    "utilization.gpu": ("util_gpu_pct", "%", 1.0),
    "utilization.memory": ("util_mem_pct", "%", 1.0),
    "memory.used": ("memory_used_bytes", "MiB", 1024.0 * 1024.0),
    "fan.speed": ("fan_speed_pct", "%", 1.0),
    "clocks_event_reasons.active": ("throttle_reasons", "hex", None),
    "clocks_throttle_reasons.active": ("throttle_reasons", "hex", None),
}

_HEADER_CELL = re.compile(r"^([a-z_][a-z0-9_.]*)(?:\s*\[([^\]]*)\])?$")
#: Threads: from ``_PARALLEL_ROWS`` rows on the fields are converted on up to
#: ``_MAX_WORKERS`` threads at once, and from ``_PARALLEL_BYTES`` bytes of body on pyarrow
#: splits the CSV on its threads.  Only where at least 4 cores are available (counted by
#: :func:`_workers` at each parse, not frozen at import): on the 2-core development
#: machine (shared, loaded) threads measured no faster at 1M rows (0.69 s vs 0.68 s),
#: sometimes slower.
_MAX_WORKERS = 4
_PARALLEL_ROWS = 200_000
_PARALLEL_BYTES = 8 << 20


def _workers() -> int:
    """Threads one parse may use: the cores this process may run on now (its CPU
    affinity, as a container or ``taskset`` sets it), at most ``_MAX_WORKERS``."""
    return available_workers(_MAX_WORKERS)


#: On one thread the body is parsed as one block: one chunk per column, nothing to
#: concatenate afterwards
_ONE_BLOCK = True


def read_nvidia_smi(path, *, tz=None, n_gpus: int | None = None, host: str | None = None,
                    fields: Sequence[str] | str | None = None) -> pd.DataFrame:
    """Read an ``nvidia-smi --query-gpu ... --format=csv`` log file.

    Parameters
    ----------
    path : str or path-like
        The log file (``.gz`` is decompressed).
    tz : str or tzinfo, optional
        Time zone of the wall-clock timestamps.  nvidia-smi prints local time without a
        zone, so this is required unless the timestamps carry an offset.
    n_gpus : int, optional
        GPUs per query, for logs without an ``index``/``uuid`` field.  Inferred from the
        timestamp pattern when omitted; a value the timestamps contradict is an error.
    host : str, optional
        Host name for every row.  Default ``"localhost"``.
    fields : sequence of str or str, optional
        The ``--query-gpu`` field list, required for ``noheader`` logs.

    Returns
    -------
    pandas.DataFrame
        Canonical telemetry (:mod:`powerlab.telemetry.schema`), validated, one row per GPU sample,
        sorted by GPU and time.  ``memory_used_bytes`` is in bytes [B] (nvidia-smi prints
        MiB), powers in [W], clocks in [MHz], temperatures in [degC], utilisation in [%].

    Raises
    ------
    powerlab.exceptions.ParseError
        With file, line and column for anything that cannot be read as expected.

    Warns
    -----
    powerlab.exceptions.DataQualityWarning
        For a dropped truncated last line, rows whose GPU the timestamps do not prove
        (logs without a GPU field: damaged or partial queries), or repaired DST times,
        with counts.
    """
    p = Path(path)
    data, _ = read_bytes(p)  # checked as UTF-8 here, once
    return _parse(data, tz=tz, n_gpus=n_gpus, host=host, fields=fields, path=p)


def parse_nvidia_smi(text_or_buffer, *, tz=None, n_gpus: int | None = None,
                     host: str | None = None, fields: Sequence[str] | str | None = None,
                     path=None) -> pd.DataFrame:
    """Parse nvidia-smi CSV output given as text or a buffer.

    Same parameters and result as :func:`read_nvidia_smi`; ``path`` only names the
    source in messages.
    """
    data, name = read_bytes(text_or_buffer)
    return _parse(data, tz=tz, n_gpus=n_gpus, host=host, fields=fields,
                  path=path if path is not None else name)


def _parse(data: bytes, *, tz, n_gpus, host, fields, path) -> pd.DataFrame:
    """:func:`parse_nvidia_smi` on bytes already checked by :func:`read_bytes`.

    The steps: the header (:func:`_read_header`), the body's bounds
    (:func:`_body_bounds`), the cells converted to canonical columns (in the CSV pass by
    :func:`._smi_fast.fast_columns` where the log has the plain shape nvidia-smi prints,
    else by :func:`_general_columns`, which also names the line of any bad cell), the
    GPU of each row (:func:`_gpu_of_rows`) and the sorted, validated frame
    (:func:`_sorted_frame`).
    """
    check_tz(tz, path)
    host = "localhost" if host is None else str(host)
    names, _units, head_cells, header_present, first_end = _read_header(data, fields, path)
    start, end, dropped_last = _body_bounds(data, header_present, first_end)
    first_data_line = 2 if header_present else 1
    wanted = _wanted_fields(names)
    by_order = not {"gpu_index", "pci_bus_id", "gpu_uuid"} & wanted.keys()

    def text() -> str:  # only needed for the line numbers of messages
        return data.decode("utf-8", errors="replace")

    def row_line_of(orig_rows: np.ndarray | range, n_cells: int):
        def row_line(r: int) -> int:
            # when every line of the body is a row (no empty lines, which the CSV reader
            # skips) a row's line is arithmetic; counting newlines (memchr) is far
            # cheaper than searching for "\n\n", which stops at every line end
            if data.count(b"\n", start, end) == n_cells:
                return first_data_line + int(orig_rows[r])
            return line_of_row(text(), int(orig_rows[r]), first_line=first_data_line)
        return row_line

    fast = _smi_fast.fast_columns(data, start, end, [VARIABLE_MAP.get(n) for n in names],
                                  wanted, tz, by_order, workers=_workers())
    if fast is not None:
        cols, repeats = fast
        n = len(cols["timestamp"][0])
        seg_id = np.zeros(n, dtype=np.intp)
        row_line = row_line_of(range(n), n)  # every row is its own line: no array
    else:
        cols, repeats, seg_id, row_line = _general_columns(
            data, start, end, names, head_cells, header_present, first_data_line, wanted,
            by_order, tz, path, text, row_line_of)
    utc, n_amb, n_nonex = cols.pop("timestamp")
    mask_impossible(cols, path=path, what="nvidia-smi output")
    gpu = _gpu_of_rows(cols, utc, seg_id, n_gpus, path, row_line, repeats)

    notes = []
    if dropped_last:
        notes.append("dropped 1 truncated last line (no newline at end of file)")
    if n_amb or n_nonex:
        notes.append(f"{n_amb} ambiguous local time(s) resolved by file order and "
                     f"{n_nonex} nonexistent local time(s) shifted forward (DST)")
    if notes:
        warn_quality(f"{path or 'nvidia-smi output'}: " + "; ".join(notes))
    return _sorted_frame(cols, utc, gpu, host, path)


def _read_header(data: bytes, fields, path):
    """``(names, units, head_cells, header_present, first_end)`` from the first line or
    ``fields``; a header and ``fields`` that disagree, units other than nvidia-smi's and
    a query without ``timestamp`` are ParseErrors."""
    first_end = data.find(b"\n")
    first = (data if first_end < 0 else data[:first_end]).decode("utf-8", errors="replace")
    head_cells = [c.strip() for c in first.rstrip("\r").split(",")]
    header_present = bool(first.strip()) and all(_HEADER_CELL.match(c) for c in head_cells)
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",") if f.strip()]
    if header_present:
        names, units = zip(*(_HEADER_CELL.match(c).groups() for c in head_cells))
        names, units = list(names), list(units)
        if fields is not None and [_HEADER_CELL.match(f).group(1) for f in fields] != names:
            raise ParseError(f"the header lists fields {names} but fields={list(fields)} was "
                             "given", path=path, line=1)
    elif fields is None:
        raise ParseError("no header line (a 'noheader' log?): pass fields=[...] with the "
                         "--query-gpu field list", path=path, line=1)
    else:
        parsed = [_HEADER_CELL.match(f.strip()) for f in fields]
        if not all(parsed):
            raise ParseError(f"fields={list(fields)} are not nvidia-smi field names",
                             path=path)
        names = [m.group(1) for m in parsed]
        units = [m.group(2) for m in parsed]
    for nm, un in zip(names, units):
        spec = VARIABLE_MAP.get(nm)
        if spec and un is not None and spec[1] not in (None, "hex") and un != spec[1]:
            raise ParseError(f"header unit [{un}] for '{nm}', expected [{spec[1]}]",
                             path=path, line=1, column=nm)
    if "timestamp" not in names:
        raise ParseError("no 'timestamp' field: the query must include timestamp to give "
                         "samples a time", path=path, line=1)
    return names, units, head_cells, header_present, first_end


def _body_bounds(data: bytes, header_present: bool, first_end: int) -> tuple[int, int, int]:
    """``(start, end, dropped_last)``: the body is ``data[start:end]`` (never copied),
    without a last line that lacks its newline (``dropped_last`` is 1 if it held text)."""
    start = (len(data) if first_end < 0 else first_end + 1) if header_present else 0
    end = len(data)
    dropped_last = 0
    if end > start and not data.endswith(b"\n"):
        cut = data.rfind(b"\n", start, end)
        if data[cut + 1 if cut >= 0 else start:].strip():
            dropped_last = 1
        end = cut + 1 if cut >= 0 else start
    return start, end, dropped_last


def _wanted_fields(names: list[str]) -> dict[str, int]:
    """Canonical column -> the position of the field that gives it: where several
    fields map to one column, the first in :data:`VARIABLE_MAP` order wins."""
    rank = {f: k for k, f in enumerate(VARIABLE_MAP)}
    wanted: dict[str, int] = {}
    for i in sorted(range(len(names)), key=lambda i: rank.get(names[i], len(rank))):
        spec = VARIABLE_MAP.get(names[i])
        if spec is not None and spec[0] not in wanted:
            wanted[spec[0]] = i
    return wanted


def _general_columns(data, start, end, names, head_cells, header_present, first_data_line,
                     wanted, by_order, tz, path, text, row_line_of):
    """Cells split by pyarrow's CSV reader and converted column by column, every bad
    cell a ParseError naming its line and column.

    Returns ``(cols, repeats, seg_id, row_line)``: canonical column -> values
    (``"timestamp"`` -> ``(utc, n_ambiguous, n_nonexistent)``), identical adjacent rows
    (``None`` unless ``by_order``), the segment of each row (repeated header lines start
    a new one) and row -> file line.
    """
    ncol = len(names)
    table = _read_cells(data, start, end, ncol, path, text, first_data_line,
                        use_threads=_workers() >= 4 and end - start >= _PARALLEL_BYTES)

    # repeated header lines start a new segment (the logger was restarted with >>)
    # (a cell equal to the header's first cell once trimmed contains it, and the text of
    # a cell is a run of the body's bytes unless it holds a '"': test the body, then the
    # cells, then equality)
    head0 = head_cells[0]
    if (header_present and table.num_rows
            and ('"' in head0 or data.find(head0.encode("utf-8"), start, end) >= 0)
            and pc.any(pc.match_substring(table.column(0), head0)).as_py()):
        is_head = pc.equal(pc.utf8_trim_whitespace(table.column(0)), head0)
        is_head = is_head.to_numpy(zero_copy_only=False)
    else:
        is_head = np.zeros(table.num_rows, dtype=bool)
    orig_rows = np.flatnonzero(~is_head)
    head_pos = np.flatnonzero(is_head)
    row_line = row_line_of(orig_rows, len(is_head))
    if is_head.any():
        table = table.filter(pa.array(~is_head))
    seg_id = np.searchsorted(head_pos, orig_rows)  # segment number of each data row

    raw = [_one_array(table.column(i)) for i in range(ncol)]
    jobs: dict[str, tuple] = {
        canon: (_convert, VARIABLE_MAP[names[i]], names[i], raw[i], tz, path, row_line)
        for canon, i in wanted.items()}
    if by_order:  # identical adjacent lines, for the attribution by row order
        jobs["_repeats"] = (_smi_order.repeated_rows, raw)
    cols = _run_jobs(jobs, parallel=_workers() >= 4 and table.num_rows >= _PARALLEL_ROWS)
    repeats = cols.pop("_repeats", None)
    return cols, repeats, seg_id, row_line


def _gpu_of_rows(cols: dict, utc, seg_id, n_gpus, path, row_line, repeats) -> np.ndarray:
    """GPU index of each row (-1 where not proven), from the index, bus id or UUID
    field, else from the row's place in its query (:func:`~powerlab.iotools._smi_order.index_from_order`); the
    identity columns are taken out of ``cols``, except ``gpu_uuid``."""
    bus = cols.pop("pci_bus_id", None)
    if "gpu_index" in cols:
        return cols.pop("gpu_index")
    if bus is not None:
        return _smi_order.index_from_bus_id(bus, path, row_line)
    if "gpu_uuid" in cols:
        return _smi_order.index_from_uuid(cols["gpu_uuid"], seg_id, path, row_line)
    return _smi_order.index_from_order(to_epoch_ns(utc), seg_id, n_gpus, path, row_line, repeats=repeats)


def _sorted_frame(cols: dict, utc, gpu: np.ndarray, host: str, path) -> pd.DataFrame:
    """The canonical frame sorted by GPU and time, rows of unproven GPU (-1) left out,
    conformed and validated."""
    # a stable sort gives one permutation whatever the integer type; numpy sorts 16-bit
    # integers by radix sort, much faster than 64-bit ones
    # (rows whose GPU is not proven carry -1: they sort first and are cut off)
    small = len(gpu) and -1 <= gpu.min() and gpu.max() <= np.iinfo(np.int16).max
    order = np.argsort(gpu.astype(np.int16) if small else gpu, kind="stable")
    n_unproven = int(np.count_nonzero(gpu < 0))
    if n_unproven:
        order = order[n_unproven:]
    t_utc = to_epoch_ns(utc)
    t_sorted, g_sorted = t_utc[order], gpu[order]
    if len(order) > 1 and ((t_sorted[1:] < t_sorted[:-1])
                           & (g_sorted[1:] == g_sorted[:-1])).any():
        # rows that name their GPU but are out of time order in the file
        order = order[np.lexsort((t_sorted, g_sorted))]
        t_sorted, g_sorted = t_utc[order], gpu[order]
    df = _build_frame(cols, t_sorted, g_sorted, gpu, order, host)
    df = schema.conform(df, sort=False)
    # one host and scope: the GPU index alone tells the devices apart
    return schema.validate(df, source=str(path) if path is not None else "nvidia-smi output",
                           device_codes=g_sorted)


def _convert(spec: tuple, nm: str, arr: pa.Array, tz, path, row_line):
    """One field's cells -> its canonical column (ParseError naming line and column)."""
    canon, unit, factor = spec
    if canon == "timestamp":
        return parse_timestamps(arr, tz, path, nm, row_line)
    if canon == "gpu_index":
        v = strings_to_float(arr, unit=None, path=path, column=nm, row_line=row_line,
                             expected="a GPU index (integer)", allow_empty=False)
        top = schema.GLOSSARY["gpu_index"].valid_range[1]
        bad = np.isnan(v) | (v % 1 != 0) | (v < 0) | (v > top)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise ParseError(f"expected a GPU index (integer 0..{top:g}), got "
                             f"{arr[r].as_py()!r}", path=path, line=row_line(r), column=nm)
        return v.astype(np.int64)
    if canon in ("gpu_uuid", "pci_bus_id"):
        return pc.utf8_trim_whitespace(arr)  # text stays in pyarrow
    if canon == "throttle_reasons":
        return hex_to_uint64(arr, path=path, column=nm, row_line=row_line)
    exp = f"a number in {unit}" if unit else "a number"
    v = strings_to_float(arr, unit=unit, path=path, column=nm, row_line=row_line,
                         expected=exp, allow_empty=False)
    if factor != 1.0:
        with np.errstate(over="ignore"):  # 1e308 MiB -> inf B, masked later
            v = v * factor
    return v


def _run_jobs(jobs: dict[str, tuple], *, parallel: bool) -> dict:
    """``{key: fn(*args)}`` for ``jobs = {key: (fn, *args)}``.

    With ``parallel`` the jobs run on a few threads (pyarrow and numpy release the GIL
    in their kernels); either way the error raised is that of the first failing job in
    ``jobs`` order, the one the sequential loop would raise, so messages do not depend
    on timing.
    """
    if not parallel or len(jobs) < 2:
        return {k: fn(*args) for k, (fn, *args) in jobs.items()}
    with ThreadPoolExecutor(max_workers=min(_workers(), len(jobs))) as ex:
        futures = {k: ex.submit(fn, *args) for k, (fn, *args) in jobs.items()}
        try:
            return {k: f.result() for k, f in futures.items()}
        except BaseException:
            ex.shutdown(wait=True, cancel_futures=True)
            raise


def _build_frame(cols: dict, t_sorted: np.ndarray, g_sorted: np.ndarray, gpu: np.ndarray,
                 order: np.ndarray, host: str) -> pd.DataFrame:
    """The canonical frame, rows taken in ``order``, every column in its schema dtype.

    ``t_sorted`` and ``g_sorted`` are the UTC nanoseconds and the GPU indices already
    taken in ``order``; ``gpu`` is the GPU of each file row (-1 for rows not kept: they
    are the ones ``order`` leaves out).  The float64 measurement columns are written
    straight into one 2-D block (the layout pandas would consolidate them into), so
    neither the constructor nor :func:`schema.conform` has to copy or convert anything.
    They are scattered (``out[dest] = values``: values read in file order, one write
    stream per GPU) rather than gathered (``values[order]``: the file read once per GPU
    with a stride), about 3x faster per column on millions of rows.
    """
    n = len(order)
    names = [c for c in schema.MEASUREMENT_COLUMNS
             if c in cols or schema.GLOSSARY[c].core]
    floats = [c for c in names if schema.GLOSSARY[c].dtype == "float64"]
    skip = len(gpu) - n  # rows not kept go to the first `skip` columns of the block
    full = np.empty((len(floats), len(gpu)))
    block = full[:, skip:]
    if any(name in cols for name in floats):
        dest = np.empty(len(gpu), dtype=np.intp)
        dest[order] = np.arange(skip, len(gpu))
        if skip:
            dest[gpu < 0] = np.arange(skip)
    for i, name in enumerate(floats):
        if name in cols:
            full[i][dest] = np.asarray(cols[name], dtype=np.float64)
        else:
            block[i] = np.nan
    df = pd.DataFrame(block.T, columns=floats, copy=False)
    others = {
        "timestamp": pd.Series(t_sorted.view("datetime64[ns]"), dtype="datetime64[ns, UTC]"),
        "host": _repeat_string(host, n),
        "scope": _repeat_string("gpu", n),
        "gpu_index": pd.Series(pd.array(g_sorted.astype(np.int16), dtype="Int16")),
        "gpu_uuid": pd.Series(pd.arrays.ArrowStringArray(_taken_text(cols["gpu_uuid"], order)))
        if "gpu_uuid" in cols else pd.Series(pd.arrays.ArrowStringArray(
            pa.nulls(n, pa.large_string()))),
    }
    for name in names:
        if name in floats:
            continue
        v = cols.get(name)
        if v is None:  # a core non-float column the log lacks: all NA, no reordering
            others[name] = pd.Series(pd.arrays.IntegerArray(np.zeros(n, dtype=np.uint64),
                                                            np.ones(n, dtype=bool)))
            continue
        others[name] = (v.iloc[order].reset_index(drop=True) if isinstance(v, pd.Series)
                        else pd.Series(v[order]))
    for i, name in enumerate(list(schema.IDENTITY_COLUMNS) + names):
        if name not in floats:
            df.insert(i, name, others[name])
    return df


def _taken_text(arr: pa.Array, order: np.ndarray) -> pa.Array:
    """The text of ``arr`` (plain, or a dictionary as the fast path reads identities)
    at the rows ``order``."""
    if isinstance(arr, pa.DictionaryArray):
        return pc.take(arr.dictionary, pc.take(arr.indices, order))
    return pc.take(arr, order)


def _read_cells(data: bytes, start: int, end: int, ncol: int, path, text,
                first_data_line: int, use_threads: bool = False) -> pa.Table:
    """Split the CSV body ``data[start:end]`` into string columns (pyarrow CSV reader,
    on its threads when ``use_threads``, no copy of the body).  A malformed row found
    by the threaded reader has no row number: the body is then read again on one thread
    to name its line."""
    cols = [f"c{i}" for i in range(ncol)]
    bad: list = []

    def on_invalid(row):
        bad.append(row)
        return "skip"

    size = end - start
    if not size or (size < 4096 and data[start:end].isspace()):
        return pa.table({c: pa.array([], pa.string()) for c in cols})
    block = 1 << 22
    if _ONE_BLOCK and not use_threads:  # (under 1 GiB: 32-bit string offsets)
        block = min(max(block, size + 1), 1 << 30)
    table = pacsv.read_csv(
        pa.BufferReader(pa.py_buffer(data).slice(start, size)),
        read_options=pacsv.ReadOptions(column_names=cols, use_threads=use_threads,
                                       block_size=block),
        parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
        convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in cols},
                                             strings_can_be_null=False,
                                             quoted_strings_can_be_null=False))
    if bad and bad[0].number is None and use_threads:  # row numbers need one thread
        return _read_cells(data, start, end, ncol, path, text, first_data_line,
                           use_threads=False)
    if bad:
        row = bad[0]
        line = (line_of_row(text(), row.number - 1, first_line=first_data_line)
                if row.number is not None else None)
        raise ParseError(f"{row.actual_columns} field(s) where the header has "
                         f"{row.expected_columns} ({len(bad)} such line(s) in all)",
                         path=path, line=line)
    return table


def _one_array(col: pa.ChunkedArray) -> pa.Array:
    """The values of ``col`` as one array (no copy when it has a single chunk)."""
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _repeat_string(value: str, n: int) -> pd.Series:
    """A ``string`` Series holding ``value`` n times (``pyarrow.repeat``: no Python loop,
    and faster than building the offsets with numpy)."""
    return pd.Series(pd.arrays.ArrowStringArray(pa.repeat(pa.scalar(value, pa.large_string()),
                                                          n)))


#: The first line of a log: a header of --query-gpu field names, or a row that starts
#: with nvidia-smi's timestamp (a ``noheader`` log).
_FIRST_HEADER = re.compile(r"^\s*(timestamp|index|uuid|name|pci\.bus_id|power\.draw|"
                           r"utilization\.gpu|memory\.used|temperature\.gpu|clocks\.)",
                           re.IGNORECASE)
_FIRST_ROW = re.compile(r"^\s*\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(\.\d+)?\s*,")


@register_reader
class NvidiaSmiReader(ReaderEntrypoint):
    """``nvidia-smi --query-gpu=... --format=csv`` logs, by their first line (asked
    last: a header shape, not a marker)."""

    name = "nvidia-smi"
    kind = "telemetry"
    description = "nvidia-smi CSV"
    priority = 80
    open = staticmethod(read_nvidia_smi)

    def guess_can_open(self, path, head_bytes) -> bool:
        lines = head_lines(head_bytes)
        first = lines[0] if lines else ""
        return bool(_FIRST_HEADER.match(first) or _FIRST_ROW.match(first))
