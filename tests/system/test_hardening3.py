"""Hardening, round three (issue 38): no input overwritten by any command, every number
typed bounded and finite from one table, reads that survive other programs.

Each test is one case of the issue, seen failing on the tree before the fix."""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import pytest

from powerlab import cli
from powerlab._cli._bounds import BOUNDS, apply
from powerlab.exceptions import PowerlabError
from powerlab.outputs import check_write, protect_inputs

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "data/scenarios/small.yaml"
ERCOT = REPO / "data/requirements/ercot_large_load_illustrative.yaml"


def _md5(p: Path) -> str:
    return hashlib.md5(p.read_bytes()).hexdigest()


def _rc(argv) -> int:
    try:
        return cli.main([str(a) for a in argv])
    except SystemExit as exc:          # a usage error: argparse exits 2 while parsing
        return exc.code


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


# --------------------------------------------------------------------- the output guard
@pytest.mark.bad_input("cli")
def test_flex_plan_refuses_to_write_over_its_target_file(tmp_path, capsys):
    """``flex plan S --target D/plan_targets.csv --out D`` replaced the target file with
    the plan's output and exited 0."""
    tg = tmp_path / "plan_targets.csv"
    tg.write_text("start_utc,end_utc,cap_megawatts\n"
                  "2025-06-02T12:30:00Z,2025-06-02T12:40:00Z,0.5\n")
    before = _md5(tg)
    rc = _rc(["flex", "plan", SMALL, "--target", tg, "--requirements", ERCOT,
              "--out", tmp_path, "--draws", "1"])
    err = _one_line(capsys)
    assert rc == 2 and "refusing to write over an input" in err and "plan_targets" in err
    assert _md5(tg) == before


@pytest.mark.bad_input("cli")
def test_flex_offer_refuses_to_write_over_its_scenario(tmp_path, capsys):
    """``flex offer D/flex_offer.csv --out D`` replaced the scenario and exited 0."""
    sc = tmp_path / "flex_offer.csv"
    sc.write_bytes(SMALL.read_bytes())
    rc = _rc(["flex", "offer", sc, "--out", tmp_path, "--draws", "1"])
    err = _one_line(capsys)
    assert rc == 2 and "flex_offer.csv is the input" in err
    assert sc.read_bytes() == SMALL.read_bytes()


@pytest.mark.bad_input("cli")
def test_the_guard_sees_hard_links_renames_removals_and_input_folders(tmp_path):
    """The one guard: every write in the process while a command runs (open for writing,
    os.replace, os.remove, a hard link of an input, a file inside an input folder)."""
    src = tmp_path / "in.csv"
    src.write_text("a\n")
    link = tmp_path / "link.csv"
    os.link(src, link)
    folder = tmp_path / "store"
    (folder / "date=2025-01-01").mkdir(parents=True)
    part = folder / "date=2025-01-01" / "p.parquet"
    part.write_text("x")
    other = tmp_path / "tmp.txt"
    other.write_text("t")
    with protect_inputs([src, folder, tmp_path / "missing"]):
        for attempt in (lambda: link.write_text("b"),                # hard link
                        lambda: open(src, "a").close(),               # append
                        lambda: os.replace(other, src),               # rename over
                        lambda: os.remove(src),                       # removal
                        lambda: os.truncate(src, 0),
                        lambda: part.write_text("y")):                # inside a folder
            with pytest.raises(PowerlabError, match="refusing to write over an input"):
                attempt()
        (folder / "new.csv").write_text("new")        # a new file in an input folder
        (tmp_path / "out.csv").write_text("ok")       # any other output
        src.read_text()                               # reading is fine
    assert src.read_text() == "a\n" and part.read_text() == "x"
    check_write(src)                                  # inactive again: a no-op
    link.write_text("c")                              # and writes pass
    assert src.read_text() == "c"


# ------------------------------------------------------------------ the bounds table
def _numeric_actions():
    """``(command, action)`` for every numeric option of the real parser."""
    found = []

    def walk(p, cmd):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, f"{cmd} {name}".strip())
            elif getattr(a.type, "bound", None) is not None:
                found.append((cmd, a))
    walk(cli.build_parser(), "")
    return found


@pytest.mark.bad_input("cli")
def test_every_numeric_option_has_a_declared_bound():
    """Derived from the parser: every option whose value is a number has its entry in
    the one table (apply() reports none missing), and there are many of them."""
    assert apply(cli.build_parser()) == []
    acts = _numeric_actions()
    assert len(acts) >= 40
    assert all(a.type.bound in BOUNDS.values() for _, a in acts)


EXTREMES = ["nan", "NaN", "inf", "-inf", "1e18", "-1e18", "-1", "", " ", "true", "1e400",
            "9" * 400, "0x10", "1_000"]


@pytest.mark.bad_input("cli")
def test_every_numeric_option_refuses_extremes_or_stays_in_range():
    """NaN, +-inf, 1e18, negative, empty, booleans and a 400-digit number, for every
    numeric option of every command: refused while parsing, or a finite value inside
    the option's declared range."""
    import math

    tried = 0
    for cmd, a in _numeric_actions():
        b = a.type.bound
        for text in EXTREMES:
            tried += 1
            try:
                v = a.type(text)
            except (argparse.ArgumentTypeError, ValueError):
                continue
            v = v[-1] if isinstance(v, tuple) else v
            assert math.isfinite(v) and b.low <= v <= b.high, (cmd, a.dest, text, v)
    assert tried >= 40 * len(EXTREMES)


@pytest.mark.parametrize("argv, words", [
    (["flex", "offer", SMALL, "--out", "o", "--hold-s", "nan"], "'nan' is not a finite"),
    (["flex", "offer", SMALL, "--out", "o", "--hold-s", "1e18"], "outside 1 to 2,592,000 s"),
    (["flex", "plan", SMALL, "--target", "t.csv", "--requirements", ERCOT, "--out", "o",
      "--averaging-s", "1e12"], "outside 0.1 to 86400 s"),
    (["study-package", SMALL, "--requirements", ERCOT, "--out", "o",
      "--short-window-s", "1e12"], "10^14"),
    (["forecast", SMALL, "--out", "f.csv", "--draws", "true"], "yes/no word"),
])
@pytest.mark.bad_input("cli")
def test_extreme_option_values_are_one_line_usage_errors(tmp_path, monkeypatch, capsys,
                                                         argv, words):
    """``flex offer --hold-s nan`` / ``1e18`` were tracebacks; ``--averaging-s 1e12``
    was accepted; ``study-package --short-window-s 1e12`` hung."""
    monkeypatch.chdir(tmp_path)
    assert _rc(argv) == 2
    err = _one_line(capsys)
    assert words in err, err


# ----------------------------------------------------------- targets and OpenADR events
def _targets_csv(path: Path, n: int) -> Path:
    import pandas as pd

    t0 = pd.Timestamp("2025-06-02T12:10:00Z")
    rows = ["start_utc,end_utc,cap_megawatts"]
    for i in range(n):
        a = t0 + pd.Timedelta(seconds=5 * i)
        rows.append(f"{a.isoformat()},{(a + pd.Timedelta(seconds=4)).isoformat()},0.5")
    path.write_text("\n".join(rows) + "\n")
    return path


def _copied_entries(monkeypatch, read) -> int:
    """How many location entries pandas deep-copies (frame attrs) while ``read`` runs."""
    import pandas.core.generic as gen

    seen = [0]
    real = gen.deepcopy

    def counting(obj, *a, **k):
        if isinstance(obj, dict):
            seen[0] += sum(len(v) if isinstance(v, dict) else 1 for v in obj.values())
        return real(obj, *a, **k)
    monkeypatch.setattr(gen, "deepcopy", counting)
    read()
    monkeypatch.setattr(gen, "deepcopy", real)
    return seen[0]


@pytest.mark.bad_input("flex")
def test_reading_targets_is_linear_in_the_number_of_targets(tmp_path, monkeypatch):
    """250 targets took 5.4 s, 1,000 took 60 s: each row of the checked frame deep-copied
    the locations of every target (n^2 copies).  Counted, not timed: the entries copied
    grow in proportion to n."""
    import pandas as pd

    from powerlab.flex.targets import read_targets

    now = pd.Timestamp("2025-06-02T12:00:00Z")
    counts = {}
    for n in (100, 400):
        p = _targets_csv(tmp_path / f"t{n}.csv", n)
        counts[n] = _copied_entries(monkeypatch, lambda p=p: read_targets(
            p, floor_w=0, max_w=1e9, now=now))
    assert counts[400] <= 4 * counts[100] + 10, counts      # was ~16x (quadratic)
    assert counts[400] <= 10 * 400


def _event(n: int, value="0.5", duration='"PT5S"') -> str:
    ivs = ",".join(f'{{"id": {i}, "payloads": [{{"type": "IMPORT_CAPACITY_LIMIT", '
                   f'"values": [{value}]}}]}}' for i in range(n))
    return ('{"programID": "p", "intervalPeriod": {"start": "2025-06-02T12:10:00Z", '
            f'"duration": {duration}}}, "payloadDescriptors": [{{"payloadType": '
            f'"IMPORT_CAPACITY_LIMIT", "units": "MW"}}], "intervals": [{ivs}]}}')


@pytest.mark.parametrize("value, duration, words", [
    ("NaN", '"PT5M"', "not a finite number"),          # passed, then crashed the plan
    ("true", '"PT5M"', "is not a number"),             # was a cap of 1 (1 MW)
    ('"5"', '"PT5M"', "is not a number"),
    ("1" + "0" * 400, '"PT5M"', "not a finite number"),
    ("0.5", '"P1M"', "calendar months and years have no fixed length"),  # was 1 minute
    ("0.5", '"P9999Y"', "calendar months"),
    ("0.5", '"PT1M5"', "not an ISO 8601 duration"),
    ("0.5", '"P"', "not an ISO 8601 duration"),
    ("0.5", '"PT0S"', "must be positive"),
])
@pytest.mark.bad_input("flex")
def test_openadr_values_and_durations_are_read_as_what_they_are(value, duration, words):
    """OpenADR ``P1M`` (a month) was read as one minute; a value ``true`` as a cap of 1;
    ``NaN`` passed the reader and crashed the plan."""
    from powerlab.exceptions import ParseError
    from powerlab.flex.targets import parse_openadr_event

    with pytest.raises(ParseError, match=words):
        parse_openadr_event(_event(2, value, duration))


@pytest.mark.bad_input("flex")
def test_openadr_fixed_durations_keep_their_length():
    from powerlab.flex.targets import parse_openadr_event

    for text, secs in (('"PT1M"', 60), ('"PT1H30M"', 5400), ('"P1DT2H"', 93600),
                       ('"P2W"', 1209600), ('"PT0.5S"', 0.5)):
        f = parse_openadr_event(_event(1, duration=text))
        assert (f["end_utc"] - f["start_utc"]).iloc[0].total_seconds() == secs


@pytest.mark.bad_input("flex")
def test_a_100000_deep_openadr_document_is_one_error():
    """A 100,000-deep JSON document was a RecursionError traceback."""
    from powerlab.exceptions import ParseError
    from powerlab.flex.targets import parse_openadr_event

    with pytest.raises(ParseError, match="nested too deeply"):
        parse_openadr_event("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ParseError, match="nested too deeply"):
        parse_openadr_event('{"events": ' + "[" * 100_000 + "]" * 100_000 + "}")


@pytest.mark.bad_input("flex")
@pytest.mark.slow   # about 5 s here: 20,000 intervals read and checked
def test_a_large_openadr_event_is_read_in_linear_work(tmp_path, monkeypatch):
    """A 100,000-interval event ran past 120 s (the same n^2 copies as the CSV)."""
    import pandas as pd

    from powerlab.flex.targets import read_targets

    now = pd.Timestamp("2025-06-02T12:00:00Z")
    counts = {}
    for n in (2_000, 20_000):
        p = tmp_path / f"e{n}.json"
        p.write_text(_event(n))
        counts[n] = _copied_entries(monkeypatch, lambda p=p: read_targets(
            p, floor_w=0, max_w=1e9, now=now))
    assert counts[20_000] <= 10 * counts[2_000] + 10, counts


# ------------------------------------------------------------------------- backtest
@pytest.mark.bad_input("cli")
def test_backtest_without_events_on_one_reading_per_meter_is_one_error(tmp_path, capsys):
    """``backtest`` without ``--events`` on an MLPerf power excerpt: a ValueError
    traceback (the meter interval was NaN)."""
    log = REPO / "tests/data/iotools/mlperf_gpt3_node_7_excerpt.txt"
    rc = _rc(["backtest", log, "--tz", "UTC", "--out", tmp_path / "bt"])
    err = _one_line(capsys)
    assert rc == 2 and err.startswith("powerlab backtest: error:"), err


@pytest.mark.bad_input("cli")
def test_backtest_chart_of_a_long_run_stays_under_the_row_limit():
    """Run-to-run ``backtest`` crashed drawing its chart: 6,814 rows over altair's
    5,000-row limit.  The means widen and the subtitle says so."""
    pytest.importorskip("altair")
    import numpy as np
    import pandas as pd

    from powerlab.viz.backtest_chart import backtest_chart
    from powerlab.viz.render import MAX_ROWS

    i = pd.date_range("2025-01-01", periods=20_442, freq="1s", tz="UTC")
    s = pd.DataFrame({"measured_w": np.linspace(1, 2, len(i)),
                      "forecast_w": np.linspace(1, 2, len(i))}, index=i)
    chart = backtest_chart(s)
    spec = chart.to_dict()                                   # raised MaxRowsError
    assert len(chart.data) < MAX_ROWS
    assert "widened to stay under 3,000 rows" in spec["title"]["subtitle"]
    assert "widened" not in backtest_chart(s.iloc[:600]).to_dict()["title"]["subtitle"]


# ------------------------------------------------------- reads that survive other programs
_READER = """
from powerlab.exceptions import PowerlabError
from powerlab.telemetry.store import read_store
ok = bad = 0
for i in range({n}):
    try:
        read_store({root!r}); ok += 1
    except PowerlabError:
        bad += 1
print(ok, bad)
"""


@pytest.mark.bad_input("store")
@pytest.mark.slow   # a reader process and 60 reads of a 0.8-MB file rewritten meanwhile
def test_a_store_file_rewritten_in_place_during_reads_is_no_native_crash(tmp_path):
    """Another program truncating and rewriting a store file in place while it is read
    killed the reader with SIGBUS (exit -7; ``powerlab summary`` 135 "Bus error"): store
    files were memory-mapped.  Now each read is whole or one StoreError."""
    import subprocess
    import sys

    import numpy as np
    import pandas as pd

    from powerlab.telemetry.schema import conform
    from powerlab.telemetry.store import write_store

    root = tmp_path / "st"
    t = pd.Timestamp("2025-06-01T00:00:00Z") + pd.to_timedelta(np.arange(50_000) * 0.1,
                                                               unit="s")
    write_store(conform(pd.DataFrame({
        "timestamp": t, "host": "n0", "scope": "gpu", "gpu_index": 0,
        "power_w": np.random.default_rng(0).uniform(100, 700, len(t))})), root, fsync=False)
    f = max(root.rglob("*.parquet"), key=lambda p: p.stat().st_size)
    data = f.read_bytes()
    n = 60
    child = subprocess.Popen([sys.executable, "-c", _READER.format(n=n, root=str(root))],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    rewrites = 0
    while child.poll() is None:
        with open(f, "r+b") as fh:                 # in place: same inode, cut then refilled
            fh.truncate(0)
            fh.flush()
            fh.write(data)
        rewrites += 1
    out, err = child.communicate()
    assert child.returncode == 0, (child.returncode, err[-2000:])   # was -7 (SIGBUS)
    ok, bad = map(int, out.split())
    assert ok + bad == n and rewrites > 0


# --------------------------------------------------------------- Parquet in, everywhere
def _canon(tmp_path) -> tuple[Path, Path]:
    """A canonical Parquet file and a store holding the same 10 minutes of one GPU."""
    import numpy as np
    import pandas as pd

    from powerlab.telemetry.schema import conform
    from powerlab.telemetry.store import write_store

    t = pd.Timestamp("2025-06-01T00:00:00Z") + pd.to_timedelta(np.arange(600.0), unit="s")
    df = conform(pd.DataFrame({"timestamp": t, "host": "n0", "scope": "gpu",
                               "gpu_index": 0, "power_w": 500.0 + 100 * (t.minute >= 5)}))
    canon = tmp_path / "canon.parquet"
    df.to_parquet(canon)
    write_store(df, tmp_path / "st", fsync=False)
    return canon, next((tmp_path / "st").rglob("part-*.parquet"))


@pytest.mark.bad_input("readers")
def test_canonical_parquet_is_accepted_by_summary_and_import(tmp_path, capsys):
    """``summary canon.parquet``, ``import`` and even a store's own part file: "holds
    NUL bytes"."""
    canon, part = _canon(tmp_path)
    for src in (canon, part):
        assert _rc(["summary", src]) == 0
        assert "600 samples from 1 host(s)" in capsys.readouterr().out
    assert _rc(["import", canon, "--out", tmp_path / "imp"]) == 0
    assert "600 rows (parquet)" in capsys.readouterr().out
    from powerlab.telemetry.store import read_store

    assert len(read_store(tmp_path / "imp")) == 600


@pytest.mark.bad_input("flex")
def test_flex_verify_reads_a_canonical_parquet_file(tmp_path, capsys):
    """``flex verify canon.parquet`` said "no store"."""
    canon, _ = _canon(tmp_path)
    ev = tmp_path / "ev.csv"
    ev.write_text("start_utc,end_utc,cap_megawatts\n"
                  "2025-06-01T00:06:00Z,2025-06-01T00:08:00Z,0.0005\n")
    rc = _rc(["flex", "verify", canon, "--event", ev, "--out", tmp_path / "v",
              "--method", "pre_event_mean"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert (tmp_path / "v" / "verification.csv").is_file()


# ------------------------------------------------------- one escaping rule for every cell
@pytest.mark.bad_input("export")
def test_sanitize_cell_is_the_one_rule_and_is_reversible():
    import pandas as pd

    from powerlab._format import safe_frame, sanitize_cell, unsanitize_cell
    from powerlab.site import export

    assert export.sanitize_cell is sanitize_cell            # one rule, not two
    for text in ("=cmd|' /C calc'!A0", "+1", "-2", "@SUM(A1)", "\t=x", " \n=x", "'=x"):
        assert sanitize_cell(text).startswith("'")
        assert unsanitize_cell(sanitize_cell(text)) == text
    assert sanitize_cell("ramp_1min") == "ramp_1min" and sanitize_cell(3.5) == 3.5
    df = pd.DataFrame({"name": ["=HYPERLINK(\"http://x\",\"y\")", "ok"], "v": [-1.0, 2.0],
                       "c": pd.Categorical(["@a", "b"])})
    out = safe_frame(df)
    assert out["name"].tolist() == ["'=HYPERLINK(\"http://x\",\"y\")", "ok"]
    assert out["c"].tolist() == ["'@a", "b"] and out["v"].tolist() == [-1.0, 2.0]
    assert df["name"].iloc[0].startswith("=")                # the input is not changed


@pytest.mark.bad_input("flex")
def test_a_requirement_name_is_no_live_formula_in_plan_ramps_csv(tmp_path):
    """A requirement name ``=HYPERLINK(...)`` went raw into ``plan_ramps.csv``."""
    evil = '=HYPERLINK("http://example.invalid/x","click")'
    spec = tmp_path / "req.yaml"
    spec.write_text(ERCOT.read_text().replace("name: ramp_1min", f"name: '{evil}'"))
    tg = tmp_path / "t.csv"
    tg.write_text("start_utc,end_utc,cap_megawatts\n"
                  "2025-06-02T12:30:00Z,2025-06-02T12:40:00Z,0.5\n")
    assert _rc(["flex", "plan", SMALL, "--target", tg, "--requirements", spec,
                "--out", tmp_path / "o", "--draws", "1", "--quiet"]) in (0, 1)
    text = (tmp_path / "o" / "plan_ramps.csv").read_text()
    assert evil[:10] in text
    import csv

    cells = [c for row in csv.reader(text.splitlines()) for c in row]
    assert not any(c.lstrip(" \t\r\n").startswith(("=", "+", "@")) for c in cells)
    assert any(c == "'" + evil for c in cells)


@pytest.mark.bad_input("export")
def test_a_scenario_name_is_no_live_formula_in_the_xlsx_about_sheet(tmp_path):
    """A scenario name ``=cmd|...`` was stored as a live formula in the "about" sheet."""
    openpyxl = pytest.importorskip("openpyxl")
    evil = "=cmd|' /C calc'!A0"
    sc = tmp_path / "s.yaml"
    sc.write_text(SMALL.read_text().replace("name: small-example", f'name: "{evil}"'))
    out = tmp_path / "f.xlsx"
    assert _rc(["forecast", sc, "--out", out, "--format", "xlsx", "--draws", "1"]) == 0
    about = openpyxl.load_workbook(out)["about"]
    cells = [c for row in about.iter_rows() for c in row if c.value is not None]
    assert not any(c.data_type == "f" for c in cells)        # no formula cell at all
    assert "'" + evil in [c.value for c in cells]


# ----------------------------------------------------------------------- the workbook
@pytest.mark.bad_input("export")
def test_a_workbook_over_the_sheet_row_limit_is_refused_before_writing(tmp_path,
                                                                       monkeypatch):
    """An xlsx forecast with more rows than a sheet holds (4.7 M) hung and left no file.
    Counted against a lowered limit so the test stays small: refused before openpyxl."""
    pytest.importorskip("openpyxl")
    from powerlab.site import export_workbook as ew

    assert ew.MAX_SHEET_ROWS == 1_048_576                 # Excel's limit
    monkeypatch.setattr(ew, "MAX_SHEET_ROWS", 100)      # 2 h at 1 min is 121 rows
    out = tmp_path / "f.xlsx"
    with pytest.raises(PowerlabError, match="do not fit a worksheet"):
        from powerlab.site import forecast, read_scenario

        ew.write_facilities_xlsx(forecast(read_scenario(SMALL), draws=1), out, "1min")
    assert not out.exists() and list(tmp_path.iterdir()) == []


_FULL = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from powerlab import cli
resource.setrlimit(resource.RLIMIT_FSIZE, (3000, resource.RLIM_INFINITY))
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.bad_input("export")
@pytest.mark.slow   # a subprocess running a forecast
def test_xlsx_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    """``--format xlsx`` on a full disk: a traceback.  Simulated with a 3-kB file size
    limit (every write past it fails with EFBIG, as on a full disk with ENOSPC)."""
    import subprocess
    import sys

    pytest.importorskip("openpyxl")
    out = tmp_path / "f.xlsx"
    r = subprocess.run([sys.executable, "-c", _FULL, "forecast", str(SMALL), "--out",
                        str(out), "--format", "xlsx", "--draws", "1"], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines() == [r.stderr.strip()], r.stderr    # one line
    assert "could not write" in r.stderr and "File too large" in r.stderr
    assert list(tmp_path.iterdir()) == []                  # no workbook, no temporary


# -------------------------------------------------------------------- reader values
DATA = REPO / "tests/data/iotools"


@pytest.mark.bad_input("readers")
def test_a_23_digit_gpu_id_in_dcgmi_dmon_is_one_error(tmp_path, capsys):
    """A 23-digit GPU id crashed ``import`` and ``summary`` (OverflowError)."""
    lines = (DATA / "dcgmi_dmon_constructed.txt").read_text().splitlines()
    bad = tmp_path / "dmon.txt"
    bad.write_text("\n".join(lines[:3] + [lines[3].replace("GPU 1 ", "GPU 12345678901234567890123 ",
                                                           1)]) + "\n")
    for argv in (["summary", bad], ["import", bad, "--out", tmp_path / "st",
                                    "--format", "dcgm-dmon"]):
        assert _rc(argv) == 2
        err = _one_line(capsys)
        assert "GPU id 12345678901234567890123 is outside 0 to 32767" in err, err
        assert "line 4" in err


@pytest.mark.bad_input("readers")
def test_a_400_digit_mlperf_power_value_is_a_counted_bad_line(tmp_path, capsys):
    """A 400-digit MLPerf power value crashed ``import`` and ``summary``
    (OverflowError: int too large to convert to float)."""
    text = (DATA / "mlperf_gpt3_node_7_excerpt.txt").read_text()
    assert '"value": 6933' in text
    bad = tmp_path / "node_7.txt"
    bad.write_text(text.replace('"value": 6933', '"value": 1' + "0" * 400, 1))
    import warnings

    from powerlab.exceptions import DataQualityWarning
    from powerlab.iotools import read_any

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        df = read_any(bad)
    good = read_any(DATA / "mlperf_gpt3_node_7_excerpt.txt")
    assert len(df) == len(good) - 1                 # that one reading left out, counted
    assert df["power_w"].max() < 1e5
    assert any(issubclass(w.category, DataQualityWarning) and "1 malformed" in str(w.message)
               for w in got), [str(w.message) for w in got]
    assert _rc(["summary", bad]) == 0


def _prom_answer(values, metric="DCGM_FI_DEV_GPU_UTIL"):
    import json

    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": metric, "gpu": "0", "Hostname": "n0"},
         "values": values}]}}).encode()


@pytest.mark.parametrize("values, kept, words", [
    ([[True, "50"], [1748736000, "50"], [1748736015, "60"]], 0, "not in Prometheus' matrix"),
    ([[-500, "50"], [1748736000, "50"], [1748736015, "60"]], 2, "outside the requested"),
    ([[1748736000, "-1"], [1748736015, "60"]], 2, "outside their column's valid range"),
    ([[1748736000, "50"], [1748736015, True]], 0, "not in Prometheus' matrix shape"),
])
@pytest.mark.bad_input("readers")
def test_prometheus_times_and_values_are_read_as_what_they_are(values, kept, words):
    """Prometheus sample times ``true`` or ``-500`` became 1970/1969, outside the queried
    range; utilisation -1 % was kept (power was range-checked, utilisation not)."""
    import warnings

    import numpy as np
    import pandas as pd

    from powerlab.exceptions import DataQualityWarning
    from powerlab.iotools.prometheus import read_prometheus
    from tests.support.fakeprom import FakeProm

    body = _prom_answer(values)

    def behave(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    srv = FakeProm(behave)
    try:
        t0 = pd.Timestamp(1748736000, unit="s", tz="UTC")
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            df = read_prometheus(srv.url, t0, t0 + pd.Timedelta(seconds=15), step="15s",
                                 metrics=["DCGM_FI_DEV_GPU_UTIL"])
    finally:
        srv.close()
    msgs = " ".join(str(w.message) for w in got if issubclass(w.category,
                                                                DataQualityWarning))
    assert words in msgs, msgs
    assert len(df) == kept
    if kept:
        assert df["timestamp"].min() >= t0                   # never 1969/1970
        u = df["util_gpu_pct"].to_numpy(float)
        assert np.nanmin(u) >= 0


@pytest.mark.bad_input("flex")
@pytest.mark.parametrize("value", ["-5", "inf", "1e400"])
def test_a_meter_csv_at_minus_5_mw_or_inf_is_refused(tmp_path, value):
    """A meter CSV at -5 MW or ``inf`` gave credited MW (exit 0)."""
    from powerlab.exceptions import ParseError
    from powerlab.flex.verify import read_site_power

    m = tmp_path / "m.csv"
    m.write_text("timestamp,power_megawatts\n2025-06-01T00:00:00Z,1\n"
                 f"2025-06-01T00:01:00Z,{value}\n")
    with pytest.raises(ParseError, match="line 3.*negative, infinite or above 10 GW"):
        read_site_power(m)


# ------------------------------------------------------- store verify: rows in partition
def _two_day_store(root: Path) -> Path:
    import numpy as np
    import pandas as pd

    from powerlab.telemetry.schema import conform
    from powerlab.telemetry.store import write_store

    t = pd.Timestamp("2025-06-01T23:50:00Z") + pd.to_timedelta(np.arange(1200.0), unit="s")
    write_store(conform(pd.DataFrame({"timestamp": t, "host": "n0", "scope": "gpu",
                                      "gpu_index": 0, "power_w": 500.0})), root,
                fsync=False)
    return next((root / "2025-06-02").rglob("part-*.parquet"))


@pytest.mark.bad_input("store")
@pytest.mark.parametrize("to", ["2025-06-03/n0", "2025-06-02/n1"])
def test_store_verify_finds_a_file_moved_to_another_partition(tmp_path, capsys, to):
    """A store file moved to another date folder passed ``store verify``."""
    root = tmp_path / "st"
    f = _two_day_store(root)
    assert _rc(["store", "verify", root]) == 0
    capsys.readouterr()
    (root / to).mkdir(parents=True, exist_ok=True)
    f.rename(root / to / f.name)
    assert _rc(["store", "verify", root]) == 1
    out = capsys.readouterr().out
    assert "DAMAGED" in out and ("outside its date folder 2025-06-03" in out
                                 or "not of its folder's host 'n1'" in out), out


@pytest.mark.bad_input("store")
def test_a_date_bounded_read_says_when_a_file_of_its_dates_sits_elsewhere(tmp_path):
    """...and a date-bounded read returned 0 rows without a warning."""
    import pandas as pd

    from powerlab.exceptions import DataQualityWarning
    from powerlab.telemetry.store import read_store

    root = tmp_path / "st"
    f = _two_day_store(root)
    a, b = pd.Timestamp("2025-06-02T00:00Z"), pd.Timestamp("2025-06-03T00:00Z")
    assert len(read_store(root, start=a, end=b)) == 600
    (root / "2025-06-03/n0").mkdir(parents=True)
    f.rename(root / "2025-06-03/n0" / f.name)
    with pytest.warns(DataQualityWarning, match="1 file.* sit in another date's folder"):
        assert len(read_store(root, start=a, end=b)) == 0


# ------------------------------------------- the guard, derived from the parser: every input
def _commands():
    """``(words, parser)`` of every command and sub-command the real parser knows."""
    out = []

    def walk(p, words):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            out.append((words, p))
        for a in subs:
            for name, sp in a.choices.items():
                walk(sp, [*words, name])
    walk(cli.build_parser(), [])
    return out


def _path_actions(p):
    """The actions of a parser that name files or folders: typed Path, or text options
    that name a store or a recording (``collect --out``, ``backtest --train-runs``)."""
    return [a for a in p._actions
            if a.type is Path or a.dest in ("train_runs", "test_runs")
            or (a.dest == "out" and a.type is None)]


@pytest.mark.bad_input("cli")
def test_every_input_of_every_command_is_protected(tmp_path):
    """Derived from the parser: for every command, every argument that names a path is
    an input the one guard protects, except each command's output (``--out``) and the
    store ``store upgrade`` rewrites in place."""
    from powerlab._cli._guard import OUTPUT_DESTS, READ_WRITE, command_inputs

    parser = cli.build_parser()
    commands = _commands()
    assert len(commands) >= 15
    checked = 0
    for words, p in commands:
        argv, expect = list(words), []
        for k, a in enumerate(_path_actions(p)):
            f = tmp_path / f"{'_'.join(words)}_{a.dest}_{k}.csv"
            f.write_text("x\n")
            val = f"{f}={f}" if a.dest in ("train_runs", "test_runs") else str(f)
            argv += ([val] if not a.option_strings else [a.option_strings[-1], val])
            rw = READ_WRITE.get((words[0], words[-1]), frozenset())
            if a.dest not in OUTPUT_DESTS and a.dest not in rw:
                expect.append(f)
        for a in p._actions:              # the other required options, any valid text
            if a.required and a.option_strings and a not in _path_actions(p):
                argv += [a.option_strings[-1], str(next(iter(a.choices or ["1"])))]
        if words == ["backtest"]:
            argv = [x for x in argv if "test_runs" not in x and "train_runs" not in x
                    and x not in ("--train-runs", "--test-runs")]
            expect = [e for e in expect if "runs" not in e.name]
        args = parser.parse_args(argv)
        got = {Path(x).resolve() for x in command_inputs(args)}
        missing = [e for e in expect if e.resolve() not in got]
        assert not missing, (words, missing)
        checked += len(expect)
    assert checked >= 25


@pytest.mark.parametrize("argv_of", [
    lambda d, f: ["forecast", f, "--out", f, "--force"],
    lambda d, f: ["export-grid", f, "--out", f, "--format", "csv", "--force"],
    lambda d, f: ["flex", "offer", f, "--out", d, "--draws", "1"],
])
@pytest.mark.bad_input("cli")
def test_commands_given_an_input_as_output_write_nothing(tmp_path, capsys, argv_of):
    """End to end through the guard: the scenario given as the output file (even with
    --force), or in the output folder under the name of an output."""
    d = tmp_path / "d"
    d.mkdir()
    f = d / "flex_offer.csv"
    f.write_bytes(SMALL.read_bytes())
    argv = argv_of(d, f)
    if argv[0] != "flex":
        f = f.rename(d / "s.yaml")
        argv = argv_of(d, f)
    assert _rc(argv) == 2
    assert "input" in _one_line(capsys)
    assert f.read_bytes() == SMALL.read_bytes()


# ------------------------------------------------------------------- the collector
@pytest.mark.slow   # 300 connections and 20 scrapes (about 10 s here)
@pytest.mark.bad_input("collector")
def test_metrics_under_a_connection_flood_from_one_address(tmp_path):
    """3 of 11 scrapes failed under a connection flood: the flood's connections filled
    the server and pushed the scraper's out.  Now one address holds at most
    max_per_client connections (its own oldest goes), so 300 connections from 127.0.0.2
    keep 16 open and every scrape from 127.0.0.1 is answered."""
    import socket
    import urllib.request

    from powerlab.collect.metrics import ACCEPT_BACKLOG, MetricsServer

    srv = MetricsServer(lambda: b"DCGM_FI_DEV_POWER_USAGE 1\n", 0)
    flood = []
    try:
        for i in range(300):
            try:
                s = socket.create_connection(("127.0.0.1", srv.server_port), timeout=2,
                                             source_address=("127.0.0.2", 0))
            except OSError:                 # no 127.0.0.2 here: the test cannot flood
                pytest.skip("no second loopback address")
            if i % 2:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")   # never reads
            flood.append(s)
        ok = 0
        for _ in range(20):
            with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_port}/metrics",
                                        timeout=10) as r:
                ok += r.read() == b"DCGM_FI_DEV_POWER_USAGE 1\n"
        assert ok == 20
        assert srv._by_peer.get("127.0.0.2", 0) <= MetricsServer.max_per_client == 16
        assert srv.evicted >= 300 - 16 - 1
        assert ACCEPT_BACKLOG >= 1024
    finally:
        for s in flood:
            s.close()
        srv.shutdown()
        srv.server_close()


@pytest.mark.bad_input("flex")
def test_a_meter_csv_with_a_damaged_year_is_one_error(tmp_path):
    """Found by the fuzz run (issue 38 harness, meter-csv): a time in the year 202 made
    the 1-min resampling ask numpy for 7.14 GiB (a MemoryError)."""
    from powerlab.exceptions import PowerlabError
    from powerlab.flex.verify import read_site_power

    m = tmp_path / "m.csv"
    m.write_text("timestamp,power_megawatts\n202-06-01T00:00:00Z,1\n"
                 "2025-06-01T00:01:00Z,1\n")
    with pytest.raises(PowerlabError, match="bins of 1min"):
        read_site_power(m)


# ------------------------------------------- found by the blind fuzzer (tests/blind/fuzz)
@pytest.mark.bad_input("readers")
def test_a_400_digit_timestamp_in_dcgm_exporter_text_is_one_error(tmp_path, capsys):
    """Blind campaign seed 38, case 151: ``summary`` of dcgm-exporter text whose sample
    timestamp has 400 digits: an OverflowError traceback inside prometheus_client."""
    text = (DATA / "dcgm_exporter_constructed.prom").read_text().splitlines()
    i = next(k for k, ln in enumerate(text) if ln.startswith("DCGM_FI_DEV_POWER_USAGE"))
    text[i] = text[i] + " 1" + "0" * 400
    bad = tmp_path / "dcgm_prom.txt"
    bad.write_text("\n".join(text) + "\n")
    assert _rc(["summary", "--tz", "UTC", bad]) == 2
    assert f"line {i + 1}" in _one_line(capsys)


@pytest.mark.bad_input("store")
def test_a_store_format_marker_nested_100000_deep_is_one_error(tmp_path, capsys):
    """Blind campaign seed 38, case 223: ``summary STORE`` whose ``_meta/.format.json``
    is nested 100,000 deep: a RecursionError traceback."""
    root = tmp_path / "st"
    _two_day_store(root)
    (root / "_meta" / ".format.json").write_text("[" * 100_000 + "]" * 100_000)
    assert _rc(["summary", root]) == 2
    assert "unreadable store format marker (nested too deeply)" in _one_line(capsys)
