"""Boundaries are single modules: only powerlab/viz/render.py imports altair, only
powerlab/collect/nvml.py imports pynvml (checked on the syntax tree of every source file)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "powerlab"

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
# Data flows one way:
#   iotools/, collect/ -> telemetry/ -> grid/, throughput/ -> interconnect/ -> flex/ -> viz/
# with the command line and the demo on top.  Base modules everyone may import:
BASE = {"powerlab", "powerlab.exceptions", "powerlab._lazy", "powerlab._progress"}
#: wing -> the wings its modules may import (besides their own wing and BASE)
ALLOWED = {
    "telemetry": set(),
    "iotools": {"telemetry"},
    "collect": {"telemetry"},
    "throughput": {"telemetry"},
    "grid": {"telemetry"},
    "interconnect": {"telemetry", "grid"},
    "flex": {"telemetry", "grid", "throughput", "interconnect"},
    "viz": {"telemetry", "throughput", "grid", "interconnect", "flex"},
    "top": {"telemetry", "iotools", "collect", "throughput", "grid", "interconnect", "flex",
            "viz", "top"},
}
MAX_LINES = 800
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


def internal_imports(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """powerlab modules imported by a module (anywhere in it, lazy imports included;
    ``if TYPE_CHECKING:`` blocks excluded)."""
    tree = ast.parse(source)
    skip = _type_checking_nodes(tree)
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
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "powerlab":
                target = node.module
            else:
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known else target)
    return {m for m in out if m in known} - {module}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    files = {module_name(p): p for p in package.rglob("*.py")}
    known = set(files)
    return {m: internal_imports(p.read_text(encoding="utf-8"), m, p.name == "__init__.py",
                                known) for m, p in files.items()}


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
    bad = direction_violations({"powerlab.telemetry.store": {"powerlab.grid.forecast"},
                                "powerlab.grid.forecast": {"powerlab.throughput.dvfs"},
                                "powerlab.iotools.x": {"powerlab.collect.nvml"},
                                "powerlab.viz.report": {"powerlab.telemetry.store"},
                                "powerlab.exceptions": {"powerlab.telemetry.schema"}})
    assert len(bad) == 4 and not any(b.startswith("powerlab.viz") for b in bad)
    src = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
           "from ..telemetry import schema\nif TYPE_CHECKING:\n    from ..grid import x\n"
           "def f():\n    from .. import exceptions\n    from .y import z\n")
    known = {"powerlab.telemetry.schema", "powerlab.grid.x", "powerlab.exceptions",
             "powerlab.viz.y"}
    assert internal_imports(src, "powerlab.viz.m", False, known) == {
        "powerlab.telemetry.schema", "powerlab.exceptions", "powerlab.viz.y"}


def test_wings_are_the_top_level_folders():
    wings = sorted(p.name for p in PACKAGE.iterdir()
                   if p.is_dir() and (p / "__init__.py").exists() and p.name != "_cli")
    assert wings == sorted(w for w in ALLOWED if w != "top")


def test_no_import_cycle_between_powerlab_modules():
    graph = import_graph()
    assert len(graph) > 30
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_imports_follow_the_data_flow():
    bad = direction_violations(import_graph())
    assert not bad, "imports against the data flow:\n" + "\n".join(bad)


def test_no_module_over_the_size_limit():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them where a seam exists): {long}"


def private_names_from(source: str, module: str, is_package: bool, wing: str) -> list[str]:
    """Names starting with ``_`` that ``source`` imports from modules of ``wing``."""
    tree = ast.parse(source)
    package = module if is_package else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if target.split(".")[:2] != ["powerlab", wing]:
            continue
        out += [f"{target}.{a.name}" for a in node.names if a.name.startswith("_")]
    return out


def test_the_private_name_check_sees_relative_and_absolute_forms():
    src = ("from ..grid.forecast import _job_ticks, forecast\n"
           "def f():\n    from powerlab.grid.ramps import _x\n"
           "from .compliance import _local\n")
    assert private_names_from(src, "powerlab.interconnect.sizing", False, "grid") == [
        "powerlab.grid.forecast._job_ticks", "powerlab.grid.ramps._x"]


def test_interconnect_reads_grid_through_public_names_only():
    """The interconnect wing sits downstream of grid: it may use grid's public names, never
    its private helpers (grid may change those freely), and grid imports nothing from it
    (the direction test above)."""
    bad = []
    for p in sorted((PACKAGE / "interconnect").rglob("*.py")):
        bad += private_names_from(p.read_text(encoding="utf-8"), module_name(p),
                                  p.name == "__init__.py", "grid")
    assert not bad, f"interconnect imports private names of grid: {bad}"


def test_flex_reads_grid_and_interconnect_through_public_names_only():
    """The flex wing sits downstream of grid, throughput and interconnect: it uses their
    public names only."""
    bad = []
    for p in sorted((PACKAGE / "flex").rglob("*.py")):
        for wing in ("grid", "interconnect", "throughput"):
            bad += private_names_from(p.read_text(encoding="utf-8"), module_name(p),
                                      p.name == "__init__.py", wing)
    assert not bad, f"flex imports private names: {bad}"
