"""What one NVML sample holds: the measured columns, NVML's own timestamps, signal groups.

:meth:`powerlab.collect.nvml.Device.read` returns one value per :data:`SAMPLE_COLUMNS`
entry and one NVML timestamp per :data:`TIMESTAMP_COLUMNS` entry; the columns fall into
the signal groups of :data:`GROUPS`, each of which a collector may read at its own rate
(``signal_intervals_s``).  A set of groups is a bit set (:func:`group_mask`), bit ``i``
for the ``i``-th group of :data:`GROUPS`.
"""

from __future__ import annotations

from collections.abc import Iterable

from .._options import choice

__all__ = ["ALL_GROUPS", "GROUPS", "SAMPLE_COLUMNS", "TIMESTAMP_COLUMNS", "group_mask"]

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
#: The bit set of every signal group.
ALL_GROUPS = sum(_GROUP_BIT.values())


def group_mask(names: Iterable[str]) -> int:
    """Bit set for signal-group names (see :data:`GROUPS`)."""
    mask = 0
    for n in names:
        choice(n, "signal group", tuple(GROUPS))
        mask |= _GROUP_BIT[n]
    return mask
