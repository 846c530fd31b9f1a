"""The facilities table as an Excel workbook (``.xlsx``): :func:`write_facilities_xlsx`.

The same table as the facilities CSV (:mod:`powerlab.site.export`, documented in
``docs/facilities_csv.md``), in a workbook: sheet ``facilities`` with real date-time
cells, a units row under the header and number cells rounded as in the CSV, and sheet
``about`` with the facts the CSV's sidecar holds.  Needs openpyxl (``pip install
'powerlab[xlsx]'``), imported only when a workbook is written.
"""

from __future__ import annotations

import gc
import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .._format import sanitize_cell
from ..exceptions import PowerlabError, StoreError
from ..outputs import atomic_write
from .export import (
    decimals_of,
    facilities_columns,
    facilities_frame,
    resolution_seconds,
    sidecar_facts,
)

__all__ = ["write_facilities_xlsx"]

#: The ``about`` sheet's facts taken from the sidecar, in order (then the rounding, the
#: assumptions, the unit of every column and the jobs' figures).
ABOUT_FACTS = ("format", "format_version", "file", "rows", "time_zone", "time_format",
               "interval_alignment", "resolution_s", "engine_tick_s", "draws", "seed",
               "scenario_name", "scenario_hash_sha256", "scenario_file", "powerlab_version",
               "generated_utc")
#: Rows a worksheet holds (Excel's limit, also LibreOffice's since 7.4): the header and
#: units rows included.
MAX_SHEET_ROWS = 1_048_576


def write_facilities_xlsx(result, path, resolution="15min",
                          generated_utc: pd.Timestamp | None = None,
                          progress=False) -> Path:
    """Write the facilities table as an Excel workbook (``.xlsx``, with openpyxl).

    Sheet ``facilities``: the columns of :func:`~powerlab.site.export.facilities_columns`,
    a units row under the header (``UTC``, the zone, ``MW``, ``MWh``, ``MW/s``,
    ``MW/min``, ``text``), then one row per interval: times as date-time cells (UTC, and
    the site's local time, without a zone as spreadsheets hold them), numbers as number
    cells rounded as in the CSV (:data:`~powerlab.site.export.DECIMALS`) and shown with
    that many decimals, blanks where undefined.  Sheet ``about``: what the CSV's sidecar
    holds (format, time zone, units of every column, rounding, draws, seed, scenario name
    and hash, powerlab version, generation time, assumptions), one fact per row.  Written to a temporary file and renamed into place.

    Parameters
    ----------
    result : ForecastResult
    path : str or Path
        The workbook, named ``*.xlsx``.
    resolution, generated_utc, progress
        As in :func:`~powerlab.site.export.write_facilities_csv`.

    Returns
    -------
    Path

    Raises
    ------
    PowerlabError
        A name that does not end in ``.xlsx``, a missing folder, a path that is a folder,
        an unknown resolution, or openpyxl missing (``pip install 'powerlab[xlsx]'``).
    """
    path = _workbook_path(path)
    try:
        from openpyxl import Workbook
    except ImportError:
        raise PowerlabError("--format xlsx needs openpyxl: pip install 'powerlab[xlsx]'"
                            ) from None
    res_s = resolution_seconds(resolution)
    tz = result.scenario.site.tz
    df = facilities_frame(result, res_s, progress=progress)
    if len(df) + 2 > MAX_SHEET_ROWS:        # refused before a row is written (issue 38)
        raise PowerlabError(f"{len(df):,} rows do not fit a worksheet ({MAX_SHEET_ROWS:,} "
                            "rows with the header and units): choose a coarser "
                            "resolution or write the CSV (--format csv)")
    gen = generated_utc if generated_utc is not None else pd.Timestamp.now(tz="UTC")
    side = sidecar_facts(result, df, res_s, path.name, None, gen)
    side["format"] = "powerlab facilities workbook"
    cols = facilities_columns(tz)
    wb = Workbook()
    _facilities_sheet(wb.active, df, cols, tz)
    _about_sheet(wb.create_sheet("about"), side, cols)
    data = _saved(wb, path)
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def _saved(wb, path: Path) -> bytes:
    """Step: the workbook's bytes, built in memory.  openpyxl writes each sheet through a
    temporary file of its own: on a full disk that write fails inside a generator whose
    clean-up then prints a second traceback ("Exception ignored in"); the failure is one
    :class:`StoreError` naming the workbook, the generator closed while unraisable
    exceptions are silenced."""
    buf = io.BytesIO()
    failed = None
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        try:
            wb.save(buf)
        except OSError as exc:
            failed = exc.strerror or str(exc)
        gc.collect()                       # openpyxl's half-run writers, closed now
    finally:
        sys.unraisablehook = hook
    if failed is not None:
        raise StoreError(f"could not write {path}: {failed} (while building the workbook "
                         "in the temporary folder)")
    return buf.getvalue()


def _workbook_path(path) -> Path:
    """Step: the workbook's path, refused before anything is computed when it is not named
    ``*.xlsx``, its folder is missing or it is a folder."""
    path = Path(path)
    if path.suffix.lower() != ".xlsx":
        raise PowerlabError(f"cannot write {path}: name the workbook '*.xlsx'")
    if not path.parent.is_dir():
        raise PowerlabError(f"cannot write {path}: folder {path.parent} does not exist")
    if path.is_dir():
        raise PowerlabError(f"cannot write {path}: it is a folder")
    return path


def _units_row(cols: list[str], tz: str) -> list[str]:
    """The unit of each column, the row under the header."""
    return ["UTC", "UTC", tz, "text"] + [
        "MWh" if "energy" in c else "MW/s" if "per_s" in c else "MW/min" if "per_min" in c
        else "MW" for c in cols[4:-1]] + ["text"]


def _facilities_sheet(ws, df: pd.DataFrame, cols: list[str], tz: str) -> None:
    """Step: sheet ``facilities``: the header in bold, the units in italics, one row per
    interval (date-time cells, rounded number cells, blanks where undefined), panes frozen
    under the units and each column's width and number format."""
    from openpyxl.styles import Font

    ws.title = "facilities"
    ws.append(cols)
    ws.append(_units_row(cols, tz))
    for cell in ws[1]:
        cell.font = Font(bold=True)
    for cell in ws[2]:
        cell.font = Font(italic=True)
    ws.freeze_panes = "A3"
    times = [pd.DatetimeIndex(df[c]).tz_localize(None).to_pydatetime()
             for c in cols[:3]]
    nums = {c: np.round(df[c].to_numpy(dtype=float), decimals_of(c)) + 0.0 for c in cols[4:-1]}
    events = df["events"].fillna("").astype(str).map(sanitize_cell).tolist()
    offs = df["utc_offset_local"].tolist()
    for i in range(len(df)):
        row = [times[0][i], times[1][i], times[2][i], offs[i]]
        row += [None if np.isnan(nums[c][i]) else float(nums[c][i]) for c in cols[4:-1]]
        row.append(events[i] or None)
        ws.append(row)
    fmt = {c: "0." + "0" * decimals_of(c) for c in cols[4:-1]}
    for j, c in enumerate(cols, start=1):
        letter = ws.cell(row=1, column=j).column_letter
        ws.column_dimensions[letter].width = max(12, min(len(c) + 2, 40))
        number_format = ("yyyy-mm-dd hh:mm:ss" if j <= 3 else fmt.get(c))
        if number_format:
            for cell in ws[letter][2:]:
                cell.number_format = number_format


def _about_sheet(about, side: dict, cols: list[str]) -> None:
    """Step: sheet ``about``: one fact of the sidecar per row (:data:`ABOUT_FACTS`, the
    rounding, the assumptions, the unit of every column, the jobs' medians)."""
    from openpyxl.styles import Font

    about.append(["fact", "value"])
    for cell in about[1]:
        cell.font = Font(bold=True)
    rows = [[key, side.get(key)] for key in ABOUT_FACTS]
    rows += [[f"rounding of {k}", v] for k, v in side["rounding"].items()]
    rows += [["assumption", a] for a in side["assumptions"]]
    rows += [[f"unit of {c}", side["units"][c]] for c in cols]
    rows += [[f"job {job}: {k} (median over draws)", v]
             for job, figs in side["jobs"].items() for k, v in figs.items()]
    for fact, value in rows:    # names come from users: never a live formula
        about.append([sanitize_cell(fact), sanitize_cell(value)])
    about.column_dimensions["A"].width = 48
    about.column_dimensions["B"].width = 100
