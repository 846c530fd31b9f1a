"""Telemetry from a path as the command line takes it: the one dispatcher of
``summary``, ``import``, ``calibrate`` and ``backtest``, so a canonical Parquet file is
accepted wherever telemetry is (issue 38: it was refused as "holds NUL bytes")."""

from __future__ import annotations

from pathlib import Path

from ..exceptions import ParseError
from ..iotools import read_any
from ..telemetry.sources import is_parquet_file, read_parquet_telemetry
from ..telemetry.store import read_store
from ..telemetry.storefiles import is_store


def read_telemetry_path(path, *, tz: str | None = None, **kw):
    """A store folder (:func:`~powerlab.telemetry.store.read_store`), a canonical
    Parquet file recognised by its content, whatever its name (a store's own part file
    too; :func:`~powerlab.telemetry.sources.read_parquet_telemetry`), or any file or
    folder a registered reader recognises (:func:`powerlab.iotools.read_any`, with ``tz``
    and the reader options ``kw``)."""
    p = Path(path)
    if is_store(p):
        return read_store(p)
    if is_parquet_file(p):
        return read_parquet_telemetry(p)
    if not p.exists():
        raise ParseError("no such file, folder or store", path=p)
    return read_any(p, tz=tz, **kw)
