"""Node fault records: the one table every fault reader returns and every reliability fit
takes, its class vocabulary and its checks.

A fault record says that a node (a server) was out of service from ``start`` to ``end``
because of a fault of one class.  Readers (:mod:`powerlab.iotools.faults`) turn the
InfiniteHBD trace, a documented CSV, the store's XID events and Slurm accounting into this
table; :mod:`powerlab.reliability.faultfit` fits hazards, frailty and repair times to it.

Columns (:data:`FAULT_COLUMNS`): ``node`` (string), ``start`` and ``end`` (UTC; ``end`` NaT
while a fault is open), ``fault_class`` (one of :data:`FAULT_CLASSES`), ``detail`` (the
source's own words) and ``source``.

Bad records are never dropped silently (:func:`check_faults`): an unknown class, an end
before its start or a missing start raise :class:`~powerlab.exceptions.ParseError` naming
the record, or with ``errors="warn"`` are left out with one counted
:class:`~powerlab.exceptions.DataQualityWarning`; open faults (no end) and faults that
overlap on one node are kept and counted in a warning, and the fits treat them as stated
(an open fault is censored at the end of the record; overlapping faults are both counted
as faults, and the node's outage is their union).
"""

from __future__ import annotations

import warnings

import pandas as pd

from .._options import choice
from ..exceptions import DataQualityWarning, ParseError

__all__ = ["FAULT_CLASSES", "FAULT_COLUMNS", "FAULT_DTYPES", "PLANNED_CLASSES",
           "check_faults", "empty_faults", "overlapping"]

#: Columns of the fault table.
FAULT_COLUMNS = ("node", "start", "end", "fault_class", "detail", "source")
#: pandas dtypes of :data:`FAULT_COLUMNS`.
FAULT_DTYPES = {"node": "string", "start": "datetime64[ns, UTC]",
                "end": "datetime64[ns, UTC]", "fault_class": "string", "detail": "string",
                "source": "string"}

#: Fault classes and what each holds.  ``planned`` faults (an operator took the node out)
#: are counted apart from unexpected ones everywhere.
FAULT_CLASSES = {
    "gpu": "GPU fault other than memory ECC: lost, unknown device error, PCIe link width, "
           "Xid, nvidia-smi timeout, P2P bandwidth, temperature, silent data corruption",
    "gpu_memory": "GPU memory: double- or single-bit ECC errors over threshold",
    "network": "NIC and network cable or link faults",
    "power": "power supply",
    "cooling": "fans and other cooling",
    "host": "motherboard, CPU, memory, RAID, riser card, battery, other host hardware",
    "software": "operating system, file system, firmware, node software",
    "unknown": "unknown error, system crash",
    "stress_test": "the node failed a stress test",
    "job": "taken out while a training job was troubleshot (suspect machine)",
    "planned": "taken out on purpose: operator changes and tests",
}
#: Classes that are not unexpected faults.
PLANNED_CLASSES = ("planned",)


def empty_faults() -> pd.DataFrame:
    """A fault table with no rows and the canonical dtypes."""
    return pd.DataFrame({c: pd.Series([], dtype=FAULT_DTYPES[c]) for c in FAULT_COLUMNS})


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("node", "start", "end", "fault_class") if c not in df.columns]
    if missing:
        raise ParseError(f"fault table lacks column(s) {missing} (expected "
                         f"{', '.join(FAULT_COLUMNS)})")
    out = pd.DataFrame(index=df.index)
    for c in FAULT_COLUMNS:
        col = df[c] if c in df.columns else pd.Series(None, index=df.index, dtype=object)
        if c in ("start", "end"):
            out[c] = pd.to_datetime(col, utc=True).astype("datetime64[ns, UTC]")
        else:
            out[c] = col.astype(object).where(col.notna(), None).astype("string")
    return out


def check_faults(df: pd.DataFrame, *, errors: str = "raise", name: str | None = None,
                 lines=None) -> pd.DataFrame:
    """Check a fault table and return it in canonical form, sorted by node and start.

    Parameters
    ----------
    df : pandas.DataFrame
        Records with at least ``node``, ``start``, ``end``, ``fault_class``.
    errors : {"raise", "warn"}
        A bad record (unknown class, no node, no start, end before start) raises
        :class:`~powerlab.exceptions.ParseError` naming it, or is left out with one
        :class:`~powerlab.exceptions.DataQualityWarning` that counts each kind.
    name : str, optional
        The file the records come from (for messages).
    lines : sequence of int, optional
        Line (or record) number of each row in that file (for messages).

    Returns
    -------
    pandas.DataFrame
        :data:`FAULT_COLUMNS`.  Open faults and faults overlapping on one node are kept;
        a warning counts them.
    """
    choice(errors, "errors", ("raise", "warn"))
    out = _canonical(df.reset_index(drop=True))
    where = list(lines) if lines is not None else list(range(1, len(out) + 1))
    problems = {
        "unknown fault class": ~out["fault_class"].isin(list(FAULT_CLASSES)).fillna(False),
        "no node": out["node"].isna() | (out["node"].str.strip() == "").fillna(True),
        "no start": out["start"].isna(),
        "end before start": (out["end"] < out["start"]).fillna(False),
    }
    bad = pd.Series(False, index=out.index)
    counts = {}
    for what, mask in problems.items():
        mask = mask.to_numpy(bool) & ~bad.to_numpy(bool)
        if mask.any():
            i = int(mask.argmax())
            detail = (f" {out['fault_class'].iloc[i]!r}; known: {', '.join(FAULT_CLASSES)}"
                      if what == "unknown fault class" else "")
            if errors == "raise":
                at = where[i]
                if isinstance(at, str):       # a record that is not a line ("event 3")
                    raise ParseError(f"fault record ({at}): {what}{detail}", path=name)
                raise ParseError(f"fault record: {what}{detail}", path=name, line=at)
            counts[what] = (int(mask.sum()), where[i])
            bad |= mask
    if counts:
        warnings.warn(f"{name or '<faults>'}: left out " + "; ".join(
            f"{n} record(s) with {w} (first at {ln})" for w, (n, ln) in counts.items()),
            DataQualityWarning, stacklevel=2)
    out = out[~bad.to_numpy(bool)].sort_values(["node", "start"], kind="stable")
    out = out.reset_index(drop=True)
    if not df.attrs.get("faults_checked"):
        _warn_open_and_overlaps(out, name)
    out.attrs["faults_checked"] = True     # a second check does not warn again
    return out


def overlapping(df: pd.DataFrame) -> pd.Series:
    """Boolean mask: the fault starts before an earlier fault of the same node ended
    (``df`` sorted by node and start; an open fault, whose end is unknown, overlaps
    nothing)."""
    end = df["end"].fillna(df["start"])
    prev_end = end.groupby(df["node"], sort=False).cummax().groupby(
        df["node"], sort=False).shift(1)
    return (df["start"] < prev_end).fillna(False).astype(bool)


def _warn_open_and_overlaps(out: pd.DataFrame, name) -> None:
    n_open = int(out["end"].isna().sum())
    ov = overlapping(out)
    notes = []
    if n_open:
        notes.append(f"{n_open} open fault(s) without an end (repair censored at the "
                     "record's end)")
    if ov.any():
        nodes = out.loc[ov, "node"].unique()
        notes.append(f"{int(ov.sum())} fault(s) overlap an earlier fault on the same node "
                     f"({len(nodes)} node(s), first {nodes[0]}): each counted as a fault, "
                     "the node's outage is their union")
    if notes:
        warnings.warn(f"{name or '<faults>'}: " + "; ".join(notes), DataQualityWarning,
                      stacklevel=3)
