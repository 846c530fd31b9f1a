"""Numbers and column names for people: printed reports and summary pages.

:func:`format_number` writes a number with a few significant digits, thousands
separators and no e-notation (``3.454e-09`` becomes ``3.45×10⁻⁹``); :func:`column_words`
turns a canonical column name into words with its unit (``ramp_up_megawatts_per_s`` ->
``ramp up (MW/s)``, ``exceed_probability`` -> ``probability of exceeding``).

:func:`spreadsheet_times` writes times the way every CSV for people does
(``2025-06-02 12:00:00``: Excel and LibreOffice read it as a date-time).

A base module, like :mod:`powerlab.exceptions`: any wing may import it.  It imports
pandas (for :func:`spreadsheet_times`), so the light command-line paths (``powerlab
--help``) do not import it.
"""

from __future__ import annotations

import math
import numbers
import re

import pandas as pd

__all__ = ["SPREADSHEET_TIME_FORMAT", "column_words", "format_number", "safe_frame",
           "sanitize_cell", "spreadsheet_times", "unsanitize_cell"]

#: Times in CSV files for people (facilities CSV, ``powerlab aggregate``,
#: ``powerlab export-grid``): what Excel's default import and LibreOffice Calc read as
#: date-times (docs/facilities_csv.md); the zone is named in the column (``_utc``).
SPREADSHEET_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"

def spreadsheet_times(ts, zone: str | None = "UTC") -> list[str]:
    """Times as spreadsheet-readable text in ``zone`` (default UTC; None: as they are):
    ``YYYY-MM-DD HH:MM:SS``, with ``.ffffff`` on every row when any has a fraction of a
    second; tz-naive times are taken as UTC; missing times are empty cells."""
    t = pd.DatetimeIndex(pd.to_datetime(ts))
    if zone is not None:
        t = (t.tz_localize("UTC") if t.tz is None else t).tz_convert(zone)
    frac = ((t.nanosecond != 0) | (t.microsecond != 0)) & ~t.isna()
    fmt = SPREADSHEET_TIME_FORMAT + (".%f" if frac.any() else "")
    return ["" if v is pd.NaT else v.strftime(fmt) for v in t]


# ------------------------------------------------------------- cells from user text
#: Starts of a cell a spreadsheet evaluates as a formula (OWASP, "CSV Injection").
_DANGEROUS = ("=", "+", "-", "@", "\t", "\r", "\n")


def _needs_guard(text: str) -> bool:
    # apostrophes count too, so that a text that itself starts with the guard ("'=x")
    # is guarded again and reads back unchanged
    # leading blanks and line breaks too: a spreadsheet may drop them and see the formula
    t = text.lstrip("'")
    return t.startswith(_DANGEROUS) or t.lstrip(" \t\r\n").startswith(_DANGEROUS)


def sanitize_cell(text):
    """The one escaping rule for a text cell a spreadsheet may open (CSV and xlsx).

    Cells starting with ``= + - @``, tab, carriage return or line feed (or with one of
    them after leading blanks and line breaks) get a leading ``'`` (OWASP CSV injection
    guidance [1]_); so do cells whose text after leading apostrophes starts so, which
    keeps the guard reversible (:func:`unsanitize_cell`).  Anything not a ``str`` is
    returned as it is.  HTML pages escape with :func:`html.escape` instead.

    References
    ----------
    .. [1] OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection
    """
    if isinstance(text, str) and text and _needs_guard(text):
        return "'" + text
    return text


def unsanitize_cell(text: str) -> str:
    """The text :func:`sanitize_cell` guarded, its guard removed."""
    if text.startswith("'") and _needs_guard(text[1:]):
        return text[1:]
    return text


def safe_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with :func:`sanitize_cell` applied to every text cell (object, string and
    category columns); numbers, times and untouched columns are shared, not copied."""
    out = None
    for c in df.columns:
        col = df[c]
        if not (col.dtype == object or isinstance(col.dtype, (pd.StringDtype,
                                                                pd.CategoricalDtype))):
            continue
        vals = col.astype(object)
        fixed = vals.map(sanitize_cell)
        if not fixed.equals(vals):
            out = df.copy(deep=False) if out is None else out
            out[c] = fixed
    return df if out is None else out


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def format_number(value, sig: int = 3, *, na: str = "–") -> str:
    """A number as people read it in a table.

    Parameters
    ----------
    value : number, bool or None
        Integers are written whole with thousands separators (``16,384``); booleans as
        ``yes``/``no``; None and NaN as ``na``.
    sig : int, default 3
        Significant digits of a non-integer [-]; the digits left of the decimal point are
        always kept (``1,235`` for 1234.56), trailing zeros are dropped.
    na : str, default "–"
        Text of a missing value.

    Returns
    -------
    str
        From 0.001 to 10⁹ a plain decimal (``0.00123``, ``12.3``, ``45,678``); outside
        it a power of ten (``3.45×10⁻⁹``), never e-notation.
    """
    if value is None:
        return na
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):  # numpy too
        return "yes" if value else "no"
    if not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    v = float(value)
    if math.isnan(v):
        return na
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if v == 0:
        return "0"
    a = abs(v)
    exp = math.floor(math.log10(a))
    if 1e-3 <= a < 1e9:
        decimals = max(0, sig - 1 - exp)
        text = f"{v:,.{decimals}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    mant = v / 10.0**exp
    if round(abs(mant), sig - 1) >= 10:       # 9.999e-5 rounds to 10.0: carry
        mant, exp = mant / 10, exp + 1
    m = f"{mant:.{sig - 1}f}".rstrip("0").rstrip(".")
    return f"{m}×10{str(exp).translate(_SUPERSCRIPT)}"


#: Unit suffixes of canonical names (longest first) and how a reader writes them.
_UNITS = [
    ("megawatt_hours_per_day", "MWh/day"), ("megawatts_per_min", "MW/min"),
    ("megawatts_per_s", "MW/s"), ("megawatt_hours", "MWh"), ("megawatts", "MW"),
    ("usd_per_day", "$/day"), ("w_per_s", "W/s"), ("per_day", "per day"),
    ("pct", "%"), ("ms", "ms"), ("mhz", "MHz"), ("hz", "Hz"), ("w", "W"), ("j", "J"),
    ("s", "s"), ("min", "min"), ("h", "h"), ("c", "°C"), ("pu", "p.u."), ("utc", "UTC"),
    ("fps", "frames/s"),
]
#: Whole names read better another way.
_WHOLE = {"exceed_probability": "probability of exceeding",
          "timestamp": "time", "gpu_uuid": "GPU UUID", "gpu_index": "GPU index"}
_UPPER = {"gpu", "gpus", "tdp", "tmp", "id", "rms", "pue", "nvml", "pmu", "it", "ups",
          "soc", "dvfs", "mlperf"}


def column_words(name: str) -> str:
    """A canonical column name in words, its unit in parentheses.

    ``swing_60s_megawatts`` -> ``swing 60 s (MW)``; ``throughput_loss_pct`` ->
    ``throughput loss (%)``; a name that is not snake_case is returned as it is.
    """
    name = str(name)
    if name in _WHOLE:
        return _WHOLE[name]
    if not re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", name):
        return name
    unit = ""
    for suffix, text in _UNITS:
        if name.endswith("_" + suffix):
            name, unit = name[: -len(suffix) - 1], text
            break
    words = []
    for tok in name.split("_"):
        m = re.fullmatch(r"(\d+(?:p\d+)?)(hz|s|min|h|ms)", tok)
        if m:
            num = m.group(1).replace("p", ".")
            unit_text = "Hz" if m.group(2) == "hz" else m.group(2)
            if words and re.fullmatch(r"\d+(\.\d+)?", words[-1]):   # 0p1_2hz: a band
                num = f"{words.pop()}–{num}"
            words.append(f"{num} {unit_text}")
        elif re.fullmatch(r"\d+p\d+", tok):
            words.append(tok.replace("p", "."))
        else:
            words.append(tok.upper() if tok in _UPPER else tok)
    text = " ".join(words)
    return f"{text} ({unit})" if unit else text
