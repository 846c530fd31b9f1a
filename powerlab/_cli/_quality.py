"""Cross-device quality warnings shared by ``powerlab import`` and ``powerlab summary``."""

from __future__ import annotations

import sys


def warn_identical_devices(df, column: str = "power_w", file=None) -> int:
    """Print one warning line per group of devices with identical series; return the
    number of groups (see :func:`powerlab.telemetry.quality.duplicate_devices`)."""
    from ..telemetry.quality import duplicate_devices

    if column not in df.columns or df.empty:
        return 0
    found = duplicate_devices(df, column)
    for line in found.lines():
        print(f"warning: {line}", file=file or sys.stdout)
    return len(found)
