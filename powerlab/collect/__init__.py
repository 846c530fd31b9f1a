"""Live recording through NVML: the collector and its store side tables.

Modules
-------
:mod:`~powerlab.collect.nvml`        the NVML boundary (the only module importing pynvml)
:mod:`~powerlab.collect.signals`     what a sample holds: columns, NVML timestamps, signal groups
:mod:`~powerlab.collect.fieldvalues` NVML field ids, the field-value record and its decoding
:mod:`~powerlab.collect.nvml_codes`  NVML return codes and the powerlab exception of each
:mod:`~powerlab.collect.collector`   the running collector: start, stop, live window, report
:mod:`~powerlab.collect.options`     what a collector is asked to do (``CollectorOptions``)
:mod:`~powerlab.collect.sampling`    the sampling loop (per GPU, or power-only ticks in bulk)
:mod:`~powerlab.collect.batch`       power-only ticks recorded raw, decoded per batch
:mod:`~powerlab.collect.flushing`    the bounded buffer, flushes and the writer thread
:mod:`~powerlab.collect.faults`      lost and hung GPUs: watchdog, retries, XID events
:mod:`~powerlab.collect.sidetables`  status events and static GPU facts beside the telemetry
:mod:`~powerlab.collect.metrics`     the ``/metrics`` endpoint under dcgm-exporter's names
:mod:`~powerlab.collect.slots`       per-GPU state of a running collector, frames and tables
:mod:`~powerlab.collect.run_report`  what a run achieved (rates, jitter, energy both ways)
:mod:`~powerlab.collect.fake`        a simulated NVML library (C, built on demand) for demos and tests

This wing imports only :mod:`powerlab.telemetry` (and :mod:`powerlab.exceptions`).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "collector": (
        "Collector",
    ),
    "options": (
        "CollectorOptions",
    ),
    "run_report": (
        "CollectorReport",
    ),
    "sidetables": (
        "DEVICE_COLUMNS", "EVENT_COLUMNS", "read_devices", "read_events",
    ),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
