"""Power playback files for grid-study tools: PSCAD, PowerFactory and plain CSV.

A grid study replays the site's active power at the point of interconnection as a time
series; given the site's equipment (:mod:`powerlab.interconnect.equipment`) also its
reactive power Q [Mvar] and, with the short-circuit level, the voltage V [pu] there, as
further columns after P (PSCAD: time, P, Q, V; PowerFactory: the first line is then the
number of variables, 2 or 3; CSV: ``reactive_power_megavars``, ``voltage_pu``).  The playback is one trajectory - one forecast draw or a measured trace - never a
quantile across draws, which no real site would follow.

By default the file holds the series at its own tick (a 0.1-s forecast: every tick, the
band up to 5 Hz).  Asked to resample (``step_s`` a whole number of ticks),
:func:`playback_frame` averages blocks of ticks and stamps each mean at the **midpoint**
of its samples (the mean of their times), so the playback does not lag the series; a
partial last block is dropped, and nothing finer than the tick is invented.  Block means
of 1 s stamped at the block start exported 1 and 2 Hz content as 0, 0.25-0.5 Hz content
at 0.64 x its peak-to-peak, 0.5 s late (issue 20, item 5).  Every file that has a header
says which band it can represent (:func:`represented_band`): 0 Hz up to the Nyquist
frequency of its step, and for block means the frequency they pass at -3 dB.  The
writers lay it out:

``pscad``
    PSCAD Master Library *File Read* component, "pre-defined time step" mode: the first
    line is a comment starting with ``!`` (PSCAD requires the first line to be blank or a
    comment), then whitespace-separated columns, time [s] first starting at 0.0, power
    [MW] after, in ``E`` notation; one data column (PSCAD reads at most 10 after time).
``powerfactory``
    DIgSILENT PowerFactory measurement file (``ElmFile``): the first line is the number of
    variables without time (``1``), then rows of time [s] and power [MW] separated by a
    blank, ``.`` as decimal separator, no empty line, at most 1024 characters a line.
    Time-characteristic (``ChaTime``) files read the same two columns.
``csv``
    Plain CSV: one comment line (``#``) with the represented band, then one header line
    naming the units: ``time_s, timestamp_utc, power_megawatts``; the times written
    ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC, which spreadsheets read as date-times (the
    facilities CSV's form, ``docs/facilities_csv.md``).

References
----------
.. [1] PSCAD Online Help, Master Library, Miscellaneous, "File Read" and its "Data File
   Format" page (Manitoba Hydro International).
.. [2] DIgSILENT PowerFactory Technical Reference, "Measurement File (ElmFile)"; DIgSILENT
   FAQ "How can I set characteristics using an external file?".
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .._format import spreadsheet_times
from .._options import choice, renamed_keywords
from ..exceptions import PowerlabError
from ..outputs import atomic_write
from .equipment import trace_pq, voltage_at_poi_pu

__all__ = [
    "FORMATS",
    "playback_frame",
    "represented_band",
    "step_ticks",
    "write_grid_playback",
]

#: Formats and their usual file suffixes.
FORMATS = {"pscad": ".txt", "powerfactory": ".txt", "csv": ".csv"}


def step_ticks(step_s: float, tick_s: float) -> int:
    """Ticks in one playback step; refuses a step finer than the tick or not a whole
    number of ticks [-]."""
    if not (isinstance(step_s, (int, float)) and math.isfinite(step_s) and step_s > 0):
        raise PowerlabError(f"step_s must be a positive number of seconds, got {step_s!r}")
    if step_s < tick_s * (1 - 1e-9):
        raise PowerlabError(f"step {step_s:g} s is finer than the data's {tick_s:g}-s "
                            "ticks; a playback cannot invent finer detail")
    k = round(step_s / tick_s)
    if abs(k * tick_s - step_s) > 1e-6 * step_s:
        raise PowerlabError(f"step {step_s:g} s is not a whole number of ticks of "
                            f"{tick_s:g} s")
    return k


def represented_band(step_s: float, tick_s: float) -> tuple[float, float, str]:
    """What a playback of ``step_s`` steps from a ``tick_s`` series can represent.

    Returns
    -------
    (float, float, str)
        The Nyquist frequency of the step ``0.5 / step_s`` [Hz], the frequency its block
        means pass at -3 dB (the Nyquist frequency when nothing is averaged) [Hz], and
        one line saying so.
    """
    k = step_ticks(step_s, tick_s)
    nyq = 0.5 / step_s
    if k == 1:
        return nyq, nyq, (f"represents 0-{nyq:g} Hz (Nyquist frequency of the "
                          f"{step_s:g}-s series, not resampled)")
    f = np.linspace(1e-9, nyq, 20001)        # amplitude response of a K-tick mean [-]
    gain = np.abs(np.sin(np.pi * f * k * tick_s) / (k * np.sin(np.pi * f * tick_s)))
    f3 = float(f[np.flatnonzero(gain >= 2 ** -0.5)[-1]])
    return nyq, f3, (f"represents 0-{nyq:g} Hz (Nyquist frequency of {step_s:g}-s steps); "
                     f"{step_s:g}-s means of {tick_s:g}-s ticks pass {f3:.3g} Hz at -3 dB "
                     f"and {float(gain[-1]):.2f} of the amplitude at {nyq:g} Hz; content "
                     "above is lost; stamped at block midpoints")


#: Value columns of a playback and their labels in file headers.
_COLUMNS = {"power_megawatts": "P [MW]", "reactive_power_megavars": "Q [Mvar]",
            "voltage_pu": "V [pu]"}


@renamed_keywords(scope="boundary")
def playback_frame(trace, *, step_s: float | None = None, boundary: str = "facility",
                   equipment=None) -> pd.DataFrame:
    """The playback series: the trace at its tick, or block means over ``step_s``.

    Parameters
    ----------
    trace : PowerTrace
        One forecast draw or a measured trace.
    step_s : float, optional
        Playback step, a whole number of the trace's ticks (default: the tick, no
        resampling) [s].
    boundary : {'facility', 'it'}
        Which power (facility: at the point of interconnection).
    equipment : SiteEquipment, optional
        The site's front end (:mod:`powerlab.interconnect.equipment`): with it and the
        facility boundary, also Q at the point of interconnection
        (:func:`~powerlab.interconnect.equipment.trace_pq`) and, when it states the
        short-circuit level, the voltage there
        (:func:`~powerlab.interconnect.equipment.voltage_at_poi_pu`).

    Returns
    -------
    DataFrame
        ``time_s`` (from 0 at the first row), ``timestamp_utc`` (the midpoint of each
        block's samples; the sample's own time without resampling), ``power_megawatts``
        (mean over the block); with ``equipment``, ``reactive_power_megavars`` and
        ``voltage_pu`` (block means of the per-tick values).
    """
    x = np.asarray(trace.power_w(boundary), dtype=float)
    cols = {"power_megawatts": x / 1e6}
    if equipment is not None and boundary == "facility":
        p, q = trace_pq(trace, equipment)
        cols["reactive_power_megavars"] = q / 1e6
        if equipment.poi.short_circuit_mva:
            cols["voltage_pu"] = voltage_at_poi_pu(p, q, equipment.poi)
    step_s = float(trace.tick_s) if step_s is None else step_s
    k = step_ticks(step_s, trace.tick_s)
    n = len(x) // k
    if n < 2:
        raise PowerlabError(f"the series holds fewer than two {step_s:g}-s steps")
    mid_s = (k - 1) / 2 * trace.tick_s          # mean time of a block's samples
    t = np.arange(n) * step_s
    out = pd.DataFrame({
        "time_s": t,
        "timestamp_utc": pd.Timestamp(trace.start_utc) + pd.to_timedelta(t + mid_s,
                                                                         unit="s")})
    for name, v in cols.items():
        out[name] = v[: n * k].reshape(n, k).mean(axis=1)
    return out


def _values(frame: pd.DataFrame) -> list[str]:
    """The frame's value columns, in file order."""
    return [c for c in _COLUMNS if c in frame.columns]


def _pscad(frame: pd.DataFrame, title: str) -> str:
    head = "! " + " ".join(title.split())   # one line: PSCAD allows only one header line
    buf = io.StringIO()
    np.savetxt(buf, frame[["time_s", *_values(frame)]].to_numpy(), fmt="%16.8E",
               delimiter="")
    return head + "\n" + buf.getvalue()


def _powerfactory(frame: pd.DataFrame) -> str:
    cols = _values(frame)
    buf = io.StringIO()
    np.savetxt(buf, frame[["time_s", *cols]].to_numpy(), fmt="%.6f", delimiter=" ")
    return f"{len(cols)}\n" + buf.getvalue()


def _csv(frame: pd.DataFrame, band: str) -> str:
    out = pd.DataFrame({
        "time_s": frame["time_s"].map("{:.6f}".format),
        # the spreadsheet-readable form of every CSV for people (docs/facilities_csv.md)
        "timestamp_utc": spreadsheet_times(frame["timestamp_utc"]),
    })
    for c in _values(frame):
        out[c] = frame[c].map("{:.6f}".format)
    return "# " + band + "\n" + out.to_csv(index=False, lineterminator="\n")


@renamed_keywords(scope="boundary")
def write_grid_playback(trace, path, fmt: str, *, step_s: float | None = None,
                        boundary: str = "facility", equipment=None) -> Path:
    """Write the site's power playback for a grid-study tool (atomically).

    Parameters
    ----------
    trace : PowerTrace
        One forecast draw (:func:`~powerlab.interconnect.powertrace.forecast_trace`) or a
        measured trace (:func:`~powerlab.interconnect.powertrace.trace_from_telemetry`).
    path : path-like
        File to write.
    fmt : {'pscad', 'powerfactory', 'csv'}
        Layout (see the module docstring).
    step_s : float, optional
        Playback step, a whole number of ticks (default: the trace's tick) [s].
    boundary : {'facility', 'it'}
    equipment : SiteEquipment, optional
        Adds Q (and V with a short-circuit level) at the point of interconnection
        (:func:`playback_frame`).

    Returns
    -------
    Path

    Notes
    -----
    PSCAD and CSV files carry the represented band in their header; PowerFactory's
    ElmFile has no comment line (its first line is the number of variables), so for it
    the band is what :func:`represented_band` (and ``powerlab export-grid``) says.  Time
    0 of a PSCAD or PowerFactory file is the first row's stamp (a block midpoint when
    resampled), which the PSCAD header gives in UTC.
    """
    choice(fmt, "format", FORMATS)
    frame = playback_frame(trace, step_s=step_s, boundary=boundary, equipment=equipment)
    step = float(trace.tick_s) if step_s is None else float(step_s)
    band = represented_band(step, trace.tick_s)[2]
    t0 = frame["timestamp_utc"].iloc[0]
    if fmt == "pscad":
        labels = ", ".join(_COLUMNS[c] for c in _values(frame))
        title = (f"powerlab {boundary} playback; columns: time [s], {labels}; t = 0 at "
                 f"{t0.isoformat()}; step {step:g} s; {band}; {trace.description}")
        text = _pscad(frame, title)
    elif fmt == "powerfactory":
        text = _powerfactory(frame)
    else:
        text = _csv(frame, band)
    p = Path(path)
    if p.is_dir():
        raise PowerlabError(f"{p} is a folder; give a file name")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PowerlabError(f"cannot create the folder of {p}: {exc.strerror or exc}") \
            from None
    return atomic_write(p, lambda tmp: Path(tmp).write_text(text, "ascii",
                                                            errors="replace"))
