"""Side tables of a collector store: status events and the GPUs' static facts.

They live beside the telemetry, under ``STORE/_meta/events/`` and ``STORE/_meta/devices/``
(format 2; format-1 stores kept them in ``STORE/events/`` and ``STORE/devices/``, still
read), one new Parquet file per write named ``*.pq``, so that tools reading the
telemetry (``STORE/**/*.parquet``) never pick them up (atomic, see
:func:`powerlab.telemetry.store.atomic_write_bytes`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import StoreError
from ..telemetry.store import atomic_write_bytes
from ..telemetry.storefiles import (
    clean_dead_temporaries,
    owner_tag,
    side_table_dir,
    side_table_files,
)

__all__ = ["DEVICE_COLUMNS", "EVENT_COLUMNS", "device_facts_frame", "events_frame",
           "read_devices", "read_events", "ts_column", "write_side_table"]

#: int64 of NaT (a timestamp not read).
NAT = np.iinfo(np.int64).min

#: Columns of the status-event frame (see :func:`read_events`).
EVENT_COLUMNS = ("timestamp", "host", "gpu_index", "gpu_uuid", "kind", "attempt",
                 "backoff_s", "message")


def ts_column(values: Sequence, scale: int) -> pd.Series:
    try:
        a = np.array(values, dtype=np.int64)
    except TypeError:  # None (not read) present
        a = np.array([NAT if v is None else v for v in values], dtype=np.int64)
    if scale != 1:
        nat = a == NAT
        a = a * scale
        a[nat] = NAT
    return pd.Series(a.view("datetime64[ns]")).dt.tz_localize("UTC")


def events_frame(events: Sequence[dict]) -> pd.DataFrame:
    df = pd.DataFrame(list(events), columns=list(EVENT_COLUMNS))
    return pd.DataFrame({
        "timestamp": ts_column(list(df["timestamp"]), 1),
        "host": pd.array(df["host"], dtype="string"),
        "gpu_index": pd.array(df["gpu_index"], dtype="Int16"),
        "gpu_uuid": pd.array(df["gpu_uuid"], dtype="string"),
        "kind": pd.array(df["kind"], dtype="string"),
        "attempt": pd.array(df["attempt"], dtype="Int64"),
        "backoff_s": df["backoff_s"].astype("float64"),
        "message": pd.array(df["message"], dtype="string"),
    })


def read_events(root: str | Path) -> pd.DataFrame:
    """Status events recorded by collectors in a store, sorted by time.

    Columns: ``timestamp`` (UTC), ``host``, ``gpu_index``, ``gpu_uuid``, ``kind``
    (``lost``, ``timeout``, ``unknown``, ``error``, ``retry_failed``, ``recovered``,
    ``hang``, ``dropped``, ``xid``, ``start``, ``stop``), ``attempt``, ``backoff_s`` [s], ``message``.
    """
    return _read_side_table(root, "events", events_frame([]), ["timestamp"])


def write_side_table(root: Path, kind: str, frame: pd.DataFrame) -> Path:
    """Write a side table (``events``, ``devices``) of a store as a new Parquet file,
    atomically (see store.atomic_write_bytes); temporary files that a killed writer of
    this host left in the folder are removed first."""
    stamp = frame["timestamp"].min().strftime("%Y%m%dT%H%M%S%fZ")
    folder = side_table_dir(root, kind)
    # several collectors share this folder: only leftovers of dead writers are removed
    clean_dead_temporaries(folder)
    path = folder / f"{kind}-{stamp}-{uuid.uuid4().hex[:12]}.pq"
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return atomic_write_bytes(path, lambda tmp: pq.write_table(table, tmp), tag=owner_tag())


def _read_side_table(root, kind: str, empty: pd.DataFrame, sort_by: list[str]) -> pd.DataFrame:
    """All files of a side table of a store, concatenated and sorted."""
    files = side_table_files(root, kind)
    if not files:
        return empty
    try:
        frames = [pq.read_table(f).to_pandas() for f in files]
    except OSError as exc:
        raise StoreError(f"cannot read {kind} in {root}: {exc}") from exc
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(sort_by, kind="stable").reset_index(drop=True)


#: Columns of the device-facts frame (see :func:`read_devices`).
DEVICE_COLUMNS = ("timestamp", "host", "gpu_index", "gpu_uuid", "name", "serial", "tdp_w",
                  "driver_version", "capabilities", "pci_bus_id")


def read_devices(root: str | Path) -> pd.DataFrame:
    """Static GPU facts recorded by collectors in a store, one row per GPU and start.

    Columns: ``timestamp`` (UTC, when the collector started), ``host``, ``gpu_index``,
    ``gpu_uuid``, ``name``, ``serial``, ``tdp_w`` [W], ``driver_version`` and
    ``capabilities`` (JSON: for each measured column, ``field``, ``call`` or
    ``unsupported``) and ``pci_bus_id`` (missing in stores written before it was
    recorded: NA).
    """
    return _read_side_table(root, "devices", pd.DataFrame(columns=list(DEVICE_COLUMNS)),
                            ["timestamp", "host", "gpu_index"])


def device_facts_frame(devices: dict, host: str) -> pd.DataFrame:
    """Static facts of opened GPUs (``{index: Device}``), one row each, stamped now."""
    rows = []
    now = pd.Timestamp.now(tz="UTC")
    for i, dev in sorted(devices.items()):
        info = dev.info
        rows.append({"timestamp": now, "host": host, "gpu_index": i,
                     "gpu_uuid": info.uuid, "name": info.name, "serial": info.serial,
                     "tdp_w": float(info.tdp_w), "driver_version": info.driver_version,
                     "pci_bus_id": info.pci_bus_id,
                     "capabilities": json.dumps(dict(info.capabilities), sort_keys=True)})
    df = pd.DataFrame(rows, columns=list(DEVICE_COLUMNS))
    return df.astype({"host": "string", "gpu_index": "Int16", "gpu_uuid": "string",
                      "name": "string", "serial": "string", "tdp_w": "float64",
                      "driver_version": "string", "capabilities": "string",
                      "pci_bus_id": "string"})
