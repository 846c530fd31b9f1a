"""Facilities export of a power forecast: a spreadsheet-native CSV plus a JSON sidecar.

Format version 3, documented column by column in ``docs/facilities_csv.md``:

- one row per clock-aligned interval (1 s, 1 min, 5 min, 15 min, 30 min or 1 h);
- interval start and end in UTC and the start in the site's local time, written
  ``YYYY-MM-DD HH:MM:SS`` (read as dates by spreadsheets), the zone named in the column
  name (``/`` written ``__``: no slash in a column name), plus the local UTC offset as
  text ``UTC-05:00`` (so the repeated hour of a DST change is unambiguous, and no
  spreadsheet reads it as a duration);
- facility and IT power side by side (mean, min, max, p10, p50, p90 in MW), energy per
  interval (MWh), ramps over named windows (MW/s between adjacent 1-s means, MW/min
  between adjacent 1-min means), and the events of draw 0;
- numbers written with fixed decimals (:data:`DECIMALS`), never in exponent form.

:func:`~powerlab.site.export_workbook.write_facilities_xlsx` writes the same table as an
Excel workbook (openpyxl): real date-time cells, a units row under the header, and an
``about`` sheet with the sidecar's facts.

The sidecar ``<name>.json`` holds the units, the rounding, the time zone, the scenario
hash, the powerlab version, the generation time and the CSV's SHA-256, which
:func:`~powerlab.site.export_reader.read_facilities_csv` checks.  The pair is written so
that a crash never leaves a new CSV beside an old sidecar (both written to temporary files
first; the old sidecar is removed before the new CSV takes its name).  Text cells that a
spreadsheet would run as a formula (``= + - @``, tab, carriage return) get a leading
``'``, which the reader removes.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from .._format import sanitize_cell, spreadsheet_times, unsanitize_cell
from .._progress import Progress
from ..exceptions import AnalysisError, PowerlabError
from ..limits.requirements import BOUNDARIES
from ..outputs import fsync_dir, write_temporary
from .planner import clock_edges, ramp_into_tick

__all__ = [
    "DECIMALS",
    "FORMAT_VERSION",
    "RAMP_COLUMNS",
    "RESOLUTIONS",
    "decimals_of",
    "facilities_columns",
    "facilities_frame",
    "local_time_column",
    "resolution_seconds",
    "sanitize_cell",
    "sidecar_digest",
    "sidecar_facts",
    "unsanitize_cell",
    "write_facilities_csv",
    "zone_of_column",
]

FORMAT_VERSION = 3   # 3: no '/' in column names, text UTC offsets, and the sidecar
                     # carries sidecar_sha256 over its own fields

#: Row intervals a facilities CSV may have: name -> seconds.
RESOLUTIONS = {"1s": 1.0, "1min": 60.0, "5min": 300.0, "15min": 900.0, "30min": 1800.0,
               "1h": 3600.0}

_STATS = ("mean", "min", "max", "p10", "p50", "p90")
#: The ramp columns of each boundary: (name, window of the adjacent means [s], sign:
#: +1 rises, -1 falls).
RAMP_COLUMNS = (("ramp_up_megawatts_per_s_1s_max", 1.0, +1),
                ("ramp_down_megawatts_per_s_1s_max", 1.0, -1),
                ("ramp_up_megawatts_per_min_1min_max", 60.0, +1),
                ("ramp_down_megawatts_per_min_1min_max", 60.0, -1))

#: Decimal places written per kind of column (the stated resolution of the numbers).
DECIMALS = {"power": 3, "energy": 6, "ramp": 3}
_TIME_FMT = "%Y-%m-%d %H:%M:%S"           # powerlab._format.SPREADSHEET_TIME_FORMAT


def local_time_column(tz: str) -> str:
    """``interval_start_local_<zone>`` with the zone's ``/`` written ``__`` (IANA names
    never hold ``__``), so that no column name holds a slash."""
    return f"interval_start_local_{tz.replace('/', '__')}"


def zone_of_column(column: str) -> str:
    """The IANA zone named by a local-time column (format 3 ``__`` or format 2 ``/``)."""
    return column[len("interval_start_local_"):].replace("__", "/")


def facilities_columns(tz: str) -> list[str]:
    """The CSV's columns for a site in time zone ``tz`` (IANA name), in order."""
    cols = ["interval_start_utc", "interval_end_utc", local_time_column(tz),
            "utc_offset_local"]
    for s in BOUNDARIES:
        cols += [f"{s}_power_megawatts_{st}" for st in _STATS]
        cols.append(f"{s}_energy_megawatt_hours")
        cols += [f"{s}_{name}" for name, _, _ in RAMP_COLUMNS]
    cols.append("events")
    return cols


def _units(tz: str) -> dict:
    u = {"interval_start_utc": "UTC, YYYY-MM-DD HH:MM:SS, start of the interval",
         "interval_end_utc": "UTC, end of the interval (exclusive)",
         local_time_column(tz): f"local time in {tz}, start of the interval",
         "utc_offset_local": "offset of the local time from UTC at the interval start, "
                             "text UTC+HH:MM or UTC-HH:MM"}
    for s in BOUNDARIES:
        what = ("facility (grid) power: IT x PUE + base load - battery" if s == "facility"
                else "IT power: GPUs, nodes and idle GPUs")
        u[f"{s}_power_megawatts_mean"] = f"MW, {what}; mean over draws of the interval mean"
        u[f"{s}_power_megawatts_min"] = "MW, lowest tick power in the interval, any draw"
        u[f"{s}_power_megawatts_max"] = "MW, highest tick power in the interval, any draw"
        for p in ("p10", "p50", "p90"):
            u[f"{s}_power_megawatts_{p}"] = (f"MW, {p[1:]}th percentile across draws of "
                                             "the interval mean")
        u[f"{s}_energy_megawatt_hours"] = "MWh, energy in the interval, mean over draws"
        for name, win, sign in RAMP_COLUMNS:
            unit = "MW/s" if win == 1.0 else "MW/min"
            u[f"{s}_{name}"] = (f"{unit}, largest {'rise' if sign > 0 else 'fall'} between "
                                f"adjacent {win:g}-s means whose boundary lies in the "
                                "interval, any draw (positive; blank where undefined)")
    u["events"] = "text, events of draw 0 starting in the interval ('job:event; ...')"
    return u


def decimals_of(col: str) -> int:
    """Decimal places the column ``col`` is written with (:data:`DECIMALS`)."""
    if "energy" in col:
        return DECIMALS["energy"]
    if "ramp" in col:
        return DECIMALS["ramp"]
    return DECIMALS["power"]


def resolution_seconds(resolution) -> float:
    """The row interval of :data:`RESOLUTIONS` named (or given in seconds) [s]."""
    if isinstance(resolution, str) and resolution in RESOLUTIONS:
        return RESOLUTIONS[resolution]
    if isinstance(resolution, (int, float)) and float(resolution) in RESOLUTIONS.values():
        return float(resolution)
    raise PowerlabError(f"resolution must be one of {', '.join(RESOLUTIONS)}, "
                        f"got {resolution!r}")


def _events_text(result, edges: np.ndarray) -> list[str]:
    ev0 = result.events[result.events["draw"] == 0]
    ticks = ev0["tick"].to_numpy()
    idx = np.searchsorted(edges, ticks, side="right") - 1
    ok = (idx >= 0) & (ticks < result.n_ticks)
    labels = (ev0["job"].astype(str) + ":" + ev0["event"].astype(str)).to_numpy()
    text = [""] * len(edges)
    for i, lab in zip(idx[ok], labels[ok]):
        text[i] = lab if not text[i] else text[i] + "; " + lab
    return text


#: Rough speed of the facilities table [ticks x draws per second] for the up-front
#: estimate (54 days at 1 s, 5 draws: 18 s on a 2-core machine; taken low).
_FRAME_TICK_DRAWS_PER_S = 1e6


def _frame_progress(result, progress):
    """(Progress of the table's steps, whether this call owns it)."""
    if isinstance(progress, Progress):
        return progress, False
    steps = len(BOUNDARIES) * (2 + len(RAMP_COLUMNS))
    est_s = result.n_ticks * result.draws / _FRAME_TICK_DRAWS_PER_S
    bar = Progress(steps, "facilities table", "step",
                   enabled=(est_s >= 2.0) if progress is None else bool(progress))
    bar.announce(f"{result.n_ticks:,} ticks x {result.draws} draws x {len(BOUNDARIES)} boundaries: "
                 f"{steps} steps (power, interval statistics, "
                 f"{len(RAMP_COLUMNS)} ramp windows per boundary)", estimate_s=est_s)
    return bar, True


def facilities_frame(result, resolution="15min", progress=False) -> pd.DataFrame:
    """The facilities table of a forecast, before rounding and formatting.

    Parameters
    ----------
    result : ForecastResult
    resolution : {'1s', '1min', '5min', '15min', '30min', '1h'} or seconds
        Row interval; rows are aligned to the clock (the first row is partial when the
        horizon starts between two boundaries).
    progress : bool or None, default False
        Show the size, an estimate and the steps done on standard error
        (:mod:`powerlab._progress`): ``True`` always, ``None`` when the estimate is 2 s
        or more (what ``powerlab forecast`` passes), ``False`` never.

    Returns
    -------
    DataFrame
        The columns of :func:`facilities_columns` (times tz-aware: UTC, and local in
        the site's zone), numbers in MW, MWh, MW/s and MW/min.
    """
    res = resolution_seconds(resolution)
    tz = result.scenario.site.tz
    tick = result.tick_s
    n = result.n_ticks
    edges = clock_edges(result.start_utc, n, tick, res)
    counts = np.diff(np.append(edges, n))
    starts = result.times[edges]
    ends = starts + pd.to_timedelta(counts * tick, unit="s")
    local = starts.tz_convert(tz)
    off = local.strftime("%z")
    out = {"interval_start_utc": starts, "interval_end_utc": ends, local_time_column(tz): local,
           "utc_offset_local": ["UTC" + o[:3] + ":" + o[3:] for o in off]}
    bar, own = _frame_progress(result, progress)
    try:
        for s in BOUNDARIES:
            _boundary_columns(result, s, edges, counts, tick, n, out, bar)
    except BaseException:
        if own:
            bar.close(interrupted=True)
        raise
    if own:
        bar.close()
    out["events"] = _events_text(result, edges)
    df = pd.DataFrame(out)
    df["events"] = df["events"].astype("string")
    return df


def _boundary_columns(result, s, edges, counts, tick, n, out, bar) -> None:
    """The power, energy and ramp columns of one boundary (``facility`` or ``it``)."""
    bar.phase(f"{s} power")
    x = result.power_w(s)
    bar.update()
    means = np.add.reduceat(x, edges, axis=1) / counts
    q = np.quantile(means, [0.1, 0.5, 0.9], axis=0)
    stats = {"mean": means.mean(axis=0), "min": np.minimum.reduceat(x.min(axis=0), edges),
             "max": np.maximum.reduceat(x.max(axis=0), edges),
             "p10": q[0], "p50": q[1], "p90": q[2]}
    for st in _STATS:
        out[f"{s}_power_megawatts_{st}"] = stats[st] / 1e6
    out[f"{s}_energy_megawatt_hours"] = (np.add.reduceat(x, edges, axis=1).mean(axis=0)
                                        * tick / 3.6e9)
    bar.update()
    for name, win, sign in RAMP_COLUMNS:
        scale = (1.0 if win == 1.0 else 60.0) / 1e6
        try:  # the largest ramp over draws at each boundary tick (NaN: undefined)
            best = np.fmax.reduce(sign * ramp_into_tick(x, tick, win), axis=0)
        except AnalysisError:  # the tick does not divide the window
            best = np.full(n, np.nan)
        val = np.fmax.reduceat(best, edges)
        out[f"{s}_{name}"] = np.where(np.isnan(val), np.nan, np.maximum(val, 0.0)) * scale
        bar.update()


def _fmt_time(ts: pd.DatetimeIndex | pd.Series) -> list[str]:
    """One time format for every CSV for people (:func:`powerlab._format.spreadsheet_times`)."""
    return spreadsheet_times(ts, zone=None)


def _fmt_numbers(v: np.ndarray, decimals: int) -> list[str]:
    r = np.round(np.asarray(v, dtype=float), decimals) + 0.0  # no "-0.000"
    return ["" if np.isnan(a) else f"{a:.{decimals}f}" for a in r]


def _csv_text(df: pd.DataFrame, tz: str) -> str:
    text = pd.DataFrame({
        "interval_start_utc": _fmt_time(df["interval_start_utc"]),
        "interval_end_utc": _fmt_time(df["interval_end_utc"]),
        local_time_column(tz): _fmt_time(df[local_time_column(tz)]),
        "utc_offset_local": df["utc_offset_local"],
    })
    for c in facilities_columns(tz)[4:-1]:
        text[c] = _fmt_numbers(df[c].to_numpy(), decimals_of(c))
    text["events"] = df["events"].fillna("").astype(str).map(sanitize_cell)
    return text.to_csv(index=False, lineterminator="\r\n")


def _job_figures(result) -> dict:
    """Per job: ``effective_training_time`` [-] and ``interruptions`` [-], medians over
    the draws (see :mod:`powerlab.reliability.interruptions`)."""
    t = result.throughput
    if "effective_training_time" not in t.columns:
        return {}
    g = t.groupby("job", sort=False)
    return {str(job): {"effective_training_time": float(r["effective_training_time"]),
                       "interruptions": float(r["interruptions"])}
            for job, r in g[["effective_training_time", "interruptions"]].median().iterrows()}


def sidecar_facts(result, df: pd.DataFrame, res_s: float, file_name: str,
                  sha256: str | None, gen: pd.Timestamp) -> dict:
    """The facts of an export (units, rounding, scenario, provenance): the CSV's JSON
    sidecar, the workbook's ``about`` sheet."""
    sc = result.scenario
    tz = sc.site.tz
    notes = []
    if df[[f"facility_{n}" for n, w, _ in RAMP_COLUMNS if w == 1.0]].isna().all().all():
        notes.append(f"The engine tick ({result.tick_s:g} s) does not divide 1 s: the "
                     "1-s ramp columns are blank.")
    side = {
        "format": "powerlab facilities CSV",
        "format_version": FORMAT_VERSION,
        "file": file_name,
        "csv_sha256": sha256,
        "rows": len(df),
        "time_zone": tz,
        "time_format": "YYYY-MM-DD HH:MM:SS",
        "interval_alignment": "clock-aligned (multiples of the resolution since "
                              "1970-01-01 UTC); the first row is partial when the horizon "
                              "starts between two boundaries",
        "resolution_s": res_s,
        "columns": facilities_columns(tz),
        "units": _units(tz),
        "rounding": {"power": "0.001 MW", "energy": "0.000001 MWh", "ramps": "0.001"},
        "engine_tick_s": result.tick_s,
        "draws": result.draws,
        "seed": result.seed,
        "scenario_name": sc.name,
        "scenario_hash_sha256": sc.hash(),
        "scenario_file": Path(sc.source).name if sc.source else None,
        "powerlab_version": __version__,
        "generated_utc": gen.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
        "assumptions": [
            ("Every duration is rounded to whole engine ticks; checkpoint and evaluation "
             "intervals count training time and are rounded to whole steps."),
            ("All GPUs of a job follow one power template shifted by their own timing "
             "offset (normal jitter, truncated at 4 sigma)."),
            "Facility power = IT power x PUE(t) + base load - battery output.",
            ("Ramps compare adjacent window means over every alignment of the windows; "
             "the events column shows draw 0."),
        ] + notes,
        "jobs": _job_figures(result),
        "scenario": sc.to_dict(),
    }
    return side


def write_facilities_csv(result, path, resolution="15min",
                         generated_utc: pd.Timestamp | None = None,
                         progress=False) -> tuple[Path, Path]:
    """Write the facilities CSV and its JSON sidecar as a consistent pair.

    Parameters
    ----------
    result : ForecastResult
    path : str or Path
        The CSV file, named ``*.csv``; the sidecar is the same name with ``.json``.
    resolution : {'1s', '1min', '5min', '15min', '30min', '1h'}, default '15min'
        Interval of the rows.
    generated_utc : Timestamp, optional
        Generation time to record (default: now).
    progress : bool or None, default False
        Progress of the table (:func:`facilities_frame`).

    Returns
    -------
    (Path, Path)
        The CSV and the sidecar.

    Raises
    ------
    PowerlabError
        Before anything is written: a name that does not end in ``.csv``, a missing
        folder, a CSV or sidecar path that is a folder, an unknown resolution.
    """
    path = Path(path)
    jpath = path.with_suffix(".json")
    if path.suffix.lower() != ".csv":
        raise PowerlabError(f"cannot write {path}: the facilities export is a CSV file; "
                            "name it '*.csv' (spreadsheets open it directly)")
    if not path.parent.is_dir():
        raise PowerlabError(f"cannot write {path}: folder {path.parent} does not exist")
    for p in (path, jpath):
        if p.is_dir():
            raise PowerlabError(f"cannot write {p}: it is a folder")
    res_s = resolution_seconds(resolution)
    tz = result.scenario.site.tz
    df = facilities_frame(result, res_s, progress=progress)
    csv = _csv_text(df, tz).encode("utf-8")
    gen = generated_utc if generated_utc is not None else pd.Timestamp.now(tz="UTC")
    side = sidecar_facts(result, df, res_s, path.name, hashlib.sha256(csv).hexdigest(), gen)
    side["sidecar_sha256"] = sidecar_digest(side)
    data = json.dumps(side, indent=2, default=str).encode("utf-8")
    # a full or read-only disk leaves nothing behind
    tmp_csv = write_temporary(path, lambda tmp: tmp.write_bytes(csv))
    try:
        tmp_json = write_temporary(jpath, lambda tmp: tmp.write_bytes(data))
    except BaseException:
        tmp_csv.unlink(missing_ok=True)
        raise
    # the old sidecar goes first: a crash from here on leaves a CSV without a sidecar
    # (the reader says so), never a new CSV described by an old sidecar
    jpath.unlink(missing_ok=True)
    fsync_dir(path.parent)
    os.replace(tmp_csv, path)
    os.replace(tmp_json, jpath)
    fsync_dir(path.parent)
    return path, jpath


def sidecar_digest(side: dict) -> str:
    """SHA-256 of a sidecar's own fields (all but ``sidecar_sha256``), over their canonical
    JSON (sorted keys, no blanks): units, time zone and assumptions are covered, not only
    the CSV."""
    body = {k: v for k, v in side.items() if k != "sidecar_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
