"""Lazy re-exports for the wings' ``__init__`` modules (PEP 562).

A wing re-exports the public names of its modules, but importing the wing (which happens
whenever one of its modules is imported) must not import all of them: resolving a name
imports its module on first use only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence

from ._deprecation import deprecated


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]],
                 moved: Mapping[str, Sequence[str]] | None = None
                 ) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package`` re-exporting ``exports``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    exports : mapping of str to sequence of str
        Submodule name -> the public names it contributes.
    moved : mapping of str to sequence of str, optional
        Names this package exported before they moved to another package: new package
        -> names.  They still resolve, with a deprecation warning naming the new home
        (:mod:`powerlab._deprecation`), and are not in ``__all__``.
    """
    where = {name: mod for mod, names in exports.items() for name in names}
    gone = {name: new for new, names in (moved or {}).items() for name in names}
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> object:
        mod = where.get(name)
        if mod is None and name in gone:
            deprecated(f"{package}.{name}", f"{gone[name]}.{name}")
            value = getattr(importlib.import_module(gone[name]), name)
            namespace[name] = value     # warned once (``from x import y`` looks twice)
            return value
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{mod}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(where))

    return sorted(where), __getattr__, __dir__
