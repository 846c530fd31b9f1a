"""The prior power-throughput curves (issue 33 item 7): their shape follows the published
power-limit sweeps, with a band; GPU models never swept in public say so; limits below
the swept range are flagged as extrapolated.

Source of every number: You, Chung, Chowdhury, "Zeus: Understanding and Optimizing GPU
Energy Consumption of DNN Training", USENIX NSDI 2023, artifact data bundled in
``data/zeus-nsdi23`` (1,609 operating points of A40, V100, RTX 6000, P100).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from powerlab.levers import PRIORS, prior_curve

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import derive_curve_priors as derive  # noqa: E402


@pytest.fixture(scope="module")
def derived():
    return derive.priors()


@pytest.mark.parametrize("name,key", [("V100", "V100"), ("A40", "A40"),
                                      ("RTX6000", "RTX6000"), ("P100", "P100"),
                                      ("H100", "unswept"), ("A100", "unswept"),
                                      ("B200", "unswept")])
def test_priors_are_the_derivation_from_the_bundled_sweeps(derived, name, key):
    """The constants in PRIORS are what the stated rule gives on the bundled data (to the
    4 decimals stored): no number is typed in by hand."""
    pr, d = PRIORS[name], derived[key]
    assert np.allclose(pr.b, d["b"], atol=6e-5)
    assert np.allclose(pr.cov, d["cov"], atol=6e-5)
    assert pr.y_min == pytest.approx(d["y_min"], abs=6e-5)
    assert pr.measured == (key != "unswept")
    if key == "unswept":
        assert "NO published power-limit sweep" in pr.source


def _cost(curve, y):
    rr = curve.relative_rate(y * curve.p_ref_w)
    return (1 - float(rr["rate_mean"].iloc[0]), 1 - float(rr["rate_upper"].iloc[0]),
            1 - float(rr["rate_lower"].iloc[0]))


@pytest.mark.parametrize("gpu,y,measured", [
    # docs/flexibility.md, "The priors against real slopes": median cost at each GPU's
    # lowest limit, measured on the Zeus sweeps (A40 67 % at y = 0.49, RTX 6000 54 % at
    # y = 0.43, V100 33 % at y = 0.47)
    ("A40", 0.49, 0.67), ("RTX6000", 0.43, 0.54), ("V100", 0.47, 0.33)])
def test_swept_priors_reproduce_the_measured_deep_cap_costs(gpu, y, measured):
    mean, lo, hi = _cost(prior_curve(gpu, 250.0), y)
    assert lo <= measured <= hi
    assert abs(mean - measured) < 0.12


def test_unswept_prior_is_no_longer_optimistic_at_deep_caps():
    """Issue 33: the 300 W cap on an H100 job drawing 650 W (y = 0.46) cost 20.7 % of
    step rate, exactly the old prior (b1 0.30, b2 0), while the sweeps at the same depth
    measure 33 % (V100), 54 % (RTX 6000), 67 % (A40).  The pooled prior's mean lies among
    them and its 90 % band covers all three."""
    h = prior_curve("H100-SXM", 650.0)
    mean, lo, hi = _cost(h, 300.0 / 650.0)
    assert 0.33 <= mean <= 0.67
    assert lo <= 0.33 and hi >= 0.67
    # near the top the sweeps are flat: 80 % of P_ref costs a few per cent, not 6.5 %+
    assert _cost(h, 0.8)[0] < 0.08


def test_limits_below_the_swept_range_are_flagged():
    h = prior_curve("H100", 650.0)
    # the sweeps reached 36.6 % of P_ref (A40): 200 W on a 650 W job is below it
    assert list(h.extrapolated([650.0, 400.0, 250.0, 200.0])) == [False, False, False, True]
    frame = h.rate_at_limit([400.0, 200.0])
    assert "extrapolated" not in frame or list(frame["extrapolated"]) == [False, True]
