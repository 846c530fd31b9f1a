"""The study package's voltage-change and flicker section (issue 34.4)."""

import math

import pandas as pd
import pytest

from powerlab.interconnect.studypackage import ShortWindow, study_package
from powerlab.interconnect.voltagechange import GridStrength
from powerlab.site.scenario import read_scenario

SMALL = "data/scenarios/small.yaml"
SPEC = "data/requirements/small_site_example.yaml"


@pytest.fixture(scope="module")
def pkgs():
    sc = read_scenario(SMALL)
    return {s: study_package(sc, SPEC, draws=2, seed=0, short=ShortWindow(window_s=660),
                             ride_through=False, grid=GridStrength(s, 8))
            for s in (50.0, 100.0)}


def test_voltage_step_and_pst_scale_with_the_short_circuit_power(pkgs):
    a = pkgs[50.0].flicker_figures.set_index("figure")["value"]
    b = pkgs[100.0].flicker_figures.set_index("figure")["value"]
    assert a["max_voltage_step_pct"] < 0                     # a load rise drops the voltage
    # first-order dV/V ~ 1/S_sc; Pst is linear in dV/V
    assert b["max_voltage_step_pct"] / a["max_voltage_step_pct"] == pytest.approx(0.5,
                                                                                 rel=1e-6)
    assert b["pst"] / a["pst"] == pytest.approx(0.5, rel=0.02)
    assert math.isfinite(a["pst"]) and a["pst"] > 0


def test_section_states_its_grid_and_writes_its_files(pkgs, tmp_path):
    pkg = pkgs[50.0]
    fig = pkg.flicker_figures
    assert fig["source"].str.contains("S_sc 50 MVA, X/R 8").all()
    assert "Voltage at the POI" in str(pkg.summary())
    assert any("Plt" in n for n in pkg.notes)
    pkg.write(tmp_path / "p")
    steps = pd.read_csv(tmp_path / "p" / "voltage_steps.csv")
    assert {"start_s", "duration_s", "dv_pct", "draw"} <= set(steps)
    page = (tmp_path / "p" / "study_package.html").read_text()
    assert "Voltage change and flicker" in page


def test_short_window_gives_no_pst_and_says_so():
    pkg = study_package(read_scenario(SMALL), SPEC, draws=1, seed=0,
                        short=ShortWindow(window_s=120), ride_through=False)
    assert "pst" not in set(pkg.flicker_figures["figure"])
    assert any("Pst needs a 600-s window" in n for n in pkg.notes)
