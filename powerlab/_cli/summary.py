"""``powerlab summary``: read telemetry (a store or any supported file) and summarise it."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "summary",
        help="read telemetry (a store folder or supported files) and print a summary",
        description="Read telemetry from a powerlab store or from files in any supported "
                    "format (nvidia-smi CSV, DCGM, MLPerf power logs) and print, per host "
                    "and scope, the devices, samples, time span and power statistics. "
                    "Without a path, summarises the bundled MLPerf GPT-3 power excerpt.",
    )
    p.add_argument("paths", nargs="*", type=Path, help="store folder or source files")
    p.add_argument("--tz", help="time zone of zone-less timestamps in the sources")
    p.set_defaults(func=run)


def summarize(df):
    """Per host and scope: devices, samples, first/last time, power statistics [W].

    ``power_w_mean`` and ``power_w_max`` are per sample (one GPU, or one node);
    ``power_w_total_mean`` is the host's mean total power: device means summed.
    """
    import pandas as pd

    g = df.groupby(["host", "scope"], observed=True)
    out = pd.DataFrame({
        "devices": g["gpu_index"].nunique().where(g["gpu_index"].count() > 0, 1),
        "samples": g.size(),
        "first_utc": g["timestamp"].min(),
        "last_utc": g["timestamp"].max(),
        "power_w_mean": g["power_w"].mean().round(1),
        "power_w_max": g["power_w"].max().round(1),
    })
    # mean total power of the host: per-device means summed over its devices
    dev = df.groupby(["host", "scope", "gpu_index"], observed=True, dropna=False)["power_w"]
    out["power_w_total_mean"] = dev.mean().groupby(level=["host", "scope"],
                                                   observed=True).sum().round(1)
    return out.reset_index()


def run(args) -> int:
    import pandas as pd

    from ..data import bundled_path
    from ..exceptions import ParseError
    from ._inputs import read_telemetry_path

    paths = args.paths or [bundled_path("mlperf-gpt3-64node", "power")]
    frames = []
    for path in paths:     # a store, a canonical Parquet file or any reader's file
        df = read_telemetry_path(path, tz=args.tz)
        missing = [c for c in ("timestamp", "host", "power_w") if c not in df.columns]
        if missing:     # a weather log, a building meter, ...: another kind of data
            raise ParseError(f"read as another kind of data, not GPU or node telemetry "
                             f"(no {', '.join(map(repr, missing))} column)", path=path)
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    s = summarize(df)
    from ._quality import warn_identical_devices

    warn_identical_devices(df)
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        print(s.to_string(index=False))
    span = (df["timestamp"].max() - df["timestamp"].min()).total_seconds()
    print(f"\n{len(df):,} samples from {s['host'].nunique()} host(s) over {span:,.0f} s; "
          f"total mean power {s['power_w_total_mean'].sum() / 1e3:,.1f} kW")
    return 0
