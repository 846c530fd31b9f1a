"""Upgrade a format-1 store (``date=/host=`` folders, side tables beside them) to format 2
in place (``docs/store.md``).

Its own module because it writes through :func:`powerlab.telemetry.store.write_store`
(the de-duplicating, locking writer) while the store builds on
:mod:`powerlab.telemetry.storefiles`: keeping it in either would make them import each
other.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq

from ..exceptions import StoreError
from .store import write_store
from .storefiles import (
    FORMAT,
    META,
    TMP_PREFIX,
    UPGRADING,
    fsync_dir,
    side_table_dir,
    store_format,
    write_format_marker,
)

__all__ = ["upgrade_store"]


def upgrade_store(root: str | os.PathLike) -> dict:
    """Convert a format-1 store to format 2 in place (idempotent, safe to re-run after a
    crash: rows are written through the de-duplicating writer before the old file is
    removed).

    Returns
    -------
    dict
        ``files`` (telemetry files converted), ``rows``, ``side_files`` moved and the
        ``format`` before.
    """
    root = Path(root)
    if not root.is_dir():
        raise StoreError(f"no store at {root}")
    before = store_format(root)
    if before is None:
        raise StoreError(f"{root} holds no powerlab store (no date folders, no "
                         f"{META}/.format.json)")
    stats = {"format": before, "files": 0, "rows": 0, "side_files": 0}
    if before == FORMAT and not (root / META / UPGRADING).exists():
        return stats
    # mark the store as mid-upgrade first: until the marker goes, rows may be in both
    # formats, and every read refuses the store (re-running the upgrade resumes)
    marker = root / META / UPGRADING
    marker.parent.mkdir(exist_ok=True)
    marker.write_text('{"upgrading_from": 1}\n')
    fsync_dir(marker.parent)
    for ddir in sorted(root.glob("date=*")):
        for hdir in sorted(ddir.glob("host=*")):
            for f in sorted(hdir.glob("part-*.parquet")):
                try:
                    df = pq.read_table(f).to_pandas()
                except Exception as exc:
                    raise StoreError(f"cannot read store file {f}: {exc}") from exc
                write_store(df, root, _upgrading=True)
                f.unlink()
                stats["files"] += 1
                stats["rows"] += len(df)
            for p in hdir.glob(f"{TMP_PREFIX}*"):
                p.unlink()
            _rmdir(hdir)
        _rmdir(ddir)
    for kind in ("events", "devices"):
        old = root / kind
        if old.is_dir():
            new = side_table_dir(root, kind)
            new.mkdir(parents=True, exist_ok=True)
            for f in sorted(old.glob(f"{kind}-*.parquet")):
                os.replace(f, new / (f.name.removesuffix(".parquet") + ".pq"))
                stats["side_files"] += 1
            for p in old.glob(f"{TMP_PREFIX}*"):
                p.unlink()
            _rmdir(old)
    write_format_marker(root)
    marker.unlink()
    fsync_dir(marker.parent)
    fsync_dir(root)
    return stats


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError as exc:
        raise StoreError(f"upgrade: {path} still holds files that are not telemetry "
                         f"({', '.join(sorted(p.name for p in path.iterdir())[:5])}); "
                         "move them away and run the upgrade again") from exc
