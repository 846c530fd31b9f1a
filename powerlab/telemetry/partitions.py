"""Reading a telemetry store for aggregation: partition pruning, projection, Dask inputs.

A store (:mod:`powerlab.telemetry.store`) is read in *groups* of whole date/host
folders of one date, so that one device-day never spans two partitions; only the folders
that can hold samples of the asked time range and hosts are listed, and only the columns an
aggregation needs are read.  :func:`open_store` exposes the same as a lazy Dask DataFrame.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import PowerlabError, SchemaError, StoreError, Violation
from .schema import CORE_COLUMNS, GLOSSARY, empty_frame
from .store import list_files
from .store_tables import read_tables
from .storefiles import partition_of
from .timeutil import time_bound as _utc

__all__ = ["ID_COLUMNS", "LABEL_COLUMNS", "StoreGroup", "StoreSource", "check_columns",
           "columns_for", "filter_frame", "is_dask", "open_store", "read_files",
           "read_partition", "store_groups"]

#: Identity columns every aggregation reads.
ID_COLUMNS = ["timestamp", "host", "scope", "gpu_index", "gpu_uuid"]
#: Label columns that may stay dictionary-encoded (categoricals) when read.
LABEL_COLUMNS = ("host", "scope", "gpu_uuid")


def is_dask(obj) -> bool:
    try:
        import dask.dataframe as dd
    except ImportError:  # pragma: no cover - dask is an optional extra
        return False
    return isinstance(obj, dd.DataFrame)


@dataclass(frozen=True)
class StoreGroup:
    """One Dask partition of a store: whole date/host folders of one date."""

    date: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class StoreSource:
    root: Path
    groups: tuple[StoreGroup, ...]
    start: pd.Timestamp | None
    end: pd.Timestamp | None


def store_groups(root, start, end, hosts, partition_rows: int) -> StoreSource:
    if partition_rows < 1:
        raise PowerlabError("partition_rows must be at least 1 [rows]")
    root = Path(root)
    start, end = _utc(start), _utc(end)
    files = list_files(root, start=start, end=end, hosts=hosts)
    by_folder: dict[tuple[str, str], list[Path]] = {}
    for f in files:
        by_folder.setdefault(partition_of(f), []).append(f)
    groups: list[StoreGroup] = []
    cur_date, cur_files, cur_rows = None, [], 0
    for (date, _host), fs in sorted(by_folder.items()):
        try:
            rows = sum(pq.ParquetFile(f).metadata.num_rows for f in fs)
        except Exception as exc:
            raise StoreError(f"cannot read the Parquet footer of a file in {fs[0].parent}: "
                             f"{exc}") from exc
        if cur_files and (date != cur_date or cur_rows + rows > partition_rows):
            groups.append(StoreGroup(cur_date, tuple(map(str, cur_files))))
            cur_files, cur_rows = [], 0
        cur_date = date
        cur_files.extend(fs)
        cur_rows += rows
    if cur_files:
        groups.append(StoreGroup(cur_date, tuple(map(str, cur_files))))
    return StoreSource(root, tuple(groups), start, end)


LABEL_COLUMNS = ("host", "scope", "gpu_uuid")


def read_files(files: Sequence[str], columns: Sequence[str], start, end, *,
                categorical: bool = False) -> pd.DataFrame:
    """Read store files into one frame (file order kept), projected to ``columns``.

    With ``categorical`` the label columns stay dictionary-encoded (categoricals), which
    the kernels factorise for free.
    """
    tables = read_tables(files, columns=columns, start=start, end=end,
                         read_dictionary=[c for c in LABEL_COLUMNS if c in columns]
                         if categorical else ())
    if not tables:
        return empty_frame(columns)
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 \
        else tables[0]
    df = table.to_pandas()
    for c in columns:
        if c not in df.columns:
            df[c] = pd.Series(pd.NA, index=df.index, dtype=GLOSSARY[c].dtype) \
                if GLOSSARY[c].dtype != "float64" else np.nan
        elif categorical and c in LABEL_COLUMNS:
            continue
        elif str(df[c].dtype) != GLOSSARY[c].dtype and not (
                GLOSSARY[c].dtype == "string" and isinstance(df[c].dtype, pd.StringDtype)):
            df[c] = df[c].astype(GLOSSARY[c].dtype)
    return df[list(columns)]


def read_partition(group: StoreGroup, start, end, all_columns: Sequence[str],
                    columns: Sequence[str] | None = None) -> pd.DataFrame:
    """One partition of :func:`open_store`; ``columns`` is Dask's projection."""
    if columns is not None:
        keep = {columns} if isinstance(columns, str) else set(columns)
        all_columns = [c for c in all_columns if c in keep]
    return read_files(group.files, all_columns, start, end)


def open_store(root: str | os.PathLike, *, start=None, end=None,
               hosts: Sequence[str] | None = None, columns: Sequence[str] | None = None,
               partition_rows: int = 2_000_000):
    """Open a telemetry store as a lazy Dask DataFrame.

    Only the date/host folders that can hold samples of ``[start, end)`` for
    ``hosts`` are listed (partition pruning); each partition reads whole folders of one
    date (so one device-day never spans partitions) and only the columns asked for
    (column projection, also pushed down by Dask's optimiser).

    Parameters
    ----------
    root : path-like
        The store folder.
    start, end : datetime-like, optional
        Keep samples with ``start <= timestamp < end`` (tz-aware).
    hosts : sequence of str, optional
        Keep these hosts only.
    columns : sequence of str, optional
        Measurement columns to read; identity columns are always read.
    partition_rows : int, default 2,000,000
        Folders of one date are grouped into a partition of up to this many rows (a
        single folder may exceed it) [rows].

    Returns
    -------
    dask.dataframe.DataFrame
        Telemetry with the canonical dtypes; rows in file order within each partition.
    """
    import dask.dataframe as dd

    cols = columns_for(columns if columns is not None else CORE_COLUMNS)
    src = store_groups(root, start, end, hosts, partition_rows)
    if not src.groups:
        return dd.from_pandas(empty_frame(cols), npartitions=1)
    return dd.from_map(read_partition, list(src.groups), args=[src.start, src.end, cols],
                       meta=empty_frame(cols), enforce_metadata=False, label="read-store")


def columns_for(columns: Iterable[str]) -> list[str]:
    columns = list(columns)
    unknown = [c for c in columns if c not in GLOSSARY]
    if unknown:
        raise SchemaError([Violation(c, f"unknown column; known: {sorted(GLOSSARY)}")
                           for c in unknown])
    return list(dict.fromkeys([*ID_COLUMNS, *columns]))


def filter_frame(df: pd.DataFrame, start, end, hosts) -> pd.DataFrame:
    start, end = _utc(start), _utc(end)
    if start is None and end is None and hosts is None:
        return df
    keep = pd.Series(True, index=df.index)
    if start is not None:
        keep &= df["timestamp"] >= start
    if end is not None:
        keep &= df["timestamp"] < end
    if hosts is not None:
        keep &= df["host"].isin([str(h) for h in hosts])
    return df[keep.to_numpy(dtype=bool)]


def check_columns(columns: Iterable[str], need: Iterable[str], source: str) -> None:
    have = set(columns)
    missing = [c for c in need if c not in have]
    if missing:
        raise SchemaError([Violation(c, "missing column needed for the aggregation "
                                        f"(expected {GLOSSARY[c].dtype}"
                                        f"{', unit ' + GLOSSARY[c].unit if c in GLOSSARY and GLOSSARY[c].unit else ''})")
                           for c in missing], source=source)
