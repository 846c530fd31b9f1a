import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import PowerlabError, SchemaError
from powerlab.telemetry.schema import (
    CORE_COLUMNS,
    GLOSSARY,
    conform,
    empty_frame,
    glossary_frame,
    validate,
)
from tests.conftest import make_telemetry


def test_glossary_units_are_in_names():
    for c in GLOSSARY.values():
        if c.unit in ("W",):
            assert c.name.endswith("_w"), c.name
        if c.unit == "J":
            assert c.name.endswith("_j")
        if c.unit == "MHz":
            assert c.name.endswith("_mhz")
        if c.unit == "degC":
            assert c.name.endswith("_c")
        if c.unit == "%":
            assert c.name.endswith("_pct")
        assert not c.name.endswith("_mw"), "never _mw: milliwatts or megawatts?"


def test_glossary_frame_documents_every_column():
    g = glossary_frame()
    assert list(g["name"]) == list(GLOSSARY)
    assert (g["description"].str.len() > 5).all()


def test_empty_frame_dtypes_validate():
    e = empty_frame()
    assert list(e.columns) == list(CORE_COLUMNS)
    validate(e)


def test_valid_frame_passes_and_conform_is_idempotent(telemetry):
    assert validate(telemetry) is telemetry
    again = conform(telemetry)
    pd.testing.assert_frame_equal(again, telemetry)
    assert str(telemetry["throttle_reasons"].dtype) == "UInt64"
    assert telemetry["timestamp"].dt.tz is not None


def test_throttle_bits_above_2_63_preserved():
    df = make_telemetry(1, 1, 3)
    df["throttle_reasons"] = np.array([2**64 - 1, 2**63 + 7, 0], dtype=np.uint64)
    c = conform(df)
    assert int(c["throttle_reasons"].iloc[0]) == 2**64 - 1
    assert int(c["throttle_reasons"].iloc[1]) == 2**63 + 7


def test_conform_adds_missing_measurements_as_na():
    df = pd.DataFrame({"timestamp": pd.to_datetime(["2024-01-01T00:00:00Z"]), "host": ["h"],
                       "gpu_index": [0], "power_w": [100.0]})
    c = conform(df)
    assert list(c.columns) == list(CORE_COLUMNS)
    assert c["scope"].iloc[0] == "gpu"
    assert np.isnan(c["temp_gpu_c"].iloc[0])
    assert c["throttle_reasons"].isna().all()
    validate(c)


def test_conform_refuses_naive_timestamps():
    df = pd.DataFrame({"timestamp": pd.to_datetime(["2024-01-01 00:00:00"]), "host": ["h"],
                       "gpu_index": [0]})
    with pytest.raises(SchemaError, match="tz-aware"):
        conform(df)


def test_validate_reports_every_violation_at_once(telemetry):
    bad = telemetry.copy()
    bad = bad.drop(columns=["clock_mem_mhz"])
    bad.loc[3, "power_w"] = 72360.0            # milliwatts
    bad.loc[5, "temp_gpu_c"] = 318.15           # kelvin
    bad["util_gpu_pct"] = bad["util_gpu_pct"].astype("int64")  # wrong dtype
    bad.loc[7, "timestamp"] = bad.loc[6, "timestamp"]          # duplicate
    bad.loc[20, "timestamp"] = bad.loc[10, "timestamp"]        # backwards
    with pytest.raises(SchemaError) as ei:
        validate(bad, source="bad.parquet")
    err = ei.value
    assert isinstance(err, PowerlabError)
    msg = str(err)
    assert "bad.parquet" in msg
    assert set(err.columns) >= {"clock_mem_mhz", "power_w", "temp_gpu_c", "util_gpu_pct",
                                "timestamp"}
    pw = next(v for v in err.violations if v.column == "power_w")
    assert pw.rows == (3,) and "milliwatts" in pw.message
    tg = next(v for v in err.violations if v.column == "temp_gpu_c")
    assert tg.rows == (5,) and "kelvin" in tg.message
    dup = next(v for v in err.violations if "duplicate" in v.message)
    assert 7 in dup.rows
    back = next(v for v in err.violations if "backwards" in v.message)
    assert 20 in back.rows or 21 in back.rows


def test_validate_naive_and_non_utc_timestamps(telemetry):
    naive = telemetry.copy()
    naive["timestamp"] = naive["timestamp"].dt.tz_localize(None)
    with pytest.raises(SchemaError, match="tz-aware"):
        validate(naive)
    berlin = telemetry.copy()
    berlin["timestamp"] = berlin["timestamp"].dt.tz_convert("Europe/Berlin")
    with pytest.raises(SchemaError, match="UTC"):
        validate(berlin)


def test_node_scope_allows_node_power_but_not_gpu_rows():
    t = pd.to_datetime(["2024-05-17T15:38:00Z", "2024-05-17T15:38:02Z"])
    node = conform(pd.DataFrame({"timestamp": t, "host": "node_1", "scope": "node",
                                 "power_w": [6200.0, 6300.0]}))
    validate(node)
    assert node["gpu_index"].isna().all()
    gpu = node.copy()
    gpu["scope"] = "gpu"
    with pytest.raises(SchemaError) as ei:
        validate(gpu)
    cols = ei.value.columns
    assert "power_w" in cols and "gpu_index" in cols


def test_unknown_scope_rejected(telemetry):
    bad = telemetry.copy()
    bad.loc[0, "scope"] = "rack"
    with pytest.raises(SchemaError, match="scope"):
        validate(bad)
