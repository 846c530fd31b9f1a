"""Voltage change and flicker at the point of interconnection from the site's P and Q.

The grid behind the point of interconnection is a Thevenin source of short-circuit power
``S_sc`` and ratio ``X/R``: ``Z = V^2 / S_sc``, ``R = Z / sqrt(1 + (X/R)^2)``,
``X = R (X/R)``.  A change of the site's active and reactive power by ``dP``, ``dQ``
(consumption positive, ``Q > 0`` lagging/inductive) changes the voltage by, to first
order,

    dV / V = -(R dP + X dQ) / V^2 = -(dP cos(psi) + dQ sin(psi)) / S_sc,  psi = atan(X/R)

(IEC/TR 61000-3-7:2008 clause 6.3, equation for the relative voltage change; IEEE Std
1453-2015 clause 6).  From the P and Q series this module forms the relative voltage
``v(t) = 1 + dV/V(t)`` (against the series' first value), lists the voltage steps
(:func:`voltage_steps`: consecutive changes of one sign merged, so a ramp over a few
ticks is one step), and feeds ``v(t)`` to the IEC 61000-4-15 flickermeter
(:mod:`powerlab.interconnect.flicker`) for Pst and, over two hours, Plt.

Assumptions, stated: the source voltage behind the impedance is constant (no other load's
fluctuation, no voltage regulation by the grid or tap changers within the record); the
first-order formula holds (``|dV/V|`` of a few percent); where no reactive power series
is given, ``Q = P tan(acos(pf))`` at a constant power factor ``pf``
(:class:`GridStrength`) - the equipment model's Q replaces it when available.

References
----------
.. [1] IEC/TR 61000-3-7:2008, "Assessment of emission limits for the connection of
   fluctuating installations to MV, HV and EHV power systems", clause 6.3.
.. [2] IEEE Std 1453-2015, "IEEE Recommended Practice for the Analysis of Fluctuating
   Installations on Power Systems", clause 6 and Annex B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._options import Options
from .._summary import Results, Summary
from ..exceptions import AnalysisError
from .flicker import PST_INTERVAL_S, FlickerOptions, pinst_from_envelope, plt_from_pst, pst

__all__ = [
    "FlickerResult",
    "GridStrength",
    "flicker_at_poi",
    "reactive_power_w",
    "relative_voltage",
    "voltage_steps",
]


@dataclass(frozen=True)
class GridStrength(Options):
    """The grid at the point of interconnection, and the site's power factor.

    Attributes
    ----------
    short_circuit_megavolt_amperes : float
        Three-phase short-circuit power at the point of interconnection [MVA].
    x_over_r : float, default 10
        Reactance-to-resistance ratio of the grid impedance [-].
    power_factor : float, default 0.98
        The site's power factor (lagging) where no reactive power series is given [-].
    """

    short_circuit_megavolt_amperes: float = 1000.0
    x_over_r: float = 10.0
    power_factor: float = 0.98

    def __post_init__(self):
        if not (math.isfinite(self.short_circuit_megavolt_amperes)
                and self.short_circuit_megavolt_amperes > 0):
            raise AnalysisError("short_circuit_megavolt_amperes must be a positive number, "
                                f"got {self.short_circuit_megavolt_amperes!r}")
        if not (math.isfinite(self.x_over_r) and self.x_over_r >= 0):
            raise AnalysisError(f"x_over_r must be a number >= 0, got {self.x_over_r!r}")
        if not (0 < self.power_factor <= 1):
            raise AnalysisError(f"power_factor must lie in (0, 1], got {self.power_factor!r}")

    @property
    def angle_rad(self) -> float:
        """Impedance angle ``psi = atan(X/R)`` [rad]."""
        return math.atan(self.x_over_r)


def reactive_power_w(power_w, power_factor: float) -> np.ndarray:
    """``Q = P tan(acos(pf))`` at a constant lagging power factor [var]."""
    p = np.asarray(power_w, dtype=float)
    return p * math.tan(math.acos(power_factor))


def relative_voltage(power_w, grid: GridStrength, reactive_var=None) -> np.ndarray:
    """``v(t) = 1 - (dP(t) cos(psi) + dQ(t) sin(psi)) / S_sc`` against the first sample
    [pu]; ``reactive_var`` defaults to :func:`reactive_power_w` at the grid's power
    factor."""
    p = np.asarray(power_w, dtype=float)
    if p.ndim != 1 or len(p) < 2 or not np.isfinite(p).all():
        raise AnalysisError("expected a finite 1-D power series of at least two samples")
    q = reactive_power_w(p, grid.power_factor) if reactive_var is None else \
        np.asarray(reactive_var, dtype=float)
    if q.shape != p.shape or not np.isfinite(q).all():
        raise AnalysisError("the reactive power series must be finite and as long as the "
                            "active power series")
    s = grid.short_circuit_megavolt_amperes * 1e6
    psi = grid.angle_rad
    return 1.0 - ((p - p[0]) * math.cos(psi) + (q - q[0]) * math.sin(psi)) / s


def voltage_steps(v, tick_s: float, *, min_step_pct: float = 0.01) -> pd.DataFrame:
    """The voltage steps of a relative voltage series: runs of consecutive changes of one
    sign, merged (a ramp over several ticks is one step), of at least ``min_step_pct``.

    Returns
    -------
    DataFrame
        ``start_s``, ``duration_s``, ``dv_pct`` (signed change over the run [%]),
        largest first.
    """
    x = np.asarray(v, dtype=float)
    d = np.diff(x)
    sign = np.sign(d)
    rows = []
    i = 0
    while i < len(d):
        if sign[i] == 0:
            i += 1
            continue
        j = i
        while j + 1 < len(d) and sign[j + 1] == sign[i]:
            j += 1
        dv = float(x[j + 1] - x[i]) * 100
        if abs(dv) >= min_step_pct:
            rows.append((i * tick_s, (j + 1 - i) * tick_s, dv))
        i = j + 1
    out = pd.DataFrame(rows, columns=["start_s", "duration_s", "dv_pct"])
    return out.reindex(out["dv_pct"].abs().sort_values(ascending=False).index) \
        .reset_index(drop=True)


class FlickerResult(Results):
    """Voltage change and flicker at the point of interconnection
    (:func:`flicker_at_poi`).

    Attributes
    ----------
    steps : DataFrame
        :func:`voltage_steps` of the relative voltage.
    pst : ndarray
        Pst of each whole 10-minute interval (empty when the record is shorter) [-].
    plt : float
        Plt of the last 12 Pst values (NaN, with a note, when fewer) [-].
    pinst_max : float
        Largest instantaneous flicker sensation [-].
    max_dv_pct : float
        Largest voltage step [%] (signed; negative a drop).
    grid : GridStrength
    options : FlickerOptions
    notes : list of str
    source : str
        What the series came from.
    """

    def __init__(self, steps, pst_values, plt_value, pinst_max, grid, options, notes,
                 source):
        self.steps = steps
        self.pst = pst_values
        self.plt = plt_value
        self.pinst_max = pinst_max
        self.grid = grid
        self.options = options
        self.notes = notes
        self.source = source
        self.max_dv_pct = float(steps["dv_pct"].iloc[0]) if len(steps) else 0.0

    def summary_frame(self) -> pd.DataFrame:
        """The figures: ``figure, value, unit, definition, source``."""
        g, o = self.grid, self.options
        src = (f"{self.source}; S_sc {g.short_circuit_megavolt_amperes:g} MVA, X/R "
               f"{g.x_over_r:g}; IEC 61000-4-15 flickermeter, {o.lamp} lamp, "
               f"{o.f0_hz:g} Hz (powerlab.interconnect.flicker)")
        rows = [("max_voltage_step_pct", self.max_dv_pct, "%",
                 "largest voltage step dV/V = -(R dP + X dQ)/V^2 (IEC/TR 61000-3-7 6.3)"),
                ("pinst_max", self.pinst_max, "-", "largest instantaneous flicker sensation"),
                ("pst_max", float(self.pst.max()) if len(self.pst) else math.nan, "-",
                 f"largest Pst over {len(self.pst)} 10-min interval(s)"),
                ("plt", self.plt, "-", "Plt: cubic mean of 12 consecutive Pst (2 h)")]
        return pd.DataFrame([(*r, src) for r in rows],
                            columns=["figure", "value", "unit", "definition", "source"])

    def summary(self) -> Summary:
        """Text summary (HTML in JupyterLab)."""
        s = Summary("Voltage change and flicker at the point of interconnection")
        s.add_df(self.summary_frame().set_index("figure")[["value", "unit", "definition"]])
        if len(self.steps):
            s.add_df(self.steps.head(10), title="Largest voltage steps")
        if self.notes:
            s.add_text(self.notes)
        return s

    def _repr_line(self) -> str:
        return (f"<FlickerResult: max step {self.max_dv_pct:.3g} %, "
                f"{len(self.pst)} Pst value(s)>")


def flicker_at_poi(power_w, tick_s: float, grid: GridStrength | None = None, *,
                   reactive_var=None, options: FlickerOptions | None = None,
                   source: str = "power series") -> FlickerResult:
    """Voltage steps, Pst and Plt at the point of interconnection of a site's power.

    Parameters
    ----------
    power_w : array_like
        Active power at the point of interconnection, one value per tick [W].
    tick_s : float
        Its spacing [s]; fluctuations above ``0.5 / tick_s`` are not seen (a note says
        so where that is below the flickermeter's 35/42-Hz band).
    grid : GridStrength, optional
        Short-circuit power, X/R, power factor (default :class:`GridStrength`).
    reactive_var : array_like, optional
        Reactive power [var]; default ``P tan(acos(pf))``.
    options : FlickerOptions, optional
        Lamp and system frequency.
    source : str
        What the series is (named in every figure's source).

    Returns
    -------
    FlickerResult
    """
    grid = grid or GridStrength()
    opts = options or FlickerOptions()
    if not (math.isfinite(tick_s) and tick_s > 0):
        raise AnalysisError(f"tick_s must be a positive number, got {tick_s!r}")
    v = relative_voltage(power_w, grid, reactive_var)
    steps = voltage_steps(v, tick_s)
    pinst, rate = pinst_from_envelope(v, 1.0 / tick_s, opts)
    notes = []
    nyq = 0.5 / tick_s
    if nyq < 35.0:
        notes.append(f"A {tick_s:g}-s series resolves fluctuations only up to {nyq:g} Hz; "
                     "the flickermeter weighs them up to 35 Hz: Pst may read low.")
    duration = len(v) * tick_s
    if duration >= PST_INTERVAL_S:
        pst_values = pst(pinst, rate)
    else:
        pst_values = np.zeros(0)
        notes.append(f"{duration:g} s of data: Pst needs 10 minutes; none given.")
    try:
        plt_value = plt_from_pst(pst_values)
    except AnalysisError as exc:
        plt_value = math.nan
        notes.append(f"Plt not given: {exc}.")
    return FlickerResult(steps, pst_values, plt_value, float(pinst.max()), grid, opts,
                         notes, source)
