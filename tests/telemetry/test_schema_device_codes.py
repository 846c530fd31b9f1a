"""``validate(df, device_codes=...)``: the reader's own device codes give the same
checks, violations and messages as the codes computed from the columns."""

import numpy as np
import pandas as pd
import pytest

from powerlab.exceptions import SchemaError
from powerlab.iotools import read_nvidia_smi
from powerlab.telemetry.schema import device_codes, validate
from tests.conftest import make_telemetry


def _outcome(df, **kw):
    try:
        return validate(df, source="x", **kw)
    except SchemaError as exc:
        return str(exc), [(v.column, v.message, v.rows) for v in exc.violations]


def test_codes_that_only_relabel_devices_give_the_same_violations():
    df = make_telemetry(n_hosts=2, n_gpus=3, n_samples=20)
    df.loc[7, "timestamp"] = df.loc[6, "timestamp"]      # duplicate
    df.loc[30, "timestamp"] = df.loc[25, "timestamp"]    # backwards
    df.loc[3, "power_w"] = 72360.0                       # out of range
    expected = _outcome(df)
    assert isinstance(expected, tuple)  # the damage is found
    kinds = {m.split(" (")[0] for _, m, _ in expected[1]}
    assert any("duplicate" in k for k in kinds) and any("backwards" in k for k in kinds)
    codes = device_codes(df)
    # any labels equal exactly within a device: scaled and shifted codes
    assert _outcome(df, device_codes=codes * 7 + 3) == expected
    # rows shuffled: the lexsort branch, with the same outcome either way
    shuffled = df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    assert _outcome(shuffled, device_codes=device_codes(shuffled) * 5) == _outcome(shuffled)


def test_codes_of_the_wrong_length_are_refused():
    df = make_telemetry(n_hosts=1, n_gpus=2, n_samples=5)
    with pytest.raises(ValueError, match="device_codes has 3 values for 10 rows"):
        validate(df, device_codes=np.arange(3))


def test_reader_output_passes_the_full_validate(tmp_path):
    """The nvidia-smi reader validates with its GPU index as the device codes; the
    frame it returns also passes the full validate (codes from the columns)."""
    t0 = pd.Timestamp("2025-07-27 00:00:00")
    lines = ["timestamp, index, power.draw [W]"]
    for q in range(30):
        for g in range(4):
            t = t0 + pd.Timedelta(milliseconds=100 * q + g)
            lines.append(f"{t:%Y/%m/%d %H:%M:%S}.{t.microsecond // 1000:03d}, {g}, "
                         f"{70 + q + g}.25 W")
    f = tmp_path / "smi.csv"
    f.write_text("\n".join(lines) + "\n")
    df = read_nvidia_smi(f, tz="UTC")
    assert len(df) == 120
    assert validate(df) is df


def test_reader_reports_duplicates_as_the_full_validate_does(tmp_path):
    """A GPU sampled twice at one time: the same SchemaError as validating the
    frame's columns."""
    lines = ["timestamp, index, power.draw [W]",
             "2025/07/27 00:00:00.000, 0, 70.00 W",
             "2025/07/27 00:00:00.000, 1, 71.00 W",
             "2025/07/27 00:00:00.000, 0, 72.00 W",
             "2025/07/27 00:00:00.100, 1, 73.00 W"]
    f = tmp_path / "smi.csv"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(SchemaError) as ei:
        read_nvidia_smi(f, tz="UTC")
    (v,) = ei.value.violations
    assert "duplicate samples" in v.message and v.rows == (1,)
