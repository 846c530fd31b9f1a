"""Read MLPerf (MLCommons) MLLOG text: its event lines and training result logs.

MLLOG lines look like ``:::MLLOG {"namespace": "", "time_ms": 1715960308411,
"event_type": "POINT_IN_TIME", "key": "power_reading", "value": 4316, "metadata": ""}``.
Training logs prefix them with the rank (``0: :::MLLOG {...}``) and interleave them
with shell and framework output, which is ignored.  Lines that mention ``:::MLLOG`` but
do not hold one well-formed JSON event are skipped and counted in one
:class:`~powerlab.exceptions.DataQualityWarning` per file, never dropped silently.
The node power logs of the same format are read by :mod:`powerlab.iotools.mlperf`.

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

from .._summary import Results, Summary
from ..exceptions import ParseError
from ._common import TIME_MS_RANGE, read_text, split_cut_last_line, warn_quality
from .registry import ReaderEntrypoint, head_text, register_reader

__all__ = [
    "STEP_VARIABLE_MAP",
    "MLLogResult",
    "parse_mllog",
    "read_mllog",
]

#: ``tracked_stats`` value names -> step-table columns (unit in the name).
STEP_VARIABLE_MAP: dict[str, str] = {
    "train_step_timing in s": "train_step_timing_s",
    "validation_step_timing in s": "validation_step_timing_s",
    "throughput": "throughput",  # samples per second as logged by the benchmark
    "epoch_num": "epoch_num",
}


def mllog_events(text: str, path) -> tuple[list[tuple], int, str | None]:
    """``(line, rank, event dict)`` of each well-formed MLLOG line, the count of malformed
    ones and where the first is (``"line N: why"``)."""
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


def warn_malformed(path, bad, first_bad, what="MLLOG line(s)"):
    """One DataQualityWarning counting the malformed lines (none: silent), pointing at
    the caller of the reader."""
    if bad:
        warn_quality(f"{path or 'MLLOG text'}: skipped {bad} malformed {what} "
                     f"(first at {first_bad})", stacklevel=4)


@dataclass(frozen=True, repr=False)
class MLLogResult(Results):
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
    events, bad, first_bad = mllog_events(text, path)
    warn_malformed(path, bad, first_bad)
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


@register_reader
class MLLogReader(ReaderEntrypoint):
    """An MLPerf training result log: MLLOG lines (asked after the node power logs,
    which are MLLOG text too)."""

    name = "mllog"
    description = "MLPerf MLLOG"
    priority = 20
    open = staticmethod(read_mllog)

    def guess_can_open(self, path, head_bytes) -> bool:
        return ":::MLLOG" in head_text(head_bytes)
