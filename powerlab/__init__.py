"""powerlab: power and thermal analytics of GPU clusters.

Data flow (the wings, README "Layout"): iotools, collect -> telemetry -> limits ->
reliability -> site, throughput -> levers -> calibration, interconnect -> flex -> viz.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

try:
    __version__ = _version("powerlab")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

from . import _deprecation
from .exceptions import (
    DataQualityWarning,
    OptionError,
    ParseError,
    PowerlabDeprecationWarning,
    PowerlabError,
    ScenarioError,
    SchemaError,
    StoreError,
)

_deprecation.install()   # the 0.1 import paths (powerlab.grid.*) keep working, warning

__all__ = [
    "DataQualityWarning",
    "OptionError",
    "ParseError",
    "PowerlabDeprecationWarning",
    "PowerlabError",
    "ScenarioError",
    "SchemaError",
    "StoreError",
    "__version__",
]
