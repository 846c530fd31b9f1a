"""Interconnection requirement specs: the limits a utility sets on a large load, from YAML.

A requirement spec (see ``data/requirements/*.yaml`` for annotated examples) names limits
on the power a site draws at its point of interconnection, each with its unit, its window
and where the number comes from.  :func:`read_requirements` (path) and
:func:`parse_requirements` (text or mapping) read it into frozen dataclasses; every
problem is a :class:`~powerlab.exceptions.ScenarioError` naming the key path
(``requirements[2].band_hz``) and what was expected, exactly as for scenarios (the same
safe YAML reader, :func:`powerlab.limits.yamlspec.load_yaml`).

Kinds of requirement (``kind``) and their keys::

    ramp          window_s (means window), direction, limit in MW/s or MW/min
    deviation     window_s (T), limit in MW: the short-term deviation allowed within T s
                  (see deviation_rule)
    oscillation   band_hz [lo, hi], measure (rms | peak_to_peak), window_s (default
                  60 s, or six periods of lo when longer), limit in MW: the worst
                  window's RMS or peak-to-peak of the band-passed power
    step          within_s, direction, limit in MW: largest net change within within_s
    ride_through  residual_voltage_pu, sag_duration_s, observe_s, limit in MW: the
                  largest load loss allowed for a voltage sag down to residual_voltage_pu
                  lasting up to sag_duration_s

Every requirement and every grid mode carries ``source`` (where the form or the number
comes from) and ``illustrative`` (``true`` when the number is an assumption for
illustration, not a published limit); a spec without them is refused.

Layout of the YAML document::

    name: str
    description: str
    boundary: facility | it           # which power the limits apply to (default facility;
                                      # the old key scope is accepted, deprecated)
    max_exceed_probability: 0.0       # share of Monte Carlo draws allowed over a limit
    deviation_rule: allowance_before_ramp   # or separate_limit (see DEVIATION_RULES)
    requirements: [{name, kind, limit, unit, source, illustrative, ...kind's keys}]
    grid_modes: [{name, band_hz: [lo, hi], min_amplitude_megawatts, source, illustrative}]

A spec is evaluated on a power series by :mod:`powerlab.limits.evaluation`; a scenario's
``limits:`` block is read as a spec by :mod:`powerlab.limits.scenario_limits`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .._options import choice, renamed_attribute, renamed_keywords
from ..exceptions import ScenarioError
from .loadmetrics import default_band_window_s
from .yamlspec import Section, load_yaml, read_yaml_text

__all__ = [
    "BOUNDARIES",
    "DEVIATION_RULES",
    "KINDS",
    "UNITS",
    "GridMode",
    "Requirement",
    "RequirementSpec",
    "parse_requirements",
    "read_requirements",
]

#: Where the power of a site is taken (issue 26: ``boundary``, not ``scope``, which names
#: telemetry rows): ``"facility"``, the point of interconnection (IT load, its electrical
#: losses, cooling and base load), or ``"it"``, the IT load alone.  The ``boundary`` of a
#: spec, of a scenario's ``limits:`` and of every forecast figure.
BOUNDARIES = ("facility", "it")

#: Kinds of requirement.
KINDS = ("ramp", "deviation", "oscillation", "step", "ride_through")

#: Units accepted per kind -> factor from the unit to SI (W, or W/s for ramps).
UNITS = {
    "ramp": {"MW/s": 1e6, "MW/min": 1e6 / 60.0, "kW/s": 1e3, "kW/min": 1e3 / 60.0},
    "deviation": {"MW": 1e6, "kW": 1e3},
    "oscillation": {"MW": 1e6, "kW": 1e3},
    "step": {"MW": 1e6, "kW": 1e3},
    "ride_through": {"MW": 1e6, "kW": 1e3},
}

#: How a ``deviation`` requirement is read.  ``allowance_before_ramp`` (the default, the
#: source's meaning): Choukse et al. 2025 give the short-term deviation as the deviation
#: allowed *before ramp constraints are triggered*, so changes that stay within it are
#: exempt from the ramp limits, and it fails only where the power leaves it and breaks a
#: ramp limit there.  ``separate_limit`` (stricter, powerlab's reading before issue 20):
#: a limit of its own on the largest max-minus-min within T, the ramp limits applying
#: to every change.
DEVIATION_RULES = ("allowance_before_ramp", "separate_limit")

#: Bounds of a spec's numbers (issue 24: a window of 1e12 s or a band up to 1e9 Hz asked
#: for arrays of that many ticks before anything could say no).  Interconnection
#: requirements speak of seconds to a day, bands of 0.01 Hz to a few hundred Hz, sags of
#: at most seconds.
MAX_WINDOW_S = 86_400.0
MIN_BAND_HZ, MAX_BAND_HZ = 1e-3, 1_000.0
MAX_SAG_S = 600.0

_DIRECTIONS = ("up", "down", "both")
_MEASURES = ("rms", "peak_to_peak")


@dataclass(frozen=True)
class Requirement:
    """One limit on the site's power.

    Attributes
    ----------
    name : str
        Unique name in the spec (a row of the compliance table).
    kind : str
        One of :data:`KINDS`.
    limit : float
        The limit, in ``unit``.
    unit : str
        Unit of ``limit`` and of the reported value (see :data:`UNITS`).
    source : str
        Public source of the form or the number.
    illustrative : bool
        True when the number is an illustrative assumption, not a published limit.
    window_s : float
        ``ramp``: length of the means whose successive differences are the ramp [s];
        ``deviation``: the window T [s]; ``step``: the time within which a change counts
        as one step [s]; ``ride_through``: the sag duration [s]; ``oscillation``: the
        sliding window over which the band-limited RMS or peak-to-peak is taken (default
        :func:`~powerlab.limits.loadmetrics.default_band_window_s`) [s].
    direction : str
        ``up``, ``down`` or ``both`` (ramps and steps).
    band_hz : tuple of float or None
        ``oscillation``: the frequency band ``(lo, hi)`` [Hz].
    measure : str
        ``oscillation``: ``rms`` or ``peak_to_peak``.
    residual_voltage_pu : float
        ``ride_through``: the voltage during the sag, per unit of nominal (0.7: a sag to
        70 %, i.e. 30 % deep) [pu].
    observe_s : float
        ``ride_through``: how long after the sag ends the load loss is still counted [s].
    """

    name: str
    kind: str
    limit: float
    unit: str
    source: str
    illustrative: bool
    window_s: float = math.nan
    direction: str = "both"
    band_hz: tuple[float, float] | None = None
    measure: str = ""
    residual_voltage_pu: float = math.nan
    observe_s: float = math.nan

    @property
    def unit_factor(self) -> float:
        """Factor from ``unit`` to SI (W, or W/s for ramps) [-]."""
        return UNITS[self.kind][self.unit]

    @property
    def limit_si(self) -> float:
        """The limit in W (W/s for ramps)."""
        return self.limit * self.unit_factor

    @property
    def metric(self) -> str:
        """Name of the metric compared with the limit (the ``metric`` column)."""
        d = "" if self.direction == "both" else f"_{self.direction}"
        if self.kind == "ramp":
            return f"ramp{d}_of_{self.window_s:g}s_means"
        if self.kind == "deviation":
            return f"max_minus_min_within_{self.window_s:g}s"
        if self.kind == "oscillation":
            lo, hi = self.band_hz
            return f"band_{self.measure}_{lo:g}_{hi:g}hz_worst_{self.window_s:g}s_window"
        if self.kind == "step":
            return f"largest_step{d}_within_{self.window_s:g}s"
        return (f"load_loss_in_sag_to_{self.residual_voltage_pu:g}pu_for_"
                f"{self.window_s:g}s")


@dataclass(frozen=True)
class GridMode:
    """A band of grid oscillation modes for resonance screening.

    Attributes
    ----------
    name : str
    band_hz : tuple of float
        ``(lo, hi)`` [Hz].
    min_amplitude_megawatts : float
        A harmonic of the load counts as exciting the mode when its amplitude (peak of its
        sinusoid) is at least this [MW].
    source : str
    illustrative : bool
    """

    name: str
    band_hz: tuple[float, float]
    min_amplitude_megawatts: float
    source: str
    illustrative: bool


@dataclass(frozen=True)
class RequirementSpec:
    """A complete requirement spec.

    Attributes
    ----------
    name, description : str
    boundary : str
        ``facility`` (power at the point of interconnection) or ``it``
        (:data:`BOUNDARIES`; ``scope`` is its deprecated name).
    max_exceed_probability : float
        A requirement fails when more than this share of Monte Carlo draws exceed its
        limit (0: any draw over the limit fails it) [-].
    requirements : tuple of Requirement
    deviation_rule : str
        One of :data:`DEVIATION_RULES`.
    grid_modes : tuple of GridMode
    source : str or None
        The file read.
    """

    name: str
    description: str
    boundary: str
    max_exceed_probability: float
    requirements: tuple[Requirement, ...]
    grid_modes: tuple[GridMode, ...] = ()
    source: str | None = None
    deviation_rule: str = "allowance_before_ramp"

    def gated_ramps(self, deviation: Requirement) -> tuple[Requirement, ...]:
        """The ramp requirements a ``deviation`` requirement is the allowance of (under
        ``allowance_before_ramp``): those whose two averaging windows fit in its T."""
        if self.deviation_rule != "allowance_before_ramp" or deviation.kind != "deviation":
            return ()
        return tuple(r for r in self.requirements
                     if r.kind == "ramp" and 2 * r.window_s <= deviation.window_s * (1 + 1e-9))

    def allowances(self, ramp: Requirement) -> tuple[Requirement, ...]:
        """The ``deviation`` requirements that gate a ramp requirement (empty under
        ``separate_limit``, or when none has ``T >= 2 window_s``)."""
        return tuple(d for d in self.requirements if ramp in self.gated_ramps(d))

    def to_dict(self) -> dict:
        """Plain, JSON-ready dictionary of the spec."""
        d = dataclasses.asdict(self)
        d.pop("source", None)
        return d

    def hash(self) -> str:
        """SHA-256 of the canonical JSON of the spec."""
        text = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def __getitem__(self, name: str) -> Requirement:
        for r in self.requirements:
            if r.name == name:
                return r
        raise KeyError(name)

    scope = renamed_attribute("boundary")     # the old name, for one release


RequirementSpec.__init__ = renamed_keywords(scope="boundary")(RequirementSpec.__init__)


# --------------------------------------------------------------------------- parsing


def _flag(s: Section, name: str) -> bool:
    val = s.raw(name)
    if not isinstance(val, bool):
        what = "is required" if val is None else f"expected true or false, got {val!r}"
        raise s.error(name, f"{what} (true when the number is an illustrative assumption, "
                      "false when it is a published limit)")
    return val


def _source(s: Section) -> str:
    if not s.has("source"):
        raise s.error("source", "is required: name the public source of this limit (and "
                      "mark illustrative: true for an assumed number)")
    text = s.string("source").strip()
    if not text:
        raise s.error("source", "is empty: name the public source of this limit")
    return text


def _band(s: Section, name: str = "band_hz") -> tuple[float, float]:
    val = s.raw(name)
    if (not isinstance(val, list) or len(val) != 2
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in val)):
        raise s.error(name, f"expected [low, high] in Hz, e.g. [0.1, 2], got {val!r}")
    lo, hi = float(val[0]), float(val[1])
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0 or hi <= lo:
        raise s.error(name, f"expected 0 < low < high (finite), got [{lo:g}, {hi:g}]")
    if lo < MIN_BAND_HZ or hi > MAX_BAND_HZ:
        raise s.error(name, f"expected a band within [{MIN_BAND_HZ:g}, {MAX_BAND_HZ:g}] Hz, "
                      f"got [{lo:g}, {hi:g}] (a {hi:g}-Hz edge needs a {0.5 / hi:.3g}-s tick, "
                      f"{2 * hi * 3600:,.0f} samples per hour of power; a {lo:g}-Hz edge a "
                      f"spectrum segment of {8 / lo:,.0f} s)")
    return lo, hi


def _choice(s: Section, name: str, options: tuple[str, ...], default: str | None) -> str:
    return choice(s.string(name, default), None, options,
                  error=lambda m: s.error(name, m))


def _requirement(s: Section) -> Requirement:
    name = s.string("name")
    if not name.strip():
        raise s.error("name", "is empty")
    kind = _choice(s, "kind", KINDS, None)
    unit = s.string("unit")
    if unit not in UNITS[kind]:
        raise s.error("unit", f"{unit!r} is not a unit of a {kind} limit; use one of "
                      f"{', '.join(UNITS[kind])}")
    limit = s.number("limit", required=True)
    kw: dict = {}
    if kind == "ramp":
        kw["window_s"] = s.number("window_s", required=True, lo=0.0, lo_open=True, hi=MAX_WINDOW_S)
        kw["direction"] = _choice(s, "direction", _DIRECTIONS, "both")
    elif kind == "deviation":
        kw["window_s"] = s.number("window_s", required=True, lo=0.0, lo_open=True, hi=MAX_WINDOW_S)
    elif kind == "oscillation":
        kw["band_hz"] = _band(s)
        kw["measure"] = _choice(s, "measure", _MEASURES, None)
        lo = kw["band_hz"][0]
        kw["window_s"] = s.number("window_s", default_band_window_s(lo), lo=0.0,
                                  lo_open=True)
        if kw["window_s"] < 2.0 / lo * (1 - 1e-9):
            raise s.error("window_s", f"must hold at least two periods of the band's low "
                          f"edge ({2.0 / lo:g} s for {lo:g} Hz), got {kw['window_s']:g}")
    elif kind == "step":
        kw["window_s"] = s.number("within_s", 1.0, lo=0.0, lo_open=True, hi=MAX_WINDOW_S)
        kw["direction"] = _choice(s, "direction", _DIRECTIONS, "both")
    else:
        kw["residual_voltage_pu"] = s.number("residual_voltage_pu", required=True, hi=1.0)
        if kw["residual_voltage_pu"] >= 1.0:
            raise s.error("residual_voltage_pu", "must be below 1 pu (a sag lowers the "
                          "voltage; 0.7 means a sag to 70 % of nominal)")
        kw["window_s"] = s.number("sag_duration_s", required=True, lo=0.0, lo_open=True,
                                  hi=MAX_SAG_S)
        kw["observe_s"] = s.number("observe_s", 1.0, hi=MAX_SAG_S)
    req = Requirement(name=name, kind=kind, limit=limit, unit=unit, source=_source(s),
                      illustrative=_flag(s, "illustrative"), **kw)
    s.finish()
    return req


def _mode(s: Section) -> GridMode:
    mode = GridMode(name=s.string("name"), band_hz=_band(s),
                    min_amplitude_megawatts=s.number("min_amplitude_megawatts",
                                                     required=True),
                    source=_source(s), illustrative=_flag(s, "illustrative"))
    s.finish()
    return mode


def _unique(items, what: str, src: str | None) -> None:
    seen: dict[str, int] = {}
    for i, it in enumerate(items):
        if it.name in seen:
            raise ScenarioError(f"duplicate name {it.name!r} (also {what}[{seen[it.name]}])",
                                key=f"{what}[{i}].name", path=src)
        seen[it.name] = i


def parse_requirements(source: str | Mapping, *, path: str | Path | None = None
                       ) -> RequirementSpec:
    """Build a :class:`RequirementSpec` from YAML text or an already-parsed mapping.

    Parameters
    ----------
    source : str or mapping
        YAML document text, or the mapping it parses to.
    path : str or Path, optional
        File the text came from, for error messages.

    Returns
    -------
    RequirementSpec

    Raises
    ------
    ScenarioError
        Naming the key path (``requirements[2].band_hz``) and what was expected.
    """
    src = None if path is None else str(path)
    data = load_yaml(source, source=src) if isinstance(source, str) else source
    top = Section(data, "", src)
    name = top.string("name", "requirements")
    description = top.string("description", "")
    top.renamed("scope", "boundary")
    boundary = _choice(top, "boundary", BOUNDARIES, "facility")
    p_max = top.number("max_exceed_probability", 0.0, hi=1.0)
    rule = _choice(top, "deviation_rule", DEVIATION_RULES, DEVIATION_RULES[0])
    if p_max >= 1.0:
        raise top.error("max_exceed_probability", "must be below 1 (1 would let every "
                        "draw exceed every limit)")
    raw = top.raw("requirements")
    if not isinstance(raw, list) or not raw:
        raise ScenarioError("expected a non-empty list of requirements",
                            key="requirements", path=src)
    reqs = tuple(_requirement(Section(r, f"requirements[{i}]", src))
                 for i, r in enumerate(raw))
    _unique(reqs, "requirements", src)
    raw_modes = top.raw("grid_modes")
    if raw_modes is None:
        raw_modes = []
    if not isinstance(raw_modes, list):
        raise ScenarioError(f"expected a list of grid modes, got {type(raw_modes).__name__}",
                            key="grid_modes", path=src)
    modes = tuple(_mode(Section(m, f"grid_modes[{i}]", src)) for i, m in enumerate(raw_modes))
    _unique(modes, "grid_modes", src)
    top.finish()
    spec = RequirementSpec(name=name, description=description, boundary=boundary,
                           max_exceed_probability=p_max, requirements=reqs,
                           grid_modes=modes, source=src, deviation_rule=rule)
    for i, r in enumerate(reqs):
        if r.kind == "deviation" and rule == DEVIATION_RULES[0] and not spec.gated_ramps(r):
            raise ScenarioError(
                f"deviation {r.name!r} is read as the allowance before ramp limits are "
                f"triggered (Choukse et al. 2025), but no ramp requirement has windows that "
                f"fit in its {r.window_s:g} s (2 x window_s <= {r.window_s:g}); add one, or "
                "set deviation_rule: separate_limit to check it as a limit of its own",
                key=f"requirements[{i}].window_s", path=src)
    return spec


def read_requirements(path: str | Path) -> RequirementSpec:
    """Read a requirement spec YAML file.

    Parameters
    ----------
    path : str or Path
        The YAML file.

    Returns
    -------
    RequirementSpec
    """
    p = Path(path)
    return parse_requirements(read_yaml_text(p, what="requirement spec"), path=p)
