"""NVML return codes and the powerlab exception each one becomes (no ``pynvml`` here).

The codes are copied from ``nvml.h`` so that everything but the boundary module
(:mod:`powerlab.collect.nvml`, the only importer of ``pynvml``) can name them.  Each code
has a *kind* (``"lost"``, ``"timeout"``, ``"unknown"``, ``"not_supported"``,
``"unavailable"``, ``"permission"``, else ``"error"``) and, where the library's own text
says too little, a hint; :func:`powerlab_error` builds the exception from both:
:class:`~powerlab.exceptions.GPULostError` (``NVML_ERROR_GPU_IS_LOST``),
:class:`~powerlab.exceptions.NVMLUnavailableError` (library or driver missing) or
:class:`~powerlab.exceptions.NVMLError`, carrying ``code`` and ``kind``.

References
----------
.. [1] NVIDIA, "NVML API Reference Guide", ``nvmlReturn_t``.
   https://docs.nvidia.com/deploy/nvml-api/
"""

from __future__ import annotations

from ..exceptions import GPULostError, NVMLError, NVMLUnavailableError

__all__ = ["ERR_FUNCTION_NOT_FOUND", "ERR_GPU_IS_LOST", "ERR_NOT_SUPPORTED", "ERR_TIMEOUT",
           "ERR_UNKNOWN", "SUCCESS", "powerlab_error"]

SUCCESS = 0
ERR_UNINITIALIZED = 1
ERR_NOT_SUPPORTED = 3
ERR_NO_PERMISSION = 4
ERR_DRIVER_NOT_LOADED = 9
ERR_TIMEOUT = 10
ERR_LIBRARY_NOT_FOUND = 12
ERR_FUNCTION_NOT_FOUND = 13
ERR_GPU_IS_LOST = 15
ERR_LIB_RM_VERSION_MISMATCH = 18
ERR_UNKNOWN = 999

_KIND = {
    ERR_GPU_IS_LOST: "lost",
    ERR_TIMEOUT: "timeout",
    ERR_UNKNOWN: "unknown",
    ERR_NOT_SUPPORTED: "not_supported",
    ERR_FUNCTION_NOT_FOUND: "not_supported",
    ERR_LIBRARY_NOT_FOUND: "unavailable",
    ERR_DRIVER_NOT_LOADED: "unavailable",
    ERR_LIB_RM_VERSION_MISMATCH: "unavailable",
    ERR_UNINITIALIZED: "unavailable",
    ERR_NO_PERMISSION: "permission",
}
_HINT = {
    ERR_LIBRARY_NOT_FOUND: "NVML library libnvidia-ml.so.1 not found; is the NVIDIA driver "
                           "installed and on the library path?",
    ERR_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded",
    ERR_LIB_RM_VERSION_MISMATCH: "NVML library and kernel driver versions differ "
                                 "(reboot or reload the driver)",
    ERR_UNINITIALIZED: "NVML is not initialised (call powerlab.collect.nvml.init() first)",
}


def powerlab_error(code: int, detail: str) -> NVMLError:
    """The powerlab exception of NVML return ``code``, ``detail`` being the library's
    text of it; the exception carries ``code`` and ``kind``."""
    kind = _KIND.get(code, "error")
    text = _HINT.get(code) or f"NVML error: {detail}"
    if code == ERR_GPU_IS_LOST:
        err: NVMLError = GPULostError(f"GPU is lost (NVML_ERROR_GPU_IS_LOST): {detail}")
    elif kind == "unavailable":
        err = NVMLUnavailableError(text)
    else:
        err = NVMLError(f"{text} (NVML return code {code})")
    err.code = code  # type: ignore[attr-defined]
    err.kind = kind  # type: ignore[attr-defined]
    return err
