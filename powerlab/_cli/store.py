"""``powerlab store``: maintenance of a telemetry store (``upgrade`` to format 2,
``verify`` every file's checksums)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "store",
        help="maintain a telemetry store (upgrade to format 2, verify checksums)",
        description="Maintenance of a powerlab telemetry store. 'upgrade STORE' converts "
                    "a format-1 store (date=/host= folders, side tables in events/ and "
                    "devices/) in place to format 2 (DATE/HOST folders, page checksums, "
                    "side tables under _meta/; see docs/store.md), which pandas, pyarrow, "
                    "DuckDB and polars read without options. Safe to re-run after an "
                    "interruption; a format-2 store is left as it is.",
    )
    ssub = p.add_subparsers(dest="action", metavar="ACTION")
    ssub.required = True
    up = ssub.add_parser("upgrade", help="convert a format-1 store to format 2 in place",
                         description="Convert a format-1 store to format 2 in place.")
    up.add_argument("store", type=Path, metavar="STORE", help="store folder")
    up.set_defaults(func=run_upgrade)
    ve = ssub.add_parser(
        "verify", help="check every file's CRC-32 and Parquet page checksums",
        description="Check every telemetry file's CRC-32 (in its name) and every Parquet "
                    "page checksum of the telemetry and side tables, and list files in "
                    "the partition folders that are not powerlab's (foreign, CRC-less or "
                    "copied part files). pandas, pyarrow and DuckDB do not verify page "
                    "checksums by default: run this before reading a store with them. "
                    "Exit code 0: all files intact; 1: damage or foreign files found; "
                    "2: bad input.")
    ve.add_argument("store", type=Path, metavar="STORE", help="store folder")
    ve.set_defaults(func=run_verify)


def run_verify(args) -> int:
    from .._progress import CommandProgress
    from ..telemetry.storefiles import verify_store
    from ._estimates import reading, verify_rate

    plan, _ = reading("checksums of", [args.store])
    with CommandProgress("store verify", plan, verify_rate(args.store)):
        out = verify_store(args.store)
    for path, why in out["damaged"]:
        print(f"DAMAGED {path}: {why}")
    for why in out["foreign"]:
        print(f"FOREIGN {why}")
    print(f"{args.store}: {out['files']} file(s), {out['bytes']:,} bytes checked; "
          f"{len(out['damaged'])} damaged, {len(out['foreign'])} foreign")
    return 1 if out["damaged"] or out["foreign"] else 0


def run_upgrade(args) -> int:
    from ..telemetry.store_upgrade import upgrade_store
    from ..telemetry.storefiles import FORMAT

    stats = upgrade_store(args.store)
    if stats["format"] == FORMAT:
        print(f"{args.store}: already format {FORMAT}; nothing to do")
        return 0
    print(f"{args.store}: upgraded format {stats['format']} -> {FORMAT}: "
          f"{stats['rows']:,} rows in {stats['files']} file(s) rewritten with checksums, "
          f"{stats['side_files']} side-table file(s) moved to _meta/")
    return 0
