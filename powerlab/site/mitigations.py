"""Mitigation what-ifs: forecast the site with each mitigation and price what it removes.

Uses the engine (:mod:`powerlab.site.engine`) and the metrics
(:mod:`powerlab.site.swings`); neither of those imports this module.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .._options import renamed_keywords
from ..exceptions import PowerlabError
from .engine import forecast
from .scenario import Mitigations, Scenario
from .swings import swing_metrics

__all__ = ["ENGINE_MITIGATIONS", "compare_mitigations"]


#: The engine's mitigations (:class:`~powerlab.site.scenario.Mitigations` fields), by the
#: name of their what-if, in the order compared.
ENGINE_MITIGATIONS = (("power floor", "gpu_power_floor_pct_tdp"),
                      ("ramp limit", "gpu_ramp_limit_w_per_s"),
                      ("staggered starts", "stagger_starts_s"), ("battery", "battery"))


def _default_variants(m: Mitigations) -> dict[str, Mitigations]:
    """Each mitigation switched on in ``m`` alone, then (with several) all of them."""
    out = {name: Mitigations(**{f: getattr(m, f)}) for name, f in ENGINE_MITIGATIONS
           if getattr(m, f)}
    if len(out) > 1:
        out["all"] = m
    return out


@renamed_keywords(scope="boundary")
def compare_mitigations(scenario: Scenario, variants: Mapping[str, Mitigations] | None = None,
                        *, draws: int = 5, seed: int = 0, boundary: str = "facility",
                        tick_s: float | None = None) -> pd.DataFrame:
    """Mitigation what-ifs: how much swing and ramp each removes and what it costs.

    Every variant is forecast with the same seed and over the same horizon as the
    unmitigated baseline (the widest horizon of the variants).

    Parameters
    ----------
    scenario : Scenario
    variants : mapping of str to Mitigations, optional
        Default: each mitigation of ``scenario.mitigations`` alone, then all together.
    draws, seed : int
        Monte Carlo draws and seed of every forecast.
    boundary : {'facility', 'it'}
        Where the power is taken (``scope`` is its deprecated name).
    tick_s : float, optional
        Engine tick [s].

    Returns
    -------
    DataFrame
        Indexed by variant (``baseline`` first): median over draws of
        ``swing_1s_megawatts``, ``swing_60s_megawatts``, ``ramp_up_megawatts_per_s_1s``,
        ``ramp_down_megawatts_per_s_1s`` (largest rise and fall between adjacent 1-s
        means, :data:`powerlab.limits.ramps.RAMP_DEFINITIONS`, the figures of the report and
        summary of the same names), ``band_0p1_2hz_rms_megawatts``, their reductions
        in % of the baseline (``*_reduction_pct``), and the costs:
        ``extra_energy_megawatt_hours`` (mean over draws, energy at the boundary minus baseline;
        for a battery, including the grid energy that restores its initial state of
        charge, so its losses count) and ``throughput_loss_pct`` (useful GPU-hours lost
        against the baseline, mean over draws).
    """
    runs = _what_if_runs(scenario, variants)
    rows = {}
    for name, sc in runs.items():
        res = forecast(sc, draws=draws, seed=seed, tick_s=tick_s)
        rows[name] = _figures(res, boundary, draws)
    return _compared(rows)


#: The swing figures compared, each with its reduction in % of the baseline.
_FIGURES = ("swing_1s_megawatts", "swing_60s_megawatts", "ramp_up_megawatts_per_s_1s",
            "ramp_down_megawatts_per_s_1s", "band_0p1_2hz_rms_megawatts")


def _what_if_runs(scenario: Scenario, variants) -> dict[str, Scenario]:
    """The unmitigated baseline and each variant, all over one horizon (the widest)."""
    if variants is None:
        variants = _default_variants(scenario.mitigations)
        if not variants:
            raise PowerlabError("the scenario has no mitigations; pass variants=")
    runs = {"baseline": scenario.replace(mitigations=Mitigations())}
    for name, m in variants.items():
        if not isinstance(m, Mitigations):
            raise PowerlabError(f"variant {name!r} is not a Mitigations")
        runs[name] = scenario.replace(mitigations=m)
    # one horizon for all: without an explicit horizon, staggering lengthens it, and the
    # energy of the extra idle tail would otherwise be billed to the mitigation
    h0 = min(sc.start_utc for sc in runs.values())
    h1 = max(sc.end_utc for sc in runs.values())
    return {k: sc.replace(horizon_start_utc=h0, horizon_end_utc=h1) for k, sc in runs.items()}


def _figures(res, boundary: str, draws: int) -> dict:
    """A forecast's swing figures (median over draws), energy at the boundary (with the
    battery's recharge at the facility) and useful GPU-hours per draw."""
    x = res.power_w(boundary)
    ms = pd.DataFrame([swing_metrics(x[d], res.tick_s) for d in range(draws)])
    useful = res.throughput.groupby("draw")["useful_gpu_h"].sum().to_numpy()
    return {
        "swing_1s_megawatts": ms["swing_1s_w"].median() / 1e6,
        "swing_60s_megawatts": ms["swing_60s_w"].median() / 1e6,
        "ramp_up_megawatts_per_s_1s": ms["ramp_up_w_per_s_1s"].median() / 1e6,
        "ramp_down_megawatts_per_s_1s": ms["ramp_down_w_per_s_1s"].median() / 1e6,
        "band_0p1_2hz_rms_megawatts": ms["band_0p1_2hz_rms_w"].median() / 1e6,
        "_energy": res.energy_j(boundary) + (res.battery_recharge_j
                                             if boundary == "facility" else 0.0),
        "_useful": useful,
    }


def _compared(rows: dict) -> pd.DataFrame:
    """Each variant's figures, their reductions against the baseline and its costs."""
    base = rows["baseline"]
    out = []
    for name, r in rows.items():
        row = {"variant": name}
        for k in _FIGURES:
            row[k] = r[k]
            row[k.rsplit("_megawatts", 1)[0] + "_reduction_pct"] = (
                100.0 * (1 - r[k] / base[k]) if base[k] > 0 else 0.0)
        row["extra_energy_megawatt_hours"] = float(np.mean(r["_energy"] - base["_energy"])
                                                   / 3.6e9)
        row["throughput_loss_pct"] = float(np.mean(
            100.0 * (base["_useful"] - r["_useful"]) / base["_useful"]))
        out.append(row)
    return pd.DataFrame(out).set_index("variant")
