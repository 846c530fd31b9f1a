"""The oscillation spectrum: power spectral density on log-log axes with the regulated
frequency bands shaded (red where a band's measured value exceeds its limit) and,
optionally, the spectral lines of :func:`powerlab.interconnect.lines.flag_lines` as
vertical rules coloured by what they are (flagged; material, a rhythm harmonic;
significant only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._options import Options
from ..exceptions import SchemaError, Violation
from .prepare import axis_label, require_columns
from .render import PALETTE, alt, sized

__all__ = ["SpectrumColumns", "spectrum_chart"]

#: Colour of a band by its status against its limit.
_STATUS_COLORS = {"band": "#888888", "within limit": "#009E73", "over limit": "#D55E00"}
#: Colour of a spectral line by its status.
_LINE_COLORS = {"flagged": "#D55E00", "material harmonic": "#0072B2",
                "significant": "#BBBBBB"}


@dataclass(frozen=True)
class SpectrumColumns(Options):
    """Column names of a spectrum for :func:`spectrum_chart`.

    Attributes
    ----------
    frequency : str, default "frequency_hz"
        Frequency [Hz].
    value : str, default "psd"
        Power spectral density (e.g. [MW²/Hz]).
    series : str or None
        One line per value of this column; None: one line.
    """

    frequency: str = "frequency_hz"
    value: str = "psd"
    series: str | None = None


def spectrum_chart(spectrum: pd.DataFrame, *, columns: SpectrumColumns | None = None,
                   bands: Sequence[tuple[float, float]] | pd.DataFrame = ((0.1, 2.0),
                                                                           (2.0, 20.0)),
                   value_title: str | None = None, max_points: int = 800,
                   title: str | None = None, width: int | None = None,
                   height: int | None = None, lines: pd.DataFrame | None = None,
                   **column_kw) -> alt.LayerChart:
    """Oscillation spectrum (log-log) with the regulated frequency bands shaded.

    Parameters
    ----------
    spectrum : pandas.DataFrame
        ``frequency`` [Hz] and ``value`` (power spectral density, e.g. [MW²/Hz]) columns,
        optional ``series``; rows at zero frequency are dropped (log axis).
    columns : SpectrumColumns, optional
        Column names of ``frequency``, ``value`` and ``series`` (default
        ``SpectrumColumns()``: ``frequency_hz``, ``psd``, no series).
    bands : sequence of (low_hz, high_hz) or DataFrame
        Bands to shade.  A DataFrame needs ``low_hz`` and ``high_hz`` and may carry
        ``label``, ``measured`` and ``limit`` columns (shown in the tooltip; a band whose
        ``measured`` exceeds ``limit`` is shaded red).
    value_title : str, optional
        Axis title of the density (default from the column name).
    max_points : int, default 800
        Spectra longer than this are reduced to log-spaced frequency bins (mean density).
    title : str, optional
    width, height : int, optional
    lines : DataFrame, optional
        Spectral lines (``frequency_hz``, ``amplitude_megawatts``, ``flagged``,
        ``material``, ``attribution``: the study package's ``lines`` table) drawn as
        vertical rules: flagged, material harmonic of the load's rhythm, or significant
        only.
    **column_kw
        Fields of :class:`SpectrumColumns` (``frequency``, ``value``, ``series``)
        replacing those of ``columns`` (``spectrum_chart(df, value="psd_w2_per_hz")``).

    Returns
    -------
    altair.LayerChart
    """
    c = SpectrumColumns.from_kwargs(columns, **column_kw)
    df = _spectrum_data(spectrum, c, max_points)
    fmin, fmax = df["frequency_hz"].min(), df["frequency_hz"].max()
    bdf = _band_frame(bands, fmin, fmax)
    ylab = value_title or axis_label(c.value)
    xs = alt.Scale(type="log")
    rect, labels = _band_layers(bdf, xs)
    color = alt.Color("series:N", title=c.series) if c.series else alt.value(PALETTE[0])
    line = alt.Chart(df).mark_line().encode(
        x=alt.X("frequency_hz:Q", scale=xs, title="frequency [Hz]"),
        y=alt.Y("psd:Q", scale=alt.Scale(type="log"), title=ylab), color=color,
        tooltip=[*([alt.Tooltip("series:N", title=c.series)] if c.series else []),
                 alt.Tooltip("frequency_hz:Q", title="frequency [Hz]", format=",.4~g"),
                 alt.Tooltip("psd:Q", title=ylab, format=",.4~g")])
    layers = [rect, labels, line]
    sub = "Welch power spectral density; shaded: limit bands"
    if lines is not None and len(lines):
        layers.append(_line_layer(lines, xs, fmin, fmax))
        sub += "; rules: spectral lines"
    chart = alt.layer(*layers).resolve_scale(color="independent").properties(
        title=alt.Title(title or "Oscillation spectrum", subtitle=sub))
    return sized(chart, width, height)


def _line_layer(lines: pd.DataFrame, xs: alt.Scale, fmin: float, fmax: float) -> alt.Chart:
    """The spectral lines as vertical rules coloured by status."""
    require_columns(lines, ["frequency_hz", "amplitude_megawatts", "flagged", "material",
                            "attribution"], "spectrum_chart lines")
    ldf = lines[["frequency_hz", "amplitude_megawatts", "attribution"]].copy()
    ldf["status"] = np.where(lines["flagged"].astype(bool), "flagged",
                             np.where(lines["material"].astype(bool), "material harmonic",
                                      "significant"))
    ldf = ldf[(ldf["frequency_hz"] >= fmin) & (ldf["frequency_hz"] <= fmax)]
    statuses = [s for s in _LINE_COLORS if (ldf["status"] == s).any()] or ["significant"]
    return alt.Chart(ldf).mark_rule(strokeWidth=1, opacity=0.8).encode(
        x=alt.X("frequency_hz:Q", scale=xs),
        color=alt.Color("status:N", title="line",
                        scale=alt.Scale(domain=statuses,
                                        range=[_LINE_COLORS[s] for s in statuses])),
        tooltip=[alt.Tooltip("frequency_hz:Q", title="frequency [Hz]", format=",.4~g"),
                 alt.Tooltip("amplitude_megawatts:Q", title="amplitude [MW]",
                             format=",.3~g"),
                 alt.Tooltip("status:N"), alt.Tooltip("attribution:N")])


def _spectrum_data(spectrum: pd.DataFrame, c: SpectrumColumns,
                   max_points: int) -> pd.DataFrame:
    """``frequency_hz``, ``psd`` and ``series`` at positive frequency and density; a
    series longer than its share of ``max_points`` (at least 50) reduced to log-spaced
    frequency bins (mean frequency and density per bin)."""
    require_columns(spectrum, [c.frequency, c.value] + ([c.series] if c.series else []),
                    "spectrum_chart")
    df = pd.DataFrame({"frequency_hz": pd.to_numeric(spectrum[c.frequency]).astype(float),
                       "psd": pd.to_numeric(spectrum[c.value]).astype(float),
                       "series": spectrum[c.series].astype(str) if c.series else ""})
    df = df[(df["frequency_hz"] > 0) & np.isfinite(df["psd"]) & (df["psd"] > 0)]
    if df.empty:
        raise SchemaError([Violation(c.value, "no positive spectral density at f > 0 to "
                                              "draw")])
    per = max(50, max_points // df["series"].nunique())
    if df.groupby("series").size().max() > per:
        lo, hi = np.log10(df["frequency_hz"].min()), np.log10(df["frequency_hz"].max())
        edges = np.logspace(lo, hi + 1e-9, per + 1)
        df["bin"] = np.searchsorted(edges, df["frequency_hz"], side="right") - 1
        df = df.groupby(["series", "bin"], as_index=False).agg(
            frequency_hz=("frequency_hz", "mean"), psd=("psd", "mean"))
    return df


def _band_frame(bands: Sequence[tuple[float, float]] | pd.DataFrame, fmin: float,
                fmax: float) -> pd.DataFrame:
    """The bands with a ``label`` and a ``status`` against their limit, clipped to the
    spectrum's frequency range (bands outside it left out)."""
    if isinstance(bands, pd.DataFrame):
        require_columns(bands, ["low_hz", "high_hz"], "spectrum_chart bands")
        bdf = bands.copy()
    else:
        bdf = pd.DataFrame(list(bands), columns=["low_hz", "high_hz"])
    if "label" not in bdf.columns:
        bdf["label"] = [f"{a:g}–{b:g} Hz" for a, b in zip(bdf["low_hz"], bdf["high_hz"])]
    bdf["label"] = bdf["label"].astype(str)
    if {"measured", "limit"} <= set(bdf.columns):
        meas = bdf["measured"].astype(float)
        lim = bdf["limit"].astype(float)
        bdf["status"] = np.where(lim.isna(), "band",
                                 np.where(meas > lim, "over limit", "within limit"))
    else:
        bdf["status"] = "band"
    bdf = bdf[(bdf["high_hz"] > fmin) & (bdf["low_hz"] < fmax)].copy()
    bdf["low_hz"] = bdf["low_hz"].clip(lower=fmin)
    bdf["high_hz"] = bdf["high_hz"].clip(upper=fmax)
    return bdf


def _band_layers(bdf: pd.DataFrame, xs: alt.Scale) -> tuple[alt.Chart, alt.Chart]:
    """The shaded bands (coloured by status, values in the tooltip) and their labels."""
    statuses = [s for s in _STATUS_COLORS if (bdf["status"] == s).any()] or ["band"]
    band_tips = [alt.Tooltip("label:N", title="band"), alt.Tooltip("status:N")]
    for col in ("measured", "limit"):
        if col in bdf.columns:
            band_tips.append(alt.Tooltip(f"{col}:Q", format=",.4~g"))
    rect = alt.Chart(bdf).mark_rect(opacity=0.12).encode(
        x=alt.X("low_hz:Q", scale=xs, title="frequency [Hz]"), x2="high_hz:Q",
        color=alt.Color("status:N", title="band",
                        scale=alt.Scale(domain=statuses,
                                        range=[_STATUS_COLORS[s] for s in statuses])),
        tooltip=band_tips)
    labels = alt.Chart(bdf).mark_text(align="left", baseline="top", dx=3, dy=3,
                                      fontSize=10, color="#444444").encode(
        x=alt.X("low_hz:Q", scale=xs), y=alt.value(0), text="label:N")
    return rect, labels
