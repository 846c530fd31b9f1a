"""Sums over devices per time bin: by cluster, host, rack or job.

A power sum adds the per-device bin means (a device missing from a bin adds nothing;
``n_gpus`` says how many devices contributed).  The devices' means are added in
(host, scope, gpu_index) order with compensated sums
(:func:`powerlab.telemetry.binning.kahan_add`), as the store paths add them, so every
path gives the same bits.  Racks come from a host -> rack mapping (:func:`rack_map`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError, SchemaError, Violation
from .binning import kahan_add
from .partitions import check_columns

__all__ = ["SUM_KEYS", "rack_map", "sum_by"]

#: Result keys of each grouping of the power sums.
SUM_KEYS = {"cluster": [], "host": ["host"], "rack": ["rack"]}


def rack_map(racks) -> pd.Series:
    """A host -> rack mapping (a mapping, a Series, or a frame with columns ``host`` and
    ``rack``) as a string Series indexed by host; a host listed twice is refused."""
    if isinstance(racks, pd.DataFrame):
        check_columns(racks.columns, ["host", "rack"], "rack mapping")
        s = pd.Series(racks["rack"].to_numpy(), index=racks["host"].astype(str).to_numpy())
    elif isinstance(racks, pd.Series):
        s = racks.copy()
    elif isinstance(racks, Mapping):
        s = pd.Series(dict(racks))
    else:
        raise PowerlabError("racks must be a mapping host -> rack, a Series or a frame "
                            "with columns 'host' and 'rack'")
    s.index = s.index.astype(str)
    if s.index.duplicated().any():
        raise SchemaError([Violation("host", "host listed twice in the rack mapping",
                                     tuple(s.index[s.index.duplicated()]))],
                          source="rack mapping")
    return s.astype("string")


def _add_rack(part: pd.DataFrame, racks: pd.Series) -> pd.DataFrame:
    part = part.copy()
    rack = part["host"].astype(str).map(racks)
    missing = part.loc[rack.isna().to_numpy(), "host"].unique()
    if len(missing):
        raise SchemaError([Violation("host", f"no rack for host(s) {sorted(map(str, missing))}"
                                             " in the rack mapping")], source="rack mapping")
    part["rack"] = rack.astype("string")
    return part


def _sum_kernel(part: pd.DataFrame, keys: Sequence[str], value: str) -> pd.DataFrame:
    """Sum ``value`` over devices per (timestamp, keys), adding in a fixed order."""
    order = ["timestamp", *keys, *[k for k in ("host", "scope", "gpu_index")
                                   if k not in keys]]
    part = part.sort_values(order, kind="stable", na_position="first")
    g = part.groupby(["timestamp", *keys], sort=True, observed=True, dropna=False)
    # compensated sums in device order (binning.kahan_add): the store paths add the same
    # values in the same order, so every path gives the same bits
    n = g.ngroups
    s, c, k = np.zeros(n), np.zeros(n), np.zeros(n, np.int64)
    kahan_add(s, c, k, g.ngroup().to_numpy(dtype=np.int64),
              part[value].to_numpy(dtype=np.float64, na_value=np.nan))
    out = pd.DataFrame({value: np.where(k >= 1, s, np.nan), "n_gpus": k},
                       index=g.size().index).reset_index()
    out = out[[*keys, "timestamp", value, "n_gpus"]] if keys else out
    for c in keys:
        out[c] = out[c].astype("string")
    return out


def sum_by(kind: str, frame, keys: Sequence[str], value: str, racks=None):
    """Sum of ``value`` per timestamp and ``keys`` on a pandas (``kind="pandas"``) or Dask
    frame (``rack`` keys mapped from ``racks``): the power sums and the per-job sums."""
    if racks is not None and "rack" in keys:
        rk = rack_map(racks)
        frame = (frame.map_partitions(_add_rack, rk, meta=_add_rack(frame._meta, rk))
                 if kind == "dask" else _add_rack(frame, rk))
    if kind == "pandas":
        return _sum_kernel(frame, keys, value)
    meta = _sum_kernel(frame._meta, keys, value)
    shuffled = frame.shuffle(on="timestamp", npartitions=max(1, frame.npartitions // 4),
                             shuffle_method="tasks")
    return shuffled.map_partitions(_sum_kernel, keys, value, meta=meta,
                                   enforce_metadata=False)
