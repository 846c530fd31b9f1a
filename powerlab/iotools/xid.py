"""Readers of GPU error events: kernel-log ``NVRM: Xid`` lines, DCGM XID and health output,
and the collector's own status events, into powerlab's events table.

Every reader returns a frame with :data:`powerlab.telemetry.events.EVENT_COLUMNS` (one row
per event): ``timestamp`` (UTC), ``host``, ``gpu_index``, ``gpu_uuid``, ``pci_bus_id`` (in
nvidia-smi's form ``00000000:3B:00.0``), ``xid``, ``kind`` and ``root_cause`` (from
:func:`powerlab.telemetry.events.classify_xid`), ``message`` and ``source``.

Kernel-log forms understood (one event per line that holds ``NVRM: Xid``)::

    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
    [ 8273.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=...            (dmesg, seconds since boot)
    [Fri May 17 10:11:12 2024] NVRM: Xid (PCI:0000:3b:00): 79, ...    (dmesg -T, local time)
    2024-05-17T10:11:12+0000 node-01 kernel: NVRM: Xid (PCI:...): 79, ... (journalctl -o short-iso)
    2024-05-17T10:11:12.123456+02:00 node-01 kernel: [ 8273.1] NVRM: Xid ... (rsyslog RFC 3339)
    May 17 10:11:12 node-01 kernel: NVRM: Xid (PCI:...): 79, ...   (journalctl default, syslog)

Seconds since boot become UTC with ``boot_time``; lines without a time (plain ``dmesg``
without timestamps) keep ``NaT`` and a :class:`~powerlab.exceptions.DataQualityWarning` says
how many.  Times without a zone (``dmesg -T``, journalctl's default, ISO without an offset)
are refused without ``tz``; journalctl's default format has no year: ``year=``, or the
latest year that puts the line before today (a warning states it).  ``dmesg -T`` lines
whose weekday is not their date's are refused.  Lines that name no host (dmesg) need
``host=``; they are refused without it, never filed without a host.  A line that holds ``NVRM: Xid`` but not in the form above raises
:class:`~powerlab.exceptions.ParseError` naming the line (``errors="warn"`` skips it with a
warning instead).  Lines without ``NVRM: Xid`` (other kernel messages, NVSwitch ``SXid``) are
not events and are passed over.

References
----------
.. [1] NVIDIA, "XID Errors", https://docs.nvidia.com/deploy/xid-errors/
.. [2] NVIDIA, DCGM user guide, "Health and diagnostics" and the dcgm-exporter field
   ``DCGM_FI_DEV_XID_ERRORS`` (value: the last XID seen).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .._options import choice
from ..exceptions import DataQualityWarning, ParseError
from ..telemetry.events import EVENT_COLUMNS, EVENT_DTYPES, classify_xid, empty_events
from ..telemetry.timeutil import to_utc
from ._common import read_text
from .registry import ReaderEntrypoint, head_lines, head_text, register_reader

__all__ = [
    "DCGM_HEALTH_SYSTEMS",
    "events_from_collector",
    "normalize_pci_bus_id",
    "parse_dcgm_health",
    "parse_dcgm_xid",
    "parse_kernel_xid",
    "read_dcgm_health",
    "read_dcgm_xid",
    "read_kernel_xid",
]

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)\):"
    r"\s*(?P<code>\d+)\s*(?:,\s*(?P<rest>.*?))?\s*$")
_DMESG_REL = re.compile(r"^\[\s*(?P<s>\d+\.\d+)\]\s*")
_DMESG_T = re.compile(r"^\[(?P<t>[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d \d{4})\]\s*")
_ISO = re.compile(r"^(?P<t>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
                  r"\s+(?P<host>\S+)\s+kernel:\s*")
_SYSLOG = re.compile(r"^(?P<t>[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?)\s+(?P<host>\S+)"
                     r"\s+kernel:\s*")
_PID = re.compile(r"^pid=(?P<pid>'?<?[\w-]+>?'?)\s*,\s*(?:name=(?P<name>[^,]*),\s*)?")


#: Largest XID code read (NVIDIA's documented codes are below 200; the events table holds
#: Int32) and largest GPU index (the table holds Int16).
MAX_XID = 65_535
MAX_GPU_INDEX = 1023


def _xid_code(text: str) -> int:
    if len(text) > 6 or int(text) > MAX_XID:
        raise ValueError(f"XID {text[:20]!r} is above {MAX_XID} (not an NVIDIA XID code)")
    return int(text)


def _gpu(text):
    if text is None or not text.isdigit():
        return None
    if len(text) > 5 or int(text) > MAX_GPU_INDEX:
        raise ValueError(f"GPU index {text[:20]!r} is above {MAX_GPU_INDEX}")
    return int(text)


def normalize_pci_bus_id(pci: str) -> str:
    """A PCI bus id in nvidia-smi's form: ``0000:3b:00`` -> ``00000000:3B:00.0``.

    Raises
    ------
    ValueError
        When ``pci`` is not ``[domain:]bus:device[.function]`` in hex.
    """
    m = re.fullmatch(r"(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})"
                     r"(?:\.([0-7]))?", pci.strip())
    if m is None:
        raise ValueError(f"not a PCI bus id: {pci!r} (expected domain:bus:device[.fn])")
    dom, bus, dev, fn = m.groups()
    return f"{int(dom or '0', 16):08X}:{int(bus, 16):02X}:{int(dev, 16):02X}.{fn or '0'}"


def _frame(rows: list[dict], devices: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows (dicts with some of EVENT_COLUMNS) -> the canonical events table."""
    if not rows:
        return empty_events()
    df = pd.DataFrame(rows)
    for c in EVENT_COLUMNS:
        if c not in df.columns:
            df[c] = None
    if "xid" in df:
        infos = [classify_xid(x) if x is not None and not pd.isna(x) else None
                 for x in df["xid"]]
        df["kind"] = [i.kind if i is not None else k for i, k in zip(infos, df["kind"])]
        df["root_cause"] = [i.root_cause if i is not None else r
                            for i, r in zip(infos, df["root_cause"])]
    ts = pd.to_datetime(df["timestamp"], utc=True).astype("datetime64[ns, UTC]")
    out = pd.DataFrame({"timestamp": ts})
    for c in EVENT_COLUMNS[1:]:
        out[c] = pd.array(df[c].where(df[c].notna(), None), dtype=EVENT_DTYPES[c])
    if devices is not None:
        out = _fill_devices(out, devices)
    return out.sort_values("timestamp", kind="stable").reset_index(drop=True)


def _fill_devices(events: pd.DataFrame, devices: pd.DataFrame) -> pd.DataFrame:
    """Fill ``gpu_index`` / ``gpu_uuid`` from a devices table keyed by (host, pci_bus_id);
    rows of the table without a host (one server type's map) match any host by PCI id."""
    need = {"pci_bus_id", "gpu_index"}
    if not need <= set(devices.columns):
        raise ValueError(f"devices table needs columns {sorted(need)} (and host, gpu_uuid)")
    d = devices.copy()
    d["pci_bus_id"] = [normalize_pci_bus_id(p) for p in d["pci_bus_id"].astype(str)]
    if "host" not in d.columns:
        d["host"] = None
    hosted = d["host"].notna()
    for keys, part in ((["host", "pci_bus_id"], d[hosted]), (["pci_bus_id"], d[~hosted])):
        if part.empty:
            continue
        part = part.drop_duplicates(keys).set_index(keys)
        idx = pd.MultiIndex.from_frame(events[keys].astype(object)) if len(keys) > 1 \
            else pd.Index(events["pci_bus_id"].astype(object))
        look = part.reindex(idx)
        for c in ("gpu_index", "gpu_uuid"):
            if c in look.columns:
                fill = pd.array(look[c].to_numpy(), dtype=EVENT_DTYPES[c])
                events[c] = events[c].where(events[c].notna(), fill)
    return events


def _weekday_checked(text: str) -> pd.Timestamp:
    """A ``dmesg -T`` time (``Fri May 17 10:11:12 2024``), refused when its weekday is
    not its date's (``strptime`` ignores the weekday)."""
    t = pd.to_datetime(text, format="%a %b %d %H:%M:%S %Y")
    given = text.split()[0]
    if t.strftime("%a") != given:
        raise ValueError(f"dmesg -T time {text!r}: {given} does not match the date (a "
                         f"{t.strftime('%A')}); the line is damaged or not dmesg -T")
    return t


class _Years:
    """Years of journalctl/syslog times (``Jul 04 03:22:10``), which carry none: the
    year given, or the latest year that puts the time no later than one day after
    ``reference`` (the way syslog readers place such lines)."""

    def __init__(self, year, reference, tz):
        self.year, self.tz, self.used = year, tz, set()
        self.ref = to_utc(reference if reference is not None else pd.Timestamp.now("UTC"),
                          tz="UTC", what="reference")

    def stamp(self, text: str) -> pd.Timestamp:
        if self.tz is None:
            raise ValueError("journalctl/syslog times carry no zone; pass tz (powerlab "
                             "import --tz)")
        year = self.year if self.year is not None else self.ref.year
        ts = self._at(year, text)
        if self.year is None and ts > self.ref + pd.Timedelta(days=1):
            year -= 1
            ts = self._at(year, text)
        self.used.add(year)
        return ts

    def _at(self, year: int, text: str) -> pd.Timestamp:
        fmt = "%Y %b %d %H:%M:%S.%f" if "." in text else "%Y %b %d %H:%M:%S"
        local = pd.to_datetime(f"{year} {' '.join(text.split())}", format=fmt)
        return to_utc(local, tz=self.tz, what="journal time", error=ValueError)


def _line_time(rest: str, tz, boot, years: _Years):
    """(time, host or None, text after the prefixes) of one kernel-log line."""
    ts, host = pd.NaT, None
    if (m := _ISO.match(rest)) is not None:
        t = m["t"]
        if tz is None and not re.search(r"(?:Z|[+-]\d\d:?\d\d)$", t):
            raise ValueError(f"time {t!r} has no zone; pass tz (powerlab import --tz)")
        ts = to_utc(t, tz=tz or "UTC", what="journal time", error=ValueError)
        host, rest = m["host"], rest[m.end():]
    elif (m := _SYSLOG.match(rest)) is not None:
        ts, host, rest = years.stamp(m["t"]), m["host"], rest[m.end():]
    elif (m := _DMESG_T.match(rest)) is not None:
        if tz is None:
            raise ValueError("dmesg -T times are local and carry no zone; pass tz "
                             "(powerlab import --tz)")
        ts = to_utc(_weekday_checked(" ".join(m["t"].split())), tz=tz,
                    what="dmesg -T time", error=ValueError)
        rest = rest[m.end():]
    if (m := _DMESG_REL.match(rest)) is not None:   # raw dmesg, or kernel time in syslog
        if pd.isna(ts) and boot is not None:
            ts = boot + pd.to_timedelta(float(m["s"]), unit="s")
        rest = rest[m.end():]
    return ts, host, rest


def parse_kernel_xid(src, *, host: str | None = None, boot_time=None,
                     tz: str | None = None, devices: pd.DataFrame | None = None,
                     errors: str = "raise", year: int | None = None,
                     reference=None) -> pd.DataFrame:
    """Parse ``NVRM: Xid`` lines of a kernel log.

    Forms: journalctl ``-o short-iso`` / ``short-iso-precise`` and rsyslog RFC 3339
    (``2024-07-04T03:22:10.123456+02:00 host kernel: ...``), journalctl's default and
    classic syslog (``Jul 04 03:22:10 host kernel: ...``: no year, no zone), ``dmesg -T``
    (``[Fri May 17 10:11:12 2024]``: local time, the weekday checked), raw ``dmesg``
    (``[ 8273.123456]`` seconds since boot) and lines without a time.

    Parameters
    ----------
    src : str, bytes or buffer
        Log content (``read_kernel_xid`` takes a path).
    host : str, optional
        Host of lines that do not name one (dmesg).  Without it such lines are refused
        (:class:`~powerlab.exceptions.ParseError`), never filed without a host.
    boot_time : str or pandas.Timestamp, optional
        Boot time of the host, to turn dmesg's seconds since boot into UTC (a zone-less
        boot time is read in ``tz``, else as UTC: it is the caller's statement, not the
        log's).  Without it such lines keep ``NaT`` (with a warning).
    tz : str, optional
        IANA zone of times that carry none (``dmesg -T``, journalctl default, ISO times
        without an offset).  Without it such times are refused.
    devices : pandas.DataFrame, optional
        ``host``, ``pci_bus_id``, ``gpu_index``, ``gpu_uuid`` (the store's device table,
        :func:`powerlab.iotools.gpumap.read_gpu_map`) to name each GPU.
    errors : {"raise", "warn"}
        What to do with a line that holds ``NVRM: Xid`` in an unknown form or with a bad
        time.
    year : int, optional
        Year of journalctl-default/syslog times; default: inferred as the latest year
        that puts each line no later than a day after ``reference`` (a warning names it).
    reference : str or pandas.Timestamp, optional
        "Now" for that inference [UTC]; default the current time.

    Returns
    -------
    pandas.DataFrame
        The events table, ``source="kernel_log"``, sorted by time.
    """
    choice(errors, "errors", ("raise", "warn"))
    text, name = read_text(src, what="kernel log")
    boot = to_utc(boot_time, tz=tz or "UTC", what="boot_time", optional=True)
    years = _Years(year, reference, tz)
    rows, bad, no_time = [], [], 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if "NVRM: Xid" not in line:
            continue
        try:
            ts, line_host, rest = _line_time(line.strip(), tz, boot, years)
            mx = _XID.search(rest)
            if mx is None or not rest.startswith("NVRM: Xid"):
                raise ValueError("a line holding 'NVRM: Xid' is not 'NVRM: Xid "
                                 f"(PCI:dddd:bb:dd): CODE, ...' (got {line.strip()[:120]!r})")
            pci = normalize_pci_bus_id(mx["pci"])
            code = _xid_code(mx["code"])
        except (ValueError, OverflowError) as exc:  # impossible or nonexistent times too
            bad.append((lineno, str(exc)[:300]))
            continue
        if line_host is None and host is None:
            raise ParseError("this line names no host (dmesg); pass host= (powerlab "
                             "import --host) so the event is not filed without one",
                             path=name, line=lineno)
        no_time += pd.isna(ts)
        msg = _PID.sub("", mx["rest"] or "", count=1)
        rows.append({"timestamp": ts, "host": line_host or host, "pci_bus_id": pci,
                     "xid": code, "message": msg, "source": "kernel_log"})
    _report(name, bad, errors, no_time, years if year is None else None)
    return _frame(rows, devices)


def _report(name, bad, errors, no_time, years) -> None:
    if bad:
        lineno, what = bad[0]
        if errors == "raise":
            raise ParseError(what, path=name, line=lineno)
        warnings.warn(f"{name or '<text>'}: skipped {len(bad)} malformed Xid line(s); first "
                      f"at line {lineno}: {what}", DataQualityWarning, stacklevel=3)
    if no_time:
        warnings.warn(f"{name or '<text>'}: {no_time} Xid line(s) have no absolute time "
                      "(dmesg without timestamps, or seconds since boot without boot_time); "
                      "their timestamp is NaT", DataQualityWarning, stacklevel=3)
    if years is not None and years.used:
        warnings.warn(f"{name or '<text>'}: journalctl/syslog times carry no year: read as "
                      f"{', '.join(map(str, sorted(years.used)))} (the latest year putting "
                      f"each line before {years.ref:%Y-%m-%d}); pass year= (--year) to "
                      "state it", DataQualityWarning, stacklevel=3)


def read_kernel_xid(path, **kw) -> pd.DataFrame:
    """Read a kernel log file (``.gz`` too); see :func:`parse_kernel_xid`."""
    return parse_kernel_xid(Path(path), **kw)


# --------------------------------------------------------------------------- DCGM
_PROM = re.compile(r"^(?P<metric>DCGM_FI_DEV_XID_ERRORS)\{(?P<labels>[^}]*)\}\s+"
                   r"(?P<value>\S+)(?:\s+(?P<ts>\d+))?\s*$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_dcgm_xid(src, *, timestamp=None, devices: pd.DataFrame | None = None,
                   errors: str = "raise") -> pd.DataFrame:
    """Parse dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS`` samples (Prometheus text).

    The field holds the *last* XID seen by a GPU (0: none), so each scrape with a non-zero
    value gives one event; a scrape series repeating the same code is read as one event
    per change of value (per GPU).

    Parameters
    ----------
    src : str, bytes or buffer
        Exposition text; one or several scrapes (lines may carry a timestamp in ms).
    timestamp : str or pandas.Timestamp, optional
        Time of the scrape for lines without their own timestamp [UTC].
    devices, errors
        As in :func:`parse_kernel_xid`.
    """
    text, name = read_text(src, what="dcgm-exporter text")
    default_ts = pd.NaT if timestamp is None else to_utc(timestamp, tz="UTC", what="timestamp")
    rows, last = [], {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("DCGM_FI_DEV_XID_ERRORS"):
            continue
        m = _PROM.match(line.strip())
        try:
            if m is None:
                raise ValueError("not 'DCGM_FI_DEV_XID_ERRORS{labels} value [timestamp_ms]'")
            value = float(m["value"])
            if not np.isfinite(value) or value < 0 or value != int(value):
                raise ValueError(f"XID value {m['value']!r} is not a non-negative integer")
            if value > MAX_XID:
                raise ValueError(f"XID {m['value'][:20]!r} is above {MAX_XID} (not an "
                                 "NVIDIA XID code)")
            labels = dict(_LABEL.findall(m["labels"]))
            ts = (pd.Timestamp(int(m["ts"]), unit="ms", tz="UTC") if m["ts"] else default_ts)
            gpu = labels.get("gpu")
            gpu_index = _gpu(gpu)
            pci = labels.get("pci_bus_id")
            pci = normalize_pci_bus_id(pci) if pci else None
        except (ValueError, OverflowError) as exc:
            if errors == "raise":
                raise ParseError(str(exc), path=name, line=lineno) from None
            warnings.warn(f"{name or '<text>'} line {lineno}: skipped ({exc})",
                          DataQualityWarning, stacklevel=2)
            continue
        key = (labels.get("Hostname"), gpu, labels.get("UUID"))
        code = int(value)
        if code == 0 or last.get(key) == code:
            last[key] = code
            continue
        last[key] = code
        rows.append({"timestamp": ts, "host": labels.get("Hostname"),
                     "gpu_index": gpu_index, "gpu_uuid": labels.get("UUID"), "pci_bus_id": pci,
                     "xid": code, "message": labels.get("err_msg", ""),
                     "source": "dcgm_xid"})
    return _frame(rows, devices)


def read_dcgm_xid(path, **kw) -> pd.DataFrame:
    """Read dcgm-exporter text from a file; see :func:`parse_dcgm_xid`."""
    return parse_dcgm_xid(Path(path), **kw)


#: ``dcgmi health`` subsystems and the root cause a failure there is counted under.
DCGM_HEALTH_SYSTEMS = {
    "memory": "gpu_hbm3_memory",
    "sram": "gpu_sram_memory",
    "pcie": "faulty_gpu",
    "nvlink": "faulty_gpu",
    "thermal": "gpu_thermal_interface_sensor",
    "power": "faulty_gpu",
    "inforom": "gpu_system_processor",
    "driver": "software_bug",
    "nvswitch": "network_switch_cable",
    "cpu": "cpu",
}
_H_GPU = re.compile(r"->\s*GPU(?: ID)?\s*:?\s*(?P<gpu>\d+)\s*\|\s*(?P<status>\w+)")
_H_SYS = re.compile(r"->\s*(?P<sys>[A-Za-z][A-Za-z ]*?)(?: system)?\s*\|\s*(?P<status>\w+)")
_H_MSG = re.compile(r"->\s*(?P<sev>Error|Warning)\s*\|\s*(?P<msg>.*?)\s*\|?\s*$")
_H_CONT = re.compile(r"^\|\s*\|\s*(?P<msg>.*?)\s*\|?\s*$")
_XID_IN_TEXT = re.compile(r"\bXID\s*(?:error\s*)?(?P<code>\d+)", re.IGNORECASE)


def parse_dcgm_health(src, *, timestamp, host: str | None = None,
                      include_warnings: bool = False) -> pd.DataFrame:
    """Parse ``dcgmi health -c`` output: one event per failing GPU subsystem.

    Parameters
    ----------
    src : str, bytes or buffer
        The table ``dcgmi health -g G -c`` prints.
    timestamp : str or pandas.Timestamp
        When the check ran [UTC unless an offset is given].
    host : str, optional
        Host the check ran on.
    include_warnings : bool, default False
        Count ``Warning`` results as events too (``Error`` results always are).

    Returns
    -------
    pandas.DataFrame
        Events with ``kind="health"`` and the subsystem's root cause
        (:data:`DCGM_HEALTH_SYSTEMS`), or the XID's when the message names one.
    """
    text, name = read_text(src, what="dcgmi health output")
    ts = to_utc(timestamp, tz="UTC", what="timestamp")
    if "Health Monitor Report" not in text:
        raise ParseError("not dcgmi health output (no 'Health Monitor Report' header)",
                         path=name, line=1)
    rows, gpu, system, cur = [], None, None, None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if (m := _H_GPU.search(line)) is not None:
            try:
                gpu, system, cur = _gpu(m["gpu"]), None, None
            except ValueError as exc:
                raise ParseError(str(exc), path=name, line=lineno) from None
            continue
        if (m := _H_MSG.search(line)) is not None:
            if gpu is None or system is None:
                raise ParseError("a health message before its GPU and subsystem",
                                 path=name, line=lineno)
            cur = None
            if m["sev"] == "Error" or include_warnings:
                cur = {"timestamp": ts, "host": host, "gpu_index": gpu, "kind": "health",
                       "root_cause": DCGM_HEALTH_SYSTEMS.get(system.lower().replace(" ", "")),
                       "message": f"{system} {m['sev'].lower()}: {m['msg']}",
                       "source": "dcgm_health"}
                rows.append(cur)
            continue
        if (m := _H_SYS.search(line)) is not None and "Overall Health" not in line \
                and "Group" not in line:
            system, cur = m["sys"].strip(), None
            continue
        if cur is not None and (m := _H_CONT.match(line.strip())) is not None and m["msg"]:
            cur["message"] = f"{cur['message']} {m['msg']}"
    for r in rows:
        if (mx := _XID_IN_TEXT.search(r["message"])) is not None:
            try:
                r["xid"] = _xid_code(mx["code"])
            except ValueError as exc:
                raise ParseError(str(exc), path=name) from None
            info = classify_xid(r["xid"])
            r["root_cause"] = info.root_cause or r["root_cause"]
    out = _frame(rows)
    if len(out):
        out["kind"] = pd.array(["health"] * len(out), dtype="string")
    return out


def read_dcgm_health(path, **kw) -> pd.DataFrame:
    """Read ``dcgmi health -c`` output from a file; see :func:`parse_dcgm_health`."""
    return parse_dcgm_health(Path(path), **kw)


# --------------------------------------------------------------------------- collector
_XID_MSG = re.compile(r"\bXid\b\D{0,20}(?P<code>\d+)", re.IGNORECASE)


def events_from_collector(frame: pd.DataFrame) -> pd.DataFrame:
    """The collector's status events (:func:`powerlab.collect.sidetables.read_events`) as
    an events table.

    Rows of kind ``xid`` (the code in an ``xid`` column or in the message, ``Xid 79``) become
    XID events; ``lost`` rows (the GPU fell off the bus, NVML's ``GPU_IS_LOST``) count as
    XID 79.  Other kinds (start, stop, timeout, retries) are not failures and are dropped.
    """
    rows = []
    for r in frame.itertuples(index=False):
        kind = str(getattr(r, "kind", "") or "")
        msg = getattr(r, "message", None)
        msg = "" if msg is None or pd.isna(msg) else str(msg)
        code = getattr(r, "xid", None)
        if code is not None and not pd.isna(code):
            code = int(code)
        elif kind == "xid" and (m := _XID_MSG.search(msg)) is not None:
            code = int(m["code"])
        elif kind == "lost":
            code = 79
        else:
            continue
        gi = getattr(r, "gpu_index", None)
        rows.append({"timestamp": r.timestamp, "host": getattr(r, "host", None),
                     "gpu_index": None if gi is None or pd.isna(gi) else int(gi),
                     "gpu_uuid": getattr(r, "gpu_uuid", None),
                     "pci_bus_id": getattr(r, "pci_bus_id", None), "xid": code,
                     "message": msg, "source": "collector"})
    return _frame(rows)


@register_reader
class KernelXidReader(ReaderEntrypoint):
    """Kernel logs (``dmesg``, ``journalctl -k``, ``kern.log``) with ``NVRM: Xid`` lines."""

    name = "kernel-xid"
    kind = "events"
    description = "kernel 'NVRM: Xid' log"
    priority = 30
    open = staticmethod(read_kernel_xid)

    def guess_can_open(self, path, head_bytes) -> bool:
        return "NVRM: Xid" in head_text(head_bytes)


@register_reader
class DcgmXidReader(ReaderEntrypoint):
    """dcgm-exporter text whose ``DCGM_FI_*`` samples are all ``DCGM_FI_DEV_XID_ERRORS``
    (asked before the telemetry reader of dcgm-exporter text)."""

    name = "dcgm-xid"
    kind = "events"
    description = "dcgm-exporter XID text"
    priority = 50
    open = staticmethod(read_dcgm_xid)

    def guess_can_open(self, path, head_bytes) -> bool:
        metrics = {ln.split("{")[0].split()[0] for ln in head_lines(head_bytes)
                   if ln.startswith("DCGM_FI_")}
        return metrics == {"DCGM_FI_DEV_XID_ERRORS"}
