"""GPU error events (XIDs, health failures) kept beside the telemetry in a store.

Events live in ``<store>/_events/`` as Parquet files with the canonical events columns
(:data:`powerlab.telemetry.events.EVENT_COLUMNS`).  :func:`write_events` appends only
events the store does not hold yet (same timestamp, host, GPU, XID and message), so
importing a log twice never duplicates an event; :func:`read_events` returns them all,
sorted by time, for :func:`powerlab.reliability.hazard.exposure_table` and
:func:`powerlab.reliability.rates.failure_rates`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pandas as pd

from ..exceptions import SchemaError, Violation
from ..outputs import atomic_write
from .events import EVENT_COLUMNS, EVENT_DTYPES, empty_events

__all__ = ["EVENTS_DIR", "read_events", "write_events"]

#: folder of the events inside a store
EVENTS_DIR = "_events"
_KEY = ["timestamp", "host", "gpu_index", "gpu_uuid", "pci_bus_id", "xid", "message"]


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in EVENT_COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError([Violation(c, "missing events column") for c in missing])
    return df[list(EVENT_COLUMNS)].astype(EVENT_DTYPES)


def read_events(root: str | os.PathLike) -> pd.DataFrame:
    """All events in the store at ``root`` (an empty events table when there are none).

    Returns
    -------
    pandas.DataFrame
        Canonical events columns, sorted by timestamp.
    """
    folder = Path(root) / EVENTS_DIR
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not files:
        return empty_events()
    df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    return _canonical(df).sort_values("timestamp", kind="stable").reset_index(drop=True)


def write_events(df: pd.DataFrame, root: str | os.PathLike) -> tuple[Path | None, int]:
    """Append events to the store at ``root``, skipping those it already holds.

    Parameters
    ----------
    df : pandas.DataFrame
        An events table (the :mod:`powerlab.iotools.xid` readers' output).
    root : path
        Store folder (created when missing).

    Returns
    -------
    path, rows : (pathlib.Path or None, int)
        The file written (None when every event was already there) and its rows.
    """
    new = _canonical(df)
    old = read_events(root)
    if len(old) and len(new):
        key = lambda d: pd.MultiIndex.from_frame(d[_KEY].astype("string").fillna("<NA>"))
        new = new[~key(new).isin(key(old))]
    new = new.drop_duplicates(subset=_KEY).reset_index(drop=True)
    if new.empty:
        return None, 0
    folder = Path(root) / EVENTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    payload = new.to_parquet(index=False)
    name = f"events-{hashlib.sha256(payload).hexdigest()[:16]}.parquet"
    path = folder / name
    atomic_write(path, lambda tmp, b=payload: Path(tmp).write_bytes(b))
    return path, len(new)
