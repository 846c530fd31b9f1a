"""Per-rank step and section times of a distributed training job, and the rank -> GPU map
that joins them to telemetry.

Two sources:

- a CSV (or a DataFrame) with one row per rank, step and section: ``rank, step, section,
  duration_s`` (required), and optionally ``peer`` (the other rank of a point-to-point
  section: a link), ``host``, ``gpu_index``, ``gpu_uuid`` (the rank's GPU) -- what a
  training script's own timers write (:func:`read_rank_times`);
- PyTorch's NCCL **flight recorder** dumps (:func:`read_flight_recorder`), one file per
  rank (``TORCH_NCCL_TRACE_BUFFER_SIZE`` > 0; written on a timeout with
  ``TORCH_NCCL_DUMP_ON_TIMEOUT`` or on demand by
  ``torch._C._distributed_c10d._dump_nccl_trace()`` / ``_dump_nccl_trace_json()``), in
  the format of the PyTorch tutorial "Flight Recorder for Debugging" (prototype, PyTorch
  2.5; keys ``version``, ``pg_config``, ``pg_status``, ``entries`` with ``record_id``,
  ``pg_id``, ``collective_seq_id``, ``profiling_name`` such as ``nccl:all_reduce``,
  ``time_created_ns``, ``duration_ms`` (only with ``TORCH_NCCL_ENABLE_TIMING=1``),
  ``state``, ``time_discovered_started_ns``, ``time_discovered_completed_ns``).  Each
  completed collective becomes one row: step = ``collective_seq_id``, section =
  ``profiling_name`` (with the process group), duration = ``duration_ms`` or, without
  it, discovered-completed minus discovered-started.  JSON dumps are read as JSON;
  pickled dumps with a restricted unpickler that builds only plain containers and
  numbers (nothing executable).  The rank is the file name's trailing number
  (``nccl_trace_rank_<N>``, the default dump prefix) unless ``ranks`` are given.

A rank map (:func:`read_rank_map`, CSV ``rank, host, gpu_index[, gpu_uuid]``, or the
times' own columns) joins ranks to GPUs.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import ParseError
from ._common import read_text

__all__ = ["read_flight_recorder", "read_rank_map", "read_rank_times"]

_REQUIRED = ("rank", "step", "section", "duration_s")
_MAP_COLS = ("host", "gpu_index", "gpu_uuid")


def _csv(src, what: str) -> tuple[pd.DataFrame, str | None]:
    if isinstance(src, pd.DataFrame):
        return src.copy(), None
    text, name = read_text(Path(src) if isinstance(src, str) and "\n" not in src
                           else src, what=what)
    try:
        df = pd.read_csv(io.StringIO(text), skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ParseError(f"not a CSV table ({exc})", path=name) from None
    df.columns = [str(c).strip() for c in df.columns]
    return df, name


def _int_column(df: pd.DataFrame, col: str, name, *, minimum: int | None = 0):
    v = pd.to_numeric(df[col], errors="coerce")
    bad = ~np.isfinite(v.to_numpy(dtype=float)) | (v.to_numpy(dtype=float) % 1 != 0)
    if minimum is not None:
        bad |= v.to_numpy(dtype=float) < minimum
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ParseError(f"expected a whole number{'' if minimum is None else ' >= 0'}, "
                         f"found {df[col].iloc[i]!r}", path=name, line=i + 2, column=col)
    return v.astype(np.int64)


def read_rank_map(src) -> pd.DataFrame:
    """Rank -> GPU map: ``rank, host, gpu_index`` (and ``gpu_uuid``), from a CSV path,
    CSV text or a DataFrame.

    Raises
    ------
    powerlab.exceptions.ParseError
        Missing columns, a rank that is not a whole number, or a rank listed twice.
    """
    df, name = _csv(src, "rank map")
    missing = [c for c in ("rank", "host", "gpu_index") if c not in df.columns]
    if missing:
        raise ParseError(f"missing column(s) {missing}; expected rank, host, gpu_index "
                         "[, gpu_uuid]", path=name)
    df["rank"] = _int_column(df, "rank", name)
    df["gpu_index"] = _int_column(df, "gpu_index", name).astype("Int16")
    dup = df["rank"].duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise ParseError(f"rank {df['rank'].iloc[i]} listed twice", path=name,
                         line=i + 2, column="rank")
    df["host"] = df["host"].astype("string")
    if "gpu_uuid" in df.columns:
        df["gpu_uuid"] = df["gpu_uuid"].astype("string")
    return df[[c for c in ("rank", *_MAP_COLS) if c in df.columns]].reset_index(drop=True)


def _join_map(df: pd.DataFrame, rank_map) -> pd.DataFrame:
    if rank_map is None:
        return df
    m = read_rank_map(rank_map)
    df = df.drop(columns=[c for c in _MAP_COLS if c in df.columns and c in m.columns])
    return df.merge(m, on="rank", how="left")


def read_rank_times(src, *, rank_map=None) -> pd.DataFrame:
    """Per-rank step or section times from a CSV (path, text) or a DataFrame.

    Parameters
    ----------
    src : path, str or pandas.DataFrame
        Columns ``rank, step, section, duration_s`` (one row per rank, step and
        section; a job with no sections uses one, e.g. ``step``), optionally ``peer``,
        ``host``, ``gpu_index``, ``gpu_uuid``.
    rank_map : path, str or pandas.DataFrame, optional
        Rank -> GPU map (:func:`read_rank_map`); replaces the times' own GPU columns.

    Returns
    -------
    pandas.DataFrame
        rank (int64), step (int64), section (string), duration_s (float64), and peer
        (Int64), host, gpu_index, gpu_uuid where given.

    Raises
    ------
    powerlab.exceptions.ParseError
        Missing columns (file and the expected names), a rank or step that is not a
        whole number, a duration that is negative or not a number (line and column).
    """
    df, name = _csv(src, "rank times")
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise ParseError(f"missing column(s) {missing}; expected {list(_REQUIRED)} "
                         "[, peer, host, gpu_index, gpu_uuid]", path=name)
    df = df.reset_index(drop=True)
    df["rank"] = _int_column(df, "rank", name)
    df["step"] = _int_column(df, "step", name, minimum=None)
    dur = pd.to_numeric(df["duration_s"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(dur) | (dur < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ParseError(f"expected a duration >= 0 s, found {df['duration_s'].iloc[i]!r}",
                         path=name, line=i + 2, column="duration_s")
    df["duration_s"] = dur
    df["section"] = df["section"].astype("string").str.strip()
    if "peer" in df.columns:
        df["peer"] = pd.to_numeric(df["peer"], errors="coerce").astype("Int64")
    if "gpu_index" in df.columns:
        df["gpu_index"] = pd.to_numeric(df["gpu_index"], errors="coerce").astype("Int16")
    if "host" in df.columns:
        df["host"] = df["host"].astype("string")
    return _join_map(df, rank_map)


class _PlainUnpickler(pickle.Unpickler):
    """Builds dicts, lists, tuples, strings and numbers only: any class or function
    reference in the stream is refused (a flight-recorder dump needs none)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing {module}.{name}: a flight-recorder dump "
                                     "holds plain data only")


def _load_dump(path: Path) -> dict:
    name = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ParseError(f"cannot read the file ({exc.strerror or exc})", path=name) from None
    try:
        if raw.lstrip()[:1] == b"{":
            obj = json.loads(raw.decode("utf-8"))
        else:
            obj = _PlainUnpickler(io.BytesIO(raw)).load()
    except (ValueError, pickle.UnpicklingError, EOFError) as exc:
        raise ParseError(f"not a flight-recorder dump (JSON or plain pickle): {exc}",
                         path=name) from None
    if not isinstance(obj, dict) or "entries" not in obj:
        raise ParseError("no 'entries' key; expected a PyTorch NCCL flight-recorder dump",
                         path=name)
    return obj


def read_flight_recorder(paths, *, ranks=None, rank_map=None) -> pd.DataFrame:
    """Collective durations per rank from PyTorch NCCL flight-recorder dumps.

    Parameters
    ----------
    paths : path or list of paths
        One dump per rank, or a directory of them.
    ranks : list of int, optional
        The rank of each file; default: the trailing number of its name.
    rank_map : optional
        Rank -> GPU map (:func:`read_rank_map`).

    Returns
    -------
    pandas.DataFrame
        As :func:`read_rank_times` (step = collective sequence number, section =
        ``<profiling_name> pg<pg_id>``), plus ``created_ns`` (when the rank enqueued the
        collective) and ``pg_id``.
    """
    p = Path(paths) if isinstance(paths, (str, Path)) else None
    files = (sorted(f for f in p.iterdir() if f.is_file()) if p is not None and p.is_dir()
             else [p] if p is not None else [Path(x) for x in paths])
    if ranks is None:
        ranks = []
        for f in files:
            m = re.search(r"(\d+)(?:\.\w+)?$", f.name)
            if m is None:
                raise ParseError("no rank in the file name (expected a trailing number, "
                                 "as nccl_trace_rank_<N>); pass ranks=", path=f)
            ranks.append(int(m.group(1)))
    rows = []
    for f, rank in zip(files, ranks):
        for e in _load_dump(f)["entries"]:
            if e.get("state") != "completed" or e.get("collective_seq_id") is None:
                continue
            d_ms = e.get("duration_ms")
            t0, t1 = e.get("time_discovered_started_ns"), e.get("time_discovered_completed_ns")
            dur = (float(d_ms) / 1e3 if d_ms is not None else
                   (t1 - t0) / 1e9 if t0 is not None and t1 is not None else np.nan)
            rows.append({"rank": int(rank), "step": int(e["collective_seq_id"]),
                         "section": f"{e.get('profiling_name', 'collective')} "
                                    f"pg{e.get('pg_id', 0)}",
                         "duration_s": dur, "created_ns": e.get("time_created_ns"),
                         "pg_id": e.get("pg_id", 0)})
    df = pd.DataFrame(rows, columns=["rank", "step", "section", "duration_s",
                                     "created_ns", "pg_id"])
    df = df[np.isfinite(df["duration_s"].to_numpy(dtype=float))]
    if df.empty:
        raise ParseError("no completed collective with a duration (set "
                         "TORCH_NCCL_ENABLE_TIMING=1 for duration_ms)",
                         path=files[0] if files else None)
    df = df.astype({"rank": np.int64, "step": np.int64, "duration_s": float})
    df["section"] = df["section"].astype("string")
    return _join_map(df.reset_index(drop=True), rank_map)
