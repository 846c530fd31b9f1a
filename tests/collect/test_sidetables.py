"""Side tables (events, devices) of a store: a killed writer's temporary files are removed
by the next write, while another live writer's are kept."""

import os
import signal
import subprocess
import sys
import time

import pandas as pd

from powerlab.collect.sidetables import events_frame, read_events, write_side_table
from powerlab.telemetry.storefiles import TMP_PREFIX, owner_tag, side_table_dir

_WRITER = """
import sys, time
from pathlib import Path
import pandas as pd
from powerlab.collect import sidetables
from powerlab.telemetry import store

real = store.atomic_write_bytes
def slow(path, write, **kw):  # hold the temporary file open for a long time
    def w(tmp):
        write(tmp)
        print("writing", flush=True)
        time.sleep(60)
    return real(path, w, **kw)
sidetables.atomic_write_bytes = slow
store.atomic_write_bytes = slow
ev = sidetables.events_frame([{"timestamp": pd.Timestamp.now(tz="UTC").value, "host": "h",
                               "kind": "start", "message": "x"}])
sidetables.write_side_table(Path(sys.argv[1]), "events", ev)
"""


def _event(detail):
    return events_frame([{"timestamp": pd.Timestamp("2025-07-01T00:00:00Z").value, "host": "h",
                          "kind": "start", "message": detail}])


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    root = tmp_path / "store"
    write_side_table(root, "events", _event("first"))
    p = subprocess.Popen([sys.executable, "-c", _WRITER, str(root)], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "writing"
    folder = side_table_dir(root, "events")
    left = [f for f in folder.iterdir() if f.name.startswith(TMP_PREFIX)]
    assert len(left) == 1 and f"~{p.pid}~" in left[0].name
    # a live writer's temporary file survives another writer's write
    write_side_table(root, "events", _event("second"))
    assert left[0].exists()
    p.send_signal(signal.SIGKILL)
    p.wait()
    # killed: the next write removes it; the recorded events are intact
    write_side_table(root, "events", _event("third"))
    assert not left[0].exists()
    assert not [f for f in folder.iterdir() if f.name.startswith(TMP_PREFIX)]
    assert sorted(read_events(root)["message"]) == ["first", "second", "third"]


def test_other_hosts_leftovers_are_not_touched(tmp_path):
    root = tmp_path / "store"
    folder = side_table_dir(root, "events")
    folder.mkdir(parents=True)
    other = folder / f"{TMP_PREFIX}otherhost~1~abc-events-x.pq.partial"
    other.write_bytes(b"x")
    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout.strip()
    time.sleep(0.1)
    assert not os.path.exists(f"/proc/{dead_pid}")
    mine_dead = folder / f"{TMP_PREFIX}{owner_tag().split('~')[0]}~{dead_pid}~abc-x.partial"
    mine_dead.write_bytes(b"x")
    write_side_table(root, "events", _event("one"))
    assert other.exists() and not mine_dead.exists()
