"""Read MLPerf (MLCommons) MLLOG files: node power logs and training result logs.

MLLOG lines look like ``:::MLLOG {"namespace": "", "time_ms": 1715960308411,
"event_type": "POINT_IN_TIME", "key": "power_reading", "value": 4316, "metadata": ""}``.
Training logs prefix them with the rank (``0: :::MLLOG {...}``) and interleave them
with shell and framework output, which is ignored.  Lines that mention ``:::MLLOG`` but
do not hold one well-formed JSON event are skipped and counted in one
:class:`~powerlab.exceptions.DataQualityWarning` per file, never dropped silently.

References
----------
.. [1] MLCommons, "MLPerf Training power measurement" and the ``mlperf-logging``
   package (``mlperf_logging/mllog``), event keys and ``time_ms`` convention.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..exceptions import ParseError
from ..telemetry import schema
from ._common import (
    TIME_MS_RANGE,
    mask_impossible,
    read_text,
    split_cut_last_line,
    strip_gz,
    warn_quality,
)

__all__ = [
    "STEP_VARIABLE_MAP",
    "VARIABLE_MAP",
    "MLLogResult",
    "parse_mllog",
    "parse_mlperf_power",
    "read_mllog",
    "read_mlperf_power",
]

#: MLLOG key -> (canonical column, unit in the log, factor to canonical).
VARIABLE_MAP: dict[str, tuple[str, str, float]] = {
    "power_reading": ("power_w", "W", 1.0),
}

#: ``tracked_stats`` value names -> step-table columns (unit in the name).
STEP_VARIABLE_MAP: dict[str, str] = {
    "train_step_timing in s": "train_step_timing_s",
    "validation_step_timing in s": "validation_step_timing_s",
    "throughput": "throughput",  # samples per second as logged by the benchmark
    "epoch_num": "epoch_num",
}

_NODE = re.compile(r"^node_(\d+)\.txt(?:\.gz)?$")


def _events(text: str, path) -> tuple[list[tuple], int, str | None]:
    """(line, rank, event dict) for each well-formed MLLOG line, bad count, first bad."""
    out = []
    bad = 0
    first_bad = None
    dec = json.JSONDecoder()
    text, cut = split_cut_last_line(text)
    if cut:
        bad, first_bad = 1, f"line {text.count(chr(10)) + 1}: truncated last line (no newline)"
    for lineno, line in enumerate(text.splitlines(), start=1):
        i = line.find(":::MLLOG")
        if i < 0:
            continue
        # '[rank:] :::MLLOG {json}' (plain string work: a regex costs more than the JSON)
        head, payload = line[:i].strip(), line[i + 8:]
        rank = None
        why = None
        ev = None
        if (head and not (head[-1] == ":" and head[:-1].isdigit())
                or not payload[:1].isspace()):
            why = "':::MLLOG' inside other output"
        else:
            rank = int(head[:-1]) if head else None
            payload = payload.strip()
            try:
                ev, end = dec.raw_decode(payload)
                if end != len(payload):
                    why, ev = "text after the JSON object", None
            except json.JSONDecodeError as exc:
                why = f"malformed JSON ({exc.msg})"
            except RecursionError:       # issue 24: a deeply nested value
                why = "malformed JSON (nested too deeply)"
            if ev is not None:
                tm = ev.get("time_ms") if isinstance(ev, dict) else None
                if (tm is None or "key" not in ev or isinstance(tm, bool)
                        or not isinstance(tm, (int, float))):
                    why, ev = "event without 'key' or numeric 'time_ms'", None
                elif not TIME_MS_RANGE[0] <= tm < TIME_MS_RANGE[1]:
                    why, ev = f"time_ms {tm!r} is not a time between 2000 and 2100", None
        if ev is None:
            bad += 1
            if first_bad is None:
                first_bad = f"line {lineno}: {why}"
            continue
        out.append((lineno, rank, ev))
    return out, bad, first_bad


def _warn_bad(path, bad, first_bad, what="MLLOG line(s)"):
    if bad:
        warn_quality(f"{path or 'MLLOG text'}: skipped {bad} malformed {what} "
                     f"(first at {first_bad})", stacklevel=4)


def read_mlperf_power(path_or_dir, *, host: str | None = None) -> pd.DataFrame:
    """Read MLPerf node power logs (``power_reading`` events) as node-scope telemetry.

    Parameters
    ----------
    path_or_dir : str or path-like
        One ``node_N.txt`` file, or a directory whose ``node_*.txt`` (or ``.txt.gz``)
        files are all read.
    host : str, optional
        Host name for a single file.  Default: the file name (``node_12.txt`` ->
        ``"node_12"``).

    Returns
    -------
    pandas.DataFrame
        Canonical telemetry with ``scope == "node"``, ``power_w`` the node AC power [W],
        ``timestamp`` from ``time_ms`` (Unix epoch milliseconds, UTC).
    """
    p = Path(path_or_dir)
    if p.is_dir():
        files = sorted((f for f in p.iterdir() if _NODE.match(f.name)),
                       key=lambda f: int(_NODE.match(f.name).group(1)))
        if not files:
            raise ParseError("no node_*.txt power logs in this directory", path=p)
        if host is not None and len(files) > 1:
            raise ParseError("host= names one node; it cannot be given for a directory of "
                             f"{len(files)} node logs", path=p)
    else:
        files = [p]
    ts, ws, hosts, codes, unreadable = [], [], [], [], []
    for f in files:
        h = host if host is not None else strip_gz(f.name).rsplit(".", 1)[0]
        try:
            text, _ = read_text(f)
            t, w = _power_arrays(text, f)
        except ParseError as exc:
            if len(files) == 1:
                raise
            unreadable.append(f"{f.name} ({_why(exc, f)})")
            continue
        codes.append(np.full(len(t), len(hosts), dtype=np.int32))
        hosts.append(h)
        ts.append(t)
        ws.append(w)
    if not ts:
        raise ParseError(f"none of the {len(files)} node power logs is readable: "
                         + "; ".join(unreadable), path=p)
    df = _node_frame(np.concatenate(ts), np.concatenate(ws), hosts, np.concatenate(codes))
    df = schema.conform(df)
    df = schema.validate(df, source=str(p))
    if unreadable:
        warn_quality(f"{p}: skipped {len(unreadable)} of {len(files)} node power logs that "
                     f"cannot be read: {'; '.join(unreadable)}", stacklevel=3)
    df.attrs["unreadable_files"] = [u.split(" (", 1)[0] for u in unreadable]
    return df


def _why(exc: ParseError, f: Path) -> str:
    """The message of ``exc`` without the file name it starts with."""
    msg = str(exc)
    return msg.removeprefix(f"{f}, ").removeprefix(f"{f}: ")


def parse_mlperf_power(text_or_buffer, *, host: str = "node", path=None) -> pd.DataFrame:
    """Parse one node power log given as text or a buffer (see :func:`read_mlperf_power`)."""
    text, name = read_text(text_or_buffer)
    path = path if path is not None else name
    df = schema.conform(_power_frame(text, host, path))
    return schema.validate(df, source=str(path or "MLLOG text"))


def _power_arrays(text: str, path) -> tuple[np.ndarray, np.ndarray]:
    """``(time_ms, power_w)`` of one node log's power readings, impossible ones masked."""
    events, bad, first_bad = _events(text, path)
    t, w = [], []
    for lineno, _, ev in events:
        spec = VARIABLE_MAP.get(ev["key"])
        if spec is None:
            continue
        v = ev.get("value")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            bad += 1
            if first_bad is None:
                first_bad = f"line {lineno}: {spec[0]} value {v!r} is not a number in {spec[1]}"
            continue
        t.append(int(ev["time_ms"]))
        w.append(float(v) * spec[2])
    if not t:
        raise ParseError("no power_reading events: not an MLPerf node power log"
                         + (f" ({bad} malformed MLLOG line(s), first at {first_bad})"
                            if bad else ""), path=path)
    _warn_bad(path, bad, first_bad)
    cols = {"power_w": np.asarray(w, dtype="float64")}
    mask_impossible(cols, node=True, path=path, what="MLLOG text")
    return np.asarray(t, dtype=np.int64), cols["power_w"]


def _node_frame(t: np.ndarray, w: np.ndarray, hosts: list[str],
                host_code: np.ndarray) -> pd.DataFrame:
    """Node-scope telemetry from concatenated arrays; ``hosts[host_code[i]]`` is row i's."""
    n = len(t)
    host = pa.array(hosts, pa.large_string()).take(pa.array(host_code))
    return pd.DataFrame({
        "timestamp": pd.DatetimeIndex((t * 1_000_000).view("datetime64[ns]")).tz_localize(
            "UTC"),
        "host": pd.Series(pd.arrays.ArrowStringArray(host)),
        "scope": pd.Series(pd.arrays.ArrowStringArray(
            pa.repeat(pa.scalar("node", pa.large_string()), n))),
        "gpu_index": pd.Series(pd.arrays.IntegerArray(np.zeros(n, dtype=np.int16),
                                                      np.ones(n, dtype=bool))),
        "power_w": w,
    })


def _power_frame(text: str, host: str, path) -> pd.DataFrame:
    t, w = _power_arrays(text, path)
    return _node_frame(t, w, [host], np.zeros(len(t), dtype=np.int32))


@dataclass(frozen=True)
class MLLogResult:
    """Events of an MLPerf training result log.

    Attributes
    ----------
    events : pandas.DataFrame
        Every MLLOG event: ``timestamp`` (UTC), ``rank`` (NA without prefix), ``key``,
        ``event_type``, ``value``, ``metadata`` (dict), ``line``.
    steps : pandas.DataFrame
        One row per ``tracked_stats`` event: ``timestamp``, ``rank``, ``step`` and the
        logged statistics (``train_step_timing_s`` [s], ``throughput`` ...).
    path : str or None
        The file read.
    """

    events: pd.DataFrame
    steps: pd.DataFrame
    path: str | None = None
    skipped_lines: int = 0
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __iter__(self):
        return iter((self.events, self.steps))

    def _first(self, key: str):
        sel = self.events[self.events["key"] == key]
        return None if sel.empty else sel["timestamp"].iloc[0]

    @property
    def run_start(self) -> pd.Timestamp | None:
        """Time of the ``run_start`` event (UTC)."""
        return self._first("run_start")

    @property
    def run_stop(self) -> pd.Timestamp | None:
        """Time of the ``run_stop`` event (UTC)."""
        return self._first("run_stop")

    @property
    def duration_s(self) -> float | None:
        """Run time from ``run_start`` to ``run_stop`` [s]."""
        a, b = self.run_start, self.run_stop
        return None if a is None or b is None else (b - a).total_seconds()

    @property
    def status(self) -> str | None:
        """``status`` of ``run_stop`` (``"success"`` ...)."""
        sel = self.events[self.events["key"] == "run_stop"]
        return None if sel.empty else sel["metadata"].iloc[0].get("status")

    def intervals(self, kind: str) -> pd.DataFrame:
        """Pair ``<kind>_start`` / ``<kind>_stop`` events (``kind``: block, eval, epoch).

        Returns a frame with ``start``, ``stop``, ``duration_s`` and the epoch numbers
        from the metadata (``epoch_num``, or ``first_epoch_num``/``epoch_count``), plus
        ``eval_accuracy`` for evaluations.
        """
        ev = self.events
        ev = ev[ev["rank"].isna() | (ev["rank"] == ev["rank"].min())]
        starts = ev[ev["key"] == f"{kind}_start"]
        stops = ev[ev["key"] == f"{kind}_stop"]
        key = "first_epoch_num" if kind == "block" else "epoch_num"

        def table(sel, col):
            meta = pd.DataFrame(list(sel["metadata"]), index=sel.index)
            out = pd.DataFrame({col: sel["timestamp"].to_numpy()})
            for c in ("epoch_num", "first_epoch_num", "epoch_count"):
                if c in meta:
                    out[c] = meta[c].to_numpy()
            return out

        a, b = table(starts, "start"), table(stops, "stop")
        if key in a and key in b:
            out = a.merge(b[[key, "stop"]], on=key, how="outer")
        else:
            out = pd.concat([a, b[["stop"]]], axis=1)
        out["duration_s"] = (out["stop"] - out["start"]).dt.total_seconds()
        if kind == "eval":
            acc = ev[ev["key"] == "eval_accuracy"]
            if not acc.empty and "epoch_num" in out:
                accs = pd.DataFrame({
                    "epoch_num": [m.get("epoch_num") for m in acc["metadata"]],
                    "eval_accuracy": acc["value"].astype("float64").to_numpy()})
                out = out.merge(accs, on="epoch_num", how="left")
        return out

    @property
    def blocks(self) -> pd.DataFrame:
        """Training blocks (``block_start``/``block_stop``)."""
        return self.intervals("block")

    @property
    def evals(self) -> pd.DataFrame:
        """Evaluations (``eval_start``/``eval_stop``) with ``eval_accuracy``."""
        return self.intervals("eval")

    def summary(self) -> str:
        """A short text summary of the run."""
        st = self.steps
        lines = [f"MLLOG {self.path or ''}".rstrip(),
                 (f"  events: {len(self.events)}  tracked steps: {len(st)}  "
                  f"skipped lines: {self.skipped_lines}"),
                 (f"  run: {self.run_start} -> {self.run_stop}  ({self.duration_s} s, "
                  f"{self.status})"),
                 f"  blocks: {len(self.blocks)}  evals: {len(self.evals)}"]
        if "train_step_timing_s" in st and len(st):
            s = st["train_step_timing_s"]
            lines.append(f"  train_step_timing_s: median {s.median():.3f}, "
                         f"min {s.min():.3f}, max {s.max():.3f}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        import html
        return "<pre>" + html.escape(self.summary()) + "</pre>"


def read_mllog(path) -> MLLogResult:
    """Read an MLPerf training result log (``result_*.txt``).

    Rank prefixes (``0: :::MLLOG``) are parsed into ``rank``; other output is ignored;
    malformed MLLOG lines are skipped and counted in a
    :class:`~powerlab.exceptions.DataQualityWarning`.

    Returns
    -------
    MLLogResult
        ``.events``, ``.steps`` (unpacks as ``events, steps = read_mllog(p)``), run
        start/stop, ``.blocks``, ``.evals``, ``summary()``.
    """
    p = Path(path)
    text, _ = read_text(p)
    return parse_mllog(text, path=p)


def parse_mllog(text_or_buffer, *, path=None) -> MLLogResult:
    """Parse a training log given as text or a buffer (see :func:`read_mllog`)."""
    text, name = read_text(text_or_buffer)
    path = path if path is not None else name
    events, bad, first_bad = _events(text, path)
    _warn_bad(path, bad, first_bad)
    if not events:
        raise ParseError("no MLLOG events", path=path)
    lines = [e[0] for e in events]
    ev = pd.DataFrame({
        "timestamp": pd.to_datetime(np.array([int(e[2]["time_ms"]) for e in events]),
                                    unit="ms", utc=True).as_unit("ns"),
        "rank": pd.array([e[1] for e in events], dtype="Int32"),
        "key": pd.Series([str(e[2]["key"]) for e in events], dtype="string"),
        "event_type": pd.Series([str(e[2].get("event_type", "")) for e in events],
                                dtype="string"),
        "value": pd.Series([e[2].get("value") for e in events], dtype=object),
        "metadata": pd.Series([e[2].get("metadata") if isinstance(e[2].get("metadata"), dict)
                               else {} for e in events], dtype=object),
        "line": np.asarray(lines, dtype=np.int64),
    })
    ts = ev[ev["key"] == "tracked_stats"]
    recs = []
    for t, rank, val, meta in zip(ts["timestamp"], ts["rank"], ts["value"], ts["metadata"]):
        r = {"timestamp": t, "rank": rank, "step": meta.get("step")}
        if isinstance(val, dict):
            for k, v in val.items():
                r[STEP_VARIABLE_MAP.get(k, re.sub(r"\W+", "_", k.replace(" in s", "_s")))] = v
        recs.append(r)
    steps = pd.DataFrame(recs, columns=None if recs else ["timestamp", "rank", "step"])
    if len(steps):
        steps["step"] = pd.array(steps["step"], dtype="Int64")
        steps["rank"] = pd.array(steps["rank"], dtype="Int32")
        for c in steps.columns:
            if c not in ("timestamp", "rank", "step"):
                steps[c] = pd.to_numeric(steps[c], errors="coerce").astype("float64")
    return MLLogResult(events=ev, steps=steps, path=None if path is None else str(path),
                       skipped_lines=bad)
