"""powerlab: power and thermal analytics of GPU clusters.

Data flow: collect / iotools readers -> store -> quality -> analysis & forecast ->
export, charts.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

try:
    __version__ = _version("powerlab")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

from .exceptions import (
    DataQualityWarning,
    OptionError,
    ParseError,
    PowerlabError,
    ScenarioError,
    SchemaError,
    StoreError,
)

__all__ = [
    "DataQualityWarning",
    "OptionError",
    "ParseError",
    "PowerlabError",
    "ScenarioError",
    "SchemaError",
    "StoreError",
    "__version__",
]
