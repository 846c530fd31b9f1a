"""The project's set-up stays consistent: pyproject vs environment.yml, README vs CI."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _name(req: str) -> str:
    name = re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0]
    return name.lower().replace("_", "-")


def _spec(req: str) -> str:
    req = re.sub(r"\[.*?\]", "", req)
    return req[len(re.split(r"[<>=!~; ]", req, maxsplit=1)[0]):].strip().replace(" ", "")


def test_environment_yml_matches_pyproject():
    py = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(py["dependencies"])
    for extra in py["optional-dependencies"].values():
        reqs += extra
    want = {_name(r): _spec(r) for r in reqs}
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    have = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str) and _name(dep) not in ("python", "pip"):
            have[_name(dep)] = _spec(dep)
    assert have == want


def test_ci_runs_the_readme_test_command_verbatim():
    readme = (REPO / "README.md").read_text()
    m = re.search(r"<!-- test-command -->\s*```(?:bash|sh)?\n(.+?)\n```", readme, re.DOTALL)
    assert m, "README must mark its test command with <!-- test-command -->"
    cmd = m.group(1).strip()
    ci = (REPO / ".ci" / "run").read_text()
    assert cmd in ci.splitlines()
    m2 = re.search(r"<!-- main-command -->\s*```(?:bash|sh)?\n(.+?)\n```", readme, re.DOTALL)
    assert m2, "README must mark its main-job command with <!-- main-command -->"


@pytest.mark.slow
def test_console_script_help_for_every_subcommand():
    from powerlab.cli import COMMAND_MODULES, build_parser

    out = subprocess.run([sys.executable, "-m", "powerlab.cli", "--help"],
                         capture_output=True, text=True, check=True).stdout
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) == len(COMMAND_MODULES)
    for name in sub.choices:
        assert name in out
        r = subprocess.run([sys.executable, "-m", "powerlab.cli", name, "--help"],
                           check=False, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "usage: powerlab " + name in r.stdout
