"""Resonance screening: a training load's periodic power and the grid's oscillation modes.

A synchronous training job draws power in a near-rectangular wave at its step period
(compute near TDP, communication near idle), whose harmonics sit at ``k / step_s`` Hz.  If
a harmonic of enough amplitude falls in a band where the grid has weakly damped modes
(inter-area electromechanical modes, turbine-generator torsional modes), the load can
excite them (Choukse et al. 2025).  :func:`screen_resonance`:

1. estimates the periodic components of the power (fundamental period and harmonics with
   their amplitudes in MW) from the Welch spectrum (:func:`periodic_components`,
   :func:`harmonic_amplitudes`);
2. compares every harmonic with the spec's grid modes (``grid_modes`` of a
   :class:`~powerlab.limits.requirements.RequirementSpec`): a hit is a harmonic in a mode's
   band with at least the mode's ``min_amplitude_megawatts``;
3. says what moves the hits out: the nearest shorter and longer step period with no hit
   (assuming the waveform keeps its shape), and the fewest equal groups ``N`` staggered by
   ``step_s / N`` that cancel every hit (``N`` groups offset by ``1/N`` of a period cancel
   every harmonic whose order is not a multiple of ``N``).

Harmonics above the Nyquist frequency of the data are not measured; where a mode band
reaches above it, their amplitudes are *assumed* from the ``1/k`` envelope of a rectangular
wave fitted to the measured ones (``k * a_k <= max_j j * a_j``) and flagged ``resolved =
False`` - an upper-bound style assumption (per-GPU desynchronisation lowers them further).

References
----------
.. [1] E. Choukse et al., "Power Stabilization for AI Training Datacenters",
   arXiv:2508.14318, 2025.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import signal
from scipy.ndimage import median_filter

from .._summary import Results, Summary
from ..exceptions import AnalysisError, PowerlabError
from ..limits.requirements import RequirementSpec, read_requirements
from .sources import MeasuredOptions, resolve

__all__ = [
    "ResonanceResult",
    "harmonic_amplitudes",
    "line_spectrum",
    "periodic_components",
    "screen_resonance",
]

#: A spectral line is a local maximum this many times above the running-median floor.
LINE_THRESHOLD = 10.0
_LOBE = 3          # bins each side summed into a line's power (Hann main lobe is +-2)


def line_spectrum(power_w, tick_s: float, *, segment_s: float | None = None,
                  max_frequency_hz: float | None = None) -> pd.DataFrame:
    """Welch power spectral density with its noise floor.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    segment_s : float, optional
        Welch segment (frequency resolution ``1 / segment_s``); default an eighth of the
        series, at most 256 s: fine enough for step periods up to ~50 s, coarse enough
        that a step period drifting by a few percent stays one line [s].
    max_frequency_hz : float, optional
        Keep frequencies up to here (e.g. the Nyquist frequency of the measured data) [Hz].

    Returns
    -------
    DataFrame
        ``frequency_hz``, ``psd_w2_per_hz`` and ``floor_w2_per_hz`` (running median over
        31 bins) [W^2/Hz].
    """
    x = np.asarray(power_w, dtype=float)
    if x.ndim != 1 or len(x) < 64 or not np.isfinite(x).all():
        raise AnalysisError("resonance screening needs a finite 1-D series of at least "
                            "64 samples")
    duration = len(x) * tick_s
    seg = segment_s if segment_s is not None else min(duration / 8.0, 256.0)
    nper = max(16, min(len(x), round(seg / tick_s)))
    f, p = signal.welch(x, fs=1.0 / tick_s, nperseg=nper, detrend="constant")
    if max_frequency_hz is not None:
        keep = f <= max_frequency_hz + 1e-12
        f, p = f[keep], p[keep]
    floor = median_filter(p, size=31, mode="nearest")
    return pd.DataFrame({"frequency_hz": f, "psd_w2_per_hz": p, "floor_w2_per_hz": floor})


def _lines(spec: pd.DataFrame, threshold: float) -> pd.DataFrame:
    f = spec["frequency_hz"].to_numpy()
    p = spec["psd_w2_per_hz"].to_numpy()
    fl = spec["floor_w2_per_hz"].to_numpy()
    df = f[1] - f[0]
    k = np.arange(2, len(p) - 1)
    peak = (p[k] >= p[k - 1]) & (p[k] > p[k + 1]) & (p[k] > threshold * np.maximum(fl[k],
                                                                                   1e-300))
    k = k[peak]
    rows = []
    for i in k:
        w = p[i - 1:i + 2]
        lo, hi = max(i - _LOBE, 0), min(i + _LOBE + 1, len(p))
        rows.append((float((f[i - 1:i + 2] * w).sum() / w.sum()),
                     float(p[lo:hi].sum() * df)))
    return pd.DataFrame(rows, columns=["frequency_hz", "power_w2"]).sort_values(
        "power_w2", ascending=False, ignore_index=True)


def _match(lines: pd.DataFrame, f0: float, k_max: int, df: float, m: int = 1) -> dict:
    """Line index matched to each harmonic k of f0 (within a tolerance growing with k)."""
    fl = lines["frequency_hz"].to_numpy()
    out = {}
    for k in range(1, k_max + 1):
        tol = df * (1.0 + 0.5 * k / m)
        d = np.abs(fl - k * f0)
        j = int(np.argmin(d)) if len(d) else -1
        if j >= 0 and d[j] <= tol:
            out[k] = j
    return out


def periodic_components(power_w, tick_s: float, *, max_frequency_hz: float | None = None,
                        min_frequency_hz: float | None = None, max_components: int = 3,
                        min_power_share: float = 0.01, segment_s: float | None = None
                        ) -> pd.DataFrame:
    """Fundamental frequencies of the periodic components of a power series.

    The spectral lines (local maxima :data:`LINE_THRESHOLD` times above the running-median
    floor) are grouped into harmonic series: starting from the strongest unassigned
    line at ``f_s``, each candidate fundamental ``f_s / m`` (``m = 1..10``) that has a
    line of its own and lines at most (60 %) of its multiples up to ``f_s`` is scored by
    the power of the unassigned lines at its multiples; the best (ties: the higher
    frequency) is refined by least squares over its matched lines
    (``f0 = sum w k f_k / sum w k^2``, weights the line powers).  Repeats while the
    strongest unassigned line holds at least ``min_power_share`` of all line power.

    Parameters
    ----------
    power_w : array_like
        Power, one value per tick [W].
    tick_s : float
        Sample spacing [s].
    max_frequency_hz : float, optional
        Highest frequency resolved by the data (default the Nyquist frequency) [Hz].
    min_frequency_hz : float, optional
        Lowest fundamental considered (default five frequency bins) [Hz].
    max_components : int, default 3
    min_power_share : float, default 0.01
    segment_s : float, optional
        Welch segment [s] (see :func:`line_spectrum`).

    Returns
    -------
    DataFrame
        ``component, fundamental_hz, period_s, lines, power_share`` (share of all line
        power explained), strongest first; empty when the series has no periodic part.
    """
    spec = line_spectrum(power_w, tick_s, segment_s=segment_s,
                         max_frequency_hz=max_frequency_hz)
    f = spec["frequency_hz"].to_numpy()
    df = f[1] - f[0]
    f_min = min_frequency_hz if min_frequency_hz is not None else 5 * df
    lines = _lines(spec, LINE_THRESHOLD)
    lines = lines[lines["frequency_hz"] >= f_min].reset_index(drop=True)
    cols = ["component", "fundamental_hz", "period_s", "lines", "power_share"]
    if lines.empty:
        return pd.DataFrame(columns=cols)
    total = float(lines["power_w2"].sum())
    power = lines["power_w2"].to_numpy()
    free = np.ones(len(lines), bool)
    rows = []
    while free.any() and len(rows) < max_components:
        s = int(np.flatnonzero(free)[0])       # lines are sorted by power
        if power[s] < min_power_share * total:
            break
        best = _best_fundamental(lines, free, s, f_min, f[-1], df)
        if best is None:
            free[s] = False
            continue
        f0, idx = _refined(lines, best, free, s, f[-1], df)
        free[idx] = False
        rows.append((len(rows), f0, 1.0 / f0, len(idx), float(power[idx].sum() / total)))
    return pd.DataFrame(rows, columns=cols)


def _best_fundamental(lines: pd.DataFrame, free: np.ndarray, s: int, f_min: float,
                      f_max: float, df: float) -> tuple[float, dict] | None:
    """The candidate fundamental ``f_s / m`` (``m = 1..10``) of line ``s`` whose multiples
    hold the most unassigned line power, and its matched lines; None when none has a
    line of its own and lines at most of its multiples up to ``f_s``."""
    power = lines["power_w2"].to_numpy()
    fs = float(lines["frequency_hz"].iloc[s])
    best = None
    for m in range(1, 11):
        fc = fs / m
        if fc < f_min:
            break
        got = _match(lines, fc, int(f_max / fc), df, m)
        # a fundamental has a line of its own, and (m > 1) lines at most of the
        # multiples up to the strongest line: a stray slow line is no fundamental
        if 1 not in got or (m > 1 and sum(k <= m for k in got) < max(2, math.ceil(0.6 * m))):
            continue
        e = sum(power[j] for j in got.values() if free[j])
        if best is None or e > best[0] * (1 + 1e-6):
            best = (e, fc, got)
    return None if best is None else (best[1], best[2])


def _refined(lines: pd.DataFrame, best: tuple[float, dict], free: np.ndarray, s: int,
             f_max: float, df: float) -> tuple[float, list[int]]:
    """The fundamental refined by least squares over its matched lines
    (``f0 = sum w k f_k / sum w k^2``, weights the line powers) and the unassigned lines
    at its multiples (at least line ``s``)."""
    _, got = best
    power = lines["power_w2"].to_numpy()
    ks = np.array(list(got))
    fk = lines["frequency_hz"].to_numpy()[list(got.values())]
    w = power[list(got.values())]
    f0 = float((w * ks * fk).sum() / (w * ks * ks).sum())
    got = _match(lines, f0, int(f_max / f0), df)
    return f0, [j for j in got.values() if free[j]] or [s]


def harmonic_amplitudes(power_w, tick_s: float, fundamental_hz: float, *,
                        max_frequency_hz: float | None = None,
                        segment_s: float | None = None) -> pd.DataFrame:
    """Amplitude of each harmonic of ``fundamental_hz`` up to ``max_frequency_hz``.

    The amplitude (peak of the sinusoid) is ``sqrt(2 * P)``, ``P`` the Welch PSD summed
    over the line's lobe (+-3 bins) times the bin width.

    Returns
    -------
    DataFrame
        ``harmonic, frequency_hz, amplitude_w, detected`` (a line stands above the floor).
    """
    spec = line_spectrum(power_w, tick_s, segment_s=segment_s,
                         max_frequency_hz=max_frequency_hz)
    f = spec["frequency_hz"].to_numpy()
    p = spec["psd_w2_per_hz"].to_numpy()
    fl = spec["floor_w2_per_hz"].to_numpy()
    df = f[1] - f[0]
    rows = []
    for k in range(1, int(f[-1] / fundamental_hz + 1e-9) + 1):
        i = int(np.rint(k * fundamental_hz / df))
        lo, hi = max(i - _LOBE, 0), min(i + _LOBE + 1, len(p))
        if lo >= hi:
            break
        amp = math.sqrt(2.0 * p[lo:hi].sum() * df)
        det = bool(p[lo:hi].max() > LINE_THRESHOLD * max(fl[min(i, len(p) - 1)], 1e-300))
        rows.append((k, k * fundamental_hz, amp, det))
    return pd.DataFrame(rows, columns=["harmonic", "frequency_hz", "amplitude_w", "detected"])


# --------------------------------------------------------------------------- screening


def _hits(amp_w: np.ndarray, f0: float, modes) -> list[tuple[int, object]]:
    """(harmonic k, mode) pairs where a harmonic of ``f0`` with amplitudes ``amp_w``
    (index k-1) falls in a mode's band with at least its amplitude."""
    out = []
    k = np.arange(1, len(amp_w) + 1)
    for mode in modes:
        lo, hi = mode.band_hz
        sel = (k * f0 >= lo) & (k * f0 <= hi) & (amp_w >= mode.min_amplitude_megawatts * 1e6)
        out += [(int(kk), mode) for kk in k[sel]]
    return out


def _forbidden_periods(amp_w: np.ndarray, modes) -> list[tuple[float, float]]:
    """Step periods [s] at which some harmonic would hit a mode: harmonic k lies in
    [lo, hi] when the period lies in [k/hi, k/lo]."""
    iv = []
    for mode in modes:
        lo, hi = mode.band_hz
        ks = np.flatnonzero(amp_w >= mode.min_amplitude_megawatts * 1e6) + 1
        iv += [(k / hi, k / lo) for k in ks]
    return sorted(iv)


def _nearest_clear(period: float, iv: list[tuple[float, float]], span: float = 4.0
                   ) -> tuple[float, float]:
    """Nearest periods below and above ``period`` (within a factor ``span``) outside every
    interval; NaN where none."""
    merged: list[list[float]] = []
    for a, b in iv:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    lo_lim, hi_lim = period / span, period * span
    inside = [m for m in merged if m[0] <= period <= m[1]]
    if not inside:
        return period, period
    a, b = inside[0]
    shorter = a * (1 - 1e-6) if a * (1 - 1e-6) >= lo_lim else math.nan
    longer = b * (1 + 1e-6) if b * (1 + 1e-6) <= hi_lim else math.nan
    return shorter, longer


class ResonanceResult(Results):
    """Results of :func:`screen_resonance`.

    Attributes
    ----------
    components : DataFrame
        ``component, fundamental_hz, period_s, lines, power_share``.
    harmonics : DataFrame
        ``component, harmonic, frequency_hz, amplitude_megawatts, detected, resolved,
        modes`` (names of the modes the harmonic hits, ``;``-joined).
    hits : DataFrame
        One row per (harmonic, mode) hit.
    options : DataFrame
        Per component: ``hits`` (of resolved harmonics), ``unresolved_hits`` (harmonics
        above ``resolvable_hz`` that would hit with 1/k amplitudes),
        ``shorter_period_s``/``longer_period_s`` (nearest step periods with no resolved
        hit, NaN if none within a factor 4), ``stagger_groups`` (fewest equal groups
        cancelling every resolved hit, NaN if none up to 16), ``stagger_offset_s``.
    resolvable_hz : float
        Highest frequency the data resolve [Hz].
    description : str
    """

    def __init__(self, components, harmonics, hits, options, modes, resolvable_hz,
                 description):
        self.components = components
        self.harmonics = harmonics
        self.hits = hits
        self.options = options
        self.modes = modes
        self.resolvable_hz = resolvable_hz
        self.description = description

    def summary_frame(self) -> pd.DataFrame:
        """The per-component options table joined with the components."""
        return self.components.merge(self.options, on="component", how="left")

    def summary(self) -> ResonanceSummary:
        """Text summary (HTML in JupyterLab)."""
        return ResonanceSummary(self)

    def _repr_line(self) -> str:
        return (f"<ResonanceResult: {len(self.components)} periodic component(s), "
                f"{len(self.hits)} hit(s) in {len(self.modes)} grid mode band(s)>")


class ResonanceSummary(Summary):
    """What :meth:`ResonanceResult.summary` shows."""

    def __init__(self, res: ResonanceResult):
        super().__init__("Resonance screening", width=140)
        self.res = res
        h = res.harmonics
        shown = h[(h["modes"] != "") | (h["harmonic"] <= 5)]
        self.table = shown.set_index(["component", "harmonic"])
        self.options = res.summary_frame().set_index("component")
        self.lines = []
        if res.components.empty:
            self.lines.append("No periodic component found: nothing to screen.")
        for _, o in res.options.iterrows():
            c = int(o["component"])
            p = float(res.components.loc[res.components["component"] == c,
                                         "period_s"].iloc[0])
            if o["hits"] == 0:
                self.lines.append(f"Component {c} (period {p:.4g} s): no resolved harmonic "
                                  "in a grid mode band.")
                continue
            txt = [f"Component {c} (period {p:.4g} s): {int(o['hits'])} harmonic-mode hit(s)."]
            opts = []
            if math.isfinite(o["shorter_period_s"]):
                opts.append(f"a step period of {o['shorter_period_s']:.4g} s or less")
            if math.isfinite(o["longer_period_s"]):
                opts.append(f"{o['longer_period_s']:.4g} s or more")
            txt.append("Moves out with " + " or ".join(opts) + "." if opts else
                       "No step period within a factor 4 clears every band.")
            if math.isfinite(o["stagger_groups"]):
                txt.append(f"Or: {int(o['stagger_groups'])} equal groups staggered by "
                           f"{o['stagger_offset_s']:.4g} s cancel every hit.")
            else:
                txt.append("No stagger of up to 16 equal groups cancels every hit.")
            self.lines.append(" ".join(txt))
        n_un = int(res.options["unresolved_hits"].sum()) if len(res.options) else 0
        if n_un:
            self.lines.append(
                f"{n_un} harmonic(s) above {res.resolvable_hz:g} Hz, which the data do not "
                "resolve, would also hit if they fell off only as 1/k (resolved = False); "
                "sample faster (or lower the engine tick) to screen them.")
        self.add_text(res.description)
        self.add_df(self.options)
        self.add_df(self.table)
        if self.lines:
            self.add_text(self.lines)


def screen_resonance(source, spec, *, draw: int = 0, seed: int = 0,
                     tick_s: float | None = None, pue: float | None = None,
                     base_load_w: float = 0.0, max_components: int = 3,
                     max_stagger_groups: int = 16) -> ResonanceResult:
    """Screen a load's harmonics against the grid mode bands of a requirement spec.

    The steps: the spec's grid modes (:func:`_grid_spec`), the trace
    (:func:`~powerlab.interconnect.sources.resolve`), its periodic components
    (:func:`periodic_components`), then per component its harmonics, their hits and
    what moves them out (:func:`_screen_component`).

    Parameters
    ----------
    source : Scenario, ForecastResult, PowerTrace, DataFrame or path-like
        A scenario or a forecast already run (one draw is screened: a spectrum needs one
        trajectory), a trace, canonical telemetry, a store, a canonical Parquet file or a
        scenario YAML.
    spec : RequirementSpec or path-like
        Its ``grid_modes`` and ``boundary`` are used.
    draw, seed, tick_s
        Which forecast draw, its seed, the engine tick (or telemetry grid) [s].
    pue, base_load_w
        Telemetry only: facility = IT x ``pue`` + ``base_load_w``.
    max_components : int, default 3
        Periodic components to look for (one per job with its own step period).
    max_stagger_groups : int, default 16

    Returns
    -------
    ResonanceResult
    """
    spec = _grid_spec(spec)
    trace = resolve(source).trace(draw=draw, seed=seed, tick_s=tick_s,
                                  measured=MeasuredOptions(pue=pue, base_load_w=base_load_w))
    x = trace.power_w(spec.boundary)
    f_res = 0.5 / max(trace.tick_s, trace.native_interval_s)
    comps = periodic_components(x, trace.tick_s, max_frequency_hz=f_res,
                                max_components=max_components)
    h_rows, hit_rows, opt_rows = [], [], []
    for _, c in comps.iterrows():
        h, hits, opt = _screen_component(x, trace.tick_s, c, spec, f_res,
                                         max_stagger_groups)
        h_rows += h
        hit_rows += hits
        opt_rows.append(opt)
    harmonics = pd.DataFrame(h_rows, columns=["component", "harmonic", "frequency_hz",
                                              "amplitude_megawatts", "detected", "resolved",
                                              "modes"])
    harmonics["modes"] = harmonics["modes"].astype("string")
    hits_df = pd.DataFrame(hit_rows, columns=["mode", "band_lo_hz", "band_hi_hz", "component",
                                              "harmonic", "frequency_hz",
                                              "amplitude_megawatts",
                                              "min_amplitude_megawatts", "resolved"])
    options = pd.DataFrame(opt_rows, columns=["component", "hits", "unresolved_hits",
                                              "shorter_period_s",
                                              "longer_period_s", "stagger_groups",
                                              "stagger_offset_s"])
    desc = (f"{trace.description or 'power trace'}; boundary {spec.boundary}; spectrum resolved "
            f"to {f_res:g} Hz; grid modes of {spec.name!r}")
    return ResonanceResult(comps, harmonics, hits_df, options, spec.grid_modes, f_res, desc)


def _grid_spec(spec) -> RequirementSpec:
    """The spec (read when a path), refused when it names no grid modes."""
    if not isinstance(spec, RequirementSpec):
        spec = read_requirements(spec)
    if not spec.grid_modes:
        raise PowerlabError(f"requirement spec {spec.name!r} has no grid_modes to screen")
    return spec


def _harmonic_series(x: np.ndarray, tick_s: float, f0: float, f_res: float, top_hz: float):
    """The harmonics of ``f0``: measured up to ``f_res``, and above it (up to 4 x the
    highest mode band, for periods down to P/4) assumed on the ``1/k`` envelope of the
    detected ones.  Returns ``(amp, amp_all, resolved, det_all, k_all)`` [W]."""
    h = harmonic_amplitudes(x, tick_s, f0, max_frequency_hz=f_res)
    amp = h["amplitude_w"].to_numpy()
    det = h["detected"].to_numpy()
    env = float((h["harmonic"] * h["amplitude_w"])[det].max()) if det.any() else 0.0
    n_all = max(len(amp), math.ceil(top_hz * 4.0 / f0))   # periods down to P/4
    k_all = np.arange(1, n_all + 1)
    amp_all = np.concatenate([amp, env / k_all[len(amp):]])
    det_all = np.concatenate([det, np.zeros(n_all - len(amp), bool)])
    return amp, amp_all, k_all <= len(amp), det_all, k_all


def _screen_component(x: np.ndarray, tick_s: float, c, spec: RequirementSpec, f_res: float,
                      max_stagger_groups: int) -> tuple[list, list, tuple]:
    """One periodic component: its harmonic rows, its (harmonic, mode) hit rows, and its
    options row (nearest clear step periods and the stagger that cancels every hit,
    from the resolved harmonics; the assumed ones are reported, not solved)."""
    modes = spec.grid_modes
    top_hz = max(m.band_hz[1] for m in modes)
    ci, f0 = int(c["component"]), float(c["fundamental_hz"])
    amp, amp_all, resolved, det_all, k_all = _harmonic_series(x, tick_s, f0, f_res, top_hz)
    hits_all = _hits(amp_all[: int(top_hz / f0 + 1e-9)], f0, modes)
    by_k: dict[int, list[str]] = {}
    hit_rows = []
    for k, mode in hits_all:
        by_k.setdefault(k, []).append(mode.name)
        hit_rows.append((mode.name, mode.band_hz[0], mode.band_hz[1], ci, k, k * f0,
                         amp_all[k - 1] / 1e6, mode.min_amplitude_megawatts,
                         bool(resolved[k - 1])))
    hits = [k for k, _ in hits_all if resolved[k - 1]]
    h_rows = [(ci, int(k), k * f0, amp_all[k - 1] / 1e6, bool(det_all[k - 1]),
               bool(resolved[k - 1]), ";".join(by_k.get(int(k), [])))
              for k in k_all[k_all * f0 <= max(top_hz, f_res)]]
    period = 1.0 / f0
    shorter, longer = _nearest_clear(period, _forbidden_periods(amp, modes))
    groups, offset = _stagger(hits, period, max_stagger_groups)
    return h_rows, hit_rows, (ci, len(hits), len(hits_all) - len(hits),
                              shorter if hits else math.nan, longer if hits else math.nan,
                              groups, offset)


def _stagger(hits: list[int], period: float, max_groups: int) -> tuple[float, float]:
    """Fewest equal groups ``N`` offset by ``period / N`` that cancel every hit harmonic
    (none of whose orders is a multiple of ``N``), and the offset; NaN when none."""
    if hits:
        for n in range(2, max_groups + 1):
            if all(k % n for k in hits):
                return float(n), period / n
    return math.nan, math.nan
