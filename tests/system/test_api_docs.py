"""The API reference (docs/conf.py, docs/_apigen.py, docs/build.py) covers every public
name of every wing, and the HTML build succeeds without network."""

import importlib
import importlib.util
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import powerlab

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_powerlab_docs_{name}", DOCS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


apigen = _load("_apigen")
docbuild = _load("build")


def test_every_wing_is_in_the_reference():
    # powerlab.demo is a package of the top level (the main job's chain of steps, run by
    # `powerlab demo`), not a wing
    wings = {m.name for m in pkgutil.iter_modules(powerlab.__path__)
             if m.ispkg and not m.name.startswith("_")} - {"demo"}
    assert wings == set(apigen.WINGS)
    assert "powerlab.exceptions" in apigen.MODULES


def test_every_public_name_gets_a_page_of_its_kind():
    pages = apigen.api_sources()
    index = pages["index.rst"]
    for modname in apigen.MODULES:
        assert f"   {modname}\n" in index
        names = importlib.import_module(modname).__all__
        listing = pages[f"{modname}.rst"]
        for name in names:
            assert f"\n   {name}\n" in listing, (modname, name)
            page = pages[f"{apigen.STUBS}/{modname}.{name}.rst"]
            assert page.startswith(f"{modname}.{name}\n")
    assert ".. autofunction:: forecast\n" in pages[f"{apigen.STUBS}/powerlab.site.forecast.rst"]
    assert ".. autoexception:: ScenarioError\n" in pages[
        f"{apigen.STUBS}/powerlab.exceptions.ScenarioError.rst"]
    # a constant shows its ``#:`` comment from the module that defines it
    assert "Default budget of rows" in pages[f"{apigen.STUBS}/powerlab.viz.DEFAULT_MAX_ROWS.rst"]
    for command in ("powerlab forecast", "powerlab flex offer", "powerlab store upgrade"):
        assert f"\n   usage: {command} " in pages["cli.rst"], command


def test_a_module_shadowing_a_public_name_is_refused():
    with pytest.raises(apigen.ApiError, match="resolves to a module"):
        apigen._stub("powerlab.site", "engine", importlib.import_module("powerlab.site.engine"))


def test_docs_index_links_every_page():
    index = (DOCS / "index.md").read_text()
    linked = set(re.findall(r"\]\(([\w./-]+\.md)\)", index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert linked == pages, "docs/index.md must link every docs/*.md page (and only those)"
    toctree = index.split("```{toctree}")[1]
    for page in pages:
        assert f"\n{page[:-3]}\n" in toctree, f"{page} missing from the index's toctree"
    assert "](api/index.rst)" in index


def test_warnings_sorted_into_fatal_and_style_by_file_and_kind():
    lines = [
        f"{REPO}/powerlab/site/engine.py:docstring of powerlab.site.engine.forecast:12: "
        "ERROR: Unexpected indentation. [docutils]",
        f"{REPO}/powerlab/site/engine.py:docstring of powerlab.site.engine.forecast:20: "
        "WARNING: Block quote ends without a blank line; unexpected unindent. [docutils]",
        f"{REPO}/docs/api/generated/powerlab.site.forecast.rst:5: WARNING: autodoc: failed "
        "to import function 'forecast' from module 'powerlab.site'; the following "
        "exception was raised: [autodoc.import_object]",
        "  Traceback (most recent call last):",
        "WARNING: [numpydoc] Validation warnings while processing docstring for "
        "'powerlab.site.swing_metrics':",
        "  PR01: Parameters {'power_w'} not documented",
        "  PR02: Unknown parameters {'power'}",
        "WARNING: [numpydoc] Validation warnings while processing docstring for "
        "'powerlab.site.swing_metrics':",       # numpydoc parses some docstrings twice
        "  PR01: Parameters {'power_w'} not documented",
        "  PR02: Unknown parameters {'power'}",
        f"WARNING: Unknown section Remarks in the docstring of check_limits in "
        f"{REPO}/powerlab/site/swings.py. [numpydoc.docscrape]",
        f"{REPO}/docs/store.md: WARNING: document isn't included in any toctree "
        "[toc.not_included]",
    ]
    fatal, style = docbuild.classify(lines)
    assert len(fatal) == 2 and "Traceback" in fatal[0]
    assert dict(style) == {("powerlab/site/engine.py", "docutils"): 2,
                           ("powerlab/site/swings.py", "numpydoc PR01"): 1,
                           ("powerlab/site/swings.py", "numpydoc PR02"): 1,
                           ("powerlab/site/swings.py", "numpydoc.docscrape"): 1}
    assert "numpydoc PR01 1" in docbuild.report(0, fatal, style)


@pytest.mark.slow
def test_html_build(tmp_path):
    """The real build: no fatal warning, a page per public name, numpydoc sections
    rendered, the command line's help, nothing loaded from the network."""
    r = subprocess.run([sys.executable, str(DOCS / "build.py"), "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO, timeout=280)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "0 fatal warning(s)" in r.stdout
    html = tmp_path / "html"
    for modname in apigen.MODULES:
        listing = (html / "api" / f"{modname}.html").read_text()
        for name in importlib.import_module(modname).__all__:
            full = f"{modname}.{name}"
            page = html / "api" / apigen.STUBS / f"{full}.html"
            assert f'id="{full}"' in page.read_text(), f"{full} has no entry in its page"
            assert f"{full}.html" in listing
    forecast = (html / "api" / apigen.STUBS / "powerlab.site.forecast.html").read_text()
    assert '<dl class="py function">\n<dt class="sig sig-object py" ' \
           'id="powerlab.site.forecast">' in forecast
    params = forecast.split(">Parameters<", 1)[1].split("</dl>", 1)[0]
    assert "<strong>scenario</strong>" in params and "<strong>draws</strong>" in params
    cli = (html / "api" / "cli.html").read_text()
    from powerlab.cli import build_parser
    commands = [c for c, _ in apigen._subcommands(build_parser(), "powerlab")]
    assert len(commands) > 14
    for command in commands:
        assert f"usage: {command}" in cli, command
    index = (html / "index.html").read_text()
    assert 'href="api/index.html"' in index
    for page in DOCS.glob("*.md"):
        if page.name != "index.md":
            assert f'href="{page.stem}.html"' in index
    remote = re.compile(r'<(?:script|link|img)[^>]*(?:src|href)="(?:https?:)?//')
    for page in html.rglob("*.html"):
        assert not remote.search(page.read_text()), f"{page} loads something remote"
