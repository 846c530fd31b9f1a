"""COMTRADE playback files (IEEE C37.111): the site's power as a transient record that
protection and power-quality tools, and most grid-study programs, read.

:func:`write_comtrade` writes the two files of an ASCII record:

``NAME.cfg`` (configuration, IEEE C37.111-1999 clause 6 / C37.111-2013 clause 7), one
item per line, fields separated by commas::

    station_name,rec_dev_id,rev_year
    TT,##A,##D                          total channels, analog ("A"), status ("D")
    An,ch_id,ph,ccbm,uu,a,b,skew,min,max,primary,secondary,PS   one line per analog channel
    lf                                  line frequency [Hz]
    nrates                              number of sampling rates (1)
    samp,endsamp                        sampling rate [Hz], number of the last sample
    dd/mm/yyyy,hh:mm:ss.ssssss          time of the first data point
    dd/mm/yyyy,hh:mm:ss.ssssss          time of the trigger point (the first point here)
    ft                                  file type: ASCII
    timemult                            multiplier of the .dat time stamps (1: microseconds)
    time_code,local_code                (2013 only) time zone of the stamps: 0,0 = UTC
    tmq_code,leapsec                    (2013 only) time quality 0 (locked), no leap second

``NAME.dat`` (data, ASCII): one line per sample, ``n,timestamp,A1,A2,...`` with the sample
number from 1, the time stamp in microseconds from the first point, and each analog value
as an integer ``x`` whose physical value is ``a * x + b`` (in the channel's unit ``uu``).
The integers span -99998 ... 99998 (99999 marks a missing value in ASCII files and is not
used), so the quantisation step is ``a`` = the channel's range / 199996 (about 1e-5 of
the range; :func:`write_comtrade` returns it).  Time stamps are UTC; a record is at most
9,999,999,999 samples.

Reading back needs the optional ``comtrade`` package (``pip install powerlab[comtrade]``;
:func:`read_comtrade`); writing needs nothing beyond numpy.

References
----------
.. [1] IEEE Std C37.111-1999, "IEEE Standard Common Format for Transient Data Exchange
   (COMTRADE) for Power Systems", clauses 5-7.
.. [2] IEEE Std C37.111-2013 / IEC 60255-24:2013, same title, clause 7 (configuration
   file additions: time_code, local_code, tmq_code, leapsec).
.. [3] D. Parrini, ``comtrade`` Python package (reader), https://pypi.org/project/comtrade/.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .._options import choice
from ..exceptions import ParseError, PowerlabError
from ..outputs import atomic_write
from ..telemetry.timeutil import to_utc
from .equipment import trace_pq, voltage_at_poi_pu

__all__ = [
    "ASCII_MAX",
    "read_comtrade",
    "write_comtrade",
    "write_comtrade_header",
    "write_trace_comtrade",
]

#: Largest magnitude of an ASCII data value used (99999 marks a missing value) [-].
ASCII_MAX = 99998

_REVISIONS = (1999, 2013)
_FIELD = re.compile(r"[^A-Za-z0-9 _.\-+/()\[\]#:%]")


def _field(text: str, what: str, limit: int = 64) -> str:
    """A cfg text field: printable ASCII without commas (the field separator), at most
    ``limit`` characters; anything else is refused, not silently cut or rewritten (the
    full description of a record goes into its ``.hdr`` header file)."""
    s = " ".join(str(text).split())
    if not s:
        raise PowerlabError(f"COMTRADE {what} is empty")
    if len(s) > limit or _FIELD.search(s):
        raise PowerlabError(f"COMTRADE {what} {s[:80]!r} must be at most {limit} printable "
                            "ASCII characters without commas (C37.111 cfg field); put "
                            "longer text in the header (.hdr)")
    return s


def _stamp(ts: pd.Timestamp) -> str:
    ts = ts.tz_convert("UTC")
    return f"{ts:%d/%m/%Y},{ts:%H:%M:%S}.{ts.microsecond:06d}"


def write_comtrade(path, channels: Mapping[str, np.ndarray], tick_s: float, start_utc, *,
                   unit: str | Mapping[str, str] = "MW", station_name: str = "powerlab",
                   rec_dev_id: str = "powerlab", rev_year: int = 1999,
                   line_frequency_hz: float = 60.0) -> dict:
    """Write an ASCII COMTRADE record (``.cfg`` and ``.dat``) of analog channels.

    Parameters
    ----------
    path : path-like
        The record's name; ``.cfg`` and ``.dat`` are written beside each other (a
        ``.cfg``/``.dat`` suffix on ``path`` is replaced).
    channels : mapping of str to array_like
        Channel name to values, all of the same length, in ``unit``.
    tick_s : float
        Sample spacing [s] (the sampling rate written is ``1 / tick_s``).
    start_utc : datetime-like
        Time of the first sample (tz-aware).
    unit : str or mapping of str to str, default "MW"
        Unit of the values (``uu``), one for all channels or per channel name.
    station_name, rec_dev_id : str
        Written on the first line: at most 64 printable ASCII characters, no commas
        (refused otherwise, never cut).
    rev_year : {1999, 2013}
    line_frequency_hz : float, default 60
        Nominal line frequency ``lf`` [Hz] (50 or 60: the system the record is for).

    Returns
    -------
    dict
        ``cfg`` and ``dat`` (the paths) and ``resolution`` (channel name to the
        quantisation step ``a``, in its unit).  :func:`write_comtrade_header` adds the
        optional header file.
    """
    choice(rev_year, "rev_year", _REVISIONS)
    if not (isinstance(tick_s, (int, float)) and math.isfinite(tick_s) and tick_s > 0):
        raise PowerlabError(f"tick_s must be a positive number, got {tick_s!r}")
    start = to_utc(start_utc, what="start_utc")
    data = _checked_channels(channels)
    n = len(next(iter(data.values())))
    units = _units(unit, data, line_frequency_hz)
    lines = [(f"{_field(station_name, 'station name')},{_field(rec_dev_id, 'device id')},"
             f"{rev_year}"),
             f"{len(data)},{len(data)}A,0D"]
    ints, resolution = [], {}
    for i, (name, v) in enumerate(data.items(), start=1):
        lo, hi = float(v.min()), float(v.max())
        b = 0.5 * (lo + hi)
        a = (hi - lo) / (2 * ASCII_MAX) if hi > lo else max(abs(b), 1.0) / ASCII_MAX
        x = np.rint((v - b) / a).astype(np.int64)
        ints.append(x)
        resolution[name] = a
        lines.append(f"{i},{name},,,{units[name]},{a:.12g},{b:.12g},0,{int(x.min())},"
                     f"{int(x.max())},1,1,P")
    lines += [f"{line_frequency_hz:g}", "1", f"{1.0 / tick_s:.12g},{n}",
              _stamp(start), _stamp(start), "ASCII", "1"]
    if rev_year == 2013:
        lines += ["0,0", "0,0"]
    cfg_text = "\r\n".join(lines) + "\r\n"
    stamps = np.rint(np.arange(n) * tick_s * 1e6).astype(np.int64)
    table = np.column_stack([np.arange(1, n + 1), stamps, *ints])
    buf = io.StringIO()
    np.savetxt(buf, table, fmt="%d", delimiter=",", newline="\r\n")
    cfg, dat = _write_record(path, cfg_text, buf.getvalue())
    return {"cfg": cfg, "dat": dat, "resolution": resolution}


def _units(unit, data: dict, line_frequency_hz) -> dict:
    """Each channel's ``uu`` (one unit for all, or one per channel), after checking the
    line frequency."""
    if not (isinstance(line_frequency_hz, (int, float)) and line_frequency_hz > 0):
        raise PowerlabError(f"line_frequency_hz must be a positive number, got "
                            f"{line_frequency_hz!r}")
    if isinstance(unit, Mapping) and not set(unit) >= set(data):
        raise PowerlabError(f"units given for {sorted(unit)}, channels are {sorted(data)}")
    return {k: _field(unit[k] if isinstance(unit, Mapping) else unit, "unit", 32)
            for k in data}


def write_comtrade_header(cfg_path, text: str) -> Path:
    """Write the optional header file ``NAME.hdr`` beside ``NAME.cfg`` (C37.111 clause 5:
    free ASCII text for people, e.g. what the record is and where it comes from)."""
    body = text.encode("ascii", "replace").decode("ascii").replace("\n", "\r\n")
    return atomic_write(Path(cfg_path).with_suffix(".hdr"),
                        lambda tmp: Path(tmp).write_bytes((body + "\r\n").encode()))


def _checked_channels(channels: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The channels as float arrays under their cfg ids: at least one, ids distinct, the
    same number of samples (1 to 9,999,999,999), finite 1-D values."""
    if not channels:
        raise PowerlabError("a COMTRADE record needs at least one channel")
    data = {_field(k, "channel name"): np.asarray(v, dtype=float) for k, v in channels.items()}
    if len(data) != len(channels):
        raise PowerlabError("channel names collide once written as COMTRADE ids")
    n = {len(v) for v in data.values()}
    if len(n) != 1:
        raise PowerlabError("all COMTRADE channels need the same number of samples")
    n = n.pop()
    if n < 1 or n > 9_999_999_999:
        raise PowerlabError(f"a COMTRADE record holds 1 to 9,999,999,999 samples, got {n}")
    for k, v in data.items():
        if v.ndim != 1 or not np.isfinite(v).all():
            raise PowerlabError(f"channel {k!r}: expected finite 1-D values")
    return data


def _write_record(path, cfg_text: str, dat_text: str) -> tuple[Path, Path]:
    """Write ``NAME.cfg`` and ``NAME.dat`` atomically (a ``.cfg``/``.dat`` suffix on
    ``path`` replaced), the folder created."""
    p = Path(path)
    if p.suffix.lower() in (".cfg", ".dat"):
        p = p.with_suffix("")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PowerlabError(f"cannot create the folder of {p}: {exc.strerror or exc}") \
            from None
    cfg = atomic_write(p.with_name(p.name + ".cfg"),
                       lambda tmp: Path(tmp).write_bytes(cfg_text.encode("ascii")))
    dat = atomic_write(p.with_name(p.name + ".dat"),
                       lambda tmp: Path(tmp).write_bytes(dat_text.encode("ascii")))
    return cfg, dat


def write_trace_comtrade(trace, path, *, rev_year: int = 1999,
                         line_frequency_hz: float = 60.0, equipment=None) -> dict:
    """Write a :class:`~powerlab.interconnect.powertrace.PowerTrace` as COMTRADE, one
    sample per tick: ``P_facility`` (active power at the point of interconnection, when
    the trace has it) [MW]; with ``equipment`` (a
    :class:`~powerlab.interconnect.equipment.SiteEquipment`) also ``Q_facility``
    (:func:`~powerlab.interconnect.equipment.trace_pq`) [Mvar] and, when it states the
    short-circuit level, ``V_POI``
    (:func:`~powerlab.interconnect.equipment.voltage_at_poi_pu`) [pu]; then ``P_IT``
    [MW].  ``line_frequency_hz`` is written as ``lf``.  The first cfg line names
    ``powerlab`` and a short record id (``forecast draw N`` or ``measured``); the trace's
    full description goes into the header file ``NAME.hdr``."""
    ch, units = {}, {}
    if trace.facility_w is not None:
        ch["P_facility"], units["P_facility"] = np.asarray(trace.facility_w) / 1e6, "MW"
        if equipment is not None:
            p, q = trace_pq(trace, equipment)
            ch["Q_facility"], units["Q_facility"] = q / 1e6, "Mvar"
            if equipment.poi.short_circuit_mva:
                ch["V_POI"] = voltage_at_poi_pu(p, q, equipment.poi)
                units["V_POI"] = "pu"
    ch["P_IT"], units["P_IT"] = np.asarray(trace.it_w) / 1e6, "MW"
    rid = ("measured" if "measured" in (trace.description or "").lower()
           or "telemetry" in (trace.description or "").lower()
           else f"forecast draw {int(getattr(trace, 'draw', 0))}")
    head = (f"powerlab playback record; {trace.description or 'trace'}; channels: "
            + ", ".join(f"{k} [{u}]" for k, u in units.items())
            + f"; nominal frequency {line_frequency_hz:g} Hz; times UTC")
    out = write_comtrade(path, ch, trace.tick_s, trace.start_utc, unit=units,
                         station_name="powerlab", rec_dev_id=rid, rev_year=rev_year,
                         line_frequency_hz=line_frequency_hz)
    out["hdr"] = write_comtrade_header(out["cfg"], head)
    return out


def read_comtrade(path) -> pd.DataFrame:
    """Read a COMTRADE record back with the ``comtrade`` package.

    Parameters
    ----------
    path : path-like
        The ``.cfg`` file (the ``.dat`` beside it is read too).

    Returns
    -------
    DataFrame
        ``time_s`` and one column per analog channel (physical values), with
        ``attrs["start_utc"]``, ``attrs["sampling_rate_hz"]``, ``attrs["rev_year"]`` and
        ``attrs["units"]`` (channel to unit).
    """
    try:
        import comtrade
    except ImportError:
        raise PowerlabError("reading COMTRADE needs the comtrade package: "
                            "pip install 'powerlab[comtrade]'") from None
    p = Path(path)
    if p.suffix.lower() != ".cfg":
        p = p.with_name(p.name + ".cfg") if p.suffix.lower() != ".dat" else p.with_suffix(".cfg")
    if not p.is_file() or not p.with_suffix(".dat").is_file():
        raise ParseError("no such COMTRADE record (.cfg and .dat)", path=p)
    rec = comtrade.Comtrade(ignore_warnings=True)
    try:
        rec.load(str(p), str(p.with_suffix(".dat")))
    except (comtrade.ComtradeError, ValueError, IndexError, KeyError, TypeError, OSError,
            UnicodeDecodeError) as exc:
        raise ParseError(f"cannot read as COMTRADE: {exc}", path=p) from None
    out = pd.DataFrame({"time_s": np.asarray(rec.time, dtype=float)})
    for name, values in zip(rec.analog_channel_ids, rec.analog):
        out[name] = np.asarray(values, dtype=float)
    cfg = rec.cfg
    out.attrs.update(start_utc=pd.Timestamp(cfg.start_timestamp, tz="UTC"),
                     sampling_rate_hz=float(cfg.sample_rates[0][0]),
                     rev_year=str(cfg.rev_year),
                     units={c.name: c.uu for c in cfg.analog_channels})
    return out
