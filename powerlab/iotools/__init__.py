"""Readers of formats that other tools already record (pvlib ``iotools`` style).

``read_*`` takes a path, ``parse_*`` takes text or a buffer.  Every reader maps source
names to canonical names through one explicit table, turns sentinels into NaN, converts
units at the boundary and returns tz-aware UTC timestamps.

Each reader recognises its own files (:mod:`powerlab.iotools.registry`):
:func:`read_any` and :func:`sniff_format` pick the reader from the content (used by
``powerlab import``, ``summary``, ``calibrate`` and ``backtest``), and a new format is
one module that registers its reader (:func:`register_reader`).
"""

from __future__ import annotations

from .dcgm import (
    parse_dcgm_dmon,
    parse_dcgm_prometheus,
    read_dcgm_dmon,
    read_dcgm_prometheus,
)
from .mllog import MLLogResult, parse_mllog, read_mllog
from .mlperf import parse_mlperf_power, read_mlperf_power
from .nvidia_smi import parse_nvidia_smi, read_nvidia_smi
from .prometheus import PROMETHEUS_QUERY_MAP, read_prometheus
from .registry import (
    FORMATS,
    ReaderEntrypoint,
    formats,
    read_any,
    readers,
    register_reader,
    sniff_format,
    unregister_reader,
)
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
    "ReaderEntrypoint",
    "expand_hostlist",
    "formats",
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
    "read_dcgm_xid",
    "read_kernel_xid",
    "read_mllog",
    "read_mlperf_power",
    "read_nvidia_smi",
    "read_prometheus",
    "read_sacct",
    "read_weather",
    "read_zeus_power_trace",
    "readers",
    "register_reader",
    "sniff_format",
    "unregister_reader",
]

#: The built-in formats that give canonical telemetry (``powerlab import`` writes them to
#: the store's samples; ``formats("telemetry")`` adds readers registered since).
TELEMETRY_FORMATS = formats("telemetry")
#: The built-in formats that give GPU error events (``powerlab import`` writes them to the
#: store's events, :mod:`powerlab.telemetry.event_store`; ``formats("events")`` adds
#: readers registered since).
EVENT_FORMATS = formats("events")
