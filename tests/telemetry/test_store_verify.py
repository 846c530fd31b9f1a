"""Store hardening (issue 24): an interrupted upgrade never shows duplicate rows, CRC-less,
copied and foreign part files are reported by read_store, and ``powerlab store verify``
checks every file's CRC-32 and page checksums."""

from __future__ import annotations

import pathlib
import shutil

import pandas as pd
import pytest

from powerlab.cli import main
from powerlab.exceptions import DataQualityWarning, StoreError
from powerlab.telemetry.store import read_store, write_store
from powerlab.telemetry.store_upgrade import upgrade_store

from ..conftest import make_telemetry
from .test_store_readers import _write_v1

pytestmark = pytest.mark.bad_input("store")


def test_an_interrupted_upgrade_is_refused_until_rerun_never_doubled(tmp_path, monkeypatch):
    df = make_telemetry(2, 2, 40)
    store = tmp_path / "v1"
    _write_v1(df, store)
    real = pathlib.Path.unlink
    calls = {"n": 0}

    def crash(self, *a, **kw):
        if self.name.startswith("part-") and "date=" in str(self):
            calls["n"] += 1
            if calls["n"] == 2:                     # killed after the first file's rows
                raise KeyboardInterrupt
        return real(self, *a, **kw)

    monkeypatch.setattr(pathlib.Path, "unlink", crash)
    with pytest.raises(KeyboardInterrupt):
        upgrade_store(store)
    monkeypatch.setattr(pathlib.Path, "unlink", real)
    with pytest.raises(StoreError, match="upgrade of the store .* was interrupted"):
        read_store(store)                            # before: some rows twice
    upgrade_store(store)
    pd.testing.assert_frame_equal(read_store(store), df)


def _store(tmp_path):
    df = make_telemetry(1, 2, 30)
    files = write_store(df, tmp_path / "s", fsync=False)
    return df, tmp_path / "s", files[0]


def test_a_copied_part_file_is_reported_and_not_read_twice(tmp_path):
    df, store, f = _store(tmp_path)
    shutil.copy(f, f.with_name(f.name.replace("part-", "part-copy-")))
    with pytest.warns(DataQualityWarning, match="a copy: its rows would be read twice"):
        back = read_store(store)
    pd.testing.assert_frame_equal(back, df)


def test_a_part_file_without_crc_is_reported(tmp_path):
    df, store, f = _store(tmp_path)
    f.rename(f.with_name(f.name.split("-c")[0] + ".parquet"))
    with pytest.warns(DataQualityWarning, match="no CRC-32 in its name"):
        pd.testing.assert_frame_equal(read_store(store), df)


def test_store_verify_intact_damaged_and_foreign(tmp_path, capsys):
    _df, store, f = _store(tmp_path)
    assert main(["store", "verify", str(store)]) == 0
    out = capsys.readouterr().out
    assert "0 damaged, 0 foreign" in out
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    (f.parent / "notes.txt").write_text("x")
    assert main(["store", "verify", str(store)]) == 1
    out = capsys.readouterr().out
    assert f"DAMAGED {f}" in out and "CRC-32" in out
    assert "FOREIGN" in out and "notes.txt" in out
    assert main(["store", "verify", str(tmp_path / "nope")]) == 2
    assert "no store" in capsys.readouterr().err
