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

Seconds since boot become UTC with ``boot_time``; lines without a time (plain ``dmesg``
without timestamps) keep ``NaT`` and a :class:`~powerlab.exceptions.DataQualityWarning` says
how many.  A line that holds ``NVRM: Xid`` but not in the form above raises
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
    """Fill ``gpu_index`` / ``gpu_uuid`` from a devices table keyed by (host, pci_bus_id)."""
    need = {"pci_bus_id", "gpu_index"}
    if not need <= set(devices.columns):
        raise ValueError(f"devices table needs columns {sorted(need)} (and host, gpu_uuid)")
    d = devices.copy()
    d["pci_bus_id"] = [normalize_pci_bus_id(p) for p in d["pci_bus_id"].astype(str)]
    keys = ["host", "pci_bus_id"] if "host" in d.columns else ["pci_bus_id"]
    d = d.drop_duplicates(keys).set_index(keys)
    idx = pd.MultiIndex.from_frame(events[keys].astype(object)) if len(keys) > 1 \
        else pd.Index(events["pci_bus_id"].astype(object))
    look = d.reindex(idx)
    for c in ("gpu_index", "gpu_uuid"):
        if c in look.columns:
            fill = pd.array(look[c].to_numpy(), dtype=EVENT_DTYPES[c])
            events[c] = events[c].where(events[c].notna(), fill)
    return events


def parse_kernel_xid(src, *, host: str | None = None, boot_time=None, tz: str = "UTC",
                     devices: pd.DataFrame | None = None,
                     errors: str = "raise") -> pd.DataFrame:
    """Parse ``NVRM: Xid`` lines of a kernel log (dmesg, journalctl ``-o short-iso``).

    Parameters
    ----------
    src : str, bytes or buffer
        Log content (``read_kernel_xid`` takes a path).
    host : str, optional
        Host name for lines that do not carry one (dmesg); journal lines name their host.
    boot_time : str or pandas.Timestamp, optional
        Boot time of the host, to turn dmesg's seconds since boot into UTC [UTC unless the
        string names an offset].  Without it such lines keep ``NaT`` (with a warning).
    tz : str, default "UTC"
        Time zone of ``dmesg -T`` times and of ISO times without an offset.
    devices : pandas.DataFrame, optional
        ``host``, ``pci_bus_id``, ``gpu_index``, ``gpu_uuid`` (the collector's devices
        table, or ``nvidia-smi --query-gpu=index,uuid,pci.bus_id``) to name each GPU.
    errors : {"raise", "warn"}
        What to do with a line that holds ``NVRM: Xid`` in an unknown form.

    Returns
    -------
    pandas.DataFrame
        The events table, ``source="kernel_log"``, sorted by time.
    """
    choice(errors, "errors", ("raise", "warn"))
    text, name = read_text(src, what="kernel log")
    boot = to_utc(boot_time, tz=tz, what="boot_time", optional=True)
    rows, bad, no_time = [], [], 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if "NVRM: Xid" not in line:
            continue
        rest, ts, line_host = line.strip(), pd.NaT, host
        try:
            if (m := _ISO.match(rest)) is not None:
                ts = to_utc(m["t"], tz=tz, what="journal time", error=ValueError)
                line_host, rest = m["host"], rest[m.end():]
            elif (m := _DMESG_T.match(rest)) is not None:
                ts = to_utc(pd.to_datetime(m["t"], format="%a %b %d %H:%M:%S %Y"), tz=tz,
                            what="dmesg -T time", error=ValueError)
                rest = rest[m.end():]
            elif (m := _DMESG_REL.match(rest)) is not None:
                if boot is not None:
                    ts = boot + pd.to_timedelta(float(m["s"]), unit="s")
                rest = rest[m.end():]
            mx = _XID.search(rest)
            if mx is None or not rest.startswith("NVRM: Xid"):
                raise ValueError("a line holding 'NVRM: Xid' is not 'NVRM: Xid "
                                 f"(PCI:dddd:bb:dd): CODE, ...' (got {line.strip()[:120]!r})")
            pci = normalize_pci_bus_id(mx["pci"])
            code = _xid_code(mx["code"])
        except (ValueError, OverflowError) as exc:  # impossible or nonexistent times too
            bad.append((lineno, str(exc)[:300]))
            continue
        no_time += pd.isna(ts)
        msg = mx["rest"] or ""
        msg = _PID.sub("", msg, count=1)
        rows.append({"timestamp": ts, "host": line_host, "pci_bus_id": pci,
                     "xid": code, "message": msg, "source": "kernel_log"})
    if bad:
        lineno, what = bad[0]
        if errors == "raise":
            raise ParseError(what, path=name, line=lineno)
        warnings.warn(f"{name or '<text>'}: skipped {len(bad)} malformed Xid line(s); first "
                      f"at line {lineno}: {what}", DataQualityWarning, stacklevel=2)
    if no_time:
        warnings.warn(f"{name or '<text>'}: {no_time} Xid line(s) have no absolute time "
                      "(dmesg without timestamps, or seconds since boot without boot_time); "
                      "their timestamp is NaT", DataQualityWarning, stacklevel=2)
    return _frame(rows, devices)


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
