"""``powerlab import``: convert supported telemetry sources into a Parquet store."""

from __future__ import annotations

import argparse
from datetime import UTC
from pathlib import Path

from . import _args


class _FormatChoices(list):
    """``--format`` values: the built-in telemetry formats (listed by ``--help`` without
    importing the readers) and any telemetry reader registered since
    (:func:`powerlab.iotools.register_reader`), looked up only when one is named."""

    def __contains__(self, name) -> bool:
        if list.__contains__(self, name):
            return True
        from ..iotools import formats

        return name in formats("telemetry")


FORMAT_CHOICES = _FormatChoices(["auto", "nvidia-smi", "dcgm-dmon", "dcgm-prom",
                                 "mlperf-power"])


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="convert telemetry files (nvidia-smi, DCGM, MLPerf power) and XID logs into "
             "a store",
        description="Read each source with the matching powerlab.iotools reader (the "
                    "format is recognised from the content unless --format is given), "
                    "validate it against the canonical schema and append it to the "
                    "Parquet store at --out. Prints the rows imported per source. A source "
                    "already imported into the store with the same options (same content "
                    "hash) is skipped, so re-running an import never duplicates samples. "
                    "Kernel 'NVRM: Xid' logs and dcgm-exporter XID text go to the store's "
                    "events (powerlab.telemetry.event_store), not its samples.",
    )
    p.add_argument("sources", nargs="+", type=Path, metavar="SRC",
                   help="files, or folders of MLPerf node_*.txt power logs")
    p.add_argument("--out", required=True, type=Path, metavar="STORE",
                   help="store folder (created when missing)")
    p.add_argument("--format", default="auto", choices=FORMAT_CHOICES,
                   help="source format (default: recognise from the content)")
    p.add_argument("--tz", help="time zone of zone-less timestamps (nvidia-smi, dcgmi dmon, "
                   "dmesg -T and journalctl's default format); such times are refused "
                   "without it")
    p.add_argument("--host", type=_args.host, help="host name for sources that do not record "
                   "it (a dmesg log is refused without it)")
    p.add_argument("--boot-time", dest="boot_time", help="boot time of a raw dmesg log's "
                   "host (ISO 8601), to date its seconds since boot")
    p.add_argument("--year", type=int, help="year of journalctl-default/syslog kernel lines "
                   "(default: the latest year not after today, stated in a warning)")
    p.add_argument("--gpu-map", dest="gpu_map", type=Path, metavar="FILE",
                   help="PCI bus id -> GPU map for kernel logs: nvidia-smi -q output or a "
                        "CSV (nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv); "
                        "the store's device table is used too")
    p.add_argument("--n-gpus", type=int, dest="n_gpus",
                   help="GPUs per nvidia-smi query for logs without index/uuid")
    p.add_argument("--force", action="store_true",
                   help="import sources even if the store records them as imported")
    p.set_defaults(func=run)


def _source_key(src: Path, options: dict) -> str:
    """SHA-256 of a source's content (a folder: its files' names and contents, sorted)
    and of the reading options, which change the samples written."""
    import hashlib
    import json

    h = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    files = sorted(p for p in src.rglob("*") if p.is_file()) if src.is_dir() else [src]
    for f in files:
        h.update(str(f.relative_to(src) if src.is_dir() else f.name).encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def _devices(args):
    """PCI -> GPU map: the store's device table, then --gpu-map (which wins)."""
    import pandas as pd

    from ..collect.sidetables import read_devices
    from ..iotools.gpumap import read_gpu_map

    parts = []
    if args.out.is_dir():
        d = read_devices(args.out)
        if len(d) and "pci_bus_id" in d.columns:
            d = d.dropna(subset=["pci_bus_id"])
            parts.append(d[["host", "pci_bus_id", "gpu_index", "gpu_uuid"]])
    if args.gpu_map is not None:
        parts.insert(0, read_gpu_map(args.gpu_map, host=args.host))
    return pd.concat(parts, ignore_index=True) if parts else None


def _read_kernel_log(src: Path, args):
    """A kernel log's Xids with --tz, --host, --boot-time, --year and the GPU map."""
    from ..iotools.xid import read_kernel_xid

    return read_kernel_xid(src, tz=args.tz, host=args.host, boot_time=args.boot_time,
                           year=args.year, devices=_devices(args))


def _import_events(src: Path, fmt: str, args) -> None:
    """An XID log into the store's events (kernel logs with their time, host and GPU)."""
    from ..iotools import read_any
    from ..telemetry.event_store import write_events

    ev = _read_kernel_log(src, args) if fmt == "kernel-xid" else read_any(src, format=fmt)
    if args.host and "host" in ev.columns:
        ev["host"] = ev["host"].fillna(args.host)
    path, n_ev = write_events(ev, args.out)
    dup = f"; {len(ev) - n_ev:,} already in the store" if n_ev < len(ev) else ""
    print(f"{src}: {n_ev:,} events ({fmt}) -> "
          f"{path.relative_to(args.out) if path else 'nothing new'}{dup}")


def run(args) -> int:
    from .._progress import CommandProgress
    from ._estimates import reading

    with CommandProgress("import", *reading("import", list(args.sources)),
                         outputs=[args.out]) as bar:
        return _run(args, bar)


def _run(args, bar) -> int:
    import json
    from datetime import datetime

    import pyarrow.parquet as pq

    from ..exceptions import ParseError
    from ..iotools import formats, read_any, sniff_format
    from ..outputs import atomic_write
    from ..telemetry.sources import is_parquet_file, read_parquet_telemetry
    from ..telemetry.store import write_store

    total = 0
    imported = []
    unreadable: list[str] = []
    for k, src in enumerate(args.sources):
        bar.phase(f"{k + 1}/{len(args.sources)}: {src}")
        if not src.exists():
            raise ParseError("no such file or folder", path=src)
        fmt = "parquet" if is_parquet_file(src) else \
            sniff_format(src) if args.format == "auto" else args.format
        takes = (*formats("telemetry", "events"), "parquet")
        if fmt not in takes:
            raise ParseError(f"recognised as '{fmt}', which is not GPU telemetry; "
                             f"powerlab import takes {', '.join(takes)}", path=src)
        options = {"format": fmt, "tz": args.tz, "host": args.host, "n_gpus": args.n_gpus}
        if fmt == "kernel-xid":
            options.update(boot_time=args.boot_time, year=args.year,
                           gpu_map=_source_key(args.gpu_map, {}) if args.gpu_map else None)
        key = _source_key(src, options)
        record = args.out / "_imports" / f"{key}.json"
        if record.exists() and not args.force:
            try:       # a damaged record says only that the source was imported
                when = json.loads(record.read_text()).get("imported_utc", "?")
            except (ValueError, RecursionError, AttributeError, OSError):
                when = "? (its record is unreadable)"
            print(f"{src}: already imported into this store on {when} with the same options; "
                  "skipped (--force imports it again)")
            continue
        if fmt in formats("events"):
            _import_events(src, fmt, args)
            continue
        df = read_parquet_telemetry(src) if fmt == "parquet" else \
            read_any(src, format=fmt, tz=args.tz, host=args.host, n_gpus=args.n_gpus)
        files = write_store(df, args.out)  # drops the samples the store already holds
        rows = sum(pq.read_metadata(f).num_rows for f in files)
        # recorded after the data: a crash in between can only cause a re-import
        meta = {"source": str(src), "sha256": key, "options": options, "rows": rows,
                "files": [str(f.relative_to(args.out)) for f in files],
                "imported_utc": datetime.now(UTC).isoformat(timespec="seconds")}
        payload = json.dumps(meta, indent=1).encode()
        atomic_write(record, lambda tmp, b=payload: Path(tmp).write_bytes(b))
        total += rows
        imported.append(df)
        dup = f"; {len(df) - rows:,} already in the store" if rows < len(df) else ""
        print(f"{src}: {rows:,} rows ({fmt}) -> {len(files)} file(s){dup}")
        bad = df.attrs.get("unreadable_files") or []
        if bad:
            unreadable.extend(str(src / b) for b in bad)
            print(f"{src}: skipped {len(bad)} unreadable file(s): {', '.join(bad)}")
    print(f"imported {total:,} rows into {args.out}"
          + (f"; {len(unreadable)} unreadable file(s) skipped: {', '.join(unreadable)}"
             if unreadable else ""))
    if imported:
        # compare the imported devices with everything the store holds over their span
        # (a copied file imported under another host name is caught on its second import)
        import pandas as pd

        from ..telemetry.store import read_store
        from ._quality import warn_identical_devices

        new = pd.concat([d["timestamp"] for d in imported])
        span = read_store(args.out, start=new.min(), end=new.max() + pd.Timedelta(1, "ns"),
                          columns=["timestamp", "host", "scope", "gpu_index", "power_w"])
        warn_identical_devices(span)
    return 0
