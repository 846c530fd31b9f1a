"""The spectrum chart draws the study package's spectral lines by status (issue 34.5)."""

import numpy as np
import pandas as pd

from powerlab import viz


def test_spectrum_chart_draws_the_lines_by_status():
    f = np.linspace(0, 25, 2_001)
    sp = pd.DataFrame({"frequency_hz": f, "psd": 1.0 / (1.0 + f**2)})
    lines = pd.DataFrame({"frequency_hz": [0.1667, 14.7, 3.0],
                          "amplitude_megawatts": [1.2, 0.03, 0.001],
                          "flagged": [False, True, False], "material": [True, True, False],
                          "attribution": ["harmonic 1 of step (6 s)", "unexplained",
                                          "harmonic 18 of step (6 s)"]})
    spec = viz.spectrum_chart(sp, lines=lines).to_dict()
    frames = [pd.DataFrame(v) for v in spec["datasets"].values()]
    rules = next(f for f in frames if "attribution" in f)
    assert rules.set_index("frequency_hz")["status"].to_dict() == {
        0.1667: "material harmonic", 14.7: "flagged", 3.0: "significant"}
    assert "spectral lines" in spec["title"]["subtitle"]
    # without lines the chart is as before
    assert "spectral lines" not in viz.spectrum_chart(sp).to_dict()["title"]["subtitle"]
