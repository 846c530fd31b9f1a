"""Per-GPU state of a running collector, and the frames and tables built from it.

:class:`Slot` holds what the sampling loop keeps per GPU (its device, fault state, rates,
the energy counter and integral, the latest row of each signal group); the functions
turn sample rows into a telemetry frame (:func:`rows_to_frame`), slots into the report's
per-GPU table (:func:`gpu_table`) and into the values ``/metrics`` serves
(:func:`latest_by_gpu`).
"""

from __future__ import annotations

import errno
import math
import threading
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..telemetry.schema import conform, empty_frame
from . import nvml
from .metrics import DCGM_FIELDS
from .sidetables import NAT, ts_column
from .signals import GROUPS, SAMPLE_COLUMNS, TIMESTAMP_COLUMNS

__all__ = ["I_ENERGY", "I_POWER", "I_TS_ENERGY", "I_TS_POWER", "ROW_COLS", "Chunk", "Slot",
           "first_wall", "gpu_table", "is_full", "last_wall", "latest_by_gpu",
           "parts_to_frame", "rows_to_frame"]

ROW_COLS = ("_wall_ns", "gpu_index", "gpu_uuid", "monotonic_s", *SAMPLE_COLUMNS,
            *TIMESTAMP_COLUMNS)
_NS = len(SAMPLE_COLUMNS)
I_POWER = 4 + SAMPLE_COLUMNS.index("power_w")
I_ENERGY = 4 + SAMPLE_COLUMNS.index("energy_j")
I_TS_POWER = 4 + _NS + TIMESTAMP_COLUMNS.index("nvml_time_power")
I_TS_ENERGY = 4 + _NS + TIMESTAMP_COLUMNS.index("nvml_time_energy")
_I_THROTTLE = 4 + SAMPLE_COLUMNS.index("throttle_reasons")
_I_TS0 = 4 + _NS
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_GROUP_BIT = {c: 1 << gi for gi, cols in enumerate(GROUPS.values()) for c in cols}
_METRIC_COLUMNS = tuple(f[1] for f in DCGM_FIELDS if f[1] in _GROUP_BIT)
_POS = {c: i for i, c in enumerate(ROW_COLS)}

# ---------------------------------------------------------------------------- frames


class Chunk:
    """Samples as columns (the layout of :data:`ROW_COLS`), as the bulk path of
    :mod:`powerlab.collect.batch` decodes them: numpy arrays (timestamps as int64 with
    :data:`~powerlab.collect.sidetables.NAT` for "not read"), lists, or None for a column
    not read in any of them (NaN, NA or NaT)."""

    __slots__ = ("columns", "n")

    def __init__(self, columns: Sequence, n: int):
        self.columns = columns
        self.n = n

    def __len__(self) -> int:
        return self.n

    def row(self, q: int) -> tuple:
        """Sample ``q`` as a row tuple (as the per-tick path builds them)."""
        return self.rows([q])[0]

    def rows(self, qs: Sequence[int]) -> list[tuple]:
        """Samples ``qs`` as row tuples (as the per-tick path builds them)."""
        cols = []
        k = len(qs)
        for c, col in enumerate(self.columns):
            if col is None:
                cols.append([None if c == _I_THROTTLE or c >= _I_TS0 else math.nan] * k)
                continue
            v = np.asarray(col)[list(qs)].tolist() if isinstance(col, np.ndarray) else [
                col[q] for q in qs]
            if c >= _I_TS0:
                v = [None if x == NAT else x for x in v]
            cols.append(v)
        return list(zip(*cols))


def first_wall(part) -> int:
    """Wall clock [ns] of the first sample of a part (a row list or a :class:`Chunk`)."""
    return int(part.columns[0][0]) if isinstance(part, Chunk) else part[0][0]


def last_wall(part) -> int:
    return int(part.columns[0][-1]) if isinstance(part, Chunk) else part[-1][0]


def rows_to_frame(rows: Sequence[tuple], host: str, conformed: bool = True) -> pd.DataFrame:
    """Samples (row tuples) as a telemetry frame (conformed and sorted when asked)."""
    return parts_to_frame([rows], host, conformed)


def _float_piece(v, n: int) -> np.ndarray:
    return np.full(n, math.nan) if v is None else np.asarray(v, dtype="float64")


def _ts_piece(v, n: int) -> np.ndarray:
    if v is None:
        return np.full(n, NAT, dtype=np.int64)
    if isinstance(v, np.ndarray):
        return v
    try:
        return np.array(v, dtype=np.int64)
    except TypeError:  # None (not read) present
        return np.array([NAT if x is None else x for x in v], dtype=np.int64)


def parts_to_frame(parts: Sequence, host: str, conformed: bool = True,
                   by_gpu: bool = False) -> pd.DataFrame:
    """Samples in parts (row-tuple lists and :class:`Chunk` s) as one telemetry frame, in
    the parts' order, or with ``by_gpu`` in the store's order (GPU, then time: what
    :func:`~powerlab.telemetry.schema.conform` sorts into, so the store's sort and its
    Parquet encoding have less to do); conformed and sorted when asked."""
    parts = [p for p in parts if len(p)]
    if not parts:
        out = empty_frame()
        for c in ("monotonic_s", "power_avg_w", "util_mem_pct"):
            out[c] = pd.Series([], dtype="float64")
        for c in TIMESTAMP_COLUMNS:
            out[c] = pd.Series([], dtype="datetime64[ns, UTC]")
        return conform(out)
    merged: list = []  # runs of per-tick row lists joined: one transposition each
    for p in parts:
        if isinstance(p, Chunk) or not merged or isinstance(merged[-1], Chunk):
            merged.append(p if isinstance(p, Chunk) else list(p))
        else:
            merged[-1].extend(p)
    pieces = [(p.columns if isinstance(p, Chunk) else list(zip(*p)), len(p)) for p in merged]
    n = sum(k for _, k in pieces)

    def column(c: int, conv) -> np.ndarray:
        got = [conv(cols[c], k) for cols, k in pieces]
        out = got[0] if len(got) == 1 else np.concatenate(got)
        return out if order is None else out[order]

    order = None
    wall = column(0, lambda v, k: np.asarray(v, dtype=np.int64))
    gpu = column(1, lambda v, k: np.asarray(v, dtype=np.int16))
    if by_gpu:
        order = np.lexsort((wall, gpu))
        wall, gpu = wall[order], gpu[order]
    uuids = np.fromiter((u for cols, _k in pieces for u in cols[2]), dtype=object, count=n)
    data: dict[str, object] = {
        "timestamp": pd.Series(wall.view("datetime64[ns]")).dt.tz_localize("UTC"),
        "host": pd.array([host] * n, dtype="string"),
        "scope": pd.array(["gpu"] * n, dtype="string"),
        "gpu_index": pd.array(gpu, dtype="Int16"),
        "gpu_uuid": pd.array(uuids if order is None else uuids[order], dtype="string"),
        "monotonic_s": column(3, _float_piece),
    }
    for c, name in enumerate(SAMPLE_COLUMNS, start=4):
        if name == "throttle_reasons":
            vals, mask = [], []
            for cols, k in pieces:
                v = cols[c]
                if v is None:
                    vals.append(np.zeros(k, dtype=np.uint64))
                    mask.append(np.ones(k, dtype=bool))
                else:
                    arr = pd.array(list(v), dtype="UInt64")
                    vals.append(arr.to_numpy(dtype=np.uint64, na_value=0))
                    mask.append(np.asarray(arr.isna()))
            vals_a, mask_a = np.concatenate(vals), np.concatenate(mask)
            if order is not None:
                vals_a, mask_a = vals_a[order], mask_a[order]
            data[name] = pd.arrays.IntegerArray(vals_a, mask_a)
        else:
            data[name] = column(c, _float_piece)
    for c, name in enumerate(TIMESTAMP_COLUMNS, start=4 + _NS):
        data[name] = ts_column(column(c, _ts_piece), 1000)
    frame = pd.DataFrame(data)
    return conform(frame) if conformed else frame


def is_full(exc: BaseException) -> bool:
    e: BaseException | None = exc
    while e is not None:
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
            return True
        text = str(e)
        if any(s in text for s in ("No space left", "File too large", "quota exceeded",
                                   "Disk quota")):
            return True
        e = e.__cause__ or e.__context__
    return False




class Slot:
    """Per-GPU state inside the collector."""

    __slots__ = (
        "attempt",
        "attempt_result",
        "attempt_t",
        "attempt_thread",
        "backoff",
        "device",
        "down",
        "e_acc",
        "e_first",
        "e_int",
        "e_last",
        "fb",
        "first",
        "index",
        "int_n",
        "kind",
        "last",
        "latest",
        "mask_n",
        "max_dt",
        "n",
        "next_retry",
        "p_prev",
        "p_t",
        "sum_dt",
        "sum_dt2",
        "uuid",
        "xid_last",
    )

    def __init__(self, index: int):
        self.index = index
        self.device: nvml.Device | None = None
        self.uuid: str | None = None
        self.down = False
        self.kind = ""
        self.next_retry = 0.0
        self.backoff = 0.0
        self.attempt = 0
        self.attempt_thread: threading.Thread | None = None
        self.attempt_result: tuple | None = None
        self.attempt_t = 0.0
        self.n = 0
        self.first = math.nan
        self.last = math.nan
        self.sum_dt = 0.0
        self.sum_dt2 = 0.0
        self.max_dt = 0.0
        self.mask_n: dict[int, int] = {}
        self.latest: dict[int, tuple] = {}  # signal-group mask -> its latest row
        self.e_first: tuple | None = None
        self.e_last: tuple | None = None
        self.p_prev = math.nan
        self.p_t: float | None = None
        self.e_int = 0.0   # integrated instant power over sampled intervals [J]
        self.int_n = 0     # number of intervals integrated
        self.e_acc = 0.0   # counter energy of closed segments [J]
        self.fb = (math.nan, math.nan)  # framebuffer used, free [MiB] (for /metrics)
        self.xid_last: int | None = None  # last XID (0 while watched and none seen)

    def close_energy_segment(self) -> None:
        """End the current stretch of continuous readings (the GPU was lost, or its
        energy counter was reset): neither energy estimate bridges the break."""
        if self.e_first is not None and self.e_last is not None:
            self.e_acc += self.e_last[0] - self.e_first[0]
        self.e_first = self.e_last = None
        self.p_t = None


def gpu_table(slots: Sequence[Slot], span: float) -> pd.DataFrame:
    """Per-GPU rates, jitter and energy both ways (see :class:`CollectorReport`)."""
    span = max(span, 1e-9)
    rows = []
    for s in slots:
        n = s.n
        if n > 1:
            mean = s.sum_dt / (n - 1)
            var = max(s.sum_dt2 / (n - 1) - mean * mean, 0.0)
            rate = (n - 1) / (s.last - s.first)
            jitter = 1e3 * math.sqrt(var)
        else:
            mean = rate = jitter = math.nan
        counter = integrated = math.nan
        open_j = (s.e_last[0] - s.e_first[0]
                  if s.e_first is not None and s.e_last is not None else 0.0)
        if s.e_acc or open_j or (s.e_last is not None and s.e_last[1] > s.e_first[1]):
            counter = s.e_acc + open_j
        if s.int_n:
            integrated = s.e_int
        row = {
            "gpu_index": s.index, "gpu_uuid": s.uuid, "samples": n,
            "achieved_rate_hz": rate, "interval_mean_s": mean, "jitter_ms": jitter,
            "max_gap_s": s.max_dt if n > 1 else math.nan, "down": s.down,
        }
        for gi, g in enumerate(GROUPS):
            n_g = sum(c for mask, c in s.mask_n.items() if mask & (1 << gi))
            row[f"rate_{g}_hz"] = n_g / span
        row["energy_counter_j"] = counter
        row["energy_integrated_j"] = integrated
        row["energy_disagreement_pct"] = (100.0 * (integrated - counter) / counter
                                          if counter and math.isfinite(counter)
                                          else math.nan)
        rows.append(row)
    df = pd.DataFrame(rows)
    if not df.empty:
        df["gpu_index"] = df["gpu_index"].astype("Int16")
        df["gpu_uuid"] = df["gpu_uuid"].astype("string")
    return df


def latest_by_gpu(slots: Sequence[Slot]) -> list[tuple[dict[str, str], dict[str, object]]]:
    """Latest value of each column per GPU that is up (for ``/metrics``).

    Each column comes from the newest row whose tick read its signal group, so slower
    groups (e.g. temperature at 1 Hz) stay in ``/metrics`` between their reads.
    """
    pos = _POS
    out = []
    for slot in sorted(slots, key=lambda s: s.index):
        dev = slot.device
        if dev is None or not slot.latest:  # down: not reported
            continue
        values: dict[str, object] = {}
        for mask, row in sorted(slot.latest.items(), key=lambda kv: kv[1][0]):
            for col in _METRIC_COLUMNS:
                if mask & _GROUP_BIT[col]:
                    values[col] = row[pos[col]]
        values["fb_used_mib"], values["fb_free_mib"] = slot.fb
        if slot.xid_last is not None:
            values["xid_last"] = slot.xid_last
        info = dev.info
        labels = {"gpu": str(slot.index), "UUID": str(slot.uuid),
                  "pci_bus_id": info.pci_bus_id,
                  "device": f"nvidia{info.minor_number}" if info.minor_number >= 0 else "",
                  "modelName": info.name, "DCGM_FI_DRIVER_VERSION": info.driver_version}
        out.append((labels, values))
    return out
