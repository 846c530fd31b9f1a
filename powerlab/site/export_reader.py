"""Reading a facilities CSV back: :func:`read_facilities_csv`.

The CSV (:mod:`powerlab.site.export`, documented in ``docs/facilities_csv.md``) is checked
against the SHA-256 its JSON sidecar records (and the sidecar against its own), then read
as text and converted column by column: times to tz-aware UTC (local in the zone the
local-time column names), numbers to float64 at the written resolution, the event text
with the formula guard removed.  Every problem is a
:class:`~powerlab.exceptions.ParseError` naming the file, line and column.  Formats 2
(the zone's slash in the column name, no sidecar checksum) and 3 are read.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
import zoneinfo
from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import DataQualityWarning, ParseError
from ..limits.requirements import BOUNDARIES
from .export import (
    RAMP_COLUMNS,
    facilities_columns,
    local_time_column,
    sidecar_digest,
    unsanitize_cell,
    zone_of_column,
)

__all__ = ["read_facilities_csv"]

#: Start of the local-time column's name; the IANA zone follows (format 3: its ``/``
#: written ``__``).
_LOCAL_PREFIX = "interval_start_local_"


def read_facilities_csv(path, *, verify: bool = True) -> pd.DataFrame:
    """Read a facilities CSV written by :func:`~powerlab.site.export.write_facilities_csv`.

    Parameters
    ----------
    path : str or Path
    verify : bool, default True
        Check the CSV against the SHA-256 in its sidecar (refusing a CSV without one).

    Returns
    -------
    DataFrame
        The columns of the file: times tz-aware (UTC; local in the site's zone), the
        numbers as float64 at the written resolution (NaN where blank), the event text
        with the formula guard removed.

    Raises
    ------
    ParseError
        A missing or mismatched sidecar, a missing column, or a value that cannot be
        read (names the line and column).
    """
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise ParseError(f"cannot read facilities CSV: {exc.strerror}", path=path) from None
    if verify:
        _check_digest(path, raw_bytes, _read_sidecar(path))
    raw = _text_table(path, raw_bytes)
    local, tz = _zone_column(path, raw)
    expected = _expected_columns(path, raw, local, tz)
    out = pd.DataFrame(index=raw.index)
    _read_times(path, raw, out, local, tz)
    out["utc_offset_local"] = raw["utc_offset_local"].astype("string")
    _read_numbers(path, raw, out, expected)
    out["events"] = raw["events"].map(unsanitize_cell).astype("string")
    return out


def _read_sidecar(path: Path) -> dict:
    """The CSV's JSON sidecar, its own fields checked against its ``sidecar_sha256``
    (format 3; an older format warns that they carry no checksum)."""
    jpath = path.with_suffix(".json")
    if not jpath.is_file():
        raise ParseError(f"its JSON sidecar {jpath.name} is missing (it holds the units and "
                         "the checksum); pass verify=False to read the CSV alone", path=path)
    try:
        side = json.loads(jpath.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ParseError(f"cannot read the sidecar: {str(exc)[:200]}", path=jpath) from None
    if not isinstance(side, dict):
        raise ParseError("the sidecar is not a JSON object", path=jpath)
    version = side.get("format_version")
    if isinstance(version, int) and version >= 3:
        if side.get("sidecar_sha256") != sidecar_digest(side):
            raise ParseError("the sidecar's own fields (units, time zone, ...) do not match "
                             "its sidecar_sha256: it was edited after it was written",
                             path=jpath)
    elif "sidecar_sha256" in side or not isinstance(version, int):
        raise ParseError(f"unexpected format_version {version!r}", path=jpath)
    else:
        warnings.warn(f"{jpath.name}: format {version} sidecar (an older powerlab): its own "
                      "fields (units, time zone) carry no checksum; only the CSV is verified",
                      DataQualityWarning, stacklevel=3)
    return side


def _check_digest(path: Path, raw_bytes: bytes, side: dict) -> None:
    """Step: the CSV's bytes are those the sidecar's ``csv_sha256`` was taken of."""
    digest = hashlib.sha256(raw_bytes).hexdigest()
    if side.get("csv_sha256") != digest:
        jname = path.with_suffix(".json").name
        raise ParseError(f"the CSV does not match its sidecar {jname} "
                         f"(SHA-256 {digest[:12]}... vs recorded "
                         f"{str(side.get('csv_sha256'))[:12]}...): one of the pair was "
                         "replaced or changed", path=path)


def _text_table(path: Path, raw_bytes: bytes) -> pd.DataFrame:
    """Step: the CSV as text cells (nothing converted yet, blanks kept as '')."""
    try:
        return pd.read_csv(io.BytesIO(raw_bytes), dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as exc:
        raise ParseError(f"cannot read facilities CSV: {exc}", path=path) from None


def _zone_column(path: Path, raw: pd.DataFrame) -> tuple[str, str]:
    """Step: the one local-time column and the IANA zone it names."""
    local = [c for c in raw.columns if c.startswith(_LOCAL_PREFIX)]
    if len(local) != 1:
        raise ParseError(f"expected one column '{_LOCAL_PREFIX}<IANA zone>'",
                         path=path, line=1)
    tz = zone_of_column(local[0])
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ParseError(f"the local-time column names {tz!r}, not an IANA time zone",
                         path=path, line=1, column=local[0]) from None
    return local[0], tz


def _expected_columns(path: Path, raw: pd.DataFrame, local: str, tz: str) -> list[str]:
    """Step: the columns of the format (format 2: the zone's slash as written), all of
    which the file must have."""
    expected = facilities_columns(tz)
    if local != local_time_column(tz):            # format 2: the zone's slash as written
        expected[2] = local
    missing = [c for c in expected if c not in raw.columns]
    if missing:
        raise ParseError(f"missing column(s) {missing}; expected {expected}", path=path,
                         line=1)
    return expected


def _read_times(path: Path, raw: pd.DataFrame, out: pd.DataFrame, local: str,
                tz: str) -> None:
    """Step: the interval start and end as UTC times and the start in the local zone."""
    for c in ("interval_start_utc", "interval_end_utc", local):
        vals = pd.to_datetime(raw[c], format="ISO8601", errors="coerce")
        bad = np.flatnonzero(vals.isna().to_numpy())
        if len(bad):
            raise ParseError(f"expected a time 'YYYY-MM-DD HH:MM:SS', got "
                             f"{raw[c].iloc[bad[0]]!r}", path=path, line=int(bad[0]) + 2,
                             column=c)
        out[c] = vals
    out["interval_start_utc"] = out["interval_start_utc"].dt.tz_localize("UTC")
    out["interval_end_utc"] = out["interval_end_utc"].dt.tz_localize("UTC")
    try:
        out[local] = out["interval_start_utc"].dt.tz_convert(tz)
    except Exception as exc:
        raise ParseError(f"column {local!r} does not name an IANA time zone ({tz!r})",
                         path=path, line=1) from exc


def _read_numbers(path: Path, raw: pd.DataFrame, out: pd.DataFrame,
                  expected: list[str]) -> None:
    """Step: the power, energy and ramp columns as float64 (blank: NaN, allowed in the
    ramp columns only)."""
    ramps = {f"{s}_{n}" for s in BOUNDARIES for n, _, _ in RAMP_COLUMNS}
    for c in expected[4:-1]:
        vals = pd.to_numeric(raw[c].replace("", np.nan), errors="coerce")
        bad = np.flatnonzero((vals.isna() & ((raw[c] != "") | (c not in ramps))).to_numpy())
        if len(bad):
            raise ParseError(f"expected a number, got {raw[c].iloc[bad[0]]!r}", path=path,
                             line=int(bad[0]) + 2, column=c)
        out[c] = vals.astype("float64")
