import re

import pandas as pd

from powerlab.cli import main
from powerlab.telemetry.store import write_store
from tests.conftest import make_telemetry


def test_summary_on_bundled_mlperf_data(capsys):
    assert main(["summary"]) == 0
    out = capsys.readouterr().out
    assert "from 64 host(s)" in out
    n = int(re.search(r"([\d,]+) samples from", out).group(1).replace(",", ""))
    assert 64 * 1700 <= n <= 64 * 1702
    # 64 DGX-class nodes training GPT-3 draw several hundred kW together
    kw = float(re.search(r"total mean power ([\d,.]+) kW", out).group(1).replace(",", ""))
    assert 300 < kw < 700


def test_summary_on_a_store(tmp_path, capsys):
    df = make_telemetry(2, 3, 10)
    write_store(df, tmp_path)
    assert main(["summary", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "60 samples from 2 host(s)" in out
    exp = df.groupby("host")["power_w"].mean().round(1)
    for host, val in exp.items():
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(host))
        assert f"{val:.1f}" in line
    # 3 GPUs per host: the total is the sum of the per-GPU means
    total = df.groupby(["host", "gpu_index"])["power_w"].mean().sum() / 1e3
    assert f"total mean power {total:,.1f} kW" in out
    assert isinstance(exp, pd.Series)


def test_summary_missing_path_is_one_line_error(tmp_path, capsys):
    assert main(["summary", str(tmp_path / "nope.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err
