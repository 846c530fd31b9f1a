"""The site's electrical front end: what stands between the forecast's power and the grid.

The forecast gives the power the site draws (IT power and facility power).  What the grid
sees at the point of interconnection (POI) - active power P, reactive power Q, and how
both behave when the voltage or frequency leaves its normal range - is set by the
equipment in between.  :class:`SiteEquipment` names every parameter of that equipment,
with its source and default, in five groups:

- :class:`PowerSupplies` - the servers' power supplies (PSUs): hold-up time, input
  current limit, input frequency range, power factor and efficiency against load;
- :class:`Ups` - the UPS: topology (IEC 62040-3 classes VFI, VI, VFD), the share of IT
  load behind it, the input voltage and frequency window beyond which it goes to
  battery, its transfer time, battery autonomy, and how it walks the load back;
- :class:`Auxiliaries` - the non-IT load (cooling, electrical losses): power factor and
  the voltage below which its drives and contactors drop out, and their restart;
- :class:`Protection` - the site's own relays at the POI: under/over-voltage (ANSI 27/59)
  and under/over-frequency (81U/81O) pickups and delays, and the reconnection time;
- :class:`Poi` - the grid at the POI: nominal voltage, frequency, short-circuit level and
  X/R (for the voltage channel of the playback files).

**P and Q at the POI** (:func:`pq_at_poi`, the function other modules use to turn a
forecast's P series into P and Q; :func:`trace_pq` for a
:class:`~powerlab.interconnect.powertrace.PowerTrace`): P is the facility power; Q is the
sum over the three paths of ``P_path * tan(acos(pf_path))`` with the path's sign
(positive: absorbed, load convention): IT load behind a double-conversion UPS shows the
UPS rectifier's input power factor; IT load not behind one (or behind a VI/VFD UPS in
normal mode, which passes the load through) shows the PSUs' power factor at their loading
(interpolated in :attr:`PowerSupplies.power_factor_curve`); the rest of the facility power
shows :attr:`Auxiliaries.power_factor`.

Every field is overridable from the scenario YAML (:func:`equipment_from_scenario`)::

    equipment:
      psu: {holdup_s: 0.016, power_factor_curve: [[0.1, 0.9], [1.0, 0.99]]}
      ups: {topology: double_conversion, it_share: 1.0, transfer_threshold_pu: 0.85}
      protection: {undervoltage_pu: 0.7, undervoltage_delay_s: 2.0}
      poi: {short_circuit_mva: 2000, x_over_r: 10}

Defaults are typical values from the sources below, not this site's settings: the data
list (:mod:`powerlab.interconnect.datalist`) names each one the site must confirm.

References
----------
.. [1] Information Technology Industry Council, "ITI (CBEMA) Curve Application Note",
   2000 (no-interruption region: 0 V for 20 ms, 70 % for 0.5 s, 80 % for 10 s).
.. [2] SEMI F47-0706, "Specification for Semiconductor Processing Equipment Voltage Sag
   Immunity" (50 % for 200 ms, 70 % for 0.5 s, 80 % for 1 s).
.. [3] IEC 62040-3:2021, "Uninterruptible power systems - Part 3: Method of specifying
   the performance and test requirements", clause 5.3.4 (classification VFI / VI / VFD)
   and Annex (output dynamic performance classes 1-3: class 1 zero interruption).
.. [4] Intel, "Common Redundant Power Supply (CRPS) Design Specification" (hold-up time
   10 ms at 100 % load; AC input 90-264 V, 47-63 Hz); Intel "ATX12V Power Supply Design
   Guide" (hold-up >= 16 ms / 17 ms at full load).  Typical server PSU hold-up 10-20 ms.
.. [5] CLEAResult, "80 PLUS" certification levels, 230 V internal redundant: Titanium
   90 / 94 / 96 / 91 % efficiency at 10 / 20 / 50 / 100 % load; power factor >= 0.95 at
   50 % load.
.. [6] IEEE Std C37.2-2008, device function numbers (27 undervoltage, 59 overvoltage,
   81 frequency); NERC PRC-024-3 (generator frequency/voltage no-trip zones, 57.0-61.8 Hz
   in the Eastern Interconnection), used here only as the assumed relay envelope.
.. [7] ERCOT Nodal Operating Guide section 2.9 / NPRR 1234 draft (large-load voltage and
   frequency ride-through), as summarised publicly; NERC Level 3 Alert "Computational
   Load Modeling, Studies, Instrumentation, Commissioning, Operations, Protection, and
   Control" (May 2026).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from .._options import Options, choice
from ..exceptions import ScenarioError
from ..limits.yamlspec import Section

__all__ = [
    "Auxiliaries",
    "Poi",
    "PowerSupplies",
    "Protection",
    "SiteEquipment",
    "Ups",
    "UPS_TOPOLOGIES",
    "equipment_from_scenario",
    "parse_equipment",
    "pq_at_poi",
    "tan_phi",
    "trace_pq",
    "voltage_at_poi_pu",
    "with_overrides",
]

#: UPS topologies and their IEC 62040-3 classification.
UPS_TOPOLOGIES = {"double_conversion": "VFI", "line_interactive": "VI", "standby": "VFD",
                  "none": "-"}


@dataclass(frozen=True)
class PowerSupplies(Options):
    """Server power supplies (PSUs) [4]_ [5]_.

    Attributes
    ----------
    holdup_s : float, default 0.012
        Hold-up time at the PSU's rated load: how long its bulk capacitor carries the
        output with no input (CRPS: >= 10 ms at 100 % load; typical 10-20 ms) [s].
    current_limit_pu : float, default 1.4
        Input current limit, per unit of the input current at rated load and nominal
        voltage: the PSU draws constant power down to ``1 / current_limit_pu`` of nominal
        voltage (0.71 pu) and, below, ``V x I_limit`` plus its capacitor (assumed; the
        90 V low-line limit of a 200-240 V PSU at rated power is 1.3-1.5 pu current) [-].
    loading : float, default 0.5
        PSU loading at the site's peak IT power, share of its rating (N+N redundant pairs
        share the load: about 0.5) [-].
    restart_pu : float, default 0.85
        Input voltage above which a PSU that dropped out restarts ("brown-in") [pu].
    frequency_min_hz, frequency_max_hz : float, default 47, 63
        Input frequency range (CRPS: 47-63 Hz); outside it the PSU shuts down [Hz].
    reboot_s : float, default 300
        From a PSU dropout to the server back in service (power-on, firmware, operating
        system, health checks; assumed) [s].
    power_factor_curve : tuple of (loading, power factor)
        Input power factor against loading, interpolated (80 PLUS: >= 0.95 at 50 %; the
        points are typical of active-PFC server PSUs) [-].
    efficiency_curve : tuple of (loading, efficiency)
        Efficiency against loading (80 PLUS Titanium, 230 V internal redundant) [-].
    reactive_sign : float, default -1
        Sign of the PSUs' reactive power: -1 leading (EMI-filter capacitors of active-PFC
        supplies dominate at partial load), +1 lagging [-].
    """

    holdup_s: float = 0.012
    current_limit_pu: float = 1.4
    loading: float = 0.5
    restart_pu: float = 0.85
    frequency_min_hz: float = 47.0
    frequency_max_hz: float = 63.0
    reboot_s: float = 300.0
    power_factor_curve: tuple = ((0.1, 0.90), (0.2, 0.95), (0.5, 0.98), (1.0, 0.99))
    efficiency_curve: tuple = ((0.1, 0.90), (0.2, 0.94), (0.5, 0.96), (1.0, 0.91))
    reactive_sign: float = -1.0

    @property
    def constant_power_pu(self) -> float:
        """Lowest voltage at which the PSU still draws its full power [pu]."""
        return 1.0 / self.current_limit_pu

    def power_factor(self, loading) -> np.ndarray:
        """Input power factor at ``loading`` (share of rating) [-]."""
        x, y = np.asarray(self.power_factor_curve, dtype=float).T
        return np.interp(loading, x, y)

    def efficiency(self, loading) -> np.ndarray:
        """Efficiency at ``loading`` (share of rating) [-]."""
        x, y = np.asarray(self.efficiency_curve, dtype=float).T
        return np.interp(loading, x, y)

    def dropout_s(self, residual_voltage_pu: float, loading: float | None = None) -> float:
        """How long a PSU runs at residual voltage ``v`` before it drops out [s].

        Energy balance of the bulk capacitor: it holds ``holdup_s`` at rated load; at
        ``loading`` it lasts ``holdup_s / loading`` with no input; with input ``v`` below
        :attr:`constant_power_pu` the grid still delivers ``v / constant_power_pu`` of the
        power, so the capacitor covers the rest:
        ``t = holdup_s / loading / (1 - v / constant_power_pu)``; infinite at or above
        :attr:`constant_power_pu`.
        """
        v = float(residual_voltage_pu)
        if v >= self.constant_power_pu - 1e-12:
            return math.inf
        ld = self.loading if loading is None else loading
        return self.holdup_s / max(ld, 1e-9) / (1.0 - v / self.constant_power_pu)


@dataclass(frozen=True)
class Ups(Options):
    """The UPS in front of the IT load [3]_.

    Attributes
    ----------
    topology : {'double_conversion', 'line_interactive', 'standby', 'none'}
        IEC 62040-3 VFI, VI or VFD, or no UPS.
    it_share : float, default 1
        Share of the IT load behind the UPS [-].
    transfer_threshold_pu : float, default 0.85
        Input voltage below which the UPS carries its load from the battery (rectifier
        input tolerance -15 %, typical of VFI units at full load) [pu].
    frequency_tolerance_hz : float, default 3
        Input frequency deviation beyond which it goes to battery (+-5 % at 60 Hz) [Hz].
    transfer_time_s : float, default 0
        Break at transfer to battery: 0 for VFI (class 1), 2-4 ms VI, 4-10 ms VFD [s].
    autonomy_s : float, default 300
        Battery autonomy at the site's load (5 min assumed) [s].
    return_delay_s : float, default 1
        From the input back within tolerance to the start of the walk-in [s].
    walk_in_s : float, default 10
        Rectifier walk-in: the time over which the load returns to the grid, linearly [s].
    input_power_factor : float, default 0.99
        Input power factor of the UPS rectifier (IGBT active front end) [-].
    reactive_sign : float, default 1
        +1 lagging, -1 leading [-].
    """

    topology: str = "double_conversion"
    it_share: float = 1.0
    transfer_threshold_pu: float = 0.85
    frequency_tolerance_hz: float = 3.0
    transfer_time_s: float = 0.0
    autonomy_s: float = 300.0
    return_delay_s: float = 1.0
    walk_in_s: float = 10.0
    input_power_factor: float = 0.99
    reactive_sign: float = 1.0

    def __post_init__(self):
        choice(self.topology, "ups.topology", UPS_TOPOLOGIES)

    @property
    def share(self) -> float:
        """Share of the IT load behind a UPS (0 without one) [-]."""
        return 0.0 if self.topology == "none" else float(self.it_share)


@dataclass(frozen=True)
class Auxiliaries(Options):
    """The non-IT load: cooling drives, pumps, lighting, electrical losses.

    Attributes
    ----------
    power_factor : float, default 0.95
        Power factor of the non-IT load (drives with diode or active front ends) [-].
    reactive_sign : float, default 1
        +1 lagging [-].
    dropout_pu : float, default 0.7
        Voltage below which motor contactors and drive DC links drop out (contactors
        typically hold down to 0.6-0.75 pu) [pu].
    dropout_s : float, default 0.05
        How long below ``dropout_pu`` before they drop out (3 cycles) [s].
    restart_s : float, default 120
        From dropout to the cooling load back (drive auto-restart, chiller restart is
        longer; assumed) [s].
    """

    power_factor: float = 0.95
    reactive_sign: float = 1.0
    dropout_pu: float = 0.7
    dropout_s: float = 0.05
    restart_s: float = 120.0


@dataclass(frozen=True)
class Protection(Options):
    """The site's relays at the POI [6]_ (assumed settings; the site must give its own).

    Attributes
    ----------
    undervoltage_pu, undervoltage_delay_s : float, default 0.5, 2.0
        ANSI 27: trips the site when the voltage stays below for the delay [pu], [s].
    overvoltage_pu, overvoltage_delay_s : float, default 1.2, 1.0
        ANSI 59 [pu], [s].
    underfrequency_hz, underfrequency_delay_s : float, default 0.95 f0, 0.5
        ANSI 81U: trips below this frequency after the delay (default 57.0 Hz on a
        60-Hz system, 47.5 Hz on a 50-Hz one) [Hz], [s].
    overfrequency_hz, overfrequency_delay_s : float, default 1.03 f0, 0.5
        ANSI 81O (default 61.8 Hz at 60 Hz, 51.5 Hz at 50 Hz) [Hz], [s].
    reconnect_s : float, default 300
        From a protection trip to the site reconnected (assumed; utilities commonly ask
        for 5 min of normal voltage and frequency first) [s].
    """

    undervoltage_pu: float = 0.5
    undervoltage_delay_s: float = 2.0
    overvoltage_pu: float = 1.2
    overvoltage_delay_s: float = 1.0
    underfrequency_hz: float | None = None
    underfrequency_delay_s: float = 0.5
    overfrequency_hz: float | None = None
    overfrequency_delay_s: float = 0.5
    reconnect_s: float = 300.0

    def frequency_band_hz(self, f0_hz: float) -> tuple[float, float]:
        """(81U, 81O) pickups on a system of nominal frequency ``f0_hz`` [Hz]."""
        lo = self.underfrequency_hz if self.underfrequency_hz is not None else 0.95 * f0_hz
        hi = self.overfrequency_hz if self.overfrequency_hz is not None else 1.03 * f0_hz
        return float(lo), float(hi)


@dataclass(frozen=True)
class Poi(Options):
    """The grid at the point of interconnection.

    Attributes
    ----------
    nominal_kv : float, default 138
        Nominal line-to-line voltage [kV].
    frequency_hz : float, default 60
        Nominal frequency [Hz].
    short_circuit_mva : float, optional
        Three-phase short-circuit level at the POI (None: unknown; the voltage channel
        and voltage change need it) [MVA].
    x_over_r : float, default 10
        X/R ratio of the grid's impedance at the POI [-].
    """

    nominal_kv: float = 138.0
    frequency_hz: float = 60.0
    short_circuit_mva: float | None = None
    x_over_r: float = 10.0


@dataclass(frozen=True)
class SiteEquipment(Options):
    """The site's electrical front end (see the module docstring).

    Attributes
    ----------
    psu, ups, auxiliaries, protection, poi
        The groups of parameters, each with its defaults.
    overridden : tuple of str
        Key paths set by the scenario (the rest are the defaults).
    """

    psu: PowerSupplies = field(default_factory=PowerSupplies)
    ups: Ups = field(default_factory=Ups)
    auxiliaries: Auxiliaries = field(default_factory=Auxiliaries)
    protection: Protection = field(default_factory=Protection)
    poi: Poi = field(default_factory=Poi)
    overridden: tuple = ()

    def parameters(self) -> list[tuple[str, object]]:
        """Every parameter as ``(key path, value)``, e.g. ``("psu.holdup_s", 0.012)``."""
        out = []
        for g in ("psu", "ups", "auxiliaries", "protection", "poi"):
            obj = getattr(self, g)
            out += [(f"{g}.{f.name}", getattr(obj, f.name)) for f in fields(obj)]
        return out


_GROUPS = {"psu": PowerSupplies, "ups": Ups, "auxiliaries": Auxiliaries,
           "protection": Protection, "poi": Poi}


def parse_equipment(raw, source: str | None = None) -> SiteEquipment:
    """Read a scenario's ``equipment:`` mapping (key paths ``equipment.psu.holdup_s``);
    every key optional, unknown keys refused."""
    top = Section(raw, "equipment", source)
    groups, set_keys = {}, []
    for name, cls in _GROUPS.items():
        sec = top.section(name)
        kw = {}
        for f in fields(cls):
            if not sec.has(f.name):
                continue
            set_keys.append(sec.key(f.name))
            kw[f.name] = _value(sec, f.name, getattr(cls(), f.name))
        sec.used.update(f.name for f in fields(cls))    # "did you mean" in finish()
        sec.finish()
        try:
            groups[name] = cls(**kw)
        except Exception as exc:        # choice() of ups.topology
            raise ScenarioError(str(exc), key=f"equipment.{name}", path=source) from None
    top.finish()
    return SiteEquipment(**groups, overridden=tuple(set_keys))


def _value(sec: Section, name: str, default):
    """One field's value, typed after its default: a string, a curve of (x, y) pairs
    (x increasing) or a number."""
    if isinstance(default, str):
        return sec.string(name)
    if isinstance(default, tuple):
        raw = sec.raw(name)
        try:
            pts = tuple((float(a), float(b)) for a, b in raw)
        except (TypeError, ValueError):
            raise sec.error(name, "expected a list of [x, y] pairs") from None
        if len(pts) < 1 or any(b[0] <= a[0] for a, b in zip(pts, pts[1:])):
            raise sec.error(name, "expected [x, y] pairs with x increasing")
        return pts
    lo = -1.0 if name == "reactive_sign" else 0.0
    return sec.number(name, lo=lo)


def equipment_from_scenario(scenario) -> SiteEquipment:
    """The scenario's equipment (its ``equipment:`` block over the defaults; the defaults
    alone without one; ``poi.frequency_hz`` as given)."""
    raw = getattr(scenario, "equipment", None)
    return parse_equipment(raw, getattr(scenario, "source", None)) if raw else SiteEquipment()


def tan_phi(pf: np.ndarray | float) -> np.ndarray:
    """Q/P of a power factor: ``tan(acos(pf))`` (pf clipped to (0, 1]) [-]."""
    pf = np.clip(np.asarray(pf, dtype=float), 1e-6, 1.0)
    return np.sqrt(1.0 - pf ** 2) / pf


def pq_at_poi(facility_w, it_w=None, equipment: SiteEquipment | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """P and Q at the point of interconnection from the forecast's power.

    Parameters
    ----------
    facility_w : array_like
        Facility power, the active power at the POI [W].
    it_w : array_like, optional
        IT power at the same instants (default: all of the facility power is IT) [W].
    equipment : SiteEquipment, optional
        Default ``SiteEquipment()``.

    Returns
    -------
    (ndarray, ndarray)
        P [W] (the facility power) and Q [var] (positive: absorbed), see the module
        docstring: ``Q = P_ups * s_u * tan(acos(pf_ups)) + P_psu * s_p *
        tan(acos(pf_psu(loading))) + P_aux * s_a * tan(acos(pf_aux))`` with the PSU
        loading ``psu.loading * it / max(it)``.
    """
    eq = equipment or SiteEquipment()
    p = np.asarray(facility_w, dtype=float)
    it = p if it_w is None else np.asarray(it_w, dtype=float)
    it = np.minimum(it, p) if it_w is not None else it
    peak = float(np.max(it)) if it.size and np.max(it) > 0 else 1.0
    loading = eq.psu.loading * np.clip(it, 0.0, None) / peak
    vfi = eq.ups.topology == "double_conversion"
    behind = eq.ups.share if vfi else 0.0
    q = (it * behind * eq.ups.reactive_sign * tan_phi(eq.ups.input_power_factor)
         + it * (1.0 - behind) * eq.psu.reactive_sign
         * tan_phi(eq.psu.power_factor(loading))
         + (p - it) * eq.auxiliaries.reactive_sign * tan_phi(eq.auxiliaries.power_factor))
    return p.copy(), q


def trace_pq(trace, equipment: SiteEquipment | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pq_at_poi` of a :class:`~powerlab.interconnect.powertrace.PowerTrace` (its
    facility power, or its IT power when it has none, and its IT power) [W], [var]."""
    fac = trace.facility_w if trace.facility_w is not None else trace.it_w
    return pq_at_poi(fac, trace.it_w, equipment)


def voltage_at_poi_pu(p_w, q_var, poi: Poi) -> np.ndarray:
    """Voltage at the POI against the grid's open-circuit voltage [pu].

    The usual approximation of the voltage drop over the grid's Thevenin impedance
    (IEC 61000-3-7 / IEC TR 61000-3-7 clause 6; ``dV/V = (P R + Q X) / V^2``): with
    ``|Z| = V^2 / S_sc`` and ``theta = atan(X/R)``,
    ``V = 1 - (P cos(theta) + Q sin(theta)) / S_sc``.

    Raises
    ------
    ScenarioError
        When ``poi.short_circuit_mva`` is not given.
    """
    if not poi.short_circuit_mva:
        raise ScenarioError("the voltage at the point of interconnection needs the "
                            "short-circuit level: set equipment.poi.short_circuit_mva",
                            key="equipment.poi.short_circuit_mva")
    th = math.atan(poi.x_over_r)
    s = poi.short_circuit_mva * 1e6
    return 1.0 - (np.asarray(p_w, float) * math.cos(th)
                  + np.asarray(q_var, float) * math.sin(th)) / s


def with_overrides(eq: SiteEquipment, **groups) -> SiteEquipment:
    """A copy with groups' fields replaced: ``with_overrides(eq, ups={"it_share": 0})``."""
    out = {g: replace(getattr(eq, g), **kw) for g, kw in groups.items()}
    return replace(eq, **out)
