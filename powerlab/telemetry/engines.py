"""Where a fleet aggregation runs: pandas in this process, or Dask.

Dask is an extra (``pip install 'powerlab[dask]'``).  The power aggregations
(:func:`powerlab.telemetry.aggregate.power_sums`, :func:`powerlab.telemetry.jobs.job_power`,
and so ``powerlab aggregate``) take ``engine="auto" | "dask" | "pandas"``: ``auto`` uses
Dask for a store when it is installed and pandas otherwise; both run the same kernels and
give the same numbers.  The other aggregations of a store path (``resample_gpu``,
``peer_stats``, ``quality_masks``) still need Dask; give them a frame to stay in pandas.
An aggregation that finds nothing to aggregate says why (:class:`EmptyResultWarning`)
instead of returning an empty table in silence.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Sequence

import pandas as pd

from ..exceptions import DataQualityWarning, PowerlabError

__all__ = ["ENGINES", "EmptyResultWarning", "dask_available", "explain_empty",
           "resolve_engine", "store_frame"]

ENGINES = ("auto", "dask", "pandas")


class EmptyResultWarning(DataQualityWarning):
    """An aggregation produced no rows; the message says why and what to change."""


def dask_available() -> bool:
    """Whether the Dask extra (dask.dataframe) is installed."""
    try:
        return importlib.util.find_spec("dask.dataframe") is not None
    except (ImportError, ValueError):
        return False


def resolve_engine(engine: str) -> str:
    """``'dask'`` or ``'pandas'`` for ``engine`` in :data:`ENGINES`.

    Raises
    ------
    PowerlabError
        An unknown engine, or ``'dask'`` without the Dask extra.
    """
    if engine not in ENGINES:
        raise PowerlabError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "auto":
        return "dask" if dask_available() else "pandas"
    if engine == "dask" and not dask_available():
        raise PowerlabError("engine='dask' needs the Dask extra: pip install "
                            "'powerlab[dask]' (or use engine='pandas')")
    return engine


def store_frame(root, columns: Sequence[str], start=None, end=None,
                hosts: Sequence[str] | None = None) -> pd.DataFrame:
    """A store's rows in ``[start, end)`` for ``hosts``, projected to ``columns``, in
    memory (the pandas engine's input; file order kept as the Dask path keeps it)."""
    from .partitions import read_files, store_groups

    src = store_groups(root, start, end, hosts, 2**62)
    files = [f for g in src.groups for f in g.files]
    return read_files(files, list(columns), src.start, src.end, categorical=True)


def _scope_counts(data, start, end, hosts) -> dict[str, int]:
    if isinstance(data, (str, os.PathLike)):
        df = store_frame(data, ["timestamp", "host", "scope"], start, end, hosts)
    elif isinstance(data, pd.DataFrame):
        from .partitions import filter_frame

        df = filter_frame(data, start, end, hosts) if "timestamp" in data.columns else data
    else:
        return {}
    if "scope" not in df.columns:
        return {}
    return {str(k): int(v) for k, v in df["scope"].astype("string").value_counts().items()}


def explain_empty(what: str, data, *, scope: str | None, start=None, end=None,
                  hosts: Sequence[str] | None = None) -> str:
    """Why an aggregation of ``data`` found no rows: what the input holds instead."""
    counts = _scope_counts(data, start, end, hosts)
    where = []
    if start is not None or end is not None:
        where.append(f"between {start} and {end}")
    if hosts is not None:
        where.append(f"for hosts {list(hosts)}")
    place = (" " + " ".join(where)) if where else ""
    if not counts:
        return f"{what}: no telemetry rows{place}; the result is empty"
    held = ", ".join(f"{n:,} '{k}' rows" for k, n in sorted(counts.items()))
    msg = f"{what}: no rows of scope '{scope}'{place}; the input holds {held}"
    others = [k for k in counts if k != scope]
    if scope is not None and others:
        msg += f"; use scope '{others[0]}' (--scope {others[0]}) or 'all'"
    return msg


def warn_if_empty(result, what: str, data, *, scope, start=None, end=None,
                  hosts=None) -> None:
    """Warn with :func:`explain_empty` when a computed result has no rows."""
    if isinstance(result, pd.DataFrame) and len(result) == 0:
        warnings.warn(explain_empty(what, data, scope=scope, start=start, end=end,
                                    hosts=hosts), EmptyResultWarning, stacklevel=3)
