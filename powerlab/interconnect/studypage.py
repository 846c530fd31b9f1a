"""The study package on paper: the text summary, the printable HTML page a utility
engineer reads, and the files of :meth:`StudyPackage.write
<powerlab.interconnect.studypackage.StudyPackage.write>`.

Each puts the sections of :mod:`powerlab.interconnect.study` together in their order: the
summary their ``key_lines``, the page their ``html`` under numbered headings, the folder
their ``files``.  The page is one self-contained HTML file with print CSS (A4/Letter,
tables kept whole across pages); every string that comes from the inputs (scenario and
spec names, sources, notes) is HTML-escaped.  It shows tables only; charts belong to
:mod:`powerlab.viz`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import __version__
from .._summary import Summary
from .study import sections
from .study.html import esc
from .study.section import PackageFolder

__all__ = ["StudySummary", "package_html", "write_package"]

_CSS = """
body{font-family:Helvetica,Arial,sans-serif;font-size:10pt;color:#111;max-width:60em;
margin:1.5em auto;line-height:1.3}
h1{font-size:15pt;margin:0 0 .2em}h2{font-size:11.5pt;margin:1.2em 0 .3em;
border-bottom:1px solid #999}
table{border-collapse:collapse;margin:.3em 0 .6em;font-size:8.5pt}
th,td{border:1px solid #bbb;padding:2px 5px;vertical-align:top}
th{background:#eee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.meta{color:#444}.note{color:#633}.flag{font-weight:bold;color:#a00}
@page{size:auto;margin:14mm}
@media print{body{margin:0;max-width:none;font-size:9pt}table{page-break-inside:avoid}
h2{page-break-after:avoid}a{color:inherit;text-decoration:none}}
"""


def _key_lines(pkg) -> list[str]:
    out = [f"Source: {pkg.source}; spec {pkg.spec.name!r}; boundary {pkg.boundary}."]
    for s in sections():
        out += s.key_lines(pkg)
    return out + [f"Note: {n}" for n in pkg.notes]


class StudySummary(Summary):
    """Text summary of a :class:`~powerlab.interconnect.studypackage.StudyPackage`."""

    def __init__(self, pkg):
        super().__init__("Large-load study package")
        self.pkg = pkg
        self.add_text(_key_lines(pkg), pre=True)


def _head(pkg) -> str:
    """The document's head, title and what the package is of."""
    spec = pkg.spec
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>Large-load study package: {esc(pkg.source)}</title>"
            f"<style>{_CSS}</style></head><body>"
            "<h1>Large-load study package</h1>"
            f"<p class='meta'>{esc(pkg.source)}<br>Requirement spec: {esc(spec.name)} "
            f"({esc(spec.description)}); power at the {esc(pkg.boundary)} boundary"
            f"{' (point of interconnection)' if pkg.boundary == 'facility' else ''}.<br>"
            f"powerlab {esc(__version__)}; generated "
            f"{esc(pd.Timestamp.now(tz='UTC').strftime('%Y-%m-%d %H:%M UTC'))}.</p>")


def package_html(pkg, files: dict | None = None) -> str:
    """The printable summary page (one self-contained HTML document): each section with
    a part of its own, numbered, then the files, the notes and the requirement sources."""
    parts = [_head(pkg)]
    n = 0
    for s in sections():
        body = s.html(pkg)
        if body:
            n += 1
            parts.append(f"<h2>{n}. {esc(s.title)}</h2>{body}")
    if files:
        parts.append("<h2>Files</h2><ul>" + "".join(
            f"<li>{esc(Path(p).name)}: {esc(what)}</li>" for what, p in files.items()
            if what != "page") + "</ul>")
    notes = list(pkg.notes) + [
        "Requirement numbers marked illustrative in the spec are not published limits.",
        "Playback files are draw 0, one trajectory, never a quantile across draws."]
    parts.append("<h2>Notes and assumptions</h2><ul>" + "".join(
        f"<li class='note'>{esc(n)}</li>" for n in notes) + "</ul>")
    src = "".join(f"<li>{esc(r.name)}: {esc(r.source)}"
                  f"{' (illustrative)' if r.illustrative else ''}</li>"
                  for r in pkg.spec.requirements)
    parts.append(f"<h2>Requirement sources</h2><ul>{src}</ul></body></html>")
    return "".join(parts)


def write_package(pkg, out) -> dict:
    """Write every section's files, the text summary and the page into folder ``out``;
    returns what -> path (the page last, as ``"page"``)."""
    folder = PackageFolder(out)
    files: dict = {}
    for s in sections():
        files.update(s.files(pkg, folder))
    files["text summary"] = folder.text("summary.txt", str(pkg.summary()) + "\n")
    files["page"] = folder.path("study_package.html")
    folder.text("study_package.html", package_html(pkg, files))
    return files
