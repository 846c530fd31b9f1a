"""Rendering of powerlab charts: the theme, the notebook renderer, SVG and PNG.

This is the only module of powerlab that imports altair; the chart modules of this wing
(:mod:`~powerlab.viz.telemetry_charts`, :mod:`~powerlab.viz.facility_charts`, ...) build
on the ``alt`` name it exports, so the dependency, the theme and the renderers are set up
in one place.

Importing the module registers the ``powerlab`` theme (``alt.theme.register``) and enables
it unless the user already enabled another one; :func:`use_theme` enables it explicitly.
In notebooks, :func:`use_offline_renderer` makes chart outputs Vega MIME bundles with a
PNG fallback, so that they render in JupyterLab without network access, trusted or not,
and as images elsewhere; :func:`to_svg` / :func:`to_png`
render with vl-convert, no browser needed.
"""

from __future__ import annotations

import base64
import gzip
import json
import uuid

import altair as alt

from .._options import choice
from .report import javascript_bundle

__all__ = ["DEFAULT_MAX_ROWS", "FONT", "MAX_ROWS", "PALETTE", "THEME", "alt", "inline_table",
           "prune_views",
           "scales_zoom", "sized", "time_tooltip", "time_x", "to_png", "to_svg",
           "use_offline_renderer", "use_theme", "vl_version"]

#: Name of the registered altair theme.
THEME = "powerlab"

#: altair refuses to embed more rows than this by default; charts stay below it.
MAX_ROWS = 5000
#: Default budget of rows a chart function embeds (leaves room under :data:`MAX_ROWS`).
DEFAULT_MAX_ROWS = 3000

# Okabe-Ito, a palette readable with colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
            "#666666"]
FONT = "'Source Sans 3', 'Helvetica Neue', Arial, sans-serif"


@alt.theme.register(THEME, enable=False)
def _powerlab_theme() -> alt.theme.ThemeConfig:
    return {
        "config": {
            "font": FONT,
            "view": {"continuousWidth": 640, "continuousHeight": 220, "stroke": None},
            "range": {"category": PALETTE},
            "title": {"anchor": "start", "fontSize": 14, "fontWeight": 600,
                      "font": FONT, "subtitleFont": FONT, "subtitleColor": "#555555"},
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "titleFontWeight": 500,
                     "gridColor": "#e6e6e6", "domainColor": "#888888",
                     "tickColor": "#888888"},
            "legend": {"labelFontSize": 11, "titleFontSize": 12, "orient": "right"},
            "line": {"strokeWidth": 1.5},
            "area": {"opacity": 0.25},
        }
    }


def use_theme() -> None:
    """Enable the ``powerlab`` altair theme (it is registered on import)."""
    alt.theme.enable(THEME)


if alt.theme.active == "default":
    use_theme()


#: Whether this kernel session has already sent the chart JavaScript to the page.
_SESSION = {"bundle_sent": False}
#: How long a chart output waits for the JavaScript sent by an earlier output [ms].
WAIT_FOR_BUNDLE_MS = 10_000


def use_offline_renderer(mode: str = "interactive") -> None:
    """Show charts in Jupyter without network access, trusted or not.

    Altair's default notebook output loads the Vega JavaScript from a CDN, which a closed
    datacenter network blocks, and output that carries its own JavaScript is not run in a
    notebook opened *untrusted* (JupyterLab strips the script: a blank chart).

    Parameters
    ----------
    mode : {"interactive", "html", "svg"}, default "interactive"
        ``"interactive"`` enables the ``powerlab`` renderer: each chart output is a
        MIME bundle of the chart as a Vega specification
        (``application/vnd.vega.v5+json``, compiled from the Vega-Lite spec by
        vl-convert), which JupyterLab draws with its own bundled Vega, offline and in
        untrusted notebooks (its Vega renderer is a *safe* renderer), tooltips and zoom
        included; plus a PNG of the same chart (``image/png``), which GitHub, nbviewer and
        other viewers without Vega show instead.  ``"html"`` is the earlier renderer for
        front ends that draw neither: the first chart carries the Vega, Vega-Lite and
        vega-embed JavaScript once (gzip-compressed), later ones a small spec; it draws
        only in a trusted notebook.  ``"svg"`` uses altair's own ``svg`` renderer (a
        static SVG rendered in the kernel; no interaction).

    Notes
    -----
    The Vega-Lite spec is compiled to Vega in the kernel because JupyterLab bundles an
    older Vega-Lite than altair writes; its Vega runtime draws the compiled spec.  The
    PNG costs vl-convert one rendering per chart output (tens of milliseconds for the
    charts of this package).
    """
    choice(mode, "mode", ("interactive", "html", "svg"))
    if mode == "svg":
        alt.renderers.enable("svg")
        return
    _SESSION["bundle_sent"] = False
    alt.renderers.enable("powerlab" if mode == "interactive" else "powerlab-html")


#: MIME type of a Vega specification, drawn natively by JupyterLab's Vega extension.
VEGA_MIME = "application/vnd.vega.v5+json"


def _mime_renderer(spec: dict, **metadata) -> tuple[dict, dict]:
    """Vega spec + PNG fallback + text, as JupyterLab and static viewers read them."""
    import vl_convert as vlc

    vega = vlc.vegalite_to_vega(spec, vl_version=vl_version())
    png = vlc.vegalite_to_png(spec, vl_version=vl_version(), scale=1.0)
    title = spec.get("title")
    title = title.get("text") if isinstance(title, dict) else title
    text = f"<powerlab chart{': ' + str(title) if title else ''}>"
    opts = {"renderer": "svg", "actions": False, **metadata.get("embed_options", {})}
    return ({VEGA_MIME: vega, "image/png": base64.b64encode(png).decode("ascii"),
             "text/plain": text},
            {VEGA_MIME: {"embed_options": opts}})


def _bundle_loader() -> str:
    """JavaScript that inflates the gzip+base64 bundle once and evaluates it."""
    packed = base64.b64encode(gzip.compress(javascript_bundle(vl_version()).encode(),
                                            9, mtime=0)).decode("ascii")
    return ("if (typeof window.vegaEmbed !== 'function' && !window.__powerlabVega) {\n"
            "  window.__powerlabVega = (function () {\n"
            f"    var b64 = '{packed}';\n"
            "    var bin = atob(b64), buf = new Uint8Array(bin.length);\n"
            "    for (var i = 0; i < bin.length; i++) buf[i] = bin.charCodeAt(i);\n"
            "    var stream = new Blob([buf]).stream().pipeThrough("
            "new DecompressionStream('gzip'));\n"
            "    return new Response(stream).text().then(function (js) {\n"
            "      var s = document.createElement('script');\n"
            "      s.text = js; document.head.appendChild(s);\n"
            "    });\n"
            "  })();\n"
            "}\n")


def _offline_renderer(spec: dict, **metadata) -> dict[str, str]:
    div = f"powerlab-{uuid.uuid4().hex}"
    loader = "" if _SESSION["bundle_sent"] else _bundle_loader()
    _SESSION["bundle_sent"] = True
    text = json.dumps(spec, separators=(",", ":")).replace("<", "\\u003c")
    opts = json.dumps({"renderer": "svg", "actions": False,
                       **metadata.get("embed_options", {})})
    html = (f'<div id="{div}"></div>\n<script type="text/javascript">\n{loader}'
            "(function () {\n"
            f"  var el = document.getElementById('{div}'), t0 = Date.now();\n"
            "  function fail(err) {\n"
            "    el.textContent = 'chart failed: ' + err; console.error(err);\n  }\n"
            "  function draw() {\n"
            f"    window.vegaEmbed(el, {text}, {opts}).catch(fail);\n  }}\n"
            "  (function wait() {\n"
            "    if (typeof window.vegaEmbed === 'function') return draw();\n"
            "    if (window.__powerlabVega) return window.__powerlabVega.then(draw, fail);\n"
            f"    if (Date.now() - t0 > {int(WAIT_FOR_BUNDLE_MS)}) return fail(new Error("
            "'the chart JavaScript "
            "is not on this page: run powerlab.viz.use_offline_renderer() and re-run this "
            "cell'));\n"
            "    setTimeout(wait, 50);\n"
            "  })();\n"
            "})();\n</script>")
    return {"text/html": html, "text/plain": f"<powerlab chart {div}>"}


alt.renderers.register("powerlab", _mime_renderer)
alt.renderers.register("powerlab-html", _offline_renderer)



def inline_table(df) -> alt.InlineData:
    """Chart data as inline CSV with 6 significant digits per number.

    Altair embeds a DataFrame as JSON records, repeating every column name in every row
    and writing floats with 17 digits; the same rows as CSV are about three times smaller
    (this is what keeps executed notebooks and reports light).  Six significant digits
    are far below what a chart can show (a relative error of at most 5e-6).  Numeric and
    boolean columns are parsed as such by Vega; the others stay text.

    Parameters
    ----------
    df : pandas.DataFrame
        Tidy chart data (times already as epoch milliseconds, see
        :func:`powerlab.viz.prepare.chart_times`).

    Returns
    -------
    altair.InlineData
    """
    parse = {c: ("boolean" if df[c].dtype.kind == "b" else "number")
             for c in df.columns if df[c].dtype.kind in "biuf"}
    text = df.to_csv(index=False, float_format="%.6g", lineterminator="\n")
    return alt.InlineData(values=text, format=alt.DataFormat(type="csv", parse=parse))


#: Tick labels of time axes: 24-hour clock, the date at midnight, seconds when zoomed in.
TIME_LABEL_EXPR = (
    "(utcseconds(datum.value) != 0 || utcmilliseconds(datum.value) != 0) "
    "? utcFormat(datum.value, '%H:%M:%S') "
    ": (utchours(datum.value) == 0 && utcminutes(datum.value) == 0) "
    "? utcFormat(datum.value, '%d %b') : utcFormat(datum.value, '%H:%M')")


def time_x(field: str = "timestamp", title: str = "time (UTC)", *, domain=None,
           axis: bool = True) -> alt.X:
    """x encoding of a time axis fed by :func:`powerlab.viz.prepare.chart_times`.

    The scale is UTC, so the labels are the wall-clock times the data carry (UTC, or the
    site's local time) whatever the viewer's time zone, on an unambiguous 24-hour clock.
    """
    scale = alt.Scale(type="utc") if domain is None else alt.Scale(type="utc", domain=domain)
    ax = alt.Axis(labelExpr=TIME_LABEL_EXPR, labelOverlap=True) if axis else None
    return alt.X(f"{field}:T", title=title, scale=scale, axis=ax)


def time_tooltip(field: str = "timestamp", title: str = "time (UTC)") -> alt.Tooltip:
    """Tooltip showing a :func:`time_x` time as ``YYYY-MM-DD HH:MM:SS`` (no zone shift)."""
    return alt.Tooltip(f"{field}:T", title=title, format="%Y-%m-%d %H:%M:%S",
                       formatType="utc")


def scales_zoom(name: str = "zoom") -> alt.Parameter:
    return alt.selection_interval(name=name, encodings=["x"], bind="scales")


def prune_views(chart: alt.TopLevelMixin) -> None:
    """Keep only view names that exist in ``chart`` in its top-level parameters.

    altair (6.3) lists a view both under its own name and the position-suffixed name it
    gets inside a concatenation; Vega-Lite ignores the dangling one, but a spec should not
    name views that do not exist.
    """
    names = {d["name"] for d in _dicts(chart.to_dict(validate=False))
             if isinstance(d.get("name"), str) and "mark" in d}
    for p in chart.params or []:
        views = getattr(p, "views", alt.Undefined)
        if views is not alt.Undefined and views:
            p.views = [v for v in views if v in names]


def _dicts(obj):
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from _dicts(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _dicts(v)


def sized(chart, width, height):
    props = {}
    if width is not None:
        props["width"] = width
    if height is not None:
        props["height"] = height
    return chart.properties(**props) if props else chart




def to_svg(chart: alt.TopLevelMixin) -> str:
    """Render a chart to SVG text with vl-convert (no browser needed)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict(), vl_version=vl_version())


def to_png(chart: alt.TopLevelMixin, scale: float = 1.0) -> bytes:
    """Render a chart to PNG bytes with vl-convert (no browser needed)."""
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_dict(), vl_version=vl_version(), scale=scale)


def vl_version() -> str:
    """The Vega-Lite version of altair's schema as vl-convert names it (``"6.4"``)."""
    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return major_minor
