"""GPU error events and interruption root causes: the shared vocabulary of reliability data.

Readers (:mod:`powerlab.iotools`) turn kernel-log ``NVRM: Xid`` lines, DCGM health output
and the collector's own events into one **events table** (:data:`EVENT_COLUMNS`);
reliability analytics (:mod:`powerlab.throughput`) estimate failure rates per
**root cause** (:data:`ROOT_CAUSES`) from it; the forecast (:mod:`powerlab.site`) takes
those rates per GPU-hour in a scenario's ``interruptions`` section.

Root causes follow Table 5 of the Llama 3 paper [1]_ (419 unexpected interruptions of a
16,384-GPU job in a 54-day snapshot; 47 planned ones besides).  Note the paper prints
30.1 % for "Faulty GPU" although 148 / 419 = 35.3 %; the counts are used here.

XID codes are classified after NVIDIA's XID catalogue [2]_; the grouping into
``gpu_memory``, ``gpu_hardware``, ``nvlink``, ``application`` and ``informational``, and the
mapping to a root cause, are powerlab's (NVIDIA publishes causes per code, not a taxonomy):
application XIDs (13, 31, 43, 45, 68) are the ones NVIDIA's Kubernetes device plugin
treats as "the GPU should still be healthy" [3]_.

References
----------
.. [1] A. Grattafiori et al., "The Llama 3 Herd of Models", arXiv:2407.21783, 2024,
   section 3.3.4 and Table 5.
.. [2] NVIDIA, "XID Errors" and "Analyzing Xid Errors with the Xid Catalog" (the catalogue
   of Ampere and newer GPUs with each code's "Resolution Bucket (Immediate Action)"),
   https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (r555 and
   later).  Xid 63 (a row remapping recorded, active at the next reset) and Xid 92 (a
   high rate of corrected single-bit errors) are kept as events but are not failures:
   neither stops the GPU; the failure they may follow (Xid 48, 94, 95) is counted.
.. [3] NVIDIA k8s-device-plugin, ``internal/rm/health.go`` (``applicationErrorXids``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

__all__ = [
    "EVENT_COLUMNS",
    "EVENT_DTYPES",
    "LLAMA3_SNAPSHOT",
    "ROOT_CAUSES",
    "XID_CATALOGUE",
    "RootCause",
    "XidInfo",
    "classify_xid",
    "empty_events",
]


@dataclass(frozen=True)
class RootCause:
    """One root cause of an unexpected training interruption.

    Attributes
    ----------
    name : str
        Identifier (snake_case), used as the key of failure rates everywhere.
    component : str
        Wording of the Llama 3 paper's Table 5.
    category : str
        Table 5's category: ``GPU``, ``Host``, ``Network``, ``Dependency``,
        ``Unplanned Maintenance`` or ``Unknown``.
    llama3_count : int
        Interruptions in the 54-day Llama 3 snapshot [-].
    """

    name: str
    component: str
    category: str
    llama3_count: int


#: Table 5 of the Llama 3 paper, in its order.
ROOT_CAUSES: tuple[RootCause, ...] = (
    RootCause("faulty_gpu", "Faulty GPU", "GPU", 148),
    RootCause("gpu_hbm3_memory", "GPU HBM3 Memory", "GPU", 72),
    RootCause("software_bug", "Software Bug", "Dependency", 54),
    RootCause("network_switch_cable", "Network Switch/Cable", "Network", 35),
    RootCause("host_maintenance", "Host Maintenance", "Unplanned Maintenance", 32),
    RootCause("gpu_sram_memory", "GPU SRAM Memory", "GPU", 19),
    RootCause("gpu_system_processor", "GPU System Processor", "GPU", 17),
    RootCause("nic", "NIC", "Host", 7),
    RootCause("nccl_watchdog_timeout", "NCCL Watchdog Timeouts", "Unknown", 7),
    RootCause("silent_data_corruption", "Silent Data Corruption", "GPU", 6),
    RootCause("gpu_thermal_interface_sensor", "GPU Thermal Interface + Sensor", "GPU", 6),
    RootCause("ssd", "SSD", "Host", 3),
    RootCause("power_supply", "Power Supply", "Host", 3),
    RootCause("server_chassis", "Server Chassis", "Host", 2),
    RootCause("io_expansion_board", "IO Expansion Board", "Host", 2),
    RootCause("dependency", "Dependency", "Dependency", 2),
    RootCause("cpu", "CPU", "Host", 2),
    RootCause("system_memory", "System Memory", "Host", 2),
)

#: Exposure and totals of the Llama 3 snapshot behind :data:`ROOT_CAUSES`.
LLAMA3_SNAPSHOT = {
    "days": 54.0,
    "gpus": 16_384,
    "unexpected": 419,
    "planned": 47,
    "total": 466,
    "effective_training_time_min": 0.90,
}


@dataclass(frozen=True)
class XidInfo:
    """What an XID code means.

    Attributes
    ----------
    code : int
    mnemonic : str
        NVIDIA's name (``nverror.h``).
    description : str
    kind : str
        ``gpu_memory``, ``gpu_hardware``, ``nvlink``, ``application`` or
        ``informational``.
    root_cause : str or None
        The :data:`ROOT_CAUSES` name an interruption with this XID is counted under
        (``None`` for application and informational codes, which do not by themselves
        point at a fault).
    """

    code: int
    mnemonic: str
    description: str
    kind: str
    root_cause: str | None


def _x(code, mnemonic, description, kind, root_cause):
    return code, XidInfo(code, mnemonic, description, kind, root_cause)


#: XID codes seen on Ampere and newer data-centre GPUs (NVIDIA's catalogue).
XID_CATALOGUE: dict[int, XidInfo] = dict([
    _x(8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing",
       "application", None),
    _x(13, "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception", "application", None),
    _x(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "application",
       None),
    _x(32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream",
       "application", None),
    _x(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing",
       "application", None),
    _x(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors",
       "application", None),
    _x(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "gpu_hardware",
       "faulty_gpu"),
    _x(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "gpu_memory",
       "gpu_hbm3_memory"),
    _x(54, "AUX_POWER_NOT_CONNECTED", "Auxiliary power is not connected to the GPU board",
       "gpu_hardware", "faulty_gpu"),
    _x(61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning",
       "gpu_hardware", "gpu_system_processor"),
    _x(62, "PMU_HALT_ERROR", "Internal micro-controller halt", "gpu_hardware",
       "gpu_system_processor"),
    _x(63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event (recorded; "
       "takes effect at the next GPU reset)", "informational", None),
    _x(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "gpu_memory",
       "gpu_hbm3_memory"),
    _x(68, "NVDEC0_EXCEPTION", "Video processor exception", "application", None),
    _x(74, "NVLINK_ERROR", "NVLink error", "nvlink", "faulty_gpu"),
    _x(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus",
       "gpu_hardware", "faulty_gpu"),
    _x(92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate (corrected)",
       "informational", None),
    _x(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "gpu_memory",
       "gpu_hbm3_memory"),
    _x(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "gpu_memory",
       "gpu_hbm3_memory"),
    _x(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error",
       "gpu_hardware", "faulty_gpu"),
    _x(110, "SEC_FAULT_ERROR", "Security Fault Error", "gpu_hardware", "faulty_gpu"),
    _x(119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "gpu_hardware", "gpu_system_processor"),
    _x(120, "GSP_ERROR", "GSP Error", "gpu_hardware", "gpu_system_processor"),
    _x(121, "C2C_ERROR", "C2C Link Error", "gpu_hardware", "faulty_gpu"),
    _x(136, "ALI_TRAINING_FAIL", "Link Training Failed", "nvlink", "faulty_gpu"),
    _x(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "gpu_memory",
       "gpu_hbm3_memory"),
    _x(143, "GPU_INIT_ERROR", "GPU Initialization Error", "gpu_hardware", "faulty_gpu"),
    _x(144, "NVLINK_SAW_ERROR", "NVLink: SAW Error", "nvlink", "faulty_gpu"),
    _x(145, "NVLINK_RLW_ERROR", "NVLink: RLW Error", "nvlink", "faulty_gpu"),
    _x(146, "NVLINK_TLW_ERROR", "NVLink: TLW Error", "nvlink", "faulty_gpu"),
    _x(147, "NVLINK_TREX_ERROR", "NVLink: TREX Error", "nvlink", "faulty_gpu"),
    _x(148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink: NVLPW_CTRL Error", "nvlink", "faulty_gpu"),
    _x(149, "NVLINK_NETIR_ERROR", "NVLink: NETIR Error", "nvlink", "faulty_gpu"),
    _x(150, "NVLINK_MSE_ERROR", "NVLink: MSE Error", "nvlink", "faulty_gpu"),
    _x(154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "informational",
       None),
    _x(155, "NVLINK_SW_DEFINED_ERROR", "NVLink: SW Defined Error", "nvlink", "faulty_gpu"),
    _x(156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "gpu_memory",
       "gpu_hbm3_memory"),
    _x(157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", "gpu_memory",
       "gpu_hbm3_memory"),
    _x(158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "gpu_hardware", "faulty_gpu"),
    _x(162, "PSHC_REENGAGED", "Power Smoothing HW Circuitry re-engaged", "informational",
       None),
    _x(163, "PSHC_DISENGAGED", "Power Smoothing HW Circuitry disengaged", "informational",
       None),
    _x(164, "PSHC_LOW_LIFETIME", "Power Smoothing HW Circuitry low lifetime",
       "informational", None),
    _x(165, "PSHC_ZERO_LIFETIME", "Power Smoothing HW Circuitry zero lifetime",
       "informational", None),
    _x(171, "UNCORRECTABLE_DRAM_ERROR", "Uncorrectable DRAM error (details of Xid 48)",
       "gpu_memory", "gpu_hbm3_memory"),
    _x(172, "UNCORRECTABLE_SRAM_ERROR", "Uncorrectable SRAM error (details of Xid 48)",
       "gpu_memory", "gpu_sram_memory"),
])


def classify_xid(code: int) -> XidInfo:
    """The :class:`XidInfo` of an XID code (``kind="unknown"`` for codes not listed)."""
    info = XID_CATALOGUE.get(int(code))
    if info is None:
        return XidInfo(int(code), "UNKNOWN", f"XID {int(code)} (not in the catalogue)",
                       "unknown", None)
    return info


#: Columns of the events table (one row per error event of one GPU or host).
EVENT_COLUMNS = ("timestamp", "host", "gpu_index", "gpu_uuid", "pci_bus_id", "xid", "kind",
                 "root_cause", "message", "source")
#: pandas dtypes of :data:`EVENT_COLUMNS`.  ``timestamp`` is UTC; ``xid`` is NA for events
#: that are not XIDs (a DCGM health failure, a lost GPU); ``kind`` as in :class:`XidInfo`
#: (or ``health``, ``lost``); ``source`` names the input (``kernel_log``, ``dcgm_health``,
#: ``collector``).
EVENT_DTYPES = {
    "timestamp": "datetime64[ns, UTC]", "host": "string", "gpu_index": "Int16",
    "gpu_uuid": "string", "pci_bus_id": "string", "xid": "Int32", "kind": "string",
    "root_cause": "string", "message": "string", "source": "string",
}


def empty_events() -> pd.DataFrame:
    """An events table with no rows and the canonical dtypes."""
    return pd.DataFrame({c: pd.Series([], dtype=EVENT_DTYPES[c]) for c in EVENT_COLUMNS})
