"""Boundaries are single modules: only powerlab/viz/charts.py imports altair, only
powerlab/collect/nvml.py imports pynvml (checked on the syntax tree of every source file)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "powerlab"

BOUNDARIES = {
    "altair": "viz/charts.py",
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
