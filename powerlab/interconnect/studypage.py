"""The study package on paper: the text summary, the printable HTML page a utility
engineer reads, and the files of :meth:`StudyPackage.write
<powerlab.interconnect.studypackage.StudyPackage.write>`.

Each puts the sections of :mod:`powerlab.interconnect.study` together in their order: the
summary their ``key_lines``, the page their ``html`` under numbered headings, the folder
their ``files``.  The page is one self-contained HTML file with print CSS (A4/Letter,
tables kept whole across pages, their headers broken only between words or after an
underscore, tables of more than 12 columns on a landscape page); every string that comes from the inputs (scenario and
spec names, sources, notes) is HTML-escaped.

Charts belong to :mod:`powerlab.viz` (downstream of this wing): the page takes them from
its caller as SVG text (``charts``: section name -> list of (title, SVG),
:func:`powerlab.viz.study_charts.study_charts` makes them) and draws each inline as a
``<figure>`` under its section's heading, after checking that it is plain SVG (no script,
no event handler, no foreign content, no link out of the document: :func:`inline_svg`)
and giving its element ids a prefix of their own (several charts on one page would
otherwise share ``clip1``).  :func:`write_package` also writes each chart as
``charts/<section>_<title>.svg``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd

from .. import __version__
from .._summary import Summary
from ..exceptions import PowerlabError
from .study import sections
from .study.html import esc
from .study.section import PackageFolder

__all__ = ["StudySummary", "inline_svg", "package_html", "write_package"]

_CSS = """
body{font-family:Helvetica,Arial,sans-serif;font-size:10pt;color:#111;max-width:60em;
margin:1.5em auto;line-height:1.3}
h1{font-size:15pt;margin:0 0 .2em}h2{font-size:11.5pt;margin:1.2em 0 .3em;
border-bottom:1px solid #999}
table{border-collapse:collapse;margin:.3em 0 .6em;font-size:8.5pt}
th,td{border:1px solid #bbb;padding:2px 5px;vertical-align:top;word-break:normal;
overflow-wrap:normal;hyphens:manual}
th{background:#eee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.meta{color:#444}.note{color:#633}.flag{font-weight:bold;color:#a00}
figure.chart{margin:.5em 0 .9em}figure.chart svg{display:block;max-width:100%;height:auto}
@page{size:auto;margin:14mm}@page wide{size:landscape;margin:14mm}
@media print{body{margin:0;max-width:none;font-size:9pt}table{page-break-inside:avoid;
font-size:7pt}th,td{padding:1px 3px}h2{page-break-after:avoid}
table.wide{page:wide;font-size:6.5pt}
figure.chart{break-inside:avoid;page-break-inside:avoid}
a{color:inherit;text-decoration:none}}
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


_SVG_NS = "{http://www.w3.org/2000/svg}"
#: Elements a chart's SVG may not hold (script, or content that is not SVG).
_REFUSED_TAGS = {"script", "foreignobject", "iframe", "object", "embed", "style", "a",
                 "image", "use", "animate", "set", "handler", "listener"}


def inline_svg(svg: str, prefix: str, what: str = "chart") -> str:
    """``svg`` ready to sit inline in the page: checked to be plain SVG (an ``<svg>``
    root, no script, event handler, foreign or linked content, no DOCTYPE or entity) and
    its ids (and the ``url(#id)`` references to them) prefixed with ``prefix``.

    Raises
    ------
    PowerlabError
        Where the SVG is not one plain SVG document.
    """
    text = re.sub(r"^\s*<\?xml[^>]*\?>", "", str(svg))
    if re.search(r"<!(DOCTYPE|ENTITY)", text, re.I):
        raise PowerlabError(f"{what}: an SVG chart may not carry a DOCTYPE or entities")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise PowerlabError(f"{what}: not an SVG document ({exc})") from None
    if root.tag != f"{_SVG_NS}svg":
        raise PowerlabError(f"{what}: the root element is {root.tag!r}, not an SVG <svg>")
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1].lower() if isinstance(el.tag, str) else "?"
        if tag in _REFUSED_TAGS:
            raise PowerlabError(f"{what}: an SVG chart may not hold <{tag}> elements")
        for key, value in el.attrib.items():
            name = key.rsplit("}", 1)[-1].lower()
            if name.startswith("on") or name == "href" or "javascript:" in value.lower():
                raise PowerlabError(f"{what}: an SVG chart may not carry the attribute "
                                    f"{name!r} (script or link)")
    text = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m[1]}"', text)
    return re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m[1]})", text)


#: Tables with more columns than this print on a landscape page (``table.wide``).
WIDE_COLUMNS = 12


def _mark_wide(body: str) -> str:
    """``body`` with each ``<table>`` of more than :data:`WIDE_COLUMNS` header cells
    marked ``class='wide'`` (printed on a landscape page, smaller)."""
    def mark(m):
        head = m.group(0).split("</thead>", 1)[0]
        return (m.group(0).replace("<table>", "<table class='wide'>", 1)
                if head.count("<th") > WIDE_COLUMNS else m.group(0))
    return re.sub(r"<table>.*?</table>", mark, body, flags=re.S)


def _figures(charts, name: str) -> str:
    """The ``<figure>`` elements of section ``name``'s charts."""
    out = []
    for i, (title, svg) in enumerate((charts or {}).get(name, ())):
        what = f"chart {title!r} of section {name!r}"
        body = inline_svg(svg, f"c-{re.sub(r'[^A-Za-z0-9]', '-', name)}-{i}-", what)
        out.append(f"<figure class='chart' aria-label='{esc(title)}'>{body}</figure>")
    return "".join(out)


def _rel(p) -> str:
    """A file's name as the page lists it (``charts/`` kept)."""
    p = Path(p)
    return f"charts/{p.name}" if p.parent.name == "charts" else p.name


def package_html(pkg, files: dict | None = None, charts: dict | None = None) -> str:
    """The printable summary page (one self-contained HTML document): each section with
    a part of its own, numbered, its charts (``charts``: section name -> list of (title,
    SVG text)) under its heading, then the files, the notes and the requirement
    sources."""
    parts = [_head(pkg)]
    n = 0
    done = set()
    for s in sections():
        body = s.html(pkg)
        if body:
            n += 1
            done.add(s.name)
            parts.append(f"<h2>{n}. {esc(s.title)}</h2>{_figures(charts, s.name)}"
                         f"{_mark_wide(body)}")
    rest = "".join(_figures(charts, k) for k in (charts or {}) if k not in done)
    if rest:
        parts.append(f"<h2>Other charts</h2>{rest}")
    if files:
        parts.append("<h2>Files</h2><ul>" + "".join(
            f"<li>{esc(_rel(p))}: {esc(what)}</li>" for what, p in files.items()
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


def _chart_files(charts: dict, folder: PackageFolder) -> dict:
    """Each chart as ``charts/<section>_<title>.svg`` (checked first); what -> path."""
    files: dict = {}
    if not charts:
        return files
    (folder.root / "charts").mkdir(exist_ok=True)
    used: set = set()
    for name, items in charts.items():
        for title, svg in items:
            inline_svg(svg, "", f"chart {title!r} of section {name!r}")
            stem = re.sub(r"[^a-z0-9]+", "_", f"{name}_{title}".lower()).strip("_")[:60]
            stem, k = stem or "chart", 2
            while stem in used:
                stem, k = f"{stem.rsplit('__', 1)[0]}__{k}", k + 1
            used.add(stem)
            files[f"chart ({name}): {title}"] = folder.text(f"charts/{stem}.svg", svg)
    return files


def write_package(pkg, out, charts: dict | None = None) -> dict:
    """Write every section's files, the charts (``charts``: section name -> list of
    (title, SVG text), as ``charts/*.svg`` and on the page), the text summary and the
    page into folder ``out``; returns what -> path (the page last, as ``"page"``)."""
    folder = PackageFolder(out)
    files: dict = {}
    for s in sections():
        files.update(s.files(pkg, folder))
    files.update(_chart_files(charts, folder))
    files["text summary"] = folder.text("summary.txt", str(pkg.summary()) + "\n")
    files["page"] = folder.path("study_package.html")
    folder.text("study_package.html", package_html(pkg, files, charts))
    return files
