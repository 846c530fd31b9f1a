"""Slurm accounting (``sacct``): which job held which nodes and GPUs, and when.

Two formats, both produced by ``sacct`` itself:

- ``sacct --parsable2 --format=JobID,JobIDRaw,JobName,Partition,State,Start,End,NNodes,NodeList,AllocTRES``
  (``|``-separated with a header line; :data:`SACCT_FIELDS` lists the fields read, of
  which ``JobID, State, Start, End, NodeList, AllocTRES`` are required).  Slurm prints
  ``Start``/``End`` in the cluster's local time without a zone, so ``tz`` is required.
- ``sacct --json`` (Slurm 21.08 and later; times are Unix epochs, so no zone is needed;
  per-node GPU indices come from ``gres_detail`` when Slurm records them).

Job IDs follow Slurm: ``1234`` (a job), ``1234.batch`` / ``1234.0`` (its steps),
``1235_7`` (task 7 of array job 1235).  Node lists are expanded from Slurm's host-list
syntax (``node[001-004,007]``, several bracket groups, comma-separated lists).  A job
still running has no end (``NaT``, ``running=True``); a pending job has no start and is
left out of :func:`powerlab.telemetry.jobs.gpu_job_map`.

References
----------
.. [1] Slurm ``sacct`` manual, https://slurm.schedmd.com/sacct.html (``--parsable2``,
   ``--format``, ``--json``, job-ID and array syntax, ``AllocTRES``).
.. [2] Slurm host-list expressions, https://slurm.schedmd.com/scontrol.html
   (``scontrol show hostnames``).
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
import warnings
import zoneinfo
from pathlib import Path

import pandas as pd

from ..exceptions import DataQualityWarning, ParseError
from ..telemetry.timeutil import to_utc

__all__ = ["JOB_COLUMNS", "SACCT_FIELDS", "expand_hostlist", "read_sacct"]

#: Fields of ``sacct --parsable2`` that are read (others are ignored).
SACCT_FIELDS = ("JobID", "JobIDRaw", "JobName", "Partition", "State", "Start", "End",
                "NNodes", "NodeList", "AllocTRES")
_REQUIRED = ("JobID", "State", "Start", "End", "NodeList", "AllocTRES")

#: Columns of the job table.
JOB_COLUMNS = ("job_id", "job_id_raw", "array_job_id", "array_task_id", "step", "name",
               "partition", "state", "start", "end", "running", "hosts", "n_nodes", "gpus",
               "gpu_indices")

_NO_TIME = {"", "unknown", "none", "n/a", "invalid"}
_JOBID = re.compile(r"^(?P<base>\d+)(?:_(?P<task>\d+|\[[^\]]*\]))?(?:\+(?P<het>\d+))?"
                    r"(?:\.(?P<step>[A-Za-z0-9_+-]+))?$")
_GPU_TRES = re.compile(r"(?:^|,)gres/gpu(?::[^=,]+)?=([^,]*)")
#: Most GPUs one job row may hold.
MAX_JOB_GPUS = 10_000_000
_IDX = re.compile(r"IDX:([0-9,\-]+)")

#: Most host names one host list may expand to (the largest Slurm clusters have some
#: 10^4 nodes); checked from the range sizes before anything is expanded.
MAX_HOSTS = 1_000_000
#: Longest host name (RFC 1035: 253 characters for a full domain name).
MAX_HOST_NAME = 253
#: Most GPU indices of one node and the largest index (``IDX:0-7``).
MAX_GPU_INDEX = 1023


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm host list: ``"node[001-003,007],gpu-a1"`` -> five names.

    Ranges keep their zero padding; several bracket groups in one name expand to every
    combination (``r[1-2]n[1-2]`` -> ``r1n1, r1n2, r2n1, r2n2``).

    Raises
    ------
    ValueError
        Unbalanced brackets, a descending or non-numeric range.
    """
    expr = (expr or "").strip()
    if not expr or expr.lower() in ("none assigned", "(null)", "none"):
        return []
    items, depth, cur = [], 0, ""
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {expr!r}")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise ValueError(f"unbalanced '[' in host list {expr!r}")
    items.append(cur)
    plans, total = [], 0
    for item in items:
        if not item:
            continue
        parts = re.split(r"(\[[^\]]*\])", item)
        plan, n = [], 1
        for part in parts:
            if part.startswith("["):
                plan.append(part[1:-1])
                n *= _range_count(part[1:-1], expr)
            elif part:
                plan.append([part])
        total += n
        if total > MAX_HOSTS:
            raise ValueError(f"host list {expr[:80]!r} expands to more than {MAX_HOSTS:,} "
                             f"names (at least {total:,}); refusing to expand it")
        plans.append(plan)
    out = []
    for plan in plans:
        choices = [p if isinstance(p, list) else _expand_range(p, expr) for p in plan]
        for c in itertools.product(*choices):
            name = "".join(c)
            if len(name) > MAX_HOST_NAME:
                raise ValueError(f"host name {name[:40]!r}... is {len(name)} characters; "
                                 f"at most {MAX_HOST_NAME}")
            out.append(name)
    return out


def _range_count(body: str, expr: str) -> int:
    """How many names one bracket group expands to (validated, nothing allocated)."""
    n = 0
    for r in body.split(","):
        a, sep, b = r.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()):
            raise ValueError(f"bad range {r!r} in host list {expr[:80]!r}")
        lo, hi = int(a), int(b) if sep else int(a)
        if hi < lo:
            raise ValueError(f"descending range {r!r} in host list {expr[:80]!r}")
        n += hi - lo + 1
    return n


def _expand_range(body: str, expr: str) -> list[str]:
    vals = []
    for r in body.split(","):
        a, sep, b = r.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()):
            raise ValueError(f"bad range {r!r} in host list {expr!r}")
        if not sep:
            vals.append(a)
            continue
        lo, hi = int(a), int(b)
        if hi < lo:
            raise ValueError(f"descending range {r!r} in host list {expr!r}")
        width = len(a) if a.startswith("0") else 0
        vals.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return vals


def _check_tz(tz: str, path) -> None:
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ParseError(f"tz {tz!r} is not an IANA time zone (e.g. 'America/Chicago')",
                         path=path) from None


def _indices(text: str) -> list[int]:
    """GPU indices ``0-3,6``: each at most MAX_GPU_INDEX, none twice (checked before any
    range is expanded)."""
    spans = []
    for r in text.split(","):
        a, sep, b = r.partition("-")
        lo, hi = int(a), int(b) if sep else int(a)
        if hi < lo or hi > MAX_GPU_INDEX:
            raise ValueError(f"GPU index range {r!r}: expected ascending indices 0 to "
                             f"{MAX_GPU_INDEX}")
        spans.append((lo, hi))
    out = [i for lo, hi in spans for i in range(lo, hi + 1)]
    if len(set(out)) != len(out):
        raise ValueError(f"GPU indices {text!r} name one GPU twice")
    return out


def _split_id(job_id: str):
    m = _JOBID.match(job_id)
    if not m:
        return None
    task = m["task"]
    return (m["base"] if task is not None else None,
            int(task) if task is not None and task.isdigit() else None, m["step"])


def _time(text: str, tz: str):
    """A sacct time: NaT for sacct's words for none, else read in ``tz`` by
    :func:`~powerlab.telemetry.to_utc` (ISO 8601 only: 07/02/2025 is never guessed)."""
    t = text.strip()
    if t.lower() in _NO_TIME:
        return pd.NaT
    return to_utc(t[:80], tz=tz, what="time", error=ValueError)


def _finish(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(JOB_COLUMNS))
    for c in ("job_id", "job_id_raw", "array_job_id", "step", "name", "partition", "state"):
        df[c] = df[c].astype("string")
    df["array_task_id"] = df["array_task_id"].astype("Int64")
    for c in ("start", "end"):
        df[c] = pd.to_datetime(df[c], utc=True).astype("datetime64[ns, UTC]")
    df["running"] = df["running"].astype(bool)
    df["n_nodes"] = df["n_nodes"].astype("int64")
    df["gpus"] = df["gpus"].astype("Int64")
    return df


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise ParseError(f"cannot read sacct output: {exc}", path=path) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(f"not UTF-8 text at byte {exc.start}; expected the output of "
                         "sacct --parsable2 or --json", path=path) from None


def read_sacct(path, *, tz: str | None = None) -> pd.DataFrame:
    """Read ``sacct --parsable2`` or ``sacct --json`` output into a job table.

    Parameters
    ----------
    path : str or Path
        The saved output (``.gz`` allowed).  The format is recognised from the content.
    tz : str
        IANA time zone the cluster's ``sacct`` printed times in; required for
        ``--parsable2`` (never guessed), ignored for ``--json`` (Unix epochs).

    Returns
    -------
    DataFrame
        One row per job, array task and step, columns :data:`JOB_COLUMNS`: ``start`` and
        ``end`` in UTC (``end`` NaT while ``running``), ``hosts`` a tuple of node names,
        ``gpus`` the job's allocated GPUs from ``AllocTRES`` (``gres/gpu=N``, typed or
        not), ``gpu_indices`` a mapping host -> GPU indices where ``--json`` recorded
        them (else None), ``step`` NA for the job allocation itself.

    Raises
    ------
    ParseError
        Unreadable file, missing fields, a bad time, job ID or host list (names the line
        and field).
    """
    path = Path(path)
    text = _read_text(path)
    if text.lstrip().startswith("{"):
        return _read_json(text, path)
    if tz is None:
        raise ParseError("sacct --parsable2 prints times without a zone: pass tz= (the "
                         "cluster's IANA time zone, e.g. 'America/Chicago')", path=path)
    _check_tz(tz, path)
    return _read_parsable(text, path, tz)


def _read_parsable(text: str, path: Path, tz: str) -> pd.DataFrame:
    """The job table of ``sacct --parsable2`` output (see :func:`read_sacct`)."""
    lines = text.splitlines()
    if not lines or "|" not in lines[0]:
        raise ParseError("expected a header line of '|'-separated field names (sacct "
                         "--parsable2)", path=path, line=1)
    header = lines[0].split("|")
    missing = [f for f in _REQUIRED if f not in header]
    if missing:
        raise ParseError(f"missing field(s) {missing}; run sacct --parsable2 --format="
                         f"{','.join(SACCT_FIELDS)}", path=path, line=1)
    col = {f: header.index(f) for f in SACCT_FIELDS if f in header}
    rows, mismatched = [], 0
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) != len(header):
            raise ParseError(f"expected {len(header)} '|'-separated fields, got "
                             f"{len(cells)}", path=path, line=n)
        row, nnodes = _parsable_row({f: cells[i].strip() for f, i in col.items()}, tz,
                                    path, n)
        if nnodes and row["hosts"] and int(nnodes) != len(row["hosts"]):
            mismatched += 1
        rows.append(row)
        _check_row(rows[-1], path, n)
    if mismatched:
        warnings.warn(f"{path}: {mismatched} job row(s) have an NNodes that differs from "
                      "the number of hosts in NodeList; the host list is used",
                      DataQualityWarning, stacklevel=3)
    pending = sum(1 for r in rows if r["start"] is pd.NaT)
    if pending:
        warnings.warn(f"{path}: {pending} job row(s) have not started (no Start); they hold "
                      "no GPUs", DataQualityWarning, stacklevel=3)
    return _finish(rows)


def _parsable_row(rec: dict, tz: str, path: Path, n: int) -> tuple[dict, str]:
    """One job row from the fields of line ``n`` (field -> text), and its ``NNodes``."""

    def get(f):
        return rec.get(f, "")
    jid = get("JobID")
    parts = _split_id(jid)
    if parts is None:
        raise ParseError(f"{jid!r} is not a Slurm job ID (1234, 1234.batch, 1235_7)",
                         path=path, line=n, column="JobID")
    array_job, task, step = parts
    try:
        start, end = _time(get("Start"), tz), _time(get("End"), tz)
    except (ValueError, TypeError) as exc:
        raise ParseError(f"bad time: {exc}", path=path, line=n, column="Start/End") \
            from None
    try:
        hosts = tuple(expand_hostlist(get("NodeList")))
    except ValueError as exc:
        raise ParseError(str(exc), path=path, line=n, column="NodeList") from None
    m = _GPU_TRES.search(get("AllocTRES"))
    if m and not (m[1].isdigit() and len(m[1]) <= 12):
        raise ParseError(f"GPU count {m[1]!r} is not a whole number >= 0", path=path,
                         line=n, column="AllocTRES")
    nn = get("NNodes")
    if nn and not nn.isdigit():
        raise ParseError(f"NNodes {nn!r} is not a whole number", path=path, line=n,
                         column="NNodes")
    state = get("State").split(" ")[0]
    return {
        "job_id": jid.split(".")[0] if step else jid, "job_id_raw": get("JobIDRaw") or None,
        "array_job_id": array_job, "array_task_id": task, "step": step,
        "name": get("JobName") or None, "partition": get("Partition") or None,
        "state": state, "start": start, "end": end,
        "running": state in ("RUNNING", "COMPLETING") or (start is not pd.NaT
                                                          and end is pd.NaT),
        "hosts": hosts, "n_nodes": len(hosts),
        "gpus": int(m[1]) if m else (0 if get("AllocTRES") else None),
        "gpu_indices": None}, nn


def _check_row(row: dict, path: Path, line=None, what: str = "") -> None:
    """What no job row may say: an end before its start, a GPU count below 0 or above
    MAX_JOB_GPUS."""
    start, end = row["start"], row["end"]
    where = {"line": line} if line is not None else {}
    if start is not pd.NaT and end is not pd.NaT and end < start:
        raise ParseError(f"{what}job {row['job_id']}: End {end} is before Start {start}",
                         path=path, column="End", **where)
    g = row["gpus"]
    if g is not None and not 0 <= g <= MAX_JOB_GPUS:
        raise ParseError(f"{what}job {row['job_id']}: GPU count {g} is outside 0 to "
                         f"{MAX_JOB_GPUS:,}", path=path, column="AllocTRES", **where)


def _num(v):
    """A Slurm JSON number: plain, or ``{"set": bool, "number": n}`` (v0.0.39+)."""
    if isinstance(v, dict):
        return v.get("number") if v.get("set", True) and not v.get("infinite") else None
    return v


def _epoch(v):
    v = _num(v)
    if v in (None, 0):
        return pd.NaT
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 2**33:
        raise ValueError(f"time {v!r} is not a Unix epoch between 1970 and 2242")
    return pd.Timestamp(int(v), unit="s", tz="UTC")


def _json_gpus(tres) -> int | None:
    alloc = (tres or {}).get("allocated") or []
    for t in alloc:
        if t.get("type") == "gres" and str(t.get("name", "")).split(":")[0] == "gpu":
            n = t.get("count") or 0
            if isinstance(n, bool) or not isinstance(n, int):
                raise ValueError(f"GPU count {n!r} is not a whole number")
            return n
    return 0 if alloc else None


def _json_step(s: dict, job: dict, j: dict) -> dict:
    """A step of ``sacct --json``: id ``"1234.batch"`` (v0.0.40+) or a mapping with
    ``step_id`` (older), state a string or a list."""
    sid = (s.get("step") or {}).get("id")
    if isinstance(sid, dict):
        sid = _num(sid.get("step_id"))
    name = str(sid).rsplit(".", 1)[-1] if sid is not None else str(
        (s.get("step") or {}).get("name"))
    state = s.get("state")
    state = state[0] if isinstance(state, list) and state else state
    t = s.get("time") or {}
    hosts = tuple(expand_hostlist(_str((s.get("nodes") or {}).get("range", ""))))
    nm = (s.get("step") or {}).get("name")
    return {**job, "step": name, "name": None if nm is None else _str(nm),
            "state": str(state), "start": _epoch(t.get("start")),
            "end": _epoch(t.get("end")), "running": False, "hosts": hosts,
            "n_nodes": len(hosts), "gpus": _json_gpus(s.get("tres")), "gpu_indices": None}


def _json_job(j: dict) -> dict:
    """One job of ``sacct --json`` (raises KeyError/TypeError/ValueError/AttributeError
    on a structure that is not sacct's)."""
    if not isinstance(j, dict):
        raise TypeError(f"a job is an object, got {type(j).__name__}")
    base = str(_num(j["job_id"]))
    arr = j.get("array") or {}
    array_job = _num(arr.get("job_id"))
    task = _num(arr.get("task_id"))
    is_task = array_job not in (None, 0) and task is not None
    jid = f"{array_job}_{task}" if is_task else base
    state = (j.get("state") or {}).get("current")
    state = state[0] if isinstance(state, list) and state else state
    t = j.get("time") or {}
    start, end = _epoch(t.get("start")), _epoch(t.get("end"))
    hosts = tuple(expand_hostlist(_str(j.get("nodes") or "")))
    idx = None
    detail = j.get("gres_detail") or []
    if detail and len(detail) == len(hosts):
        found = [_IDX.search(_str(d)) for d in detail]
        if all(found):
            idx = {h: tuple(_indices(f[1])) for h, f in zip(hosts, found)}
    running = str(state).upper() in ("RUNNING", "COMPLETING") or (
        start is not pd.NaT and end is pd.NaT)
    name, part = j.get("name"), j.get("partition")
    return {"job_id": jid, "job_id_raw": base,
            "array_job_id": str(array_job) if is_task else None,
            "array_task_id": int(task) if is_task else None, "step": None,
            "name": None if name is None else _str(name),
            "partition": None if part is None else _str(part),
            "state": str(state), "start": start, "end": pd.NaT if running else end,
            "running": running, "hosts": hosts, "n_nodes": len(hosts),
            "gpus": _json_gpus(j.get("tres")), "gpu_indices": idx}


def _str(v) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def _read_json(text: str, path: Path) -> pd.DataFrame:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"not valid JSON: {str(exc)[:200]}", path=path) from None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise ParseError("expected sacct --json output: an object with a 'jobs' list",
                         path=path)
    rows = []
    for i, j in enumerate(jobs):
        try:
            job = _json_job(j)
            _check_row(job, path, what=f"jobs[{i}]: ")
            steps = [_json_step(st, job, j) for st in (j.get("steps") or [])]
            for st in steps:
                _check_row(st, path, what=f"jobs[{i}]: ")
        except ParseError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError,
                RecursionError) as exc:
            raise ParseError(f"jobs[{i}]: unexpected structure ({str(exc)[:200]!r}); "
                             "expected sacct --json output", path=path) from None
        rows.append(job)
        rows.extend(steps)
    df = _finish(rows)
    df.loc[df["start"].isna(), "running"] = False
    return df if len(df) else df.astype({c: df[c].dtype for c in df.columns})
