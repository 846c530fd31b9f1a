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
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._options import choice, renamed_attribute, renamed_keywords
from ..exceptions import ScenarioError
from .yamlspec import Section, load_yaml

__all__ = [
    "DEVIATION_RULES",
    "KINDS",
    "LIMIT_BANDS_HZ",
    "UNITS",
    "GridMode",
    "Requirement",
    "RequirementSpec",
    "evaluate_power",
    "limits_spec",
    "metric_name",
    "parse_requirements",
    "plan_requirements",
    "read_requirements",
    "rule_note",
]

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
        (:data:`powerlab.site.scenario.BOUNDARIES`; ``scope`` is its deprecated name).
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
        from .loadmetrics import default_band_window_s

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
        kw["window_s"] = s.number("sag_duration_s", required=True, lo=0.0, lo_open=True, hi=MAX_SAG_S)
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
    boundary = _choice(top, "boundary", ("facility", "it"), "facility")
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
    from .yamlspec import read_yaml_text

    p = Path(path)
    return parse_requirements(read_yaml_text(p, what="requirement spec"), path=p)


# --------------------------------------------------------------------------- evaluation
# One evaluation for every limit powerlab checks: a utility's spec (interconnect's
# Compliance, the mitigation search, the study package) and a scenario's ``limits:``
# block (read as a spec by :func:`limits_spec`; ``site.swings.check_limits``).

#: Status of a requirement for a series: assessable (``ok``), only the resolved part of an
#: RMS band (``partial``), or not at all (``no``).
ASSESSABLE, PARTIAL, NOT_ASSESSABLE = "ok", "partial", "no"


def _assess(req: Requirement, tick_s: float, native_s: float, duration_s: float
            ) -> tuple[str, str]:
    """(status, note) of one requirement for series of this tick, native interval and
    length (see :func:`plan_requirements`)."""
    from ..exceptions import AnalysisError
    from . import loadmetrics as lm

    res = max(tick_s, native_s)
    if req.kind in ("ramp", "deviation", "step"):
        try:
            lm.whole_ticks(req.window_s, tick_s)
        except AnalysisError as exc:
            return NOT_ASSESSABLE, str(exc)
        if req.window_s < native_s * (1 - 1e-9):
            return NOT_ASSESSABLE, (f"readings every {native_s:g} s cannot resolve a "
                                    f"{req.window_s:g}-s window")
        need = 2 * req.window_s if req.kind == "ramp" else req.window_s + tick_s
        if duration_s < need:
            return NOT_ASSESSABLE, f"{duration_s:g} s of data is shorter than {need:g} s"
        return ASSESSABLE, ""
    if req.kind == "oscillation":
        lo, hi = req.band_hz
        nyq = 0.5 / res
        if lo >= nyq:
            return NOT_ASSESSABLE, (f"band {lo:g}-{hi:g} Hz lies above {nyq:g} Hz, the "
                                    f"Nyquist frequency of {res:g}-s samples")
        try:
            lm.whole_ticks(req.window_s, tick_s)
        except AnalysisError as exc:
            return NOT_ASSESSABLE, str(exc)
        need = req.window_s + 2 * lm.settle_s(lo)
        if duration_s < need * (1 - 1e-9):
            return NOT_ASSESSABLE, (
                f"{duration_s:g} s of data is shorter than the {req.window_s:g}-s window "
                f"plus {lm.settle_s(lo):g} s at each end (the band filter's transients)")
        if hi > nyq:
            note = (f"band cut at {nyq:g} Hz (Nyquist frequency of {res:g}-s samples); "
                    f"value over {lo:g}-{nyq:g} Hz only")
            return (PARTIAL if req.measure == "rms" else NOT_ASSESSABLE), note
        return ASSESSABLE, ""
    return ASSESSABLE, ""   # ride_through: decided per draw by the sags present


def plan_requirements(spec: RequirementSpec, tick_s: float, native_interval_s: float,
                      duration_s: float) -> dict[str, tuple[str, str]]:
    """Which requirements series of this tick, native interval and length can assess.

    Parameters
    ----------
    spec : RequirementSpec
    tick_s : float
        Sample spacing of the series [s].
    native_interval_s : float
        Interval of the readings the series was made from (the tick for a forecast) [s].
    duration_s : float
        Length of the series [s].

    Returns
    -------
    dict
        ``{requirement: (status, note)}``, status :data:`ASSESSABLE` (``ok``),
        :data:`PARTIAL` (``partial``: an RMS band cut at the Nyquist frequency, its
        resolved part evaluated) or :data:`NOT_ASSESSABLE` (``no``), the reason in ``note``.
        A deviation allowance whose ramp limits cannot be assessed is not assessable.
    """
    key = (float(tick_s), float(native_interval_s), float(duration_s))
    plan = {r.name: _assess(r, *key) for r in spec.requirements}
    for r in spec.requirements:   # an allowance needs a ramp limit to trigger
        gated = spec.gated_ramps(r)
        if gated and plan[r.name][0] == ASSESSABLE and all(
                plan[g.name][0] != ASSESSABLE for g in gated):
            plan[r.name] = (NOT_ASSESSABLE, (
                "it is the allowance before the ramp limits "
                f"({', '.join(g.name for g in gated)}), which these data cannot assess"))
    return plan


def metric_name(spec: RequirementSpec, req: Requirement) -> str:
    """The ``metric`` column of a requirement: :attr:`Requirement.metric`, qualified where
    the spec's ``deviation_rule`` changes what is measured."""
    if req.kind == "ramp" and spec.allowances(req):
        gates = "_".join(f"{d.window_s:g}s" for d in spec.allowances(req))
        return f"{req.metric}_beyond_deviation_allowance_{gates}"
    if req.kind == "deviation" and spec.deviation_rule == "allowance_before_ramp":
        return f"{req.metric}_where_a_ramp_limit_is_exceeded"
    return req.metric


def rule_note(spec: RequirementSpec, req: Requirement) -> str:
    """How the deviation rule shaped a ramp or deviation row ('' when it did not)."""
    if req.kind == "ramp" and spec.allowances(req):
        names = ", ".join(d.name for d in spec.allowances(req))
        return (f"ramps count only where the power leaves the short-term deviation "
                f"allowance ({names}; Choukse et al. 2025: deviation allowed before ramp "
                "constraints are triggered)")
    if req.kind == "deviation" and spec.deviation_rule == "allowance_before_ramp":
        names = ", ".join(g.name for g in spec.gated_ramps(req))
        return (f"allowance before the ramp limits ({names}) are triggered: fails only "
                "where the power leaves it and breaks a ramp limit there (deviation_rule: "
                "separate_limit checks it as a limit of its own)")
    return ""


def evaluate_power(spec: RequirementSpec, power_w, tick_s: float,
                   native_interval_s: float | None = None, *, plan: Mapping | None = None,
                   ride_through=None) -> tuple[dict[str, float], dict[str, float]]:
    """Every requirement's value on one power series, in the requirement's unit.

    The one evaluation of powerlab's limits: interconnection specs
    (:class:`powerlab.interconnect.compliance.Compliance`) and a scenario's ``limits:``
    (:func:`limits_spec`, :func:`powerlab.site.swings.check_limits`) both come here.

    Parameters
    ----------
    spec : RequirementSpec
    power_w : array_like
        The power the spec applies to (``spec.boundary``), one value per tick [W].
    tick_s : float
        Sample spacing [s].
    native_interval_s : float, optional
        Interval of the readings behind the series (default: the tick) [s].
    plan : mapping, optional
        :func:`plan_requirements` of this series (computed when not given).
    ride_through : callable, optional
        ``ride_through(requirement) -> load loss [W]`` for ``ride_through``
        requirements (they need the series' voltage sags); NaN without it.

    Returns
    -------
    values : dict
        ``{requirement: value}`` in each requirement's unit; NaN where the series cannot
        assess it.
    details : dict
        For every windowed oscillation requirement, where its worst window starts
        (``"<name>.worst_window_start_s"``, seconds from the first sample) and the share
        of its windows over the limit (``"<name>.share_of_windows_over_limit"``).
    """
    from . import loadmetrics as lm

    tick = float(tick_s)
    x = np.asarray(power_w, dtype=float)
    native = tick if native_interval_s is None else float(native_interval_s)
    if plan is None:
        plan = plan_requirements(spec, tick, native, len(x) * tick)
    out: dict[str, float] = {}
    detail: dict[str, float] = {}
    for r in spec.requirements:
        if plan[r.name][0] == NOT_ASSESSABLE:
            out[r.name] = math.nan
            continue
        if r.kind == "ramp":
            gates = [(d.window_s, d.limit_si) for d in spec.allowances(r)
                     if plan[d.name][0] == ASSESSABLE]
            v = (lm.gated_ramp(x, tick, r.window_s, r.direction, gates) if gates
                 else lm.ramp_of_means(x, tick, r.window_s, r.direction))
        elif r.kind == "deviation":
            ramps = [(g.window_s, g.direction, g.limit_si) for g in spec.gated_ramps(r)
                     if plan[g.name][0] == ASSESSABLE]
            v = (lm.deviation_beyond_allowance(x, tick, r.window_s, r.limit_si, ramps)
                 if spec.deviation_rule == "allowance_before_ramp"
                 else lm.largest_deviation(x, tick, r.window_s))
        elif r.kind == "oscillation":   # cut at the Nyquist frequency of the data
            band = (r.band_hz[0], min(r.band_hz[1], 0.5 / max(tick, native)))
            bw = lm.band_windows(x, tick, band, r.window_s, r.measure)
            v = bw.worst_w
            detail[f"{r.name}.worst_window_start_s"] = bw.worst_start_s
            detail[f"{r.name}.share_of_windows_over_limit"] = bw.share_over(r.limit_si)
        elif r.kind == "step":
            v = lm.largest_step(x, tick, r.window_s, r.direction)
        else:
            v = math.nan if ride_through is None else ride_through(r)
        out[r.name] = v / r.unit_factor
    return out, detail


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
    limits : powerlab.site.scenario.Limits
    name : str
        Name of the spec.

    Returns
    -------
    RequirementSpec
        ``boundary`` is the limits' :attr:`~powerlab.site.scenario.Limits.boundary`; a
        requirement's name is the ``limit`` of :func:`powerlab.site.swings.check_limits`.
    """
    from .loadmetrics import default_band_window_s

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
