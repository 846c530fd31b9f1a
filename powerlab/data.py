"""Where the bundled sample data live (``data/`` in a source checkout)."""

from __future__ import annotations

import os
from pathlib import Path

from .exceptions import PowerlabError

__all__ = ["bundled_path", "data_dir"]


def data_dir() -> Path:
    """The folder of bundled data: ``$POWERLAB_DATA`` or the checkout's ``data/``."""
    env = os.environ.get("POWERLAB_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / "data"


def bundled_path(*parts: str) -> Path:
    """Path of a bundled data item; a clear error when it is missing."""
    p = data_dir().joinpath(*parts)
    if not p.exists():
        raise PowerlabError(f"bundled data not found: {p} (set POWERLAB_DATA to the data "
                            "folder of a powerlab checkout)")
    return p
