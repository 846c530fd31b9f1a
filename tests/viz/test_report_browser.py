"""Open powerlab's HTML reports in a real headless Chromium with networking disabled.

The browser is driven over the Chrome DevTools protocol (a small client on
``websocket-client``): the network is switched off three ways (DevTools offline emulation,
a host resolver that resolves nothing, an unreachable proxy), every console message,
uncaught exception and network request is recorded, and the page's DOM is inspected for
one rendered SVG per chart.

Skips (with the reason) only where no Chromium executable can be found; set
``POWERLAB_CHROMIUM`` to point at one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest

from powerlab import viz
from powerlab.viz.report import Report

from ..conftest import make_telemetry

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
               "chrome", "headless_shell")


def _find_chromium() -> str | None:
    env = os.environ.get("POWERLAB_CHROMIUM")
    if env:
        return env if Path(env).exists() else shutil.which(env)
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class _CDP:
    """A minimal synchronous Chrome DevTools protocol client for one page."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client (a jupyter_server dependency)

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def close(self) -> None:
        self.ws.close()
        target = getattr(self, "target_id", None)
        if target:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/close/{target}",
                                        timeout=10) as r:
                r.read()


class Browser:
    """Headless Chromium started by the test, with its network disabled."""

    def __init__(self, exe: str, profile_dir: Path, *, allow_loopback: bool = False):
        rules = "MAP * ~NOTFOUND" + (", EXCLUDE 127.0.0.1" if allow_loopback else "")
        args = [
            exe, "--headless=new", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-background-networking", "--disable-sync",
            "--disable-component-update", "--disable-default-apps", "--mute-audio",
            f"--host-resolver-rules={rules}", "--proxy-server=http://127.0.0.1:9",
            "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
            "--remote-allow-origins=*", f"--user-data-dir={profile_dir}",
            "--window-size=1200,900", "about:blank",
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        deadline = time.monotonic() + 60
        self.port = None
        lines = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                if self.proc.poll() is not None:
                    break
                continue
            lines.append(line)
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.close()
            raise RuntimeError("chromium did not start its DevTools server:\n" + "".join(lines))
        # keep draining stderr so chromium never blocks on a full pipe
        import threading

        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def page(self) -> _CDP:
        """A fresh tab (no console history from earlier pages)."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank",
                                     method="PUT")
        with urllib.request.urlopen(req, timeout=10) as r:
            target = json.load(r)
        cdp = _CDP(target["webSocketDebuggerUrl"])
        cdp.target_id = target["id"]
        cdp.port = self.port
        return cdp

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    exe = _find_chromium()
    if exe is None:
        pytest.skip("no Chromium executable found (install Debian's 'chromium' package or "
                    "set POWERLAB_CHROMIUM)")
    b = Browser(exe, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


_STATUS = ("document.readyState === 'complete' ? "
           "document.documentElement.getAttribute('data-powerlab-status') : 'loading'")


def open_report(browser: Browser, path: Path, timeout_s: float = 60.0, *,
                status_js: str = _STATUS, chart_selector: str = "div.pl-chart",
                extra_js: str = "null") -> dict:
    """Load ``path`` offline and return what the page did (status, charts, console, requests).

    ``status_js`` is polled until it gives ``"done"`` or ``"error"``."""
    cdp = browser.page()
    try:
        cdp.call("Runtime.enable")
        cdp.call("Log.enable")
        cdp.call("Page.enable")
        cdp.call("Network.enable")
        cdp.call("Network.emulateNetworkConditions", offline=True, latency=0,
                 downloadThroughput=-1, uploadThroughput=-1)
        cdp.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + timeout_s
        status = None
        while time.monotonic() < deadline:
            status = cdp.evaluate(status_js)
            if status in ("done", "error"):
                break
            time.sleep(0.2)
        state = cdp.evaluate("JSON.stringify(window.powerlabReport || null)")
        charts_info = cdp.evaluate("""JSON.stringify(Array.from(
            document.querySelectorAll('""" + chart_selector + """')).map(function (d) {
              var s = d.querySelector('svg');
              var c = d.querySelector('canvas');
              var r = (s || c) ? (s || c).getBoundingClientRect() : {width: 0, height: 0};
              return {id: d.id, svg: !!s, canvas: !!c, width: r.width, height: r.height,
                      marks: s ? s.querySelectorAll('path, rect, line, text, circle').length
                               : 0};
            }))""")
        extra = cdp.evaluate(extra_js)
        cdp.call("Runtime.evaluate", expression="1")  # flush pending events
        console, exceptions, requests = [], [], []
        for ev in cdp.events:
            m, p = ev["method"], ev.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                console.append(" ".join(str(a.get("value", a.get("description", "")))
                                        for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                console.append(p["entry"].get("text", ""))
            elif m == "Runtime.exceptionThrown":
                exceptions.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Network.requestWillBeSent":
                requests.append(p["request"]["url"])
        return {"status": status, "state": json.loads(state) if state else None,
                "charts": json.loads(charts_info), "console_errors": console,
                "extra": extra,
                "exceptions": exceptions,
                "external_requests": [u for u in requests
                                      if not u.startswith(("file:", "data:", "blob:",
                                                           "about:"))]}
    finally:
        cdp.close()


def assert_rendered(result: dict, n_expected: int) -> None:
    assert result["console_errors"] == [], result["console_errors"]
    assert result["exceptions"] == [], result["exceptions"]
    assert result["external_requests"] == [], result["external_requests"]
    assert result["status"] == "done", result
    assert result["state"]["rendered"] == n_expected
    assert result["state"]["errors"] == []
    assert len(result["charts"]) == n_expected
    for c in result["charts"]:
        assert c["svg"] or c["canvas"], c
        assert c["width"] > 50 and c["height"] > 30, c
        assert c["marks"] > 10, c


def _all_kinds_report() -> Report:
    tel = make_telemetry(n_hosts=2, n_gpus=4, n_samples=600, period_s=0.1)
    ts = pd.date_range("2025-06-01", periods=6000, freq="1s", tz="UTC")
    p = 40 + 5 * np.sin(np.arange(6000) / 60)
    tl = pd.DataFrame({"timestamp": ts, "power_megawatts": p,
                       "power_megawatts_lower": p - 1, "power_megawatts_upper": p + 1})
    ev = pd.DataFrame({"timestamp": ts[::1500], "event": "checkpoint"})
    hours = np.arange(24.0)
    eff = np.sin(hours / 24 * 2 * np.pi)
    prof = pd.DataFrame({"hour": hours, "effect_pct": eff, "lower_pct": eff - 0.2,
                         "upper_pct": eff + 0.2})
    f = np.linspace(0.01, 5, 500)
    rep = Report("All chart kinds", "browser test")
    rep.heading("Telemetry").chart(viz.telemetry_overview(tel))
    rep.chart(viz.telemetry_chart(tel, "temp_gpu_c", by="host"))
    rep.heading("Facility").chart(viz.facility_chart(tl, ev))
    rep.chart(viz.ramp_rate_chart(pd.DataFrame({"ramp_megawatts_per_s": np.diff(p)}),
                                     limit=0.05))
    rep.chart(viz.spectrum_chart(pd.DataFrame({"frequency_hz": f, "psd": 1 / f})))
    rep.heading("Time of day").chart(viz.hour_of_day_chart(prof, peak_hour=6,
                                                              trough_hour=18))
    rep.chart(viz.throttle_share_chart(pd.DataFrame({
        "hour": np.repeat(hours, 2), "reason": ["thermal", "power"] * 24,
        "share": np.linspace(0, 0.4, 48)})))
    rep.chart(viz.straggler_heatmap(pd.DataFrame({
        "host": np.repeat(["a", "b"], 4), "gpu_index": np.tile(range(4), 2),
        "score": np.linspace(-2, 4, 8), "flagged": [False] * 7 + [True]})))
    rep.figures({"peak": "45.0 MW"}).table(tl.head(3))
    return rep


@pytest.mark.slow
def test_every_chart_kind_renders_offline(browser, tmp_path):
    rep = _all_kinds_report()
    path = rep.write(tmp_path / "all.html")
    result = open_report(browser, path)
    assert_rendered(result, rep.n_charts)


def test_broken_chart_is_detected(browser, tmp_path):
    """The checks can fail: a spec vega cannot compile shows up as an error."""
    rep = Report("broken")
    rep.chart({"$schema": "https://vega.github.io/schema/vega-lite/v6.4.1.json",
               "data": {"values": [{"a": 1}]}, "mark": "no-such-mark",
               "encoding": {"x": {"field": "a", "type": "quantitative"}}})
    result = open_report(browser, rep.write(tmp_path / "broken.html"))
    assert result["status"] == "error"
    assert result["state"]["errors"]
    assert result["console_errors"]


def test_network_is_really_off(browser, tmp_path):
    """A page that tries to fetch from the network gets nothing back."""
    page = tmp_path / "fetch.html"
    page.write_text("<!DOCTYPE html><html><body><script>"
                    "fetch('https://cdn.jsdelivr.net/npm/vega@6').then("
                    "function () { document.documentElement.setAttribute("
                    "'data-powerlab-status', 'done'); },"
                    "function () { document.documentElement.setAttribute("
                    "'data-powerlab-status', 'error'); });"
                    "</script></body></html>")
    result = open_report(browser, page, timeout_s=30)
    assert result["status"] == "error"
    assert result["external_requests"]  # the attempt was seen, and it failed


def _notebook_page(tmp_path, outputs, name="outputs.html"):
    page = tmp_path / name
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                    + "".join(f"<div class='output'>{o}</div>" for o in outputs)
                    + "</body></html>", encoding="utf-8")
    return page


_NB_STATUS = ("(function () { var d = document.querySelectorAll('div[id^=powerlab-]');"
              " if (d.length !== N) return null;"
              " if (Array.prototype.some.call(d, function (x) {"
              "   return x.textContent.indexOf('chart failed') >= 0; })) return 'error';"
              " var ok = Array.prototype.every.call(d, function (x) {"
              "   return !!x.querySelector('svg'); });"
              " return ok ? 'done' : null;"
              "})()")


def _charts_for_notebook():
    h = np.arange(24.0)
    a = viz.hour_of_day_chart(pd.DataFrame({"hour": h, "effect_pct": np.sin(h)}))
    b = viz.straggler_heatmap(pd.DataFrame({"host": ["a", "a", "b"], "gpu_index": [0, 1, 0],
                                            "score": [0.0, 2.0, -1.0]}))
    return a, b


def test_notebook_renderer_sends_the_javascript_once(browser, tmp_path):
    """Three chart outputs of the offline notebook renderer on one page, as in JupyterLab:
    only the first carries the (gzip-compressed) JavaScript; all three render, nothing is
    fetched — also when the output with the JavaScript comes last on the page."""
    a, b = _charts_for_notebook()
    viz.use_offline_renderer()
    with alt.renderers.enable("powerlab-html"):
        outputs = [ch._repr_mimebundle_()["text/html"] for ch in (a, b, a)]
    assert [("DecompressionStream" in o) for o in outputs] == [True, False, False]
    # the same chart shown twice (two open copies of a notebook) gets two element ids
    ids = [re.search(r'<div id="(powerlab-[0-9a-f]{32})"', o).group(1) for o in outputs]
    assert len(set(ids)) == 3
    assert len(outputs[0]) < 450_000 and max(len(o) for o in outputs[1:]) < 20_000
    for order, name in (((0, 1, 2), "first.html"), ((1, 2, 0), "last.html")):
        page = _notebook_page(tmp_path, [outputs[i] for i in order], name)
        result = open_report(browser, page, status_js=_NB_STATUS.replace("N", "3"),
                             chart_selector="div[id^=powerlab-]")
        assert result["status"] == "done", result
        assert result["console_errors"] == [] and result["exceptions"] == []
        assert result["external_requests"] == []
        assert len(result["charts"]) == 3 and all(c["marks"] > 10 for c in result["charts"])
        assert sorted(c["id"] for c in result["charts"]) == sorted(ids)  # both copies drew


def test_notebook_chart_without_the_javascript_says_so(browser, tmp_path, monkeypatch):
    """The check can fail: an output whose JavaScript never arrives shows a clear message
    (after the wait) instead of an empty cell."""
    from powerlab.viz import render

    a, _ = _charts_for_notebook()
    monkeypatch.setattr(render, "WAIT_FOR_BUNDLE_MS", 300)
    viz.use_offline_renderer()
    with alt.renderers.enable("powerlab-html"):
        a._repr_mimebundle_()                      # this one would carry the JavaScript
        lonely = a._repr_mimebundle_()["text/html"]
    page = _notebook_page(tmp_path, [lonely])
    result = open_report(browser, page, status_js=_NB_STATUS.replace("N", "1"),
                         chart_selector="div[id^=powerlab-]", timeout_s=20,
                         extra_js="document.body.textContent")
    assert result["status"] == "error"
    assert "use_offline_renderer" in result["extra"]


def test_svg_mode_uses_altairs_static_renderer():
    a, _ = _charts_for_notebook()
    viz.use_offline_renderer("svg")
    try:
        bundle = a._repr_mimebundle_()
        bundle = bundle[0] if isinstance(bundle, tuple) else bundle
        assert "image/svg+xml" in bundle and "<svg" in bundle["image/svg+xml"]
        assert not any("<script" in str(v) for v in bundle.values())
    finally:
        viz.use_offline_renderer()


_INJECT = "</script><script>window.pwned = 1</script><!--"


def _injection_report() -> Report:
    rep = Report(f"title {_INJECT}", subtitle=_INJECT)
    rep.text(_INJECT).figures({_INJECT: _INJECT}).table(pd.DataFrame({"a": [_INJECT]}))
    rep.chart(viz.straggler_heatmap(pd.DataFrame({
        "host": [_INJECT, "b"], "gpu_index": [0, 0], "score": [1.0, -1.0],
        "reasons": [_INJECT, ""]}), details=("reasons",)))
    rep.preformatted(_INJECT)
    return rep


def test_interconnection_section_draws_the_results_it_is_given():
    from powerlab.interconnect.compliance import Compliance
    from powerlab.limits.requirements import parse_requirements
    from powerlab.viz.report import interconnection_section

    spec = parse_requirements({"name": "spec-x", "requirements": [
        {"name": "ramp_a", "kind": "ramp", "window_s": 1, "limit": 2, "unit": "MW/s",
         "source": "t", "illustrative": True},
        {"name": "step_b", "kind": "step", "within_s": 1, "limit": 5, "unit": "MW",
         "source": "t", "illustrative": True}]})
    chk = Compliance(spec).result(pd.DataFrame({"ramp_a": [3.0], "step_b": [1.0]}),
                                  tick_s=0.1, native_interval_s=0.1, duration_s=100)
    rep = interconnection_section(Report("t"), chk, None, None, note="a note")
    html = rep.to_html()
    assert "1 of 2 requirements fail (ramp_a)" in html and "spec-x" in html
    assert "step_b" in html and "a note" in html and "cheapest" not in html


def test_report_escapes_text_and_data(tmp_path):
    """No text or data value can close a script element or inject markup."""
    html = _injection_report().to_html()
    assert "<script>window.pwned" not in html
    assert html.count("<script") == html.count("</script>")
    assert "&lt;/script&gt;" in html  # text shown as text


def test_injection_does_not_run_in_the_browser(browser, tmp_path):
    path = _injection_report().write(tmp_path / "inject.html")
    result = open_report(browser, path, extra_js="typeof window.pwned")
    assert result["extra"] == "undefined"
    assert_rendered(result, 1)


def test_report_write_is_atomic_and_replaces(tmp_path):
    target = tmp_path / "sub" / "r.html"
    Report("one").text("first").write(target)
    Report("two").text("second").write(target)
    assert "second" in target.read_text() and "first" not in target.read_text()
    assert sorted(p.name for p in target.parent.iterdir()) == ["r.html"]  # no temp left


def test_report_rejects_mixed_vegalite_versions():
    from powerlab.exceptions import PowerlabError

    spec = {"data": {"values": [{"a": 1}]}, "mark": "point"}
    rep = Report("mixed")
    rep.chart({**spec, "$schema": "https://vega.github.io/schema/vega-lite/v6.4.1.json"})
    rep.chart({**spec, "$schema": "https://vega.github.io/schema/vega-lite/v5.20.1.json"})
    with pytest.raises(PowerlabError, match="several Vega-Lite versions"):
        rep.to_html()


# ----------------------------------------------------------------------------- printing
#: A4 portrait minus the report's 12 mm margins, in CSS pixels (96 per inch).
_PRINT_WIDTH_PX = round((210 - 2 * 12) / 25.4 * 96)

_PRINT_CHECK = """JSON.stringify((function () {
  var out = {tables: [], charts: [], pres: [], breaks: []};
  var bodyRight = document.body.getBoundingClientRect().right + 1;
  document.querySelectorAll('.pl-tablewrap').forEach(function (w) {
    var t = w.querySelector('table');
    out.tables.push({overflow: t.scrollWidth - w.clientWidth,
                     right: t.getBoundingClientRect().right - bodyRight});
  });
  document.querySelectorAll('.pl-chart svg').forEach(function (s) {
    out.charts.push({right: s.getBoundingClientRect().right - bodyRight,
                     width: s.getBoundingClientRect().width});
  });
  document.querySelectorAll('pre').forEach(function (p) {
    out.pres.push(p.scrollWidth - p.clientWidth);
  });
  document.querySelectorAll('.pl-fig, figure, .pl-tablewrap, pre').forEach(function (e) {
    out.breaks.push(getComputedStyle(e).breakInside);
  });
  return out;
})())"""


def _wide_report() -> Report:
    rep = _all_kinds_report()
    rep.heading("Mitigations")
    cols = {"variant": ["baseline", "power floor 60 % TDP", "ramp limit 2000 W/s",
                        "staggered starts 300 s", "battery 15 MW / 5 MWh", "all together"]}
    for name in ("swing_1s_megawatts", "swing_60s_megawatts", "ramp_up_megawatts_per_s",
                 "ramp_down_megawatts_per_s", "band_0p1_2hz_rms_megawatts",
                 "swing_1s_reduction_pct", "extra_energy_megawatt_hours",
                 "throughput_loss_pct", "exceed_probability_per_day"):
        cols[name] = np.linspace(0.001, 1234.5678, 6)
    rep.table(pd.DataFrame(cols), caption="every cost in a visible column")
    rep.figures({f"key figure {i}": f"{i * 1.234:.2f} MW" for i in range(14)})
    rep.preformatted("x" * 400 + "\n" + " ".join(["word"] * 200))
    return rep


@pytest.mark.slow
def test_report_prints_to_pdf_without_clipping(browser, tmp_path):
    """Print media at the A4 printable width: no table, chart or preformatted block is
    wider than the page, cards and tables are kept whole, and Chromium prints a PDF."""
    path = _wide_report().write(tmp_path / "print.html")
    result = open_report(browser, path)
    assert result["status"] == "done", result
    cdp = browser.page()
    try:
        cdp.call("Page.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=_PRINT_WIDTH_PX, height=1100,
                 deviceScaleFactor=1, mobile=False)
        cdp.call("Emulation.setEmulatedMedia", media="print")
        cdp.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and cdp.evaluate(_STATUS) != "done":
            time.sleep(0.2)
        layout = json.loads(cdp.evaluate(_PRINT_CHECK))
        pdf = cdp.call("Page.printToPDF", printBackground=True, preferCSSPageSize=True)
    finally:
        cdp.close()
    assert layout["tables"] and all(t["overflow"] <= 1 and t["right"] <= 1
                                    for t in layout["tables"]), layout["tables"]
    assert layout["charts"] and all(c["right"] <= 1 and c["width"] > 100
                                    for c in layout["charts"]), layout["charts"]
    assert all(over <= 1 for over in layout["pres"]), layout["pres"]
    assert set(layout["breaks"]) == {"avoid"}, layout["breaks"]
    import base64

    data = base64.b64decode(pdf["data"])
    assert data[:5] == b"%PDF-"
    (tmp_path / "print.pdf").write_bytes(data)
    pages = len(re.findall(rb"/Type\s*/Page[^s]", data))
    assert 2 <= pages <= 12, pages


def test_print_check_sees_a_clipped_table(browser, tmp_path):
    """The check can fail: a table that cannot wrap (one long unbreakable header in a
    no-wrap style) overflows the printable width and is reported."""
    rep = Report("clipped")
    rep.table(pd.DataFrame({"x" * 300: [1.0]}))
    html = rep.to_html().replace("</style>", "th { white-space: nowrap !important; "
                                 "overflow-wrap: normal !important; }</style>")
    path = tmp_path / "clipped.html"
    path.write_text(html, encoding="utf-8")
    cdp = browser.page()
    try:
        cdp.call("Page.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=_PRINT_WIDTH_PX, height=1100,
                 deviceScaleFactor=1, mobile=False)
        cdp.call("Emulation.setEmulatedMedia", media="print")
        cdp.call("Page.navigate", url=path.resolve().as_uri())
        time.sleep(1.0)
        layout = json.loads(cdp.evaluate(_PRINT_CHECK))
    finally:
        cdp.close()
    assert any(t["overflow"] > 1 for t in layout["tables"]), layout


def _print_pdf(browser, path: Path) -> tuple[dict, bytes]:
    """Print media at the A4 printable width: the layout check, and Chromium's PDF."""
    import base64

    cdp = browser.page()
    try:
        cdp.call("Page.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=_PRINT_WIDTH_PX, height=1100,
                 deviceScaleFactor=1, mobile=False)
        cdp.call("Emulation.setEmulatedMedia", media="print")
        cdp.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and cdp.evaluate(_STATUS) != "done":
            time.sleep(0.2)
        # every table cell whose text has no space yet takes more than one line: a word
        # broken inside (the "M/W/s" of a unit cell squeezed to one letter a line)
        broken = json.loads(cdp.evaluate("""JSON.stringify(Array.from(
            document.querySelectorAll('table.pl-table td, table.pl-table th')).filter(
            function (c) { var t = c.textContent.trim();
              if (!t || /\\s/.test(t)) return false;
              var r = document.createRange(); r.selectNodeContents(c);
              var tops = new Set(Array.from(r.getClientRects()).map(
                function (x) { return Math.round(x.top); }));
              return tops.size > 1; }).map(function (c) { return c.textContent; }))"""))
        pdf = cdp.call("Page.printToPDF", printBackground=True, preferCSSPageSize=True)
    finally:
        cdp.close()
    return {"broken": broken}, base64.b64decode(pdf["data"])


@pytest.mark.slow
def test_printed_compliance_table_reads_as_words_and_plain_numbers(browser, tmp_path):
    """The interconnection section of a real comply result, printed to PDF by Chromium and
    read back as text (pypdf): no cell broken inside a word (the compliance table once
    wrapped "MW/s" into "M/W/s"), no e-notation (a probability of 3.454e-09 reads
    3.45×10⁻⁹), column headers in words with units, and each section with times states
    its one time zone."""
    pypdf = pytest.importorskip("pypdf")
    from powerlab.interconnect.compliance import comply
    from powerlab.limits.requirements import read_requirements
    from powerlab.viz.report import interconnection_section

    from ..conftest import REPO
    from ..interconnect.test_sizing import scenario

    # the illustrative ERCOT spec: MW/min and MW/s units beside long notes
    spec = read_requirements(REPO / "data/requirements/ercot_large_load_illustrative.yaml")
    res = comply(scenario(0.02), spec, draws=2, seed=0)
    rep = Report("print check")
    interconnection_section(rep, res)
    ts = pd.date_range("2025-06-02T12:00Z", periods=3, freq="15min")
    rep.heading("Site in its own zone", time_zone="America/Chicago")
    rep.table(pd.DataFrame({"interval_start_utc": ts,
                            "exceed_probability": [3.454e-09, 0.25, 1.0],
                            "ramp_up_megawatts_per_s": [1234.5678, 0.001234, 12.0]}))
    html_text = rep.to_html()
    assert "e-0" not in html_text.split("<script")[0]           # the tables' part
    path = tmp_path / "compliance.html"
    path.write_text(html_text, encoding="utf-8")
    layout, data = _print_pdf(browser, path)
    assert layout["broken"] == [], layout["broken"]
    import io

    text = "\n".join(p.extract_text() for p in pypdf.PdfReader(io.BytesIO(data)).pages)
    flat = " ".join(text.split())
    assert not re.search(r"\d[eE][-+]?\d", text), re.findall(r"\S*\d[eE][-+]?\d\S*", text)
    assert "3.45×10⁻⁹" in flat and "1,235" in flat and "0.00123" in flat
    assert "MW/s" in flat and not re.search(r"\bM\s*\n\s*W", text)
    assert "probability of exceeding" in flat and "exceed_probability" not in flat
    assert "ramp up (MW/s)" in flat
    # times of the last section in its zone (12:00 UTC is 07:00 in Chicago in June)
    assert flat.count("Times in America/Chicago.") == 1 and "2025-06-02 07:00" in flat
    assert "Times in UTC" not in flat            # the compliance section shows no times
