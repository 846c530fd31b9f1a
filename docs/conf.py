"""Sphinx configuration of powerlab's documentation: the guides (docs/*.md, through MyST)
and the API reference generated from the numpydoc docstrings (docs/_apigen.py).

Build it with ``python docs/build.py`` (it fails on import errors and missing objects,
and counts docstring-style warnings by module).  The build uses no network: no
intersphinx, no remote theme, no CDN asset (math is shown as TeX text).
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))              # _apigen
sys.path.insert(0, str(HERE.parent))       # powerlab from this checkout

import powerlab  # noqa: E402

project = "powerlab"
author = "powerlab developers"
copyright = "powerlab developers"
release = powerlab.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
    "_apigen",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
templates_path = []

# --- API reference -------------------------------------------------------------------------
autosummary_generate = False        # _apigen writes the pages from each wing's __all__
autodoc_default_options = {}
autodoc_typehints = "none"          # the numpydoc Parameters section states the types
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = True
numpydoc_show_class_members = False  # autoclass :members: documents them
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = {"PR01", "PR02", "GL08"}
add_module_names = False
show_warning_types = True           # docs/build.py sorts warnings by their type

# --- guides (MyST) -------------------------------------------------------------------------
myst_heading_anchors = 4             # [text](page.md#a-heading) links resolve
myst_enable_extensions = ["colon_fence"]

# --- HTML: the built-in theme, nothing fetched -------------------------------------------
html_theme = "alabaster"
html_theme_options = {
    "description": "power and thermal analytics of GPU clusters",
    "fixed_sidebar": False,
}
html_title = f"powerlab {release}"
html_static_path = []
html_math_renderer = "plaintext"     # _apigen: TeX as text, no MathJax from a CDN
html_show_sourcelink = False
html_copy_source = False
