"""``powerlab import``: convert supported telemetry sources into a Parquet store."""

from __future__ import annotations

import argparse
from pathlib import Path

FORMAT_CHOICES = ["auto", "nvidia-smi", "dcgm-dmon", "dcgm-prom", "mlperf-power"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="convert telemetry files (nvidia-smi, DCGM, MLPerf power) into a store",
        description="Read each source with the matching powerlab.iotools reader (the "
                    "format is recognised from the content unless --format is given), "
                    "validate it against the canonical schema and append it to the "
                    "Parquet store at --out. Prints the rows imported per source.",
    )
    p.add_argument("sources", nargs="+", type=Path, metavar="SRC",
                   help="files, or folders of MLPerf node_*.txt power logs")
    p.add_argument("--out", required=True, type=Path, metavar="STORE",
                   help="store folder (created when missing)")
    p.add_argument("--format", default="auto", choices=FORMAT_CHOICES,
                   help="source format (default: recognise from the content)")
    p.add_argument("--tz", help="time zone of zone-less timestamps (nvidia-smi, dcgmi dmon)")
    p.add_argument("--host", help="host name for sources that do not record it")
    p.add_argument("--n-gpus", type=int, dest="n_gpus",
                   help="GPUs per nvidia-smi query for logs without index/uuid")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..exceptions import ParseError
    from ..iotools import TELEMETRY_FORMATS, read_any, sniff_format
    from ..store import write_store

    total = 0
    for src in args.sources:
        if not src.exists():
            raise ParseError("no such file or folder", path=src)
        fmt = sniff_format(src) if args.format == "auto" else args.format
        if fmt not in TELEMETRY_FORMATS:
            raise ParseError(f"recognised as '{fmt}', which is not GPU telemetry; "
                             f"powerlab import takes {', '.join(TELEMETRY_FORMATS)}",
                             path=src)
        df = read_any(src, format=fmt, tz=args.tz, host=args.host, n_gpus=args.n_gpus)
        files = write_store(df, args.out)
        total += len(df)
        print(f"{src}: {len(df):,} rows ({fmt}) -> {len(files)} file(s)")
    print(f"imported {total:,} rows into {args.out}")
    return 0
