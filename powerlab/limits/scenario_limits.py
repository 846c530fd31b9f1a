"""A scenario's ``limits:`` block: the limits a site sets on its own power, read from the
scenario YAML (:func:`parse_limits`, into :class:`Limits`) and evaluated as a requirement
spec (:func:`limits_spec`), by the code that checks a utility's spec
(:func:`powerlab.limits.evaluation.evaluate_power`).

Layout of the block (all optional; 0 means no limit)::

    limits: {boundary, ramp_up_megawatts_per_s, ramp_down_megawatts_per_s,
             swing_1s_megawatts, swing_10s_megawatts, swing_60s_megawatts,
             band_0p1_2hz_megawatts, band_2_20hz_megawatts}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .._options import choice, renamed_attribute, renamed_keywords
from .loadmetrics import default_band_window_s
from .requirements import BOUNDARIES, Requirement, RequirementSpec
from .yamlspec import Section

__all__ = ["LIMIT_BANDS_HZ", "SCENARIO_LIMITS", "Limits", "limits_spec", "parse_limits"]

#: Largest limit a scenario may state [MW]: 10 GW, the bound of a site's power
#: (:data:`powerlab.site.facility.MAX_SITE_W`), which catches a unit slip of 1000x.
MAX_LIMIT_MEGAWATTS = 10e9 / 1e6


@dataclass(frozen=True)
class Limits:
    """Limits the utility or the site sets; 0 means no limit.

    Attributes
    ----------
    boundary : str
        ``"facility"`` (the point of interconnection) or ``"it"``: which power the limits
        apply to (YAML key ``boundary``; the old name ``scope`` is accepted, deprecated).
    ramp_up_megawatts_per_s, ramp_down_megawatts_per_s : float
        Largest allowed rise and fall rates [MW/s].
    swing_1s_megawatts, swing_10s_megawatts, swing_60s_megawatts : float
        Largest allowed max-minus-min within any 1 s, 10 s, 60 s window [MW].
    band_0p1_2hz_megawatts, band_2_20hz_megawatts : float
        Largest allowed RMS amplitude of the oscillation in the 0.1-2 Hz and 2-20 Hz
        bands [MW].
    """

    boundary: str = "facility"
    ramp_up_megawatts_per_s: float = 0.0
    ramp_down_megawatts_per_s: float = 0.0
    swing_1s_megawatts: float = 0.0
    swing_10s_megawatts: float = 0.0
    swing_60s_megawatts: float = 0.0
    band_0p1_2hz_megawatts: float = 0.0
    band_2_20hz_megawatts: float = 0.0

    scope = renamed_attribute("boundary")     # the old name, for one release


Limits.__init__ = renamed_keywords(scope="boundary")(Limits.__init__)


def parse_limits(s: Section) -> Limits:
    """Read a scenario's ``limits:`` section (errors name the key path,
    ``limits.swing_1s_megawatts``)."""
    s.renamed("scope", "boundary")
    boundary = s.string("boundary", "facility")
    choice(boundary, None, BOUNDARIES, error=lambda m: s.error("boundary", m))
    kw = {f.name: s.number(f.name, 0.0, hi=MAX_LIMIT_MEGAWATTS)
          for f in dataclasses.fields(Limits) if f.name != "boundary"}
    s.finish()
    return Limits(boundary=boundary, **kw)


#: The oscillation bands of a scenario's ``limits.band_<name>_megawatts`` [Hz] (also the
#: bands of the forecast's swing metrics, :data:`powerlab.site.swings.BANDS_HZ`).
LIMIT_BANDS_HZ = {"0p1_2hz": (0.1, 2.0), "2_20hz": (2.0, 20.0)}

#: A scenario's ``limits:`` keys as requirements: key -> (requirement name, kind, unit,
#: window [s] or band name, direction).  The names are those of ``check_limits``' rows.
SCENARIO_LIMITS = {
    "ramp_up_megawatts_per_s": ("ramp_up", "ramp", "MW/s", 1.0, "up"),
    "ramp_down_megawatts_per_s": ("ramp_down", "ramp", "MW/s", 1.0, "down"),
    "swing_1s_megawatts": ("swing_1s", "deviation", "MW", 1.0, "both"),
    "swing_10s_megawatts": ("swing_10s", "deviation", "MW", 10.0, "both"),
    "swing_60s_megawatts": ("swing_60s", "deviation", "MW", 60.0, "both"),
    "band_0p1_2hz_megawatts": ("band_0p1_2hz", "oscillation", "MW", "0p1_2hz", "both"),
    "band_2_20hz_megawatts": ("band_2_20hz", "oscillation", "MW", "2_20hz", "both"),
}


def limits_spec(limits, *, name: str = "scenario limits") -> RequirementSpec:
    """A scenario's ``limits:`` block read as a requirement spec.

    Each non-zero limit becomes one requirement (:data:`SCENARIO_LIMITS`): the ramps are
    ``ramp`` requirements over adjacent 1-s means (MW/s, up or down), the swings
    ``deviation`` requirements read as limits of their own (``deviation_rule:
    separate_limit``: the largest max-minus-min within the window, both ends included),
    the bands ``oscillation`` requirements (RMS of the band-passed power, worst window
    of :func:`~powerlab.limits.loadmetrics.default_band_window_s`).  The scenario's limits
    carry no source: every requirement is marked illustrative.

    Parameters
    ----------
    limits : Limits
    name : str
        Name of the spec.

    Returns
    -------
    RequirementSpec
        ``boundary`` is the limits' :attr:`Limits.boundary`; a
        requirement's name is the ``limit`` of :func:`powerlab.site.swings.check_limits`.
    """
    reqs = []
    for key, (rname, kind, unit, win, direction) in SCENARIO_LIMITS.items():
        val = float(getattr(limits, key))
        if not val > 0:
            continue
        kw: dict = {"direction": direction}
        if kind == "oscillation":
            band = LIMIT_BANDS_HZ[win]
            kw.update(band_hz=band, measure="rms", window_s=default_band_window_s(band[0]))
        else:
            kw["window_s"] = float(win)
        reqs.append(Requirement(name=rname, kind=kind, limit=val, unit=unit,
                                source=f"scenario limits.{key}", illustrative=True, **kw))
    return RequirementSpec(name=name, description="the scenario's limits: block",
                           boundary=limits.boundary, max_exceed_probability=0.0,
                           requirements=tuple(reqs), deviation_rule="separate_limit")
