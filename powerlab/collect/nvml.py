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

References
----------
.. [1] NVIDIA, "NVML API Reference Guide", Field Value Enums and Device Queries.
   https://docs.nvidia.com/deploy/nvml-api/
.. [2] Z. Yang, K. Adamek, W. Armour, "Accurate and Convenient Energy Measurements for
   GPUs: A Detailed Study of NVIDIA GPU's Built-In Power Sensor", SC'24, 2024.
"""

from __future__ import annotations

import functools
import math
import struct
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from .._options import choice
from ..exceptions import GPULostError, NVMLError, NVMLUnavailableError

try:  # the optional dependency: pip install "powerlab[nvml]"
    import pynvml
except ImportError:  # pragma: no cover - exercised only without nvidia-ml-py
    pynvml = None

__all__ = [
    "GROUPS",
    "SAMPLE_COLUMNS",
    "TIMESTAMP_COLUMNS",
    "Device",
    "DeviceInfo",
    "XidWatcher",
    "device_count",
    "driver_version",
    "error_for",
    "init",
    "is_available",
    "nvml_errors",
    "open_devices",
    "shutdown",
]

NAN = math.nan

#: Measurements returned by :meth:`Device.read`, in order (canonical names and units).
SAMPLE_COLUMNS: tuple[str, ...] = (
    "power_w", "power_avg_w", "energy_j", "temp_gpu_c", "temp_mem_c", "clock_sm_mhz",
    "clock_mem_mhz", "throttle_reasons", "util_gpu_pct", "util_mem_pct", "power_limit_w",
)
#: NVML's own per-field timestamps [us since the Unix epoch] that follow them in the tuple
#: (``None`` when the value came from an individual call or was not read).
TIMESTAMP_COLUMNS: tuple[str, ...] = (
    "nvml_time_power", "nvml_time_power_avg", "nvml_time_energy", "nvml_time_temp_mem",
)

#: Signal groups that can be sampled at their own rates, and their columns.
GROUPS: dict[str, tuple[str, ...]] = {
    "power": ("power_w", "power_avg_w", "energy_j"),
    "temperature": ("temp_gpu_c", "temp_mem_c"),
    "clocks": ("clock_sm_mhz", "clock_mem_mhz", "throttle_reasons"),
    "utilization": ("util_gpu_pct", "util_mem_pct"),
    "power_limit": ("power_limit_w",),
}
_GROUP_BIT = {g: 1 << i for i, g in enumerate(GROUPS)}
ALL_GROUPS = sum(_GROUP_BIT.values())

# error codes (copied so that this module imports without pynvml)
_SUCCESS = 0
_ERR_UNINITIALIZED = 1
_ERR_NOT_SUPPORTED = 3
ERR_NOT_SUPPORTED = _ERR_NOT_SUPPORTED  # for powerlab.collect.batch
_ERR_NO_PERMISSION = 4
_ERR_DRIVER_NOT_LOADED = 9
_ERR_TIMEOUT = 10
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_FUNCTION_NOT_FOUND = 13
_ERR_GPU_IS_LOST = 15
_ERR_LIB_RM_VERSION_MISMATCH = 18
_ERR_UNKNOWN = 999

_KIND = {
    _ERR_GPU_IS_LOST: "lost",
    _ERR_TIMEOUT: "timeout",
    _ERR_UNKNOWN: "unknown",
    _ERR_NOT_SUPPORTED: "not_supported",
    _ERR_FUNCTION_NOT_FOUND: "not_supported",
    _ERR_LIBRARY_NOT_FOUND: "unavailable",
    _ERR_DRIVER_NOT_LOADED: "unavailable",
    _ERR_LIB_RM_VERSION_MISMATCH: "unavailable",
    _ERR_UNINITIALIZED: "unavailable",
    _ERR_NO_PERMISSION: "permission",
}
_HINT = {
    _ERR_LIBRARY_NOT_FOUND: "NVML library libnvidia-ml.so.1 not found; is the NVIDIA driver "
                            "installed and on the library path?",
    _ERR_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded",
    _ERR_LIB_RM_VERSION_MISMATCH: "NVML library and kernel driver versions differ "
                                  "(reboot or reload the driver)",
    _ERR_UNINITIALIZED: "NVML is not initialised (call powerlab.collect.nvml.init() first)",
}

# field ids (NVML_FI_DEV_*)
FI_MEMORY_TEMP = 82
FI_TOTAL_ENERGY = 83
FI_POWER_AVERAGE = 185
FI_POWER_INSTANT = 186


def _to_powerlab(exc: BaseException) -> NVMLError:
    code = getattr(exc, "value", _ERR_UNKNOWN)
    kind = _KIND.get(code, "error")
    text = _HINT.get(code) or f"NVML error: {exc}"
    if code == _ERR_GPU_IS_LOST:
        err: NVMLError = GPULostError(f"GPU is lost (NVML_ERROR_GPU_IS_LOST): {exc}")
    elif kind == "unavailable":
        err = NVMLUnavailableError(text)
    else:
        err = NVMLError(f"{text} (NVML return code {code})")
    err.code = code  # type: ignore[attr-defined]
    err.kind = kind  # type: ignore[attr-defined]
    return err


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


# c_nvmlFieldValue_t: fieldId u32, scopeId u32, timestamp i64, latencyUsec i64,
# valueType u32, nvmlReturn u32, value (8-byte union) -- 40 bytes, no padding
_FV = struct.Struct("<IIqqIIQ")
_U64 = struct.Struct("<Q")
_DBL = struct.Struct("<d")
_I64 = struct.Struct("<q")


def _decode_raw(vtype: int, raw: int):
    """A field value from its 8 raw bytes (as an unsigned 64-bit int) and its type."""
    if vtype == 1:  # unsigned int
        return raw & 0xFFFFFFFF
    if vtype == 3 or vtype == 2:  # unsigned long long / unsigned long
        return raw
    if vtype == 0:  # double
        return _DBL.unpack(_U64.pack(raw))[0]
    if vtype == 4:  # signed long long
        return _I64.unpack(_U64.pack(raw))[0]
    if vtype == 5:  # signed int
        v = raw & 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v
    return raw & 0xFFFF  # unsigned short


def _supported(call: Callable) -> bool:
    """Run ``call`` once; False on NOT_SUPPORTED / FUNCTION_NOT_FOUND, re-raise others."""
    try:
        call()
    except pynvml.NVMLError as exc:
        if exc.value in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND):
            return False
        raise
    return True


# (column, field id, timestamp slot, scale to SI, fallback call name)
_FIELDS = (
    ("power_w", FI_POWER_INSTANT, 0, 1e-3, None),
    ("power_avg_w", FI_POWER_AVERAGE, 1, 1e-3, "nvmlDeviceGetPowerUsage"),
    ("energy_j", FI_TOTAL_ENERGY, 2, 1e-3, "nvmlDeviceGetTotalEnergyConsumption"),
    ("temp_mem_c", FI_MEMORY_TEMP, 3, 1.0, None),
)
_COL_POS = {c: i for i, c in enumerate(SAMPLE_COLUMNS)}
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
            if exc.value not in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND):
                raise
            serial = ""
        try:
            tdp_w = pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0
        except pynvml.NVMLError as exc:
            if exc.value not in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND):
                raise
            tdp_w = NAN
        caps = self._probe(h)
        pci, minor = "", -1
        try:
            busid = pynvml.nvmlDeviceGetPciInfo(h).busId
            pci = busid.decode() if isinstance(busid, bytes) else str(busid)
        except pynvml.NVMLError as exc:
            if exc.value not in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND):
                raise
        try:
            minor = int(pynvml.nvmlDeviceGetMinorNumber(h))
        except pynvml.NVMLError as exc:
            if exc.value not in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND):
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
        ids = [f[1] for f in _FIELDS]
        try:
            vals = pynvml.nvmlDeviceGetFieldValues(h, ids)
            rets = [v.nvmlReturn for v in vals]
        except pynvml.NVMLError as exc:
            if exc.value not in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND):
                raise
            rets = [_ERR_NOT_SUPPORTED] * len(ids)
        for (col, _fid, _slot, _scale, fallback), ret in zip(_FIELDS, rets):
            if ret == _SUCCESS:
                caps[col] = "field"
                continue
            if ret not in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND):
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
            for col, fid, ts_slot, scale, _fb in _FIELDS:
                want = temp if col == "temp_mem_c" else power
                if want and caps[col] == "field":
                    ids.append(fid)
                    slots.append((_COL_POS[col], ts_slot, scale))
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
                if ret != _SUCCESS:
                    raise pynvml.NVMLError(ret)
            else:
                buf = memoryview(pynvml.nvmlDeviceGetFieldValues(h, ids)).cast("B")
            # decode the array in one pass over its bytes: pynvml's structures answer each
            # attribute access through a slow Python __getattribute__
            for rec, (pos, ts_slot, scale) in zip(_FV.iter_unpack(buf), slots):
                ret = rec[5]
                if ret == _SUCCESS:
                    out[pos] = _decode_raw(rec[4], rec[6]) * scale
                    ts[ts_slot] = rec[2]
                elif ret != _ERR_NOT_SUPPORTED:
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


def group_mask(names: Iterable[str]) -> int:
    """Bit set for signal-group names (see :data:`GROUPS`)."""
    mask = 0
    for n in names:
        choice(n, "signal group", tuple(GROUPS))
        mask |= _GROUP_BIT[n]
    return mask


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
        import ctypes

        self._set = pynvml.nvmlEventSetCreate()
        self._by_handle: dict[int, int] = {}
        self.watched: list[int] = []
        for dev in devices:
            try:
                pynvml.nvmlDeviceRegisterEvents(dev.handle, EVENT_XID, self._set)
            except pynvml.NVMLError as exc:
                if exc.value not in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND):
                    raise
                continue
            self._by_handle[ctypes.cast(dev.handle, ctypes.c_void_p).value] = dev.index
            self.watched.append(dev.index)

    @nvml_errors
    def wait(self, timeout_ms: int) -> tuple[int, int] | None:
        """The next XID as ``(gpu_index, xid)``, or None after ``timeout_ms`` [ms]."""
        import ctypes

        try:
            data = pynvml.nvmlEventSetWait_v2(self._set, int(timeout_ms))
        except pynvml.NVMLError as exc:
            if exc.value == _ERR_TIMEOUT:
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
