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

__all__ = ["compare_mitigations"]


def _default_variants(m: Mitigations) -> dict[str, Mitigations]:
    out = {}
    if m.gpu_power_floor_pct_tdp:
        out["power floor"] = Mitigations(gpu_power_floor_pct_tdp=m.gpu_power_floor_pct_tdp)
    if m.gpu_ramp_limit_w_per_s:
        out["ramp limit"] = Mitigations(gpu_ramp_limit_w_per_s=m.gpu_ramp_limit_w_per_s)
    if m.stagger_starts_s:
        out["staggered starts"] = Mitigations(stagger_starts_s=m.stagger_starts_s)
    if m.battery is not None:
        out["battery"] = Mitigations(battery=m.battery)
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
    runs = {k: sc.replace(horizon_start_utc=h0, horizon_end_utc=h1) for k, sc in runs.items()}
    rows = {}
    for name, sc in runs.items():
        res = forecast(sc, draws=draws, seed=seed, tick_s=tick_s)
        x = res.power_w(boundary)
        ms = pd.DataFrame([swing_metrics(x[d], res.tick_s) for d in range(draws)])
        useful = res.throughput.groupby("draw")["useful_gpu_h"].sum().to_numpy()
        rows[name] = {
            "swing_1s_megawatts": ms["swing_1s_w"].median() / 1e6,
            "swing_60s_megawatts": ms["swing_60s_w"].median() / 1e6,
            "ramp_up_megawatts_per_s_1s": ms["ramp_up_w_per_s_1s"].median() / 1e6,
            "ramp_down_megawatts_per_s_1s": ms["ramp_down_w_per_s_1s"].median() / 1e6,
            "band_0p1_2hz_rms_megawatts": ms["band_0p1_2hz_rms_w"].median() / 1e6,
            "_energy": res.energy_j(boundary) + (res.battery_recharge_j
                                                 if boundary == "facility" else 0.0),
            "_useful": useful,
        }
    base = rows["baseline"]
    out = []
    for name, r in rows.items():
        row = {"variant": name}
        for k in ("swing_1s_megawatts", "swing_60s_megawatts", "ramp_up_megawatts_per_s_1s",
                  "ramp_down_megawatts_per_s_1s", "band_0p1_2hz_rms_megawatts"):
            row[k] = r[k]
            row[k.rsplit("_megawatts", 1)[0] + "_reduction_pct"] = (
                100.0 * (1 - r[k] / base[k]) if base[k] > 0 else 0.0)
        row["extra_energy_megawatt_hours"] = float(np.mean(r["_energy"] - base["_energy"])
                                                   / 3.6e9)
        row["throughput_loss_pct"] = float(np.mean(
            100.0 * (base["_useful"] - r["_useful"]) / base["_useful"]))
        out.append(row)
    return pd.DataFrame(out).set_index("variant")
