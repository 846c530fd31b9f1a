"""Target trajectories: the power caps a site is asked to stay under, and when.

Two sources:

* **CSV** (``read_targets`` on a ``.csv``), either one row per target
  (``start_utc, end_utc, cap_megawatts`` or ``start_utc, duration_s, cap_megawatts``) or
  a trajectory (``timestamp, cap_megawatts``: each cap holds until the next row; the
  last row has an empty cap and closes the trajectory).  An optional ``notice_utc``
  column says when each target became known (default: known in advance).
* **OpenADR 3 event JSON** (``.json``; :func:`parse_openadr_event`): an event object, a
  list of them, or ``{"program": ..., "events": [...]}``, as in the OpenADR 3 OpenAPI
  specification: ``programID``, ``intervalPeriod {start, duration}``,
  ``payloadDescriptors [{payloadType, units}]``, ``intervals [{id, intervalPeriod?,
  payloads [{type, values}]}]``.  Each interval with an ``IMPORT_CAPACITY_LIMIT``
  payload is one target; an interval without its own period follows the previous one
  (the event's period gives the first start and every duration).  ``createdDateTime``
  is the notice.  The document is checked against a JSON schema of those fields first.

Every problem is one line: a :class:`~powerlab.exceptions.ParseError` whose ``path`` is
the file, ``line`` the line in it (CSV: the physical line, comments and blank lines
counted; JSON: only for a syntax error) and ``column`` the CSV column or the JSON path of
the value at fault: a time without a zone (unless ``tz`` is given) or an unknown zone, a
cap below the site's floor, a target that ends before the
plan starts (in the past) or after the horizon, overlapping targets, a missing cap.
Nothing is dropped silently.  A cap above the site's maximum power binds nothing: it
is kept (the plan sheds nothing for it) with a counted
:class:`~powerlab.exceptions.DataQualityWarning`.

References
----------
.. [1] OpenADR Alliance, "OpenADR 3.0 Specification" and its OpenAPI definition
   (``openadr3.yaml``: schemas ``event``, ``intervalPeriod``, ``interval``,
   ``valuesMap``, ``eventPayloadDescriptor``; payload type ``IMPORT_CAPACITY_LIMIT``),
   2023.
"""

from __future__ import annotations

import io
import json
import re
import warnings
import zoneinfo
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._options import choice, renamed_attribute, renamed_keywords
from ..exceptions import DataQualityWarning, ParseError, PowerlabError
from ..telemetry.timeutil import to_utc

__all__ = ["Targets", "check_targets", "parse_openadr_event", "random_targets",
           "read_targets"]

_UNITS = {"W": 1.0, "KW": 1e3, "MW": 1e6}

#: JSON schema of the OpenADR 3 event fields read here (a subset of openadr3.yaml).
_PERIOD = {"type": "object", "required": ["start"],
           "properties": {"start": {"type": "string"}, "duration": {"type": "string"},
                          "randomizeStart": {"type": "string"}}}
EVENT_SCHEMA = {
    "type": "object",
    "required": ["programID", "intervals"],
    "properties": {
        "programID": {"type": "string"},
        "eventName": {"type": ["string", "null"]},
        "createdDateTime": {"type": "string"},
        "intervalPeriod": _PERIOD,
        "payloadDescriptors": {"type": "array", "items": {
            "type": "object", "required": ["payloadType"],
            "properties": {"payloadType": {"type": "string"},
                           "units": {"type": ["string", "null"]}}}},
        "intervals": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["id", "payloads"],
            "properties": {"id": {"type": "integer"}, "intervalPeriod": _PERIOD,
                           "payloads": {"type": "array", "minItems": 1, "items": {
                               "type": "object", "required": ["type", "values"],
                               "properties": {"type": {"type": "string"},
                                              "values": {"type": "array",
                                                         "minItems": 1}}}}}}},
    },
}


@dataclass(frozen=True)
class Targets:
    """Power caps over time.

    Attributes
    ----------
    frame : pandas.DataFrame
        ``start_utc, end_utc, cap_w, notice_utc, source`` sorted by start (``notice_utc``
        NaT: known in advance).
    boundary : str
        ``"it"`` or ``"facility"``: which power the caps apply to
        (:data:`powerlab.limits.requirements.BOUNDARIES`; ``scope`` is its deprecated name).
    """

    frame: pd.DataFrame
    boundary: str = "it"
    scope = renamed_attribute("boundary")     # the old name, for one release

    def __len__(self) -> int:
        return len(self.frame)


Targets.__init__ = renamed_keywords(scope="boundary")(Targets.__init__)


def _zone(tz: str | None, where: dict):
    if tz is None:
        return None
    try:
        zoneinfo.ZoneInfo(str(tz))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ParseError(f"unknown time zone {tz!r} (an IANA name such as "
                         "'America/Chicago' expected)", **where) from None
    return str(tz)


def _time(text, tz: str | None, where: dict) -> pd.Timestamp:
    """A target's time by :func:`~powerlab.telemetry.to_utc`; an IANA zone may follow it
    ("2025-07-01 10:00 America/Chicago")."""
    if text is None or (isinstance(text, float) and np.isnan(text)) or str(text).strip() == "":
        raise ParseError("missing time", **where)
    s = str(text).strip()
    parts = s.rsplit(" ", 1)
    if len(parts) == 2 and "/" in parts[1]:
        s, tz = parts[0], _zone(parts[1], where)
    return to_utc(s, tz=tz, what="time", hint="give tz",
                  error=lambda msg: ParseError(msg, **where))


def _cap_w(value, where: dict) -> float:
    if value is None or str(value).strip() == "":
        raise ParseError("missing cap (every target needs one; none is dropped)", **where)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParseError(f"cap {value!r} is not a number", **where) from None
    if not np.isfinite(v):
        raise ParseError("missing or non-finite cap (every target needs one)", **where)
    return v * 1e6


def _record_lines(text: str) -> list[int]:
    """The 1-based line on which each CSV record starts (the header first), by the rules
    ``pandas.read_csv(comment="#")`` reads with: ``#`` outside quotes starts a comment,
    lines blank after it are skipped, a quoted field may span lines."""
    starts, quoted = [], False
    for n, line in enumerate(text.split("\n"), 1):
        begins, body = not quoted, []
        for ch in line:
            if ch == '"':
                quoted = not quoted
            elif ch == "#" and not quoted:
                break
            body.append(ch)
        if begins and "".join(body).strip():
            starts.append(n)
    return starts


def _read_csv(path: Path, tz: str | None) -> pd.DataFrame:
    try:
        text = path.read_text(encoding="utf-8-sig")     # universal newlines
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, comment="#")
    except FileNotFoundError:
        raise ParseError("no such file", path=path) from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ParseError(f"cannot read as CSV: {exc}", path=path) from None
    n = len(raw)
    starts = _record_lines(text)
    head = starts[0] if starts else 1
    # each row's line; none rather than a wrong one should the counts ever differ
    lines = starts[1:] if len(starts) == n + 1 else [None] * n
    cols = {c.strip(): c for c in raw.columns}
    if "cap_megawatts" not in cols:
        bad = [c for c in cols if c.lower() in ("cap_mw", "mw", "cap")]
        hint = f" (found {bad[0]!r}: units are spelled out)" if bad else ""
        raise ParseError(f"no 'cap_megawatts' column{hint}", path=path, line=head)
    rows, locs = [], {}
    traj = "timestamp" in cols
    if not traj and "start_utc" not in cols:
        raise ParseError("expected columns start_utc + end_utc (or duration_s) + "
                         "cap_megawatts, or timestamp + cap_megawatts", path=path, line=head)
    if n == 0:
        raise ParseError("no targets in the file", path=path, line=head)
    for i in range(n):
        rec = {k: raw[c].iloc[i].strip() for k, c in cols.items()}
        where = {"path": path, "line": lines[i]}
        label = f"{path.name}:{lines[i]}" if lines[i] else f"{path.name} row {i + 1}"
        notice = (_time(rec["notice_utc"], tz, {**where, "column": "notice_utc"})
                  if rec.get("notice_utc") else pd.NaT)
        if traj:
            t = _time(rec["timestamp"], tz, {**where, "column": "timestamp"})
            if i == n - 1:
                if rec["cap_megawatts"] != "":
                    raise ParseError("the last row of a trajectory closes it: leave its "
                                     "cap_megawatts empty", **where, column="cap_megawatts")
                rows[-1]["end_utc"] = t if rows else None
                if not rows:
                    raise ParseError("a trajectory needs at least two rows", **where)
                locs[len(rows) - 1]["end"] = (lines[i], "timestamp")
                break
            cap = _cap_w(rec["cap_megawatts"], {**where, "column": "cap_megawatts"})
            if rows:
                rows[-1]["end_utc"] = t
                locs[len(rows) - 1]["end"] = (lines[i], "timestamp")
            locs[len(rows)] = {"start": (lines[i], "timestamp"),
                               "cap": (lines[i], "cap_megawatts")}
            rows.append({"start_utc": t, "end_utc": None, "cap_w": cap,
                         "notice_utc": notice, "source": label})
        else:
            t0 = _time(rec["start_utc"], tz, {**where, "column": "start_utc"})
            end = "end_utc" if rec.get("end_utc") else "duration_s"
            if rec.get("end_utc"):
                t1 = _time(rec["end_utc"], tz, {**where, "column": "end_utc"})
            elif rec.get("duration_s"):
                try:
                    t1 = t0 + pd.Timedelta(seconds=float(rec["duration_s"]))
                except ValueError:
                    raise ParseError(f"duration_s {rec['duration_s']!r} is not a number",
                                     **where, column="duration_s") from None
            else:
                raise ParseError("each target needs end_utc or duration_s", **where,
                                 column="end_utc")
            cap = _cap_w(rec["cap_megawatts"], {**where, "column": "cap_megawatts"})
            locs[len(rows)] = {"start": (lines[i], "start_utc"), "end": (lines[i], end),
                               "cap": (lines[i], "cap_megawatts")}
            rows.append({"start_utc": t0, "end_utc": t1, "cap_w": cap,
                         "notice_utc": notice, "source": label})
    return _located(pd.DataFrame(rows), locs)


def _located(frame: pd.DataFrame, locs: dict) -> pd.DataFrame:
    """``frame`` with where each row's start, end and cap were read (row -> {'start' |
    'end' | 'cap': (line or None, CSV column or JSON path)}), for :func:`check_targets`."""
    frame.attrs["locations"] = locs
    return frame


#: ISO 8601 durations of fixed length: weeks, days, hours, minutes, seconds (months and
#: years differ in length and are refused, not read as minutes).
_ISO_DURATION = re.compile(
    r"P(?:(?P<w>\d{1,9}(?:[.,]\d{1,9})?)W)?(?:(?P<d>\d{1,9}(?:[.,]\d{1,9})?)D)?"
    r"(?:T(?:(?P<h>\d{1,9}(?:[.,]\d{1,9})?)H)?(?:(?P<m>\d{1,9}(?:[.,]\d{1,9})?)M)?"
    r"(?:(?P<s>\d{1,12}(?:[.,]\d{1,9})?)S)?)?")
_CALENDAR = re.compile(r"P(?:[^T]*[YM])")
_SECONDS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
#: Longest event interval read [s]: ten years (OpenADR's "P9999Y", for ever, is refused).
MAX_DURATION_S = 3653 * 86400.0


def _duration(text, where: dict) -> pd.Timedelta:
    """An ISO 8601 duration (``PT5M``, ``P1DT2H``, ``P2W``) of fixed length.

    ``P1M`` is a month, not a minute (``PT1M``): pandas read it as one minute, so this
    parser is written to the standard [ISO 8601-1:2019, 5.5.2] and refuses calendar months
    and years, which have no fixed length in seconds."""
    t = text.strip().upper() if isinstance(text, str) else None
    m = _ISO_DURATION.fullmatch(t) if t and len(t) <= 80 else None
    if m is None or t in ("P", "PT") or t.endswith("T"):
        why = ("calendar months and years have no fixed length; give days (P30D) or "
               "weeks" if t and _CALENDAR.match(t) else "e.g. 'PT5M', 'PT1H30M', 'P1D'")
        raise ParseError(f"duration {str(text)[:40]!r} is not an ISO 8601 duration of "
                         f"fixed length ({why})", **where)
    secs = sum(float(v.replace(",", ".")) * _SECONDS[k]
               for k, v in m.groupdict().items() if v)
    if not 0 < secs <= MAX_DURATION_S:
        raise ParseError(f"duration {text!r} must be positive and at most ten years",
                         **where)
    return pd.Timedelta(seconds=secs)


def parse_openadr_event(doc, *, tz: str | None = None, path=None) -> pd.DataFrame:
    """Targets from OpenADR 3 event JSON (text, bytes or the parsed object).

    The steps: the JSON document's events (:func:`_events`), each checked against
    :data:`EVENT_SCHEMA` (``jsonschema``, the ``openadr`` extra), then its intervals with
    an ``IMPORT_CAPACITY_LIMIT`` payload as targets (:func:`_event_rows`).

    Returns
    -------
    pandas.DataFrame
        ``start_utc, end_utc, cap_w, notice_utc, source``, one row per interval with an
        ``IMPORT_CAPACITY_LIMIT`` payload.

    Raises
    ------
    powerlab.exceptions.ParseError
        A document that is not JSON or not OpenADR 3 event JSON, or a value at fault.
    powerlab.exceptions.PowerlabError
        ``jsonschema`` is not installed (``pip install 'powerlab[openadr]'``).
    """
    validate = _event_validator(path)
    rows, locs = [], {}
    for e, ev in enumerate(_events(doc, path)):
        validate(ev, e)
        _event_rows(ev, e, tz, path, rows, locs)
    return _located(pd.DataFrame(rows), locs)


def _event_validator(path):
    """``validate(event, e)``: a :class:`ParseError` naming the JSON path of the first
    value :data:`EVENT_SCHEMA` refuses."""
    try:
        import jsonschema
    except ImportError as exc:
        raise PowerlabError("reading OpenADR 3 event JSON needs jsonschema "
                            "(pip install 'powerlab[openadr]')") from exc

    checker = jsonschema.Draft202012Validator(EVENT_SCHEMA)   # the schema checked once

    def validate(ev, e: int) -> None:
        try:
            err = jsonschema.exceptions.best_match(checker.iter_errors(ev))
        except RecursionError:
            raise ParseError("JSON nested too deeply", path=path,
                             column=f"events[{e}]") from None
        try:
            if err is not None:
                raise err
        except jsonschema.ValidationError as exc:
            loc = "/".join(str(p) for p in exc.absolute_path)
            raise ParseError(f"not an OpenADR 3 event: {exc.message}",
                             path=path, column=f"events[{e}]/{loc}".rstrip("/")) from None
    return validate


def _events(doc, path) -> list:
    """The events of a document: an event object, a list of them or ``{"events":
    [...]}`` (text and bytes parsed as JSON first)."""
    if isinstance(doc, (str, bytes)):
        try:
            doc = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise ParseError(f"not JSON: {exc.msg} (character {exc.colno} of the line)",
                             path=path, line=exc.lineno) from None
        except RecursionError:
            raise ParseError("JSON nested too deeply (an OpenADR event is a few levels "
                             "deep)", path=path) from None
        except ValueError as exc:                   # bytes that are not UTF-8
            raise ParseError(f"not JSON: {exc}", path=path) from None
    events = doc
    if isinstance(doc, dict) and "events" in doc:
        events = doc["events"]
    if isinstance(events, dict):
        events = [events]
    if not isinstance(events, list) or not events:
        raise ParseError("expected an OpenADR 3 event object, a list of events or "
                         "{'events': [...]}", path=path)
    return events


def _units(ev: dict, e: int, path) -> float:
    """Watts per unit of the event's ``IMPORT_CAPACITY_LIMIT`` (kW unless it says)."""
    units = 1e3  # OpenADR capacity limits are usually in KW
    for pd_ in ev.get("payloadDescriptors") or []:
        if pd_.get("payloadType") == "IMPORT_CAPACITY_LIMIT" and pd_.get("units"):
            u = str(pd_["units"]).upper()
            if u not in _UNITS:
                raise ParseError(f"unit {pd_['units']!r} of IMPORT_CAPACITY_LIMIT not "
                                 f"one of {sorted(_UNITS)}", path=path,
                                 column=f"events[{e}]/payloadDescriptors")
            units = _UNITS[u]
    return units


def _event_rows(ev: dict, e: int, tz, path, rows: list, locs: dict) -> None:
    """Append the event's targets to ``rows`` (and their JSON paths to ``locs``); warn
    about intervals that set no cap, refuse an event with none."""
    name = ev.get("eventName") or ev.get("id") or f"event {e}"
    units = _units(ev, e, path)
    notice = (_time(ev["createdDateTime"], tz,
                    {"path": path, "column": f"events[{e}]/createdDateTime"})
              if ev.get("createdDateTime") else pd.NaT)
    nxt = None
    found = 0
    skipped: list[int] = []
    for k, iv in enumerate(ev["intervals"]):
        at = f"events[{e}]/intervals[{k}]"
        t0, dur, start, span = _interval_period(ev, e, k, iv, nxt, tz, path)
        nxt = t0 + dur
        caps = [p for p in iv["payloads"] if p["type"] == "IMPORT_CAPACITY_LIMIT"]
        if not caps:
            skipped.append(k)
            continue
        at_cap = f"{at}/payloads[{iv['payloads'].index(caps[0])}]/values"
        locs[len(rows)] = {"start": (None, start), "end": (None, span),
                           "cap": (None, at_cap)}
        rows.append({"start_utc": t0, "end_utc": t0 + dur,
                     "cap_w": _payload_cap_w(caps[0]["values"], units, path, at_cap),
                     "notice_utc": notice, "source": f"{name}/intervals[{k}]"})
        found += 1
    if not found:
        raise ParseError("event has no IMPORT_CAPACITY_LIMIT payload (the only "
                         "payload type a curtailment target is read from)", path=path,
                         column=f"events[{e}]")
    if skipped:
        warnings.warn(f"{path or 'event'}: events[{e}] intervals {skipped} carry no "
                      "IMPORT_CAPACITY_LIMIT payload and set no cap", DataQualityWarning,
                      stacklevel=3)


def _interval_period(ev: dict, e: int, k: int, iv: dict, nxt, tz, path) -> tuple:
    """``(start, duration, JSON path of the start, JSON path of the duration)`` of
    interval ``k``: its own period, or the event's (an interval without a period follows
    the previous one)."""
    at = f"events[{e}]/intervals[{k}]"
    where = {"path": path, "column": at}
    dflt = ev.get("intervalPeriod")
    per = iv.get("intervalPeriod")
    # the period that sets the start and the one that sets the duration
    own = f"{at}/intervalPeriod"
    span = own if per is not None and per.get("duration") else \
        f"events[{e}]/intervalPeriod"
    if per is not None:
        t0 = _time(per["start"], tz, {**where, "column": f"{own}/start"})
        dur = _duration(per.get("duration") or (dflt or {}).get("duration"),
                        {**where, "column": f"{span}/duration"})
        return t0, dur, own, span
    if dflt is None:
        raise ParseError("interval has no intervalPeriod and the event none", **where)
    start = f"events[{e}]/intervalPeriod" if nxt is None else \
        f"events[{e}]/intervals[{k - 1}]"      # follows the previous interval
    t0 = nxt if nxt is not None else _time(
        dflt["start"], tz, {**where, "column": f"{start}/start"})
    dur = _duration(dflt.get("duration"), {**where, "column": f"{span}/duration"})
    return t0, dur, start, span


def _payload_cap_w(vals: list, units: float, path, at_cap: str) -> float:
    """The cap of an ``IMPORT_CAPACITY_LIMIT`` payload's one value [W]."""
    where = {"path": path, "column": at_cap}
    if len(vals) != 1:
        raise ParseError(f"IMPORT_CAPACITY_LIMIT has {len(vals)} values; one "
                         "expected", **where)
    v = vals[0]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        # JSON true is not a cap of 1, nor "5" a number (the schema says number)
        raise ParseError(f"capacity limit {str(v)[:40]!r} is not a number", **where)
    try:
        cap = float(v) * units
    except OverflowError:                       # an integer of hundreds of digits
        cap = float("inf")
    if not np.isfinite(cap):
        raise ParseError(f"capacity limit {str(v)[:40]} is not a finite number "
                         "(NaN or infinite)", **where)
    return cap


def check_targets(frame: pd.DataFrame, *, floor_w: float, max_w: float,
                  now: pd.Timestamp, horizon_end: pd.Timestamp | None = None,
                  path=None) -> pd.DataFrame:
    """Refuse (one-line :class:`ParseError`) targets that cannot be planned; returns the
    frame sorted by start.

    The error names the file (``path``) and, for a frame from :func:`read_targets` or
    :func:`parse_openadr_event`, the line and CSV column (or JSON path) of the value at
    fault; otherwise the target's ``source``."""
    locs = frame.attrs.get("locations") or {}
    frame = frame.copy(deep=False)
    frame.attrs = {k: v for k, v in frame.attrs.items() if k != "locations"}
    # one pass over columns, not rows: a row of a frame copies its attrs (the locations
    # of every target), which made reading n targets take n^2 time (issue 38)
    f = frame.sort_values("start_utc", kind="stable")
    start, end = f["start_utc"], f["end_utc"]
    cap = f["cap_w"].to_numpy(float)
    checks = [(~(end > start).to_numpy(), "end", lambda r: "target ends before it starts"),
              (cap < floor_w, "cap", lambda r: f"cap {r['cap_w'] / 1e6:.3f} MW is below "
               f"the site's floor {floor_w / 1e6:.3f} MW (every job paused)"),
              ((end <= now).to_numpy(), "end", lambda r: f"target ends at {r['end_utc']}, "
               f"before the plan starts ({now}): an event in the past"),
              ((start >= horizon_end).to_numpy() if horizon_end is not None
               else np.zeros(len(f), bool), "start",
               lambda r: f"target starts at {r['start_utc']}, after the horizon ends "
               f"({horizon_end})")]
    bad = np.zeros(len(f), bool)
    for mask, _, _ in checks:
        bad |= mask
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        i, r = f.index[k], f.iloc[k]
        mask, what, msg = next(c for c in checks if c[0][k])
        loc = locs.get(i)
        if loc is None:
            raise ParseError(f"target {r['source']}: {msg(r)}", path=path)
        raise ParseError(msg(r), path=path, line=loc[what][0], column=loc[what][1])
    above = int((cap > max_w).sum())
    if above:
        # issue 33: a cap the site cannot reach binds nothing; it is planned (nothing to
        # shed), not refused
        warnings.warn(DataQualityWarning(
            f"{above} target(s) cap the site above its maximum power {max_w / 1e6:.3f} MW "
            "(every GPU at the higher of its TDP and its job's highest level): "
            "non-binding, nothing to shed"), stacklevel=2)
    if len(f) > 1:
        over = np.flatnonzero(f["start_utc"].to_numpy()[1:] < f["end_utc"].to_numpy()[:-1])
        if len(over):
            a, b = f.iloc[over[0]], f.iloc[over[0] + 1]
            loc = locs.get(f.index[over[0] + 1])
            raise ParseError(f"targets overlap: {a['source']} ({a['start_utc']} - "
                             f"{a['end_utc']}) and {b['source']} (from {b['start_utc']})",
                             path=path, **({} if loc is None else
                                           {"line": loc["start"][0],
                                            "column": loc["start"][1]}))
    return f.reset_index(drop=True)


@renamed_keywords(scope="boundary")
def read_targets(path, *, floor_w: float, max_w: float, now=None, horizon_end=None,
                 tz: str | None = None, boundary: str = "it") -> Targets:
    """Read and check a target file (``.csv`` or OpenADR 3 ``.json``).

    Parameters
    ----------
    path : str or Path
    floor_w, max_w : float
        The site's floor and maximum power at the targets' boundary [W].
    now : pandas.Timestamp, optional
        When the plan starts; a target ending before it is in the past (default: the
        wall clock).
    horizon_end : pandas.Timestamp, optional
        A target starting after it is refused.
    tz : str, optional
        IANA zone for times written without one.
    boundary : {'it', 'facility'}
        Which power the caps apply to (``scope`` is its deprecated name).
    """
    path = Path(path)
    choice(boundary, "boundary", ("it", "facility"))
    tz = _zone(tz, {"path": path})
    if path.suffix.lower() == ".json":
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ParseError("no such file", path=path) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ParseError(f"cannot read: {exc}", path=path) from None
        frame = parse_openadr_event(text, tz=tz, path=path)
    elif path.suffix.lower() == ".csv":
        frame = _read_csv(path, tz)
    else:
        raise ParseError("expected a .csv target trajectory or an OpenADR 3 .json event",
                         path=path)
    now = pd.Timestamp.now(tz="UTC") if now is None else pd.Timestamp(now)
    return Targets(check_targets(frame, floor_w=floor_w, max_w=max_w, now=now,
                                 horizon_end=horizon_end, path=path), boundary)


def random_targets(start, end, reference_w: float, *, n: int = 200,
                   duration_s: float = 300.0, low_fraction: float = 0.6,
                   high_fraction: float = 1.0, seed: int = 0) -> Targets:
    """``n`` non-overlapping targets of ``duration_s`` on a grid of whole durations
    between ``start`` and ``end``, caps uniform in [low, high] x ``reference_w``."""
    t0, t1 = pd.Timestamp(start), pd.Timestamp(end)
    slots = int((t1 - t0).total_seconds() // duration_s)
    if slots < n:
        raise PowerlabError(f"{n} targets of {duration_s:g} s do not fit in {t0} - {t1}")
    rng = np.random.default_rng(seed)
    k = np.sort(rng.choice(slots, size=n, replace=False))
    s = t0 + pd.to_timedelta(k * duration_s, unit="s")
    caps = reference_w * rng.uniform(low_fraction, high_fraction, n)
    return Targets(pd.DataFrame({"start_utc": s, "end_utc": s + pd.Timedelta(seconds=duration_s),
                                 "cap_w": caps, "notice_utc": pd.NaT,
                                 "source": [f"random[{i}]" for i in range(n)]}), "it")
