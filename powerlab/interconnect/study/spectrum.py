"""Study-package section 3: oscillation, the narrow-band lines of the short window.

The Welch spectrum of every draw of the short window (:mod:`.shortwindow`), its median
and largest over draws, and the narrow-band lines from 0.1 to 30 Hz in the median
(:func:`spectrum_lines`), flagged near the frequencies at which utilities have observed
data-center oscillations (:data:`OBSERVED_LINES_HZ`) and with the amplitudes that P- and
M-class reference PMUs report of them (:func:`powerlab.interconnect.pmu.modulation_gain`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.ndimage import median_filter

from ...limits import loadmetrics as lm
from ..pmu import modulation_gain
from .html import esc, table
from .section import PackageFolder, Section, Study, register

__all__ = ["OBSERVED_LINES_HZ", "Spectrum", "spectrum_lines"]

#: Frequencies near which utilities have reported data-center power oscillations [Hz]
#: (as quoted in powerlab issue 20; the primary reports are not cited here).
OBSERVED_LINES_HZ = (14.7, 23.0)


def spectrum_lines(frequency_hz, psd_w2_per_hz, *, min_prominence_db: float = 10.0,
                   min_amplitude_w: float = 0.0, neighbourhood_hz: float = 1.0,
                   half_width_bins: int = 3) -> pd.DataFrame:
    """Narrow-band lines of a power spectral density.

    A line is a local maximum of the density at least ``min_prominence_db`` above the
    median density within ``+- neighbourhood_hz``; its amplitude (of the equivalent
    sinusoid) is ``sqrt(2 * sum(PSD) * df)`` over ``+- half_width_bins`` bins (a Hann
    window spreads a sinusoid over about 4 bins), and lines under ``min_amplitude_w``
    are dropped.

    Returns
    -------
    DataFrame
        ``frequency_hz``, ``amplitude_megawatts``, ``prominence_db``, strongest first.
    """
    f = np.asarray(frequency_hz, dtype=float)
    s = np.asarray(psd_w2_per_hz, dtype=float)
    if len(f) < 3:
        return pd.DataFrame(columns=["frequency_hz", "amplitude_megawatts", "prominence_db"])
    df = f[1] - f[0]
    k = max(1, round(neighbourhood_hz / df))
    floor = median_filter(s, size=2 * k + 1, mode="nearest")
    peak = np.r_[False, (s[1:-1] > s[:-2]) & (s[1:-1] >= s[2:]), False] & (f > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        prom = 10 * np.log10(s / floor)
    idx = np.flatnonzero(peak & (prom >= min_prominence_db))
    amp = np.array([math.sqrt(2 * s[max(0, i - half_width_bins):i + half_width_bins + 1]
                              .sum() * df) for i in idx])
    keep = amp >= min_amplitude_w if len(idx) else np.zeros(0, bool)
    out = pd.DataFrame({"frequency_hz": f[idx][keep], "amplitude_megawatts": amp[keep] / 1e6,
                        "prominence_db": prom[idx][keep]})
    return out.sort_values("amplitude_megawatts", ascending=False).reset_index(drop=True)


def _near(f: np.ndarray, targets, tol: float) -> list[str]:
    return ["; ".join(f"{t:g} Hz" for t in targets if abs(x - t) <= tol) for x in f]


def _near_observed(lines: pd.DataFrame) -> pd.DataFrame:
    return lines[lines["near_observed_hz"] != ""] if len(lines) else lines


def _line_list(lines: pd.DataFrame, fmt: str) -> str:
    return ", ".join(fmt.format(r.frequency_hz, r.amplitude_megawatts)
                     for r in lines.itertuples())


def spectrum_tables(freq: np.ndarray, psd: np.ndarray, pmu) -> tuple[pd.DataFrame,
                                                                       pd.DataFrame]:
    """The spectrum (median and largest density over draws, ``psd`` one row per draw)
    and its lines from 0.1 to 30 Hz, with the nearby observed frequencies and the
    amplitudes the reference PMUs (``pmu``: :class:`~powerlab.interconnect.pmu.
    PmuSettings`) report."""
    med = np.median(psd, axis=0)
    spectrum = pd.DataFrame({"frequency_hz": freq,
                             "psd_megawatts2_per_hz_median": med / 1e12,
                             "psd_megawatts2_per_hz_max": psd.max(axis=0) / 1e12})
    lines = spectrum_lines(freq, med, min_amplitude_w=1e3)
    lines = lines[(lines["frequency_hz"] >= 0.1) & (lines["frequency_hz"] <= 30.0)]
    lines = lines.reset_index(drop=True)
    lines["near_observed_hz"] = _near(lines["frequency_hz"].to_numpy(), OBSERVED_LINES_HZ,
                                      0.5)
    for c in ("P", "M"):
        g = modulation_gain(lines["frequency_hz"].to_numpy(), c, f0_hz=pmu.f0_hz,
                            reporting_rate_fps=pmu.reporting_rate_fps) if len(lines) else []
        lines[f"amplitude_megawatts_pmu_{c.lower()}_class"] = \
            lines["amplitude_megawatts"].to_numpy() * np.asarray(g)
    return spectrum, lines


class Spectrum(Section):
    """The short window's spectrum and its narrow-band lines."""

    name = "spectrum"
    order = 30
    title = "Oscillation: narrow-band lines 0.1-30 Hz"

    def per_short_draw(self, trace, study: Study):
        x = trace.power_w(study.boundary)
        skip = study.short.skip_s
        k = round(skip / trace.tick_s) if len(x) * trace.tick_s >= 4 * skip else 0
        return lm.welch_psd(x[k:], trace.tick_s, min(64.0, study.short.window_s / 4))

    def build(self, study: Study) -> None:
        welch = study.short.rows[self.name]
        psd = np.vstack([s for _, s in welch])
        spectrum, lines = spectrum_tables(welch[-1][0], psd, study.options.pmu)
        study.tables.update(spectrum=spectrum, lines=lines)
        tr = study.trace
        nyq = 0.5 / max(tr.tick_s, tr.native_interval_s)
        if not study.source.is_forecast and nyq < 30.0:
            study.notes.append(f"Readings every {max(tr.tick_s, tr.native_interval_s):g} s "
                               f"resolve oscillation only up to {nyq:g} Hz; lines near "
                               "30 Hz cannot be shown present or absent.")

    def key_lines(self, pkg) -> list[str]:
        out = []
        if len(pkg.lines):
            out.append("Strongest lines (0.1-30 Hz): "
                       + _line_list(pkg.lines.head(5), "{:.3g} Hz {:.3g} MW"))
        near = _near_observed(pkg.lines)
        out.append("Lines near observed utility oscillations (14.7, 23 Hz): " + (
            _line_list(near, "{:.3g} Hz {:.3g} MW") if len(near) else "none above 1 kW"))
        return out

    def html(self, pkg) -> str:
        st = pkg.short_trace
        parts = [f"<p>Welch spectrum of a {st.duration_s:g}-s window at a {st.tick_s:g}-s "
                 f"tick (starting {esc(pd.Timestamp(st.start_utc).isoformat())}), median "
                 "over draws; a line stands 10 dB above the median density within 1 Hz; "
                 "its amplitude is that of the equivalent sinusoid. Lines within 0.5 Hz of "
                 "14.7 Hz or 23 Hz (frequencies at which utilities have observed "
                 "data-center oscillations) are flagged. The PMU columns multiply by the "
                 "reference filters' gain.</p>"]
        ln = pkg.lines
        if len(ln):
            ln = ln[(ln.index < 15) | (ln["near_observed_hz"] != "")]
            parts.append(f"<p>The 15 strongest of {len(pkg.lines)} lines and every flagged "
                         "one (all in spectrum_lines.csv).</p>")
        parts.append(table(ln) if len(ln) else "<p>No line above 1 kW.</p>")
        near = _near_observed(pkg.lines)
        parts.append(f"<p class='{'flag' if len(near) else 'meta'}'>Lines near 14.7 / 23 "
                     "Hz: " + (_line_list(near, "{:.3g} Hz ({:.3g} MW)") if len(near)
                               else "none") + "</p>")
        return "".join(parts)

    def files(self, pkg, folder: PackageFolder) -> dict:
        return {"spectrum (short window)": folder.csv("spectrum.csv", pkg.spectrum),
                "narrow-band lines": folder.csv("spectrum_lines.csv", pkg.lines)}


register(Spectrum())
