"""Issue 26 §6: the store's remembered file time ranges are bounded and clearable, and
forgetting them changes no result."""

from __future__ import annotations

import pandas as pd

from powerlab.telemetry import read_store, store, write_store
from tests.conftest import make_telemetry


def test_time_ranges_are_bounded_least_recently_used_first(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "RANGES_MAX", 3)
    store.clear_cache()
    # 4 hosts x 2 dates (the frame crosses midnight): 8 files, each remembered on write
    files = write_store(make_telemetry(n_hosts=4, n_gpus=1, n_samples=40), tmp_path,
                        fsync=False)
    assert len(files) == 8
    assert list(store._RANGES) == [str(f) for f in files[-3:]]      # the 3 newest
    store._time_range(files[-3])                                    # used again: kept
    store._remember_range("x", (0, 1))
    assert list(store._RANGES) == [str(files[-1]), str(files[-3]), "x"]
    store.clear_cache()
    assert len(store._RANGES) == 0


def test_forgetting_the_ranges_changes_no_result(tmp_path):
    tel = make_telemetry(n_hosts=2, n_gpus=2, n_samples=30)
    write_store(tel, tmp_path, fsync=False)
    before = read_store(tmp_path)
    store.clear_cache()
    # writing the same samples again finds them all already stored (the ranges are read
    # back from the footers), and a new sample still lands
    assert write_store(tel, tmp_path, fsync=False) == []
    later = tel.iloc[:1].copy()
    later["timestamp"] = later["timestamp"] + pd.Timedelta(1, "h")
    assert len(write_store(later, tmp_path, fsync=False)) == 1
    after = read_store(tmp_path)
    assert len(after) == len(before) + 1
    pd.testing.assert_frame_equal(
        after[after["timestamp"] < later["timestamp"].iloc[0]].reset_index(drop=True),
        before.reset_index(drop=True))
