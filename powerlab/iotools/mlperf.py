"""Read MLPerf (MLCommons) node power logs: MLLOG ``power_reading`` events.

An MLPerf power submission holds one log per node (``node_N.txt``) and per switch
(``sw_N.txt``) of MLLOG lines (:mod:`powerlab.iotools.mllog`), e.g. ``:::MLLOG
{"namespace": "", "time_ms": 1715960308411, "event_type": "POINT_IN_TIME", "key":
"power_reading", "value": 4316, "metadata": ""}``: the node's AC power [W] at
``time_ms`` (Unix epoch milliseconds).  Malformed lines are skipped and counted in one
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

from .._lazy import lazy_exports
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
from .clocksync import clock_offsets
from .mllog import mllog_events, warn_malformed
from .registry import ReaderEntrypoint, head_text, register_reader

__all__ = [
    "SWITCH_KEYS",
    "VARIABLE_MAP",
    "parse_mlperf_power",
    "read_mlperf_power",
]

#: MLLOG key -> (canonical column, unit in the log, factor to canonical).
VARIABLE_MAP: dict[str, tuple[str, str, float]] = {
    "power_reading": ("power_w", "W", 1.0),
}

_NODE = re.compile(r"^node_(\d+)\.txt(?:\.gz)?$")
_SWITCH = re.compile(r"^sw_(\d+)\.txt(?:\.gz)?$")
#: MLLOG keys of switch (interconnect) power: kept apart, never added to a node.
SWITCH_KEYS = ("interconnect_power_est",)


def read_mlperf_power(path_or_dir, *, host: str | None = None,
                      align_clocks: bool = False) -> pd.DataFrame:
    """Read MLPerf node power logs (``power_reading`` events) as node-scope telemetry.

    Real logs of different submitters are read as they come:

    - **repeated readings**: a reading repeated with the same ``time_ms`` and value is
      dropped; readings at one instant with different values are averaged (their mean is
      the reading).  Both are counted in one
      :class:`~powerlab.exceptions.DataQualityWarning` per file and in
      ``attrs["repeated_readings"]``;
    - **host** from the file name (``node_12.txt`` -> ``"node_12"``), never from the
      events' metadata (a v5.0 log says ``"host": "node_0"`` in every file);
    - **switch logs** (``sw_N.txt``, or ``interconnect_power_est`` events in any file)
      stay switches: they are returned apart in ``attrs["switch_power"]`` (records of
      ``switch``, ``time_utc``, ``power_w``), never added to a node;
    - **meter interval** per file: the median spacing of its readings, in
      ``attrs["meter_interval_s"]`` (host -> seconds; 2.0 s for the v4.0 logs, 1.0 s for
      v5.0);
    - **identical node logs** (two files with the same readings at the same instants) are
      kept and named in a warning and ``attrs["identical_logs"]``;
    - **clock offsets** between nodes are estimated
      (:func:`~powerlab.iotools.clocksync.clock_offsets`) and reported in
      ``attrs["clock_offsets_s"]``; ``align_clocks=True`` subtracts them.

    Parameters
    ----------
    path_or_dir : str or path-like
        One ``node_N.txt`` file, or a directory whose ``node_*.txt`` (or ``.txt.gz``)
        files are all read.
    host : str, optional
        Host name for a single file.  Default: the file name (``node_12.txt`` ->
        ``"node_12"``).
    align_clocks : bool, default False
        Shift each node's timestamps by its estimated clock offset.

    Returns
    -------
    pandas.DataFrame
        Canonical telemetry with ``scope == "node"``, ``power_w`` the node AC power [W],
        ``timestamp`` from ``time_ms`` (Unix epoch milliseconds, UTC).
    """
    p = Path(path_or_dir)
    files, switches = _log_files(p, host)
    logs = _NodeLogs()
    for f in files:
        h = host if host is not None else strip_gz(f.name).rsplit(".", 1)[0]
        try:
            text, _ = read_text(f)
            t, w, info = _power_arrays(text, f)
        except ParseError as exc:
            if len(files) == 1:
                raise
            logs.unreadable.append(f"{f.name} ({_why(exc, f)})")
            continue
        logs.add(h, t, w, info)
    if not logs.hosts:
        raise ParseError(f"none of the {len(files)} node power logs is readable: "
                         + "; ".join(logs.unreadable), path=p)
    logs.switch += _switch_rows(switches)
    df = schema.validate(schema.conform(logs.frame()), source=str(p))
    _warn_files(p, logs, len(files))
    return _with_clock_offsets(df, logs, align_clocks)


def _log_files(p: Path, host: str | None) -> tuple[list[Path], list[Path]]:
    """The node logs (in node order) and switch logs of a folder, or the one file."""
    if p.is_dir():
        files = sorted((f for f in p.iterdir() if _NODE.match(f.name)),
                       key=lambda f: int(_NODE.match(f.name).group(1)))
        switches = sorted(f for f in p.iterdir() if _SWITCH.match(f.name))
        if not files:
            raise ParseError("no node_*.txt power logs in this directory", path=p)
        if host is not None and len(files) > 1:
            raise ParseError("host= names one node; it cannot be given for a directory of "
                             f"{len(files)} node logs", path=p)
        return files, switches
    if not p.exists():
        raise ParseError("no such file or directory", path=p)
    return [p], []


@dataclass
class _NodeLogs:
    """What the node logs of one source gave: each host's readings and notes."""

    hosts: list = field(default_factory=list)
    ts: list = field(default_factory=list)
    ws: list = field(default_factory=list)
    codes: list = field(default_factory=list)
    intervals: dict = field(default_factory=dict)
    repeats: dict = field(default_factory=dict)
    switch: list = field(default_factory=list)      # (switch or node, time_ms, W)
    digests: dict = field(default_factory=dict)     # readings -> hosts that logged them
    unreadable: list = field(default_factory=list)  # "name (why)"

    def add(self, h: str, t: np.ndarray, w: np.ndarray, info: dict) -> None:
        self.codes.append(np.full(len(t), len(self.hosts), dtype=np.int32))
        self.hosts.append(h)
        self.ts.append(t)
        self.ws.append(w)
        self.intervals[h] = info["meter_interval_s"]
        self.repeats[h] = info["repeated"]
        self.switch += [(h, tt, ww) for tt, ww in info["switch"]]
        self.digests.setdefault((t.tobytes(), w.tobytes()), []).append(h)

    def identical(self) -> list[tuple]:
        """Groups of hosts whose logs hold the same readings at the same instants."""
        return [tuple(v) for v in self.digests.values() if len(v) > 1]

    def frame(self) -> pd.DataFrame:
        return _node_frame(np.concatenate(self.ts), np.concatenate(self.ws), self.hosts,
                           np.concatenate(self.codes))


def _switch_rows(switches: list[Path]) -> list[tuple]:
    """``(switch, time_ms, W)`` of the switch logs (an unreadable one is left out)."""
    rows = []
    for f in switches:
        try:
            text, _ = read_text(f)
        except ParseError:
            continue
        name = strip_gz(f.name).rsplit(".", 1)[0]
        rows += [(name, tt, ww) for tt, ww in _switch_events(text, f)]
    return rows


def _warn_files(p: Path, logs: _NodeLogs, n_files: int) -> None:
    """The warnings about whole files: unreadable ones, and logs with identical
    readings (pointing at the caller of :func:`read_mlperf_power`)."""
    if logs.unreadable:
        warn_quality(f"{p}: skipped {len(logs.unreadable)} of {n_files} node power logs "
                     f"that cannot be read: {'; '.join(logs.unreadable)}", stacklevel=4)
    same = logs.identical()
    if same:
        warn_quality(f"{p}: node logs with identical readings (same instants and values): "
                     + "; ".join(" = ".join(g) for g in same)
                     + " -- one meter logged under several names? kept as read",
                     stacklevel=4)


def _with_clock_offsets(df: pd.DataFrame, logs: _NodeLogs, align: bool) -> pd.DataFrame:
    """``df`` with the nodes' clock offsets (subtracted where ``align``) and what the
    logs said in ``attrs``."""
    hosts = logs.hosts
    offsets = clock_offsets(df) if len(hosts) > 1 else pd.Series(
        {hosts[0]: 0.0}, name="clock_offset_s")
    if align and len(hosts) > 1:
        shift = df["host"].map(offsets).astype("float64").to_numpy()
        df["timestamp"] = df["timestamp"] - pd.to_timedelta(shift, unit="s")
        df = schema.conform(df)
    df.attrs["unreadable_files"] = [u.split(" (", 1)[0] for u in logs.unreadable]
    df.attrs["meter_interval_s"] = logs.intervals
    df.attrs["repeated_readings"] = logs.repeats
    df.attrs["identical_logs"] = [list(g) for g in logs.identical()]
    df.attrs["clock_offsets_s"] = offsets.to_dict()
    far = {h: v for h, v in offsets.items() if abs(v) > logs.intervals.get(h, 2.0)}
    if far and not align:
        warn_quality("node clock offsets beyond the meter interval: "
                     + ", ".join(f"{h} {v:+.1f} s" for h, v in list(far.items())[:8])
                     + " -- not applied (read with align_clocks=True; powerlab calibrate "
                     "applies them)")
    df.attrs["clocks_aligned"] = bool(align and len(hosts) > 1)
    df.attrs["switch_power"] = [  # plain values: attrs travel into Parquet metadata
        {"switch": r[0], "time_utc": pd.Timestamp(r[1], unit="ms", tz="UTC").isoformat(),
         "power_w": r[2]} for r in logs.switch]
    return df


def _switch_events(text: str, path) -> list[tuple[int, float]]:
    """``(time_ms, power_w)`` of the switch power estimates in one log."""
    events, _, _ = mllog_events(text, path)
    return [(int(ev["time_ms"]), float(ev["value"])) for _, _, ev in events
            if ev["key"] in SWITCH_KEYS and isinstance(ev.get("value"), (int, float))
            and not isinstance(ev.get("value"), bool)]


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


def _power_arrays(text: str, path) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(time_ms, power_w, info)`` of one node log's power readings, sorted in time, one
    per instant, impossible ones masked; ``info``: ``meter_interval_s``, ``repeated``
    (readings dropped or merged) and ``switch`` (``(time_ms, W)`` switch estimates)."""
    fast = _power_fast(text)
    if fast is not None:
        t, w, sw = fast
        bad, first_bad, events = 0, None, ()
    else:
        events, bad, first_bad = mllog_events(text, path)
        t, w, sw = [], [], []
    for lineno, _, ev in events:
        if ev["key"] in SWITCH_KEYS:
            v = ev.get("value")
            if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                    not _too_big(v):
                sw.append((int(ev["time_ms"]), float(v)))
            continue
        spec = VARIABLE_MAP.get(ev["key"]) if isinstance(ev["key"], str) else None
        if spec is None:   # another event (a key that is not a string: not a reading)
            continue
        v = ev.get("value")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or _too_big(v):
            bad += 1                # not a number, or beyond any meter (400 digits)
            if first_bad is None:
                first_bad = f"line {lineno}: {spec[0]} value {v!r} is not a number in {spec[1]}"
            continue
        t.append(int(ev["time_ms"]))
        w.append(float(v) * spec[2])
    if not len(t):
        raise ParseError("no power_reading events: not an MLPerf node power log"
                         + (f" ({bad} malformed MLLOG line(s), first at {first_bad})"
                            if bad else ""), path=path)
    warn_malformed(path, bad, first_bad)
    t, w, n_exact, n_conflict, spread = _one_per_instant(np.asarray(t, dtype=np.int64),
                                                         np.asarray(w, dtype="float64"))
    if n_exact or n_conflict:
        warn_quality(f"{path or 'MLLOG text'}: dropped {n_exact} exactly repeated power "
                     f"reading(s); averaged {n_conflict} instant(s) with different readings"
                     + (f" (up to {spread:g} W apart)" if n_conflict else ""), stacklevel=4)
    cols = {"power_w": w}
    mask_impossible(cols, node=True, path=path, what="MLLOG text")
    dt = np.diff(t)
    interval = float(np.median(dt)) / 1e3 if len(dt) else float("nan")
    return t, cols["power_w"], {"meter_interval_s": round(interval, 3),
                                "repeated": n_exact + n_conflict, "switch": sw}


#: Line breaks of ``str.splitlines`` other than ``\n`` and ``\r\n``: a text holding
#: one is parsed line by line (:func:`~powerlab.iotools.mllog.mllog_events`).
_OTHER_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _too_big(v) -> bool:
    """A JSON integer beyond any float (hundreds of digits): a malformed line, not a
    reading (float() of it raised OverflowError); inf and 1e308 are masked later."""
    return type(v) is int and v.bit_length() > 1000

_PLAIN_LINE = re.compile(r"^:::MLLOG (.*)$", re.MULTILINE)


def _power_fast(text: str):
    """``(time_ms, value, switch readings)`` lists of a power log whose every MLLOG line
    is a plain ``:::MLLOG {event}`` line with a well-formed event and a numeric power
    value, decoded by one ``json.loads`` of all the events; None when any line or event
    is not (then :func:`~powerlab.iotools.mllog.mllog_events` parses line by line, and
    counts and names the bad lines exactly as it always did).  What it returns is what
    the line-by-line path gives for such a text."""
    text, cut = split_cut_last_line(text)
    if (cut or any(c in text for c in _OTHER_BREAKS)
            or text.count("\r") != text.count("\r\n")):
        return None   # (a "\r" before "\n" stays in the payload: JSON whitespace)
    payloads = _PLAIN_LINE.findall(text)
    if len(payloads) != text.count(":::MLLOG"):   # a prefix, or two on a line
        return None
    try:
        evs = json.loads("[" + ",".join(payloads) + "]")
    except (ValueError, RecursionError):
        return None
    if len(evs) != len(payloads):                  # a line held two values
        return None
    lo, hi = TIME_MS_RANGE
    num = (int, float)   # what JSON numbers decode to (bool is neither)
    power, switch = VARIABLE_MAP, SWITCH_KEYS
    t, w, f, sw = [], [], [], []
    put_t, put_w, put_f = t.append, w.append, f.append
    for ev in evs:
        if type(ev) is not dict:
            return None
        tm, key = ev.get("time_ms"), ev.get("key")
        if type(tm) not in num or not lo <= tm < hi or type(key) is not str:
            return None
        spec = power.get(key)
        if spec is not None:
            v = ev.get("value")
            if type(v) not in num or _too_big(v):
                return None       # the line-by-line path counts it as a bad line
            put_t(tm)
            put_w(v)
            put_f(spec[2])
        elif key in switch:
            v = ev.get("value")
            if type(v) in num and not _too_big(v):
                sw.append((int(tm), float(v)))
    # int() and float() of each, as the line-by-line path does: exact for the integer
    # time_ms of real logs (< 2**53), truncation toward zero for fractional ones
    tt = np.asarray(t)
    tt = tt.astype(np.int64) if tt.dtype.kind == "f" else tt.astype(np.int64, copy=False)
    ww = np.asarray(w, dtype="float64")
    if any(x != 1.0 for x in set(f)):
        ww = ww * np.asarray(f)
    return tt, ww, sw


def _one_per_instant(t: np.ndarray, w: np.ndarray):
    """Sort by time; drop exact repeats, average different readings at one instant.

    Returns ``t, w, exact repeats dropped, instants averaged, largest spread [W]``.
    """
    o = np.argsort(t, kind="stable")
    t, w = t[o], w[o]
    if len(t) < 2 or not (np.diff(t) == 0).any():
        return t, w, 0, 0, 0.0
    pair = np.lexsort((w, t))
    t2, w2 = t[pair], w[pair]
    exact = np.r_[False, (np.diff(t2) == 0) & (np.diff(w2) == 0)]
    t2, w2 = t2[~exact], w2[~exact]
    uniq, first, counts = np.unique(t2, return_index=True, return_counts=True)
    mean = np.add.reduceat(w2, first) / counts
    spread = np.maximum.reduceat(w2, first) - np.minimum.reduceat(w2, first)
    multi = counts > 1
    return (uniq, mean, int(exact.sum()), int(multi.sum()),
            float(spread[multi].max()) if multi.any() else 0.0)


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
    t, w, _ = _power_arrays(text, path)
    return _node_frame(t, w, [host], np.zeros(len(t), dtype=np.int32))


@register_reader
class MLPerfPowerReader(ReaderEntrypoint):
    """MLPerf node power logs: MLLOG text with ``power_reading`` events, or a folder of
    ``node_N.txt`` logs."""

    name = "mlperf-power"
    kind = "telemetry"
    description = "MLPerf MLLOG"
    priority = 10
    open = staticmethod(read_mlperf_power)

    def guess_can_open(self, path, head_bytes) -> bool:
        text = head_text(head_bytes)
        return ":::MLLOG" in text and '"power_reading"' in text

    def guess_can_open_folder(self, path) -> bool:
        return any(_NODE.match(f.name) for f in path.iterdir())


#: names of 0.1 that moved with the MLLOG training logs to :mod:`powerlab.iotools.mllog`
#: (0.2.0): they still resolve here, with a deprecation warning, until 0.3.0
_, __getattr__, _ = lazy_exports(__name__, {}, moved={
    "powerlab.iotools.mllog": ("MLLogResult", "STEP_VARIABLE_MAP", "parse_mllog",
                               "read_mllog")})
