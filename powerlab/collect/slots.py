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

from . import nvml
from .metrics import DCGM_FIELDS
from .sidetables import ts_column

__all__ = ["I_ENERGY", "I_POWER", "I_TS_ENERGY", "I_TS_POWER", "ROW_COLS", "Slot", "gpu_table", "is_full", "latest_by_gpu", "rows_to_frame"]

ROW_COLS = ("_wall_ns", "gpu_index", "gpu_uuid", "monotonic_s", *nvml.SAMPLE_COLUMNS,
            *nvml.TIMESTAMP_COLUMNS)
_NS = len(nvml.SAMPLE_COLUMNS)
I_POWER = 4 + nvml.SAMPLE_COLUMNS.index("power_w")
I_ENERGY = 4 + nvml.SAMPLE_COLUMNS.index("energy_j")
I_TS_POWER = 4 + _NS + nvml.TIMESTAMP_COLUMNS.index("nvml_time_power")
I_TS_ENERGY = 4 + _NS + nvml.TIMESTAMP_COLUMNS.index("nvml_time_energy")
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_GROUP_BIT = {c: 1 << gi for gi, cols in enumerate(nvml.GROUPS.values()) for c in cols}
_METRIC_COLUMNS = tuple(f[1] for f in DCGM_FIELDS if f[1] in _GROUP_BIT)
_POS = {c: i for i, c in enumerate(ROW_COLS)}

# ---------------------------------------------------------------------------- frames


def rows_to_frame(rows: Sequence[tuple], host: str, conformed: bool = True) -> pd.DataFrame:
    """Samples (row tuples) as a telemetry frame (conformed and sorted when asked)."""
    from ..telemetry.schema import conform, empty_frame

    if not rows:
        out = empty_frame()
        for c in ("monotonic_s", "power_avg_w", "util_mem_pct"):
            out[c] = pd.Series([], dtype="float64")
        for c in nvml.TIMESTAMP_COLUMNS:
            out[c] = pd.Series([], dtype="datetime64[ns, UTC]")
        return conform(out)
    cols = list(zip(*rows))
    wall = np.fromiter(cols[0], dtype=np.int64, count=len(rows))
    data: dict[str, object] = {
        "timestamp": pd.Series(wall.view("datetime64[ns]")).dt.tz_localize("UTC"),
        "host": pd.array([host] * len(rows), dtype="string"),
        "scope": pd.array(["gpu"] * len(rows), dtype="string"),
        "gpu_index": pd.array(cols[1], dtype="Int16"),
        "gpu_uuid": pd.array(cols[2], dtype="string"),
        "monotonic_s": np.asarray(cols[3], dtype="float64"),
    }
    for name, col in zip(nvml.SAMPLE_COLUMNS, cols[4:4 + _NS]):
        if name == "throttle_reasons":
            data[name] = pd.array(col, dtype="UInt64")
        else:
            data[name] = np.asarray(col, dtype="float64")
    for name, col in zip(nvml.TIMESTAMP_COLUMNS, cols[4 + _NS:]):
        data[name] = ts_column(col, 1000)
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
        for gi, g in enumerate(nvml.GROUPS):
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
