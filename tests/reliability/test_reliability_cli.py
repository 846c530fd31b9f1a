"""``powerlab reliability fit`` and ``plan`` (in process): the files they write, and bad
input as one-line errors."""

import json

import pandas as pd
import pytest

from powerlab.cli import main
from powerlab.data import bundled_path

TRACE = bundled_path("infinitehbd-fault-trace", "fault_trace.json.gz")


def test_fit_then_plan(tmp_path, capsys):
    fit = tmp_path / "fit"
    assert main(["reliability", "fit", str(TRACE), "--out", str(fit)]) == 0
    for name in ("class_rates", "frailty", "lemons", "repair", "trend", "comparisons"):
        assert (fit / f"{name}.csv").is_file()
    params = json.loads((fit / "fit.json").read_text())
    assert params["faults"] == 578 and params["n_nodes"] == 400
    plan = tmp_path / "plan"
    assert main(["reliability", "plan", "--gpus", "2048", "--days", "10",
                 "--checkpoint-s", "30", "--restart-s", "300", "--draws", "4",
                 "--train-w", "700", "--checkpoint-w", "300", "--idle-w", "100",
                 "--fit", str(fit), "--out", str(plan)]) == 0
    g = pd.read_csv(plan / "goodput.csv").set_index("metric")
    for m in ("expected_interruptions", "mttf_h", "ettr_simulated",
              "best_checkpoint_interval_s", "checkpoints_per_day", "restarts_per_day"):
        assert m in g.index
    assert g.loc["mttf_h", "lower"] < g.loc["mttf_h", "value"] < g.loc["mttf_h", "upper"]
    # 2,048 GPUs x (700 - 300) W = 0.8192 MW at each checkpoint; x (700 - 100) W at restarts
    assert g.loc["checkpoint_swing_power_megawatts", "value"] == pytest.approx(0.8192)
    assert g.loc["restart_swing_power_megawatts", "value"] == pytest.approx(1.2288)
    assert (plan / "transfer.csv").is_file() and (plan / "job_scaling.csv").is_file()
    assert "Goodput plan" in capsys.readouterr().out


@pytest.mark.bad_input("cli")
def test_bad_inputs_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "f.csv"
    bad.write_text("node,start,end,fault_class\nn1,2024-01-02T00:00Z,2024-01-01T00:00Z,gpu\n")
    assert main(["reliability", "fit", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert main(["reliability", "fit", str(bad), "--nodes", "10",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--nodes is required" in err[0] and "end before start" in err[1]
    assert main(["reliability", "plan", "--gpus", "8", "--days", "1", "--checkpoint-s",
                 "1", "--restart-s", "1", "--fit", str(tmp_path), "--out",
                 str(tmp_path / "p")]) == 2
    assert "no fit.json" in capsys.readouterr().err


def test_fit_from_a_store_of_xid_events(tmp_path, capsys):
    # six Xid failures on three hosts, hours apart: six faults without ends; the rates and
    # the frailty test are fitted, repair times are said not estimable, and a plan refuses
    lines = [f"2025-07-0{d}T0{h}:00:00+00:00 n{k} kernel: NVRM: Xid (PCI:0000:3b:00): 79, x"
             for d, h, k in ((1, 1, 1), (1, 5, 1), (2, 1, 2), (3, 1, 1), (4, 2, 3),
                             (5, 3, 1))]
    log = tmp_path / "kern.log"
    log.write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    assert main(["import", str(log), "--out", str(store)]) == 0
    fit = tmp_path / "fit"
    assert main(["reliability", "fit", str(store), "--nodes", "8", "--out", str(fit)]) == 0
    rates = pd.read_csv(fit / "class_rates.csv", index_col=0)
    assert rates.loc["unexpected", "faults"] == 6
    # exposure: outages unknown (no ends) -> the whole window (07-01 00:00 to the last
    # fault, 07-05 03:00) for 8 nodes
    assert json.loads((fit / "fit.json").read_text())["exposure_node_days"] == \
        pytest.approx(8 * (4 + 3 / 24), rel=1e-3)
    assert "not estimable" in pd.read_csv(fit / "repair.csv")["model"].iloc[0]
    capsys.readouterr()
    assert main(["reliability", "plan", "--gpus", "64", "--days", "1", "--checkpoint-s",
                 "10", "--restart-s", "60", "--fit", str(fit), "--out",
                 str(tmp_path / "p")]) == 2
    assert "no repair times" in capsys.readouterr().err
