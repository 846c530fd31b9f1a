"""The 0.1 import paths keep working for one release (issue 31): a moved module is the new
module itself, the removed ``powerlab.grid`` package forwards its names, and names moved
out of a wing's ``__init__`` resolve; each warns once with a
``PowerlabDeprecationWarning`` naming the new path and the release that removes the old
one (pvlib's ``_deprecation.py`` wording: deprecated in, removed in, use instead)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings

import pytest

from powerlab import _deprecation
from powerlab._deprecation import (
    DEPRECATED_IN,
    MOVED_MODULES,
    MOVED_NAMES,
    MOVED_PACKAGES,
    REMOVED_IN,
)
from powerlab.exceptions import PowerlabDeprecationWarning

from .conftest import TEST_DATA

#: Every module of powerlab 0.1.0 with an ``__all__`` and the names in it, listed from
#: commit 6b16388 (the last 0.1 commit) by importing each module (see its README).
API_01 = json.loads((TEST_DATA / "api" / "powerlab-0.1.0-all.json").read_text())


def _fresh(name: str) -> None:
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]


def _message_names(msg: str, old: str, new: str) -> None:
    assert old in msg and new in msg, msg
    assert f"deprecated in powerlab {DEPRECATED_IN}" in msg and f"removed in {REMOVED_IN}" in msg


def test_the_versions_are_a_release_apart_and_the_package_is_at_the_deprecating_one():
    import powerlab
    major, minor = (int(x) for x in DEPRECATED_IN.split(".")[:2])
    assert REMOVED_IN == f"{major}.{minor + 1}.0"
    assert powerlab.__version__.split("+")[0] in (DEPRECATED_IN, "0.0.0")


@pytest.mark.parametrize("old,new", sorted(MOVED_MODULES.items()))
def test_a_moved_module_is_the_new_module_and_warns(old, new):
    _fresh(old)
    with pytest.warns(PowerlabDeprecationWarning) as rec:
        mod = importlib.import_module(old)
    # (the first import of powerlab.grid.x also warns for the package powerlab.grid)
    _message_names(str(rec[-1].message), old, new)
    if old not in MOVED_NAMES:
        assert mod is importlib.import_module(new)
        assert mod.__name__ == new and mod.__spec__.name == new  # the real module, untouched
        return
    # some of its names live elsewhere now: the old path forwards each to its home
    real = importlib.import_module(new)
    public = [n for n in getattr(real, "__all__", ()) if n not in MOVED_NAMES[old]]
    for name in public[:5]:
        assert getattr(mod, name) is getattr(real, name)
    for name, home in MOVED_NAMES[old].items():
        with pytest.warns(PowerlabDeprecationWarning) as rec:
            value = getattr(mod, name)
        assert value is getattr(importlib.import_module(home), name)
        _message_names(str(rec[0].message), f"{old}.{name}", f"{home}.{name}")


def test_from_import_of_a_moved_module_points_the_warning_at_the_caller(tmp_path):
    script = tmp_path / "user_notebook_cell.py"
    script.write_text("from powerlab.grid.forecast import forecast\n"
                      "print(forecast.__module__)\n")
    out = subprocess.run([sys.executable, "-W", "always", str(script)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "powerlab.site.engine"
    assert "user_notebook_cell.py:1: PowerlabDeprecationWarning: powerlab.grid.forecast" \
        in out.stderr, out.stderr


def test_the_removed_grid_package_forwards_every_public_name_of_its_successors():
    _fresh("powerlab.grid")
    with pytest.warns(PowerlabDeprecationWarning, match="powerlab.grid was deprecated"):
        grid = importlib.import_module("powerlab.grid")
    homes = MOVED_PACKAGES["powerlab.grid"]
    seen = 0
    for home in homes:
        pkg = importlib.import_module(home)
        for name in pkg.__all__:
            if f"powerlab.grid.{name}" in MOVED_MODULES:   # grid.forecast: the old module
                continue
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always")
                value = getattr(grid, name)
            # the first home that holds the name answers (site before limits)
            first = next(h for h in homes if name in importlib.import_module(h).__all__)
            assert value is getattr(importlib.import_module(first), name)
            if rec:     # a name already forwarded once is cached and warns no more
                _message_names(str(rec[0].message), f"powerlab.grid.{name}", first)
            seen += 1
    assert seen > 40
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        grid.no_such_name   # noqa: B018


def test_the_old_forecast_attribute_of_grid_is_the_engine_module():
    _fresh("powerlab.grid")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PowerlabDeprecationWarning)
        grid = importlib.import_module("powerlab.grid")
        assert grid.forecast is importlib.import_module("powerlab.site.engine")


@pytest.mark.parametrize("package,name,home", [
    ("powerlab.throughput", "fit_hazard", "powerlab.reliability"),
    ("powerlab.throughput", "kaplan_meier", "powerlab.reliability"),
    ("powerlab.throughput", "failure_rates", "powerlab.reliability"),
    ("powerlab.interconnect", "read_requirements", "powerlab.limits"),
    ("powerlab.interconnect", "ramp_of_means", "powerlab.limits"),
])
def test_a_name_moved_out_of_a_wing_resolves_with_a_warning(package, name, home):
    pkg = importlib.import_module(package)
    pkg.__dict__.pop(name, None)
    with pytest.warns(PowerlabDeprecationWarning) as rec:
        value = getattr(pkg, name)
    assert value is getattr(importlib.import_module(home), name)
    _message_names(str(rec[0].message), f"{package}.{name}", f"{home}.{name}")
    assert name not in pkg.__all__          # not advertised any more


def test_unknown_names_and_paths_are_still_errors():
    with pytest.raises(AttributeError):
        importlib.import_module("powerlab.throughput").no_such_name   # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("powerlab.grid.no_such_module")


def test_the_finder_is_installed_once_and_passes_other_imports_by():
    _deprecation.install()
    _deprecation.install()
    assert sum(isinstance(f, _deprecation._MovedPaths) for f in sys.meta_path) == 1
    assert _deprecation._FINDER.find_spec("powerlab.site.engine") is None
    assert _deprecation._FINDER.find_spec("json") is None


@pytest.mark.parametrize("module", sorted(API_01))
def test_every_public_name_of_0_1_still_imports_from_its_0_1_module(module):
    """A notebook written against 0.1 runs on 0.2: ``from <0.1 module> import <name>``
    works for every name of every 0.1 module's ``__all__`` (warning where it moved)."""
    names = API_01[module]
    missing = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PowerlabDeprecationWarning)
        mod = importlib.import_module(module)
        for name in names:
            try:
                getattr(mod, name)
            except AttributeError:
                missing.append(name)
    assert not missing, f"{module}: {missing} no longer import from their 0.1 module"


def test_the_0_1_listing_is_whole():
    assert len(API_01) > 100 and sum(map(len, API_01.values())) > 900
    assert "forecast" in API_01["powerlab.grid.forecast"]
    assert "read_requirements" in API_01["powerlab.interconnect.requirements"]
