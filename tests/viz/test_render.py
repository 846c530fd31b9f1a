"""The notebook renderer of powerlab.viz.render."""

def test_notebook_output_is_a_vega_bundle_with_a_png_fallback():
    """Issue 33: notebook charts were HTML with inline JavaScript, blank when a notebook
    is opened untrusted.  The default renderer now sends the Vega spec (JupyterLab's own
    safe Vega renderer draws it) and a PNG of the same chart, and no script."""
    import base64

    import numpy as np
    import pandas as pd

    from powerlab import viz
    from powerlab.viz.render import VEGA_MIME

    h = np.arange(24)
    chart = viz.hour_of_day_chart(pd.DataFrame({"hour": h, "effect_pct": np.sin(h)}))
    viz.use_offline_renderer()
    data, meta = chart._repr_mimebundle_()
    assert set(data) == {VEGA_MIME, "image/png", "text/plain"}
    assert data[VEGA_MIME]["$schema"].startswith("https://vega.github.io/schema/vega/")
    assert data[VEGA_MIME]["marks"] and data[VEGA_MIME]["data"]
    png = base64.b64decode(data["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert data["text/plain"] == "<powerlab chart: Throughput by hour of day>"
    assert meta[VEGA_MIME]["embed_options"]["actions"] is False
    assert "<script" not in str(data)
