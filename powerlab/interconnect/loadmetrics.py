"""The metrics a utility asks of a large load: moved to :mod:`powerlab.grid.loadmetrics`.

Issue 26: a scenario's ``limits:`` and an interconnection requirement spec are evaluated
by the same code, which the grid wing (below this one) must be able to import; this name
stays so that existing imports keep working.
"""

from ..grid import loadmetrics as _moved
from ..grid.loadmetrics import *
from ..grid.loadmetrics import BANDPASS_ORDER  # noqa: F401

__all__ = list(_moved.__all__)
