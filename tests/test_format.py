"""Numbers and column names for people (powerlab._format): known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from powerlab._format import column_words, format_number


@pytest.mark.parametrize(("value", "text"), [
    (3.454e-09, "3.45×10⁻⁹"),       # the value issue 25 found printed as 3.454e-09
    (1234.5678, "1,235"),            # integer digits are kept beyond 3 significant ones
    (0.001234, "0.00123"),
    (0.00099996, "1×10⁻³"),          # rounding carries into the exponent
    (12.5, "12.5"), (2.0, "2"), (0.1, "0.1"), (-0.25, "-0.25"),
    (1.5e12, "1.5×10¹²"), (0.0, "0"),
    (16384, "16,384"), (np.int64(7), "7"), (np.float64(0.5), "0.5"),
    (True, "yes"), (np.bool_(False), "no"),
    (math.nan, "–"), (None, "–"), (math.inf, "∞"), ("MW/s", "MW/s"),
])
def test_format_number(value, text):
    assert format_number(value) == text


def test_no_e_notation_over_forty_decades():
    for v in np.logspace(-20, 20, 401):
        for s in (format_number(v), format_number(-v), format_number(v, sig=5)):
            assert "e" not in s.lower(), (v, s)


@pytest.mark.parametrize(("name", "words"), [
    ("ramp_up_megawatts_per_s", "ramp up (MW/s)"),
    ("extra_energy_megawatt_hours_per_day", "extra energy (MWh/day)"),
    ("throughput_loss_pct", "throughput loss (%)"),
    ("swing_60s_megawatts", "swing 60 s (MW)"),
    ("band_0p1_2hz_rms_megawatts", "band 0.1–2 Hz RMS (MW)"),
    ("exceed_probability", "probability of exceeding"),
    ("cost_usd_per_day", "cost ($/day)"),
    ("requirement", "requirement"),
    ("Already Words", "Already Words"),
])
def test_column_words(name, words):
    assert column_words(name) == words
