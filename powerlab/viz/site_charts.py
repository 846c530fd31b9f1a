"""Charts of a site forecast: the adapter from a
:class:`powerlab.site.engine.ForecastResult` to the facility timeline, the ramp-rate
distribution and the oscillation spectrum.

It picks columns and converts units for display (W -> MW); every number comes from the
results object or from the analysis functions of the site and limits wings (the ramps
and band values the scenario's limits are checked on)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._options import renamed_keywords
from ..limits.evaluation import evaluate_power
from ..limits.scenario_limits import limits_spec
from ..site.planner import ramp_into_tick
from ..site.swings import BANDS_HZ, spectrum
from .facility_charts import facility_chart
from .ramp_charts import ramp_rate_chart
from .render import DEFAULT_MAX_ROWS, alt
from .spectrum_charts import spectrum_chart

__all__ = ["forecast_charts"]


@renamed_keywords(scope="boundary")
def forecast_charts(result: Any, *, boundary: str = "facility", draw: int = 0,
                    max_rows: int = DEFAULT_MAX_ROWS) -> dict[str, alt.TopLevelMixin]:
    """Charts of a :class:`powerlab.site.engine.ForecastResult`.

    Parameters
    ----------
    result : ForecastResult
    boundary : {"facility", "it"}
        Boundary of the ramp-rate and spectrum charts (the timeline shows both).
    draw : int, default 0
        Monte Carlo draw whose events, ramps and spectrum are drawn.
    max_rows : int
        Row budget of the timeline (see :func:`facility_chart`).

    Returns
    -------
    dict
        ``"timeline"`` (:func:`facility_chart`: mean across draws, p10–p90 band, events
        of ``draw``), ``"ramps"`` (:func:`ramp_rate_chart` of ``draw``'s ramps between
        adjacent 1-s means at every tick boundary, ``ramp_megawatts_per_s_1s``, which the
        scenario's ramp limits marked on it apply to; tick to tick when the tick does not
        divide 1 s) and ``"spectrum"`` (:func:`spectrum_chart` of ``draw``; a band with
        a scenario limit shows the value the limit is checked on, the worst window's RMS
        of the band-passed power, others the whole record's RMS).
    """
    out: dict[str, alt.TopLevelMixin] = {"timeline": _timeline(result, draw, max_rows)}
    x = result.power_w(boundary)[draw]
    out["ramps"] = _ramps(result, x, boundary, draw)
    out["spectrum"] = _spectrum(result, x, boundary, draw)
    return out


def _timeline(result: Any, draw: int, max_rows: int) -> alt.VConcatChart:
    """Mean power across draws of both boundaries [MW] with its p10–p90 band, and the
    events of ``draw``."""
    tl = result.timeline
    frame = pd.DataFrame({"timestamp": tl["timestamp"],
                          "boundary": tl["boundary"].astype(str),
                          "power_megawatts": tl["power_w_mean"] / 1e6,
                          "power_megawatts_lower": tl["power_w_p10"] / 1e6,
                          "power_megawatts_upper": tl["power_w_p90"] / 1e6})
    ev = result.events
    ev = ev[ev["draw"] == draw]
    events = pd.DataFrame({"timestamp": ev["timestamp"], "event": ev["event"].astype(str),
                           "detail": ("job " + ev["job"].astype(str) + ", "
                                      + ev["duration_s"].map("{:g} s".format))})
    band = "p10–p90 across draws" if result.draws > 1 else "single draw"
    return facility_chart(
        frame, events, max_rows=max_rows, band_label=band, site_tz=result.scenario.site.tz,
        title=f"Power of {result.scenario.name} ({result.draws} draws)")


def _ramps(result: Any, x: np.ndarray, boundary: str, draw: int) -> alt.LayerChart:
    """The ramps the scenario's limits apply to (site.swings.check_limits), with the
    limits marked when they apply at ``boundary``: between adjacent 1-s means at every
    tick boundary, tick to tick when the tick does not divide 1 s (names and
    definitions: limits.ramps.RAMP_DEFINITIONS)."""
    lim = result.scenario.limits
    tick = result.tick_s
    if abs(round(1.0 / tick) * tick - 1.0) < 1e-9:
        name, r = "ramp_megawatts_per_s_1s", ramp_into_tick(x, tick, 1.0) / 1e6
        what = "between adjacent 1-s means, every alignment"
    else:
        name, r = "ramp_megawatts_per_s_tick", np.diff(x) / tick / 1e6
        what = f"tick to tick ({tick:g} s)"
    ramps = pd.DataFrame({name: r[np.isfinite(r)]})
    up, down = lim.ramp_up_megawatts_per_s, lim.ramp_down_megawatts_per_s
    applies = lim.boundary == boundary and (up > 0 or down > 0)
    return ramp_rate_chart(ramps, value=name, limit=(down, up) if applies else None,
                           title=f"Ramp rates {what}, {boundary} (draw {draw})")


def _spectrum(result: Any, x: np.ndarray, boundary: str, draw: int) -> alt.LayerChart:
    """The Welch spectrum of ``draw`` [MW²/Hz] with the oscillation bands and their
    values (:func:`_band_values`)."""
    spec_df = spectrum(x, result.tick_s)
    spec_df = pd.DataFrame({"frequency_hz": spec_df["frequency_hz"],
                            "psd_megawatts2_per_hz": spec_df["psd_w2_per_hz"] / 1e12})
    return spectrum_chart(
        spec_df, value="psd_megawatts2_per_hz", bands=_band_values(result, x, boundary, draw),
        value_title="power spectral density [MW²/Hz]",
        title=f"Oscillation spectrum, {boundary} (draw {draw})")


def _band_values(result: Any, x: np.ndarray, boundary: str, draw: int) -> pd.DataFrame:
    """One row per oscillation band: a band with a scenario limit at ``boundary`` shows
    the value the limit is checked on (the requirement spec's oscillation metric,
    limits.evaluation.evaluate_power: the worst window's RMS of the band-passed
    power), a band without one the whole record's RMS [MW]."""
    m = result.metrics
    row = m[(m["boundary"] == boundary) & (m["draw"] == draw)].iloc[0]
    lim = result.scenario.limits
    spec = limits_spec(lim)
    checked = {r.name: r for r in spec.requirements if r.kind == "oscillation"} \
        if lim.boundary == boundary else {}
    values = evaluate_power(spec, x, result.tick_s)[0] if checked else {}
    bands = []
    for key, (lo, hi) in BANDS_HZ.items():
        r = checked.get(f"band_{key}")
        if r is not None:
            v = values[r.name]
            what = (f"worst {r.window_s:g}-s window {v:.3g} MW rms" if np.isfinite(v)
                    else "cannot be assessed at this tick")
        else:
            v = row[f"band_{key}_rms_w"] / 1e6
            what = f"{v:.3g} MW rms (whole record)"
        bands.append({"low_hz": lo, "high_hz": hi, "label": f"{lo:g}–{hi:g} Hz: {what}",
                      "measured": v, "limit": r.limit if r is not None else np.nan})
    bdf = pd.DataFrame(bands)
    return bdf.drop(columns=["limit"]) if bdf["limit"].isna().all() else bdf
