"""Measured data honestly labelled (issue 34.7): a figure the sampling cannot resolve is
refused with the reason, and every figure's source names the data it comes from."""

import math

import numpy as np
import pandas as pd
import pytest

from powerlab.interconnect import comply
from powerlab.interconnect.powertrace import PowerTrace
from powerlab.interconnect.studypackage import study_package

SPEC = "data/requirements/small_site_example.yaml"
T0 = pd.Timestamp("2025-06-02T12:00:00Z")


def _measured(native_s, tick_s=None, seconds=300.0):
    """A 2-MW site stepping by 0.4 MW every 60 s, read every ``native_s``."""
    tick = tick_s or native_s
    t = np.arange(0, seconds, tick)
    x = 2e6 + 0.4e6 * (np.floor(t / 60.0) % 2)
    return PowerTrace(0, tick, T0, x, x, native_interval_s=native_s,
                      description=f"telemetry site.parquet, readings every {native_s:g} s")


def test_two_second_data_refuse_the_one_second_figures_and_say_why():
    pkg = study_package(_measured(2.0), SPEC)
    f = pkg.summary_frame().set_index("figure")
    for name in ("ramp_up_megawatts_per_s_1s_means", "largest_step_megawatts_within_1s"):
        assert math.isnan(f.loc[name, "value"])
        assert f.loc[name, "statistic"] == ("not resolved: readings every 2 s cannot "
                                            "resolve a 1-s window")
        assert any(n.startswith(f"{name} not given: readings every 2 s") for n in pkg.notes)
    # the 1-min ramp is resolved, and comply agrees on both
    assert f.loc["ramp_up_megawatts_per_min_1min_means", "value"] == pytest.approx(
        0.4, rel=0.05)                          # adjacent 1-min means 0.4 MW apart
    res = comply(_measured(2.0), SPEC)
    note = res.summary_frame().set_index("requirement").loc["ramp_1s", "note"]
    assert note.startswith("cannot be shown to comply") and "1 s" in note
    swing = pkg.pmu_figures.set_index("figure")["value"]
    assert swing.isna().all()
    assert "Pinst and Pst not given" in " ".join(pkg.notes)


def test_every_source_names_the_data():
    pkg = study_package(_measured(2.0), SPEC)
    src = pkg.summary_frame()["source"]
    assert src.str.startswith("data: measured: telemetry site.parquet").all()
    assert src.str.contains("readings every 2 s").all()


def test_resolved_data_keep_their_figures():
    pkg = study_package(_measured(0.1), SPEC)
    f = pkg.summary_frame().set_index("figure")
    assert f.loc["ramp_up_megawatts_per_s_1s_means", "value"] == pytest.approx(0.4, rel=0.05)
    assert not any("not given" in n for n in pkg.notes if "1s" in n)
