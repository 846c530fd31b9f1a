"""Boundaries are single modules: only powerlab/viz/render.py imports altair, only
powerlab/collect/nvml.py imports pynvml (checked on the syntax tree of every source file)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from powerlab._deprecation import MOVED_MODULES, MOVED_PACKAGES

PACKAGE = Path(__file__).resolve().parents[2] / "powerlab"

BOUNDARIES = {
    "altair": "viz/render.py",
    "pynvml": "collect/nvml.py",
}


def imported_modules(source: str) -> set[str]:
    """Top-level names of every module a source imports (statements, ``import_module``
    and ``__import__`` calls with a literal name), wherever the import sits."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant) \
                    and isinstance(arg.value, str):
                found.add(arg.value.split(".")[0])
    return found


def test_detector_sees_every_import_form():
    src = ("import altair as alt\n"
           "def f():\n    from pynvml import nvmlInit\n"
           "import importlib\nimportlib.import_module('vl_convert.x')\n"
           "__import__('duckdb')\nfrom . import charts\n")
    assert imported_modules(src) == {"altair", "pynvml", "importlib", "vl_convert", "duckdb"}


@pytest.mark.parametrize("module,owner", sorted(BOUNDARIES.items()))
def test_single_module_imports_boundary(module, owner):
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 5
    importers = sorted(str(p.relative_to(PACKAGE)) for p in sources
                       if module in imported_modules(p.read_text(encoding="utf-8")))
    assert set(importers) <= {owner}, (
        f"{module} may only be imported in powerlab/{owner}; also imported in "
        f"{[i for i in importers if i != owner]}")
    if (PACKAGE / owner).exists():
        assert importers == [owner], f"powerlab/{owner} should import {module}"


# --------------------------------------------------------------------------- wings
# Data flows one way (README "Layout"):
#   iotools/, collect/ -> telemetry/ -> limits/ -> reliability/ -> site/, throughput/
#   -> levers/ -> calibration/, interconnect/ -> flex/ -> viz/
# with the command line and the demo on top.  Base modules everyone may import:
BASE = {"powerlab", "powerlab.exceptions", "powerlab._lazy", "powerlab._progress",
        "powerlab.outputs", "powerlab._summary", "powerlab._options",
        "powerlab._deprecation"}
#: wing -> the wings its modules may import (besides their own wing and BASE)
ALLOWED = {
    "telemetry": set(),
    "iotools": {"telemetry"},
    "collect": {"telemetry"},
    "limits": {"telemetry"},
    "reliability": {"telemetry", "limits"},
    "site": {"telemetry", "limits", "reliability"},
    "throughput": {"telemetry"},
    "levers": {"telemetry", "limits", "reliability", "site", "throughput"},
    "calibration": {"telemetry", "limits", "site"},
    "interconnect": {"telemetry", "limits", "site", "levers"},
    "flex": {"telemetry", "limits", "reliability", "site", "throughput", "levers",
             "interconnect"},
    "viz": {"telemetry", "limits", "reliability", "site", "throughput", "levers",
            "calibration", "interconnect", "flex"},
    "top": {"telemetry", "iotools", "collect", "limits", "reliability", "site",
            "throughput", "levers", "calibration", "interconnect", "flex", "viz", "top"},
}
MAX_LINES = 600
#: Caps are ceilings, not targets (issue 31): nothing may sit within MARGIN of a cap (a
#: module at 596 of 600 lines says the split was postponed), so the checks compare
#: against ``within(cap)``: 570 lines a module, 76 a function, 9 public parameters.
MARGIN = 0.05


def within(cap: int) -> int:
    """The largest size allowed under ``cap``: below the last 5 % of it."""
    return int(cap * (1 - MARGIN))
#: numbers, column names and times for people (reports, CSVs): a base module too
BASE |= {"powerlab._format"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def wing_of(module: str) -> str:
    parts = module.split(".")
    if module in BASE:
        return "base"
    if len(parts) >= 2 and parts[1] in ALLOWED and parts[1] != "top":
        return parts[1]
    return "top"        # cli, _cli.*, demo, data


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    return skip


def import_from_target(node: ast.ImportFrom, package: str, top: str = "powerlab"
                       ) -> str | None:
    """The absolute module a ``from X import ...`` in ``package`` names: relative forms
    resolved; None for an absolute import of anything but ``top`` (``""``: any)."""
    if node.level:
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))
    if node.module and (not top or node.module.split(".")[0] == top):
        return node.module
    return None


def internal_imports(source: str, module: str, is_package: bool, known: set[str],
                     type_checking: bool = False) -> set[str]:
    """powerlab modules imported by a module (anywhere in it, lazy imports included;
    ``if TYPE_CHECKING:`` blocks excluded unless ``type_checking``)."""
    tree = ast.parse(source)
    skip = set() if type_checking else _type_checking_nodes(tree)
    package = module if is_package else module.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "powerlab":
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            target = import_from_target(node, package)
            if target is None:
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known else target)
    return {m for m in out if m in known} - {module}


def import_graph(package: Path = PACKAGE, type_checking: bool = False
                 ) -> dict[str, set[str]]:
    files = {module_name(p): p for p in package.rglob("*.py")}
    known = set(files)
    return {m: internal_imports(p.read_text(encoding="utf-8"), m, p.name == "__init__.py",
                                known, type_checking) for m, p in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


def direction_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for m, deps in sorted(graph.items()):
        w = wing_of(m)
        if w == "base":
            allowed_wings = {"base"}
        else:
            allowed_wings = ALLOWED[w] | {w, "base"}
        for d in sorted(deps):
            if wing_of(d) not in allowed_wings:
                bad.append(f"{m} ({w}) imports {d} ({wing_of(d)})")
    return bad


def test_the_checks_catch_a_cycle_and_an_upward_import():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    bad = direction_violations({"powerlab.telemetry.store": {"powerlab.site.engine"},
                                "powerlab.site.engine": {"powerlab.throughput.dvfs"},
                                "powerlab.iotools.x": {"powerlab.collect.nvml"},
                                "powerlab.viz.report": {"powerlab.telemetry.store"},
                                "powerlab.exceptions": {"powerlab.telemetry.schema"}})
    assert len(bad) == 4 and not any(b.startswith("powerlab.viz") for b in bad)
    src = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
           "from ..telemetry import schema\nif TYPE_CHECKING:\n    from ..grid import x\n"
           "def f():\n    from .. import exceptions\n    from .y import z\n")
    known = {"powerlab.telemetry.schema", "powerlab.site.x", "powerlab.exceptions",
             "powerlab.viz.y"}
    assert internal_imports(src, "powerlab.viz.m", False, known) == {
        "powerlab.telemetry.schema", "powerlab.exceptions", "powerlab.viz.y"}


def test_wings_are_the_top_level_folders():
    wings = sorted(p.name for p in PACKAGE.iterdir()
                   if p.is_dir() and (p / "__init__.py").exists()
                   and p.name not in ("_cli", "demo"))
    assert wings == sorted(w for w in ALLOWED if w != "top")


def test_no_import_cycle_between_powerlab_modules():
    graph = import_graph()
    assert len(graph) > 30
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycle_through_annotations_either():
    """An ``if TYPE_CHECKING:`` import is an arrow a reader follows too: no cycle may
    close through one (a type the hooks name lives below the registry, not beside it)."""
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    assert internal_imports(src, "powerlab.w.a", False, {"powerlab.w.b"}) == set()
    assert internal_imports(src, "powerlab.w.a", False, {"powerlab.w.b"},
                            type_checking=True) == {"powerlab.w.b"}
    graph = import_graph(type_checking=True)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_imports_follow_the_data_flow():
    bad = direction_violations(import_graph())
    assert not bad, "imports against the data flow:\n" + "\n".join(bad)


def test_the_margin_keeps_sizes_off_the_caps():
    assert (within(MAX_LINES), within(MAX_FUNCTION_LINES), within(MAX_PUBLIC_PARAMETERS)) \
        == (570, 76, 9)


def test_no_module_over_the_size_limit():
    cap = within(MAX_LINES)
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > cap}
    assert not long, (f"modules over {cap} lines (cap {MAX_LINES}, none within "
                      f"{MARGIN:.0%} of it; split them by concept): {long}")


def private_imports(source: str, module: str, is_package: bool, known: set[str]) -> list[str]:
    """``target._name`` for every private name ``source`` imports from another powerlab
    module (relative and absolute forms, lazy imports inside functions included).  A
    private *module* (``from . import _outputs``) is a package's internal helper and
    allowed; ``__future__``-style dunder names are not private."""
    tree = ast.parse(source)
    package = module if is_package else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = import_from_target(node, package)
        if target is None:
            continue
        if target == module:
            continue
        out += [f"{target}.{a.name}" for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
                and f"{target}.{a.name}" not in known]
    return out


def test_the_private_import_check_catches_every_form():
    known = {"powerlab.telemetry.store", "powerlab._cli._outputs", "powerlab._cli.comply",
             "powerlab.site.engine"}
    src = ("from .store import _as_utc as _utc, list_files\n"
           "def f():\n    from powerlab.site.engine import _TICK_DRAWS_PER_S\n"
           "    from ..grid import forecast\n"
           "from .._cli import _outputs\n"
           "from __future__ import annotations\n")
    assert private_imports(src, "powerlab.telemetry.jobs", False, known) == [
        "powerlab.telemetry.store._as_utc", "powerlab.site.engine._TICK_DRAWS_PER_S"]
    # the package form: `from . import _x` in an __init__ names the package itself
    assert private_imports("from .comply import _time\n", "powerlab._cli", True, known) == [
        "powerlab._cli.comply._time"]
    assert private_imports("from . import _time\n", "powerlab._cli.study_package", False,
                           known) == ["powerlab._cli._time"]


def test_no_module_imports_another_modules_private_name():
    """A private name (``_x``) belongs to its module, which may change it freely; what
    modules share is a public name (documented where it is defined)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(files)
    bad = [f"{m} imports {name}" for m, p in sorted(files.items())
           for name in private_imports(p.read_text(encoding="utf-8"), m,
                                       p.name == "__init__.py", known)]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


# --------------------------------------------------------------------------- sizes
# Issues 26 and 31: the longest functions become short chains of named steps, and option
# sets become small parameter objects.  Every function (methods and nested functions too)
# stays within within(MAX_FUNCTION_LINES) lines, from its ``def`` to its last line (docstring included,
# decorators not); every public function takes at most within(MAX_PUBLIC_PARAMETERS)
# parameters
# (``self``/``cls`` not counted; ``*args`` and ``**kwargs`` one each).  Public: no name on
# the way to it (module path, class, function) starts with an underscore, and it is not
# nested in a function; dunder methods such as ``__init__`` start with one.
MAX_FUNCTION_LINES = 80
MAX_PUBLIC_PARAMETERS = 10


def function_sizes(source: str, module: str) -> list[tuple[str, int, int, bool]]:
    """``(qualified name, lines, parameters, public)`` of every function in ``source``
    (module ``module``, e.g. ``powerlab.flex.plan``), in source order."""
    out: list[tuple[str, int, int, bool]] = []
    module_public = not any(p.startswith("_") for p in module.split("."))

    def visit(node: ast.AST, prefix: str, public: bool, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                named = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
                n = (sum(p not in ("self", "cls") for p in named)
                     + (a.vararg is not None) + (a.kwarg is not None))
                pub = public and not in_function and not child.name.startswith("_")
                name = f"{prefix}{child.name}"
                out.append((name, child.end_lineno - child.lineno + 1, n, pub))
                visit(child, name + ".", False, True)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.",
                      public and not in_function and not child.name.startswith("_"),
                      in_function)
            else:
                visit(child, prefix, public, in_function)

    visit(ast.parse(source), f"{module}.", module_public, False)
    return out


def _all_function_sizes() -> list[tuple[str, int, int, bool]]:
    sizes = []
    for p in sorted(PACKAGE.rglob("*.py")):
        sizes += function_sizes(p.read_text(encoding="utf-8"), module_name(p))
    return sizes


def test_the_size_checks_catch_a_long_function_and_a_wide_public_one():
    body = "    x = 1\n"
    n_lines, n_params = within(MAX_FUNCTION_LINES), within(MAX_PUBLIC_PARAMETERS)   # 76, 9
    params = ", ".join(f"a{i}" for i in range(n_params + 1))                       # 10
    src = (f"def long_one():\n{body * n_lines}"              # 77 lines: over
           f"def just_fits():\n{body * (n_lines - 1)}"        # 76 lines: fits
           f"def wide({params}):\n    pass\n"                # 10 parameters, public: over
           f"def _wide_private({params}):\n    pass\n"       # private: no parameter limit
           "def nine(a, b, c, d, e, f, g, h, *rest):\n    pass\n"
           "class Pub:\n"
           f"    def method(self, {params}):\n        pass\n"      # public method: over
           f"    def __init__(self, {params}):\n        pass\n"    # dunder: not public
           "    @classmethod\n"
           "    def make(cls, a, b, c, d, e, f, g, h, *args, **kw):\n        pass\n"
           "class _Priv:\n"
           f"    def method(self, {params}):\n        pass\n"
           "def outer():\n"
           f"    def inner({params}):\n{'        x = 1' + chr(10)}"
           f"    def long_inner():\n{('    ' + body) * n_lines}"
           "    return inner\n")
    sizes = {name: (lines, n, pub) for name, lines, n, pub in
             function_sizes(src, "powerlab.wing.mod")}
    long = {n.split(".")[-1] for n, (lines, _, _) in sizes.items() if lines > n_lines}
    assert long == {"long_one", "outer", "long_inner"}
    assert sizes["powerlab.wing.mod.just_fits"][0] == n_lines
    wide = sorted(n for n, (_, k, pub) in sizes.items() if pub and k > n_params)
    assert wide == ["powerlab.wing.mod.Pub.make", "powerlab.wing.mod.Pub.method",
                    "powerlab.wing.mod.wide"]
    assert sizes["powerlab.wing.mod.nine"][1:] == (9, True)
    assert sizes["powerlab.wing.mod.Pub.make"][1:] == (10, True)   # *args, **kw count
    assert sizes["powerlab.wing.mod.outer.inner"][1:] == (10, False)
    assert sizes["powerlab.wing.mod._Priv.method"][1:] == (10, False)
    # a private module has no public functions
    assert not any(pub for *_, pub in function_sizes(src, "powerlab._cli.mod"))


def test_no_function_over_the_length_limit():
    """A function over the limit is split into named steps (pvlib ModelChain style)."""
    sizes = _all_function_sizes()
    assert len(sizes) > 500
    cap = within(MAX_FUNCTION_LINES)
    long = {name: lines for name, lines, _, _ in sizes if lines > cap}
    assert not long, (f"functions over {cap} lines (cap {MAX_FUNCTION_LINES}; split them into "
                      f"named steps): {long}")


def test_no_public_function_over_the_parameter_limit():
    """Options of a public function that grow past the limit are grouped into small
    frozen parameter objects (e.g. flex.plan.PlanMargins)."""
    cap = within(MAX_PUBLIC_PARAMETERS)
    wide = {name: n for name, _, n, pub in _all_function_sizes() if pub and n > cap}
    assert not wide, (f"public functions over {cap} parameters (cap {MAX_PUBLIC_PARAMETERS}; "
                      f"group options into parameter objects): {wide}")


# --------------------------------------------------------------------------- deprecations
def deprecated_imports(source: str, module: str, is_package: bool) -> list[str]:
    """Every deprecated path (:mod:`powerlab._deprecation`) or moved wing name that
    ``source`` imports, in any import form."""
    moved_names = _moved_wing_names()
    tree = ast.parse(source)
    package = module if is_package else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if _is_deprecated_path(a.name)]
        elif isinstance(node, ast.ImportFrom):
            target = import_from_target(node, package, top="")
            if target is None:
                continue
            if _is_deprecated_path(target):
                out.append(target)
                continue
            for a in node.names:
                if _is_deprecated_path(f"{target}.{a.name}") or \
                        a.name in moved_names.get(target, ()):
                    out.append(f"{target}.{a.name}")
    return out


def _is_deprecated_path(name: str) -> bool:
    return name in MOVED_MODULES or any(name == p or name.startswith(p + ".")
                                        for p in MOVED_PACKAGES)


def _moved_wing_names() -> dict[str, set[str]]:
    """wing package -> names it forwards with a deprecation (its ``_MOVED``)."""
    out = {}
    for init in PACKAGE.glob("*/__init__.py"):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_MOVED":
                names = ast.literal_eval(node.value)
                out[f"powerlab.{init.parent.name}"] = {n for v in names.values() for n in v}
    return out


def test_the_deprecation_check_catches_every_form():
    src = ("import powerlab.grid.forecast\nfrom powerlab.grid import scenario\n"
           "from ..grid.swings import check_limits\nfrom ..throughput import fit_hazard\n"
           "from powerlab.interconnect import read_requirements, comply\n"
           "def f():\n    from ..interconnect.requirements import Requirement\n"
           "from ..site import forecast\nfrom ..limits import ramps\n")
    assert deprecated_imports(src, "powerlab.flex.plan", False) == [
        "powerlab.grid.forecast", "powerlab.grid", "powerlab.grid.swings",
        "powerlab.throughput.fit_hazard", "powerlab.interconnect.read_requirements",
        "powerlab.interconnect.requirements"]


def test_the_library_imports_no_deprecated_path():
    """The 0.1 paths (``powerlab.grid.*``, the interconnect shims, names moved out of
    throughput) stay for users' notebooks only; powerlab itself uses the new ones."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    bad = [f"{m} imports {name}" for m, p in sorted(files.items())
           if m != "powerlab._deprecation"
           for name in deprecated_imports(p.read_text(encoding="utf-8"), m,
                                          p.name == "__init__.py")]
    assert not bad, "deprecated paths imported by the library:\n" + "\n".join(bad)
    assert not (PACKAGE / "grid").exists(), "powerlab/grid/ is gone: grid is the utility's"



# --------------------------------------------------------------------------- import placement
# Imports sit at module top, where they show the arrows of the house (docs/contributing.md
# "Rules the suite checks"; pvlib and xarray do the same).  Two exceptions:
# - an optional extra, imported where it is used so that the core install works without it;
# - the command line's run functions (powerlab/cli.py, powerlab/_cli/), which load the
#   library only when a command runs, so that ``powerlab --help`` stays light
#   (tests/system/test_startup.py).
#: import name -> the distribution of an optional extra (pyproject's optional-dependencies)
OPTIONAL_EXTRAS = {
    "pynvml": "nvidia-ml-py", "prometheus_client": "prometheus-client",
    "altair": "altair", "vl_convert": "vl-convert-python", "dask": "dask",
    "distributed": "dask", "openpyxl": "openpyxl", "comtrade": "comtrade",
    "IPython": "ipykernel", "nbclient": "nbclient", "jsonschema": "jsonschema",
}


def _pyproject() -> dict:
    import tomllib
    return tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_optional_extras_are_optional():
    meta = _pyproject()["project"]
    core = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower()
            for d in meta["dependencies"]}
    extras = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower()
              for deps in meta["optional-dependencies"].values() for d in deps}
    for module, dist in OPTIONAL_EXTRAS.items():
        assert dist.lower() in extras, f"{module}: {dist} is in no extra"
        assert dist.lower() not in core, f"{module}: {dist} is a core dependency"


def imports_in_functions(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import inside a function (methods, nested functions
    and lambdas' enclosing functions included); relative imports keep their dots."""
    out = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                out += [(node.lineno, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                out.append((node.lineno, "." * node.level + (node.module or "")))
    return sorted(set(out))


def test_the_import_placement_check_sees_every_function():
    src = ("import os\n"
           "def f():\n    import json\n    from .x import y\n"
           "class C:\n    def m(self):\n        def inner():\n"
           "            from pynvml import nvmlInit\n        return inner\n")
    assert imports_in_functions(src) == [(3, "json"), (4, ".x"), (8, "pynvml")]


def test_imports_sit_at_module_top():
    bad = []
    for p in sorted(PACKAGE.rglob("*.py")):
        rel = p.relative_to(PACKAGE).as_posix()
        if rel == "cli.py" or rel.startswith("_cli/"):
            continue
        bad += [f"powerlab/{rel}:{line} imports {mod} inside a function"
                for line, mod in imports_in_functions(p.read_text(encoding="utf-8"))
                if mod.split(".")[0] not in OPTIONAL_EXTRAS]
    assert not bad, ("imports belong at module top (only optional extras and the command "
                     "line's run functions defer them):\n" + "\n".join(bad))


# --------------------------------------------------------------------------- results
def _results_classes() -> list[type]:
    """Every class defined in powerlab that has a ``summary`` method."""
    import importlib
    import inspect

    found = []
    for m in sorted(import_graph()):
        mod = importlib.import_module(m)
        found += [c for _, c in inspect.getmembers(mod, inspect.isclass)
                  if c.__module__ == m and "summary" in vars(c)]
    return found


def test_every_results_class_derives_from_the_one_base_and_renders_through_it():
    """statsmodels' ``Results``: one base carries summary, summary_frame and the reprs
    (issue 31 item 5); a results class defines none of the reprs itself."""
    from powerlab._summary import Results, Summary

    classes = _results_classes()
    assert len(classes) >= 20
    bad = [f"{c.__module__}.{c.__qualname__}: not a Results" for c in classes
           if c is not Summary and not issubclass(c, Results)]
    bad += [f"{c.__module__}.{c.__qualname__} defines {name}" for c in classes
            if c is not Summary and c is not Results
            for name in ("__repr__", "__str__", "_repr_html_") if name in vars(c)]
    bad += [f"{c.__module__}.{c.__qualname__}: no summary_frame" for c in classes
            if c not in (Summary, Results)
            and getattr(c, "summary_frame") is Results.summary_frame]
    assert not bad, "\n".join(bad)


def test_notebooks_benchmarks_and_readme_use_no_deprecated_path():
    """What users copy from (notebooks, the README, the benchmarks) shows the 0.2 paths."""
    import json

    repo = PACKAGE.parent
    sources = {str(p.relative_to(repo)): p.read_text(encoding="utf-8")
               for p in sorted((repo / "benchmarks").glob("*.py"))}
    for nb in sorted((repo / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] == "code":
                src = "".join(cell["source"])
                sources[f"{nb.name} cell {i}"] = "\n".join(
                    line for line in src.splitlines()
                    if not line.lstrip().startswith(("%", "!")))
    readme = (repo / "README.md").read_text(encoding="utf-8")
    for k, block in enumerate(readme.split("```python\n")[1:]):
        sources[f"README.md python block {k}"] = block.split("```")[0]
    assert len(sources) > 20
    bad = [f"{where}: {name}" for where, src in sources.items()
           for name in deprecated_imports(src, "user", False)]
    assert not bad, "deprecated paths in user-facing code:\n" + "\n".join(bad)
