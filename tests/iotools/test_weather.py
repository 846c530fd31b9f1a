"""Tests of powerlab.iotools.weather on real station files (bundled month and excerpts)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import DataQualityWarning, ParseError
from powerlab.iotools import parse_weather, read_weather

from ..conftest import REPO, TEST_DATA

D = TEST_DATA / "iotools"
MONTH = REPO / "data" / "weather-kmahighl4-2025"


def test_excerpt_units_and_utc():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataQualityWarning)
        df = read_weather(D / "weather_2025-06-04_excerpt.txt")
    assert len(df) == 36
    assert str(df.index.dtype) == "datetime64[ns, UTC]" and df.index.name == "timestamp"
    # 2025-06-04 00:01 EDT = 04:01 UTC
    assert df.index[0] == pd.Timestamp("2025-06-04 04:01", tz="UTC")
    first = df.iloc[0]
    assert first["temp_air_c"] == 17 and first["humidity_pct"] == 66
    assert first["pressure_hpa"] == 1032.17
    assert {"dew_point_c", "solar_radiation_w_per_m2", "wind_speed_m_per_s"} <= set(df)


def test_km_per_h_to_m_per_s():
    text = ("Time,Temp (°C),Wind Speed (km/h)\n"
            "2025-06-04 00:01,17,36\n")
    df = parse_weather(text, tz="UTC")
    assert df["wind_speed_m_per_s"].iloc[0] == pytest.approx(10.0)


def test_broken_rows_skipped_and_counted_in_one_warning():
    with pytest.warns(DataQualityWarning) as rec:
        df = read_weather(D / "weather_broken.txt")
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert "weather_broken.txt" in msg
    assert "1 truncated last line" in msg and "2 row(s) with the wrong number" in msg
    assert len(df) == 25 - 3     # 25 data lines: one cut short, one extra field, last cut
    assert df.index.is_monotonic_increasing


def test_other_format_file_is_counted_not_merged():
    with pytest.warns(DataQualityWarning, match="1 row"):
        df = read_weather(D / "weather_other_format.txt")
    assert len(df) == 0


def test_non_numeric_value_is_a_parse_error():
    with pytest.raises(ParseError) as exc:
        read_weather(D / "weather_bad_value.txt")
    e = exc.value
    assert e.line == 7 and e.column == "Pressure (mb)" and "mb" in str(e)


def test_dst_policy_is_explicit_and_counted():
    text = ("Time,Temp (°C)\n"
            "2025-11-02 01:30,10\n2025-11-02 01:45,10\n"
            "2025-11-02 01:15,9\n2025-11-02 01:30,9\n"
            "2025-03-09 02:30,5\n")
    with pytest.warns(DataQualityWarning, match="4 ambiguous.*1 nonexistent"):
        df = parse_weather(text, tz="America/New_York")
    utc = df.index
    assert pd.Timestamp("2025-11-02 05:30", tz="UTC") in utc      # 01:30 EDT
    assert pd.Timestamp("2025-11-02 06:30", tz="UTC") in utc      # 01:30 EST
    assert pd.Timestamp("2025-03-09 07:00", tz="UTC") in utc      # 02:30 -> 03:00 EDT


@pytest.fixture(scope="module")
def month():
    assert MONTH.is_dir(), "bundled weather data missing"
    with pytest.warns(DataQualityWarning) as rec:
        df = read_weather(MONTH)
    return df, rec


def test_whole_month_reads_with_one_counted_warning(month):
    df, rec = month
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert "weather-2025-06-02.txt: 1 row(s) not in the expected CSV format" in msg
    for day in ("06-22", "06-25", "06-27", "06-28", "07-01", "07-04", "07-07"):
        assert f"weather-2025-{day}.txt: 1 truncated last line" in msg
    assert df.index.is_unique and df.index.is_monotonic_increasing
    assert df.index.min() == pd.Timestamp("2025-06-03 18:19", tz="UTC")
    assert df.index.max().tz_convert("America/New_York").date() == pd.Timestamp(
        "2025-07-08").date()
    assert len(df) > 10_000


def test_month_daily_cycle(month):
    df, _ = month
    hour = df.index.tz_convert("America/New_York").hour
    hourly = df["temp_air_c"].groupby(hour).mean()
    assert hourly.idxmin() in (4, 5, 6) and hourly.idxmax() in (14, 15, 16)
    assert hourly.loc[5] == pytest.approx(18, abs=1.0)
    assert hourly.loc[15] == pytest.approx(30, abs=1.0)
    # solar radiation is zero at night and peaks around midday
    solar = df["solar_radiation_w_per_m2"].groupby(hour).mean()
    assert solar.loc[1] < 1 and solar.loc[12] > 400
    assert np.isfinite(df["pressure_hpa"]).all()


@pytest.mark.parametrize("col", ["Temp (°F)", "Pressure (in)", "Wind Speed (mph)"])
def test_known_quantity_in_another_unit_is_an_error_not_dropped(col):
    # a US-unit export used to lose the column silently (unknown name -> ignored)
    text = f"Time,{col},Humidity (%)\n2025-06-04 00:00,70,50\n"
    with pytest.raises(ParseError) as exc:
        parse_weather(text)
    assert exc.value.column == col and exc.value.line == 1
