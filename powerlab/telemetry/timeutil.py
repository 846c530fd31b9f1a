"""Reading times: the one rule every reader, command and analysis of powerlab follows.

Every time a user gives powerlab (a ``--start`` option, a scenario's ``start_utc``, a
store's time bound, a sacct ``Start`` column, a curtailment target) is read by
:func:`to_utc`, and every time column by :func:`series_to_utc`:

* A value that names its zone (text ending in ``Z``, ``UTC`` or an offset such as
  ``+02:00``; a tz-aware ``pandas.Timestamp``, ``datetime`` or Series) is converted to UTC.
* A value without a zone (``'2025-07-01 10:00'``, a naive ``Timestamp``,
  ``numpy.datetime64``) is read in ``tz`` when the caller names one (``tz="UTC"`` says
  "naive means UTC"), and refused otherwise: a naive time is never guessed to be UTC or
  the machine's local time.  A wall time that does not exist or is ambiguous in ``tz``
  (a daylight-saving change) is refused, never shifted.
* Text must be ISO 8601 (``YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|UTC|+HH[:MM]]``, a space for
  the ``T`` allowed): ``07/02/2025`` could be July or February, ``now`` depends on when
  it runs, so neither is guessed.
* A number is refused unless the caller says it is an epoch count (``epoch_unit="s"``,
  ``"ms"``, ...), then it is read as that many units since 1970-01-01T00:00Z.
* ``None`` is refused, or returned as ``None`` where the caller takes it as "no bound"
  (``optional=True``); ``NaT``, NaN and empty text are always refused as missing.

Times as integers: pandas keeps times at any resolution (``datetime64[s]`` to
``datetime64[ns]``; pandas 3 parses text and builds ranges at microseconds), so a time
column's raw integers (``.astype("int64")``, ``.asi8``, ``.view("i8")``) count seconds,
milliseconds, microseconds or nanoseconds depending on where the frame came from.  The
rule: powerlab never reads those raw integers as a count of a unit it assumes.  Every
place that turns times into integers does it through :func:`to_epoch_ns`, which gives
nanoseconds since 1970-01-01T00:00Z whatever the input's resolution (a ``Timestamp``'s
``.value`` is nanoseconds already); arithmetic on ``numpy.datetime64`` values goes through
``numpy.timedelta64`` units (``/ np.timedelta64(1, "s")``), never through ``.astype(float)``.
So every public function gives the same numbers for the same instants held at ``s``,
``ms``, ``us`` or ``ns`` resolution (tests/system/test_time_resolution.py sweeps them).

Bad values raise one clear error built by the caller's ``error`` (default
:class:`~powerlab.exceptions.PowerlabError`; a reader passes a
:class:`~powerlab.exceptions.ParseError` naming its file and line, a scenario a
:class:`~powerlab.exceptions.ScenarioError` naming its key), whose message starts with
``what`` (the option, key or column read).

References
----------
.. [1] ISO 8601-1:2019, Date and time -- Representations for information interchange.
.. [2] pandas, "Time zone handling",
   https://pandas.pydata.org/docs/user_guide/timeseries.html#time-zone-handling
"""

from __future__ import annotations

import datetime as _dt
import numbers
import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..exceptions import PowerlabError, SchemaError, StoreError, Violation

__all__ = ["EXAMPLE", "ISO_8601", "series_to_utc", "time_bound", "to_epoch_ns", "to_utc"]

#: The example every message shows.
EXAMPLE = "2024-05-17T15:00:00Z"

#: The ISO 8601 text :func:`to_utc` reads: a date, optionally a time (a ``T`` or a space
#: between them, seconds and fractions optional, ``,`` or ``.`` before the fraction) and
#: optionally a zone (``Z``, ``UTC`` or an offset ``+HH``, ``+HHMM``, ``+HH:MM``).
ISO_8601 = re.compile(
    r"^\d{4}-\d{2}-\d{2}"
    r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?"
    r"(?:\s?(?:[Zz]|UTC|[+-]\d{2}(?::?\d{2})?))?$")

_EPOCH_UNITS = ("s", "ms", "us", "ns")


def _missing(value) -> bool:
    if value is pd.NaT or (isinstance(value, np.datetime64) and np.isnat(value)):
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def to_utc(value, *, tz: str | None = None, what: str = "time",
           error: Callable[[str], BaseException] = PowerlabError, optional: bool = False,
           epoch_unit: str | None = None, hint: str | None = None) -> pd.Timestamp | None:
    """One time given to powerlab, as a tz-aware UTC ``pandas.Timestamp``.

    Parameters
    ----------
    value : str, pandas.Timestamp, datetime.datetime, numpy.datetime64, number or None
        The time (see the module's rule).
    tz : str, optional
        IANA zone (``"America/Chicago"``, ``"UTC"``) of a value that names none.  Without
        it such a value is refused.
    what : str, default "time"
        What the value is (``"--start"``, ``"jobs[0].start_utc"``): each message starts
        with it.
    error : callable, default PowerlabError
        Builds the exception raised for a bad value from its message (an exception class,
        or a function adding the file, line or key).
    optional : bool, default False
        Return ``None`` for ``None`` (an open bound) instead of refusing it.
    epoch_unit : {"s", "ms", "us", "ns"}, optional
        Read numbers as a count of this unit since the Unix epoch [UTC]; without it
        numbers are refused.
    hint : str, optional
        What else the user may do about a time without a zone (``"pass --tz"``), added to
        that message.

    Returns
    -------
    pandas.Timestamp or None
        tz-aware, in UTC (the resolution pandas parsed, seconds to nanoseconds).

    Raises
    ------
    Exception
        ``error(message)`` for a missing, unreadable, zone-less (without ``tz``),
        nonexistent or ambiguous time.
    """
    if value is None:
        if optional:
            return None
        raise error(f"{what} is missing; give an ISO 8601 time such as {EXAMPLE!r}")
    _refuse_non_time(value, what, error)
    if isinstance(value, numbers.Real) and not isinstance(value, np.datetime64):
        return _from_epoch(value, what, error, epoch_unit)
    ts, value = _parse(value, what, error)
    if ts.tzinfo is None:
        ts = _localize(ts, value, tz, what, error, hint)
    return _in_range(ts.tz_convert("UTC"), value, what, error)


#: The times powerlab takes: pandas' nanosecond range (1677-09-21 to 2262-04-11) less a
#: year at each end, so that a window or tick added to a bound cannot overflow.
FIRST, LAST = pd.Timestamp("1678-01-01T00:00Z"), pd.Timestamp("2261-12-31T23:59:59Z")


def _in_range(ts: pd.Timestamp, value, what: str, error) -> pd.Timestamp:
    """``ts`` if it lies in [FIRST, LAST], else ``error``."""
    if not FIRST <= ts <= LAST:
        raise error(f"{what} {value!r} is outside the times powerlab reads "
                    f"({FIRST:%Y-%m-%d} to {LAST:%Y-%m-%d})")
    return ts


def _refuse_non_time(value, what: str, error) -> None:
    """Refuse a missing value (NaT, NaN, empty text) and a boolean."""
    if _missing(value):
        raise error(f"{what} is missing (got {value!r}); give an ISO 8601 time such as "
                    f"{EXAMPLE!r}")
    if isinstance(value, (bool, np.bool_)):
        raise error(f"{what} {value!r} is not a time; give an ISO 8601 time such as "
                    f"{EXAMPLE!r}")


def _from_epoch(value, what: str, error, epoch_unit: str | None) -> pd.Timestamp:
    """A number as a count of ``epoch_unit`` since 1970-01-01T00:00Z (refused without
    one)."""
    if epoch_unit is None:
        raise error(f"{what} {value!r} is a number, not a time; give an ISO 8601 time "
                    f"such as {EXAMPLE!r}")
    if epoch_unit not in _EPOCH_UNITS:
        raise ValueError(f"epoch_unit must be one of {_EPOCH_UNITS}, got {epoch_unit!r}")
    if not np.isfinite(float(value)):
        raise error(f"{what} {value!r} is not a finite epoch time")
    try:
        ts = pd.Timestamp(value, unit=epoch_unit, tz="UTC")
    except (ValueError, OverflowError) as exc:
        raise error(f"{what} {value!r} [{epoch_unit} since 1970] is out of range: "
                    f"{exc}") from None
    return _in_range(ts, value, what, error)


def _parse(value, what: str, error) -> tuple[pd.Timestamp, object]:
    """ISO 8601 text or a datetime-like value as a ``Timestamp`` (zone kept, if any), and
    the value as read (text stripped, a decimal comma as a point)."""
    if isinstance(value, str):
        text = value.strip()
        if not ISO_8601.match(text):
            raise error(f"{what} {value!r} is not an ISO 8601 time such as {EXAMPLE!r}")
        value = text.replace(",", ".")
    elif not isinstance(value, (pd.Timestamp, _dt.datetime, _dt.date, np.datetime64)):
        raise error(f"{what} {value!r} is not a time; give an ISO 8601 time such as "
                    f"{EXAMPLE!r}")
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError) as exc:   # 2025-02-30, year 10000, ...
        raise error(f"{what} {value!r} is not a valid time: {exc}") from None
    if ts is pd.NaT:
        raise error(f"{what} is missing (got {value!r})")
    return ts, value


def _localize(ts: pd.Timestamp, value, tz: str | None, what: str, error,
              hint: str | None) -> pd.Timestamp:
    """A zone-less time read in ``tz`` (refused without one, or where the wall time
    does not exist or is ambiguous there)."""
    if tz is None:
        also = f", or {hint}" if hint else ""
        raise error(f"{what} {value!r} has no time zone; write it in UTC with a trailing "
                    f"'Z' (e.g. {EXAMPLE!r}){also}")
    try:
        return ts.tz_localize(tz, ambiguous="raise", nonexistent="raise")
    except Exception as exc:  # noqa: BLE001 - pandas/zoneinfo raise several types
        raise error(f"{what} {value!r} in {tz}: {exc} (a time that does not exist or is "
                    "ambiguous there, or an unknown zone)") from None


def time_bound(value, what: str = "time bound") -> pd.Timestamp | None:
    """A ``start``/``end`` bound of a store read or aggregation: ``None`` (open) or a time
    by :func:`to_utc` (no ``tz``: a zone-less bound is refused), else a
    :class:`~powerlab.exceptions.StoreError`."""
    return to_utc(value, what=what, error=StoreError, optional=True)


def series_to_utc(values: pd.Series, *, tz: str | None = None, what: str | None = None,
                  error: Callable[[str], BaseException] = PowerlabError) -> pd.Series:
    """A time column as tz-aware UTC, by the rule of :func:`to_utc`.

    Parameters
    ----------
    values : pandas.Series
        ``datetime64`` values, tz-aware or (with ``tz``) naive.
    tz : str, optional
        IANA zone of naive values; without it naive values are refused.
    what : str, optional
        Name used in messages (default: the Series' name, else ``"timestamp"``).
    error : callable, default PowerlabError
        Builds the exception for a bad column from its message.

    Returns
    -------
    pandas.Series
        Same index and resolution, dtype ``datetime64[..., UTC]``.
    """
    what = what or (str(values.name) if values.name is not None else "timestamp")
    dtype = values.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        return values.dt.tz_convert("UTC")
    if not pd.api.types.is_datetime64_dtype(dtype):
        raise error(f"{what}: timestamps must be tz-aware UTC, got {dtype}")
    if tz is None:
        raise error(f"{what}: timestamps must be tz-aware UTC, got {dtype} (no time zone)")
    try:
        return values.dt.tz_localize(tz, ambiguous="raise", nonexistent="raise") \
            .dt.tz_convert("UTC")
    except Exception as exc:  # noqa: BLE001 - pandas/zoneinfo raise several types
        raise error(f"{what}: times in {tz}: {exc}") from None


def to_epoch_ns(values, *, what: str | None = None) -> np.ndarray:
    """Times as int64 nanoseconds since 1970-01-01T00:00Z, whatever their resolution.

    The one way powerlab turns times into integers (see the module's rule): the raw
    integers of a ``datetime64[us, UTC]`` column count microseconds, not nanoseconds.

    Parameters
    ----------
    values : pandas.Series, pandas.DatetimeIndex, DatetimeArray or numpy.ndarray
        ``datetime64`` values of any unit (``s``, ``ms``, ``us``, ``ns``).  Tz-aware
        values give their instant (any zone); naive values give the count of their wall
        time since 1970-01-01 (the caller decides what zone that wall time is in).
    what : str, optional
        The column named in errors (default: the Series' name, else ``"timestamp"``).

    Returns
    -------
    numpy.ndarray
        int64 [ns since the Unix epoch], one per value (``NaT`` becomes the int64
        minimum, as in pandas).  Read-only where it shares memory with ``values``
        (nanosecond input: no copy is made); ``.copy()`` it to modify it.

    Raises
    ------
    powerlab.exceptions.SchemaError
        For values that are not ``datetime64`` (integers, text and objects are not
        guessed to be times), or a time that nanoseconds since 1970 cannot hold (before
        1677-09-21 or after 2262-04-11).
    """
    if what is None:
        name = getattr(values, "name", None)
        what = str(name) if name is not None else "timestamp"
    if isinstance(values, pd.Series):
        values = values.array
    dtype = getattr(values, "dtype", None)
    if dtype is None or not (isinstance(dtype, pd.DatetimeTZDtype)
                             or (isinstance(dtype, np.dtype) and dtype.kind == "M")):
        raise SchemaError([Violation(what, "times must be datetime64 values (tz-aware "
                                           f"UTC), got {dtype or type(values).__name__}")])
    idx = pd.DatetimeIndex(values, copy=False)
    if idx.unit == "ns":
        out = idx.asi8.view()
        out.flags.writeable = False     # the input's own memory: never written through
        return out
    try:
        return idx.as_unit("ns").asi8
    except (OverflowError, ValueError) as exc:   # OutOfBoundsDatetime is a ValueError
        raise SchemaError([Violation(what, "times outside the nanosecond range "
                                           f"1677-09-21..2262-04-11: {exc}")]) from None
