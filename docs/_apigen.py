"""Sphinx extension: writes the API reference's sources (``docs/api/``) at build time.

The pages are generated from each wing's ``__all__`` (what ``powerlab.<wing>`` re-exports,
:mod:`powerlab._lazy`) and from the command line's own parser, so that moving or splitting
a module never leaves the reference stale: nothing here names a module file.  ``docs/api/``
is generated output (ignored by git); every build rewrites it and removes pages of names
that are gone.

It also registers a math renderer that writes TeX as plain text, so that no page loads
MathJax from a CDN (the build and the pages it makes need no network).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pkgutil
import re
import types
import warnings
from pathlib import Path

from docutils import nodes
from sphinx.errors import SphinxError
from sphinx.util import logging as sphinx_logging

#: The wings in the order of the data flow (README "Layout"), then the exceptions.  The
#: names documented in each come from its ``__all__``.
WINGS = (
    "iotools", "collect", "telemetry", "limits", "reliability", "site", "throughput",
    "levers", "calibration", "interconnect", "flex", "viz",
)
MODULES = tuple(f"powerlab.{w}" for w in WINGS) + ("powerlab.exceptions",)

API_DIR = "api"
STUBS = "generated"          # one page per public name: api/generated/<full name>.rst
_MAX_VALUE = 72              # constants with a longer repr are shown without their value


class ApiError(SphinxError):
    """A public name that cannot be documented (missing, or a module shadowing it)."""

    category = "API reference error"


def public_names(modname: str) -> list[str]:
    """The names ``modname`` exports (its ``__all__``), in order."""
    mod = importlib.import_module(modname)
    names = getattr(mod, "__all__", None)
    if not names:
        raise ApiError(f"{modname} has no __all__: the reference documents what it exports")
    return list(names)


def kind_of(obj: object) -> str:
    """The autodoc directive for an exported object: class, exception, function or data."""
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return "data"


def _defining_module(modname: str, name: str, value: object) -> str | None:
    """The submodule of package ``modname`` that assigns ``name`` (bound to ``value``)."""
    pkg = importlib.import_module(modname)
    assign = re.compile(rf"^{re.escape(name)}\s*(:[^=\n]*)?=", re.MULTILINE)
    binding = []
    for info in pkgutil.iter_modules(getattr(pkg, "__path__", [])):
        sub = importlib.import_module(f"{modname}.{info.name}")
        if vars(sub).get(name, None) is value:
            binding.append(sub)
    for sub in binding:
        try:
            if assign.search(inspect.getsource(sub)):
                return sub.__name__
        except (OSError, TypeError):
            continue
    return binding[0].__name__ if binding else None


def _data_doc(modname: str, name: str, value: object) -> tuple[list[str], str | None]:
    """The ``#:`` comment of a constant in its defining module, and that module's name."""
    from sphinx.pycode import ModuleAnalyzer
    home = _defining_module(modname, name, value) or modname
    try:
        docs = ModuleAnalyzer.for_module(home).find_attr_docs()
    except Exception:  # noqa: BLE001 - no source: the page shows the name alone
        docs = {}
    return list(docs.get(("", name), [])), home


def _title(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def _stub(modname: str, name: str, obj: object) -> str:
    """The reST page of one public name."""
    full = f"{modname}.{name}"
    kind = kind_of(obj)
    if kind == "module":
        raise ApiError(f"{full} resolves to a module, not the exported object: a submodule "
                       f"named like a public name shadows it once imported")
    out = [_title(full), f".. currentmodule:: {modname}\n"]
    if kind == "data":
        doc, home = _data_doc(modname, name, obj)
        out.append(f".. py:data:: {name}")
        value = repr(obj)
        if len(value) <= _MAX_VALUE and "\n" not in value:
            out.append(f"   :value: {value}")
        out.append("")
        out += [f"   {line}" if line else "" for line in doc]
        if home != modname:
            out += ["", f"   Defined in ``{home}``."]
        out.append("")
    elif kind in ("class", "exception"):
        out.append(f".. auto{kind}:: {name}")
        out.append("   :members:")
        out.append("   :show-inheritance:")
        bases = obj.__mro__[1:-1]
        if bases and all(b.__module__.startswith("powerlab") for b in bases):
            out.append("   :inherited-members:")   # e.g. summary() from Results
        out.append("")
    else:
        out.append(f".. autofunction:: {name}\n")
    return "\n".join(out)


def _module_page(modname: str, names: list[str]) -> str:
    out = [_title(modname),
           f".. automodule:: {modname}",
           "   :no-members:",
           "",
           f".. currentmodule:: {modname}",
           "",
           ".. autosummary::",
           f"   :toctree: {STUBS}",
           "   :nosignatures:",
           ""]
    out += [f"   {name}" for name in names]
    return "\n".join(out) + "\n"


def _cli_help(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "88"            # argparse wraps at the terminal's width
    try:
        return parser.format_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _block(text: str) -> list[str]:
    return [".. code-block:: text", ""] + [f"   {ln}" if ln else "" for ln in
                                           text.rstrip().splitlines()] + [""]


def _subcommands(parser: argparse.ArgumentParser, prefix: str):
    """``(command line, parser)`` of every subcommand under ``parser``, depth first."""
    seen = set()
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            if id(sub) in seen:             # an alias
                continue
            seen.add(id(sub))
            yield f"{prefix} {name}", sub
            yield from _subcommands(sub, f"{prefix} {name}")


def _cli_page() -> str:
    """The command line: ``powerlab --help`` and every subcommand's, from the parser."""
    from powerlab.cli import build_parser
    parser = build_parser()
    out = [_title("Command line"),
           "The ``powerlab`` command (``python -m powerlab.cli``): the help of the command "
           "and of every subcommand, as the installed parser prints it.",
           "",
           ".. autofunction:: powerlab.cli.main",
           "",
           ".. autofunction:: powerlab.cli.build_parser",
           "",
           _title("powerlab", "-")]
    out += _block(_cli_help(parser))
    for command, sub in _subcommands(parser, "powerlab"):
        out += [f".. _cli-{command[9:].replace(' ', '-')}:", "", _title(command, "-")]
        out += _block(_cli_help(sub))
    return "\n".join(out)


def _index_page() -> str:
    out = [_title("API reference"),
           "Generated from the numpydoc docstrings: one section per wing, in the order of "
           "the data flow (``iotools, collect -> telemetry -> limits -> reliability -> "
           "site, throughput -> levers -> calibration, interconnect -> flex -> viz``), "
           "listing what "
           "the wing re-exports (its ``__all__``: ``from powerlab.site import forecast``), "
           "then the exceptions (also importable from ``powerlab``) and the command line.",
           "",
           ".. toctree::",
           "   :maxdepth: 1",
           ""]
    out += [f"   {m}" for m in MODULES]
    out += ["   cli", ""]
    return "\n".join(out)


def api_sources() -> dict[str, str]:
    """Path under ``docs/api/`` -> reST text, for every page of the reference."""
    pages = {"index.rst": _index_page(), "cli.rst": _cli_page()}
    for modname in MODULES:
        names = public_names(modname)
        mod = importlib.import_module(modname)
        pages[f"{modname}.rst"] = _module_page(modname, names)
        for name in names:
            try:
                obj = getattr(mod, name)
            except AttributeError as exc:
                raise ApiError(f"{modname}.__all__ names {name!r}, which does not "
                               f"resolve: {exc}") from exc
            pages[f"{STUBS}/{modname}.{name}.rst"] = _stub(modname, name, obj)
    return pages


def write_api(srcdir: str | Path) -> int:
    """Write ``srcdir/api``; rewrite only what changed, remove stale pages.  Pages written."""
    root = Path(srcdir) / API_DIR
    pages = api_sources()
    written = 0
    for rel, text in pages.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written += 1
    for path in root.rglob("*.rst"):
        if path.relative_to(root).as_posix() not in pages:
            path.unlink()
    return written


# --- math as text: no MathJax (it would load from a CDN) ----------------------------------

def _visit_math(self, node: nodes.Element) -> None:
    self.body.append(self.starttag(node, "code", "", CLASS="math"))
    self.body.append(self.encode(node.astext()))
    self.body.append("</code>")
    raise nodes.SkipNode


def _visit_math_block(self, node: nodes.Element) -> None:
    self.body.append(self.starttag(node, "pre", "", CLASS="math"))
    self.body.append(self.encode(node.astext()))
    self.body.append("</pre>\n")
    raise nodes.SkipNode


def _on_builder_inited(app) -> None:
    write_api(app.srcdir)


_LOG = sphinx_logging.getLogger("numpydoc")
_showwarning = warnings.showwarning


def _numpydoc_to_log(message, category, filename, lineno, file=None, line=None) -> None:
    """numpydoc reports a malformed section (``Unknown section``) as a Python warning,
    which Sphinx's warning file would miss: log it as a Sphinx warning instead."""
    if "numpydoc" in str(filename):
        _LOG.warning(str(message), type="numpydoc", subtype="docscrape")
    else:
        _showwarning(message, category, filename, lineno, file, line)


def setup(app) -> dict:
    app.add_html_math_renderer("plaintext", (_visit_math, None), (_visit_math_block, None))
    app.connect("builder-inited", _on_builder_inited, priority=100)
    warnings.showwarning = _numpydoc_to_log
    return {"parallel_read_safe": True, "parallel_write_safe": True}
