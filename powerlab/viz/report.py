"""Self-contained HTML reports that render offline.

A :class:`Report` collects headings, paragraphs, key figures, tables and charts and writes
one HTML file.  The Vega, Vega-Lite and vega-embed JavaScript is embedded in the file (from
``vl-convert-python``'s bundle), every chart's data is inlined in its specification, and
nothing is fetched from a CDN or any other address: the report opens on an air-gapped
machine.

The page records its own rendering status for automated checks: ``window.powerlabReport``
holds ``expected``, ``rendered`` and ``errors``, and ``<html data-powerlab-status>`` becomes
``"done"`` (every chart rendered) or ``"error"``.

This module does not import altair: charts are anything with a ``to_dict()`` method
returning a Vega-Lite specification (altair charts), or such a specification as a dict.
"""

from __future__ import annotations

import datetime as _dt
import functools
import html
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import __version__
from .._format import column_words, format_number
from .._options import choice
from ..exceptions import PowerlabError, StoreError
from ..outputs import atomic_write

__all__ = ["Report", "javascript_bundle", "write_report"]

_DEFAULT_VL = "6.4"


def _cache_dir() -> Path:
    env = os.environ.get("POWERLAB_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "powerlab"


@functools.lru_cache(maxsize=4)
def javascript_bundle(vl_version: str = _DEFAULT_VL) -> str:
    """The Vega + Vega-Lite + vega-embed JavaScript as one inline-able script.

    Built by ``vl_convert.javascript_bundle`` (a few seconds), then cached in the process
    and on disk (``$POWERLAB_CACHE_DIR``, else ``~/.cache/powerlab``, keyed by the
    vl-convert and Vega-Lite versions).  It defines ``window.vegaEmbed``, ``window.vega``
    and ``window.vegaLite``.

    Parameters
    ----------
    vl_version : str, default "6.4"
        Vega-Lite version (major.minor) matching the charts' specifications.

    Returns
    -------
    str
    """
    try:
        import vl_convert as vlc
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise PowerlabError("HTML reports need vl-convert-python "
                            "(pip install 'powerlab[charts]')") from exc
    if vl_version not in vlc.get_vegalite_versions():
        raise PowerlabError(f"Vega-Lite {vl_version} is not bundled by vl-convert "
                            f"{vlc.__version__} (has {', '.join(vlc.get_vegalite_versions())})")
    cached = _cache_dir() / f"vega-bundle-vlconvert{vlc.__version__}-vl{vl_version}.js"
    try:
        js = cached.read_text(encoding="utf-8")
        if "window.vegaEmbed" in js:
            return js
    except OSError:
        pass
    js = vlc.javascript_bundle(vl_version=vl_version)
    # never let the bundle close its own <script> element
    js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.IGNORECASE)
    try:  # a cache: no fsync needed, and a failed write only costs a rebuild next time
        atomic_write(cached, lambda tmp: Path(tmp).write_text(js, encoding="utf-8"),
                     fsync=False)
    except (StoreError, OSError):  # a read-only home: keep the in-process cache only
        pass
    return js


def _spec_of(chart: Any) -> dict:
    if isinstance(chart, dict):
        return chart
    to_dict = getattr(chart, "to_dict", None)
    if to_dict is None:
        raise TypeError(f"a chart must be an altair chart or a Vega-Lite dict, "
                        f"got {type(chart).__name__}")
    return to_dict()


def _vl_version_of(spec: dict) -> str:
    m = re.search(r"vega-lite/v(\d+)\.(\d+)", str(spec.get("$schema", "")))
    return f"{m.group(1)}.{m.group(2)}" if m else _DEFAULT_VL


def _json_for_script(obj: Any) -> str:
    """JSON safe inside ``<script type="application/json">`` (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, allow_nan=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


#: Tables with more columns than this print on a landscape page.
WIDE_COLUMNS = 12


@dataclass
class _Block:
    kind: str
    content: Any
    caption: str | None = None
    #: the time zone of the times the block shows (tables), or of its section (headings)
    zone: str | None = None


@dataclass
class Report:
    """A one-file HTML report (charts, tables, key figures) that renders offline.

    Parameters
    ----------
    title : str
        Page title and top heading.
    subtitle : str, optional
        One line under the title.
    time_zone : str, default "UTC"
        Zone the times in tables are shown in, unless a :meth:`heading` sets its
        section's own; each section that shows times states its zone once, under its
        heading (IANA name, e.g. ``"America/Chicago"``).

    Examples
    --------
    >>> rep = Report("Site forecast")                               # doctest: +SKIP
    >>> rep.heading("Swings")                                       # doctest: +SKIP
    >>> rep.figures({"largest 60 s swing": "31.2 MW"})              # doctest: +SKIP
    >>> rep.chart(powerlab.viz.charts.facility_chart(timeline))          # doctest: +SKIP
    >>> rep.write("report.html")                                    # doctest: +SKIP
    """

    title: str
    subtitle: str | None = None
    blocks: list[_Block] = field(default_factory=list)
    time_zone: str = "UTC"

    # -- building -----------------------------------------------------------------
    def heading(self, text: str, *, time_zone: str | None = None) -> Report:
        """Add a section heading; ``time_zone``: the zone of the section's times
        (default the report's)."""
        zone = str(time_zone or self.time_zone)
        pd.Timestamp(0, tz="UTC").tz_convert(zone)     # an unknown zone fails here
        self.blocks.append(_Block("heading", str(text), zone=zone))
        return self

    def _zone(self) -> str:
        heads = [b for b in self.blocks if b.kind == "heading"]
        return heads[-1].zone if heads else self.time_zone

    def text(self, text: str) -> Report:
        """Add a paragraph (plain text; blank lines separate paragraphs)."""
        self.blocks.append(_Block("text", str(text)))
        return self

    def figures(self, items: dict[str, Any], caption: str | None = None) -> Report:
        """Add key figures: a mapping of label to value (already formatted with units)."""
        self.blocks.append(_Block("figures", {str(k): str(v) for k, v in items.items()},
                                  caption))
        return self

    def table(self, df: pd.DataFrame, caption: str | None = None, *, max_rows: int = 50,
              float_format: str | None = None, words: bool = True) -> Report:
        """Add a table (the first ``max_rows`` rows of ``df``).

        Numbers are written by :func:`powerlab._format.format_number` (three significant
        digits, thousands separators, no e-notation; ``float_format``, e.g.
        ``"{:.2f}"``, overrides it for floats), booleans as yes/no, times in the
        section's zone (stated once under its heading), and with ``words`` the column
        names in words with their units (``ramp_up_megawatts_per_s`` -> ``ramp up
        (MW/s)``).
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"table expects a DataFrame, got {type(df).__name__}")
        shown = df.head(max_rows)
        note = "" if len(df) <= max_rows else f" (first {max_rows} of {len(df):,} rows)"
        zone, has_times, cols = self._zone(), False, {}
        for name in shown.columns:
            col = shown[name]
            if pd.api.types.is_datetime64_any_dtype(col):
                t = pd.to_datetime(col)
                t = (t.dt.tz_localize("UTC") if t.dt.tz is None else t).dt.tz_convert(zone)
                fmt = "%Y-%m-%d %H:%M:%S" if (t.dt.second.fillna(0) != 0).any() \
                    else "%Y-%m-%d %H:%M"
                cells = [("–" if pd.isna(v) else v.strftime(fmt)) for v in t]
                has_times = True
                label = re.sub(r"_(utc|local)$", "", str(name)) if words else str(name)
            else:
                def cell(v):
                    if isinstance(v, float) and float_format and not math.isnan(v):
                        return float_format.format(v)
                    return format_number(v) if not isinstance(v, str) else v
                cells = [cell(v) for v in col.tolist()]
                label = str(name)
            cols[column_words(label) if words else label] = cells
        shown = pd.DataFrame(cols) if cols else shown
        body = shown.to_html(index=False, border=0, classes="pl-table", escape=True,
                             na_rep="–")
        if not words:   # long snake_case headers may wrap at their underscores
            body = re.sub(r"<th>([^<]*)</th>",
                          lambda m: "<th>" + m.group(1).replace("_", "_<wbr>") + "</th>",
                          body)
        self.blocks.append(_Block("table", body, (caption or "") + note or None,
                                  zone=zone if has_times else None))
        return self

    def chart(self, chart: Any, caption: str | None = None) -> Report:
        """Add a chart (an altair chart or a Vega-Lite specification dict)."""
        self.blocks.append(_Block("chart", _spec_of(chart), caption))
        return self

    def preformatted(self, text: str, caption: str | None = None) -> Report:
        """Add preformatted text (e.g. a results object's ``summary()``)."""
        self.blocks.append(_Block("pre", str(text), caption))
        return self

    @property
    def n_charts(self) -> int:
        """Number of charts in the report."""
        return sum(b.kind == "chart" for b in self.blocks)

    # -- output -------------------------------------------------------------------
    def to_html(self, *, generated: _dt.datetime | None = None) -> str:
        """The report as one HTML document (JavaScript and data inline)."""
        specs = [b.content for b in self.blocks if b.kind == "chart"]
        versions = {_vl_version_of(s) for s in specs} or {_DEFAULT_VL}
        if len(versions) > 1:
            raise PowerlabError(f"charts target several Vega-Lite versions: {sorted(versions)}")
        js = javascript_bundle(versions.pop()) if specs else ""
        when = (generated or _dt.datetime.now(_dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
        esc = html.escape
        parts = []
        n = 0
        # the zone of each section's times, stated once under its heading
        timed, sec = set(), -1
        for i, b in enumerate(self.blocks):
            sec = i if b.kind == "heading" else sec
            if b.kind == "table" and b.zone:
                timed.add(sec)
        zone_note = '<p class="pl-tz">Times in {}.</p>'.format
        if -1 in timed:
            parts.append(zone_note(esc(self.time_zone)))
        for i, b in enumerate(self.blocks):
            if b.kind == "heading":
                parts.append(f"<h2>{esc(b.content)}</h2>")
                if i in timed:
                    parts.append(zone_note(esc(b.zone)))
            elif b.kind == "text":
                for para in re.split(r"\n\s*\n", b.content.strip()):
                    parts.append(f"<p>{esc(para)}</p>")
            elif b.kind == "figures":
                cells = "".join(f'<div class="pl-fig"><div class="pl-fig-v">{esc(v)}</div>'
                                f'<div class="pl-fig-k">{esc(k)}</div></div>'
                                for k, v in b.content.items())
                parts.append(f'<div class="pl-figs">{cells}</div>')
                if b.caption:
                    parts.append(f'<p class="pl-cap">{esc(b.caption)}</p>')
            elif b.kind == "table":
                cap = f'<p class="pl-cap">{esc(b.caption)}</p>' if b.caption else ""
                wide = " pl-wide" if b.content.split("</thead>", 1)[0].count("<th") \
                    > WIDE_COLUMNS else ""       # printed on a landscape page
                parts.append(f'<div class="pl-tablewrap{wide}">{b.content}</div>{cap}')
            elif b.kind == "pre":
                cap = f'<p class="pl-cap">{esc(b.caption)}</p>' if b.caption else ""
                parts.append(f"<pre>{esc(b.content)}</pre>{cap}")
            elif b.kind == "chart":
                cap = f'<p class="pl-cap">{esc(b.caption)}</p>' if b.caption else ""
                parts.append(
                    f'<figure><div class="pl-chart" id="pl-chart-{n}" data-chart="{n}"></div>'
                    f'<script type="application/json" id="pl-spec-{n}">'
                    f"{_json_for_script(b.content)}</script>{cap}</figure>")
                n += 1
        sub = f'<p class="pl-sub">{esc(self.subtitle)}</p>' if self.subtitle else ""
        body = "\n".join(parts)
        return _TEMPLATE.format(
            title=esc(self.title), sub=sub, body=body, n=n, js=js,
            footer=esc(f"Generated by powerlab {__version__} on {when}. "
                       "Self-contained: opens without network access."),
        )

    def write(self, path: str | os.PathLike) -> Path:
        """Write the report atomically (temporary file, fsync, rename) and return its path."""
        path = Path(path)
        text = self.to_html()
        atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        return path

    def _repr_html_(self) -> str:
        n = self.n_charts
        return (f"<b>powerlab Report</b> “{html.escape(self.title)}”: {len(self.blocks)} "
                f"blocks, {n} chart{'s' if n != 1 else ''}")


def write_report(path: str | os.PathLike, title: str, blocks: list[tuple[str, Any]], *,
                 subtitle: str | None = None) -> Path:
    """Write a report from ``(kind, content)`` pairs in one call.

    Parameters
    ----------
    path : path-like
        Output HTML file.
    title : str
    blocks : list of (str, object)
        ``kind`` is ``"heading"``, ``"text"``, ``"figures"`` (dict), ``"table"``
        (DataFrame), ``"chart"`` (altair chart or dict) or ``"pre"`` (text).
    subtitle : str, optional

    Returns
    -------
    pathlib.Path
    """
    rep = Report(title, subtitle)
    adders = {"heading": rep.heading, "text": rep.text, "figures": rep.figures,
              "table": rep.table, "chart": rep.chart, "pre": rep.preformatted}
    for kind, content in blocks:
        choice(kind, "block kind", sorted(adders))
        adders[kind](content)
    return rep.write(path)


_TEMPLATE = """<!DOCTYPE html>
<html lang="en" data-powerlab-status="loading">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:">
<title>{title}</title>
<script>
window.powerlabReport = {{expected: {n}, rendered: 0, errors: []}};
window.addEventListener("error", function (e) {{
  window.powerlabReport.errors.push(String(e.message || e));
}});
</script>
<style>
body {{ font-family: 'Source Sans 3', 'Helvetica Neue', Arial, sans-serif; color: #222;
       max-width: 1000px; margin: 2em auto; padding: 0 1em; line-height: 1.45; }}
h1 {{ margin-bottom: 0.1em; }}
h2 {{ margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }}
.pl-sub {{ color: #555; margin-top: 0; }}
.pl-cap {{ color: #555; font-size: 0.9em; margin-top: 0.2em; }}
.pl-tz {{ color: #555; font-size: 0.85em; margin: 0.2em 0; }}
.pl-figs {{ display: flex; flex-wrap: wrap; gap: 0.8em; margin: 0.8em 0; }}
.pl-fig {{ border: 1px solid #ddd; border-radius: 6px; padding: 0.5em 0.9em; min-width: 9em; }}
.pl-fig-v {{ font-size: 1.35em; font-weight: 600; color: #0072B2; }}
.pl-fig-k {{ font-size: 0.85em; color: #555; }}
.pl-tablewrap {{ overflow-x: auto; }}
table.pl-table {{ border-collapse: collapse; font-size: 0.85em; }}
table.pl-table th, table.pl-table td {{ padding: 0.25em 0.6em; border-bottom: 1px solid #eee;
                                        text-align: right; }}
figure {{ margin: 1em 0; }}
pre {{ background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.8em; }}
footer {{ margin-top: 3em; color: #777; font-size: 0.8em; }}
table.pl-table th {{ white-space: normal; vertical-align: bottom; }}
.pl-chart svg {{ max-width: 100%; height: auto; }}
@page {{ size: A4; margin: 12mm; }}
@page wide {{ size: A4 landscape; margin: 12mm; }}
@media print {{
  body {{ max-width: none; margin: 0; padding: 0; font-size: 10pt; }}
  h1, h2 {{ break-after: avoid; page-break-after: avoid; }}
  .pl-fig, figure, .pl-tablewrap, pre, .pl-cap {{ break-inside: avoid;
                                                page-break-inside: avoid; }}
  .pl-figs {{ gap: 0.5em; }}
  .pl-fig {{ min-width: 7em; padding: 0.3em 0.6em; }}
  .pl-tablewrap {{ overflow: visible; }}
  table.pl-table {{ width: 100%; font-size: 7.5pt; }}
  table.pl-table th, table.pl-table td {{ padding: 0.15em 0.3em; overflow-wrap: break-word;
                                          word-break: normal; }}
  table.pl-table th {{ overflow-wrap: normal; hyphens: manual; }}
  .pl-tablewrap.pl-wide {{ page: wide; }}
  .pl-wide table.pl-table {{ font-size: 6.5pt; }}
  pre {{ white-space: pre-wrap; overflow-wrap: anywhere; overflow: visible;
         font-size: 7.5pt; }}
  .pl-chart svg {{ max-width: 100% !important; height: auto !important; }}
  footer {{ margin-top: 1.5em; }}
}}
</style>
</head>
<body>
<h1>{title}</h1>
{sub}
{body}
<footer>{footer}</footer>
<script>{js}</script>
<script>
(function () {{
  var state = window.powerlabReport;
  var root = document.documentElement;
  function finish() {{
    if (state.rendered + state.errors.length >= state.expected) {{
      root.setAttribute("data-powerlab-status", state.errors.length ? "error" : "done");
    }}
  }}
  if (state.expected === 0) {{ finish(); return; }}
  if (typeof window.vegaEmbed !== "function") {{
    state.errors.push("vegaEmbed is not available");
    root.setAttribute("data-powerlab-status", "error");
    return;
  }}
  var divs = document.querySelectorAll("div.pl-chart");
  Array.prototype.forEach.call(divs, function (div) {{
    var i = div.getAttribute("data-chart");
    var spec = JSON.parse(document.getElementById("pl-spec-" + i).textContent);
    window.vegaEmbed(div, spec, {{renderer: "svg", actions: false}})
      .then(function () {{ state.rendered += 1; div.setAttribute("data-rendered", "1"); finish(); }})
      .catch(function (err) {{
        state.errors.push("chart " + i + ": " + String(err && err.message || err));
        console.error("powerlab chart " + i + " failed:", err);
        div.textContent = "This chart failed to render: " + String(err && err.message || err);
        finish();
      }});
  }});
}})();
</script>
</body>
</html>
"""


def interconnection_section(rep: Report, compliance: Any, sizing: Any = None,
                            resonance: Any = None, *, heading: str = "Interconnection",
                            note: str | None = None) -> Report:
    """Add the interconnection section: compliance table, cheapest passing mitigation and
    its cost, resonance table (results objects of ``powerlab.site``; nothing computed)."""
    rep.heading(heading)
    sf = compliance.summary_frame()
    failed = compliance.failed
    rep.text(f"Requirement spec {compliance.spec.name!r}, {compliance.description}: "
             + (f"{len(failed)} of {len(sf)} requirements fail ({', '.join(failed)})."
                if failed else f"all {len(sf)} requirements pass."))
    cols = ["requirement", "limit", "value", "unit", "exceed_probability", "verdict",
            "illustrative", "note"]
    rep.table(sf[cols], "Compliance: value is the worst draw; a requirement the data cannot "
                        "show met fails with no value (see note). Limits marked "
                        "illustrative are assumptions, not a utility's numbers.")
    if sizing is not None:
        if sizing.found:
            c = sizing.cheapest
            rep.figures({
                "cheapest passing mitigation": c["option"],
                "extra energy": f"{c['extra_energy_megawatt_hours_per_day']:.2f} MWh/day",
                "throughput loss": f"{c['throughput_loss_pct']:.2f} %",
                "storage": f"{c['storage_megawatt_hours']:.2f} MWh, "
                           f"{c['storage_megawatts']:.1f} MW",
                "cost (illustrative prices)": f"${c['cost_usd_per_day']:,.0f}/day",
                "engine runs / option evaluations":
                    f"{sizing.engine_runs} / {sizing.evaluations}"})
            cols = ["option", "extra_energy_megawatt_hours_per_day", "throughput_loss_pct",
                    "storage_megawatt_hours", "cost_usd_per_day"]
            rep.table(sizing.options[cols], "Pareto set of passing options, cheapest first.",
                      max_rows=10)
        else:
            rep.text("No option of the searched space passes: " + str(sizing.summary())
                     .splitlines()[-1])
    if note:
        rep.text(note)
    if resonance is not None:
        h = resonance.harmonics
        hits = h[h["modes"].fillna("").astype(str) != ""]
        rep.table(resonance.summary_frame(), "Resonance screening: periodic components, "
                                             "their hits in the grid mode bands and the "
                                             "step period or stagger that clears them.")
        if len(hits):
            rep.table(hits, "Harmonics in a grid mode band (amplitudes in MW; resolved "
                            "False: above the data's Nyquist frequency, 1/k assumed).",
                      max_rows=15)
    return rep
