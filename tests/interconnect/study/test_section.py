"""The study package's sections (powerlab.interconnect.study, issue 31 item 8): an ordered
registry of Section objects that study_package() runs and the summary, the page and
write() read back.  Adding a section is one module: here a toy section defined in this
test module appears in every output of the package, with no other file changed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import PowerlabError
from powerlab.interconnect.study import Section, register, sections, unregister
from powerlab.interconnect.study.html import table
from powerlab.interconnect.study.section import FIGURE_COLUMNS
from powerlab.interconnect.studypackage import ShortWindow, study_package
from powerlab.site.scenario import read_scenario

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "data/requirements/choukse2025_forms.yaml"
BUILT_IN = ["figures", "energisation", "spectrum", "pmu", "flicker", "equipment",
            "ride_through", "perc1", "playback"]


class EnergyPerDraw(Section):
    """A toy section: the energy of every draw over the horizon, its largest as a figure,
    one summary line, a part of the page and a file."""

    name = "energy"
    order = 55                      # after the ride-through table, before the playback
    title = "Energy & draws"

    def per_draw(self, trace, study):
        x = trace.power_w(study.boundary)
        return {"energy_megawatt_hours": float(x.sum()) * trace.tick_s / 3.6e9}

    def per_short_draw(self, trace, study):
        return trace.n_ticks

    def build(self, study):
        e = study.per_draw[["energy_megawatt_hours"]]
        study.tables["energy"] = e.assign(short_ticks=study.short.rows[self.name])
        study.figures.append(pd.DataFrame(
            [("energy_megawatt_hours", float(e.max().iloc[0]), "MWh", 0.0,
              f"largest of {len(e)} draws", "energy over the horizon", "a test's toy")],
            columns=FIGURE_COLUMNS))
        study.notes.append("Energy is the toy section's.")

    def key_lines(self, pkg):
        return [f"Energy: up to {pkg.energy['energy_megawatt_hours'].max():.4g} MWh"]

    def html(self, pkg):
        return "<p>Energy of each draw.</p>" + table(pkg.energy, index=True)

    def files(self, pkg, folder):
        return {"energy per draw": folder.csv("energy.csv", pkg.energy, index=True)}


@pytest.fixture
def toy():
    section = register(EnergyPerDraw())
    yield section
    unregister(section.name)


@pytest.fixture(scope="module")
def small():
    return read_scenario(REPO / "data/scenarios/small.yaml")


def _package(small):
    return study_package(small, SPEC, draws=2, short=ShortWindow(tick_s=0.1, window_s=60),
                         ride_through=False)


def test_the_built_in_sections_run_in_order():
    assert [s.name for s in sections()] == BUILT_IN
    assert [s.order for s in sections()] == sorted(s.order for s in sections())


def test_a_section_defined_elsewhere_appears_in_every_output(toy, small, tmp_path):
    assert [s.name for s in sections()] == BUILT_IN[:7] + ["energy", "perc1", "playback"]
    pkg = _package(small)
    # computed over every draw of the horizon and of the short window
    e = pkg.tables["energy"]
    assert list(e.index) == [0, 1] and (e["energy_megawatt_hours"] > 0).all()
    assert pkg.energy is e and (e["short_ticks"] == 600).all()
    expect = pkg.trace.power_w(pkg.boundary).sum() * pkg.trace.tick_s / 3.6e9
    assert e["energy_megawatt_hours"].iloc[0] == pytest.approx(expect)
    # a figure, a summary line and a note
    sf = pkg.summary_frame().set_index("figure")
    assert sf.loc["energy_megawatt_hours", "unit"] == "MWh"
    text = str(pkg.summary())
    assert "Energy: up to" in text and "Note: Energy is the toy section's." in text
    assert text.index("Largest 1-s swing") < text.index("Energy: up to")
    # a file, in order, listed and shown on the page under the next number
    files = pkg.write(tmp_path / "pkg")
    names = [Path(p).name for p in files.values()]
    assert names.index("pmu_filter_gain.csv") < names.index("energy.csv") \
        < names.index("playback_short_pscad.txt")
    back = pd.read_csv(files["energy per draw"], index_col=0)
    np.testing.assert_allclose(back["energy_megawatt_hours"], e["energy_megawatt_hours"],
                               rtol=1e-5)
    page = files["page"].read_text()
    # 5: flicker, 6: front end
    assert "<h2>7. Energy &amp; draws</h2><p>Energy of each draw.</p>" in page
    assert "<li>energy.csv: energy per draw</li>" in page
    assert "energy_megawatt_hours" in pd.read_csv(tmp_path / "pkg" / "figures.csv")[
        "figure"].tolist()


def test_without_the_section_the_package_is_as_before(small, tmp_path):
    pkg = _package(small)
    assert "energy" not in pkg.tables and not hasattr(pkg, "energy")
    files = pkg.write(tmp_path / "pkg")
    assert "energy per draw" not in files
    assert "<h2>8." not in files["page"].read_text()  # 5 flicker, 6 front end, 7 PERC1


def test_the_registry_refuses_a_second_name_and_an_unnamed_section(toy):
    with pytest.raises(PowerlabError, match="named 'energy' is registered already"):
        register(EnergyPerDraw())
    with pytest.raises(PowerlabError, match="a Section with a name"):
        register(Section())
    with pytest.raises(PowerlabError, match="no study-package section named 'nope'"):
        unregister("nope")
