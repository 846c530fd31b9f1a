"""Deprecated import paths of the 0.2 recut, kept working for one release.

Release 0.2.0 recut the middle wings (issue 31): the facility forecast moved from
``powerlab.grid`` to :mod:`powerlab.site` ("grid" now means only the utility's grid),
what a utility or a scenario states moved to :mod:`powerlab.limits`, and failure
analytics moved from :mod:`powerlab.throughput` to :mod:`powerlab.reliability`.  The old
paths still import, with a :class:`~powerlab.exceptions.PowerlabDeprecationWarning` that
names the new path and the release that removes the old one (pvlib's
``pvlib/_deprecation.py`` is the model: since, removal, alternative).

- a moved *module* (``import powerlab.grid.forecast``, ``from powerlab.grid.scenario import
  read_scenario``) is the new module itself, found by a meta-path finder that
  :mod:`powerlab` installs on import (:func:`install`);
- the removed *package* ``powerlab.grid`` is a forwarding module whose names resolve in
  the wings that hold them now;
- a name moved out of a wing's ``__init__`` (``powerlab.throughput.fit_hazard``) is
  forwarded by that wing's lazy exports (:func:`powerlab._lazy.lazy_exports`, ``moved=``).

The library itself imports none of these paths (``tests/system/test_boundaries.py``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

from .exceptions import PowerlabDeprecationWarning

__all__ = ["DEPRECATED_IN", "MOVED_MODULES", "MOVED_NAMES", "MOVED_PACKAGES", "REMOVED_IN",
           "deprecated", "install"]

#: The release that deprecated the paths below, and the one that removes them.
DEPRECATED_IN = "0.2.0"
REMOVED_IN = "0.3.0"

#: Old module path -> the module that holds its contents now.
MOVED_MODULES: dict[str, str] = {
    **{f"powerlab.grid.{m}": f"powerlab.site.{m}" for m in (
        "battery", "chunks", "disturbances", "export", "facility", "interruption_sim",
        "jobplan", "mitigations", "planner", "reduction", "results", "scenario", "stagger",
        "swings", "timebase", "transients", "uncertainty")},
    "powerlab.grid.forecast": "powerlab.site.engine",
    **{f"powerlab.grid.{m}": f"powerlab.limits.{m}" for m in (
        "requirements", "loadmetrics", "ramps", "interval_ramps", "yamlspec")},
    "powerlab.grid.interruptions": "powerlab.reliability.interruptions",
    "powerlab.interconnect.requirements": "powerlab.limits.requirements",
    "powerlab.interconnect.loadmetrics": "powerlab.limits.loadmetrics",
    "powerlab.throughput.hazard": "powerlab.reliability.hazard",
    "powerlab.throughput.reliability": "powerlab.reliability.rates",
    "powerlab.throughput.survival": "powerlab.reliability.survival",
    "powerlab.viz.grid_charts": "powerlab.viz",   # its charts are split by concept
    "powerlab.flex.curve": "powerlab.flex",
    "powerlab.flex.levers": "powerlab.levers",
    "powerlab.flex.merit": "powerlab.levers",
    "powerlab.interconnect.smoothing": "powerlab.levers.smoothing",
    "powerlab.interconnect.storage": "powerlab.levers.storage",
}

_EVALUATION = {n: "powerlab.limits.evaluation" for n in (
    "ASSESSABLE", "NOT_ASSESSABLE", "PARTIAL", "evaluate_power", "metric_name",
    "plan_requirements", "rule_note")}
_SCENARIO_LIMITS = {n: "powerlab.limits.scenario_limits" for n in (
    "LIMIT_BANDS_HZ", "Limits", "SCENARIO_LIMITS", "limits_spec", "parse_limits")}

#: Names of a moved 0.1 module that now live apart from the rest of it (old module ->
#: name -> the module that holds it): the old path forwards each to its own home.
MOVED_NAMES: dict[str, dict[str, str]] = {
    "powerlab.grid.requirements": {**_EVALUATION, **_SCENARIO_LIMITS},
    "powerlab.interconnect.requirements": {**_EVALUATION, **_SCENARIO_LIMITS},
    "powerlab.grid.scenario": {"BOUNDARIES": "powerlab.limits.requirements",
                               "CoolingModel": "powerlab.site.facility",
                               "Site": "powerlab.site.facility",
                               "Hardware": "powerlab.site.hardware"},
    "powerlab.grid.export": {"read_facilities_csv": "powerlab.site.export_reader",
                             "write_facilities_xlsx": "powerlab.site.export_workbook"},
    "powerlab.grid.interruptions": {n: "powerlab.reliability.interruption_draws" for n in (
        "cause_rows", "interruption_frame", "interruption_marks", "interruption_stats",
        "interruption_summary", "planned_mask")},
    "powerlab.grid.forecast": {"JobDraw": "powerlab.site.randomness",
                               "job_randomness": "powerlab.site.randomness",
                               "memory_estimate_bytes": "powerlab.site.memory"},
}

#: Removed package -> the packages whose public names it forwards, in lookup order.
MOVED_PACKAGES: dict[str, tuple[str, ...]] = {
    "powerlab.grid": ("powerlab.site", "powerlab.limits", "powerlab.reliability"),
}


def deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``.

    The message reads "``old`` was deprecated in powerlab 0.2.0 and will be removed in
    0.3.0; use ``new`` instead." (pvlib's wording).
    """
    warnings.warn(f"{old} was deprecated in powerlab {DEPRECATED_IN} and will be removed in "
                  f"{REMOVED_IN}; use {new} instead", PowerlabDeprecationWarning,
                  stacklevel=stacklevel)


def _forwarding_module(name: str) -> types.ModuleType:
    """The moved module ``name`` whose names went to more than one home
    (:data:`MOVED_NAMES`): each name resolves where it lives now."""
    main, moved = MOVED_MODULES[name], MOVED_NAMES[name]
    module = types.ModuleType(name, f"Deprecated: use {main} (removed in powerlab "
                                    f"{REMOVED_IN}).")

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr in moved:
            deprecated(f"{name}.{attr}", f"{moved[attr]}.{attr}", stacklevel=3)
            value = getattr(importlib.import_module(moved[attr]), attr)
        else:
            value = getattr(importlib.import_module(main), attr)
        module.__dict__[attr] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(dir(importlib.import_module(main))) | set(moved))

    module.__getattr__ = __getattr__
    module.__dir__ = __dir__
    return module


def _forwarding_package(name: str) -> types.ModuleType:
    """The removed package ``name``: its names (and submodules) resolve in the new wings."""
    homes = MOVED_PACKAGES[name]
    module = types.ModuleType(name, f"Deprecated: use {' / '.join(homes)} "
                                    f"(removed in powerlab {REMOVED_IN}).")
    module.__path__ = []

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        sub = f"{name}.{attr}"
        if sub in MOVED_MODULES:
            value = importlib.import_module(MOVED_MODULES[sub])
        else:
            home = next((h for h in homes
                         if attr in getattr(importlib.import_module(h), "__all__", ())), None)
            if home is None:
                raise AttributeError(f"module {name!r} has no attribute {attr!r} (it was "
                                     f"deprecated in {DEPRECATED_IN}; look in "
                                     f"{', '.join(homes)})")
            value = getattr(importlib.import_module(home), attr)
        deprecated(sub, MOVED_MODULES[sub] if sub in MOVED_MODULES else f"{home}.{attr}",
                   stacklevel=3)
        module.__dict__[attr] = value   # warned once (``from x import y`` looks twice)
        return value

    module.__getattr__ = __getattr__
    return module


class _MovedPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the deprecated paths only; every other import passes by."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED_MODULES or fullname in MOVED_PACKAGES:
            return importlib.util.spec_from_loader(fullname, self,
                                                   is_package=fullname in MOVED_PACKAGES)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__
        level = 3       # warn <- deprecated <- here <- the importer (warnings skips importlib)
        if name in MOVED_PACKAGES:
            deprecated(name, " / ".join(MOVED_PACKAGES[name]), stacklevel=level)
            sys.modules[name] = _forwarding_package(name)
            return
        new = MOVED_MODULES[name]
        deprecated(name, new, stacklevel=level)
        # the import system returns sys.modules[name] after exec_module: the old path
        # *is* the new module (same objects, same functions to patch), or, where some of
        # its names live elsewhere now, a module that forwards each name to its home
        sys.modules[name] = (_forwarding_module(name) if name in MOVED_NAMES
                             else importlib.import_module(new))


_FINDER = _MovedPaths()


def install() -> None:
    """Put the finder of deprecated paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedPaths) for f in sys.meta_path):
        sys.meta_path.append(_FINDER)
