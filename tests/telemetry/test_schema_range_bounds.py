"""The range check of :func:`validate` finds values outside a column's valid range
wherever they sit among missing values (it first compares the column's extremes, NaN
ignored, with the range)."""

import numpy as np
import pytest

from powerlab.exceptions import SchemaError
from powerlab.telemetry.schema import validate
from tests.conftest import make_telemetry


@pytest.mark.parametrize("bad", [2500.0, -1.0, np.inf, -np.inf])
def test_out_of_range_value_after_missing_values_is_found(bad):
    df = make_telemetry(n_hosts=1, n_gpus=2, n_samples=10)
    df.loc[:5, "power_w"] = np.nan  # NaN first: a NaN-propagating min would hide it
    df.loc[8, "power_w"] = bad
    with pytest.raises(SchemaError) as ei:
        validate(df)
    (v,) = ei.value.violations
    assert v.column == "power_w" and v.rows == (8,)


def test_all_missing_and_boundary_values_pass():
    df = make_telemetry(n_hosts=1, n_gpus=2, n_samples=10)
    df["temp_mem_c"] = np.nan
    df.loc[0, "power_w"], df.loc[1, "power_w"] = 0.0, 2000.0  # inclusive bounds
    assert validate(df) is df
