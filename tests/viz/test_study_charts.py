"""The study package's page carries its charts (issue 33 item 8): the charts of
powerlab.viz.study_charts, rendered to SVG by vl-convert and drawn inline by
powerlab.interconnect.studypage (which may not import powerlab.viz), each also written as
charts/*.svg; under altair's row limit; no script from a hostile scenario name; and in a
real headless Chromium (no network) every figure draws and printed headers stay whole."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import PowerlabError
from powerlab.interconnect.horizonband import HorizonBand
from powerlab.interconnect.powertrace import PowerTrace
from powerlab.interconnect.studypackage import RideThrough, ShortWindow, study_package
from powerlab.interconnect.studypage import inline_svg
from powerlab.site.scenario import read_scenario
from powerlab.viz.render import DEFAULT_MAX_ROWS
from powerlab.viz.study_charts import pmu_chart, study_chart_specs, study_charts

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "data/requirements/choukse2025_forms.yaml"
EVIL = "</svg><script>window.pwned = 1</script><!--"
T0 = pd.Timestamp("2025-06-01T00:00:00Z")


@pytest.fixture(scope="module")
def pkg():
    sc = read_scenario(REPO / "data/scenarios/small.yaml")
    sc = dataclasses.replace(sc, name=f"site {EVIL}")
    return study_package(sc, SPEC, draws=2, short=ShortWindow(tick_s=0.1, window_s=60),
                         ride_through=RideThrough(draws=1))


@pytest.fixture(scope="module")
def charts(pkg):
    return study_charts(pkg)


def _trace(level_w, n=10, tick_s=1.0, draw=0):
    x = np.full(n, float(level_w))
    return PowerTrace(draw, tick_s, T0, x, x)


def test_horizon_band_known_answer():
    """Three draws at 1, 2 and 3 MW: the median is 2 MW, the 5 % and 95 % quantiles
    (numpy's linear interpolation) 1 + 0.05 x 2 = 1.1 and 2.9 MW, the peak 3 MW; a NaN
    tick is left out of its bin, not averaged in."""
    band = HorizonBand("facility", max_bins=5)
    for d, level in enumerate((1e6, 2e6, 3e6)):
        band.add(_trace(level, draw=d))
    band.means[2][0] = np.nan          # as if a gap: the band over the other draws
    t = band.table()
    assert len(t) == 5 and t["bin_s"].tolist() == [2.0] * 5 and (t["draws"] == 3).all()
    assert t["power_megawatts_median"].iloc[1:].tolist() == pytest.approx([2.0] * 4)
    assert t["power_megawatts_p05"].iloc[1:].tolist() == pytest.approx([1.1] * 4)
    assert t["power_megawatts_p95"].iloc[1:].tolist() == pytest.approx([2.9] * 4)
    assert t["power_megawatts_median"].iloc[0] == pytest.approx(1.5)
    assert (t["power_megawatts_peak"] == 3.0).all()
    assert t["timestamp_utc"].iloc[1] == T0 + pd.Timedelta(seconds=2)
    gap = HorizonBand("facility", max_bins=5)
    x = np.array([np.nan, 4e6, 1e6, 1e6, 1e6, 1e6, 1e6, 1e6, 1e6, 1e6])
    gap.add(PowerTrace(0, 1.0, T0, x, x))
    assert gap.table()["power_megawatts_median"].iloc[0] == pytest.approx(4.0)


def test_the_package_band_agrees_with_its_figures_whatever_the_bins(pkg):
    band = pkg.tables["power_over_horizon"]
    assert len(band) <= 400 and (band["draws"] == pkg.draws).all()
    assert band["bin_s"].sum() == pytest.approx(pkg.trace.duration_s)
    # the largest tick of any draw is the package's peak figure, exactly
    assert band["power_megawatts_peak"].max() == pytest.approx(
        pkg.per_draw["peak_power_megawatts"].max(), rel=1e-12)
    assert (band["power_megawatts_p05"] <= band["power_megawatts_median"] + 1e-12).all()
    assert (band["power_megawatts_median"] <= band["power_megawatts_p95"] + 1e-12).all()
    # another bin count: the same energy and the same peak of draw 0
    for bins in (97, 400):
        b = HorizonBand("facility", max_bins=bins)
        b.add(pkg.trace)
        t = b.table()
        energy = float((t["power_megawatts_draw0"] * t["bin_s"]).sum())
        assert energy == pytest.approx(pkg.trace.power_w("facility").sum()
                                       * pkg.trace.tick_s / 1e6, rel=1e-9)
        assert t["power_megawatts_peak"].max() == pytest.approx(
            pkg.per_draw["peak_power_megawatts"].iloc[0], rel=1e-12)


def _rows(spec: dict) -> int:
    n = sum(len(v) for v in spec.get("datasets", {}).values())
    return n + len(spec.get("data", {}).get("values", []) or [])


def test_every_section_has_its_charts_under_the_row_limit(pkg):
    specs = study_chart_specs(pkg)
    assert set(specs) == {"figures", "energisation", "spectrum", "pmu", "flicker",
                          "equipment", "ride_through"}
    for name, items in specs.items():
        for title, chart in items:
            rows = _rows(chart.to_dict())
            assert 0 < rows <= DEFAULT_MAX_ROWS, (name, title, rows)


def test_pmu_chart_thins_a_long_view_and_says_so():
    """300 s at 120 frames/s (36,000 frames, three series): a 10-s window around the
    step, one frame in two, said in the subtitle."""
    t = np.arange(36000) / 120.0
    raw = np.where(t < 200.0, 10.0, 30.0)
    pmu = pd.DataFrame({"time_s": t, "power_megawatts_raw": raw,
                        "power_megawatts_pmu_p_class": raw,
                        "power_megawatts_pmu_m_class": raw})
    spec = pmu_chart(pmu).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) <= DEFAULT_MAX_ROWS
    times = [r["time_s"] for r in rows]
    assert min(times) < 200.0 < max(times) and max(times) - min(times) <= 10.0
    assert "one frame in 2" in " ".join(spec["title"]["subtitle"] if isinstance(
        spec["title"]["subtitle"], list) else [spec["title"]["subtitle"]])


def test_page_draws_every_chart_inline_with_its_own_ids_and_no_script(pkg, charts, tmp_path):
    files = pkg.write(tmp_path / "out", charts=charts)
    page = files["page"].read_text("utf-8")
    n = sum(len(v) for v in charts.values())
    assert n >= 9 and page.count("<figure class='chart'") == n
    assert "<script" not in page.lower() and "&lt;script&gt;" in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)) and ids      # clip paths of different charts
    assert set(re.findall(r"url\(#([^)]+)\)", page)) <= set(ids)
    # each chart sits under its section's heading: the spectrum's before its table
    spec_h2 = page.index(". Oscillation")
    assert spec_h2 < page.index("Oscillation spectrum of the short window") < page.index(
        "<table", spec_h2)
    svgs = sorted((tmp_path / "out" / "charts").glob("*.svg"))
    assert len(svgs) == n
    listed = {Path(p) for k, p in files.items() if k.startswith("chart (")}
    assert listed == set(svgs)
    assert all(f"<li>charts/{p.name}: chart (" in page for p in svgs)
    for p in svgs:
        assert ET.fromstring(p.read_text("utf-8")).tag.endswith("svg")


def test_write_without_charts_writes_no_chart(pkg, tmp_path):
    files = pkg.write(tmp_path / "plain")
    assert not (tmp_path / "plain" / "charts").exists()
    assert "<figure" not in files["page"].read_text("utf-8")


_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">{}</svg>'


@pytest.mark.parametrize("bad", [
    _SVG.format("<script>alert(1)</script>"),
    _SVG.format('<rect onload="alert(1)" width="1" height="1"/>'),
    _SVG.format("<foreignObject><div>x</div></foreignObject>"),
    _SVG.format('<a href="javascript:alert(1)"><rect/></a>'),
    _SVG.format('<image href="https://example.org/x.png"/>'),
    '<!DOCTYPE svg [<!ENTITY x "y">]>' + _SVG.format(""),
    "<html><script>alert(1)</script></html>",
    "not svg at all",
])
def test_inline_svg_refuses_anything_but_plain_svg(bad):
    with pytest.raises(PowerlabError):
        inline_svg(bad, "p-")


def test_inline_svg_prefixes_ids_and_their_references():
    svg = _SVG.format('<clipPath id="clip1"><rect/></clipPath><g clip-path="url(#clip1)"/>')
    out = inline_svg(svg, "c-x-0-")
    assert 'id="c-x-0-clip1"' in out and "url(#c-x-0-clip1)" in out and "#clip1" not in out


@pytest.mark.slow
def test_cli_writes_the_charts_unless_told_not_to(tmp_path, capsys):
    from powerlab.cli import main

    args = ["study-package", str(REPO / "data/scenarios/small.yaml"), "--requirements",
            str(SPEC), "--draws", "1", "--short-window-s", "30", "--short-tick-s", "0.1",
            "--ride-through-draws", "1", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "c")]) == 0
    page = (tmp_path / "c" / "study_package.html").read_text("utf-8")
    n = len(list((tmp_path / "c" / "charts").glob("*.svg")))
    assert n >= 9 and page.count("<figure class='chart'") == n
    assert main([*args, "--out", str(tmp_path / "n"), "--no-charts"]) == 0
    assert not (tmp_path / "n" / "charts").exists()
    capsys.readouterr()


# --------------------------------------------------------------------- in a real browser
from .test_report_browser import browser, open_report  # noqa: E402,F401  (the fixture)

_READY = "document.readyState === 'complete' ? 'done' : 'loading'"


def test_study_page_draws_every_chart_offline(browser, pkg, charts, tmp_path):  # noqa: F811
    page = pkg.write(tmp_path / "b", charts=charts)["page"]
    result = open_report(browser, page, status_js=_READY, chart_selector="figure.chart",
                         extra_js="String(window.pwned)")
    assert result["status"] == "done"
    assert result["console_errors"] == [] and result["exceptions"] == []
    assert result["external_requests"] == []
    assert result["extra"] == "undefined"          # the hostile name ran nothing
    assert len(result["charts"]) == sum(len(v) for v in charts.values())
    for c in result["charts"]:
        assert c["svg"] and c["width"] > 50 and c["height"] > 30, c
        assert c["marks"] > 10, c


#: Each header's words (text between spaces, or between <wbr> after an underscore) that
#: the layout breaks over two lines; the tables wider than the page; the wide ones apart.
_PRINT_JS = r"""(function () {
  var out = {broken: [], overflow: [], wide: [], n_th: 0,
             width: document.documentElement.clientWidth};
  document.querySelectorAll('th').forEach(function (th) {
    out.n_th++;
    var w = document.createTreeWalker(th, NodeFilter.SHOW_TEXT), node;
    while ((node = w.nextNode())) {
      var re = /\S+/g, m;
      while ((m = re.exec(node.data))) {
        var r = document.createRange();
        r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        var tops = {};
        Array.from(r.getClientRects()).forEach(function (q) {
          if (q.width > 0) tops[Math.round(q.top)] = 1; });
        if (Object.keys(tops).length > 1) out.broken.push(m[0]);
      }
    }
  });
  document.querySelectorAll('table').forEach(function (t, i) {
    var wide = !!t.closest('.wide, .pl-wide');
    var right = t.getBoundingClientRect().right;
    if (wide) out.wide.push(Math.round(right));
    else if (right > out.width + 0.5) out.overflow.push([i, Math.round(right)]);
  });
  return JSON.stringify(out);
})()"""


def _mm_px(mm: float) -> int:
    return int(mm / 25.4 * 96)


def _print_layout(browser, path: Path, width_px: int, css: str = "") -> dict:  # noqa: F811
    """The page laid out for print (print media, the page's content width)."""
    import json
    import time

    cdp = browser.page()
    try:
        cdp.call("Page.enable")
        cdp.call("Emulation.setEmulatedMedia", media="print")
        cdp.call("Emulation.setScrollbarsHidden", hidden=True)
        cdp.call("Emulation.setDeviceMetricsOverride", width=width_px, height=1100,
                 deviceScaleFactor=1, mobile=False)
        cdp.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + 30
        while cdp.evaluate("document.readyState") != "complete" and time.monotonic() < deadline:
            time.sleep(0.1)
        if css:
            cdp.evaluate("var s = document.createElement('style'); s.textContent = "
                         f"{json.dumps(css)}; document.head.appendChild(s); 1")
        return json.loads(cdp.evaluate(_PRINT_JS))
    finally:
        cdp.close()


def _assert_prints_whole(browser, path: Path, margin_mm: float) -> None:  # noqa: F811
    """A4 portrait: no header word broken, every table but the wide ones within the
    page; A4 landscape: the wide ones within it."""
    portrait = _print_layout(browser, path, _mm_px(210 - 2 * margin_mm))
    assert portrait["n_th"] > 20
    assert portrait["broken"] == [], portrait["broken"]
    assert portrait["overflow"] == [], portrait
    landscape = _print_layout(browser, path, _mm_px(297 - 2 * margin_mm))
    assert landscape["broken"] == [] and landscape["overflow"] == []
    assert landscape["wide"] and max(landscape["wide"]) <= landscape["width"] + 0.5, landscape
    # the check can fail: headers allowed to break anywhere do break mid-word
    loose = _print_layout(browser, path, _mm_px(210 - 2 * margin_mm),
                          css="th{word-break:break-all !important}")
    assert loose["broken"]


@pytest.mark.slow
def test_study_page_prints_headers_whole_on_a4(browser, pkg, charts, tmp_path):  # noqa: F811
    page = pkg.write(tmp_path / "p", charts=charts)["page"]
    _assert_prints_whole(browser, page, 14)
    pypdf = pytest.importorskip("pypdf")
    import base64
    import io
    import time

    cdp = browser.page()
    try:
        cdp.call("Page.enable")
        cdp.call("Page.navigate", url=page.resolve().as_uri())
        time.sleep(1.0)
        pdf = base64.b64decode(cdp.call("Page.printToPDF", paperWidth=8.27,
                                        paperHeight=11.69, preferCSSPageSize=True)["data"])
    finally:
        cdp.close()
    boxes = [(float(p.mediabox.width), float(p.mediabox.height))
             for p in pypdf.PdfReader(io.BytesIO(pdf)).pages]
    assert any(w > h for w, h in boxes) and any(h > w for w, h in boxes)  # wide: landscape


def test_report_prints_headers_whole_on_a4(browser, pkg, tmp_path):  # noqa: F811
    from powerlab.viz.report import Report

    rep = Report("Wide tables")
    rep.table(pkg.tables["lines"].head(6))                       # 19 columns: landscape
    rep.table(pkg.tables["lines"].head(6), words=False)
    rep.table(pkg.tables["voltage_ride_through"].head(4).iloc[:, :9], words=False)
    rep.table(pkg.figures.head(4))
    _assert_prints_whole(browser, rep.write(tmp_path / "r.html"), 12)
