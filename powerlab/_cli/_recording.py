"""Reading a job's recording for ``powerlab calibrate`` and ``powerlab backtest``: power
telemetry in any supported format or a store, and an MLPerf training log."""

from __future__ import annotations

from pathlib import Path


def read_power(paths, *, tz: str | None = None):
    """Telemetry from files, folders (MLPerf node logs, ...) or a store, concatenated;
    one :class:`~powerlab.exceptions.PowerlabError` naming the path when one holds no
    power readings."""
    import pandas as pd

    from ..exceptions import ParseError
    from ._inputs import read_telemetry_path

    frames, attrs = [], {}
    for path in paths:
        path = Path(path)
        df = read_telemetry_path(path, tz=tz)   # store, Parquet file or a reader's file
        if not isinstance(df, pd.DataFrame) or "power_w" not in df or \
                df["power_w"].notna().sum() == 0:
            what = ""
            if not isinstance(df, pd.DataFrame):
                keys = set(getattr(df, "events", pd.DataFrame({"key": []}))["key"])
                what = (" (a training log? pass it as --events)" if "run_start" in keys
                        else " (no power_reading events)")
            raise ParseError(f"no power readings{what}", path=path)
        for k, v in df.attrs.items():
            if isinstance(v, dict):
                attrs.setdefault(k, {}).update(v)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    out.attrs.update(attrs)
    return out


def read_events(path):
    """An MLPerf training log (``read_mllog``)."""
    from ..iotools import read_mllog

    return read_mllog(Path(path))


def mlperf_log_for(power_dir: Path) -> Path | None:
    """The training log of an MLPerf power folder: ``.../power/result_N`` ->
    ``.../result_N.txt`` (or ``.txt.gz``)."""
    p = Path(power_dir)
    for cand in (p.parent.parent / f"{p.name}.txt", p.parent.parent / f"{p.name}.txt.gz"):
        if cand.is_file():
            return cand
    return None
