"""Every user number has a bound checked before allocating, with the estimate in the
error (issue 24): measured-trace ticks, scenario ticks and horizons, CLI numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powerlab import cli
from powerlab.exceptions import PowerlabError
from powerlab.telemetry.schema import conform

pytestmark = pytest.mark.bad_input("requirements")

SPEC = ("name: l\nboundary: it\nrequirements:\n  - {name: s, kind: step, within_s: 1, "
        "limit: 1, unit: MW, source: t, illustrative: true}\n")


def _frame(span_s: float) -> pd.DataFrame:
    t = pd.Timestamp("2025-06-01T00:00:00Z") + pd.to_timedelta(np.arange(0, span_s, 1.0),
                                                               unit="s")
    rows = [pd.DataFrame({"timestamp": t, "host": h, "scope": "node",
                          "power_w": 5000.0 + 100 * np.sin(np.arange(len(t)))})
            for h in ("n0", "n1")]
    return conform(pd.concat(rows, ignore_index=True))


def test_a_tick_that_makes_too_many_ticks_is_refused_with_the_estimate(tmp_path, capsys):
    """``comply STORE --tick-s 0.0001`` (issue 24: 188 s and 1.9 GB): the tick count comes
    from the span and is refused before the grid is allocated."""
    from powerlab.interconnect.powertrace import MAX_TRACE_TICKS, trace_from_telemetry

    frame = _frame(3600)
    assert 3599 / 1e-4 > MAX_TRACE_TICKS
    with pytest.raises(PowerlabError, match=r"makes 35,990,001 ticks \(about 1.3 GiB\)"):
        trace_from_telemetry(frame, tick_s=1e-4)
    assert len(trace_from_telemetry(frame, tick_s=0.5).it_w) == 7199
    pq = tmp_path / "t.parquet"
    frame.to_parquet(pq)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    rc = cli.main(["comply", str(pq), "--requirements", str(spec), "--out",
                   str(tmp_path / "o"), "--tick-s", "0.0001"])
    err = capsys.readouterr().err
    assert rc == 2 and "GiB" in err and len(err.strip().splitlines()) == 1


def _rc(argv) -> int:
    """The exit code of ``powerlab ARGV`` in process (a number out of its declared
    range is a usage error: argparse exits 2 while parsing)."""
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("args, words", [
    (["--freq", "1ns"], "bins per day"),
    (["--freq", "1us"], "narrowest bin is 10 ms"),
    (["--gpus-per-node", "100000000"], "1 to 1024"),
    (["--workers", "100000"], "outside 1 to 256"),
])
def test_aggregate_numbers_are_bounded(tmp_path, capsys, args, words):
    """``aggregate STORE --freq 1ns`` asked numpy for 67 GiB (a MemoryError traceback);
    '1us' ran for minutes (found by benchmarks/fuzz.py's manual follow-up)."""
    from powerlab.telemetry.store import write_store

    write_store(_frame(60), tmp_path / "st", fsync=False)
    rc = _rc(["aggregate", str(tmp_path / "st"), "--out", str(tmp_path / "a.csv"),
                   "--engine", "pandas", *args])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("kw, words", [({"pue": 1e308}, "from 1 to 10"),
                                       ({"pue": 1.2, "base_load_w": 1e308}, "10 GW")])
def test_pue_and_base_load_are_bounded(kw, words):
    """``comply STORE --pue 1e308`` overflowed to inf with a RuntimeWarning first."""
    from powerlab.interconnect.powertrace import trace_from_telemetry

    with pytest.raises(PowerlabError, match=words):
        trace_from_telemetry(_frame(60), **kw)
