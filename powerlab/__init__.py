"""powerlab: power and thermal analytics of GPU clusters.

Data flow: collect / iotools readers -> store -> quality -> analysis & forecast ->
export, charts.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("powerlab")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

from .exceptions import (  # noqa: E402
    DataQualityWarning,
    ParseError,
    PowerlabError,
    ScenarioError,
    SchemaError,
    StoreError,
)

__all__ = [
    "__version__",
    "PowerlabError",
    "SchemaError",
    "ParseError",
    "ScenarioError",
    "StoreError",
    "DataQualityWarning",
]
