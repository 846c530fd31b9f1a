"""Readers of node fault records into the fault table
(:data:`powerlab.telemetry.faults.FAULT_COLUMNS`: node, start, end, fault_class).

Inputs
------
- **InfiniteHBD trace** (:func:`read_infinitehbd`): StepFun's public fault trace of 400 GPU
  training servers over about 349 days [1]_ (Apache-2.0; a copy is bundled,
  ``data/infinitehbd-fault-trace/fault_trace.json.gz``, ``powerlab.data.bundled_path``).  A JSON list of
  ``{node_id, event_time (days from the trace's start), event_type (fault_start |
  fault_end), fault_type {Level, Class, Desc}}``.  A start is paired with the next end of
  the same node and the same fault type; an end without a start is a bad record; a start
  without an end is an open fault.  ``(Level, Class)`` map to a fault class through
  :data:`INFINITEHBD_CLASSES` (a pair not listed is an unknown class: an error).  Times
  are days after ``origin`` (default 2024-03-30 00:00 UTC, the trace README's start date;
  the hour is not published, so absolute times carry up to a day's offset, which no fit
  uses).
- **CSV** (:func:`read_fault_csv`): a header ``node,start,end,fault_class[,detail]``;
  ``start``/``end`` ISO 8601 (a zone-less time needs ``tz``), ``end`` empty while a
  fault is open; ``fault_class`` one of :data:`~powerlab.telemetry.faults.FAULT_CLASSES`.
- **XID events** (:func:`faults_from_events`): the store's events table
  (:mod:`powerlab.iotools.xid`); failures only (informational and application Xids are
  not faults), one fault per host and incident (events of one host within ``window_s``
  are one), without an end (kernel logs do not record repairs).
- **Slurm accounting** (:func:`faults_from_sacct`): jobs that ended ``NODE_FAIL``; one
  fault per node of the job at its end, class ``unknown``, without an end.

References
----------
.. [1] C. Shou et al., "InfiniteHBD: Building Datacenter-Scale High-Bandwidth Domain for
   LLM with Optical Circuit Switching Transceivers", ACM SIGCOMM 2025, arXiv:2502.03885;
   trace: https://github.com/stepfun-ai/InfiniteHBD-Trace (commit 7aacdc8).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from ..exceptions import ParseError
from ..telemetry.faults import check_faults, empty_faults
from ..telemetry.timeutil import to_utc
from ._common import read_text

__all__ = ["INFINITEHBD_CLASSES", "INFINITEHBD_NODES", "ROOT_CAUSE_CLASSES",
           "faults_from_events", "faults_from_sacct", "parse_fault_csv",
           "parse_infinitehbd", "read_fault_csv", "read_infinitehbd"]

#: Servers in the InfiniteHBD trace's fleet (its README: "400 GPU servers", faults on 231).
INFINITEHBD_NODES = 400

_HW_HOST = ("Motherboard Battery", "Other Failures", "Motherboard", "CPU", "RAID Card",
            "Riser Card")
#: (Level, Class) of the InfiniteHBD trace -> fault class.  GPU faults whose description
#: names ECC are ``gpu_memory``.
INFINITEHBD_CLASSES = {
    ("Hardware Failure", "GPU"): "gpu",
    ("Hardware Failure", "Parameter Plane Cable"): "network",
    ("Hardware Failure", "NIC"): "network",
    ("Hardware Failure", "Power Supply"): "power",
    ("Hardware Failure", "Fan"): "cooling",
    **{("Hardware Failure", c): "host" for c in _HW_HOST},
    **{("Software Failure", c): "software" for c in (
        "Other Failures", "File System", "Software Tool", "Operating System", "Firmware")},
    ("Other Failure", "Unknown Error"): "unknown",
    ("Other Failure", "System Crash"): "unknown",
    ("Other Failure", "Stress Test Failure"): "stress_test",
    ("Other Failure", "Training Task Troubleshooting"): "job",
    ("Other Failure", "Change"): "planned",
    ("Other Failure", "Test"): "planned",
}

#: Root causes of the events table (:data:`powerlab.telemetry.events.ROOT_CAUSES`) ->
#: fault class.
ROOT_CAUSE_CLASSES = {
    "faulty_gpu": "gpu", "gpu_system_processor": "gpu", "silent_data_corruption": "gpu",
    "gpu_thermal_interface_sensor": "gpu", "gpu_hbm3_memory": "gpu_memory",
    "gpu_sram_memory": "gpu_memory", "network_switch_cable": "network", "nic": "network",
    "power_supply": "power", "software_bug": "software", "dependency": "software",
    "nccl_watchdog_timeout": "unknown", "host_maintenance": "host", "ssd": "host",
    "server_chassis": "host", "io_expansion_board": "host", "cpu": "host",
    "system_memory": "host",
}


def _hbd_class(ft: dict) -> str:
    key = (str(ft.get("Level")), str(ft.get("Class")))
    cls = INFINITEHBD_CLASSES.get(key, f"unlisted:{key[0]}/{key[1]}")
    if cls == "gpu" and "ECC" in str(ft.get("Desc", "")):
        return "gpu_memory"
    return cls


def parse_infinitehbd(src, *, origin="2024-03-30", n_nodes: int = INFINITEHBD_NODES,
                      errors: str = "raise") -> tuple[pd.DataFrame, dict]:
    """Parse the InfiniteHBD fault trace (JSON text, bytes or a path).

    Parameters
    ----------
    src : str, bytes, buffer or path
        The trace (``fault_trace.json``, ``.gz`` too).
    origin : str or pandas.Timestamp, default "2024-03-30"
        Time of ``event_time`` 0 [UTC].
    n_nodes : int, default 400
        Servers observed (faulty or not) [-]: the exposure of every rate.
    errors : {"raise", "warn"}
        Bad records (an end without its start, an unknown class): raise, or leave out
        with one counted warning (:func:`powerlab.telemetry.faults.check_faults`).

    Returns
    -------
    faults : pandas.DataFrame
        The fault table, ``source="infinitehbd"``.
    meta : dict
        ``n_nodes``, ``start`` and ``end`` of the observation [UTC] (``end``: the last
        event rounded up to a whole day), ``source``.
    """
    text, name = read_text(src, what="InfiniteHBD fault trace")
    try:
        events = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not JSON ({exc.msg})", path=name, line=exc.lineno) from None
    if not isinstance(events, list):
        raise ParseError("expected a JSON list of fault events", path=name)
    t0 = to_utc(origin, tz="UTC", what="origin")
    rows, lines, pending, last = [], [], {}, 0.0
    for i, ev in enumerate(events, start=1):
        try:
            node, day = str(ev["node_id"]), float(ev["event_time"])
            kind, ft = ev["event_type"], dict(ev["fault_type"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ParseError(f"event {i}: not {{node_id, event_time, event_type, "
                             f"fault_type}} ({exc})", path=name) from None
        if not 0 <= day < 1e5:
            raise ParseError(f"event {i}: event_time {day} is not days in [0, 1e5)",
                             path=name)
        last = max(last, day)
        key = (node, ft.get("Level"), ft.get("Class"), ft.get("Desc"))
        if kind == "fault_start":
            rows.append({"node": node, "start": day, "end": None,
                         "fault_class": _hbd_class(ft), "detail": ft.get("Desc"),
                         "source": "infinitehbd"})
            lines.append(i)
            pending.setdefault(key, []).append(len(rows) - 1)
        elif kind == "fault_end":
            if pending.get(key):
                rows[pending[key].pop(0)]["end"] = day
            else:       # an end without a start: a record with no start
                rows.append({"node": node, "start": None, "end": day,
                             "fault_class": _hbd_class(ft), "detail": ft.get("Desc"),
                             "source": "infinitehbd"})
                lines.append(i)
        else:
            raise ParseError(f"event {i}: event_type {kind!r} is not fault_start or "
                             "fault_end", path=name)
    df = pd.DataFrame(rows) if rows else empty_faults()
    for c in ("start", "end"):
        df[c] = t0 + pd.to_timedelta(pd.to_numeric(df[c]), unit="D")
    faults = check_faults(df, errors=errors, name=name or "<InfiniteHBD trace>",
                          lines=[f"event {n}" for n in lines]) if rows else empty_faults()
    end = t0 + pd.Timedelta(days=float(int(last) + (last % 1 > 0)))
    return faults, {"n_nodes": int(n_nodes), "start": t0, "end": end,
                    "source": name or "infinitehbd"}


def read_infinitehbd(path, **kw) -> tuple[pd.DataFrame, dict]:
    """Read the InfiniteHBD trace from a file; see :func:`parse_infinitehbd`."""
    return parse_infinitehbd(Path(path), **kw)


def parse_fault_csv(src, *, tz: str | None = None,
                    errors: str = "raise") -> pd.DataFrame:
    """Parse a fault CSV: ``node,start,end,fault_class[,detail]``.

    Parameters
    ----------
    src : str, bytes, buffer or path
    tz : str, optional
        IANA zone of zone-less times; without it such times are refused.
    errors : {"raise", "warn"}
        As in :func:`powerlab.telemetry.faults.check_faults`.
    """
    text, name = read_text(src, what="fault CSV")
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ParseError(f"not a CSV ({exc})", path=name) from None
    need = ["node", "start", "end", "fault_class"]
    missing = [c for c in need if c not in raw.columns]
    if missing:
        raise ParseError(f"missing column(s) {missing}; expected header "
                         "node,start,end,fault_class[,detail]", path=name, line=1)
    df = raw.copy()
    for c in ("start", "end"):
        vals = []
        for i, v in enumerate(raw[c], start=2):
            v = v.strip()
            if v == "":
                vals.append(None)
                continue
            vals.append(to_utc(v, tz=tz, what=c, hint="pass tz (--tz)",
                               error=lambda m, i=i: ParseError(m, path=name, line=i)))
        df[c] = pd.to_datetime(pd.Series(vals, dtype=object), utc=True)
    df["source"] = "csv"
    if "detail" not in df.columns:
        df["detail"] = None
    df["fault_class"] = df["fault_class"].str.strip()
    return check_faults(df, errors=errors, name=name or "<fault CSV>",
                        lines=range(2, len(df) + 2))


def read_fault_csv(path, **kw) -> pd.DataFrame:
    """Read a fault CSV file; see :func:`parse_fault_csv`."""
    return parse_fault_csv(Path(path), **kw)


def faults_from_events(events: pd.DataFrame, *, window_s: float = 600.0) -> pd.DataFrame:
    """Faults from an events table (XID, DCGM health): one open fault per host and
    incident.

    Events without a root cause (informational and application Xids) are not faults.
    Events of one host less than ``window_s`` after the previous one are one incident
    (its first event's class).  Kernel logs record no repair, so ``end`` is NaT and the
    fits censor these repairs (their repair time is not estimable from events alone).
    Events without a host or a time raise :class:`~powerlab.exceptions.ParseError`.
    """
    ev = events[events["root_cause"].notna()].sort_values(["host", "timestamp"])
    if ev["host"].isna().any() or ev["timestamp"].isna().any():
        raise ParseError(f"{int((ev['host'].isna() | ev['timestamp'].isna()).sum())} "
                         "failure event(s) have no host or no time; a fault needs both")
    if ev.empty:
        return empty_faults()
    gap = ev.groupby("host")["timestamp"].diff().dt.total_seconds()
    first = ev[~(gap < window_s)]
    unknown = sorted(set(first["root_cause"]) - set(ROOT_CAUSE_CLASSES))
    if unknown:
        raise ParseError(f"root cause(s) {unknown} have no fault class")
    df = pd.DataFrame({"node": first["host"].to_numpy(), "start": first["timestamp"],
                       "end": pd.NaT,
                       "fault_class": first["root_cause"].map(ROOT_CAUSE_CLASSES),
                       "detail": [f"Xid {x}" if pd.notna(x) else str(r) for x, r in
                                  zip(first["xid"], first["root_cause"])],
                       "source": "events"})
    return check_faults(df, name="<events>")


def faults_from_sacct(jobs: pd.DataFrame) -> pd.DataFrame:
    """Faults from Slurm accounting (:func:`powerlab.iotools.read_sacct`): every node of a
    job that ended ``NODE_FAIL`` gets an open fault of class ``unknown`` at the job's
    end."""
    failed = jobs[(jobs["state"].astype(str) == "NODE_FAIL") & jobs["end"].notna()]
    rows = [{"node": h, "start": r.end, "end": None, "fault_class": "unknown",
             "detail": f"NODE_FAIL of job {r.job_id}", "source": "sacct"}
            for r in failed.itertuples() for h in r.hosts]
    if not rows:
        return empty_faults()
    return check_faults(pd.DataFrame(rows), name="<sacct>")
