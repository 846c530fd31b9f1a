"""Readers of formats that other tools already record (pvlib ``iotools`` style).

``read_*`` takes a path, ``parse_*`` takes text or a buffer.  Every reader maps source
names to canonical names through one explicit table, turns sentinels into NaN, converts
units at the boundary and returns tz-aware UTC timestamps.

:func:`read_any` picks the reader from the content (used by ``powerlab import``).
"""

from __future__ import annotations

import re
from pathlib import Path

from .._options import choice
from ..exceptions import ParseError
from ._common import read_bytes
from .dcgm import (
    parse_dcgm_dmon,
    parse_dcgm_prometheus,
    read_dcgm_dmon,
    read_dcgm_prometheus,
)
from .mlperf import (
    MLLogResult,
    parse_mllog,
    parse_mlperf_power,
    read_mllog,
    read_mlperf_power,
)
from .nvidia_smi import parse_nvidia_smi, read_nvidia_smi
from .prometheus import PROMETHEUS_QUERY_MAP, read_prometheus
from .slurm import expand_hostlist, read_sacct
from .weather import parse_weather, read_weather
from .xid import read_dcgm_xid, read_kernel_xid
from .zeus import parse_zeus_power_trace, read_zeus_power_trace

__all__ = [
    "EVENT_FORMATS",
    "FORMATS",
    "PROMETHEUS_QUERY_MAP",
    "TELEMETRY_FORMATS",
    "MLLogResult",
    "expand_hostlist",
    "parse_dcgm_dmon",
    "parse_dcgm_prometheus",
    "parse_mllog",
    "parse_mlperf_power",
    "parse_nvidia_smi",
    "parse_weather",
    "parse_zeus_power_trace",
    "read_any",
    "read_dcgm_dmon",
    "read_dcgm_prometheus",
    "read_mllog",
    "read_mlperf_power",
    "read_nvidia_smi",
    "read_prometheus",
    "read_sacct",
    "read_weather",
    "read_zeus_power_trace",
    "sniff_format",
]

#: Formats :func:`read_any` knows, with their readers.
FORMATS = {
    "nvidia-smi": read_nvidia_smi,
    "dcgm-dmon": read_dcgm_dmon,
    "dcgm-prom": read_dcgm_prometheus,
    "mlperf-power": read_mlperf_power,
    "mllog": read_mllog,
    "weather": read_weather,
    "kernel-xid": read_kernel_xid,
    "dcgm-xid": read_dcgm_xid,
}
#: Formats that give canonical telemetry (what ``powerlab import`` accepts).
TELEMETRY_FORMATS = ("nvidia-smi", "dcgm-dmon", "dcgm-prom", "mlperf-power")
#: Formats that give GPU error events (``powerlab import`` writes them to the store's
#: events, :mod:`powerlab.telemetry.event_store`).
EVENT_FORMATS = ("kernel-xid", "dcgm-xid")

_SMI_HEAD = re.compile(r"^\s*(timestamp|index|uuid|name|pci\.bus_id|power\.draw|"
                       r"utilization\.gpu|memory\.used|temperature\.gpu|clocks\.)", re.IGNORECASE)
_SMI_ROW = re.compile(r"^\s*\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(\.\d+)?\s*,")


def sniff_format(path) -> str:
    """Name the format of a file or directory from its content.

    Returns one of :data:`FORMATS`; raises :class:`~powerlab.exceptions.ParseError` when
    nothing fits.
    """
    p = Path(path)
    if p.is_dir():
        names = [f.name for f in p.iterdir()]
        if any(re.match(r"^node_\d+\.txt(\.gz)?$", n) for n in names):
            return "mlperf-power"
        for f in sorted(p.iterdir()):
            if f.is_file() and f.name != "LICENSE":
                try:
                    if sniff_format(f) == "weather":
                        return "weather"
                except ParseError:
                    continue
        raise ParseError("no readable telemetry files in this directory", path=p)
    data, _ = read_bytes(p)
    head = data[:65536].decode("utf-8", errors="replace")
    lines = [ln for ln in head.splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if ":::MLLOG" in head:
        return "mlperf-power" if '"power_reading"' in head else "mllog"
    if "NVRM: Xid" in head:
        return "kernel-xid"
    if any(ln.lstrip().startswith("#Entity") for ln in lines[:50]):
        return "dcgm-dmon"
    metrics = {ln.split("{")[0].split()[0] for ln in lines
               if ln.startswith("DCGM_FI_")}
    if metrics == {"DCGM_FI_DEV_XID_ERRORS"}:
        return "dcgm-xid"
    if "DCGM_FI_" in head:
        return "dcgm-prom"
    if first.startswith("Time,") and "Temp" in first:
        return "weather"
    if _SMI_HEAD.match(first) or _SMI_ROW.match(first):
        return "nvidia-smi"
    if re.match(r"^\d{4}-\d\d-\d\d .*\|\s*Temp:", first):
        return "weather"
    raise ParseError("cannot tell the format from the content (expected nvidia-smi CSV, "
                     "dcgmi dmon, dcgm-exporter, MLPerf MLLOG, weather CSV, kernel "
                     "'NVRM: Xid' log or dcgm-exporter XID text)", path=p)


def read_any(path, *, format: str = "auto", **kw):
    """Read ``path`` with the reader its content calls for.

    Parameters
    ----------
    path : str or path-like
        File or directory.
    format : str, default "auto"
        ``"auto"`` (sniff) or a key of :data:`FORMATS`.
    **kw
        Passed to the reader (e.g. ``tz=``, ``host=``, ``n_gpus=``); options a reader
        does not take are dropped.

    Returns
    -------
    pandas.DataFrame or MLLogResult
        What the chosen reader returns.
    """
    import inspect

    fmt = sniff_format(path) if format == "auto" else format
    if fmt not in FORMATS:
        choice(fmt, "format", [*sorted(FORMATS), "auto"],
               error=lambda m: ParseError(m, path=path))
    reader = FORMATS[fmt]
    params = inspect.signature(reader).parameters
    kw = {k: v for k, v in kw.items() if k in params and v is not None}
    return reader(path, **kw)
