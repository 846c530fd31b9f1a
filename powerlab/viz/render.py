"""Rendering of powerlab charts: the theme, the notebook renderer, SVG and PNG.

This is the only module of powerlab that imports altair; the chart modules of this wing
(:mod:`~powerlab.viz.telemetry_charts`, :mod:`~powerlab.viz.grid_charts`,
:mod:`~powerlab.viz.throughput_charts`) build on the ``alt`` name it exports, so the
dependency, the theme and the renderers are set up in one place.

Importing the module registers the ``powerlab`` theme (``alt.theme.register``) and enables
it unless the user already enabled another one; :func:`use_theme` enables it explicitly.
In notebooks, :func:`use_offline_renderer` makes chart outputs carry their JavaScript so
that they render in JupyterLab without network access; :func:`to_svg` / :func:`to_png`
render with vl-convert, no browser needed.
"""

from __future__ import annotations

import altair as alt

__all__ = ["DEFAULT_MAX_ROWS", "FONT", "MAX_ROWS", "PALETTE", "THEME", "alt", "prune_views",
           "scales_zoom", "sized", "to_png", "to_svg", "use_offline_renderer", "use_theme",
           "vl_version"]

#: Name of the registered altair theme.
THEME = "powerlab"

#: altair refuses to embed more rows than this by default; charts stay below it.
MAX_ROWS = 5000
#: Default budget of rows a chart function embeds (leaves room under :data:`MAX_ROWS`).
DEFAULT_MAX_ROWS = 4000

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


def use_offline_renderer() -> None:
    """Show charts in Jupyter without network access.

    Altair's default notebook output loads the Vega JavaScript from a CDN, which a closed
    datacenter network blocks.  This enables the ``powerlab`` renderer: each chart output
    carries the Vega, Vega-Lite and vega-embed JavaScript inline (about 0.9 MB, built once
    by vl-convert and cached, see :func:`powerlab.viz.report.javascript_bundle`), evaluated
    only once per page, so charts render offline and after the notebook is reopened.
    """
    alt.renderers.enable("powerlab")


def _offline_renderer(spec: dict, **metadata) -> dict[str, str]:
    import json
    import uuid

    from .report import javascript_bundle

    div = f"powerlab-{uuid.uuid4().hex}"
    js = javascript_bundle(vl_version())
    text = json.dumps(spec, separators=(",", ":")).replace("<", "\\u003c")
    opts = json.dumps({"renderer": "svg", "actions": False,
                       **metadata.get("embed_options", {})})
    html = (f'<div id="{div}"></div>\n<script type="text/javascript">\n'
            f"if (typeof window.vegaEmbed !== 'function') {{ (function () {{\n{js}\n}})(); }}\n"
            f"window.vegaEmbed('#{div}', {text}, {opts}).catch(function (err) {{\n"
            f"  document.getElementById('{div}').textContent = 'chart failed: ' + err;\n"
            f"  console.error(err);\n}});\n</script>")
    return {"text/html": html, "text/plain": f"<powerlab chart {div}>"}


alt.renderers.register("powerlab", _offline_renderer)



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
