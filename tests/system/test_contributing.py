"""The recipes of docs/contributing.md work as written (issue 31: adding a lever, a reader
or a study-package section touches one module plus its test).

Each recipe's files (the code blocks marked ``<!-- file: PATH -->``) are written into a
copy of the package and its tests, and the recipe's own test runs there in a fresh
process: the new module is found without any other file changing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import REPO

DOC = REPO / "docs" / "contributing.md"
_FILE = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.S)


def recipes() -> dict[str, dict[str, str]]:
    """Recipe title -> {path: text} of the files its code blocks add."""
    out: dict[str, dict[str, str]] = {}
    parts = re.split(r"^## Recipe: (.+)$", DOC.read_text(encoding="utf-8"), flags=re.M)
    for title, body in zip(parts[1::2], parts[2::2]):
        out[title.strip()] = {path: text for path, text in _FILE.findall(body)}
    return out


def test_the_doc_has_the_three_recipes_each_one_module_and_its_test():
    found = recipes()
    assert set(found) == {"adding a lever", "adding a reader",
                          "adding a study-package section"}, sorted(found)
    for title, files in found.items():
        modules = [p for p in files if p.startswith("powerlab/")]
        tests = [p for p in files if p.startswith("tests/") and p.endswith(".py")]
        assert len(modules) == 1 and len(tests) == 1, (title, sorted(files))
        assert not (REPO / modules[0]).exists(), f"{modules[0]} is an example, not shipped"
        assert Path(tests[0]).name == f"test_{Path(modules[0]).name}"   # mirrors the module


def _copy_of_the_repository(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "_build")
    for name in ("powerlab", "tests", "data"):
        shutil.copytree(REPO / name, dest / name, ignore=ignore)
    shutil.copy2(REPO / "pyproject.toml", dest / "pyproject.toml")


@pytest.mark.slow
@pytest.mark.parametrize("title", ["adding a lever", "adding a reader",
                                   "adding a study-package section"])
def test_the_recipe_works_as_written(title, tmp_path):
    files = recipes()[title]
    _copy_of_the_repository(tmp_path)
    for path, text in files.items():
        target = tmp_path / path
        assert not target.exists(), f"the recipe would overwrite {path}"
        target.parent.mkdir(parents=True, exist_ok=True)
        init = target.parent / "__init__.py"
        if path.startswith("tests/") and not init.exists():
            init.write_text("")
        target.write_text(text, encoding="utf-8")
    test = next(p for p in files if p.startswith("tests/") and p.endswith(".py"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "POWERLAB_DATA": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:randomly", test], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert re.search(r"\b[1-9]\d* passed", out.stdout), out.stdout[-500:]
    assert "failed" not in out.stdout.splitlines()[-1]
