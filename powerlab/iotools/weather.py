"""Read personal-weather-station CSV exports (Weather Underground style).

One file per day with a header such as ``Time,Temp (°C),Dew Point (°C),Humidity (%),
Wind Dir (°),Wind Speed (km/h),Wind Gust (km/h),Pressure (mb),Precip Rate (mm),
Precip Total (mm),UV,Solar Radiation (W/m²)`` and rows every few minutes in local
wall-clock time without a zone.

Damaged rows are skipped and counted, never merged: a last line without its newline
(the file was cut, so even a row with the right number of fields may hold a truncated
number), rows with the wrong number of fields, and files in another format.  One
:class:`~powerlab.exceptions.DataQualityWarning` per call names each file and count.
A well-formed row with a non-numeric value is not "damage" but a different format, and
raises :class:`~powerlab.exceptions.ParseError` with file, line and column.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import ParseError
from ._common import check_tz, localize, read_text, strip_gz, warn_quality
from .registry import ReaderEntrypoint, head_lines, register_reader

__all__ = ["VARIABLE_MAP", "parse_weather", "read_weather"]

#: Source column -> (column, factor to its unit).  Units are in the names:
#: km/h -> m/s, mb = hPa.  ``Precip Rate`` is a rate per hour although the header says
#: "mm".
VARIABLE_MAP: dict[str, tuple[str, float]] = {
    "Temp (°C)": ("temp_air_c", 1.0),
    "Dew Point (°C)": ("dew_point_c", 1.0),
    "Humidity (%)": ("humidity_pct", 1.0),
    "Wind Dir (°)": ("wind_direction_deg", 1.0),
    "Wind Speed (km/h)": ("wind_speed_m_per_s", 1.0 / 3.6),
    "Wind Gust (km/h)": ("wind_gust_m_per_s", 1.0 / 3.6),
    "Pressure (mb)": ("pressure_hpa", 1.0),
    "Precip Rate (mm)": ("precip_rate_mm_per_h", 1.0),
    "Precip Total (mm)": ("precip_total_mm", 1.0),
    "UV": ("uv_index", 1.0),
    "Solar Radiation (W/m²)": ("solar_radiation_w_per_m2", 1.0),
}
#: Values a weather station can report, per column (outside: a sentinel such as -999 or
#: a damaged value, masked as missing and counted).  Air temperatures span the records
#: on Earth; pressure is sea-level pressure [hPa].
VALID_RANGE: dict[str, tuple[float, float]] = {
    "temp_air_c": (-90.0, 60.0),
    "dew_point_c": (-90.0, 60.0),
    "humidity_pct": (0.0, 100.0),
    "wind_direction_deg": (0.0, 360.0),
    "wind_speed_m_per_s": (0.0, 120.0),
    "wind_gust_m_per_s": (0.0, 120.0),
    "pressure_hpa": (850.0, 1090.0),
    "precip_rate_mm_per_h": (0.0, 500.0),
    "precip_total_mm": (0.0, 2000.0),
    "uv_index": (0.0, 25.0),
    "solar_radiation_w_per_m2": (0.0, 1500.0),
}
_TIME = "Time"
_FILES = re.compile(r".*\.(txt|csv)(\.gz)?$")


def read_weather(path_or_dir, *, tz="America/New_York") -> pd.DataFrame:
    """Read one weather-station file or every ``*.txt``/``*.csv`` file of a directory.

    Parameters
    ----------
    path_or_dir : str or path-like
        A daily file or a directory of them (read in name order).
    tz : str or tzinfo, default "America/New_York"
        Time zone of the station's local wall-clock times.

    Returns
    -------
    pandas.DataFrame
        Indexed by tz-aware UTC ``timestamp`` (sorted), columns ``temp_air_c`` [degC],
        ``dew_point_c`` [degC], ``humidity_pct`` [%], ``wind_direction_deg`` [deg],
        ``wind_speed_m_per_s`` [m/s], ``wind_gust_m_per_s`` [m/s], ``pressure_hpa``
        [hPa], ``precip_rate_mm_per_h`` [mm/h], ``precip_total_mm`` [mm], ``uv_index``,
        ``solar_radiation_w_per_m2`` [W/m^2] (those present in the files).

    Notes
    -----
    Time-zone policy: an ambiguous local time (the repeated hour in autumn) is read as
    daylight time until the clock in the file steps back, standard time after; a
    nonexistent time (the skipped spring hour) is shifted forward.  Both are counted in
    the warning.  Exact duplicate timestamps keep their first row and are counted.
    """
    p = Path(path_or_dir)
    check_tz(tz, p)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and _FILES.match(f.name)
                       and f.name != "LICENSE")
        if not files:
            raise ParseError("no weather files (*.txt, *.csv) in this directory", path=p)
    else:
        files = [p]
    frames, notes = [], []
    for f in files:
        text, _ = read_text(f)
        df, skipped = _parse(text, f)
        frames.append(df)
        if skipped:
            notes.append(f"{strip_gz(f.name)}: {skipped}")
    return _finish(frames, notes, tz, str(p))


def parse_weather(text_or_buffer, *, tz="America/New_York", path=None) -> pd.DataFrame:
    """Parse one file's content given as text or a buffer (see :func:`read_weather`)."""
    text, name = read_text(text_or_buffer)
    path = path if path is not None else name
    check_tz(tz, path)
    df, skipped = _parse(text, path)
    notes = [f"{path or 'text'}: {skipped}"] if skipped else []
    return _finish([df], notes, tz, str(path or "weather text"))


def _finish(frames, notes, tz, source) -> pd.DataFrame:
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    naive = pd.DatetimeIndex(df.pop("_time"))
    utc, n_amb, n_nonex = localize(naive, tz)
    df.index = pd.DatetimeIndex(utc, name="timestamp")
    df = df.sort_index(kind="stable")
    dup = df.index.duplicated(keep="first")
    if dup.any():
        notes.append(f"{int(dup.sum())} duplicate timestamp(s) (kept the first)")
        df = df[~dup]
    if n_amb or n_nonex:
        notes.append(f"{n_amb} ambiguous local time(s) resolved by file order, "
                     f"{n_nonex} nonexistent local time(s) shifted forward (DST, tz={tz})")
    if notes:
        warn_quality(f"{source}: skipped damaged rows or repaired times -- "
                     + "; ".join(notes), stacklevel=4)
    return df


def _parse(text: str, path) -> tuple[pd.DataFrame, str]:
    """Rows of one file and a description of what was skipped ('' if nothing)."""
    lines = text.split("\n")
    truncated = 0
    if lines and lines[-1].strip():  # no newline at the end: the last line was cut
        truncated = 1
    lines = lines[:-1] if lines else lines
    header_idx = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    empty = pd.DataFrame({"_time": pd.Series([], dtype="datetime64[ns]")})
    if header_idx is None:
        return empty, ("1 truncated last line" if truncated else "")
    header = [c.strip() for c in lines[header_idx].rstrip("\r").split(",")]
    if header[0] != _TIME or len(header) < 2:
        n_rows = sum(1 for ln in lines if ln.strip()) + truncated
        return empty, (f"{n_rows} row(s) not in the expected CSV format (header "
                       f"{lines[header_idx][:40]!r}...)")
    _check_header(header, path, header_idx + 1)
    raw, lineno, wrong = _rows(lines, header_idx, header, path)
    out = {"_time": _local_times(raw, lineno, path)}
    masked = _read_values(raw, lineno, path, out)
    parts = []
    if masked:
        parts.append("impossible value(s) masked as missing: " + ", ".join(masked))
    if truncated:
        parts.append("1 truncated last line")
    if wrong:
        parts.append(f"{wrong} row(s) with the wrong number of fields")
    return pd.DataFrame(out), " and ".join(parts)


def _check_header(header: list[str], path, line: int) -> None:
    """A known quantity in another unit (a US export: ``Temp (°F)``, ``Pressure (in)``)
    or a column named twice is a ParseError, never dropped silently."""
    known = {src.split(" (")[0]: src for src in VARIABLE_MAP}
    for c in header:
        base = c.split(" (")[0]
        if base in known and c != known[base]:
            raise ParseError(f"column {c!r} is in a unit powerlab does not read; expected "
                             f"{known[base]!r} (export the data in metric units)",
                             path=path, line=line, column=c)
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise ParseError(f"column(s) {dup} appear more than once in the header", path=path,
                         line=line, column=dup[0])


def _rows(lines: list[str], header_idx: int, header: list[str],
          path) -> tuple[pd.DataFrame, list[int], int]:
    """The rows with as many fields as the header, as text (``raw``), their file lines,
    and the count of rows with another number of fields (skipped)."""
    ncol = len(header)
    good, lineno = [], []
    wrong = 0
    for i in range(header_idx + 1, len(lines)):
        ln = lines[i].rstrip("\r")
        if not ln.strip():
            continue
        if ln.count(",") != ncol - 1:
            wrong += 1
            continue
        good.append(ln)
        lineno.append(i + 1)
    try:
        raw = pd.read_csv(io.StringIO("\n".join(good)), header=None, names=header, dtype=str,
                          keep_default_na=False) if good else pd.DataFrame(columns=header)
    except (ValueError, pd.errors.ParserError) as exc:   # e.g. a quote never closed
        raise ParseError(f"cannot read the rows as CSV: {str(exc)[:200]}", path=path,
                         line=lineno[0] if lineno else header_idx + 1) from None
    return raw, lineno, wrong


def _local_times(raw: pd.DataFrame, lineno: list[int], path) -> np.ndarray:
    """The rows' local wall-clock times (``YYYY-MM-DD HH:MM``), naive."""
    times = pd.to_datetime(raw[_TIME].str.strip(), format="%Y-%m-%d %H:%M", errors="coerce")
    bad_t = times.isna().to_numpy()
    if bad_t.any():
        r = int(np.flatnonzero(bad_t)[0])
        raise ParseError(f"cannot read {raw[_TIME].iloc[r]!r} as a local time "
                         "(expected YYYY-MM-DD HH:MM)", path=path, line=lineno[r],
                         column=_TIME)
    return times.to_numpy(dtype="datetime64[ns]")


def _read_values(raw: pd.DataFrame, lineno: list[int], path, out: dict) -> list[str]:
    """Each known column into ``out`` in its unit, impossible values masked; returns
    what was masked (``"3 temp_air_c (e.g. -999)"``)."""
    masked: list[str] = []
    for src, (name, factor) in VARIABLE_MAP.items():
        if src not in raw.columns:
            continue
        s = raw[src].str.strip()
        v = pd.to_numeric(s.replace({"": None, "-": None, "N/A": None}), errors="coerce")
        bad = (v.isna() & ~s.isin(["", "-", "N/A"])).to_numpy()
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            unit = src[src.find("(") + 1:-1] if "(" in src else "no unit"
            raise ParseError(f"cannot read {raw[src].iloc[r]!r} as a number ({unit})",
                             path=path, line=lineno[r], column=src)
        x = v.to_numpy(dtype="float64") * factor
        lo, hi = VALID_RANGE[name]
        with np.errstate(invalid="ignore"):
            impossible = ~np.isnan(x) & ~((x >= lo) & (x <= hi))
        if impossible.any():
            masked.append(f"{int(impossible.sum())} {name} (e.g. "
                          f"{x[np.flatnonzero(impossible)[0]]:g})")
            x[impossible] = np.nan
        out[name] = x
    return masked


#: The first line of the other export of such stations (``2025-06-04 00:04 | Temp: ...``).
_PIPE_LINE = re.compile(r"^\d{4}-\d\d-\d\d .*\|\s*Temp:")


@register_reader
class WeatherReader(ReaderEntrypoint):
    """Weather-station exports, by their first line; a folder holding one (a file per
    day) is read whole."""

    name = "weather"
    description = "weather CSV"
    priority = 70
    folder_of_files = True
    open = staticmethod(read_weather)

    def guess_can_open(self, path, head_bytes) -> bool:
        lines = head_lines(head_bytes)
        first = lines[0] if lines else ""
        return bool(first.startswith("Time,") and "Temp" in first
                    or _PIPE_LINE.match(first))
