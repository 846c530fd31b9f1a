"""Interconnection requirement specs: moved to :mod:`powerlab.grid.requirements`.

Issue 26: a scenario's ``limits:`` block is read as a requirement spec
(:func:`powerlab.grid.requirements.limits_spec`) and evaluated by the same code as a
utility's spec, so the spec lives in the grid wing (below this one); this name stays so
that existing imports keep working.
"""

from ..grid import requirements as _moved
from ..grid.requirements import *
from ..grid.requirements import (  # noqa: F401
    MAX_BAND_HZ,
    MAX_SAG_S,
    MAX_WINDOW_S,
    MIN_BAND_HZ,
)

__all__ = list(_moved.__all__)
