"""Tests of powerlab.iotools.registry: readers that recognise their own files.

The dispatcher asks the registered readers in a stated order and gives, for every file and
folder of data/ and tests/data/, the answer the 0.2 if-chain gave (the table below); a
reader defined here registers itself and is then chosen by ``sniff_format``, ``read_any``
and ``powerlab import`` with no other file changed; a reader module dropped into the
package is found without an import anywhere else.
"""

from __future__ import annotations

import fnmatch
import sys
import textwrap

import pandas as pd
import pytest

import powerlab.iotools
from powerlab.cli import main
from powerlab.exceptions import ParseError
from powerlab.iotools import (
    EVENT_FORMATS,
    FORMATS,
    TELEMETRY_FORMATS,
    ReaderEntrypoint,
    formats,
    read_any,
    read_nvidia_smi,
    readers,
    register_reader,
    registry,
    sniff_format,
    unregister_reader,
)
from powerlab.telemetry import schema
from powerlab.telemetry.store import read_store

from ..conftest import REPO, TEST_DATA

D = TEST_DATA / "iotools"
BUILT_IN = ("nvidia-smi", "dcgm-dmon", "dcgm-prom", "mlperf-power", "mllog", "weather",
            "kernel-xid", "dcgm-xid")


@pytest.fixture(autouse=True)
def built_in_only(monkeypatch):
    """The registry holding the built-in readers only, for every test here: a reader
    module added to the package later changes none of these answers."""
    monkeypatch.setattr(registry, "_READERS", {n: registry._READERS[n] for n in BUILT_IN})


def test_the_built_in_readers_are_asked_in_the_stated_order():
    assert [(ep.name, ep.priority) for ep in readers()] == [
        ("mlperf-power", 10), ("mllog", 20), ("kernel-xid", 30), ("dcgm-dmon", 40),
        ("dcgm-xid", 50), ("dcgm-prom", 60), ("weather", 70), ("nvidia-smi", 80)]


def test_the_public_tables_keep_their_0_2_values():
    assert list(FORMATS) == list(BUILT_IN)
    assert FORMATS["nvidia-smi"] is read_nvidia_smi
    assert TELEMETRY_FORMATS[:4] == ("nvidia-smi", "dcgm-dmon", "dcgm-prom", "mlperf-power")
    assert EVENT_FORMATS[:2] == ("kernel-xid", "dcgm-xid")
    assert formats("telemetry", "events") == ("nvidia-smi", "dcgm-dmon", "dcgm-prom",
                                              "mlperf-power", "kernel-xid", "dcgm-xid")


#: What the 0.2 if-chain answered for each file and folder of data/ and tests/data/
#: (first matching pattern); everything else is refused with the errors below.
ANSWERS = [
    ("data/mlperf-gpt3-64node/power", "mlperf-power"),
    ("data/mlperf-gpt3-64node/power/node_*.txt.gz", "mlperf-power"),
    ("data/mlperf-gpt3-64node/power/sw_0.txt.gz", "mllog"),   # a switch log: no readings
    ("data/mlperf-gpt3-64node/result_*.txt.gz", "mllog"),
    ("data/mlperf-v50-b200-bert/power/result_?", "mlperf-power"),
    ("data/mlperf-v50-b200-bert/power/result_?/node_0.txt.gz", "mlperf-power"),
    ("data/mlperf-v50-b200-bert/result_?.txt.gz", "mllog"),
    ("data/weather-kmahighl4-2025", "weather"),
    ("data/weather-kmahighl4-2025/weather-2025-*.txt", "weather"),
    ("tests/data/iotools", "weather"),        # a folder holding a weather file
    ("tests/data/iotools/dcgm_exporter_*.prom", "dcgm-prom"),
    ("tests/data/iotools/dcgmi_dmon_*.txt", "dcgm-dmon"),
    ("tests/data/iotools/mlperf_power_broken.txt", "mlperf-power"),
    ("tests/data/iotools/mlperf_gpt3_node_7_excerpt.txt", "mlperf-power"),
    ("tests/data/iotools/mlperf_gpt3_result_excerpt.txt", "mllog"),
    ("tests/data/iotools/nvidia_smi_*.csv", "nvidia-smi"),
    ("tests/data/iotools/weather_*.txt", "weather"),
]
UNKNOWN = ("cannot tell the format from the content (expected nvidia-smi CSV, dcgmi dmon, "
           "dcgm-exporter, MLPerf MLLOG, weather CSV, kernel 'NVRM: Xid' log or "
           "dcgm-exporter XID text)")


def _answer(path):
    try:
        return sniff_format(path)
    except ParseError as exc:
        return str(exc)


def test_every_bundled_file_and_folder_gets_the_answer_of_0_2():
    paths = [p for root in ("data", "tests/data") for p in [REPO / root,
                                                            *sorted((REPO / root).rglob("*"))]]
    assert len(paths) > 150
    for p in paths:
        rel = p.relative_to(REPO).as_posix()
        want = next((fmt for pat, fmt in ANSWERS if fnmatch.fnmatchcase(rel, pat)), None)
        if want is None:
            want = (f"{p}: no readable telemetry files in this directory" if p.is_dir()
                    else f"{p}: {UNKNOWN}")
        assert _answer(p) == want, rel


def test_unknown_and_ambiguous_content_get_the_0_2_answers(tmp_path):
    cases = {
        "hello.txt": ("hello world\n", f"{tmp_path / 'hello.txt'}: {UNKNOWN}"),
        "empty.txt": ("", f"{tmp_path / 'empty.txt'}: {UNKNOWN}"),
        # markers of several formats: the earlier reader in the stated order wins
        "both.txt": ("timestamp, index\nNVRM: Xid (PCI:0000:3b:00): 79\n", "kernel-xid"),
        "mllog_xid.txt": (':::MLLOG {"key": "x"}\nNVRM: Xid\n', "mllog"),
        "xid_only.prom": ('DCGM_FI_DEV_XID_ERRORS{gpu="0"} 13\n', "dcgm-xid"),
        "xid_and_power.prom": ('DCGM_FI_DEV_XID_ERRORS{gpu="0"} 13\n'
                               'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 70\n', "dcgm-prom"),
        "entity_late.txt": ("x\n" * 50 + "#Entity POWER\n", f"{tmp_path / 'entity_late.txt'}: "
                            f"{UNKNOWN}"),
    }
    for name, (text, want) in cases.items():
        (tmp_path / name).write_text(text)
        assert _answer(tmp_path / name) == want, name
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe not text")
    with pytest.raises(ParseError, match="UTF-8"):
        sniff_format(tmp_path / "bad.txt")
    with pytest.raises(ParseError, match="no such file"):
        sniff_format(tmp_path / "missing.txt")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("hello\n")
    assert _answer(folder) == f"{folder}: no readable telemetry files in this directory"
    with pytest.raises(ParseError) as exc:
        read_any(tmp_path / "hello.txt", format="csv")
    assert str(exc.value) == (f"{tmp_path / 'hello.txt'}: format must be one of 'dcgm-dmon', "
                              "'dcgm-prom', 'dcgm-xid', 'kernel-xid', 'mllog', 'mlperf-power', "
                              "'nvidia-smi', 'weather' or 'auto', got 'csv'")


def test_registration_refuses_what_the_dispatcher_cannot_use():
    class Nameless(ReaderEntrypoint):
        pass

    class Clash(ReaderEntrypoint):
        name = "nvidia-smi"

    class OddKind(ReaderEntrypoint):
        name = "odd"
        kind = "samples"

    for cls, match in ((Nameless, "with a name"), (Clash, "registered already"),
                       (OddKind, "kind must be one of")):
        with pytest.raises(ValueError, match=match):
            register_reader(cls)
    assert "odd" not in FORMATS and len(readers()) == 8


# ------------------------------------------------------------------ a toy reader
TOY = "# toy-power v1\ntime_utc,watts\n2026-01-05T10:00:00Z,350.5\n" \
      "2026-01-05T10:00:01Z,352.0\n2026-01-05T10:00:02Z,349.25\n"


def read_toy_power(path, *, host: str | None = None) -> pd.DataFrame:
    """Canonical telemetry of a toy power log: one GPU, a reading per line [W]."""
    lines = path.read_text().splitlines()
    rows = []
    for lineno, line in enumerate(lines[2:], start=3):
        t, _, w = line.partition(",")
        try:
            rows.append((pd.Timestamp(t), float(w)))
        except ValueError:
            raise ParseError(f"cannot read {line!r} as 'time_utc,watts'", path=path,
                             line=lineno) from None
    df = pd.DataFrame({"timestamp": [r[0] for r in rows], "host": host or "toy",
                       "scope": "gpu", "gpu_index": 0, "power_w": [r[1] for r in rows]})
    return schema.validate(schema.conform(df), source=str(path))


class ToyPowerReader(ReaderEntrypoint):
    """Toy power logs: the first line says so."""

    name = "toy-power"
    kind = "telemetry"
    description = "toy power log"

    def guess_can_open(self, path, head_bytes) -> bool:
        return head_bytes.startswith(b"# toy-power v1\n")

    def open(self, path, *, host: str | None = None):
        return read_toy_power(path, host=host)


@pytest.fixture
def toy():
    """The toy reader, registered for one test (a reader module registers at import)."""
    register_reader(ToyPowerReader)
    yield
    unregister_reader("toy-power")


def test_a_registered_reader_is_chosen_for_its_file(toy, tmp_path):
    f = tmp_path / "gpu0.log"
    f.write_text(TOY)
    assert sniff_format(f) == "toy-power"
    assert readers()[-1].name == "toy-power"            # asked after the built-in ones
    df = read_any(f, tz="UTC", host="n7", n_gpus=8)      # options it does not take: dropped
    assert df["power_w"].tolist() == [350.5, 352.0, 349.25]
    assert set(df["host"]) == {"n7"}
    pd.testing.assert_frame_equal(read_any(f, format="toy-power"),
                                  read_toy_power(f, host=None))
    assert FORMATS["toy-power"].__name__ == "open" and "toy-power" in formats("telemetry")
    # a file no reader recognises names the new format among the expected ones
    (tmp_path / "x.txt").write_text("hello\n")
    with pytest.raises(ParseError, match=r"dcgm-exporter XID text or toy power log\)"):
        sniff_format(tmp_path / "x.txt")
    # the built-in files are still read by the built-in readers
    assert sniff_format(D / "nvidia_smi_constructed.csv") == "nvidia-smi"


def test_powerlab_import_uses_a_registered_reader(toy, tmp_path, capsys):
    f = tmp_path / "gpu0.log"
    f.write_text(TOY)
    store = tmp_path / "store"
    assert main(["import", str(f), "--out", str(store), "--host", "n7"]) == 0
    assert "gpu0.log: 3 rows (toy-power) -> 1 file(s)" in capsys.readouterr().out
    back = read_store(store)
    assert back["power_w"].tolist() == [350.5, 352.0, 349.25]
    assert main(["import", str(f), "--out", str(tmp_path / "s2"), "--format", "toy-power"]) == 0
    assert "3 rows (toy-power)" in capsys.readouterr().out
    # a broken file of the format: one clean error line naming file and line
    bad = tmp_path / "broken.log"
    bad.write_text(TOY + "2026-01-05T10:00:03Z,\n")
    assert main(["import", str(bad), "--out", str(tmp_path / "s3")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("powerlab import: error: ") and "broken.log" in err
    assert "line 6" in err and "Traceback" not in err
    # readers of other data are still refused, the new format listed among the accepted
    weather = D / "weather_2025-06-04_excerpt.txt"
    assert main(["import", str(weather), "--out", str(tmp_path / "s4")]) == 2
    assert ("powerlab import takes nvidia-smi, dcgm-dmon, dcgm-prom, mlperf-power, "
            "kernel-xid, dcgm-xid, toy-power") in capsys.readouterr().err


def test_import_format_choices_stay_the_built_in_ones_without_the_reader(capsys):
    assert main(["import", "x", "--out", "s", "--format", "toy-power"]) == 2  # usage error
    assert "invalid choice: 'toy-power'" in capsys.readouterr().err


TOY_MODULE = textwrap.dedent('''
    """A toy reader module: the one file a new format needs."""
    import pandas as pd

    from powerlab.iotools.registry import ReaderEntrypoint, register_reader


    def read_toy_table(path):
        return pd.read_csv(path, skiprows=1)


    @register_reader
    class ToyTableReader(ReaderEntrypoint):
        name = "toy-table"
        description = "toy table"
        open = staticmethod(read_toy_table)

        def guess_can_open(self, path, head_bytes):
            return head_bytes.startswith(b"# toy-table\\n")
''')


def test_a_reader_module_in_the_package_is_found_without_an_import(tmp_path, monkeypatch):
    """Adding a reader touches one module: a module of the package that registers a
    reader is imported by the registry itself (here the package gains a folder holding
    the new module, so that nothing in the source tree is written)."""
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "toytable.py").write_text(TOY_MODULE)
    f = tmp_path / "t.csv"
    f.write_text("# toy-table\na,b\n1,2\n")
    with pytest.raises(ParseError, match="cannot tell the format"):
        sniff_format(f)
    monkeypatch.setattr(powerlab.iotools, "__path__", [*powerlab.iotools.__path__, str(extra)])
    monkeypatch.setattr(registry, "_discovered", False)
    try:
        assert sniff_format(f) == "toy-table"
        assert read_any(f).to_dict("list") == {"a": [1], "b": [2]}
        assert "powerlab.iotools.toytable" in sys.modules
    finally:   # (the registry itself is restored by the fixture)
        sys.modules.pop("powerlab.iotools.toytable", None)
