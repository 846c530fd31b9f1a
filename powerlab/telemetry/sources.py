"""Telemetry sources: the kinds of telemetry input, told apart once.

Every aggregation of :mod:`powerlab.telemetry` (and every entry point above it that takes
measured telemetry) accepts telemetry of one of four kinds (:data:`KINDS`):

``"frame"``
    a :class:`pandas.DataFrame` in the canonical schema (a laptop, one node's data);
``"dask"``
    a :class:`dask.dataframe.DataFrame` in the canonical schema (the Dask extra);
``"store"``
    the folder of a store (:mod:`powerlab.telemetry.store`), read lazily: pruned by date
    and host folder, projected to the columns an aggregation needs;
``"parquet"``
    one canonical telemetry Parquet file (a path ending in ``.parquet``, e.g. what
    ``DataFrame.to_parquet`` writes of a canonical frame), read into memory and
    conformed: from then on the same as a frame.

:func:`telemetry_source` says which kind an input is, once, and refuses anything else
with one error that names the accepted kinds; the result, a :class:`TelemetrySource`,
is what the aggregations dispatch on, one entry per kind (pvlib's
``ModelChain.run_model_from_poa`` / ``run_model_from_effective_irradiance`` /
``run_model_from_weather``: one entry per kind of input instead of each function sorting
out its input itself).  A :class:`TelemetrySource` passed again is returned as it is, so
a caller that resolved its input once can hand the source down.

References
----------
.. [1] pvlib, ``pvlib/modelchain.py``, class ``ModelChain``, methods ``run_model`` and
   ``run_model_from_*``.

Examples
--------
>>> import pandas as pd
>>> telemetry_source(pd.DataFrame()).kind
'frame'
>>> telemetry_source("/data/telemetry").kind
'store'
>>> telemetry_source("run.parquet").kind
'parquet'
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..exceptions import PowerlabError, SchemaError, Violation
from .partitions import is_dask
from .schema import conform

__all__ = ["KINDS", "TelemetrySource", "is_parquet_file", "read_parquet_telemetry",
           "telemetry_source"]

#: The four bytes a Parquet file starts (and ends) with.
PARQUET_MAGIC = b"PAR1"

#: The kinds of telemetry input, in the order messages list them.
KINDS = ("frame", "dask", "store", "parquet")
_DESCRIBE = {"frame": "a pandas DataFrame", "dask": "a Dask DataFrame",
             "store": "a store folder", "parquet": "a canonical telemetry .parquet file"}


@dataclass(frozen=True, eq=False)
class TelemetrySource:
    """One telemetry input and its kind (see :data:`KINDS`).

    Attributes
    ----------
    kind : {"frame", "dask", "store", "parquet"}
        The kind of input.
    data : object
        The input as given: the pandas or Dask frame, or the path (str or path-like,
        unchanged, so that messages name it as the caller wrote it).
    """

    kind: str
    data: object = field(repr=False)

    @property
    def path(self) -> Path | None:
        """The store folder or Parquet file, or None for a frame."""
        return Path(self.data) if self.kind in ("store", "parquet") else None

    def frame(self) -> pd.DataFrame:
        """The telemetry as a pandas frame: the frame itself, or the Parquet file read
        and conformed (:func:`read_parquet_telemetry`).

        Raises
        ------
        powerlab.exceptions.PowerlabError
            For a Dask frame or a store, which are never read whole by this method.
        """
        if self.kind == "frame":
            return self.data
        if self.kind == "parquet":
            return read_parquet_telemetry(self.data)
        raise PowerlabError(f"{_DESCRIBE[self.kind]} is not read into one pandas frame "
                            "here; aggregate it where it is")


def telemetry_source(data, *, kinds=KINDS, name: str = "data") -> TelemetrySource:
    """Which kind of telemetry ``data`` is: the one resolver of telemetry inputs.

    Parameters
    ----------
    data : pandas.DataFrame, dask.dataframe.DataFrame, path-like or TelemetrySource
        The telemetry: a frame in the canonical schema, a store folder, or a path
        ending in ``.parquet`` (a canonical telemetry file; a folder of that name is a
        store).  A :class:`TelemetrySource` is returned as it is (when its kind is
        accepted).
    kinds : sequence of str, default KINDS
        The kinds the caller accepts (a subset of :data:`KINDS`).
    name : str, default "data"
        The argument's name in the error message.

    Returns
    -------
    TelemetrySource

    Raises
    ------
    powerlab.exceptions.PowerlabError
        For anything else, or a kind not in ``kinds``: one line naming the accepted
        kinds and what came.
    """
    if isinstance(data, TelemetrySource):
        kind = data.kind
    elif isinstance(data, pd.DataFrame):
        kind = "frame"
    elif isinstance(data, (str, os.PathLike)):
        p = Path(data)
        kind = "parquet" if p.suffix.lower() == ".parquet" and not p.is_dir() else "store"
    elif is_dask(data):
        kind = "dask"
    else:
        kind = None
    if kind not in kinds:
        raise PowerlabError(_refusal(data, kind, kinds, name))
    return data if isinstance(data, TelemetrySource) else TelemetrySource(kind, data)


def _refusal(data, kind: str | None, kinds, name: str) -> str:
    listed = [f"{_DESCRIBE[k]} ('{k}')" for k in kinds]
    accepted = listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " or " + listed[-1]
    got = (f"{_DESCRIBE[kind]} ('{kind}')" if kind is not None
           else type(data).__name__)
    return f"{name} must be telemetry: {accepted}; got {got}"


def read_parquet_telemetry(path) -> pd.DataFrame:
    """One canonical telemetry Parquet file, read and conformed
    (:func:`~powerlab.telemetry.schema.conform`).

    Raises
    ------
    powerlab.exceptions.PowerlabError
        A missing or unreadable file, naming it.
    powerlab.exceptions.SchemaError
        Columns that break the canonical schema.
    """
    p = Path(path)
    if not p.exists():
        raise PowerlabError(f"{path}: no such file or folder")
    try:
        with open(p, "rb") as fh:       # into memory: never mapped (issue 38, SIGBUS)
            table = pq.read_table(pa.BufferReader(fh.read()))
    except (OSError, pa.ArrowException) as exc:
        raise PowerlabError(f"{path}: cannot read as Parquet: {exc}") from None
    df = _to_pandas(table, path)
    for c in ("host", "scope", "gpu_uuid", "job_id"):  # a store's own part file: categories
        if c in df and isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(object)
    return conform(df)


def _to_pandas(table: pa.Table, path) -> pd.DataFrame:
    """``table`` as a frame; a column whose values its stored type cannot hold (a
    ``gpu_index`` of ``inf`` or ``-1e300`` stored as Int16) refused naming it."""
    try:
        return table.to_pandas()
    except (pa.ArrowException, ValueError, OverflowError, TypeError) as exc:
        first = exc
    for name in table.column_names:
        try:
            table.select([name]).to_pandas()
        except (pa.ArrowException, ValueError, OverflowError, TypeError) as exc:
            raise SchemaError([Violation(name, f"holds values its type cannot hold: "
                                               f"{str(exc)[:160]}")], source=str(path)) \
                from None
    raise PowerlabError(f"{path}: cannot read as telemetry: {str(first)[:160]}")


def is_parquet_file(path) -> bool:
    """Whether ``path`` is a file that starts with the Parquet magic bytes (whatever its
    name: a store's part file, ``canon.parquet``, a file without a suffix)."""
    try:
        with open(path, "rb") as fh:
            return os.path.isfile(path) and fh.read(4) == PARQUET_MAGIC
    except (OSError, ValueError):
        return False

