"""``powerlab store``: maintenance of a telemetry store (``upgrade`` to format 2)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "store",
        help="maintain a telemetry store (upgrade a format-1 store to format 2)",
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
