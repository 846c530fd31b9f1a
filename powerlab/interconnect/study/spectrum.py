"""Study-package section 3: oscillation, the narrow-band lines of the short window.

The Welch spectrum of every draw of the short window (:mod:`.shortwindow`), its median
and largest over draws, and the narrow-band lines from 0.1 to 30 Hz in the median,
each tested for significance (over the local floor at a 1 % false-flag rate) and
materiality (over the amplitude that matters at the point of interconnection), attributed
to a rhythm of the load where it can be, and listed at its alias for every PMU reporting
rate (:func:`powerlab.interconnect.lines.flag_lines`); lines near the frequencies at which
utilities have observed data-center oscillations (:data:`OBSERVED_LINES_HZ`) are marked,
with the amplitudes that P- and M-class reference PMUs report of them
(:func:`powerlab.interconnect.pmu.modulation_gain`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.ndimage import median_filter

from ...exceptions import PowerlabError
from ...limits import loadmetrics as lm
from ..lines import LineOptions, Rhythm, flag_lines, welch_dof
from ..pmu import modulation_gain
from ..resonance import periodic_components
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


def rhythms_of(study: Study) -> list[Rhythm]:
    """The load's rhythms: each job's step, evaluation and checkpoint cycle (a forecast's
    scenario), or the periodic components estimated from the trace (measured data)."""
    sc = study.source.scenario
    if sc is not None:
        out = []
        for j in sc.jobs:
            out.append(Rhythm(f"step of {j.name}", j.step_time_s))
            if j.eval_interval_s > 0:
                out.append(Rhythm(f"eval cycle of {j.name}",
                                  j.eval_interval_s + j.eval_duration_s))
            if j.checkpoint_interval_s > 0:
                out.append(Rhythm(f"checkpoint cycle of {j.name}",
                                  j.checkpoint_interval_s + j.checkpoint_duration_s))
        return out
    tr = study.trace
    try:
        comps = periodic_components(tr.power_w(study.boundary), tr.tick_s)
    except PowerlabError:
        return []
    return [Rhythm("estimated period", float(p)) for p in comps["period_s"]]


def spectrum_tables(freq: np.ndarray, psd: np.ndarray, pmu, *, dof: float, spec=None,
                    site_peak_w: float, rhythms=()) -> tuple[pd.DataFrame, pd.DataFrame,
                                                             dict]:
    """The spectrum (median and largest density over draws, ``psd`` one row per draw),
    its significant lines from 0.1 to 30 Hz (:func:`~powerlab.interconnect.lines.
    flag_lines`) with the nearby observed frequencies and the amplitudes the reference
    PMUs (``pmu``: :class:`~powerlab.interconnect.pmu.PmuSettings`) report, and the
    significance test's terms."""
    med = np.median(psd, axis=0)
    spectrum = pd.DataFrame({"frequency_hz": freq,
                             "psd_megawatts2_per_hz_median": med / 1e12,
                             "psd_megawatts2_per_hz_max": psd.max(axis=0) / 1e12})
    lines, terms = flag_lines(freq, psd, dof=dof, spec=spec, site_peak_w=site_peak_w,
                              rhythms=rhythms, f0_hz=pmu.f0_hz, options=LineOptions())
    lines["near_observed_hz"] = _near(lines["frequency_hz"].to_numpy(), OBSERVED_LINES_HZ,
                                      0.5)
    for c in ("P", "M"):
        g = modulation_gain(lines["frequency_hz"].to_numpy(), c, f0_hz=pmu.f0_hz,
                            reporting_rate_fps=pmu.reporting_rate_fps) if len(lines) else []
        lines[f"amplitude_megawatts_pmu_{c.lower()}_class"] = \
            lines["amplitude_megawatts"].to_numpy() * np.asarray(g)
    return spectrum, lines, terms


class Spectrum(Section):
    """The short window's spectrum and its narrow-band lines."""

    name = "spectrum"
    order = 30
    title = "Oscillation: narrow-band lines 0.1-30 Hz"

    def per_short_draw(self, trace, study: Study):
        x = trace.power_w(study.boundary)
        skip = study.short.skip_s
        k = round(skip / trace.tick_s) if len(x) * trace.tick_s >= 4 * skip else 0
        seg = min(64.0, study.short.window_s / 4)
        f, p = lm.welch_psd(x[k:], trace.tick_s, seg)
        return f, p, welch_dof(len(x) - k, round(seg / trace.tick_s)), float(x.max())

    def build(self, study: Study) -> None:
        welch = study.short.rows[self.name]
        psd = np.vstack([w[1] for w in welch])
        spectrum, lines, terms = spectrum_tables(
            welch[-1][0], psd, study.options.pmu, dof=min(w[2] for w in welch),
            spec=study.spec, site_peak_w=max(w[3] for w in welch),
            rhythms=rhythms_of(study))
        study.tables.update(spectrum=spectrum, lines=lines)
        study.notes.append(
            f"Spectral lines: significant where the median density over {terms['draws']} "
            f"draw(s) stands {terms['threshold_ratio']:.3g} x above the local floor "
            f"({terms['dof']:.3g} degrees of freedom a draw; false-flag rate "
            f"{terms['false_flag_rate']:.0%} over {terms['bins']} bins); flagged where "
            "also material (material_basis per line) and no rhythm of the load explains "
            "it (attribution per line).")
        tr = study.trace
        nyq = 0.5 / max(tr.tick_s, tr.native_interval_s)
        if not study.source.is_forecast and nyq < 30.0:
            study.notes.append(f"Readings every {max(tr.tick_s, tr.native_interval_s):g} s "
                               f"resolve oscillation only up to {nyq:g} Hz; lines near "
                               "30 Hz cannot be shown present or absent.")

    def key_lines(self, pkg) -> list[str]:
        ln = pkg.lines
        flagged = ln[ln["flagged"]] if len(ln) else ln
        out = [f"Significant lines (0.1-30 Hz): {len(ln)}; flagged (material, unexplained): "
               + (_line_list(flagged.head(5), "{:.3g} Hz {:.3g} MW") if len(flagged)
                  else "none")]
        near = _near_observed(ln)
        out.append("Significant lines near observed utility oscillations (14.7, 23 Hz): "
                   + (_line_list(near, "{:.3g} Hz {:.3g} MW") if len(near) else "none"))
        return out

    def html(self, pkg) -> str:
        st = pkg.short_trace
        parts = [f"<p>Welch spectrum of a {st.duration_s:g}-s window at a {st.tick_s:g}-s "
                 f"tick (starting {esc(pd.Timestamp(st.start_utc).isoformat())}), median "
                 "over draws. A line is significant where it stands above the local floor "
                 "by more than chance allows at a 1 % false-flag rate per spectrum; material "
                 "where its amplitude (of the equivalent sinusoid) reaches the grid mode's, "
                 "a quarter of an oscillation limit, or 0.1 % of the site's peak "
                 "(material_basis); attributed to a rhythm of the load where it is a "
                 "harmonic of one; flagged where significant, material and unexplained "
                 "by any rhythm. Each line is listed at its "
                 "alias for every PMU reporting rate. Lines within 0.5 Hz of 14.7 Hz or "
                 "23 Hz (frequencies at which utilities have observed data-center "
                 "oscillations) are marked. The PMU columns multiply by the reference "
                 "filters' gain.</p>"]
        ln = pkg.lines
        if len(ln):
            ln = ln[(ln.index < 15) | (ln["near_observed_hz"] != "") | ln["flagged"]]
            parts.append(f"<p>The 15 strongest of {len(pkg.lines)} significant lines and "
                         "every flagged or marked one (all in spectrum_lines.csv).</p>")
        parts.append(table(ln) if len(ln) else "<p>No significant line.</p>")
        near = _near_observed(pkg.lines)
        parts.append(f"<p class='{'flag' if len(near) else 'meta'}'>Significant lines "
                     "near 14.7 / 23 Hz: " + (_line_list(near, "{:.3g} Hz ({:.3g} MW)") if len(near)
                               else "none") + "</p>")
        return "".join(parts)

    def files(self, pkg, folder: PackageFolder) -> dict:
        return {"spectrum (short window)": folder.csv("spectrum.csv", pkg.spectrum),
                "narrow-band lines": folder.csv("spectrum_lines.csv", pkg.lines)}


register(Spectrum())
