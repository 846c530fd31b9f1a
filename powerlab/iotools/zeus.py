"""Read the Zeus power traces: DNN training under GPU power limits, one row a limit.

The Zeus NSDI'23 artifacts [1]_ (``examples/research_reproducibility/zeus_nsdi23/trace/
summary_power_{gpu}.csv`` in the ``ml-energy/zeus`` repository; bundled unchanged in
``data/zeus-nsdi23/``) give, per GPU model, workload, batch size and power limit, the
time of one training epoch and the GPU's average power, with the header
``dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power``.  The
source defines them as "The power limit of the GPU in Watts", "The duration of training
one epoch in seconds" and "The average power consumption of the GPU in Watts"; the values
were "only measured once".

The file has no timestamps: each row is one operating point (a power limit held for a
profiling window), the input of :func:`powerlab.flex.fit_curve_points`.

References
----------
.. [1] J. You, J.-W. Chung, M. Chowdhury, "Zeus: Understanding and Optimizing GPU Energy
   Consumption of DNN Training", USENIX NSDI 2023.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import ParseError
from ._common import line_of_row, read_text, split_cut_last_line, strip_gz, warn_quality

__all__ = ["VARIABLE_MAP", "parse_zeus_power_trace", "read_zeus_power_trace"]

#: Source column -> canonical column (units in the names; no conversion needed).
VARIABLE_MAP: dict[str, str] = {
    "dataset": "dataset",
    "network": "network",
    "batch_size": "batch_size",
    "optimizer": "optimizer",
    "power_limit": "power_limit_w",
    "time_per_epoch": "epoch_time_s",
    "average_power": "power_w",
}
_TEXT = ("dataset", "network", "optimizer")
_KEY = ["dataset", "network", "batch_size", "optimizer", "power_limit"]
_NAME = re.compile(r"summary_power_(?P<gpu>[A-Za-z0-9]+)\.csv$")
#: GPU model named by the file name's suffix.
GPU_MODELS = {"a40": "A40", "v100": "V100", "rtx6000": "RTX6000", "p100": "P100"}


def read_zeus_power_trace(path, *, gpu_model: str | None = None) -> pd.DataFrame:
    """Read one Zeus ``summary_power_{gpu}.csv`` file (``.gz`` too).

    Parameters
    ----------
    path : str or path-like
        The file.
    gpu_model : str, optional
        GPU model of the rows; by default from the file name (``summary_power_a40.csv``
        -> ``"A40"``; also ``V100``, ``RTX6000``, ``P100``).

    Returns
    -------
    pandas.DataFrame
        One row per operating point, in file order: ``gpu_model``, ``dataset``,
        ``network``, ``workload`` (``dataset/network``), ``batch_size`` [samples],
        ``optimizer``, ``power_limit_w`` [W], ``epoch_time_s`` [s] (one training epoch),
        ``power_w`` [W] (the GPU's average power over it).

    Raises
    ------
    powerlab.exceptions.ParseError
        Naming file, line and column: a missing column, a cell that is not a positive
        finite number (or, for ``batch_size``, a positive integer), an empty cell, a row
        with too many fields, the same configuration and limit twice, or a file name that
        does not say the GPU model when ``gpu_model`` is not given.
    """
    p = Path(path)
    if gpu_model is None:
        m = _NAME.search(strip_gz(p.name))
        if not m or m["gpu"].lower() not in GPU_MODELS:
            raise ParseError("cannot tell the GPU model from the file name (expected "
                             "summary_power_{a40,v100,rtx6000,p100}.csv); pass gpu_model=",
                             path=p)
        gpu_model = GPU_MODELS[m["gpu"].lower()]
    return parse_zeus_power_trace(p, gpu_model=gpu_model)


def parse_zeus_power_trace(src, *, gpu_model: str) -> pd.DataFrame:
    """Parse Zeus power-trace CSV text, bytes, a buffer or a path (see
    :func:`read_zeus_power_trace`).

    Parameters
    ----------
    src : str, bytes, buffer or path-like
        A ``str`` is the content itself.
    gpu_model : str
        GPU model of the rows (the file does not say it).

    Returns
    -------
    pandas.DataFrame
        See :func:`read_zeus_power_trace`.
    """
    text, name = read_text(src, what="Zeus power trace")
    if not str(gpu_model).strip():
        raise ParseError("gpu_model must name the GPU model of the rows", path=name)
    text, cut = split_cut_last_line(text)
    if cut:
        warn_quality(f"{name or 'Zeus power trace'}: dropped 1 truncated last line "
                     "(no newline: a number in it may be cut)")
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines, 1) if ln.strip()), None)
    if first is None:
        raise ParseError("empty file; expected the header " + ",".join(VARIABLE_MAP),
                         path=name)
    header = [h.strip() for h in lines[first - 1].split(",")]
    missing = [c for c in VARIABLE_MAP if c not in header]
    if missing:
        raise ParseError(f"missing column(s) {', '.join(missing)}; expected the header "
                         + ",".join(VARIABLE_MAP), path=name, line=first, column=missing[0])
    if len(set(header)) != len(header):
        dup = next(h for h in header if header.count(h) > 1)
        raise ParseError("column named twice", path=name, line=first, column=dup)
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False,
                          skipinitialspace=True)
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise ParseError(f"wrong number of fields ({exc}); expected {len(header)}",
                         path=name, line=int(m[1]) if m else None) from None
    if raw.empty:
        raise ParseError("no data rows after the header", path=name, line=first)

    def where(row: int) -> int:
        return line_of_row(text, row, first_line=first + 1)

    out = {"gpu_model": str(gpu_model)}
    for col in VARIABLE_MAP:
        out[col] = _column(raw[col].str.strip(), col, name, where)
    df = pd.DataFrame(out).rename(columns=VARIABLE_MAP)
    dup = df.duplicated([VARIABLE_MAP[k] for k in _KEY]).to_numpy()
    if dup.any():
        i = int(np.argmax(dup))
        raise ParseError("the same dataset, network, batch_size, optimizer and power limit "
                         "appear twice (one operating point per row)", path=name,
                         line=where(i), column="power_limit")
    df.insert(3, "workload", df["dataset"] + "/" + df["network"])
    return df


def _column(s: pd.Series, col: str, name, where) -> np.ndarray:
    """One column's cells (stripped): text as is, numbers that must be positive and
    finite (``batch_size`` an integer); ParseError at the first empty or bad cell
    (``where(row)`` gives its line)."""
    empty = (s == "").to_numpy()
    if empty.any():
        i = int(np.argmax(empty))
        raise ParseError("empty cell", path=name, line=where(i), column=col)
    if col in _TEXT:
        return s.to_numpy(object)
    v = pd.to_numeric(s, errors="coerce").to_numpy(float)
    bad = ~np.isfinite(v) | (v <= 0)
    if col == "batch_size":
        bad |= v != np.round(v)
    if bad.any():
        i = int(np.argmax(bad))
        what = "a positive integer" if col == "batch_size" else "a positive number"
        raise ParseError(f"{s.iloc[i]!r} is not {what}", path=name, line=where(i),
                         column=col)
    return v.astype(np.int64) if col == "batch_size" else v
