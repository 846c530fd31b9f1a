"""Charts are values: checked through ``chart.to_dict()`` and rendered with vl-convert."""

from __future__ import annotations

import copy
import dataclasses
import json
import warnings

import altair as alt
import numpy as np
import pandas as pd
import pytest

from powerlab import viz
from powerlab.exceptions import SchemaError
from powerlab.viz.prepare import chart_frames

from ..conftest import make_telemetry


def frames(chart) -> list[pd.DataFrame]:
    """Every data table the chart embeds (altair datasets and inline CSV)."""
    return chart_frames(chart)


def total_rows(chart) -> int:
    return sum(len(f) for f in frames(chart))


#: Inline CSV keeps 6 significant digits per number (powerlab.viz.render.inline_table).
CSV_REL = 5e-6


def walk(obj):
    """Every dict inside a Vega-Lite spec."""
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from walk(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from walk(v)


def params(spec: dict) -> list[dict]:
    return [p for d in walk(spec) for p in d.get("params", []) if isinstance(p, dict)]


def tooltip_titles(spec: dict) -> list[str]:
    out = []
    for d in walk(spec):
        tt = d.get("encoding", {}).get("tooltip") if isinstance(d.get("encoding"), dict) \
            else None
        for t in tt or []:
            out.append(t.get("title", t.get("field")))
    return out


@pytest.fixture(scope="module")
def big_telemetry() -> pd.DataFrame:
    # 2 hosts x 4 GPUs x 20,000 samples = 160,000 rows, 32 times altair's limit
    return make_telemetry(n_hosts=2, n_gpus=4, n_samples=20_000, period_s=0.1, seed=3)


# ----------------------------------------------------------------------------- theme


def test_theme_registered_and_active():
    assert viz.THEME in alt.theme.names()
    assert alt.theme.active == viz.THEME
    spec = viz.hour_of_day_chart(pd.DataFrame({"hour": [0.0, 12.0],
                                                  "effect_pct": [0.1, -0.1]})).to_dict()
    assert spec["config"]["range"]["category"][0] == "#0072B2"
    with alt.theme.enable("default"):
        plain = viz.hour_of_day_chart(pd.DataFrame({"hour": [0.0], "effect_pct": [0.0]}))
        assert "range" not in plain.to_dict().get("config", {})


# ----------------------------------------------------------------------------- downsample


def test_downsample_known_answer():
    t = pd.Timestamp("2025-01-01", tz="UTC") + pd.to_timedelta(np.arange(10), unit="s")
    df = pd.DataFrame({"timestamp": t, "g": "a", "v": np.arange(10.0)})
    out = viz.downsample(df, "v", by=["g"], max_points=2)
    # bin width 4.5 s: samples 0..4 and 5..9
    assert out["v"].tolist() == [2.0, 7.0]
    assert out["v_min"].tolist() == [0.0, 5.0]
    assert out["v_max"].tolist() == [4.0, 9.0]
    assert out["n_samples"].tolist() == [5, 5]
    assert out["timestamp"].tolist() == [t[2], t[7]]
    assert str(out["timestamp"].dtype) == "datetime64[ns, UTC]"
    # short series keep every sample
    assert len(viz.downsample(df, "v", max_points=100)) == 10


def test_downsample_rejects_naive_time():
    df = pd.DataFrame({"timestamp": pd.date_range("2025-01-01", periods=3, freq="s"),
                       "v": [1.0, 2.0, 3.0]})
    with pytest.raises(SchemaError, match="tz-aware"):
        viz.downsample(df, "v")


# ----------------------------------------------------------------------------- telemetry


def test_raw_telemetry_would_trip_the_row_limit(big_telemetry):
    raw = alt.Chart(big_telemetry[["timestamp", "power_w"]]).mark_line().encode(
        x="timestamp:T", y="power_w:Q")
    with pytest.raises(alt.MaxRowsError):
        raw.to_dict()


def test_telemetry_chart_aggregates_and_keeps_extremes(big_telemetry):
    ch = viz.telemetry_chart(big_telemetry, "power_w")
    assert isinstance(ch, alt.LayerChart)
    spec = ch.to_dict()
    (df,) = frames(ch)
    assert len(df) <= viz.DEFAULT_MAX_ROWS
    assert df["series"].nunique() == 8  # one line per GPU
    assert df["n_samples"].sum() == len(big_telemetry)
    assert df["power_w_max"].max() == pytest.approx(big_telemetry["power_w"].max(), rel=CSV_REL)
    assert df["power_w_min"].min() == pytest.approx(big_telemetry["power_w"].min(), rel=CSV_REL)
    weighted = (df["power_w"] * df["n_samples"]).sum() / df["n_samples"].sum()
    assert weighted == pytest.approx(big_telemetry["power_w"].mean(), rel=CSV_REL)
    # per-GPU means survive the binning
    g = big_telemetry.groupby(["host", "gpu_index"])["power_w"].mean()
    d = df.assign(w=df["power_w"] * df["n_samples"]).groupby("series")[["w", "n_samples"]].sum()
    assert (d["w"] / d["n_samples"])["node-01/gpu2"] == pytest.approx(g[("node-01", 2)],
                                                                      rel=CSV_REL)
    # units in axis title and tooltips; zoom and legend selection
    assert any(d.get("title") == "power [W]" for d in walk(spec))
    assert "mean [W]" in tooltip_titles(spec) and "max [W]" in tooltip_titles(spec)
    kinds = {(p.get("select", {}).get("type") if isinstance(p.get("select"), dict)
              else p.get("select"), str(p.get("bind"))) for p in params(spec)}
    assert ("interval", "scales") in kinds
    assert ("point", "legend") in kinds


@pytest.mark.parametrize("n_hosts,n_gpus,level,n_series", [
    (2, 4, "gpu", 8), (20, 8, "host", 20), (64, 8, "fleet", 1)])
def test_telemetry_chart_auto_level(n_hosts, n_gpus, level, n_series):
    tel = make_telemetry(n_hosts=n_hosts, n_gpus=n_gpus, n_samples=40)
    ch = viz.telemetry_chart(tel, "temp_gpu_c")
    (df,) = frames(ch)
    assert df["series"].nunique() == n_series
    assert len(df) <= viz.DEFAULT_MAX_ROWS
    sub = ch.to_dict()["title"]["subtitle"]
    assert {"gpu": "per GPU", "host": "host", "fleet": "all GPUs"}[level] in sub
    assert df["temp_gpu_c_max"].max() == pytest.approx(tel["temp_gpu_c"].max(), rel=CSV_REL)


def test_telemetry_chart_node_rows_and_missing_column():
    t = pd.date_range("2024-05-17", periods=5, freq="2s", tz="UTC")
    node = pd.DataFrame({"timestamp": t, "host": "n1", "scope": "node",
                         "gpu_index": pd.array([pd.NA] * 5, dtype="Int16"),
                         "power_w": [5000.0, 5100, 5200, 5300, 5400]})
    (df,) = frames(viz.telemetry_chart(node))
    assert set(df["series"]) == {"n1 (node)"}
    with pytest.raises(SchemaError, match="clock_sm_mhz"):
        viz.telemetry_chart(node, "clock_sm_mhz")


@pytest.mark.parametrize("by", ["host", "fleet"])
def test_telemetry_chart_never_averages_node_with_gpu_rows(by):
    """A frame with GPU rows (~300 W) and node rows (the node's sum, ~1.2 kW): a host or
    fleet line must not be the mean of the two kinds of reading."""
    tel = make_telemetry(n_hosts=2, n_gpus=4, n_samples=50)
    node = tel.groupby(["host", "timestamp"], as_index=False)["power_w"].sum()
    node["scope"] = "node"
    node["gpu_index"] = pd.array([pd.NA] * len(node), dtype="Int16")
    mix = pd.concat([tel[["timestamp", "host", "scope", "gpu_index", "power_w"]], node],
                    ignore_index=True)
    ch = viz.telemetry_chart(mix, by=by)
    (df,) = frames(ch)
    w = df.assign(w=df["power_w"] * df["n_samples"]).groupby("series")[["w", "n_samples"]]
    means = (w.sum()["w"] / w.sum()["n_samples"]).to_dict()
    gpu_mean = tel["power_w"].mean()
    node_mean = node["power_w"].mean()
    node_series = {k: v for k, v in means.items() if k.endswith("(node)")}
    gpu_series = {k: v for k, v in means.items() if not k.endswith("(node)")}
    assert len(node_series) == (1 if by == "fleet" else 2) == len(gpu_series)
    if by == "fleet":
        assert gpu_series["fleet"] == pytest.approx(gpu_mean, rel=CSV_REL)
        assert node_series["fleet (node)"] == pytest.approx(node_mean, rel=CSV_REL)
    assert all(v < 2 * gpu_mean for v in gpu_series.values())
    assert all(v > 3 * gpu_mean for v in node_series.values())
    # two series: the legend says which line is which
    assert ch.to_dict()["layer"][-1]["encoding"]["color"].get("legend", {}) is not None
    assert "drawn apart" in ch.to_dict()["title"]["subtitle"]


def test_telemetry_chart_subtitle_names_nodes_for_node_data():
    t = pd.date_range("2024-05-17", periods=5, freq="2s", tz="UTC")
    node = pd.DataFrame({"timestamp": t.repeat(2), "host": ["n1", "n2"] * 5,
                         "scope": "node", "gpu_index": pd.array([pd.NA] * 10, dtype="Int16"),
                         "power_w": np.linspace(5000.0, 5400.0, 10)})
    sub = viz.telemetry_chart(node, by="fleet").to_dict()["title"]["subtitle"]
    assert sub.startswith("mean of all nodes")


def test_telemetry_overview_shares_zoom(big_telemetry):
    ch = viz.telemetry_overview(big_telemetry.head(20_000))
    spec = ch.to_dict()
    assert len(spec["vconcat"]) == 3
    zooms = [p for p in spec["params"] if p.get("bind") == "scales"]
    assert len(zooms) == 1 and len(zooms[0]["views"]) == 3  # one zoom over all panels
    assert all(len(f) <= viz.DEFAULT_MAX_ROWS for f in frames(ch))


# ----------------------------------------------------------------------------- facility


def _timeline(n=50_000, boundaries=("it", "facility")):
    ts = pd.date_range("2025-06-01", periods=n, freq="100ms", tz="UTC")
    rng = np.random.default_rng(1)
    parts = []
    for k, s in enumerate(boundaries):
        p = 30 * (1 + 0.3 * k) + 5 * np.sin(np.arange(n) / 300) + rng.normal(0, 0.5, n)
        parts.append(pd.DataFrame({"timestamp": ts, "boundary": s, "power_megawatts": p,
                                   "power_megawatts_lower": p - 1 - rng.random(n),
                                   "power_megawatts_upper": p + 1 + rng.random(n)}))
    return pd.concat(parts, ignore_index=True)


def test_facility_chart_band_events_and_brush():
    tl = _timeline()
    ev = pd.DataFrame({"timestamp": tl["timestamp"].iloc[[100, 20_000, 40_000]],
                       "event": ["start", "checkpoint", "failure"]})
    ch = viz.facility_chart(tl, ev)
    spec = ch.to_dict()
    assert total_rows(ch) <= viz.MAX_ROWS
    tables = frames(ch)
    line = next(f for f in tables if "power_megawatts" in f)
    events = next(f for f in tables if "event" in f)
    assert sorted(events["event"]) == ["checkpoint", "failure", "start"]
    for s in ("it", "facility"):
        src, got = tl[tl["boundary"] == s], line[line["boundary"] == s]
        # the envelope keeps the extremes, the band is the bin mean of each bound
        assert got["power_megawatts_max"].max() == pytest.approx(src["power_megawatts"].max(),
                                                                 rel=CSV_REL)
        assert got["power_megawatts_min"].min() == pytest.approx(src["power_megawatts"].min(),
                                                                 rel=CSV_REL)
        w = got["n_samples"]
        for c in ("power_megawatts_lower", "power_megawatts_upper", "power_megawatts"):
            assert (got[c] * w).sum() / w.sum() == pytest.approx(src[c].mean(), rel=CSV_REL)
        assert (got["power_megawatts_lower"] < got["power_megawatts"]).all()
        assert (got["power_megawatts"] < got["power_megawatts_upper"]).all()
    brush = [p for p in spec["params"] if p["name"] == "brush"]
    assert brush and brush[0]["select"]["type"] == "interval"
    assert any(d.get("domain") == {"param": "brush"} for d in walk(spec))
    assert "mean [MW]" in tooltip_titles(spec)


def test_facility_chart_without_band_or_boundary():
    tl = _timeline(1500, boundaries=("it",))[["timestamp", "power_megawatts"]]
    (df,) = frames(viz.facility_chart(tl))   # short enough: every sample kept
    assert len(df) == 1500 and "power_megawatts_upper" not in df.columns
    assert (df["n_samples"] == 1).all()


def test_facility_chart_reads_the_old_scope_column_with_a_warning():
    """The ``boundary`` column was named ``scope`` before 2026-12-03: a timeline written
    then still draws one line per boundary, and says the column is renamed."""
    tl = _timeline(1500)
    with pytest.warns(DeprecationWarning, match="'scope' column .* is renamed 'boundary'") \
            as rec:
        old = frames(viz.facility_chart(tl.rename(columns={"boundary": "scope"})))[0]
    assert rec[0].filename == __file__      # the warning points at the caller
    new = frames(viz.facility_chart(tl))[0]
    assert sorted(old["scope"].unique()) == sorted(new["boundary"].unique()) == ["facility",
                                                                                  "it"]
    pd.testing.assert_frame_equal(old.rename(columns={"scope": "boundary"}), new)
    # a telemetry scope column (gpu/node) is not the boundary: one line, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (one,) = frames(viz.facility_chart(tl.drop(columns="boundary").assign(scope="node")))
    assert "scope" not in one.columns


# ----------------------------------------------------------------------------- ramps, spectrum


def test_ramp_rate_histogram_counts_and_limit():
    rng = np.random.default_rng(5)
    r = pd.DataFrame({"ramp_megawatts_per_s": np.r_[rng.normal(0, 1, 100_000), np.nan],
                      "mitigation": [*(["none"] * 50_000), *(["floor"] * 50_000), "none"]})
    ch = viz.ramp_rate_chart(r, series="mitigation", limit=3.0, bins=40)
    spec = ch.to_dict()
    frames = [pd.DataFrame(v) for v in spec["datasets"].values()]
    hist = next(f for f in frames if "count" in f)
    assert hist["count"].sum() == 100_000  # every finite value counted once
    assert hist.groupby("series")["count"].sum().to_dict() == {"floor": 50_000,
                                                              "none": 50_000}
    lim = next(f for f in frames if "x" in f)
    assert sorted(lim["x"]) == [-3.0, 3.0]
    n_over = int((r["ramp_megawatts_per_s"].abs() > 3).sum())
    assert f"exceeded in {n_over:,} intervals" in spec["title"]["subtitle"]
    # asymmetric (fall, rise) limits; 0 = no limit on that side
    spec2 = viz.ramp_rate_chart(r, limit=(0.0, 2.0)).to_dict()
    lim2 = next(pd.DataFrame(v) for v in spec2["datasets"].values() if "x" in v[0])
    assert lim2["x"].tolist() == [2.0]
    n_up = int((r["ramp_megawatts_per_s"] > 2).sum())
    assert f"exceeded in {n_up:,} intervals" in spec2["title"]["subtitle"]
    assert any(d.get("scale") == {"type": "log"} for d in walk(spec))
    with pytest.raises(SchemaError, match="no finite"):
        viz.ramp_rate_chart(pd.DataFrame({"ramp_megawatts_per_s": [np.nan]}))


def test_spectrum_chart_bands_and_reduction():
    f = np.linspace(0, 25, 20_001)
    sp = pd.DataFrame({"frequency_hz": f, "psd": 1.0 / (1.0 + f**2)})
    bands = pd.DataFrame({"low_hz": [0.1, 2.0], "high_hz": [2.0, 20.0],
                          "measured": [5.0, 0.5], "limit": [1.0, 1.0]})
    ch = viz.spectrum_chart(sp, bands=bands, max_points=400)
    spec = ch.to_dict()
    frames = [pd.DataFrame(v) for v in spec["datasets"].values()]
    line = next(f for f in frames if "psd" in f)
    assert len(line) <= 400 and (line["frequency_hz"] > 0).all()
    # log-binned means stay on the curve (monotone decreasing here)
    assert np.all(np.diff(line.sort_values("frequency_hz")["psd"]) < 0)
    band = next(f for f in frames if "low_hz" in f)
    assert band.set_index("label")["status"].to_dict() == {"0.1–2 Hz": "over limit",
                                                           "2–20 Hz": "within limit"}
    assert sum(d.get("scale") == {"type": "log"} for d in walk(spec)) >= 2


# ----------------------------------------------------------------------------- time of day


def test_hour_of_day_chart():
    h = np.arange(0, 24, 0.5)
    eff = 0.8 * np.cos(2 * np.pi * (h - 5) / 24)
    prof = pd.DataFrame({"hour": h, "effect_pct": eff, "lower_pct": eff - 0.1,
                         "upper_pct": eff + 0.1})
    spec = viz.hour_of_day_chart(prof, peak_hour=5.0, trough_hour=17.0,
                                    site_tz="America/New_York").to_dict()
    frames = [pd.DataFrame(v) for v in spec["datasets"].values()]
    marks = next(f for f in frames if "label" in f)
    assert marks["hour"].tolist() == [5.0, 17.0]
    assert any(d.get("title") == "hour of day [h, America/New_York]" for d in walk(spec))
    assert any(d.get("mark", {}) == {"type": "area", "color": "#0072B2"} for d in walk(spec))


def test_throttle_share_chart_validates_fractions():
    sh = pd.DataFrame({"hour": [0, 0, 1], "reason": ["sw_thermal", "sw_power_cap", "hw_slowdown"],
                       "share": [0.25, 0.0, 0.5]})
    spec = viz.throttle_share_chart(sh).to_dict()
    (rows,) = spec["datasets"].values()
    assert sorted(r["share_pct"] for r in rows) == [25.0, 50.0]  # zero shares dropped
    with pytest.raises(SchemaError, match=r"\[0, 1\]"):
        viz.throttle_share_chart(sh.assign(share=[25.0, 0.0, 50.0]))


def test_straggler_heatmap_marks_flagged_only_when_flagged():
    sc = pd.DataFrame({"host": np.repeat(["a", "b", "c"], 8), "gpu_index": np.tile(range(8), 3),
                       "score": np.linspace(-1, 6, 24), "flagged": [False] * 23 + [True]})
    spec = viz.straggler_heatmap(sc).to_dict()
    assert len(spec["layer"]) == 2
    (rows,) = spec["datasets"].values()
    assert len(rows) == 24 and sum(r["flagged"] for r in rows) == 1
    clean = viz.straggler_heatmap(sc.assign(flagged=False)).to_dict()
    assert len(clean["layer"]) == 1


# ----------------------------------------------------------------------------- column objects
# A chart with many column names takes one column object (``columns=``) and, as before, the
# names as keywords (powerlab._options.Options): both draw the same chart.

def _spectrum_frame():
    f = np.linspace(0.01, 25, 2000)
    return pd.DataFrame({"f": f, "p": 1.0 / (1.0 + f**2), "s": np.where(f < 5, "a", "b")})


def _profile_frame():
    h = np.arange(0, 24, 0.5)
    return pd.DataFrame({"h": h, "e": np.cos(h), "lo": np.cos(h) - 0.1, "hi": np.cos(h) + 0.1})


def _scores_frame():
    return pd.DataFrame({"node": ["a", "a", "b"], "gpu": [0, 1, 0], "z": [0.5, -1.0, 4.0],
                         "bad": [False, False, True]})


COLUMN_CASES = [
    ("spectrum_chart", "SpectrumColumns", _spectrum_frame,
     {"frequency": "f", "value": "p", "series": "s"}),
    ("hour_of_day_chart", "HourOfDayColumns", _profile_frame,
     {"hour": "h", "effect": "e", "lower": "lo", "upper": "hi"}),
    ("straggler_heatmap", "HeatmapColumns", _scores_frame,
     {"host": "node", "gpu": "gpu", "value": "z", "flagged": "bad"}),
]


@pytest.mark.parametrize("chart,cls,make,names", COLUMN_CASES,
                         ids=[c[0] for c in COLUMN_CASES])
def test_a_column_object_and_the_keywords_draw_the_same_chart(chart, cls, make, names):
    fn, columns = getattr(viz, chart), getattr(viz, cls)
    df = make()
    by_object = fn(df, columns=columns(**names)).to_dict()
    assert by_object == fn(df, **names).to_dict()
    # a keyword replaces the object's field
    first, *_ = names
    assert fn(df, columns=columns(**{**names, first: "nowhere"}), **{first: names[first]}
              ).to_dict() == by_object
    with pytest.raises(SchemaError, match="missing column"):
        fn(df)                               # the default names are not in this frame
    with pytest.raises(TypeError, match=f"unknown {cls} option.*expected some of"):
        fn(df, **names, colour="red")


def test_telemetry_chart_options_object_and_keywords():
    tel = make_telemetry(n_hosts=2, n_gpus=4, n_samples=400, seed=2)
    opts = viz.TelemetryChartOptions(by="host", max_points=40, band=False)
    spec = viz.telemetry_chart(tel, "power_w", options=opts).to_dict()
    assert spec == viz.telemetry_chart(tel, "power_w", by="host", max_points=40,
                                       band=False).to_dict()
    (df,) = frames(viz.telemetry_chart(tel, "power_w", options=opts))
    assert df["series"].nunique() == 2 and df.groupby("series").size().max() <= 40
    assert len(spec["layer"]) == 1                                  # no band
    assert len(viz.telemetry_chart(tel, "power_w").to_dict()["layer"]) == 2
    with pytest.raises(TypeError, match="unknown TelemetryChartOptions option"):
        viz.telemetry_chart(tel, "power_w", max_point=40)


def test_the_deprecated_grid_charts_path_finds_every_chart_it_held():
    """``powerlab.viz.grid_charts`` (0.1) held the charts now split by concept over
    facility_charts, ramp_charts, spectrum_charts, mitigation_charts and site_charts:
    the old path is the viz wing, which exports them all."""
    import importlib
    import sys

    from powerlab.exceptions import PowerlabDeprecationWarning

    sys.modules.pop("powerlab.viz.grid_charts", None)
    with pytest.warns(PowerlabDeprecationWarning, match="powerlab.viz.grid_charts"):
        old = importlib.import_module("powerlab.viz.grid_charts")
    for name in ("TimelineColumns", "facility_chart", "forecast_charts", "mitigation_chart",
                 "ramp_rate_chart", "spectrum_chart"):
        assert getattr(old, name) is getattr(viz, name)


# ----------------------------------------------------------------------------- rendering


def test_every_chart_renders_to_svg_and_png():
    tl = _timeline(600)
    h = np.arange(24.0)
    built = [
        viz.telemetry_overview(make_telemetry(n_hosts=1, n_gpus=2, n_samples=200)),
        viz.facility_chart(tl, pd.DataFrame({"timestamp": tl["timestamp"].iloc[[10]],
                                                "event": ["checkpoint"]})),
        viz.ramp_rate_chart(pd.DataFrame({"ramp_megawatts_per_s": np.diff(
            tl["power_megawatts"].to_numpy()[:600]) * 10}), limit=5.0),
        viz.spectrum_chart(pd.DataFrame({"frequency_hz": h + 0.5, "psd": 1 / (h + 1)})),
        viz.hour_of_day_chart(pd.DataFrame({"hour": h, "effect_pct": np.sin(h)})),
        viz.throttle_share_chart(pd.DataFrame({"hour": h, "reason": "thermal",
                                                  "share": h / 48})),
        viz.straggler_heatmap(pd.DataFrame({"host": ["a", "a"], "gpu_index": [0, 1],
                                               "score": [0.0, 3.0]})),
    ]
    for ch in built:
        svg = viz.to_svg(ch)
        assert svg.startswith("<svg") and svg.count("<path") + svg.count("<rect") > 5
    png = viz.to_png(built[4])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000


# ----------------------------------------------------------------------------- adapters


@pytest.fixture(scope="module")
def small_forecast():
    from powerlab.data import bundled_path
    from powerlab.site.engine import forecast
    from powerlab.site.scenario import read_scenario

    return forecast(read_scenario(bundled_path("scenarios", "small.yaml")), draws=3, seed=2)


def test_forecast_charts_adapter(small_forecast):
    res = small_forecast
    out = viz.forecast_charts(res)
    assert set(out) == {"timeline", "ramps", "spectrum"}
    assert total_rows(out["timeline"]) <= viz.MAX_ROWS
    tables = frames(out["timeline"])
    line = next(f for f in tables if "power_megawatts" in f)
    fac = line[line["boundary"] == "facility"]
    mean_fac = res.timeline.query("boundary == 'facility'")["power_w_mean"]
    assert fac["power_megawatts_max"].max() == pytest.approx(mean_fac.max() / 1e6, rel=CSV_REL)
    ev = next(f for f in tables if "event" in f)
    assert len(ev) == min(200, int((res.events["draw"] == 0).sum()))
    ramps = out["ramps"].to_dict()
    hist = next(pd.DataFrame(v) for v in ramps["datasets"].values() if "count" in v[0])
    # the ramps the limits apply to: between adjacent 1-s means, at every tick boundary
    # where both means fit (n - 2 w + 1 of them, w = 10 ticks), the largest equal to the
    # metric of the same name (issue 20, item 10)
    assert hist["count"].sum() == res.n_ticks - 2 * 10 + 1
    m0 = res.metrics.query("boundary == 'facility' and draw == 0").iloc[0]
    assert hist["bin_end"].max() >= m0["ramp_up_w_per_s_1s"] / 1e6
    assert "1-s means" in json.dumps(ramps)
    lim = res.scenario.limits
    rules = next(pd.DataFrame(v) for v in ramps["datasets"].values() if "x" in v[0])
    assert sorted(rules["x"]) == [-lim.ramp_down_megawatts_per_s, lim.ramp_up_megawatts_per_s]
    spec = out["spectrum"].to_dict()
    bands = next(pd.DataFrame(v) for v in spec["datasets"].values() if "low_hz" in v[0])
    m = res.metrics.query("boundary == 'facility' and draw == 0").iloc[0]
    # small.yaml has no band limit: the whole record's RMS; with a limit the value it is
    # checked on (issue 26: the limit's own metric, as check_limits and comply read it)
    assert lim.band_0p1_2hz_megawatts == 0
    assert bands["measured"].iloc[0] == pytest.approx(m["band_0p1_2hz_rms_w"] / 1e6)
    from powerlab.limits.loadmetrics import band_windows

    lim2 = dataclasses.replace(lim, band_0p1_2hz_megawatts=0.01)
    res2 = copy.copy(res)
    res2.scenario = dataclasses.replace(res.scenario, limits=lim2)
    spec2 = viz.forecast_charts(res2)["spectrum"].to_dict()
    b2 = next(pd.DataFrame(v) for v in spec2["datasets"].values() if "low_hz" in v[0])
    worst = band_windows(res.facility_w[0], res.tick_s, (0.1, 2.0), 60.0).worst_w / 1e6
    assert b2["measured"].iloc[0] == pytest.approx(worst, rel=1e-12)
    assert b2["limit"].iloc[0] == 0.01 and "worst 60-s window" in b2["label"].iloc[0]


def test_mitigation_chart():
    tab = pd.DataFrame({"swing_1s_reduction_pct": [0.0, 40.0, 10.0],
                        "ramp_up_reduction_pct": [0.0, 20.0, 85.0],
                        "extra_energy_megawatt_hours": [0.0, 0.06, 0.0],
                        "throughput_loss_pct": [0.0, 0.0, 3.9]},
                       index=pd.Index(["baseline", "power floor", "ramp limit"],
                                      name="variant"))
    spec = viz.mitigation_chart(tab).to_dict()
    (rows,) = spec["datasets"].values()
    df = pd.DataFrame(rows)
    assert "baseline" not in set(df["variant"]) and len(df) == 4
    assert df.set_index(["variant", "metric"]).loc[("ramp limit", "ramp up"),
                                                   "reduction_pct"] == 85.0
    assert "throughput loss [%]" in tooltip_titles(spec)
    with pytest.raises(SchemaError, match="reduction"):
        viz.mitigation_chart(tab[["throughput_loss_pct"]])


@pytest.fixture(scope="module")
def twin():
    from powerlab.throughput.synth import simulate_training

    return simulate_training("2025-06-03", days=3, n_hosts=2, gpus_per_host=8, stragglers=1,
                             amplitude_pct=2.0, telemetry_interval_s=600.0, seed=4)


def test_time_of_day_adapter(twin):
    from powerlab.throughput.dvfs import fit_time_of_day

    res = fit_time_of_day(twin.steps, site_tz="America/New_York", telemetry=twin.telemetry,
                          n_boot=200)
    out = viz.time_of_day_charts(res)
    spec = out["profile"].to_dict()
    frames = [pd.DataFrame(v) for v in spec["datasets"].values()]
    prof = next(f for f in frames if "effect_pct" in f)
    assert len(prof) == len(res.profile)
    assert prof["effect_pct"].to_numpy() == pytest.approx(res.profile["effect_pct"].to_numpy())
    marks = next(f for f in frames if "label" in f)
    assert marks["hour"].tolist() == pytest.approx([res.peak_hour, res.trough_hour])
    assert f"{res.amplitude_pct:.2f} %" in spec["title"]["text"]
    if "throttle" in out:
        (rows,) = out["throttle"].to_dict()["datasets"].values()
        assert "gpu_idle" not in {r["reason"] for r in rows}
        assert all(0 < r["share_pct"] <= 100 for r in rows)


def test_stragglers_adapter(twin):
    from powerlab.throughput.stragglers import find_stragglers

    res = find_stragglers(twin.telemetry)
    spec = viz.stragglers_chart(res).to_dict()
    rows = pd.DataFrame(next(iter(spec["datasets"].values())))
    assert len(rows) == len(res.scores) == 16
    assert int(rows["flagged"].sum()) == len(res.flags)
    merged = rows.merge(res.scores.astype({"host": str}), on=["host", "gpu_index"])
    assert merged["score"].to_numpy() == pytest.approx(merged["clock_sm_mhz_z"].to_numpy())
    # low clock is slow: the colour scale is not reversed for the clock
    scale = next(d["scale"] for d in walk(spec) if isinstance(d.get("scale"), dict)
                 and d["scale"].get("scheme") == "redblue")
    assert scale["reverse"] is False
