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

from .._summary import Summary
from ..exceptions import ParseError
from ..telemetry import schema
from ..telemetry.timeutil import to_epoch_ns
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
    "clock_offsets",
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
_SWITCH = re.compile(r"^sw_(\d+)\.txt(?:\.gz)?$")
#: MLLOG keys of switch (interconnect) power: kept apart, never added to a node.
SWITCH_KEYS = ("interconnect_power_est",)


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
    - **clock offsets** between nodes are estimated (:func:`clock_offsets`) and reported in
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
    switches = []
    if p.is_dir():
        files = sorted((f for f in p.iterdir() if _NODE.match(f.name)),
                       key=lambda f: int(_NODE.match(f.name).group(1)))
        switches = sorted(f for f in p.iterdir() if _SWITCH.match(f.name))
        if not files:
            raise ParseError("no node_*.txt power logs in this directory", path=p)
        if host is not None and len(files) > 1:
            raise ParseError("host= names one node; it cannot be given for a directory of "
                             f"{len(files)} node logs", path=p)
    elif not p.exists():
        raise ParseError("no such file or directory", path=p)
    else:
        files = [p]
    ts, ws, hosts, codes, unreadable = [], [], [], [], []
    intervals, repeats, sw_rows, digests = {}, {}, [], {}
    for f in files:
        h = host if host is not None else strip_gz(f.name).rsplit(".", 1)[0]
        try:
            text, _ = read_text(f)
            t, w, info = _power_arrays(text, f)
        except ParseError as exc:
            if len(files) == 1:
                raise
            unreadable.append(f"{f.name} ({_why(exc, f)})")
            continue
        codes.append(np.full(len(t), len(hosts), dtype=np.int32))
        hosts.append(h)
        ts.append(t)
        ws.append(w)
        intervals[h] = info["meter_interval_s"]
        repeats[h] = info["repeated"]
        sw_rows += [(h, tt, ww) for tt, ww in info["switch"]]
        digests.setdefault((t.tobytes(), w.tobytes()), []).append(h)
    if not ts:
        raise ParseError(f"none of the {len(files)} node power logs is readable: "
                         + "; ".join(unreadable), path=p)
    for f in switches:
        try:
            text, _ = read_text(f)
        except ParseError:
            continue
        name = strip_gz(f.name).rsplit(".", 1)[0]
        sw_rows += [(name, tt, ww) for tt, ww in _switch_events(text, f)]
    df = _node_frame(np.concatenate(ts), np.concatenate(ws), hosts, np.concatenate(codes))
    df = schema.conform(df)
    df = schema.validate(df, source=str(p))
    if unreadable:
        warn_quality(f"{p}: skipped {len(unreadable)} of {len(files)} node power logs that "
                     f"cannot be read: {'; '.join(unreadable)}", stacklevel=3)
    same = [tuple(v) for v in digests.values() if len(v) > 1]
    if same:
        warn_quality(f"{p}: node logs with identical readings (same instants and values): "
                     + "; ".join(" = ".join(g) for g in same)
                     + " -- one meter logged under several names? kept as read",
                     stacklevel=3)
    offsets = clock_offsets(df) if len(hosts) > 1 else pd.Series(
        {hosts[0]: 0.0}, name="clock_offset_s")
    if align_clocks and len(hosts) > 1:
        shift = df["host"].map(offsets).astype("float64").to_numpy()
        df["timestamp"] = df["timestamp"] - pd.to_timedelta(shift, unit="s")
        df = schema.conform(df)
    df.attrs["unreadable_files"] = [u.split(" (", 1)[0] for u in unreadable]
    df.attrs["meter_interval_s"] = intervals
    df.attrs["repeated_readings"] = repeats
    df.attrs["identical_logs"] = [list(g) for g in same]
    df.attrs["clock_offsets_s"] = offsets.to_dict()
    df.attrs["clocks_aligned"] = bool(align_clocks and len(hosts) > 1)
    df.attrs["switch_power"] = [  # plain values: attrs travel into Parquet metadata
        {"switch": r[0], "time_utc": pd.Timestamp(r[1], unit="ms", tz="UTC").isoformat(),
         "power_w": r[2]} for r in sw_rows]
    return df


def clock_offsets(telemetry: pd.DataFrame, *, max_lag_s: float = 5.0,
                  grid_s: float = 0.1) -> pd.Series:
    """Clock offset of each node against the others, from their common workload [s].

    Each node's readings are interpolated onto a common ``grid_s`` grid; its offset is the
    lag (within ``+-max_lag_s``, refined by a parabola through the peak) that maximises the
    cross-correlation of its demeaned series with the median of all nodes.  A positive
    offset means the node's clock runs ahead: the same workload change carries a later
    timestamp there; ``timestamp - offset`` puts it on the common clock.  The median over
    nodes is 0 by construction of the reference only approximately, so offsets are
    reported relative to their median.

    Parameters
    ----------
    telemetry : DataFrame
        Node-scope telemetry of one job (``timestamp``, ``host``, ``power_w``).
    max_lag_s : float, default 5
        Largest offset searched [s].
    grid_s : float, default 0.1
        Resolution of the common grid [s].

    Returns
    -------
    pandas.Series
        Offset per host [s], named ``clock_offset_s``.

    References
    ----------
    .. [1] J. S. Bendat and A. G. Piersol, *Random Data*, 4th ed., Wiley, 2010, ch. 5
       (cross-correlation and time-delay estimation).
    """
    from scipy import signal

    df = telemetry[telemetry["power_w"].notna()]
    t_ns = to_epoch_ns(df["timestamp"])
    t0, t1 = t_ns.min(), t_ns.max()
    grid = np.arange(0.0, (t1 - t0) / 1e9, grid_s)
    hosts, series = [], []
    for h, g in df.groupby("host", sort=True, observed=True):
        tt = (to_epoch_ns(g["timestamp"]) - t0) / 1e9
        o = np.argsort(tt)
        hosts.append(str(h))
        series.append(np.interp(grid, tt[o], g["power_w"].to_numpy(float)[o]))
    k = round(max_lag_s / grid_s)
    m = len(grid)
    if m > k:   # every node at once, the reference transformed once
        from scipy import fft

        n = fft.next_fast_len(m + k, real=True)   # no wrap-around within +-k
        y = np.zeros((len(series), n))            # zero-padded in place
        for i, row in enumerate(series):
            y[i, :m] = row
        ref = np.median(y[:, :m], axis=0)
        ref = ref - ref.mean()
        y[:, :m] -= y[:, :m].mean(axis=1, keepdims=True)
        cc = fft.irfft(fft.rfft(y, axis=1) * np.conj(fft.rfft(ref, n)), n, axis=1)
        # wins[:, k + lag] = sum_l x[l] ref[l - lag], the "full" cross-correlation
        wins = np.concatenate([cc[:, n - k:], cc[:, :k + 1]], axis=1)
    else:
        ref = np.median(np.vstack(series), axis=0)
        ref = ref - ref.mean()
        wins = None
    out = []
    for i, row in enumerate(series):
        if wins is not None:
            win = wins[i]
        else:
            x = row - row.mean()
            cc = signal.correlate(x, ref, mode="full", method="fft")
            mid = len(ref) - 1
            win = cc[mid - k: mid + k + 1]
        j = int(np.argmax(win))
        shift = 0.0
        if 0 < j < len(win) - 1:
            a, b, c = win[j - 1], win[j], win[j + 1]
            den = a - 2 * b + c
            shift = 0.5 * (a - c) / den if den != 0 else 0.0
        out.append((j - k + shift) * grid_s)
    off = np.asarray(out)
    return pd.Series(off - np.median(off), index=hosts, name="clock_offset_s")


def _switch_events(text: str, path) -> list[tuple[int, float]]:
    """``(time_ms, power_w)`` of the switch power estimates in one log."""
    events, _, _ = _events(text, path)
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
        events, bad, first_bad = _events(text, path)
        t, w, sw = [], [], []
    for lineno, _, ev in events:
        if ev["key"] in SWITCH_KEYS:
            v = ev.get("value")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                sw.append((int(ev["time_ms"]), float(v)))
            continue
        spec = VARIABLE_MAP.get(ev["key"]) if isinstance(ev["key"], str) else None
        if spec is None:   # another event (a key that is not a string: not a reading)
            continue
        v = ev.get("value")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            bad += 1
            if first_bad is None:
                first_bad = f"line {lineno}: {spec[0]} value {v!r} is not a number in {spec[1]}"
            continue
        t.append(int(ev["time_ms"]))
        w.append(float(v) * spec[2])
    if not len(t):
        raise ParseError("no power_reading events: not an MLPerf node power log"
                         + (f" ({bad} malformed MLLOG line(s), first at {first_bad})"
                            if bad else ""), path=path)
    _warn_bad(path, bad, first_bad)
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
#: one is parsed line by line (:func:`_events`).
_OTHER_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
_PLAIN_LINE = re.compile(r"^:::MLLOG (.*)$", re.MULTILINE)


def _power_fast(text: str):
    """``(time_ms, value, switch readings)`` lists of a power log whose every MLLOG line
    is a plain ``:::MLLOG {event}`` line with a well-formed event and a numeric power
    value, decoded by one ``json.loads`` of all the events; None when any line or event
    is not (then :func:`_events` parses line by line, and counts and names the bad
    lines exactly as it always did).  What it returns is what the line-by-line path
    gives for such a text."""
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
            if type(v) not in num:
                return None
            put_t(tm)
            put_w(v)
            put_f(spec[2])
        elif key in switch:
            v = ev.get("value")
            if type(v) in num:
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
        for c in ("start", "stop"):  # a log without these events has empty object columns
            out[c] = pd.to_datetime(out[c], utc=True).astype("datetime64[ns, UTC]")
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

    def summary_frame(self) -> pd.DataFrame:
        """One row: run start and stop, duration [s], status and counts."""
        return pd.DataFrame([{"path": str(self.path or ""), "run_start": self.run_start,
                              "run_stop": self.run_stop, "duration_s": self.duration_s,
                              "status": self.status, "events": len(self.events),
                              "tracked_steps": len(self.steps),
                              "skipped_lines": self.skipped_lines,
                              "blocks": len(self.blocks), "evals": len(self.evals)}])

    def summary(self) -> Summary:
        """A short summary of the run."""
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
        out = Summary()
        out.add_text(lines, pre=True)
        return out

    def __repr__(self) -> str:
        return str(self.summary())

    def _repr_html_(self) -> str:
        return self.summary().as_html()


def _step(v):
    """The step number of a ``tracked_stats`` event: an integer, or the last integer of a
    list (BERT logs ``"step": [epoch, step]``); ``None`` otherwise."""
    if isinstance(v, (list, tuple)) and v:
        v = v[-1]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
        return None
    return int(v)


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
        r = {"timestamp": t, "rank": rank, "step": _step(meta.get("step"))}
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
