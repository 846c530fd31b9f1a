"""The NVML boundary: every call into NVIDIA's management library goes through here.

This is the only powerlab module that imports ``pynvml`` (from ``nvidia-ml-py``).  It
gives the rest of powerlab a small typed surface:

* one decorator, :func:`nvml_errors`, maps every ``pynvml.NVMLError_*`` to the powerlab
  family: :class:`~powerlab.exceptions.GPULostError` (``NVML_ERROR_GPU_IS_LOST``),
  :class:`~powerlab.exceptions.NVMLUnavailableError` (library or driver missing) and
  :class:`~powerlab.exceptions.NVMLError` for the rest; each carries ``code`` (the NVML
  return code) and ``kind`` (``"lost"``, ``"timeout"``, ``"unknown"``, ...);
* a cached availability probe (:func:`is_available`, :func:`init`);
* :class:`Device`: static facts read once, a capability probe per quantity done once,
  and :meth:`Device.read`, which samples one GPU with one ``nvmlDeviceGetFieldValues``
  call (instant power, average power, total energy, memory temperature, keeping NVML's
  per-field timestamps) plus individual calls for the rest;
* :attr:`Device.power_batch`: what a power-only read needs as one raw call (the
  library's ``nvmlDeviceGetFieldValues`` entry point, the handle, the record array type,
  the field ids and where each value goes), for the bulk path of
  :mod:`powerlab.collect.batch`; None where a power column needs an individual call;
* units converted right here: mW -> W, mJ -> J.  A quantity the GPU does not support is
  NaN, never 0.

What needs no ``pynvml`` lives beside it: the columns and signal groups of a sample
(:mod:`powerlab.collect.signals`), the field ids, record layout and decoding of field
values (:mod:`powerlab.collect.fieldvalues`) and the return codes with the powerlab
exception of each (:mod:`powerlab.collect.nvml_codes`).

References
----------
.. [1] NVIDIA, "NVML API Reference Guide", Field Value Enums and Device Queries.
   https://docs.nvidia.com/deploy/nvml-api/
.. [2] Z. Yang, K. Adamek, W. Armour, "Accurate and Convenient Energy Measurements for
   GPUs: A Detailed Study of NVIDIA GPU's Built-In Power Sensor", SC'24, 2024.
"""

from __future__ import annotations

import ctypes
import functools
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ..exceptions import NVMLError, NVMLUnavailableError
from .fieldvalues import COLUMN_POS, FIELDS, FV_STRUCT, decode_raw
from .nvml_codes import (
    ERR_FUNCTION_NOT_FOUND,
    ERR_NOT_SUPPORTED,
    ERR_TIMEOUT,
    ERR_UNKNOWN,
    SUCCESS,
    powerlab_error,
)
from .signals import ALL_GROUPS, GROUPS, SAMPLE_COLUMNS, TIMESTAMP_COLUMNS, group_mask

try:  # the optional dependency: pip install "powerlab[nvml]"
    import pynvml
except ImportError:  # pragma: no cover - exercised only without nvidia-ml-py
    pynvml = None

__all__ = [
    "ALL_GROUPS",
    "GROUPS",
    "SAMPLE_COLUMNS",
    "TIMESTAMP_COLUMNS",
    "Device",
    "DeviceInfo",
    "XidWatcher",
    "device_count",
    "driver_version",
    "error_for",
    "group_mask",
    "init",
    "is_available",
    "nvml_errors",
    "open_devices",
    "shutdown",
]

NAN = math.nan


def _to_powerlab(exc: BaseException) -> NVMLError:
    return powerlab_error(getattr(exc, "value", ERR_UNKNOWN), str(exc))


F = TypeVar("F", bound=Callable)


def nvml_errors(func: F) -> F:
    """Decorator: re-raise ``pynvml.NVMLError`` as the matching powerlab exception."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except NVMLError:
            raise
        except Exception as exc:
            if pynvml is not None and isinstance(exc, pynvml.NVMLError):
                raise _to_powerlab(exc) from exc
            raise

    return wrapper  # type: ignore[return-value]


# ------------------------------------------------------------------ library lifetime

_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str]:
    """Load and initialise NVML once; ``(ok, reason)``.  Cached: NVML stays initialised."""
    if pynvml is None:
        return False, ("the nvidia-ml-py package is not installed "
                       "(pip install 'powerlab[nvml]')")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return False, str(_to_powerlab(exc))
    return True, ""


def is_available() -> bool:
    """Whether NVML can be loaded and initialised on this host (probed once, cached)."""
    with _lock:
        return _probe()[0]


def init() -> None:
    """Initialise NVML (once per process).

    Raises
    ------
    powerlab.exceptions.NVMLUnavailableError
        When the library, the driver or the ``nvidia-ml-py`` package is missing.
    """
    with _lock:
        ok, reason = _probe()
    if not ok:
        raise NVMLUnavailableError(reason)


def shutdown() -> None:
    """Shut NVML down and forget the cached probe (the next :func:`init` starts afresh)."""
    with _lock:
        if _probe.cache_info().currsize and _probe()[0]:
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass
        _probe.cache_clear()


@nvml_errors
def device_count() -> int:
    """Number of GPUs NVML sees."""
    init()
    return int(pynvml.nvmlDeviceGetCount())


@nvml_errors
def driver_version() -> str:
    """The NVIDIA driver version string."""
    init()
    return str(pynvml.nvmlSystemGetDriverVersion())


def open_devices(indices: Iterable[int] | None = None) -> list[Device]:
    """Open GPUs by NVML index (all when ``indices`` is None).

    Raises
    ------
    powerlab.exceptions.NVMLUnavailableError
        NVML is missing or sees no GPU.
    powerlab.exceptions.NVMLError
        An index is not on this host.
    """
    n = device_count()
    if n == 0:
        raise NVMLUnavailableError("NVML sees no GPU on this host")
    idx = list(range(n)) if indices is None else [int(i) for i in indices]
    bad = [i for i in idx if not 0 <= i < n]
    if bad:
        raise NVMLError(f"GPU index {bad} not found; this host has {n} GPU(s) "
                        f"(indices 0..{n - 1})")
    return [Device(i) for i in idx]


# ------------------------------------------------------------------ devices


@dataclass(frozen=True)
class DeviceInfo:
    """Static facts of one GPU, read once.

    Attributes
    ----------
    index : int
        NVML ordinal.
    name, uuid, serial : str
        Model name, stable UUID, board serial (``""`` where unsupported).
    tdp_w : float
        Default power limit (TDP) [W]; NaN when unsupported.
    driver_version : str
        NVIDIA driver version.
    capabilities : mapping of str to str
        For each measured column, where it comes from: ``"field"`` (the batched
        ``nvmlDeviceGetFieldValues`` call), ``"call"`` (an individual call) or
        ``"unsupported"`` (always NaN).
    pci_bus_id : str
        PCI bus id such as ``00000000:1B:00.0`` (``""`` where unsupported).
    minor_number : int
        The ``/dev/nvidiaN`` minor number (-1 where unsupported).
    """

    index: int
    name: str
    uuid: str
    serial: str
    tdp_w: float
    driver_version: str
    capabilities: Mapping[str, str] = field(default_factory=dict)
    pci_bus_id: str = ""
    minor_number: int = -1


def _supported(call: Callable) -> bool:
    """Run ``call`` once; False on NOT_SUPPORTED / FUNCTION_NOT_FOUND, re-raise others."""
    try:
        call()
    except pynvml.NVMLError as exc:
        if exc.value in (ERR_NOT_SUPPORTED, ERR_FUNCTION_NOT_FOUND):
            return False
        raise
    return True


_NCOL = len(SAMPLE_COLUMNS)


class Device:
    """One GPU: handle, static facts, capabilities and the per-tick read.

    Parameters
    ----------
    index : int
        NVML ordinal of the GPU.

    Raises
    ------
    powerlab.exceptions.GPULostError, powerlab.exceptions.NVMLError
        When the GPU cannot be opened or probed.
    """

    @nvml_errors
    def __init__(self, index: int):
        init()
        self.index = int(index)
        h = self.handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        uuid = str(pynvml.nvmlDeviceGetUUID(h))
        name = str(pynvml.nvmlDeviceGetName(h))
        try:
            serial = str(pynvml.nvmlDeviceGetSerial(h))
        except pynvml.NVMLError as exc:
            if exc.value not in (ERR_NOT_SUPPORTED, ERR_FUNCTION_NOT_FOUND):
                raise
            serial = ""
        try:
            tdp_w = pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0
        except pynvml.NVMLError as exc:
            if exc.value not in (ERR_NOT_SUPPORTED, ERR_FUNCTION_NOT_FOUND):
                raise
            tdp_w = NAN
        caps = self._probe(h)
        pci, minor = "", -1
        try:
            busid = pynvml.nvmlDeviceGetPciInfo(h).busId
            pci = busid.decode() if isinstance(busid, bytes) else str(busid)
        except pynvml.NVMLError as exc:
            if exc.value not in (ERR_NOT_SUPPORTED, ERR_FUNCTION_NOT_FOUND):
                raise
        try:
            minor = int(pynvml.nvmlDeviceGetMinorNumber(h))
        except pynvml.NVMLError as exc:
            if exc.value not in (ERR_NOT_SUPPORTED, ERR_FUNCTION_NOT_FOUND):
                raise
        self._memory = _supported(lambda: pynvml.nvmlDeviceGetMemoryInfo(h))
        self.info = DeviceInfo(self.index, name, uuid, serial, tdp_w,
                               str(pynvml.nvmlSystemGetDriverVersion()), caps, pci, minor)
        self._plan()

    @property
    def uuid(self) -> str:
        return self.info.uuid

    # -- capability probe (once) ----------------------------------------------------
    def _probe(self, h) -> dict[str, str]:
        caps: dict[str, str] = {}
        ids = [f[1] for f in FIELDS]
        try:
            vals = pynvml.nvmlDeviceGetFieldValues(h, ids)
            rets = [v.nvmlReturn for v in vals]
        except pynvml.NVMLError as exc:
            if exc.value not in (ERR_NOT_SUPPORTED, ERR_FUNCTION_NOT_FOUND):
                raise
            rets = [ERR_NOT_SUPPORTED] * len(ids)
        for (col, _fid, _slot, _scale, fallback), ret in zip(FIELDS, rets):
            if ret == SUCCESS:
                caps[col] = "field"
                continue
            if ret not in (ERR_NOT_SUPPORTED, ERR_FUNCTION_NOT_FOUND):
                raise pynvml.NVMLError(ret)
            if fallback and _supported(lambda fb=fallback: getattr(pynvml, fb)(h)):
                caps[col] = "call"
            else:
                caps[col] = "unsupported"
        ok = {
            "temp_gpu_c": lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "clock_sm_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "clock_mem_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "util_gpu_pct": lambda: pynvml.nvmlDeviceGetUtilizationRates(h),
            "power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h),
        }
        for col, call in ok.items():
            caps[col] = "call" if _supported(call) else "unsupported"
        caps["util_mem_pct"] = caps["util_gpu_pct"]
        self._throttle_fn = None
        for fn in ("nvmlDeviceGetCurrentClocksEventReasons",
                   "nvmlDeviceGetCurrentClocksThrottleReasons"):
            f = getattr(pynvml, fn, None)
            if f is not None and _supported(lambda f=f: f(h)):
                self._throttle_fn = f
                break
        caps["throttle_reasons"] = "call" if self._throttle_fn is not None else "unsupported"
        return caps

    def _plan(self) -> None:
        """Precompute the field requests for each combination of power/temperature.

        ``self._plans[groups & 3]`` (bit 0: power, bit 1: temperature) is ``(ids, slots,
        array type, template)``: the template is the bytes of a field-value array with
        the field ids filled in, so a read copies it instead of building the array field
        by field as ``pynvml.nvmlDeviceGetFieldValues`` does (which costs more than the
        library call itself).
        """
        caps = self.info.capabilities
        self._plans = []
        for k in range(4):
            power, temp = bool(k & 1), bool(k & 2)
            ids, slots = [], []
            for col, fid, ts_slot, scale, _fb in FIELDS:
                want = temp if col == "temp_mem_c" else power
                if want and caps[col] == "field":
                    ids.append(fid)
                    slots.append((COLUMN_POS[col], ts_slot, scale))
            arr_type = pynvml.c_nvmlFieldValue_t * max(len(ids), 1)
            arr = arr_type()
            for i, fid in enumerate(ids):
                arr[i].fieldId = fid
            self._plans.append((ids, slots, arr_type, bytes(arr)))
        # the library's own entry point (through pynvml's loader); the public wrapper is
        # the fallback should a pynvml release not have this helper
        self._fv_fn = None
        get_fn = getattr(pynvml, "_nvmlGetFunctionPointer", None)
        if get_fn is not None and any(plan[0] for plan in self._plans):
            try:
                self._fv_fn = get_fn("nvmlDeviceGetFieldValues")
            except pynvml.NVMLError:
                pass
        self._power_avg_call = caps["power_avg_w"] == "call"
        self._energy_call = caps["energy_j"] == "call"
        # a power-only read as one raw call (see powerlab.collect.batch): the library's
        # entry point, the handle, the record array type, field ids and where each goes
        ids, slots, arr_type, _t = self._plans[1]
        self.power_batch = (
            (self._fv_fn, self.handle, arr_type, tuple(ids), tuple(slots))
            if self._fv_fn is not None and ids and not self._power_avg_call
            and not self._energy_call else None)
        self._has = {c: caps[c] != "unsupported" for c in caps}

    # -- per-tick read --------------------------------------------------------------
    @nvml_errors
    def read(self, groups: int = ALL_GROUPS) -> tuple[list, list]:
        """Sample the GPU once.

        Parameters
        ----------
        groups : int
            Bit set of the signal groups to read (see :data:`GROUPS`); all by default.

        Returns
        -------
        values : list
            One value per :data:`SAMPLE_COLUMNS` entry in SI units: a number (float NaN
            when not supported or not read in this tick; whole-number readings such as
            clocks stay ints); ``throttle_reasons`` an int or None.
        nvml_times : list
            One NVML timestamp per :data:`TIMESTAMP_COLUMNS` entry [us since epoch] or None.
        """
        h = self.handle
        out = [NAN] * _NCOL
        out[7] = None
        ts: list = [None, None, None, None]
        power = groups & 1
        temp = groups & 2
        ids, slots, arr_type, template = self._plans[groups & 3]
        if ids:
            if self._fv_fn is not None:
                buf = bytearray(template)
                ret = self._fv_fn(h, len(ids), arr_type.from_buffer(buf))
                if ret != SUCCESS:
                    raise pynvml.NVMLError(ret)
            else:
                buf = memoryview(pynvml.nvmlDeviceGetFieldValues(h, ids)).cast("B")
            # decode the array in one pass over its bytes: pynvml's structures answer each
            # attribute access through a slow Python __getattribute__
            for rec, (pos, ts_slot, scale) in zip(FV_STRUCT.iter_unpack(buf), slots):
                ret = rec[5]
                if ret == SUCCESS:
                    out[pos] = decode_raw(rec[4], rec[6]) * scale
                    ts[ts_slot] = rec[2]
                elif ret != ERR_NOT_SUPPORTED:
                    raise pynvml.NVMLError(ret)
        has = self._has
        if power:
            if self._power_avg_call:
                out[1] = pynvml.nvmlDeviceGetPowerUsage(h) * 1e-3
            if self._energy_call:
                out[2] = pynvml.nvmlDeviceGetTotalEnergyConsumption(h) * 1e-3
        if temp and has["temp_gpu_c"]:
            out[3] = pynvml.nvmlDeviceGetTemperature(h, 0)
        if groups & 4:
            if has["clock_sm_mhz"]:
                out[5] = pynvml.nvmlDeviceGetClockInfo(h, 1)
            if has["clock_mem_mhz"]:
                out[6] = pynvml.nvmlDeviceGetClockInfo(h, 2)
            if self._throttle_fn is not None:
                out[7] = self._throttle_fn(h)
        if groups & 8 and has["util_gpu_pct"]:
            u = pynvml.nvmlDeviceGetUtilizationRates(h)
            out[8] = u.gpu
            out[9] = u.memory
        if groups & 16 and has["power_limit_w"]:
            out[10] = pynvml.nvmlDeviceGetEnforcedPowerLimit(h) * 1e-3
        return out, ts

    @nvml_errors
    def memory_mib(self) -> tuple[float, float]:
        """Framebuffer memory ``(used, free)`` [MiB]; NaN where unsupported."""
        if not self._memory:
            return NAN, NAN
        m = pynvml.nvmlDeviceGetMemoryInfo(self.handle)
        return m.used / 1048576.0, m.free / 1048576.0

    def __repr__(self) -> str:
        return f"Device(index={self.index}, name={self.info.name!r}, uuid={self.info.uuid!r})"


def error_for(ret: int) -> NVMLError:
    """The powerlab exception for an NVML return code (as :func:`nvml_errors` raises it)."""
    return _to_powerlab(pynvml.NVMLError(ret))


#: NVML event type of XID critical errors (``nvmlEventTypeXidCriticalError``).
EVENT_XID = 8


class XidWatcher:
    """XID critical errors of some GPUs as NVML reports them (its event-set API).

    Parameters
    ----------
    devices : iterable of Device
        GPUs to watch; those that do not support XID events are skipped
        (:attr:`watched` lists the indices watched).
    """

    @nvml_errors
    def __init__(self, devices: Iterable[Device]):
        self._set = pynvml.nvmlEventSetCreate()
        self._by_handle: dict[int, int] = {}
        self.watched: list[int] = []
        for dev in devices:
            try:
                pynvml.nvmlDeviceRegisterEvents(dev.handle, EVENT_XID, self._set)
            except pynvml.NVMLError as exc:
                if exc.value not in (ERR_NOT_SUPPORTED, ERR_FUNCTION_NOT_FOUND):
                    raise
                continue
            self._by_handle[ctypes.cast(dev.handle, ctypes.c_void_p).value] = dev.index
            self.watched.append(dev.index)

    @nvml_errors
    def wait(self, timeout_ms: int) -> tuple[int, int] | None:
        """The next XID as ``(gpu_index, xid)``, or None after ``timeout_ms`` [ms]."""
        try:
            data = pynvml.nvmlEventSetWait_v2(self._set, int(timeout_ms))
        except pynvml.NVMLError as exc:
            if exc.value == ERR_TIMEOUT:
                return None
            raise
        if not data.eventType & EVENT_XID:
            return None
        idx = self._by_handle.get(ctypes.cast(data.device, ctypes.c_void_p).value, -1)
        return idx, int(data.eventData)

    def close(self) -> None:
        try:
            pynvml.nvmlEventSetFree(self._set)
        except pynvml.NVMLError:
            pass
