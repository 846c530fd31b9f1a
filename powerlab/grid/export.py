"""Facilities export of a power forecast: a spreadsheet-safe CSV plus a JSON sidecar.

The CSV has one row per interval and scope with the columns of :data:`FACILITIES_COLUMNS`
(times in ISO 8601 UTC with a ``Z``, power in megawatts, ramps in megawatts per second).
The sidecar ``<name>.json`` holds the units, the modelling assumptions, the scenario hash,
the powerlab version and the generation time.  Both files are written atomically (temp
file in the same folder, fsync, rename).  Text fields that a spreadsheet would run as a
formula (starting with ``= + - @``, tab or carriage return, possibly after apostrophes)
are prefixed with ``'``, which :func:`read_facilities_csv` removes again.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import ParseError, PowerlabError
from ..telemetry.store import atomic_write_bytes

__all__ = [
    "FACILITIES_COLUMNS",
    "UNITS",
    "facilities_frame",
    "read_facilities_csv",
    "sanitize_cell",
    "write_facilities_csv",
]

FACILITIES_COLUMNS = (
    "interval_start_utc", "interval_end_utc", "scope",
    "power_megawatts_mean", "power_megawatts_min", "power_megawatts_max",
    "power_megawatts_p10", "power_megawatts_p90",
    "ramp_up_megawatts_per_s_max", "ramp_down_megawatts_per_s_max", "events",
)
_NUMERIC = FACILITIES_COLUMNS[3:10]

UNITS = {
    "interval_start_utc": "ISO 8601 UTC (Z)",
    "interval_end_utc": "ISO 8601 UTC (Z)",
    "scope": "'facility' (grid: IT x PUE + base load - battery) or 'it'",
    "power_megawatts_mean": "MW, mean over draws of the interval mean",
    "power_megawatts_min": "MW, lowest tick power in the interval, any draw",
    "power_megawatts_max": "MW, highest tick power in the interval, any draw",
    "power_megawatts_p10": "MW, 10th percentile across draws of the interval mean",
    "power_megawatts_p90": "MW, 90th percentile across draws of the interval mean",
    "ramp_up_megawatts_per_s_max": "MW/s, largest tick-to-tick rise, any draw",
    "ramp_down_megawatts_per_s_max": "MW/s, largest tick-to-tick fall (positive), any draw",
    "events": "text, events of draw 0 starting in the interval ('job:event; ...')",
}

_DANGEROUS = ("=", "+", "-", "@", "\t", "\r")
_ISO = "%Y-%m-%dT%H:%M:%S.%fZ"


def _needs_guard(text: str) -> bool:
    # apostrophes count too, so that a text that itself starts with the guard ("'=x")
    # is guarded again and reads back unchanged
    return text.lstrip("'").startswith(_DANGEROUS)


def sanitize_cell(text: str) -> str:
    """Neutralise a text cell a spreadsheet would evaluate as a formula.

    Cells starting with ``= + - @``, tab or carriage return get a leading ``'``
    (OWASP CSV injection guidance); so do cells whose text after leading apostrophes
    starts so, which keeps the guard reversible (``read_facilities_csv`` returns the
    original text).
    """
    if text and _needs_guard(text):
        return "'" + text
    return text


def _unsanitize(text: str) -> str:
    if text.startswith("'") and _needs_guard(text[1:]):
        return text[1:]
    return text


def _iso(ts: pd.Series) -> pd.Series:
    s = pd.to_datetime(ts, utc=True).dt.strftime(_ISO)
    return s.str.replace(r"\.000000Z$", "Z", regex=True)


def facilities_frame(result, resolution="15min") -> pd.DataFrame:
    """The facilities table of a forecast (megawatts), before formatting.

    Parameters
    ----------
    result : ForecastResult
    resolution : str or float
        Interval (``'1s'``, ``'1min'``, ``'15min'`` or seconds).
    """
    sf = result.summary_frame(resolution)
    out = pd.DataFrame({
        "interval_start_utc": sf["interval_start_utc"],
        "interval_end_utc": sf["interval_end_utc"],
        "scope": sf["scope"],
    })
    for c in ("mean", "min", "max", "p10", "p90"):
        out[f"power_megawatts_{c}"] = sf[f"power_w_{c}"] / 1e6
    out["ramp_up_megawatts_per_s_max"] = sf["ramp_up_w_per_s_max"] / 1e6
    out["ramp_down_megawatts_per_s_max"] = sf["ramp_down_w_per_s_max"] / 1e6
    out["events"] = sf["events"]
    return out


def _atomic_write(path: Path, data: bytes) -> None:
    """Temporary file in the target folder, fsync, rename (see store.atomic_write_bytes)."""
    atomic_write_bytes(path, lambda tmp: Path(tmp).write_bytes(data))


def write_facilities_csv(result, path, resolution="15min",
                         generated_utc: pd.Timestamp | None = None) -> tuple[Path, Path]:
    """Write the facilities CSV and its JSON sidecar, atomically.

    Parameters
    ----------
    result : ForecastResult
    path : str or Path
        The CSV file; the sidecar is the same name with ``.json``.
    resolution : str or float, default '15min'
        Interval of the rows.
    generated_utc : Timestamp, optional
        Generation time to record (default: now).

    Returns
    -------
    (Path, Path)
        The CSV and the sidecar.
    """
    from .. import __version__

    path = Path(path)
    if not path.parent.is_dir():
        raise PowerlabError(f"cannot write {path}: folder {path.parent} does not exist")
    if path.suffix.lower() == ".json":
        raise PowerlabError(f"cannot write the CSV to {path}: its JSON sidecar would "
                            "overwrite it; name the CSV e.g. 'forecast.csv'")
    df = facilities_frame(result, resolution)
    text = pd.DataFrame({
        "interval_start_utc": _iso(df["interval_start_utc"]),
        "interval_end_utc": _iso(df["interval_end_utc"]),
        "scope": df["scope"].astype(str).map(sanitize_cell),
    })
    for c in _NUMERIC:
        text[c] = [repr(float(v)) for v in df[c].to_numpy()]
    text["events"] = df["events"].fillna("").astype(str).map(sanitize_cell)
    csv = text.to_csv(index=False, lineterminator="\r\n")
    _atomic_write(path, csv.encode("utf-8"))
    sc = result.scenario
    gen = generated_utc if generated_utc is not None else pd.Timestamp.now(tz="UTC")
    side = {
        "file": path.name,
        "columns": list(FACILITIES_COLUMNS),
        "units": UNITS,
        "resolution_s": float(pd.Timedelta(resolution).total_seconds())
        if isinstance(resolution, str) else float(resolution),
        "engine_tick_s": result.tick_s,
        "draws": result.draws,
        "seed": result.seed,
        "scenario_name": sc.name,
        "scenario_hash_sha256": sc.hash(),
        "scenario_source": sc.source,
        "powerlab_version": __version__,
        "generated_utc": gen.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
        "assumptions": [
            ("Every duration is rounded to whole engine ticks; checkpoint and evaluation "
            "intervals count training time and are rounded to whole steps."),
            ("All GPUs of a job follow one power template shifted by their own timing "
            "offset (normal jitter, truncated at 4 sigma)."),
            ("Failures are a Poisson process at gpus x failure_rate_per_gpu_h; a failure "
            "idles the job for restart_s, then start-up, then training resumes from the "
            "last checkpoint."),
            "Facility power = IT power x PUE(t) + base load - battery output.",
            ("Ramps are tick-to-tick changes of tick-mean power; the events column shows "
            "draw 0."),
        ],
        "scenario": sc.to_dict(),
    }
    jpath = path.with_suffix(".json")
    _atomic_write(jpath, json.dumps(side, indent=2, default=str).encode("utf-8"))
    return path, jpath


def read_facilities_csv(path) -> pd.DataFrame:
    """Read a facilities CSV written by :func:`write_facilities_csv`.

    Returns the same numbers (float64, exact), UTC timestamps and the event text with
    the formula guard removed.

    Raises
    ------
    ParseError
        When a column is missing or a value cannot be read (names line and column).
    """
    path = Path(path)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError) as exc:
        raise ParseError(f"cannot read facilities CSV: {exc}", path=path) from None
    missing = [c for c in FACILITIES_COLUMNS if c not in raw.columns]
    if missing:
        raise ParseError(f"missing column(s) {missing}; expected {list(FACILITIES_COLUMNS)}",
                         path=path, line=1)
    out = pd.DataFrame(index=raw.index)
    for c in ("interval_start_utc", "interval_end_utc"):
        vals = pd.to_datetime(raw[c], utc=True, format="ISO8601", errors="coerce")
        bad = np.flatnonzero(vals.isna().to_numpy())
        if len(bad):
            raise ParseError(f"expected an ISO 8601 UTC time, got {raw[c].iloc[bad[0]]!r}",
                             path=path, line=int(bad[0]) + 2, column=c)
        out[c] = vals.astype("datetime64[ns, UTC]")
    out["scope"] = raw["scope"].map(_unsanitize).astype("string")
    for c in _NUMERIC:
        vals = pd.to_numeric(raw[c], errors="coerce")
        bad = np.flatnonzero(vals.isna().to_numpy())
        if len(bad):
            raise ParseError(f"expected a number, got {raw[c].iloc[bad[0]]!r}", path=path,
                             line=int(bad[0]) + 2, column=c)
        out[c] = vals.astype("float64")
    out["events"] = raw["events"].map(_unsanitize).astype("string")
    return out
